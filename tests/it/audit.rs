//! `lockaudit audit` end to end on small matrices, against real redis-server: the files it
//! writes, and its exit code following the workloads' expectations.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::assert_exit;

fn lockaudit() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lockaudit"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

/// The audit folder's `audit.json`.
fn audit_json(out: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join("audit.json")).expect("audit.json");
    serde_json::from_str(&text).expect("audit.json is JSON")
}

/// The targets of every Markdown link `[text](target)` in `md`.
fn link_targets(md: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = md;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').expect("a link closes");
        targets.push(after[..end].to_string());
        rest = &after[end..];
    }
    targets
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write");
}

#[test]
fn a_matrix_that_meets_its_expectations_passes_and_writes_every_format() {
    let dir = common::RunDir::new();
    let out = dir.path().join("audit");
    // lua-getset without faults must be `unavailable` (its release frees nothing);
    // set-nx-px without faults must be valid: both as workloads/*.toml expect.
    let output = lockaudit()
        .args(["audit", "--cells", "set-nx-px:none,lua-getset:none"])
        .args(["--time-limit", "5s", "--out"])
        .arg(&out)
        .output()
        .expect("runs");
    let stdout = assert_exit(&output, 0);
    // A line per cell as it ends, on stderr (progress); the matrix, the verdict, on stdout.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("lua-getset × none: unavailable"),
        "{stderr}"
    );
    assert!(stderr.contains("set-nx-px × none: valid"), "{stderr}");
    assert!(!stdout.contains("× none: "), "{stdout}");
    assert!(
        stdout.starts_with(&format!("audit: {}\n", out.display())),
        "{stdout}"
    );

    let json = audit_json(&out);
    assert_eq!(json["passed"], true);
    let cells = json["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 2);
    let lua = cells
        .iter()
        .find(|c| c["algorithm"] == "lua-getset")
        .expect("lua cell");
    assert!(
        lua["found"]["unavailable"].as_u64().unwrap_or(0) > 0,
        "{lua}"
    );
    // Each cell ran in its own folder, with its history and report.
    let run_dir = Path::new(lua["run_dir"].as_str().expect("run_dir"));
    assert!(run_dir.join("history.jsonl").exists());
    assert!(run_dir.join("report.json").exists());
    // With anomalies found, the cell's pictures are drawn and the Markdown links them.
    assert!(run_dir.join("index.html").exists());
    let md = std::fs::read_to_string(out.join("audit.md")).expect("md");
    assert!(md.contains("index.html"), "{md}");
    assert!(md.contains("| lua-getset"), "{md}");

    let xml = std::fs::read_to_string(out.join("audit.xml")).expect("xml");
    assert!(xml.contains("tests=\"2\""), "{xml}");
    assert!(xml.contains("failures=\"0\""), "{xml}");
}

#[test]
fn a_cell_that_differs_from_its_expectation_fails_the_audit() {
    let dir = common::RunDir::new();
    let workloads = dir.path().join("workloads");
    std::fs::create_dir_all(&workloads).expect("mkdir");
    // A workload that wrongly expects an overlap from a fault-free set-nx-px run.
    write(
        &workloads.join("set-nx-px.toml"),
        "algorithm = \"set-nx-px\"\nclients = 4\nworkers = 2\nkeys = 1\n\n[expect]\nnone = { must = [\"overlap\"] }\n",
    );
    let out = dir.path().join("audit");
    let output = lockaudit()
        .args(["audit", "--cells", "set-nx-px:none", "--time-limit", "3s"])
        .arg("--workloads")
        .arg(&workloads)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("expected but not found: overlap"),
        "{stdout}"
    );
    let xml = std::fs::read_to_string(out.join("audit.xml")).expect("xml");
    assert!(xml.contains("failures=\"1\""), "{xml}");
    assert!(xml.contains("<failure"), "{xml}");
}

