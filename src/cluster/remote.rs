//! A redis-server (a lock server, a cluster node or a sentinel), an etcd member or a
//! ZooKeeper server (`member`), on another host, started and supervised over SSH.
//!
//! Its config is uploaded (ssh's stdin into `cat >`, the password in the file rather than
//! on a command line) under `umask 077`, so that the run's folder on the host is 0700 and
//! the config, the server's own files and its log 0600 from the start, and it runs in the foreground under a small shell in an SSH session
//! of its own that lockaudit owns: the shell prints the server's pid (which faults signal
//! with `kill` over the connection), waits for it, and prints how it ended. A watcher in
//! that shell SIGKILLs the server when the session's stdin closes, so a lockaudit that dies
//! (even by SIGKILL: its ssh children die with it) leaves no server running on the host.

use std::io::{BufRead, BufReader};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::clock::{format_offset, Libfaketime};
use super::error::ClusterError;
use super::exit::Exit;
use super::instance::READY_TIMEOUT;
use super::member;
use super::probe;
use super::process::ChildGuard;
use super::sentinel::SentinelConf;
use super::ssh::{Ssh, COMMAND_TIMEOUT};
use crate::shell::quote;

/// How long a stopped or killed server's shell may take to report its end.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// How one remote redis-server is configured.
#[derive(Debug, Clone)]
pub struct RemoteConfig {
    /// `master-0`, `replica-1`.
    pub name: String,
    /// The host's address: the server binds it, clients and replicas connect to it.
    pub addr: String,
    pub port: u16,
    /// The run's folder on the host (`/tmp/lockaudit-<token>`): each node's data, config,
    /// log and clock file are named after it inside, so nodes sharing a host (or a file
    /// system, as namespace hosts do) never meet.
    pub dir: String,
    pub password: String,
    pub persistence: bool,
    /// The primary's address and port, for a replica.
    pub replica_of: Option<(String, u16)>,
    /// libfaketime, at the same path on the host as here (Debian's `faketime`).
    pub fake_clock: Option<Libfaketime>,
    /// `redis-server`, found on the host's PATH, or a path there.
    pub binary: String,
    /// Set for a sentinel: it runs as `binary CONF --sentinel` with a sentinel's config,
    /// which it rewrites (its state: a restart keeps it).
    pub sentinel: Option<Watch>,
    /// Set for a Redis Cluster node: its `cluster-node-timeout`, ms.
    pub cluster_node_timeout_ms: Option<u64>,
    /// Set for an etcd member or a ZooKeeper server (`port` its client port; `binary` etcd,
    /// or java): it runs with these arguments, and a config of its own if any.
    pub member: Option<member::OnHost>,
}

/// How far above its data port a cluster node's bus listens (Redis's own default).
const BUS_PORT_OFFSET: u16 = 10000;

/// What a sentinel on a host watches, and who watches with it.
#[derive(Debug, Clone)]
pub struct Watch {
    /// Its run id (`sentinel myid`).
    pub id: String,
    /// The primary's address and port.
    pub primary: (String, u16),
    /// The other sentinels: (address, port, run id).
    pub peers: Vec<(String, u16, String)>,
}

impl RemoteConfig {
    fn path(&self, suffix: &str) -> String {
        format!("{}/{}{suffix}", self.dir, self.name)
    }

    pub fn data_dir(&self) -> String {
        self.path("")
    }

    pub fn log(&self) -> String {
        self.path(".log")
    }

    /// The uploaded config (a Redis server's, a sentinel's, a ZooKeeper server's).
    pub fn conf(&self) -> String {
        self.path(".conf")
    }

    fn clock_file(&self) -> String {
        self.path(".faketime")
    }

    pub fn is_sentinel(&self) -> bool {
        self.sentinel.is_some()
    }

    /// The ports the other servers reach it on: a member's peer ports, else its port.
    pub fn link_ports(&self) -> Vec<u16> {
        self.member
            .as_ref()
            .map_or_else(|| vec![self.port], |m| m.peer_ports.clone())
    }

    /// A cluster node's bus port: its data port + 10000; None past 65535.
    pub fn bus_port(&self) -> Option<u16> {
        self.port.checked_add(BUS_PORT_OFFSET)
    }

