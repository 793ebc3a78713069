//! The test bed of namespace hosts (tests/it/common/netns.rs, the same as
//! scripts/netns-hosts.sh): real sshd in each, reached with the test's key. Needs root and
//! network namespaces: skipped (SKIPPED printed) where `ip netns add` is not permitted.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::netns::TestBed;
use lockaudit::cluster::{self, sharded, zookeeper, ClusterSpec, Endpoints, Topology};
use lockaudit::topology::hosts::SshTarget;
use nix::sys::signal::Signal;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;

#[test]
fn each_namespace_host_answers_ssh_on_its_own_address_and_is_removed_afterwards() {
    let Some(bed) = TestBed::new("test bed", 3) else {
        return;
    };
    let known_hosts = bed.key.with_file_name("known_hosts");
    for (i, host) in bed.hosts.iter().enumerate() {
        let out = Command::new("ssh")
            .args([
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=accept-new",
            ])
            .arg("-o")
            .arg(format!("UserKnownHostsFile={}", known_hosts.display()))
            .arg("-i")
            .arg(&bed.key)
            .arg(format!("root@{}", host.addr))
            .arg("ip -4 -o addr show eth0")
            .output()
            .expect("ssh");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "host {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains(&format!("inet {}/24", host.addr)),
            "{stdout}"
        );
        assert!(bed.leftovers(i).is_empty(), "{:?}", bed.leftovers(i));
    }
    let names: Vec<String> = bed.hosts.iter().map(|h| h.ns.clone()).collect();
    drop(bed);
    let list = String::from_utf8_lossy(
        &Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    for ns in names {
        assert!(
            !list.split_whitespace().any(|w| w == ns),
            "{ns} left in {list}"
        );
    }
}

/// One `lockaudit run` at a time: two runs of 8 clients and their faults at once on a 2-core
/// machine starve each other (a kill-servers run found nothing once beside a clock-jump one).
static RUNS: Mutex<()> = Mutex::new(());

/// A spec whose lock servers run on the bed's first `n` hosts.
fn remote_spec(bed: &TestBed, topology: Topology, n: usize, dir: &Path) -> ClusterSpec {
    let mut spec = ClusterSpec::new(topology, dir);
    spec.hosts = (0..n)
        .map(|i| SshTarget::parse(&bed.url(i)).unwrap())
        .collect();
    spec.ssh_key = Some(bed.key.clone());
    // The hosts share this machine's file system: each test its own folder there.
    spec.remote_dir = Some(dir.join("hosts"));
    // The bed's host key is made for the test: in no known_hosts.
    spec.accept_new_host_keys = true;
    spec
}

/// Makes `dir` and the hosts' folder in it passable by others (0711): a database's data
/// goes beside the run's folder there, where the host's `postgres` user must pass, as it
/// may through /tmp, the default.
fn passable_hosts_folder(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let pass = std::fs::Permissions::from_mode(0o711);
    std::fs::set_permissions(dir, pass.clone()).unwrap();
    std::fs::create_dir_all(dir.join("hosts")).unwrap();
    std::fs::set_permissions(dir.join("hosts"), pass).unwrap();
}

/// `lockaudit <command>` with its lock servers on the bed's first `hosts` hosts: the bed's
/// key, a folder of the test's own on the hosts (they share this file system) and `out`,
/// trusting the bed's new host key.
fn lockaudit_on_hosts(
    command: &str,
    bed: &TestBed,
    hosts: usize,
    dir: &Path,
    out: &Path,
) -> Command {
    let mut cmd = lockaudit_on_hosts_strict(command, bed, hosts, dir, out);
    cmd.arg("--accept-new-host-keys");
    cmd
}

/// [`lockaudit_on_hosts`] without `--accept-new-host-keys`.
fn lockaudit_on_hosts_strict(
    command: &str,
    bed: &TestBed,
    hosts: usize,
    dir: &Path,
    out: &Path,
) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lockaudit"));
    cmd.arg(command);
    // The fault plans these tests were written against (a run draws a fresh seed).
    if command == "run" {
        cmd.args(["--seed", "1"]);
    }
    cmd.arg("--ssh-key")
        .arg(&bed.key)
        .arg("--remote-dir")
        .arg(dir.join("hosts"))
        .arg("--out")
        .arg(out);
    for i in 0..hosts {
        cmd.arg("--node").arg(bed.url(i));
    }
    cmd
}

async fn connect(e: &Endpoints, name: &str) -> MultiplexedConnection {
    try_connect(e, name)
        .await
        .expect("connect with the password")
}

/// `connect`, for a poll that tries again: while the sentinels reconfigure a server they
/// close its clients' connections, and one may be reset while it is being set up.
async fn try_connect(e: &Endpoints, name: &str) -> redis::RedisResult<MultiplexedConnection> {
    let node = e.node(name).expect("a node of the cluster");
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(2)));
    redis::Client::open(e.url(node))
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

fn assert_nothing_left(bed: &TestBed, n: usize, dir: &Path) {
    for i in 0..n {
        assert!(
            bed.leftovers(i).is_empty(),
            "host {i}: {:?}",
            bed.leftovers(i)
        );
    }
    let files: Vec<_> = std::fs::read_dir(dir.join("hosts"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    assert!(files.is_empty(), "files left on the hosts: {files:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn independent_masters_on_five_hosts_crash_pause_and_move_their_clocks_over_ssh() {
    let Some(bed) = TestBed::new("independent masters on hosts", 5) else {
        return;
    };
    let dir = common::RunDir::new();
    let mut spec = remote_spec(&bed, Topology::Independent, 5, dir.path());
    spec.fake_clocks = true;
    let begun = Instant::now();
    let mut cluster = cluster::start(&spec).await.expect("start on the hosts");
    println!("5 masters on 5 hosts ready in {:?}", begun.elapsed());
    let e = cluster.endpoints();
    assert_eq!(e.nodes.len(), 5);
    for (i, node) in e.nodes.iter().enumerate() {
        assert_eq!(node.name, format!("master-{i}"));
        assert_eq!(
            node.host, bed.hosts[i].addr,
            "master-{i} listens on its host's address"
        );
        assert!(node.pid.is_some());
        // The server runs inside that host's namespace.
        let pid = node.pid.unwrap().to_string();
        assert!(
            bed.leftovers(i).iter().any(|p| p.starts_with(&pid)),
            "{:?}",
            bed.leftovers(i)
        );
    }
    assert_eq!(
        e.storage.host, "127.0.0.1",
        "storage stays on the control node"
    );

    // A crash: the key is gone after a restart without persistence.
    let mut conn = connect(&e, "master-2").await;
    let _: () = conn.set("k", "v").await.unwrap();
    let begun = Instant::now();
    cluster.kill("master-2").unwrap();
    println!("kill over ssh: {:?}", begun.elapsed());
    assert_eq!(cluster.pid("master-2"), None);
    assert!(connect_err(&e, "master-2").await);
    let begun = Instant::now();
    cluster.restart_empty("master-2").await.unwrap();
    println!("restart over ssh: {:?}", begun.elapsed());
    let e = cluster.endpoints();
    let mut conn = connect(&e, "master-2").await;
    let v: Option<String> = conn.get("k").await.unwrap();
    assert_eq!(v, None, "restarted empty");

    // A pause: no answer while stopped, the same server answers after SIGCONT.
    let mut conn1 = connect_short(&e, "master-1").await;
    cluster.signal("master-1", Signal::SIGSTOP).unwrap();
    let r: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut conn1).await;
    assert!(r.is_err(), "a paused server answered");
    cluster.signal("master-1", Signal::SIGCONT).unwrap();
    let mut conn1 = connect(&e, "master-1").await;
    let _: String = redis::cmd("PING").query_async(&mut conn1).await.unwrap();

    // A clock jump: TIME on the host moves by the offset, and back.
    cluster.set_clock_offset("master-3", 20_000).unwrap();
    let mut conn3 = connect(&e, "master-3").await;
    let skew = skew_ms(&mut conn3).await;
    assert!((19_900..20_100).contains(&skew), "skew {skew}");
    cluster.set_clock_offset("master-3", 0).unwrap();
    let skew = skew_ms(&mut conn3).await;
    assert!(skew.abs() < 100, "skew {skew}");

    let ended = cluster.shutdown().await;
    assert_eq!(ended.len(), 6, "{ended:?}");
    for i in 0..5 {
        let log = dir.path().join(format!("redis/master-{i}.log"));
        let text = std::fs::read_to_string(&log).expect("the host's log fetched");
        assert!(text.contains("Ready to accept connections"), "{text}");
    }
    assert_nothing_left(&bed, 5, dir.path());
}

/// A connection that gives up quickly (to a paused server).
async fn connect_short(e: &Endpoints, name: &str) -> MultiplexedConnection {
    let node = e.node(name).unwrap();
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(300)))
        .set_response_timeout(Some(Duration::from_millis(300)));
    redis::Client::open(e.url(node))
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| e.to_string())
        .unwrap_or_else(|e| panic!("{e}"))
}

async fn connect_err(e: &Endpoints, name: &str) -> bool {
    let node = e.node(name).unwrap();
    redis::Client::open(e.url(node))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .is_err()
}

/// The server's clock minus ours, in ms.
async fn skew_ms(conn: &mut MultiplexedConnection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    secs * 1000 + micros / 1000 - now
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_set_on_three_hosts_syncs_and_leaves_nothing_behind() {
    let Some(bed) = TestBed::new("replicated on hosts", 3) else {
        return;
    };
    let dir = common::RunDir::new();
    let spec = remote_spec(&bed, Topology::Replicated, 3, dir.path());
    let cluster = cluster::start(&spec).await.expect("start on the hosts");
    let e = cluster.endpoints();
    let names: Vec<&str> = e.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["master-0", "replica-1", "replica-2"]);
    let mut primary = connect(&e, "master-0").await;
    let _: () = primary.set("k", "v").await.unwrap();
    let _: i64 = redis::cmd("WAIT")
        .arg(2)
        .arg(2000)
        .query_async(&mut primary)
        .await
        .unwrap();
    let mut replica = connect(&e, "replica-2").await;
    let v: Option<String> = replica.get("k").await.unwrap();
    assert_eq!(v.as_deref(), Some("v"));

    // What the run put on the hosts (their file system is this one) is the login user's
    // alone: the uploaded configs with the password, the servers' data and logs, and the
    // folders that hold them.
    let mut uploaded = Vec::new();
    let mut folders = vec![dir.path().join("hosts")];
    while let Some(folder) = folders.pop() {
        assert_eq!(common::mode(&folder), 0o700, "{}", folder.display());
        for entry in std::fs::read_dir(&folder).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else {
                assert_eq!(common::mode(&path), 0o600, "{}", path.display());
                uploaded.push(path);
            }
        }
    }
    let configs = uploaded
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "conf"))
        .count();
    assert!(configs >= 3, "{uploaded:?}");

    // A cut replication link (iptables on replica-1's host): replica-1 misses a write that
    // replica-2 gets, until the heal; then no rule of the run is left.
    let mut cluster = cluster;
    cluster.cut_link("replica-1", "master-0").unwrap();
    let rules = bed.exec(1, &["iptables", "-S"]);
    assert!(
        rules.contains(&format!("-d {}/32", bed.hosts[0].addr)),
        "{rules}"
    );
    let _: () = primary.set("k", "w").await.unwrap();
    let acked: i64 = redis::cmd("WAIT")
        .arg(2)
        .arg(500)
        .query_async(&mut primary)
        .await
        .unwrap();
    assert_eq!(acked, 1, "only replica-2 acknowledged");
    let mut cut_off = connect(&e, "replica-1").await;
    let v: Option<String> = cut_off.get("k").await.unwrap();
    assert_eq!(v.as_deref(), Some("v"), "replica-1 lags");
    assert!(cluster.heal_link("replica-1", "master-0"));
    assert!(!bed.exec(1, &["iptables", "-S"]).contains("lockaudit"));
    let acked: i64 = redis::cmd("WAIT")
        .arg(2)
        .arg(5000)
        .query_async(&mut primary)
        .await
        .unwrap();
    assert_eq!(acked, 2, "replica-1 caught up after the heal");
    assert!(
        cluster.cut_link("master-0", "storage").is_err(),
        "storage is not on a host"
    );
    drop(cluster); // the drop path, not shutdown: it too must leave nothing
    assert_nothing_left(&bed, 3, dir.path());
}

