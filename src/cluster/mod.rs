//! The lock services' servers that lockaudit starts and owns: Redis's, PostgreSQL's,
//! etcd's, ZooKeeper's, here or on SSH hosts (all but PostgreSQL's), and the guarded
//! resource's `storage` server.
//!
//! Every server runs as a child process in the foreground, bound to 127.0.0.1 on a free
//! port with a generated password, its data and log inside the run folder (PostgreSQL's data
//! excepted: in a private folder outside it, `scratch`), owned by a guard
//! that ends it on drop, on Ctrl-C and on panic (see [`install_cleanup_handlers`]) and,
//! through `PR_SET_PDEATHSIG`, when lockaudit dies.
//!
//! - `service`: what lockaudit needs of one node of any service; `services`: the table of
//!   services by topology (how each starts, what it cannot do);
//! - `redis`: the Redis topologies; `server` / `sentinel`: how each kind of Redis process is
//!   configured and started; `replication`: a replica moved by hand; `sharded`: forming a
//!   Redis Cluster and reading its roles; `probe`: the client connections that check them;
//! - `postgres`: one PostgreSQL server (`initdb`, a foreground postmaster run as an
//!   unprivileged user when we are root, crash and restart on its WAL; its data in a
//!   `scratch` folder that user can reach); `etcd`: three members; `zookeeper`: three
//!   servers;
//! - `ports`: free loopback ports; `binaries`: finding the programs; `clock`: libfaketime,
//!   which lets the nemesis move a server's wall clock;
//! - `registry`: the process-wide table of children and the thread that spawns them;
//!   `process`: the guard that owns one child; `cleanup`: the Ctrl-C and panic handlers;
//!   `instance`: one process and its readiness;
//! - `hosts`, `remote`, `ssh`, `cut`: the servers on other hosts; `member`: an etcd member's
//!   or a ZooKeeper server's part there;
//! - this file: the topologies, [`start`] and [`Cluster`], which reaches every node by name.

mod ask;
mod binaries;
mod cleanup;
mod clock;
mod cut;
mod error;
pub mod etcd;
mod exit;
mod failover;
mod host_logs;
mod hosts;
mod instance;
pub mod leftovers;
mod logs;
mod machine;
mod member;
pub mod on_exit;
mod peer_links;
mod ports;
mod postgres;
pub(crate) mod probe;
pub mod process;
mod procfs;
pub mod reach;
mod redis;
mod registry;
mod remote;
mod replication;
mod scratch;
mod sentinel;
mod server;
mod service;
mod services;
pub mod sharded;
mod ssh;
mod version;
mod zk_election;
pub mod zookeeper;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use rand::Rng;

use crate::private;

pub use ask::{ask_sentinels, node_url};
pub use binaries::{etcd as etcd_binary, postgres_bin_dir, ETCD_ENV, POSTGRES_BIN_ENV};
pub use binaries::{zookeeper as zookeeper_program, ZOOKEEPER_ENV};
pub use cleanup::install_cleanup_handlers;
pub use clock::{FakeClock, Libfaketime, Preload, LIBFAKETIME_ENV};
pub use error::ClusterError;
pub use exit::Exit;
pub use failover::{Failover, Happened, Leaders, RoleWatch};
pub use hosts::{parse_targets, Acted};
pub use logs::LogCursor;
pub use postgres::{client_config as pg_client_config, PG_DATABASE, PG_USER};
pub use process::{ChildGuard, Proc, SignalError};
pub use procfs::{is_live, process_tree};
pub use registry::{
    register_child, registered_pids, shutting_down, signal as signal_child, spawn_foreign,
    unregister_child,
};
pub use replication::Replica;
pub use sentinel::{MASTER_NAME, SENTINEL_FAILOVER_MS};
pub use services::{service, EndSessions, Service, SessionEnd, SERVICES};
pub use ssh::{NodeEntry, SshTarget};
pub use version::{server_versions, ServerVersion};

