//! One logical connection to one Redis server (or to whatever primary Sentinel names), with
//! the error classification every algorithm needs to tell `fail` from `info`.
//!
//! Why not `ConnectionManager`: it retries behind our back, and a lock client must know
//! whether its command may have run. Here a failed or timed-out request drops the connection
//! (so the next operation reconnects, and under Sentinel asks the sentinels again, the way
//! real apps rediscover a moved primary) and the caller learns which kind of failure it was.
//!
//! On a Redis Cluster the connection is redis-rs's cluster connection: it routes each
//! command by its key's slot and refreshes the slot map after a MOVED or a failover, as an
//! application's cluster client does. Its own retries are off: they also resend a command
//! whose reply was lost, and a `SET NX` sent twice answers "not set" for the lock its first
//! try took. This module resends only what the cluster proved it did not run
//! ([`cluster_request`]).

use std::collections::HashMap;
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::{ClusterClient, ClusterClientBuilder, NodeAddress};
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    AsyncConnectionConfig, Client, Cmd, ConnectionAddr, ErrorKind, FromRedisValue,
    IntoConnectionInfo, RedisConnectionInfo, RedisError, ScriptInvocation,
};

use super::{Acquired, LockError, Outcome};
use crate::topology::Node;

/// Why a request did not return a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OpError {
    /// The command certainly did not run: no connection could be made, or the server
    /// answered with an error reply (READONLY, LOADING, …) instead of executing it.
    Definite(String),
    /// The command may or may not have run: timeout or connection lost after sending.
    Unknown(String),
}

impl OpError {
    pub(crate) fn message(&self) -> &str {
        match self {
            OpError::Definite(m) | OpError::Unknown(m) => m,
        }
    }

    /// The acquire's outcome when this request was its first write: a definite error means
    /// nothing was taken (`fail`), an unknown one that the lock may be ours (`info`).
    pub(crate) fn before_write(self) -> Acquired {
        match self {
            OpError::Definite(m) => Acquired::Fail(m),
            OpError::Unknown(m) => Acquired::Info(m),
        }
    }

    /// The outcome of a release or renew that did not complete. Even a definite error is
    /// `info`: the request did not run, so the lock is still held (or lost, nobody looked),
    /// and docs/src/reference/history.md has no "still ours" outcome; `fail` would claim the lock was lost.
    pub(crate) fn outcome(self) -> Outcome {
        Outcome::Info(self.message().to_string())
    }
}

/// Where the connection goes.
enum Target {
    /// A fixed server.
    Direct(Client),
    /// The primary that the sentinels name at connect time.
    Sentinel(Box<SentinelClient>),
    /// A Redis Cluster, reached through any of its nodes; and one node for Pub/Sub (a
    /// cluster broadcasts PUBLISH to every node, so any node hears every unlock message).
    Cluster(Box<ClusterClient>, Client),
}

/// An open connection: to one server, or to a whole Redis Cluster.
#[derive(Clone)]
enum Link {
    Server(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            Link::Server(c) => c.req_packed_command(cmd),
            Link::Cluster(c) => Box::pin(cluster_request(c.clone(), cmd)),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Link::Server(c) => c.req_packed_commands(pipeline, offset, count),
            Link::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Link::Server(c) => c.get_db(),
            Link::Cluster(c) => c.get_db(),
        }
    }
}

/// How many times a cluster request is sent at most, and the pause before the second try
/// (doubled before each next one): enough to follow a MOVED once the slot map is refreshed
/// and to wait out a promotion's CLUSTERDOWN for a moment. The request's time limit bounds
/// it anyway.
const CLUSTER_TRIES: u32 = 5;
const CLUSTER_FIRST_PAUSE: Duration = Duration::from_millis(10);

