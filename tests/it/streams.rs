//! Which stream carries what (docs/src/reference/output.md), against real redis-server: the
//! verdict and `--json` on stdout, progress and notices on stderr; a reader that leaves
//! early; and the folder of a run that could not start.

use crate::common;

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::assert_exit;
use serde_json::Value;

fn lockaudit() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lockaudit"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

/// `lockaudit run` of lua-getset without faults for 2 s into `out`: its release frees
/// nothing, so every such run finds `unavailable` and exits 1.
fn lua_getset(out: &Path) -> Command {
    let mut c = lockaudit();
    c.args(["run", "--seed", "1", "--algorithm", "lua-getset"])
        .args(["--time-limit", "2s", "--out"])
        .arg(out);
    c
}

fn assert_no_panic(output: &Output) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ne!(output.status.code(), Some(101), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// stdout as one JSON document, which must be `file`'s own text, not a second shape of it.
fn printed_as(output: &Output, file: &Path) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let printed = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{stdout}"));
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    assert_eq!(stdout, text);
    printed
}

/// The exit code report.json's verdict stands for.
fn verdict_code(report: &Value) -> i32 {
    match report["valid"].as_bool() {
        Some(true) => 0,
        Some(false) => 1,
        None => 3,
    }
}

#[test]
fn run_json_prints_report_json_alone_and_the_rest_on_stderr() {
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    // 6 s: long enough for a progress line (one each 5 s where no terminal shows the bar).
    let output = lockaudit()
        .args(["run", "--json", "--seed", "1", "--algorithm", "set-nx-px"])
        .args(["--time-limit", "6s", "--out"])
        .arg(&out)
        .output()
        .expect("run lockaudit");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let printed = printed_as(&output, &out.join("report.json"));
    // The exit code is the verdict's, as without --json.
    assert_eq!(
        output.status.code(),
        Some(verdict_code(&printed)),
        "{stderr}"
    );
    // What the text would have said on stdout about where things are, and the progress.
    for line in [
        format!("run: {}\n", out.display()),
        format!("report: {}\n", out.join("report.json").display()),
        "progress: 5s, ".to_string(),
        "seed: 1 (".to_string(),
    ] {
        assert!(stderr.contains(&line), "no {line:?} on stderr:\n{stderr}");
    }
}

#[test]
fn audit_json_prints_audit_json_alone_and_the_cells_on_stderr() {
    let dir = common::RunDir::new();
    let out = dir.path().join("audit");
    let output = lockaudit()
        .args(["audit", "--json", "--cells", "set-nx-px:none"])
        .args(["--valid-time-limit", "2s", "--out"])
        .arg(&out)
        .output()
        .expect("run lockaudit");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let printed = printed_as(&output, &out.join("audit.json"));
    let passed = printed["passed"].as_bool().expect("passed");
    assert_eq!(output.status.code(), Some(if passed { 0 } else { 1 }));
    assert!(stderr.contains("[  1/1] set-nx-px × none: "), "{stderr}");
    assert!(
        stderr.contains(&format!("{}\n", out.join("audit.json").display())),
        "{stderr}"
    );
}

/// stdout's reader gone before the first line (`| true`): every write to stdout finds a
/// closed pipe. The run goes on, stops its servers, writes its report, and exits as its
/// verdict says.
#[test]
fn a_closed_stdout_ends_no_run() {
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let output = lua_getset(&out)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run lockaudit");
    assert_no_panic(&output);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(out.join("report.json").is_file());
    assert!(out.join("index.html").is_file(), "the plots were drawn");
}

/// `lockaudit run | head -1`: the first line is the run folder, and the rest may find
/// the reader gone.
#[test]
fn head_reads_the_run_folder_first_and_the_run_ends_as_its_verdict_says() {
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let mut child = lua_getset(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lockaudit");
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("a line");
    // The reader is dropped here, as head exits after its line.
    let output = child.wait_with_output().expect("lockaudit ends");
    assert_no_panic(&output);
    assert_eq!(first, format!("run: {}\n", out.display()));
    assert_eq!(output.status.code(), Some(1));
}

/// A run whose servers cannot be reached (here a port that refuses) made its folder for
/// nothing: the folder goes, with the `results/` it made for it, and stderr says so. A
/// folder the user made stays as it was.
#[test]
fn a_run_that_cannot_start_removes_the_folder_it_made() {
    let dir = common::RunDir::new();
    let (_socket, addr) = common::refusing_port();
    let url = format!("redis://{addr}");
    let out = dir.path().join("results/run");
    let output = lockaudit()
        .args(["run", "--seed", "1", "--time-limit", "1s", "--redis", &url])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run lockaudit");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(!out.exists(), "{stderr}");
    assert!(!dir.path().join("results").exists(), "{stderr}");
    assert!(
        stderr.contains(&format!("lockaudit: removed {}: ", out.display())),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "no verdict, so nothing on stdout");

    // The user's own folder, with something in it: left alone.
    let mine = dir.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), "mine").unwrap();
    let output = lockaudit()
        .args(["run", "--seed", "1", "--time-limit", "1s", "--redis", &url])
        .arg("--out")
        .arg(&mine)
        .output()
        .expect("run lockaudit");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(mine.join("notes.txt")).unwrap(),
        "mine"
    );
    assert!(
        stderr.contains(&format!(
            "lockaudit: kept {}: it was there before the run",
            mine.display()
        )),
        "{stderr}"
    );
}

/// A real redis-server that cannot bind its port (another listener has it) says why in its
/// log: that folder is kept, and stderr says why.
#[test]
fn a_server_that_failed_to_start_keeps_the_folder_with_its_log() {
    let dir = common::RunDir::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
    let port = taken.local_addr().unwrap().port();
    // redis-server as ever, but told (last, so it wins) to listen on the taken port.
    let wrapper = dir.path().join("redis-server");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nexec redis-server \"$@\" --port {port}\n"),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .unwrap();
    let out = dir.path().join("run");
    let output = lockaudit()
        .args(["run", "--seed", "1", "--time-limit", "1s", "--redis-server"])
        .arg(&wrapper)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run lockaudit");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    let log = std::fs::read_to_string(out.join("redis/master-0.log")).expect("the log stays");
    assert!(log.contains("Address already in use"), "{log}");
    assert!(
        stderr.contains(&format!(
            "lockaudit: kept {}: it has logs that may say why (redis/master-0.log",
            out.display()
        )),
        "{stderr}"
    );
    drop(taken);
}

/// An audit cell whose run cannot start leaves no folder, and links none.
#[test]
fn an_audit_cell_that_cannot_start_leaves_no_folder() {
    let dir = common::RunDir::new();
    let out = dir.path().join("audit");
    let output = lockaudit()
        .args(["audit", "--cells", "set-nx-px:none"])
        .args(["--redis-server", "/nonexistent/redis-server", "--out"])
        .arg(&out)
        .output()
        .expect("run lockaudit");
    assert_exit(&output, 1);
    assert!(!out.join("set-nx-px").exists());
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("audit.json")).unwrap()).unwrap();
    let cell = &json["cells"][0];
    assert_eq!(cell["status"], "error", "{cell}");
    assert!(cell["run_dir"].is_null(), "{cell}");
}
