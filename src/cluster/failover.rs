//! Failovers a lock service makes itself, as the nemesis asks for them: the cluster knows
//! how its topology replaces a primary, so the nemesis only says "begin" and "end" and
//! records what the cluster says happened.
//!
//! - a Redis Cluster: the busiest master's replica lags (its replication cut) for the
//!   fault's duration; the end promotes it with what it has (`CLUSTER FAILOVER TAKEOVER`);
//! - Sentinel: the primary is paused; the sentinels elect a replica; the end resumes it;
//! - etcd: the leader of the moment is killed; the others elect one (Raft); the end
//!   restarts it on its data;
//! - ZooKeeper: likewise (the others elect one with ZooKeeper's own election).
//!
//! A replicated topology without Sentinel has no failover of its own: lockaudit's proxies
//! freeze its replication link and promote a replica by hand (`nemesis::network`).
//!
//! Who leads is also watched while a run goes on ([`RoleWatch`]), so that a promotion the
//! service decided by itself (a Redis Cluster replacing a killed master, etcd electing a new
//! leader after a kill or a pause) is recorded when seen.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::{ask_sentinels, etcd, sharded, zookeeper, Cluster, ClusterError, Endpoints, Topology};

/// Why a failover the cluster makes by itself could not begin.
#[derive(Debug, thiserror::Error)]
pub enum FailoverError {
    #[error("the sentinels name no primary")]
    NoPrimary,
    #[error("no server says it leads")]
    NoLeader,
    #[error("{leader} could not be killed")]
    LeaderNotKilled { leader: String },
    #[error("the {topology:?} topology does not fail over by itself")]
    NotByItself { topology: Topology },
    /// Lagging a Redis Cluster's replica, or pausing the Sentinel primary, failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
}

/// A failover under way, as [`Cluster::begin_failover`] began it.
#[derive(Debug, Clone)]
pub enum Failover {
    /// A Redis Cluster's replica lagging behind its master.
    Lagging { master: String, replica: String },
    /// Sentinel's primary, paused.
    PausedPrimary(String),
    /// etcd's leader, killed.
    KilledLeader(String),
}

/// A fault event for the nemesis to record: its `f`, targets and extra fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Happened {
    pub f: &'static str,
    pub targets: Vec<String>,
    pub extra: Map<String, Value>,
}

impl Happened {
    fn new(f: &'static str, targets: Vec<String>, extra: &[(&str, Value)]) -> Self {
        Happened {
            f,
            targets,
            extra: extra
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        }
    }
}

impl Cluster {
    /// Whether the topology replaces its primary itself (a failover the cluster makes),
    /// rather than through lockaudit's proxies.
    pub fn fails_over_itself(&self) -> bool {
        matches!(
            self.topology,
            Topology::Cluster | Topology::Sentinel | Topology::Etcd | Topology::Zookeeper
        )
    }

    /// Begins a failover (see the module's list): what to end later and what happened.
    pub async fn begin_failover(&mut self) -> Result<(Failover, Vec<Happened>), FailoverError> {
        match self.topology {
            Topology::Cluster => {
                let (master, replica) = self.lag_busiest_replica().await?;
                let happened = Happened::new(
                    "partition",
                    vec![master.clone(), replica.clone()],
                    &[("link", json!("replication"))],
                );
                Ok((Failover::Lagging { master, replica }, vec![happened]))
            }
            Topology::Sentinel => {
                let primary = sentinel_primary(&self.endpoints())
                    .await
                    .ok_or(FailoverError::NoPrimary)?;
                self.signal(&primary, nix::sys::signal::Signal::SIGSTOP)?;
                let happened = Happened::new("pause", vec![primary.clone()], &[]);
                Ok((Failover::PausedPrimary(primary), vec![happened]))
            }
            Topology::Etcd | Topology::Zookeeper => {
                let leader = self.leader().await.ok_or(FailoverError::NoLeader)?;
                let killed = self.kill_many(std::slice::from_ref(&leader));
                if killed.is_empty() {
                    return Err(FailoverError::LeaderNotKilled { leader });
                }
                let happened = Happened::new("kill", killed, &[("leader", json!(true))]);
                Ok((Failover::KilledLeader(leader), vec![happened]))
            }
            topology => Err(FailoverError::NotByItself { topology }),
        }
    }

