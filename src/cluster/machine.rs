//! Where a node's process runs, behind one seam: this machine ([`Local`]) or an SSH host
//! ([`OnHost`]), as Jepsen's `jepsen.control` runs the same commands on a local or a
//! remote node. A service says what to run ([`Launch`]: program, arguments, environment,
//! log, the folders and files to ready first); the machine starts it in the foreground,
//! owned by lockaudit, and hands back a [`Proc`] that signals, kills and reaps it.
//!
//! On a host the process runs under a small shell in an SSH session of its own: the shell
//! prints the process's pid (which faults signal with `kill` over the connection), waits
//! for it and prints how it ended. A watcher in that shell SIGKILLs the process when the
//! session's stdin closes, so a lockaudit that dies (even by SIGKILL: its ssh children die
//! with it) leaves nothing running on the host.

use std::ffi::OsString;
use std::fmt::Debug;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use nix::sys::signal::Signal;
use nix::unistd::{Gid, Uid};

use super::error::ClusterError;
use super::exit::Exit;
use super::process::{self, ChildGuard, Proc};
use super::ssh::{Ssh, COMMAND_TIMEOUT};
use crate::shell::quote;

/// What to start: one long-running process of a node.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The node's name (`master-0`, `etcd-1`), for messages and the process table.
    pub name: String,
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Added to the environment (a fake clock's preload).
    pub env: Vec<(String, OsString)>,
    /// Taken out of the environment (a variable that would change how it runs).
    pub unset: Vec<String>,
    /// Its stdout and stderr are appended here.
    pub log: PathBuf,
    /// Pauses and kills reach its children too (postgres's backends).
    pub tree: bool,
    /// Runs as this user (a database that refuses root); None: as lockaudit runs.
    pub run_as: Option<RunAs>,
    /// Done first, in order, as part of the start (on a host, in the same round trip).
    pub prepare: Vec<Prepare>,
}

/// A step that readies a node's files before it starts. Nothing secret: on a host it
/// travels on the shell's command line (secrets go through [`Machine::write_private`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prepare {
    /// Removes the folder and what it holds.
    Empty(PathBuf),
    /// Makes the folder and those above it.
    Make(PathBuf),
    /// Writes the file whole.
    Write(PathBuf, String),
}

/// Why a one-shot command (`initdb`) did not do its work; its output is in its log.
#[derive(Debug, thiserror::Error)]
pub enum OneShotError {
    #[error("{0}")]
    Spawn(ClusterError),
    #[error("{name} failed ({exit})")]
    Failed { name: String, exit: Exit },
    #[error("{name} did not finish in {patience:?}")]
    TooLong { name: String, patience: Duration },
}

/// A folder the unprivileged user cannot pass through, on the way to where its data goes.
#[derive(Debug, thiserror::Error)]
#[error(
    "{program} must run as the unprivileged user `{user}` (lockaudit runs as root) and cannot enter {} (mode {mode:o}), where its data would go: set TMPDIR to a folder others may pass through",
    folder.display()
)]
pub struct FolderClosed {
    pub program: &'static str,
    pub user: String,
    pub folder: PathBuf,
    pub mode: u32,
}

/// An unprivileged user a process runs as: a database that refuses to run as root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    pub name: String,
    pub uid: Uid,
    pub gid: Gid,
    /// The program that needs it, for messages (`postgres`, `mariadbd`).
    pub program: &'static str,
}

