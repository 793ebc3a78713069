//! The lock's servers on other hosts: one SSH connection per host, the topology's servers
//! placed on them (node i on host i mod hosts) as nodes of their own services on an
//! [`OnHost`] machine, started primaries first, replicas in sync, then a Sentinel
//! topology's sentinels (numbered after the servers) once they know the whole deployment,
//! or a Redis Cluster's nodes (or etcd's members, or ZooKeeper's servers) all at once and
//! formed at the hosts' addresses. What stays here is what only hosts have: the
//! connections, links cut with iptables, and at the end the servers' logs fetched into the
//! run folder and their files removed, so nothing of the run stays on a host.

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;

use crate::fake_clock::{FakeClock, Libfaketime, Preload};

use super::binaries::{self, SentinelBinary};
use super::cut::{self, Cut};
use super::error::ClusterError;
use super::host_logs::{self, remove_command, scratch_dir, HostLog};
use super::machine::RunAs;
use super::machine::{Machine, OnHost};
use super::mariadb::{MariadbConfig, MariadbServer, Programs as MariadbPrograms};
use super::on_exit;
use super::ports::PortChoice;
use super::postgres::{PgConfig, PgServer};
use super::sentinel::{self, SentinelSetup};
use super::server::{self, ClusterMode, ServerConfig};
use super::service::ServiceNode;
use super::sharded::{self, Member};
use super::ssh::{Ssh, SshOptions};
use super::{etcd, zookeeper};
use super::{ClusterSpec, Topology};

/// The first port of the lock's servers on the hosts when no base port is given; node i
/// listens on this + i (unique per run, so nodes may share a host).
const DEFAULT_BASE_PORT: u16 = 7400;

/// How far above its data port a cluster node's bus listens (Redis's own default).
const BUS_PORT_OFFSET: u16 = 10000;

/// The connections to the hosts, the links cut there and the run's files on them.
#[derive(Debug, Default)]
pub struct Hosts {
    /// Each node on a host: what a cut needs to know of it.
    placed: Vec<Placed>,
    /// Whether the service's nodes elect a leader among themselves (their links to each
    /// other are cut by address, so two on one host cannot be told apart).
    elects: bool,
    /// Links cut with iptables, by (the server that lost it, the server it led to).
    cuts: Vec<((String, String), Cut)>,
    connections: Vec<Arc<Ssh>>,
    /// The run's folder on every host.
    remote_dir: String,
    /// Control sockets and known_hosts (local), and whether it is a temporary folder to
    /// remove on drop (else it is the run's `ssh` folder and stays).
    ssh_dir: Option<(PathBuf, bool)>,
    /// On Ctrl-C, the servers' logs fetched and the run's folders removed (`host_logs`).
    interrupt: Option<on_exit::Registration>,
    /// The logs that job fetches, and the end of a run too.
    logs: Vec<HostLog>,
    /// The local folder the logs come back to (`<run>/redis`).
    local_logs: PathBuf,
}

/// A node on a host, as links between nodes are cut there.
#[derive(Debug, Clone)]
struct Placed {
    name: String,
    /// Its connection's index.
    host: usize,
    addr: String,
    port: u16,
    /// The ports the service's other nodes reach it on (`ServiceNode::peer_ports`).
    peer_ports: Vec<u16>,
}

/// A cut to make: the pair it is known by (who loses the link, where it led), the host
/// whose iptables make it, what to call it, its rules.
struct PlannedCut {
    pair: (String, String),
    host: usize,
    what: String,
    rules: [String; 2],
}

/// One server's part in a fault acting on several at once.
#[derive(Debug)]
pub struct Acted {
    pub name: String,
    pub result: Result<(), ClusterError>,
    /// When its command returned, from the start of the fault.
    pub after: Duration,
}

