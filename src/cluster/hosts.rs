//! The lock's servers on other hosts: one SSH connection per host, the topology's servers
//! placed on them (node i on host i mod hosts), started primaries first, replicas in sync,
//! then a Sentinel topology's sentinels (numbered after the servers) once they know the
//! whole deployment, or a Redis Cluster's nodes (or etcd's members, or ZooKeeper's servers)
//! all at once and formed at the hosts' addresses; at the end stopped (sentinels first),
//! their logs fetched into the run folder and their files removed, so nothing of the run
//! stays on a host.

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use rand::Rng;

use super::binaries::{self, ZooKeeperOnHost};
use super::clock::Libfaketime;
use super::cut::{self, Cut};
use super::error::ClusterError;
use super::exit::Exit;
use super::host_logs::{self, HostLog};
use super::member::{OnHost, Service};
use super::on_exit;
use super::probe;
use super::remote::{RemoteConfig, RemoteServer, Watch};
use super::sentinel;
use super::sharded::{self, Member};
use super::ssh::{NodeEntry, Ssh, SshOptions, SshTarget};
use super::{etcd, zookeeper};
use super::{ClusterSpec, Topology};

/// The first port of the lock's servers on the hosts when no base port is given; node i
/// listens on this + i (unique per run, so nodes may share a host).
const DEFAULT_BASE_PORT: u16 = 7400;

/// How long replicas may take to report their link to the primary up.
const SYNC_TIMEOUT: Duration = Duration::from_secs(15);

