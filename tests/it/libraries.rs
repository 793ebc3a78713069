//! The ready adapters of examples/adapters/, over real lock libraries (python-redis-lock,
//! pottery's Redlock, python-etcd3, kazoo, node-redlock, etcd's Go client, the npm etcd3
//! client, Apache Curator), against real servers that lockaudit starts: each
//! passes `adapter-test` on its workload's topology, and a short audit of all of them meets
//! every workload's `[expect]` table under the presets that tell them apart (kazoo, etcd's Go
//! client, the npm etcd3 client and Curator under two of them, for time). The libraries
//! must be installed (`bash .ci/run` does); without them these tests fail, saying what to
//! install.

use crate::common;
use crate::common::root;
use common::{
    require_etcd, require_go_etcd, require_node_etcd3, require_node_redlock, require_python,
    require_zookeeper,
};

use std::path::Path;
use std::process::Command;

/// The Python workloads: python-redis-lock without expiry and with auto-renewal, pottery
/// on one master and on five, python-etcd3 on lockaudit's etcd cluster.
const PYTHON: [&str; 5] = [
    "examples/adapters/python-redis-lock.toml",
    "examples/adapters/python-redis-lock-renewal.toml",
    "examples/adapters/pottery.toml",
    "examples/adapters/pottery-5.toml",
    "examples/adapters/python-etcd3.toml",
];

/// kazoo on lockaudit's ZooKeeper ensemble.
const ZOOKEEPER: [&str; 1] = ["examples/adapters/kazoo.toml"];

/// The presets the short audit runs every row under but kazoo's.
const PRESETS: [&str; 4] = ["none", "kill-clients", "pause-clients", "clock-skew"];

/// kazoo's cells, fewer for time (each starts three JVMs): a paused holder outlives its
/// session (pause-clients, which must find the overlap), and a killed one's lock is freed
/// when its session expires rather than held for ever (kill-clients). Not clock-skew: kazoo
/// times everything on the monotonic clock (its sleeps under a skewed clock are
/// `kazoo_reconnects_under_a_skewed_wall_clock_without_a_harness_traceback`'s).
const ZOOKEEPER_PRESETS: [&str; 2] = ["kill-clients", "pause-clients"];

/// node-redlock on five masters: plain acquire/extend/release, and `using()`.
const NODE: [&str; 2] = [
    "examples/adapters/node-redlock/node-redlock.toml",
    "examples/adapters/node-redlock/node-redlock-using.toml",
];

/// etcd's own Go client (clientv3/concurrency 3.4.23) on lockaudit's etcd cluster.
const GO: [&str; 1] = ["examples/adapters/go-etcd/go-etcd.toml"];

fn require_libraries() {
    require_python(&["redis", "redis_lock", "pottery", "etcd3", "kazoo"]);
    require_etcd();
    require_zookeeper();
    require_node_redlock();
    require_go_etcd();
}

/// Each test starts servers and a dozen interpreters: one at a time (`.ci/run` gives them a
/// process of their own, where no test waits for its turn on a thread others could use).
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lockaudit(args: &[&str]) -> (Option<i32>, String) {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let output = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .current_dir(root())
        .args(args)
        .output()
        .expect("run lockaudit");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), text)
}

