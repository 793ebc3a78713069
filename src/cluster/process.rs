//! A guard per child process: it signals, reaps and, when dropped, kills its child.
//!
//! All pid handling goes through `registry`, which guarantees that a pid is signalled only
//! while it is still our unreaped child.

use std::io;
use std::process::{ChildStderr, ChildStdin, ChildStdout, Command};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::error::{ClusterError, SignalError};
use super::exit::Exit;
use super::registry;

/// One started process, here or on a host (`machine`): its pid, its end, the signals a
/// nemesis sends it.
pub trait Proc: std::fmt::Debug + Send + Sync {
    fn name(&self) -> &str;
    fn pid(&self) -> u32;
    /// How it ended, once that is known; None while it runs (or is stopped).
    fn try_wait(&mut self) -> Option<Exit>;
    /// What [`Proc::try_wait`] last found.
    fn exit(&self) -> Option<Exit>;
    /// Sends `signal` while it runs (SIGSTOP / SIGCONT: a pause).
    fn signal(&self, signal: Signal) -> Result<(), ClusterError>;
    /// SIGCONT, SIGKILL and its end: a crash.
    fn kill(&mut self) -> Exit;
}

impl Proc for ChildGuard {
    fn name(&self) -> &str {
        &self.name
    }

    fn pid(&self) -> u32 {
        self.pid
    }

    fn try_wait(&mut self) -> Option<Exit> {
        ChildGuard::try_wait(self)
    }

    fn exit(&self) -> Option<Exit> {
        self.exit
    }

    fn signal(&self, signal: Signal) -> Result<(), ClusterError> {
        Ok(ChildGuard::signal(self, signal)?)
    }

    fn kill(&mut self) -> Exit {
        ChildGuard::kill(self)
    }
}

/// Owns one child process: ends it (SIGCONT, SIGKILL, reap) when dropped.
#[derive(Debug)]
pub struct ChildGuard {
    name: String,
    pid: u32,
    exit: Option<Exit>,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
}

/// Spawns `cmd` as an owned child named `name` (the name is only for messages).
///
/// Piped stdio is available through the guard's `take_*` methods (wrap them with
/// `tokio::process::ChildStdout::from_std` for async reading).
pub fn spawn(name: &str, cmd: Command) -> io::Result<ChildGuard> {
    spawn_tree(name, cmd, false)
}

/// Like [`spawn`]; with `tree`, the child's children (postgres's backends) are paused,
/// resumed and killed with it.
pub fn spawn_tree(name: &str, cmd: Command, tree: bool) -> io::Result<ChildGuard> {
    let mut child = registry::spawn(name, cmd, tree)?;
    // Dropping a std Child neither kills nor waits: from here the guard owns the pid.
    Ok(ChildGuard {
        name: name.to_string(),
        pid: child.id(),
        exit: None,
        stdin: child.stdin.take(),
        stdout: child.stdout.take(),
        stderr: child.stderr.take(),
    })
}

impl ChildGuard {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.stdout.take()
    }

    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.stderr.take()
    }

    /// How it ended, once it has been reaped.
    pub fn exit(&self) -> Option<Exit> {
        self.exit
    }

    /// Sends `signal` if the child has not been reaped (SIGSTOP/SIGCONT for a pause, …).
    /// A pause or a resume of a child that has died (killed from outside, not yet reaped)
    /// pauses or resumes nothing: `Gone`, though the kernel takes the signal.
    pub fn signal(&self, signal: Signal) -> Result<(), SignalError> {
        let sent = match self.exit {
            Some(_) => None,
            None if matches!(signal, Signal::SIGSTOP | Signal::SIGCONT)
                && !super::procfs::is_live(self.pid) =>
            {
                None
            }
            None => registry::signal(self.pid, signal),
        };
        match sent {
            None => Err(SignalError::Gone {
                name: self.name.clone(),
                pid: self.pid,
            }),
            Some(result) => result.map_err(|source| SignalError::Failed {
                name: self.name.clone(),
                pid: self.pid,
                signal,
                source,
            }),
        }
    }

    /// Reaps the child if it has ended; None while it runs (or is stopped).
    pub fn try_wait(&mut self) -> Option<Exit> {
        if self.exit.is_some() {
            return self.exit;
        }
        self.exit = registry::try_reap(self.pid);
        self.exit
    }

    /// Resumes (a paused child cannot die of SIGTERM) and kills with SIGKILL, then reaps,
    /// blocking for at most a few seconds.
    pub fn kill(&mut self) -> Exit {
        if let Some(exit) = self.try_wait() {
            return exit;
        }
        let _ = self.signal(Signal::SIGCONT);
        let _ = self.signal(Signal::SIGKILL);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(exit) = self.try_wait() {
                return exit;
            }
            if Instant::now() > deadline {
                // A process stuck in the kernel; it stays registered so that a later
                // cleanup can still reap it.
                tracing::warn!(
                    "{} (pid {}) did not die within 5 s of SIGKILL",
                    self.name,
                    self.pid
                );
                return Exit::Unknown;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Graceful stop: SIGCONT, SIGTERM, up to `grace` for it to exit, then SIGKILL.
    pub async fn terminate(&mut self, grace: Duration) -> Exit {
        terminate_all(&mut [self as &mut dyn Proc], grace).await;
        self.exit.unwrap_or(Exit::Unknown)
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if self.exit.is_none() {
            self.kill();
        }
    }
}

/// Stops several processes at once: SIGCONT and SIGTERM to all, then waits up to `grace`
/// for them together, then SIGKILL for whoever is left. Concurrent, so a teardown costs one
/// grace period, not one per process.
pub async fn terminate_all(children: &mut [&mut dyn Proc], grace: Duration) {
    for child in children.iter() {
        if child.exit().is_none() {
            let _ = child.signal(Signal::SIGCONT);
            let _ = child.signal(Signal::SIGTERM);
        }
    }
    let deadline = Instant::now() + grace;
    let mut pause = Duration::from_millis(1);
    loop {
        let mut running = 0;
        for child in children.iter_mut() {
            if child.try_wait().is_none() {
                running += 1;
            }
        }
        if running == 0 {
            return;
        }
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(20));
    }
    for child in children.iter_mut() {
        if child.exit().is_none() {
            tracing::warn!(
                "{} (pid {}) ignored SIGTERM for {grace:?}; killing it",
                child.name(),
                child.pid()
            );
            child.kill();
        }
    }
}
