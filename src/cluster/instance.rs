//! One running process of a node, here or on a host (`machine`): its port, folders, log,
//! the process and its readiness.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

use super::error::ClusterError;
use super::exit::Exit;
use super::logs::LogCursor;
use super::machine::{Launch, Machine, TAIL_LINES};
use super::ports::PortChoice;
use super::probe;
use super::process::Proc;

/// How long a process may take from spawn to answering an authenticated INFO. Measured
/// starts take 11–21 ms; 5 s leaves room for a loaded CI machine without hiding a hang.
pub const READY_TIMEOUT: Duration = Duration::from_secs(5);

/// How many times a start whose free port was taken before it could bind it is tried again
/// on another free port ([`start_on_port`]).
pub const PORT_RETRIES: usize = 3;

/// A server that one process makes, as a database service starts it (PostgreSQL's,
/// MariaDB's): [`start_on_port`] starts it the same way for both, here or on a host.
#[async_trait::async_trait]
pub trait OneProcess: Send + Sync {
    fn node_name(&self) -> &str;
    /// Its data folder, which it reports once it serves.
    fn data_dir(&self) -> &Path;
    /// Starts its process on `port`.
    async fn spawn(&self, port: u16) -> Result<Instance, ClusterError>;
    /// The data folder of the server at `host:port`, asked as the run's user with its
    /// password; or why not.
    async fn serves_folder(&self, host: &str, port: u16) -> Result<String, String>;
    /// Kills a start that failed (its children too, where it forks them).
    fn kill(&self, instance: &mut Instance) {
        instance.kill();
    }
}

