//! The run harness's benchmark: `cargo bench --bench run`.
//!
//! Prints, from one sitting on one machine:
//! - recorded operations per second of `lockaudit run` with 64 set-nx-px clients (little
//!   contention: 64 keys, no hold or think time) in the default number of workers (or
//!   `BENCH_WORKERS`), beside redis-benchmark's SET rate against a redis-server started the
//!   same way, and their ratio;
//! - the CPU time each kind of process spent per 1,000 recorded operations (controller while
//!   recording, workers, redis-servers), and redis-benchmark's per 1,000 SETs: unlike the
//!   rates, these hardly depend on what else the machine is doing;
//! - the time from starting `lockaudit run` to its first acquisition on five RedLock masters
//!   (median of 5);
//! - the controller's peak resident memory while recording.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lockaudit::cluster::{self, ClusterSpec, Topology};
use serde_json::Value;

fn main() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let (set_rate, set_cpu) = redis_benchmark_set_rate(dir.path());

    let workers = std::env::var("BENCH_WORKERS").ok();
    let workload = dir.path().join("throughput.toml");
    std::fs::write(
        &workload,
        format!(
            r#"algorithm = "set-nx-px"
clients = 64
{}keys = 64
ttl = "2s"
hold = "0ms"
think = "0ms"
time_limit = "10s"
"#,
            workers
                .as_ref()
                .map(|w| format!("workers = {w}\n"))
                .unwrap_or_default()
        ),
    )
    .expect("write the workload");
    let out = dir.path().join("throughput");
    let (output, cpu) = with_cpu_times(Command::new(env!("CARGO_BIN_EXE_lockaudit")).args([
        "-v",
        "run",
        workload.to_str().unwrap_or_default(),
        "--out",
        out.to_str().unwrap_or_default(),
    ]));
    let stderr = checked(output, "run throughput.toml");
    let (all_ops, lock_ops, seconds) = operation_rates(&out.join("history.jsonl"));
    let per_1000_ops = |cpu_s: f64| cpu_s / all_ops * 1e6;

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
        "lockaudit run, 64 set-nx-px clients in {} workers: {:>10.0} recorded operations/s ({:.0} acquire+release/s) over {seconds:.1}s",
        workers.as_deref().unwrap_or("2 (the default)"),
        all_ops / seconds,
        lock_ops / seconds
    );
    println!(
        "ratio (recorded operations / SET):       {:>10.2}   (acquire+release only: {:.2})",
        all_ops / seconds / set_rate,
        lock_ops / seconds / set_rate
    );
    println!(
        "CPU ms per 1,000 recorded operations:    controller {:.1} (recording; {:.1} with the final check and report), workers {:.1}, redis-servers {:.1}, all {:.1}",
        per_1000_ops(cpu.controller_recording),
        per_1000_ops(cpu.controller),
        per_1000_ops(cpu.workers),
        per_1000_ops(cpu.redis),
        per_1000_ops(cpu.controller_recording + cpu.workers + cpu.redis),
    );
    println!(
        "CPU ms per 1,000 SETs of redis-benchmark: redis-server {:.1}, redis-benchmark {:.1}",
        set_cpu.redis / SET_REQUESTS * 1e6,
        set_cpu.controller / SET_REQUESTS * 1e6,
    );
    println!(
        "load average (1 min) at the end:         {:>10}",
        std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|l| l.split_whitespace().next().map(str::to_string))
            .unwrap_or_default()
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
    checked(output, &format!("{args:?}"))
}

/// The stderr of a lockaudit that exited 0 or 1 (valid or not); panics otherwise.
fn checked(output: Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "lockaudit {what} failed: {}\n{stderr}",
        String::from_utf8_lossy(&output.stdout)
    );
    stderr
}

/// CPU seconds (user + system) of a process tree, by kind of process.
#[derive(Debug, Default)]
struct CpuTimes {
    /// The process started (lockaudit's controller, or redis-benchmark), to its end.
    controller: f64,
    /// The controller until its last worker was gone: recording, without the final check.
    controller_recording: f64,
    workers: f64,
    redis: f64,
}

