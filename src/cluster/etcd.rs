//! An etcd cluster that lockaudit starts and owns: three members (`etcd-0`..`etcd-2`) of
//! Debian's `etcd-server`, each a foreground child bound to 127.0.0.1 on a client port and
//! a peer port, its data folder and log in the run folder (`<run>/etcd/<name>/`,
//! `<run>/etcd/<name>.log`), behind the service seam ([`ServiceNode`]).
//!
//! The members reach each other through lockaudit's proxies ([`PeerLinks`]): each member's
//! advertised peer address is its proxy's, so that the nemesis can cut members apart one
//! direction at a time ([`ServiceNode::cut_from`]). The proxies start before the members
//! and outlive their restarts.
//!
//! Only the run can use it: once a leader is elected, user `root` gets the run's generated
//! password and authentication is switched on, so that another local user cannot take the
//! run's locks mid-run (etcd listens on loopback without TLS; the password never appears
//! in an argument).
//!
//! Timing: etcd's defaults (heartbeat 100 ms, election timeout 1 s). The shortest lease
//! etcd grants is 1.5 × the election timeout, rounded up to whole seconds: 2 s, the lease
//! of Jepsen's etcd 3.4.3 lock test.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::error::ClusterError;
use super::instance::Instance;
use super::machine::{Launch, Local, Machine, Prepare};
use super::peer_links::{PeerLinks, PeerProxy};
use super::ports;
use super::service::ServiceNode;
use super::{Cluster, ClusterSpec, Topology};
pub use crate::topology::etcd::{connect, MIN_LEASE_MS, USER};

/// Members of the cluster: the smallest that survives the loss of one.
pub const MEMBERS: usize = 3;

/// How long a start may take until a leader is elected and every member answers. Measured
/// starts take about a second (the first election waits out one election timeout); a loaded
/// CI machine gets room.
const READY_TIMEOUT: Duration = Duration::from_secs(15);

/// How many fresh sets of free ports a start tries when another process took one of ours
/// between the choice and etcd's bind.
const PORT_RETRIES: usize = 3;

/// Ports a start takes: per member a client port, a peer port and its proxy's port.
const PORTS: usize = 3 * MEMBERS;

/// The member's name (`etcd-<i>`).
pub fn member_name(i: usize) -> String {
    format!("etcd-{i}")
}

/// How to start (and restart) one member.
#[derive(Debug, Clone)]
struct MemberConfig {
    name: String,
    binary: PathBuf,
    dir: PathBuf,
    log: PathBuf,
    client_port: u16,
    /// Where the member listens for its peers.
    peer_port: u16,
    /// Where the others reach it: its proxy's port here, its peer port on a host.
    advertised_port: u16,
    /// `etcd-0=http://127.0.0.1:P0,...`: every member's advertised peer address.
    initial_cluster: String,
    /// Told the member's pid at each start, so that its proxy knows its connections;
    /// None on a host, where its links are cut with iptables instead.
    links: Option<PeerLinks>,
    /// Unique per run, so that members of another run's cluster never join ours.
    cluster_token: String,
    /// Where it runs.
    machine: Arc<dyn Machine>,
}

impl MemberConfig {
    /// The foreground member. A restart keeps its data folder, whose WAL and snapshot say
    /// which cluster it belongs to: `--initial-cluster*` are read only on the first start.
    fn launch(&self) -> Launch {
        let addr = self.machine.addr();
        let mut launch =
            Launch::new(&self.name, &self.binary, &self.log).args(member_args(&MemberFlags {
                name: &self.name,
                data_dir: &self.dir.display().to_string(),
                client: &self.endpoint(),
                peer: &format!("http://{addr}:{}", self.peer_port),
                advertised_peer: &format!("http://{addr}:{}", self.advertised_port),
                initial_cluster: &self.initial_cluster,
                cluster_token: &self.cluster_token,
            }));
        // The metrics and debug endpoints stay on the client port.
        launch.unset.push("ETCDCTL_API".into());
        // etcd makes its data folder (0700) itself, in the run's.
        if let Some(run) = self.dir.parent() {
            launch.prepare.push(Prepare::Make(run.to_path_buf()));
        }
        launch
    }