use hosts::Hosts;
use instance::Instance;
use server::{Server, ServerConfig};
use service::ServiceNode;

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
    /// N independent masters (RedLock); N is `ClusterSpec::masters`.
    Independent,
    /// One PostgreSQL server (`master-0`), for the database locks; the guarded resource's
    /// storage server is still a Redis.
    Postgres,
    /// A Redis Cluster: `ClusterSpec::shards` masters (`master-<i>`), one replica each
    /// (`replica-<shards + i>` follows `master-<i>`), slots split evenly, failover decided
    /// by the cluster itself after `CLUSTER_NODE_TIMEOUT_MS`.
    Cluster,
    /// Three etcd members (`etcd-0`..`etcd-2`, see `etcd`), for the etcd locks and an
    /// external adapter over an etcd library; the guarded resource's storage server is
    /// still a Redis.
    Etcd,
    /// Three ZooKeeper servers (`zk-0`..`zk-2`, see `zookeeper`), for the ZooKeeper lock and
    /// an external adapter over a ZooKeeper library; storage is still a Redis.
    Zookeeper,
}

/// `cluster-node-timeout` of `Topology::Cluster`: short, so that a dead master is replaced
/// within a few seconds of a run (Redis's default, 15 s, would outlast most runs).
pub const CLUSTER_NODE_TIMEOUT_MS: u64 = 1000;

/// What to start.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    pub topology: Topology,
    /// Masters for `Independent` (default 5).
    pub masters: usize,
    /// Masters of `Cluster` (default 3), each with one replica.
    pub shards: usize,
    /// Where data folders and logs go (the run folder).
    pub dir: PathBuf,
    /// The binaries; found on PATH when not given.
    pub redis_server: Option<PathBuf>,
    pub redis_sentinel: Option<PathBuf>,
    /// The folder holding `postgres` and `initdb` (`Postgres`); found when not given (see
    /// `binaries::postgres_bin_dir`).
    pub postgres_bin: Option<PathBuf>,
    /// AOF persistence on the lock's servers (`appendfsync everysec`; see
    /// `ServerConfig::command` for why not `always`): [`Cluster::restart`] replays it,
    /// [`Cluster::restart_empty`] drops it. Off by default, so a restarted node comes back
    /// empty.
    pub persistence: bool,
    /// Start every lock server (masters and replicas; not storage, not sentinels) under
    /// libfaketime, so that [`Cluster::set_clock_offset`] can move its wall clock. Needs
    /// Debian's `faketime` package (or `$LOCKAUDIT_LIBFAKETIME`); off by default.
    pub fake_clocks: bool,
    /// Fixed ports: consecutive from this one, in the order lock nodes (on a cluster each
    /// followed by its bus port), storage, sentinels.
    /// None: free ports chosen by the kernel.
    pub base_port: Option<u16>,
    /// Hosts to run the lock's servers on, over SSH, instead of this machine (node i on
    /// host i mod hosts; a Sentinel topology's sentinels too, numbered after them); empty:
    /// all local. Storage stays local. See `hosts`.
    pub hosts: Vec<SshTarget>,
    /// The private key for `hosts`; None: ssh's defaults.
    pub ssh_key: Option<PathBuf>,
    /// The folder on the hosts in which each run makes its own `lockaudit-run-<token>`
    /// (removed at the end); None: `/tmp`.
    pub remote_dir: Option<PathBuf>,
    /// Trust a host whose key is in no known_hosts file yet (recorded in the run's own
    /// `ssh/known_hosts`). Off by default: a host must be known, as ssh requires with
    /// `StrictHostKeyChecking yes`. A changed key is refused either way.
    pub accept_new_host_keys: bool,
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

impl ClusterSpec {
    /// A spec with the defaults: 5 masters for `Independent`, binaries from PATH, no
    /// persistence, free ports. Prefer it to a struct literal: fields may be added.
    pub fn new(topology: Topology, dir: impl Into<PathBuf>) -> Self {
        ClusterSpec {
            topology,
            masters: 5,
            shards: 3,
            dir: dir.into(),
            redis_server: None,
            redis_sentinel: None,
            postgres_bin: None,
            persistence: false,
            fake_clocks: false,
            base_port: None,
            hosts: Vec::new(),
            ssh_key: None,
            remote_dir: None,
            accept_new_host_keys: false,
        }
    }
}