#[test]
fn a_workload_file_is_a_row_of_its_own() {
    let dir = common::RunDir::new();
    let out = dir.path().join("audit");
    // Your own Lua scripts, judged by the [expect] table of their workload file.
    let output = lockaudit()
        .args(["audit", "--cells", "examples/lua/set-nx-px.toml:none"])
        .args(["--time-limit", "3s", "--out"])
        .arg(&out)
        .output()
        .expect("runs");
    assert_exit(&output, 0);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("examples/lua/set-nx-px.toml × none: valid"),
        "{stderr}"
    );
    assert!(out
        .join("examples_lua_set-nx-px/none/history.jsonl")
        .exists());
    let output = lockaudit()
        .args(["audit", "--algorithms", "examples/lua/nope.toml", "--out"])
        .arg(&out)
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no workload file"));
}

#[test]
fn bad_audit_arguments_are_named() {
    let output = lockaudit()
        .args([
            "audit",
            "--nemeses",
            "meteor",
            "--out",
            "/nonexistent/never",
        ])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("meteor"), "{stderr}");
    let output = lockaudit()
        .args([
            "audit",
            "--cells",
            "set-nx-px",
            "--out",
            "/nonexistent/never",
        ])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("algorithm:nemesis"));
}

/// A misspelt `[expect]` entry would drop what the cell must find: `run`, `audit` and
/// `adapter-test` refuse the file before starting anything, naming its line and field.
#[test]
fn a_misspelt_expectation_is_bad_input_for_every_command() {
    let dir = common::RunDir::new();
    let file = dir.path().join("mylock.toml");
    write(
        &file,
        "algorithm = \"set-nx-px\"\nclients = 2\n\n[expect]\nnone = {}\npause-client = { must = [\"overlap\"] }\n",
    );
    let out = dir.path().join("out");
    let name = file.display().to_string();
    for args in [
        vec!["run", name.as_str(), "--time-limit", "1s", "--out"],
        vec!["audit", "--algorithms", name.as_str(), "--out"],
    ] {
        let output = lockaudit().args(&args).arg(&out).output().expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("{name}:6: field `expect.pause-client`")),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains("did you mean \"pause-clients\"?"),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(!out.exists(), "{args:?}: nothing is run");
    }
    let output = lockaudit()
        .args(["adapter-test", name.as_str()])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains(":6: field `expect.pause-client`"));
}

#[test]
fn a_preset_that_cannot_act_is_not_applicable_in_every_format() {
    let dir = common::RunDir::new();
    let out = dir.path().join("audit");
    // set-nx-px never reads the client clock; RedLock's masters have no replicas.
    let output = lockaudit()
        .args([
            "audit",
            "--cells",
            "set-nx-px:clock-skew,redlock:failover,examples/lua/set-nx-px.toml:clock-skew",
        ])
        .args(["--time-limit", "3s", "--out"])
        .arg(&out)
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Not applicable is no failure...
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    // ...and no pass: the terminal says n/a and why, never ok.
    assert!(
        stderr.contains("set-nx-px × clock-skew: not run (n/a: clock-skew: set-nx-px never reads the client's wall clock"),
        "{stderr}"
    );
    assert!(stdout.contains("no replicas to fail over to"), "{stdout}");
    assert!(stdout.contains("3 cells: 0 ok, 3 n/a"), "{stdout}");

    let json = audit_json(&out);
    assert_eq!(json["counts"]["passed"], 0, "{json}");
    assert_eq!(json["counts"]["not_applicable"], 3, "{json}");
    for cell in json["cells"].as_array().expect("cells") {
        assert_eq!(cell["status"], "n/a", "{cell}");
        assert!(
            cell["why"].as_str().is_some_and(|w| !w.is_empty()),
            "{cell}"
        );
        // Not run: no run folder.
        assert!(cell["run_dir"].is_null(), "{cell}");
    }

    let xml = std::fs::read_to_string(out.join("audit.xml")).expect("xml");
    assert!(xml.contains("skipped=\"3\""), "{xml}");
    assert_eq!(
        xml.matches("<skipped message=\"not applicable: ").count(),
        3,
        "{xml}"
    );

    let md = std::fs::read_to_string(out.join("audit.md")).expect("md");
    assert!(md.contains("| set-nx-px | n/a |"), "{md}");
    assert!(md.contains("## Not applicable"), "{md}");
    assert!(md.contains("3 cells: 0 ok, 3 n/a"), "{md}");
}

