//! Three redis-sentinel processes watching the primary as master `lockaudit`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rand::Rng;
use redis::aio::MultiplexedConnection;

use super::binaries::SentinelBinary;
use super::error::ClusterError;
use super::instance::{Instance, NotReady, READY_TIMEOUT};
use super::machine::{Launch, Machine};
use super::ports::{self, PortChoice};
use super::probe;
use super::service::ServiceNode;

/// How long a Sentinel failover keeps the primary paused: down-after 1 s plus the election
/// (measured 2.5–3.3 s on this kind of machine), with a margin.
pub const SENTINEL_FAILOVER_MS: u64 = 5000;

/// The master name every sentinel monitors.
pub const MASTER_NAME: &str = "lockaudit";

/// Times the whole trio is started again when a free port was taken before a sentinel
/// could bind it (each sentinel's file names the others' ports, so one new port means new
/// files for all).
const PORT_RETRIES: usize = 3;

/// What the sentinels need to know.
#[derive(Debug, Clone)]
pub struct SentinelSetup {
    /// Where each sentinel runs, and its program there.
    pub placements: Vec<(Arc<dyn Machine>, SentinelBinary)>,
    /// The folder holding the nodes' folders and logs (`<run>/redis`; on hosts the run's
    /// folder there).
    pub root: PathBuf,
    pub password: String,
    /// The primary's address and port.
    pub primary: (String, u16),
    /// How many replicas the primary has (the sentinels must have found them all).
    pub replicas: usize,
}

/// A running sentinel and its config file (which it rewrites: it is its state).
#[derive(Debug)]
pub struct Sentinel {
    pub instance: Instance,
    pub config: PathBuf,
    machine: Arc<dyn Machine>,
    binary: SentinelBinary,
    /// The servers' password, which it answers to as well.
    password: String,
}

#[async_trait]
impl ServiceNode for Sentinel {
    fn instance(&self) -> &Instance {
        &self.instance
    }

    fn instance_mut(&mut self) -> &mut Instance {
        &mut self.instance
    }

    fn watches(&self) -> bool {
        true
    }

    /// Starts it again on the same port with the file it rewrote, so it keeps its view. It
    /// cannot be emptied: its config is its state.
    async fn restart(&mut self, keep_data: bool) -> Result<(), ClusterError> {
        if !keep_data {
            return Err(ClusterError::Unsupported {
                action: "empty",
                node: self.instance.name().to_string(),
                reason: "a sentinel has no data, only its config; restart it instead".into(),
            });
        }
        if let Some(process) = self.instance.process_mut() {
            if process.try_wait().is_none() {
                process.kill();
            }
        }
        let port = self.instance.port();
        let mut instance = spawn_one(
            self.machine.clone(),
            self.instance.name(),
            port,
            self.instance.dir(),
            self.instance.log(),
            &self.binary,
            &self.config,
        )
        .await?;
        match instance.wait_ready(&self.password).await {
            Ok(_) => {
                self.instance = instance;
                Ok(())
            }
            Err(NotReady::AddressInUse) => Err(ClusterError::PortInUse {
                node: instance.name().to_string(),
                port,
            }),
            Err(NotReady::Failed(reason)) => Err(instance.error(reason)),
        }
    }
}

/// Starts one sentinel per port, then waits until every one reports the master up, all its
/// replicas, and all the other sentinels.
///
/// Each file names the other sentinels (`known-sentinel`, with ids we generate): left to
/// themselves they find each other through hello messages sent every 2 s, and until then
/// none could win a failover vote. Seeded, the trio is ready in about 0.1 s instead of 2.
pub async fn start_sentinels(
    setup: &SentinelSetup,
    mut choices: Vec<PortChoice>,
) -> Result<Vec<Sentinel>, ClusterError> {
    let mut attempt = 0;
    loop {
        match start_once(setup, &choices).await {
            Ok(mut sentinels) => {
                wait_aware(setup, &mut sentinels).await?;
                return Ok(sentinels);
            }
            Err(Collision { node, port, error }) => {
                if let Some(PortChoice::Fixed(_)) = choices.iter().find(|c| c.port() == port) {
                    return Err(ClusterError::PortInUse { node, port });
                }
                attempt += 1;
                if attempt > PORT_RETRIES {
                    return Err(error);
                }
                tracing::debug!(node, port, "sentinel port taken; restarting the trio");
                let fresh = ports::free_ports(choices.len())?;
                choices = choices
                    .iter()
                    .zip(fresh)
                    .map(|(old, new)| match old {
                        PortChoice::Fixed(port) => PortChoice::Fixed(*port),
                        PortChoice::Free(_) => PortChoice::Free(new),
                    })
                    .collect();
            }
            Err(Fatal(err)) => return Err(err),
        }
    }
}

