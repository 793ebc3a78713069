//! `zk-lock`: ZooKeeper's lock recipe as Apache Curator's `InterProcessMutex` lays it out,
//! written here on the `zookeeper-client` crate's requests, on one session per client. (The
//! crate's own `Client::lock` has the same layout, but its handle deletes the node when
//! dropped: a client the worker retires mid-hold would free its lock unrecorded, where a
//! crashed Curator client's lock lasts until its session expires.)
//!
//! Layout (Curator's `LockInternals` with `StandardLockInternalsDriver`): the lock of key
//! `k` is the folder `/lockaudit/locks/k` (its missing ancestors made as containers); each
//! contender creates a protected ephemeral sequential node in it,
//! `_c_<uuid>-lock-<10-digit sequence>` (the uuid finds the node again when the create's
//! reply was lost); the children are sorted by what follows the last `lock-`; the first
//! holds the lock; every other one watches only its predecessor (a `getData` watch) and
//! looks again when that goes. A Curator client, or kazoo's `Lock` given
//! `extra_lock_patterns=["-lock-"]`, contends on the same path.
//!
//! Acquire waits at most half the session (capped by the workload's `wait`); a contender that
//! gives up deletes its node, as Curator does.
//! Release deletes the node. A request whose connection was lost is sent again (the crate
//! reconnects to another server) within the operation's time limit, as Curator's retry loop
//! does. The lock lasts as long as the session: the lease recorded is
//! the session timeout the servers granted, counted from the operation's start (the server
//! restarts a session's timeout at every request and ping it hears of, all after that
//! start). Renew, every ttl/3, is what a careful Curator user does between steps: make sure
//! the session still lives and the node is still its own (`exists` on it, which also
//! restarts the session's timeout); a session the client has seen expire, or a node found
//! gone, is the lock lost (`fail`), and so is a check no server answered before the lease ran
//! out (Curator's rule: a lock must be taken for lost while the connection is `SUSPENDED`):
//! the check is asked no longer than that, so the holder goes on to its release rather than
//! ending `info` and being retired as one that may still hold, while its session expires
//! and the next contender takes the lock. Curator itself renews nothing: its clients ping in
//! the background and a user learns of a loss from the connection state listener (`LOST`).
//!
//! After an expired session the next acquire opens a new one, as Curator does, within the
//! acquire's time limit; every step is bounded by the operation's time limit.
//!
//! Each session authenticates as the run's digest user (`topology::zookeeper::USER`, the
//! run's password) and creates its znodes for that user alone (`creator_all`): the
//! ensemble's root is the run's, and another local user can neither read nor write them.
//!
//! Flaw it must show: a holder paused past its session keeps working while the next
//! contender holds the lock (the server expired the session and deleted its node): overlap,
//! stale writes, lost updates. Fenced, the token is the lock node's `czxid` (the zxid of its
//! creation): holders follow sequence order, which is creation order, so each new holder's
//! czxid is higher than the last one's.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use zookeeper_client as zk;

use super::{Acquired, LockClient, LockError, LockOptions, Outcome};
use crate::topology::{zookeeper, Endpoints};

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &["zk-lock:after-lock", "zk-lock:before-release"];

/// The folder holding every key's lock folder.
pub const LOCKS_ROOT: &str = "/lockaudit/locks";

/// Curator's `InterProcessMutex` lock name: what the node names carry before the sequence.
pub const LOCK_NAME: &str = "lock-";

/// The folder of `key`'s lock.
pub fn lock_dir(key: &str) -> String {
    format!("{LOCKS_ROOT}/{key}")
}

/// A session on the ensemble at `endpoints` (the lock nodes), asking for a session of the
/// options' ttl (the servers grant 0.4–4 s, see `cluster::zookeeper`).
pub(crate) async fn connect(
    endpoints: &Endpoints,
    options: &LockOptions,
) -> Result<zk::Client, LockError> {
    if endpoints.nodes.is_empty() {
        return Err(LockError::Endpoints("no ZooKeeper servers".into()));
    }
    let servers =
        zookeeper::connect_string(endpoints.nodes.iter().map(|n| (n.host.as_str(), n.port)));
    session(
        &servers,
        endpoints.password.as_deref(),
        options,
        options.op_timeout(),
    )
    .await
    .map_err(|e| LockError::Endpoints(format!("ZooKeeper at {servers}: {e}")))
}

