//! External lock clients (`algorithm = "external"`, docs/src/reference/protocol.md) against a real
//! redis-server: the redis-py example's verdicts, protocol failures becoming `info` with no
//! adapter left behind, and `lockaudit adapter-test`.

use crate::common;
use crate::common::root;
use common::{
    acquire_fair_marks, acquire_ttls, assert_exit, kinds, overlapping_shared_holds, report,
};

use std::path::{Path, PathBuf};
use std::process::Command;

use lockaudit::history::{self, OpF, OpType};
use serde_json::Value;

/// Fails the test, saying what to install, without python3 and redis-py.
fn require_redis_py() {
    common::require_python(&["redis"]);
}

/// Runs take turns: each starts a redis-server, workers and their adapters (a Python
/// interpreter each for redis-py), too much at once for a small CI machine.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

fn run(workload: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let _turn = turn();
    Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .current_dir(root())
        .args(["run", "--seed", "1"])
        .arg(workload)
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .expect("run lockaudit")
}

/// Pids of live processes whose working directory is `dir` or whose command line names it.
fn processes_in(dir: &Path) -> Vec<(u32, String)> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let needle = dir.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cwd = std::fs::read_link(entry.path().join("cwd")).ok();
        let cmdline = std::fs::read(entry.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        // A zombie has no cmdline and cannot run anything.
        if cmdline.is_empty() {
            continue;
        }
        if cwd.as_deref() == Some(dir.as_path()) || cmdline.contains(&needle) {
            found.push((pid, cmdline));
        }
    }
    found
}

/// Waits a little for stragglers to go (a SIGKILLed process takes a moment to vanish).
fn assert_no_process_left(dir: &Path) {
    let mut left = processes_in(dir);
    for _ in 0..50 {
        if left.is_empty() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        left = processes_in(dir);
    }
    panic!("processes left behind in {}: {left:?}", dir.display());
}

#[test]
fn the_redis_py_example_runs_valid_without_faults() {
    require_redis_py();
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let output = run(
        Path::new("examples/adapters/redis-py.toml"),
        &out,
        &["--time-limit", "4s"],
    );
    let stdout = assert_exit(&output, 0);
    let report = report(&out);
    assert_eq!(report["valid"], Value::Bool(true), "{stdout}");
    let acquired: u64 = report["stats"]["per_key"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, k)| k["acquisitions"].as_u64())
        .sum();
    let log = std::fs::read_to_string(out.join("worker-0.log")).unwrap_or_default();
    assert!(acquired > 0, "{acquired} acquisitions: {stdout}\n{log}");
    // Each client incarnation's adapter logged into the run folder.
    assert!(out.join("adapter-0.log").exists());
    assert_no_process_left(&out);
}

#[test]
fn the_redis_py_example_overlaps_under_client_pauses() {
    require_redis_py();
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let output = run(
        Path::new("examples/adapters/redis-py.toml"),
        &out,
        &["--nemesis", "pause-clients", "--time-limit", "10s"],
    );
    let stdout = assert_exit(&output, 1);
    let found = kinds(&report(&out));
    assert!(
        found.contains(&"overlap".to_string()),
        "{found:?}\n{stdout}"
    );
    assert_no_process_left(&out);
}

/// An adapter that answers `init` properly and then misbehaves on every acquire, as `mode`
/// says; releases and renews are answered `fail`.
const BROKEN: &str = r#"
import json, sys, time
mode = sys.argv[1]
for line in sys.stdin:
    req = json.loads(line)
    rid = req["id"]
    def send(obj):
        sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
    if req["type"] == "init":
        send({"in_reply_to": rid, "type": "init_ok", "name": "broken " + mode, "fencing": False, "reentrant": False})
    elif req["type"] == "acquire":
        print("about to misbehave: " + mode, file=sys.stderr, flush=True)
        if mode == "bad-json":
            sys.stdout.write("this is { not json\n"); sys.stdout.flush()
        elif mode == "wrong-id":
            send({"in_reply_to": rid + 7, "type": "ok", "token": None, "lease_ms": 100})
        elif mode == "exit":
            print("dying now", file=sys.stderr, flush=True)
            sys.exit(3)
        elif mode == "sleep":
            time.sleep(120)
        elif mode == "huge":
            sys.stdout.write("x" * (3 << 20)); sys.stdout.flush(); time.sleep(120)
        elif mode == "error":
            send({"in_reply_to": rid, "type": "error", "error": "acquire is not supported here"})
        elif mode == "raise":
            raise ValueError("the library broke")
    else:
        send({"in_reply_to": rid, "type": "fail", "error": "not held"})
"#;

/// Writes `script` as `dir/<name>` and a workload `dir/w.toml` running it as
/// `python3 ./<name> <args>` with the `settings` lines after it; returns the workload.
fn python_workload(dir: &Path, name: &str, script: &str, args: &[&str], settings: &str) -> PathBuf {
    std::fs::write(dir.join(name), script).unwrap();
    let argv: String = args.iter().map(|a| format!(", {a:?}")).collect();
    let workload = dir.join("w.toml");
    std::fs::write(
        &workload,
        format!(
            "algorithm = \"external\"\nadapter = [\"python3\", \"./{name}\"{argv}]\n{settings}"
        ),
    )
    .unwrap();
    workload
}

/// Runs a 2 s single-client workload over the broken adapter in `mode`; returns the run
/// folder (inside `dir`) and lockaudit's output.
fn broken_run(dir: &Path, mode: &str) -> (PathBuf, String) {
    let workload = python_workload(
        dir,
        "broken.py",
        BROKEN,
        &[mode],
        "clients = 1\nworkers = 1\nop_timeout = \"400ms\"\nhold = \"5ms\"\nthink = \"5ms\"\n",
    );
    let out = dir.join("run");
    let output = run(&workload, &out, &["--time-limit", "2s"]);
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // An `error` reply stops the run (exit 3); every other failure is recorded and the run
    // goes on to its verdict, which is unknown (exit 3 too): no acquire ever took effect,
    // so the run proved nothing.
    assert_eq!(output.status.code(), Some(3), "{mode}: {text}");
    if mode != "error" {
        assert!(text.contains("UNKNOWN"), "{mode}: {text}");
    }
    (out, text)
}