impl Default for ClusterSpec {
    /// `Single` in the current folder; see [`ClusterSpec::new`].
    fn default() -> Self {
        ClusterSpec::new(Topology::Single, PathBuf::new())
    }
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

/// Length of the generated password: 32 alphanumerics, about 190 bits.
const PASSWORD_LEN: usize = 32;

/// How long a graceful stop waits for SIGTERM before SIGKILL. Redis without persistence
/// exits in milliseconds; with AOF it fsyncs first.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Running servers that lockaudit started and owns. Dropping it kills them all (SIGCONT,
/// SIGKILL, reap); [`Cluster::shutdown`] stops them gracefully.
///
/// Nodes are named at start and keep their names: after a failover `replica-1` may be the
/// primary. Names: `master-<i>`, `replica-<i>` (i = position in `Endpoints::nodes`),
/// `sentinel-<i>`, `storage`.
#[derive(Debug)]
pub struct Cluster {
    topology: Topology,
    root: PathBuf,
    password: String,
    /// The service's nodes on this machine, behind the service seam: the lock's servers
    /// (`master-<i>`, `replica-<i>`, `etcd-<i>`), then those that watch them
    /// (`sentinel-<i>`).
    nodes: Vec<Box<dyn ServiceNode>>,
    storage: Server,
    /// The lock's servers on other hosts (`ClusterSpec::hosts`); empty for a local run.
    remote: Hosts,
}

/// Starts the topology's servers and the storage node (see the service's module: `redis`,
/// `postgres`, `etcd`; on `ClusterSpec::hosts`, `hosts`), and returns once they serve. On any
/// error every process started so far is killed before returning.
pub async fn start(spec: &ClusterSpec) -> Result<Cluster, ClusterError> {
    if !spec.hosts.is_empty() {
        return start_remote(spec).await;
    }
    (services::service(spec.topology).start)(spec).await
}

/// `names` inside `dir`, each made private (see `private::create_dir`) and resolved to an
/// absolute path: a service's folders beside storage's `redis`.
fn private_folders<const N: usize>(
    dir: &Path,
    names: [&str; N],
) -> Result<[PathBuf; N], ClusterError> {
    let mut made = names.map(|name| dir.join(name));
    for path in &mut made {
        private::create_dir(path).map_err(|e| ClusterError::io("create the folder", &*path, e))?;
        *path = path
            .canonicalize()
            .map_err(|e| ClusterError::io("resolve the folder", &*path, e))?;
    }
    Ok(made)
}

/// The guarded resource's `storage` server alone in `root` (for the topologies whose lock
/// servers are not local Redis servers started beside it).
async fn start_storage(
    root: &Path,
    binary: PathBuf,
    password: &str,
    port: ports::PortChoice,
) -> Result<Server, ClusterError> {
    let config = ServerConfig {
        name: "storage".into(),
        binary,
        dir: root.join("storage"),
        log: root.join("storage.log"),
        password: password.to_string(),
        persistence: false,
        replica_of: None,
        fake_clock: None,
        cluster: None,
        machine: std::sync::Arc::new(machine::Local),
    };
    server::start_all(vec![(config, port)], false, false)
        .await?
        .pop()
        .ok_or_else(|| ClusterError::InvalidSpec("the storage node did not start".into()))
}

/// The lock's servers on `spec.hosts` over SSH (see `hosts`), storage on this machine.
async fn start_remote(spec: &ClusterSpec) -> Result<Cluster, ClusterError> {
    let begun = Instant::now();
    let (lock_nodes, primaries) = hosts::layout(spec)?;
    let server_binary = binaries::redis_server(None)?;
    let root = spec.dir.join("redis");
    private::create_dir(&root).map_err(|e| ClusterError::io("create the folder", &root, e))?;
    let root = root
        .canonicalize()
        .map_err(|e| ClusterError::io("resolve the folder", &root, e))?;
    let password = generate_password();
    let storage_port = ports::plan(1, None)?
        .into_iter()
        .next()
        .ok_or_else(|| ClusterError::InvalidSpec("port plan too short".into()))?;
    let storage = start_storage(&root, server_binary, &password, storage_port).await?;
    // Storage is killed by its guard if this fails.
    let remote = hosts::start(spec, &password, lock_nodes, primaries).await?;
    tracing::info!(
        topology = ?spec.topology,
        hosts = spec.hosts.len(),
        servers = remote.servers.len(),
        elapsed = ?begun.elapsed(),
        "servers on hosts ready"
    );
    let mut cluster = Cluster::local(spec.topology, root, password, Vec::new(), storage);
    cluster.remote = remote;
    Ok(cluster)
}

fn generate_password() -> String {
    rand::rng()
        .sample_iter(&rand::distr::Alphanumeric)
        .take(PASSWORD_LEN)
        .map(char::from)
        .collect()
}

fn remote_node(server: &remote::RemoteServer) -> Node {
    Node {
        name: server.name().to_string(),
        host: server.host().to_string(),
        port: server.port(),
        pid: server.pid(),
    }
}

fn node_of(instance: &Instance) -> Node {
    Node {
        name: instance.name().to_string(),
        host: instance.host().to_string(),
        port: instance.port(),
        pid: instance.pid(),
    }
}

impl Cluster {
    /// A cluster of `nodes` on this machine (the lock's servers, then those that watch
    /// them) and `storage`, as a service's start function hands it over.
    fn local(
        topology: Topology,
        root: PathBuf,
        password: String,
        nodes: Vec<Box<dyn ServiceNode>>,
        storage: Server,
    ) -> Cluster {
        // Listed before anything can interrupt the run: Ctrl-C, or the next run after a
        // SIGKILL, removes them as the run's end would.
        for folder in nodes.iter().filter_map(|n| n.scratch()) {
            leftovers::scratch(folder);
        }
        Cluster {
            topology,
            root,
            password,
            nodes,
            storage,
            remote: Hosts::default(),
        }
    }

