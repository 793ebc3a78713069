//! The cluster against real redis-server / redis-sentinel processes.
//!
//! Every test starts its own servers on free ports in its own temporary folder, so the
//! tests run in parallel. Process checks look at `/proc/<pid>/stat` and compare the start
//! time, so a pid reused by another test's server is not mistaken for ours.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lockaudit::cluster::{self, Cluster, ClusterError, ClusterSpec, Endpoints, Node, Topology};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;

/// The env var that turns `helper_process` into a child scenario (see below).
const HELPER_ENV: &str = "LOCKAUDIT_CLUSTER_TEST_HELPER";
/// Where the helper keeps its servers' files (the spawning test's temporary folder).
const HELPER_DIR_ENV: &str = "LOCKAUDIT_CLUSTER_TEST_HELPER_DIR";

fn spec(topology: Topology, dir: &Path) -> ClusterSpec {
    ClusterSpec::new(topology, dir)
}

/// A connection with generous timeouts: the tests run in parallel on two cores, with
/// dozens of servers starting at once.
async fn connect(endpoints: &Endpoints, node: &Node) -> MultiplexedConnection {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(5)));
    redis::Client::open(endpoints.url(node))
        .expect("a valid url")
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("connect with the password")
}

/// The state letter and start time (clock ticks since boot) of a live or zombie process.
fn proc_stat(pid: u32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the `(comm)` field: state is field 3, starttime field 22.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

/// Pids with their start times, to tell them from a later process given the same pid.
fn identities(pids: &[u32]) -> Vec<(u32, u64)> {
    pids.iter()
        .map(|&pid| (pid, proc_stat(pid).expect("a running process").1))
        .collect()
}

/// Whether the process is gone: no such pid, a different process with it, or (when
/// `zombie_ok`) a zombie waiting for PID 1 to reap it.
fn gone(identity: (u32, u64), zombie_ok: bool) -> bool {
    match proc_stat(identity.0) {
        None => true,
        Some((_, start)) if start != identity.1 => true,
        Some((state, _)) => zombie_ok && state == 'Z',
    }
}

fn assert_gone_within(ids: &[(u32, u64)], zombie_ok: bool, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let left: Vec<_> = ids.iter().filter(|&&id| !gone(id, zombie_ok)).collect();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still running after {within:?}: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn all_pids(cluster: &Cluster) -> Vec<u32> {
    cluster
        .names()
        .iter()
        .map(|name| cluster.pid(name).expect("a running node"))
        .collect()
}

#[tokio::test]
async fn single_answers_with_the_password_and_refuses_without() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster::start(&spec(Topology::Single, dir.path()))
        .await
        .unwrap();
    let e = cluster.endpoints();
    assert_eq!(e.topology, Topology::Single);
    assert_eq!(e.nodes.len(), 1);
    assert_eq!(e.nodes[0].name, "master-0");
    assert_eq!(e.storage.name, "storage");
    assert_ne!(e.nodes[0].port, e.storage.port);
    assert!(e.sentinels.is_empty() && e.master_name.is_none());
    let password = e.password.clone().unwrap();
    assert!(password.len() >= 20 && password.chars().all(|c| c.is_ascii_alphanumeric()));

    for node in [&e.nodes[0], &e.storage] {
        assert_eq!(node.host, "127.0.0.1");
        let mut conn = connect(&e, node).await;
        let pong: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
        assert_eq!(pong, "PONG");

        let bare = format!("redis://127.0.0.1:{}/", node.port);
        let mut anonymous = redis::Client::open(bare)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let refused: redis::RedisResult<String> =
            redis::cmd("PING").query_async(&mut anonymous).await;
        let err = refused.expect_err("no password, no PING");
        assert!(err.to_string().contains("NOAUTH"), "{err}");
    }

    // Data and logs live in the run folder.
    let data = cluster.data_dir("master-0").unwrap();
    assert_eq!(
        data,
        dir.path().canonicalize().unwrap().join("redis/master-0")
    );
    assert!(data.is_dir());
    let log = std::fs::read_to_string(cluster.log_path("master-0").unwrap()).unwrap();
    assert!(log.contains("Ready to accept connections"), "{log}");
    assert_eq!(e.nodes[0].pid, cluster.pid("master-0"));
}

#[tokio::test]
async fn replicated_replicas_copy_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster::start(&spec(Topology::Replicated, dir.path()))
        .await
        .unwrap();
    let e = cluster.endpoints();
    let names: Vec<&str> = e.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["master-0", "replica-1", "replica-2"]);

    let mut primary = connect(&e, &e.nodes[0]).await;
    let role: String = redis::cmd("ROLE")
        .query_async::<Vec<redis::Value>>(&mut primary)
        .await
        .map(|v| format!("{v:?}"))
        .unwrap();
    assert!(role.contains("master"), "{role}");
    let () = primary.set("k", "v").await.unwrap();
    // WAIT 2 replicas: the write reached both before we look.
    let acked: i64 = redis::cmd("WAIT")
        .arg(2)
        .arg(4000)
        .query_async(&mut primary)
        .await
        .unwrap();
    assert_eq!(acked, 2);
    for replica in &e.nodes[1..] {
        let mut conn = connect(&e, replica).await;
        let value: Option<String> = conn.get("k").await.unwrap();
        assert_eq!(value.as_deref(), Some("v"), "{}", replica.name);
        let refused: redis::RedisResult<()> = conn.set("k", "w").await;
        assert!(refused.is_err(), "replicas are read-only");
    }
}

