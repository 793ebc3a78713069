//! The lock services' servers that lockaudit starts and owns: Redis's, PostgreSQL's,
//! MariaDB's, etcd's, ZooKeeper's, here or on SSH hosts, and the guarded
//! resource's `storage` server.
//!
//! Every server runs as a child process in the foreground, bound to 127.0.0.1 on a free
//! port with a generated password, its data and log inside the run folder (PostgreSQL's data
//! excepted: in a private folder outside it, `scratch`), owned by a guard
//! that ends it on drop, on Ctrl-C and on panic (see [`install_cleanup_handlers`]) and,
//! through `PR_SET_PDEATHSIG`, when lockaudit dies.
//!
//! - `machine`: where a node's process runs, this machine or an SSH host, behind one
//!   seam (start, signal, kill, files); every service below is written once against it;
//! - `service`: what lockaudit needs of one node of any service; `services`: the table of
//!   services by topology (how each starts, what it cannot do);
//! - `redis`: the Redis topologies; `server` / `sentinel`: how each kind of Redis process is
//!   configured and started; `replication`: a replica moved by hand; `sharded`: forming a
//!   Redis Cluster and reading its roles; `probe`: the client connections that check them;
//! - `postgres`: one PostgreSQL server (`initdb`, a foreground postmaster run as an
//!   unprivileged user when we are root, crash and restart on its WAL; its data in a
//!   `scratch` folder that user can reach); `etcd`: three members; `zookeeper`: three
//!   servers; `mariadb`: one MariaDB server (`mariadb-install-db`, a foreground
//!   `mariadbd` as PostgreSQL's is started, crash and restart on InnoDB's log);
//! - `ports`: free loopback ports; `binaries`: finding the programs; `clock`: libfaketime,
//!   which lets the nemesis move a server's wall clock;
//! - `registry`: the process-wide table of children and the thread that spawns them;
//!   `process`: the guard that owns one child, and `Proc`, a process here or on a host;
//!   `cleanup`: the Ctrl-C and panic handlers; `instance`: one node's process and its
//!   readiness;
//! - `hosts`, `ssh`, `cut`, `host_logs`: what only hosts have: the connections, where each
//!   node is placed, links cut with iptables, logs brought back and files removed;
//! - this file: [`start`] and [`Cluster`], which reaches every node by name (what the
//!   topologies are, and how a client reaches their servers, is `crate::topology`).

mod ask;
mod binaries;
mod cleanup;
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
mod mariadb;
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

use crate::fake_clock::FakeClock;
use crate::private;

// The hosts are topology's data; still named here by the run plan and the audit's runner.
pub use crate::topology::{Endpoints, Node, Topology};
pub use ask::{ask_sentinels, node_url, NoPrimaryNamed, SentinelAnswer};
pub use binaries::{etcd as etcd_binary, postgres_bin_dir, ETCD_ENV, POSTGRES_BIN_ENV};
pub use binaries::{zookeeper as zookeeper_program, ZOOKEEPER_ENV};
pub use cleanup::install_cleanup_handlers;
pub use error::{ClusterError, SessionsError, SignalError};
pub use exit::Exit;
pub use failover::{Failover, FailoverError, Happened, Leaders, RoleWatch};
pub use hosts::Acted;
pub use logs::LogCursor;
pub use mariadb::{
    client_opts as mariadb_client_opts, end_sessions_at as mariadb_end_client_sessions,
    Programs as MariadbPrograms, MARIADBD_ENV, MARIADB_DATABASE, MARIADB_USER,
};
pub use postgres::{client_config as pg_client_config, PG_DATABASE, PG_USER};
pub use process::{ChildGuard, Proc};
pub use procfs::{is_live, process_tree};
pub use registry::{
    register_child, registered_pids, shutting_down, signal as signal_child, spawn_foreign,
    unregister_child,
};
pub use replication::{Replica, ReplicaError};
pub use sentinel::{MASTER_NAME, SENTINEL_FAILOVER_MS};
pub use services::{service, EndSessions, Service, SessionEnd, SERVICES};
pub use version::{server_versions, ServerVersion};

