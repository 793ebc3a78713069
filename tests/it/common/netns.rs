//! A test bed of "hosts" on this machine, as `scripts/netns-hosts.sh` makes for users: each
//! host a network namespace with its own address on a private bridge and its own sshd (a
//! child of the test), reachable with a key made for the test. Everything is removed on
//! drop, also when the test panics.
//!
//! Needs root. Where `ip netns add` is not permitted, [`TestBed::new`] prints a SKIPPED line
//! and returns None, and the test returns early; anything else missing (sshd) fails it.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// One host of the bed.
#[derive(Debug, Clone)]
pub struct Host {
    /// The namespace's name (`ip netns exec <ns> ...`).
    pub ns: String,
    /// Its address on the bridge.
    pub addr: String,
}

pub struct TestBed {
    pub hosts: Vec<Host>,
    /// The control node's private key (its public half is every host's authorized key).
    pub key: PathBuf,
    /// The bridge's address in the root namespace: the control node as the hosts see it.
    pub control_addr: String,
    bridge: String,
    sshd: Vec<Child>,
    dir: tempfile::TempDir,
}

/// Runs `ip` (or any command) and returns its stderr on failure.
fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn sshd_binary() -> PathBuf {
    let path = PathBuf::from("/usr/sbin/sshd");
    assert!(
        path.exists(),
        "sshd not found at /usr/sbin/sshd: apt-get install -y openssh-server"
    );
    path
}

impl TestBed {
    /// `n` hosts, or None (SKIPPED printed) where namespaces cannot be made. `test` names
    /// the test in the SKIPPED line.
    pub fn new(test: &str, n: usize) -> Option<TestBed> {
        // Probe with a namespace of our own name (the tests of a process run in parallel):
        // the one permission the bed needs. Only a refusal skips; any other failure fails.
        static PROBES: AtomicUsize = AtomicUsize::new(0);
        let probe = format!(
            "laprobe{}x{}",
            std::process::id(),
            PROBES.fetch_add(1, Ordering::SeqCst)
        );
        if let Err(e) = run("ip", &["netns", "add", &probe]) {
            if e.contains("not permitted") || e.contains("Permission denied") {
                println!("SKIPPED {test}: needs root and network namespaces ({e})");
                return None;
            }
            panic!("test bed: {e}");
        }
        let _ = run("ip", &["netns", "del", &probe]);
        let sshd = sshd_binary();

        // A free bridge index: `ip link add` is atomic, so parallel tests (and other test
        // processes) each get their own bridge and subnet 10.77.<index>.0/24. Index 0 is left
        // to the script.
        let index = (1..=250)
            .find(|i| run("ip", &["link", "add", &format!("lab{i}"), "type", "bridge"]).is_ok())
            .expect("no free bridge name lab1..lab250");
        let mut bed = TestBed {
            hosts: Vec::new(),
            key: PathBuf::new(),
            control_addr: format!("10.77.{index}.1"),
            bridge: format!("lab{index}"),
            sshd: Vec::new(),
            dir: tempfile::tempdir().expect("temp folder"),
        };
        // From here on, a failure drops `bed`, which removes what was made.
        bed.build(index, n, &sshd)
            .unwrap_or_else(|e| panic!("test bed: {e}"));
        Some(bed)
    }

