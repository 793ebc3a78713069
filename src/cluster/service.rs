//! The seam between the cluster and a lock service: what lockaudit needs of one node of a
//! service (a redis-server, a sentinel, a PostgreSQL server, an etcd member) to start it,
//! fault it and stop it, whatever the service.
//!
//! A service module (`redis`, `postgres`, `etcd`) starts its nodes and hands them to the
//! cluster as `Box<dyn ServiceNode>`; from there the nemesis kills, pauses, restarts, moves
//! the clock of and signals them through [`super::Cluster`]'s one path by name, and the
//! cluster's shutdown and drop stop them with everything else.

use std::fmt::Debug;
use std::path::Path;

use async_trait::async_trait;

use crate::fake_clock::FakeClock;

use super::error::ClusterError;
use super::exit::Exit;
use super::instance::Instance;

/// One running node of a lock service that lockaudit started and owns.
#[async_trait]
pub trait ServiceNode: Debug + Send + Sync {
    /// The process: its name (`master-0`, `etcd-1`), port, folders, log and guard.
    fn instance(&self) -> &Instance;
    fn instance_mut(&mut self) -> &mut Instance;
    /// SIGKILL and reap (children too, where the service forks them): a crash. The node
    /// stays down until [`ServiceNode::restart`].
    fn kill(&mut self) -> Option<Exit> {
        self.instance_mut().kill()
    }
    /// Starts it again on its port (killing it first if it still runs) and waits until it
    /// serves. `keep_data`: on its data folder, as after a crash; without, as after a lost
    /// disk, or `Unsupported` where the service cannot take a node back that way.
    async fn restart(&mut self, keep_data: bool) -> Result<(), ClusterError>;
    /// Cuts the link from node `from` of the same service to this one (the connections
    /// `from` opens to it die and fail until [`ServiceNode::heal_from`]). `Unsupported`
    /// where the service's nodes do not talk to each other through lockaudit.
    fn cut_from(&mut self, from: &str) -> Result<(), ClusterError> {
        Err(ClusterError::Unsupported {
            action: "cut the link to",
            node: self.instance().name().to_string(),
            reason: format!("no link from {from} runs through lockaudit"),
        })
    }
    /// The ports the service's other nodes reach it on, which a cut between nodes on hosts
    /// drops (an etcd member's peer port; ZooKeeper's quorum and election ports); by
    /// default the port clients use (a Redis replica follows its primary there).
    fn peer_ports(&self) -> Vec<u16> {
        vec![self.instance().port()]
    }
    /// Ends a cut of [`ServiceNode::cut_from`]; false if there was none.
    fn heal_from(&mut self, _from: &str) -> bool {
        false
    }
    /// Whether the end of a run stops it with SIGTERM and a grace period (false: SIGKILL,
    /// for a node whose graceful stop waits on the others, as an etcd leader hands over
    /// its leadership, and whose data the run does not keep using).
    fn graceful_stop(&self) -> bool {
        true
    }
    /// Whether it watches the lock's servers (a sentinel) rather than being one: clients
    /// find it in `Endpoints::sentinels`, and the end of a run stops it first, so that it
    /// starts no failover while the servers go.
    fn watches(&self) -> bool {
        false
    }
    /// Its fake wall clock, where it runs under libfaketime (`ClusterSpec::fake_clocks`).
    fn fake_clock(&self) -> Option<&FakeClock> {
        None
    }
    /// What its folder need not keep once it stopped: a folder of data nothing reads after
    /// the run, removed once the node has stopped for good (the run's end, its teardown, or
    /// Ctrl-C once every child is stopped; after a SIGKILL of lockaudit, by the next run:
    /// `leftovers`). Default: none, keep everything.
    fn scratch(&self) -> Option<&Path> {
        None
    }
}