/// A host whose key is in none of the user's known_hosts (the bed's key is made for the
/// test) is refused by default, before anything starts: exit 3, the host named, and what to
/// do (ssh-keyscan, or the flag). With --accept-new-host-keys the same run works.
#[test]
fn an_unknown_host_key_is_refused_unless_the_run_accepts_new_keys() {
    let Some(bed) = TestBed::new("unknown host key", 1) else {
        return;
    };
    let _one = RUNS.lock().unwrap_or_else(|p| p.into_inner());
    let dir = common::RunDir::new();
    let args = [
        "--algorithm",
        "set-nx-px",
        "--nemesis",
        "none",
        "--time-limit",
        "2s",
    ];
    let refused = dir.path().join("refused");
    let output = lockaudit_on_hosts_strict("run", &bed, 1, dir.path(), &refused)
        .args(args)
        .output()
        .expect("lockaudit run");
    common::assert_exit(&output, 3);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stderr}");
    for said in [
        bed.hosts[0].addr.as_str(),
        "host key",
        "known_hosts",
        "ssh-keyscan",
        "--accept-new-host-keys",
    ] {
        assert!(stderr.contains(said), "`{said}` not said: {stderr}");
    }
    assert!(!refused.join("report.json").exists());
    assert!(bed.leftovers(0).is_empty(), "{:?}", bed.leftovers(0));

    let accepted = dir.path().join("accepted");
    let output = lockaudit_on_hosts("run", &bed, 1, dir.path(), &accepted)
        .args(args)
        .output()
        .expect("lockaudit run");
    common::assert_exit(&output, 0);
    let endpoints = std::fs::read_to_string(accepted.join("endpoints.json")).unwrap();
    assert!(endpoints.contains(&bed.hosts[0].addr), "{endpoints}");
    // The host's key was recorded in the run's own known_hosts (the name hashed, as
    // Debian's ssh_config asks).
    let known = accepted.join("ssh/known_hosts");
    let found = Command::new("ssh-keygen")
        .args(["-F", &bed.hosts[0].addr, "-f"])
        .arg(&known)
        .output()
        .unwrap();
    let host_key = std::fs::read_to_string(bed.key.with_file_name("host_key.pub")).unwrap();
    let host_key = host_key.split_whitespace().nth(1).unwrap();
    assert!(
        String::from_utf8_lossy(&found.stdout).contains(host_key),
        "{}",
        std::fs::read_to_string(&known).unwrap()
    );
    assert_nothing_left(&bed, 1, dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_host_or_a_refused_key_is_named_in_the_error() {
    let Some(bed) = TestBed::new("unreachable host", 1) else {
        return;
    };
    let dir = common::RunDir::new();
    // An address on the bed's bridge that no host holds.
    let (subnet, _) = bed.control_addr.rsplit_once('.').unwrap();
    let nobody = format!("{subnet}.250");
    let mut spec = remote_spec(&bed, Topology::Single, 1, dir.path());
    spec.hosts = vec![SshTarget::parse(&format!("ssh://root@{nobody}")).unwrap()];
    let err = cluster::start(&spec).await.unwrap_err();
    let text = err.to_string();
    println!("{text}");
    assert!(text.contains(&nobody), "{text}");
    assert!(text.contains("connect"), "{text}");
    assert_eq!(err.exit_code(), 3);

    // A key the host does not know.
    let other = common::RunDir::new();
    let key = other.path().join("id");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(made.success());
    let mut spec = remote_spec(&bed, Topology::Single, 1, dir.path());
    spec.ssh_key = Some(key);
    let err = cluster::start(&spec).await.unwrap_err();
    let text = err.to_string();
    println!("{text}");
    assert!(
        text.contains(&bed.hosts[0].addr) && text.contains("Permission denied"),
        "{text}"
    );

    // A redis-server the host does not have.
    let mut spec = remote_spec(&bed, Topology::Single, 1, dir.path());
    spec.redis_server = Some("/nonexistent/redis-server".into());
    let err = cluster::start(&spec).await.unwrap_err();
    let text = err.to_string();
    println!("{text}");
    assert!(
        text.contains(&bed.hosts[0].addr) && text.contains("master-0"),
        "{text}"
    );
    assert_nothing_left(&bed, 1, dir.path());
}

/// `lockaudit audit` over five namespace hosts: RedLock's masters on the five, and
/// set-nx-px's primary and two replicas on three of them, reach what the local audit
/// expects (overlaps inside a live lease under kill-servers and clock-jump; an overlap under
/// failover); a PostgreSQL cell crashes its server on its host; and nothing of any cell is
/// left on the hosts.
#[test]
fn an_audit_over_five_hosts_finds_redlocks_and_the_failovers_overlaps() {
    let _one = RUNS.lock().unwrap_or_else(|p| p.into_inner());
    let Some(bed) = TestBed::new("audit on hosts", 5) else {
        return;
    };
    let dir = common::RunDir::new();
    passable_hosts_folder(dir.path());
    let out = dir.path().join("audit");
    let mut cmd = lockaudit_on_hosts("audit", &bed, 5, dir.path(), &out);
    cmd.args([
        "--cells",
        "redlock:kill-servers,redlock:clock-jump,set-nx-px:failover,pg-advisory:kill-servers",
        // Each must-find cell stops once it has found its overlap. Over the hosts, clients
        // acquire a few times a second, not dozens, so a grant on a bare quorum that the
        // restarted pair breaks comes later than on this machine: a CI run's
        // redlock × kill-servers found none in 15 s (65 acquisitions, 9 kills of two).
        "--time-limit",
        "30s",
    ]);
    let begun = Instant::now();
    let output = cmd.output().expect("lockaudit audit");
    println!("audit over 5 hosts: {:?}", begun.elapsed());
    common::assert_exit(&output, 0);
    let audit: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("audit.json")).unwrap()).unwrap();
    let cell = |algorithm: &str, nemesis: &str| {
        audit["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["algorithm"] == algorithm && c["nemesis"] == nemesis)
            .unwrap_or_else(|| panic!("no cell {algorithm} × {nemesis}: {audit}"))
            .clone()
    };
    for (algorithm, nemesis, hosts) in [
        ("redlock", "kill-servers", 5),
        ("redlock", "clock-jump", 5),
        ("set-nx-px", "failover", 3),
        ("pg-advisory", "kill-servers", 1),
    ] {
        let c = cell(algorithm, nemesis);
        assert_eq!(c["status"], "pass", "{c}");
        let run = out.join(algorithm).join(nemesis);
        let report = common::report(&run);
        let overlaps: Vec<_> = report["anomalies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["kind"] == "overlap")
            .collect();
        let inside = overlaps
            .iter()
            .filter(|a| a["lease_expired"] == false)
            .count();
        println!(
            "{algorithm} × {nemesis}: {} overlaps, {inside} inside a live lease",
            overlaps.len()
        );
        if algorithm == "pg-advisory" {
            // Its client notices a crash (lost-lock rather than an overlap); what matters
            // here is that the nemesis crashed it on its host and it recovered there from
            // its WAL.
            let log = std::fs::read_to_string(run.join("redis/master-0.log")).unwrap();
            assert!(log.contains("database system was interrupted"), "{log}");
        } else {
            assert!(!overlaps.is_empty(), "{algorithm} × {nemesis}: {c}");
        }
        if algorithm == "redlock" {
            assert!(inside > 0, "{algorithm} × {nemesis}: {c}");
        }
        // Its servers ran on the hosts (each one on its own), and their logs came back.
        let endpoints = std::fs::read_to_string(run.join("endpoints.json")).unwrap();
        for host in &bed.hosts[..hosts] {
            assert!(endpoints.contains(&host.addr), "{endpoints}");
        }
        assert!(run.join("redis/master-0.log").is_file());
    }
    let md = std::fs::read_to_string(out.join("audit.md")).unwrap();
    assert!(md.contains(&bed.url(4)), "the hosts named in audit.md");
    for i in 0..5 {
        assert!(
            bed.leftovers(i).is_empty(),
            "host {i}: {:?}",
            bed.leftovers(i)
        );
        let rules = bed.exec(i, &["iptables", "-S"]);
        assert!(!rules.contains("lockaudit"), "host {i}: {rules}");
    }
}

#[test]
fn a_replicated_set_nx_px_over_three_hosts_finds_the_failover_overlap() {
    let Some(bed) = TestBed::new("failover on hosts", 3) else {
        return;
    };
    let _one = RUNS.lock().unwrap_or_else(|p| p.into_inner());
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let mut cmd = lockaudit_on_hosts("run", &bed, 3, dir.path(), &out);
    cmd.args(["--algorithm", "set-nx-px", "--nemesis", "failover"])
        .args([
            "--topology",
            "replicated",
            // 12 s found it in 4 of 4 runs alone, but missed once beside the other tests
            // of this file on two busy cores.
            "--time-limit",
            "20s",
        ]);
    let begun = Instant::now();
    let output = cmd.output().expect("lockaudit run");
    println!("set-nx-px failover over 3 hosts: {:?}", begun.elapsed());
    common::assert_exit(&output, 1);
    let report = common::report(&out);
    assert!(common::kinds(&report).contains(&"overlap".to_string()));
    let history = std::fs::read_to_string(out.join("history.jsonl")).unwrap();
    assert!(
        history.contains("\"f\":\"failover\""),
        "a failover recorded"
    );
    // The replication link was frozen with iptables on the replicas' hosts, and healed:
    // no rule of the run is left there.
    assert!(
        history.contains("\"link\":\"replication\""),
        "a frozen link recorded"
    );
    for i in 0..3 {
        let rules = bed.exec(i, &["iptables", "-S"]);
        assert!(!rules.contains("lockaudit"), "host {i}: {rules}");
    }
    for i in 0..3 {
        assert!(
            bed.leftovers(i).is_empty(),
            "host {i}: {:?}",
            bed.leftovers(i)
        );
    }
}

/// PostgreSQL on a host, written once with the local one: it runs there as the host's
/// `postgres` user on the host's address, a pause stops its backends too, a crash keeps
/// every committed row (WAL replay) and a lost disk none, and nothing of it (its private
/// data folder included) is left on the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_on_a_host_pauses_crashes_recovers_and_leaves_nothing() {
    let Some(bed) = TestBed::new("postgresql on a host", 1) else {
        return;
    };
    let dir = common::RunDir::new();
    passable_hosts_folder(dir.path());
    let spec = remote_spec(&bed, Topology::Postgres, 1, dir.path());
    let begun = Instant::now();
    let mut cluster = cluster::start(&spec).await.expect("PostgreSQL on the host");
    println!("PostgreSQL on a host ready in {:?}", begun.elapsed());
    let e = cluster.endpoints();
    let node = e.nodes[0].clone();
    assert_eq!(
        (node.name.as_str(), node.host.as_str()),
        ("master-0", bed.hosts[0].addr.as_str())
    );
    let password = e.password.clone().unwrap();
    let connect = || async {
        let mut config = cluster::pg_client_config(&node.host, node.port, &password);
        config.connect_timeout(Duration::from_secs(2));
        let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        client
    };
    let client = connect().await;
    client
        .batch_execute("CREATE TABLE t (v int); INSERT INTO t VALUES (1)")
        .await
        .unwrap();
    let data: String = client
        .query_one("SELECT current_setting('data_directory')", &[])
        .await
        .map(|r| r.get(0))
        .unwrap();
    // The host shares this file system.
    let owner = std::fs::metadata(&data)
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
        .unwrap();
    assert_ne!(
        owner, 0,
        "its data is the host's postgres user's, not root's"
    );

    // A pause stops the postmaster and its backends: a query waits until the resume.
    let pid = cluster.pid("master-0").unwrap();
    cluster.signal("master-0", Signal::SIGSTOP).unwrap();
    let stopped = Instant::now();
    let query = tokio::spawn(async move {
        client
            .query_one("SELECT count(*) FROM t", &[])
            .await
            .map(|r| r.get::<_, i64>(0))
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!query.is_finished(), "answered while paused");
    cluster.signal("master-0", Signal::SIGCONT).unwrap();
    assert_eq!(query.await.unwrap().unwrap(), 1);
    assert!(stopped.elapsed() >= Duration::from_millis(500));

    cluster.kill("master-0").unwrap();
    cluster.restart("master-0").await.unwrap();
    assert_ne!(cluster.pid("master-0"), Some(pid), "a new postmaster");
    let rows: i64 = connect()
        .await
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 1, "the committed row replayed from the WAL");
    cluster.kill("master-0").unwrap();
    cluster.restart_empty("master-0").await.unwrap();
    let gone = connect()
        .await
        .query_one("SELECT count(*) FROM t", &[])
        .await;
    assert!(gone.is_err(), "a fresh initdb has no table t");
    cluster.shutdown().await;
    // Its log came back into the run folder.
    let log = std::fs::read_to_string(dir.path().join("redis/master-0.log")).unwrap();
    assert!(log.contains("database system is ready"), "{log}");
    assert_nothing_left(&bed, 1, dir.path());
}