impl Launch {
    /// A launch of `program` for node `name`, logging to `log`, with nothing else set.
    pub fn new(name: &str, program: impl Into<OsString>, log: &Path) -> Launch {
        Launch {
            name: name.to_string(),
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            unset: Vec::new(),
            log: log.to_path_buf(),
            tree: false,
            run_as: None,
            prepare: Vec::new(),
        }
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Launch {
        self.args.push(arg.into());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Launch {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn envs<I: IntoIterator<Item = (K, V)>, K: Into<String>, V: Into<OsString>>(
        mut self,
        env: I,
    ) -> Launch {
        self.env
            .extend(env.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }
}

/// Where a node's processes run and its files are kept.
#[async_trait]
pub trait Machine: Debug + Send + Sync {
    /// The address its servers bind and clients reach them on.
    fn addr(&self) -> &str;
    /// Whether it is this machine (its processes' pids are ours to look up in /proc).
    fn is_local(&self) -> bool {
        false
    }
    /// Runs `launch`'s preparation, then starts it in the foreground (stdin /dev/null,
    /// stdout and stderr appended to its log), owned by lockaudit.
    async fn spawn(&self, launch: &Launch) -> Result<Box<dyn Proc>, ClusterError>;
    /// Writes `contents` to `path` (its folder made if need be), replacing it whole: a
    /// reader never finds it half-written (a fake clock's offset file is read on every
    /// time call). Readable by its owner alone (0600).
    fn write_private(&self, path: &Path, contents: &[u8]) -> Result<(), ClusterError>;
    /// The file's bytes.
    fn read(&self, path: &Path) -> Result<Vec<u8>, ClusterError>;
    /// Removes the file, if it is there.
    fn remove_file(&self, path: &Path) -> Result<(), ClusterError>;
    /// Makes `path` `user`'s (a folder or file a process running as `user` must own).
    fn hand_over(&self, path: &Path, user: &RunAs) -> Result<(), ClusterError>;
    /// The unprivileged user `program` (a database that refuses root) runs as here: None
    /// unless processes start as root here; else the first of `users` there is.
    fn unprivileged(
        &self,
        program: &'static str,
        users: &[&str],
    ) -> Result<Option<RunAs>, ClusterError>;
    /// Runs `launch` to its end (a one-shot command, `initdb`), for at most `patience`:
    /// Ok if it exited 0, else why not (its output is in its log).
    async fn run(&self, launch: &Launch, patience: Duration) -> Result<(), OneShotError> {
        let mut process = self.spawn(launch).await.map_err(OneShotError::Spawn)?;
        let deadline = std::time::Instant::now() + patience;
        loop {
            match process.try_wait() {
                Some(Exit::Code(0)) => return Ok(()),
                Some(exit) => {
                    return Err(OneShotError::Failed {
                        name: launch.name.clone(),
                        exit,
                    })
                }
                None if std::time::Instant::now() >= deadline => {
                    process.kill();
                    return Err(OneShotError::TooLong {
                        name: launch.name.clone(),
                        patience,
                    });
                }
                None => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }
    /// How long a start may take to serve, given what it takes here: on a host, room for
    /// the SSH round trips on top.
    fn patience(&self, here: Duration) -> Duration {
        here
    }
    /// Why node `node` (on `port`) did not start, quoting its log: `tail_here` is what
    /// this start wrote to it, as read here (a host reads its own log's last lines).
    fn start_error(
        &self,
        node: &str,
        port: u16,
        reason: String,
        log: &Path,
        tail_here: String,
    ) -> ClusterError;
}

/// How many log lines a start error quotes.
pub const TAIL_LINES: usize = 20;

/// This machine: processes are children of lockaudit (see `registry`), files are local.
#[derive(Debug, Clone, Copy, Default)]
pub struct Local;

/// The loopback address every local server binds.
pub const LOOPBACK: &str = "127.0.0.1";

#[async_trait]
impl Machine for Local {
    fn addr(&self) -> &str {
        LOOPBACK
    }

    fn is_local(&self) -> bool {
        true
    }

    async fn spawn(&self, launch: &Launch) -> Result<Box<dyn Proc>, ClusterError> {
        for step in &launch.prepare {
            prepare_here(step)?;
        }
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&launch.log)
            .map_err(|e| ClusterError::io("open the log", &launch.log, e))?;
        let err = out
            .try_clone()
            .map_err(|e| ClusterError::io("open the log", &launch.log, e))?;
        let mut command = Command::new(&launch.program);
        command
            .args(&launch.args)
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        for key in &launch.unset {
            command.env_remove(key);
        }
        if let Some(user) = &launch.run_as {
            user.apply(&mut command);
        }
        let guard = process::spawn_tree(&launch.name, command, launch.tree).map_err(|source| {
            ClusterError::Spawn {
                binary: PathBuf::from(&launch.program),
                source,
            }
        })?;
        Ok(Box::new(guard))
    }

    fn write_private(&self, path: &Path, contents: &[u8]) -> Result<(), ClusterError> {
        crate::private::replace(path, contents)
            .map_err(|e| ClusterError::io(e.action, e.path, e.source))
    }

    fn read(&self, path: &Path) -> Result<Vec<u8>, ClusterError> {
        std::fs::read(path).map_err(|e| ClusterError::io("read", path, e))
    }

    fn remove_file(&self, path: &Path) -> Result<(), ClusterError> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(ClusterError::io("remove", path, e))
            }
            _ => Ok(()),
        }
    }

    fn hand_over(&self, path: &Path, user: &RunAs) -> Result<(), ClusterError> {
        user.own(path)
    }

    fn unprivileged(
        &self,
        program: &'static str,
        users: &[&str],
    ) -> Result<Option<RunAs>, ClusterError> {
        RunAs::for_program(program, users)
    }

    fn start_error(
        &self,
        node: &str,
        port: u16,
        reason: String,
        log: &Path,
        tail_here: String,
    ) -> ClusterError {
        ClusterError::StartFailed {
            node: node.to_string(),
            port,
            reason,
            log: log.to_path_buf(),
            tail: tail_here,
        }
    }
}

fn prepare_here(step: &Prepare) -> Result<(), ClusterError> {
    match step {
        Prepare::Empty(dir) if dir.exists() => std::fs::remove_dir_all(dir)
            .map_err(|e| ClusterError::io("empty the data folder", dir, e)),
        Prepare::Empty(_) => Ok(()),
        Prepare::Make(dir) => std::fs::create_dir_all(dir)
            .map_err(|e| ClusterError::io("create the data folder", dir, e)),
        Prepare::Write(path, text) => {
            std::fs::write(path, text).map_err(|e| ClusterError::io("write", path, e))
        }
    }
}

impl RunAs {
    /// None unless we are root; else the first of `users` this machine has, for `program`.
    pub fn for_program(
        program: &'static str,
        users: &[&str],
    ) -> Result<Option<RunAs>, ClusterError> {
        if !Uid::effective().is_root() {
            return Ok(None);
        }
        for name in users {
            if let Ok(Some(user)) = nix::unistd::User::from_name(name) {
                return Ok(Some(RunAs {
                    name: user.name,
                    uid: user.uid,
                    gid: user.gid,
                    program,
                }));
            }
        }
        let names: Vec<String> = users.iter().map(|u| format!("`{u}`")).collect();
        Err(ClusterError::InvalidSpec(format!(
            "lockaudit runs as root, {program} refuses to, and there is no {} user to run it as",
            names.join(" nor ")
        )))
    }

    /// Hands `path` to this user.
    pub fn own(&self, path: &Path) -> Result<(), ClusterError> {
        nix::unistd::chown(path, Some(self.uid), Some(self.gid))
            .map_err(|e| ClusterError::io("hand over to the unprivileged user", path, e.into()))
    }

    /// Whether this user may pass through a folder with this metadata.
    fn passes(&self, meta: &std::fs::Metadata) -> bool {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let mode = meta.permissions().mode();
        if meta.uid() == self.uid.as_raw() {
            mode & 0o100 != 0
        } else if meta.gid() == self.gid.as_raw() {
            mode & 0o010 != 0
        } else {
            mode & 0o001 != 0
        }
    }

    /// Why this user cannot reach into `folder` (the first of it and the folders above it
    /// that it may not pass through), or Ok.
    pub fn reaches(&self, folder: &Path) -> Result<(), FolderClosed> {
        use std::os::unix::fs::PermissionsExt;
        for folder in folder.ancestors() {
            let Ok(meta) = std::fs::metadata(folder) else {
                continue;
            };
            if !self.passes(&meta) {
                return Err(FolderClosed {
                    program: self.program,
                    user: self.name.clone(),
                    folder: folder.to_path_buf(),
                    mode: meta.permissions().mode() & 0o7777,
                });
            }
        }
        Ok(())
    }

    /// Makes a local `command` drop to this user in the child, before exec (and before
    /// the registry's parent-death signal, which a change of user would clear).
    pub fn apply(&self, command: &mut Command) {
        let (uid, gid) = (self.uid, self.gid);
        // SAFETY: runs in the forked child before exec and makes only the setgroups, setgid
        // and setuid system calls; it allocates nothing and takes no lock.
        unsafe {
            command.pre_exec(move || {
                nix::unistd::setgroups(&[gid]).map_err(std::io::Error::from)?;
                nix::unistd::setgid(gid).map_err(std::io::Error::from)?;
                nix::unistd::setuid(uid).map_err(std::io::Error::from)?;
                Ok(())
            });
        }
    }
}

/// An SSH host: processes run under a supervising shell in a session of their own, files
/// are read and written over the host's connection.
#[derive(Debug, Clone)]
pub struct OnHost {
    pub ssh: Arc<Ssh>,
}

#[async_trait]
impl Machine for OnHost {
    fn addr(&self) -> &str {
        self.ssh.host_addr()
    }

    async fn spawn(&self, launch: &Launch) -> Result<Box<dyn Proc>, ClusterError> {
        let what = format!("{} on {}", launch.name, self.addr());
        let mut guard = self.ssh.spawn(&what, &supervisor(launch))?;
        let error = |reason: &str| self.ssh.error(format!("start {}", launch.name), reason);
        let stdout = guard
            .take_stdout()
            .ok_or_else(|| error("no pipe from ssh"))?;
        let ended = Arc::new(Mutex::new(None));
        let (pid_tx, pid_rx) = mpsc::channel();
        let slot = ended.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(pid) = line.strip_prefix("pid ") {
                    let _ = pid_tx.send(pid.trim().parse::<u32>().ok());
                } else if let Some(code) = line.strip_prefix("exit ") {
                    *slot.lock().unwrap_or_else(|p| p.into_inner()) = code.trim().parse().ok();
                }
            }
        });
        // The shell echoes the pid right after the fork, so this is one round trip: as much
        // patience as any command on the host gets (a busy host took over 5 s once). A
        // session that ends first ends the reader and so this wait.
        let pid = tokio::task::spawn_blocking(move || pid_rx.recv_timeout(COMMAND_TIMEOUT))
            .await
            .ok()
            .and_then(Result::ok)
            .flatten();
        let Some(pid) = pid else {
            return Err(error("the host's shell never reported the process's pid"));
        };
        Ok(Box::new(HostProcess {
            name: launch.name.clone(),
            tree: launch.tree,
            ssh: self.ssh.clone(),
            guard,
            pid,
            ended,
            exit: None,
        }))
    }

    fn write_private(&self, path: &Path, contents: &[u8]) -> Result<(), ClusterError> {
        let folder = path.parent().unwrap_or(Path::new("/")).to_string_lossy();
        let path = path.to_string_lossy();
        let script = format!(
            "umask 077 && mkdir -p {folder} && cat > {tmp} && mv -f {tmp} {path}",
            folder = quote(&folder),
            tmp = quote(&format!("{path}.upload")),
            path = quote(&path),
        );
        self.ssh
            .run_with_input(&format!("write {path}"), &script, contents)
            .map(|_| ())
    }

    /// Over a network: the local patience again, for the SSH round trips.
    fn patience(&self, here: Duration) -> Duration {
        here * 2
    }

    fn start_error(
        &self,
        node: &str,
        _port: u16,
        reason: String,
        log: &Path,
        _tail_here: String,
    ) -> ClusterError {
        let log = log.to_string_lossy();
        let tail = self
            .ssh
            .run(
                "read the log",
                &format!("tail -n {TAIL_LINES} {} 2>&1", quote(&log)),
            )
            .map(|o| o.stdout)
            .unwrap_or_default();
        self.ssh.error(
            format!("start {node}"),
            match tail.trim_end() {
                "" => format!("{reason} ({log} on the host is empty or missing)"),
                tail => format!("{reason}\nlast lines of {log} on the host:\n{tail}"),
            },
        )
    }

    fn read(&self, path: &Path) -> Result<Vec<u8>, ClusterError> {
        let path = path.to_string_lossy();
        self.ssh
            .run_bytes(&format!("read {path}"), &format!("cat {}", quote(&path)))
    }

    fn remove_file(&self, path: &Path) -> Result<(), ClusterError> {
        let path = path.to_string_lossy();
        self.ssh
            .run(
                &format!("remove {path}"),
                &format!("rm -f {}", quote(&path)),
            )
            .map(|_| ())
    }

    fn hand_over(&self, path: &Path, user: &RunAs) -> Result<(), ClusterError> {
        let path = path.to_string_lossy();
        self.ssh
            .run(
                &format!("hand {path} over to {}", user.name),
                &format!("chown {}:{} {}", user.uid, user.gid, quote(&path)),
            )
            .map(|_| ())
    }

    /// As here, asked of the host in one command: its login user's uid, then each of
    /// `users`' uid and gid (or nothing for a user it lacks).
    fn unprivileged(
        &self,
        program: &'static str,
        users: &[&str],
    ) -> Result<Option<RunAs>, ClusterError> {
        let mut script = String::from("id -u");
        for user in users {
            let user = quote(user);
            script.push_str(&format!(
                "; echo $(id -u {user} 2>/dev/null) $(id -g {user} 2>/dev/null)"
            ));
        }
        let out = self
            .ssh
            .run(&format!("look for a user to run {program} as"), &script)?;
        let mut lines = out.stdout.lines();
        if lines.next().map(str::trim) != Some("0") {
            return Ok(None);
        }
        for (name, line) in users.iter().zip(lines) {
            let ids: Vec<u32> = line
                .split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect();
            if let [uid, gid] = ids[..] {
                return Ok(Some(RunAs {
                    name: name.to_string(),
                    uid: Uid::from_raw(uid),
                    gid: Gid::from_raw(gid),
                    program,
                }));
            }
        }
        Err(self.ssh.error(
            format!("run {program}"),
            format!("the host logs in as root, {program} refuses to run as root, and the host has none of the users {}", users.join(", ")),
        ))
    }
}

