//! Helpers shared by the integration tests that run `lockaudit` and read its run folder.
// Each test crate uses the helpers it needs.
#![allow(dead_code)]

use std::path::Path;
use std::process::Output;

use serde_json::Value;

/// The run folder's `report.json`.
pub fn report(out: &Path) -> Value {
    let text = std::fs::read_to_string(out.join("report.json")).expect("report.json");
    serde_json::from_str(&text).expect("report.json is JSON")
}

/// The anomaly kinds a report lists, sorted, each once.
pub fn kinds(report: &Value) -> Vec<String> {
    let mut kinds: Vec<String> = report["anomalies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["kind"].as_str().map(str::to_string))
        .collect();
    kinds.sort();
    kinds.dedup();
    kinds
}

/// The `value.ttl_ms` of every acquire invoke in the run's history (None where it has none).
pub fn acquire_ttls(out: &Path) -> Vec<Option<i64>> {
    let text = std::fs::read_to_string(out.join("history.jsonl")).expect("history.jsonl");
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["f"] == "acquire" && e["type"] == "invoke")
        .map(|e| e["value"]["ttl_ms"].as_i64())
        .collect()
}

/// Asserts that `output` exited with `code`, showing its stdout and stderr if not; returns
/// its stdout.
pub fn assert_exit(output: &Output, code: i32) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(
        output.status.code(),
        Some(code),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The Python packages the ready adapters of examples/adapters/ need, as pip installs them
/// (`.ci/run` does).
pub const PIP_INSTALL: &str =
    "python3 -m pip install redis==8.1.0 python-redis-lock==4.0.1 pottery==3.0.1";

/// Fails the test, saying what to install, unless python3 can import every one of
/// `modules`: a test of a lock library must not pass without it.
pub fn require_python(modules: &[&str]) {
    let script = modules
        .iter()
        .map(|m| format!("import {m}"))
        .collect::<Vec<_>>()
        .join("; ");
    let ok = std::process::Command::new("python3")
        .args(["-c", &script])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "this test needs python3 with the modules {modules:?}: install them with `{PIP_INSTALL}` (bash .ci/run does)"
    );
}

/// Fails the test, saying what to install, unless node and node-redlock's packages are
/// there (examples/adapters/node-redlock/node_modules).
pub fn require_node_redlock() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let modules = root
        .join("examples/adapters/node-redlock/node_modules/redlock")
        .is_dir();
    assert!(
        node && modules,
        "this test needs Node.js and node-redlock: install them with `npm ci --prefix examples/adapters/node-redlock` (bash .ci/run does)"
    );
}

/// Fails the test, saying what to install, unless PostgreSQL's `postgres` and `initdb` are
/// found where lockaudit looks for them (PATH, then /usr/lib/postgresql/<version>/bin).
pub fn require_postgres() {
    if let Err(e) = lockaudit::cluster::postgres_bin_dir(None) {
        panic!("this test needs PostgreSQL: apt-get install postgresql (bash .ci/run does): {e}");
    }
}

/// A temporary folder others may pass through: as root, postgres runs as the `postgres`
/// user, who cannot enter a 0700 temporary folder.
pub fn open_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("a temporary folder");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod the temporary folder");
    dir
}