/// MariaDB on three hosts (its one server on the first), written once with the local one:
/// it runs there as the host's `mysql` user on the host's address, a named lock dies with
/// its session when the server crashes, the server recovers its committed rows (InnoDB),
/// and nothing of it is left on the hosts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_on_hosts_crashes_recovers_and_leaves_nothing() {
    use mysql_async::prelude::Queryable;
    let Some(bed) = TestBed::new("mariadb on hosts", 3) else {
        return;
    };
    let dir = common::RunDir::new();
    passable_hosts_folder(dir.path());
    let spec = remote_spec(&bed, Topology::Mariadb, 3, dir.path());
    let begun = Instant::now();
    let mut cluster = cluster::start(&spec).await.expect("MariaDB on the hosts");
    println!("MariaDB on 3 hosts ready in {:?}", begun.elapsed());
    let e = cluster.endpoints();
    let node = e.nodes[0].clone();
    assert_eq!(node.host, bed.hosts[0].addr);
    let password = e.password.clone().unwrap();
    let connect = || async {
        mysql_async::Conn::new(cluster::mariadb_client_opts(
            &node.host, node.port, &password,
        ))
        .await
        .unwrap()
    };
    let mut conn = connect().await;
    conn.query_drop("CREATE TABLE t (v int) ENGINE=InnoDB")
        .await
        .unwrap();
    conn.query_drop("INSERT INTO t VALUES (1)").await.unwrap();
    let held: Option<i64> = conn.query_first("SELECT GET_LOCK('k', 0)").await.unwrap();
    assert_eq!(held, Some(1));
    let user: Option<String> = conn.query_first("SELECT USER()").await.unwrap();
    assert!(
        user.unwrap().starts_with("lockaudit@"),
        "the run's user, from this machine"
    );

    let pid = cluster.pid("master-0").unwrap();
    cluster.kill("master-0").unwrap();
    cluster.restart("master-0").await.unwrap();
    assert_ne!(cluster.pid("master-0"), Some(pid), "a new server");
    let mut other = connect().await;
    let taken: Option<i64> = other.query_first("SELECT GET_LOCK('k', 0)").await.unwrap();
    assert_eq!(taken, Some(1), "the crash freed the named lock");
    let rows: Option<i64> = other.query_first("SELECT count(*) FROM t").await.unwrap();
    assert_eq!(rows, Some(1), "the committed row recovered");
    drop(other);
    drop(conn);
    cluster.shutdown().await;
    let log = std::fs::read_to_string(dir.path().join("redis/master-0.log")).unwrap();
    assert!(log.contains("ready for connections"), "{log}");
    assert_nothing_left(&bed, 3, dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persisted_server_on_a_host_keeps_its_keys_across_a_crash_unless_emptied() {
    let Some(bed) = TestBed::new("persistence on a host", 1) else {
        return;
    };
    let dir = common::RunDir::new();
    let mut spec = remote_spec(&bed, Topology::Single, 1, dir.path());
    spec.persistence = true;
    let mut cluster = cluster::start(&spec).await.expect("start on the host");
    let e = cluster.endpoints();
    let mut conn = connect(&e, "master-0").await;
    let _: () = conn.set("k", "v").await.unwrap();
    let pid = cluster.pid("master-0").unwrap();
    cluster.kill("master-0").unwrap();
    cluster.restart("master-0").await.unwrap();
    assert_ne!(cluster.pid("master-0"), Some(pid), "a new process");
    let mut conn = connect(&e, "master-0").await;
    let v: Option<String> = conn.get("k").await.unwrap();
    assert_eq!(v.as_deref(), Some("v"), "replayed from its AOF");
    cluster.kill("master-0").unwrap();
    cluster.restart_empty("master-0").await.unwrap();
    let mut conn = connect(&e, "master-0").await;
    let v: Option<String> = conn.get("k").await.unwrap();
    assert_eq!(v, None, "its disk lost");
    cluster.shutdown().await;
    assert_nothing_left(&bed, 1, dir.path());
}

#[test]
fn ctrl_c_during_a_cut_replication_link_leaves_no_rule_on_the_hosts() {
    let Some(bed) = TestBed::new("ctrl-c during a cut on hosts", 3) else {
        return;
    };
    let _one = RUNS.lock().unwrap_or_else(|p| p.into_inner());
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let schedule = dir.path().join("cut.toml");
    std::fs::write(
        &schedule,
        "[[fault]]\nat = \"1s\"\nkind = \"partition\"\nlink = \"replication\"\nduration = \"60s\"\n",
    )
    .unwrap();
    let mut cmd = lockaudit_on_hosts("run", &bed, 3, dir.path(), &out);
    cmd.args(["--algorithm", "set-nx-px", "--topology", "replicated"])
        .arg("--nemesis")
        .arg(&schedule)
        .args(["--time-limit", "60s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let rules = |i: usize| {
        bed.exec(i, &["iptables", "-S"])
            .matches("lockaudit")
            .count()
    };
    // Until both replicas' hosts hold the cut (two rules each), the primary's none.
    wait_until(
        Duration::from_secs(40),
        || rules(1) >= 2 && rules(2) >= 2,
        || "the link was never cut".into(),
    );
    assert_eq!(rules(0), 0);
    send(&child, Signal::SIGINT);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    // The sessions holding the rules ended with lockaudit: each host deletes its rules.
    wait_until(
        Duration::from_secs(10),
        || (0..3).all(|i| rules(i) == 0 && bed.leftovers(i).is_empty()),
        || {
            let left: Vec<_> = (0..3).map(|i| (rules(i), bed.leftovers(i))).collect();
            format!("left: {left:?}")
        },
    );
}

/// The primary the hosts' sentinels name, as (address, port), once one answers.
async fn named_primary(e: &Endpoints) -> (String, u16) {
    cluster::ask_sentinels(e, Duration::from_secs(1))
        .await
        .expect("a sentinel names the primary")
}

/// Polls `check` every 20 ms until it holds, for at most `patience`.
async fn until<F, Fut>(patience: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + patience;
    while !check().await {
        assert!(Instant::now() < deadline, "{what} within {patience:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `until` for a check that blocks (a command on a host, a file): fails with `state()`,
/// what was seen when time ran out.
fn wait_until(patience: Duration, mut check: impl FnMut() -> bool, state: impl Fn() -> String) {
    let deadline = Instant::now() + patience;
    while !check() {
        assert!(Instant::now() < deadline, "{} within {patience:?}", state());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How long the run's history has grown so far.
fn history_bytes(out: &Path) -> u64 {
    std::fs::metadata(out.join("history.jsonl")).map_or(0, |m| m.len())
}

/// Sends `signal` to a lockaudit the test started.
fn send(child: &std::process::Child, signal: Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
}

/// Like [`stderr_of`], and what has come so far is readable while the child runs.
fn stderr_watched(
    child: &mut std::process::Child,
) -> (Arc<Mutex<String>>, std::thread::JoinHandle<String>) {
    let pipe = child.stderr.take().expect("stderr piped");
    let seen = Arc::new(Mutex::new(String::new()));
    let so_far = seen.clone();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(pipe)) {
            let Ok(line) = line else { break };
            let mut text = so_far.lock().unwrap_or_else(|p| p.into_inner());
            text.push_str(&line);
            text.push('\n');
        }
        let text = so_far.lock().unwrap_or_else(|p| p.into_inner());
        text.clone()
    });
    (seen, reader)
}

/// Reads the child's stderr to its end in the background (so a full pipe never blocks it).
fn stderr_of(child: &mut std::process::Child) -> std::thread::JoinHandle<String> {
    let mut pipe = child.stderr.take().expect("stderr piped");
    std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut pipe, &mut text).unwrap();
        text
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_deployment_on_three_hosts_fails_over_by_its_own_sentinels() {
    let Some(bed) = TestBed::new("sentinel on hosts", 3) else {
        return;
    };
    let dir = common::RunDir::new();
    let mut spec = remote_spec(&bed, Topology::Sentinel, 3, dir.path());
    spec.fake_clocks = true;
    let begun = Instant::now();
    let mut cluster = cluster::start(&spec).await.expect("start on the hosts");
    println!(
        "primary, 2 replicas and 3 sentinels on 3 hosts ready in {:?}",
        begun.elapsed()
    );
    let e = cluster.endpoints();
    let names: Vec<&str> = e.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["master-0", "replica-1", "replica-2"]);
    let sentinels: Vec<&str> = e.sentinels.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(sentinels, ["sentinel-0", "sentinel-1", "sentinel-2"]);
    assert_eq!(e.master_name.as_deref(), Some(cluster::MASTER_NAME));
    // Each sentinel runs inside its host (sentinel-i is node 3 + i: host i) and listens on
    // that host's address.
    for (i, sentinel) in e.sentinels.iter().enumerate() {
        assert_eq!(sentinel.host, bed.hosts[i].addr);
        let pid = sentinel.pid.expect("a running sentinel").to_string();
        assert!(
            bed.leftovers(i).iter().any(|p| p.starts_with(&pid)),
            "{:?}",
            bed.leftovers(i)
        );
    }
    let primary = (e.nodes[0].host.clone(), e.nodes[0].port);
    assert_eq!(named_primary(&e).await, primary);

    // A sentinel has no clock to move and no data to lose; a lock server's clock moves.
    let err = cluster.set_clock_offset("sentinel-1", 5000).unwrap_err();
    assert!(err.to_string().contains("only the lock's servers"), "{err}");
    let err = cluster.restart_empty("sentinel-1").await.unwrap_err();
    assert!(err.to_string().contains("restart it instead"), "{err}");
    cluster.set_clock_offset("replica-2", 60_000).unwrap();
    let mut replica = connect(&e, "replica-2").await;
    let skew = skew_ms(&mut replica).await;
    assert!(
        (59_000..61_000).contains(&skew),
        "replica-2 is {skew} ms ahead"
    );
    cluster.set_clock_offset("replica-2", 0).unwrap();

    // The primary paused (as the failover preset does): the hosts' sentinels elect a replica.
    let paused = Instant::now();
    cluster.signal("master-0", Signal::SIGSTOP).unwrap();
    let deadline = paused + Duration::from_secs(15);
    let elected = loop {
        let named = named_primary(&e).await;
        if named != primary {
            break named;
        }
        assert!(Instant::now() < deadline, "no replica elected within 15 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    println!(
        "the sentinels on the hosts named {elected:?} primary {:?} after the pause",
        paused.elapsed()
    );
    let new = e
        .nodes
        .iter()
        .find(|n| (n.host.clone(), n.port) == elected)
        .expect("one of the replicas")
        .name
        .clone();
    assert_ne!(new, "master-0");
    // Resumed, the old primary is turned into the new one's replica by the sentinels (who
    // then kill its clients' connections: a new one each time).
    cluster.signal("master-0", Signal::SIGCONT).unwrap();
    until(
        Duration::from_secs(15),
        "master-0 following the new primary",
        || {
            let (e, elected) = (&e, &elected);
            async move {
                let Ok(mut old) = try_connect(e, "master-0").await else {
                    return false;
                };
                let info: String = redis::cmd("INFO")
                    .arg("replication")
                    .query_async(&mut old)
                    .await
                    .unwrap_or_default();
                info.contains("role:slave")
                    && info.contains(&format!("master_host:{}", elected.0))
                    && info.contains("master_link_status:up")
            }
        },
    )
    .await;

    // The replica not elected, killed and restarted empty on its host: it comes back
    // following the new primary (its config, rewritten by the sentinels' reconfiguration,
    // names it).
    let other = if new == "replica-1" {
        "replica-2"
    } else {
        "replica-1"
    };
    let pid = cluster.pid(other).unwrap();
    cluster.kill(other).unwrap();
    cluster.restart_empty(other).await.unwrap();
    assert_ne!(cluster.pid(other), Some(pid), "a new process");
    until(
        Duration::from_secs(15),
        "the restarted replica in sync",
        || {
            let (e, elected) = (&e, &elected);
            async move {
                let Ok(mut conn) = try_connect(e, other).await else {
                    return false;
                };
                let info: String = redis::cmd("INFO")
                    .arg("replication")
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_default();
                info.contains(&format!("master_host:{}", elected.0))
                    && info.contains(&format!("master_port:{}", elected.1))
                    && info.contains("master_link_status:up")
            }
        },
    )
    .await;

    // A sentinel killed and restarted on its host keeps its rewritten view: the new primary.
    cluster.kill("sentinel-1").unwrap();
    assert_eq!(cluster.pid("sentinel-1"), None);
    cluster.restart("sentinel-1").await.unwrap();
    let restarted = cluster.endpoints();
    let only = Endpoints {
        sentinels: vec![restarted.node("sentinel-1").unwrap().clone()],
        ..restarted.clone()
    };
    assert_eq!(named_primary(&only).await, elected);

    let ended = cluster.shutdown().await;
    assert_eq!(ended.len(), 7, "6 on the hosts and storage: {ended:?}");
    // The sentinels' logs came back: they switched the master themselves.
    let logs: String = (0..3)
        .map(|i| {
            std::fs::read_to_string(dir.path().join(format!("redis/sentinel-{i}.log"))).unwrap()
        })
        .collect();
    assert!(
        logs.contains(&format!(
            "+switch-master {} {} {}",
            cluster::MASTER_NAME,
            primary.0,
            primary.1
        )),
        "{logs}"
    );
    assert_nothing_left(&bed, 3, dir.path());
}

/// `lockaudit run` of SET NX PX on the Sentinel topology over three namespace hosts under
/// `failover`: the hosts' sentinels elect a new primary while the old one is paused, the
/// clients follow them, and the checker finds nothing the workload does not allow under a
/// failover (measured: `unavailable` in 4 of 5 runs, and in 5 of 5 locally; no overlap, the
/// replicas having the lock before the pause). Nothing is left on any host.
#[test]
fn set_nx_px_under_the_hosts_sentinels_failover_finds_only_what_a_failover_may_cause() {
    let Some(bed) = TestBed::new("sentinel failover run on hosts", 3) else {
        return;
    };
    let _one = RUNS.lock().unwrap_or_else(|p| p.into_inner());
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let mut cmd = lockaudit_on_hosts("run", &bed, 3, dir.path(), &out);
    cmd.args(["--algorithm", "set-nx-px", "--nemesis", "failover"])
        .args(["--topology", "sentinel", "--time-limit", "12s"]);
    let begun = Instant::now();
    let output = cmd.output().expect("lockaudit run");
    println!(
        "set-nx-px sentinel failover over 3 hosts: {:?}",
        begun.elapsed()
    );
    // Valid or not (whether a lease runs out while the primary is paused is a matter of
    // timing), but no error.
    let code = output.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "exit {code:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = common::report(&out);
    let kinds = common::kinds(&report);
    println!("found {kinds:?}");
    // Nothing the workload does not allow under a failover.
    let workload =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/set-nx-px.toml");
    let spec = lockaudit::workload::WorkloadSpec::from_file(&workload).unwrap();
    let allowed = &spec.expect["failover"];
    for kind in &kinds {
        let kind: lockaudit::report::AnomalyKind = kind.parse().unwrap();
        assert!(
            allowed.must.contains(&kind) || allowed.may.contains(&kind),
            "{kind} is not expected of set-nx-px under failover"
        );
    }
    // The clients reached the primary through the hosts' sentinels.
    let endpoints: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("endpoints.json")).unwrap())
            .unwrap();
    for (i, sentinel) in endpoints["sentinels"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        assert_eq!(sentinel["host"], bed.hosts[i].addr.as_str());
    }
    // The primary paused, then the sentinels' choice recorded as a failover from it.
    let history = std::fs::read_to_string(out.join("history.jsonl")).unwrap();
    let faults: Vec<serde_json::Value> = history
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["process"] == "nemesis")
        .collect();
    let pause = faults
        .iter()
        .position(|e| e["f"] == "pause")
        .expect("a pause");
    assert_eq!(faults[pause]["value"]["targets"][0], "master-0");
    let failover = faults[pause..]
        .iter()
        .find(|e| e["f"] == "failover")
        .expect("a failover after the pause");
    assert_eq!(failover["value"]["by"], "sentinel");
    assert_eq!(failover["value"]["from"], "master-0");
    let elected = failover["value"]["targets"][0].as_str().unwrap();
    assert!(elected.starts_with("replica-"), "{failover}");
    // The sentinels' logs came back from the hosts, and say so too.
    let logs: String = (0..3)
        .map(|i| std::fs::read_to_string(out.join(format!("redis/sentinel-{i}.log"))).unwrap())
        .collect();
    assert!(logs.contains("+switch-master"), "{logs}");
    assert_nothing_left(&bed, 3, dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_cluster_on_three_hosts_forms_and_fails_over_by_itself() {
    let Some(bed) = TestBed::new("redis cluster on hosts", 3) else {
        return;
    };
    let dir = common::RunDir::new();
    let spec = remote_spec(&bed, Topology::Cluster, 3, dir.path());
    let begun = Instant::now();
    let mut cluster = cluster::start(&spec).await.expect("start on the hosts");
    println!(
        "3 masters and 3 replicas on 3 hosts formed in {:?}",
        begun.elapsed()
    );
    let e = cluster.endpoints();
    let names: Vec<&str> = e.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "master-0",
            "master-1",
            "master-2",
            "replica-3",
            "replica-4",
            "replica-5"
        ]
    );
    let pw = e.password.clone().unwrap();
    for (i, node) in e.nodes.iter().enumerate() {
        assert_eq!(
            node.host,
            bed.hosts[i % 3].addr,
            "node {i} on host {}",
            i % 3
        );
        assert!(
            sharded::is_ok(&node.host, node.port, &pw).await,
            "{}",
            node.name
        );
    }
    // The cluster knows its nodes by the hosts' addresses and lockaudit's names.
    let mut any = connect(&e, "master-0").await;
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut any)
        .await
        .unwrap();
    for (i, node) in e.nodes.iter().enumerate() {
        let announced = format!(
            "{}:{}@{},{}",
            node.host,
            node.port,
            node.port + 10000,
            node.name
        );
        assert!(
            nodes.contains(&announced),
            "node {i}: {announced} in {nodes}"
        );
    }
    // A master paused past the node timeout: its replica is promoted by the cluster.
    let addrs: Vec<(String, String, u16)> = e
        .nodes
        .iter()
        .map(|n| (n.name.clone(), n.host.clone(), n.port))
        .collect();
    let master = sharded::parse_nodes(&nodes)
        .into_iter()
        .find(|l| l.name.as_deref() == Some("master-0"))
        .unwrap();
    let replica = sharded::parse_nodes(&nodes)
        .into_iter()
        .find(|l| l.master_id.as_deref() == Some(master.id.as_str()))
        .and_then(|l| l.name)
        .expect("master-0's replica");
    let paused = Instant::now();
    cluster.signal("master-0", Signal::SIGSTOP).unwrap();
    until(Duration::from_secs(15), "the replica promoted", || {
        let (addrs, pw, replica) = (&addrs, &pw, &replica);
        async move {
            sharded::roles(addrs, pw)
                .await
                .contains(&(replica.clone(), true))
        }
    })
    .await;
    println!(
        "{replica} promoted {:?} after master-0's pause",
        paused.elapsed()
    );
    cluster.signal("master-0", Signal::SIGCONT).unwrap();
    // The old master rejoins as its replica.
    until(Duration::from_secs(15), "master-0 a replica", || {
        let (addrs, pw) = (&addrs, &pw);
        async move {
            sharded::roles(addrs, pw)
                .await
                .contains(&("master-0".to_string(), false))
        }
    })
    .await;
    // Killed and restarted empty on its host, a node keeps its identity and rejoins.
    cluster.kill("replica-4").unwrap();
    cluster.restart_empty("replica-4").await.unwrap();
    let node = e.node("replica-4").unwrap();
    until(
        Duration::from_secs(15),
        "replica-4 back in the cluster",
        || {
            let pw = &pw;
            async move { sharded::is_ok(&node.host, node.port, pw).await }
        },
    )
    .await;
    cluster.shutdown().await;
    assert!(dir.path().join("redis/replica-5.log").is_file());
    assert_nothing_left(&bed, 3, dir.path());
}