/// The supervising shell of `launch` on a host: its preparation first (ending the script
/// if it fails), then the process with stdin /dev/null and its output in its log; fd 3
/// keeps the session's stdin for the watcher (an asynchronous command's stdin is
/// /dev/null otherwise). `umask 077`: what it writes is the login user's alone.
fn supervisor(launch: &Launch) -> String {
    // The log's folder first: the shell's redirection into it fails without it.
    let log_folder = Prepare::Make(launch.log.parent().unwrap_or(Path::new("/")).into());
    let steps: Vec<String> = std::iter::once(&log_folder)
        .chain(&launch.prepare)
        .map(|step| match step {
            Prepare::Empty(dir) => format!("rm -rf {}", quote(&dir.to_string_lossy())),
            Prepare::Make(dir) => format!("mkdir -p {}", quote(&dir.to_string_lossy())),
            Prepare::Write(path, text) => format!(
                "printf '%s' {} > {}",
                quote(text),
                quote(&path.to_string_lossy())
            ),
        })
        .collect();
    let prepare = format!("{} || exit 1; ", steps.join(" && "));
    let mut run = String::new();
    if !launch.env.is_empty() || !launch.unset.is_empty() {
        run.push_str("env ");
        for key in &launch.unset {
            run.push_str(&format!("-u {} ", quote(key)));
        }
        for (key, value) in &launch.env {
            run.push_str(&quote(&format!("{key}={}", value.to_string_lossy())));
            run.push(' ');
        }
    }
    if let Some(user) = &launch.run_as {
        // setpriv execs the program itself (runuser would stay its parent, and the pid the
        // nemesis signals would be runuser's), with the same ids as `RunAs::apply` here.
        run.push_str(&format!(
            "setpriv --reuid={uid} --regid={gid} --groups={gid} -- ",
            uid = user.uid,
            gid = user.gid
        ));
    }
    run.push_str(&quote(&launch.program.to_string_lossy()));
    for arg in &launch.args {
        run.push(' ');
        run.push_str(&quote(&arg.to_string_lossy()));
    }
    format!(
        "umask 077; {prepare}exec 3<&0; {run} </dev/null >>{log} 2>&1 3<&- & pid=$!; echo \"pid $pid\"; \
         (cat <&3 >/dev/null; kill -CONT $pid; kill -KILL $pid) >/dev/null 2>&1 & watch=$!; \
         exec 3<&-; wait $pid; code=$?; kill $watch 2>/dev/null; echo \"exit $code\"",
        log = quote(&launch.log.to_string_lossy()),
    )
}

