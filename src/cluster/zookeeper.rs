//! A ZooKeeper ensemble that lockaudit starts and owns: three servers (`zk-0`..`zk-2`) of
//! Debian's `zookeeper` (3.8) on the installed Java, each a foreground JVM bound to
//! 127.0.0.1 on a client port, a quorum port and an election port, its config, data folder
//! and log in the run folder (`<run>/zookeeper/<name>.cfg`, `<name>/`, `<name>.log`), behind
//! the service seam ([`ServiceNode`]).
//!
//! Timing: `tickTime` 200 ms (ZooKeeper's default is 2000 ms). The servers grant sessions
//! of 2 to 20 ticks, 0.4–4 s, so that a run's 2 s session expires within seconds of a
//! client falling silent; a follower that hears nothing from its leader for `syncLimit` (5
//! ticks, 1 s) drops it and an election follows. The session tracker expires sessions in
//! buckets of one tick, so an expiry comes up to 200 ms after the timeout.
//!
//! The servers reach each other only through lockaudit's proxies ([`PeerLinks`]): each
//! server's config names its own quorum and election ports, which it binds, and the other
//! servers' proxies, so that the nemesis can cut servers apart one direction at a time
//! ([`ServiceNode::cut_from`]). The election proxies rewrite the hello a dialler names its
//! own address in (`zk_election`). The proxies start before the servers and outlive their
//! restarts.
//!
//! On SSH hosts (`hosts`) the servers are the same JVMs with the same config, each bound to
//! its host's address: they reach each other at their real addresses, and a cut between
//! them is iptables on their hosts (`cut`), so no peer proxy stands between them there and
//! no election hello needs rewriting: the address a dialler names is already the one it
//! is called back on.
//!
//! The AdminServer is off (it would take port 8080); the four-letter word `srvr`, which
//! says whether a server serves and as what (leader, follower), is the readiness and role
//! probe. Transaction logs are preallocated 1 MB at a time instead of 64 MB.
//!
//! Only the run can use it: once the ensemble serves, the root znode's ACL becomes the
//! run's digest user's ([`USER`], the run's generated password), and the run's clients,
//! authenticated as that user, create every znode with the same ACL (`creator_all`), so
//! that another local user who finds a client port can neither read nor write them, nor
//! create anything beside them. The four-letter word `srvr` stays open: it tells a
//! server's role and counts, no data. The password never reaches a server, here or on a
//! host: a client sends it when it authenticates, and the servers keep only its digest.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zookeeper_client as zk;

use super::binaries::ZooKeeperProgram;
use super::error::ClusterError;
use super::exit::Exit;
use super::instance::Instance;
use super::machine::{Launch, Local, Machine, Prepare};
use super::peer_links::{Hello, PeerLinks, PeerProxy};
use super::ports;
use super::service::ServiceNode;
use super::zk_election::ElectionHello;
use super::{Cluster, ClusterSpec, Topology};
pub use crate::topology::zookeeper::{
    connect_string, digest, MAX_SESSION_MS, MIN_SESSION_MS, TICK_MS, USER,
};

/// Servers of the ensemble: the smallest that survives the loss of one.
pub const SERVERS: usize = 3;

/// How long a start may take until a leader is elected and every server serves, here or
/// on a host. Three JVMs starting at once take 2-4 s on a quiet machine; a loaded CI
/// machine gets room.
pub(super) const READY_TIMEOUT: Duration = Duration::from_secs(40);

/// How many fresh sets of free ports a start tries when another process took one of ours.
const PORT_RETRIES: usize = 3;

/// Ports a start takes: per server a client port, a quorum and an election port, and a
/// proxy for each of those two.
pub const PORTS: usize = 5 * SERVERS;

/// The server's name (`zk-<i>`).
pub fn server_name(i: usize) -> String {
    format!("zk-{i}")
}