    /// Where clients connect (pids as of now).
    pub fn endpoints(&self) -> Endpoints {
        Endpoints {
            topology: self.topology,
            nodes: self
                .lock_nodes()
                .map(|n| node_of(n.instance()))
                .chain(
                    self.remote
                        .servers
                        .iter()
                        .filter(|s| !s.is_sentinel())
                        .map(remote_node),
                )
                .collect(),
            sentinels: self
                .nodes
                .iter()
                .filter(|n| n.watches())
                .map(|n| node_of(n.instance()))
                .chain(
                    self.remote
                        .servers
                        .iter()
                        .filter(|s| s.is_sentinel())
                        .map(remote_node),
                )
                .collect(),
            master_name: (self.topology == Topology::Sentinel)
                .then(|| sentinel::MASTER_NAME.to_string()),
            storage: node_of(&self.storage.instance),
            password: Some(self.password.clone()),
            control_addr: self.remote.control_addr(),
        }
    }

    pub fn topology(&self) -> Topology {
        self.topology
    }

    pub fn password(&self) -> &str {
        &self.password
    }

    /// `<run>/redis`: the nodes' folders and logs.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every node's name: the lock's servers, then storage, then the sentinels.
    pub fn names(&self) -> Vec<String> {
        let (sentinels, servers): (Vec<_>, Vec<_>) =
            self.remote.servers.iter().partition(|s| s.is_sentinel());
        servers
            .iter()
            .map(|s| s.name().to_string())
            .chain(self.instances().map(|i| i.name().to_string()))
            .chain(sentinels.iter().map(|s| s.name().to_string()))
            .collect()
    }

    /// The node's pid while it runs (None once killed, or for an unknown name). Prefer
    /// [`Cluster::signal`] to signalling the pid yourself: it never signals a reaped pid.
    pub fn pid(&self, name: &str) -> Option<u32> {
        if let Some(server) = self.remote.server(name) {
            return server.pid();
        }
        self.instance(name).and_then(Instance::pid)
    }

    pub fn port(&self, name: &str) -> Option<u16> {
        if let Some(server) = self.remote.server(name) {
            return Some(server.port());
        }
        self.instance(name).map(Instance::port)
    }

    /// The node's data folder (`<run>/redis/<name>`; a sentinel keeps its config there).
    pub fn data_dir(&self, name: &str) -> Option<&Path> {
        self.instance(name).map(Instance::dir)
    }

    /// The node's log file (`<run>/redis/<name>.log`, appended to across restarts).
    pub fn log_path(&self, name: &str) -> Option<&Path> {
        self.instance(name).map(Instance::log)
    }

    /// Sends `signal` to the node: SIGSTOP / SIGCONT pause and resume it.
    pub fn signal(&self, name: &str, signal: Signal) -> Result<(), ClusterError> {
        if let Some(server) = self.remote.server(name) {
            return server.signal(signal);
        }
        let instance = self
            .instance(name)
            .ok_or_else(|| ClusterError::UnknownNode(name.to_string()))?;
        let process = instance.process().ok_or_else(|| SignalError::Gone {
            name: name.to_string(),
            pid: 0,
        })?;
        process.signal(signal)
    }

