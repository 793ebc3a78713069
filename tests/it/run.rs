//! `lockaudit run` end to end, against real redis-server processes it starts itself.
//!
//! Each test runs the real binary on a workload from `workloads/` with a short time limit,
//! then asserts the verdict and that nothing it started is left running.

use crate::common;
use crate::common::signal;
use common::{acquire_ttls, assert_exit, kinds, report};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

fn lockaudit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockaudit"))
}

fn workload(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("workloads")
        .join(format!("{name}.toml"))
}

fn run(name: &str, out: &Path, extra: &[&str]) -> Output {
    lockaudit()
        .args(["run", "--seed", "1"])
        .arg(workload(name))
        .args(["--time-limit", "3s", "--out"])
        .arg(out)
        .args(extra)
        .output()
        .expect("run lockaudit")
}

/// PIDs of live processes whose command line mentions `needle` (zombies excluded).
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let zombie = status
            .lines()
            .any(|l| l.starts_with("State:") && l.contains('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(needle) {
            found.push(pid);
        }
    }
    found
}

/// The server PIDs a run recorded in its `endpoints.json`.
fn server_pids(out: &Path) -> Vec<u32> {
    let text = std::fs::read_to_string(out.join("endpoints.json")).unwrap_or_default();
    let endpoints: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let nodes = endpoints["nodes"].as_array().into_iter().flatten();
    let sentinels = endpoints["sentinels"].as_array().into_iter().flatten();
    nodes
        .chain(sentinels)
        .chain(std::iter::once(&endpoints["storage"]))
        .filter_map(|n| n["pid"].as_u64())
        .map(|p| p as u32)
        .collect()
}

fn alive(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    !status.is_empty()
        && !status
            .lines()
            .any(|l| l.starts_with("State:") && l.contains('Z'))
}