/// Runs `command` to its end, reading every 50 ms the CPU time of it and each of its
/// descendants (from /proc), whose last readings are what they spent.
fn with_cpu_times(command: &mut Command) -> (Output, CpuTimes) {
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the command");
    let root = child.id();
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let sampler = scope.spawn(|| {
            // pid -> (command line when first seen, CPU seconds when last seen).
            let mut seen: HashMap<u32, (String, f64)> = HashMap::new();
            let mut recording = 0.0;
            while !done.load(Ordering::Relaxed) {
                let tree = descendants(root);
                for &pid in &tree {
                    if let Some(cpu) = cpu_seconds(pid) {
                        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
                            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                            .unwrap_or_default();
                        let entry = seen.entry(pid).or_insert((cmdline, cpu));
                        entry.1 = cpu;
                    }
                }
                let workers_alive = tree
                    .iter()
                    .any(|p| seen.get(p).is_some_and(|(c, _)| c.contains(" worker")));
                if workers_alive || recording == 0.0 {
                    recording = seen.get(&root).map_or(0.0, |s| s.1);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let mut times = CpuTimes {
                controller_recording: recording,
                ..CpuTimes::default()
            };
            for (pid, (cmdline, cpu)) in seen {
                if pid == root {
                    times.controller = cpu;
                } else if cmdline.contains(" worker") {
                    times.workers += cpu;
                } else if cmdline.contains("redis-server") {
                    times.redis += cpu;
                }
            }
            times
        });
        let output = child.wait_with_output().expect("wait for the command");
        done.store(true, Ordering::Relaxed);
        (output, sampler.join().expect("the sampler"))
    })
}

/// `root` and every process below it.
fn descendants(root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Some(parent) = stat_fields(pid).and_then(|f| f.get(1)?.parse().ok()) {
            children.entry(parent).or_default().push(pid);
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        tree.extend(children.get(&tree[i]).into_iter().flatten());
        i += 1;
    }
    tree
}

/// The fields of /proc/<pid>/stat after the command name (state, ppid, ...).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// utime + stime of `pid`, in seconds.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let fields = stat_fields(pid)?;
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let per_second = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??;
    Some(ticks as f64 / per_second as f64)
}

/// redis-benchmark's SETs.
const SET_REQUESTS: f64 = 300_000.0;

/// redis-benchmark's SET rate against a redis-server started as lockaudit starts them, and
/// the CPU time redis-benchmark (as `controller`) and the server (`redis`) spent on it.
fn redis_benchmark_set_rate(dir: &Path) -> (f64, CpuTimes) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let spec = ClusterSpec::new(Topology::Single, dir.join("redis-benchmark"));
    let cluster = runtime
        .block_on(cluster::start(&spec))
        .expect("start redis-server");
    let endpoints = cluster.endpoints();
    let node = &endpoints.nodes[0];
    let server_before = node.pid.and_then(cpu_seconds).unwrap_or(0.0);
    let (output, mut cpu) = with_cpu_times(
        Command::new("redis-benchmark")
            .args(["-h", &node.host, "-p", &node.port.to_string()])
            .args(["-a", endpoints.password.as_deref().unwrap_or_default()])
            .args([
                "-t",
                "set",
                "-n",
                &SET_REQUESTS.to_string(),
                "-c",
                "50",
                "-q",
            ]),
    );
    cpu.redis = node.pid.and_then(cpu_seconds).unwrap_or(f64::NAN) - server_before;
    runtime.block_on(cluster.shutdown());
    let text = String::from_utf8_lossy(&output.stdout);
    let rate = text
        .lines()
        .filter_map(|l| l.rsplit('\r').next())
        .find_map(|l| l.strip_prefix("SET: "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no SET rate in redis-benchmark's output: {text}"));
    (rate, cpu)
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
