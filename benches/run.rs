//! The run harness's benchmark: `cargo bench --bench run`.
//!
//! Prints, from one sitting on one machine:
//! - recorded operations per second of `lockaudit run` with 64 set-nx-px clients (little
//!   contention: 64 keys, no hold or think time), beside redis-benchmark's SET rate against a
//!   redis-server started the same way, and their ratio;
//! - the time from starting `lockaudit run` to its first acquisition on five RedLock masters
//!   (median of 5);
//! - the controller's peak resident memory while recording.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lockaudit::cluster::{self, ClusterSpec, Topology};
use serde_json::Value;

fn main() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let set_rate = redis_benchmark_set_rate(dir.path());

    let workload = dir.path().join("throughput.toml");
    std::fs::write(
        &workload,
        r#"algorithm = "set-nx-px"
clients = 64
workers = 4
keys = 64
ttl = "2s"
hold = "0ms"
think = "0ms"
time_limit = "10s"
"#,
    )
    .expect("write the workload");
    let out = dir.path().join("throughput");
    let stderr = run_lockaudit(&[
        "-v",
        "run",
        workload.to_str().unwrap_or_default(),
        "--out",
        out.to_str().unwrap_or_default(),
    ]);
    let (all_ops, lock_ops, seconds) = operation_rates(&out.join("history.jsonl"));

    // What checking while recording costs: the same run without it, alternating, twice each
    // (the first run above counts as one with it).
    let mut with_online = vec![all_ops / seconds];
    let mut without_online = Vec::new();
    for i in 0..3 {
        let online = i % 2 == 1;
        let out = dir.path().join(format!("throughput-{i}"));
        let mut args = vec![
            "run",
            workload.to_str().unwrap_or_default(),
            "--out",
            out.to_str().unwrap_or_default(),
        ];
        if !online {
            args.push("--no-online-check");
        }
        run_lockaudit(&args);
        let (ops, _, seconds) = operation_rates(&out.join("history.jsonl"));
        if online {
            with_online.push(ops / seconds);
        } else {
            without_online.push(ops / seconds);
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let recorder_kib = stderr
        .lines()
        .find_map(|l| l.split("recorder peak resident memory ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<f64>().ok())
        .unwrap_or(f64::NAN);

    println!("redis-benchmark SET, 50 clients:        {set_rate:>10.0} requests/s");
    println!(
        "lockaudit run, 64 set-nx-px clients:     {:>10.0} recorded operations/s ({:.0} acquire+release/s) over {seconds:.1}s",
        all_ops / seconds,
        lock_ops / seconds
    );
    println!(
        "ratio (recorded operations / SET):       {:>10.2}   (acquire+release only: {:.2})",
        all_ops / seconds / set_rate,
        lock_ops / seconds / set_rate
    );
    println!(
        "with online checking / without:          {:>10.2}   ({:.0} vs {:.0} recorded operations/s, mean of 2 runs each)",
        mean(&with_online) / mean(&without_online),
        mean(&with_online),
        mean(&without_online)
    );
    println!(
        "recorder peak resident memory:           {:>10.1} MB",
        recorder_kib / 1024.0
    );

    let mut firsts: Vec<f64> = (0..5)
        .map(|i| time_to_first_acquisition(&dir.path().join(format!("redlock-{i}"))))
        .collect();
    firsts.sort_by(f64::total_cmp);
    println!(
        "run start to first acquisition, 5 RedLock masters: median {:.0} ms (min {:.0}, max {:.0})",
        firsts[2], firsts[0], firsts[4]
    );
}

fn run_lockaudit(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .args(args)
        .output()
        .expect("run lockaudit");
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "lockaudit {args:?} failed: {}\n{stderr}",
        String::from_utf8_lossy(&output.stdout)
    );
    stderr
}

/// redis-benchmark's SET rate against a redis-server started as lockaudit starts them.
fn redis_benchmark_set_rate(dir: &Path) -> f64 {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let spec = ClusterSpec::new(Topology::Single, dir.join("redis-benchmark"));
    let cluster = runtime
        .block_on(cluster::start(&spec))
        .expect("start redis-server");
    let endpoints = cluster.endpoints();
    let node = &endpoints.nodes[0];
    let output = Command::new("redis-benchmark")
        .args(["-h", &node.host, "-p", &node.port.to_string()])
        .args(["-a", endpoints.password.as_deref().unwrap_or_default()])
        .args(["-t", "set", "-n", "300000", "-c", "50", "-q"])
        .output()
        .expect("run redis-benchmark (apt-get install redis-tools)");
    runtime.block_on(cluster.shutdown());
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .filter_map(|l| l.rsplit('\r').next())
        .find_map(|l| l.strip_prefix("SET: "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no SET rate in redis-benchmark's output: {text}"))
}

/// (completed operations, completed acquires and releases, seconds) of a history.
fn operation_rates(history: &Path) -> (f64, f64, f64) {
    let text = std::fs::read_to_string(history).expect("the run's history");
    let (mut all, mut lock, mut first, mut last) = (0u64, 0u64, i64::MAX, 0i64);
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let time = event["time"].as_i64().unwrap_or(0);
        first = first.min(time);
        last = last.max(time);
        if event["type"] == "invoke" || event["process"] == "nemesis" {
            continue;
        }
        all += 1;
        if event["f"] == "acquire" || event["f"] == "release" {
            lock += 1;
        }
    }
    (all as f64, lock as f64, (last - first) as f64 / 1e9)
}

/// Milliseconds from starting `lockaudit run` on RedLock to its first acquire `ok`.
fn time_to_first_acquisition(out: &Path) -> f64 {
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis() as i64;
    let workload = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/redlock.toml");
    run_lockaudit(&[
        "run",
        workload.to_str().unwrap_or_default(),
        "--time-limit",
        "1s",
        "--out",
        out.to_str().unwrap_or_default(),
    ]);
    let text = std::fs::read_to_string(out.join("history.jsonl")).expect("the run's history");
    let first = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["f"] == "acquire" && e["type"] == "ok")
        .and_then(|e| e["wall"].as_i64())
        .expect("an acquisition");
    (first - started) as f64
}
