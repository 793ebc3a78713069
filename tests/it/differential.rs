//! Differential tests: the real checker (`lockaudit::checker::check`) against a second,
//! deliberately naive one written independently from the format's rules (`tests/it/naive/`).
//! Both must report the same anomalies on
//!
//! 1. every history in `history/` that is not a bad input;
//! 2. the recorded runs of real Redis in `history/runs/`;
//! 3. random histories of `lockaudit::synth` (a correct lock, and each injected violation);
//! 4. random histories of a possibly faulty lock (`tests/it/faulty/`).
//!
//! What is compared: each anomaly in a normalised form (`naive::Finding`, described in
//! `tests/it/naive/mod.rs`): kind, key, the event indices that identify it (the holds'
//! beginning acquire `ok`s and the failing or stale operation's completion), the processes,
//! and per kind a detail (overlap: `lease_expired`; unavailable: the free stretch's start
//! and end; duplicate-token: the token, with one finding per token standing for every extra
//! hold; token-order: the whole cycle group each reported cycle lies in). The two lists must
//! be equal as multisets; `lost-update` by kind and key only (one per counter key).
//!
//! Random cases: 64 per generator by default, from a fixed seed. More with
//! `LOCKAUDIT_DIFF_CASES=10000`, other histories with `LOCKAUDIT_DIFF_SEED=<n>`. A
//! disagreement is minimised (events dropped while the reader accepts the rest and the two
//! checkers still disagree the same way) and written to `target/tmp/differential/`; the
//! failure prints both verdicts.