/// How to start (and restart) one server.
#[derive(Debug, Clone)]
struct ServerConfig {
    name: String,
    java: OsString,
    classpath: OsString,
    /// The data folder (`myid`, snapshots, transaction logs).
    dir: PathBuf,
    /// Its `myid`: its place among the servers, from 1.
    id: usize,
    config: PathBuf,
    log: PathBuf,
    client_port: u16,
    /// Where it listens for the others: (quorum, election).
    peer_ports: (u16, u16),
    /// Where the others reach it: its proxies' ports here, (quorum, election); its own
    /// ports on a host.
    proxy_ports: (u16, u16),
    /// Told the server's pid at each start, so that its proxies know its connections;
    /// None on a host, where its links are cut with iptables instead.
    links: Option<PeerLinks>,
    /// Where it runs.
    machine: Arc<dyn Machine>,
}

/// The arguments of `java` that run a server on `classpath` with the config file `config`
/// in the foreground, here or on a host. A small heap and the serial collector keep three
/// of them light on a shared machine; C1 only starts them faster; no perf-data file in /tmp.
pub(super) fn server_args<S: From<&'static str>>(classpath: S, config: S) -> Vec<S> {
    let mut args: Vec<S> = [
        "-Xms32m",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-XX:-UsePerfData",
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS",
        "-Dzookeeper.jmx.log4j.disable=true",
        "-cp",
    ]
    .map(S::from)
    .into();
    args.push(classpath);
    args.push(S::from("org.apache.zookeeper.server.quorum.QuorumPeerMain"));
    args.push(config);
    args
}

impl ServerConfig {
    /// The foreground JVM, its `myid` written first (`keep_data` false: its snapshots and
    /// transaction logs removed, as on a lost disk).
    fn launch(&self, keep_data: bool) -> Launch {
        let mut launch = Launch::new(&self.name, &self.java, &self.log).args(server_args(
            self.classpath.clone(),
            self.config.clone().into_os_string(),
        ));
        if !keep_data {
            launch
                .prepare
                .push(Prepare::Empty(self.dir.join("version-2")));
        }
        launch.prepare.push(Prepare::Make(self.dir.clone()));
        launch.prepare.push(Prepare::Write(
            self.dir.join("myid"),
            format!("{}\n", self.id),
        ));
        launch
    }

    async fn spawn(&self, keep_data: bool) -> Result<Instance, ClusterError> {
        let launch = self.launch(keep_data);
        let instance =
            Instance::launch(self.machine.clone(), self.client_port, &self.dir, &launch).await?;
        if let (Some(links), Some(pid)) = (&self.links, instance.pid()) {
            links.running(&self.name, pid);
        }
        Ok(instance)
    }
}

/// Where a server is reached: an address, a quorum port and an election port.
pub(super) struct Peer<'a> {
    pub addr: &'a str,
    pub quorum: u16,
    pub election: u16,
}

/// A server's config file, here or on a host: its data folder `dir`, where it listens for
/// clients (`client`: address and port), and where it finds each server by id (1-based,
/// ZooKeeper's `myid`), itself included: here its own listeners and the others' proxies, on
/// hosts every server's own address.
pub(super) fn config_text(dir: &str, client: (&str, u16), peers: &[Peer]) -> String {
    let (client_addr, client_port) = client;
    let mut text = format!(
        "tickTime={TICK_MS}\n\
         initLimit=10\n\
         syncLimit=5\n\
         minSessionTimeout={MIN_SESSION_MS}\n\
         maxSessionTimeout={MAX_SESSION_MS}\n\
         dataDir={dir}\n\
         clientPort={client_port}\n\
         clientPortAddress={client_addr}\n\
         admin.enableServer=false\n\
         4lw.commands.whitelist=srvr\n\
         preAllocSize=1024\n\
         maxClientCnxns=0\n"
    );
    for (i, peer) in peers.iter().enumerate() {
        text.push_str(&format!(
            "server.{}={}:{}:{}\n",
            i + 1,
            peer.addr,
            peer.quorum,
            peer.election
        ));
    }
    text
}

/// One running server and how to start it again.
#[derive(Debug)]
pub struct ZooKeeperServer {
    config: ServerConfig,
    instance: Instance,
    /// In front of its quorum and election listeners, for as long as it is part of the run
    /// (none on a host).
    _proxies: Option<[PeerProxy; 2]>,
}

#[async_trait]
impl ServiceNode for ZooKeeperServer {
    fn instance(&self) -> &Instance {
        &self.instance
    }

