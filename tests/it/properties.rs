//! Property tests of the checker against synthetic histories (src/synth/).
//!
//! 1. A history generated from a correct lock, under any mix of random timings, kills,
//!    indeterminate operations, leases, renewals, reentrancy, holders outliving their lease,
//!    several keys and a shuffled merge, is valid: no anomaly at all.
//! 2. The same with exactly one violation injected is caught: the report has an anomaly of
//!    that kind naming the injected events, and no anomaly of another kind unless the
//!    violation logically implies it (`synth::implied_by`: a stale write implies an overlap
//!    and possibly a lost update; a duplicate token on consecutive holds implies token-order).
//!
//! Every history goes through the real JSONL writer and reader. A failing case is also
//! written to `target/synth-failures/<property>.jsonl` for `lockaudit check`.

use std::path::PathBuf;

use lockaudit::checker::{check, CheckOptions};
use lockaudit::history::reader::read_jsonl;
use lockaudit::history::Event;
use lockaudit::report::{AnomalyKind, Report};
use lockaudit::synth::{generate, inject, write_jsonl, Injection, SynthConfig};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

const MS: i64 = 1_000_000;

/// 64 cases a property, from a fixed seed so that CI is repeatable; set
/// `PROPTEST_RNG_SEED=<n>` (and `PROPTEST_CASES=<n>`) to explore other histories.
fn cases() -> ProptestConfig {
    let explore = std::env::var_os("PROPTEST_RNG_SEED").is_some();
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(64),
        failure_persistence: None,
        rng_seed: if explore {
            ProptestConfig::default().rng_seed
        } else {
            proptest::test_runner::RngSeed::Fixed(20_261_121)
        },
        ..ProptestConfig::default()
    }
}

/// Configurations of a correct lock, with every fault the generator knows.
fn configs() -> impl Strategy<Value = SynthConfig> {
    let shape = (
        any::<u64>(),
        1usize..=4,
        1usize..=8,
        200usize..=2_500,
        prop_oneof![1 => Just(None), 4 => (20i64..=500).prop_map(Some)],
        any::<bool>(),
        any::<bool>(),
    );
    let faults = (
        0.0..0.5f64,
        0.0..0.03f64,
        0.0..0.05f64,
        0.0..0.3f64,
        0.0..0.1f64,
        prop_oneof![Just(0i64), 0i64..=3 * MS],
    );
    let timing = (
        20_000i64..=5 * MS,
        MS..=50 * MS,
        0i64..=30 * MS,
        2 * MS..=20 * MS,
    );
    (shape, faults, timing).prop_map(
        |(
            (seed, keys, processes, events, lease_ms, fenced, writes),
            (renew_prob, kill_prob, info_prob, reentrant_prob, expire_prob, shuffle_window_ns),
            (latency_max, hold_max, think_max, retry_max),
        )| SynthConfig {
            seed,
            keys,
            processes,
            events,
            lease_ms,
            fenced,
            writes,
            renew_prob,
            kill_prob,
            info_prob,
            reentrant_prob,
            reentrant_depth: 1,
            expire_prob,
            shuffle_window_ns,
            latency_ns: (latency_max / 10, latency_max),
            gap_ns: (1_000, latency_max / 2),
            hold_ns: (0, hold_max),
            think_ns: (0, think_max),
            retry_ns: (MS, retry_max),
        },
    )
}

fn failure_file(name: &str, events: &[Event]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("synth-failures");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{name}.jsonl"));
    if let Ok(file) = std::fs::File::create(&path) {
        let _ = write_jsonl(events, file);
    }
    path
}