/// Waits (up to a deadline) until none of the run's servers and workers (whose command
/// line names the run folder) is alive; returns what is left.
fn left_running(out: &Path) -> Vec<u32> {
    let servers = server_pids(out);
    assert!(!servers.is_empty(), "the run recorded no server PIDs");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut left = processes_mentioning(&out.display().to_string());
        left.extend(servers.iter().copied().filter(|&p| alive(p)));
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_run(name: &str, expected_kinds: &[&str]) {
    let dir = common::RunDir::new();
    let out = dir.path().join(name);
    let output = run(name, &out, &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report = report(&out);
    let expected_code = if expected_kinds.is_empty() { 0 } else { 1 };
    assert_eq!(
        output.status.code(),
        Some(expected_code),
        "{name}: {stdout}\n{stderr}"
    );
    assert_eq!(kinds(&report), expected_kinds, "{name}: {stdout}");
    assert!(
        report["stats"]["per_key"]["lock:0"]["acquisitions"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{name}: no acquisitions: {stdout}"
    );
    // Every acquire invoke says the ttl it asked for (whole seconds for the recipes that
    // speak seconds, and lua-getset's script adds one); setnx-del asks for none.
    let ttls = acquire_ttls(&out);
    assert!(!ttls.is_empty(), "{name}");
    let asked = match name {
        "setnx-del" => None,
        "lua-getset" => Some(4000),
        "redlock" => Some(2000),
        "reentrant" => Some(600),
        _ => Some(1000),
    };
    assert!(ttls.iter().all(|t| *t == asked), "{name}: {ttls:?}");
    let left = left_running(&out);
    assert!(left.is_empty(), "{name}: processes left running: {left:?}");
}

#[test]
fn setnx_del_without_faults_is_valid() {
    assert_run("setnx-del", &[]);
}

#[test]
fn setnx_expire_without_faults_is_valid() {
    assert_run("setnx-expire", &[]);
}

#[test]
fn setnx_getset_without_faults_is_valid() {
    assert_run("setnx-getset", &[]);
}

#[test]
fn lua_getset_without_faults_shows_its_release_flaw_as_unavailable() {
    assert_run("lua-getset", &["unavailable"]);
}

#[test]
fn set_nx_px_without_faults_is_valid() {
    assert_run("set-nx-px", &[]);
}

#[test]
fn reentrant_with_nested_acquires_is_valid() {
    assert_run("reentrant", &[]);
}

#[test]
fn redlock_over_five_masters_without_faults_is_valid() {
    assert_run("redlock", &[]);
}

/// An optimistic algorithm takes no lock: its run is valid on its acknowledged conditional
/// writes (not unknown for want of an acquire), and leaves no process.
#[test]
fn watch_multi_without_faults_is_valid_with_writes_and_no_lock() {
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let output = run("watch-multi", &out, &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    let report = report(&out);
    assert_eq!(report["valid"], true, "{stdout}");
    let history = std::fs::read_to_string(out.join("history.jsonl")).unwrap();
    let events: Vec<Value> = history
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        !events.iter().any(|e| e["f"] == "acquire"),
        "it takes no lock"
    );
    let writes = |ty: &str| {
        events
            .iter()
            .filter(|e| e["f"] == "write" && e["type"] == ty)
            .count()
    };
    assert!(writes("ok") > 10, "{stdout}");
    // What it did is counted in its writes, not in acquisitions it never makes.
    assert!(
        stdout.contains(&format!(
            "recorded: {} writes, {} failed attempts,",
            writes("ok"),
            writes("fail")
        )),
        "{stdout}"
    );
    assert!(
        writes("fail") > 0,
        "no conflict in 3 s of 8 clients on 2 keys"
    );
    let left = left_running(&out);
    assert!(left.is_empty(), "processes left running: {left:?}");
}

/// Starts a 20 s set-nx-px run in the background.
fn spawn_long_run(out: &Path) -> std::process::Child {
    lockaudit()
        .args(["run", "--seed", "1"])
        .arg(workload("set-nx-px"))
        .args(["--time-limit", "20s", "--out"])
        .arg(out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start lockaudit run")
}

/// Waits until the run has recorded events (ending it if it never does).
fn wait_for_recording(out: &Path, child: &mut std::process::Child) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let lines = std::fs::read_to_string(out.join("history.jsonl"))
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if lines >= 200 {
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the run recorded nothing in 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `lockaudit check` accepts the history (exit 0, 1 or 3 for a history too short to prove
/// anything; never 2: bad input).
fn assert_history_checks(out: &Path) {
    let output = lockaudit()
        .arg("check")
        .arg(out.join("history.jsonl"))
        .output()
        .expect("run lockaudit check");
    assert!(
        matches!(output.status.code(), Some(0 | 1 | 3)),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn a_controller_killed_mid_run_leaves_a_history_that_checks_and_no_process() {
    let dir = common::RunDir::new();
    let out = dir.path().join("killed");
    let mut child = spawn_long_run(&out);
    wait_for_recording(&out, &mut child);
    signal(child.id(), nix::sys::signal::Signal::SIGKILL);
    child.wait().unwrap();
    let left = left_running(&out);
    assert!(
        left.is_empty(),
        "processes outlived the controller: {left:?}"
    );
    assert_history_checks(&out);
}

#[test]
fn ctrl_c_mid_run_leaves_no_process() {
    let dir = common::RunDir::new();
    let out = dir.path().join("interrupted");
    let mut child = spawn_long_run(&out);
    wait_for_recording(&out, &mut child);
    signal(child.id(), nix::sys::signal::Signal::SIGINT);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    let left = left_running(&out);
    assert!(left.is_empty(), "processes outlived Ctrl-C: {left:?}");
    assert_history_checks(&out);
}

#[test]
fn an_interrupted_run_reports_what_it_recorded_and_exits_128_plus_the_signal() {
    use nix::sys::signal::Signal;
    for (sig, code) in [(Signal::SIGINT, 130), (Signal::SIGTERM, 143)] {
        let name = sig.as_str();
        let dir = common::RunDir::new();
        let out = dir.path().join(name);
        let mut child = lockaudit()
            .args(["run", "--seed", "1"])
            .arg(workload("set-nx-px"))
            .args(["--time-limit", "30s", "--out"])
            .arg(&out)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start lockaudit run");
        // 200 events recorded: what the report must cover at least.
        wait_for_recording(&out, &mut child);
        signal(child.id(), sig);
        let output = child.wait_with_output().unwrap();
        let stdout = assert_exit(&output, code);
        let report = report(&out);
        assert_eq!(report["interrupted"], name, "{stdout}");
        // The history recorded before the signal, checked: the workers are stopped first,
        // and what they had sent may still reach the file after the check read it.
        let events = report["stats"]["events"].as_u64().expect("stats.events");
        let recorded = history_events(&out).len() as u64;
        assert!(
            (200..=recorded).contains(&events),
            "{events} events checked, {recorded} recorded"
        );
        assert!(report["valid"].is_boolean(), "{report}");
        assert!(
            stdout.contains(&format!(
                "interrupted by {name}: the verdict covers the {events} events"
            )),
            "{stdout}"
        );
        assert!(stdout.contains("(marked interrupted)"), "{stdout}");
        let partial: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".partial-"))
            .collect();
        assert!(
            partial.is_empty(),
            "{name}: partial files left: {partial:?}"
        );
        let left = left_running(&out);
        assert!(left.is_empty(), "{name}: processes outlived it: {left:?}");
    }
}

#[test]
fn a_full_disk_stops_the_run_naming_the_history_and_the_error() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: a full disk is a tiny tmpfs, which needs root to mount");
        return;
    }
    let dir = common::RunDir::new();
    let mount = dir.path().join("tiny");
    std::fs::create_dir(&mount).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&mount)
        .status()
        .expect("mount");
    assert!(mounted.success(), "cannot mount a tmpfs");
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mount.clone());
    let out = mount.join("run");
    let started = Instant::now();
    let output = lockaudit()
        .args(["run", "--seed", "1"])
        .arg(workload("set-nx-px"))
        .args(["--time-limit", "60s", "--out"])
        .arg(&out)
        .output()
        .expect("run lockaudit");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    // The cause, named: the file and the error, not the workers it held up.
    let history = out.join("history.jsonl").display().to_string();
    assert!(
        stderr.contains(&format!("cannot write {history}: No space left on device")),
        "{stderr}"
    );
    assert!(!stderr.contains("overran"), "{stderr}");
    // Stopped at once, not at the time limit.
    assert!(started.elapsed() < Duration::from_secs(40), "{stderr}");
    let left = left_running(&out);
    assert!(left.is_empty(), "processes left running: {left:?}");
}

#[test]
fn a_worker_crash_leaves_the_run_to_finish_and_no_process() {
    let dir = common::RunDir::new();
    let out = dir.path().join("crashed");
    let output = {
        let mut child = lockaudit()
            .args(["run", "--seed", "1"])
            .arg(workload("set-nx-px"))
            .args(["--time-limit", "4s", "--out"])
            .arg(&out)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start lockaudit run");
        let deadline = Instant::now() + Duration::from_secs(20);
        let worker = loop {
            let workers: Vec<u32> = processes_mentioning(&out.display().to_string())
                .into_iter()
                .filter(|&p| {
                    let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                    String::from_utf8_lossy(&cmd).contains("worker")
                })
                .collect();
            if let Some(&w) = workers.first() {
                break w;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no worker appeared in 20 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        std::thread::sleep(Duration::from_millis(500));
        signal(worker, nix::sys::signal::Signal::SIGKILL);
        child.wait_with_output().unwrap()
    };
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let left = left_running(&out);
    assert!(
        left.is_empty(),
        "processes left after a worker crash: {left:?}"
    );
    assert_history_checks(&out);
}

#[test]
fn an_existing_redis_is_used_as_it_is_and_left_running() {
    let dir = common::RunDir::new();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let spec = lockaudit::cluster::ClusterSpec::new(
        lockaudit::cluster::Topology::Single,
        dir.path().join("theirs"),
    );
    let cluster = runtime.block_on(lockaudit::cluster::start(&spec)).unwrap();
    let endpoints = cluster.endpoints();
    let node = &endpoints.nodes[0];
    let url = format!(
        "redis://:{}@{}:{}",
        endpoints.password.as_deref().unwrap_or_default(),
        node.host,
        node.port
    );
    let out = dir.path().join("run");
    let output = run("set-nx-px", &out, &["--redis", &url]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("server-side faults are unavailable"),
        "{stderr}"
    );
    assert!(kinds(&report(&out)).is_empty());
    // lockaudit started no server of its own and stopped none of ours.
    assert!(!out.join("redis").exists());
    assert!(
        node.pid.is_some_and(alive),
        "the existing server was stopped"
    );
    runtime.block_on(cluster.shutdown());
}

#[test]
fn an_existing_sentinel_address_finds_the_primary() {
    let dir = common::RunDir::new();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let spec = lockaudit::cluster::ClusterSpec::new(
        lockaudit::cluster::Topology::Sentinel,
        dir.path().join("theirs"),
    );
    let cluster = runtime.block_on(lockaudit::cluster::start(&spec)).unwrap();
    let endpoints = cluster.endpoints();
    let sentinels: Vec<String> = endpoints
        .sentinels
        .iter()
        .map(|s| format!("{}:{}", s.host, s.port))
        .collect();
    let url = format!(
        "sentinel://:{}@{}/{}",
        endpoints.password.as_deref().unwrap_or_default(),
        sentinels.join(","),
        lockaudit::cluster::MASTER_NAME
    );
    let out = dir.path().join("run");
    let output = run("set-nx-px", &out, &["--redis", &url]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let primary = &endpoints.nodes[0];
    assert!(
        stderr.contains(&format!("{}:{}", primary.host, primary.port)),
        "the run did not use the primary {}:{}: {stderr}",
        primary.host,
        primary.port
    );
    assert!(kinds(&report(&out)).is_empty());
    runtime.block_on(cluster.shutdown());
}

/// `run --redis url` must stop before any worker starts: exit 3, a message naming
/// `address` and `why`, and no history recorded.
fn assert_cannot_use(url: &str, address: &str, why: &str) {
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let output = run("set-nx-px", &out, &["--redis", url]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{url}: {stderr}");
    assert!(stderr.contains(address), "{url}: {stderr}");
    assert!(stderr.contains(why), "{url}: {stderr}");
    assert!(
        !out.join("history.jsonl").exists(),
        "{url}: a history was recorded"
    );
    assert!(
        !out.join("report.json").exists(),
        "{url}: a verdict was written"
    );
}

#[test]
fn a_redis_url_at_a_closed_port_cannot_be_used() {
    let (_reserved, address) = common::refusing_port();
    let address = address.to_string();
    assert_cannot_use(
        &format!("redis://{address}"),
        &address,
        "connection refused",
    );
    // Through Sentinel, the sentinel is named.
    assert_cannot_use(
        &format!("sentinel://{address}/lockaudit"),
        &format!("sentinel {address}"),
        "connection refused",
    );
}

#[test]
fn a_redis_url_at_a_listener_that_is_not_redis_cannot_be_used() {
    // A plain TCP listener that answers like a web server.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            use std::io::{Read, Write};
            let mut buf = [0u8; 256];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        }
    });
    assert_cannot_use(
        &format!("redis://{address}"),
        &address,
        "not a Redis server",
    );
}

#[test]
fn a_redis_url_at_a_listener_that_never_answers_cannot_be_used() {
    // Accepted by the kernel, never answered: a stopped server, or not Redis.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    assert_cannot_use(&format!("redis://{address}"), &address, "timed out");
    drop(listener);
}

#[test]
fn a_redis_url_with_a_wrong_password_cannot_be_used() {
    let dir = common::RunDir::new();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let spec = lockaudit::cluster::ClusterSpec::new(
        lockaudit::cluster::Topology::Single,
        dir.path().join("theirs"),
    );
    let cluster = runtime.block_on(lockaudit::cluster::start(&spec)).unwrap();
    let endpoints = cluster.endpoints();
    assert!(endpoints.password.is_some(), "the server has a password");
    let node = &endpoints.nodes[0];
    let address = format!("{}:{}", node.host, node.port);
    assert_cannot_use(
        &format!("redis://:not-the-password@{address}"),
        &address,
        "refused the password",
    );
    // No password at all for a server that needs one.
    assert_cannot_use(
        &format!("redis://{address}"),
        &address,
        "refused the password",
    );
    runtime.block_on(cluster.shutdown());
}

/// The run's history as JSON values (a last line cut short by the exit is skipped).
fn history_events(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("history.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Waits until the run's history satisfies `ready` (ending the run if it never does).
fn wait_for_history(out: &Path, child: &mut std::process::Child, ready: impl Fn(&[Value]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if ready(&history_events(out)) {
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the run never reached the moment to interrupt it");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Every nemesis `kill` of a worker in the history is one the plan (nemesis.json) made, and
/// every `restart` follows such a kill of the same worker: lockaudit's own shutdown is no
/// fault.
fn assert_no_invented_faults(out: &Path, moment: &str) {
    let plan: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("nemesis.json")).unwrap()).unwrap();
    let planned_kills = |worker: &str, at_ms: f64| {
        plan.iter().any(|f| {
            f["kind"] == "kill-client"
                && f["targets"][0] == worker
                && f["at_ms"].as_f64().unwrap_or(f64::MAX) <= at_ms + 1.0
        })
    };
    let mut killed: std::collections::BTreeMap<String, i64> = Default::default();
    for e in history_events(out)
        .iter()
        .filter(|e| e["process"] == "nemesis")
    {
        let target = e["value"]["targets"][0].as_str().unwrap_or("").to_string();
        if !target.starts_with("worker-") {
            continue;
        }
        let at_ms = e["time"].as_f64().unwrap_or(0.0) / 1e6;
        match e["f"].as_str() {
            Some("kill") => {
                assert!(
                    e["value"].get("cause").is_none(),
                    "{moment}: a kill lockaudit did not plan: {e}"
                );
                assert!(
                    planned_kills(&target, at_ms),
                    "{moment}: a kill that is not in the plan: {e}"
                );
                *killed.entry(target).or_default() += 1;
            }
            Some("restart") => {
                let kills = killed.entry(target).or_default();
                assert!(*kills > 0, "{moment}: a restart without a kill: {e}");
                *kills -= 1;
            }
            _ => {}
        }
    }
}

#[test]
fn ctrl_c_records_no_fault_of_its_own_and_leaves_no_process() {
    // SIGINT at several moments of runs under kill-clients: early, mid-run, just after a
    // planned kill (its restart pending), just after a restart.
    type Ready = Box<dyn Fn(&[Value]) -> bool>;
    let nemesis_has = |f: &'static str| -> Ready {
        Box::new(move |h: &[Value]| h.iter().any(|e| e["process"] == "nemesis" && e["f"] == f))
    };
    let moments: Vec<(&str, Ready)> = vec![
        ("after 20 events", Box::new(|h: &[Value]| h.len() >= 20)),
        ("after 400 events", Box::new(|h: &[Value]| h.len() >= 400)),
        ("after the first kill", nemesis_has("kill")),
        ("after the first restart", nemesis_has("restart")),
        ("after 3000 events", Box::new(|h: &[Value]| h.len() >= 3000)),
    ];
    for (moment, ready) in moments {
        let dir = common::RunDir::new();
        let out = dir.path().join("interrupted");
        let mut child = lockaudit()
            .args(["run", "--seed", "1"])
            .arg(workload("set-nx-px"))
            .args(["--nemesis", "kill-clients", "--time-limit", "30s", "--out"])
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start lockaudit run");
        wait_for_history(&out, &mut child, ready);
        signal(child.id(), nix::sys::signal::Signal::SIGINT);
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130), "{moment}: {status:?}");
        assert_no_invented_faults(&out, moment);
        let left = left_running(&out);
        assert!(
            left.is_empty(),
            "{moment}: processes outlived Ctrl-C: {left:?}"
        );
        assert_history_checks(&out);
    }
}

/// A run whose nemesis cannot act says so before it starts and in its outputs, and injects
/// nothing.
fn assert_not_applicable(name: &str, nemesis: &str, why: &str) {
    let dir = common::RunDir::new();
    let out = dir.path().join(name);
    let output = run(name, &out, &["--nemesis", nemesis]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{name}: {stdout}\n{stderr}"
    );
    // Before the run: the warning names the fault and why.
    assert!(
        stderr.contains(&format!(
            "no fault of the nemesis {nemesis} can act on this run"
        )),
        "{name}: {stderr}"
    );
    assert!(stderr.contains(why), "{name}: {stderr}");
    // After: never "all healed" as if faults had happened.
    assert!(stdout.contains("NOT APPLICABLE"), "{name}: {stdout}");
    assert!(!stdout.contains("all healed"), "{name}: {stdout}");
    // nemesis.json marks every planned fault, report.json warns, the history has none.
    let plan: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("nemesis.json")).unwrap()).unwrap();
    assert!(!plan.is_empty(), "{name}");
    for fault in &plan {
        assert!(
            fault["not_applicable"]
                .as_str()
                .is_some_and(|w| w.contains(why)),
            "{name}: {fault}"
        );
    }
    let warnings = report(&out)["warnings"].clone();
    assert!(
        warnings[0].as_str().is_some_and(|w| w.contains(why)),
        "{name}: {warnings}"
    );
    assert!(
        !history_events(&out)
            .iter()
            .any(|e| e["process"] == "nemesis"),
        "{name}: a fault was recorded"
    );
    let left = left_running(&out);
    assert!(left.is_empty(), "{name}: processes left running: {left:?}");
}

#[test]
fn clock_skew_on_a_client_that_never_reads_its_clock_is_not_applicable() {
    assert_not_applicable(
        "set-nx-px",
        "clock-skew",
        "set-nx-px never reads the client's wall clock",
    );
}

#[test]
fn failover_on_redlocks_independent_masters_is_not_applicable() {
    assert_not_applicable("redlock", "failover", "no replicas to fail over to");
}

/// `report.json` without the run's own `warnings`, and `lockaudit check --json` of the
/// run's history: the run's verdict must be exactly what `check` says of its file.
fn assert_verdict_is_checks(out: &Path) {
    let output = lockaudit()
        .arg("check")
        .arg(out.join("history.jsonl"))
        .arg("--json")
        .output()
        .expect("run lockaudit check");
    let mut checked: Value =
        serde_json::from_slice(&output.stdout).expect("check --json prints a report");
    let mut recorded = report(out);
    for value in [&mut checked, &mut recorded] {
        if let Some(object) = value.as_object_mut() {
            object.remove("warnings");
        }
    }
    assert_eq!(recorded, checked, "the run's verdict differs from check's");
}

#[test]
fn stop_on_anomaly_ends_the_run_once_proven_with_checks_verdict() {
    let dir = common::RunDir::new();
    let out = dir.path().join("stop");
    let began = Instant::now();
    // A holder killed while it holds a lock without expiry: every later attempt fails.
    let output = lockaudit()
        .args([
            "run",
            "--algorithm",
            "setnx-del",
            "--nemesis",
            "kill-clients",
        ])
        .args([
            "--time-limit",
            "30s",
            "--stop-on-anomaly",
            "--seed",
            "1",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("run lockaudit");
    let took = began.elapsed();
    let stdout = assert_exit(&output, 1);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stdout.contains("stopped early: unavailable on lock:"),
        "{stdout}\n{stderr}"
    );
    // The faults planned after the stop never happened, and the summary does not say they
    // were healed.
    assert!(
        stdout.contains("those injected before the run stopped all healed"),
        "{stdout}"
    );
    let report = report(&out);
    assert!(
        kinds(&report).contains(&"unavailable".to_string()),
        "{stdout}"
    );
    // The history ends soon after the anomaly was proven, far before the time limit.
    let span = &report["stats"]["time_span_ns"];
    let seconds = (span[1].as_i64().unwrap() - span[0].as_i64().unwrap()) as f64 / 1e9;
    assert!(seconds < 25.0, "the history spans {seconds:.1} s: {stdout}");
    assert!(took < Duration::from_secs(28), "took {took:?}");
    assert_verdict_is_checks(&out);
    let left = left_running(&out);
    assert!(left.is_empty(), "processes left running: {left:?}");
}

#[test]
fn a_run_under_faults_reaches_the_verdict_check_reaches_on_its_file() {
    let dir = common::RunDir::new();
    let out = dir.path().join("pauses");
    let output = run("set-nx-px", &out, &["--nemesis", "pause-clients"]);
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_verdict_is_checks(&out);
}

/// `run --algorithm NAME` without a workload file, from a folder that has no `workloads/`:
/// the algorithm's own workload, built into the binary, with the flags over it; and a
/// schedule whose faults do not all fit in the time limit says so before the run starts,
/// and in report.json.
#[test]
fn an_algorithm_alone_runs_its_builtin_workload_and_a_schedule_that_does_not_fit_says_so() {
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let schedule = dir.path().join("late.toml");
    std::fs::write(
        &schedule,
        "[[fault]]\nat = \"500ms\"\nkind = \"kill-client\"\nduration = \"300ms\"\n\n[[fault]]\nat = \"5s\"\nkind = \"kill-client\"\nduration = \"300ms\"\n",
    )
    .unwrap();
    let output = lockaudit()
        .current_dir(dir.path())
        .args([
            "run",
            "--seed",
            "1",
            "--algorithm",
            "redlock",
            "--clients",
            "4",
            "--fenced",
        ])
        .args(["--time-limit", "3s", "--nemesis", "late.toml", "--out"])
        .arg(&out)
        .output()
        .expect("run lockaudit");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{stdout}\n{stderr}"
    );
    let said = "late.toml: 1 of 2 faults fit in 3 s; the schedule needs 5.3 s (use --time-limit 6s or more)";
    let warned = stderr.find(said).unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        stderr[..warned].trim_end().ends_with("warning:"),
        "{stderr}"
    );
    let warnings = report(&out)["warnings"].clone();
    assert!(
        warnings
            .as_array()
            .is_some_and(|w| w.iter().any(|w| w.as_str() == Some(said))),
        "{warnings}"
    );

    // The run folder's workload.toml is redlock's own workload, the flags over it.
    let text = std::fs::read_to_string(out.join("workload.toml")).unwrap();
    let spec: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(spec["algorithm"].as_str(), Some("redlock"), "{text}");
    // Durations as durations, exact to the millisecond.
    assert_eq!(spec["hold"]["max"].as_str(), Some("1500ms"), "{text}");
    assert_eq!(spec["ttl"].as_str(), Some("2s"), "{text}");
    assert_eq!(spec["clients"].as_integer(), Some(4), "{text}");
    assert_eq!(spec["fenced"].as_bool(), Some(true), "{text}");
    assert_eq!(spec["time_limit"].as_str(), Some("3s"), "{text}");
    assert_eq!(spec["seed"].as_integer(), Some(1), "{text}");
    assert!(spec["expect"].get("kill-servers").is_some(), "{text}");
    let ttls = acquire_ttls(&out);
    assert!(!ttls.is_empty() && ttls.iter().all(|t| *t == Some(2000)));
    let left = left_running(&out);
    assert!(left.is_empty(), "processes left running: {left:?}");
}