    fn instance_mut(&mut self) -> &mut Instance {
        &mut self.instance
    }

    fn kill(&mut self) -> Option<Exit> {
        self.instance.kill()
    }

    /// A JVM's orderly shutdown takes a second or more and the run does not use the data
    /// again; every transaction is fsynced before it is acknowledged, so a kill loses nothing.
    fn graceful_stop(&self) -> bool {
        false
    }

    /// The link from `from` to this server: `from`'s connections to its quorum and
    /// election proxies.
    fn cut_from(&mut self, from: &str) -> Result<(), ClusterError> {
        match &self.config.links {
            Some(links) => links.cut(from, &self.config.name),
            None => Err(ClusterError::Unsupported {
                action: "cut the link to",
                node: self.config.name.clone(),
                reason: format!("no link from {from} runs through lockaudit"),
            }),
        }
    }

    fn heal_from(&mut self, from: &str) -> bool {
        (self.config.links.as_ref()).is_some_and(|links| links.heal(from, &self.config.name))
    }

    fn peer_ports(&self) -> Vec<u16> {
        vec![self.config.peer_ports.0, self.config.peer_ports.1]
    }

    /// Snapshots and transaction logs are nobody's concern after the run; the log stays.
    /// (On a host the run's folder goes whole.)
    fn scratch(&self) -> Option<&Path> {
        self.config
            .links
            .as_ref()
            .map(|_| self.config.dir.as_path())
    }

    /// On its data it rejoins and catches up from the leader. Without (a lost disk), only its
    /// `myid` stays: it joins with nothing and the leader sends it a snapshot.
    async fn restart(&mut self, keep_data: bool) -> Result<(), ClusterError> {
        if self.instance.pid().is_some() {
            self.instance.kill();
        }
        let mut instance = self.config.spawn(keep_data).await?;
        // Alone it cannot serve: it is back once it serves as leader or follower (with the
        // others down it never does; give up at the deadline).
        let ready = wait_serving(&mut instance, self.config.client_port).await;
        self.instance = instance.kept_if(ready)?;
        Ok(())
    }
}

/// Starts `SERVERS` servers in `root` (`<run>/zookeeper`, emptied first) on free loopback
/// ports (or consecutive ones from `base_port`: client ports, then quorum and election
/// ports, then their proxies'), all at once, and waits until one leads and every one
/// serves.
pub async fn start(
    program: ZooKeeperProgram,
    root: &Path,
    base_port: Option<u16>,
) -> Result<Vec<ZooKeeperServer>, ClusterError> {
    let begun = Instant::now();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let choices = ports::plan(PORTS, base_port)?;
        let configs = configs(&program, root, &choices)?;
        let proxies = match proxies(&configs).await {
            Ok(proxies) => proxies,
            Err(_) if base_port.is_none() && attempt < PORT_RETRIES => continue,
            Err((config, port)) => {
                return Err(ClusterError::PortInUse {
                    node: config.name,
                    port,
                })
            }
        };
        match start_servers(&configs, proxies).await {
            Ok(servers) => {
                tracing::info!(elapsed = ?begun.elapsed(), "zookeeper ready");
                return Ok(servers);
            }
            Err(StartError::PortTaken(_)) if base_port.is_none() && attempt < PORT_RETRIES => {
                continue
            }
            Err(StartError::PortTaken(config)) => {
                return Err(ClusterError::PortInUse {
                    node: config.name,
                    port: config.client_port,
                })
            }
            Err(StartError::Failed(e)) => return Err(e),
        }
    }
}