enum StartError {
    /// This sentinel's port was taken (`error` says so, with its log).
    Collision {
        node: String,
        port: u16,
        error: ClusterError,
    },
    Fatal(ClusterError),
}
use StartError::{Collision, Fatal};

impl From<ClusterError> for StartError {
    fn from(err: ClusterError) -> Self {
        Fatal(err)
    }
}

async fn start_once(
    setup: &SentinelSetup,
    choices: &[PortChoice],
) -> Result<Vec<Sentinel>, StartError> {
    let ids: Vec<String> = choices.iter().map(|_| random_id()).collect();
    let ports: Vec<u16> = choices.iter().map(|c| c.port()).collect();
    let mut sentinels = Vec::with_capacity(choices.len());
    for (i, &port) in ports.iter().enumerate() {
        let name = format!("sentinel-{i}");
        let dir = setup.root.join(&name);
        let log = setup.root.join(format!("{name}.log"));
        let (machine, binary) = &setup.placements[i % setup.placements.len()];
        let peers: Vec<(&str, u16, &str)> = ports
            .iter()
            .zip(&ids)
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(j, (&p, id))| {
                let addr = setup.placements[j % setup.placements.len()].0.addr();
                (addr, p, id.as_str())
            })
            .collect();
        let text = SentinelConf {
            addr: machine.addr(),
            port,
            id: &ids[i],
            dir: path_str(&dir)?,
            log: path_str(&log)?,
            password: &setup.password,
            primary: (&setup.primary.0, setup.primary.1),
            peers: &peers,
        }
        .text();
        let config = dir.join("sentinel.conf");
        // The password is in it: readable by this user only (its folder made too).
        machine.write_private(&config, text.as_bytes())?;
        let instance = spawn_one(machine.clone(), &name, port, &dir, &log, binary, &config).await?;
        sentinels.push(Sentinel {
            instance,
            config,
            machine: machine.clone(),
            binary: binary.clone(),
            password: setup.password.clone(),
        });
    }
    for sentinel in &mut sentinels {
        match sentinel.instance.wait_ready(&setup.password).await {
            Ok(_) => {}
            Err(NotReady::AddressInUse) => {
                return Err(Collision {
                    node: sentinel.instance.name().to_string(),
                    port: sentinel.instance.port(),
                    error: sentinel
                        .instance
                        .error("its port was taken before it could bind it, on every try"),
                })
            }
            Err(NotReady::Failed(reason)) => return Err(Fatal(sentinel.instance.error(reason))),
        }
    }
    Ok(sentinels)
}

async fn spawn_one(
    machine: Arc<dyn Machine>,
    name: &str,
    port: u16,
    dir: &Path,
    log: &Path,
    binary: &SentinelBinary,
    config: &Path,
) -> Result<Instance, ClusterError> {
    let mut launch = Launch::new(name, binary.program(), log).arg(config);
    if let SentinelBinary::ServerInSentinelMode(_) = binary {
        launch = launch.arg("--sentinel");
    }
    Instance::launch(machine, port, dir, &launch).await
}

/// What one sentinel's config file says, wherever it runs (here or on a host).
#[derive(Debug, Clone)]
pub struct SentinelConf<'a> {
    /// The address it binds (and, with `announce`, gives the others in its hellos).
    pub addr: &'a str,
    pub port: u16,
    /// Its run id (`sentinel myid`): the others know it by it.
    pub id: &'a str,
    pub dir: &'a str,
    pub log: &'a str,
    pub password: &'a str,
    /// The primary it monitors as [`MASTER_NAME`].
    pub primary: (&'a str, u16),
    /// The other sentinels: (address, port, run id).
    pub peers: &'a [(&'a str, u16, &'a str)],
}

impl SentinelConf<'_> {
    /// The config text: quorum 2, down after 1 s, failover timeout 3 s.
    pub fn text(&self) -> String {
        let pw = quote(self.password);
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = writeln!(text, "port {}", self.port);
        let _ = writeln!(text, "bind {}", self.addr);
        let _ = writeln!(text, "daemonize no");
        let _ = writeln!(text, "dir {}", quote(self.dir));
        let _ = writeln!(text, "logfile {}", quote(self.log));
        let _ = writeln!(text, "requirepass {pw}");
        let _ = writeln!(text, "sentinel sentinel-pass {pw}");
        let _ = writeln!(text, "sentinel myid {}", self.id);
        // On a host with several addresses, the one it binds rather than whichever its
        // connection to the primary leaves from.
        let _ = writeln!(text, "sentinel announce-ip {}", self.addr);
        let _ = writeln!(text, "sentinel announce-port {}", self.port);
        let (host, port) = self.primary;
        let _ = writeln!(text, "sentinel monitor {MASTER_NAME} {host} {port} 2");
        let _ = writeln!(text, "sentinel auth-pass {MASTER_NAME} {pw}");
        let _ = writeln!(text, "sentinel down-after-milliseconds {MASTER_NAME} 1000");
        let _ = writeln!(text, "sentinel failover-timeout {MASTER_NAME} 3000");
        for (peer_addr, peer_port, peer_id) in self.peers {
            let _ = writeln!(
                text,
                "sentinel known-sentinel {MASTER_NAME} {peer_addr} {peer_port} {peer_id}"
            );
        }
        text
    }
}