use crate::common::jsonl;
use crate::faulty;
use crate::naive;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use lockaudit::checker::{check, CheckOptions};
use lockaudit::history::reader::read_jsonl;
use lockaudit::history::threaded::read_jsonl_threaded;
use lockaudit::report::{AnomalyKind, Report};
use lockaudit::synth::{self, SynthConfig};
use naive::{Analysis, Finding, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

const MS: i64 = 1_000_000;

// ---------------------------------------------------------------------------------------
// Running both checkers.

fn options_of(bounds: &Options) -> CheckOptions {
    CheckOptions {
        liveness_bound_ns: bounds.liveness_ns,
        starvation_bound_ns: bounds.starvation_ns,
        fairness_tolerance_ns: bounds.fairness_ns,
        anomaly_limit: usize::MAX,
        ..CheckOptions::default()
    }
}

/// The real reader and checker; `None` if the reader rejects the text. Each history is also
/// read and checked with two threads (`check --threads 2`), which must give the same.
fn real_check(text: &str, options: &Options) -> Result<Report, String> {
    let history =
        read_jsonl(text.as_bytes(), "differential.jsonl", None).map_err(|e| e.to_string())?;
    let report = check(&history, &options_of(options));
    let threaded = read_jsonl_threaded(text.as_bytes(), "differential.jsonl", None, 2)
        .map_err(|e| format!("read by one thread, but not by two: {e}"))?;
    let two = CheckOptions {
        threads: 2,
        ..options_of(options)
    };
    let again = check(&threaded, &two);
    let json = |report: &Report| serde_json::to_string(report).expect("a report as JSON");
    assert_eq!(json(&again), json(&report), "two threads differ from one");
    Ok(report)
}

fn is_acquire_ok(line: Option<&naive::Line>) -> bool {
    line.is_some_and(|l| l.client().is_some() && l.f == "acquire" && l.ty == "ok")
}

/// The real report's anomalies in the naive checker's normalised form.
fn real_findings(report: &Report, analysis: &Analysis) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut duplicates: BTreeMap<(String, i64), Finding> = BTreeMap::new();
    for a in &report.anomalies {
        let line = |i: &u64| analysis.line(*i);
        let acquire_oks: Vec<u64> = a
            .indices
            .iter()
            .copied()
            .filter(|i| is_acquire_ok(line(i)))
            .collect();
        let mut f = Finding {
            kind: a.kind.to_string(),
            key: a.key.clone(),
            events: acquire_oks.clone(),
            processes: a.processes.clone(),
            detail: String::new(),
            count: 1,
        };
        match a.kind.as_str() {
            "overlap" => {
                f.detail = format!("lease_expired={}", a.lease_expired.unwrap_or(false));
            }
            "lost-lock" => {
                f.events.extend(a.indices.iter().copied().filter(|i| {
                    line(i)
                        .is_some_and(|l| (l.f == "renew" || l.f == "release") && l.ty != "invoke")
                }));
            }
            "stale-write" => {
                // The stale write is the accepted write answered last.
                let stale = a
                    .indices
                    .iter()
                    .filter_map(&line)
                    .filter(|l| l.f == "write" && l.ty == "ok")
                    .max_by_key(|l| l.time);
                if let Some(w) = stale {
                    let p = w.client();
                    f.events = acquire_oks
                        .iter()
                        .copied()
                        .filter(|i| line(i).and_then(|l| l.client()) == p)
                        .chain([w.index])
                        .collect();
                    f.processes = p.into_iter().collect();
                }
            }
            "duplicate-token" => {
                let token = a.tokens.first().copied().unwrap_or(i64::MIN);
                let group = duplicates
                    .entry((a.key.clone(), token))
                    .or_insert_with(|| Finding {
                        kind: a.kind.to_string(),
                        key: a.key.clone(),
                        events: Vec::new(),
                        processes: Vec::new(),
                        detail: format!("token={token}"),
                        count: 0,
                    });
                group.events.extend(acquire_oks);
                group.processes.extend(a.processes.iter().copied());
                group.count += 1;
                continue;
            }
            "token-order" => {
                // Named by the whole group the reported cycle lies in.
                match analysis
                    .groups
                    .iter()
                    .find(|g| acquire_oks.iter().all(|i| g.contains(i)))
                {
                    Some(group) => {
                        f.events = group.clone();
                        f.processes = group
                            .iter()
                            .filter_map(|i| analysis.hold_begun_by(*i))
                            .map(|h| h.process)
                            .collect();
                    }
                    None => f.detail = "cycle in no group of the naive checker".into(),
                }
            }
            "unavailable" => {
                f.events = Vec::new();
                f.detail = format!("{}..{}", a.start, a.end);
            }
            "starvation" => {
                f.events = a.indices.clone();
                f.processes.truncate(1);
            }
            "bad-lease" | "unfair" => {}
            "lost-update" => {
                f.events = Vec::new();
                f.processes = Vec::new();
            }
            _ => f.events = a.indices.clone(),
        }
        out.push(f);
    }
    out.extend(duplicates.into_values());
    for f in &mut out {
        f.events.sort_unstable();
        f.events.dedup();
        f.processes.sort_unstable();
        f.processes.dedup();
    }
    out.sort();
    out
}

/// The findings of each side that the other lacks.
#[derive(Debug, Default, Clone)]
struct Diff {
    only_real: Vec<Finding>,
    only_naive: Vec<Finding>,
}

impl Diff {
    fn is_empty(&self) -> bool {
        self.only_real.is_empty() && self.only_naive.is_empty()
    }

    /// Which side reported which kinds alone: what a minimisation must keep.
    fn class(&self) -> BTreeSet<String> {
        let real = self
            .only_real
            .iter()
            .map(|f| format!("real-only {}", f.kind));
        let naive = self
            .only_naive
            .iter()
            .map(|f| format!("naive-only {}", f.kind));
        real.chain(naive).collect()
    }
}

fn multiset_diff(a: &[Finding], b: &[Finding]) -> Vec<Finding> {
    let mut rest: Vec<&Finding> = b.iter().collect();
    let mut out = Vec::new();
    for f in a {
        match rest.iter().position(|g| *g == f) {
            Some(i) => {
                rest.swap_remove(i);
            }
            None => out.push(f.clone()),
        }
    }
    out
}

/// Both verdicts on one history.
struct Outcome {
    report: Report,
    real: Vec<Finding>,
    naive: Vec<Finding>,
    diff: Diff,
}

