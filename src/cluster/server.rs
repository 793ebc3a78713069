//! One redis-server: its command line, start with port retry, replication readiness.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::aio::MultiplexedConnection;

use super::clock::{self, FakeClock};
use super::error::ClusterError;
use super::instance::{Instance, NotReady, READY_TIMEOUT};
use super::ports::{self, PortChoice};
use super::probe;
use super::service::ServiceNode;

/// How many times a server whose free port was taken before it could bind it is started
/// again on another port.
const PORT_RETRIES: usize = 3;

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
    /// The primary's port, for a replica.
    pub replica_of: Option<u16>,
    /// libfaketime and the offset file, for a server whose clock the nemesis moves.
    pub fake_clock: Option<FakeClock>,
    /// Cluster mode (`Topology::Cluster`): the node's bus port and its cluster config file.
    pub cluster: Option<ClusterMode>,
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

impl ServerConfig {
    /// The foreground command line (no `--daemonize`: a daemon would escape our guard and
    /// be reaped late by PID 1).
    ///
    /// `repl-diskless-sync-delay 0` because the default waits 5 s for more replicas before
    /// a full sync, which would dominate the replicated start. The password is in no
    /// argument: `requirepass` and `masterauth` are in a config file of their own (0600,
    /// [`ServerConfig::auth_file`]), the first argument, so that not even the moment
    /// between exec and Redis's rewriting its process title shows it in `ps`.
    ///
    /// `--save ""` always: no RDB snapshot is ever written (not even at SIGTERM), so none
    /// can bring back keys after a restart without persistence. (A replica still stores the
    /// RDB of a full sync; `prepare_dir` removes it.)
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
    pub fn command(&self, port: u16) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.arg(self.auth_file());
        cmd.arg("--port").arg(port.to_string());
        cmd.args(["--bind", "127.0.0.1", "--daemonize", "no"]);
        cmd.arg("--dir").arg(&self.dir);
        cmd.arg("--logfile").arg(&self.log);
        cmd.args(["--save", "", "--repl-diskless-sync-delay", "0"]);
        if self.persistence {
            cmd.args(["--appendonly", "yes", "--appendfsync", "everysec"]);
        } else {
            cmd.args(["--appendonly", "no"]);
        }
        if let Some(primary) = self.replica_of {
            cmd.args(["--replicaof", "127.0.0.1"])
                .arg(primary.to_string());
        }
        if let Some(cluster) = &self.cluster {
            // `cluster-replica-validity-factor 0`: a replica cut off from its master for a
            // while may still be promoted, as in the failover hazard under audit.
            cmd.args(["--cluster-enabled", "yes"]);
            cmd.arg("--cluster-port").arg(cluster.bus_port.to_string());
            cmd.arg("--cluster-config-file").arg(&cluster.config_file);
            cmd.arg("--cluster-node-timeout")
                .arg(cluster.node_timeout_ms.to_string());
            cmd.args(["--cluster-replica-validity-factor", "0"]);
            // Its name in CLUSTER NODES: a client behind lockaudit's proxies learns from any
            // one node which real address is which node (`sharded::named_ports`).
            cmd.arg("--cluster-announce-hostname").arg(&self.name);
        }
        if let Some(clock) = &self.fake_clock {
            clock.apply(&mut cmd);
        }
        cmd
    }

    /// Makes the data folder; emptied first unless the data must survive (a restart with
    /// persistence). Without persistence an old `dump.rdb` (a replica writes one on every
    /// full sync) would otherwise be loaded at start and smuggle in persistence.
    pub fn prepare_dir(&self, keep_data: bool) -> Result<(), ClusterError> {
        if !keep_data && self.dir.exists() {
            std::fs::remove_dir_all(&self.dir)
                .map_err(|e| ClusterError::io("empty the data folder", &self.dir, e))?;
        }
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| ClusterError::io("create the data folder", &self.dir, e))
    }

    /// `<name>.auth.conf` beside the data folder: the password, as `requirepass` and
    /// `masterauth`, readable by this user only.
    pub fn auth_file(&self) -> PathBuf {
        self.dir.with_file_name(format!("{}.auth.conf", self.name))
    }

    fn spawn(&self, port: u16) -> Result<Instance, ClusterError> {
        let file = self.auth_file();
        let pw = self.password.replace('\\', "\\\\").replace('"', "\\\"");
        crate::private::write(
            &file,
            format!("requirepass \"{pw}\"\nmasterauth \"{pw}\"\n"),
        )
        .map_err(|e| ClusterError::io("write the password file", &file, e))?;
        Instance::spawn(&self.name, port, &self.dir, &self.log, self.command(port))
    }
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
        if let Some(guard) = self.instance.guard_mut() {
            if guard.try_wait().is_none() {
                guard.kill();
            }
        }
        self.config
            .prepare_dir(keep_data && self.config.persistence)?;
        let port = self.instance.port();
        let mut servers =
            start_all(vec![(self.config.clone(), PortChoice::Fixed(port))], false).await?;
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
) -> Result<Vec<Server>, ClusterError> {
    let mut spawned = Vec::with_capacity(servers.len());
    for (config, choice) in servers {
        let instance = config.spawn(choice.port())?;
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
                        instance = config.spawn(choice.port())?;
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
            if !clock::is_loaded(pid, clock) {
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
    let deadline = Instant::now() + READY_TIMEOUT;
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
                "the replica was not in sync with its primary within {READY_TIMEOUT:?} ({last})"
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
        };
        config.prepare_dir(false).unwrap();
        let servers = start_all(vec![(config, PortChoice::Free(port))], true)
            .await
            .unwrap();
        assert_ne!(servers[0].instance.port(), port);
        let log = std::fs::read_to_string(dir.path().join("master-0.log")).unwrap();
        assert!(log.contains("Address already in use"), "{log}");
    }
}
