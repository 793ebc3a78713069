//! The shrinker's benchmark: `cargo bench --bench shrink` (release build).
//!
//! Records real runs with `lockaudit run` (redis-server on PATH), one per flaw, then shrinks
//! each run's history with `lockaudit shrink --kind K` for each kind the run is there for,
//! and prints events before and after and the wall time of the whole command (reading,
//! shrinking, writing, drawing the timeline).
//!
//! `LOCKAUDIT_BENCH_TIME_LIMIT=150s` (the default) is each run's length: about 100,000
//! events with 16 clients. `LOCKAUDIT_BENCH_HISTORIES=a.jsonl:overlap,b.jsonl:unavailable`
//! shrinks those histories instead of recording runs. `LOCKAUDIT_BENCH_DIR=folder` keeps the
//! runs there.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// A run to record and the kinds to shrink its history to.
struct Case {
    algorithm: &'static str,
    nemesis: &'static str,
    kinds: &'static [&'static str],
}

const CASES: [Case; 4] = [
    Case {
        algorithm: "set-nx-px",
        nemesis: "pause-clients",
        kinds: &["overlap", "stale-write"],
    },
    Case {
        algorithm: "setnx-del",
        nemesis: "kill-clients",
        kinds: &["unavailable"],
    },
    Case {
        algorithm: "lua-getset",
        nemesis: "none",
        kinds: &["unavailable"],
    },
    Case {
        algorithm: "reentrant",
        nemesis: "mix",
        kinds: &["lost-lock"],
    },
];

fn lockaudit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockaudit"))
}

/// Records one run; its history.
fn record(case: &Case, time_limit: &str, dir: &Path) -> PathBuf {
    let out = dir.join(format!("{}-{}", case.algorithm, case.nemesis));
    let started = Instant::now();
    let output = lockaudit()
        .args([
            "run",
            "--algorithm",
            case.algorithm,
            "--nemesis",
            case.nemesis,
        ])
        .args([
            "--clients",
            "16",
            "--workers",
            "2",
            "--time-limit",
            time_limit,
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("lockaudit run starts");
    // 1: anomalies, as wanted; anything else is no history to shrink.
    assert_eq!(
        output.status.code(),
        Some(1),
        "{} {}: {}",
        case.algorithm,
        case.nemesis,
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!(
        "recorded lockaudit run --algorithm {} --nemesis {} --clients 16 --time-limit {time_limit} in {:.0}s",
        case.algorithm,
        case.nemesis,
        started.elapsed().as_secs_f64()
    );
    out.join("history.jsonl")
}

/// Shrinks `history` to `kind` and prints the figures.
fn shrink(history: &Path, kind: &str, dir: &Path) {
    let out = dir.join(format!(
        "{}-{kind}.shrunk.jsonl",
        history
            .parent()
            .and_then(|p| p.file_name())
            .map_or_else(|| "history".into(), |n| n.to_string_lossy().into_owned())
    ));
    let started = Instant::now();
    let output = lockaudit()
        .arg("shrink")
        .arg(history)
        .args(["--kind", kind, "--out"])
        .arg(&out)
        .output()
        .expect("lockaudit shrink starts");
    let seconds = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&output.stdout);
    if output.status.code() != Some(0) {
        println!(
            "{:<60} {kind:<12} failed: {}",
            history.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
        return;
    }
    // "<file>: N events -> M events in Xs (C checks)"
    let first = stdout.lines().next().unwrap_or_default();
    let figures = first.rsplit_once(": ").map_or(first, |(_, f)| f);
    println!(
        "{:<60} {kind:<12} {figures}; the command {seconds:.2}s",
        history.display()
    );
}

fn main() {
    let kept = std::env::var("LOCKAUDIT_BENCH_DIR").ok().map(PathBuf::from);
    let temporary = tempfile::tempdir().expect("a temporary folder");
    let dir = kept.unwrap_or_else(|| temporary.path().to_path_buf());
    std::fs::create_dir_all(&dir).expect("the bench folder");
    let mut jobs: Vec<(PathBuf, String)> = Vec::new();
    match std::env::var("LOCKAUDIT_BENCH_HISTORIES") {
        Ok(list) => {
            for item in list.split(',').filter(|s| !s.is_empty()) {
                let (path, kind) = item
                    .rsplit_once(':')
                    .expect("LOCKAUDIT_BENCH_HISTORIES: path:kind,...");
                jobs.push((PathBuf::from(path), kind.to_string()));
            }
        }
        Err(_) => {
            let time_limit =
                std::env::var("LOCKAUDIT_BENCH_TIME_LIMIT").unwrap_or_else(|_| "150s".into());
            for case in &CASES {
                let history = record(case, &time_limit, &dir);
                for kind in case.kinds {
                    jobs.push((history.clone(), kind.to_string()));
                }
            }
        }
    }
    println!("history, kind, events before -> after, shrink time (as printed), whole command");
    for (history, kind) in &jobs {
        shrink(history, kind, &dir);
    }
}
