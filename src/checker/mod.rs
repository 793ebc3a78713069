//! The checks: one module per property, all reading the holds derived once from a history
//! (`holds.rs`), each adding what it finds to one `Findings`.

mod fairness;
mod fencing;
mod findings;
mod grouped;
pub mod holds;
mod lease;
pub(crate) mod liveness;
mod lost_lock;
mod mutual_exclusion;
pub mod online;
mod precedence;
mod register;

use std::collections::BTreeMap;

use serde_json::json;

use crate::history::{History, OpF, OpType};
use crate::report::{AnomalyKind, CheckResult, KeyStats, KindCounts, PerKey, Report, Stats};

use findings::{Findings, Names};
use register::Seen;

/// Bounds and limits of a check.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CheckOptions {
    /// `unavailable`: a free stretch longer than this with failed attempts (default 1 s).
    pub liveness_bound_ns: i64,
    /// `starvation`: trying for longer than this while others acquire (default 10 s).
    pub starvation_bound_ns: i64,
    /// `unfair`: how much later an acquire must be invoked to count as behind in the queue
    /// (default 10 ms; clocks and networks jitter that much).
    pub fairness_tolerance_ns: i64,
    /// At most this many anomalies of each kind are listed; all are counted.
    pub anomaly_limit: usize,
    /// With 2 or more, liveness and fairness run on a thread of their own beside the other
    /// checks (the report is the same).
    pub threads: usize,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            liveness_bound_ns: 1_000_000_000,
            starvation_bound_ns: 10_000_000_000,
            fairness_tolerance_ns: 10_000_000,
            anomaly_limit: 1000,
            threads: 1,
        }
    }
}

/// Which check reports which anomaly kinds.
const CHECKS: [(&str, &[AnomalyKind]); 7] = [
    ("mutual-exclusion", &[AnomalyKind::Overlap]),
    ("lease", &[AnomalyKind::BadLease]),
    ("lost-lock", &[AnomalyKind::LostLock]),
    (
        "fencing",
        &[
            AnomalyKind::StaleWrite,
            AnomalyKind::TokenOrder,
            AnomalyKind::DuplicateToken,
        ],
    ),
    (
        "liveness",
        &[AnomalyKind::Unavailable, AnomalyKind::Starvation],
    ),
    ("fairness", &[AnomalyKind::Unfair]),
    ("register", &[AnomalyKind::LostUpdate]),
];

/// Runs `step`, logging how long it took and the peak memory so far at debug level
/// (`lockaudit -vv check`): where a large history's check time and memory go.
fn timed<T>(what: &str, step: impl FnOnce() -> T) -> T {
    // Online checking runs the checks every few hundred milliseconds: read /proc only when
    // the line is wanted.
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return step();
    }
    let started = std::time::Instant::now();
    let result = step();
    let peak = crate::sys::peak_resident_kib().map_or(String::new(), |kib| {
        format!(" (peak resident memory so far {} MB)", kib / 1024)
    });
    tracing::debug!("{what}: {:.3}s{peak}", started.elapsed().as_secs_f64());
    result
}

/// Runs every check on `history`.
pub fn check(history: &History, options: &CheckOptions) -> Report {
    check_seen(history, options, None, Seen::Whole)
}

/// `check` on the events of an unfinished history up to a horizon (online checking): an
/// `info` acquire blocks its key for at least `lease_floor_ms` (when no longer lease was
/// seen), the longest ttl asked so far, since a lease granted later could lengthen the
/// block; and `lost-update` is judged without a final read (`register::Seen::SoFar`).
fn check_so_far(history: &History, options: &CheckOptions, lease_floor_ms: Option<i64>) -> Report {
    check_seen(history, options, lease_floor_ms, Seen::SoFar)
}

fn check_seen(
    history: &History,
    options: &CheckOptions,
    lease_floor_ms: Option<i64>,
    seen: Seen,
) -> Report {
    let holds = timed("holds derived", || holds::derive(history));
    let names = Names {
        history,
        holds: &holds,
    };
    let Ran {
        findings,
        expected_losses,
        mut key_stats,
        counters,
    } = run_checks(&names, options, lease_floor_ms, seen);

    for (stats, expected) in key_stats.iter_mut().zip(expected_losses) {
        stats.expected_losses = expected;
    }
    let figures = figures(&holds, &key_stats, options, counters);

    let (mut anomalies, counts) = findings.into_parts();
    anomalies.sort_by_key(|a| (a.start, a.indices.first().copied()));
    let (checks, omitted) = check_results(&counts, figures, options);

    let (start, end) = history.time_span();
    // The figures stay in key-id order: `PerKey` sorts the names only when asked to.
    let per_key = PerKey::from_parts(history.keys.clone(), key_stats);
    let (valid, unknown) = verdict(history, &checks, holds.holds.len());
    Report {
        valid,
        unknown,
        anomalies,
        checks,
        stats: Stats {
            events: history.ops.len() as u64,
            processes: history.processes.len() as u64,
            keys: history.keys.len() as u64,
            faults: history.faults.len() as u64,
            time_span_ns: [start, end],
            per_key,
        },
        omitted,
        warnings: history.warnings.clone(),
    }
}

/// What the checks found and counted, their findings joined.
struct Ran {
    findings: Findings,
    /// Per key, the locks lost as the lost-lock check expects.
    expected_losses: Vec<u64>,
    key_stats: Vec<KeyStats>,
    /// The register check's (counters checked, keys skipped).
    counters: (u64, u64),
}