/// An adapter that never knows whether an acquire took effect: no acquire is ever known to.
const ALWAYS_BUSY: &str = r#"
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    rid = req["id"]
    if req["type"] == "init":
        reply = {"in_reply_to": rid, "type": "init_ok", "name": "always busy", "fencing": False, "reentrant": False}
    else:
        reply = {"in_reply_to": rid, "type": "info", "error": "lost"}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
"#;

#[test]
fn a_cell_whose_run_proved_nothing_is_an_error_not_ok() {
    let dir = common::RunDir::new();
    write(&dir.path().join("busy.py"), ALWAYS_BUSY);
    let workload = dir.path().join("busy.toml");
    write(
        &workload,
        &format!(
            "algorithm = \"external\"\nadapter = [\"python3\", {:?}]\nclients = 2\nworkers = 1\nthink = \"10ms\"\n",
            dir.path().join("busy.py").display().to_string()
        ),
    );
    let out = dir.path().join("audit");
    let output = lockaudit()
        .args(["audit", "--cells"])
        .arg(format!("{}:none", workload.display()))
        .args(["--time-limit", "2s", "--out"])
        .arg(&out)
        .output()
        .expect("runs");
    let stdout = assert_exit(&output, 1);
    assert!(stdout.contains("unknown verdict"), "{stdout}");
    let json = audit_json(&out);
    assert_eq!(json["cells"][0]["status"], "error", "{json}");
    assert_eq!(json["counts"]["passed"], 0, "{json}");
}