/// Connects to every host of `spec` and starts the topology's lock servers there: the
/// hosts, and the nodes (the lock's servers, then the sentinels). What started is killed
/// when the nodes are dropped, and the hosts' drop removes the run's files.
pub async fn start(
    spec: &ClusterSpec,
    password: &str,
    lock_nodes: usize,
    primaries: usize,
) -> Result<(Hosts, Vec<Box<dyn ServiceNode>>), ClusterError> {
    let mut hosts = Hosts {
        remote_dir: format!(
            "{}/lockaudit-run-{}",
            spec.remote_dir
                .as_deref()
                .unwrap_or(Path::new("/tmp"))
                .display()
                .to_string()
                .trim_end_matches('/'),
            token(10)
        ),
        ssh_dir: Some(make_ssh_dir(&spec.dir)?),
        local_logs: spec.dir.join("redis"),
        elects: super::service(spec.topology).elects_leader,
        placed: Vec::new(),
        cuts: Vec::new(),
        connections: Vec::new(),
        interrupt: None,
        logs: Vec::new(),
    };
    let options = SshOptions {
        key: spec.ssh_key.clone(),
        accept_new_host_keys: spec.accept_new_host_keys,
        dir: hosts.ssh_dir.clone().map(|(d, _)| d).unwrap_or_default(),
    };
    for key in spec
        .ssh_key
        .iter()
        .chain(spec.hosts.iter().flat_map(|t| &t.ssh_key))
    {
        if !key.is_file() {
            return Err(ClusterError::InvalidSpec(format!(
                "the SSH key {} is not a file",
                key.display()
            )));
        }
    }
    // All hosts at once: each connection is a TCP and SSH handshake.
    let connected = each_at_once(&spec.hosts, "an SSH connection", |i, target| {
        Ssh::connect(target, &options, i)
    });
    for connection in connected {
        hosts.connections.push(Arc::new(connection?));
    }
    let base = spec.base_port.unwrap_or(DEFAULT_BASE_PORT);
    let nodes = match spec.topology {
        Topology::Etcd | Topology::Zookeeper => {
            start_members(&mut hosts, spec, base, password).await?
        }
        Topology::Single
        | Topology::Replicated
        | Topology::Sentinel
        | Topology::Independent
        | Topology::Cluster => {
            start_redis(&mut hosts, spec, base, password, lock_nodes, primaries).await?
        }
        Topology::Postgres => start_postgres(&mut hosts, base, password).await?,
        Topology::Mariadb => start_mariadb(&mut hosts, base, password).await?,
    };
    hosts.placed = nodes
        .iter()
        .enumerate()
        .map(|(i, node)| Placed {
            name: node.instance().name().to_string(),
            host: i % hosts.connections.len(),
            addr: node.instance().host().to_string(),
            port: node.instance().port(),
            peer_ports: node.peer_ports(),
        })
        .collect();
    Ok((hosts, nodes))
}

/// The machine of node `i`: host i mod hosts.
fn machine(hosts: &Hosts, i: usize) -> OnHost {
    OnHost {
        ssh: hosts.connections[i % hosts.connections.len()].clone(),
    }
}

