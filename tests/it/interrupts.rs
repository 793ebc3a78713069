//! Interrupts end cleanly, against real servers: Ctrl-C removes the servers' data a normal
//! end removes (etcd's WAL); a run killed outright (SIGKILL) leaves a note the next run
//! cleans up from; an interrupted audit writes its matrix with the cut cell marked; a
//! signal after the verdict changes neither the report nor the exit.

use crate::common;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_exit, report};
use nix::sys::signal::Signal;
use serde_json::Value;

fn lockaudit() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lockaudit"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

fn signal(child: &Child, signal: Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).expect("signal");
}

/// Waits until `ready` holds (ending `child` and failing if it does not within 60 s).
fn wait_until(child: &mut Child, what: &str, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("not within 60 s, or the run ended first: {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn lines_in(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// The etcd members' data folders of run `out`.
fn etcd_data(out: &Path) -> Vec<PathBuf> {
    (0..3).map(|i| out.join(format!("etcd/etcd-{i}"))).collect()
}

/// The notes lockaudit keeps in `results` while it runs.
fn notes(results: &Path) -> Vec<String> {
    std::fs::read_dir(results)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(".lockaudit-"))
                .collect()
        })
        .unwrap_or_default()
}

/// A 30 s etcd-lock run into `out`, once its members have data and the history 100 events.
fn etcd_run_under_way(out: &Path) -> Child {
    common::require_etcd();
    let mut child = lockaudit()
        .args(["run", "--seed", "1", "--algorithm", "etcd-lock"])
        .args(["--nemesis", "none", "--time-limit", "30s", "--out"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lockaudit run");
    let history = out.join("history.jsonl");
    wait_until(&mut child, "100 events and the members' data", || {
        lines_in(&history) >= 100 && etcd_data(out).iter().all(|d| d.is_dir())
    });
    child
}

#[test]
fn ctrl_c_removes_the_etcd_members_data_as_a_normal_end_does() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let out = results.join("etcd");
    let child = etcd_run_under_way(&out);
    assert_eq!(notes(&results).len(), 1, "no note while it runs");
    signal(&child, Signal::SIGINT);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert_eq!(report(&out)["interrupted"], "SIGINT");
    for data in etcd_data(&out) {
        assert!(!data.exists(), "{} is left: {stderr}", data.display());
    }
    // What a normal end keeps stays: the members' logs.
    assert!(out.join("etcd/etcd-0.log").is_file());
    assert!(
        stderr.contains("lockaudit: removed the servers' data folders ("),
        "{stderr}"
    );
    assert!(notes(&results).is_empty(), "{:?}", notes(&results));
}

#[test]
fn a_sigkilled_runs_leftovers_are_cleaned_by_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let out = results.join("killed");
    let mut child = etcd_run_under_way(&out);
    let pid = child.id();
    signal(&child, Signal::SIGKILL);
    child.wait().unwrap();
    // A SIGKILL runs no code: the data and the note stay.
    assert!(etcd_data(&out).iter().all(|d| d.is_dir()));
    assert_eq!(notes(&results), [format!(".lockaudit-{pid}.json")]);

    let output = lockaudit()
        .args(["run", "--seed", "1", "--algorithm", "set-nx-px"])
        .args(["--time-limit", "1s", "--out"])
        .arg(results.join("next"))
        .output()
        .expect("run lockaudit");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(matches!(output.status.code(), Some(0 | 1 | 3)), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "lockaudit: lockaudit {pid} was killed before it could clean up"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("removed 3 data folder(s)"), "{stderr}");
    for data in etcd_data(&out) {
        assert!(!data.exists(), "{} is left: {stderr}", data.display());
    }
    assert!(out.join("history.jsonl").is_file(), "the history stays");
    assert!(notes(&results).is_empty(), "{:?}", notes(&results));
}