#[tokio::test]
async fn sentinels_know_the_master_its_replicas_and_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster::start(&spec(Topology::Sentinel, dir.path()))
        .await
        .unwrap();
    let e = cluster.endpoints();
    assert_eq!(e.master_name.as_deref(), Some("lockaudit"));
    assert_eq!(e.nodes.len(), 3);
    assert_eq!(e.sentinels.len(), 3);
    for sentinel in &e.sentinels {
        let mut conn = connect(&e, sentinel).await;
        let (host, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg("lockaudit")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!((host.as_str(), port), ("127.0.0.1", e.nodes[0].port));
        let master: std::collections::HashMap<String, String> = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg("lockaudit")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(master["num-slaves"], "2");
        assert_eq!(master["num-other-sentinels"], "2");
        assert_eq!(master["quorum"], "2");
        assert_eq!(master["down-after-milliseconds"], "1000");
        assert_eq!(master["failover-timeout"], "3000");
        // Each sentinel rewrites its own file.
        let config = cluster
            .data_dir(&sentinel.name)
            .unwrap()
            .join("sentinel.conf");
        let text = std::fs::read_to_string(config).unwrap();
        assert!(text.contains("Generated by CONFIG REWRITE"), "{text}");
    }
    let anonymous = redis::Client::open(format!("redis://127.0.0.1:{}/", e.sentinels[0].port))
        .unwrap()
        .get_multiplexed_async_connection()
        .await;
    if let Ok(mut conn) = anonymous {
        let refused: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut conn).await;
        assert!(refused.is_err(), "sentinels also require the password");
    }
}

#[tokio::test]
async fn independent_starts_five_separate_masters() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster::start(&spec(Topology::Independent, dir.path()))
        .await
        .unwrap();
    let e = cluster.endpoints();
    let names: Vec<&str> = e.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(
        names,
        ["master-0", "master-1", "master-2", "master-3", "master-4"]
    );
    let mut ports: Vec<u16> = e.nodes.iter().map(|n| n.port).collect();
    ports.push(e.storage.port);
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 6, "six servers, six ports");
    for (i, node) in e.nodes.iter().enumerate() {
        let mut conn = connect(&e, node).await;
        let () = conn.set("who", i).await.unwrap();
    }
    // Independent: each kept its own value.
    for (i, node) in e.nodes.iter().enumerate() {
        let mut conn = connect(&e, node).await;
        let who: usize = conn.get("who").await.unwrap();
        assert_eq!(who, i);
        let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut conn).await.unwrap();
        assert!(format!("{role:?}").contains("master"));
    }
}

#[tokio::test]
async fn shutdown_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster::start(&spec(Topology::Sentinel, dir.path()))
        .await
        .unwrap();
    let ids = identities(&all_pids(&cluster));
    assert_eq!(ids.len(), 7, "3 servers, storage, 3 sentinels");
    let began = Instant::now();
    let exits = cluster.shutdown().await;
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(exits.len(), 7);
    for (name, exit) in &exits {
        assert_eq!(
            *exit,
            cluster::Exit::Code(0),
            "{name} stopped cleanly on SIGTERM"
        );
    }
    assert_gone_within(&ids, false, Duration::ZERO);
}