fn run_checks(
    names: &Names,
    options: &CheckOptions,
    lease_floor_ms: Option<i64>,
    seen: Seen,
) -> Ran {
    // Three groups of checks, each with its own findings, joined in this order: the report
    // is the same whether the liveness group runs on a thread of its own or not.
    let safety = |findings: &mut Findings| {
        timed("mutual-exclusion", || {
            mutual_exclusion::check(names, findings)
        });
        timed("lease", || lease::check(names, findings));
        let expected_losses = timed("lost-lock", || lost_lock::check(names, findings));
        timed("fencing", || fencing::check(names, findings));
        expected_losses
    };
    let progress = |findings: &mut Findings| {
        let (mut key_stats, mut waits) = timed("liveness", || {
            liveness::check(names, options, lease_floor_ms, findings)
        });
        timed("fairness", || {
            fairness::check(names, options, &mut waits, &mut key_stats, findings)
        });
        key_stats
    };
    let writes =
        |findings: &mut Findings| timed("register", || register::check(names, seen, findings));
    let limit = options.anomaly_limit;
    let (mut findings, mut progress_findings, mut write_findings) = (
        Findings::new(limit),
        Findings::new(limit),
        Findings::new(limit),
    );
    let (expected_losses, key_stats, counters) = if options.threads >= 2 {
        std::thread::scope(|scope| {
            let beside = scope.spawn(|| progress(&mut progress_findings));
            let expected_losses = safety(&mut findings);
            let counters = writes(&mut write_findings);
            let key_stats = match beside.join() {
                Ok(key_stats) => key_stats,
                Err(panic) => std::panic::resume_unwind(panic),
            };
            (expected_losses, key_stats, counters)
        })
    } else {
        (
            safety(&mut findings),
            progress(&mut progress_findings),
            writes(&mut write_findings),
        )
    };
    findings.append(progress_findings);
    findings.append(write_findings);
    Ran {
        findings,
        expected_losses,
        key_stats,
        counters,
    }
}

/// Each check's figures, by check name.
type Figures = BTreeMap<&'static str, BTreeMap<String, serde_json::Value>>;

/// Each check's figures.
fn figures(
    holds: &holds::Holds,
    key_stats: &[KeyStats],
    options: &CheckOptions,
    (counters_checked, counters_skipped): (u64, u64),
) -> Figures {
    let mut figures = Figures::new();
    let tokened = holds.holds.iter().filter(|h| h.token.is_some()).count();
    figures
        .entry("mutual-exclusion")
        .or_default()
        .insert("holds".into(), json!(holds.holds.len()));
    figures
        .entry("fencing")
        .or_default()
        .insert("holds_with_tokens".into(), json!(tokened));
    figures.entry("lost-lock").or_default().insert(
        "expected_losses".into(),
        json!(key_stats.iter().map(|s| s.expected_losses).sum::<u64>()),
    );
    figures.entry("liveness").or_default().insert(
        "liveness_bound_ms".into(),
        json!(options.liveness_bound_ns as f64 / 1e6),
    );
    figures.entry("liveness").or_default().insert(
        "starvation_bound_ms".into(),
        json!(options.starvation_bound_ns as f64 / 1e6),
    );
    figures.entry("fairness").or_default().insert(
        "fairness_tolerance_ms".into(),
        json!(options.fairness_tolerance_ns as f64 / 1e6),
    );
    figures
        .entry("register")
        .or_default()
        .insert("counters_checked".into(), json!(counters_checked));
    figures
        .entry("register")
        .or_default()
        .insert("keys_skipped".into(), json!(counters_skipped));
    figures
}

/// Each check's result from the counts of its anomaly kinds, and how many of each kind
/// the anomaly limit left unlisted.
fn check_results(
    counts: &KindCounts,
    mut figures: Figures,
    options: &CheckOptions,
) -> (BTreeMap<String, CheckResult>, KindCounts) {
    let mut checks = BTreeMap::new();
    let mut omitted = BTreeMap::new();
    for (name, kinds) in CHECKS {
        let mut result = CheckResult {
            valid: true,
            ..CheckResult::default()
        };
        for &kind in kinds {
            let count = counts.get(&kind).copied().unwrap_or(0);
            result.counts.insert(kind, count);
            result.valid &= count == 0;
            let listed = count.min(options.anomaly_limit as u64);
            if count > listed {
                omitted.insert(kind, count - listed);
            }
        }
        result.figures = figures.remove(name).unwrap_or_default();
        checks.insert(name.to_string(), result);
    }
    (checks, omitted)
}

/// The report's `valid` and `unknown`: invalid if any check is; unknown if nothing was
/// exercised (`acquisitions`: the holds).
fn verdict(
    history: &History,
    checks: &BTreeMap<String, CheckResult>,
    acquisitions: usize,
) -> (Option<bool>, Option<String>) {
    // An optimistic algorithm (pg-version, watch-multi) takes no lock: its acknowledged
    // conditional writes of the counter are what was exercised, and lost-update judges them.
    let acknowledged_writes = history
        .ops
        .iter()
        .filter(|op| op.f == OpF::Write && op.ty == OpType::Ok)
        .count();
    if !checks.values().all(|c| c.valid) {
        (Some(false), None)
    } else if acquisitions == 0 && acknowledged_writes == 0 {
        // Exit 0 promises that a lock was exercised and held up: with no acquire that took
        // effect, the history proves nothing.
        let why = if history.ops.is_empty() {
            "the history has no events: nothing was tested".to_string()
        } else {
            format!(
                "no acquire took effect and no write was acknowledged in {} events: no lock was exercised, so nothing was proven",
                history.ops.len()
            )
        };
        (None, Some(why))
    } else {
        (Some(true), None)
    }
}

#[cfg(test)]
mod tests;