/// The warning comes before the run starts: even a run that cannot start (no redis-server
/// there) has said it.
#[test]
fn a_preset_that_does_not_fit_is_told_before_any_server_starts() {
    let dir = common::RunDir::new();
    let output = lockaudit()
        .current_dir(dir.path())
        .args([
            "run",
            "--seed",
            "1",
            "--algorithm",
            "set-nx-px",
            "--nemesis",
            "pause-clients",
        ])
        .args([
            "--time-limit",
            "2s",
            "--redis-server",
            "/nonexistent/redis-server",
        ])
        .arg("--out")
        .arg(dir.path().join("run"))
        .output()
        .expect("run lockaudit");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("lockaudit: warning: pause-clients: none of its faults fits in 2 s (they begin at 1 s and last up to 3.5 s); the schedule needs 4.5 s (use --time-limit 5s or more)"),
        "{stderr}"
    );
}

#[test]
fn the_checker_bounds_given_to_run_decide_its_verdict() {
    // lua-getset's release frees nothing: each hand-over waits for the TTL, `unavailable`
    // at the default 1 s bound (`lua_getset_without_faults_...`), accepted at 30 s.
    let dir = common::RunDir::new();
    let out = dir.path().join("patient");
    let output = run("lua-getset", &out, &["--liveness-bound", "30s"]);
    let stdout = assert_exit(&output, 0);
    assert!(kinds(&report(&out)).is_empty(), "{stdout}");
}

