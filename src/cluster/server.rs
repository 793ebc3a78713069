//! One redis-server, here or on a host: its config, start with port retry, replication
//! readiness.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::aio::MultiplexedConnection;

use crate::fake_clock::FakeClock;

use super::error::ClusterError;
use super::instance::{Instance, NotReady, PORT_RETRIES, READY_TIMEOUT};
use super::machine::{Launch, Machine, Prepare};
use super::ports::{self, PortChoice};
use super::probe;
use super::service::ServiceNode;

/// Everything needed to start (and restart) one redis-server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub name: String,
    pub binary: PathBuf,
    /// The data folder (absolute: Redis chdirs into it).
    pub dir: PathBuf,
    pub log: PathBuf,
    pub password: String,
    /// AOF on (`appendfsync everysec`) or no persistence at all.
    pub persistence: bool,
    /// The primary's address and port, for a replica.
    pub replica_of: Option<(String, u16)>,
    /// libfaketime and the offset file, for a server whose clock the nemesis moves.
    pub fake_clock: Option<FakeClock>,
    /// Cluster mode (`Topology::Cluster`): the node's bus port and its cluster config file.
    pub cluster: Option<ClusterMode>,
    /// Where it runs: this machine, or a host.
    pub machine: Arc<dyn Machine>,
}

/// A Redis Cluster node's own settings.
#[derive(Debug, Clone)]
pub struct ClusterMode {
    /// The cluster bus port, chosen free like the data port: the default (port + 10000)
    /// may be past 65535 or taken when the data port is a kernel-chosen one.
    pub bus_port: u16,
    /// `nodes.conf`, outside the data folder so that a node restarted empty keeps its
    /// identity and rejoins the cluster (as a crashed node with a lost dataset would).
    pub config_file: PathBuf,
    pub node_timeout_ms: u64,
}

/// A redis-server's config file, here or on a host (see [`ServerConfig::config_text`]).
pub struct RedisConf<'a> {
    pub name: &'a str,
    /// Bound, announced to replicas, sentinels and cluster peers.
    pub addr: &'a str,
    pub port: u16,
    pub dir: &'a str,
    pub log: &'a str,
    pub password: &'a str,
    pub persistence: bool,
    pub replica_of: Option<(&'a str, u16)>,
    pub cluster: Option<&'a ClusterMode>,
}

impl RedisConf<'_> {
    pub fn text(&self) -> String {
        let (addr, port) = (self.addr, self.port);
        let quoted =
            |text: &str| format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""));
        let mut text = format!(
            "bind {addr}\nport {port}\ndaemonize no\nrequirepass {pw}\nmasterauth {pw}\n\
             dir {dir}\nlogfile {log}\nsave \"\"\nrepl-diskless-sync-delay 0\n",
            pw = quoted(self.password),
            dir = quoted(self.dir),
            log = quoted(self.log),
        );
        if self.persistence {
            text.push_str("appendonly yes\nappendfsync everysec\n");
        } else {
            text.push_str("appendonly no\n");
        }
        if let Some((host, primary)) = self.replica_of {
            text.push_str(&format!("replicaof {host} {primary}\n"));
        }
        text.push_str(&format!("replica-announce-ip {addr}\n"));
        if let Some(cluster) = self.cluster {
            // `cluster-replica-validity-factor 0`: a replica cut off from its master for a
            // while may still be promoted, as in the failover hazard under audit. Its name
            // in CLUSTER NODES: a client behind lockaudit's proxies learns from any one node
            // which real address is which node (`sharded::named_ports`).
            text.push_str(&format!(
                "cluster-enabled yes\ncluster-port {bus}\ncluster-config-file {conf}\n\
                 cluster-node-timeout {timeout}\ncluster-replica-validity-factor 0\n\
                 cluster-announce-ip {addr}\ncluster-announce-hostname {name}\n",
                bus = cluster.bus_port,
                conf = quoted(&cluster.config_file.to_string_lossy()),
                timeout = cluster.node_timeout_ms,
                name = self.name,
            ));
        }
        text
    }
}