/// A session on `servers`, authenticated as the run's user with `password` if given, within
/// `timeout`.
async fn session(
    servers: &str,
    password: Option<&str>,
    options: &LockOptions,
    timeout: Duration,
) -> Result<zk::Client, String> {
    let mut connector = zk::Client::connector();
    if let Some(password) = password {
        connector = connector.with_auth("digest", zookeeper::digest(password).as_bytes());
    }
    // Detached: a client dropped without a release (retired by the worker) leaves its
    // session, and its lock, to expire, as a crashed one does, rather than closing it.
    let connecting = connector
        .with_detached()
        .with_session_timeout(Duration::from_millis(options.ttl_ms.max(1)))
        .with_connection_timeout(options.op_timeout())
        .connect(servers);
    match tokio::time::timeout(timeout, connecting).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no session within {timeout:?}")),
    }
}

/// A hold: the lock node and the session it belongs to. Dropped without a release (the
/// client retired), the node stays until its session expires, as a crashed holder's does.
struct Held {
    path: String,
    session: i64,
    /// When the lease last recorded runs out: the start of the acquire or renew that set it
    /// + the session timeout (no earlier than the history's, counted from its invoke).
    lease_until: tokio::time::Instant,
}

pub(crate) struct ZkLock {
    client: zk::Client,
    servers: String,
    password: Option<String>,
    options: LockOptions,
    held: HashMap<String, Held>,
}

impl ZkLock {
    pub(crate) fn new(client: zk::Client, options: LockOptions, endpoints: &Endpoints) -> Self {
        ZkLock {
            client,
            servers: zookeeper::connect_string(
                endpoints.nodes.iter().map(|n| (n.host.as_str(), n.port)),
            ),
            password: endpoints.password.clone(),
            options,
            held: HashMap::new(),
        }
    }

    /// How long an acquire waits: half the session asked for (capped by the workload's
    /// `wait`), so that a grant never comes after the lease it records has run out.
    fn wait(&self) -> Duration {
        let half = (self.options.ttl_ms / 2).max(1);
        Duration::from_millis(match self.options.wait_ms {
            0 => half,
            ms => half.min(ms),
        })
    }

    fn lease_ms(&self) -> i64 {
        i64::try_from(self.client.session_timeout().as_millis()).unwrap_or(i64::MAX)
    }

    /// A new session when the last one ended (expired or closed), as Curator opens one,
    /// within `timeout` (the acquire's time left).
    async fn live_session(&mut self, timeout: Duration) -> Result<(), String> {
        if !ended(self.client.state()) {
            return Ok(());
        }
        self.client = session(
            &self.servers,
            self.password.as_deref(),
            &self.options,
            timeout,
        )
        .await
        .map_err(|e| format!("a new session: {e}"))?;
        Ok(())
    }
}

/// `request` until it is answered, sent again after a lost connection (the crate moves to
/// another server meanwhile) as Curator's retry loop does, within `timeout`: the answer, or
/// None when none came in time; and whether it was sent more than once (a write's first try
/// may have taken effect).
async fn retrying<T, F>(
    timeout: Duration,
    request: impl Fn() -> F,
) -> (Option<Result<T, zk::Error>>, bool)
where
    F: std::future::Future<Output = Result<T, zk::Error>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut tries = 0;
    loop {
        tries += 1;
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, request()).await {
            Ok(Err(e)) if lost_connection(&e) && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Ok(answer) => return (Some(answer), tries > 1),
            Err(_) => return (None, tries > 1),
        }
    }
}

/// Whether a request failed because its connection was lost with it in flight: the crate
/// answers `ConnectionLoss`, or, when its connection broke (an I/O error, no answer from the
/// server within its timeout), a `Custom` error saying so (the Java client's
/// ConnectionLossException either way).
fn lost_connection(e: &zk::Error) -> bool {
    matches!(e, zk::Error::ConnectionLoss | zk::Error::Custom(_))
}