#[test]
fn a_run_whose_output_is_no_terminal_prints_progress_lines_on_stderr() {
    // Output piped (as in every CI log): the bar is hidden, so lines say how the run goes;
    // on stderr, with the notices, while stdout carries the verdict alone.
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let output = lockaudit()
        .args(["run", "--seed", "1"])
        .arg(workload("set-nx-px"))
        .args(["--time-limit", "6s", "--out"])
        .arg(&out)
        .output()
        .expect("run lockaudit");
    // Valid or not (a worker stalled past its lease on a busy machine is found, rightly;
    // `set_nx_px_without_faults_is_valid` holds the run to valid): the lines are the point.
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{stdout}\n{stderr}"
    );
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("progress: "))
        .collect();
    assert_eq!(lines.len(), 1, "one line per 5 s of a 6 s run:\n{stderr}");
    let line = lines[0];
    assert!(line.starts_with("progress: 5s, "), "{line}");
    let number = |before: &str| -> u64 {
        line.split(", ")
            .chain(line.split("; "))
            .find_map(|part| part.strip_suffix(before))
            .and_then(|n| n.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no \"{before}\" count in {line}"))
    };
    assert!(number(" events") > 0, "{line}");
    assert!(number(" acquisitions") > 0, "{line}");
    // "none", or what the online checker had found by then, each kind one the final
    // report has too ("overlap ×2, stale-write ×1").
    let (_, found) = line
        .split_once("; anomalies so far: ")
        .unwrap_or_else(|| panic!("{line}"));
    if found != "none" {
        let kinds = kinds(&report(&out));
        for part in found.split(", ") {
            let (kind, n) = part.split_once(" ×").unwrap_or_else(|| panic!("{line}"));
            assert!(n.parse::<u64>().is_ok_and(|n| n > 0), "{line}");
            assert!(kinds.iter().any(|k| k == kind), "{line}\n{kinds:?}");
        }
    }
    // stdout is the verdict, from the run's folder on, and none of the progress or notices.
    assert!(
        stdout.starts_with(&format!("run: {}\nrecorded: ", out.display())),
        "{stdout}"
    );
    for notice in ["progress: ", "seed: "] {
        assert!(!stdout.contains(notice), "{notice:?} on stdout:\n{stdout}");
    }
    assert!(stderr.contains("seed: 1 (rerun with --seed 1"), "{stderr}");
}

