//! One SSH connection to a host, through the system OpenSSH client, as a Jepsen control
//! node holds one per DB node.
//!
//! A master connection (`ControlMaster=yes`, `-N`) runs as a foreground child that
//! lockaudit owns (registry, `PR_SET_PDEATHSIG`), and every command is multiplexed over its
//! socket: one TCP connection and one authentication per host, a few ms per command. Not
//! `ControlPersist`: that would fork the master into the background, out of our reach when
//! lockaudit is killed. `BatchMode=yes` (never a password prompt).
//!
//! Host keys are checked as ssh checks them, against the user's known_hosts files
//! (`~/.ssh/known_hosts`, `/etc/ssh/ssh_known_hosts`, or what the user's ssh config names),
//! with `StrictHostKeyChecking=yes`: a host whose key is unknown or changed is refused, and
//! the error says how to add it. Only when the user asks (`--accept-new-host-keys`, or
//! `accept_new_host_keys = true` in the hosts file or workload) is a key never seen before
//! trusted (`accept-new`), recorded in a known_hosts of the run's own (listed first, so
//! that ssh writes there and the user's files stay as they were); a key that differs from
//! one the user's files hold is still refused.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::topology::hosts::SshTarget;

use super::error::ClusterError;
use super::process::{self, ChildGuard};

/// How long the master may take to connect and authenticate.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one multiplexed command may take (a `kill`, a `cat >`, an `rm`), and a
/// server's start to report its pid.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(15);

/// What every connection of a run shares.
#[derive(Debug, Clone)]
pub struct SshOptions {
    /// The private key (`-i`); None: ssh's defaults and agent.
    pub key: Option<PathBuf>,
    /// Trust keys not seen before (`StrictHostKeyChecking=accept-new`); else unknown keys
    /// are refused.
    pub accept_new_host_keys: bool,
    /// Control sockets, the run's known_hosts, the masters' logs. Short: a socket's path
    /// must fit in 108 bytes.
    pub dir: PathBuf,
}

/// An open connection to one host.
#[derive(Debug)]
pub struct Ssh {
    target: SshTarget,
    options: SshOptions,
    socket: PathBuf,
    master: ChildGuard,
    /// This machine's address as the host sees it (`$SSH_CONNECTION`'s first field).
    control_addr: Option<String>,
    /// The host's own address on the interface we reached it through (its third field):
    /// what its servers bind and clients connect to, also when the URL names the host.
    host_addr: Option<String>,
}

/// The output of a command that succeeded.
pub struct Output {
    pub stdout: String,
}

