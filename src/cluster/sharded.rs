//! A Redis Cluster formed from started cluster-mode nodes with plain commands (what
//! `redis-cli --cluster create` does, without its prompts): MEET, ADDSLOTSRANGE, REPLICATE,
//! then wait until every node says `cluster_state:ok`; and reading each node's role back,
//! which the nemesis uses to see the cluster's own failovers.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

use super::error::ClusterError;
use super::probe;
pub use crate::topology::redis_cluster::{named_ports, parse_nodes, NodeLine};

/// Slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// How long forming may take. A master reports `ok` no sooner than 2 s after it started
/// (Redis's CLUSTER_WRITABLE_DELAY); gossip and the replicas' sync take far less.
const FORM_TIMEOUT: Duration = Duration::from_secs(10);

/// One node to join: its name, address, data port and bus port.
#[derive(Debug, Clone)]
pub struct Member {
    pub name: String,
    /// Where it listens (`127.0.0.1`, or its host's address): the others meet it there.
    pub host: String,
    pub port: u16,
    pub bus_port: u16,
}

/// Forms the cluster: `members` are the masters first, then one replica per master in the
/// same order (replica `i` follows master `i % masters`). Returns once every node reports
/// `cluster_state:ok`, knows every other node, and every replica is in sync.
pub async fn form(members: &[Member], masters: usize, password: &str) -> Result<(), ClusterError> {
    if masters == 0 || members.len() < masters {
        return Err(ClusterError::InvalidSpec(
            "a Redis Cluster needs at least one master".into(),
        ));
    }
    let deadline = Instant::now() + FORM_TIMEOUT;
    let mut conns = Vec::with_capacity(members.len());
    let mut ids = Vec::with_capacity(members.len());
    for m in members {
        let mut conn = probe::connect_to(&m.host, m.port, Some(password))
            .await
            .map_err(|e| fail(m, format!("connect: {e}")))?;
        let id: String = redis::cmd("CLUSTER")
            .arg("MYID")
            .query_async(&mut conn)
            .await
            .map_err(|e| fail(m, format!("CLUSTER MYID: {e}")))?;
        ids.push(id);
        conns.push(conn);
    }
    // One node meets all the others; gossip introduces them to each other.
    for m in &members[1..] {
        let _: () = redis::cmd("CLUSTER")
            .arg("MEET")
            .arg(&m.host)
            .arg(m.port)
            .arg(m.bus_port)
            .query_async(&mut conns[0])
            .await
            .map_err(|e| fail(&members[0], format!("CLUSTER MEET {}: {e}", m.name)))?;
    }
    for (i, (first, last)) in slot_ranges(masters).into_iter().enumerate() {
        let _: () = redis::cmd("CLUSTER")
            .arg("ADDSLOTSRANGE")
            .arg(first)
            .arg(last)
            .query_async(&mut conns[i])
            .await
            .map_err(|e| fail(&members[i], format!("CLUSTER ADDSLOTSRANGE: {e}")))?;
    }
    // A replica can follow its master only once it has heard of it.
    for i in masters..members.len() {
        let master = i % masters;
        loop {
            let reply = redis::cmd("CLUSTER")
                .arg("REPLICATE")
                .arg(&ids[master])
                .query_async::<()>(&mut conns[i])
                .await;
            let last = match reply {
                Ok(()) => break,
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(fail(
                    &members[i],
                    format!(
                        "CLUSTER REPLICATE {} failed until {FORM_TIMEOUT:?}: {last}",
                        members[master].name
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    for (m, conn) in members.iter().zip(conns.iter_mut()) {
        let replica = members[..masters].iter().all(|x| x.name != m.name);
        wait_ok(m, conn, members.len(), replica, deadline).await?;
    }
    Ok(())
}

/// Polls one node until it reports `cluster_state:ok` and knows `total` nodes, and, for a
/// replica, until its link to the master is up (before that it holds no data).
async fn wait_ok(
    m: &Member,
    conn: &mut MultiplexedConnection,
    total: usize,
    replica: bool,
    deadline: Instant,
) -> Result<(), ClusterError> {
    let total = total.to_string();
    loop {
        let last = match cluster_info(conn).await {
            Ok(info) => {
                let state = info.get("cluster_state").cloned().unwrap_or_default();
                let known = info.get("cluster_known_nodes").cloned().unwrap_or_default();
                let link = if replica {
                    probe::info(conn, "replication")
                        .await
                        .ok()
                        .and_then(|i| i.get("master_link_status").cloned())
                        .unwrap_or_default()
                } else {
                    "up".to_string()
                };
                if state == "ok" && known == total && link == "up" {
                    return Ok(());
                }
                format!("cluster_state:{state}, known nodes {known} of {total}, master link {link}")
            }
            Err(e) => format!("CLUSTER INFO: {e}"),
        };
        if Instant::now() >= deadline {
            return Err(fail(
                m,
                format!("the cluster was not ok within {FORM_TIMEOUT:?} ({last})"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `CLUSTER INFO` as a map.
pub async fn cluster_info(
    conn: &mut MultiplexedConnection,
) -> redis::RedisResult<HashMap<String, String>> {
    let text: String = redis::cmd("CLUSTER").arg("INFO").query_async(conn).await?;
    Ok(probe::parse_info(&text))
}

/// Whether the node on `host:port` calls itself a master (`myself,master` in CLUSTER
/// NODES), a replica, or does not answer (None).
pub async fn is_master(host: &str, port: u16, password: &str) -> Option<bool> {
    let mut conn = probe::connect_to(host, port, Some(password)).await.ok()?;
    let text: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut conn)
        .await
        .ok()?;
    text.lines()
        .map(|line| line.split(' ').nth(2).unwrap_or(""))
        .find(|flags| flags.split(',').any(|f| f == "myself"))
        .map(|flags| flags.split(',').any(|f| f == "master"))
}

/// Why a Redis Cluster node could not be asked, or did not say what was needed.
#[derive(Debug, thiserror::Error)]
pub enum NodeQueryError {
    /// No connection, or the command failed.
    #[error("{host}:{port}: {error}")]
    Redis {
        host: String,
        port: u16,
        error: redis::RedisError,
    },
    #[error("the master is not in its own CLUSTER NODES")]
    MasterNotListed,
    #[error("{host}:{port} has no replica")]
    NoReplica { host: String, port: u16 },
}

async fn query<T: redis::FromRedisValue>(
    host: &str,
    port: u16,
    password: &str,
    cmd: &redis::Cmd,
) -> Result<T, NodeQueryError> {
    let failed = |error| NodeQueryError::Redis {
        host: host.to_string(),
        port,
        error,
    };
    let mut conn = probe::connect_to(host, port, Some(password))
        .await
        .map_err(failed)?;
    cmd.query_async(&mut conn).await.map_err(failed)
}

/// The port of the replica following the master on `host:master_port`, as that master
/// sees it (ports are unique in a run, also across hosts).
pub async fn replica_of(
    host: &str,
    master_port: u16,
    password: &str,
) -> Result<u16, NodeQueryError> {
    let mut nodes = redis::cmd("CLUSTER");
    nodes.arg("NODES");
    let text: String = query(host, master_port, password, &nodes).await?;
    let lines = parse_nodes(&text);
    let me = lines
        .iter()
        .find(|l| l.port == master_port)
        .ok_or(NodeQueryError::MasterNotListed)?;
    lines
        .iter()
        .find(|l| !l.master && l.master_id.as_deref() == Some(me.id.as_str()))
        .map(|l| l.port)
        .ok_or_else(|| NodeQueryError::NoReplica {
            host: host.to_string(),
            port: master_port,
        })
}

/// Keys held by the node on `host:port` (DBSIZE).
pub async fn dbsize(host: &str, port: u16, password: &str) -> Result<i64, NodeQueryError> {
    query(host, port, password, &redis::cmd("DBSIZE")).await
}

/// Makes the replica on `host:port` lag: its master link is dropped and its reconnects are
/// refused (a wrong `masterauth`), while its master goes on acknowledging writes. Nothing
/// changes for clients, which never talk to the replica.
pub async fn cut_replication(host: &str, port: u16, password: &str) -> Result<(), NodeQueryError> {
    let mut auth = redis::cmd("CONFIG");
    auth.arg("SET")
        .arg("masterauth")
        .arg(format!("lagging-{password}"));
    query::<()>(host, port, password, &auth).await?;
    let mut kill = redis::cmd("CLIENT");
    kill.arg("KILL").arg("TYPE").arg("master");
    query::<i64>(host, port, password, &kill).await.map(|_| ())
}

/// Promotes the replica on `host:port` at once with whatever it has (`CLUSTER FAILOVER
/// TAKEOVER`: no agreement with its master or the other masters, as after a partition),
/// then lets it authenticate to masters again.
pub async fn takeover(host: &str, port: u16, password: &str) -> Result<(), NodeQueryError> {
    let mut failover = redis::cmd("CLUSTER");
    failover.arg("FAILOVER").arg("TAKEOVER");
    let promoted = query::<()>(host, port, password, &failover).await;
    let mut auth = redis::cmd("CONFIG");
    auth.arg("SET").arg("masterauth").arg(password);
    let restored = query::<()>(host, port, password, &auth).await;
    promoted.and(restored)
}

/// The roles of `nodes` (name, address, port) that answer within a short time, all asked
/// at once: (name, is master). A stopped or dead node is left out.
pub async fn roles(nodes: &[(String, String, u16)], password: &str) -> Vec<(String, bool)> {
    let asks = nodes.iter().map(|(name, host, port)| async move {
        let asked = is_master(host, *port, password);
        let role = tokio::time::timeout(Duration::from_millis(300), asked)
            .await
            .ok()
            .flatten();
        role.map(|master| (name.clone(), master))
    });
    futures_util::future::join_all(asks)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// Whether the node on `host:port` reports `cluster_state:ok`.
pub async fn is_ok(host: &str, port: u16, password: &str) -> bool {
    let Ok(mut conn) = probe::connect_to(host, port, Some(password)).await else {
        return false;
    };
    cluster_info(&mut conn)
        .await
        .map(|i| i.get("cluster_state").map(String::as_str) == Some("ok"))
        .unwrap_or(false)
}

/// The slots split into `masters` contiguous ranges, inclusive, as even as they go.
pub fn slot_ranges(masters: usize) -> Vec<(u16, u16)> {
    let n = masters.max(1) as u32;
    let slots = u32::from(SLOTS);
    (0..n)
        .map(|i| {
            let first = i * slots / n;
            let last = (i + 1) * slots / n - 1;
            (first as u16, last as u16)
        })
        .collect()
}

fn fail(m: &Member, reason: String) -> ClusterError {
    ClusterError::Form {
        node: m.name.clone(),
        port: m.port,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_nodes_lines_parse() {
        let text = "a1 127.0.0.1:7000@17000,master-0 myself,master - 0 0 1 connected 0-5460\n\
                    b2 127.0.0.1:7003@17003 slave a1 0 1 1 connected\n";
        let lines = parse_nodes(text);
        assert_eq!(lines.len(), 2);
        assert!(lines[0].master && lines[0].port == 7000 && lines[0].master_id.is_none());
        assert_eq!(lines[0].name.as_deref(), Some("master-0"));
        assert_eq!(lines[1].name, None);
        assert!(!lines[1].master);
        assert_eq!(lines[1].master_id.as_deref(), Some("a1"));
    }

    #[test]
    fn slot_ranges_cover_every_slot_once() {
        for n in 1..=7 {
            let r = slot_ranges(n);
            assert_eq!(r.len(), n);
            assert_eq!(r[0].0, 0);
            assert_eq!(r[n - 1].1, SLOTS - 1);
            for w in r.windows(2) {
                assert_eq!(w[0].1 + 1, w[1].0);
            }
        }
    }
}