/// Writes `events` as JSONL, reads them back with the real reader and checks them.
fn check_through_reader(name: &str, events: &[Event]) -> Result<Report, TestCaseError> {
    let mut bytes = Vec::new();
    write_jsonl(events, &mut bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let history = read_jsonl(bytes.as_slice(), "synth.jsonl", None).map_err(|e| {
        let path = failure_file(name, events);
        TestCaseError::fail(format!("the reader rejects it ({}): {e}", path.display()))
    })?;
    Ok(check(&history, &CheckOptions::default()))
}

fn describe(report: &Report) -> String {
    report
        .anomalies
        .iter()
        .take(3)
        .map(|a| {
            format!(
                "[{} on {} at {:?}] {}",
                a.kind, a.key, a.indices, a.explanation
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn assert_valid(config: &SynthConfig) -> Result<(), TestCaseError> {
    let events = generate(config);
    let report = check_through_reader("valid", &events)?;
    if !report.is_valid() || !report.anomalies.is_empty() {
        let path = failure_file("valid", &events);
        return Err(TestCaseError::fail(format!(
            "a correct lock's history ({}) got {} anomalies, e.g.\n{}",
            path.display(),
            report.anomalies.len(),
            describe(&report)
        )));
    }
    Ok(())
}

/// The generated lock serves waiters first come, first served, keeping a client's place
/// across its failed tries: no key shows a queue jump.
fn assert_no_queue_jump(config: &SynthConfig) -> Result<(), TestCaseError> {
    let events = generate(config);
    let report = check_through_reader("fifo", &events)?;
    for (key, stats) in report.stats.per_key.iter() {
        if stats.queue_jumps > 0 {
            let path = failure_file("fifo", &events);
            return Err(TestCaseError::fail(format!(
                "a FIFO lock's history ({}) shows {} queue jumps on {key}",
                path.display(),
                stats.queue_jumps
            )));
        }
    }
    Ok(())
}

fn assert_caught(kind: AnomalyKind, config: &SynthConfig, seed: u64) -> Result<(), TestCaseError> {
    let mut events = generate(config);
    let options = CheckOptions::default();
    let Some(injection) = inject(
        kind,
        &mut events,
        seed,
        options.liveness_bound_ns,
        options.starvation_bound_ns,
    ) else {
        return Err(TestCaseError::reject("no place to inject"));
    };
    let report = check_through_reader(kind.as_str(), &events)?;
    let result = judge(kind, &injection, &report);
    if let Err(message) = result {
        let path = failure_file(kind.as_str(), &events);
        return Err(TestCaseError::fail(format!(
            "{message}\ninjected: {injection:?}\nhistory: {}\nreport:\n{}",
            path.display(),
            describe(&report)
        )));
    }
    Ok(())
}

fn judge(kind: AnomalyKind, injection: &Injection, report: &Report) -> Result<(), String> {
    if report.is_valid() {
        return Err(format!("the injected {kind} was not found (report valid)"));
    }
    let of_kind: Vec<_> = report.anomalies.iter().filter(|a| a.kind == kind).collect();
    if of_kind.is_empty() {
        return Err(format!("no {kind} anomaly"));
    }
    let naming = of_kind
        .iter()
        .find(|a| injection.indices.iter().all(|i| a.indices.contains(i)));
    let Some(anomaly) = naming else {
        return Err(format!(
            "no {kind} anomaly names all of {:?}; they name {:?}",
            injection.indices,
            of_kind.iter().map(|a| &a.indices).collect::<Vec<_>>()
        ));
    };
    if anomaly.key != injection.key {
        return Err(format!(
            "the {kind} names key {} instead of {}",
            anomaly.key, injection.key
        ));
    }
    if kind == AnomalyKind::Overlap && anomaly.lease_expired != Some(false) {
        return Err(format!(
            "the overlap began inside the earlier holder's lease, but lease_expired is {:?}",
            anomaly.lease_expired
        ));
    }
    if let Some(other) = report
        .anomalies
        .iter()
        .find(|a| a.kind != kind && !injection.implies.contains(&a.kind))
    {
        return Err(format!(
            "an unrelated {} anomaly: {}",
            other.kind, other.explanation
        ));
    }
    Ok(())
}

/// Checks a JSONL text as `lockaudit check` would.
fn check_text(text: &str) -> Report {
    let history = read_jsonl(text.as_bytes(), "inline.jsonl", None).expect("valid input");
    check(&history, &CheckOptions::default())
}

/// Minimal cases the first property found: a correct lock's histories that the checker
/// reported as `unavailable`. An acquire may take effect anywhere between its invoke and its
/// completion, so a failed attempt that overlaps the invoke of an acquire that succeeded, or
/// the release that freed the key, may have been answered while the key was held: it is no
/// evidence that the free key refused anybody.
#[test]
fn a_race_for_a_key_idle_for_long_is_not_unavailable() {
    // Idle from 0.003 s to 2.000 s; process 1's acquire (invoked at 2.000 s, ok at 2.003 s)
    // takes the lock before process 2's attempt (2.001 s to 2.002 s) is answered.
    let text = r#"{"index":0,"time":0,"process":0,"type":"invoke","f":"acquire","key":"lock:a"}
{"index":1,"time":1000000,"process":0,"type":"ok","f":"acquire","key":"lock:a","value":{"token":null,"lease_ms":5000}}
{"index":2,"time":2000000,"process":0,"type":"invoke","f":"release","key":"lock:a"}
{"index":3,"time":3000000,"process":0,"type":"ok","f":"release","key":"lock:a","value":null}
{"index":4,"time":2000000000,"process":1,"type":"invoke","f":"acquire","key":"lock:a"}
{"index":5,"time":2001000000,"process":2,"type":"invoke","f":"acquire","key":"lock:a"}
{"index":6,"time":2002000000,"process":2,"type":"fail","f":"acquire","key":"lock:a","value":{"reason":"held by another client"}}
{"index":7,"time":2003000000,"process":1,"type":"ok","f":"acquire","key":"lock:a","value":{"token":null,"lease_ms":5000}}
{"index":8,"time":2004000000,"process":1,"type":"invoke","f":"release","key":"lock:a"}
{"index":9,"time":2005000000,"process":1,"type":"ok","f":"release","key":"lock:a","value":null}
"#;
    let report = check_text(text);
    assert!(report.is_valid(), "{}", describe(&report));
}

#[test]
fn a_failure_answered_just_after_the_release_is_not_unavailable() {
    // Process 1's attempt (0.002 s to 0.005 s) straddles process 0's release (invoke 0.003 s,
    // ok 0.004 s): it was answered while the lock was held. Then nobody tries for 2 s.
    let text = r#"{"index":0,"time":0,"process":0,"type":"invoke","f":"acquire","key":"lock:a"}
{"index":1,"time":1000000,"process":0,"type":"ok","f":"acquire","key":"lock:a","value":{"token":null,"lease_ms":5000}}
{"index":2,"time":2000000,"process":1,"type":"invoke","f":"acquire","key":"lock:a"}
{"index":3,"time":3000000,"process":0,"type":"invoke","f":"release","key":"lock:a"}
{"index":4,"time":4000000,"process":0,"type":"ok","f":"release","key":"lock:a","value":null}
{"index":5,"time":5000000,"process":1,"type":"fail","f":"acquire","key":"lock:a","value":{"reason":"held by another client"}}
{"index":6,"time":2005000000,"process":1,"type":"invoke","f":"acquire","key":"lock:a"}
{"index":7,"time":2006000000,"process":1,"type":"ok","f":"acquire","key":"lock:a","value":{"token":null,"lease_ms":5000}}
{"index":8,"time":2007000000,"process":1,"type":"invoke","f":"release","key":"lock:a"}
{"index":9,"time":2008000000,"process":1,"type":"ok","f":"release","key":"lock:a","value":null}
"#;
    let report = check_text(text);
    assert!(report.is_valid(), "{}", describe(&report));
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn a_correct_lock_is_always_valid(config in configs()) {
        assert_valid(&config)?;
    }

    #[test]
    fn a_fifo_lock_jumps_no_queue(config in configs()) {
        assert_no_queue_jump(&config)?;
    }

    #[test]
    fn an_injected_overlap_is_caught(config in configs(), seed in any::<u64>()) {
        assert_caught(AnomalyKind::Overlap, &config, seed)?;
    }

    #[test]
    fn an_injected_lost_lock_is_caught(config in configs(), seed in any::<u64>()) {
        assert_caught(AnomalyKind::LostLock, &config, seed)?;
    }

    #[test]
    fn an_injected_stale_write_is_caught(config in configs(), seed in any::<u64>()) {
        let config = SynthConfig { writes: true, ..config };
        assert_caught(AnomalyKind::StaleWrite, &config, seed)?;
    }

    #[test]
    fn an_injected_duplicate_token_is_caught(config in configs(), seed in any::<u64>()) {
        let config = SynthConfig { fenced: true, ..config };
        assert_caught(AnomalyKind::DuplicateToken, &config, seed)?;
    }

    #[test]
    fn an_injected_token_order_is_caught(config in configs(), seed in any::<u64>()) {
        let config = SynthConfig { fenced: true, ..config };
        assert_caught(AnomalyKind::TokenOrder, &config, seed)?;
    }

    #[test]
    fn an_injected_lost_update_is_caught(config in configs(), seed in any::<u64>()) {
        let config = SynthConfig { writes: true, ..config };
        assert_caught(AnomalyKind::LostUpdate, &config, seed)?;
    }

    #[test]
    fn an_injected_unavailable_is_caught(config in configs(), seed in any::<u64>()) {
        assert_caught(AnomalyKind::Unavailable, &config, seed)?;
    }

    #[test]
    fn an_injected_bad_lease_is_caught(config in configs(), seed in any::<u64>()) {
        assert_caught(AnomalyKind::BadLease, &config, seed)?;
    }

    #[test]
    fn an_injected_unfair_grant_is_caught(config in configs(), seed in any::<u64>()) {
        assert_caught(AnomalyKind::Unfair, &config, seed)?;
    }

    #[test]
    fn an_injected_starvation_is_caught(config in configs(), seed in any::<u64>()) {
        assert_caught(AnomalyKind::Starvation, &config, seed)?;
    }
}
