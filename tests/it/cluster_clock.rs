//! Fake server clocks (libfaketime) and restarts with or without data, against real
//! redis-server processes. Needs Debian's `faketime` package, as CI installs it.
//!
//! Every test starts its own servers on free ports in its own temporary folder. Clock
//! checks bracket a server's `TIME` between two readings of the system clock, so they hold
//! however slow the machine is.

use crate::common::eventually;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lockaudit::cluster::{self, Cluster, ClusterError, ClusterSpec, Endpoints, Topology};
use lockaudit::fake_clock::{FakeClockError, LIBFAKETIME_ENV};
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;

/// Selects the child side of `missing_or_unloadable_libfaketime_fails_the_start`.
const CHILD_ENV: &str = "LOCKAUDIT_CLOCK_TEST_CHILD";

/// How far a server's clock may be from the bracket of system-clock readings around its
/// `TIME` (the server truncates to microseconds, the file holds milliseconds).
const SLACK_MS: i64 = 5;

fn fake_spec(topology: Topology, dir: &Path) -> ClusterSpec {
    let mut spec = ClusterSpec::new(topology, dir);
    spec.fake_clocks = true;
    spec
}

/// A connection with generous timeouts: the tests run in parallel on two cores.
async fn connect(cluster: &Cluster, name: &str) -> MultiplexedConnection {
    let e: Endpoints = cluster.endpoints();
    let node = e.node(name).expect("a node of the cluster");
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(5)));
    redis::Client::open(e.url(node))
        .expect("a valid url")
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("connect with the password")
}

fn system_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The range the server's clock minus the system clock lies in.
async fn skew_ms(conn: &mut MultiplexedConnection) -> (i64, i64) {
    let before = system_ms();
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    let after = system_ms();
    let server = secs * 1000 + micros / 1000;
    (server - after, server - before)
}

async fn assert_skew(conn: &mut MultiplexedConnection, expected_ms: i64, what: &str) {
    let (low, high) = skew_ms(conn).await;
    assert!(
        low - SLACK_MS <= expected_ms && expected_ms <= high + SLACK_MS,
        "{what}: clock {low}..={high} ms from the system clock, expected {expected_ms}"
    );
}

fn maps_libfaketime(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap()
        .contains("libfaketime")
}

#[tokio::test]
async fn time_moves_by_the_offset_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster::start(&fake_spec(Topology::Single, dir.path()))
        .await
        .unwrap();
    assert!(maps_libfaketime(cluster.pid("master-0").unwrap()));
    assert!(
        !maps_libfaketime(cluster.pid("storage").unwrap()),
        "storage keeps the real clock"
    );
    let mut master = connect(&cluster, "master-0").await;
    let mut storage = connect(&cluster, "storage").await;
    assert_eq!(cluster.clock_offset_ms("master-0"), Some(0));
    assert_skew(&mut master, 0, "at start").await;

    // No polling: the server reads the file at every time call.
    cluster.set_clock_offset("master-0", 20_000).unwrap();
    assert_eq!(cluster.clock_offset_ms("master-0"), Some(20_000));
    assert_skew(&mut master, 20_000, "after +20 s").await;
    assert_skew(&mut storage, 0, "storage after +20 s").await;

    // Milliseconds and negative offsets are exact.
    for offset in [-1_500, 250, -300_000] {
        cluster.set_clock_offset("master-0", offset).unwrap();
        assert_skew(&mut master, offset, &format!("after {offset} ms")).await;
    }

    cluster.set_clock_offset("master-0", 0).unwrap();
    assert_skew(&mut master, 0, "healed").await;
    let pong: String = redis::cmd("PING").query_async(&mut master).await.unwrap();
    assert_eq!(pong, "PONG");
}

