//! examples/bugs/, the catalogue of publicly reported lock bugs (docs/src/guide/known-bugs.md):
//! every entry loads as `run` and `audit` load it, names its own nemesis (a preset, or a
//! schedule file that loads), and keys its one `[expect]` entry by that nemesis. A mis-keyed
//! entry would not be refused by the loader: the audit would take the entry's own nemesis as
//! one that must leave the run valid, and report the bug's proof as a difference. Its header
//! names its public source, its mechanism and the two commands.

use std::path::Path;

use lockaudit::nemesis::schedule::Schedule;
use lockaudit::workload::spec::WorkloadSpec;

#[test]
fn every_entry_names_its_nemesis_its_proof_and_its_source() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut entries: Vec<_> = std::fs::read_dir(root.join("examples/bugs"))
        .expect("examples/bugs/")
        .map(|e| e.expect("a folder entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    entries.sort();
    assert!(entries.len() >= 7, "the catalogue shrank: {entries:?}");
    let mut bad = Vec::new();
    for path in &entries {
        let file = path.file_name().and_then(|n| n.to_str()).expect("a name");
        let rel = format!("examples/bugs/{file}");
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
        let column = match spec.own_schedule_column() {
            Some(column) => {
                if let Err(e) = Schedule::from_file(Path::new(&nemesis)) {
                    bad.push(format!("{rel}: its schedule: {e}"));
                }
                column
            }
            None => nemesis,
        };
        let keys: Vec<&str> = spec.expect.keys().map(String::as_str).collect();
        if keys != [column.as_str()] {
            bad.push(format!(
                "{rel}: [expect] must have one entry, `{column}` (its nemesis), not {keys:?}"
            ));
        }
        let text = std::fs::read_to_string(path).expect("readable");
        let header: Vec<&str> = text.lines().take_while(|l| l.starts_with('#')).collect();
        let header = header.join("\n");
        let run = format!("lockaudit run {rel}");
        let audit = format!("lockaudit audit --algorithms {rel} --repeat 10");
        for needed in ["Source:", "https://", "Mechanism:", &run, &audit] {
            if !header.contains(needed) {
                bad.push(format!("{rel}: its header lacks `{needed}`"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