#[test]
fn quick_runs_only_the_cells_that_must_find_something_each_stopping_once_proven() {
    let dir = common::RunDir::new();
    let out = dir.path().join("quick");
    // setnx-del must find `unavailable` under kill-clients and nothing without faults; with
    // --quick only the first runs, and stops long before its 30 s.
    let output = lockaudit()
        .args(["audit", "--quick", "--algorithms", "setnx-del"])
        .args([
            "--nemeses",
            "none,kill-clients",
            "--time-limit",
            "30s",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("runs");
    let stdout = assert_exit(&output, 0);
    let json = audit_json(&out);
    let cells = json["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 1, "{stdout}");
    assert_eq!(cells[0]["nemesis"], "kill-clients");
    let seconds = cells[0]["seconds"].as_f64().expect("seconds");
    assert!(seconds < 20.0, "the cell ran {seconds} s: {stdout}");
    // The JUnit file a CI system publishes has the one case.
    let xml = std::fs::read_to_string(out.join("audit.xml")).expect("audit.xml");
    assert!(xml.contains("tests=\"1\""), "{xml}");
}

#[test]
fn every_link_of_audit_md_leads_to_a_page_that_exists() {
    let dir = common::RunDir::new();
    let results = dir.path().join("results");
    let out = results.join("audit");
    // A valid cell, a cell with anomalies, a cell that is not applicable (RedLock has no
    // replicas to fail over to) and, in the grid, two cells not asked for.
    let output = lockaudit()
        .args([
            "audit",
            "--cells",
            "set-nx-px:none,lua-getset:none,redlock:failover",
        ])
        .args(["--time-limit", "5s", "--out"])
        .arg(&out)
        .output()
        .expect("runs");
    let stdout = assert_exit(&output, 0);
    assert!(
        !stdout.contains('?'),
        "cells not asked for are blank:\n{stdout}"
    );
    let md = std::fs::read_to_string(out.join("audit.md")).expect("audit.md");
    let targets = link_targets(&md);
    for target in &targets {
        let path = percent_encoding::percent_decode_str(target)
            .decode_utf8()
            .expect("UTF-8");
        assert!(
            out.join(path.as_ref()).is_file(),
            "audit.md links {target}, which does not exist:\n{md}"
        );
    }
    // Both cells that ran are linked, the valid one too; the n/a cell links nothing.
    let table: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
    let row = |name: &str| {
        *table
            .iter()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no row {name}:\n{md}"))
    };
    assert!(
        row("set-nx-px").contains("[ok](set-nx-px/none/index.html)"),
        "{md}"
    );
    assert!(
        row("lua-getset").contains("[unavailable](lua-getset/none/index.html)"),
        "{md}"
    );
    assert!(row("redlock").contains(" n/a |"), "{md}");
    assert!(!row("redlock").contains("]("), "{md}");
    assert!(!md.contains('?'), "{md}");
    assert!(targets.len() >= 2, "{targets:?}");

    // audit.html: the same matrix, each cell that ran linking its run's page.
    let links = common::assert_links_resolve(&out.join("audit.html"));
    for page in [
        "./set-nx-px/none/index.html",
        "./lua-getset/none/index.html",
    ] {
        assert!(links.iter().any(|l| l == page), "{page} not in {links:?}");
    }
    assert!(!links.iter().any(|l| l.contains("redlock")), "{links:?}");
    // The results folder's index lists the audit, its page linked.
    let index: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(results.join("index.json")).expect("index.json"),
    )
    .expect("JSON");
    let entries = index["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 1, "{index}");
    assert_eq!(entries[0]["kind"], "audit", "{index}");
    assert_eq!(entries[0]["verdict"], "passed", "{index}");
    assert_eq!(entries[0]["page"], "./audit/audit.html", "{index}");
    let links = common::assert_links_resolve(&results.join("index.html"));
    assert!(
        links.contains(&"./audit/audit.html".to_string()),
        "{links:?}"
    );
}

#[test]
fn a_valid_cell_runs_long_enough_for_its_fault_to_happen() {
    let dir = common::RunDir::new();
    let out = dir.path().join("fits");
    // set-nx-px × kill-clients must find nothing, so it is a valid cell, run for
    // --valid-time-limit; its first kill comes at 1 s and is healed by 1.8 s at the latest:
    // a 1 s cell would pass without any fault having happened.
    let output = lockaudit()
        .args([
            "audit",
            "--algorithms",
            "set-nx-px",
            "--nemeses",
            "kill-clients",
        ])
        .args(["--valid-time-limit", "1s", "--out"])
        .arg(&out)
        .output()
        .expect("runs");
    assert_exit(&output, 0);
    let json = audit_json(&out);
    let cell = &json["cells"].as_array().expect("cells")[0];
    let run_dir = Path::new(cell["run_dir"].as_str().expect("run_dir"));
    let history = std::fs::read_to_string(run_dir.join("history.jsonl")).expect("history");
    assert!(
        history.contains(r#""f":"kill""#),
        "the valid cell ran without its fault:\n{history}"
    );
}

/// Each cell of the audit in `out`, in matrix order: its row, and when it began and ended
/// (`started_s`, and that plus `seconds`: the run's own time, before its pictures).
fn cell_spans(out: &Path) -> Vec<(String, f64, f64)> {
    let json = audit_json(out);
    json["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|c| {
            let began = c["started_s"].as_f64().expect("started_s");
            let seconds = c["seconds"].as_f64().expect("seconds");
            let name = c["algorithm"].as_str().expect("algorithm").to_string();
            (name, began, began + seconds)
        })
        .collect()
}

#[test]
fn jobs_run_cells_side_by_side_and_the_matrix_keeps_their_order() {
    // Two valid cells of 2 s; `started_s` says when each began. With --jobs 2 the second
    // begins before the first ends; with --jobs 1 only after. Either way the matrix lists
    // them in the order asked, whichever ended first.
    let cells = "set-nx-px:none,setnx-del:none";
    let mut began = Vec::new();
    for jobs in ["1", "2"] {
        let dir = common::RunDir::new();
        let out = dir.path().join("jobs");
        let output = lockaudit()
            .args(["audit", "--cells", cells, "--jobs", jobs])
            .args(["--valid-time-limit", "2s", "--out"])
            .arg(&out)
            .output()
            .expect("runs");
        let stdout = assert_exit(&output, 0);
        let spans = cell_spans(&out);
        let rows: Vec<&str> = spans.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(rows, ["set-nx-px", "setnx-del"], "{stdout}");
        began.push((spans[1].1, spans[0].2, stdout));
    }
    let (second, first_ended, stdout) = &began[0];
    assert!(
        second >= first_ended,
        "--jobs 1: the second cell began at {second} s, before the first ended at {first_ended} s:\n{stdout}"
    );
    let (second, first_ended, stdout) = &began[1];
    assert!(
        second < first_ended,
        "--jobs 2: the second cell began at {second} s, after the first ended at {first_ended} s:\n{stdout}"
    );
}

#[test]
fn a_zookeeper_cell_runs_with_no_cell_beside_it() {
    common::require_zookeeper();
    // Three JVMs starting and electing take the cores: an audit runs a ZooKeeper cell
    // alone whatever --jobs says, so the Redis cell beside it in the list waits for it
    // (or it for the Redis cell), and neither verdict depends on the other's load.
    let dir = common::RunDir::new();
    let out = dir.path().join("alone");
    let output = lockaudit()
        .args([
            "audit",
            "--cells",
            "set-nx-px:none,zk-lock:none,setnx-del:none",
        ])
        .args(["--jobs", "3", "--valid-time-limit", "2s", "--out"])
        .arg(&out)
        .output()
        .expect("runs");
    // What matters here is when each cell ran, not its verdict: on a machine busy enough
    // that the servers answer late, a cell may find `unavailable` (seen once in CI), a
    // correct outcome of that run. Each cell must have run to a verdict, though.
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let statuses: Vec<_> = audit_json(&out)["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|c| c["status"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        statuses.len() == 3 && statuses.iter().all(|s| s == "pass" || s == "differs"),
        "{statuses:?}\n{stdout}"
    );
    let spans = cell_spans(&out);
    let zk = spans.iter().find(|s| s.0 == "zk-lock").expect("zk-lock");
    for other in spans.iter().filter(|s| s.0 != "zk-lock") {
        assert!(
            other.2 <= zk.1 || other.1 >= zk.2,
            "{} ran beside zk-lock: {spans:?}\n{stdout}",
            other.0
        );
    }
    // The two Redis cells, free to, did run side by side.
    let redis: Vec<_> = spans.iter().filter(|s| s.0 != "zk-lock").collect();
    assert!(
        redis[0].1 < redis[1].2 && redis[1].1 < redis[0].2,
        "{spans:?}\n{stdout}"
    );
}

/// The old preset names still read, in `--cells` and in a workload file's `nemesis` and
/// `[expect]` keys, each said once on stderr however often the file is read; the matrix's
/// columns and every file of the audit say the new names.
#[test]
fn old_preset_names_are_read_as_the_new_ones_with_a_notice() {
    let dir = common::RunDir::new();
    let workload = dir.path().join("old-names.toml");
    let all = r#"may = ["bad-lease", "overlap", "stale-write", "lost-update", "lost-lock", "unavailable", "starvation", "token-order", "duplicate-token"]"#;
    write(
        &workload,
        &format!("algorithm = \"set-nx-px\"\nclients = 2\nworkers = 1\nnemesis = \"pause-redis\"\n\n[expect]\nkill-redis = {{ {all} }}\npause-redis = {{ {all} }}\n"),
    );
    let out = dir.path().join("audit");
    let w = workload.display();
    let output = lockaudit()
        .args(["audit", "--jobs", "1", "--cells"])
        .arg(format!("{w}:kill-redis,{w}:pause-redis"))
        .args(["--time-limit", "3s", "--out"])
        .arg(&out)
        .output()
        .expect("runs");
    // Whatever each cell finds, its entry tolerates it.
    assert_exit(&output, 0);
    let stderr = String::from_utf8_lossy(&output.stderr);
    for (old, new) in [
        ("kill-redis", "kill-servers"),
        ("pause-redis", "pause-servers"),
    ] {
        let notice = format!("notice: nemesis preset `{old}` is the old name of `{new}`");
        let seen = stderr.lines().filter(|l| *l == notice).count();
        assert_eq!(seen, 1, "{notice}:\n{stderr}");
    }
    let json = audit_json(&out);
    let cells = json["cells"].as_array().expect("cells");
    let columns: Vec<&str> = cells.iter().filter_map(|c| c["nemesis"].as_str()).collect();
    assert_eq!(columns, ["kill-servers", "pause-servers"], "{json}");
    // Each cell was judged by the entry under its old name (else none: valid only).
    for cell in cells {
        assert_eq!(
            cell["expected"]["may"].as_array().map(Vec::len),
            Some(9),
            "{cell}"
        );
    }
    for file in ["audit.json", "audit.md", "audit.html", "audit.xml"] {
        let text = std::fs::read_to_string(out.join(file)).expect(file);
        assert!(text.contains("pause-servers"), "{file}: {text}");
        assert!(!text.contains("-redis"), "{file}: {text}");
    }
}

/// Cells whose verdict every run reaches: two expected valid without faults, and three
/// that must find what they find in 10 of 10 runs (docs/src/performance.md).
const SHARDED_CELLS: &str =
    "set-nx-px:none,setnx-del:kill-clients,lua-getset:none,setnx-del:none,set-nx-px:pause-clients";

/// An audit of SHARDED_CELLS into `out`, with `extra` flags; its exit code checked.
fn sharded_audit(out: &Path, extra: &[&str], code: i32) -> String {
    let output = lockaudit()
        .args(["audit", "--cells", SHARDED_CELLS, "--jobs", "2"])
        .args(["--time-limit", "20s", "--valid-time-limit", "2s"])
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .expect("runs");
    assert_exit(&output, code)
}

/// (algorithm, nemesis, status, expected) of each cell: what two real runs of the same
/// cells share (counts and times vary).
fn verdicts(json: &serde_json::Value) -> Vec<(String, String, String, String)> {
    let cells = json["cells"].as_array().expect("cells");
    cells
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].to_string();
            (s("algorithm"), s("nemesis"), s("status"), s("expected"))
        })
        .collect()
}