/// A Redis topology's servers (`redis::start`'s, at the hosts' addresses): the primaries
/// together, then the replicas together and in sync (a replica started before its primary
/// listens retries only once a second), a cluster formed, then a Sentinel topology's
/// sentinels.
async fn start_redis(
    hosts: &mut Hosts,
    spec: &ClusterSpec,
    base: u16,
    password: &str,
    lock_nodes: usize,
    primaries: usize,
) -> Result<Vec<Box<dyn ServiceNode>>, ClusterError> {
    let preload = if spec.fake_clocks {
        Some(Libfaketime::find()?)
    } else {
        None
    };
    // A Redis Cluster's nodes all start as masters (`primaries` is all of them); the
    // cluster then makes the last `shards` replicas.
    let cluster_mode = spec.topology == Topology::Cluster;
    let masters = if cluster_mode { spec.shards } else { primaries };
    let dir = PathBuf::from(&hosts.remote_dir);
    let mut configs = Vec::with_capacity(lock_nodes);
    for i in 0..lock_nodes {
        let on = machine(hosts, i);
        let port = super::ports::nth(base, i)?;
        let name = if i < masters {
            format!("master-{i}")
        } else {
            format!("replica-{i}")
        };
        let cluster = match port.checked_add(BUS_PORT_OFFSET) {
            _ if !cluster_mode => None,
            Some(bus_port) => Some(ClusterMode {
                bus_port,
                config_file: dir.join(format!("{name}.nodes.conf")),
                node_timeout_ms: super::CLUSTER_NODE_TIMEOUT_MS,
            }),
            None => {
                return Err(ClusterError::InvalidSpec(format!(
                    "the bus port of {name} ({port} + 10000) is past 65535: a lower --base-port"
                )))
            }
        };
        let replica_of = (i >= primaries).then(|| (machine(hosts, 0).addr().to_string(), base));
        let binary = server_binary(spec, &on.ssh);
        let machine: Arc<dyn Machine> = Arc::new(on);
        let fake_clock = match &preload {
            // libfaketime must be at the same path on the host as here.
            Some(preload) => {
                let clock = FakeClock::unwritten(
                    Preload::Libfaketime(preload.clone()),
                    dir.join(format!("{name}.faketime")),
                );
                clock.set_with(0, |file, text| machine.write_private(file, text))?;
                Some(clock)
            }
            None => None,
        };
        configs.push((
            ServerConfig {
                dir: dir.join(&name),
                log: dir.join(format!("{name}.log")),
                binary: binary.into(),
                password: password.to_string(),
                persistence: spec.persistence,
                replica_of,
                fake_clock,
                cluster,
                machine,
                name,
            },
            PortChoice::Fixed(port),
        ));
    }
    // From here a Ctrl-C leaves servers' logs and files on the hosts: fetched and removed
    // then, as at a normal end.
    let logs = configs
        .iter()
        .enumerate()
        .map(|(i, (c, _))| host_log(hosts, i, &c.name))
        .collect();
    hosts.on_interrupt(logs);
    let replicas = configs.split_off(primaries);
    let mut servers = server::start_all(configs, false, server::Start::First).await?;
    servers.extend(server::start_all(replicas, true, server::Start::First).await?);
    if cluster_mode {
        form_cluster(hosts, &servers, spec.shards, password).await?;
    }
    let mut nodes: Vec<Box<dyn ServiceNode>> = Vec::new();
    let primary = servers
        .first()
        .map(|s| (s.instance.host().to_string(), s.instance.port()))
        .ok_or_else(|| ClusterError::InvalidSpec("no primary".into()))?;
    nodes.extend(
        servers
            .into_iter()
            .map(|s| Box::new(s) as Box<dyn ServiceNode>),
    );
    if spec.topology == Topology::Sentinel {
        let first = nodes.len();
        let mut placements = Vec::new();
        let mut choices = Vec::new();
        let mut logs = hosts.logs.clone();
        for i in 0..super::redis::SENTINELS {
            let on = machine(hosts, first + i);
            // `redis-sentinel` if given, else each host's redis-server in sentinel mode
            // (the same program: Debian packages the name apart).
            let binary = match &spec.redis_sentinel {
                Some(path) => SentinelBinary::ServerInSentinelMode(path.clone()),
                None => SentinelBinary::ServerInSentinelMode(server_binary(spec, &on.ssh).into()),
            };
            placements.push((Arc::new(on) as Arc<dyn Machine>, binary));
            choices.push(PortChoice::Fixed(super::ports::nth(base, first + i)?));
            logs.push(host_log(hosts, first + i, &format!("sentinel-{i}")));
        }
        // The sentinels' logs come back on Ctrl-C too, with the servers'.
        hosts.on_interrupt(logs);
        let setup = SentinelSetup {
            placements,
            root: dir,
            password: password.to_string(),
            primary,
            replicas: lock_nodes - primaries,
        };
        let sentinels = sentinel::start_sentinels(&setup, choices).await?;
        nodes.extend(
            sentinels
                .into_iter()
                .map(|s| Box::new(s) as Box<dyn ServiceNode>),
        );
    }
    Ok(nodes)
}

/// Node `i`'s log, `<run folder>/<name>.log` on its host.
fn host_log(hosts: &Hosts, i: usize, name: &str) -> HostLog {
    HostLog {
        ssh: hosts.connections[i % hosts.connections.len()].clone(),
        name: name.to_string(),
        path: format!("{}/{name}.log", hosts.remote_dir),
    }
}