#[tokio::test]
async fn drop_kills_everything_even_a_paused_node() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster::start(&spec(Topology::Replicated, dir.path()))
        .await
        .unwrap();
    let pids = all_pids(&cluster);
    let ids = identities(&pids);
    let registered = cluster::registered_pids();
    assert!(pids.iter().all(|pid| registered.contains(pid)));
    cluster.signal("replica-1", Signal::SIGSTOP).unwrap();
    drop(cluster);
    assert_gone_within(&ids, false, Duration::ZERO);
    let registered = cluster::registered_pids();
    assert!(
        pids.iter().all(|pid| !registered.contains(pid)),
        "reaped and forgotten"
    );
}

#[tokio::test]
async fn a_missing_binary_names_the_package() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = spec(Topology::Single, dir.path());
    spec.redis_server = Some("/nonexistent/redis-server".into());
    let err = cluster::start(&spec).await.unwrap_err();
    assert!(
        matches!(&err, ClusterError::MissingBinary { binary, package, .. }
            if binary == "redis-server" && package == "redis-server"),
        "{err:?}"
    );
    assert_eq!(err.exit_code(), 3);
    let text = err.to_string();
    assert!(text.contains("apt-get install redis-server"), "{text}");
    assert!(text.contains("--redis-server PATH"), "{text}");

    let mut spec = ClusterSpec::new(Topology::Sentinel, dir.path());
    spec.redis_sentinel = Some("/nonexistent/redis-sentinel".into());
    let err = cluster::start(&spec).await.unwrap_err();
    assert!(
        err.to_string().contains("apt-get install redis-sentinel"),
        "{err}"
    );
}

#[tokio::test]
async fn a_taken_fixed_port_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let mut spec = spec(Topology::Single, dir.path());
    spec.base_port = Some(port);
    let err = cluster::start(&spec).await.unwrap_err();
    assert!(
        matches!(&err, ClusterError::PortInUse { node, port: p } if node == "master-0" && *p == port),
        "{err:?}"
    );
    assert!(err.to_string().contains(&port.to_string()));
    assert_eq!(err.exit_code(), 3);
    drop(taken);
}

#[tokio::test]
async fn a_server_that_cannot_start_quotes_its_log() {
    let dir = tempfile::tempdir().unwrap();
    // A "redis-server" that rejects its arguments, as a wrong binary would.
    let fake = dir.path().join("redis-server");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'FATAL CONFIG FILE ERROR: bad directive' >&2\nexit 1\n",
    )
    .unwrap();
    let executable = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&fake, executable).unwrap();
    let mut spec = spec(Topology::Single, dir.path());
    spec.redis_server = Some(fake);
    let err = cluster::start(&spec).await.unwrap_err();
    assert!(matches!(err, ClusterError::StartFailed { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("FATAL CONFIG FILE ERROR"), "{text}");
    assert!(text.contains("exit code 1"), "{text}");
}

#[tokio::test]
async fn a_node_killed_and_restarted_comes_back_empty_without_persistence() {
    for persistence in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = spec(Topology::Single, dir.path());
        spec.persistence = persistence;
        let mut cluster = cluster::start(&spec).await.unwrap();
        let e = cluster.endpoints();
        let mut conn = connect(&e, &e.nodes[0]).await;
        let () = conn.set("k", "v").await.unwrap();
        let old = cluster.pid("master-0").unwrap();
        let exit = cluster.kill("master-0").unwrap();
        assert_eq!(exit, cluster::Exit::Signal(Signal::SIGKILL));
        assert_eq!(cluster.pid("master-0"), None);
        cluster.restart("master-0").await.unwrap();
        assert_ne!(cluster.pid("master-0"), Some(old));
        assert_eq!(cluster.port("master-0"), Some(e.nodes[0].port), "same port");
        let mut conn = connect(&e, &e.nodes[0]).await;
        let value: Option<String> = conn.get("k").await.unwrap();
        let expected = persistence.then_some("v");
        assert_eq!(value.as_deref(), expected, "persistence {persistence}");
    }
}