fn configs(
    program: &ZooKeeperProgram,
    root: &Path,
    choices: &[ports::PortChoice],
) -> Result<Vec<ServerConfig>, ClusterError> {
    let port = |i: usize| {
        choices
            .get(i)
            .map(|c| c.port())
            .ok_or_else(|| ClusterError::InvalidSpec("port plan too short".into()))
    };
    let (mut listeners, mut proxies) = (Vec::new(), Vec::new());
    for i in 0..SERVERS {
        listeners.push((port(SERVERS + 2 * i)?, port(SERVERS + 2 * i + 1)?));
        proxies.push((port(3 * SERVERS + 2 * i)?, port(3 * SERVERS + 2 * i + 1)?));
    }
    let links = PeerLinks::default();
    let mut configs = Vec::with_capacity(SERVERS);
    for i in 0..SERVERS {
        let name = server_name(i);
        let dir = root.join(&name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| ClusterError::io("empty the data folder", &dir, e))?;
        }
        crate::private::create_dir(&dir)
            .map_err(|e| ClusterError::io("create the data folder", &dir, e))?;
        // Listed now, so that Ctrl-C during the start removes it too.
        super::leftovers::scratch(&dir);
        let client_port = port(i)?;
        let config = root.join(format!("{name}.cfg"));
        let peers: Vec<Peer> = (0..SERVERS)
            .map(|j| {
                let (quorum, election) = if j == i { listeners[j] } else { proxies[j] };
                Peer {
                    addr: "127.0.0.1",
                    quorum,
                    election,
                }
            })
            .collect();
        let text = config_text(
            &dir.display().to_string(),
            ("127.0.0.1", client_port),
            &peers,
        );
        std::fs::write(&config, text).map_err(|e| ClusterError::io("write", &config, e))?;
        // A fresh log too: a start that failed on a taken port is told apart by its log.
        let log = root.join(format!("{name}.log"));
        let _ = std::fs::remove_file(&log);
        configs.push(ServerConfig {
            name,
            java: program.java.clone().into_os_string(),
            classpath: program.classpath(),
            dir,
            id: i + 1,
            config,
            log,
            client_port,
            peer_ports: listeners[i],
            proxy_ports: proxies[i],
            links: Some(links.clone()),
            machine: Arc::new(Local),
        });
    }
    Ok(configs)
}

/// `SERVERS` servers on `machines` (server i on machine i mod their number, with the java
/// and class path found there), each on its machine's address: client port `base` + i,
/// quorum and election ports `base` + `SERVERS` + i and `base` + 2 × `SERVERS` + i,
/// reached directly (no proxy: links are cut on the hosts, and the address a server names
/// in its election hello is the one it is called back on), data, config and log in `dir`
/// there; once they serve, the root znode given to the run's digest user, as here.
pub(super) async fn start_on(
    machines: &[(Arc<dyn Machine>, OsString, OsString)],
    dir: &Path,
    base: u16,
    password: &str,
) -> Result<Vec<ZooKeeperServer>, ClusterError> {
    let port = |i: usize| ports::nth(base, i);
    let placed = |i: usize| &machines[i % machines.len()];
    let mut listeners = Vec::with_capacity(SERVERS);
    for i in 0..SERVERS {
        listeners.push((port(SERVERS + i)?, port(2 * SERVERS + i)?));
    }
    let peers: Vec<Peer> = (0..SERVERS)
        .map(|i| Peer {
            addr: placed(i).0.addr(),
            quorum: listeners[i].0,
            election: listeners[i].1,
        })
        .collect();
    let mut configs = Vec::with_capacity(SERVERS);
    for (i, &ports) in listeners.iter().enumerate() {
        let name = server_name(i);
        let (machine, java, classpath) = placed(i);
        let data = dir.join(&name);
        let config = dir.join(format!("{name}.cfg"));
        let client_port = port(i)?;
        let text = config_text(
            &data.display().to_string(),
            (machine.addr(), client_port),
            &peers,
        );
        machine.write_private(&config, text.as_bytes())?;
        configs.push(ServerConfig {
            log: dir.join(format!("{name}.log")),
            name,
            java: java.clone(),
            classpath: classpath.clone(),
            dir: data,
            id: i + 1,
            config,
            client_port,
            peer_ports: ports,
            proxy_ports: ports,
            links: None,
            machine: machine.clone(),
        });
    }
    let proxies = configs.iter().map(|_| None).collect();
    let servers = match start_servers(&configs, proxies).await {
        Ok(servers) => servers,
        Err(StartError::PortTaken(config)) => {
            return Err(ClusterError::PortInUse {
                node: config.name,
                port: config.client_port,
            })
        }
        Err(StartError::Failed(e)) => return Err(e),
    };
    let connect = connect_string(
        servers
            .iter()
            .map(|s| (s.instance.host(), s.config.client_port)),
    );
    restrict_to_the_run(&connect, password)
        .await
        .map_err(|reason| ClusterError::Remote {
            host: connect.clone(),
            action: "give the root znode to the run's user".into(),
            reason: reason.to_string(),
        })?;
    Ok(servers)
}