/// etcd's members or ZooKeeper's servers (`etcd::start_on`, `zookeeper::start_on`), member i
/// on host i mod hosts, with the program each host has.
async fn start_members(
    hosts: &mut Hosts,
    spec: &ClusterSpec,
    base: u16,
    password: &str,
) -> Result<Vec<Box<dyn ServiceNode>>, ClusterError> {
    let dir = PathBuf::from(&hosts.remote_dir);
    let zookeeper = spec.topology == Topology::Zookeeper;
    let (members, name): (usize, fn(usize) -> String) = if zookeeper {
        (zookeeper::SERVERS, zookeeper::server_name)
    } else {
        (etcd::MEMBERS, etcd::member_name)
    };
    let logs = (0..members).map(|i| host_log(hosts, i, &name(i))).collect();
    hosts.on_interrupt(logs);
    let begun = Instant::now();
    let nodes: Vec<Box<dyn ServiceNode>> = if zookeeper {
        // Looked for on every host at once before anything starts there: a host without
        // java or the jar is named before any server runs.
        let programs = each_at_once(
            &hosts.connections,
            "looking for ZooKeeper on a host",
            |_, ssh| binaries::zookeeper_on_host(ssh),
        );
        let mut placed = Vec::new();
        for (i, program) in programs.into_iter().enumerate() {
            let program = program?;
            let on: Arc<dyn Machine> = Arc::new(machine(hosts, i));
            placed.push((on, program.java.into(), program.classpath.into()));
        }
        zookeeper::start_on(&placed, &dir, base, password)
            .await?
            .into_iter()
            .map(|s| Box::new(s) as Box<dyn ServiceNode>)
            .collect()
    } else {
        let placed: Vec<(Arc<dyn Machine>, String)> = (0..hosts.connections.len())
            .map(|i| {
                let on = machine(hosts, i);
                let etcd = on
                    .ssh
                    .target()
                    .etcd
                    .clone()
                    .unwrap_or_else(|| "etcd".into());
                (Arc::new(on) as Arc<dyn Machine>, etcd)
            })
            .collect();
        etcd::start_on(&placed, &dir, base, password)
            .await?
            .into_iter()
            .map(|m| Box::new(m) as Box<dyn ServiceNode>)
            .collect()
    };
    tracing::info!(elapsed = ?begun.elapsed(), topology = ?spec.topology, "members on hosts ready");
    Ok(nodes)
}

/// The private folder beside the run's on the first host, for a database's data: made
/// private, and checked passable for `run_as` (the database's unprivileged user, when the
/// login is root), who must pass through every folder above it, as here
/// (`RunAs::reaches`).
fn database_folder(
    hosts: &Hosts,
    on: &OnHost,
    run_as: Option<&RunAs>,
) -> Result<PathBuf, ClusterError> {
    let scratch = scratch_dir(&hosts.remote_dir);
    let quoted = crate::shell::quote(&scratch);
    let mut script = format!("umask 077 && mkdir -p {quoted}");
    if let Some(user) = run_as {
        script.push_str(&format!(
            " && {{ runuser -u {user} -- test -x {parent} || {{ echo \"{user} cannot pass through $(dirname {quoted}) on this host: set remote_dir to a folder others may pass through\" >&2; exit 1; }}; }}",
            user = crate::shell::quote(&user.name),
            parent = crate::shell::quote(
                Path::new(&scratch)
                    .parent()
                    .unwrap_or(Path::new("/"))
                    .to_string_lossy()
                    .as_ref()
            ),
        ));
    }
    on.ssh.run("make the database's folder", &script)?;
    Ok(PathBuf::from(scratch))
}

/// Where a database's one server goes on hosts: the first host, the user it runs as there,
/// its data folder in the private folder beside the run's, and its log in the run's folder.
struct DatabaseOnHost {
    on: OnHost,
    run_as: Option<RunAs>,
    dir: PathBuf,
    log: PathBuf,
}

/// The node name of a database's one server.
const DATABASE_NODE: &str = "master-0";