    /// Ends a failover [`Cluster::begin_failover`] began: what happened (a promotion, the
    /// old primary back), and each node its end could not heal, with why (the old primary
    /// not resumed or not restarted: no `resume` or `restart` is then said to happen).
    pub async fn end_failover(
        &mut self,
        failover: Failover,
    ) -> (Vec<Happened>, Vec<(String, String)>) {
        let mut happened = Vec::new();
        let mut unhealed = Vec::new();
        match failover {
            Failover::Lagging { master, replica } => {
                match self.take_over(&replica).await {
                    Ok(()) => happened.push(Happened::new(
                        "failover",
                        vec![replica.clone()],
                        &[("from", json!(master)), ("by", json!("takeover"))],
                    )),
                    Err(e) => tracing::warn!("failover: {e}"),
                }
                happened.push(Happened::new("heal", vec![master, replica], &[]));
            }
            Failover::PausedPrimary(old) => {
                match self.signal(&old, nix::sys::signal::Signal::SIGCONT) {
                    Ok(()) => happened.push(Happened::new("resume", vec![old.clone()], &[])),
                    Err(e) => unhealed.push((old.clone(), e.to_string())),
                }
                match sentinel_primary(&self.endpoints()).await {
                    Some(new) if new != old => happened.push(Happened::new(
                        "failover",
                        vec![new],
                        &[("from", json!(old)), ("by", json!("sentinel"))],
                    )),
                    _ => tracing::warn!("failover: Sentinel kept {old} as the primary"),
                }
            }
            Failover::KilledLeader(old) => match self.restart(&old).await {
                Ok(()) => happened.push(Happened::new(
                    "restart",
                    vec![old.clone()],
                    &[("persisted", json!(true))],
                )),
                Err(e) => unhealed.push((old, e.to_string())),
            },
        }
        (happened, unhealed)
    }

    /// What to poll to see the service's own promotions (a Redis Cluster's masters, etcd's
    /// leader); None for a topology whose primary changes only by lockaudit's hand.
    pub fn role_watch(&self) -> Option<RoleWatch> {
        match self.topology {
            Topology::Cluster => Some(RoleWatch::Masters {
                nodes: self.lock_addrs(),
                password: self.password.clone(),
            }),
            Topology::Etcd => Some(RoleWatch::Leader {
                members: self
                    .endpoints()
                    .nodes
                    .into_iter()
                    .map(|n| etcd::Member::new(n.name, n.host, n.port))
                    .collect(),
            }),
            // Every server, up or not now: a restarted one answers on its port again.
            Topology::Zookeeper => Some(RoleWatch::ZooKeeperLeader {
                servers: self.lock_addrs(),
            }),
            _ => None,
        }
    }

    /// `Etcd` and `Zookeeper`: the node that is leader now, as the nodes say; None when none
    /// answers with a leader (or for another topology).
    pub async fn leader(&self) -> Option<String> {
        // The servers running now, here or on hosts (name, client address and port).
        let running: Vec<(String, String, u16)> = self
            .endpoints()
            .nodes
            .into_iter()
            .filter(|n| n.pid.is_some())
            .map(|n| (n.name, n.host, n.port))
            .collect();
        match self.topology {
            Topology::Etcd => etcd::leader(&running).await,
            Topology::Zookeeper => zookeeper::leader(&running).await,
            _ => None,
        }
    }
}

/// The name of the server the sentinels call primary now.
async fn sentinel_primary(endpoints: &Endpoints) -> Option<String> {
    let (_, port) = ask_sentinels(endpoints, Duration::from_secs(1))
        .await
        .ok()?;
    endpoints
        .nodes
        .iter()
        .find(|n| n.port == port)
        .map(|n| n.name.clone())
}

/// Plain data to poll who leads, without borrowing the cluster the nemesis faults meanwhile.
#[derive(Debug, Clone)]
pub enum RoleWatch {
    /// A Redis Cluster's lock nodes (name, host, port).
    Masters {
        nodes: Vec<(String, String, u16)>,
        password: String,
    },
    /// etcd's members, each with its connection once made.
    Leader { members: Vec<etcd::Member> },
    /// ZooKeeper's servers (name, client address and port).
    ZooKeeperLeader { servers: Vec<(String, String, u16)> },
}