/// Sends one command through the cluster connection, again after an error that proves it did
/// not run ([`did_not_run`]), and never after any other: the caller must learn that a command
/// whose reply was lost may have run.
async fn cluster_request(
    mut conn: ClusterConnection,
    cmd: &Cmd,
) -> redis::RedisResult<redis::Value> {
    let mut pause = CLUSTER_FIRST_PAUSE;
    let mut tries = 1;
    loop {
        match conn.req_packed_command(cmd).await {
            Err(e) if tries < CLUSTER_TRIES && did_not_run(&e) => {
                tries += 1;
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            result => return result,
        }
    }
}

/// Whether a cluster request's error proves that its command did not run: the node sent it
/// elsewhere (MOVED) or refused it for now (TRYAGAIN, CLUSTERDOWN, MASTERDOWN, LOADING,
/// READONLY from a demoted master), no connection to the slot's node was there to send it
/// on, or the connection was refused. A reply that was lost or late (any other I/O error,
/// a timeout) proves nothing. ASK is not followed: lockaudit's clusters never move slots.
fn did_not_run(e: &RedisError) -> bool {
    use redis::ServerErrorKind as S;
    match e.kind() {
        ErrorKind::Server(
            S::Moved | S::TryAgain | S::ClusterDown | S::MasterDown | S::BusyLoading | S::ReadOnly,
        ) => true,
        ErrorKind::ClusterConnectionNotFound => true,
        ErrorKind::Io => e.is_connection_refusal(),
        _ => false,
    }
}

/// A lazily (re)connected multiplexed connection with a per-request time limit.
pub(crate) struct Conn {
    target: Target,
    conn: Option<Link>,
    timeout: Duration,
    /// For error messages and `node` fields: the server's name or `sentinel:<master>`.
    pub(crate) name: String,
}

/// The connection info for one server, with the run's password.
fn node_info(node: &Node, password: Option<&str>) -> Result<redis::ConnectionInfo, LockError> {
    let mut redis_info = RedisConnectionInfo::default();
    if let Some(pw) = password {
        redis_info = redis_info.set_password(pw);
    }
    Ok(ConnectionAddr::Tcp(node.host.clone(), node.port)
        .into_connection_info()
        .map_err(|e| LockError::Endpoints(format!("{}: {e}", node.name)))?
        .set_redis_settings(redis_info))
}

impl Conn {
    /// A connection to one fixed server.
    pub(crate) fn direct(
        node: &Node,
        password: Option<&str>,
        timeout: Duration,
    ) -> Result<Self, LockError> {
        let client = Client::open(node_info(node, password)?)
            .map_err(|e| LockError::Endpoints(format!("{}: {e}", node.name)))?;
        Ok(Conn {
            target: Target::Direct(client),
            conn: None,
            timeout,
            name: node.name.clone(),
        })
    }

    /// A connection to the primary the sentinels name. The same password is given to the
    /// data nodes and, when `sentinel_password` is true, to the sentinels.
    pub(crate) fn sentinel(
        sentinels: &[Node],
        master_name: &str,
        password: Option<&str>,
        sentinel_password: bool,
        timeout: Duration,
    ) -> Result<Self, LockError> {
        let addrs = sentinels
            .iter()
            .map(|n| ConnectionAddr::Tcp(n.host.clone(), n.port));
        let mut builder =
            SentinelClientBuilder::new(addrs, master_name, SentinelServerType::Master)
                .map_err(|e| LockError::Endpoints(format!("sentinel: {e}")))?;
        if let Some(pw) = password {
            builder = builder.set_client_to_redis_password(pw);
            if sentinel_password {
                builder = builder.set_client_to_sentinel_password(pw);
            }
        }
        let client = builder
            .build()
            .map_err(|e| LockError::Endpoints(format!("sentinel: {e}")))?;
        Ok(Conn {
            target: Target::Sentinel(Box::new(client)),
            conn: None,
            timeout,
            name: format!("sentinel:{master_name}"),
        })
    }

    /// A connection to a Redis Cluster through its `nodes` (any of them; the client learns
    /// the slot map from the first that answers).
    ///
    /// When `nodes` are lockaudit's proxies (a run with partitions), the cluster's slot map
    /// still names the nodes' real addresses: each is mapped to the proxy in front of the
    /// node of that name (the names from any node's CLUSTER NODES), so that every request
    /// goes through this worker's proxies and a cut link cuts it.
    pub(crate) async fn cluster(
        nodes: &[Node],
        password: Option<&str>,
        timeout: Duration,
    ) -> Result<Self, LockError> {
        let infos = nodes
            .iter()
            .map(|n| node_info(n, password))
            .collect::<Result<Vec<_>, _>>()?;
        let mut real = None;
        for n in nodes {
            real = crate::topology::redis_cluster::named_ports(&n.host, n.port, password, timeout)
                .await;
            if real.is_some() {
                break;
            }
        }
        let map: HashMap<NodeAddress, NodeAddress> = real
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(name, port)| {
                let front = nodes.iter().find(|n| n.name == name)?;
                (front.port != port).then(|| {
                    (
                        NodeAddress::new("127.0.0.1", port),
                        NodeAddress::new(front.host.as_str(), front.port),
                    )
                })
            })
            .collect();
        // No retries by the client: `cluster_request` resends only what did not run.
        let client = ClusterClientBuilder::new(infos)
            .connection_timeout(timeout)
            .response_timeout(timeout)
            .retries(0)
            .node_address_map(map)
            .build()
            .map_err(|e| LockError::Endpoints(format!("cluster: {e}")))?;
        let first = nodes
            .first()
            .ok_or_else(|| LockError::Endpoints("cluster without nodes".into()))?;
        let subscriber = Client::open(node_info(first, password)?)
            .map_err(|e| LockError::Endpoints(format!("{}: {e}", first.name)))?;
        Ok(Conn {
            target: Target::Cluster(Box::new(client), subscriber),
            conn: None,
            timeout,
            name: "cluster".to_string(),
        })
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// A client for the current target (for Pub/Sub connections). Under Sentinel this asks
    /// the sentinels.
    pub(crate) async fn client(&mut self) -> Result<Client, OpError> {
        match &mut self.target {
            Target::Direct(c) => Ok(c.clone()),
            Target::Cluster(_, subscriber) => Ok(subscriber.clone()),
            Target::Sentinel(s) => {
                match tokio::time::timeout(self.timeout, s.async_get_client()).await {
                    Ok(Ok(c)) => Ok(c),
                    Ok(Err(e)) => Err(OpError::Definite(format!("{}: {e}", self.name))),
                    Err(_) => Err(OpError::Definite(format!(
                        "{}: no primary from sentinels within {:?}",
                        self.name, self.timeout
                    ))),
                }
            }
        }
    }

    /// Connects if not connected. Nothing was sent yet, so any failure is definite.
    async fn ensure(&mut self) -> Result<&mut Link, OpError> {
        if self.conn.is_none() {
            let config = AsyncConnectionConfig::new()
                .set_connection_timeout(Some(self.timeout))
                .set_response_timeout(Some(self.timeout));
            let timeout = self.timeout;
            let connecting = async {
                match &mut self.target {
                    Target::Direct(c) => c
                        .get_multiplexed_async_connection_with_config(&config)
                        .await
                        .map(Link::Server),
                    Target::Sentinel(s) => s
                        .get_async_connection_with_config(&config)
                        .await
                        .map(Link::Server),
                    Target::Cluster(c, _) => c.get_async_connection().await.map(Link::Cluster),
                }
            };
            let conn = match tokio::time::timeout(timeout, connecting).await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => {
                    return Err(OpError::Definite(format!("{}: connect: {e}", self.name)))
                }
                Err(_) => {
                    return Err(OpError::Definite(format!(
                        "{}: connect timed out after {:?}",
                        self.name, timeout
                    )))
                }
            };
            self.conn = Some(conn);
        }
        match self.conn.as_mut() {
            Some(c) => Ok(c),
            None => Err(OpError::Definite(format!("{}: not connected", self.name))),
        }
    }

    /// Connects now, to surface configuration errors (a wrong password) at `connect` time
    /// rather than as a failure on every acquire. A server that is down is not an error here:
    /// a worker restarted during a fault must still start.
    pub(crate) async fn probe(&mut self) -> Result<(), LockError> {
        let ping = redis::cmd("PING");
        match self.query::<String>(&ping).await {
            Err(OpError::Definite(m)) if is_auth_message(&m) => Err(LockError::Auth(m)),
            _ => Ok(()),
        }
    }

    /// Classifies a failed request and forgets the connection, so that the next request
    /// starts afresh (and rediscovers the primary under Sentinel).
    fn failed(&mut self, e: RedisError) -> OpError {
        self.conn = None;
        match e.kind() {
            ErrorKind::Server(_) | ErrorKind::Extension | ErrorKind::AuthenticationFailed => {
                OpError::Definite(format!("{}: {e}", self.name))
            }
            _ => OpError::Unknown(format!("{}: {e}", self.name)),
        }
    }

    fn timed_out(&mut self) -> OpError {
        self.conn = None;
        OpError::Unknown(format!("{}: timed out after {:?}", self.name, self.timeout))
    }

    /// Runs one command within the time limit.
    /// The seed recipes' release: an unconditional `DEL`, reported `ok` whatever it
    /// deleted, since the recipe cannot tell its own lock from anyone else's.
    pub(crate) async fn plain_del(&mut self, key: &str) -> Outcome {
        let mut del = redis::cmd("DEL");
        del.arg(key);
        match self.query::<i64>(&del).await {
            Ok(_) => Outcome::Ok { lease_ms: None },
            Err(e) => e.outcome(),
        }
    }

    pub(crate) async fn query<T: FromRedisValue>(&mut self, cmd: &Cmd) -> Result<T, OpError> {
        let timeout = self.timeout;
        let conn = self.ensure().await?;
        match tokio::time::timeout(timeout, cmd.query_async::<T>(conn)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.failed(e)),
            Err(_) => Err(self.timed_out()),
        }
    }

    /// Runs a script (EVALSHA, falling back to SCRIPT LOAD + EVALSHA after a restart emptied
    /// the script cache) within the time limit.
    pub(crate) async fn eval<T: FromRedisValue>(
        &mut self,
        invocation: &ScriptInvocation<'_>,
    ) -> Result<T, OpError> {
        let timeout = self.timeout;
        let conn = self.ensure().await?;
        match tokio::time::timeout(timeout, invocation.invoke_async::<T>(conn)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.failed(e)),
            Err(_) => Err(self.timed_out()),
        }
    }

    /// Runs a script as `eval` does, but an error reply is `Definite` only when
    /// `changed_nothing` says so; any other is `Unknown`. For scripts that may fail half way:
    /// Redis keeps the writes a script made before its error (no rollback).
    pub(crate) async fn eval_classified<T: FromRedisValue>(
        &mut self,
        invocation: &ScriptInvocation<'_>,
        changed_nothing: fn(&RedisError) -> bool,
    ) -> Result<T, OpError> {
        let timeout = self.timeout;
        let conn = self.ensure().await?;
        match tokio::time::timeout(timeout, invocation.invoke_async::<T>(conn)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                let reply = matches!(e.kind(), ErrorKind::Server(_) | ErrorKind::Extension);
                let definite = !reply || changed_nothing(&e);
                match self.failed(e) {
                    OpError::Definite(m) if !definite => Err(OpError::Unknown(m)),
                    other => Err(other),
                }
            }
            Err(_) => Err(self.timed_out()),
        }
    }
}