/// The run's acquire completions as (type, error) from the JSONL, after checking that the
/// history reads.
fn acquire_completions(out: &Path) -> Vec<(String, String)> {
    let path = out.join("history.jsonl");
    let history = history::read_file(&path).expect("the history reads");
    assert!(history
        .ops
        .iter()
        .any(|op| op.f == OpF::Acquire && op.ty == OpType::Info));
    assert!(!history
        .ops
        .iter()
        .any(|op| op.f == OpF::Acquire && op.ty == OpType::Ok));
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["f"] == "acquire" && e["type"] != "invoke")
        .map(|e| {
            (
                e["type"].as_str().unwrap_or("").to_string(),
                e["error"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn check_protocol_failure(mode: &str, expect: &str) {
    check_protocol_failure_says(mode, &[expect]);
}

fn check_protocol_failure_says(mode: &str, expected: &[&str]) {
    let dir = common::RunDir::new();
    let (out, text) = broken_run(dir.path(), mode);
    let completions = acquire_completions(&out);
    assert!(!completions.is_empty(), "{mode}: {text}");
    for (ty, error) in &completions {
        assert_eq!(ty, "info", "{mode}: {error}");
        for expect in expected {
            assert!(error.contains(expect), "{mode}: {error:?} lacks {expect:?}");
        }
    }
    // Retired each time: several adapters were started, one per incarnation.
    assert!(completions.len() >= 2, "{mode}: {completions:?}");
    assert!(
        out.join("adapter-1.log").exists(),
        "{mode}: no second adapter"
    );
    assert_no_process_left(&out);
}

#[test]
fn a_reply_that_is_not_json_is_info() {
    check_protocol_failure("bad-json", "not JSON");
}

#[test]
fn a_reply_to_another_request_is_info() {
    check_protocol_failure("wrong-id", "in_reply_to");
}

#[test]
fn an_adapter_that_exits_mid_request_is_info_with_its_stderr() {
    // Named by its script, not only its interpreter.
    check_protocol_failure_says(
        "exit",
        &["dying now", "adapter python3 ", "broken.py exit:"],
    );
}

#[test]
fn an_adapter_that_crashes_with_a_traceback_is_named_with_its_last_lines() {
    let dir = common::RunDir::new();
    let (out, text) = broken_run(dir.path(), "raise");
    // On stderr, and in report.json's warnings: the adapter's log and the error itself.
    let line = text
        .lines()
        .find(|l| l.contains("an adapter failed: adapter-"))
        .unwrap_or_else(|| panic!("no adapter named: {text}"));
    assert!(line.contains("ValueError: the library broke"), "{line}");
    let warnings = report(&out)["warnings"].to_string();
    assert!(
        warnings.contains("a crash or uncaught error") && warnings.contains("the library broke"),
        "{warnings}"
    );
    // An adapter that failed without a trace is not named so.
    let quiet = common::RunDir::new();
    let (_, text) = broken_run(quiet.path(), "exit");
    assert!(!text.contains("an adapter failed"), "{text}");
}

#[test]
fn an_adapter_that_never_answers_is_info_and_killed() {
    check_protocol_failure("sleep", "no reply within");
}

#[test]
fn an_endless_reply_line_is_info_and_killed() {
    check_protocol_failure("huge", "longer than");
}

#[test]
fn an_error_reply_is_info_and_stops_the_run() {
    let dir = common::RunDir::new();
    let (out, text) = broken_run(dir.path(), "error");
    let completions = acquire_completions(&out);
    assert!(
        completions
            .iter()
            .any(|(ty, e)| ty == "info" && e.contains("acquire is not supported here")),
        "{completions:?}\n{text}"
    );
    let log = std::fs::read_to_string(out.join("worker-0.log")).unwrap();
    assert!(log.contains("cannot go on"), "{log}");
    // The controller records the stop as a kill with its cause and does not restart a
    // worker that would only meet the same error.
    let history = std::fs::read_to_string(out.join("history.jsonl")).unwrap();
    let nemesis: Vec<serde_json::Value> = history
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["process"] == "nemesis")
        .collect();
    assert!(
        nemesis.iter().any(|e| e["f"] == "kill"
            && e["value"]["cause"]
                .as_str()
                .is_some_and(|c| c.contains("adapter error"))),
        "{nemesis:?}"
    );
    assert!(nemesis.iter().all(|e| e["f"] != "restart"), "{nemesis:?}");
    // docs/src/reference/protocol.md: an `error` reply stops the run; it could not be carried out (exit 3).
    assert!(text.contains("stopping the run"), "{text}");
    assert_no_process_left(&out);
}

#[test]
fn a_missing_adapter_program_is_bad_input() {
    let dir = common::RunDir::new();
    let workload = dir.path().join("w.toml");
    std::fs::write(
        &workload,
        "algorithm = \"external\"\nadapter = [\"./no-such-adapter\"]\n",
    )
    .unwrap();
    let output = run(&workload, &dir.path().join("run"), &["--time-limit", "1s"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no-such-adapter"), "{stderr}");
    assert!(stderr.contains("field `adapter`"), "{stderr}");
}

fn adapter_test(argv: &[&str]) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .current_dir(root())
        .arg("adapter-test")
        .arg("--")
        .args(argv)
        .output()
        .expect("run lockaudit adapter-test");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text)
}

#[test]
fn adapter_test_passes_the_redis_py_example() {
    require_redis_py();
    let (code, text) = adapter_test(&["python3", "examples/adapters/redis_py_lock.py"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("✓ renew"), "{text}");
    // redis-py's Lock has no shared mode, and says so (protocol 1.2).
    assert!(
        text.contains("✓ a shared acquire") && text.contains("answers error (no shared mode)"),
        "{text}"
    );
    assert!(!text.contains('✗'), "{text}");
}

#[test]
fn adapter_test_passes_the_rust_example() {
    let (code, text) = adapter_test(&[env!("CARGO_BIN_EXE_lockaudit-adapter")]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("✓ a second client's acquire"), "{text}");
    // Its default built-in, set-nx-px, has no shared mode.
    assert!(
        text.contains("✓ a shared acquire") && text.contains("set-nx-px has no shared mode"),
        "{text}"
    );
    assert!(text.contains("adapter-test: passed"), "{text}");
}

#[test]
fn adapter_test_fails_a_broken_adapter() {
    let dir = common::RunDir::new();
    let script = dir.path().join("broken.py");
    std::fs::write(&script, BROKEN).unwrap();
    let (code, text) = adapter_test(&["python3", script.to_str().unwrap(), "bad-json"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("✓ init"), "{text}");
    assert!(text.contains("✗ acquire of a free key"), "{text}");
    assert!(text.contains("not JSON"), "{text}");
    assert!(text.contains("adapter-test: FAILED"), "{text}");
    // A missing program is named.
    let (code, text) = adapter_test(&["./no-such-adapter-program"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("not found"), "{text}");
}

#[test]
fn the_rust_example_adapter_runs_a_valid_workload() {
    let dir = common::RunDir::new();
    let workload = dir.path().join("w.toml");
    std::fs::write(
        &workload,
        format!(
            "algorithm = \"external\"\nadapter = [{:?}]\nadapter_options = {{ algorithm = \"set-nx-px\" }}\nclients = 4\nworkers = 2\nttl = \"1s\"\nhold = {{ min = \"1ms\", max = \"10ms\" }}\nthink = \"2ms\"\n",
            env!("CARGO_BIN_EXE_lockaudit-adapter")
        ),
    )
    .unwrap();
    let out = dir.path().join("run");
    let output = run(&workload, &out, &["--time-limit", "3s"]);
    let stdout = assert_exit(&output, 0);
    let report = report(&out);
    assert_eq!(report["valid"], Value::Bool(true), "{stdout}");
    assert!(
        report["stats"]["per_key"]["lock:0"]["acquisitions"]
            .as_u64()
            .unwrap_or(0)
            > 10,
        "{stdout}"
    );
    // Every acquire invoke records the ttl_ms its request sent the adapter.
    let ttls = acquire_ttls(&out);
    assert!(ttls.iter().all(|t| *t == Some(1000)), "{ttls:?}");
    assert_no_process_left(&out);
}

#[test]
fn the_rust_example_adapter_overlaps_under_client_pauses() {
    // Unfenced set-nx-px behind the protocol: a pause longer than the lease must overlap,
    // as it does built in.
    let dir = common::RunDir::new();
    let workload = dir.path().join("w.toml");
    std::fs::write(
        &workload,
        format!(
            "algorithm = \"external\"\nadapter = [{:?}]\nadapter_options = {{ algorithm = \"set-nx-px\" }}\nclients = 8\nworkers = 2\nkeys = 2\nttl = \"300ms\"\nhold = {{ min = \"50ms\", max = \"300ms\" }}\nthink = \"5ms\"\n",
            env!("CARGO_BIN_EXE_lockaudit-adapter")
        ),
    )
    .unwrap();
    let out = dir.path().join("run");
    let output = run(
        &workload,
        &out,
        &["--nemesis", "pause-clients", "--time-limit", "8s"],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    let report = report(&out);
    assert!(
        report["checks"]["mutual-exclusion"]["counts"]["overlap"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{stdout}"
    );
    assert_no_process_left(&out);
}

#[test]
fn a_killed_worker_takes_its_adapters_along() {
    // kill-clients SIGKILLs whole workers: their adapters must go with them (process group
    // and PDEATHSIG), and the run must still finish with a history that reads.
    let dir = common::RunDir::new();
    let workload = dir.path().join("w.toml");
    std::fs::write(
        &workload,
        format!(
            "algorithm = \"external\"\nadapter = [{:?}]\nclients = 4\nworkers = 2\nttl = \"1s\"\nhold = \"5ms\"\nthink = \"2ms\"\n",
            env!("CARGO_BIN_EXE_lockaudit-adapter")
        ),
    )
    .unwrap();
    let out = dir.path().join("run");
    let output = run(
        &workload,
        &out,
        &["--nemesis", "kill-clients", "--time-limit", "6s"],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        matches!(output.status.code(), Some(0) | Some(1)),
        "{stdout}\n{stderr}"
    );
    let history = history::read_file(&out.join("history.jsonl")).expect("the history reads");
    assert!(history.ops.iter().any(|op| op.f == OpF::Fault), "{stdout}");
    assert_no_process_left(&out);
}

/// (state, ppid) of a process, from /proc/<pid>/stat.
fn state_of(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

#[test]
fn a_paused_worker_freezes_its_adapters_with_it() {
    // pause-clients SIGSTOPs a worker's process group: while the worker is stopped, so are
    // the adapters it started (docs/src/reference/protocol.md: one process group).
    let dir = common::RunDir::new();
    let workload = dir.path().join("w.toml");
    std::fs::write(
        &workload,
        format!(
            "algorithm = \"external\"\nadapter = [{:?}]\nclients = 4\nworkers = 2\nttl = \"300ms\"\nhold = \"5ms\"\nthink = \"2ms\"\n",
            env!("CARGO_BIN_EXE_lockaudit-adapter")
        ),
    )
    .unwrap();
    let out = dir.path().join("run");
    let _turn = turn();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .current_dir(root())
        .args(["run", "--seed", "1"])
        .arg(&workload)
        .arg("--out")
        .arg(&out)
        .args(["--nemesis", "pause-clients", "--time-limit", "6s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start lockaudit");
    let mut frozen_together = 0;
    let mut split = Vec::new();
    while child.try_wait().expect("wait").is_none() {
        std::thread::sleep(std::time::Duration::from_millis(50));
        // Adapters by their worker (their parent).
        let mut by_worker: std::collections::BTreeMap<u32, Vec<char>> = Default::default();
        let run_dir = out.canonicalize().unwrap_or_else(|_| out.clone());
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if std::fs::read_link(entry.path().join("cwd")).ok().as_deref()
                != Some(run_dir.as_path())
            {
                continue;
            }
            if let Some((state, ppid)) = state_of(pid) {
                by_worker.entry(ppid).or_default().push(state);
            }
        }
        for (worker, states) in by_worker {
            let Some((worker_state, _)) = state_of(worker) else {
                continue;
            };
            if worker_state == 'T' {
                if states.iter().all(|&s| s == 'T') {
                    frozen_together += 1;
                } else {
                    split.push(states);
                }
            }
        }
    }
    assert!(frozen_together > 0, "never saw a stopped worker's adapters");
    // A sample may fall between the group's SIGSTOP reaching the worker and its children.
    assert!(
        split.len() <= 2,
        "adapters running under a stopped worker: {split:?}"
    );
    assert_no_process_left(&out);
}

/// An adapter whose library promises a lease too large for a signed 64-bit integer.
const HUGE_LEASE: &str = r#"
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    rid = req["id"]
    if req["type"] == "init":
        reply = {"in_reply_to": rid, "type": "init_ok", "name": "huge lease", "fencing": False, "reentrant": False}
    elif req["type"] == "acquire":
        sys.stdout.write('{"in_reply_to": %d, "type": "ok", "token": null, "lease_ms": 18446744073709551615}\n' % rid)
        sys.stdout.flush()
        continue
    else:
        reply = {"in_reply_to": rid, "type": "ok"}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
"#;

#[test]
fn a_lease_too_large_for_i64_is_recorded_as_the_largest_with_a_warning() {
    let dir = common::RunDir::new();
    let workload = python_workload(
        dir.path(),
        "huge.py",
        HUGE_LEASE,
        &[],
        "clients = 1\nworkers = 1\nhold = \"5ms\"\nthink = \"5ms\"\n",
    );
    let out = dir.path().join("run");
    let output = run(&workload, &out, &["--time-limit", "2s"]);
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(matches!(output.status.code(), Some(0 | 1)), "{text}");
    let lines: Vec<Value> = std::fs::read_to_string(out.join("history.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let acquires: Vec<&Value> = lines
        .iter()
        .filter(|e| e["f"] == "acquire" && e["type"] != "invoke")
        .collect();
    assert!(!acquires.is_empty(), "{text}");
    for e in &acquires {
        assert_eq!(e["type"], "ok", "{e}");
        assert_eq!(e["value"]["lease_ms"], Value::from(i64::MAX), "{e}");
    }
    let adapter_log = std::fs::read_to_string(out.join("adapter-0.log")).unwrap_or_default();
    assert!(
        adapter_log.contains("too large for a signed 64-bit integer"),
        "adapter log: {adapter_log}"
    );
    let worker_log = std::fs::read_to_string(out.join("worker-0.log")).unwrap_or_default();
    assert!(
        worker_log.contains("too large for a signed 64-bit integer"),
        "worker log: {worker_log}"
    );
    assert_no_process_left(&out);
}

#[test]
fn a_run_in_which_no_acquire_took_effect_is_unknown_and_exits_3() {
    // Every acquire ends `info`: nothing was proven, so no verdict (and the final reads use
    // a process number no retired client had: the history reads back).
    let dir = common::RunDir::new();
    let script = r#"
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    kind = "init_ok" if req["type"] == "init" else "info"
    sys.stdout.write(json.dumps({"in_reply_to": req["id"], "type": kind, "error": "lost", "name": "lost"}) + "\n")
    sys.stdout.flush()
"#;
    let workload = python_workload(
        dir.path(),
        "lost.py",
        script,
        &[],
        "clients = 2\nworkers = 1\nthink = \"10ms\"\n",
    );
    let out = dir.path().join("run");
    let output = run(&workload, &out, &["--time-limit", "2s"]);
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(3), "{text}");
    assert!(text.contains("UNKNOWN"), "{text}");
    assert_eq!(report(&out)["valid"], Value::Null, "{text}");
    history::read_file(&out.join("history.jsonl")).expect("the history reads");
    assert_no_process_left(&out);
}

/// A Redis lock in one of three modes (its first argument): `never-expires`, `SET NX` without
/// expiry and its owner checked on release (the shape of python-redis-lock's default);
/// `releases-anything`, a 5 s lease and a release that deletes the key whoever holds it; or
/// `ignores-modes`, `never-expires` taking an exclusive lock when asked for a shared one
/// (the others answer `error`, as protocol 1.2 wants).
const SET_NX_ADAPTER: &str = r#"
import json, sys, redis
mode = sys.argv[1]
r = None
me = None
for line in sys.stdin:
    req = json.loads(line)
    kind = req["type"]
    if kind == "init":
        node = req["nodes"][0]
        r = redis.Redis(host=node["host"], port=node["port"], password=node.get("password"))
        me = "client-%d" % req["client"]
        reply = {"type": "init_ok", "name": mode, "fencing": False, "reentrant": False}
    elif kind == "acquire" and req.get("mode") == "shared" and mode != "ignores-modes":
        reply = {"type": "error", "error": "no shared mode"}
    elif kind == "acquire":
        if mode != "releases-anything":
            taken, lease = r.set(req["key"], me, nx=True), None
        else:
            taken, lease = r.set(req["key"], me, nx=True, px=5000), 5000
        if taken:
            reply = {"type": "ok", "token": None, "lease_ms": lease}
        else:
            reply = {"type": "fail", "error": "held by another client"}
    elif kind == "release":
        if mode != "releases-anything":
            freed = r.eval("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end", 1, req["key"], me)
        else:
            freed = r.delete(req["key"])
        reply = {"type": "ok"} if freed == 1 else {"type": "fail", "error": "not ours"}
    else:
        reply = {"type": "error", "error": "no such request: " + kind}
    reply["in_reply_to"] = req["id"]
    print(json.dumps(reply), flush=True)
"#;

/// `adapter-test` of `SET_NX_ADAPTER` in `mode`.
fn adapter_test_set_nx(mode: &str) -> (i32, String) {
    let dir = common::RunDir::new();
    let script = dir.path().join("set_nx.py");
    std::fs::write(&script, SET_NX_ADAPTER).unwrap();
    adapter_test(&["python3", script.to_str().unwrap(), mode])
}

#[test]
fn adapter_test_passes_a_lock_that_never_expires_and_tries_a_foreign_release() {
    require_redis_py();
    let (code, text) = adapter_test_set_nx("never-expires");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("lease_ms null (never expires)"), "{text}");
    assert!(
        text.contains("✓ a second client's release of the key the first holds"),
        "{text}"
    );
    assert!(text.contains("still fail"), "{text}");
}

#[test]
fn a_workload_named_by_its_bare_file_name_finds_its_adapter_next_to_it() {
    // `lockaudit run w.toml` in the workload's own folder: `./set_nx.py` is resolved
    // there, not in the run folder the adapter starts in.
    require_redis_py();
    let dir = common::RunDir::new();
    std::fs::write(dir.path().join("set_nx.py"), SET_NX_ADAPTER).unwrap();
    std::fs::write(
        dir.path().join("w.toml"),
        "algorithm = \"external\"\nadapter = [\"python3\", \"./set_nx.py\", \"never-expires\"]\n",
    )
    .unwrap();
    let _turn = turn();
    let output = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .current_dir(dir.path())
        .args([
            "run",
            "--seed",
            "1",
            "w.toml",
            "--time-limit",
            "1s",
            "--out",
            "run",
        ])
        .output()
        .expect("run lockaudit run");
    assert_exit(&output, 0);
}

#[test]
fn adapter_test_fails_a_lock_that_lets_another_client_release_it() {
    require_redis_py();
    let (code, text) = adapter_test_set_nx("releases-anything");
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("✗ a second client's release of the key the first holds"),
        "{text}"
    );
}

#[test]
fn adapter_test_of_a_workload_uses_its_topology_and_options() {
    // RedLock over five independent masters through the Rust example adapter: the init
    // carries the workload's adapter_options, and the lock needs a quorum of the five.
    let dir = common::RunDir::new();
    let workload = dir.path().join("redlock.toml");
    std::fs::write(
        &workload,
        format!(
            "algorithm = \"external\"\nadapter = [\"{}\"]\nadapter_options = {{ algorithm = \"redlock\" }}\ntopology = \"independent\"\nmasters = 5\n",
            env!("CARGO_BIN_EXE_lockaudit-adapter")
        ),
    )
    .unwrap();
    let (code, text) = adapter_test(&[workload.to_str().unwrap()]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("on the independent topology (5 masters)"),
        "{text}"
    );
    assert!(text.contains("lockaudit built-in redlock"), "{text}");

    // A workload that is not an external client's is named as such.
    let (code, text) = adapter_test(&["workloads/set-nx-px.toml"]);
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("has no adapter"), "{text}");
}

#[test]
fn adapter_test_of_the_redis_py_workload_passes() {
    require_redis_py();
    let (code, text) = adapter_test(&["examples/adapters/redis-py.toml"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("options {\"socket_timeout\":1.0}"), "{text}");
}

/// A `SET NX PX` lock whose library renews it by itself, as python-redis-lock's
/// `auto_renewal` and node-redlock's `using()` do: a thread extends the held key every
/// ttl/3 (if it is still ours) and says so in a protocol-1.1 notice, `renewed` or `lost`.
/// In mode `lies-lost` it also reports every lock lost right after taking it, which it was
/// not.
const SELF_RENEWING_ADAPTER: &str = r#"
import json, sys, threading, redis
mode = sys.argv[1]
out = threading.Lock()
def say(message):
    with out:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()
EXTEND = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end"
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
held = {}
def renewing(key, ttl, stop):
    while not stop.wait(ttl / 3000.0):
        if r.eval(EXTEND, 1, key, me, ttl) == 1:
            say({"type": "renewed", "key": key, "lease_ms": ttl})
        else:
            say({"type": "lost", "key": key, "error": "not ours any more"})
            return
r = None
me = None
for line in sys.stdin:
    req = json.loads(line)
    kind, rid = req["type"], req["id"]
    if kind == "init":
        node = req["nodes"][0]
        r = redis.Redis(host=node["host"], port=node["port"], password=node.get("password"))
        me = "client-%d" % req["client"]
        say({"in_reply_to": rid, "type": "init_ok", "name": mode, "fencing": False, "reentrant": False})
    elif kind == "acquire":
        ttl = req["ttl_ms"]
        if r.set(req["key"], me, nx=True, px=ttl):
            stop = threading.Event()
            held[req["key"]] = stop
            say({"in_reply_to": rid, "type": "ok", "token": None, "lease_ms": ttl})
            if mode == "lies-lost":
                say({"type": "lost", "key": req["key"], "error": "a lie"})
            threading.Thread(target=renewing, args=(req["key"], ttl, stop), daemon=True).start()
        else:
            say({"in_reply_to": rid, "type": "fail", "error": "held by another client"})
    elif kind == "release":
        held.pop(req["key"], threading.Event()).set()
        freed = r.eval(RELEASE, 1, req["key"], me)
        say({"in_reply_to": rid, "type": "ok"} if freed == 1 else {"in_reply_to": rid, "type": "fail", "error": "not ours"})
    else:
        say({"in_reply_to": rid, "type": "error", "error": "no such request: " + kind})
"#;

/// Runs the self-renewing adapter in `mode` for `limit` under `nemesis`: holds of 2.5 s
/// on a 600 ms lock, so that every hold lives on the library's renewals alone.
fn self_renewing_run(dir: &Path, mode: &str, nemesis: &str, limit: &str) -> (PathBuf, String) {
    let workload = python_workload(
        dir,
        "renewing.py",
        SELF_RENEWING_ADAPTER,
        &[mode],
        "clients = 3\nworkers = 3\nkeys = 1\nttl = \"600ms\"\nhold = \"2500ms\"\nthink = \"10ms\"\nop_timeout = \"1s\"\n",
    );
    let out = dir.join("run");
    let output = run(
        &workload,
        &out,
        &["--nemesis", nemesis, "--time-limit", limit],
    );
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_no_process_left(&out);
    (out, text)
}

/// The renews of a run's history that came from notices: (type, lease_ms).
fn notice_renews(out: &Path) -> Vec<(String, Option<i64>)> {
    std::fs::read_to_string(out.join("history.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["f"] == "renew" && e["value"]["notice"] == Value::Bool(true))
        .map(|e| {
            let ty = e["type"].as_str().unwrap_or("").to_string();
            (ty, e["value"]["lease_ms"].as_i64())
        })
        .collect()
}

#[test]
fn a_library_s_own_renewals_are_recorded_and_keep_the_run_valid() {
    require_redis_py();
    let dir = common::RunDir::new();
    let (out, text) = self_renewing_run(dir.path(), "renews", "none", "5s");
    assert_eq!(report(&out)["valid"], Value::Bool(true), "{text}");
    let renews = notice_renews(&out);
    // Each 2.5 s hold is renewed every 200 ms: about a dozen renewals a hold.
    assert!(renews.len() >= 10, "{renews:?}\n{text}");
    for (ty, lease) in &renews {
        assert_eq!(ty, "ok", "{renews:?}");
        // Read while no request was pending: the lease is the notice's own.
        let lease = lease.expect("a renewed notice's lease");
        assert!((550..=600).contains(&lease), "{renews:?}");
    }
}

#[test]
fn a_killed_self_renewing_holder_is_not_reported_unavailable() {
    // Without the notices, the lease of a holder killed 2 s into its hold would seem to have
    // ended 1.4 s before the key really expired, and the stretch in between (acquires
    // refused) would read as a lock that stayed free for no reason.
    require_redis_py();
    let dir = common::RunDir::new();
    let (out, text) = self_renewing_run(dir.path(), "renews", "kill-clients", "10s");
    let history = std::fs::read_to_string(out.join("history.jsonl")).unwrap();
    assert!(history.contains("\"f\":\"kill\""), "no kill: {text}");
    assert!(!notice_renews(&out).is_empty(), "{text}");
    let found = kinds(&report(&out));
    assert!(
        !found.contains(&"unavailable".to_string()),
        "{found:?}\n{text}"
    );
    assert!(
        !found.contains(&"lost-lock".to_string()),
        "{found:?}\n{text}"
    );
}

#[test]
fn a_library_reporting_a_lock_lost_inside_its_lease_is_a_lost_lock() {
    require_redis_py();
    let dir = common::RunDir::new();
    let (out, text) = self_renewing_run(dir.path(), "lies-lost", "none", "3s");
    assert!(
        notice_renews(&out).iter().any(|(ty, _)| ty == "fail"),
        "{text}"
    );
    let found = kinds(&report(&out));
    assert!(
        found.contains(&"lost-lock".to_string()),
        "{found:?}\n{text}"
    );
}

/// Per process, how many holds saw a `lost` notice and then a write before their release:
/// (holds told lost, of those the ones that still wrote).
fn writes_after_lost(out: &Path) -> (usize, usize) {
    let history = std::fs::read_to_string(out.join("history.jsonl")).unwrap();
    let mut told: std::collections::BTreeMap<u64, bool> = Default::default();
    let (mut holds, mut wrote) = (0, 0);
    for event in history
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        let Some(process) = event["process"].as_u64() else {
            continue;
        };
        match (event["f"].as_str(), event["type"].as_str()) {
            (Some("renew"), Some("fail"))
                if event["value"]["notice"] == Value::Bool(true)
                    && !told.contains_key(&process) =>
            {
                told.insert(process, false);
                holds += 1;
            }
            (Some("write"), Some("invoke")) => {
                if let Some(w) = told.get_mut(&process) {
                    if !*w {
                        wrote += 1;
                    }
                    *w = true;
                }
            }
            (Some("release"), Some("invoke")) => {
                told.remove(&process);
            }
            _ => {}
        }
    }
    (holds, wrote)
}

/// The self-renewing adapter that reports every lock lost right after taking it, in short
/// holds, for 3 s; `settings` is added to the workload.
fn lied_to_run(dir: &Path, settings: &str) -> PathBuf {
    let workload = python_workload(
        dir,
        "renewing.py",
        SELF_RENEWING_ADAPTER,
        &["lies-lost"],
        &format!("clients = 3\nworkers = 3\nkeys = 1\nttl = \"600ms\"\nhold = \"300ms\"\nthink = \"10ms\"\nop_timeout = \"1s\"\n{settings}"),
    );
    let out = dir.join("run");
    run(
        &workload,
        &out,
        &["--nemesis", "none", "--time-limit", "3s"],
    );
    assert_no_process_left(&out);
    out
}

#[test]
fn a_holder_told_its_lock_is_lost_writes_nothing_more_in_that_hold() {
    require_redis_py();
    let dir = common::RunDir::new();
    let out = lied_to_run(dir.path(), "");
    let (holds, wrote) = writes_after_lost(&out);
    assert!(holds >= 3, "few holds told lost: {holds}");
    assert_eq!(wrote, 0, "holds that wrote after a lost notice");
}

#[test]
fn write_after_lost_keeps_a_holder_writing_as_an_application_that_ignores_the_warning() {
    require_redis_py();
    let dir = common::RunDir::new();
    let out = lied_to_run(dir.path(), "write_after_lost = true\n");
    let (holds, wrote) = writes_after_lost(&out);
    assert!(holds >= 3, "few holds told lost: {holds}");
    assert_eq!(wrote, holds, "every hold told lost still wrote");
}

/// A `SET NX PX` lock (timed by the server) that writes, on each acquire, how far its wall
/// clock stands from the Redis server's (which no skew moves), to stderr, its log.
const CLOCK_WATCHING_ADAPTER: &str = r#"
import json, sys, time, redis
r = None
for line in sys.stdin:
    req = json.loads(line)
    kind, rid = req["type"], req["id"]
    if kind == "init":
        node = req["nodes"][0]
        r = redis.Redis(host=node["host"], port=node["port"], password=node.get("password"))
        reply = {"type": "init_ok", "name": "clock watcher", "fencing": False, "reentrant": False}
    elif kind == "acquire":
        # Against the server's clock, which no skew moves (an adapter may start mid-skew).
        # Its reading lies between our two: bounds on the skew however slow the round trip.
        before = time.time()
        secs, micros = r.time()
        after = time.time()
        server = secs + micros / 1e6
        low, high = (before - server) * 1000, (after - server) * 1000
        print("wall clock moved %d..%d ms" % (low - 1, high + 1), file=sys.stderr, flush=True)
        # Sleeps still work (libfaketime once made this raise OSError EINVAL).
        time.sleep(0.001)
        if r.set(req["key"], "me-%d" % rid, nx=True, px=req["ttl_ms"]):
            reply = {"type": "ok", "token": None, "lease_ms": req["ttl_ms"]}
        else:
            reply = {"type": "fail", "error": "taken"}
    elif kind == "release":
        r.delete(req["key"])
        reply = {"type": "ok"}
    else:
        reply = {"type": "error", "error": "no such request: " + kind}
    reply["in_reply_to"] = rid
    print(json.dumps(reply), flush=True)
"#;

/// Under an adapter's fake clock, prints the wall clock's lead over the real time given
/// (ms), and how long a 200 ms sleep took on the monotonic clock: in Python, and in Node.
const SKEWED_SLEEPER_PY: &str = r#"
import sys, time
real = float(sys.argv[1])
before = time.time()
start = time.monotonic()
time.sleep(0.2)
print(round((before - real) * 1000), round((time.monotonic() - start) * 1000), flush=True)
"#;
const SKEWED_SLEEPER_JS: &str = r#"
const real = Number(process.argv[1]);
const before = Date.now() / 1000;
const start = performance.now();
setTimeout(() => console.log(Math.round((before - real) * 1000), Math.round(performance.now() - start)), 200);
"#;

#[test]
fn python_and_node_adapters_under_the_fake_clock_sleep_and_see_the_skew() {
    use lockaudit::fake_clock::{FakeClock, Preload};
    common::require_python(&[]);
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.is_ok_and(|o| o.status.success()),
        "this test needs Node.js (bash .ci/run installs it)"
    );
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::create(Preload::find().unwrap(), dir.path().join("c.faketime")).unwrap();
    let run = |program: &str, script: &str, offset_ms: i64| -> (i64, i64) {
        clock.set(offset_ms).unwrap();
        let real = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let flag = if program == "node" { "-e" } else { "-c" };
        let output = Command::new(program)
            .args([flag, script, &real.to_string()])
            .envs(clock.env())
            .output()
            .expect("run the interpreter");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "{program}, offset {offset_ms}: {stderr}"
        );
        assert!(!stderr.contains("LD_PRELOAD"), "not preloaded: {stderr}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let mut fields = stdout.split_whitespace().map(|f| f.parse::<i64>().unwrap());
        (fields.next().unwrap(), fields.next().unwrap())
    };
    for (program, script) in [("python3", SKEWED_SLEEPER_PY), ("node", SKEWED_SLEEPER_JS)] {
        for offset_ms in [20_000, -300_000, 0] {
            let (lead, slept) = run(program, script, offset_ms);
            // The interpreter starts after `real` was read: its lead is the offset plus
            // that start (well under 20 s).
            assert!(
                (offset_ms..offset_ms + 20_000).contains(&lead),
                "{program}, offset {offset_ms}: wall clock {lead} ms ahead"
            );
            // The sleep is timed on the monotonic clock, which no offset moves.
            assert!(
                (199..20_000).contains(&slept),
                "{program}, offset {offset_ms}: slept {slept} ms"
            );
        }
    }
}

#[test]
fn clock_skew_moves_an_adapter_s_wall_clock_and_nothing_else() {
    require_redis_py();
    let dir = common::RunDir::new();
    // One worker, so that the skew lands on the adapters watching; ttl 500 ms: the preset
    // skews by 2 × ttl + 1 s = 2000 ms.
    let workload = python_workload(
        dir.path(),
        "watch.py",
        CLOCK_WATCHING_ADAPTER,
        &[],
        "clients = 2\nworkers = 1\nkeys = 2\nttl = \"500ms\"\nhold = \"5ms\"\nthink = \"20ms\"\n",
    );
    let out = dir.path().join("run");
    let output = run(
        &workload,
        &out,
        &["--nemesis", "clock-skew", "--time-limit", "8s"],
    );
    let text = assert_exit(&output, 0);
    let mut moved = Vec::new();
    let mut logs = String::new();
    for entry in std::fs::read_dir(&out).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with("adapter-") && name.ends_with(".log") {
            let log = std::fs::read_to_string(entry.path()).unwrap();
            logs.push_str(&log);
            moved.extend(log.lines().filter_map(|l| {
                let (low, high) = l
                    .strip_prefix("wall clock moved ")?
                    .strip_suffix(" ms")?
                    .split_once("..")?;
                Some(low.parse::<i64>().ok()?..=high.parse::<i64>().ok()?)
            }));
        }
    }
    assert!(!moved.is_empty(), "no acquire logged: {text}");
    // Before the skew and after its heal the clocks agree; during it, 2 s ahead. Each
    // reading bounds the skew (a slow round trip widens the bounds, never misplaces them).
    let unmoved = |m: &std::ops::RangeInclusive<i64>| m.contains(&0);
    let ahead = |m: &std::ops::RangeInclusive<i64>| m.contains(&2000);
    assert!(moved.iter().any(|m| unmoved(m) && !ahead(m)), "{moved:?}");
    assert!(
        moved.iter().any(|m| ahead(m) && !unmoved(m)),
        "the skew never reached the adapter: {moved:?}\n{text}"
    );
    // A heal between the two reads steps the clock back under the reading: its bounds cross
    // (`1998..=1`), and it says nothing.
    let healed_meanwhile = |m: &std::ops::RangeInclusive<i64>| m.is_empty();
    assert!(
        moved
            .iter()
            .all(|m| unmoved(m) || ahead(m) || healed_meanwhile(m)),
        "{moved:?}"
    );
    assert!(!logs.contains("Traceback"), "{logs}");
    // The monotonic clock stays true: a lock timed by the server is not fooled.
    assert_eq!(report(&out)["valid"], Value::Bool(true), "{text}");
    assert!(
        out.join("adapter-clock-0.faketime").exists(),
        "no offset file"
    );
}

#[test]
fn adapter_test_fails_an_adapter_that_takes_an_exclusive_lock_for_a_shared_one() {
    require_redis_py();
    let (code, text) = adapter_test_set_nx("ignores-modes");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("✗ a shared acquire"), "{text}");
    assert!(text.contains("a second client's shared acquire"), "{text}");
}

#[test]
fn adapter_test_of_the_rust_adapter_over_rw_lock_finds_a_shared_lock() {
    let dir = common::RunDir::new();
    let workload = dir.path().join("rw.toml");
    std::fs::write(
        &workload,
        format!(
            "algorithm = \"external\"\nadapter = [\"{}\"]\nadapter_options = {{ algorithm = \"rw-lock\" }}\n",
            env!("CARGO_BIN_EXE_lockaudit-adapter")
        ),
    )
    .unwrap();
    let (_, text) = adapter_test(&[workload.to_str().unwrap()]);
    // (Redisson's unlock answers "unlocked" for a lock not held, which the checklist fails
    // on its own line; the shared mode is what this test is about.)
    assert!(
        text.contains("✓ a shared acquire") && text.contains("behaves as a shared lock"),
        "{text}"
    );
}

/// A Redis lock whose "library" renews by itself (protocol 1.1): `SET NX PX`, then a thread
/// that extends the key every ttl/3 if it is still ours and says so (`renewed`), or says
/// `lost` and stops when it is not. Its first argument: `renews` (just that), `renewd` (also
/// writes a notice of an unknown type after each acquire) or `foreign-key` (also a `lost`
/// notice about a key it never held).
const RENEWING_ADAPTER: &str = r#"
import json, sys, threading, redis
mode = sys.argv[1]
out = threading.Lock()
def send(obj):
    with out:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()
OURS = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call(ARGV[2], KEYS[1], unpack(ARGV, 3)) else return 0 end"
r, me, held = None, None, {}
def renewer(key, ttl, stop):
    while not stop.wait(ttl / 3000.0):
        if r.eval(OURS, 1, key, me, "pexpire", ttl) == 1:
            send({"type": "renewed", "key": key, "lease_ms": ttl})
        else:
            send({"type": "lost", "key": key, "error": "the key is gone"})
            return
for line in sys.stdin:
    req = json.loads(line)
    kind, key = req["type"], req.get("key")
    if kind == "init":
        node = req["nodes"][0]
        r = redis.Redis(host=node["host"], port=node["port"], password=node.get("password"))
        me = "client-%d" % req["client"]
        reply = {"type": "init_ok", "name": "renews", "fencing": False, "reentrant": False}
    elif kind == "acquire" and req.get("mode") == "shared":
        reply = {"type": "error", "error": "no shared mode"}
    elif kind == "acquire":
        if r.set(key, me, nx=True, px=req["ttl_ms"]):
            held[key] = threading.Event()
            threading.Thread(target=renewer, args=(key, req["ttl_ms"], held[key]), daemon=True).start()
            reply = {"type": "ok", "token": None, "lease_ms": req["ttl_ms"]}
        else:
            reply = {"type": "fail", "error": "held by another client"}
    elif kind == "release":
        if key in held:
            held.pop(key).set()
        freed = r.eval(OURS, 1, key, me, "del") == 1
        reply = {"type": "ok"} if freed else {"type": "fail", "error": "not ours"}
    else:
        reply = {"type": "error", "error": "no such request: " + kind}
    reply["in_reply_to"] = req["id"]
    send(reply)
    if kind == "acquire" and reply["type"] == "ok" and mode == "renewd":
        send({"type": "renewd", "key": key, "lease_ms": req["ttl_ms"]})
    if kind == "acquire" and reply["type"] == "ok" and mode == "foreign-key":
        send({"type": "lost", "key": "someone-else", "error": "not ours"})
"#;

/// `adapter-test` of `RENEWING_ADAPTER` in `mode`.
fn adapter_test_renewing(mode: &str) -> (i32, String) {
    let dir = common::RunDir::new();
    let script = dir.path().join("renewing.py");
    std::fs::write(&script, RENEWING_ADAPTER).unwrap();
    adapter_test(&["python3", script.to_str().unwrap(), mode])
}

#[test]
fn adapter_test_passes_a_lock_that_renews_itself_and_sees_its_loss() {
    require_redis_py();
    let (code, text) = adapter_test_renewing("renews");
    assert_eq!(code, 0, "{text}");
    // Held 1.5 s on a 1 s ttl, renewed every 333 ms: renewed, and refused to the other client.
    assert!(text.contains("✓ a lock held past its lease"), "{text}");
    assert!(text.contains("a second client's acquire → fail"), "{text}");
    // Its key deleted on the server: the next renewal finds it gone.
    assert!(text.contains("✓ its key deleted on the servers"), "{text}");
    assert!(
        text.contains("deleted master-0:adapter-test:notices"),
        "{text}"
    );
    assert!(text.contains(r#"\"type\": \"lost\""#), "{text}");
    assert!(text.contains("✓ every notice"), "{text}");
    assert!(!text.contains('✗'), "{text}");
}

#[test]
fn adapter_test_reports_a_malformed_notice_with_its_line() {
    require_redis_py();
    // An unknown type: no notice, and no reply either (the request it meets fails too).
    let (code, text) = adapter_test_renewing("renewd");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("✗ every notice"), "{text}");
    assert!(
        text.contains(r#"the first client wrote "{\"type\": \"renewd\", \"key\": \"adapter-test:lock\", \"lease_ms\": 5000}""#),
        "{text}"
    );
    assert!(text.contains(r#"not "renewd""#), "{text}");
    assert!(text.contains("adapter-test: FAILED"), "{text}");

    // A well-formed notice about a key the client never held: only that check fails.
    let (code, text) = adapter_test_renewing("foreign-key");
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(r#"never held the key "someone-else""#),
        "{text}"
    );
    assert_eq!(text.matches('✗').count(), 1, "{text}");
}

/// A workload of the Rust example adapter over `algorithm`, in `dir`, with `settings`.
fn builtin_workload(dir: &Path, algorithm: &str, settings: &str) -> PathBuf {
    let workload = dir.join("w.toml");
    std::fs::write(
        &workload,
        format!(
            "algorithm = \"external\"\nadapter = [\"{}\"]\nadapter_options = {{ algorithm = \"{algorithm}\" }}\nclients = 6\nworkers = 2\nkeys = 1\nttl = \"1s\"\nhold = {{ min = \"20ms\", max = \"80ms\" }}\nthink = {{ min = \"0ms\", max = \"20ms\" }}\n{settings}",
            env!("CARGO_BIN_EXE_lockaudit-adapter")
        ),
    )
    .unwrap();
    workload
}

#[test]
fn readers_share_an_external_rw_lock() {
    // `mode` reaches the adapter and the built-in: with it dropped every hold would be
    // exclusive and no two would overlap.
    let dir = common::RunDir::new();
    let workload = builtin_workload(dir.path(), "rw-lock", "read_share = 0.5\n");
    let out = dir.path().join("run");
    let output = run(&workload, &out, &["--time-limit", "4s"]);
    let stdout = assert_exit(&output, 0);
    assert_eq!(report(&out)["valid"], Value::Bool(true), "{stdout}");
    let shared = overlapping_shared_holds(&out);
    assert!(shared > 0, "no two shared holds overlapped: {stdout}");
    assert_no_process_left(&out);
}

#[test]
fn read_share_against_an_adapter_without_a_shared_mode_stops_with_its_error() {
    require_redis_py();
    let dir = common::RunDir::new();
    let workload = dir.path().join("w.toml");
    std::fs::write(
        &workload,
        format!(
            "algorithm = \"external\"\nadapter = [\"python3\", \"{}\"]\nread_share = 0.5\nclients = 2\nworkers = 1\n",
            root().join("examples/adapters/redis_py_lock.py").display()
        ),
    )
    .unwrap();
    let out = dir.path().join("run");
    let output = run(&workload, &out, &["--time-limit", "10s"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    // The adapter and its own words, not only where to look for them.
    assert!(stderr.contains("redis_py_lock.py"), "{stderr}");
    assert!(
        stderr.contains("mode 'shared' is not supported: redis-py's Lock has no shared mode"),
        "{stderr}"
    );
    assert_no_process_left(&out);
}

#[test]
fn fair_is_sent_to_the_adapter_and_marks_every_acquire() {
    // fair-lock honours `fair: true`: the run goes on, every acquire marked for the checker.
    let dir = common::RunDir::new();
    let workload = builtin_workload(dir.path(), "fair-lock", "fair = true\n");
    let out = dir.path().join("run");
    let output = run(&workload, &out, &["--time-limit", "3s"]);
    let stdout = assert_exit(&output, 0);
    let marks = acquire_fair_marks(&out);
    assert!(!marks.is_empty(), "{stdout}");
    assert!(marks.iter().all(|m| *m == Some(true)), "{marks:?}");

    // set-nx-px promises no order: its adapter answers `error`, which stops the run.
    let dir = common::RunDir::new();
    let workload = builtin_workload(dir.path(), "set-nx-px", "fair = true\n");
    let out = dir.path().join("run");
    let output = run(&workload, &out, &["--time-limit", "10s"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("fair: the built-in set-nx-px is not fair"),
        "{stderr}"
    );
    assert_no_process_left(&out);
}

/// An adapter that says `fencing: true` and hands out tokens that fall with every acquire.
const FALLING_TOKENS: &str = r#"
import json, sys
n = 0
for line in sys.stdin:
    req = json.loads(line)
    rid, kind = req["id"], req["type"]
    if kind == "init":
        reply = {"in_reply_to": rid, "type": "init_ok", "name": "falling tokens", "fencing": True, "reentrant": False}
    elif kind == "acquire":
        n += 1
        reply = {"in_reply_to": rid, "type": "ok", "token": 1000 - n, "lease_ms": 60000}
    else:
        reply = {"in_reply_to": rid, "type": "ok"}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
"#;

#[test]
fn fenced_writes_carry_the_tokens_of_an_adapter_that_has_its_own() {
    // With `fencing: true` in init_ok, --fenced fences with the adapter's tokens, not
    // INCR's: these fall, so the resource takes the first write and refuses the next.
    let dir = common::RunDir::new();
    let workload = python_workload(
        dir.path(),
        "falling.py",
        FALLING_TOKENS,
        &[],
        "clients = 1\nworkers = 1\nkeys = 1\nhold = \"5ms\"\nthink = \"5ms\"\n",
    );
    let out = dir.path().join("run");
    let output = run(&workload, &out, &["--fenced", "--time-limit", "2s"]);
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let writes: Vec<Value> = std::fs::read_to_string(out.join("history.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["f"] == "write" && e["type"] != "invoke")
        .collect();
    assert!(writes.len() >= 2, "{text}");
    assert_eq!(writes[0]["type"], "ok", "{:?}", writes[0]);
    assert_eq!(writes[0]["value"]["token"], 999, "{:?}", writes[0]);
    assert!(
        writes[1..]
            .iter()
            .all(|w| w["type"] == "fail" && w["value"]["token"].as_i64().is_some_and(|t| t < 999)),
        "{writes:?}"
    );
    assert_no_process_left(&out);
}
