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
//!    online checking judges more cautiously, and `lost-update`, which is reported early
//!    only for two acknowledged increments of one value, and only where every write is an
//!    increment, as in a run: `OnlineChecker::increments_only`).

use crate::common::{jsonl, root};
use crate::faulty;

use std::path::{Path, PathBuf};

use lockaudit::checker::online::{reported_early, same_violation, OnlineChecker};
use lockaudit::checker::{check, CheckOptions};
use lockaudit::history::reader::read_jsonl;
use lockaudit::history::{Event, EventType, History, OpF, OpType, RecordedLine};
use lockaudit::report::{Anomaly, AnomalyKind, Report};
use lockaudit::synth::{self, SynthConfig};

/// What the final verdict's `lost-update` says of two acknowledged increments of one value.
const DUPLICATES: &str = "written by more than one acknowledged increment";

/// How many cuts each history is judged at (all its event times, if it has fewer).
const CUTS: usize = 60;

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

    // A run promises that every write is an increment (its own clients'); a history keeps
    // that promise as far as the checker can tell when every key with acknowledged writes
    // is a counter to its end, and is then judged as a run's.
    let increments_only =
        expected.checks["register"].figures.get("keys_skipped") == Some(&serde_json::json!(0));
    let mut online = OnlineChecker::new(name, options.clone());
    if increments_only {
        online = online.increments_only();
    }
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
        if early.kind == AnomalyKind::Unavailable
            && longer_lease_came_later(&history, &early.key, *cut)
        {
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
        // A lost update is proven early by two acknowledged increments of one value only;
        // a final read below the count waits for the end.
        let early_kind = match anomaly.kind {
            AnomalyKind::Unavailable => false,
            AnomalyKind::LostUpdate => increments_only && anomaly.explanation.contains(DUPLICATES),
            kind => reported_early(kind, increments_only),
        };
        if early_kind && !reported.iter().any(|(_, a)| same_anomaly(a, anomaly)) {
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
            let name = format!("synth-{seed}-{}", kind.map_or("none", |k| k.as_str()));
            cases.push((name, jsonl(&events), options.clone()));
        }
    }
    let total = cases.len();
    assert_eq!(run_all(cases.into_iter()), total);
}