/// `lockaudit run` of SET NX PX on a Redis Cluster over three namespace hosts under
/// `failover` (a lagging replica taken over): the overlap inside a live lease that the
/// workload expects, as the local run finds it.
#[test]
fn set_nx_px_on_a_redis_cluster_over_three_hosts_finds_the_failover_overlap() {
    let Some(bed) = TestBed::new("cluster failover run on hosts", 3) else {
        return;
    };
    let _one = RUNS.lock().unwrap_or_else(|p| p.into_inner());
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let mut cmd = lockaudit_on_hosts("run", &bed, 3, dir.path(), &out);
    // 20 s: on a busy machine (CI beside two CPU hogs) the three failovers of a 12 s run
    // once caught no holder between its write and the takeover.
    cmd.args(["--algorithm", "set-nx-px", "--nemesis", "failover"])
        .args(["--topology", "cluster", "--time-limit", "20s"]);
    let begun = Instant::now();
    let output = cmd.output().expect("lockaudit run");
    println!(
        "set-nx-px cluster failover over 3 hosts: {:?}",
        begun.elapsed()
    );
    common::assert_exit(&output, 1);
    let report = common::report(&out);
    let inside = report["anomalies"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "overlap" && a["lease_expired"] == false)
        .count();
    println!(
        "{:?}, {inside} overlaps inside a live lease",
        common::kinds(&report)
    );
    assert!(inside > 0, "{}", String::from_utf8_lossy(&output.stdout));
    let history = std::fs::read_to_string(out.join("history.jsonl")).unwrap();
    assert!(
        history.contains("\"by\":\"takeover\""),
        "a takeover recorded"
    );
    let endpoints = std::fs::read_to_string(out.join("endpoints.json")).unwrap();
    for host in &bed.hosts {
        assert!(endpoints.contains(&host.addr), "{endpoints}");
    }
    assert_nothing_left(&bed, 3, dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_that_cannot_start_on_its_host_is_named_and_nothing_is_left() {
    let Some(bed) = TestBed::new("a sentinel that cannot start", 3) else {
        return;
    };
    let dir = common::RunDir::new();
    let mut spec = remote_spec(&bed, Topology::Sentinel, 3, dir.path());
    // The servers start; the sentinels' program is not on the hosts.
    spec.redis_sentinel = Some("/nonexistent/redis-sentinel".into());
    let err = cluster::start(&spec).await.unwrap_err();
    let text = err.to_string();
    println!("{text}");
    assert_eq!(err.exit_code(), 3);
    assert!(text.contains("cannot start sentinel-"), "{text}");
    assert!(
        text.contains("/nonexistent/redis-sentinel: No such file or directory"),
        "the shell's own words: {text}"
    );
    assert!(
        bed.hosts.iter().any(|h| text.contains(&h.addr)),
        "the host named: {text}"
    );
    // The primary and replicas it had started are gone, and so are the run's files.
    assert_nothing_left(&bed, 3, dir.path());
}

#[test]
fn ctrl_c_in_a_run_over_hosts_leaves_no_server_running_there_and_brings_the_logs_back() {
    let Some(bed) = TestBed::new("ctrl-c on hosts", 3) else {
        return;
    };
    let _one = RUNS.lock().unwrap_or_else(|p| p.into_inner());
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    // From a workload file: five masters on three hosts (two share a host), the hosts'
    // files in the test's folder.
    let nodes: Vec<String> = (0..3).map(|i| format!("\"{}\"", bed.url(i))).collect();
    let workload = dir.path().join("w.toml");
    std::fs::write(
        &workload,
        format!(
            "algorithm = \"redlock\"\nnemesis = \"pause-servers\"\ntime_limit = \"60s\"\n\
             nodes = [{}]\nssh_key = \"{}\"\nremote_dir = \"{}\"\naccept_new_host_keys = true\n",
            nodes.join(", "),
            bed.key.display(),
            dir.path().join("hosts").display()
        ),
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lockaudit"));
    cmd.args(["run", "--seed", "1"])
        .arg(&workload)
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stderr = stderr_of(&mut child);
    // Until the servers run on the hosts and the clients work (a history with events).
    wait_until(
        Duration::from_secs(30),
        || (0..3).all(|i| !bed.leftovers(i).is_empty()) && history_bytes(&out) >= 1000,
        || "the run did not start".into(),
    );
    send(&child, Signal::SIGINT);
    let interrupted = Instant::now();
    let status = child.wait().unwrap();
    println!(
        "Ctrl-C to exit, 5 logs fetched: {:?}",
        interrupted.elapsed()
    );
    let stderr = stderr.join().unwrap();
    println!("{stderr}");
    assert_eq!(status.code(), Some(130), "{status:?}\n{stderr}");
    // The ssh sessions died with lockaudit; each host's watcher kills its server.
    wait_until(
        Duration::from_secs(10),
        || (0..3).all(|i| bed.leftovers(i).is_empty()),
        || {
            let left: Vec<_> = (0..3).map(|i| bed.leftovers(i)).collect();
            format!("left on the hosts: {left:?}")
        },
    );
    // Before the connections died, each server's log came back into the run folder and the
    // run's folder left the hosts, as at a normal end; known_hosts stays in the run folder.
    for i in 0..5 {
        let log = out.join(format!("redis/master-{i}.log"));
        let text = std::fs::read_to_string(&log)
            .unwrap_or_else(|e| panic!("{}: {e}\n{stderr}", log.display()));
        assert!(text.contains("Ready to accept connections"), "{text}");
    }
    assert!(
        stderr.contains("fetched 5 of 5 logs from the hosts"),
        "{stderr}"
    );
    assert!(!stderr.contains("is left on"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(dir.path().join("hosts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(left.is_empty(), "left on the hosts: {left:?}\n{stderr}");
    assert!(out.join("ssh/known_hosts").is_file());
}

/// The first to last node's `after`: how far apart the nodes of one fault were hit.
fn spread(acted: &[cluster::Acted]) -> Duration {
    let first = acted.iter().map(|a| a.after).min().unwrap_or_default();
    let last = acted.iter().map(|a| a.after).max().unwrap_or_default();
    last - first
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_and_a_clock_jump_hit_five_hosts_at_once() {
    let Some(bed) = TestBed::new("pause and clock jump on five hosts", 5) else {
        return;
    };
    let dir = common::RunDir::new();
    let mut spec = remote_spec(&bed, Topology::Independent, 5, dir.path());
    spec.fake_clocks = true;
    let cluster = cluster::start(&spec).await.expect("start on the hosts");
    let e = cluster.endpoints();
    let names: Vec<String> = (0..5).map(|i| format!("master-{i}")).collect();
    for round in 0..3 {
        // Connected before the pause: a paused server answers no AUTH.
        let mut conns = Vec::new();
        for name in &names {
            conns.push(connect_short(&e, name).await);
        }
        // One after the other, as the nemesis did before (for the figure only).
        let begun = Instant::now();
        let mut serial = Vec::new();
        for name in &names {
            let result = cluster.signal(name, Signal::SIGSTOP);
            serial.push(cluster::Acted {
                name: name.clone(),
                result,
                after: begun.elapsed(),
            });
        }
        cluster.signal_many(&names, Signal::SIGCONT);
        let paused = cluster.signal_many(&names, Signal::SIGSTOP);
        println!(
            "round {round}: pause of 5 hosts, spread one after the other {:?}, at once {:?}",
            spread(&serial),
            spread(&paused)
        );
        assert_eq!(paused.len(), 5);
        assert!(paused.iter().all(|a| a.result.is_ok()), "{paused:?}");
        // Every node stopped: none answers.
        for (name, conn) in names.iter().zip(&mut conns) {
            let r: redis::RedisResult<String> = redis::cmd("PING").query_async(conn).await;
            assert!(r.is_err(), "{name} answered while paused");
        }
        let resumed = cluster.signal_many(&names, Signal::SIGCONT);
        assert!(resumed.iter().all(|a| a.result.is_ok()), "{resumed:?}");
    }
    let begun = Instant::now();
    let mut serial = Vec::new();
    for name in &names {
        let result = cluster.set_clock_offset(name, 20_000);
        serial.push(cluster::Acted {
            name: name.clone(),
            result,
            after: begun.elapsed(),
        });
    }
    cluster.set_clock_offset_many(&names, 0);
    let moved = cluster.set_clock_offset_many(&names, 20_000);
    println!(
        "clock jump on 5 hosts: spread one after the other {:?}, at once {:?}",
        spread(&serial),
        spread(&moved)
    );
    for name in &names {
        let mut conn = connect(&e, name).await;
        let skew = skew_ms(&mut conn).await;
        assert!((19_900..20_100).contains(&skew), "{name}: skew {skew}");
    }
    cluster.set_clock_offset_many(&names, 0);
    cluster.shutdown().await;
    assert_nothing_left(&bed, 5, dir.path());
}

/// A connection through a proxy on this machine, with short timeouts (a cut link answers
/// nothing).
async fn through(
    proxy: &lockaudit::nemesis::proxy::Proxy,
    password: &str,
) -> redis::RedisResult<MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(1500)))
        .set_response_timeout(Some(Duration::from_millis(500)));
    redis::Client::open(format!("redis://:{password}@{}/", proxy.addr()))
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iptables_on_the_host_cuts_one_worker_off_by_its_source_ports_and_not_the_other() {
    use lockaudit::nemesis::proxy::Proxy;
    use lockaudit::nemesis::source_ports::{self, SourcePorts};
    let Some(bed) = TestBed::new("client cut on a host", 1) else {
        return;
    };
    let dir = common::RunDir::new();
    let spec = remote_spec(&bed, Topology::Single, 1, dir.path());
    let mut cluster = cluster::start(&spec).await.expect("start on the host");
    let e = cluster.endpoints();
    let password = e.password.clone().unwrap();
    let node = e.node("master-0").unwrap();
    let upstream = format!("{}:{}", node.host, node.port).parse().unwrap();
    let ranges = source_ports::ranges(2).unwrap();
    let mut proxies = Vec::new();
    for (w, range) in ranges.iter().enumerate() {
        let ports = SourcePorts::new(range.clone());
        proxies.push(
            Proxy::start_from(&format!("worker-{w}>master-0"), upstream, ports)
                .await
                .unwrap(),
        );
    }
    let mut w0 = through(&proxies[0], &password).await.unwrap();
    let mut w1 = through(&proxies[1], &password).await.unwrap();
    // The server sees each worker's connection come from that worker's ports.
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("w0")
        .query_async(&mut w0)
        .await
        .unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("w1")
        .query_async(&mut w1)
        .await
        .unwrap();
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut w1)
        .await
        .unwrap();
    for (w, range) in ranges.iter().enumerate() {
        let line = list
            .lines()
            .find(|l| l.contains(&format!("name=w{w} ")))
            .unwrap_or_else(|| panic!("{list}"));
        let addr = line
            .split(' ')
            .find_map(|f| f.strip_prefix("addr="))
            .unwrap();
        let (ip, port) = addr.rsplit_once(':').unwrap();
        assert_eq!(ip, bed.control_addr, "{line}");
        assert!(
            range.contains(&port.parse().unwrap()),
            "worker-{w}: {line} not in {range:?}"
        );
    }

    let begun = Instant::now();
    cluster
        .cut_client("worker-0", &ranges[0], &["master-0".to_string()])
        .pop()
        .unwrap()
        .unwrap();
    println!("client cut on the host: {:?}", begun.elapsed());
    let rules = bed.exec(0, &["iptables", "-S"]);
    let sport = format!("--sport {}:{}", ranges[0].start(), ranges[0].end());
    assert!(rules.contains(&sport), "{rules}");
    // worker-0 gets no answer, on its connection or a new one; worker-1 still does.
    let r: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut w0).await;
    assert!(
        r.is_err(),
        "worker-0 reached the server through the cut: {r:?}"
    );
    assert!(
        through(&proxies[0], &password).await.is_err(),
        "a new connection got through"
    );
    let pong: String = redis::cmd("PING").query_async(&mut w1).await.unwrap();
    assert_eq!(pong, "PONG");
    assert!(through(&proxies[1], &password).await.is_ok());

    let begun = Instant::now();
    assert!(cluster.heal_link("worker-0", "master-0"));
    println!("client cut healed: {:?}", begun.elapsed());
    assert!(!bed.exec(0, &["iptables", "-S"]).contains("lockaudit"));
    let mut w0 = through(&proxies[0], &password)
        .await
        .expect("worker-0 back after the heal");
    let pong: String = redis::cmd("PING").query_async(&mut w0).await.unwrap();
    assert_eq!(pong, "PONG");
    for p in proxies {
        p.stop().await;
    }
    cluster.shutdown().await;
    assert_nothing_left(&bed, 1, dir.path());
}

/// The run's iptables rules on host `i` that cut a worker off by its source ports (a port
/// range `a:b`, in and out).
fn client_rules(bed: &TestBed, i: usize) -> Vec<String> {
    let range = |w: &str| w.contains(':') && w.chars().all(|c| c.is_ascii_digit() || c == ':');
    bed.exec(i, &["iptables", "-S"])
        .lines()
        .filter(|l| l.contains("lockaudit-run") && l.split_whitespace().any(range))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_partition_run_over_a_host_cuts_workers_off_with_iptables_and_finds_what_the_audit_expects() {
    let Some(bed) = TestBed::new("partition run on a host", 1) else {
        return;
    };
    let _one = RUNS.lock().unwrap_or_else(|p| p.into_inner());
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    // watch-multi × partition: `{}` in its [expect], valid (a cut-off worker's EXEC may or
    // may not land, an `info`, never a lost update).
    let mut cmd = lockaudit_on_hosts("run", &bed, 1, dir.path(), &out);
    cmd.args(["--algorithm", "watch-multi", "--nemesis", "partition"])
        .args(["--time-limit", "12s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let begun = Instant::now();
    let child = cmd.spawn().unwrap();
    // The cuts, as the host holds them while the run goes on.
    let mut seen = std::collections::BTreeSet::new();
    let output = std::thread::scope(|scope| {
        let waited = scope.spawn(|| child.wait_with_output().unwrap());
        while !waited.is_finished() {
            seen.extend(client_rules(&bed, 0));
            std::thread::sleep(Duration::from_millis(50));
        }
        waited.join().unwrap()
    });
    println!("watch-multi partition over a host: {:?}", begun.elapsed());
    common::assert_exit(&output, 0);
    println!("{seen:#?}");
    assert!(
        seen.iter()
            .any(|r| r.starts_with("-A INPUT") && r.contains("-j DROP")),
        "no worker was cut off by iptables on the host: {seen:?}"
    );
    let history = std::fs::read_to_string(out.join("history.jsonl")).unwrap();
    let partitions = history
        .lines()
        .filter(|l| l.contains("\"f\":\"partition\"") && l.contains("\"link\":\"clients\""))
        .count();
    let heals = history
        .lines()
        .filter(|l| l.contains("\"f\":\"heal\""))
        .count();
    println!("{partitions} client partitions, {heals} heals");
    assert!(partitions > 0, "no client partition recorded");
    assert_eq!(partitions, heals, "each partition healed");
    assert!(client_rules(&bed, 0).is_empty(), "a rule was left");
    assert_nothing_left(&bed, 1, dir.path());
}

#[test]
fn ctrl_c_while_a_worker_is_cut_off_leaves_no_rule_on_the_host() {
    let Some(bed) = TestBed::new("ctrl-c during a client cut on a host", 1) else {
        return;
    };
    let _one = RUNS.lock().unwrap_or_else(|p| p.into_inner());
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let schedule = dir.path().join("cut.toml");
    std::fs::write(
        &schedule,
        "[[fault]]\nat = \"1s\"\nkind = \"partition\"\ntarget = \"worker-0\"\nduration = \"60s\"\n",
    )
    .unwrap();
    let mut child = lockaudit_on_hosts("run", &bed, 1, dir.path(), &out)
        .args(["--algorithm", "set-nx-px", "--nemesis"])
        .arg(&schedule)
        .args(["--time-limit", "60s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until(
        Duration::from_secs(40),
        || client_rules(&bed, 0).len() >= 2,
        || "the worker was never cut off".into(),
    );
    send(&child, Signal::SIGINT);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    // The session holding the rules ended with lockaudit: the host deletes them.
    wait_until(
        Duration::from_secs(10),
        || client_rules(&bed, 0).is_empty() && bed.leftovers(0).is_empty(),
        || format!("left: {:?} {:?}", client_rules(&bed, 0), bed.leftovers(0)),
    );
    let history = std::fs::read_to_string(out.join("history.jsonl")).unwrap();
    assert!(history.contains("\"f\":\"partition\""), "the cut recorded");
    assert!(
        out.join("redis/master-0.log").is_file(),
        "the log came back"
    );
}

#[test]
fn sigterm_with_a_host_gone_silent_says_where_the_run_is_left_on_it() {
    let Some(bed) = TestBed::new("sigterm with a silent host", 1) else {
        return;
    };
    let _one = RUNS.lock().unwrap_or_else(|p| p.into_inner());
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let mut child = lockaudit_on_hosts("run", &bed, 1, dir.path(), &out)
        .args(["--algorithm", "set-nx-px", "--nemesis", "none"])
        .args(["--time-limit", "60s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (seen, stderr) = stderr_watched(&mut child);
    wait_until(
        Duration::from_secs(30),
        || history_bytes(&out) >= 1000,
        || "the run did not start".into(),
    );
    // The host stops answering SSH: the logs cannot come back.
    let silence = ["INPUT", "-p", "tcp", "--dport", "22", "-j", "DROP"];
    bed.exec(0, &[&["iptables", "-I"][..], &silence].concat());
    send(&child, Signal::SIGTERM);
    let interrupted = Instant::now();
    // A second signal while the logs are fetched skips the wait for a host that is silent.
    wait_until(
        Duration::from_secs(30),
        || {
            seen.lock()
                .unwrap()
                .contains("bringing the servers' logs back")
        },
        || format!("no word of the logs: {}", seen.lock().unwrap()),
    );
    send(&child, Signal::SIGTERM);
    let status = child.wait().unwrap();
    println!(
        "two SIGTERMs to exit, the host silent: {:?}",
        interrupted.elapsed()
    );
    let stderr = stderr.join().unwrap();
    assert_eq!(status.code(), Some(143), "{status:?}\n{stderr}");
    println!("{stderr}");
    assert!(
        stderr.contains("interrupted again: not waiting for the logs"),
        "{stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path().join("hosts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    let said = format!(
        "the run's folder is left on {}: {}",
        bed.url(0),
        left[0].display()
    );
    assert!(stderr.contains(&said), "{stderr}");
    assert!(stderr.contains("fetched 0 of 1 logs"), "{stderr}");
    // Heard again, the host's sshd finds the session gone and its watcher ends the server.
    bed.exec(0, &[&["iptables", "-D"][..], &silence].concat());
    wait_until(
        Duration::from_secs(60),
        || bed.leftovers(0).is_empty(),
        || format!("left: {:?}", bed.leftovers(0)),
    );
}

/// A host's own settings from a hosts file or a workload's `nodes` table: its own key (the
/// run's key is one no host accepts) and its own redis-server program, used on that host
/// only, for the start and for a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_uses_its_own_key_and_its_own_redis_server() {
    let Some(bed) = TestBed::new("per-host settings", 2) else {
        return;
    };
    let dir = common::RunDir::new();
    let refused = dir.path().join("refused");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&refused)
        .status()
        .unwrap();
    assert!(made.success());
    // A redis-server of host 1's own: it notes each start (the hosts share this file
    // system), then is the real one.
    let marks = dir.path().join("marks");
    let wrapper = dir.path().join("my-redis-server");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$1\" >> '{}'\nexec redis-server \"$@\"\n",
            marks.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let inventory = dir.path().join("hosts.toml");
    std::fs::write(
        &inventory,
        format!(
            "ssh_key = '{}'\naccept_new_host_keys = true\nnodes = [\n  {{ url = '{}', ssh_key = '{}' }},\n  \
             {{ url = '{}', ssh_key = '{}', redis_server = '{}' }},\n]\n",
            refused.display(),
            bed.url(0),
            bed.key.display(),
            bed.url(1),
            bed.key.display(),
            wrapper.display()
        ),
    )
    .unwrap();
    let inventory = lockaudit::workload::inventory::Inventory::from_file(&inventory).unwrap();
    let mut spec = ClusterSpec::new(Topology::Independent, dir.path());
    spec.masters = 2;
    spec.hosts = lockaudit::topology::hosts::parse_targets(&inventory.nodes).unwrap();
    spec.ssh_key = inventory.ssh_key.clone();
    spec.accept_new_host_keys = inventory.accept_new_host_keys;
    spec.remote_dir = Some(dir.path().join("hosts"));
    let mut cluster = cluster::start(&spec)
        .await
        .expect("both hosts by their own keys");
    let started = std::fs::read_to_string(&marks).unwrap();
    assert_eq!(started.lines().count(), 1, "{started}");
    assert!(started.contains("master-1"), "{started}");
    cluster.kill("master-1").unwrap();
    cluster.restart("master-1").await.unwrap();
    let started = std::fs::read_to_string(&marks).unwrap();
    assert_eq!(started.lines().count(), 2, "the restart too: {started}");
    assert!(!started.contains("master-0"), "{started}");
    cluster.shutdown().await;
    assert_nothing_left(&bed, 2, dir.path());
}

/// Starts `topology`'s three servers on the bed's three hosts, and checks that server i is
/// `<prefix>-i`, at host i's own address, running `program` there.
async fn start_on_three_hosts(
    bed: &TestBed,
    dir: &Path,
    topology: Topology,
    prefix: &str,
    program: &str,
) -> cluster::Cluster {
    let spec = remote_spec(bed, topology, 3, dir);
    let begun = Instant::now();
    let cluster = cluster::start(&spec)
        .await
        .unwrap_or_else(|e| panic!("{topology:?} starts on the hosts: {e}"));
    println!("{topology:?} on 3 hosts ready in {:?}", begun.elapsed());
    for (i, node) in cluster.endpoints().nodes.iter().enumerate() {
        assert_eq!(node.name, format!("{prefix}-{i}"));
        assert_eq!(node.host, bed.hosts[i].addr, "{node:?}");
        assert!(
            bed.leftovers(i)
                .iter()
                .any(|p| p.ends_with(&format!(" {program}"))),
            "host {i} runs no {program}: {:?}",
            bed.leftovers(i)
        );
    }
    cluster
}

/// The leader of the moment cut off from the other servers both ways, with iptables on the
/// hosts: its name, the others (name, address, port) and the pairs cut.
async fn isolate_the_leader(
    cluster: &mut cluster::Cluster,
) -> (String, Vec<(String, String, u16)>, Vec<(String, String)>) {
    let leader = cluster.leader().await.expect("a leader");
    let others: Vec<(String, String, u16)> = cluster
        .endpoints()
        .nodes
        .into_iter()
        .filter(|n| n.name != leader)
        .map(|n| (n.name, n.host, n.port))
        .collect();
    let pairs: Vec<(String, String)> = others
        .iter()
        .flat_map(|(o, _, _)| [(leader.clone(), o.clone()), (o.clone(), leader.clone())])
        .collect();
    for result in cluster.cut_links(&pairs) {
        result.expect("cut on the hosts");
    }
    (leader, others, pairs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_on_three_hosts_elects_survives_a_kill_and_an_isolated_leader_and_leaves_nothing() {
    common::require_etcd();
    let Some(bed) = TestBed::new("etcd on hosts", 3) else {
        return;
    };
    let dir = common::RunDir::new();
    let mut cluster = start_on_three_hosts(&bed, dir.path(), Topology::Etcd, "etcd", "etcd").await;
    let e = cluster.endpoints();
    let password = e.password.clone().unwrap();
    let url = |name: &str| {
        let node = e.node(name).unwrap();
        format!("http://{}:{}", node.host, node.port)
    };

    // A member killed on its host, restarted on its data there, serves again.
    cluster.kill("etcd-1").unwrap();
    assert!(cluster.pid("etcd-1").is_none());
    let restarted = Instant::now();
    cluster
        .restart("etcd-1")
        .await
        .expect("rejoins on its data");
    println!("etcd-1 restarted on its host in {:?}", restarted.elapsed());
    assert!(matches!(
        cluster.restart_empty("etcd-1").await,
        Err(cluster::ClusterError::Unsupported { .. })
    ));

    // The leader cut off from the others with iptables on the hosts, both ways.
    let (old, others, pairs) = isolate_the_leader(&mut cluster).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let new = loop {
        if let Some(new) = cluster::etcd::leader(&others).await {
            break new;
        }
        assert!(Instant::now() < deadline, "the other two elect no leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_ne!(new, old);
    let read = common::etcd_read(&url(&old), &password, "lockaudit/apart").await;
    assert!(read.is_err(), "the isolated {old} served a read: {read:?}");
    let mut majority =
        cluster::etcd::connect(&[url(&new)], Some(&password), Duration::from_secs(2))
            .await
            .unwrap();
    majority
        .put("lockaudit/apart", "written apart", None)
        .await
        .expect("the majority writes");
    assert!(cluster.heal_links(&pairs).iter().all(|&healed| healed));
    until(
        Duration::from_secs(20),
        "the isolated member rejoins and reads the majority's write",
        || async {
            common::etcd_read(&url(&old), &password, "lockaudit/apart").await
                == Ok(Some("written apart".into()))
        },
    )
    .await;

    let logs = cluster.root().to_path_buf();
    cluster.shutdown().await;
    for i in 0..3 {
        let log = std::fs::read_to_string(logs.join(format!("etcd-{i}.log"))).unwrap_or_default();
        assert!(log.contains("etcd-version"), "etcd-{i}'s log not fetched");
    }
    assert_nothing_left(&bed, 3, dir.path());
}

/// `lockaudit run --algorithm etcd-lock` over the bed's 3 hosts with `nemesis`; returns the
/// run folder's history and the report's anomaly kinds.
fn etcd_lock_on_hosts(bed: &TestBed, dir: &Path, nemesis: &str) -> (String, Vec<String>) {
    let args = ["--algorithm", "etcd-lock", "--nemesis", nemesis];
    run_on_three_hosts(bed, dir, &args, "10s")
}

/// `lockaudit run ARGS` for `time_limit` over the bed's 3 hosts; returns the run folder's
/// history and the report's anomaly kinds.
fn run_on_three_hosts(
    bed: &TestBed,
    dir: &Path,
    args: &[&str],
    time_limit: &str,
) -> (String, Vec<String>) {
    let _one = RUNS.lock().unwrap_or_else(|p| p.into_inner());
    let out = dir.join("run");
    let mut cmd = lockaudit_on_hosts("run", bed, 3, dir, &out);
    cmd.args(args).args(["--time-limit", time_limit]);
    let begun = Instant::now();
    let output = cmd.output().expect("lockaudit run");
    println!("{} over 3 hosts: {:?}", args.join(" "), begun.elapsed());
    // 0 valid, 1 anomalies found: both are verdicts; anything else is an error.
    let code = output.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "{code:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let history = std::fs::read_to_string(out.join("history.jsonl")).unwrap();
    let endpoints = std::fs::read_to_string(out.join("endpoints.json")).unwrap();
    for host in &bed.hosts {
        assert!(endpoints.contains(&host.addr), "{endpoints}");
    }
    let kinds = common::kinds(&common::report(&out));
    println!("{kinds:?}");
    (history, kinds)
}

/// The nemesis events `f` whose targets are all etcd members.
fn member_faults<'a>(history: &'a str, f: &str) -> Vec<&'a str> {
    server_faults(history, f, "etcd-")
}

/// The nemesis events `f` whose targets are all servers named `<prefix>...`.
fn server_faults<'a>(history: &'a str, f: &str, prefix: &str) -> Vec<&'a str> {
    history
        .lines()
        .filter(|l| l.contains("\"process\":\"nemesis\"") && l.contains(&format!("\"f\":\"{f}\"")))
        .filter(|l| {
            let event: serde_json::Value = serde_json::from_str(l).unwrap();
            let targets = event["value"]["targets"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            !targets.is_empty()
                && targets
                    .iter()
                    .all(|t| t.as_str().is_some_and(|t| t.starts_with(prefix)))
        })
        .collect()
}

#[test]
fn etcd_lock_over_three_hosts_with_members_killed_finds_only_what_a_correct_lock_allows() {
    common::require_etcd();
    let Some(bed) = TestBed::new("etcd-lock kill-servers on hosts", 3) else {
        return;
    };
    let dir = common::RunDir::new();
    let (history, kinds) = etcd_lock_on_hosts(&bed, dir.path(), "kill-servers");
    assert!(
        history.contains("\"f\":\"acquire\"") && history.contains("\"type\":\"ok\""),
        "no acquisition recorded"
    );
    let kills = member_faults(&history, "kill");
    let restarts = member_faults(&history, "restart");
    println!("{} kills, {} restarts", kills.len(), restarts.len());
    assert!(!kills.is_empty(), "no member kill recorded");
    assert_eq!(kills.len(), restarts.len(), "each killed member restarted");
    // workloads/etcd-lock.toml's [expect] for kill-servers.
    for kind in &kinds {
        assert!(
            ["bad-lease", "unavailable", "starvation"].contains(&kind.as_str()),
            "{kind} under member kills"
        );
    }
    assert_nothing_left(&bed, 3, dir.path());
}

#[test]
fn etcd_lock_over_three_hosts_with_the_leader_cut_off_finds_only_what_a_correct_lock_allows() {
    common::require_etcd();
    let Some(bed) = TestBed::new("etcd-lock member partitions on hosts", 3) else {
        return;
    };
    let dir = common::RunDir::new();
    // Only member partitions: the leader of the moment isolated twice.
    let schedule = dir.path().join("isolate.toml");
    std::fs::write(
        &schedule,
        "[[fault]]\nat = \"1s\"\nkind = \"partition\"\nlink = \"replication\"\nduration = \"3s\"\n\n\
         [[fault]]\nat = \"5s\"\nkind = \"partition\"\nlink = \"replication\"\nduration = \"3s\"\n",
    )
    .unwrap();
    let (history, kinds) = etcd_lock_on_hosts(&bed, dir.path(), schedule.to_str().unwrap());
    let cuts = member_faults(&history, "partition");
    let heals = member_faults(&history, "heal");
    println!("{} member partitions, {} heals", cuts.len(), heals.len());
    assert!(!cuts.is_empty(), "no member partition recorded");
    assert!(
        cuts.iter()
            .all(|c| c.contains("\"leader\":true") && c.contains("\"link\":\"replication\"")),
        "{cuts:?}"
    );
    assert_eq!(cuts.len(), heals.len(), "each partition healed");
    // No client is cut off here, only a member: a holder whose requests went to the
    // isolated one may find its lease gone (`lost-lock`), but the lock must stay exclusive.
    for kind in &kinds {
        assert!(
            ["bad-lease", "lost-lock", "unavailable", "starvation"].contains(&kind.as_str()),
            "{kind} under member partitions"
        );
    }
    for i in 0..3 {
        let rules = bed.exec(i, &["iptables", "-S"]);
        assert!(!rules.contains("lockaudit-run"), "host {i}: {rules}");
    }
    assert_nothing_left(&bed, 3, dir.path());
}

/// The only run folder a cluster made on the hosts (they share this file system).
fn remote_run_dir(dir: &Path) -> std::path::PathBuf {
    let folders: Vec<_> = std::fs::read_dir(dir.join("hosts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(folders.len(), 1, "{folders:?}");
    folders[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_on_three_hosts_elects_survives_a_kill_and_an_isolated_leader_and_leaves_nothing()
{
    common::require_zookeeper();
    let Some(bed) = TestBed::new("zookeeper on hosts", 3) else {
        return;
    };
    let dir = common::RunDir::new();
    let mut cluster =
        start_on_three_hosts(&bed, dir.path(), Topology::Zookeeper, "zk", "java").await;
    let e = cluster.endpoints();
    let password = e.password.clone().unwrap();
    let servers: Vec<(String, String, u16)> = e
        .nodes
        .iter()
        .map(|n| (n.name.clone(), n.host.clone(), n.port))
        .collect();
    // Ready means every server serves, one of them as leader.
    let roles = zookeeper::roles(&servers).await;
    assert_eq!(roles.len(), 3, "{roles:?}");
    assert_eq!(
        roles.iter().filter(|(_, leads)| *leads).count(),
        1,
        "{roles:?}"
    );

    // Each server's config, data and log in the run's folder on its host, the login
    // user's alone; the password in none of them, nor on a JVM's command line.
    let run = remote_run_dir(dir.path());
    assert_eq!(common::mode(&run), 0o700);
    for (i, node) in e.nodes.iter().enumerate() {
        let conf = run.join(format!("zk-{i}.cfg"));
        assert_eq!(common::mode(&conf), 0o600);
        let text = std::fs::read_to_string(&conf).unwrap();
        for line in [
            format!("clientPortAddress={}\n", node.host),
            "tickTime=200\n".into(),
            format!("server.{}={}:", i + 1, node.host),
        ] {
            assert!(text.contains(&line), "{line} not in {text}");
        }
        assert!(
            !text.contains(&password),
            "the password in {}",
            conf.display()
        );
        let data = run.join(format!("zk-{i}"));
        assert_eq!(common::mode(&data), 0o700);
        let myid = std::fs::read_to_string(data.join("myid")).unwrap();
        assert_eq!(myid, format!("{}\n", i + 1));
        assert!(data.join("version-2").is_dir());
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", node.pid.unwrap())).unwrap();
        let cmdline = String::from_utf8_lossy(&cmdline);
        assert!(cmdline.contains("QuorumPeerMain"), "{cmdline}");
        assert!(
            !cmdline.contains(&password),
            "the password on a command line"
        );
    }
    // The run's digest user alone has the root znode, as locally.
    let connect = zookeeper::connect_string(e.nodes.iter().map(|n| (n.host.as_str(), n.port)));
    let stranger = zookeeper_client::Client::connector()
        .connect(&connect)
        .await
        .unwrap();
    assert_eq!(
        stranger.list_children("/").await.map(drop),
        Err(zookeeper_client::Error::NoAuth)
    );
    let run_user = zookeeper_client::Client::connector()
        .with_auth("digest", zookeeper::digest(&password).as_bytes())
        .connect(&connect)
        .await
        .unwrap();
    run_user
        .list_children("/")
        .await
        .expect("the run's user lists the root");

    // A server killed on its host comes back on its data; one restarted empty (only its
    // myid kept) rejoins too, the leader sending it a snapshot.
    cluster.kill("zk-1").unwrap();
    assert!(cluster.pid("zk-1").is_none());
    let restarted = Instant::now();
    cluster.restart("zk-1").await.expect("rejoins on its data");
    println!("zk-1 restarted on its host in {:?}", restarted.elapsed());
    cluster.restart_empty("zk-2").await.expect("rejoins empty");
    for name in ["zk-1", "zk-2"] {
        let node = cluster
            .endpoints()
            .nodes
            .into_iter()
            .find(|n| n.name == name)
            .unwrap();
        assert!(
            zookeeper::mode_at(&node.host, node.port).await.is_ok(),
            "{name} serves"
        );
    }

    // The leader cut off from the others with iptables on the hosts, both ways: the other
    // two elect one of their own, the old one serves nothing, and rejoins once healed.
    let (old, others, pairs) = isolate_the_leader(&mut cluster).await;
    let old_node = e.node(&old).unwrap().clone();
    let rules = bed.exec(
        e.nodes.iter().position(|n| n.name == old).unwrap(),
        &["iptables", "-S"],
    );
    assert!(
        rules.contains("--dports"),
        "quorum and election ports: {rules}"
    );
    let isolated = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(30);
    let new = loop {
        if let Some(new) = zookeeper::leader(&others).await {
            break new;
        }
        assert!(Instant::now() < deadline, "the other two elect no leader");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    println!("{new} leads {:?} after the cut", isolated.elapsed());
    assert_ne!(new, old);
    until(
        Duration::from_secs(30),
        "the isolated leader stops serving",
        || async {
            zookeeper::mode_at(&old_node.host, old_node.port)
                .await
                .is_err()
        },
    )
    .await;
    assert!(cluster.heal_links(&pairs).iter().all(|&healed| healed));
    until(
        Duration::from_secs(30),
        "the old leader rejoins as a follower",
        || async {
            zookeeper::mode_at(&old_node.host, old_node.port).await == Ok(zookeeper::Mode::Follower)
        },
    )
    .await;

    let logs = cluster.root().to_path_buf();
    cluster.shutdown().await;
    for i in 0..3 {
        let log = std::fs::read_to_string(logs.join(format!("zk-{i}.log"))).unwrap_or_default();
        assert!(
            log.contains("QuorumPeer"),
            "zk-{i}'s log not fetched: {log}"
        );
    }
    assert_nothing_left(&bed, 3, dir.path());
}

/// zk-lock, fenced, over three hosts under failovers: the leader of the moment, found by
/// asking the servers at their hosts' addresses, killed there and restarted on its data,
/// twice. The clients follow the ensemble to the new leader, and the checker finds only
/// what workloads/zk-lock.toml's [expect] allows under a failover.
#[test]
fn zk_lock_over_three_hosts_with_the_leader_killed_finds_only_what_a_correct_lock_allows() {
    common::require_zookeeper();
    let Some(bed) = TestBed::new("zk-lock failover on hosts", 3) else {
        return;
    };
    let dir = common::RunDir::new();
    // The failover preset's faults, sooner than its 4-6 s apart: a 6 s run instead of 10.
    let schedule = dir.path().join("kill-leader.toml");
    std::fs::write(
        &schedule,
        "[[fault]]\nat = \"1s\"\nkind = \"failover\"\nduration = \"1s\"\n\n\
         [[fault]]\nat = \"3500ms\"\nkind = \"failover\"\nduration = \"1s\"\n",
    )
    .unwrap();
    let nemesis = schedule.to_str().unwrap();
    let args = ["--algorithm", "zk-lock", "--fenced", "--nemesis", nemesis];
    let (history, kinds) = run_on_three_hosts(&bed, dir.path(), &args, "6s");
    assert!(
        history.contains("\"f\":\"acquire\"") && history.contains("\"type\":\"ok\""),
        "no acquisition recorded"
    );
    let kills = server_faults(&history, "kill", "zk-");
    let restarts = server_faults(&history, "restart", "zk-");
    println!(
        "{} leaders killed, {} restarted",
        kills.len(),
        restarts.len()
    );
    assert!(!kills.is_empty(), "no leader killed");
    assert!(
        kills.iter().all(|k| k.contains("\"leader\":true")),
        "{kills:?}"
    );
    assert_eq!(kills.len(), restarts.len(), "each killed leader restarted");
    let workload = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/zk-lock.toml");
    let spec = lockaudit::workload::WorkloadSpec::from_file(&workload).unwrap();
    let allowed = &spec.expect["failover"];
    for kind in &kinds {
        let kind: lockaudit::report::AnomalyKind = kind.parse().unwrap();
        assert!(
            allowed.must.contains(&kind) || allowed.may.contains(&kind),
            "{kind} is not expected of zk-lock under failover"
        );
    }
    assert_nothing_left(&bed, 3, dir.path());
}

/// A host whose `java` and `zookeeper_jar` (its own settings in the hosts file) point
/// nowhere is named before any server starts anywhere: exit 3, the host, both programs and
/// what to install in the message, no report, nothing left on any host.
#[test]
fn a_host_without_java_or_zookeeper_s_jar_is_named_and_nothing_is_left() {
    common::require_zookeeper();
    let Some(bed) = TestBed::new("a host without ZooKeeper", 3) else {
        return;
    };
    let _one = RUNS.lock().unwrap_or_else(|p| p.into_inner());
    let dir = common::RunDir::new();
    let inventory = dir.path().join("hosts.toml");
    std::fs::write(
        &inventory,
        format!(
            "ssh_key = '{key}'\nremote_dir = '{remote}'\naccept_new_host_keys = true\nnodes = [\n  \
             '{}',\n  {{ url = '{}', java = '/nonexistent/java', zookeeper_jar = '/nonexistent/zookeeper.jar' }},\n  \
             '{}',\n]\n",
            bed.url(0),
            bed.url(1),
            bed.url(2),
            key = bed.key.display(),
            remote = dir.path().join("hosts").display(),
        ),
    )
    .unwrap();
    let out = dir.path().join("run");
    let output = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .args(["run", "--seed", "1", "--algorithm", "zk-lock", "--hosts"])
        .arg(&inventory)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("lockaudit run");
    common::assert_exit(&output, 3);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stderr}");
    for said in [
        bed.url(1).as_str(),
        "/nonexistent/java",
        "/nonexistent/zookeeper.jar",
        "apt-get install zookeeper",
    ] {
        assert!(stderr.contains(said), "`{said}` not said: {stderr}");
    }
    for fine in [0, 2] {
        assert!(!stderr.contains(&bed.url(fine)), "{stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!out.join("report.json").exists());
    assert_nothing_left(&bed, 3, dir.path());
}