/// Runs both checkers on `text`; `Err` if the real reader rejects it.
fn compare(text: &str, options: &Options) -> Result<Outcome, String> {
    let report = real_check(text, options)?;
    let lines = naive::parse(text)?;
    let analysis = naive::check(lines, options);
    let real = real_findings(&report, &analysis);
    let naive = analysis.findings.clone();
    let diff = Diff {
        only_real: multiset_diff(&real, &naive),
        only_naive: multiset_diff(&naive, &real),
    };
    Ok(Outcome {
        report,
        real,
        naive,
        diff,
    })
}

// ---------------------------------------------------------------------------------------
// Minimising a disagreement and showing it.

/// A history as JSON objects in file order.
fn objects(text: &str) -> Vec<serde_json::Map<String, Value>> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v.as_object().cloned())
        .collect()
}

fn render(objects: &[serde_json::Map<String, Value>]) -> String {
    let mut text = String::new();
    for (i, o) in objects.iter().enumerate() {
        let mut o = o.clone();
        o.insert("index".into(), Value::from(i as u64));
        text.push_str(&serde_json::to_string(&Value::Object(o)).unwrap());
        text.push('\n');
    }
    text
}

/// Units that can be dropped together: a client operation (its invoke and completion), or
/// one nemesis event. Positions into `objects`.
fn units(objects: &[serde_json::Map<String, Value>]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut open: BTreeMap<u64, usize> = BTreeMap::new();
    for (pos, o) in objects.iter().enumerate() {
        match o.get("process").and_then(Value::as_u64) {
            None => out.push(vec![pos]),
            Some(p) => {
                if o.get("type").and_then(Value::as_str) == Some("invoke") {
                    open.insert(p, out.len());
                    out.push(vec![pos]);
                } else if let Some(u) = open.remove(&p) {
                    out[u].push(pos);
                } else {
                    out.push(vec![pos]);
                }
            }
        }
    }
    out
}

/// Drops units while the reader accepts the rest and the disagreement keeps its class.
fn minimise(text: &str, options: &Options, class: &BTreeSet<String>) -> String {
    let still = |candidate: &str| {
        compare(candidate, options).is_ok_and(|o| !o.diff.is_empty() && o.diff.class() == *class)
    };
    let mut objs = objects(text);
    let mut chunk = units(&objs).len().max(1);
    loop {
        let us = units(&objs);
        let mut progressed = false;
        let mut start = 0;
        while start < us.len() {
            let drop: BTreeSet<usize> = us[start..(start + chunk).min(us.len())]
                .iter()
                .flatten()
                .copied()
                .collect();
            let candidate: Vec<_> = objs
                .iter()
                .enumerate()
                .filter(|(i, _)| !drop.contains(i))
                .map(|(_, o)| o.clone())
                .collect();
            if !candidate.is_empty() && still(&render(&candidate)) {
                objs = candidate;
                progressed = true;
                break;
            }
            start += chunk;
        }
        if !progressed {
            if chunk == 1 {
                break;
            }
            chunk = chunk.div_ceil(2);
        }
    }
    render(&objs)
}

fn tmp_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("differential");
    let _ = std::fs::create_dir_all(&dir);
    dir
}

fn show(findings: &[Finding]) -> String {
    if findings.is_empty() {
        return "    (none)\n".into();
    }
    findings
        .iter()
        .map(|f| {
            format!(
                "    {} {} events {:?} processes {:?}{}{}\n",
                f.kind,
                f.key,
                f.events,
                f.processes,
                if f.detail.is_empty() {
                    String::new()
                } else {
                    format!(" {}", f.detail)
                },
                if f.count > 1 {
                    format!(" x{}", f.count)
                } else {
                    String::new()
                }
            )
        })
        .collect()
}