/// Random histories of the counter workload with no lock, every write its reader's value + 1
/// (as a run's clients write): clients read and write concurrently; a write ends `ok`,
/// `fail` or `info`, and an `info` one lands at once, later (after other writes) or never;
/// now and then the counter loses its value (to nothing or to an older one, also after the
/// last write) or a read returns an older value; some operations are still pending at the
/// end; a final read of each key comes last. So lost updates of every shape, and counters set back up by later
/// writes after a read found them low.
fn counter_history(seed: u64) -> Vec<Event> {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use serde_json::json;

    const MS: i64 = 1_000_000;
    const KEYS: [&str; 2] = ["lock:0", "lock:1"];
    enum Slot {
        Idle,
        Reading(usize),
        Read(usize, i64),
        Writing(usize, i64),
    }
    let mut rng = StdRng::seed_from_u64(seed);
    // Each key's counter (None: never written) and every value it held.
    let mut counter: [Option<i64>; 2] = [None, None];
    let mut held: [Vec<i64>; 2] = [vec![0], vec![0]];
    let mut landing: Vec<(i64, usize, i64)> = Vec::new();
    // One client to four (alone, a client loses updates only to the counter's faults),
    // and counters that lose values, return older ones, both or neither.
    let clients = [1, 1, 2, 4][(seed % 4) as usize];
    let faults = seed / 4 % 4;
    let (loses, stale) = (
        if faults & 1 == 1 { 0.01 } else { 0.0 },
        if faults & 2 == 2 { 0.05 } else { 0.0 },
    );
    let mut slots: Vec<(u64, Slot)> = (0..clients).map(|p| (p, Slot::Idle)).collect();
    let mut next_process = clients;
    let mut events = Vec::new();
    let mut time = 0;
    let mut push = |time: i64, process: u64, ty: EventType, f: &str, key: usize, value| {
        let mut event = Event::client(0, time, process, ty, f, KEYS[key]);
        event.value = value;
        if ty == EventType::Info {
            event.error = Some("timeout".into());
        }
        events.push(event);
    };
    for _ in 0..rng.random_range(40..400) {
        time += rng.random_range(1..5) * MS;
        landing.retain(|&(at, key, value)| {
            let landed = at <= time;
            if landed {
                counter[key] = Some(value);
                held[key].push(value);
            }
            !landed
        });
        if rng.random_bool(loses) {
            let key = rng.random_range(0..2);
            counter[key] = if rng.random_bool(0.5) {
                None
            } else {
                Some(held[key][rng.random_range(0..held[key].len())])
            };
        }
        let s = rng.random_range(0..slots.len());
        let (process, slot) = &mut slots[s];
        let write = |value: i64| Some(json!({ "token": null, "value": value }));
        *slot = match *slot {
            Slot::Idle => {
                let key = rng.random_range(0..2);
                push(time, *process, EventType::Invoke, "read", key, None);
                Slot::Reading(key)
            }
            Slot::Reading(key) => {
                let value = if rng.random_bool(stale) {
                    Some(held[key][rng.random_range(0..held[key].len())])
                } else {
                    counter[key]
                };
                push(
                    time,
                    *process,
                    EventType::Ok,
                    "read",
                    key,
                    Some(json!({ "value": value })),
                );
                Slot::Read(key, value.unwrap_or(0))
            }
            Slot::Read(key, value) => {
                push(
                    time,
                    *process,
                    EventType::Invoke,
                    "write",
                    key,
                    write(value + 1),
                );
                Slot::Writing(key, value + 1)
            }
            Slot::Writing(key, value) => {
                let outcome = rng.random_range(0..20);
                if outcome < 14 {
                    counter[key] = Some(value);
                    held[key].push(value);
                    push(time, *process, EventType::Ok, "write", key, write(value));
                } else if outcome < 17 {
                    push(time, *process, EventType::Fail, "write", key, write(value));
                } else {
                    push(time, *process, EventType::Info, "write", key, None);
                    match outcome {
                        17 => landing.push((time, key, value)),
                        18 if stale > 0.0 => {
                            landing.push((time + rng.random_range(1..200) * MS, key, value))
                        }
                        _ => {}
                    }
                    // An `info` retires its process.
                    *process = next_process;
                    next_process += 1;
                }
                Slot::Idle
            }
        };
    }
    // The final reads, once every write that landed has.
    time += 300 * MS;
    for (at, key, value) in landing {
        if rng.random_bool(0.5) || at <= time {
            counter[key] = Some(value);
        }
    }
    // A counter that loses its value after the last write: only the final read shows it.
    if rng.random_bool(0.5) {
        counter[rng.random_range(0..2)] = None;
    }
    for (key, value) in counter.into_iter().enumerate() {
        time += MS;
        push(time, 1000, EventType::Invoke, "read", key, None);
        let value = Some(json!({ "value": value }));
        push(time + MS, 1000, EventType::Ok, "read", key, value);
        time += MS;
    }
    for (index, event) in events.iter_mut().enumerate() {
        event.index = index as u64;
    }
    events
}

#[test]
fn counter_histories_with_lost_updates_of_every_shape() {
    let options = options_listing_all();
    let histories: Vec<(String, String)> = (0..128u64)
        .map(|seed| (format!("counter-{seed}"), jsonl(&counter_history(seed))))
        .collect();
    // The generator makes both shapes: lost updates with two acknowledged increments of
    // one value (reported early), and ones only the final read shows.
    let (mut duplicates, mut only_final) = (0, 0);
    for (name, text) in &histories {
        let history = read_jsonl(text.as_bytes(), name, None).expect("a generated history reads");
        let report = check(&history, &options);
        // Every write an increment: judged as a run's (`increments_only`).
        assert_eq!(
            report.checks["register"].figures["keys_skipped"],
            serde_json::json!(0),
            "{name}"
        );
        for anomaly in report.anomalies {
            if anomaly.kind == AnomalyKind::LostUpdate {
                if anomaly.explanation.contains(DUPLICATES) {
                    duplicates += 1;
                } else {
                    only_final += 1;
                }
            }
        }
    }
    eprintln!("lost updates: {duplicates} with duplicate increments, {only_final} shown by the final read only");
    assert!(
        duplicates >= 5 && only_final >= 5,
        "{duplicates} and {only_final}"
    );
    let total = histories.len();
    let checked = run_all(
        histories
            .into_iter()
            .map(|(name, text)| (name, text, options.clone())),
    );
    assert_eq!(checked, total);
}