/// A worker's clients share one connection to the storage server; when it fails (here the
/// server closes it), the next client to connect gets a new one instead of the dead one.
#[test]
fn a_failed_shared_storage_connection_is_replaced() {
    use lockaudit::workload::resource::Storage;
    let dir = common::RunDir::new();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let spec = lockaudit::cluster::ClusterSpec::new(
        lockaudit::cluster::Topology::Single,
        dir.path().join("servers"),
    );
    let cluster = runtime.block_on(lockaudit::cluster::start(&spec)).unwrap();
    let endpoints = cluster.endpoints();
    runtime.block_on(async {
        let storage = Storage::new(&endpoints.storage, endpoints.password.as_deref(), false);
        let mut first = storage.resource().await.expect("connect");
        let mut second = storage.resource().await.expect("the same connection");
        first.write("lock:0", None, 7).await.expect("write");
        assert_eq!(second.read("lock:0").await.expect("read"), Some(7));

        // The server closes every client connection but the one asking.
        let url = format!(
            "redis://:{}@{}:{}",
            endpoints.password.as_deref().unwrap_or_default(),
            endpoints.storage.host,
            endpoints.storage.port
        );
        let mut admin = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        // One connection did both the write and the read: its last command is the read's
        // GET, and none is left whose last command was the write. (Counting the connections
        // killed would also count a readiness probe's that the server has not yet seen close.)
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .arg("TYPE")
            .arg("normal")
            .query_async(&mut admin)
            .await
            .unwrap();
        let last_get = list.lines().filter(|l| l.contains(" cmd=get ")).count();
        assert_eq!(last_get, 1, "the clients shared one connection:\n{list}");
        assert!(
            !list.contains(" cmd=set "),
            "a connection of its own wrote:\n{list}"
        );
        let killed: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .arg("SKIPME")
            .arg("yes")
            .query_async(&mut admin)
            .await
            .unwrap();
        assert!(killed >= 1, "{list}");
        assert!(first.read("lock:0").await.is_err());

        let mut third = storage.resource().await.expect("a new connection");
        assert_eq!(third.read("lock:0").await.expect("read again"), Some(7));
    });
    runtime.block_on(cluster.shutdown());
}

/// `lockaudit run` in `dir` (its `results/` is the default results folder), lua-getset
/// without faults for 2 s (it always finds `unavailable`: its release frees nothing).
fn run_in(dir: &Path, extra: &[&str]) -> Output {
    lockaudit()
        .current_dir(dir)
        .args(["run", "--algorithm", "lua-getset", "--time-limit", "2s"])
        .args(extra)
        .output()
        .expect("run lockaudit")
}