/// Readies the first host for `program`'s server (run as the first of `users` there when
/// the login is root), and registers its log for Ctrl-C.
fn database_on_first_host(
    hosts: &mut Hosts,
    program: &'static str,
    users: &[&str],
) -> Result<DatabaseOnHost, ClusterError> {
    let on = machine(hosts, 0);
    let run_as = on.unprivileged(program, users)?;
    let scratch = database_folder(hosts, &on, run_as.as_ref())?;
    hosts.on_interrupt(vec![host_log(hosts, 0, DATABASE_NODE)]);
    Ok(DatabaseOnHost {
        on,
        run_as,
        dir: scratch.join(DATABASE_NODE),
        log: PathBuf::from(&hosts.remote_dir).join(format!("{DATABASE_NODE}.log")),
    })
}

/// PostgreSQL's one server on the first host, as here (`postgres::start`): run as the
/// host's `postgres` user when the login is root, its data in the private folder beside the
/// run's (handed to that user), its log in the run's folder; listening on the host's
/// address at `base`.
async fn start_postgres(
    hosts: &mut Hosts,
    base: u16,
    password: &str,
) -> Result<Vec<Box<dyn ServiceNode>>, ClusterError> {
    let place = database_on_first_host(hosts, "postgres", &["postgres", "nobody"])?;
    let config = PgConfig {
        name: DATABASE_NODE.into(),
        bin_dir: binaries::postgres_on_host(&place.on.ssh)?.into(),
        dir: place.dir,
        log: place.log,
        password: password.to_string(),
        run_as: place.run_as,
        machine: Arc::new(place.on),
    };
    let server = PgServer::start(config, PortChoice::Fixed(base), None).await?;
    Ok(vec![Box::new(server)])
}

/// MariaDB's one server on the first host, as PostgreSQL's (`start_postgres`), as the
/// host's `mysql` user when the login is root.
async fn start_mariadb(
    hosts: &mut Hosts,
    base: u16,
    password: &str,
) -> Result<Vec<Box<dyn ServiceNode>>, ClusterError> {
    let place = database_on_first_host(hosts, "mariadbd", &["mysql", "nobody"])?;
    let (mariadbd, install_db) = binaries::mariadb_on_host(&place.on.ssh)?;
    let config = MariadbConfig {
        name: DATABASE_NODE.into(),
        programs: MariadbPrograms {
            mariadbd: mariadbd.into(),
            install_db: install_db.into(),
        },
        dir: place.dir,
        log: place.log,
        password: password.to_string(),
        run_as: place.run_as,
        machine: Arc::new(place.on),
    };
    let server = MariadbServer::start(config, PortChoice::Fixed(base), None).await?;
    Ok(vec![Box::new(server)])
}

/// `work` on each of `items` (with its place) at once, a thread each: each is a handshake
/// or a command over SSH. The outcomes in order; a thread that panicked, as an error saying
/// `what` did.
fn each_at_once<I: Send, T: Send>(
    items: impl IntoIterator<Item = I>,
    what: &str,
    work: impl Fn(usize, I) -> Result<T, ClusterError> + Sync,
) -> Vec<Result<T, ClusterError>> {
    let work = &work;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .into_iter()
            .enumerate()
            .map(|(i, item)| scope.spawn(move || work(i, item)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(ClusterError::InvalidSpec(format!("{what} panicked"))))
            })
            .collect()
    })
}

/// Forms the Redis Cluster of the servers (masters first) as locally (`sharded::form`), by
/// the hosts' addresses; an error names the host of the node that failed.
async fn form_cluster(
    hosts: &Hosts,
    servers: &[server::Server],
    shards: usize,
    password: &str,
) -> Result<(), ClusterError> {
    let members: Vec<Member> = servers
        .iter()
        .map(|s| Member {
            name: s.config.name.clone(),
            host: s.instance.host().to_string(),
            port: s.instance.port(),
            bus_port: s.config.cluster.as_ref().map_or(0, |c| c.bus_port),
        })
        .collect();
    let begun = Instant::now();
    sharded::form(&members, shards, password)
        .await
        .map_err(|e| match e {
            ClusterError::Form { node, port, reason } => {
                let at = servers.iter().position(|s| s.config.name == node);
                match at {
                    Some(i) => hosts.connections[i % hosts.connections.len()]
                        .error(format!("form the cluster at {node} (port {port})"), reason),
                    None => ClusterError::Form { node, port, reason },
                }
            }
            other => other,
        })?;
    tracing::info!(elapsed = ?begun.elapsed(), "cluster on hosts formed");
    Ok(())
}