#[test]
fn shards_of_an_audit_merge_into_the_audit_run_whole() {
    let dir = common::RunDir::new();
    let whole = dir.path().join("whole");
    sharded_audit(&whole, &[], 0);
    let shards: Vec<_> = (1..=3).map(|k| dir.path().join(format!("s{k}"))).collect();
    for (k, shard) in shards.iter().enumerate() {
        sharded_audit(shard, &["--shard", &format!("{}/3", k + 1)], 0);
    }
    // Every 3rd cell from the k-th: 2, 2 and 1 cells.
    let sizes: Vec<usize> = (shards.iter())
        .map(|s| audit_json(s)["cells"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(sizes, [2, 2, 1]);
    assert_eq!(audit_json(&shards[1])["shard"]["index"], 2);
    assert!(audit_json(&whole).get("shard").is_none());

    let merged = dir.path().join("merged");
    let output = lockaudit()
        .args(["audit", "--merge"])
        .args([&shards[2], &shards[0], &shards[1]])
        .arg("--out")
        .arg(&merged)
        .output()
        .expect("runs");
    let stdout = assert_exit(&output, 0);
    assert!(stdout.contains("5 cells: 5 ok"), "{stdout}");
    let json = audit_json(&merged);
    assert_eq!(verdicts(&json), verdicts(&audit_json(&whole)));
    assert_eq!(json["passed"], true);
    // Every link of the merged audit.md leads into a shard's folder.
    let md = std::fs::read_to_string(merged.join("audit.md")).expect("audit.md");
    let targets = link_targets(&md);
    assert_eq!(targets.len(), 5, "{md}");
    for target in &targets {
        assert!(target.starts_with("../s"), "{target}");
        assert!(merged.join(target).is_file(), "{target} does not exist");
    }
    let xml = std::fs::read_to_string(merged.join("audit.xml")).expect("audit.xml");
    assert!(xml.contains("tests=\"5\""), "{xml}");

    // A shard missing, or of another seed: refused, nothing written.
    let refused = dir.path().join("refused");
    let merge = |dirs: &[&Path]| {
        let output = lockaudit()
            .args(["audit", "--merge"])
            .args(dirs)
            .arg("--out")
            .arg(&refused)
            .output()
            .expect("runs");
        assert_exit(&output, 2);
        assert!(!refused.exists());
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let stderr = merge(&[&shards[0], &shards[2]]);
    assert!(
        stderr.contains("shard 2 of 3 is missing: given shards 1, 3 of 3"),
        "{stderr}"
    );
    let seed2 = dir.path().join("seed2");
    sharded_audit(&seed2, &["--shard", "3/3", "--seed", "2"], 0);
    let stderr = merge(&[&shards[0], &shards[1], &seed2]);
    assert!(
        stderr.contains("are shards of different audits: seed 1 and 2"),
        "{stderr}"
    );
    // The merged audit's files would overwrite a shard's.
    let output = lockaudit()
        .args(["audit", "--merge"])
        .args(&shards)
        .arg("--out")
        .arg(&shards[1])
        .output()
        .expect("runs");
    assert_exit(&output, 2);
    assert!(String::from_utf8_lossy(&output.stderr).contains("is one of the shards"));
    assert_eq!(audit_json(&shards[1])["shard"]["index"], 2);
    // --merge takes the shards' cells: no flag that chooses or runs cells.
    let output = lockaudit()
        .args(["audit", "--merge"])
        .arg(&shards[0])
        .args(["--cells", "set-nx-px:none"])
        .output()
        .expect("runs");
    assert_exit(&output, 2);
}

/// `--rounds 3`: each cell's verdict is over the three rounds, by its rate (a workload's
/// `rate`, or every round), in audit.json and in the exit code; each round's own matrix,
/// with its seed, and the detection table are written beside it. setnx-del × kill-clients
/// found its `unavailable` in 10 of 10 runs of the docs' detection table.
#[test]
fn rounds_give_each_cell_its_rate_and_the_verdict_follows_it() {
    let dir = common::RunDir::new();
    let file = dir.path().join("setnx-del-rate.toml");
    let builtin = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/setnx-del.toml"),
    )
    .expect("workloads/setnx-del.toml");
    let with_rate = builtin.replace(
        "kill-clients = { must = [\"unavailable\"], may = [\"starvation\"] }",
        "kill-clients = { must = [\"unavailable\"], may = [\"starvation\"], rate = \"2/3\" }",
    );
    assert_ne!(with_rate, builtin, "the kill-clients entry is where it was");
    write(&file, &with_rate);
    let out = dir.path().join("audit");
    let cells = format!("setnx-del:kill-clients,{}:kill-clients", file.display());
    let output = lockaudit()
        .args(["audit", "--cells", &cells, "--rounds", "3"])
        .args(["--time-limit", "10s", "--seed", "5", "--out"])
        .arg(&out)
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let json = audit_json(&out);
    let cells = json["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 2, "{json}");
    let mut every_cell_at_its_rate = true;
    for (cell, required) in cells.iter().zip([3, 2]) {
        let rounds = &cell["rounds"];
        let (met, of) = (
            rounds["met"].as_u64().unwrap(),
            rounds["of"].as_u64().unwrap(),
        );
        assert_eq!(of, 3, "{cell}");
        assert!(met <= of, "{cell}");
        assert_eq!(rounds["required"], required, "{cell}");
        // The kinds counted are the cell's must kinds.
        let kinds: Vec<&String> = rounds["found"].as_object().expect("found").keys().collect();
        assert_eq!(kinds, ["unavailable"], "{cell}");
        let at_rate = met >= required;
        assert_eq!(cell["status"] == "pass", at_rate, "{cell}");
        every_cell_at_its_rate &= at_rate;
    }
    assert_eq!(json["passed"], every_cell_at_its_rate, "{json}");
    assert_eq!(
        output.status.code(),
        Some(if every_cell_at_its_rate { 0 } else { 1 }),
        "{stdout}"
    );
    // Each round's matrix with its seed (the audit's, plus the round), as its cells' runs.
    for round in 0..3u64 {
        let own = audit_json(&out.join(format!("round-{round}")));
        assert_eq!(own["seed"], 5 + round, "{own}");
        assert!(own["cells"][0].get("rounds").is_none(), "{own}");
        let run_dir = Path::new(own["cells"][0]["run_dir"].as_str().expect("run_dir"));
        let run: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).unwrap())
                .expect("run.json");
        assert_eq!(run["seed"], 5 + round, "{run}");
    }
    let reach = std::fs::read_to_string(out.join("reach.md")).expect("reach.md");
    assert!(
        reach.contains("| setnx-del | kill-clients | unavailable | "),
        "{reach}"
    );
    assert!(reach.contains(" (needs 2) | unavailable "), "{reach}");
    assert!(stdout.contains("3 rounds: 6 runs in "), "{stdout}");
    // The table shows each cell's rate.
    assert!(stdout.contains("/3"), "{stdout}");
}
