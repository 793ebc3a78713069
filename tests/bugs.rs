//! The catalogue of real lock bugs in examples/bugs/: every entry says where the bug was
//! reported, its mechanism and the command, names the nemesis that reproduces it and what
//! proves it; and the fastest entries run in CI on real servers, so that a change that
//! stops finding a known bug fails the build. (The rates over ten seeds are measured, not
//! tested: docs/src/guide/known-bugs.md.)

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use lockaudit::workload::WorkloadSpec;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

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

/// The entries CI runs: those that prove their bug within seconds in every one of ten runs
/// (docs/src/guide/known-bugs.md has the figures), on servers a fresh machine gets from
/// `.ci/run`.
const IN_CI: [&str; 2] = ["redlock-clock-jump.toml", "set-nx-px-failover.toml"];

#[test]
fn every_entry_says_its_source_mechanism_and_command_and_what_proves_it() {
    let entries = entries();
    assert!(entries.len() >= 2, "{entries:?}");
    for path in &entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).unwrap();
        let header: Vec<&str> = text
            .lines()
            .take_while(|l| l.starts_with('#') || l.is_empty())
            .collect();
        let header = header.join("\n");
        let source = header
            .find("Source:")
            .unwrap_or_else(|| panic!("{name}: no `Source:` in its header"));
        assert!(
            header[source..].contains("https://"),
            "{name}: its source has no address"
        );
        assert!(
            header.contains("Mechanism:"),
            "{name}: no `Mechanism:` in its header"
        );
        assert!(
            header.contains(&format!("lockaudit run examples/bugs/{name}")),
            "{name}: its header does not give the command"
        );
        // The workload reads (its adapter's program exists, its schedule is beside it), and
        // names its own nemesis, whose entry says what must be found.
        let spec = WorkloadSpec::from_file(path).unwrap_or_else(|e| panic!("{e}"));
        let nemesis = spec
            .nemesis
            .clone()
            .unwrap_or_else(|| panic!("{name}: names no nemesis of its own"));
        if let Some(column) = spec.own_schedule_column() {
            assert!(
                Path::new(&nemesis).is_file(),
                "{name}: no schedule {nemesis}"
            );
            assert_eq!(spec.expect.len(), 1, "{name}: one entry, `{column}`");
        }
        let column = spec.own_schedule_column().unwrap_or(nemesis);
        let proof = spec
            .expect
            .get(&column)
            .unwrap_or_else(|| panic!("{name}: no [expect] entry `{column}`"));
        assert!(
            !proof.must.is_empty(),
            "{name}: `expect.{column}` has no `must`: nothing proves the bug"
        );
    }
    for name in IN_CI {
        assert!(
            entries.iter().any(|p| p.ends_with(name)),
            "{name} is no entry"
        );
    }
}

#[test]
fn the_fastest_entries_are_still_found() {
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
    // One cell per entry, under its own nemesis, each a pass: it found the proof.
    let audit: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("audit.json")).unwrap()).unwrap();
    let cells = audit["cells"].as_array().cloned().unwrap_or_default();
    assert_eq!(cells.len(), IN_CI.len(), "{text}");
    for cell in &cells {
        assert_eq!(cell["status"], "pass", "{cell}\n{text}");
        assert!(
            cell["found"].as_object().is_some_and(|f| !f.is_empty()),
            "{cell}"
        );
    }
}