#[tokio::test]
async fn a_paused_node_does_not_answer_until_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster::start(&spec(Topology::Single, dir.path()))
        .await
        .unwrap();
    let e = cluster.endpoints();
    let mut conn = connect(&e, &e.nodes[0]).await;
    cluster.signal("master-0", Signal::SIGSTOP).unwrap();
    let ping_cmd = redis::cmd("PING");
    let ping = ping_cmd.query_async::<String>(&mut conn);
    assert!(
        tokio::time::timeout(Duration::from_millis(200), ping)
            .await
            .is_err(),
        "a stopped server cannot answer"
    );
    cluster.signal("master-0", Signal::SIGCONT).unwrap();
    let pong: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
    assert_eq!(pong, "PONG");
    assert!(matches!(
        cluster.signal("nobody", Signal::SIGSTOP),
        Err(ClusterError::UnknownNode(_))
    ));
}

/// Runs `helper_process` in a child copy of this test binary in `mode`, its servers' files
/// in `dir`, returning the child and the pids of the servers it started (read from its
/// stdout). Every caller waits for the child (the lint cannot see through the return).
/// `dir` belongs to the caller: a child ended by a signal cannot remove a folder of its own.
#[allow(clippy::zombie_processes)]
fn spawn_helper(
    mode: &str,
    dir: &std::path::Path,
) -> (
    std::process::Child,
    BufReader<std::process::ChildStdout>,
    Vec<u32>,
) {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args([
            &crate::common::test_name(module_path!(), "helper_process"),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER_ENV, mode)
        .env(HELPER_DIR_ENV, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line).unwrap_or(0) == 0 {
            let status = child.wait();
            panic!("the helper ended before starting its cluster: {status:?}");
        }
        // With one test thread the harness prints "test cluster::helper_process ... " first.
        if let Some((_, pids)) = line.trim().split_once("PIDS ") {
            let pids = pids.split(' ').map(|p| p.parse().unwrap()).collect();
            return (child, out, pids);
        }
    }
}

/// Not a test on its own: the child side of the three tests below, chosen by HELPER_ENV.
#[tokio::test]
async fn helper_process() {
    let Ok(mode) = std::env::var(HELPER_ENV) else {
        return;
    };
    if mode != "sigkill" {
        cluster::install_cleanup_handlers();
    }
    let dir = std::path::PathBuf::from(std::env::var_os(HELPER_DIR_ENV).unwrap());
    let cluster = cluster::start(&spec(Topology::Replicated, &dir))
        .await
        .unwrap();
    let pids = all_pids(&cluster);
    let text: Vec<String> = pids.iter().map(u32::to_string).collect();
    println!("PIDS {}", text.join(" "));
    if mode == "panic" {
        // No Drop will run for a forgotten cluster: only the panic hook can end them.
        let ids = identities(&pids);
        std::mem::forget(cluster);
        let caught = std::panic::catch_unwind(|| panic!("deliberate panic"));
        assert!(caught.is_err());
        let alive = ids.iter().filter(|&&id| !gone(id, false)).count();
        println!("ALIVE AFTER PANIC {alive}");
        return;
    }
    tokio::time::sleep(Duration::from_secs(30)).await;
}

#[test]
fn the_panic_hook_kills_the_children() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, mut out, pids) = spawn_helper("panic", dir.path());
    let ids = identities(&pids);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    assert!(rest.contains("ALIVE AFTER PANIC 0"), "{rest}");
    assert_gone_within(&ids, false, Duration::ZERO);
}

#[test]
fn ctrl_c_kills_the_children_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, _out, pids) = spawn_helper("sigint", dir.path());
    let ids = identities(&pids);
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    // Reaped by the handler before it exited: not even zombies.
    assert_gone_within(&ids, false, Duration::ZERO);
}

#[test]
fn children_die_when_lockaudit_is_sigkilled() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, _out, pids) = spawn_helper("sigkill", dir.path());
    let ids = identities(&pids);
    child.kill().unwrap();
    child.wait().unwrap();
    // PR_SET_PDEATHSIG: the kernel kills them; PID 1 reaps the orphans when it gets to it.
    assert_gone_within(&ids, true, Duration::from_secs(2));
}