/// Minimises a disagreement, writes it to target/tmp/differential/<name>.jsonl, and says
/// both verdicts.
fn explain(name: &str, text: &str, options: &Options, outcome: &Outcome) -> String {
    let minimal = minimise(text, options, &outcome.diff.class());
    let dir = tmp_dir();
    let _ = std::fs::write(dir.join(format!("{name}.original.jsonl")), text);
    let path = dir.join(format!("{name}.jsonl"));
    let _ = std::fs::write(&path, &minimal);
    let m = compare(&minimal, options).expect("the minimal history reads");
    let explanations: String = m
        .report
        .anomalies
        .iter()
        .map(|a| format!("    [{}] {:?}: {}\n", a.kind, a.indices, a.explanation))
        .collect();
    format!(
        "{name}: the checkers disagree ({}); bounds: liveness {} ns, starvation {} ns\n  minimal history ({} events): {}\n{minimal}  real checker:\n{}{explanations}  naive checker:\n{}  only real:\n{}  only naive:\n{}",
        outcome.diff.class().into_iter().collect::<Vec<_>>().join(", "),
        options.liveness_ns,
        options.starvation_ns,
        minimal.lines().count(),
        path.display(),
        show(&m.real),
        show(&m.naive),
        show(&m.diff.only_real),
        show(&m.diff.only_naive),
    )
}

/// Compares every case, minimises the first disagreement of each class, and fails with them.
fn run_cases(suite: &str, cases: impl Iterator<Item = (String, String, Options)>) {
    let mut classes: BTreeMap<BTreeSet<String>, (usize, String)> = BTreeMap::new();
    let mut total = 0;
    for (name, text, options) in cases {
        total += 1;
        let outcome = match compare(&text, &options) {
            Ok(o) => o,
            Err(e) => panic!("{suite}: {name}: the real reader rejects the history: {e}\n{text}"),
        };
        if outcome.diff.is_empty() {
            continue;
        }
        let class = outcome.diff.class();
        let entry = classes.entry(class).or_insert((0, String::new()));
        entry.0 += 1;
        if entry.0 == 1 {
            entry.1 = explain(&format!("{suite}-{name}"), &text, &options, &outcome);
        }
    }
    if classes.is_empty() {
        eprintln!("{suite}: {total} cases, the checkers agree on every one");
        return;
    }
    let mut message = format!("{suite}: the checkers disagree on some of {total} cases\n");
    for (class, (count, text)) in &classes {
        message.push_str(&format!("\n== {count} cases: {class:?}\n{text}\n"));
    }
    panic!("{message}");
}

// ---------------------------------------------------------------------------------------
// The cases.

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn cases() -> u64 {
    std::env::var("LOCKAUDIT_DIFF_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(64)
}

fn base_seed() -> u64 {
    std::env::var("LOCKAUDIT_DIFF_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_261_122)
}

fn options_from_args(args: &[String]) -> Options {
    let mut options = Options::default();
    for pair in args.windows(2) {
        let ns = || {
            lockaudit::units::parse_duration(&pair[1])
                .map(|d| d.as_nanos() as i64)
                .expect("a duration")
        };
        match pair[0].as_str() {
            "--liveness-bound" => options.liveness_ns = ns(),
            "--starvation-bound" => options.starvation_ns = ns(),
            "--fairness-tolerance" => options.fairness_ns = ns(),
            _ => {}
        }
    }
    options
}

/// `dir/*.jsonl` whose expectation (if any) is not a rejected input, with its options.
fn histories_in(dir: &Path) -> Vec<(String, String, Options)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let Some(stem) = name.strip_suffix(".jsonl") else {
            continue;
        };
        let expected = dir.join(format!("{stem}.expected.json"));
        let mut options = Options::default();
        if let Ok(text) = std::fs::read_to_string(&expected) {
            let expectation: Value = serde_json::from_str(&text).expect("expected.json is JSON");
            if expectation.get("error").is_some() {
                continue;
            }
            let args: Vec<String> = expectation["args"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str().map(str::to_string))
                .collect();
            options = options_from_args(&args);
        }
        let text = std::fs::read_to_string(&path).expect("history is readable");
        out.push((stem.to_string(), text, options));
    }
    out
}