    async fn spawn(&self) -> Result<Instance, ClusterError> {
        let instance = Instance::launch(
            self.machine.clone(),
            self.client_port,
            &self.dir,
            &self.launch(),
        )
        .await?;
        if let (Some(links), Some(pid)) = (&self.links, instance.pid()) {
            links.running(&self.name, pid);
        }
        Ok(instance)
    }

    fn endpoint(&self) -> String {
        format!("http://{}:{}", self.machine.addr(), self.client_port)
    }
}

/// What a member is started with, here or on a host.
pub(super) struct MemberFlags<'a> {
    pub name: &'a str,
    pub data_dir: &'a str,
    /// `http://addr:port`: where it listens for clients, and tells them to connect.
    pub client: &'a str,
    /// Where it listens for its peers.
    pub peer: &'a str,
    /// Where its peers reach it (here: its proxy; on a host: `peer`).
    pub advertised_peer: &'a str,
    /// `etcd-0=<advertised peer URL>,...`.
    pub initial_cluster: &'a str,
    /// Unique per run, so that members of another run's cluster never join ours.
    pub cluster_token: &'a str,
}

/// The member's arguments after the program.
pub(super) fn member_args(flags: &MemberFlags) -> Vec<String> {
    let mut args: Vec<String> = [
        "--name",
        flags.name,
        "--data-dir",
        flags.data_dir,
        "--listen-client-urls",
        flags.client,
        "--advertise-client-urls",
        flags.client,
        "--listen-peer-urls",
        flags.peer,
        "--initial-advertise-peer-urls",
        flags.advertised_peer,
        "--initial-cluster",
        flags.initial_cluster,
        "--initial-cluster-state",
        "new",
        "--initial-cluster-token",
        flags.cluster_token,
        "--heartbeat-interval",
        "100",
        "--election-timeout",
        "1000",
    ]
    .map(str::to_string)
    .to_vec();
    // bcrypt's cost guards weak passwords; the run's is 32 random alphanumerics (190 bits).
    // At the default (10) each client's authentication costs the member tens of
    // milliseconds of CPU, and eight clients connecting at once delayed the run's first
    // acquires by a second.
    args.extend(
        [
            "--bcrypt-cost",
            "4",
            "--logger",
            "zap",
            "--log-outputs",
            "stderr",
        ]
        .map(str::to_string),
    );
    args
}

/// Why a member cannot come back empty.
pub(super) fn no_empty_restart(name: &str) -> ClusterError {
    ClusterError::Unsupported {
        action: "empty",
        node: name.to_string(),
        reason: "an etcd member cannot rejoin without its data (etcd wants it removed and added again); restart it on its data instead".into(),
    }
}

/// One running member and how to start it again.
#[derive(Debug)]
pub struct EtcdMember {
    config: MemberConfig,
    instance: Instance,
    password: String,
    /// In front of its peer listener, for as long as the member is part of the run (none
    /// on a host).
    _proxy: Option<PeerProxy>,
}

#[async_trait]
impl ServiceNode for EtcdMember {
    fn instance(&self) -> &Instance {
        &self.instance
    }

    fn instance_mut(&mut self) -> &mut Instance {
        &mut self.instance
    }

    /// A member stopped last has no one to hand its leadership to and waits out its
    /// grace period (3 s a run); its WAL is fsynced, so a kill loses nothing.
    fn graceful_stop(&self) -> bool {
        false
    }