#[tokio::test]
async fn key_expiry_follows_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster::start(&fake_spec(Topology::Single, dir.path()))
        .await
        .unwrap();
    let mut conn = connect(&cluster, "master-0").await;

    // Forward: keys with 10 s to live are due at once.
    let () = redis::cmd("SET")
        .arg("read")
        .arg("v")
        .arg("PX")
        .arg(10_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    let () = redis::cmd("SET")
        .arg("untouched")
        .arg("v")
        .arg("PX")
        .arg(10_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    cluster.set_clock_offset("master-0", 20_000).unwrap();
    let value: Option<String> = conn.get("read").await.unwrap();
    assert_eq!(value, None, "expired on access right after +20 s");
    // DBSIZE expires nothing itself: only Redis's active expiry removes the untouched key.
    eventually(
        Duration::from_secs(2),
        "active expiry of an untouched key",
        || {
            let mut conn = conn.clone();
            async move {
                let size: u64 = redis::cmd("DBSIZE").query_async(&mut conn).await.unwrap();
                size == 0
            }
        },
    )
    .await;

    // Back: a key set with 2 s to live outlasts 3 s of real time.
    cluster.set_clock_offset("master-0", 0).unwrap();
    let () = redis::cmd("SET")
        .arg("lease")
        .arg("v")
        .arg("PX")
        .arg(2_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    let set_at = Instant::now();
    cluster.set_clock_offset("master-0", -300_000).unwrap();
    let pttl: i64 = conn.pttl("lease").await.unwrap();
    assert!(pttl > 300_000 - 1_000, "PTTL {pttl} after -300 s");
    tokio::time::sleep_until((set_at + Duration::from_secs(3)).into()).await;
    let value: Option<String> = conn.get("lease").await.unwrap();
    assert_eq!(
        value.as_deref(),
        Some("v"),
        "3 s after a PX 2000 SET, at -300 s"
    );

    // Healed: the lease is 1 s overdue.
    cluster.set_clock_offset("master-0", 0).unwrap();
    let value: Option<String> = conn.get("lease").await.unwrap();
    assert_eq!(value, None, "expired once healed");
}

/// A jump back moves the wall clock only: Redis runs its timers on the monotonic clock,
/// which libfaketime would also move by default, stopping `serverCron` for as long as the
/// jump. Here the cron keeps running and replication keeps working, during and after.
#[tokio::test]
async fn a_jump_back_stops_neither_timers_nor_replication() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster::start(&fake_spec(Topology::Replicated, dir.path()))
        .await
        .unwrap();
    let names: Vec<String> = cluster
        .endpoints()
        .nodes
        .into_iter()
        .map(|n| n.name)
        .collect();
    assert_eq!(names, ["master-0", "replica-1", "replica-2"]);
    let mut conns = Vec::new();
    for name in &names {
        conns.push(connect(&cluster, name).await);
    }
    let mut lru_before = Vec::new();
    for conn in &mut conns {
        lru_before.push(lru_clock(conn).await);
    }
    for name in &names {
        cluster.set_clock_offset(name, -300_000).unwrap();
    }
    for (conn, name) in conns.iter_mut().zip(&names) {
        assert_skew(conn, -300_000, name).await;
    }

    // `lru_clock` (seconds, 24 bits) is set by serverCron only: it follows the jump back
    // within a cron period (100 ms) if, and only if, the cron still runs.
    for ((conn, before), name) in conns.iter().zip(lru_before).zip(&names) {
        eventually(Duration::from_secs(2), &format!("{name}'s cron"), || {
            let mut conn = conn.clone();
            async move {
                let back = before.wrapping_sub(lru_clock(&mut conn).await) & 0xFF_FFFF;
                (280..=310).contains(&back)
            }
        })
        .await;
    }

    assert_replicated(&conns, "during the jump", Duration::from_secs(2)).await;
    let acked: i64 = redis::cmd("WAIT")
        .arg(2)
        .arg(2_000)
        .query_async(&mut conns[0].clone())
        .await
        .unwrap();
    assert_eq!(acked, 2, "both replicas acknowledge during the jump");

    // Healing is a jump forward of 300 s: a replica may take the silence for a master
    // timeout and reconnect, which its cron does within a second or two.
    for name in &names {
        cluster.set_clock_offset(name, 0).unwrap();
    }
    assert_replicated(&conns, "after healing", Duration::from_secs(10)).await;
    for conn in &mut conns {
        let pong: String = redis::cmd("PING").query_async(conn).await.unwrap();
        assert_eq!(pong, "PONG");
    }
}

async fn lru_clock(conn: &mut MultiplexedConnection) -> u32 {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("lru_clock:"))
        .expect("INFO server has lru_clock")
        .trim()
        .parse()
        .unwrap()
}