/// A measurement, not a test: `cargo test --release --test it
/// cluster::start_to_ready_times -- --ignored --nocapture`.
#[tokio::test]
#[ignore]
async fn start_to_ready_times() {
    for topology in [
        Topology::Single,
        Topology::Replicated,
        Topology::Sentinel,
        Topology::Independent,
    ] {
        let mut ready = Vec::new();
        let mut first_lock = Vec::new();
        let mut stop = Vec::new();
        for _ in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let began = Instant::now();
            let cluster = cluster::start(&spec(topology, dir.path())).await.unwrap();
            ready.push(began.elapsed());
            // A first acquisition: SET NX PX on every lock node (RedLock's quorum needs 3
            // of 5; all of them is the upper bound).
            let e = cluster.endpoints();
            for node in &e.nodes {
                let mut conn = connect(&e, node).await;
                let ok: Option<String> = redis::cmd("SET")
                    .arg("lock")
                    .arg("me")
                    .arg("NX")
                    .arg("PX")
                    .arg(10_000)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                assert_eq!(ok.as_deref(), Some("OK"));
                if topology != Topology::Independent {
                    break;
                }
            }
            first_lock.push(began.elapsed());
            let stopping = Instant::now();
            cluster.shutdown().await;
            stop.push(stopping.elapsed());
        }
        let median = |v: &mut Vec<Duration>| {
            v.sort();
            v[v.len() / 2]
        };
        println!(
            "{topology:?}: start-to-ready median {:?} (all {:?}); to first lock {:?}; shutdown {:?}",
            median(&mut ready.clone()),
            ready,
            median(&mut first_lock),
            median(&mut stop),
        );
    }
}

/// The primary the sentinel names, as a node name of `e`.
async fn primary_by(sentinel: &mut MultiplexedConnection, e: &Endpoints) -> Option<String> {
    let (_, port): (String, u16) = redis::cmd("SENTINEL")
        .arg("GET-MASTER-ADDR-BY-NAME")
        .arg("lockaudit")
        .query_async(sentinel)
        .await
        .ok()?;
    e.nodes
        .iter()
        .find(|n| n.port == port)
        .map(|n| n.name.clone())
}

/// The seeded sentinels (ids and peers written by lockaudit) really elect a leader and
/// promote a replica: `SENTINEL FAILOVER` by hand, as a nemesis would.
#[tokio::test]
async fn sentinels_fail_over_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster::start(&spec(Topology::Sentinel, dir.path()))
        .await
        .unwrap();
    let e = cluster.endpoints();
    let mut sentinel = connect(&e, &e.sentinels[0]).await;
    let () = redis::cmd("SENTINEL")
        .arg("FAILOVER")
        .arg("lockaudit")
        .query_async(&mut sentinel)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let primary = primary_by(&mut sentinel, &e).await;
        if primary
            .as_deref()
            .is_some_and(|p| p.starts_with("replica-"))
        {
            break;
        }
        assert!(Instant::now() < deadline, "no failover: {primary:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A measurement of what the nemesis will rely on: SIGSTOP of the primary until the
/// sentinels agree on a new one. `cargo test --test it
/// cluster::sentinels_fail_over_a_paused_primary -- --ignored --nocapture`.
#[tokio::test]
#[ignore]
async fn sentinels_fail_over_a_paused_primary() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster::start(&spec(Topology::Sentinel, dir.path()))
        .await
        .unwrap();
    let e = cluster.endpoints();
    let mut sentinels = Vec::new();
    for s in &e.sentinels {
        sentinels.push(connect(&e, s).await);
    }
    let paused = Instant::now();
    cluster.signal("master-0", Signal::SIGSTOP).unwrap();
    loop {
        let mut named = Vec::new();
        for s in &mut sentinels {
            named.push(primary_by(s, &e).await);
        }
        if named
            .iter()
            .all(|p| p.as_deref().is_some_and(|p| p.starts_with("replica-")) && *p == named[0])
        {
            println!("new primary {:?} after {:?}", named[0], paused.elapsed());
            break;
        }
        assert!(paused.elapsed() < Duration::from_secs(15), "{named:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
