//! The lock services, one entry per topology: everything the rest of lockaudit asks of a
//! service by its topology (how to start it, what it cannot do), so that a new service is
//! its own module (its nodes behind [`super::service::ServiceNode`]), a `Topology` variant
//! and one entry in [`SERVICES`].

use std::future::Future;
use std::pin::Pin;

use super::error::{ClusterError, SessionsError};
use super::version::Speaks;
use super::{Cluster, ClusterSpec, Endpoints, Node, Topology};

/// Starts a service's nodes (and the storage server) for a run.
pub type Start =
    for<'a> fn(
        &'a ClusterSpec,
    ) -> Pin<Box<dyn Future<Output = Result<Cluster, ClusterError>> + Send + 'a>>;

/// Asks lock server `node` (of `endpoints`) to end its clients' sessions, its own request's
/// excepted: how many it ended, or why it could not.
pub type EndSessions =
    for<'a> fn(
        &'a Endpoints,
        &'a Node,
    ) -> Pin<Box<dyn Future<Output = Result<usize, SessionsError>> + Send + 'a>>;

/// How the `kill-session` fault ends the sessions a service's locks belong to (a session
/// lock is freed with its session: the silent-reconnect hazard). Every row must say: there is
/// no default, so a new service that leaves it out does not compile.
#[derive(Clone, Copy)]
pub enum SessionEnd {
    /// The server ends them when asked, node by node (`CLIENT KILL`, `pg_terminate_backend`,
    /// a lease revoked).
    Ask(EndSessions),
    /// Nothing can end them but their expiry: the fault cuts a worker off from every server
    /// for longer than the session timeout (a partition), then heals.
    CutOff,
}

/// What lockaudit knows of one lock service on one topology; how messages name it and its
/// locks, and which locks run on it, are its topology's (`Topology::service_name`, ...).
pub struct Service {
    pub topology: Topology,
    pub start: Start,
    /// The protocol its servers answer their version in (run.json's `servers`).
    pub speaks: Speaks,
    /// Why a jump of its servers' clocks cannot act on it; None: it can.
    pub clock_jump: Option<&'static str>,
    /// Why it cannot fail over (no replica to promote, and no election of its own); None: it
    /// can, by itself (`Cluster::begin_failover`) or through lockaudit's proxies.
    pub failover: Option<&'static str>,
    /// Where a run under a failover goes when it cannot fail over here but its locks run
    /// just as well on a topology that can (a single Redis: a primary with two replicas);
    /// None: it stays, and a failover is not applicable to it.
    pub failover_moves_to: Option<Topology>,
    /// Whether its clients find the primary by asking the nodes that watch the servers
    /// (Sentinel), so that no per-worker proxy of the nemesis can stand between them.
    pub clients_ask_watchers: bool,
    /// Whether its primary is lockaudit's to move (the replicated topology): the nemesis's
    /// proxies stand for the primary's one address, as a virtual IP does, the replicas
    /// follow it through proxies of their own (`replication::Replica`), and a failover is a
    /// promotion by hand.
    pub primary_by_hand: bool,
    /// The least time a failover is given: Sentinel needs about 3 s to notice the primary is
    /// gone and elect another.
    pub failover_min_ms: u64,
    /// Whether its servers elect a leader among themselves (Raft, Zab): a partition between
    /// servers (`link = "replication"`) then isolates the leader of the moment from the
    /// others, through `Cluster::leader` and `Cluster::cut_links`.
    pub elects_leader: bool,
    /// Whether a killed node comes back on its data (a crashed database's WAL, an etcd
    /// member rejoining) rather than empty: its nodes cannot be emptied, or are not
    /// meant to be.
    pub restarts_on_data: bool,
    /// Whether an audit runs this service's cells with no other cell beside them: its
    /// servers take the machine's cores when they start and elect (three JVMs), and cells
    /// beside them would find what starved clients do rather than what their locks do.
    pub audit_alone: bool,
    /// How `kill-session` ends its clients' sessions.
    pub sessions: SessionEnd,
}

/// A Redis topology's entry: any Redis lock runs on it; `failover` and `failover_moves_to`
/// as `Service`'s.
const fn redis(
    topology: Topology,
    failover: Option<&'static str>,
    failover_moves_to: Option<Topology>,
) -> Service {
    let sentinel = matches!(topology, Topology::Sentinel);
    Service {
        topology,
        start: |spec| Box::pin(super::redis::start(spec)),
        speaks: Speaks::Redis,
        clock_jump: None,
        failover,
        failover_moves_to,
        clients_ask_watchers: sentinel,
        primary_by_hand: matches!(topology, Topology::Replicated),
        elects_leader: false,
        failover_min_ms: if sentinel {
            super::sentinel::SENTINEL_FAILOVER_MS
        } else {
            0
        },
        restarts_on_data: false,
        audit_alone: false,
        sessions: SessionEnd::Ask(|endpoints, node| {
            Box::pin(super::redis::end_client_sessions(endpoints, node))
        }),
    }
}