impl RoleWatch {
    /// Each node that answers, and whether it leads now (a master; the etcd leader). A node
    /// that does not answer is left out.
    pub async fn poll(&mut self) -> Vec<(String, bool)> {
        match self {
            RoleWatch::Masters { nodes, password } => sharded::roles(nodes, password).await,
            RoleWatch::Leader { members } => etcd::roles(members).await,
            RoleWatch::ZooKeeperLeader { servers } => zookeeper::roles(servers).await,
        }
    }

    /// Who decides the promotions this watch sees (the `by` of a recorded `failover`).
    pub fn decided_by(&self) -> &'static str {
        match self {
            RoleWatch::Masters { .. } => "cluster",
            RoleWatch::Leader { .. } => "raft",
            RoleWatch::ZooKeeperLeader { .. } => "zookeeper",
        }
    }
}

/// Who led when last seen: a promotion is a node that leads now and did not then.
#[derive(Debug, Default)]
pub struct Leaders {
    known: Option<BTreeSet<String>>,
    /// Known leaders that answered as no leader since the last promotion: the one a
    /// promotion replaced, when it stepped down a poll or more before another led (a
    /// ZooKeeper leader cut off gives up leading before the others elect).
    stepped_down: BTreeSet<String>,
}

impl Leaders {
    /// The promotions `roles` (from [`RoleWatch::poll`]) show, each as a `failover` to
    /// record, `by` naming who decided it. A node that answers as no leader is no leader any
    /// more; one that does not answer keeps its last role.
    pub fn saw(&mut self, roles: Vec<(String, bool)>, by: &str) -> Vec<Happened> {
        let Some(known) = self.known.as_mut() else {
            self.known = Some(roles.into_iter().filter(|r| r.1).map(|r| r.0).collect());
            return Vec::new();
        };
        let mut happened = Vec::new();
        let followers: Vec<&String> = roles.iter().filter(|r| !r.1).map(|r| &r.0).collect();
        for (name, leads) in &roles {
            if *leads && known.insert(name.clone()) {
                // The one it replaced: a known leader now silent or following, or one that
                // stepped down since the last promotion.
                let leading: Vec<&String> = roles.iter().filter(|r| r.1).map(|r| &r.0).collect();
                let from: BTreeSet<&String> = known
                    .iter()
                    .chain(&self.stepped_down)
                    .filter(|m| *m != name && !leading.contains(m))
                    .collect();
                happened.push(Happened::new(
                    "failover",
                    vec![name.clone()],
                    &[("from", json!(from)), ("by", json!(by))],
                ));
            }
        }
        if !happened.is_empty() {
            self.stepped_down.clear();
        }
        let stepped_down = &mut self.stepped_down;
        known.retain(|m| {
            let steps_down = followers.contains(&m);
            if steps_down {
                stepped_down.insert(m.clone());
            }
            !steps_down
        });
        happened
    }

    /// Records a promotion made by lockaudit itself, so that the watch does not record it
    /// again.
    pub fn promoted(&mut self, name: &str) {
        if let Some(known) = self.known.as_mut() {
            known.insert(name.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles(of: &[(&str, bool)]) -> Vec<(String, bool)> {
        of.iter().map(|(n, l)| (n.to_string(), *l)).collect()
    }

    fn from(happened: &Happened) -> Value {
        happened.extra["from"].clone()
    }

    #[test]
    fn a_promotion_names_the_leader_it_replaced_even_one_that_stepped_down_earlier() {
        let mut leaders = Leaders::default();
        assert!(leaders
            .saw(roles(&[("a", true), ("b", false)]), "x")
            .is_empty());
        // In one poll: b leads, a follows.
        let seen = leaders.saw(roles(&[("a", false), ("b", true)]), "x");
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].targets, ["b"]);
        assert_eq!(from(&seen[0]), json!(["a"]));
        // b steps down (answers as no leader), and only a later poll sees a lead again.
        assert!(leaders
            .saw(roles(&[("a", false), ("b", false)]), "x")
            .is_empty());
        let seen = leaders.saw(roles(&[("a", true), ("b", false)]), "x");
        assert_eq!(seen[0].targets, ["a"]);
        assert_eq!(from(&seen[0]), json!(["b"]));
        // a silent (no answer) keeps its role: its lead again is no new promotion.
        assert!(leaders.saw(roles(&[("b", false)]), "x").is_empty());
        assert!(leaders
            .saw(roles(&[("a", true), ("b", false)]), "x")
            .is_empty());
    }
}