    /// Sends `signal` to every node of `names`, as [`Cluster::signal`] does, at once: the
    /// nodes on other hosts in parallel (each is an SSH round trip), so that a pause of
    /// several nodes hits them together. Each outcome says when it was done.
    pub fn signal_many(&self, names: &[String], signal: Signal) -> Vec<Acted> {
        self.on_each(
            names,
            |hosts, remote| hosts.signal_many(remote, signal),
            |name| self.signal(name, signal),
        )
    }

    /// Moves the clocks of every node of `names`, as [`Cluster::set_clock_offset`] does, at
    /// once (see [`Cluster::signal_many`]).
    pub fn set_clock_offset_many(&self, names: &[String], offset_ms: i64) -> Vec<Acted> {
        self.on_each(
            names,
            |hosts, remote| hosts.set_clock_offset_many(remote, offset_ms),
            |name| self.set_clock_offset(name, offset_ms),
        )
    }

    /// `remote` on the nodes of `names` that run on hosts (all at once), `local` on each of
    /// the others, in the order of `names`.
    fn on_each(
        &self,
        names: &[String],
        remote: impl FnOnce(&Hosts, &[String]) -> Vec<Acted>,
        local: impl Fn(&str) -> Result<(), ClusterError>,
    ) -> Vec<Acted> {
        let begun = Instant::now();
        let (on_hosts, here): (Vec<String>, Vec<String>) = names
            .iter()
            .cloned()
            .partition(|n| self.remote.server(n).is_some());
        let mut acted = remote(&self.remote, &on_hosts);
        for name in here {
            let result = local(&name);
            acted.push(Acted {
                name,
                result,
                after: begun.elapsed(),
            });
        }
        acted.sort_by_key(|a| names.iter().position(|n| *n == a.name));
        acted
    }

    /// Kills the node with SIGKILL (resuming it first if paused) and reaps it: a crash.
    /// It stays down until [`Cluster::restart`].
    pub fn kill(&mut self, name: &str) -> Result<Exit, ClusterError> {
        if let Some(server) = self.remote.server_mut(name) {
            return Ok(server.kill().unwrap_or(Exit::Unknown));
        }
        Ok(self.node_mut(name)?.kill().unwrap_or(Exit::Unknown))
    }

    /// Cuts the link from server `from` to server `to` (both on hosts: iptables on `from`'s
    /// host, see `cut`), until [`Cluster::heal_link`]. Between etcd members, through their
    /// peer proxies (`peer_links`). `Unsupported` for other local servers, whose links the
    /// nemesis cuts with its proxies.
    pub fn cut_link(&mut self, from: &str, to: &str) -> Result<(), ClusterError> {
        let pair = [(from.to_string(), to.to_string())];
        self.cut_links(&pair).pop().unwrap_or(Ok(()))
    }

    /// [`Cluster::cut_link`] for each pair, all at once (each host's rules are an SSH
    /// session of their own). Between the nodes of a local service (etcd's members), the
    /// service cuts its own links (`ServiceNode::cut_from`).
    pub fn cut_links(&mut self, pairs: &[(String, String)]) -> Vec<Result<(), ClusterError>> {
        if self.on_hosts() {
            return self.remote.cut_links(pairs);
        }
        pairs
            .iter()
            .map(|(from, to)| self.node_mut(to)?.cut_from(from))
            .collect()
    }

    /// Cuts `client`, this machine's connections from the source ports `ports` (one
    /// worker's, see `nemesis::source_ports`), off from each server of `servers` on hosts:
    /// iptables on each one's host, all at once, until [`Cluster::heal_links`] of
    /// (`client`, server). `Unsupported` for a local server.
    pub fn cut_client(
        &mut self,
        client: &str,
        ports: &std::ops::RangeInclusive<u16>,
        servers: &[String],
    ) -> Vec<Result<(), ClusterError>> {
        self.remote.cut_client(client, ports, servers)
    }

    /// Heals a link [`Cluster::cut_link`] or [`Cluster::cut_client`] cut; false if there
    /// was none or its host did not confirm.
    pub fn heal_link(&mut self, from: &str, to: &str) -> bool {
        let pair = [(from.to_string(), to.to_string())];
        self.heal_links(&pair).pop().unwrap_or(false)
    }