impl ServerConfig {
    /// The redis.conf it runs on, here or on a host (`hosts`), written private (0600): the
    /// password is in it, never on a command line. Bound to `addr`, where clients,
    /// replicas and sentinels reach it; a replica announces that address (what the
    /// sentinels then tell clients), and so does a cluster node.
    ///
    /// `daemonize no`: a daemon would escape our guard and be reaped late by PID 1.
    /// `repl-diskless-sync-delay 0` because the default waits 5 s for more replicas before
    /// a full sync, which would dominate the replicated start.
    ///
    /// `save ""` always: no RDB snapshot is ever written (not even at SIGTERM), so none
    /// can bring back keys after a restart without persistence. (A replica still stores the
    /// RDB of a full sync; the start empties the folder.)
    ///
    /// With persistence, AOF with `appendfsync everysec`, not `always`. The nemesis crashes
    /// *processes* (SIGKILL), and Redis `write()`s the AOF before it replies, so the page
    /// cache holds every acknowledged write of a killed process whatever the fsync policy;
    /// fsync only matters to an OS crash, which nothing here simulates. `always` would
    /// fsync on every event-loop turn: measured here (ext4), one client's SETs went from
    /// 18–31k/s to 2.6–3.3k/s, which would change the workload's timing far more than
    /// it would change what a process crash can lose.
    /// The one loss `everysec` allows a killed process (the write postponed for up to 2 s
    /// while a slow fsync runs) is Redis's real behaviour, worth finding.
    pub fn config_text(&self, addr: &str, port: u16) -> String {
        RedisConf {
            name: &self.name,
            addr,
            port,
            dir: &self.dir.to_string_lossy(),
            log: &self.log.to_string_lossy(),
            password: &self.password,
            persistence: self.persistence,
            replica_of: self.replica_of.as_ref().map(|(h, p)| (h.as_str(), *p)),
            cluster: self.cluster.as_ref(),
        }
        .text()
    }

    /// `<name>.conf` beside the data folder: the config, with the password, readable by
    /// this user only.
    pub fn config_file(&self) -> PathBuf {
        self.dir.with_file_name(format!("{}.conf", self.name))
    }

    /// The start on `port`: the data folder emptied first unless the data must survive (a
    /// restart with persistence; without, an old `dump.rdb` a replica wrote on a full sync
    /// would be loaded at start and smuggle in persistence), the config written (on a
    /// restart, kept as the server left it: a replica that Sentinel moved to a new primary,
    /// with `CONFIG REWRITE`, comes back following it, as a real server's redis.conf
    /// would), the server run on it under its fake clock if any.
    pub fn launch(&self, port: u16, start: Start) -> Result<Launch, ClusterError> {
        let file = self.config_file();
        if start == Start::First {
            self.machine.write_private(
                &file,
                self.config_text(self.machine.addr(), port).as_bytes(),
            )?;
        }
        let keep_data = matches!(start, Start::Again { keep_data: true });
        let mut launch = Launch::new(&self.name, &self.binary, &self.log).arg(&file);
        if !keep_data {
            launch.prepare.push(Prepare::Empty(self.dir.clone()));
        }
        launch.prepare.push(Prepare::Make(self.dir.clone()));
        if let Some(clock) = &self.fake_clock {
            launch = launch.envs(clock.env());
        }
        Ok(launch)
    }

    async fn spawn(&self, port: u16, start: Start) -> Result<Instance, ClusterError> {
        let launch = self.launch(port, start)?;
        Instance::launch(self.machine.clone(), port, &self.dir, &launch).await
    }
}

/// Which start of a server: its first (its config written, its folder empty), or a restart
/// (on its data or not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    First,
    Again { keep_data: bool },
}

/// A started redis-server and how to start it again.
#[derive(Debug)]
pub struct Server {
    pub config: ServerConfig,
    pub instance: Instance,
}

#[async_trait]
impl ServiceNode for Server {
    fn instance(&self) -> &Instance {
        &self.instance
    }

    fn instance_mut(&mut self) -> &mut Instance {
        &mut self.instance
    }

    fn fake_clock(&self) -> Option<&FakeClock> {
        self.config.fake_clock.as_ref()
    }

    /// Starts it again on the same port (clients know that port), with the same fake clock
    /// (same environment, same offset file). With `keep_data` and persistence its AOF is
    /// replayed; otherwise the data folder is emptied first, so the node comes back empty
    /// as a crash without persistence (or with the disk lost) would leave it. Waits until
    /// it answers, not until a replica is in sync: after a failover its primary may be the
    /// one that is down.
    async fn restart(&mut self, keep_data: bool) -> Result<(), ClusterError> {
        if let Some(process) = self.instance.process_mut() {
            if process.try_wait().is_none() {
                process.kill();
            }
        }
        let again = Start::Again {
            keep_data: keep_data && self.config.persistence,
        };
        let port = self.instance.port();
        let mut servers = start_all(
            vec![(self.config.clone(), PortChoice::Fixed(port))],
            false,
            again,
        )
        .await?;
        match servers.pop() {
            Some(server) => {
                self.instance = server.instance;
                Ok(())
            }
            None => Err(self.instance.error("restart produced no server")),
        }
    }
}