    fn build(&mut self, index: usize, n: usize, sshd: &Path) -> Result<(), String> {
        let dir = self.dir.path().to_path_buf();
        let bridge = self.bridge.clone();
        run(
            "ip",
            &[
                "addr",
                "add",
                &format!("{}/24", self.control_addr),
                "dev",
                &bridge,
            ],
        )?;
        run("ip", &["link", "set", &bridge, "up"])?;
        std::fs::create_dir_all("/run/sshd").map_err(|e| format!("/run/sshd: {e}"))?;
        self.key = dir.join("id_ed25519");
        for (file, comment) in [("id_ed25519", "lockaudit-control"), ("host_key", "host")] {
            let path = dir.join(file);
            let path = path.to_string_lossy();
            run(
                "ssh-keygen",
                &["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", &path],
            )?;
        }
        std::fs::copy(dir.join("id_ed25519.pub"), dir.join("authorized_keys"))
            .map_err(|e| format!("authorized_keys: {e}"))?;

        for i in 1..=n {
            let ns = format!("lab{index}h{i}");
            let addr = format!("10.77.{index}.{}", i + 1);
            let peer = format!("{ns}p");
            run("ip", &["netns", "add", &ns])?;
            self.hosts.push(Host {
                ns: ns.clone(),
                addr: addr.clone(),
            });
            run(
                "ip",
                &["link", "add", &ns, "type", "veth", "peer", "name", &peer],
            )?;
            run("ip", &["link", "set", &peer, "netns", &ns])?;
            run("ip", &["link", "set", &ns, "master", &bridge, "up"])?;
            run("ip", &["-n", &ns, "link", "set", &peer, "name", "eth0"])?;
            run(
                "ip",
                &[
                    "-n",
                    &ns,
                    "addr",
                    "add",
                    &format!("{addr}/24"),
                    "dev",
                    "eth0",
                ],
            )?;
            run("ip", &["-n", &ns, "link", "set", "eth0", "up"])?;
            run("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
            let config = dir.join(format!("{ns}.sshd_config"));
            std::fs::write(
                &config,
                format!(
                    "ListenAddress {addr}:22\nHostKey {dir}/host_key\n\
                     AuthorizedKeysFile {dir}/authorized_keys\n\
                     PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
                     KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n\
                     PidFile none\nMaxSessions 100\nMaxStartups 100\n",
                    dir = dir.display()
                ),
            )
            .map_err(|e| format!("{}: {e}", config.display()))?;
            let log = std::fs::File::create(dir.join(format!("{ns}.sshd.log")))
                .map_err(|e| format!("sshd log: {e}"))?;
            let child = Command::new("ip")
                .args(["netns", "exec", &ns])
                .arg(sshd)
                .args(["-D", "-e", "-f"])
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(log.try_clone().map_err(|e| e.to_string())?)
                .stderr(log)
                .spawn()
                .map_err(|e| format!("start sshd in {ns}: {e}"))?;
            self.sshd.push(child);
        }
        // Ready once every sshd accepts a connection from the root namespace.
        let deadline = Instant::now() + Duration::from_secs(10);
        for host in &self.hosts {
            let socket: SocketAddr = format!("{}:22", host.addr).parse().unwrap();
            while TcpStream::connect_timeout(&socket, Duration::from_millis(200)).is_err() {
                if Instant::now() > deadline {
                    return Err(format!("sshd on {} did not listen within 10 s", host.addr));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }

    /// `ssh://root@<addr>` for host `i`.
    pub fn url(&self, i: usize) -> String {
        format!("ssh://root@{}", self.hosts[i].addr)
    }

    /// The processes running in host `i` other than sshd: what a run must not leave behind.
    pub fn leftovers(&self, i: usize) -> Vec<String> {
        let out = Command::new("ip")
            .args(["netns", "pids", &self.hosts[i].ns])
            .output()
            .expect("ip netns pids");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|pid| {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
                let comm = comm.trim();
                (comm != "sshd").then(|| format!("{pid} {comm}"))
            })
            .collect()
    }

    /// Runs `args` inside host `i` (`ip netns exec`), returning stdout.
    pub fn exec(&self, i: usize, args: &[&str]) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.hosts[i].ns])
            .args(args)
            .output()
            .expect("ip netns exec");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for TestBed {
    fn drop(&mut self) {
        // Whatever still runs in a host (a redis-server a failed test left) dies with it.
        for host in &self.hosts {
            if let Ok(out) = Command::new("ip")
                .args(["netns", "pids", &host.ns])
                .output()
            {
                for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                    let _ = Command::new("kill").args(["-KILL", pid]).status();
                }
            }
        }
        for child in &mut self.sshd {
            let _ = child.kill();
            let _ = child.wait();
        }
        for host in &self.hosts {
            // Deleting the namespace deletes its end of the veth, and with it the pair.
            let _ = run("ip", &["netns", "del", &host.ns]);
            let _ = run("ip", &["link", "del", &host.ns]);
        }
        let _ = run("ip", &["link", "del", &self.bridge]);
    }
}
