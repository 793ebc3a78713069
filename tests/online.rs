//! Online checking (`checker::online`) against the checker on the finished history.
//!
//! For every history here (the reference histories of `history/`, the recorded runs of
//! `history/runs/`, generated histories of a randomly faulty lock, and synth histories with
//! each kind of violation injected), fed line by line as the recorder writes them:
//!
//! 1. the final verdict is identical to `check` on the file (the whole report);
//! 2. every anomaly reported early, judged on the history up to a horizon (at many cuts), is
//!    in the final verdict: a later event never takes back what was reported during a run;
//! 3. everything the final verdict finds is reported by the end (but `unavailable`, which
//!    online checking judges more cautiously).

mod faulty;

use std::path::{Path, PathBuf};

use lockaudit::checker::online::{proven_early, same_violation, OnlineChecker};
use lockaudit::checker::{check, CheckOptions};
use lockaudit::history::reader::read_jsonl;
use lockaudit::history::{Event, History, OpF, OpType, RecordedLine};
use lockaudit::report::{Anomaly, Report};
use lockaudit::synth::{self, SynthConfig};

/// How many cuts each history is judged at (all its event times, if it has fewer).
const CUTS: usize = 60;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn jsonl(events: &[Event]) -> String {
    let mut bytes = Vec::new();
    synth::write_jsonl(events, &mut bytes).expect("writing to memory");
    String::from_utf8(bytes).expect("UTF-8")
}

fn same_anomaly(a: &Anomaly, b: &Anomaly) -> bool {
    same_violation(a, b)
}

/// Runs the three properties on one history; `Ok(false)` if the reader rejects it (bad
/// input is the reader's tests' business), an error naming what went wrong otherwise.
fn agrees(name: &str, text: &str, options: &CheckOptions) -> Result<bool, String> {
    let Ok(history) = read_jsonl(text.as_bytes(), name, None) else {
        return Ok(false);
    };
    if !history.warnings.is_empty() {
        // A truncated last line: the recorder never hands such a line on.
        return Ok(false);
    }
    let expected = check(&history, options);

    let mut online = OnlineChecker::new(name, options.clone());
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        // As the run's pump parses it, and the recorder hands it on.
        let line = RecordedLine::parse(line.to_string())
            .map_err(|e| format!("{name}: the recorder would drop a line check reads: {e}"))?;
        online.push(&line);
    }
    let mut times: Vec<i64> = history.ops.iter().map(|op| op.time).collect();
    times.dedup();
    let step = times.len().div_ceil(CUTS).max(1);
    let mut reported: Vec<(i64, Anomaly)> = Vec::new();
    for &cut in times.iter().step_by(step) {
        reported.extend(online.check_until(cut).into_iter().map(|a| (cut, a)));
    }
    reported.extend(
        online
            .check_until(i64::MAX)
            .into_iter()
            .map(|a| (i64::MAX, a)),
    );
    let report: Report = online
        .finish()
        .map_err(|e| format!("{name}: online checking rejects a history check reads: {e}"))?;

    let as_json = |r: &Report| serde_json::to_value(r).expect("a report is JSON");
    if as_json(&report) != as_json(&expected) {
        return Err(format!(
            "{name}: the online final verdict differs from check on the file:\nonline: {}\ncheck:  {}",
            as_json(&report),
            as_json(&expected)
        ));
    }
    for (cut, early) in &reported {
        if early.kind == "unavailable" && longer_lease_came_later(&history, &early.key, *cut) {
            // The one rule that can move (`proven_early`): a lease longer than any asked
            // for or seen up to the cut lengthened what an `info` acquire blocks.
            continue;
        }
        if !expected.anomalies.iter().any(|a| same_anomaly(a, early)) {
            let final_of_kind: Vec<_> = expected
                .anomalies
                .iter()
                .filter(|a| a.kind == early.kind && a.key == early.key)
                .map(|a| (a.start, &a.indices))
                .collect();
            return Err(format!(
                "{name}: reported when judged up to {cut} ns, but not in the final verdict: {} on {} from {} ns (events {:?}): {}\nthe final verdict's of that kind and key: {final_of_kind:?}",
                early.kind, early.key, early.start, early.indices, early.explanation
            ));
        }
    }
    for anomaly in &expected.anomalies {
        // Online checking lets an `info` acquire block its key for at least the longest ttl
        // asked (a later lease could be longer), more cautious than the final rule: it may
        // leave an `unavailable` to the final verdict.
        if proven_early(&anomaly.kind)
            && anomaly.kind != "unavailable"
            && !reported.iter().any(|(_, a)| same_anomaly(a, anomaly))
        {
            return Err(format!(
                "{name}: {} on {} from {} ns is in the verdict but was never reported",
                anomaly.kind, anomaly.key, anomaly.start
            ));
        }
    }
    Ok(true)
}