/// Each server's quorum and election proxies, listening before any server starts (their
/// ports are in the servers' configs). On a port taken, the server whose it is and the port.
async fn proxies(
    configs: &[ServerConfig],
) -> Result<Vec<Option<[PeerProxy; 2]>>, (ServerConfig, u16)> {
    let hello: Arc<dyn Hello> = Arc::new(ElectionHello::new(
        configs
            .iter()
            .enumerate()
            .map(|(i, c)| (i as i64 + 1, (c.name.clone(), c.proxy_ports.1)))
            .collect::<BTreeMap<_, _>>(),
    ));
    let mut all = Vec::with_capacity(configs.len());
    for config in configs {
        let upstream = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let ((quorum, election), listening) = (config.proxy_ports, config.peer_ports);
        let Some(links) = &config.links else {
            all.push(None);
            continue;
        };
        let quorum_proxy = links
            .proxy(&config.name, quorum, upstream(listening.0), None)
            .await
            .map_err(|_| (config.clone(), quorum))?;
        let election_proxy = links
            .proxy(
                &config.name,
                election,
                upstream(listening.1),
                Some(hello.clone()),
            )
            .await
            .map_err(|_| (config.clone(), election))?;
        all.push(Some([quorum_proxy, election_proxy]));
    }
    Ok(all)
}

enum StartError {
    /// A server could not bind one of its ports.
    PortTaken(ServerConfig),
    Failed(ClusterError),
}

/// Spawns every server at once (each looks for the others until a quorum elects) and waits
/// for all of them. On any error the servers spawned so far are killed.
async fn start_servers(
    configs: &[ServerConfig],
    proxies: Vec<Option<[PeerProxy; 2]>>,
) -> Result<Vec<ZooKeeperServer>, StartError> {
    let mut instances = Vec::with_capacity(configs.len());
    for config in configs {
        match config.spawn(false).await {
            Ok(instance) => instances.push(instance),
            Err(e) => {
                kill_all(&mut instances);
                return Err(StartError::Failed(e));
            }
        }
    }
    for (instance, config) in instances.iter_mut().zip(configs) {
        if let Err(reason) = wait_serving(instance, config.client_port).await {
            let taken = config
                .machine
                .read(&config.log)
                .is_ok_and(|log| String::from_utf8_lossy(&log).contains("Address already in use"));
            let error = instance.error(reason);
            kill_all(&mut instances);
            return Err(if taken {
                StartError::PortTaken(config.clone())
            } else {
                StartError::Failed(error)
            });
        }
    }
    Ok(instances
        .into_iter()
        .zip(configs)
        .zip(proxies)
        .map(|((instance, config), proxies)| ZooKeeperServer {
            config: config.clone(),
            instance,
            _proxies: proxies,
        })
        .collect())
}

fn kill_all(instances: &mut [Instance]) {
    for instance in instances {
        instance.kill();
    }
}

/// What a server says it is (`srvr`'s `Mode:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Leader,
    Follower,
}

/// Why `srvr` got no reply. Plain data (`PartialEq`): callers compare a mode asked with the
/// one they expect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SrvrError {
    /// Connecting, writing the word or reading the reply failed, in the socket's words.
    #[error("{0}")]
    Io(String),
    #[error("no answer to srvr within 1s")]
    NoAnswer,
}

/// Why a server's mode is not leader or follower.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModeError {
    #[error(transparent)]
    Srvr(#[from] SrvrError),
    /// It answers but does not serve: `standalone`, or electing (`mode` is what it says).
    #[error("mode {0}")]
    NotServing(String),
    /// A reply with no `Mode:` line (`This ZooKeeper instance is not currently serving
    /// requests`): its first 120 characters.
    #[error("{0}")]
    NoMode(String),
}

/// Why the root znode could not be given to the run's user.
#[derive(Debug, thiserror::Error)]
pub enum RestrictError {
    #[error("no session within 10s")]
    NoSession,
    #[error("connect: {0}")]
    Connect(zk::Error),
    #[error("set the root znode's ACL: {0}")]
    SetAcl(zk::Error),
}