/// Between two tries of a request whose connection was lost.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// Whether a session is over for good: its ephemeral nodes are gone or going.
fn ended(state: zk::SessionState) -> bool {
    matches!(
        state,
        zk::SessionState::Expired | zk::SessionState::Closed | zk::SessionState::AuthFailed
    )
}

/// Whether a request that failed with `e` certainly changed nothing that matters for the
/// lock: the session was gone (and with it the node) or the request was refused.
fn certainly_not(e: &zk::Error) -> bool {
    matches!(
        e,
        zk::Error::SessionExpired
            | zk::Error::ClientClosed
            | zk::Error::NoNode
            | zk::Error::BadArguments(_)
            | zk::Error::InvalidAcl
            | zk::Error::NoAuth
    )
}

/// Curator's `attemptLock` and `internalLockLoop`: creates our protected ephemeral
/// sequential node in `dir` (its missing ancestors as containers), then waits until it is
/// the first: each round lists the contenders, sorted by what follows their last `lock-`,
/// and puts a `getData` watch on the one just before ours. Our node's path once it holds.
async fn contend(client: &zk::Client, dir: &str, prefix: &str) -> Result<String, zk::Error> {
    let ours = create_node(client, dir, prefix).await?;
    let name = ours.rsplit('/').next().unwrap_or_default().to_string();
    loop {
        let mut children = retry_lost(|| client.list_children(dir)).await?;
        children.retain(|c| c.contains(LOCK_NAME));
        children.sort_by(|a, b| sequence_of(a).cmp(sequence_of(b)));
        let Some(index) = children.iter().position(|c| *c == name) else {
            // Gone: our session expired (Curator retries the whole attempt; the caller
            // opens a new session first).
            return Err(zk::Error::NoNode);
        };
        if index == 0 {
            return Ok(ours);
        }
        let predecessor = format!("{dir}/{}", children[index - 1]);
        match retry_lost(|| client.get_and_watch_data(&predecessor)).await {
            Ok((_, _, watcher)) => {
                watcher.changed().await;
            }
            // Gone between the listing and the watch: look again.
            Err(zk::Error::NoNode) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Creates `dir/<prefix><sequence>`, ephemeral and sequential, making `dir` and its
/// ancestors (containers) first if missing. After a lost connection, looks for a node with
/// our prefix before creating another (Curator's protection).
async fn create_node(client: &zk::Client, dir: &str, prefix: &str) -> Result<String, zk::Error> {
    // The session's own user alone (the run's digest user): see the module's comment.
    let node = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::creator_all());
    let folder = zk::CreateMode::Container.with_acls(zk::Acls::creator_all());
    let path = format!("{dir}/{prefix}");
    let mut lost = false;
    loop {
        if lost {
            if let Some(found) = find_node(client, dir, prefix).await? {
                return Ok(found);
            }
        }
        match client.create(&path, b"", &node).await {
            Ok((_, sequence)) => return Ok(format!("{path}{sequence}")),
            Err(zk::Error::NoNode) => match client.mkdir(dir, &folder).await {
                Ok(()) | Err(zk::Error::NodeExists) => {}
                Err(e) if lost_connection(&e) => lost = true,
                Err(e) => return Err(e),
            },
            Err(e) if lost_connection(&e) => {
                lost = true;
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Our node in `dir` (the one named with `prefix`), if any.
async fn find_node(
    client: &zk::Client,
    dir: &str,
    prefix: &str,
) -> Result<Option<String>, zk::Error> {
    match retry_lost(|| client.list_children(dir)).await {
        Ok(children) => Ok(children
            .into_iter()
            .find(|c| c.starts_with(prefix))
            .map(|c| format!("{dir}/{c}"))),
        Err(zk::Error::NoNode) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Deletes our node after a wait that gave up or failed, within `timeout`: Ok once it is
/// certainly gone.
async fn give_up(
    client: &zk::Client,
    dir: &str,
    prefix: &str,
    timeout: Duration,
) -> Result<(), String> {
    if ended(client.state()) {
        return Ok(());
    }
    let deleting = async {
        let Some(ours) = find_node(client, dir, prefix).await? else {
            return Ok(());
        };
        match retry_lost(|| client.delete(&ours, None)).await {
            Ok(()) | Err(zk::Error::NoNode) => Ok(()),
            Err(e) => Err(e),
        }
    };
    match tokio::time::timeout(timeout, deleting).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(zk::Error::SessionExpired)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {timeout:?}")),
    }
}

/// `request` again after each lost connection (the caller bounds the time).
async fn retry_lost<T, F>(request: impl Fn() -> F) -> Result<T, zk::Error>
where
    F: std::future::Future<Output = Result<T, zk::Error>>,
{
    loop {
        match request().await {
            Err(e) if lost_connection(&e) => tokio::time::sleep(RETRY_PAUSE).await,
            answer => return answer,
        }
    }
}

/// What Curator sorts contenders by: the part after the last `lock-` (the sequence).
fn sequence_of(name: &str) -> &str {
    name.rfind(LOCK_NAME)
        .map_or(name, |i| &name[i + LOCK_NAME.len()..])
}

/// A random (version 4) UUID in its usual text form, as Curator's protection prefix has it.
fn uuid_v4() -> String {
    let mut bytes: [u8; 16] = rand::random();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[async_trait]
impl LockClient for ZkLock {
    async fn acquire(&mut self, name: &str) -> Acquired {
        // Every step within the operation's time limit (a little less: the worker's own
        // limit must not cut an acquire short, which would leave its outcome unknown).
        let started = tokio::time::Instant::now();
        let deadline = started + self.options.op_timeout().mul_f32(0.95);
        let left = || deadline.saturating_duration_since(tokio::time::Instant::now());
        if let Err(why) = self.live_session(left()).await {
            return Acquired::Fail(why);
        }
        let dir = lock_dir(name);
        let wait = self.wait().min(left());
        if wait.is_zero() {
            return Acquired::Fail("no time left to contend (opening a session took it)".into());
        }
        // Our node's name prefix (Curator's protection): found again by it if the create's
        // reply is lost.
        let prefix = format!("_c_{}-{LOCK_NAME}", uuid_v4());
        let contended = tokio::time::timeout(wait, contend(&self.client, &dir, &prefix)).await;
        let path = match contended {
            Ok(Ok(path)) => path,
            failed => {
                let why = match failed {
                    Ok(Err(e)) => format!("lock: {e}"),
                    _ => format!("not granted within {wait:?}"),
                };
                // Curator deletes its node when it gives up; if it cannot be sure the node
                // is gone, the lock may be ours until the session ends.
                return match give_up(&self.client, &dir, &prefix, left()).await {
                    Ok(()) => Acquired::Fail(why),
                    Err(e) => Acquired::Info(format!("{why}; our node may remain: {e}")),
                };
            }
        };
        self.options.step("zk-lock:after-lock");
        let session = self.client.session_id().0;
        let token = if self.options.fenced {
            let timeout = left();
            match retrying(timeout, || self.client.check_stat(&path)).await.0 {
                Some(Ok(Some(stat))) if stat.ephemeral_owner == session => Some(stat.czxid),
                Some(Ok(_)) => return Acquired::Fail("the lock node was gone once granted".into()),
                Some(Err(e)) if certainly_not(&e) => {
                    return Acquired::Fail(format!("reading the lock node: {e}"))
                }
                // The node stays to its session, as a holder's that cannot tell.
                Some(Err(e)) => return Acquired::Info(format!("reading the lock node: {e}")),
                None => {
                    return Acquired::Info(format!(
                        "reading the lock node: no answer within {timeout:?}"
                    ))
                }
            }
        } else {
            None
        };
        let lease_ms = self.lease_ms();
        let lease_until = started + self.client.session_timeout();
        self.held.insert(
            name.to_string(),
            Held {
                path,
                session,
                lease_until,
            },
        );
        Acquired::Ok {
            token,
            lease_ms: Some(lease_ms),
        }
    }

    async fn release(&mut self, name: &str) -> Outcome {
        let Some(held) = self.held.remove(name) else {
            return Outcome::Fail("not held by this client".into());
        };
        self.options.step("zk-lock:before-release");
        if held.session != self.client.session_id().0 || ended(self.client.state()) {
            return Outcome::Fail("the session that held the lock ended".into());
        }
        let timeout = self.options.op_timeout().mul_f32(0.95);
        let path = held.path.as_str();
        match retrying(timeout, || self.client.delete(path, None)).await {
            (Some(Ok(())), _) => Outcome::Ok { lease_ms: None },
            // A first try may have deleted it before its reply was lost.
            (Some(Err(zk::Error::NoNode)), true) => {
                Outcome::Info("delete: the node was gone when tried again".into())
            }
            (Some(Err(zk::Error::NoNode)), false) => {
                Outcome::Fail("the lock node was gone (its session expired)".into())
            }
            (Some(Err(e)), _) if certainly_not(&e) => Outcome::Fail(format!("delete: {e}")),
            (Some(Err(e)), _) => Outcome::Info(format!("delete: {e}")),
            (None, _) => Outcome::Info(format!("delete: no answer within {timeout:?}")),
        }
    }

    async fn renew(&mut self, name: &str) -> Outcome {
        let started = tokio::time::Instant::now();
        let Some(held) = self.held.get(name) else {
            return Outcome::Fail("not held by this client".into());
        };
        if held.session != self.client.session_id().0 || ended(self.client.state()) {
            return Outcome::Fail(format!("the session ended ({:?})", self.client.state()));
        }
        // Asked no longer than the lease still runs, if it runs out within the operation's
        // time: a check unanswered by then is the lock lost to this client (Curator's rule:
        // a lock is lost while the connection is suspended), a `fail` after the lease, and
        // the holder goes on to its release. Left `info`, it would retire the holder, and
        // the history would keep it holding to the end of the run while its session
        // expired and the next contender took the lock.
        let lease_until = held.lease_until;
        let op_deadline = started + self.options.op_timeout().mul_f32(0.95);
        let answer_by = if lease_until > started && lease_until < op_deadline {
            lease_until
        } else {
            op_deadline
        };
        let timeout = answer_by - started;
        let unanswered = |why: String| {
            if tokio::time::Instant::now() >= lease_until {
                Outcome::Fail(format!(
                    "{why}, and the session's lease has run out: the lock is lost to this client"
                ))
            } else {
                Outcome::Info(why)
            }
        };
        let (path, session) = (held.path.as_str(), held.session);
        match retrying(timeout, || self.client.check_stat(path)).await.0 {
            Some(Ok(Some(stat))) if stat.ephemeral_owner == session => {
                let renewed = started + self.client.session_timeout();
                if let Some(held) = self.held.get_mut(name) {
                    held.lease_until = renewed;
                }
                Outcome::Ok {
                    lease_ms: Some(self.lease_ms()),
                }
            }
            Some(Ok(Some(_))) => Outcome::Fail("the lock node belongs to another session".into()),
            Some(Ok(None)) => Outcome::Fail("the lock node is gone".into()),
            Some(Err(e)) if certainly_not(&e) => Outcome::Fail(format!("exists: {e}")),
            Some(Err(e)) => unanswered(format!("exists: {e}")),
            None => unanswered(format!("exists: no answer within {timeout:?}")),
        }
    }

    /// The watchdog's checks are the history's renewals (see the module's comment).
    fn renews(&self) -> bool {
        true
    }

    fn renew_every(&self) -> Option<Duration> {
        Some(Duration::from_millis((self.options.ttl_ms / 3).max(1)))
    }

    fn ttl_ms(&self) -> Option<i64> {
        i64::try_from(self.options.ttl_ms).ok()
    }

    fn wait_ms(&self) -> Option<i64> {
        i64::try_from(self.wait().as_millis()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_has_its_own_folder_under_the_root() {
        assert_eq!(lock_dir("lock:3"), "/lockaudit/locks/lock:3");
    }

    #[test]
    fn contenders_sort_by_their_sequence_whatever_their_uuid() {
        let mut names = [
            "_c_ffff0000-0000-4000-8000-000000000000-lock-0000000012",
            "_c_00000000-0000-4000-8000-000000000000-lock-0000000013",
            "_c_88880000-0000-4000-8000-000000000000-lock-0000000002",
        ];
        names.sort_by(|a, b| sequence_of(a).cmp(sequence_of(b)));
        assert!(names[0].ends_with("0002") && names[2].ends_with("0013"));
        let uuid = uuid_v4();
        assert_eq!(uuid.len(), 36);
        assert_eq!(uuid.as_bytes()[14], b'4');
    }
}