    /// Outside the data folder, so that a node restarted empty keeps its identity and
    /// rejoins the cluster, as locally (`ServerConfig::cluster`).
    fn nodes_conf(&self) -> String {
        self.path(".nodes.conf")
    }

    /// The config to upload before the first start: a member's own, if it has one (None for
    /// etcd's, which runs on flags), else [`RemoteConfig::config_text`].
    fn upload_text(&self) -> Option<String> {
        match &self.member {
            Some(member) => member.config.clone(),
            None => Some(self.config_text()),
        }
    }

    /// The redis.conf uploaded: as the local servers' command line (see
    /// `ServerConfig::command`), bound to the host's address, which a replica also announces
    /// (what the sentinels then tell clients). A sentinel's: as the local sentinels' (see
    /// `SentinelConf`), announcing the host's address.
    pub fn config_text(&self) -> String {
        if let Some(watch) = &self.sentinel {
            let peers: Vec<(&str, u16, &str)> = watch
                .peers
                .iter()
                .map(|(addr, port, id)| (addr.as_str(), *port, id.as_str()))
                .collect();
            return SentinelConf {
                addr: &self.addr,
                port: self.port,
                id: &watch.id,
                dir: &self.data_dir(),
                log: &self.log(),
                password: &self.password,
                primary: (&watch.primary.0, watch.primary.1),
                peers: &peers,
                announce: true,
            }
            .text();
        }
        let mut text = format!(
            "bind {addr}\nport {port}\ndaemonize no\nrequirepass \"{pw}\"\nmasterauth \"{pw}\"\n\
             dir \"{dir}\"\nlogfile \"{log}\"\nsave \"\"\nrepl-diskless-sync-delay 0\n",
            addr = self.addr,
            port = self.port,
            pw = self.password,
            dir = self.data_dir(),
            log = self.log(),
        );
        if self.persistence {
            text.push_str("appendonly yes\nappendfsync everysec\n");
        } else {
            text.push_str("appendonly no\n");
        }
        if let Some((host, port)) = &self.replica_of {
            text.push_str(&format!("replicaof {host} {port}\n"));
        }
        text.push_str(&format!("replica-announce-ip {}\n", self.addr));
        if let Some(timeout) = self.cluster_node_timeout_ms {
            // As the local nodes' (`ServerConfig::command`), announcing the host's address.
            text.push_str(&format!(
                "cluster-enabled yes\ncluster-port {bus}\ncluster-config-file \"{conf}\"\n\
                 cluster-node-timeout {timeout}\ncluster-replica-validity-factor 0\n\
                 cluster-announce-ip {addr}\ncluster-announce-hostname {name}\n",
                bus = self.bus_port().unwrap_or(0),
                conf = self.nodes_conf(),
                addr = self.addr,
                name = self.name,
            ));
        }
        text
    }

    /// The supervising shell, which first empties the data folder unless `keep_data` (one
    /// SSH round trip per start: each costs a login shell on the host). The server's stdin
    /// is /dev/null and its output goes to its log; fd 3 keeps the session's stdin for the
    /// watcher (an asynchronous command's stdin is /dev/null otherwise).
    fn script(&self, keep_data: bool) -> String {
        let dir = quote(&self.data_dir());
        let prepare = if let Some(member) = &self.member {
            member.prepare(&self.dir, &self.data_dir(), keep_data)
        } else if keep_data && self.persistence {
            format!("mkdir -p {dir} || exit 1; ")
        } else {
            format!("rm -rf {dir} && mkdir -p {dir} || exit 1; ")
        };
        let mut run = String::new();
        if let Some(preload) = &self.fake_clock {
            run.push_str("env ");
            for (key, value) in preload.env_for(&self.clock_file()) {
                run.push_str(&quote(&format!("{key}={value}")));
                run.push(' ');
            }
        }
        match &self.member {
            Some(member) => {
                run.push_str(&quote(&self.binary));
                for arg in &member.args {
                    run.push(' ');
                    run.push_str(&quote(arg));
                }
            }
            None => run.push_str(&format!("{} {}", quote(&self.binary), quote(&self.conf()))),
        }
        if self.is_sentinel() {
            run.push_str(" --sentinel");
        }
        // `umask 077`: what the server writes (its data, a sentinel's rewritten config with
        // the password, its log) is the login user's alone.
        format!(
            "umask 077; {prepare}exec 3<&0; {run} </dev/null >>{log} 2>&1 3<&- & pid=$!; echo \"pid $pid\"; \
             (cat <&3 >/dev/null; kill -CONT $pid; kill -KILL $pid) >/dev/null 2>&1 & watch=$!; \
             exec 3<&-; wait $pid; code=$?; kill $watch 2>/dev/null; echo \"exit $code\"",
            log = quote(&self.log()),
        )
    }
}