/// The run folder a run printed (`run: DIR`), from `base`.
fn printed_run_dir(base: &Path, output: &Output) -> PathBuf {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("run: "))
        .unwrap_or_else(|| panic!("no run: line in {stdout}"));
    base.join(line)
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_run_names_its_folder_by_what_ran_records_it_and_draws_a_seed_unless_given_one() {
    let dir = common::RunDir::new();
    let drawn = run_in(dir.path(), &[]);
    assert_exit(&drawn, 1);
    let given = run_in(dir.path(), &["--seed", "42", "--topology", "replicated"]);
    assert_exit(&given, 1);
    let (first, second) = (
        printed_run_dir(dir.path(), &drawn),
        printed_run_dir(dir.path(), &given),
    );

    // <time>-<algorithm>-<nemesis>[-<topology> when not the algorithm's own], the time
    // sortable: 2025-01-31T120000Z.
    let name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(first.parent().unwrap(), dir.path().join("results"));
    let (a, b) = (name(&first), name(&second));
    assert!(a.ends_with("Z-lua-getset-none"), "{a}");
    assert!(b.ends_with("Z-lua-getset-none-replicated"), "{b}");
    let stamp = &a[..a.len() - "-lua-getset-none".len()];
    assert!(
        humantime::parse_rfc3339(&format!(
            "{}:{}:{}Z",
            &stamp[..13],
            &stamp[13..15],
            &stamp[15..17]
        ))
        .is_ok(),
        "{stamp}"
    );

    // No --seed, none in the built-in workload: one is drawn, said and recorded.
    let record = json(&first.join("run.json"));
    let seed = record["seed"].as_u64().expect("a seed");
    assert_eq!(record["seed_drawn"], true, "{record}");
    let stderr = String::from_utf8_lossy(&drawn.stderr);
    assert!(
        stderr.contains(&format!(
            "seed: {seed} (drawn for this run; rerun with --seed {seed}"
        )),
        "{stderr}"
    );
    let workload: toml::Table = std::fs::read_to_string(first.join("workload.toml"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(workload["seed"].as_integer(), Some(seed as i64));
    // What ran: the command, lockaudit's version and commit, each server's version.
    let command: Vec<&str> = record["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        command[1..4],
        ["run", "--algorithm", "lua-getset"],
        "{record}"
    );
    assert_eq!(record["version"], env!("CARGO_PKG_VERSION"));
    assert!(!record["commit"].as_str().unwrap().is_empty(), "{record}");
    assert_eq!(record["topology"], "single");
    assert_eq!(record["nemesis"], "none");
    let servers = record["servers"].as_array().unwrap();
    let names: Vec<&str> = servers
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["master-0", "storage"], "{record}");
    for server in servers {
        let version = server["version"]
            .as_str()
            .unwrap_or_else(|| panic!("{record}"));
        assert!(version.starts_with("redis "), "{record}");
    }
    assert!(record["ended"].is_string() && record["seconds"].as_f64().unwrap() > 0.0);
    // Where its time went: every phase took some, and they add up to the run (less the
    // moments before the first phase began and after the last ended).
    let phases = &record["phases"];
    let phase = |name: &str| phases[name].as_f64().unwrap_or_else(|| panic!("{record}"));
    let sum: f64 = ["setup_s", "workload_s", "teardown_s", "verdict_s"]
        .iter()
        .map(|p| phase(p))
        .sum();
    assert!(
        phase("setup_s") > 0.0 && phase("workload_s") > 0.0,
        "{record}"
    );
    assert!(
        phase("teardown_s") > 0.0 && phase("verdict_s") > 0.0,
        "{record}"
    );
    let seconds = record["seconds"].as_f64().unwrap();
    assert!(
        sum <= seconds && sum > seconds * 0.9,
        "{sum} of {seconds}: {record}"
    );
    let second_record = json(&second.join("run.json"));
    assert_eq!(second_record["seed"], 42);
    assert_eq!(second_record["seed_drawn"], false);
    assert_eq!(second_record["topology"], "replicated");
    assert_eq!(second_record["servers"].as_array().unwrap().len(), 4);

    // The results folder's index lists both, newest first, each linking its page.
    let results = dir.path().join("results");
    let index = json(&results.join("index.json"));
    let entries = index["entries"].as_array().unwrap();
    let folders: Vec<&str> = entries
        .iter()
        .map(|e| e["folder"].as_str().unwrap())
        .collect();
    assert_eq!(folders, [b.as_str(), a.as_str()], "{index}");
    assert_eq!(entries[1]["seed"], seed);
    assert_eq!(entries[0]["verdict"], "invalid");
    assert_eq!(
        entries[0]["first_anomaly"]["kind"], "unavailable",
        "{index}"
    );
    let links = common::assert_links_resolve(&results.join("index.html"));
    assert_eq!(
        links[1..],
        [format!("./{b}/index.html"), format!("./{a}/index.html")],
        "{links:?}"
    );
}

#[test]
fn rerun_replays_a_run_and_says_how_often_its_anomalies_came_back() {
    let dir = common::RunDir::new();
    let results = dir.path().join("results");
    let original = results.join("original");
    let output = run_in(dir.path(), &["--seed", "5", "--out", "results/original"]);
    assert_exit(&output, 1);
    let output = lockaudit()
        .current_dir(dir.path())
        .args(["rerun", "results/original", "--repeat", "2"])
        .output()
        .expect("rerun");
    // lua-getset without faults always finds `unavailable`: both reruns do, exit 1.
    let stdout = assert_exit(&output, 1);
    let row = stdout
        .lines()
        .find(|l| l.starts_with("unavailable "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(row.contains("2 of 2"), "{stdout}");
    let folders: Vec<PathBuf> = stdout
        .lines()
        .skip_while(|l| *l != "reruns:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| dir.path().join(l.trim()))
        .collect();
    assert_eq!(folders.len(), 2, "{stdout}");
    for folder in &folders {
        assert_ne!(folder, &original);
        let record = json(&folder.join("run.json"));
        assert_eq!(record["seed"], 5, "{record}");
        assert_eq!(record["seed_drawn"], false, "{record}");
        assert_eq!(report(folder)["valid"], false);
    }
    // The index lists the original and both reruns.
    let index = json(&results.join("index.json"));
    assert_eq!(index["entries"].as_array().unwrap().len(), 3, "{index}");

    // A folder that is no run: named, exit 2, no panic.
    let output = lockaudit()
        .args(["rerun"])
        .arg(dir.path())
        .output()
        .expect("rerun");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}: not a run folder: it has no workload.toml",
            dir.path().display()
        )),
        "{stderr}"
    );
}