use hosts::Hosts;
use instance::Instance;
use server::{Server, ServerConfig};
use service::ServiceNode;

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
    pub hosts: Vec<crate::topology::hosts::SshTarget>,
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
    /// The hosts the nodes run on (`ClusterSpec::hosts`): their connections, the links cut
    /// there, the run's files; inactive for a local run.
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
    server::start_all(vec![(config, port)], false, server::Start::First)
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
    let (remote, nodes) = hosts::start(spec, &password, lock_nodes, primaries).await?;
    tracing::info!(
        topology = ?spec.topology,
        hosts = spec.hosts.len(),
        servers = nodes.len(),
        elapsed = ?begun.elapsed(),
        "servers on hosts ready"
    );
    let mut cluster = Cluster::local(spec.topology, root, password, nodes, storage);
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
            nodes: self.lock_nodes().map(|n| node_of(n.instance())).collect(),
            sentinels: self
                .nodes
                .iter()
                .filter(|n| n.watches())
                .map(|n| node_of(n.instance()))
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
        self.instances().map(|i| i.name().to_string()).collect()
    }

    /// The node's pid while it runs (None once killed, or for an unknown name). Prefer
    /// [`Cluster::signal`] to signalling the pid yourself: it never signals a reaped pid.
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.instance(name).and_then(Instance::pid)
    }

    pub fn port(&self, name: &str) -> Option<u16> {
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
        let instance = self
            .instance(name)
            .ok_or_else(|| ClusterError::UnknownNode(name.to_string()))?;
        let process = instance.process().ok_or_else(|| SignalError::Gone {
            name: name.to_string(),
            pid: 0,
        })?;
        process.signal(signal)
    }

    /// Sends `signal` to every node of `names`, as [`Cluster::signal`] does, at once (on
    /// hosts each is an SSH round trip: one after the other, the last node of a pause would
    /// be hit several round trips after the first). Each outcome says when it was done.
    pub fn signal_many(&self, names: &[String], signal: Signal) -> Vec<Acted> {
        self.on_each(names, |name| self.signal(name, signal))
    }

    /// Moves the clocks of every node of `names`, as [`Cluster::set_clock_offset`] does, at
    /// once (see [`Cluster::signal_many`]).
    pub fn set_clock_offset_many(&self, names: &[String], offset_ms: i64) -> Vec<Acted> {
        self.on_each(names, |name| self.set_clock_offset(name, offset_ms))
    }

    /// `action` on each node of `names`, a thread each, in the order of `names`; each
    /// outcome with when it returned, from the call's start (how far apart the nodes of one
    /// fault were hit).
    fn on_each(
        &self,
        names: &[String],
        action: impl Fn(&str) -> Result<(), ClusterError> + Sync,
    ) -> Vec<Acted> {
        let begun = Instant::now();
        let action = &action;
        std::thread::scope(|scope| {
            let handles: Vec<_> = names
                .iter()
                .map(|name| {
                    scope.spawn(move || Acted {
                        name: name.clone(),
                        result: action(name),
                        after: begun.elapsed(),
                    })
                })
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        })
    }

    /// Kills the node with SIGKILL (resuming it first if paused) and reaps it: a crash.
    /// It stays down until [`Cluster::restart`].
    pub fn kill(&mut self, name: &str) -> Result<Exit, ClusterError> {
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
        self.remote.active()
    }

    /// Kills every node of `names` that runs, as [`Cluster::kill`] does, at once (a thread
    /// each: on hosts each kill is an SSH round trip), so that RedLock's pair of masters
    /// dies together. Returns the names killed.
    pub fn kill_many(&mut self, names: &[String]) -> Vec<String> {
        let mut killed: Vec<String> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .nodes
                .iter_mut()
                .filter(|n| {
                    names.iter().any(|name| name == n.instance().name())
                        && n.instance().pid().is_some()
                })
                .map(|n| scope.spawn(move || n.kill().map(|_| n.instance().name().to_string())))
                .collect();
            handles
                .into_iter()
                .filter_map(|h| h.join().ok().flatten())
                .collect()
        });
        if names.iter().any(|n| n == "storage") && self.kill("storage").is_ok() {
            killed.push("storage".into());
        }
        killed.sort_by_key(|k| names.iter().position(|n| n == k));
        killed
    }

    /// Restarts every node of `names` that is down, as [`Cluster::restart`] (`keep_data`)
    /// or [`Cluster::restart_empty`] do, all at once. Returns each node's outcome.
    pub async fn restart_many(
        &mut self,
        names: &[String],
        keep_data: bool,
    ) -> Vec<(String, Result<(), ClusterError>)> {
        let starts = self
            .nodes
            .iter_mut()
            .map(|n| n.as_mut())
            .chain(std::iter::once(
                &mut self.storage as &mut (dyn ServiceNode + 'static),
            ))
            .filter(|n| {
                names.iter().any(|name| name == n.instance().name()) && n.instance().pid().is_none()
            })
            .map(|n| async move {
                let result = n.restart(keep_data).await;
                (n.instance().name().to_string(), result)
            });
        futures_util::future::join_all(starts).await
    }

    /// Starts the node again on its port (killing it first if it still runs) and waits until
    /// it answers. A server with persistence replays its AOF (the state of a crashed
    /// process); without, it comes back empty. A sentinel keeps its rewritten config. A
    /// fake clock keeps its offset.
    pub async fn restart(&mut self, name: &str) -> Result<(), ClusterError> {
        self.node_mut(name)?.restart(true).await
    }

    /// Like [`Cluster::restart`], but a server comes back empty even with persistence: its
    /// data folder (AOF folder, any RDB) is removed first, as if its disk were lost; a
    /// PostgreSQL server gets a fresh `initdb`. A sentinel cannot be emptied (its config is
    /// its state): `Unsupported`.
    pub async fn restart_empty(&mut self, name: &str) -> Result<(), ClusterError> {
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
        let (node, clock) = self.fake_clock(name)?;
        // On the server's machine: a host's clock file is there.
        let machine = node.instance().machine();
        clock.set_with(offset_ms, |file, text| machine.write_private(file, text))?;
        tracing::debug!(node = name, offset_ms, "clock moved");
        Ok(())
    }

    /// The offset last given to [`Cluster::set_clock_offset`] (0 until then); None without
    /// fake clocks, for storage, a sentinel or an unknown name.
    pub fn clock_offset_ms(&self, name: &str) -> Option<i64> {
        self.fake_clock(name)
            .ok()
            .map(|(_, clock)| clock.offset_ms())
    }

    /// The lock node `name` and its fake clock.
    fn fake_clock(&self, name: &str) -> Result<(&dyn ServiceNode, &FakeClock), ClusterError> {
        let unsupported = |reason: &str| ClusterError::Unsupported {
            action: "set the clock of",
            node: name.to_string(),
            reason: reason.to_string(),
        };
        match self.lock_nodes().find(|n| n.instance().name() == name) {
            Some(node) => node.fake_clock().map(|clock| (node, clock)).ok_or_else(|| {
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
            .map_err(|e| unsupported(e.to_string()))?;
        let (replica, replica_host, _) = nodes
            .iter()
            .find(|(_, _, p)| *p == replica_port)
            .ok_or_else(|| unsupported(format!("no node of ours on port {replica_port}")))?;
        sharded::cut_replication(replica_host, replica_port, &self.password)
            .await
            .map_err(|e| unsupported(e.to_string()))?;
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
            .map_err(|e| ClusterError::Unsupported {
                action: "promote",
                node: replica.to_string(),
                reason: e.to_string(),
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
            .collect()
    }

    /// The lock's servers, here or on hosts (not the sentinels that watch them).
    pub(super) fn lock_nodes(&self) -> impl Iterator<Item = &dyn ServiceNode> {
        self.nodes
            .iter()
            .filter(|n| !n.watches())
            .map(|n| n.as_ref())
    }

    /// The node `name`, storage included.
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
    /// SIGKILL after a grace period. On hosts, their logs are then fetched and the run's
    /// files removed. Returns how each process ended.
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
        let mut servers: Vec<&mut dyn Proc> = self
            .instances_mut()
            .filter_map(Instance::process_mut)
            .map(|p| p as &mut dyn Proc)
            .collect();
        process::terminate_all(&mut servers, STOP_GRACE).await;
        self.remove_scratch();
        if self.remote.active() {
            self.remote.shutdown();
        }
        self.instances()
            .map(|i| {
                let exit = i.process().and_then(Proc::exit).unwrap_or(Exit::Unknown);
                (i.name().to_string(), exit)
            })
            .collect()
    }

    /// Removes the scratch folder of every node that has stopped (`ServiceNode::scratch`).
    fn remove_scratch(&self) {
        for node in self.nodes.iter().filter(|n| n.instance().pid().is_none()) {
            if let Some(folder) = node.scratch() {
                leftovers::remove(folder);
            }
        }
    }

    /// Every node's process: the lock's servers, storage, then the watchers.
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
