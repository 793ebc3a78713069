//! A redis-server (a lock server, a cluster node or a sentinel), an etcd member or a
//! ZooKeeper server (`member`), on another host, started and supervised through the host's
//! [`OnHost`] machine.
//!
//! Its config is uploaded (ssh's stdin, the password in the file rather than on a command
//! line) private to the login user, as is everything it writes (`umask 077`): the run's
//! folder on the host is 0700 and the config, the server's own files and its log 0600.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::clock::{format_offset, Libfaketime};
use super::error::ClusterError;
use super::exit::Exit;
use super::instance::READY_TIMEOUT;
use super::machine::{Launch, Machine, OnHost, Prepare};
use super::member;
use super::probe;
use super::process::Proc;
use super::sentinel::SentinelConf;
use super::server::{ClusterMode, RedisConf};
use super::ssh::Ssh;
use crate::shell::quote;

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
        let cluster = self
            .cluster_node_timeout_ms
            .map(|node_timeout_ms| ClusterMode {
                bus_port: self.bus_port().unwrap_or(0),
                config_file: self.nodes_conf().into(),
                node_timeout_ms,
            });
        RedisConf {
            name: &self.name,
            addr: &self.addr,
            port: self.port,
            dir: &self.data_dir(),
            log: &self.log(),
            password: &self.password,
            persistence: self.persistence,
            replica_of: self.replica_of.as_ref().map(|(h, p)| (h.as_str(), *p)),
            cluster: cluster.as_ref(),
        }
        .text()
    }

    /// What its host runs: the data folder readied first (emptied unless `keep_data`),
    /// the server on its config (a member on its own arguments), under its fake clock.
    fn launch(&self) -> Launch {
        let mut launch = Launch::new(&self.name, &self.binary, self.log().as_ref());
        launch = match &self.member {
            Some(member) => launch.args(member.args.iter()),
            None => launch.arg(self.conf()),
        };
        if self.is_sentinel() {
            launch = launch.arg("--sentinel");
        }
        if let Some(preload) = &self.fake_clock {
            launch = launch.envs(preload.env_for(&self.clock_file()));
        }
        launch
    }

    fn prepare(&self, keep_data: bool) -> Vec<Prepare> {
        let dir = std::path::PathBuf::from(self.data_dir());
        if let Some(member) = &self.member {
            return member.prepare(self.dir.as_ref(), &dir, keep_data);
        }
        let mut steps = Vec::new();
        if !(keep_data && self.persistence) {
            steps.push(Prepare::Empty(dir.clone()));
        }
        steps.push(Prepare::Make(dir));
        steps
    }
}

/// A redis-server on a host, and how to start it again.
#[derive(Debug)]
pub struct RemoteServer {
    pub config: RemoteConfig,
    ssh: Arc<Ssh>,
    machine: OnHost,
    process: Option<Box<dyn Proc>>,
    offset_ms: AtomicI64,
}

impl RemoteServer {
    /// Uploads the config, starts the server (data folder emptied first) and waits until it
    /// answers on the host's address.
    pub async fn start(config: RemoteConfig, ssh: Arc<Ssh>) -> Result<RemoteServer, ClusterError> {
        let mut server = RemoteServer {
            config,
            machine: OnHost { ssh: ssh.clone() },
            ssh,
            process: None,
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
        self.process
            .as_ref()
            .filter(|p| p.exit().is_none())
            .map(|p| p.pid())
    }

    fn error(&self, action: &str, reason: impl Into<String>) -> ClusterError {
        self.ssh
            .error(format!("{action} {}", self.config.name), reason)
    }

    async fn spawn(&mut self, keep_data: bool, check_clock: bool) -> Result<(), ClusterError> {
        let mut launch = self.config.launch();
        launch.prepare = self.config.prepare(keep_data);
        self.process = Some(self.machine.spawn(&launch).await?);
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
            let Some(process) = self.process.as_mut() else {
                return Err(self.start_error("it is not running"));
            };
            if let Some(exit) = process.try_wait() {
                return Err(self.start_error(format!("it ended ({exit})")));
            }
            let pid = process.pid();
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
            match self.process.as_mut().map(|p| p.try_wait()) {
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
        match &self.process {
            Some(process) if process.exit().is_none() => process.signal(signal),
            _ => Err(self.error("signal", "it is not running")),
        }
    }

    /// SIGKILL on the host (resumed first), a crash: waits for its shell to report the end.
    pub fn kill(&mut self) -> Option<Exit> {
        self.pid()?;
        let exit = self.process.as_mut().map(|p| p.kill());
        self.end_session();
        exit
    }

    /// SIGTERM, up to `grace` to exit, then SIGKILL. A member is killed at once, as locally
    /// (`ServiceNode::graceful_stop`): the last etcd member stopped would wait out its grace
    /// with no one to hand its leadership to, a JVM's orderly shutdown takes a second or
    /// more, and both fsync what they acknowledge.
    pub fn stop(&mut self, grace: Duration) -> Option<Exit> {
        if self.config.member.is_some() {
            return self.kill();
        }
        self.pid()?;
        let _ = self.signal(Signal::SIGCONT);
        let _ = self.signal(Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        let process = self.process.as_mut()?;
        let exit = loop {
            if let Some(exit) = process.try_wait() {
                break exit;
            }
            if Instant::now() >= deadline {
                break process.kill();
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        self.end_session();
        Some(exit)
    }

    /// Closes the session: the watcher on the host kills a server still running.
    fn end_session(&mut self) {
        self.process = None;
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
        let bytes = self.machine.read(self.config.log().as_ref())?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
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
        let launch = config.launch();
        assert_eq!(launch.program, "redis-server");
        assert_eq!(
            launch.args,
            ["/tmp/lockaudit-x y/sentinel-1.conf", "--sentinel"]
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
        assert_eq!(config.launch().args, ["--name", "etcd-1"]);
        let first = config.prepare(false);
        assert_eq!(
            first,
            [
                Prepare::Empty("/tmp/lockaudit-x y/etcd-1".into()),
                Prepare::Make("/tmp/lockaudit-x y".into())
            ]
        );
        assert_eq!(
            config.prepare(true),
            [Prepare::Make("/tmp/lockaudit-x y".into())]
        );
    }
}