/// Whether an error message is an authentication problem (wrong or missing password).
pub(crate) fn is_auth_message(m: &str) -> bool {
    let m = m.to_ascii_lowercase();
    m.contains("auth") || m.contains("wrongpass") || m.contains("password")
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;
    use crate::cluster::{self, ClusterSpec, Topology};

    /// A proxy in front of one node that, once `armed`, passes the next `INCR` to the node
    /// and then closes the client's connection instead of passing the reply back: the
    /// client's view of a reply lost after the command ran.
    async fn reply_dropping_proxy(upstream: u16, armed: Arc<AtomicBool>) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = TcpStream::connect(("127.0.0.1", upstream)).await.unwrap();
                let (mut from_client, mut to_client) = client.into_split();
                let (mut from_server, mut to_server) = server.into_split();
                let drop_reply = Arc::new(AtomicBool::new(false));
                let (armed, dropping) = (armed.clone(), drop_reply.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n @ 1..) = from_client.read(&mut buf).await {
                        let incr = buf[..n].windows(4).any(|w| w == b"INCR");
                        if incr && armed.swap(false, Ordering::SeqCst) {
                            dropping.store(true, Ordering::SeqCst);
                        }
                        if to_server.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n @ 1..) = from_server.read(&mut buf).await {
                        // Dropping the write half closes the client's side; the command ran.
                        if drop_reply.load(Ordering::SeqCst) {
                            break;
                        }
                        if to_client.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        port
    }

    /// A cluster command whose reply is lost is reported as maybe run, and is not sent
    /// again: redis-rs's own retries would resend it (an `INCR` would count twice, a
    /// `SET NX` would answer "not set" for the lock it took). The connection works again
    /// for the next command.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cluster_command_whose_reply_is_lost_is_not_sent_again() {
        let dir = tempfile::tempdir().unwrap();
        let spec = ClusterSpec {
            shards: 1,
            ..ClusterSpec::new(Topology::Cluster, dir.path())
        };
        let c = cluster::start(&spec)
            .await
            .expect("a one-master Redis Cluster starts (needs redis-server on PATH)");
        let master = c.endpoints().nodes[0].clone();
        let password = c.password().to_string();
        let armed = Arc::new(AtomicBool::new(false));
        let front = Node {
            port: reply_dropping_proxy(master.port, armed.clone()).await,
            ..master.clone()
        };
        let mut conn = Conn::cluster(&[front], Some(&password), Duration::from_secs(2))
            .await
            .unwrap();
        let mut incr = redis::cmd("INCR");
        incr.arg("counter");
        assert_eq!(conn.query::<i64>(&incr).await, Ok(1));

        armed.store(true, Ordering::SeqCst);
        let lost = conn.query::<i64>(&incr).await;
        assert!(matches!(lost, Err(OpError::Unknown(_))), "{lost:?}");
        assert!(
            !armed.load(Ordering::SeqCst),
            "the INCR never reached the proxy"
        );
        let mut direct = Conn::direct(&master, Some(&password), Duration::from_secs(2)).unwrap();
        let counted = direct.query::<i64>(redis::cmd("GET").arg("counter")).await;
        assert_eq!(counted, Ok(2), "the INCR whose reply was lost ran once");

        assert_eq!(conn.query::<i64>(&incr).await, Ok(3));
    }
}