/// How long a killed process's shell may take to report its end.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// A process on a host, and the session that supervises it.
#[derive(Debug)]
struct HostProcess {
    name: String,
    /// Signals reach its children too (`Launch::tree`).
    tree: bool,
    ssh: Arc<Ssh>,
    /// The local ssh client; killing it closes the session, and the watcher kills the
    /// process.
    guard: ChildGuard,
    /// Its pid on the host.
    pid: u32,
    /// The shell's `exit <code>` once the process has ended.
    ended: Arc<Mutex<Option<i32>>>,
    exit: Option<Exit>,
}

impl HostProcess {
    fn ended(&self) -> Option<Exit> {
        let code = (*self.ended.lock().unwrap_or_else(|p| p.into_inner()))?;
        Some(exit_of(code))
    }
}

/// A shell's `$?` as an [`Exit`]: above 128, the signal that ended it.
fn exit_of(code: i32) -> Exit {
    match Signal::try_from(code - 128) {
        Ok(signal) if code > 128 => Exit::Signal(signal),
        _ => Exit::Code(code),
    }
}

impl Proc for HostProcess {
    fn name(&self) -> &str {
        &self.name
    }

    fn pid(&self) -> u32 {
        self.pid
    }

    fn try_wait(&mut self) -> Option<Exit> {
        if self.exit.is_none() {
            self.exit = self.ended();
            if self.exit.is_some() {
                self.guard.kill();
            }
        }
        self.exit
    }