/// A random, small synth configuration.
fn synth_config(rng: &mut StdRng) -> SynthConfig {
    let latency_max = rng.random_range(20_000..=5 * MS);
    SynthConfig {
        seed: rng.random(),
        keys: rng.random_range(1..=3),
        processes: rng.random_range(1..=6),
        events: rng.random_range(50..=600),
        lease_ms: if rng.random_bool(0.2) {
            None
        } else {
            Some(rng.random_range(20..=500))
        },
        fenced: rng.random_bool(0.5),
        writes: rng.random_bool(0.7),
        renew_prob: rng.random_range(0.0..0.5),
        kill_prob: rng.random_range(0.0..0.03),
        info_prob: rng.random_range(0.0..0.05),
        reentrant_prob: rng.random_range(0.0..0.3),
        reentrant_depth: 1,
        expire_prob: rng.random_range(0.0..0.1),
        shuffle_window_ns: if rng.random_bool(0.5) {
            0
        } else {
            rng.random_range(0..=3 * MS)
        },
        latency_ns: (latency_max / 10, latency_max),
        gap_ns: (1_000, latency_max / 2),
        hold_ns: (0, rng.random_range(MS..=50 * MS)),
        think_ns: (0, rng.random_range(0..=30 * MS)),
        retry_ns: (MS, rng.random_range(2 * MS..=20 * MS)),
    }
}

#[test]
fn reference_histories_agree() {
    run_cases(
        "reference",
        histories_in(&repo().join("history")).into_iter(),
    );
}

#[test]
fn recorded_runs_agree() {
    let runs = histories_in(&repo().join("history").join("runs"));
    assert!(!runs.is_empty(), "history/runs/ holds recorded runs");
    run_cases("runs", runs.into_iter());
}

/// `LOCKAUDIT_DIFF_HISTORIES=<dir>`: also every `<dir>/*.jsonl` and `<dir>/*/history.jsonl`
/// (run folders), e.g. `results/`.
#[test]
fn more_histories_agree() {
    let Some(dir) = std::env::var_os("LOCKAUDIT_DIFF_HISTORIES") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let mut found = histories_in(&dir);
    let mut runs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("LOCKAUDIT_DIFF_HISTORIES is a folder")
        .filter_map(|e| e.ok().map(|e| e.path().join("history.jsonl")))
        .filter(|p| p.is_file())
        .collect();
    runs.sort();
    for path in runs {
        let name = path
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        let text = std::fs::read_to_string(&path).expect("history is readable");
        found.push((name, text, Options::default()));
    }
    run_cases("more", found.into_iter());
}

#[test]
fn synth_histories_agree() {
    let seed = base_seed();
    let kinds: Vec<Option<AnomalyKind>> = std::iter::once(None)
        .chain(synth::INJECTABLE.iter().copied().map(Some))
        .collect();
    let cases = (0..cases()).map(move |i| {
        let mut rng = StdRng::seed_from_u64(seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let config = synth_config(&mut rng);
        let options = Options::default();
        let mut events = synth::generate(&config);
        let kind = kinds[i as usize % kinds.len()];
        if let Some(kind) = kind {
            let _ = synth::inject(
                kind,
                &mut events,
                rng.random(),
                options.liveness_ns,
                options.starvation_ns,
            );
        }
        let name = format!("synth-{seed}-{i}-{}", kind.map_or("none", |k| k.as_str()));
        (name, jsonl(&events), options)
    });
    run_cases("synth", cases);
}

#[test]
fn faulty_lock_histories_agree() {
    let seed = base_seed();
    let cases = (0..cases()).map(move |i| {
        let case_seed = seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
        let (events, bounds) = faulty::generate(case_seed);
        let options = Options {
            liveness_ns: bounds.liveness_ns,
            starvation_ns: bounds.starvation_ns,
            fairness_ns: bounds.fairness_ns,
        };
        (format!("faulty-{seed}-{i}"), jsonl(&events), options)
    });
    run_cases("faulty", cases);
}