#[test]
fn a_runs_page_embeds_its_pictures_links_its_files_and_says_how_to_run_it_again() {
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let output = run_in(dir.path(), &["--seed", "9", "--out", "run"]);
    assert_exit(&output, 1);
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    // One file to attach: every picture is in it.
    assert!(
        page.contains(r#"<img src="data:image/png;base64,"#),
        "no embedded picture"
    );
    assert!(!page.contains(r#"<img src="./"#), "a picture left out");
    // The raw files, never the one with the password.
    let links = common::assert_links_resolve(&out.join("index.html"));
    for file in [
        "./history.jsonl",
        "./report.json",
        "./workload.toml",
        "./run.json",
    ] {
        assert!(links.iter().any(|l| l == file), "{file} not in {links:?}");
    }
    assert!(links.iter().any(|l| l.ends_with(".log")), "{links:?}");
    assert!(!links.iter().any(|l| l.contains("endpoints")), "{links:?}");
    assert!(!links.iter().any(|l| l.ends_with(".conf")), "{links:?}");
    let endpoints = json(&out.join("endpoints.json"));
    let password = endpoints["password"].as_str().expect("a password");
    assert!(!page.contains(password));
    // How to run it again, and durations that read as durations.
    assert!(page.contains("<code>lockaudit rerun "), "no rerun command");
    assert!(
        page.contains("workload.toml --seed 9</code>"),
        "no run command"
    );
    assert!(
        page.contains("ttl = &#34;3s&#34;"),
        "the workload's ttl is no duration"
    );
}

/// A schedule file in `dir`: one crash point armed in worker-0 from 0.5 s for 1 s.
fn crash_point_schedule(dir: &Path, point: &str) -> PathBuf {
    let path = dir.join(format!("{}.toml", point.replace(':', "-")));
    let text = format!(
        "[[fault]]\nat = \"500ms\"\nkind = \"crash-point\"\ntarget = \"worker-0\"\npoint = \"{point}\"\nduration = \"1s\"\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// set-nx-px with one key held for `hold` by whoever takes it first (its lease, 10 s,
/// outlasts any hold), under a schedule.
fn run_with_schedule(out: &Path, schedule: &Path, hold: &str) -> Output {
    lockaudit()
        .args(["run", "--seed", "1", "--algorithm", "set-nx-px"])
        .args([
            "--keys",
            "1",
            "--clients",
            "4",
            "--ttl",
            "10s",
            "--hold",
            hold,
        ])
        .args(["--time-limit", "2s", "--nemesis"])
        .arg(schedule)
        .arg("--out")
        .arg(out)
        .output()
        .expect("run lockaudit")
}

#[test]
fn a_run_whose_faults_never_acted_is_untested_and_exits_3() {
    let dir = common::RunDir::new();
    // The first holder keeps the one key for 3 s: nobody releases while the release's crash
    // point is armed, so it is never reached.
    let schedule = crash_point_schedule(dir.path(), "set-nx-px:before-release");
    let out = dir.path().join("untested");
    let output = run_with_schedule(&out, &schedule, "3s");
    assert_exit(&output, 3);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stdout.contains("UNTESTED: no fault acted"), "{stdout}");
    assert!(stderr.contains("UNTESTED: no fault acted"), "{stderr}");
    // The history itself is valid: the run tested nothing, it found nothing wrong.
    let report = report(&out);
    assert_eq!(report["valid"], Value::Bool(true), "{report}");
    assert!(
        report["untested"]
            .as_str()
            .is_some_and(|w| w.starts_with("no fault acted")),
        "{report}"
    );
    let left = left_running(&out);
    assert!(left.is_empty(), "processes left running: {left:?}");
}

#[test]
fn a_run_whose_crash_point_was_reached_is_judged_as_usual() {
    let dir = common::RunDir::new();
    // Short holds: some client reaches the release's crash point while it is armed.
    let schedule = crash_point_schedule(dir.path(), "set-nx-px:before-release");
    let out = dir.path().join("crashed");
    let output = run_with_schedule(&out, &schedule, "10ms");
    let report = report(&out);
    assert!(report.get("untested").is_none(), "{report}");
    assert!(
        !String::from_utf8_lossy(&output.stdout).contains("UNTESTED"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    // The crash is in the history, as a kill naming its step.
    let crashes = history_events(&out)
        .into_iter()
        .filter(|e| e["f"] == "kill" && e["value"]["crash_point"] == "set-nx-px:before-release")
        .count();
    assert_eq!(crashes, 1, "one crash point armed, one crash");
    assert!(matches!(output.status.code(), Some(0 | 1)), "{output:?}");
}

#[test]
fn a_client_that_cannot_start_stops_the_run_before_any_fault_with_its_reason() {
    common::require_python(&[]);
    let dir = common::RunDir::new();
    // An adapter whose library is missing: it says so on stderr and exits.
    let workload = dir.path().join("broken.toml");
    std::fs::write(
        &workload,
        r#"algorithm = "external"
adapter = ["python3", "-c", "import sys; sys.stderr.write(\"ModuleNotFoundError: No module named 'redis'\\n\"); sys.exit(1)"]
clients = 4
workers = 2
"#,
    )
    .unwrap();
    let out = dir.path().join("broken");
    let output = lockaudit()
        .args([
            "run",
            "--seed",
            "1",
            "--nemesis",
            "pause-clients",
            "--time-limit",
            "5s",
        ])
        .arg(&workload)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run lockaudit");
    assert_exit(&output, 3);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("the clients could not start"), "{stderr}");
    assert!(stderr.contains("No module named 'redis'"), "{stderr}");
    // Stopped before the run's clock started: nothing recorded, no fault injected.
    let history = out.join("history.jsonl");
    let events = std::fs::read_to_string(&history).unwrap_or_default();
    assert!(events.trim().is_empty(), "recorded: {events}");
    let left = left_running(&out);
    assert!(left.is_empty(), "processes left running: {left:?}");
}

#[test]
fn faults_start_once_every_client_is_ready_and_the_start_up_is_recorded() {
    let dir = common::RunDir::new();
    let out = dir.path().join("ready");
    let output = lockaudit()
        .args(["run", "--seed", "1", "--algorithm", "set-nx-px"])
        .args(["--nemesis", "pause-clients", "--time-limit", "3s", "--out"])
        .arg(&out)
        .output()
        .expect("run lockaudit");
    assert!(matches!(output.status.code(), Some(0 | 1)), "{output:?}");
    let run = json(&out.join("run.json"));
    let ready = run["phases"]["clients_ready_s"]
        .as_f64()
        .expect("clients_ready_s");
    assert!(ready > 0.0, "{run}");
    // Every client of the paused worker had begun when the first pause came: the pause
    // lists live processes, and each of them invoked something before it.
    let events = history_events(&out);
    let pause = events
        .iter()
        .find(|e| e["f"] == "pause")
        .expect("a pause in the history");
    let processes: Vec<u64> = pause["value"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert!(
        !processes.is_empty(),
        "the pause hit no running client: {pause}"
    );
    let time = pause["time"].as_i64().unwrap();
    for p in processes {
        assert!(
            events
                .iter()
                .any(|e| e["process"] == p && e["time"].as_i64().unwrap() <= time),
            "process {p} had done nothing before the pause"
        );
    }
}

/// The child side of `a_failed_tests_run_folder_is_kept_and_named`, chosen by the env var:
/// a test that fails with a history in its run folder.
#[test]
fn helper_a_failing_test_with_a_run_folder() {
    if std::env::var_os("LOCKAUDIT_KEPT_RUN_HELPER").is_none() {
        return;
    }
    let dir = common::RunDir::new();
    std::fs::write(dir.path().join("history.jsonl"), "the history\n").unwrap();
    panic!("failing on purpose, with a run folder");
}

/// `common::RunDir`: a passing test's run folder goes; a failing one's is moved under
/// target/kept-runs, with what it held, and stderr names it.
#[test]
fn a_failed_tests_run_folder_is_kept_and_named() {
    let dir = common::RunDir::new();
    let passed = dir.path().to_path_buf();
    drop(dir);
    assert!(!passed.exists(), "a passing test's folder is left");

    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &common::test_name(module_path!(), "helper_a_failing_test_with_a_run_folder"),
            "--nocapture",
        ])
        .env("LOCKAUDIT_KEPT_RUN_HELPER", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the helper passed: {stderr}");
    let kept = stderr
        .lines()
        .find_map(|l| l.strip_prefix("the failed test's run folder is kept: "))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no kept folder named: {stderr}"));
    let name = kept.file_name().unwrap().to_string_lossy().into_owned();
    let history = std::fs::read_to_string(kept.join("history.jsonl"));
    std::fs::remove_dir_all(&kept).unwrap();
    assert_eq!(kept.parent(), Some(common::kept_runs().as_path()));
    // Named after the test's path, `::` as `-`.
    assert!(
        name.starts_with("run-helper_a_failing_test_with_a_run_folder-"),
        "{name}"
    );
    assert_eq!(history.unwrap(), "the history\n");
}

/// A heal that fails is no heal: master-0, paused, is killed from outside the run, so its
/// resume cannot happen. The history records no `resume` of it, and the run ends as an
/// error (exit 3) naming the fault, the server and why.
#[test]
fn a_heal_that_fails_is_not_recorded_and_ends_the_run_as_an_error_naming_it() {
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let schedule = dir.path().join("stuck.toml");
    std::fs::write(
        &schedule,
        "[[fault]]\nat = \"300ms\"\nkind = \"pause-server\"\ntarget = \"master-0\"\nduration = \"4s\"\n",
    )
    .unwrap();
    let child = lockaudit()
        .args(["run", "--seed", "1"])
        .arg(workload("set-nx-px"))
        .args(["--topology", "single", "--time-limit", "5s", "--nemesis"])
        .arg(&schedule)
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run lockaudit");
    // The pause recorded, then its server killed before its resume (at 4.3 s).
    let is_pause = |line: &str| {
        serde_json::from_str::<Value>(line).is_ok_and(|e| {
            e["f"] == "pause" && e["value"]["targets"] == serde_json::json!(["master-0"])
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(out.join("history.jsonl"))
        .unwrap_or_default()
        .lines()
        .any(is_pause)
    {
        assert!(Instant::now() < deadline, "no pause of master-0 recorded");
        std::thread::sleep(Duration::from_millis(20));
    }
    let endpoints: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("endpoints.json")).unwrap())
            .unwrap();
    let pid = endpoints["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "master-0")
        .and_then(|n| n["pid"].as_u64())
        .expect("master-0's pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let output = child.wait_with_output().unwrap();
    assert_exit(&output, 3);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let said = format!(
        "lockaudit: the run could not be carried out: pause-server on master-0 not healed (resume failed): master-0 (pid {pid}) is no longer running"
    );
    assert!(stderr.contains(&said), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("1 heals FAILED"), "{stdout}");
    let history = std::fs::read_to_string(out.join("history.jsonl")).unwrap();
    let resumes: Vec<&str> = history
        .lines()
        .filter(|l| l.contains(r#""f":"resume""#))
        .collect();
    assert!(resumes.is_empty(), "{resumes:?}");
    let left = left_running(&out);
    assert!(left.is_empty(), "processes left running: {left:?}");
}

/// The old names still run as the new ones: `--nemesis kill-redis` is the preset
/// `kill-servers`, a schedule file's `kind = "pause-redis"` the kind `pause-server`, each
/// said once on stderr; what the run writes says the new names, and the history's events
/// are the same `kill` and `pause` as ever.
#[test]
fn old_preset_and_fault_kind_names_run_as_the_new_ones_with_a_notice() {
    let dir = common::RunDir::new();
    let count = |stderr: &str, line: &str| stderr.lines().filter(|l| *l == line).count();
    let history = |out: &Path| std::fs::read_to_string(out.join("history.jsonl")).unwrap();
    let nemesis_json = |out: &Path| std::fs::read_to_string(out.join("nemesis.json")).unwrap();

    let out = dir.path().join("preset");
    let output = run(
        "set-nx-px",
        &out,
        &["--nemesis", "kill-redis", "--topology", "single"],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Valid or not is the run's to find (its workload may find anything under kills).
    assert!(matches!(output.status.code(), Some(0 | 1)), "{stderr}");
    let notice = "notice: nemesis preset `kill-redis` is the old name of `kill-servers`";
    assert_eq!(count(&stderr, notice), 1, "{stderr}");
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(record["nemesis"], "kill-servers", "{record}");
    let plan = nemesis_json(&out);
    assert!(
        plan.contains("\"kill-server\"") && !plan.contains("redis\""),
        "{plan}"
    );
    // Its first kill is planned at 1 s of the 3 s run.
    assert!(history(&out).contains(r#""f":"kill""#));

    let out = dir.path().join("schedule");
    let schedule = dir.path().join("old-kind.toml");
    std::fs::write(
        &schedule,
        "[[fault]]\nat = \"300ms\"\nkind = \"pause-redis\"\ntarget = \"master-0\"\nduration = \"500ms\"\n",
    )
    .unwrap();
    let output = run(
        "set-nx-px",
        &out,
        &[
            "--nemesis",
            schedule.to_str().unwrap(),
            "--topology",
            "single",
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(matches!(output.status.code(), Some(0 | 1)), "{stderr}");
    let notice = "notice: fault kind `pause-redis` is the old name of `pause-server`";
    assert_eq!(count(&stderr, notice), 1, "{stderr}");
    let plan = nemesis_json(&out);
    assert!(
        plan.contains("\"pause-server\"") && !plan.contains("pause-redis"),
        "{plan}"
    );
    let paused = history(&out).lines().any(|line| {
        serde_json::from_str::<Value>(line).is_ok_and(|e| {
            e["f"] == "pause" && e["value"]["targets"] == serde_json::json!(["master-0"])
        })
    });
    assert!(paused, "no pause of master-0 recorded");
    for out in [dir.path().join("preset"), out] {
        let left = left_running(&out);
        assert!(left.is_empty(), "processes left running: {left:?}");
    }
}