    /// [`Cluster::heal_link`] for each pair, all at once.
    pub fn heal_links(&mut self, pairs: &[(String, String)]) -> Vec<bool> {
        if self.on_hosts() {
            return self.remote.heal_links(pairs);
        }
        pairs
            .iter()
            .map(|(from, to)| self.node_mut(to).is_ok_and(|n| n.heal_from(from)))
            .collect()
    }

    /// Whether the lock's servers run on other hosts (links are cut with iptables there).
    pub fn on_hosts(&self) -> bool {
        !self.remote.servers.is_empty()
    }

    /// Kills every node of `names` that runs, as [`Cluster::kill`] does, at once: the nodes on
    /// other hosts in parallel (each kill is an SSH round trip), so that RedLock's pair of
    /// masters dies together. Returns the names killed.
    pub fn kill_many(&mut self, names: &[String]) -> Vec<String> {
        let remote: Vec<String> = self.remote.kill_many(names);
        let mut killed = Vec::new();
        for name in names {
            let local = self.remote.server(name).is_none();
            if remote.contains(name)
                || (local && self.pid(name).is_some() && self.kill(name).is_ok())
            {
                killed.push(name.clone());
            }
        }
        killed
    }

    /// Restarts every node of `names` that is down, as [`Cluster::restart`] (`keep_data`)
    /// or [`Cluster::restart_empty`] do; nodes on other hosts concurrently. Returns each
    /// node's outcome.
    pub async fn restart_many(
        &mut self,
        names: &[String],
        keep_data: bool,
    ) -> Vec<(String, Result<(), ClusterError>)> {
        let mut outcomes = self.remote.restart_many(names, keep_data).await;
        for name in names {
            if self.remote.server(name).is_some() || self.pid(name).is_some() {
                continue;
            }
            let result = if keep_data {
                self.restart(name).await
            } else {
                self.restart_empty(name).await
            };
            outcomes.push((name.clone(), result));
        }
        outcomes
    }

    /// Starts the node again on its port (killing it first if it still runs) and waits until
    /// it answers. A server with persistence replays its AOF (the state of a crashed
    /// process); without, it comes back empty. A sentinel keeps its rewritten config. A
    /// fake clock keeps its offset.
    pub async fn restart(&mut self, name: &str) -> Result<(), ClusterError> {
        if let Some(server) = self.remote.server_mut(name) {
            return server.restart(true).await;
        }
        self.node_mut(name)?.restart(true).await
    }

    /// Like [`Cluster::restart`], but a server comes back empty even with persistence: its
    /// data folder (AOF folder, any RDB) is removed first, as if its disk were lost; a
    /// PostgreSQL server gets a fresh `initdb`. A sentinel cannot be emptied (its config is
    /// its state): `Unsupported`.
    pub async fn restart_empty(&mut self, name: &str) -> Result<(), ClusterError> {
        if self.remote.server(name).is_some_and(|s| s.is_sentinel()) {
            return Err(ClusterError::Unsupported {
                action: "empty",
                node: name.to_string(),
                reason: "a sentinel has no data, only its config; restart it instead".into(),
            });
        }
        if let Some(server) = self.remote.server_mut(name) {
            return server.restart(false).await;
        }
        self.node_mut(name)?.restart(false).await
    }

    /// Moves the wall clock of lock server `name` to `offset_ms` milliseconds from the real
    /// clock (negative: behind); 0 heals. Applies from the server's next time call, also
    /// while it runs, and across restarts; a killed server gets it when restarted.
    ///
    /// Exact to the millisecond: the file gets decimal seconds (`+20.000`, `-0.250`), which
    /// libfaketime honours (measured: offsets within a few ms of what was asked).
    /// Only the wall clock moves (`CLOCK_REALTIME`: `TIME`, key expiry, timestamps in
    /// replication), not the monotonic clock Redis runs its timers on, as in a real clock
    /// step.
    ///
    /// Errors: `UnknownNode`; `Unsupported` for storage or a sentinel, or when the cluster
    /// was started without [`ClusterSpec::fake_clocks`].
    pub fn set_clock_offset(&self, name: &str, offset_ms: i64) -> Result<(), ClusterError> {
        if let Some(server) = self.remote.server(name) {
            server.set_clock_offset(offset_ms)?;
            tracing::debug!(node = name, offset_ms, "clock moved on its host");
            return Ok(());
        }
        let clock = self.fake_clock(name)?;
        clock.set(offset_ms)?;
        tracing::debug!(node = name, offset_ms, "clock moved");
        Ok(())
    }