#[test]
fn every_ready_adapter_passes_adapter_test_on_its_topology() {
    require_libraries();
    let mut failed = Vec::new();
    for workload in PYTHON.iter().chain(&ZOOKEEPER).chain(&NODE).chain(&GO) {
        let (code, text) = lockaudit(&["adapter-test", workload]);
        if code != Some(0) || !text.contains("✓") {
            failed.push(format!("{workload} (exit {code:?}):\n{text}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[test]
fn a_short_audit_of_the_ready_adapters_meets_their_expectations() {
    // The presets that tell these libraries apart: a killed holder of a lock that never
    // expires deadlocks it, and one that renews by itself must not look like one
    // (kill-clients); leases outlived by paused holders (pause-clients); a wall clock that
    // node-redlock reads and the others do not (clock-skew).
    require_libraries();
    let dir = common::RunDir::new();
    let out = dir.path().join("audit");
    let pairs = |rows: &[&str], presets: &[&str]| -> Vec<String> {
        rows.iter()
            .flat_map(|row| presets.iter().map(move |preset| format!("{row}:{preset}")))
            .collect()
    };
    let rows: Vec<&str> = PYTHON.iter().chain(&NODE).copied().collect();
    let mut cells = pairs(&rows, &PRESETS);
    cells.extend(pairs(&ZOOKEEPER, &ZOOKEEPER_PRESETS));
    let (code, text) = lockaudit(&[
        "audit",
        "--cells",
        &cells.join(","),
        // Cells that must find something stop as soon as they have (in 10-16 s here); the
        // limit is for a busy machine, where Python clients start slowly and a pause can
        // take a few rounds to catch a holder: 20 s missed python-etcd3's overlap once in
        // CI beside two CPU hogs. Cells expected valid run their own time (below).
        "--time-limit",
        "60s",
        // Cells expected valid run this long: 4 s (the default) once left a kill-clients
        // cell of eight Python clients on a busy machine with no acquire taken (unknown).
        "--valid-time-limit",
        "8s",
        "--out",
        out.to_str().unwrap(),
    ]);
    let matrix = std::fs::read_to_string(out.join("audit.md")).unwrap_or_default();
    assert_eq!(code, Some(0), "{text}\n{matrix}");
    // Every cell ran (7 workloads × 4 presets, and kazoo's 2), none of them skipped as not
    // applicable.
    let cells = cells_of(&out.join("audit.json"));
    assert_eq!(cells.len(), 30, "{matrix}");
    assert!(
        cells.iter().all(|cell| cell.status == "pass"),
        "{cells:?}\n{matrix}"
    );
    // node-redlock's using() checks its lock's expiry against Date.now(): with the adapter's
    // wall clock skewed ahead, it drops a lock whose validity still runs. python-redis-lock,
    // which leaves expiry to the server, loses no lock inside its lease under the same skew
    // (a CI run under libfaketime, which slowed its renewal thread, found an overlap after
    // the lease: still allowed, see its workload).
    let skewed = |row: &str| {
        cells
            .iter()
            .find(|cell| cell.algorithm.ends_with(row) && cell.nemesis == "clock-skew")
            .map(|cell| cell.found.clone())
            .unwrap_or_else(|| panic!("no clock-skew cell for {row}"))
    };
    assert!(
        skewed("node-redlock-using.toml").contains(&"lost-lock".to_string()),
        "{matrix}"
    );
    // (pottery, also server-timed, is not asserted here: see the note on its clock-skew
    // expectation in examples/adapters/pottery.toml.)
    let row = "python-redis-lock-renewal.toml";
    assert!(
        !skewed(row).contains(&"lost-lock".to_string()),
        "{row}: {:?}\n{matrix}",
        skewed(row)
    );
}

/// One cell of an audit's `audit.json`.
#[derive(Debug)]
struct Cell {
    algorithm: String,
    nemesis: String,
    status: String,
    found: Vec<String>,
}

fn cells_of(path: &Path) -> Vec<Cell> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let audit: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    audit["cells"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|cell| {
            let field = |name: &str| cell[name].as_str().unwrap_or("").to_string();
            Cell {
                algorithm: field("algorithm"),
                nemesis: field("nemesis"),
                status: field("status"),
                found: cell["found"]
                    .as_object()
                    .map(|found| found.keys().cloned().collect())
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// Every ZooKeeper member killed in turn (so that every kazoo client loses its server once
/// and reconnects) while every adapter's wall clock is skewed.
const SKEW_AND_KILL: &str = r#"
[[fault]]
at = "500ms"
kind = "clock-skew"
target = "worker-0"
duration = "9s"

[[fault]]
at = "500ms"
kind = "clock-skew"
target = "worker-1"
duration = "9s"

[[fault]]
at = "2s"
kind = "kill-server"
target = "zk-0"
duration = "1s"

[[fault]]
at = "4500ms"
kind = "kill-server"
target = "zk-1"
duration = "1s"

[[fault]]
at = "7s"
kind = "kill-server"
target = "zk-2"
duration = "1s"
"#;

#[test]
fn kazoo_reconnects_under_a_skewed_wall_clock_without_a_harness_traceback() {
    // kazoo sleeps (time.sleep) between reconnection attempts. Under libfaketime, which
    // lockaudit once preloaded into adapters, that sleep raised `OSError: [Errno 22]`: the
    // connection thread died and kazoo reported its live session lost (`lost-lock`).
    require_python(&["kazoo"]);
    require_zookeeper();
    let dir = tempfile::tempdir().unwrap();
    let schedule = dir.path().join("skew-and-kill.toml");
    std::fs::write(&schedule, SKEW_AND_KILL).unwrap();
    let out = dir.path().join("run");
    let (code, text) = lockaudit(&[
        "run",
        "examples/adapters/kazoo.toml",
        "--seed",
        "1",
        "--nemesis",
        schedule.to_str().unwrap(),
        "--time-limit",
        "10s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(matches!(code, Some(0 | 1)), "exit {code:?}: {text}");
    let mut logs = String::new();
    for entry in std::fs::read_dir(&out).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.ends_with(".log") && (name.starts_with("adapter-") || name.starts_with("worker-")) {
            logs.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
        }
    }
    // The kills reached the clients: the path that sleeps ran.
    assert!(logs.contains("session state SUSPENDED"), "{logs}\n{text}");
    assert!(!logs.contains("Errno 22"), "{logs}");
    assert!(!logs.contains("Traceback"), "{logs}");
    // The skew was applied to both workers' adapters all the same.
    let history = std::fs::read_to_string(out.join("history.jsonl")).unwrap();
    for worker in ["worker-0", "worker-1"] {
        assert!(
            history.lines().any(|l| l.contains("\"f\":\"clock\"")
                && !l.contains("\"offset_ms\":0,")
                && l.contains(worker)),
            "no skew of {worker}: {text}"
        );
    }
}

/// The npm etcd3 client's Lock (examples/adapters/node-etcd3), on lockaudit's etcd cluster.
const NODE_ETCD3: &str = "examples/adapters/node-etcd3/node-etcd3.toml";

#[test]
fn node_etcd3_passes_adapter_test_and_meets_its_expectations() {
    require_node_etcd3();
    require_etcd();
    let (code, text) = lockaudit(&["adapter-test", NODE_ETCD3]);
    assert_eq!(code, Some(0), "{text}");
    // Its lease keeps itself alive: the keep-alives must come as notices, and keep the lock.
    assert!(
        text.contains("✓ a lock held past its lease → renewed notices"),
        "{text}"
    );
    // A paused holder's lease runs out under it (pause-clients: stops once it has found its
    // must kinds); a killed holder's lease ends and frees the key (kill-clients: the valid
    // limit).
    short_audit_passes(
        &common::RunDir::new(),
        NODE_ETCD3,
        &["pause-clients", "kill-clients"],
    );
}

/// Apache Curator's InterProcessMutex (examples/adapters/curator/, one JVM per client) passes
/// adapter-test, and meets its workload's `[expect]` under two presets, for time (each cell
/// starts three ZooKeeper JVMs and six client JVMs): a paused holder outlives its session
/// and the next holder overlaps it (pause-clients, which must find it and stops once it
/// has), and a killed holder's lock is freed when its session expires (kill-clients).
#[test]
fn curator_passes_adapter_test_and_meets_its_expectations() {
    common::require_curator();
    require_zookeeper();
    let workload = "examples/adapters/curator/curator.toml";
    let (code, text) = lockaudit(&["adapter-test", workload]);
    assert_eq!(code, Some(0), "{text}");
    // Curator's count, and a read-write lock for `mode`.
    assert!(text.contains("reentrant true"), "{text}");
    assert!(text.contains("behaves as a shared lock"), "{text}");
    short_audit_passes(
        &common::RunDir::new(),
        workload,
        &["kill-clients", "pause-clients"],
    );
}

/// etcd's Go client, in an audit of its own (two cells, for time): a paused holder's session
/// lease runs out and another client takes the lock before the holder's `lost` notice
/// (pause-clients must find the overlap, and stops once it has); a killed holder's key goes
/// with its lease, which the `renewed` notices tell the checker (kill-clients, valid or
/// `unavailable` as its `[expect]` allows).
#[test]
fn a_short_audit_of_the_go_etcd_adapter_meets_its_expectations() {
    require_etcd();
    require_go_etcd();
    // The run folders stay until the last assertion: a failed test keeps them.
    let dir = common::RunDir::new();
    let (cells, matrix) = short_audit_passes(&dir, GO[0], &["pause-clients", "kill-clients"]);
    let paused = cells.iter().find(|cell| cell.nemesis == "pause-clients");
    assert!(
        paused.is_some_and(|cell| cell.found.contains(&"overlap".to_string())),
        "{matrix}"
    );
}

/// Audits `workload` under `presets` into `dir` (a cell that must find something stops once
/// it has, in at most 60 s; one expected valid runs 8 s) and asserts that the audit passed
/// with every cell a pass. The cells, and the matrix for messages.
fn short_audit_passes(
    dir: &common::RunDir,
    workload: &str,
    presets: &[&str],
) -> (Vec<Cell>, String) {
    let out = dir.path().join("audit");
    let cells: Vec<String> = presets
        .iter()
        .map(|preset| format!("{workload}:{preset}"))
        .collect();
    let (code, text) = lockaudit(&[
        "audit",
        "--cells",
        &cells.join(","),
        "--time-limit",
        "60s",
        "--valid-time-limit",
        "8s",
        "--out",
        out.to_str().unwrap(),
    ]);
    let matrix = std::fs::read_to_string(out.join("audit.md")).unwrap_or_default();
    assert_eq!(code, Some(0), "{text}\n{matrix}");
    let cells = cells_of(&out.join("audit.json"));
    assert_eq!(cells.len(), presets.len(), "{matrix}");
    assert!(
        cells.iter().all(|cell| cell.status == "pass"),
        "{cells:?}\n{matrix}"
    );
    (cells, matrix)
}