/// Polls the server until it serves as leader or follower (it has joined a quorum and
/// synced with its leader).
async fn wait_serving(instance: &mut Instance, port: u16) -> Result<Mode, String> {
    let deadline = instance.spawned_at() + READY_TIMEOUT;
    let mut pause = Duration::from_millis(20);
    loop {
        let Some(process) = instance.process_mut() else {
            return Err("it is not running".into());
        };
        if let Some(exit) = process.try_wait() {
            return Err(format!("it ended ({exit})"));
        }
        let last = match mode_at(instance.host(), port).await {
            Ok(mode) => {
                tracing::debug!(node = instance.name(), elapsed = ?instance.spawned_at().elapsed(), ?mode, "serving");
                return Ok(mode);
            }
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "not serving as leader or follower within {READY_TIMEOUT:?} (last: {last})"
            ));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// Asks the server on `port` with the four-letter word `srvr` what it is. Err while it does
/// not serve (no quorum yet, or syncing), or does not answer within a second.
pub async fn mode(port: u16) -> Result<Mode, ModeError> {
    mode_at("127.0.0.1", port).await
}

/// [`mode`] of the server at `host:port` (on a host).
pub async fn mode_at(host: &str, port: u16) -> Result<Mode, ModeError> {
    parse_mode(&srvr_at(host, port).await?)
}

/// The reply to `srvr` of the server at `host:port` (also on a host, for its version);
/// Err if it gave none within a second.
pub async fn srvr_at(host: &str, port: u16) -> Result<String, SrvrError> {
    let ask = async {
        let mut stream = tokio::net::TcpStream::connect((host, port)).await?;
        stream.write_all(b"srvr").await?;
        let mut reply = String::new();
        stream.read_to_string(&mut reply).await?;
        Ok::<String, std::io::Error>(reply)
    };
    tokio::time::timeout(Duration::from_secs(1), ask)
        .await
        .map_err(|_| SrvrError::NoAnswer)?
        .map_err(|e| SrvrError::Io(e.to_string()))
}

fn parse_mode(reply: &str) -> Result<Mode, ModeError> {
    match reply
        .lines()
        .find_map(|l| l.strip_prefix("Mode:"))
        .map(str::trim)
    {
        Some("leader") => Ok(Mode::Leader),
        Some("follower") => Ok(Mode::Follower),
        Some(other) => Err(ModeError::NotServing(other.to_string())),
        None => Err(ModeError::NoMode(reply.trim().chars().take(120).collect())),
    }
}

/// Each server among `servers` (name, client address and port) that answers, and whether
/// it leads. One that answers but does not serve (electing, or cut off from the others)
/// leads nothing, which the role watch must hear: a leader cut off, then elected again once
/// healed, would otherwise look as if it had led all along. A server that does not answer
/// is left out.
pub async fn roles(servers: &[(String, String, u16)]) -> Vec<(String, bool)> {
    let mut roles = Vec::with_capacity(servers.len());
    for (name, host, port) in servers {
        if let Ok(reply) = srvr_at(host, *port).await {
            roles.push((name.clone(), parse_mode(&reply) == Ok(Mode::Leader)));
        }
    }
    roles
}

/// The server among `servers` (name, client address and port) that leads now, as it says
/// itself.
pub async fn leader(servers: &[(String, String, u16)]) -> Option<String> {
    roles(servers)
        .await
        .into_iter()
        .find(|(_, leads)| *leads)
        .map(|(name, _)| name)
}

/// Gives the root znode to the run's digest user (`password`) alone, through the servers at
/// `connect` (a connect string): from now on only a client authenticated as [`USER`] can
/// read, create or delete at the root, and the run's clients give each znode they create
/// the same ACL.
pub async fn restrict_to_the_run(connect: &str, password: &str) -> Result<(), RestrictError> {
    let connecting = zk::Client::connector()
        .with_auth("digest", digest(password).as_bytes())
        .with_session_timeout(Duration::from_millis(MAX_SESSION_MS))
        .connect(connect);
    let client = tokio::time::timeout(Duration::from_secs(10), connecting)
        .await
        .map_err(|_| RestrictError::NoSession)?
        .map_err(RestrictError::Connect)?;
    let root_acl: &[zk::Acl] = &zk::Acls::creator_all();
    client
        .set_acl("/", root_acl, None)
        .await
        .map_err(RestrictError::SetAcl)?;
    Ok(())
}

/// `Topology::Zookeeper`: the Redis storage server and three ZooKeeper servers (configs,
/// data and logs in `<dir>/zookeeper/`).
pub(super) async fn start_ensemble(spec: &ClusterSpec) -> Result<Cluster, ClusterError> {
    let begun = Instant::now();
    let program = super::binaries::zookeeper()?;
    let server_binary = super::binaries::redis_server(spec.redis_server.as_deref())?;
    let [root, zk_root] = super::private_folders(&spec.dir, ["redis", "zookeeper"])?;
    let password = super::generate_password();
    // Storage after the servers' ports: with a base port, the servers take the first ones.
    let storage_port = match spec.base_port {
        Some(base) => ports::plan(1, base.checked_add(PORTS as u16))?,
        None => ports::plan(1, None)?,
    };
    let storage_port = storage_port
        .into_iter()
        .next()
        .ok_or_else(|| ClusterError::InvalidSpec("port plan too short".into()))?;
    let storage = super::start_storage(&root, server_binary, &password, storage_port).await?;
    // Storage is killed by its guard if this fails.
    let servers = start(program, &zk_root, spec.base_port).await?;
    let connect = connect_string(servers.iter().map(|s| ("127.0.0.1", s.config.client_port)));
    // The servers are killed by their guards if this fails.
    restrict_to_the_run(&connect, &password)
        .await
        .map_err(|reason| {
            let first = &servers[0].config;
            ClusterError::StartFailed {
                node: first.name.clone(),
                port: first.client_port,
                reason: reason.to_string(),
                log: first.log.clone(),
                tail: String::new(),
            }
        })?;
    tracing::info!(elapsed = ?begun.elapsed(), "zookeeper ensemble ready");
    let servers = servers
        .into_iter()
        .map(|s| Box::new(s) as Box<dyn ServiceNode>)
        .collect();
    Ok(Cluster::local(
        Topology::Zookeeper,
        root,
        password,
        servers,
        storage,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srvr_replies_say_the_mode_or_why_not() {
        let follower = "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: follower\nNode count: 5\n";
        assert_eq!(parse_mode(follower), Ok(Mode::Follower));
        assert_eq!(parse_mode("Mode: leader\n"), Ok(Mode::Leader));
        let not = "This ZooKeeper instance is not currently serving requests\n";
        assert_eq!(
            parse_mode(not).unwrap_err(),
            ModeError::NoMode(not.trim().into())
        );
        assert_eq!(
            parse_mode("Mode: standalone\n").unwrap_err().to_string(),
            "mode standalone"
        );
    }

    #[test]
    fn the_config_names_every_peer_and_turns_the_admin_server_off() {
        let peer = |addr, quorum| Peer {
            addr,
            quorum,
            election: quorum + 1,
        };
        let peers = [
            peer("10.77.0.2", 1),
            peer("10.77.0.3", 3),
            peer("10.77.0.4", 5),
        ];
        let text = config_text("/run/zk-0", ("10.77.0.2", 2181), &peers);
        assert!(text.contains("server.3=10.77.0.4:5:6\n"), "{text}");
        assert!(text.contains("dataDir=/run/zk-0\n"), "{text}");
        assert!(text.contains("admin.enableServer=false\n"));
        assert!(text.contains("clientPortAddress=10.77.0.2\n"));
        assert!(text.contains("clientPort=2181\n"));
        assert!(text.contains("maxSessionTimeout=4000\n"));
    }

    #[test]
    fn the_jvm_runs_the_quorum_peer_on_the_config_last() {
        let args = server_args("a.jar:b.jar".to_string(), "/run/zk-1.conf".to_string());
        let cp = args.iter().position(|a| a == "-cp").unwrap();
        assert_eq!(
            args[cp..],
            [
                "-cp",
                "a.jar:b.jar",
                "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                "/run/zk-1.conf"
            ]
        );
    }
}