/// The session supervising one start of the server.
#[derive(Debug)]
struct Session {
    /// The local ssh client; killing it closes the session, and the watcher kills the server.
    guard: ChildGuard,
    /// The server's pid on the host.
    pid: u32,
    /// The shell's `exit <code>` once the server has ended.
    ended: Arc<Mutex<Option<i32>>>,
}

impl Session {
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

/// A redis-server on a host, and how to start it again.
#[derive(Debug)]
pub struct RemoteServer {
    pub config: RemoteConfig,
    ssh: Arc<Ssh>,
    session: Option<Session>,
    offset_ms: AtomicI64,
}

impl RemoteServer {
    /// Uploads the config, starts the server (data folder emptied first) and waits until it
    /// answers on the host's address.
    pub async fn start(config: RemoteConfig, ssh: Arc<Ssh>) -> Result<RemoteServer, ClusterError> {
        let mut server = RemoteServer {
            config,
            ssh,
            session: None,
            offset_ms: AtomicI64::new(0),
        };
        // No secret on a member's command line nor in its config: etcd's password is set
        // through the client API once the members have a leader, and ZooKeeper's ACL by the
        // run's first client.
        let Some(text) = server.config.upload_text() else {
            server.spawn(false, true).await?;
            return Ok(server);
        };
        // One round trip: the run's folder, the config (from stdin), the clock at 0. Private
        // to the login user from the start (`umask 077`): a Redis config holds the password.
        let conf = quote(&server.config.conf());
        let mut script = format!(
            "umask 077 && mkdir -p {dir} && cat > {conf}.upload && mv -f {conf}.upload {conf}",
            dir = quote(&server.config.dir)
        );
        if server.config.fake_clock.is_some() {
            let clock = quote(&server.config.clock_file());
            script.push_str(&format!(" && printf '%s\\n' +0.000 > {clock}"));
        }
        // Off the runtime's threads: the hosts' starts run concurrently.
        let ssh = server.ssh.clone();
        tokio::task::spawn_blocking(move || {
            ssh.run_with_input("upload the config of", &script, text.as_bytes())
        })
        .await
        .map_err(|e| server.error("upload the config of", e.to_string()))??;
        server.spawn(false, true).await?;
        Ok(server)
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    pub fn is_sentinel(&self) -> bool {
        self.config.is_sentinel()
    }

    pub fn host(&self) -> &str {
        &self.config.addr
    }

    pub fn port(&self) -> u16 {
        self.config.port
    }

    /// The server's pid on its host while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.session
            .as_ref()
            .filter(|s| s.ended().is_none())
            .map(|s| s.pid)
    }

    fn error(&self, action: &str, reason: impl Into<String>) -> ClusterError {
        self.ssh
            .error(format!("{action} {}", self.config.name), reason)
    }

    async fn spawn(&mut self, keep_data: bool, check_clock: bool) -> Result<(), ClusterError> {
        let mut guard = self.ssh.spawn(
            &format!("{} on {}", self.config.name, self.config.addr),
            &self.config.script(keep_data),
        )?;
        let stdout = guard
            .take_stdout()
            .ok_or_else(|| self.error("start", "no pipe from ssh"))?;
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
            drop(guard);
            return Err(self.start_error("the host's shell never reported the server's pid"));
        };
        self.session = Some(Session { guard, pid, ended });
        self.wait_ready(Instant::now(), check_clock).await
    }