/// The redis-server program on the host of `ssh`: the host's own setting, else the run's,
/// else the one on its PATH.
fn server_binary(spec: &ClusterSpec, ssh: &Ssh) -> String {
    ssh.target()
        .redis_server
        .clone()
        .or_else(|| spec.redis_server.as_ref().map(|p| p.display().to_string()))
        .unwrap_or_else(|| "redis-server".into())
}

/// How many lock servers the topology has, and how many of them start as primaries (a
/// cluster's nodes, etcd's members and ZooKeeper's servers all do); an error for a
/// topology without masters. Every service says here how it is laid out on hosts.
pub fn layout(spec: &ClusterSpec) -> Result<(usize, usize), ClusterError> {
    match spec.topology {
        Topology::Single => Ok((1, 1)),
        Topology::Replicated => Ok((1 + super::redis::REPLICAS, 1)),
        Topology::Independent if spec.masters > 0 => Ok((spec.masters, spec.masters)),
        Topology::Independent => Err(ClusterError::InvalidSpec(
            "an independent topology needs at least one master".into(),
        )),
        Topology::Sentinel => Ok((1 + super::redis::REPLICAS, 1)),
        Topology::Cluster if spec.shards > 0 => Ok((2 * spec.shards, 2 * spec.shards)),
        Topology::Cluster => Err(ClusterError::InvalidSpec(
            "a Redis Cluster needs at least one master".into(),
        )),
        Topology::Etcd => Ok((etcd::MEMBERS, etcd::MEMBERS)),
        Topology::Zookeeper => Ok((zookeeper::SERVERS, zookeeper::SERVERS)),
        Topology::Postgres | Topology::Mariadb => Ok((1, 1)),
    }
}

impl Hosts {
    /// (Re)registers the Ctrl-C job for these logs and the run's folders on the hosts.
    fn on_interrupt(&mut self, logs: Vec<HostLog>) {
        // The job it replaces is unregistered when dropped here.
        self.interrupt = Some(host_logs::on_interrupt(
            logs.clone(),
            self.connections.clone(),
            self.remote_dir.clone(),
            self.local_logs.clone(),
        ));
        self.logs = logs;
    }

    /// Whether the lock's servers run on hosts.
    pub fn active(&self) -> bool {
        !self.connections.is_empty()
    }

    /// This machine's address as the first host sees it (None without hosts). One address
    /// for all: the hosts of a deployment share the control node's network.
    pub fn control_addr(&self) -> Option<String> {
        self.connections
            .first()
            .and_then(|c| c.control_addr())
            .map(str::to_string)
    }

    /// Cuts each `from`'s host off from its `to`'s address and port (iptables there), until
    /// [`Hosts::heal_links`]; all at once. `Unsupported` for a pair not both on hosts.
    pub fn cut_links(&mut self, pairs: &[(String, String)]) -> Vec<Result<(), ClusterError>> {
        let planned = pairs
            .iter()
            .map(|(from, to)| {
                let on_hosts = || ClusterError::Unsupported {
                    action: "cut the link of",
                    node: from.clone(),
                    reason: format!("{from} and {to} are not both servers on hosts"),
                };
                let index = self.index(from).ok_or_else(on_hosts)?;
                let target = self
                    .index(to)
                    .map(|i| &self.placed[i])
                    .ok_or_else(on_hosts)?;
                let (addr, ports) = (target.addr.as_str(), target.peer_ports.clone());
                let host = self.placed[index].host;
                // The rules drop whatever leaves that host for `to`: a member sharing the
                // host with `from` would lose its link to `to` as well.
                if self.elects {
                    let shared = self
                        .placed
                        .iter()
                        .find(|p| p.host == host && p.name != *from && p.name != *to);
                    if let Some(other) = shared {
                        return Err(ClusterError::Unsupported {
                            action: "cut the link of",
                            node: from.clone(),
                            reason: format!(
                                "{} shares its host, and a cut by address would cut its link \
                                 to {to} too: give each member a host of its own",
                                other.name
                            ),
                        });
                    }
                }
                let list: Vec<String> = ports.iter().map(u16::to_string).collect();
                Ok(PlannedCut {
                    pair: (from.clone(), to.clone()),
                    host,
                    what: format!("the link to {addr}:{}", list.join(",")),
                    rules: cut::link_rules(self.tag(), addr, &ports),
                })
            })
            .collect();
        self.start_cuts(planned)
    }

