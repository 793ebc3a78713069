//! One running redis process (server or sentinel): its guard, port, folders and readiness.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

use super::error::ClusterError;
use super::exit::Exit;
use super::logs::LogCursor;
use super::probe;
use super::process::{self, ChildGuard};

/// How long a process may take from spawn to answering an authenticated INFO. Measured
/// starts take 11–21 ms; 5 s leaves room for a loaded CI machine without hiding a hang.
pub const READY_TIMEOUT: Duration = Duration::from_secs(5);

/// How many log lines an error quotes.
const TAIL_LINES: usize = 20;

/// Why a process is not ready.
#[derive(Debug)]
pub enum NotReady {
    /// It exited because its port was taken between our check and its bind.
    AddressInUse,
    /// Anything else, in words.
    Failed(String),
}

/// A spawned redis-server or redis-sentinel.
#[derive(Debug)]
pub struct Instance {
    name: String,
    port: u16,
    dir: PathBuf,
    log: PathBuf,
    guard: Option<ChildGuard>,
    cursor: LogCursor,
    spawned_at: Instant,
}

impl Instance {
    /// Spawns `command` (which must make the process log to `log`) as node `name`.
    /// Its stdout and stderr go to the same log: a bad argument or an unwritable log file
    /// is reported there before Redis opens its own log.
    pub fn spawn(
        name: &str,
        port: u16,
        dir: &Path,
        log: &Path,
        command: Command,
    ) -> Result<Instance, ClusterError> {
        Instance::spawn_tree(name, port, dir, log, command, false)
    }

    /// Like [`Instance::spawn`]; with `tree`, pauses and kills reach the process's children
    /// too (postgres's backends).
    pub fn spawn_tree(
        name: &str,
        port: u16,
        dir: &Path,
        log: &Path,
        mut command: Command,
        tree: bool,
    ) -> Result<Instance, ClusterError> {
        let cursor = LogCursor::at_end(log);
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| ClusterError::io("open the log", log, e))?;
        let err = out
            .try_clone()
            .map_err(|e| ClusterError::io("open the log", log, e))?;
        command
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        let program = PathBuf::from(command.get_program());
        let guard =
            process::spawn_tree(name, command, tree).map_err(|source| ClusterError::Spawn {
                binary: program,
                source,
            })?;
        tracing::debug!(node = name, port, pid = guard.pid(), "spawned");
        Ok(Instance {
            name: name.to_string(),
            port,
            dir: dir.to_path_buf(),
            log: log.to_path_buf(),
            guard: Some(guard),
            cursor,
            spawned_at: Instant::now(),
        })
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

    /// The pid while the process has not been reaped.
    pub fn pid(&self) -> Option<u32> {
        self.guard
            .as_ref()
            .filter(|g| g.exit().is_none())
            .map(|g| g.pid())
    }

    pub fn guard(&self) -> Option<&ChildGuard> {
        self.guard.as_ref()
    }

    pub fn guard_mut(&mut self) -> Option<&mut ChildGuard> {
        self.guard.as_mut()
    }

    /// Polls until the process answers an authenticated `INFO server` with its own pid
    /// (which tells our server from a stranger that took the port first), then `PING`
    /// (which fails while the dataset is loading).
    pub async fn wait_ready(&mut self, password: &str) -> Result<MultiplexedConnection, NotReady> {
        let deadline = self.spawned_at + READY_TIMEOUT;
        let mut pause = Duration::from_millis(1);
        loop {
            let Some(guard) = self.guard.as_mut() else {
                return Err(NotReady::Failed("it is not running".into()));
            };
            if let Some(exit) = guard.try_wait() {
                return Err(self.exited(exit));
            }
            let pid = guard.pid();
            if let Ok(mut conn) = probe::connect(self.port, Some(password)).await {
                let ours = probe::server_pid(&mut conn).await.ok().flatten() == Some(pid);
                // INFO answers while an AOF is still loading; PING does not (LOADING).
                if ours && probe::ping(&mut conn).await.is_ok() {
                    tracing::debug!(node = self.name, elapsed = ?self.spawned_at.elapsed(), "ready");
                    return Ok(conn);
                }
            }
            if Instant::now() >= deadline {
                return Err(NotReady::Failed(format!(
                    "no answer to an authenticated INFO within {READY_TIMEOUT:?}"
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
        ClusterError::StartFailed {
            node: self.name.clone(),
            port: self.port,
            reason: reason.into(),
            log: self.cursor.path().to_path_buf(),
            tail: self.cursor.tail(TAIL_LINES),
        }
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
        self.guard.as_mut().map(|g| g.kill())
    }
}