#[test]
fn an_interrupted_audit_writes_its_matrix_with_the_cut_cell_marked() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("audit");
    // One cell after the other: set-nx-px's 2 s, then lua-getset's 30 s, whole.
    let mut child = lockaudit()
        .args([
            "audit",
            "--cells",
            "set-nx-px:none,lua-getset:none",
            "--jobs",
            "1",
        ])
        .args([
            "--valid-time-limit",
            "2s",
            "--time-limit",
            "30s",
            "--no-early-stop",
        ])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lockaudit audit");
    let cut = out.join("lua-getset/none/history.jsonl");
    wait_until(&mut child, "the second cell under way", || {
        lines_in(&cut) >= 100
    });
    signal(&child, Signal::SIGINT);
    let output = child.wait_with_output().unwrap();
    let stdout = assert_exit(&output, 130);
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("audit.json")).unwrap()).unwrap();
    assert_eq!(json["interrupted"], "SIGINT", "{json}");
    assert_eq!(json["passed"], false, "{json}");
    let cells = json["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 2, "{json}");
    let finished = &cells[0];
    assert_eq!(finished["algorithm"], "set-nx-px", "{json}");
    assert!(finished["interrupted"].is_null(), "{json}");
    assert!(finished["events"].as_u64() > Some(0), "{json}");
    let cut = &cells[1];
    assert_eq!(cut["algorithm"], "lua-getset", "{json}");
    assert_eq!(cut["status"], "error", "{json}");
    assert_eq!(cut["interrupted"], "SIGINT", "{json}");
    assert!(cut["events"].as_u64() >= Some(100), "{json}");
    for file in ["audit.md", "audit.html", "audit.xml"] {
        assert!(out.join(file).is_file(), "no {file}");
    }
    assert!(
        stdout.contains("interrupted by SIGINT: 1 cell(s) finished, 1 cut short"),
        "{stdout}"
    );
    assert!(stdout.contains("lua-getset"), "no matrix: {stdout}");
}

/// Runs `lockaudit run ARGS --out OUT`, held after its verdict by the test hook, and sends
/// SIGTERM then: the process's output and what it said on stderr.
fn signalled_after_the_verdict(args: &[&str], out: &Path) -> (std::process::Output, String) {
    let mut child = lockaudit()
        .arg("run")
        .args(args)
        .arg("--out")
        .arg(out)
        .env("LOCKAUDIT_HOLD_AFTER_VERDICT", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lockaudit run");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut said = String::new();
    while !said.contains("holding after the verdict") {
        let mut line = String::new();
        if stderr.read_line(&mut line).expect("stderr") == 0 {
            panic!("the run ended without holding after its verdict:\n{said}");
        }
        said += &line;
    }
    signal(&child, Signal::SIGTERM);
    std::io::Read::read_to_string(&mut stderr, &mut said).expect("stderr");
    (child.wait_with_output().unwrap(), said)
}

#[test]
fn a_signal_after_the_verdict_leaves_the_runs_report_and_exit() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // lua-getset's release frees nothing: its verdict is `unavailable`, exit 1.
    let (output, said) = signalled_after_the_verdict(
        &[
            "--seed",
            "1",
            "--algorithm",
            "lua-getset",
            "--time-limit",
            "2s",
        ],
        &out,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report = report(&out);
    assert!(report.get("interrupted").is_none(), "{report}");
    assert_eq!(report["valid"], false, "{report}");
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(said.contains("SIGTERM after the verdict"), "{said}");
    assert!(!stdout.contains("interrupted"), "{stdout}");
    assert!(stdout.contains("report: "), "{stdout}");
}

#[test]
fn a_signal_after_an_untested_verdict_leaves_its_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    // One crash point, armed while the first holder keeps the one key past it: never
    // reached, so the run is valid and untested.
    let schedule = dir.path().join("unreached.toml");
    std::fs::write(
        &schedule,
        "[[fault]]\nat = \"500ms\"\nkind = \"crash-point\"\ntarget = \"worker-0\"\npoint = \"set-nx-px:before-release\"\nduration = \"1s\"\n",
    )
    .unwrap();
    let out = dir.path().join("run");
    let schedule = schedule.to_str().unwrap();
    let (output, said) = signalled_after_the_verdict(
        &[
            "--seed",
            "1",
            "--algorithm",
            "set-nx-px",
            "--keys",
            "1",
            "--clients",
            "4",
            "--ttl",
            "10s",
            "--hold",
            "3s",
            "--time-limit",
            "2s",
            "--nemesis",
            schedule,
        ],
        &out,
    );
    let report = report(&out);
    assert!(report["untested"].is_string(), "{report}");
    assert_eq!(output.status.code(), Some(3), "{said}");
    assert!(said.contains("SIGTERM after the verdict"), "{said}");
}