/// Whether `key` was granted a lease after `cut` longer than every ttl asked for (on any
/// key) and every lease granted on it up to `cut`.
fn longer_lease_came_later(history: &History, key: &str, cut: i64) -> bool {
    let mut before = None::<i64>;
    let mut after = None::<i64>;
    for op in history.ops.iter().filter(|op| op.f == OpF::Acquire) {
        let on_key = op.key as usize != usize::MAX
            && history.keys.get(op.key as usize).is_some_and(|k| k == key);
        let ms = match op.ty {
            OpType::Invoke if op.time <= cut => op.ttl_ms(),
            OpType::Ok if on_key => op.lease_ms(),
            _ => None,
        };
        let Some(ms) = ms else { continue };
        let slot = if op.time <= cut {
            &mut before
        } else {
            &mut after
        };
        *slot = Some(slot.map_or(ms, |m| m.max(ms)));
    }
    after.is_some_and(|a| before.is_none_or(|b| a > b))
}

fn options_listing_all() -> CheckOptions {
    CheckOptions {
        anomaly_limit: usize::MAX,
        ..CheckOptions::default()
    }
}

fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files
}

fn run_all(cases: impl Iterator<Item = (String, String, CheckOptions)>) -> usize {
    let mut checked = 0;
    let mut failures = Vec::new();
    for (name, text, options) in cases {
        match agrees(&name, &text, &options) {
            Ok(true) => checked += 1,
            Ok(false) => {}
            Err(message) => failures.push(message),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} histories:\n{}",
        failures.len(),
        checked + failures.len(),
        failures.join("\n\n")
    );
    checked
}

#[test]
fn reference_histories_and_recorded_runs() {
    let files = jsonl_files(&root().join("history"))
        .into_iter()
        .chain(jsonl_files(&root().join("history/runs")));
    let checked = run_all(files.map(|path| {
        let text = std::fs::read_to_string(&path).expect("readable");
        (path.display().to_string(), text, options_listing_all())
    }));
    assert!(checked >= 40, "only {checked} histories were read");
}

/// 48 in CI; explore more with `LOCKAUDIT_ONLINE_CASES=<n>` (and `LOCKAUDIT_ONLINE_SEED`).
fn faulty_cases() -> (u64, u64) {
    let number = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    (
        number("LOCKAUDIT_ONLINE_CASES").unwrap_or(48),
        number("LOCKAUDIT_ONLINE_SEED").unwrap_or(0x0a11_7e57),
    )
}

#[test]
fn histories_of_a_faulty_lock() {
    let (cases, base) = faulty_cases();
    let checked = run_all((0..cases).map(|seed| {
        let (events, bounds) = faulty::generate(base ^ seed.wrapping_mul(0x9E37_79B9));
        let options = CheckOptions {
            liveness_bound_ns: bounds.liveness_ns,
            starvation_bound_ns: bounds.starvation_ns,
            fairness_tolerance_ns: bounds.fairness_ns,
            ..options_listing_all()
        };
        (format!("faulty-{seed}"), jsonl(&events), options)
    }));
    assert_eq!(checked as u64, cases);
}

#[test]
fn synth_histories_with_each_violation() {
    let options = options_listing_all();
    let mut cases = Vec::new();
    for seed in 0..4u64 {
        for kind in std::iter::once(None).chain(synth::INJECTABLE.iter().copied().map(Some)) {
            let config = SynthConfig {
                keys: 3,
                processes: 6,
                events: 1_500,
                ..SynthConfig::benchmark(seed, 1_500)
            };
            let mut events = synth::generate(&config);
            if let Some(kind) = kind {
                let _ = synth::inject(
                    kind,
                    &mut events,
                    seed,
                    options.liveness_bound_ns,
                    options.starvation_bound_ns,
                );
            }
            let name = format!("synth-{seed}-{}", kind.unwrap_or("none"));
            cases.push((name, jsonl(&events), options.clone()));
        }
    }
    let total = cases.len();
    assert_eq!(run_all(cases.into_iter()), total);
}