/// Every lock service, by topology.
pub const SERVICES: [Service; 9] = [
    redis(
        Topology::Single,
        Some("a single server has no replica to fail over to (--topology replicated or sentinel has)"),
        Some(Topology::Replicated),
    ),
    redis(Topology::Replicated, None, None),
    redis(Topology::Sentinel, None, None),
    redis(
        Topology::Independent,
        Some("RedLock's independent masters have no replicas to fail over to"),
        None,
    ),
    redis(Topology::Cluster, None, None),
    Service {
        topology: Topology::Postgres,
        start: |spec| Box::pin(super::postgres::start(spec)),
        speaks: Speaks::Postgres,
        clock_jump: Some(
            "PostgreSQL's locks never expire, so its clock decides nothing (and it runs without libfaketime)",
        ),
        failover: Some(
            "lockaudit's PostgreSQL is a single server, with no replica to fail over to",
        ),
        failover_moves_to: None,
        clients_ask_watchers: false,
        primary_by_hand: false,
        elects_leader: false,
        failover_min_ms: 0,
        restarts_on_data: true,
        audit_alone: false,
        sessions: SessionEnd::Ask(|endpoints, node| {
            Box::pin(super::postgres::end_client_sessions(endpoints, node))
        }),
    },
    Service {
        topology: Topology::Etcd,
        start: |spec| Box::pin(super::etcd::start_cluster(spec)),
        speaks: Speaks::Etcd,
        clock_jump: Some(
            "etcd times leases on Go's monotonic clock, which a wall-clock jump does not move (and libfaketime cannot move its clock: Go reads the time without libc)",
        ),
        // Raft elects a new leader: the failover kills the leader of the moment.
        failover: None,
        failover_moves_to: None,
        clients_ask_watchers: false,
        primary_by_hand: false,
        elects_leader: true,
        failover_min_ms: 0,
        restarts_on_data: true,
        audit_alone: false,
        // A session is a lease: revoking every lease ends every session's keys.
        sessions: SessionEnd::Ask(|endpoints, node| {
            Box::pin(super::etcd::end_client_sessions(endpoints, node))
        }),
    },
    Service {
        topology: Topology::Zookeeper,
        start: |spec| Box::pin(super::zookeeper::start_ensemble(spec)),
        speaks: Speaks::Zookeeper,
        clock_jump: Some(
            "ZooKeeper expires sessions on the JVM's monotonic clock (its session tracker's ExpiryQueue reads System.nanoTime), which a wall-clock jump does not move: lockaudit's fake clocks move CLOCK_REALTIME only, as a real clock step does",
        ),
        // The ensemble elects a new leader: the failover kills the leader of the moment.
        failover: None,
        failover_moves_to: None,
        clients_ask_watchers: false,
        primary_by_hand: false,
        // Zab elects one; the servers' quorum and election links run through peer proxies
        // here, and are cut with iptables on hosts.
        elects_leader: true,
        failover_min_ms: 0,
        restarts_on_data: true,
        audit_alone: true,
        // No request ends another client's session: it expires once its client is heard
        // of no more for the session timeout.
        sessions: SessionEnd::CutOff,
    },
    Service {
        topology: Topology::Mariadb,
        start: |spec| Box::pin(super::mariadb::start(spec)),
        speaks: Speaks::Mariadb,
        clock_jump: Some(
            "GET_LOCK's locks never expire, so MariaDB's clock decides nothing (and it runs without libfaketime)",
        ),
        failover: Some("lockaudit's MariaDB is a single server, with no replica to fail over to"),
        failover_moves_to: None,
        clients_ask_watchers: false,
        primary_by_hand: false,
        elects_leader: false,
        failover_min_ms: 0,
        // InnoDB recovers its log: a killed server comes back with every committed row.
        restarts_on_data: true,
        audit_alone: false,
        sessions: SessionEnd::Ask(|endpoints, node| {
            Box::pin(super::mariadb::end_client_sessions(endpoints, node))
        }),
    },
];

/// The service of `topology`.
pub fn service(topology: Topology) -> &'static Service {
    SERVICES
        .iter()
        .find(|s| s.topology == topology)
        .expect("SERVICES has an entry for every topology")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_topology_has_one_entry() {
        for (i, a) in SERVICES.iter().enumerate() {
            assert!(
                SERVICES[i + 1..].iter().all(|b| b.topology != a.topology),
                "{:?} twice",
                a.topology
            );
        }
        // A new variant fails to compile here until it is in `ALL`, and the test then
        // until it has its entry.
        use Topology::*;
        const ALL: [Topology; 9] = [
            Single,
            Replicated,
            Sentinel,
            Independent,
            Cluster,
            Postgres,
            Etcd,
            Zookeeper,
            Mariadb,
        ];
        for t in ALL {
            match t {
                Single | Replicated | Sentinel | Independent | Cluster | Postgres | Etcd
                | Zookeeper | Mariadb => {}
            }
            assert_eq!(service(t).topology, t);
        }
    }

    #[test]
    fn a_failover_moves_a_run_only_to_a_topology_of_the_same_service_that_fails_over() {
        for from in &SERVICES {
            if let Some(to) = from.failover_moves_to {
                let to = service(to);
                assert!(
                    from.failover.is_some(),
                    "{:?} can fail over itself",
                    from.topology
                );
                assert!(to.failover.is_none(), "{:?} cannot fail over", to.topology);
                assert_eq!(
                    from.topology.service_name(),
                    to.topology.service_name(),
                    "{:?} to {:?}",
                    from.topology,
                    to.topology
                );
                assert!(!from.topology.own_locks_only() && !to.topology.own_locks_only());
            }
        }
    }
}