    fn exit(&self) -> Option<Exit> {
        self.exit.or_else(|| self.ended())
    }

    fn signal(&self, signal: Signal) -> Result<(), ClusterError> {
        if self.exit().is_some() {
            return Err(self
                .ssh
                .error(format!("signal {}", self.name), "it is not running"));
        }
        let (sig, pid) = (signal.as_str().trim_start_matches("SIG"), self.pid);
        // A tree is stopped from the top and resumed from the bottom, so that no child
        // runs on while its parent is stopped, nor the parent before its children.
        let script = match (self.tree, signal) {
            (false, _) => format!("kill -{sig} {pid}"),
            (true, Signal::SIGCONT) => format!("pkill -CONT -P {pid}; kill -CONT {pid}"),
            (true, _) => format!("kill -{sig} {pid}; pkill -{sig} -P {pid}; true"),
        };
        self.ssh
            .run(&format!("send {signal} to {}", self.name), &script)
            .map(|_| ())
    }

    /// SIGKILL on the host (resumed first); waits for its shell to report the end, then
    /// closes the session.
    fn kill(&mut self) -> Exit {
        if let Some(exit) = self.try_wait() {
            return exit;
        }
        let pid = self.pid;
        let script = if self.tree {
            // Its children first, held still by their parent's stop, as here (`registry`).
            format!("kill -STOP {pid}; pkill -KILL -P {pid}; kill -CONT {pid}; kill -KILL {pid}")
        } else {
            format!("kill -CONT {pid}; kill -KILL {pid}")
        };
        let _ = self.ssh.run(&format!("kill {}", self.name), &script);
        let deadline = std::time::Instant::now() + EXIT_WAIT;
        let exit = loop {
            if let Some(exit) = self.ended() {
                break exit;
            }
            if std::time::Instant::now() >= deadline {
                break Exit::Unknown;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        self.exit = Some(exit);
        self.guard.kill();
        exit
    }
}

impl Drop for HostProcess {
    /// Closing the session is enough: the watcher on the host kills a process still
    /// running.
    fn drop(&mut self) {
        self.guard.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_supervisor_readies_the_files_and_quotes_everything() {
        let mut launch = Launch::new("etcd-1", "/opt/etcd", Path::new("/tmp/run x/etcd-1.log"))
            .args(["--name", "etcd-1"])
            .envs([("LD_PRELOAD", "/lib/a b.so")]);
        launch.prepare = vec![
            Prepare::Empty("/tmp/run x/etcd-1".into()),
            Prepare::Make("/tmp/run x/etcd-1".into()),
            Prepare::Write("/tmp/run x/etcd-1/myid".into(), "2\n".into()),
        ];
        let script = supervisor(&launch);
        assert!(
            script.starts_with(
                "umask 077; mkdir -p '/tmp/run x' && rm -rf '/tmp/run x/etcd-1' && mkdir -p '/tmp/run x/etcd-1' && printf '%s' '2\n' > '/tmp/run x/etcd-1/myid' || exit 1; "
            ),
            "{script}"
        );
        assert!(
            script.contains("env 'LD_PRELOAD=/lib/a b.so' /opt/etcd --name etcd-1 </dev/null >>'/tmp/run x/etcd-1.log'"),
            "{script}"
        );
        launch.prepare.clear();
        launch.run_as = Some(RunAs {
            name: "postgres".into(),
            uid: Uid::from_raw(104),
            gid: Gid::from_raw(107),
            program: "postgres",
        });
        let script = supervisor(&launch);
        assert!(
            script.starts_with("umask 077; mkdir -p '/tmp/run x' || exit 1; exec 3<&0; env "),
            "{script}"
        );
        assert!(
            script.contains("setpriv --reuid=104 --regid=107 --groups=107 -- /opt/etcd"),
            "{script}"
        );
    }

    #[test]
    fn shell_codes_above_128_are_signals() {
        assert_eq!(exit_of(137), Exit::Signal(Signal::SIGKILL));
        assert_eq!(exit_of(0), Exit::Code(0));
        assert_eq!(exit_of(1), Exit::Code(1));
    }

    #[tokio::test]
    async fn a_local_launch_readies_its_folder_logs_and_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("old"), "x").unwrap();
        let log = dir.path().join("n.log");
        let mut launch = Launch::new("n", "/bin/sh", &log)
            .arg("-c")
            .arg("cat myid; echo \"$GREETING\"; exec sleep 30");
        launch.env.push(("GREETING".into(), "hello".into()));
        launch.prepare = vec![
            Prepare::Empty(data.clone()),
            Prepare::Make(data.clone()),
            Prepare::Write(data.join("myid"), "7\n".into()),
        ];
        // The shell runs in lockaudit's folder: read the file by its full path.
        launch.args[1] = format!(
            "cat '{}'; echo \"$GREETING\"; exec sleep 30",
            data.join("myid").display()
        )
        .into();
        let mut proc = Local.spawn(&launch).await.unwrap();
        assert!(!data.join("old").exists());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(&log).unwrap_or_default() != "7\nhello\n" {
            assert!(
                std::time::Instant::now() < deadline,
                "{:?}",
                std::fs::read_to_string(&log)
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(proc.try_wait(), None);
        proc.signal(Signal::SIGSTOP).unwrap();
        assert_eq!(proc.kill(), Exit::Signal(Signal::SIGKILL));
        assert!(proc.signal(Signal::SIGCONT).is_err());
    }
}