/// How long a database's start may take to serve: a restart after SIGKILL replays its log
/// first, and a loaded CI machine is slow at both.
const DATABASE_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Polls until the server accepts the run's user and reports its own data folder (which
/// tells it from a stranger on the port).
async fn wait_serving(server: &dyn OneProcess, instance: &mut Instance) -> Result<(), NotReady> {
    let patience = instance.machine().patience(DATABASE_READY_TIMEOUT);
    let deadline = instance.spawned_at() + patience;
    let mut pause = Duration::from_millis(5);
    loop {
        let Some(process) = instance.process_mut() else {
            return Err(NotReady::Failed("it is not running".into()));
        };
        if let Some(exit) = process.try_wait() {
            return Err(instance.exited(exit));
        }
        let last = match server.serves_folder(instance.host(), instance.port()).await {
            // MariaDB's @@datadir ends with a slash: compared as paths.
            Ok(dir) if Path::new(&dir) == server.data_dir() => {
                tracing::debug!(node = server.node_name(), elapsed = ?instance.spawned_at().elapsed(), "ready");
                return Ok(());
            }
            Ok(dir) => format!("the server on its port serves another folder ({dir})"),
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(NotReady::Failed(format!(
                "no authenticated connection within {patience:?} (last: {last})"
            )));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Starts `server` on `choice` and waits until it serves: again on another free port, up to
/// [`PORT_RETRIES`] times, when a free one was taken before it could bind it (`PortInUse` for
/// a fixed one, as on a restart); any other failure kills it, with its log quoted.
pub async fn start_on_port(
    server: &dyn OneProcess,
    mut choice: PortChoice,
) -> Result<Instance, ClusterError> {
    let mut retries = 0;
    loop {
        let mut instance = server.spawn(choice.port()).await?;
        match wait_serving(server, &mut instance).await {
            Ok(()) => return Ok(instance),
            Err(NotReady::AddressInUse) => match choice {
                PortChoice::Fixed(port) => {
                    return Err(ClusterError::PortInUse {
                        node: server.node_name().to_string(),
                        port,
                    })
                }
                PortChoice::Free(_) if retries < PORT_RETRIES => {
                    retries += 1;
                    choice = PortChoice::Free(super::ports::free_port()?);
                }
                PortChoice::Free(_) => {
                    return Err(instance.error("its port was taken before it could bind it"))
                }
            },
            Err(NotReady::Failed(reason)) => {
                server.kill(&mut instance);
                return Err(instance.error(reason));
            }
        }
    }
}

/// Why a process is not ready.
#[derive(Debug)]
pub enum NotReady {
    /// It exited because its port was taken between our check and its bind.
    AddressInUse,
    /// Anything else, in words.
    Failed(String),
}

/// A spawned server process of a node.
#[derive(Debug)]
pub struct Instance {
    name: String,
    port: u16,
    dir: PathBuf,
    log: PathBuf,
    machine: Arc<dyn Machine>,
    process: Option<Box<dyn Proc>>,
    cursor: LogCursor,
    spawned_at: Instant,
}

impl Instance {
    /// Starts `launch` on `machine` as the node that serves on `port` with its data in
    /// `dir`. Its stdout and stderr go to its log: a bad argument or an unwritable log
    /// file is reported there before the server opens its own log.
    pub async fn launch(
        machine: Arc<dyn Machine>,
        port: u16,
        dir: &Path,
        launch: &Launch,
    ) -> Result<Instance, ClusterError> {
        let cursor = LogCursor::at_end(&launch.log);
        let process = machine.spawn(launch).await?;
        tracing::debug!(node = launch.name, port, pid = process.pid(), "spawned");
        Ok(Instance {
            name: launch.name.clone(),
            port,
            dir: dir.to_path_buf(),
            log: launch.log.clone(),
            machine,
            process: Some(process),
            cursor,
            spawned_at: Instant::now(),
        })
    }

    /// Where it runs.
    pub fn machine(&self) -> &dyn Machine {
        self.machine.as_ref()
    }

    /// The address it serves on.
    pub fn host(&self) -> &str {
        self.machine.addr()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The pid while the process has not ended.
    pub fn pid(&self) -> Option<u32> {
        self.process
            .as_ref()
            .filter(|p| p.exit().is_none())
            .map(|p| p.pid())
    }

    pub fn process(&self) -> Option<&dyn Proc> {
        self.process.as_deref()
    }

    pub fn process_mut(&mut self) -> Option<&mut (dyn Proc + 'static)> {
        self.process.as_deref_mut()
    }

    /// Polls until the process answers an authenticated `INFO server` with its own pid
    /// (which tells our server from a stranger that took the port first), then `PING`
    /// (which fails while the dataset is loading).
    pub async fn wait_ready(&mut self, password: &str) -> Result<MultiplexedConnection, NotReady> {
        let patience = self.machine.patience(READY_TIMEOUT);
        let deadline = self.spawned_at + patience;
        let mut pause = Duration::from_millis(1);
        loop {
            let Some(process) = self.process.as_mut() else {
                return Err(NotReady::Failed("it is not running".into()));
            };
            if let Some(exit) = process.try_wait() {
                return Err(self.exited(exit));
            }
            let pid = process.pid();
            let conn = probe::connect_to(self.machine.addr(), self.port, Some(password)).await;
            if let Ok(mut conn) = conn {
                let ours = probe::server_pid(&mut conn).await.ok().flatten() == Some(pid);
                // INFO answers while an AOF is still loading; PING does not (LOADING).
                if ours && probe::ping(&mut conn).await.is_ok() {
                    tracing::debug!(node = self.name, elapsed = ?self.spawned_at.elapsed(), "ready");
                    return Ok(conn);
                }
            }
            if Instant::now() >= deadline {
                return Err(NotReady::Failed(format!(
                    "no answer to an authenticated INFO within {patience:?}"
                )));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }

    /// When it was spawned: readiness deadlines count from there.
    pub fn spawned_at(&self) -> Instant {
        self.spawned_at
    }

    /// Why a process that ended before it was ready ended: its port taken, or else.
    pub fn exited(&self, exit: Exit) -> NotReady {
        if self.cursor.since().contains("Address already in use") {
            NotReady::AddressInUse
        } else {
            NotReady::Failed(format!("it ended ({exit})"))
        }
    }

    /// A start error quoting the log this start wrote.
    pub fn error(&self, reason: impl Into<String>) -> ClusterError {
        self.machine.start_error(
            &self.name,
            self.port,
            reason.into(),
            &self.log,
            self.cursor.tail(TAIL_LINES),
        )
    }

    /// The instance, once `ready` says it serves; else killed, with the reason as its start
    /// error (quoting its log).
    pub fn kept_if<T>(mut self, ready: Result<T, String>) -> Result<Instance, ClusterError> {
        match ready {
            Ok(_) => Ok(self),
            Err(reason) => {
                self.kill();
                Err(self.error(reason))
            }
        }
    }

    /// SIGKILL and reap now (the crash a nemesis wants; also the failure path).
    pub fn kill(&mut self) -> Option<Exit> {
        self.process.as_mut().map(|p| p.kill())
    }
}