/// Writes a fresh value on the primary (`conns[0]`) and polls until every replica has it.
async fn assert_replicated(conns: &[MultiplexedConnection], what: &str, within: Duration) {
    let value = format!("{what} {}", system_ms());
    let () = conns[0].clone().set("probe", &value).await.unwrap();
    for (i, conn) in conns.iter().enumerate().skip(1) {
        eventually(
            within,
            &format!("replica {i} copies a write {what}"),
            || {
                let mut conn = conn.clone();
                let value = value.clone();
                async move {
                    let got: Option<String> = conn.get("probe").await.unwrap_or(None);
                    got == Some(value)
                }
            },
        )
        .await;
    }
}

#[tokio::test]
async fn a_restart_keeps_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = fake_spec(Topology::Single, dir.path());
    spec.persistence = true;
    let mut cluster = cluster::start(&spec).await.unwrap();
    cluster.set_clock_offset("master-0", 20_000).unwrap();

    cluster.kill("master-0").unwrap();
    cluster.restart("master-0").await.unwrap();
    assert!(maps_libfaketime(cluster.pid("master-0").unwrap()));
    let mut conn = connect(&cluster, "master-0").await;
    assert_skew(&mut conn, 20_000, "after restart").await;

    // Emptying the data folder leaves the clock alone (its file lives beside it).
    cluster.restart_empty("master-0").await.unwrap();
    let mut conn = connect(&cluster, "master-0").await;
    assert_skew(&mut conn, 20_000, "after restart_empty").await;
    assert_eq!(cluster.clock_offset_ms("master-0"), Some(20_000));

    // Set while down, applied at the restart.
    cluster.kill("master-0").unwrap();
    cluster.set_clock_offset("master-0", -7_000).unwrap();
    cluster.restart("master-0").await.unwrap();
    let mut conn = connect(&cluster, "master-0").await;
    assert_skew(&mut conn, -7_000, "set while down").await;
}

#[tokio::test]
async fn clock_errors_name_the_node_and_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = cluster::start(&fake_spec(Topology::Sentinel, dir.path()))
        .await
        .unwrap();
    for name in ["master-0", "replica-1", "replica-2"] {
        assert_eq!(cluster.clock_offset_ms(name), Some(0), "{name}");
    }
    for name in ["storage", "sentinel-0"] {
        assert_eq!(cluster.clock_offset_ms(name), None, "{name}");
        let err = cluster.set_clock_offset(name, 1_000).unwrap_err();
        assert!(matches!(err, ClusterError::Unsupported { .. }), "{err:?}");
        assert!(err.to_string().contains(name), "{err}");
        assert_eq!(err.exit_code(), 2);
    }
    assert!(!maps_libfaketime(cluster.pid("sentinel-0").unwrap()));
    let err = cluster.set_clock_offset("nobody", 1_000).unwrap_err();
    assert!(matches!(err, ClusterError::UnknownNode(_)), "{err:?}");
    assert_eq!(cluster.clock_offset_ms("nobody"), None);

    let err = cluster.restart_empty("sentinel-1").await.unwrap_err();
    assert!(matches!(err, ClusterError::Unsupported { .. }), "{err:?}");
    let err = cluster.restart_empty("nobody").await.unwrap_err();
    assert!(matches!(err, ClusterError::UnknownNode(_)), "{err:?}");

    // Without fake clocks.
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster::start(&ClusterSpec::new(Topology::Single, dir.path()))
        .await
        .unwrap();
    assert!(!maps_libfaketime(cluster.pid("master-0").unwrap()));
    assert_eq!(cluster.clock_offset_ms("master-0"), None);
    let err = cluster.set_clock_offset("master-0", 1_000).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("master-0") && text.contains("without fake clocks"),
        "{text}"
    );
    assert_eq!(err.exit_code(), 2);
}

/// The environment variable is process-wide, so the start runs in a child copy of this
/// test binary (see `libfaketime_child`).
#[test]
fn missing_or_unloadable_libfaketime_fails_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let not_elf = dir.path().join("libfaketime.so.1");
    std::fs::write(&not_elf, "not a shared library").unwrap();
    let cases = [
        ("/nonexistent/libfaketime.so.1".to_string(), "missing"),
        (not_elf.display().to_string(), "unloadable"),
    ];
    for (path, mode) in cases {
        let exe = std::env::current_exe().unwrap();
        let out = Command::new(exe)
            .arg(crate::common::test_name(
                module_path!(),
                "libfaketime_child",
            ))
            .args(["--exact", "--nocapture"])
            .env(CHILD_ENV, mode)
            .env(LIBFAKETIME_ENV, &path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{mode}: {stdout}");
        let text = stdout
            .split_once("START ERROR: ")
            .unwrap_or_else(|| panic!("{mode}: no error printed: {stdout}"))
            .1;
        assert!(text.contains(&path), "{mode}: {text}");
        if mode == "missing" {
            assert!(text.contains("apt-get install faketime"), "{text}");
            assert!(text.contains("EXIT CODE 3"), "{text}");
        } else {
            assert!(text.contains("is not loaded"), "{text}");
            assert!(text.contains("cannot be preloaded"), "ld.so's line: {text}");
        }
    }
}

