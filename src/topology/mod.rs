//! What the servers of a run are and how a client reaches them: the topologies, each
//! server's address and role ([`Node`]), the addresses clients connect to ([`Endpoints`],
//! plain data handed to workers and adapters), what each server says its version is, and
//! each service's client settings (`postgres`, `mariadb`, `etcd`, `zookeeper`,
//! `redis_cluster`). Starting and supervising the servers is `cluster`'s; the lock clients
//! (`locks`) and the workload (`workload`) need only this.

use serde::{Deserialize, Serialize};

pub mod etcd;
pub mod hosts;
pub mod mariadb;
pub mod postgres;
pub mod redis_cluster;
pub mod zookeeper;

/// How the lock's servers are arranged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Topology {
    /// One master.
    Single,
    /// One primary and two asynchronous replicas.
    Replicated,
    /// Replicated, watched by three redis-sentinel processes (master name `lockaudit`).
    Sentinel,
    /// N independent masters (RedLock); N is `cluster::ClusterSpec::masters`.
    Independent,
    /// One PostgreSQL server (`master-0`), for the database locks; the guarded resource's
    /// storage server is still a Redis.
    Postgres,
    /// A Redis Cluster: `cluster::ClusterSpec::shards` masters (`master-<i>`), one replica each
    /// (`replica-<shards + i>` follows `master-<i>`), slots split evenly, failover decided
    /// by the cluster itself after `cluster::CLUSTER_NODE_TIMEOUT_MS`.
    Cluster,
    /// Three etcd members (`etcd-0`..`etcd-2`, see `cluster::etcd`), for the etcd locks and an
    /// external adapter over an etcd library; the guarded resource's storage server is
    /// still a Redis.
    Etcd,
    /// Three ZooKeeper servers (`zk-0`..`zk-2`, see `cluster::zookeeper`), for the ZooKeeper lock and
    /// an external adapter over a ZooKeeper library; storage is still a Redis.
    Zookeeper,
    /// One MariaDB server (`master-0`, see `cluster::mariadb`), for the MariaDB lock; storage is
    /// still a Redis.
    Mariadb,
}

impl Topology {
    /// How messages name its service: `Redis`, `PostgreSQL`, ... (what starts it and the
    /// faults it takes are its row in `cluster::SERVICES`).
    pub const fn service_name(self) -> &'static str {
        match self {
            Topology::Single
            | Topology::Replicated
            | Topology::Sentinel
            | Topology::Independent
            | Topology::Cluster => "Redis",
            Topology::Postgres => "PostgreSQL",
            Topology::Etcd => "etcd",
            Topology::Zookeeper => "ZooKeeper",
            Topology::Mariadb => "MariaDB",
        }
    }

    /// Whether it runs only the locks made for its service (PostgreSQL's, etcd's), rather
    /// than any lock of its service (every Redis lock runs on every Redis topology).
    pub const fn own_locks_only(self) -> bool {
        !matches!(
            self,
            Topology::Single
                | Topology::Replicated
                | Topology::Sentinel
                | Topology::Independent
                | Topology::Cluster
        )
    }

    /// How messages name the locks that run on it.
    pub const fn locks(self) -> &'static str {
        match self {
            Topology::Single
            | Topology::Replicated
            | Topology::Sentinel
            | Topology::Independent
            | Topology::Cluster => "the Redis locks",
            Topology::Postgres => "the database locks (pg-*)",
            Topology::Etcd => "the etcd locks (etcd-lock, etcd-txn) and an external adapter",
            Topology::Zookeeper => "the ZooKeeper lock (zk-lock) and an external adapter",
            Topology::Mariadb => "the MariaDB lock (mariadb-get-lock)",
        }
    }

    /// Whether an external adapter may run on it (wrapping a lock library of its service;
    /// its `init` names the nodes).
    pub const fn external_adapters(self) -> bool {
        match self {
            Topology::Single
            | Topology::Replicated
            | Topology::Sentinel
            | Topology::Independent
            | Topology::Cluster
            | Topology::Etcd
            | Topology::Zookeeper => true,
            Topology::Postgres | Topology::Mariadb => false,
        }
    }
}

/// A server's address and role.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Node {
    /// `master-0`, `replica-1`, `sentinel-2`, `storage`.
    pub name: String,
    pub host: String,
    pub port: u16,
    /// The OS process id (for the nemesis); None for servers lockaudit did not start.
    pub pid: Option<u32>,
}

/// Where clients connect: plain data, handed to workers and adapters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Endpoints {
    pub topology: Topology,
    /// The lock's servers: all masters for `Independent`; the primary first, then replicas;
    /// for `Cluster` every node as started, masters first (roles change with failovers).
    pub nodes: Vec<Node>,
    pub sentinels: Vec<Node>,
    pub master_name: Option<String>,
    /// The separate server holding the guarded resource.
    pub storage: Node,
    pub password: Option<String>,
    /// With the lock's servers on other hosts: this machine's address as they see it (None
    /// for local servers). The nemesis then cuts the links between servers with iptables on
    /// their hosts rather than with its proxies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_addr: Option<String>,
}

impl Endpoints {
    /// The node called `name` among the lock's servers, the sentinels and storage.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes
            .iter()
            .chain(&self.sentinels)
            .chain(std::iter::once(&self.storage))
            .find(|n| n.name == name)
    }

    /// A `redis://` URL for `node`, with the password percent-encoded (a generated one is
    /// alphanumeric, but a password of servers given with `--redis` may be anything).
    pub fn url(&self, node: &Node) -> String {
        match &self.password {
            Some(pw) => format!(
                "redis://:{}@{}:{}/",
                percent_encode(pw),
                node.host,
                node.port
            ),
            None => format!("redis://{}:{}/", node.host, node.port),
        }
    }
}

/// Every byte but RFC 3986's unreserved characters as `%XX`.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The Redis URL of `node`, with the run's password.
pub fn node_url(node: &Node, password: Option<&str>) -> String {
    match password {
        Some(pw) => format!("redis://:{pw}@{}:{}/", node.host, node.port),
        None => format!("redis://{}:{}/", node.host, node.port),
    }
}

/// One server and the version it reported (or why it reported none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerVersion {
    /// `master-0`, `sentinel-1`, `storage`, `etcd-2`, ...
    pub name: String,
    /// `redis 7.0.15`, `postgres 16.2`, `etcd 3.5.16`, `zookeeper 3.8.4`,
    /// `mariadb 10.11.19-MariaDB-0+deb12u1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why there is no version (it did not answer in time, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