    /// The link from `from` to this member: `from`'s connections to its proxy.
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
        vec![self.config.peer_port]
    }

    /// A member's data folder holds preallocated WAL segments, 128 MB a member (384 MB a
    /// run for three), that nothing reads after the run; its log stays. (On a host the
    /// run's folder goes whole.)
    fn scratch(&self) -> Option<&Path> {
        self.config
            .links
            .as_ref()
            .map(|_| self.config.dir.as_path())
    }

    /// On its data folder it rejoins as itself and catches up from the leader. An empty one
    /// would come back with the same member id and no log, which etcd does not support (a
    /// member that lost its disk is removed and added anew): `Unsupported`.
    async fn restart(&mut self, keep_data: bool) -> Result<(), ClusterError> {
        if !keep_data {
            return Err(no_empty_restart(&self.config.name));
        }
        if self.instance.pid().is_some() {
            self.instance.kill();
        }
        let mut instance = self.config.spawn().await?;
        // A member alone cannot serve: it is back once it answers with a leader (the others
        // may still be down, then it never does; give up at the deadline).
        let ready = wait_member(&mut instance, &self.config, &self.password, true).await;
        self.instance = instance.kept_if(ready)?;
        Ok(())
    }
}

/// Starts `MEMBERS` members in `root` (`<run>/etcd`, emptied first) on free loopback ports
/// (or consecutive ones from `base_port`), waits for a leader that every member knows,
/// then turns authentication on with `password` for [`USER`].
pub async fn start(
    binary: PathBuf,
    root: &Path,
    password: &str,
    base_port: Option<u16>,
) -> Result<Vec<EtcdMember>, ClusterError> {
    let begun = Instant::now();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let choices = ports::plan(PORTS, base_port)?;
        let configs = configs(&binary, root, &choices)?;
        let proxies = match proxies(&configs).await {
            Ok(proxies) => proxies,
            Err(_) if base_port.is_none() && attempt < PORT_RETRIES => continue,
            Err((config, _)) => {
                return Err(ClusterError::PortInUse {
                    node: config.name,
                    port: config.advertised_port,
                })
            }
        };
        match start_members(&configs, proxies, password).await {
            Ok(members) => {
                enable_auth(&members, password).await?;
                tracing::info!(elapsed = ?begun.elapsed(), "etcd ready");
                return Ok(members);
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

/// Each member's proxy, listening before any member starts (their addresses are in the
/// members' flags). On a port taken, the member whose it is.
async fn proxies(
    configs: &[MemberConfig],
) -> Result<Vec<Option<PeerProxy>>, (MemberConfig, std::io::Error)> {
    let mut proxies = Vec::with_capacity(configs.len());
    for config in configs {
        let Some(links) = &config.links else {
            proxies.push(None);
            continue;
        };
        let upstream = std::net::SocketAddr::from(([127, 0, 0, 1], config.peer_port));
        match links
            .proxy(&config.name, config.advertised_port, upstream, None)
            .await
        {
            Ok(proxy) => proxies.push(Some(proxy)),
            Err(e) => return Err((config.clone(), e)),
        }
    }
    Ok(proxies)
}

/// `MEMBERS` members on `machines` (member i on machine i mod their number, each with the
/// etcd program found there), each on its machine's address: client port `base` + i, peer
/// port `base` + `MEMBERS` + i, reached directly (no proxy: links are cut on the hosts),
/// data and log in `dir` there; once they have a leader, authentication on with
/// `password`, as here.
pub(super) async fn start_on(
    machines: &[(Arc<dyn Machine>, String)],
    dir: &Path,
    base: u16,
    password: &str,
) -> Result<Vec<EtcdMember>, ClusterError> {
    let port = |i: usize| ports::nth(base, i);
    let placed = |i: usize| &machines[i % machines.len()];
    let mut peers = Vec::with_capacity(MEMBERS);
    for i in 0..MEMBERS {
        let addr = placed(i).0.addr();
        peers.push(format!(
            "{}=http://{addr}:{}",
            member_name(i),
            port(MEMBERS + i)?
        ));
    }
    let initial_cluster = peers.join(",");
    let token = format!("lockaudit-{}", super::generate_password());
    let mut configs = Vec::with_capacity(MEMBERS);
    for i in 0..MEMBERS {
        let name = member_name(i);
        let (machine, binary) = placed(i);
        configs.push(MemberConfig {
            log: dir.join(format!("{name}.log")),
            dir: dir.join(&name),
            name,
            binary: binary.into(),
            client_port: port(i)?,
            peer_port: port(MEMBERS + i)?,
            advertised_port: port(MEMBERS + i)?,
            initial_cluster: initial_cluster.clone(),
            links: None,
            cluster_token: token.clone(),
            machine: machine.clone(),
        });
    }
    let proxies = configs.iter().map(|_| None).collect();
    let members = match start_members(&configs, proxies, password).await {
        Ok(members) => members,
        Err(StartError::PortTaken(config)) => {
            return Err(ClusterError::PortInUse {
                node: config.name,
                port: config.client_port,
            })
        }
        Err(StartError::Failed(e)) => return Err(e),
    };
    enable_auth(&members, password).await?;
    Ok(members)
}

fn configs(
    binary: &Path,
    root: &Path,
    choices: &[ports::PortChoice],
) -> Result<Vec<MemberConfig>, ClusterError> {
    let token = format!("lockaudit-{}", super::generate_password());
    let port = |i: usize| {
        choices
            .get(i)
            .map(|c| c.port())
            .ok_or_else(|| ClusterError::InvalidSpec("port plan too short".into()))
    };
    let mut peers = Vec::with_capacity(MEMBERS);
    for i in 0..MEMBERS {
        peers.push(format!(
            "{}=http://127.0.0.1:{}",
            member_name(i),
            port(2 * MEMBERS + i)?
        ));
    }
    let links = PeerLinks::default();
    let initial_cluster = peers.join(",");
    let mut configs = Vec::with_capacity(MEMBERS);
    for i in 0..MEMBERS {
        let name = member_name(i);
        let dir = root.join(&name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| ClusterError::io("empty the data folder", &dir, e))?;
        }
        // A fresh log too: a start that failed on a taken port is told apart by its log.
        let log = root.join(format!("{name}.log"));
        let _ = std::fs::remove_file(&log);
        // Listed now, so that Ctrl-C during the start removes it too.
        super::leftovers::scratch(&dir);
        // etcd makes its data folder 0700 itself; the parent is the run's.
        configs.push(MemberConfig {
            log,
            name,
            binary: binary.to_path_buf(),
            dir,
            client_port: port(i)?,
            peer_port: port(MEMBERS + i)?,
            advertised_port: port(2 * MEMBERS + i)?,
            initial_cluster: initial_cluster.clone(),
            links: Some(links.clone()),
            cluster_token: token.clone(),
            machine: Arc::new(Local),
        });
    }
    Ok(configs)
}

enum StartError {
    /// A member could not bind one of its ports.
    PortTaken(MemberConfig),
    Failed(ClusterError),
}

/// Spawns every member at once (each waits for the others to elect) and waits for them.
/// On any error the members spawned so far are killed.
async fn start_members(
    configs: &[MemberConfig],
    proxies: Vec<Option<PeerProxy>>,
    password: &str,
) -> Result<Vec<EtcdMember>, StartError> {
    let mut instances = Vec::with_capacity(configs.len());
    for config in configs {
        match config.spawn().await {
            Ok(instance) => instances.push(instance),
            Err(e) => {
                kill_all(&mut instances);
                return Err(StartError::Failed(e));
            }
        }
        // One at a time, each once its peer port listens: a member dials its peers as it
        // starts and, when one is not listening yet, dials again only a second later;
        // started together, all three missed each other and the first election waited
        // one or two seconds for that. Started in turn, each later member finds the
        // earlier ones, and its dials make it known to them.
        if let Some(instance) = instances.last_mut() {
            listening(instance, config.peer_port).await;
        }
    }
    for (instance, config) in instances.iter_mut().zip(configs) {
        if let Err(reason) = wait_member(instance, config, password, false).await {
            let taken = config
                .machine
                .read(&config.log)
                .is_ok_and(|log| String::from_utf8_lossy(&log).contains("address already in use"));
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
        .map(|((instance, config), proxy)| EtcdMember {
            config: config.clone(),
            instance,
            password: password.to_string(),
            _proxy: proxy,
        })
        .collect())
}

/// Waits until something accepts connections on `port` (the member's peer listener), the
/// member has ended, or a second has gone by; whatever comes first, the readiness wait
/// that follows judges the start.
async fn listening(instance: &mut Instance, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        if tokio::net::TcpStream::connect((instance.host(), port))
            .await
            .is_ok()
        {
            return;
        }
        if instance.process_mut().and_then(|p| p.try_wait()).is_some() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn kill_all(instances: &mut [Instance]) {
    for instance in instances {
        instance.kill();
    }
}

/// Polls the member until it reports a leader (and, on a restart, one that answers a
/// linearizable read through it: it has caught up with the cluster). Before authentication
/// is on (the first start) it connects without a user.
async fn wait_member(
    instance: &mut Instance,
    config: &MemberConfig,
    password: &str,
    authenticated: bool,
) -> Result<(), String> {
    let deadline = instance.spawned_at() + config.machine.patience(READY_TIMEOUT);
    let mut pause = Duration::from_millis(10);
    loop {
        let Some(process) = instance.process_mut() else {
            return Err("it is not running".into());
        };
        if let Some(exit) = process.try_wait() {
            return Err(format!("it ended ({exit})"));
        }
        let user = authenticated.then_some(password);
        let last = match probe(&config.endpoint(), user).await {
            Ok(()) => {
                tracing::debug!(node = config.name, elapsed = ?instance.spawned_at().elapsed(), "ready");
                return Ok(());
            }
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "no leader known to it within {READY_TIMEOUT:?} (last: {last})"
            ));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// One connection to `endpoint`: Ok once the member knows a leader and a linearizable read
/// through it succeeds (which needs a quorum and the member's log caught up to the read).
async fn probe(endpoint: &str, password: Option<&str>) -> Result<(), String> {
    let mut client = connect(&[endpoint.to_string()], password, Duration::from_secs(1))
        .await
        .map_err(|e| e.to_string())?;
    let status = client.status().await.map_err(|e| e.to_string())?;
    if status.leader() == 0 {
        return Err("no leader yet".into());
    }
    client
        .get("lockaudit/ready", None)
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// A member to ask who leads, with the connection kept between polls.
#[derive(Clone)]
pub struct Member {
    pub name: String,
    pub host: String,
    pub port: u16,
    client: Option<etcd_client::Client>,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("name", &self.name)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("connected", &self.client.is_some())
            .finish()
    }
}

impl Member {
    pub fn new(name: String, host: String, port: u16) -> Self {
        Member {
            name,
            host,
            port,
            client: None,
        }
    }
}

/// Each member that answers, and whether it leads (its status names itself as leader).
/// Status needs no password (etcd serves it to anyone who reaches the port), so no
/// authentication, whose bcrypt check costs the member tens of milliseconds, is made.
pub async fn roles(members: &mut [Member]) -> Vec<(String, bool)> {
    let mut roles = Vec::with_capacity(members.len());
    for member in members.iter_mut() {
        if member.client.is_none() {
            let url = format!("http://{}:{}", member.host, member.port);
            member.client = connect(&[url], None, Duration::from_millis(500)).await.ok();
        }
        let Some(client) = member.client.as_mut() else {
            continue;
        };
        match client.status().await {
            Ok(status) => {
                let me = status.header().map(|h| h.member_id());
                roles.push((
                    member.name.clone(),
                    me.is_some_and(|me| me == status.leader()),
                ));
            }
            // Reconnect at the next poll (a restarted member is a new server).
            Err(_) => member.client = None,
        }
    }
    roles
}

/// The member among `members` (name, client address and port) that leads now, as it says
/// itself.
pub async fn leader(members: &[(String, String, u16)]) -> Option<String> {
    let mut members: Vec<Member> = members
        .iter()
        .map(|(name, host, port)| Member::new(name.clone(), host.clone(), *port))
        .collect();
    roles(&mut members)
        .await
        .into_iter()
        .find(|(_, leads)| *leads)
        .map(|(name, _)| name)
}

/// `root` with the run's password, then authentication on: from now on every request needs
/// the password.
async fn enable_auth(members: &[EtcdMember], password: &str) -> Result<(), ClusterError> {
    let endpoints: Vec<String> = members.iter().map(|m| m.config.endpoint()).collect();
    authenticate(&endpoints, password)
        .await
        .map_err(|e| ClusterError::StartFailed {
            node: member_name(0),
            port: members.first().map(|m| m.config.client_port).unwrap_or(0),
            reason: e.to_string(),
            log: members
                .first()
                .map(|m| m.config.log.clone())
                .unwrap_or_default(),
            tail: String::new(),
        })
}

/// A step of turning authentication on that the members refused.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {error}")]
pub(super) struct AuthStepFailed {
    /// `connect`, `add the user root`, ...
    step: &'static str,
    error: etcd_client::Error,
}

/// `root` with `password` and authentication on, through the members at `endpoints`.
pub(super) async fn authenticate(
    endpoints: &[String],
    password: &str,
) -> Result<(), AuthStepFailed> {
    let failed = |step, error| AuthStepFailed { step, error };
    let mut client = connect(endpoints, None, Duration::from_secs(5))
        .await
        .map_err(|e| failed("connect", e))?;
    client
        .user_add(USER, password, None)
        .await
        .map_err(|e| failed("add the user root", e))?;
    client
        .user_grant_role(USER, "root")
        .await
        .map_err(|e| failed("grant root the root role", e))?;
    client
        .auth_enable()
        .await
        .map_err(|e| failed("turn authentication on", e))?;
    Ok(())
}

/// `Topology::Etcd`: the Redis storage server and three etcd members (data and logs in
/// `<dir>/etcd/`), sharing the generated password (etcd's user `root`).
pub(super) async fn start_cluster(spec: &ClusterSpec) -> Result<Cluster, ClusterError> {
    let begun = Instant::now();
    let etcd_binary = super::binaries::etcd()?;
    let server_binary = super::binaries::redis_server(spec.redis_server.as_deref())?;
    let [root, etcd_root] = super::private_folders(&spec.dir, ["redis", "etcd"])?;
    let password = super::generate_password();
    // Storage after the members' ports: with a base port, the members take the first nine.
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
    let members = start(etcd_binary, &etcd_root, &password, spec.base_port).await?;
    tracing::info!(elapsed = ?begun.elapsed(), "etcd cluster ready");
    let members = members
        .into_iter()
        .map(|m| Box::new(m) as Box<dyn ServiceNode>)
        .collect();
    Ok(Cluster::local(
        Topology::Etcd,
        root,
        password,
        members,
        storage,
    ))
}

/// `kill-session` through member `node`: every lease listed (`LeaseLeases`) and revoked
/// (`LeaseRevoke`), which deletes the keys attached to it: an etcd lock's session is its
/// lease. Returns how many leases it revoked (one already gone meanwhile is not counted).
pub(super) async fn end_client_sessions(
    endpoints: &super::Endpoints,
    node: &super::Node,
) -> Result<usize, super::SessionsError> {
    let url = format!("http://{}:{}", node.host, node.port);
    let mut client = connect(
        &[url],
        endpoints.password.as_deref(),
        Duration::from_secs(2),
    )
    .await
    .map_err(|e| super::SessionsError::Connect {
        node: node.name.clone(),
        reason: e.to_string(),
    })?;
    let leases = client
        .leases()
        .await
        .map_err(|e| super::SessionsError::Refused {
            node: node.name.clone(),
            request: "LeaseLeases".into(),
            reason: e.to_string(),
        })?;
    let mut revoked = 0;
    for lease in leases.leases() {
        if client.lease_revoke(lease.id()).await.is_ok() {
            revoked += 1;
        }
    }
    Ok(revoked)
}