    /// Polls until the server answers an authenticated INFO with its own pid, then PING.
    /// With `check_clock` (the first start), also that libfaketime is loaded.
    async fn wait_ready(&mut self, begun: Instant, check_clock: bool) -> Result<(), ClusterError> {
        // Over a network: the local timeout plus room for the SSH round trips.
        let deadline = begun + READY_TIMEOUT * 2;
        if let Some(member) = self.config.member.clone() {
            let patience = member.ready_timeout(READY_TIMEOUT * 2);
            // Before its first start's end no etcd member has the password yet.
            return self
                .wait_member(&member, begun, patience, !check_clock)
                .await;
        }
        let mut pause = Duration::from_millis(2);
        loop {
            let Some(session) = &self.session else {
                return Err(self.start_error("it is not running"));
            };
            if let Some(exit) = session.ended() {
                return Err(self.start_error(format!("it ended ({exit})")));
            }
            let pid = session.pid;
            let conn = probe::connect_to(
                &self.config.addr,
                self.config.port,
                Some(&self.config.password),
            )
            .await;
            if let Ok(mut conn) = conn {
                let ours = probe::server_pid(&mut conn).await.ok().flatten() == Some(pid);
                if ours && probe::ping(&mut conn).await.is_ok() {
                    break;
                }
            }
            if Instant::now() >= deadline {
                return Err(self.start_error(format!(
                    "no answer to an authenticated INFO on {}:{} within {:?}",
                    self.config.addr,
                    self.config.port,
                    READY_TIMEOUT * 2
                )));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
        let fake_clock = self.config.fake_clock.as_ref().filter(|_| check_clock);
        if let (Some(preload), Some(pid)) = (fake_clock, self.pid()) {
            // ld.so runs the program unfaked, with a warning, when a preload is missing.
            let name = preload.file_name();
            let check = format!("grep -q {} /proc/{pid}/maps", quote(&name));
            if self.ssh.run("check the fake clock of", &check).is_err() {
                return Err(self.start_error(format!(
                    "{name} is not loaded in it: install faketime on the host (the same \
                     path as on the control node)"
                )));
            }
        }
        tracing::debug!(
            node = self.config.name,
            host = self.config.addr,
            "remote ready"
        );
        Ok(())
    }

    /// A member: polls until it serves (`member::OnHost::serves`), for `patience` from
    /// `begun`.
    async fn wait_member(
        &mut self,
        member: &member::OnHost,
        begun: Instant,
        patience: Duration,
        authenticated: bool,
    ) -> Result<(), ClusterError> {
        let deadline = begun + patience;
        let (addr, port) = (self.config.addr.clone(), self.config.port);
        let password = authenticated.then(|| self.config.password.clone());
        let mut pause = Duration::from_millis(10);
        loop {
            match self.session.as_ref().map(Session::ended) {
                None => return Err(self.start_error("it is not running")),
                Some(Some(exit)) => return Err(self.start_error(format!("it ended ({exit})"))),
                Some(None) => {}
            }
            let last = match member.serves(&addr, port, password.as_deref()).await {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                return Err(self.start_error(format!(
                    "not serving at {addr}:{port} within {patience:?} (last: {last})"
                )));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// A start error quoting the last lines of the server's log on the host, and ending
    /// whatever this start left.
    pub fn start_error(&mut self, reason: impl Into<String>) -> ClusterError {
        let reason = reason.into();
        self.end_session();
        let tail = self
            .ssh
            .run(
                "read the log",
                &format!("tail -n 20 {} 2>&1", quote(&self.config.log())),
            )
            .map(|o| o.stdout)
            .unwrap_or_default();
        self.error(
            "start",
            format!(
                "{reason}\nlast lines of {} on the host:\n{}",
                self.config.log(),
                tail.trim_end()
            ),
        )
    }

    /// Sends `signal` to the server on its host (SIGSTOP / SIGCONT: pause and resume).
    pub fn signal(&self, signal: Signal) -> Result<(), ClusterError> {
        let pid = self
            .pid()
            .ok_or_else(|| self.error("signal", "it is not running"))?;
        self.ssh
            .run(
                &format!("send {signal} to"),
                &format!("kill -{} {pid}", signal.as_str().trim_start_matches("SIG")),
            )
            .map(|_| ())
    }

    /// SIGKILL on the host (resumed first), a crash: waits for its shell to report the end.
    pub fn kill(&mut self) -> Option<Exit> {
        let pid = self.pid()?;
        let _ = self
            .ssh
            .run("kill", &format!("kill -CONT {pid}; kill -KILL {pid}"));
        let exit = self.wait_end(EXIT_WAIT);
        self.end_session();
        Some(exit)
    }

    /// SIGTERM, up to `grace` to exit, then SIGKILL. A member is killed at once, as locally
    /// (`ServiceNode::graceful_stop`): the last etcd member stopped would wait out its grace
    /// with no one to hand its leadership to, a JVM's orderly shutdown takes a second or
    /// more, and both fsync what they acknowledge.
    pub fn stop(&mut self, grace: Duration) -> Option<Exit> {
        if self.config.member.is_some() {
            return self.kill();
        }
        let pid = self.pid()?;
        let _ = self
            .ssh
            .run("stop", &format!("kill -CONT {pid}; kill -TERM {pid}"));
        let exit = match self.wait_end(grace) {
            Exit::Unknown => return self.kill(),
            exit => exit,
        };
        self.end_session();
        Some(exit)
    }

    fn wait_end(&self, patience: Duration) -> Exit {
        let deadline = Instant::now() + patience;
        while Instant::now() < deadline {
            match self.session.as_ref().map(Session::ended) {
                Some(Some(exit)) => return exit,
                None => return Exit::Unknown,
                Some(None) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
        Exit::Unknown
    }

    /// Closes the session: the watcher on the host kills a server still running.
    fn end_session(&mut self) {
        if let Some(mut session) = self.session.take() {
            session.guard.kill();
        }
    }

    /// Starts it again on the same address and port; with `keep_data` and persistence it
    /// replays its AOF, else it comes back empty.
    pub async fn restart(&mut self, keep_data: bool) -> Result<(), ClusterError> {
        if let (Some(member), false) = (&self.config.member, keep_data) {
            member.empty_restart(&self.config.name)?;
        }
        if self.pid().is_some() {
            self.kill();
        }
        self.end_session();
        self.spawn(keep_data, false).await
    }

    /// Moves the server's wall clock (its libfaketime file on the host, replaced whole).
    pub fn set_clock_offset(&self, offset_ms: i64) -> Result<(), ClusterError> {
        if self.config.is_sentinel() {
            return Err(ClusterError::Unsupported {
                action: "set the clock of",
                node: self.config.name.clone(),
                reason: "only the lock's servers have fake clocks, not storage or sentinels".into(),
            });
        }
        if self.config.fake_clock.is_none() {
            return Err(ClusterError::Unsupported {
                action: "set the clock of",
                node: self.config.name.clone(),
                reason: "the cluster was started without fake clocks".into(),
            });
        }
        self.ssh.upload(
            format!("{}\n", format_offset(offset_ms)).as_bytes(),
            &self.config.clock_file(),
        )?;
        self.offset_ms.store(offset_ms, Ordering::SeqCst);
        Ok(())
    }

    pub fn clock_offset_ms(&self) -> Option<i64> {
        self.config
            .fake_clock
            .as_ref()
            .map(|_| self.offset_ms.load(Ordering::SeqCst))
    }

    /// The server's log on the host, for the run folder.
    pub fn read_log(&self) -> Result<String, ClusterError> {
        self.ssh
            .run(
                &format!("read the log of {}", self.config.name),
                &format!("cat {}", quote(&self.config.log())),
            )
            .map(|o| o.stdout)
    }
}

impl Drop for RemoteServer {
    fn drop(&mut self) {
        if self.pid().is_some() {
            self.kill();
        }
        self.end_session();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> RemoteConfig {
        RemoteConfig {
            name: "replica-1".into(),
            addr: "10.77.0.3".into(),
            port: 7401,
            dir: "/tmp/lockaudit-x y".into(),
            password: "pw".into(),
            persistence: false,
            replica_of: Some(("10.77.0.2".into(), 7400)),
            fake_clock: None,
            binary: "redis-server".into(),
            sentinel: None,
            cluster_node_timeout_ms: None,
            member: None,
        }
    }

    #[test]
    fn a_cluster_node_announces_its_host_and_keeps_its_identity_outside_its_data() {
        let mut config = config();
        config.replica_of = None;
        config.cluster_node_timeout_ms = Some(1000);
        let text = config.config_text();
        for line in [
            "cluster-enabled yes\n",
            "cluster-port 17401\n",
            "cluster-config-file \"/tmp/lockaudit-x y/replica-1.nodes.conf\"\n",
            "cluster-node-timeout 1000\n",
            "cluster-announce-ip 10.77.0.3\n",
            "cluster-announce-hostname replica-1\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        config.port = 60000;
        assert_eq!(config.bus_port(), None);
    }

    #[test]
    fn the_config_binds_the_host_address_and_follows_the_primary() {
        let text = config().config_text();
        assert!(text.contains("bind 10.77.0.3\nport 7401\n"), "{text}");
        assert!(text.contains("replicaof 10.77.0.2 7400\n"), "{text}");
        assert!(
            text.contains("dir \"/tmp/lockaudit-x y/replica-1\"\n"),
            "{text}"
        );
        assert!(text.contains("appendonly no\n"), "{text}");
    }

    #[test]
    fn the_script_quotes_the_paths() {
        let script = config().script(false);
        assert!(
            script.starts_with("umask 077; rm -rf '/tmp/lockaudit-x y/replica-1' && mkdir -p"),
            "{script}"
        );
        assert!(
            script.contains("redis-server '/tmp/lockaudit-x y/replica-1.conf'"),
            "{script}"
        );
        assert!(
            script.contains(">>'/tmp/lockaudit-x y/replica-1.log'"),
            "{script}"
        );
    }

    #[test]
    fn a_sentinel_announces_its_host_and_runs_in_sentinel_mode() {
        let mut config = config();
        config.name = "sentinel-1".into();
        config.sentinel = Some(Watch {
            id: "a".repeat(40),
            primary: ("10.77.0.2".into(), 7400),
            peers: vec![("10.77.0.4".into(), 7405, "b".repeat(40))],
        });
        let text = config.config_text();
        for line in [
            "bind 10.77.0.3\n",
            "sentinel announce-ip 10.77.0.3\n",
            "sentinel announce-port 7401\n",
            "sentinel monitor lockaudit 10.77.0.2 7400 2\n",
            "sentinel known-sentinel lockaudit 10.77.0.4 7405 bbbb",
            "dir \"/tmp/lockaudit-x y/sentinel-1\"\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(!text.contains("replicaof"), "{text}");
        let script = config.script(false);
        assert!(
            script.contains("redis-server '/tmp/lockaudit-x y/sentinel-1.conf' --sentinel"),
            "{script}"
        );
    }

    #[test]
    fn an_etcd_member_runs_with_its_flags_and_keeps_its_data_on_a_restart() {
        let mut config = config();
        config.name = "etcd-1".into();
        config.binary = "/opt/etcd".into();
        config.member = Some(member::OnHost {
            service: member::Service::Etcd,
            args: vec!["--name".into(), "etcd-1".into()],
            peer_ports: vec![7404],
            config: None,
            data_files: Vec::new(),
        });
        assert_eq!(config.link_ports(), [7404]);
        assert_eq!(config.upload_text(), None);
        let first = config.script(false);
        assert!(
            first.starts_with(
                "umask 077; rm -rf '/tmp/lockaudit-x y/etcd-1' && mkdir -p '/tmp/lockaudit-x y' ||"
            ),
            "{first}"
        );
        assert!(
            first.contains("/opt/etcd --name etcd-1 </dev/null"),
            "{first}"
        );
        let again = config.script(true);
        assert!(
            again.starts_with("umask 077; mkdir -p '/tmp/lockaudit-x y' ||"),
            "{again}"
        );
    }

    #[test]
    fn shell_codes_above_128_are_signals() {
        assert_eq!(exit_of(137), Exit::Signal(Signal::SIGKILL));
        assert_eq!(exit_of(0), Exit::Code(0));
        assert_eq!(exit_of(1), Exit::Code(1));
    }
}