fn path_str(path: &Path) -> Result<&str, ClusterError> {
    path.to_str().ok_or_else(|| {
        ClusterError::InvalidSpec(format!(
            "the run folder must be a UTF-8 path for redis-sentinel's config: {}",
            path.display()
        ))
    })
}

/// A value in Redis config syntax: double quotes, with `\` and `"` escaped.
fn quote(value: &str) -> String {
    let escaped = value.replace('\\', "\\\\").replace('"', "\\\"");
    format!("\"{escaped}\"")
}

/// A sentinel run id: 40 hex digits, like the ones Redis generates.
pub fn random_id() -> String {
    let mut rng = rand::rng();
    (0..40)
        .map(|_| char::from_digit(rng.random_range(0..16u32), 16).unwrap_or('0'))
        .collect()
}

/// Waits until every sentinel sees the master as up, knows `setup.replicas` replicas with
/// an ok link, and knows the other sentinels: only then can a failover happen.
async fn wait_aware(setup: &SentinelSetup, sentinels: &mut [Sentinel]) -> Result<(), ClusterError> {
    let addrs: Vec<(&str, u16)> = sentinels
        .iter()
        .map(|s| (s.instance.host(), s.instance.port()))
        .collect();
    let patience = setup
        .placements
        .first()
        .map_or(READY_TIMEOUT, |(m, _)| m.patience(READY_TIMEOUT));
    wait_all_aware(&addrs, &setup.password, setup.replicas, patience)
        .await
        .map_err(|(i, last)| {
            sentinels[i].instance.error(format!(
                "it did not know the whole deployment within {patience:?}: {last}"
            ))
        })
}

/// Waits until each sentinel at `addrs` sees the master as up, knows `replicas` replicas in
/// sync and the other sentinels, all within `patience`. Else the index of the first that
/// did not, and what it lacked, in words.
pub async fn wait_all_aware(
    addrs: &[(&str, u16)],
    password: &str,
    replicas: usize,
    patience: Duration,
) -> Result<(), (usize, String)> {
    let deadline = Instant::now() + patience;
    let others = addrs.len().saturating_sub(1);
    for (i, &(host, port)) in addrs.iter().enumerate() {
        let mut conn: Option<MultiplexedConnection> = None;
        let mut last = String::from("no answer");
        loop {
            if conn.is_none() {
                conn = probe::connect_to(host, port, Some(password))
                    .await
                    .map_err(|e| last = e.to_string())
                    .ok();
            }
            if let Some(c) = conn.as_mut() {
                match aware(c, replicas, others).await {
                    Ok(None) => break,
                    Ok(Some(missing)) => last = missing,
                    Err(err) => {
                        last = err.to_string();
                        conn = None;
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err((i, last));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    Ok(())
}

/// None when the sentinel knows everything; else what it is missing, in words.
async fn aware(
    conn: &mut MultiplexedConnection,
    replicas: usize,
    others: usize,
) -> redis::RedisResult<Option<String>> {
    let master = probe::sentinel_master(conn, MASTER_NAME).await?;
    let field = |name: &str| master.get(name).map(String::as_str).unwrap_or("?");
    if field("flags") != "master" {
        return Ok(Some(format!("master flags {}", field("flags"))));
    }
    if field("num-other-sentinels") != others.to_string() {
        return Ok(Some(format!(
            "{} other sentinels known, {others} expected",
            field("num-other-sentinels")
        )));
    }
    let found = probe::sentinel_replicas(conn, MASTER_NAME).await?;
    let healthy = found
        .iter()
        .filter(|r| {
            r.get("flags").map(String::as_str) == Some("slave")
                && r.get("master-link-status").map(String::as_str) == Some("ok")
        })
        .count();
    if healthy != replicas {
        return Ok(Some(format!(
            "{healthy} replicas known in sync, {replicas} expected"
        )));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_follows_redis_config_syntax() {
        assert_eq!(quote("/tmp/a b"), "\"/tmp/a b\"");
        assert_eq!(quote(r#"x"y\z"#), r#""x\"y\\z""#);
    }

    #[test]
    fn ids_are_40_hex_digits() {
        let id = random_id();
        assert_eq!(id.len(), 40);
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