impl Ssh {
    /// Opens the master connection (`index` names its socket) and waits until it is up.
    /// Errors name the host and quote ssh's own words (refused, no route, key refused).
    pub fn connect(
        target: &SshTarget,
        options: &SshOptions,
        index: usize,
    ) -> Result<Ssh, ClusterError> {
        let socket = options.dir.join(format!("m{index}"));
        let log_path = master_log(&socket);
        let log = std::fs::File::create(&log_path)
            .map_err(|e| ClusterError::io("create", &log_path, e))?;
        let _ = std::fs::remove_file(&socket);
        let mut cmd = base_command(target, options, &socket);
        cmd.args(["-o", "ControlMaster=yes", "-o", "ControlPersist=no", "-N"])
            .arg(target.destination())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log));
        let master =
            process::spawn(&format!("ssh {target}"), cmd).map_err(|e| ClusterError::Remote {
                host: target.to_string(),
                action: "start ssh".into(),
                reason: format!("{e} (is openssh-client installed?)"),
            })?;
        let mut ssh = Ssh {
            target: target.clone(),
            options: options.clone(),
            socket,
            master,
            control_addr: None,
            host_addr: None,
        };
        let deadline = Instant::now() + CONNECT_TIMEOUT;
        loop {
            if let Some(exit) = ssh.master.try_wait() {
                let said = std::fs::read_to_string(&log_path).unwrap_or_default();
                let said = format!("ssh {exit}: {}", said.trim());
                return Err(match host_key_refused(&said, target, options) {
                    Some(why) => ssh.error("trust its host key", why),
                    None => ssh.error("connect", said),
                });
            }
            if ssh.socket.exists() && ssh.check() {
                let seen = ssh.run("ask the host who we are", "echo $SSH_CONNECTION")?;
                let fields: Vec<&str> = seen.stdout.split_whitespace().collect();
                let [control, _, host, _] = fields[..] else {
                    return Err(ssh.error(
                        "read $SSH_CONNECTION",
                        format!(
                            "expected four fields, got `{}` (is the login shell POSIX?)",
                            seen.stdout.trim()
                        ),
                    ));
                };
                ssh.control_addr = Some(control.to_string());
                ssh.host_addr = Some(host.to_string());
                return Ok(ssh);
            }
            if Instant::now() > deadline {
                return Err(ssh.error(
                    "connect",
                    format!("no connection within {CONNECT_TIMEOUT:?}"),
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The host as given (`ssh://root@10.0.0.2`).
    pub fn target(&self) -> &SshTarget {
        &self.target
    }

    /// This machine's address as the host sees it.
    pub fn control_addr(&self) -> Option<&str> {
        self.control_addr.as_deref()
    }

    /// The host's address as we reached it (an IP address, whatever the URL said).
    pub fn host_addr(&self) -> &str {
        self.host_addr.as_deref().unwrap_or(&self.target.host)
    }

    /// An error naming this host.
    pub fn error(&self, action: impl Into<String>, reason: impl Into<String>) -> ClusterError {
        ClusterError::Remote {
            host: self.target.to_string(),
            action: action.into(),
            reason: reason.into(),
        }
    }

    fn check(&self) -> bool {
        self.command()
            .args(["-O", "check"])
            .arg(self.target.destination())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// The master's last words (its log), or that it said nothing.
    fn master_said(&self) -> String {
        let text = std::fs::read_to_string(master_log(&self.socket)).unwrap_or_default();
        match text.lines().rev().find(|l| !l.trim().is_empty()) {
            Some(line) => format!("it said: {}", line.trim()),
            None => "it said nothing".into(),
        }
    }

    /// ssh over the master's socket, without the destination and command yet. Only over
    /// it: with the master gone, ssh would quietly open a connection of its own, which on a
    /// silent host hangs for `ConnectTimeout` (Ctrl-C's log rescue waited on one); a
    /// `ProxyCommand` that fails makes that fallback fail at once.
    fn command(&self) -> Command {
        let mut cmd = base_command(&self.target, &self.options, &self.socket);
        cmd.args(["-o", "ControlMaster=no", "-o", "ProxyCommand=false"]);
        cmd
    }

    /// The command that runs `script` (a shell command line, quoted by the caller with
    /// `crate::shell`) on the host.
    pub fn script_command(&self, script: &str) -> Command {
        let mut cmd = self.command();
        cmd.arg(self.target.destination()).arg("--").arg(script);
        cmd
    }

    /// Runs `script` on the host, `input` on its stdin; its stdout if it exits 0, else an
    /// error with `action`, the exit and its stderr.
    pub fn run_with_input(
        &self,
        action: &str,
        script: &str,
        input: &[u8],
    ) -> Result<Output, ClusterError> {
        let stdout = self.run_raw(action, script, input)?;
        Ok(Output {
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
        })
    }

    /// Runs `script` on the host with nothing on its stdin; its stdout as bytes (files
    /// sent whole, which need not be text).
    pub fn run_bytes(&self, action: &str, script: &str) -> Result<Vec<u8>, ClusterError> {
        self.run_raw(action, script, &[])
    }

    fn run_raw(&self, action: &str, script: &str, input: &[u8]) -> Result<Vec<u8>, ClusterError> {
        let mut child = self
            .script_command(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| self.error(action, format!("cannot run ssh: {e}")))?;
        let (Some(mut stdin), Some(mut stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(self.error(action, "no pipes to ssh"));
        };
        // Readers in threads, so that neither pipe can fill up while we wait.
        let out = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = stdout.read_to_end(&mut bytes);
            bytes
        });
        let err = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let _ = stdin.write_all(input);
        drop(stdin);
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let stdout = out.join().unwrap_or_default();
        let stderr = err.join().unwrap_or_default();
        match status {
            Some(status) if status.success() => Ok(stdout),
            Some(_) if master_gone(&stderr) => Err(self.error(
                action,
                format!(
                    "the SSH connection to the host is gone: lockaudit's master connection \
                     ended ({})",
                    self.master_said()
                ),
            )),
            Some(status) => Err(self.error(
                action,
                format!("{status}: {}", stderr.trim())
                    .trim_end_matches(": ")
                    .to_string(),
            )),
            None => Err(self.error(action, format!("no answer within {COMMAND_TIMEOUT:?}"))),
        }
    }

    /// Runs `script` on the host with nothing on its stdin.
    pub fn run(&self, action: &str, script: &str) -> Result<Output, ClusterError> {
        self.run_with_input(action, script, &[])
    }

    /// Starts `script` in a session of its own that lockaudit owns as a child (stdin and
    /// stdout piped): the supervisor of a long-running remote process.
    pub fn spawn(&self, name: &str, script: &str) -> Result<ChildGuard, ClusterError> {
        let mut cmd = self.script_command(script);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        process::spawn(name, cmd).map_err(|e| self.error(format!("start {name}"), e.to_string()))
    }
}

/// The master's log beside its socket (`m0` → `m0.log`).
fn master_log(socket: &Path) -> PathBuf {
    socket.with_extension("log")
}

/// Whether a command's ssh found no master behind the socket (gone before the command, or
/// while it ran) rather than an answer from the host.
fn master_gone(stderr: &str) -> bool {
    stderr.contains("Control socket connect(") || stderr.contains("read from master failed")
}

/// What to tell the user when ssh refused the host's key (None: it was something else):
/// ssh's own words, whether the key was unknown or changed, and what to do.
fn host_key_refused(said: &str, target: &SshTarget, options: &SshOptions) -> Option<String> {
    if !said.contains("Host key verification failed") {
        return None;
    }
    let (scan, known_as) = match target.port {
        Some(port) => (
            format!("ssh-keyscan -p {port} {}", target.host),
            format!("'[{}]:{port}'", target.host),
        ),
        None => (format!("ssh-keyscan {}", target.host), target.host.clone()),
    };
    Some(
        if said.contains("HAS CHANGED") || said.contains("has changed") {
            format!(
            "its host key differs from the one in your known_hosts (a reinstalled host, or someone in between): check the new key with the host's administrator; if it is the host's, remove the old one (`ssh-keygen -R {known_as}`) and add the new one (`{scan} >> ~/.ssh/known_hosts`). ({said})"
        )
        } else if options.accept_new_host_keys {
            format!("ssh refused its host key ({said})")
        } else {
            format!(
            "its host key is not in your known_hosts, and lockaudit trusts only known hosts: check the key's fingerprint and add it (`{scan} >> ~/.ssh/known_hosts`, or connect once with ssh), or pass --accept-new-host-keys (`accept_new_host_keys = true` in the hosts file) to trust a host seen for the first time. ({said})"
        )
        },
    )
}

fn base_command(target: &SshTarget, options: &SshOptions, socket: &Path) -> Command {
    let mut cmd = Command::new("ssh");
    cmd.args([
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=5",
        "-o",
        "ServerAliveInterval=5",
        "-o",
        "ServerAliveCountMax=3",
        "-o",
        "LogLevel=ERROR",
    ]);
    if options.accept_new_host_keys {
        // The run's own file first: ssh records a new key in the first one. The user's
        // (ssh's default list) after it, so that a key that changed is still refused.
        let known_hosts = options.dir.join("known_hosts");
        cmd.args(["-o", "StrictHostKeyChecking=accept-new", "-o"])
            .arg(format!(
                "UserKnownHostsFile=\"{}\" ~/.ssh/known_hosts ~/.ssh/known_hosts2",
                known_hosts.display()
            ));
    } else {
        cmd.args(["-o", "StrictHostKeyChecking=yes"]);
    }
    cmd.arg("-o")
        .arg(format!("ControlPath={}", socket.display()));
    if let Some(key) = target.ssh_key.as_ref().or(options.key.as_ref()) {
        cmd.arg("-o").arg("IdentitiesOnly=yes").arg("-i").arg(key);
    }
    if let Some(port) = target.port {
        cmd.arg("-p").arg(port.to_string());
    }
    cmd
}

impl Drop for Ssh {
    /// Closes the master (and every session over it); the guard reaps it.
    fn drop(&mut self) {
        let _ = self.master.kill();
        let _ = std::fs::remove_file(&self.socket);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_host_key_says_what_to_do() {
        let target = SshTarget::parse("ssh://root@10.77.0.2:2222").unwrap();
        let mut options = SshOptions {
            key: None,
            accept_new_host_keys: false,
            dir: PathBuf::from("/tmp"),
        };
        let unknown = "ssh exit code 255: No ED25519 host key is known for [10.77.0.2]:2222 and you have requested strict checking.\nHost key verification failed.";
        let why = host_key_refused(unknown, &target, &options).unwrap();
        assert!(why.contains("ssh-keyscan -p 2222 10.77.0.2"), "{why}");
        assert!(why.contains("--accept-new-host-keys"), "{why}");
        let changed = "ssh exit code 255: @ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @\nHost key verification failed.";
        options.accept_new_host_keys = true;
        let why = host_key_refused(changed, &target, &options).unwrap();
        assert!(why.contains("ssh-keygen -R '[10.77.0.2]:2222'"), "{why}");
        assert!(!why.contains("--accept-new-host-keys"), "{why}");
        let other = "ssh exit code 255: root@10.77.0.2: Permission denied (publickey).";
        assert_eq!(host_key_refused(other, &target, &options), None);
    }
}