    /// Cuts `client` (this machine's connections from the source ports `ports`) off from
    /// each server of `servers`, with iptables on that server's host, until
    /// [`Hosts::heal_links`] of (`client`, server); all at once. `Unsupported` for a server
    /// not on a host.
    pub fn cut_client(
        &mut self,
        client: &str,
        ports: &RangeInclusive<u16>,
        servers: &[String],
    ) -> Vec<Result<(), ClusterError>> {
        let planned = servers
            .iter()
            .map(|to| {
                let index = self.index(to).ok_or_else(|| ClusterError::Unsupported {
                    action: "cut a client off from",
                    node: to.clone(),
                    reason: format!("{to} is not a server on a host"),
                })?;
                let server = &self.placed[index];
                let host = server.host;
                let ssh = &self.connections[host];
                let control = ssh.control_addr().ok_or_else(|| {
                    ssh.error(
                        format!("cut {client} off from {to}"),
                        "the host did not say which address we reach it from",
                    )
                })?;
                Ok(PlannedCut {
                    pair: (client.to_string(), to.clone()),
                    host,
                    what: format!(
                        "{client} (ports {}-{}) off from {to}",
                        ports.start(),
                        ports.end()
                    ),
                    rules: cut::client_rules(self.tag(), control, ports, &server.addr, server.port),
                })
            })
            .collect();
        self.start_cuts(planned)
    }

    /// Adds the rules of every planned cut, one thread per cut (each is an SSH session
    /// that must say `cut`), and keeps those that hold.
    fn start_cuts(
        &mut self,
        planned: Vec<Result<PlannedCut, ClusterError>>,
    ) -> Vec<Result<(), ClusterError>> {
        let connections = &self.connections;
        let started = each_at_once(planned, "a cut", |_, p| {
            let p = p?;
            let cut = Cut::start(&connections[p.host], &p.what, &p.rules)?;
            Ok((p, cut))
        });
        started
            .into_iter()
            .map(|started| {
                let (p, cut) = started?;
                self.cuts.push((p.pair, cut));
                Ok(())
            })
            .collect()
    }

    fn index(&self, name: &str) -> Option<usize> {
        self.placed.iter().position(|p| p.name == name)
    }

    /// The comment on the run's iptables rules: its folder's name, unique per run.
    fn tag(&self) -> &str {
        self.remote_dir.rsplit('/').next().unwrap_or("lockaudit")
    }

