//! Fairness: `unfair`, on a key whose acquires are marked `fair`, a process B whose acquire
//! was invoked later than process A's (by more than the tolerance) got the lock while A's
//! acquire was still pending, and A's acquire later ended `ok` too: B jumped the queue.
//!
//! Only first acquisitions count: a nested (reentrant) acquire by a holder does not queue.
//! One anomaly per grant that jumped the queue, naming the earliest-invoked acquire it
//! overtook (the one that had waited longest); the others it overtook are not counted again.
//!
//! The same pass counts every key's queue jumps (`KeyStats::queue_jumps`), over all its
//! grants, fair-marked or not: a grant whose wait began more than the tolerance after that
//! of another wait which ended in a grant later. A wait (`Wait`, gathered by liveness) of an
//! unmarked acquire begins at its client's first attempt, as `wait_ms` counts it: a run of
//! failed tries then a success is one wait. A fair-marked acquire's wait begins at its own
//! invoke: a fair acquire that failed has left the lock's queue, and its retry queues anew
//! (that is the order `unfair` judges, so between fair acquires the two counts agree).
//! An acquire that ended `info`, or never ended, is no grant: it neither overtakes nor is
//! overtaken (it may have taken the lock at some unknown moment, or never), and the client,
//! under the new process id that takes over after an `info`, begins a new wait. Modes do
//! not matter: a reader granted after a reader that began waiting later was overtaken, even
//! if the two then held together; ties (grants at one instant) are not overtaking.

use crate::history::compact::{KeyId, ProcessId};
use crate::report::{Anomaly, AnomalyKind, KeyStats};
use crate::units::{fmt_span, fmt_time};

use super::findings::{Findings, Names};
use super::grouped::Grouped;
use super::CheckOptions;

/// A wait that ended in a grant which began a hold (a first acquisition, not a nested one).
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    pub process: ProcessId,
    /// When the wait began, and the event there: the invoke of the client's first attempt
    /// (for a fair-marked acquire, of this acquire).
    pub since: i64,
    pub since_index: u32,
    pub ok: i64,
    pub ok_index: u32,
    pub fair: bool,
}

/// Counts each key's queue jumps into `stats` and reports the `unfair` ones; `waits` per key.
pub fn check(
    names: &Names,
    options: &CheckOptions,
    waits: &mut Grouped<Wait>,
    stats: &mut [KeyStats],
    findings: &mut Findings,
) {
    for (key, stat) in stats.iter_mut().enumerate() {
        let key = key as KeyId;
        let (all, fair) = jumps(names, key, waits.of_mut(key), options, findings);
        stat.queue_jumps = all;
        if stat.queue_jumps_fair.is_some() {
            stat.queue_jumps_fair = Some(fair);
        }
    }
}

/// Finds the grants on one key that overtook a wait begun earlier which ended in a later
/// grant: returns how many did (any acquires) and how many of them were fair overtaking
/// fair (each reported as `unfair`). O(n log n): one sort, two running maxima, a binary
/// search per grant.
fn jumps(
    names: &Names,
    key: KeyId,
    waits: &mut [Wait],
    options: &CheckOptions,
    findings: &mut Findings,
) -> (u64, u64) {
    // Overtaking takes two.
    if waits.len() < 2 {
        return (0, 0);
    }
    waits.sort_unstable_by_key(|w| (w.since, w.since_index));
    // latest[i]: the latest `ok` among waits[..=i], of any waits and of fair ones. They never
    // decrease, so the first wait whose `ok` came after B's is where they first exceed it.
    let latest: Vec<(i64, i64)> = waits
        .iter()
        .scan((i64::MIN, i64::MIN), |(any, fair), w| {
            *any = (*any).max(w.ok);
            if w.fair {
                *fair = (*fair).max(w.ok);
            }
            Some((*any, *fair))
        })
        .collect();
    let mut queue_jumps = 0u64;
    let mut jumped: Vec<(usize, usize)> = Vec::new();
    for (b, later) in waits.iter().enumerate() {
        // Waits begun more than the tolerance before B's.
        let earlier = waits.partition_point(|w| {
            w.since < later.since.saturating_sub(options.fairness_tolerance_ns)
        });
        if earlier == 0 || latest[earlier - 1].0 <= later.ok {
            continue;
        }
        queue_jumps += 1;
        if later.fair && latest[earlier - 1].1 > later.ok {
            let a = latest[..earlier].partition_point(|&(_, fair)| fair <= later.ok);
            jumped.push((a, b));
        }
    }
    let fair_jumps = jumped.len() as u64;
    // Report in the order the queue was jumped.
    jumped.sort_by_key(|&(_, b)| (waits[b].ok, waits[b].ok_index));
    for (a, b) in jumped {
        let (waiting, jumper) = (waits[a], waits[b]);
        findings.add(AnomalyKind::Unfair, || {
            describe(names, key, &waiting, &jumper, options.fairness_tolerance_ns)
        });
    }
    (queue_jumps, fair_jumps)
}

fn describe(names: &Names, key: KeyId, waiting: &Wait, jumper: &Wait, tolerance: i64) -> Anomaly {
    let process = |p| names.process(p);
    let key_name = names.history.key_name(key).to_string();
    Anomaly {
        kind: AnomalyKind::Unfair,
        key: key_name.clone(),
        processes: vec![process(waiting.process), process(jumper.process)],
        indices: vec![
            u64::from(waiting.since_index),
            u64::from(waiting.ok_index),
            u64::from(jumper.since_index),
            u64::from(jumper.ok_index),
        ],
        explanation: format!(
            "process {} asked for the fair lock {key_name} at {} (event {}), {} after process {} (at {}, event {}), yet got it first, at {} (event {}); process {} waited until {} (event {}): it was overtaken in the queue a fair lock promises (fairness tolerance {}).",
            process(jumper.process),
            fmt_time(jumper.since),
            jumper.since_index,
            fmt_span(jumper.since.saturating_sub(waiting.since)),
            process(waiting.process),
            fmt_time(waiting.since),
            waiting.since_index,
            fmt_time(jumper.ok),
            jumper.ok_index,
            process(waiting.process),
            fmt_time(waiting.ok),
            waiting.ok_index,
            fmt_span(tolerance),
        ),
        start: jumper.ok,
        end: waiting.ok,
        lease_expired: None,
        tokens: Vec::new(),
        cycle: Vec::new(),
    }
}