/// Not a test on its own: the child side of the test above, chosen by CHILD_ENV.
#[tokio::test]
async fn libfaketime_child() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let err = cluster::start(&fake_spec(Topology::Single, dir.path()))
        .await
        .expect_err("no usable libfaketime");
    match mode.as_str() {
        "missing" => assert!(
            matches!(
                &err,
                ClusterError::Clock(FakeClockError::MissingLibrary { package, .. })
                    if package == "faketime"
            ),
            "{err:?}"
        ),
        _ => assert!(matches!(err, ClusterError::StartFailed { .. }), "{err:?}"),
    }
    println!("START ERROR: {err}\nEXIT CODE {}", err.exit_code());
    // Without fake clocks the same environment is ignored.
    let plain = cluster::start(&ClusterSpec::new(Topology::Single, dir.path())).await;
    assert!(plain.is_ok(), "{:?}", plain.err());
}

async fn config_get(conn: &mut MultiplexedConnection, key: &str) -> String {
    let pair: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap();
    pair[1].clone()
}

#[tokio::test]
async fn restart_replays_the_aof_and_restart_empty_drops_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = ClusterSpec::new(Topology::Single, dir.path());
    spec.persistence = true;
    let mut cluster = cluster::start(&spec).await.unwrap();
    let mut conn = connect(&cluster, "master-0").await;
    assert_eq!(config_get(&mut conn, "appendonly").await, "yes");
    assert_eq!(config_get(&mut conn, "appendfsync").await, "everysec");
    assert_eq!(config_get(&mut conn, "save").await, "", "no RDB snapshots");

    // Killed right after the reply: the AOF was written (not fsynced) before it, and the
    // page cache outlives the process.
    let () = conn.set("k", "v").await.unwrap();
    cluster.kill("master-0").unwrap();
    cluster.restart("master-0").await.unwrap();
    let mut conn = connect(&cluster, "master-0").await;
    let value: Option<String> = conn.get("k").await.unwrap();
    assert_eq!(value.as_deref(), Some("v"), "replayed from the AOF");

    cluster.kill("master-0").unwrap();
    cluster.restart_empty("master-0").await.unwrap();
    let mut conn = connect(&cluster, "master-0").await;
    let value: Option<String> = conn.get("k").await.unwrap();
    assert_eq!(value, None, "restart_empty drops the AOF");

    // restart also works on a running node (it kills it first), and keeps its data.
    let () = conn.set("k2", "v2").await.unwrap();
    cluster.restart("master-0").await.unwrap();
    let mut conn = connect(&cluster, "master-0").await;
    let value: Option<String> = conn.get("k2").await.unwrap();
    assert_eq!(value.as_deref(), Some("v2"));
}

#[tokio::test]
async fn without_persistence_not_even_an_rdb_brings_keys_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = cluster::start(&ClusterSpec::new(Topology::Single, dir.path()))
        .await
        .unwrap();
    let mut conn = connect(&cluster, "master-0").await;
    assert_eq!(config_get(&mut conn, "appendonly").await, "no");
    assert_eq!(config_get(&mut conn, "save").await, "");
    let () = conn.set("k", "v").await.unwrap();
    // An RDB like the one a replica keeps from a full sync.
    let () = redis::cmd("SAVE").query_async(&mut conn).await.unwrap();
    let rdb = cluster.data_dir("master-0").unwrap().join("dump.rdb");
    assert!(rdb.is_file());

    cluster.kill("master-0").unwrap();
    cluster.restart("master-0").await.unwrap();
    let mut conn = connect(&cluster, "master-0").await;
    let value: Option<String> = conn.get("k").await.unwrap();
    assert_eq!(
        value, None,
        "a restart without persistence comes back empty"
    );
    assert!(!rdb.exists(), "the old RDB was removed");
}