/// The servers on hosts and the connections they run over.
#[derive(Debug, Default)]
pub struct Hosts {
    /// The lock's servers, then a Sentinel topology's sentinels (`RemoteServer::is_sentinel`).
    pub servers: Vec<RemoteServer>,
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
    /// The logs that job fetches.
    logs: Vec<HostLog>,
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

/// Connects to every host of `spec` and starts the topology's lock servers there.
pub async fn start(
    spec: &ClusterSpec,
    password: &str,
    lock_nodes: usize,
    primaries: usize,
) -> Result<Hosts, ClusterError> {
    let mut hosts = Hosts {
        servers: Vec::new(),
        cuts: Vec::new(),
        connections: Vec::new(),
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
    let preload = if spec.fake_clocks {
        Some(Libfaketime::find()?)
    } else {
        None
    };
    if matches!(spec.topology, Topology::Etcd | Topology::Zookeeper) {
        start_members(&mut hosts, spec, password).await?;
        return Ok(hosts);
    }
    let base = spec.base_port.unwrap_or(DEFAULT_BASE_PORT);
    // A Redis Cluster's nodes all start as masters (`primaries` is all of them); the
    // cluster then makes the last `shards` replicas.
    let cluster_mode = spec.topology == Topology::Cluster;
    let masters = if cluster_mode { spec.shards } else { primaries };
    let config = |i: usize,
                  replica_of: Option<(String, u16)>|
     -> Result<RemoteConfig, ClusterError> {
        let ssh = &hosts.connections[i % hosts.connections.len()];
        let port = u16::try_from(usize::from(base) + i)
            .map_err(|_| ClusterError::InvalidSpec(format!("port {base} + {i} is past 65535")))?;
        let name = if i < masters {
            format!("master-{i}")
        } else {
            format!("replica-{i}")
        };
        Ok(RemoteConfig {
            name,
            addr: ssh.host_addr().to_string(),
            port,
            dir: hosts.remote_dir.clone(),
            password: password.to_string(),
            persistence: spec.persistence,
            replica_of,
            fake_clock: preload.clone(),
            binary: server_binary(spec, ssh),
            sentinel: None,
            cluster_node_timeout_ms: cluster_mode.then_some(super::CLUSTER_NODE_TIMEOUT_MS),
            member: None,
        })
        .and_then(|config| match config.bus_port() {
            None if cluster_mode => Err(ClusterError::InvalidSpec(format!(
                "the bus port of {} ({port} + 10000) is past 65535: a lower --base-port",
                config.name
            ))),
            _ => Ok(config),
        })
    };
    let mut configs = Vec::new();
    for i in 0..primaries {
        configs.push(config(i, None)?);
    }
    let primary = configs
        .first()
        .map(|c| (c.addr.clone(), c.port))
        .ok_or_else(|| ClusterError::InvalidSpec("no primary".into()))?;
    for i in primaries..lock_nodes {
        configs.push(config(i, Some(primary.clone()))?);
    }
    // From here a Ctrl-C leaves servers' logs and files on the hosts: fetched and removed
    // then, as at a normal end.
    let logs = configs
        .iter()
        .enumerate()
        .map(|(i, c)| HostLog {
            ssh: hosts.connections[i % hosts.connections.len()].clone(),
            name: c.name.clone(),
            path: c.log(),
        })
        .collect();
    hosts.on_interrupt(logs, spec);
    // The primaries together, then the replicas together (a replica started before its
    // primary listens retries only once a second). What started is kept in `hosts`, whose
    // drop kills it if another start failed.
    let replicas = configs.split_off(primaries);
    for group in [configs, replicas] {
        let placed = group
            .into_iter()
            .enumerate()
            .map(|(i, config)| {
                let index = hosts.servers.len() + i;
                (
                    config,
                    hosts.connections[index % hosts.connections.len()].clone(),
                )
            })
            .collect();
        hosts.start_together(placed).await?;
    }
    wait_replicas(&hosts.servers[primaries..], password).await?;
    if cluster_mode {
        form_cluster(&hosts, spec.shards, password).await?;
    }
    if spec.topology == Topology::Sentinel {
        start_sentinels(&mut hosts, spec, password, lock_nodes - primaries).await?;
    }
    Ok(hosts)
}

/// etcd's members or ZooKeeper's servers, member i on host i mod hosts, each on its host's
/// address (client port base + i, peer port base + members + i, and ZooKeeper's election
/// port base + 2 × members + i), its data folder in the run's folder there; all at once
/// (each waits for a quorum), then the run's password put to use as locally: etcd's
/// authentication on (`etcd::start`), the root znode given to the run's digest user
/// (`zookeeper::start_ensemble`).
async fn start_members(
    hosts: &mut Hosts,
    spec: &ClusterSpec,
    password: &str,
) -> Result<(), ClusterError> {
    let base = usize::from(spec.base_port.unwrap_or(DEFAULT_BASE_PORT));
    let zookeeper = spec.topology == Topology::Zookeeper;
    let (members, name): (usize, fn(usize) -> String) = if zookeeper {
        (zookeeper::SERVERS, zookeeper::server_name)
    } else {
        (etcd::MEMBERS, etcd::member_name)
    };
    let port = |i: usize| {
        u16::try_from(base + i).map_err(|_| {
            ClusterError::InvalidSpec(format!(
                "port {base} + {i} is past 65535: a lower --base-port"
            ))
        })
    };
    let mut placed = Vec::with_capacity(members);
    for i in 0..members {
        let ssh = hosts.connections[i % hosts.connections.len()].clone();
        let config = RemoteConfig {
            name: name(i),
            addr: ssh.host_addr().to_string(),
            port: port(i)?,
            dir: hosts.remote_dir.clone(),
            password: password.to_string(),
            persistence: true,
            replica_of: None,
            fake_clock: None,
            binary: String::new(),
            sentinel: None,
            cluster_node_timeout_ms: None,
            member: None,
        };
        placed.push((config, ssh));
    }
    let peer_port = |i: usize| port(members + i);
    if zookeeper {
        let programs = find_zookeeper(&hosts.connections)?;
        let election_port = |i: usize| port(2 * members + i);
        zookeeper_servers(&mut placed, &programs, &peer_port, &election_port)?;
    } else {
        etcd_members(&mut placed, &peer_port)?;
    }
    let logs = placed
        .iter()
        .map(|(c, ssh)| HostLog {
            ssh: ssh.clone(),
            name: c.name.clone(),
            path: c.log(),
        })
        .collect();
    hosts.on_interrupt(logs, spec);
    let begun = Instant::now();
    hosts.start_together(placed).await?;
    tracing::info!(elapsed = ?begun.elapsed(), topology = ?spec.topology, "members on hosts ready");
    let clients: Vec<(&str, u16)> = hosts.servers.iter().map(|s| (s.host(), s.port())).collect();
    let (action, done) = if zookeeper {
        let connect = zookeeper::connect_string(clients.iter().copied());
        (
            "give the root znode to the run's user",
            zookeeper::restrict_to_the_run(&connect, password).await,
        )
    } else {
        let endpoints: Vec<String> = clients
            .iter()
            .map(|(host, port)| format!("http://{host}:{port}"))
            .collect();
        (
            "turn on etcd's authentication",
            etcd::authenticate(&endpoints, password).await,
        )
    };
    let addresses: Vec<String> = clients.iter().map(|(h, p)| format!("{h}:{p}")).collect();
    done.map_err(|reason| ClusterError::Remote {
        host: addresses.join(","),
        action: action.into(),
        reason,
    })
}

/// etcd's flags for each placed member: every member's peer URL at its host's address, a
/// cluster token of the run's own, the host's own etcd program.
fn etcd_members(
    placed: &mut [(RemoteConfig, Arc<Ssh>)],
    peer_port: &dyn Fn(usize) -> Result<u16, ClusterError>,
) -> Result<(), ClusterError> {
    let mut peers = Vec::with_capacity(placed.len());
    for (i, (config, _)) in placed.iter().enumerate() {
        peers.push((
            config.name.clone(),
            format!("http://{}:{}", config.addr, peer_port(i)?),
        ));
    }
    let initial_cluster: Vec<String> = peers.iter().map(|(n, url)| format!("{n}={url}")).collect();
    let initial_cluster = initial_cluster.join(",");
    let cluster_token = format!("lockaudit-{}", token(16));
    for (i, ((config, ssh), (_, peer))) in placed.iter_mut().zip(&peers).enumerate() {
        config.binary = ssh.target().etcd.clone().unwrap_or_else(|| "etcd".into());
        config.member = Some(OnHost {
            service: Service::Etcd,
            args: etcd::member_args(&etcd::MemberFlags {
                name: &config.name,
                data_dir: &config.data_dir(),
                client: &format!("http://{}:{}", config.addr, config.port),
                peer,
                advertised_peer: peer,
                initial_cluster: &initial_cluster,
                cluster_token: &cluster_token,
            }),
            peer_ports: vec![peer_port(i)?],
            config: None,
            data_files: Vec::new(),
        });
    }
    Ok(())
}

/// ZooKeeper's config and JVM for each placed server, as locally (`zookeeper::start`) but
/// at the hosts' addresses: each config names every server's own quorum and election
/// ports there, and `myid` is its place + 1. `programs`: each connection's java and jar.
/// No peer proxy stands between the servers here (a cut between them is iptables on their
/// hosts), so the address a server names in its election hello is the one it is called
/// back on, and `zk_election`'s rewriting has nothing to do.
fn zookeeper_servers(
    placed: &mut [(RemoteConfig, Arc<Ssh>)],
    programs: &[ZooKeeperOnHost],
    quorum_port: &dyn Fn(usize) -> Result<u16, ClusterError>,
    election_port: &dyn Fn(usize) -> Result<u16, ClusterError>,
) -> Result<(), ClusterError> {
    let addrs: Vec<String> = placed.iter().map(|(c, _)| c.addr.clone()).collect();
    let mut peers = Vec::with_capacity(placed.len());
    for (i, addr) in addrs.iter().enumerate() {
        peers.push(zookeeper::Peer {
            addr,
            quorum: quorum_port(i)?,
            election: election_port(i)?,
        });
    }
    for (i, (config, _)) in placed.iter_mut().enumerate() {
        let program = &programs[i % programs.len()];
        config.binary = program.java.clone();
        config.member = Some(OnHost {
            service: Service::ZooKeeper,
            args: zookeeper::server_args(program.classpath.clone(), config.conf()),
            peer_ports: vec![peers[i].quorum, peers[i].election],
            config: Some(zookeeper::config_text(
                &config.data_dir(),
                (&config.addr, config.port),
                &peers,
            )),
            data_files: vec![("myid".into(), format!("{}\n", i + 1))],
        });
    }
    Ok(())
}

/// ZooKeeper's java and jar on every host, looked for on all at once before anything starts
/// there: a host without them is named before any server runs.
fn find_zookeeper(connections: &[Arc<Ssh>]) -> Result<Vec<ZooKeeperOnHost>, ClusterError> {
    each_at_once(connections, "looking for ZooKeeper on a host", |_, ssh| {
        binaries::zookeeper_on_host(ssh)
    })
    .into_iter()
    .collect()
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
async fn form_cluster(hosts: &Hosts, shards: usize, password: &str) -> Result<(), ClusterError> {
    let members: Vec<Member> = hosts
        .servers
        .iter()
        .map(|s| Member {
            name: s.name().to_string(),
            host: s.host().to_string(),
            port: s.port(),
            bus_port: s.config.bus_port().unwrap_or(0),
        })
        .collect();
    let begun = Instant::now();
    sharded::form(&members, shards, password)
        .await
        .map_err(|e| match e {
            ClusterError::Form { node, port, reason } => {
                let at = hosts.servers.iter().position(|s| s.name() == node);
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

/// `redis-server` on the hosts: `--redis-server`, else the host's PATH.
/// The redis-server program on the host of `ssh`: the host's own setting, else the run's,
/// else the one on its PATH.
fn server_binary(spec: &ClusterSpec, ssh: &Ssh) -> String {
    ssh.target()
        .redis_server
        .clone()
        .or_else(|| spec.redis_server.as_ref().map(|p| p.display().to_string()))
        .unwrap_or_else(|| "redis-server".into())
}

/// The sentinels, numbered and placed after the lock's servers (sentinel-i is node
/// `servers + i`: its port and host), watching the primary by its host's address. Each
/// config names the others, as locally (see `sentinel::start_sentinels`); returns once
/// every sentinel knows the primary, its `replicas` in sync and the other sentinels.
async fn start_sentinels(
    hosts: &mut Hosts,
    spec: &ClusterSpec,
    password: &str,
    replicas: usize,
) -> Result<(), ClusterError> {
    let base = usize::from(spec.base_port.unwrap_or(DEFAULT_BASE_PORT));
    let first = hosts.servers.len();
    let primary = hosts
        .servers
        .first()
        .map(|s| (s.host().to_string(), s.port()))
        .ok_or_else(|| ClusterError::InvalidSpec("no primary".into()))?;
    // `redis-sentinel` if given, else each host's redis-server in sentinel mode (the same
    // program: Debian packages the name apart).
    let binary = |ssh: &Ssh| {
        spec.redis_sentinel
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| server_binary(spec, ssh))
    };
    let mut members = Vec::with_capacity(super::redis::SENTINELS);
    for i in 0..super::redis::SENTINELS {
        let index = first + i;
        let ssh = hosts.connections[index % hosts.connections.len()].clone();
        let port = u16::try_from(base + index).map_err(|_| {
            ClusterError::InvalidSpec(format!("port {base} + {index} is past 65535"))
        })?;
        members.push((ssh, port, sentinel::random_id()));
    }
    let placed = members.iter().enumerate().map(|(i, (ssh, port, id))| {
        let peers = members
            .iter()
            .filter(|(_, p, _)| p != port)
            .map(|(s, p, id)| (s.host_addr().to_string(), *p, id.clone()))
            .collect();
        let config = RemoteConfig {
            name: format!("sentinel-{i}"),
            addr: ssh.host_addr().to_string(),
            port: *port,
            dir: hosts.remote_dir.clone(),
            password: password.to_string(),
            persistence: false,
            replica_of: None,
            fake_clock: None,
            binary: binary(ssh),
            cluster_node_timeout_ms: None,
            member: None,
            sentinel: Some(Watch {
                id: id.clone(),
                primary: primary.clone(),
                peers,
            }),
        };
        (config, ssh.clone())
    });
    let configs: Vec<_> = placed.collect();
    // The sentinels' logs come back on Ctrl-C too, with the servers'.
    let mut logs = hosts.logs.clone();
    logs.extend(configs.iter().map(|(config, ssh)| HostLog {
        ssh: ssh.clone(),
        name: config.name.clone(),
        path: config.log(),
    }));
    hosts.on_interrupt(logs, spec);
    hosts.start_together(configs).await?;
    let addrs: Vec<(&str, u16)> = hosts.servers[first..]
        .iter()
        .map(|s| (s.host(), s.port()))
        .collect();
    let patience = SYNC_TIMEOUT;
    if let Err((i, lacked)) = sentinel::wait_all_aware(&addrs, password, replicas, patience).await {
        return Err(hosts.servers[first + i].start_error(format!(
            "it did not know the whole deployment within {patience:?}: {lacked}"
        )));
    }
    Ok(())
}

/// How many lock servers the topology has, and how many of them start as primaries (a
/// cluster's nodes, etcd's members and ZooKeeper's servers all do); an error for a service
/// whose row says it cannot run on hosts, and for a topology without masters.
pub fn layout(spec: &ClusterSpec) -> Result<(usize, usize), ClusterError> {
    if let Some(why) = super::service(spec.topology).not_on_hosts {
        return Err(ClusterError::Unsupported {
            action: "run",
            node: format!("the {:?} topology on hosts", spec.topology).to_lowercase(),
            reason: why.into(),
        });
    }
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
        Topology::Postgres => Ok((1, 1)),
    }
}

async fn wait_replicas(replicas: &[RemoteServer], password: &str) -> Result<(), ClusterError> {
    let deadline = Instant::now() + SYNC_TIMEOUT;
    for replica in replicas {
        loop {
            let up = match probe::connect_to(replica.host(), replica.port(), Some(password)).await {
                Ok(mut conn) => probe::info(&mut conn, "replication")
                    .await
                    .ok()
                    .and_then(|info| info.get("master_link_status").cloned())
                    .is_some_and(|s| s == "up"),
                Err(_) => false,
            };
            if up {
                break;
            }
            if Instant::now() > deadline {
                return Err(ClusterError::Remote {
                    host: replica.host().to_string(),
                    action: format!("sync {}", replica.name()),
                    reason: format!("its link to the primary was not up within {SYNC_TIMEOUT:?}"),
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

impl Hosts {
    /// Starts these servers at once, each on its host. Every one that started is kept (so
    /// that the drop stops it) even when another did not; the first failure is returned.
    async fn start_together(
        &mut self,
        placed: Vec<(RemoteConfig, Arc<Ssh>)>,
    ) -> Result<(), ClusterError> {
        let starts = placed
            .into_iter()
            .map(|(config, ssh)| RemoteServer::start(config, ssh));
        let mut failed = None;
        for started in futures_util::future::join_all(starts).await {
            match started {
                Ok(server) => self.servers.push(server),
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// (Re)registers the Ctrl-C job for these logs and the run's folders on the hosts.
    fn on_interrupt(&mut self, logs: Vec<HostLog>, spec: &ClusterSpec) {
        // The job it replaces is unregistered when dropped here.
        self.interrupt = Some(host_logs::on_interrupt(
            logs.clone(),
            self.connections.clone(),
            self.remote_dir.clone(),
            spec.dir.join("redis"),
        ));
        self.logs = logs;
    }

    /// This machine's address as the first host sees it (None without hosts). One address
    /// for all: the hosts of a deployment share the control node's network.
    pub fn control_addr(&self) -> Option<String> {
        self.connections
            .first()
            .and_then(|c| c.control_addr())
            .map(str::to_string)
    }

    /// Kills the running servers of `names` in parallel, one thread per server (each kill
    /// waits for an SSH round trip). Returns the names killed.
    pub fn kill_many(&mut self, names: &[String]) -> Vec<String> {
        std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .servers
                .iter_mut()
                .filter(|s| names.iter().any(|n| n == s.name()) && s.pid().is_some())
                .map(|s| scope.spawn(move || s.kill().map(|_| s.name().to_string())))
                .collect();
            handles
                .into_iter()
                .filter_map(|h| h.join().ok().flatten())
                .collect()
        })
    }

    /// Sends `signal` to the running servers of `names` at once, one thread per server (each
    /// signal is an SSH round trip: one after the other, the last node of a fault would be
    /// hit several round trips after the first). See [`Hosts::on_each`].
    pub fn signal_many(&self, names: &[String], signal: Signal) -> Vec<Acted> {
        self.on_each(names, |s| s.signal(signal))
    }

    /// Moves the clocks of the servers of `names` at once (see [`Hosts::signal_many`]).
    pub fn set_clock_offset_many(&self, names: &[String], offset_ms: i64) -> Vec<Acted> {
        self.on_each(names, |s| s.set_clock_offset(offset_ms))
    }

    /// Runs `action` on each server of `names` in a thread of its own; each outcome comes
    /// with when its command returned, from the call's start (how far apart the nodes of one
    /// fault were hit).
    fn on_each(
        &self,
        names: &[String],
        action: impl Fn(&RemoteServer) -> Result<(), ClusterError> + Sync,
    ) -> Vec<Acted> {
        let begun = Instant::now();
        let action = &action;
        std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .servers
                .iter()
                .filter(|s| names.iter().any(|n| n == s.name()))
                .map(|s| {
                    scope.spawn(move || Acted {
                        name: s.name().to_string(),
                        result: action(s),
                        after: begun.elapsed(),
                    })
                })
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        })
    }

    /// Restarts the stopped servers of `names` concurrently.
    pub async fn restart_many(
        &mut self,
        names: &[String],
        keep_data: bool,
    ) -> Vec<(String, Result<(), ClusterError>)> {
        let starts = self
            .servers
            .iter_mut()
            .filter(|s| names.iter().any(|n| n == s.name()) && s.pid().is_none())
            .map(|s| async move {
                let result = s.restart(keep_data).await;
                (s.name().to_string(), result)
            });
        futures_util::future::join_all(starts).await
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
                let target = self.server(to).ok_or_else(on_hosts)?;
                let (addr, ports) = (target.host(), target.config.link_ports());
                let host = index % self.connections.len();
                // The rules drop whatever leaves that host for `to`: a member sharing the
                // host with `from` would lose its link to `to` as well.
                if target.config.member.is_some() {
                    let shared = self.servers.iter().enumerate().find(|(j, s)| {
                        j % self.connections.len() == host && s.name() != from && s.name() != to
                    });
                    if let Some((_, other)) = shared {
                        return Err(ClusterError::Unsupported {
                            action: "cut the link of",
                            node: from.clone(),
                            reason: format!(
                                "{} shares its host, and a cut by address would cut its link \
                                 to {to} too: give each member a host of its own",
                                other.name()
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
                let server = &self.servers[index];
                let host = index % self.connections.len();
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
                    rules: cut::client_rules(
                        self.tag(),
                        control,
                        ports,
                        server.host(),
                        server.port(),
                    ),
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
        self.servers.iter().position(|s| s.name() == name)
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

    pub fn server(&self, name: &str) -> Option<&RemoteServer> {
        self.servers.iter().find(|s| s.name() == name)
    }

    pub fn server_mut(&mut self, name: &str) -> Option<&mut RemoteServer> {
        self.servers.iter_mut().find(|s| s.name() == name)
    }

    /// Stops every server (SIGTERM, then SIGKILL after `grace`), the sentinels first (so
    /// that none starts a failover while the primary goes), copies each log to
    /// `<logs>/<name>.log` and removes the run's files from the hosts.
    pub fn shutdown(&mut self, grace: Duration, logs: &Path) -> Vec<(String, Exit)> {
        self.heal_all_links();
        let begun = Instant::now();
        let (sentinels, servers): (Vec<_>, Vec<_>) =
            self.servers.iter_mut().partition(|s| s.is_sentinel());
        let mut ended = stop_all(sentinels, grace, logs);
        ended.extend(stop_all(servers, grace, logs));
        let stopped = begun.elapsed();
        self.remove_files();
        tracing::info!(?stopped, elapsed = ?begun.elapsed(), "servers on hosts stopped, logs fetched, files removed");
        ended
    }

    /// Removes the run's folder from every host: it holds only what this run made (its name
    /// has a fresh random token), a server that failed to start included.
    fn remove_files(&mut self) {
        for ssh in &self.connections {
            if let Err(e) = ssh.run(
                "remove the run folder",
                &format!("rm -rf {}", crate::shell::quote(&self.remote_dir)),
            ) {
                tracing::warn!("{e}");
            }
        }
        self.servers.clear();
        // Nothing left on the hosts for a Ctrl-C to bring back.
        self.interrupt = None;
    }
}

impl Drop for Hosts {
    /// Kills what still runs (each server's drop) and removes the run's files, then closes
    /// the connections.
    fn drop(&mut self) {
        self.heal_all_links();
        // The sentinels (last) first: none then starts a failover while the others go.
        for server in self.servers.iter_mut().rev() {
            server.kill();
        }
        self.remove_files();
        self.connections.clear();
        if let Some((dir, true)) = self.ssh_dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Stops `servers` and copies their logs to `<logs>/<name>.log`, all at once: each stop
/// and each log is an SSH round trip or more.
fn stop_all(servers: Vec<&mut RemoteServer>, grace: Duration, logs: &Path) -> Vec<(String, Exit)> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = servers
            .into_iter()
            .map(|server| {
                scope.spawn(move || {
                    let exit = server.stop(grace).unwrap_or(Exit::Unknown);
                    match server.read_log() {
                        Ok(text) => {
                            let path = logs.join(format!("{}.log", server.name()));
                            if let Err(e) = crate::outfile::write(&path, text) {
                                tracing::warn!("cannot write {}: {e}", path.display());
                            }
                        }
                        Err(e) => tracing::warn!("{e}"),
                    }
                    (server.name().to_string(), exit)
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    })
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

/// For messages and tests: parses `ssh://` URLs, naming the one that is wrong.
pub fn parse_targets(nodes: &[NodeEntry]) -> Result<Vec<SshTarget>, ClusterError> {
    nodes.iter().map(NodeEntry::target).collect()
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
