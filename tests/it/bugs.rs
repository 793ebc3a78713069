//! The catalogue of real lock bugs in examples/bugs/: every entry says where the bug was
//! reported, its mechanism and the command, names the nemesis that reproduces it and what
//! proves it; and the fastest entries run in CI on real servers, so that a change that
//! stops finding a known bug fails the build. (The rates over ten seeds are measured, not
//! tested: docs/src/guide/known-bugs.md.)

use crate::common;
use crate::common::root;

use std::path::{Path, PathBuf};
use std::process::Command;

use lockaudit::nemesis::Schedule;
use lockaudit::presets::Column;
use lockaudit::workload::WorkloadSpec;

/// The catalogue's entries, in name order.
fn entries() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("examples/bugs"))
        .expect("examples/bugs/")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

/// The entries CI runs: those that prove their bug within about three seconds in every one
/// of ten runs (docs/src/guide/known-bugs.md has the figures) and start no JVM, with the
/// servers and libraries a fresh machine gets from `.ci/run`.
const IN_CI: [&str; 7] = [
    "etcd-lock-pause.toml",
    "node-redlock-expired-grant.toml",
    "python-etcd3-typeerror.toml",
    "python-redis-lock-no-expire.toml",
    "rails-advisory-reconnect.toml",
    "redlock-clock-jump.toml",
    "set-nx-px-failover.toml",
];

#[test]
fn every_entry_says_its_source_mechanism_and_command_and_what_proves_it() {
    let entries = entries();
    assert!(entries.len() >= 10, "the catalogue shrank: {entries:?}");
    // Every problem of every entry, then one failure naming them all.
    let mut bad = Vec::new();
    for path in &entries {
        let file = path.file_name().and_then(|n| n.to_str()).expect("a name");
        let rel = format!("examples/bugs/{file}");
        // The workload reads (its adapter's program exists), and names its own nemesis.
        let spec = match WorkloadSpec::from_file(path) {
            Ok(spec) => spec,
            Err(e) => {
                bad.push(format!("{rel}: {e}"));
                continue;
            }
        };
        let Some(nemesis) = spec.nemesis.clone() else {
            bad.push(format!("{rel}: names no `nemesis`"));
            continue;
        };
        let column = nemesis.column();
        if nemesis.preset().is_none() {
            if let Err(e) = Schedule::from_file(Path::new(nemesis.name())) {
                bad.push(format!("{rel}: its schedule: {e}"));
            }
        }
        // One entry, keyed by that nemesis: the loader takes another preset's key too, which
        // the audit would read as "this nemesis must leave the run valid".
        let keys: Vec<&str> = spec.expect.keys().map(Column::name).collect();
        if keys != [column.name()] {
            bad.push(format!(
                "{rel}: [expect] must have one entry, `{column}` (its nemesis), not {keys:?}"
            ));
        } else if spec.expect[&column].must.is_empty() && spec.expect[&column].error.is_none() {
            bad.push(format!(
                "{rel}: `expect.{column}` has no `must` (nor `error`): nothing proves the bug"
            ));
        }
        let text = std::fs::read_to_string(path).expect("readable");
        let header: Vec<&str> = text.lines().take_while(|l| l.starts_with('#')).collect();
        let header = header.join("\n");
        let run = format!("lockaudit run {rel}");
        let audit = format!("lockaudit audit --algorithms {rel} --rounds 10");
        for needed in ["Source:", "https://", "Mechanism:", &run, &audit] {
            if !header.contains(needed) {
                bad.push(format!("{rel}: its header lacks `{needed}`"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    for name in IN_CI {
        assert!(
            entries.iter().any(|p| p.ends_with(name)),
            "{name} is no entry"
        );
    }
}

#[test]
fn the_fastest_entries_are_still_found() {
    common::require_python(&["redis", "redis_lock", "etcd3"]);
    common::require_etcd();
    common::require_node_redlock();
    common::require_postgres();
    let dir = common::RunDir::new();
    let out = dir.path().join("audit");
    let rows: Vec<String> = IN_CI
        .iter()
        .map(|name| format!("examples/bugs/{name}"))
        .collect();
    let output = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .current_dir(root())
        .args(["audit", "--algorithms", &rows.join(","), "--out"])
        .arg(&out)
        .output()
        .expect("run lockaudit audit");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(0), "{text}");
    // One cell per entry, under its own nemesis, each a pass: it found the proof, anomalies
    // or the error it must stop on (whose words its `why` quotes).
    let audit: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("audit.json")).unwrap()).unwrap();
    let cells = audit["cells"].as_array().cloned().unwrap_or_default();
    assert_eq!(cells.len(), IN_CI.len(), "{text}");
    for cell in &cells {
        assert_eq!(cell["status"], "pass", "{cell}\n{text}");
        let found = cell["found"].as_object().is_some_and(|f| !f.is_empty());
        let stopped_as_expected = cell["expected"]["error"]
            .as_str()
            .is_some_and(|e| cell["why"].as_str().is_some_and(|why| why.contains(e)));
        assert!(found || stopped_as_expected, "{cell}");
    }
}