    /// Heals the links of `pairs` that [`Hosts::cut_links`] or [`Hosts::cut_client`] cut,
    /// all at once; for each, false if it was not cut or its host did not confirm.
    pub fn heal_links(&mut self, pairs: &[(String, String)]) -> Vec<bool> {
        let cuts: Vec<Option<Cut>> = pairs
            .iter()
            .map(|pair| {
                let i = self.cuts.iter().position(|(p, _)| p == pair)?;
                Some(self.cuts.remove(i).1)
            })
            .collect();
        std::thread::scope(|scope| {
            let handles: Vec<_> = cuts
                .into_iter()
                .map(|cut| scope.spawn(move || cut.is_some_and(Cut::heal)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(false))
                .collect()
        })
    }

    /// Every link still cut, healed (the end of a run).
    pub fn heal_all_links(&mut self) -> Vec<(String, String)> {
        let pairs: Vec<(String, String)> = self.cuts.iter().map(|(p, _)| p.clone()).collect();
        self.heal_links(&pairs);
        pairs
    }

    /// The end of a run, once every node has stopped: links healed, each node's log
    /// copied to `<run>/redis/<name>.log` (one command per host, all hosts at once), and
    /// the run's files removed from the hosts.
    pub fn shutdown(&mut self) {
        self.heal_all_links();
        let begun = Instant::now();
        let deadline = begun + super::ssh::COMMAND_TIMEOUT;
        host_logs::fetch(&self.logs, &self.connections, &self.local_logs, deadline);
        self.remove_files();
        tracing::info!(elapsed = ?begun.elapsed(), "logs fetched from the hosts, files removed");
    }

    /// Removes the run's folder from every host: it holds only what this run made (its name
    /// has a fresh random token), a server that failed to start included.
    fn remove_files(&mut self) {
        for ssh in &self.connections {
            if let Err(e) = ssh.run("remove the run folder", &remove_command(&self.remote_dir)) {
                tracing::warn!("{e}");
            }
        }
        // Nothing left on the hosts for a Ctrl-C to bring back.
        self.interrupt = None;
    }
}

impl Drop for Hosts {
    /// Removes the run's files (the nodes, dropped before, have ended with their
    /// sessions), then closes the connections.
    fn drop(&mut self) {
        self.heal_all_links();
        self.remove_files();
        self.connections.clear();
        if let Some((dir, true)) = self.ssh_dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The run's `ssh` folder (control sockets, known_hosts, the masters' logs), kept with the
/// run; or a private one in the temporary folder, removed at the end, when the run's path
/// is too long for a socket ([`socket_fits`]).
fn make_ssh_dir(run: &Path) -> Result<(PathBuf, bool), ClusterError> {
    let in_run = run.join("ssh");
    let absolute = std::path::absolute(&in_run).unwrap_or_else(|_| in_run.clone());
    let (dir, temporary) = if socket_fits(&absolute) {
        (absolute, false)
    } else {
        (
            std::env::temp_dir().join(format!("la-ssh-{}", token(8))),
            true,
        )
    };
    // 0700 from the start: the control sockets open a session on every host.
    crate::private::create_dir(&dir).map_err(|e| ClusterError::io("create", &dir, e))?;
    Ok((dir, temporary))
}

/// Whether the control sockets fit in `dir`: a Unix socket's path is at most 107 bytes, and
/// ssh binds its master's socket first as `<ControlPath>.<16 random characters>`, then
/// renames it.
fn socket_fits(dir: &Path) -> bool {
    const SUN_PATH_MAX: usize = 107;
    const SSH_TEMPORARY_SUFFIX: usize = ".0123456789abcdef".len();
    dir.as_os_str().len() + "/m9999".len() + SSH_TEMPORARY_SUFFIX <= SUN_PATH_MAX
}

fn token(len: usize) -> String {
    rand::rng()
        .sample_iter(&rand::distr::Alphanumeric)
        .take(len)
        .map(char::from)
        .collect::<String>()
        .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_sockets_go_to_a_short_private_folder_when_the_run_s_is_too_deep_for_ssh() {
        let root = tempfile::tempdir().unwrap();
        // ssh's temporary socket name is 17 bytes longer than its ControlPath: a folder
        // whose `m0` socket fits in 107 bytes but not with that suffix must not be used.
        let pad = 107 - "/".len() - "/ssh/m9999".len() - 17 - root.path().as_os_str().len();
        let fits = root.path().join("r".repeat(pad));
        let deep = root.path().join("r".repeat(pad + 1));
        assert!(socket_fits(&fits.join("ssh")));
        assert!(!socket_fits(&deep.join("ssh")));
        std::fs::create_dir(&fits).unwrap();
        std::fs::create_dir(&deep).unwrap();

        let (dir, temporary) = make_ssh_dir(&fits).unwrap();
        assert_eq!(
            (dir.as_path(), temporary),
            (fits.join("ssh").as_path(), false)
        );
        let (dir, temporary) = make_ssh_dir(&deep).unwrap();
        assert!(temporary && socket_fits(&dir), "{}", dir.display());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
        std::fs::remove_dir(&dir).unwrap();
    }
}