    /// The offset last given to [`Cluster::set_clock_offset`] (0 until then); None without
    /// fake clocks, for storage, a sentinel or an unknown name.
    pub fn clock_offset_ms(&self, name: &str) -> Option<i64> {
        if let Some(server) = self.remote.server(name) {
            return server.clock_offset_ms();
        }
        self.fake_clock(name).ok().map(clock::FakeClock::offset_ms)
    }

    fn fake_clock(&self, name: &str) -> Result<&clock::FakeClock, ClusterError> {
        let unsupported = |reason: &str| ClusterError::Unsupported {
            action: "set the clock of",
            node: name.to_string(),
            reason: reason.to_string(),
        };
        match self.lock_nodes().find(|n| n.instance().name() == name) {
            Some(node) => node.fake_clock().ok_or_else(|| {
                unsupported(
                    "the cluster was started without fake clocks (ClusterSpec::fake_clocks)",
                )
            }),
            None if self.instance(name).is_some() => Err(unsupported(
                "only the lock's servers have fake clocks, not storage or sentinels",
            )),
            None => Err(ClusterError::UnknownNode(name.to_string())),
        }
    }

    /// `Cluster` only: the master holding the most keys (the busiest lock's) and its replica,
    /// whose replication is then cut (see `sharded::cut_replication`): from now on it lags.
    /// Returns (master, replica).
    pub async fn lag_busiest_replica(&self) -> Result<(String, String), ClusterError> {
        let unsupported = |reason: String| ClusterError::Unsupported {
            action: "fail over",
            node: "the cluster".into(),
            reason,
        };
        if self.topology != Topology::Cluster {
            return Err(unsupported(
                "only a Redis Cluster fails over by itself".into(),
            ));
        }
        let nodes = self.lock_addrs();
        let mut busiest: Option<(i64, &(String, String, u16))> = None;
        for node in &nodes {
            let (name, host, port) = node;
            if self.pid(name).is_none()
                || sharded::is_master(host, *port, &self.password).await != Some(true)
            {
                continue;
            }
            let keys = sharded::dbsize(host, *port, &self.password)
                .await
                .unwrap_or(-1);
            if busiest.is_none_or(|(k, _)| keys > k) {
                busiest = Some((keys, node));
            }
        }
        let (_, (master, host, port)) =
            busiest.ok_or_else(|| unsupported("no master answers".into()))?;
        let replica_port = sharded::replica_of(host, *port, &self.password)
            .await
            .map_err(unsupported)?;
        let (replica, replica_host, _) = nodes
            .iter()
            .find(|(_, _, p)| *p == replica_port)
            .ok_or_else(|| unsupported(format!("no node of ours on port {replica_port}")))?;
        sharded::cut_replication(replica_host, replica_port, &self.password)
            .await
            .map_err(unsupported)?;
        Ok((master.clone(), replica.clone()))
    }

    /// `Cluster` only: promotes `replica` at once with what it has (`CLUSTER FAILOVER
    /// TAKEOVER`) and restores its replication password.
    pub async fn take_over(&self, replica: &str) -> Result<(), ClusterError> {
        let (_, host, port) = self
            .lock_addrs()
            .into_iter()
            .find(|(name, _, _)| name == replica)
            .ok_or_else(|| ClusterError::UnknownNode(replica.to_string()))?;
        sharded::takeover(&host, port, &self.password)
            .await
            .map_err(|reason| ClusterError::Unsupported {
                action: "promote",
                node: replica.to_string(),
                reason,
            })
    }

    /// The lock's servers as (name, address, port), here or on hosts: what the nemesis
    /// polls for roles on a cluster.
    pub fn lock_addrs(&self) -> Vec<(String, String, u16)> {
        self.lock_nodes()
            .map(|n| {
                let instance = n.instance();
                (
                    instance.name().to_string(),
                    instance.host().to_string(),
                    instance.port(),
                )
            })
            .chain(
                self.remote
                    .servers
                    .iter()
                    .filter(|s| !s.is_sentinel())
                    .map(|s| (s.name().to_string(), s.host().to_string(), s.port())),
            )
            .collect()
    }

