//! The reference histories of `history/`: each `<name>.expected.json` states the verdict
//! docs/src/reference/history.md gives for `<name>.jsonl` (or `<name>.edn` when there is no `.jsonl`),
//! derived from the rules by hand, independently of the checker. This runs the real binary,
//! `lockaudit check <file> --json [args]`, on every one and compares.
//!
//! An expectation is either a verdict
//! `{"description", "valid", "kinds": [sorted kinds], "anomalies": [{"kind", "indices",
//! "lease_expired"?, "tokens"?, "processes"?}], "args"?: [extra CLI args]}`
//! or a rejected input `{"description", "error": {"line": N, "field": "time"}}`.
//! Each expected anomaly must be matched by one reported anomaly of its kind whose `indices`,
//! `tokens` and `processes` contain the expected ones (and whose `lease_expired` is equal,
//! when given). Every mismatch of every case is collected, so one run shows them all.

use std::collections::BTreeSet;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The anomaly kinds the checker reports.
const KINDS: [&str; 10] = lockaudit::report::ANOMALY_KINDS;

/// A reference history is tiny: a check taking longer than this is hung.
const CHECK_TIMEOUT: Duration = Duration::from_secs(60);

const EXPECTED_SUFFIX: &str = ".expected.json";

fn history_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("history")
}

/// Every `<name>.expected.json` in history/, sorted, with its case name.
fn expectations() -> Vec<(String, PathBuf)> {
    let mut found = Vec::new();
    let entries = fs::read_dir(history_dir()).expect("history/ is readable");
    for entry in entries {
        let path = entry.expect("history/ entry").path();
        let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if let Some(name) = file_name.strip_suffix(EXPECTED_SUFFIX) {
            found.push((name.to_string(), path.clone()));
        }
    }
    found.sort();
    found
}

/// The history a case checks: `<name>.jsonl`, else `<name>.edn`.
fn history_of(name: &str) -> Option<PathBuf> {
    ["jsonl", "edn"]
        .iter()
        .map(|ext| history_dir().join(format!("{name}.{ext}")))
        .find(|path| path.is_file())
}

fn read_expectation(path: &Path) -> Result<Value, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))
}