/// Starts all `servers` at once, then waits for each to answer and, with `await_sync`,
/// each replica to be in sync with its primary. Spawning first and waiting after makes the whole start cost
/// about one server's start. A server whose free port was taken in the meantime is started
/// again on a new port; a taken fixed port is `PortInUse`.
pub async fn start_all(
    servers: Vec<(ServerConfig, PortChoice)>,
    await_sync: bool,
    start: Start,
) -> Result<Vec<Server>, ClusterError> {
    let mut spawned = Vec::with_capacity(servers.len());
    for (config, choice) in servers {
        let instance = config.spawn(choice.port(), start).await?;
        spawned.push((config, choice, instance));
    }
    let mut started = Vec::with_capacity(spawned.len());
    for (config, mut choice, mut instance) in spawned {
        let mut retries = 0;
        let conn = loop {
            match instance.wait_ready(&config.password).await {
                Ok(conn) => break conn,
                Err(NotReady::AddressInUse) => match choice {
                    PortChoice::Fixed(port) => {
                        return Err(ClusterError::PortInUse {
                            node: config.name.clone(),
                            port,
                        })
                    }
                    PortChoice::Free(port) if retries < PORT_RETRIES => {
                        retries += 1;
                        tracing::debug!(node = config.name, port, "port taken; retrying");
                        choice = PortChoice::Free(ports::free_port()?);
                        instance = config.spawn(choice.port(), start).await?;
                    }
                    PortChoice::Free(_) => {
                        return Err(instance.error(format!(
                            "its port was taken before it could bind it, {} times",
                            retries + 1
                        )))
                    }
                },
                Err(NotReady::Failed(reason)) => return Err(instance.error(reason)),
            }
        };
        if let (Some(clock), Some(pid)) = (&config.fake_clock, instance.pid()) {
            let maps = config.machine.read(Path::new(&format!("/proc/{pid}/maps")));
            if !maps.is_ok_and(|maps| clock.is_mapped(&maps)) {
                return Err(instance.error(format!(
                    "{} is not loaded, so its clock cannot be moved (ld.so's line in the log says why)",
                    clock.library().display()
                )));
            }
        }
        started.push((Server { config, instance }, conn));
    }
    let mut servers = Vec::with_capacity(started.len());
    for (server, mut conn) in started {
        if await_sync && server.config.replica_of.is_some() {
            wait_in_sync(&server.instance, &mut conn).await?;
        }
        servers.push(server);
    }
    Ok(servers)
}

/// Polls `INFO replication` until the replica reports `master_link_status:up`: before
/// that it holds no data and a failover to it would lose everything.
pub async fn wait_in_sync(
    instance: &Instance,
    conn: &mut MultiplexedConnection,
) -> Result<(), ClusterError> {
    let patience = instance.machine().patience(READY_TIMEOUT);
    let deadline = Instant::now() + patience;
    loop {
        let last = match probe::info(conn, "replication").await {
            Ok(info) => {
                let status = info.get("master_link_status").map(String::as_str);
                if status == Some("up") {
                    return Ok(());
                }
                format!("master_link_status:{}", status.unwrap_or("(absent)"))
            }
            Err(err) => err.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(instance.error(format!(
                "the replica was not in sync with its primary within {patience:?} ({last})"
            )));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A free port taken between our choice and the server's bind: the server is started
    /// again on another port instead of failing the run.
    #[tokio::test]
    async fn a_collision_on_a_free_port_is_retried_elsewhere() {
        // Never a silent pass: without redis-server the test fails saying what to install.
        let binary = super::super::binaries::redis_server(None).unwrap_or_else(|e| {
            panic!("this test needs redis-server: apt-get install redis-server ({e})")
        });
        let dir = tempfile::tempdir().unwrap();
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let config = ServerConfig {
            name: "master-0".into(),
            binary,
            dir: dir.path().join("master-0"),
            log: dir.path().join("master-0.log"),
            password: "pw".into(),
            persistence: false,
            replica_of: None,
            fake_clock: None,
            cluster: None,
            machine: Arc::new(super::super::machine::Local),
        };
        let servers = start_all(vec![(config, PortChoice::Free(port))], true, Start::First)
            .await
            .unwrap();
        assert_ne!(servers[0].instance.port(), port);
        let log = std::fs::read_to_string(dir.path().join("master-0.log")).unwrap();
        assert!(log.contains("Address already in use"), "{log}");
    }
}
