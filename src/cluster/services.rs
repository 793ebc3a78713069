//! The lock services other than Redis, one entry each: everything the rest of lockaudit
//! asks of a service by its topology (how to start it, what it cannot do), so that a new
//! service is its own module (its nodes behind [`super::service::ServiceNode`]), a
//! `Topology` variant and one entry in [`SERVICES`].

use std::future::Future;
use std::pin::Pin;

use super::error::ClusterError;
use super::{Cluster, ClusterSpec, Topology};

/// Starts a service's nodes (and the storage server) for a run.
pub type Start =
    for<'a> fn(
        &'a ClusterSpec,
    ) -> Pin<Box<dyn Future<Output = Result<Cluster, ClusterError>> + Send + 'a>>;

/// What lockaudit knows of one lock service.
pub struct Service {
    /// Its topology, the one its locks run on (and nothing else does).
    pub topology: Topology,
    /// How messages name it.
    pub name: &'static str,
    /// How messages name the locks that run on it.
    pub locks: &'static str,
    pub start: Start,
    /// Why it cannot run on SSH hosts; None: it can.
    pub not_on_hosts: Option<&'static str>,
    /// Why a jump of its servers' clocks cannot act on it; None: it can.
    pub clock_jump: Option<&'static str>,
    /// Why it has no failover of its own (`Cluster::begin_failover`); None: it has.
    pub failover: Option<&'static str>,
    /// Whether an external adapter may run on it (wrapping a lock library of the service;
    /// its `init` names the nodes).
    pub external_adapters: bool,
    /// Whether a killed node comes back on its data (a crashed database's WAL, an etcd
    /// member rejoining) rather than empty: its nodes cannot be emptied, or are not
    /// meant to be.
    pub restarts_on_data: bool,
}

/// Every lock service that is not Redis.
pub const SERVICES: [Service; 2] = [
    Service {
        topology: Topology::Postgres,
        name: "PostgreSQL",
        locks: "the database locks (pg-*)",
        start: |spec| Box::pin(super::start_postgres(spec)),
        not_on_hosts: Some("PostgreSQL runs on this machine only"),
        clock_jump: Some(
            "PostgreSQL's locks never expire, so its clock decides nothing (and it runs without libfaketime)",
        ),
        failover: Some(
            "lockaudit's PostgreSQL is a single server, with no replica to fail over to",
        ),
        external_adapters: false,
        restarts_on_data: true,
    },
    Service {
        topology: Topology::Etcd,
        name: "etcd",
        locks: "the etcd locks (etcd-lock, etcd-txn) and an external adapter",
        start: |spec| Box::pin(super::etcd::start_cluster(spec)),
        not_on_hosts: None,
        clock_jump: Some(
            "etcd times leases on Go's monotonic clock, which a wall-clock jump does not move (and libfaketime cannot reach a Go program)",
        ),
        // Raft elects a new leader: the failover kills the leader of the moment.
        failover: None,
        external_adapters: true,
        restarts_on_data: true,
    },
];

/// The service whose topology is `topology`; None for the Redis topologies.
pub fn service(topology: Topology) -> Option<&'static Service> {
    SERVICES.iter().find(|s| s.topology == topology)
}