/// What one run of the binary did.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `lockaudit check <history> --json <args>`, killing it if it hangs.
fn run_check(history: &Path, args: &[String]) -> Result<Run, String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .arg("check")
        .arg(history)
        .arg("--json")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start lockaudit: {e}"))?;
    let drain = |mut pipe: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > CHECK_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no answer within {CHECK_TIMEOUT:?}: killed"));
            }
            Ok(None) => thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("cannot wait for lockaudit: {e}")),
        }
    };
    Ok(Run {
        code: status.code(),
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// The last few lines of stderr, to show why a run went wrong.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(6);
    let shown = lines[start..].join("\n      ");
    if shown.is_empty() {
        "(stderr empty)".to_string()
    } else {
        format!("stderr: {shown}")
    }
}

fn ints(value: Option<&Value>) -> Vec<i64> {
    value
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default()
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn contains_all(reported: &[i64], expected: &[i64]) -> bool {
    expected.iter().all(|x| reported.contains(x))
}

/// One reported anomaly in a line: `overlap [1, 4] lease_expired=true`.
fn describe(anomaly: &Value) -> String {
    let mut text = format!(
        "{} {:?}",
        anomaly["kind"].as_str().unwrap_or("?"),
        ints(anomaly.get("indices"))
    );
    if let Some(expired) = anomaly.get("lease_expired").and_then(Value::as_bool) {
        text.push_str(&format!(" lease_expired={expired}"));
    }
    let tokens = ints(anomaly.get("tokens"));
    if !tokens.is_empty() {
        text.push_str(&format!(" tokens={tokens:?}"));
    }
    let processes = ints(anomaly.get("processes"));
    if !processes.is_empty() {
        text.push_str(&format!(" processes={processes:?}"));
    }
    text
}

/// Whether `reported` satisfies the expected anomaly `want` (same kind assumed).
fn matches(reported: &Value, want: &Value) -> bool {
    let indices = contains_all(&ints(reported.get("indices")), &ints(want.get("indices")));
    let tokens = contains_all(&ints(reported.get("tokens")), &ints(want.get("tokens")));
    let processes = contains_all(
        &ints(reported.get("processes")),
        &ints(want.get("processes")),
    );
    let lease = match want.get("lease_expired").and_then(Value::as_bool) {
        Some(expired) => reported.get("lease_expired").and_then(Value::as_bool) == Some(expired),
        None => true,
    };
    indices && tokens && processes && lease
}

/// Checks one case; returns what differs from the expectation.
fn check_case(name: &str, expected_path: &Path) -> Vec<String> {
    let expected = match read_expectation(expected_path) {
        Ok(value) => value,
        Err(e) => return vec![format!("{name}{EXPECTED_SUFFIX}: {e}")],
    };
    let Some(history) = history_of(name) else {
        return vec![format!(
            "no {name}.jsonl or {name}.edn beside its expectation"
        )];
    };
    let args = strings(expected.get("args"));
    let run = match run_check(&history, &args) {
        Ok(run) => run,
        Err(e) => return vec![e],
    };
    // `--threads 2` reads and checks in parallel: it must answer exactly the same.
    let threaded_args: Vec<String> = args
        .iter()
        .cloned()
        .chain(["--threads".into(), "2".into()])
        .collect();
    match run_check(&history, &threaded_args) {
        Ok(threaded) if (threaded.code, &threaded.stdout, &threaded.stderr) == (run.code, &run.stdout, &run.stderr) => {}
        Ok(threaded) => {
            return vec![format!(
                "--threads 2 answered otherwise: exit {:?}, stdout\n{}\nstderr\n{}\nwhere one thread gave exit {:?}, stdout\n{}\nstderr\n{}",
                threaded.code, threaded.stdout, threaded.stderr, run.code, run.stdout, run.stderr
            )]
        }
        Err(e) => return vec![format!("--threads 2: {e}")],
    }
    if let Some(error) = expected.get("error") {
        return check_rejection(&run, error);
    }
    check_verdict(&run, &expected)
}

fn check_rejection(run: &Run, error: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let line = error["line"].as_u64().unwrap_or(0);
    let field = error["field"].as_str().unwrap_or("");
    if run.code != Some(2) {
        problems.push(format!(
            "exit code {:?}, expected 2 (bad input); {}",
            run.code,
            tail(&run.stderr)
        ));
    }
    let at_line = format!(":{line}:");
    if !run.stderr.contains(&at_line) {
        problems.push(format!(
            "stderr does not name line {line} (`{at_line}`); {}",
            tail(&run.stderr)
        ));
    }
    if !run.stderr.contains(field) {
        problems.push(format!(
            "stderr does not name the field `{field}`; {}",
            tail(&run.stderr)
        ));
    }
    problems
}

fn check_verdict(run: &Run, expected: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    // true: exit 0; false: exit 1; null: unknown (no lock was exercised), exit 3.
    let valid = expected["valid"].clone();
    let want_code = match valid.as_bool() {
        Some(true) => 0,
        Some(false) => 1,
        None => 3,
    };
    if run.code != Some(want_code) {
        problems.push(format!(
            "exit code {:?}, expected {want_code}; {}",
            run.code,
            tail(&run.stderr)
        ));
    }
    let report: Value = match serde_json::from_str(&run.stdout) {
        Ok(report) => report,
        Err(e) => {
            let start: String = run.stdout.chars().take(200).collect();
            problems.push(format!("stdout is not a JSON report ({e}): {start:?}"));
            return problems;
        }
    };
    if report["valid"] != valid {
        problems.push(format!("\"valid\": {}, expected {valid}", report["valid"]));
    }
    let reported: Vec<Value> = report["anomalies"].as_array().cloned().unwrap_or_default();
    let got_kinds: BTreeSet<String> = reported
        .iter()
        .filter_map(|a| a["kind"].as_str().map(str::to_string))
        .collect();
    let want_kinds: BTreeSet<String> = strings(expected.get("kinds")).into_iter().collect();
    if got_kinds != want_kinds {
        problems.push(format!(
            "kinds {got_kinds:?}, expected {want_kinds:?}; reported: [{}]",
            reported.iter().map(describe).collect::<Vec<_>>().join("; ")
        ));
    }
    for want in expected["anomalies"].as_array().into_iter().flatten() {
        let kind = want["kind"].as_str().unwrap_or("");
        let same_kind: Vec<&Value> = reported
            .iter()
            .filter(|a| a["kind"].as_str() == Some(kind))
            .collect();
        if same_kind.is_empty() || same_kind.iter().any(|a| matches(a, want)) {
            continue; // a missing kind is already reported above
        }
        problems.push(format!(
            "no reported {kind} matches the expected {}; reported: [{}]",
            describe(want),
            same_kind
                .iter()
                .map(|a| describe(a))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    problems
}

#[test]
fn reference_histories_get_their_known_verdicts() {
    let cases = expectations();
    assert!(!cases.is_empty(), "no *.expected.json in history/");
    let mut failures = Vec::new();
    for (name, path) in &cases {
        let problems = check_case(name, path);
        if !problems.is_empty() {
            failures.push(format!("{name}:\n    {}", problems.join("\n    ")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} reference histories did not get their expected verdict:\n\n{}\n",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_jsonl_history_has_an_expectation() {
    let mut missing = Vec::new();
    for entry in fs::read_dir(history_dir()).expect("history/ is readable") {
        let path = entry.expect("history/ entry").path();
        let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if let Some(name) = file_name.strip_suffix(".jsonl") {
            let expected = history_dir().join(format!("{name}{EXPECTED_SUFFIX}"));
            if !expected.is_file() {
                missing.push(file_name.to_string());
            }
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "history files without a .expected.json: {missing:?}"
    );
}

/// The reference data itself (no binary needed): expectations are well-formed, and the JSONL
/// histories that should be accepted keep to the index rule of docs/src/reference/history.md.
#[test]
fn expectations_are_well_formed() {
    let mut problems = Vec::new();
    for (name, path) in expectations() {
        let mut problem = |text: String| problems.push(format!("{name}: {text}"));
        let expected = match read_expectation(&path) {
            Ok(value) => value,
            Err(e) => {
                problem(e);
                continue;
            }
        };
        if !expected["description"].is_string() {
            problem("no \"description\" sentence".into());
        }
        let Some(history) = history_of(&name) else {
            problem("no history file".into());
            continue;
        };
        if let Some(error) = expected.get("error") {
            if error["line"].as_u64().is_none_or(|line| line == 0) {
                problem("error.line must be a line number (1-based)".into());
            }
            if error["field"].as_str().is_none_or(str::is_empty) {
                problem("error.field must name a field".into());
            }
            continue;
        }
        // null: unknown, a history that exercised no lock.
        let valid = match &expected["valid"] {
            Value::Bool(v) => Some(*v),
            Value::Null if expected.get("valid").is_some() => None,
            _ => {
                problem("\"valid\" must be true, false or null".into());
                continue;
            }
        };
        let kinds = strings(expected.get("kinds"));
        let mut sorted = kinds.clone();
        sorted.sort();
        sorted.dedup();
        if sorted != kinds {
            problem(format!("kinds {kinds:?} are not sorted and distinct"));
        }
        if let Some(kind) = kinds.iter().find(|k| !KINDS.contains(&k.as_str())) {
            problem(format!("unknown kind {kind:?}"));
        }
        if valid.unwrap_or(true) != kinds.is_empty() {
            problem(format!("valid: {valid:?} with kinds {kinds:?}"));
        }
        for anomaly in expected["anomalies"].as_array().into_iter().flatten() {
            let kind = anomaly["kind"].as_str().unwrap_or("");
            if !kinds.iter().any(|k| k == kind) {
                problem(format!("anomaly of kind {kind:?} not in kinds"));
            }
            if !anomaly["indices"].is_array() {
                problem(format!("{kind} anomaly without an \"indices\" list"));
            }
        }
        if history.extension().is_some_and(|e| e == "jsonl") {
            if let Err(e) = check_index_sequence(&history) {
                problem(e);
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every complete line is a JSON object whose `index` is its line number - 1; only a final
/// line without a newline may be cut short.
fn check_index_sequence(path: &Path) -> Result<(), String> {
    let text = fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    let lines: Vec<&str> = text.split_terminator('\n').collect();
    for (n, line) in lines.iter().enumerate() {
        let last_unterminated = n + 1 == lines.len() && !text.ends_with('\n');
        match serde_json::from_str::<Value>(line) {
            Ok(event) if event["index"].as_u64() == Some(n as u64) => {}
            Ok(_) => return Err(format!("line {}: index is not {n}", n + 1)),
            Err(_) if last_unterminated => {}
            Err(e) => return Err(format!("line {}: not JSON: {e}", n + 1)),
        }
    }
    Ok(())
}

/// `lockaudit check --json | head`: the reader goes away before the report is written out.
/// The verdict's exit code still comes back, and nothing panics.
#[test]
fn a_reader_that_stops_early_leaves_the_verdict_standing() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.jsonl");
    // Enough keys for a report far larger than a pipe's buffer.
    let synth = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .args(["synth", "--events", "20000", "--keys", "5000", "--out"])
        .arg(&history)
        .output()
        .expect("run lockaudit synth");
    assert!(synth.status.success(), "{synth:?}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .arg("check")
        .arg(&history)
        .arg("--json")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lockaudit check");
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    stdout.read_exact(&mut first).expect("the report begins");
    drop(stdout);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `lockaudit shrink` on a recorded run (a killed holder's lock that never frees): the
/// shrunk file next to it is a history `check` reads, with the same anomaly and far fewer
/// events, and its timeline is drawn; bad input is named, exit 2.
#[test]
fn shrink_cuts_a_recorded_run_down_to_its_anomaly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run.jsonl");
    fs::copy(
        history_dir().join("runs/kill-clients-setnx-del.jsonl"),
        &run,
    )
    .expect("copy");
    let lockaudit = || Command::new(env!("CARGO_BIN_EXE_lockaudit"));
    let output = lockaudit().arg("shrink").arg(&run).output().expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("758 events -> "), "{stdout}");
    assert!(stdout.contains("kept: unavailable on lock:0"), "{stdout}");
    let shrunk = dir.path().join("run.shrunk.jsonl");
    assert!(dir
        .path()
        .join("run.shrunk-plots/timeline-lock_0.png")
        .is_file());

    let check = run_check(&shrunk, &[]).expect("checked");
    assert_eq!(check.code, Some(1), "{}", check.stderr);
    let report: Value = serde_json::from_str(&check.stdout).expect("a report");
    let events = report["stats"]["events"].as_u64().expect("events");
    assert!((2..=20).contains(&events), "{events} events");
    assert_eq!(report["checks"]["liveness"]["counts"]["unavailable"], 1);
    assert!(
        stdout.contains(&format!("758 events -> {events} events")),
        "{stdout}"
    );

    // Bad input: a kind the run does not show, a missing file, a line that is no event.
    let bad = |args: &[&str], wanted: &str| {
        let output = lockaudit().arg("shrink").args(args).output().expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(wanted), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    };
    let name = run.display().to_string();
    bad(
        &[&name, "--kind", "overlap"],
        "no overlap anomaly to keep: the checker finds unavailable ×1",
    );
    bad(&[&name, "--kind", "overlapp"], "did you mean \"overlap\"?");
    bad(&["/nonexistent/h.jsonl"], "/nonexistent/h.jsonl");
    let broken = dir.path().join("broken.jsonl");
    let text = fs::read_to_string(&run).expect("read");
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] =
        r#"{"index":2,"time":"soon","process":0,"type":"invoke","f":"acquire","key":"lock:0"}"#;
    fs::write(&broken, lines.join("\n") + "\n").expect("write");
    bad(
        &[&broken.display().to_string()],
        "broken.jsonl:3: field `time`",
    );
}