    /// The lock's servers on this machine (not the sentinels that watch them).
    pub(super) fn lock_nodes(&self) -> impl Iterator<Item = &dyn ServiceNode> {
        self.nodes
            .iter()
            .filter(|n| !n.watches())
            .map(|n| n.as_ref())
    }

    /// The node `name` on this machine, storage included.
    fn node_mut(&mut self, name: &str) -> Result<&mut (dyn ServiceNode + 'static), ClusterError> {
        self.nodes
            .iter_mut()
            .map(|n| n.as_mut())
            .chain(std::iter::once(
                &mut self.storage as &mut (dyn ServiceNode + 'static),
            ))
            .find(|n| n.instance().name() == name)
            .ok_or_else(|| ClusterError::UnknownNode(name.to_string()))
    }

    /// Stops everything gracefully: the sentinels first (so that none starts a failover
    /// while the primary goes), then the servers; each gets SIGCONT and SIGTERM, then
    /// SIGKILL after a grace period. Returns how each process ended.
    pub async fn shutdown(mut self) -> Vec<(String, Exit)> {
        let mut watchers: Vec<&mut dyn Proc> = self
            .nodes
            .iter_mut()
            .filter(|n| n.watches())
            .filter_map(|n| n.instance_mut().process_mut())
            .map(|p| p as &mut dyn Proc)
            .collect();
        process::terminate_all(&mut watchers, STOP_GRACE).await;
        for node in self.nodes.iter_mut().filter(|n| !n.graceful_stop()) {
            node.kill();
        }
        let root = self.root.clone();
        let mut ended = self.remote.shutdown(STOP_GRACE, &root);
        let mut servers: Vec<&mut dyn Proc> = self
            .instances_mut()
            .filter_map(Instance::process_mut)
            .map(|p| p as &mut dyn Proc)
            .collect();
        process::terminate_all(&mut servers, STOP_GRACE).await;
        self.remove_scratch();
        ended.extend(self.instances().map(|i| {
            let exit = i.process().and_then(Proc::exit).unwrap_or(Exit::Unknown);
            (i.name().to_string(), exit)
        }));
        ended
    }

    /// Removes the scratch folder of every node that has stopped (`ServiceNode::scratch`).
    fn remove_scratch(&self) {
        for node in self.nodes.iter().filter(|n| n.instance().pid().is_none()) {
            if let Some(folder) = node.scratch() {
                leftovers::remove(folder);
            }
        }
    }

    /// Every process on this machine: the lock's servers, storage, then the watchers.
    fn instances(&self) -> impl Iterator<Item = &Instance> {
        let (watchers, servers): (Vec<_>, Vec<_>) = self.nodes.iter().partition(|n| n.watches());
        servers
            .into_iter()
            .map(|n| n.instance())
            .chain(std::iter::once(&self.storage.instance))
            .chain(watchers.into_iter().map(|n| n.instance()))
    }

    fn instances_mut(&mut self) -> impl Iterator<Item = &mut Instance> {
        self.nodes
            .iter_mut()
            .map(|n| n.instance_mut())
            .chain(std::iter::once(&mut self.storage.instance))
    }

    fn instance(&self, name: &str) -> Option<&Instance> {
        self.instances().find(|i| i.name() == name)
    }
}

impl Drop for Cluster {
    /// Kills whatever still runs, each node as its service kills it (PostgreSQL's
    /// backends with their postmaster, see `postgres::kill_tree`), storage last.
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.kill();
        }
        self.storage.instance.kill();
        self.remove_scratch();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_escape_the_password() {
        let node = Node {
            name: "storage".into(),
            host: "127.0.0.1".into(),
            port: 7000,
            pid: None,
        };
        let mut e = Endpoints {
            topology: Topology::Single,
            nodes: vec![],
            sentinels: vec![],
            master_name: None,
            storage: node.clone(),
            password: Some("a:b@c/d".into()),
            control_addr: None,
        };
        assert_eq!(e.url(&node), "redis://:a%3Ab%40c%2Fd@127.0.0.1:7000/");
        e.password = None;
        assert_eq!(e.url(&node), "redis://127.0.0.1:7000/");
        assert_eq!(e.node("storage"), Some(&node));
    }

    #[test]
    fn passwords_are_long_and_alphanumeric() {
        let pw = generate_password();
        assert_eq!(pw.len(), PASSWORD_LEN);
        assert!(pw.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(pw, generate_password());
    }
}
