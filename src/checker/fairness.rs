//! Fairness: `unfair`, on a key whose acquires are marked `fair`, a process B whose acquire
//! was invoked later than process A's (by more than the tolerance) got the lock while A's
//! acquire was still pending, and A's acquire later ended `ok` too: B jumped the queue.
//!
//! Only first acquisitions count: a nested (reentrant) acquire by a holder does not queue.
//! One anomaly per grant that jumped the queue, naming the earliest-invoked acquire it
//! overtook (the one that had waited longest); the others it overtook are not counted again.

use crate::history::compact::{flags, KeyId, OpF, OpType, ProcessId};
use crate::report::Anomaly;
use crate::units::{fmt_span, fmt_time};

use super::findings::{Findings, Names};
use super::holds::NO_HOLD;
use super::CheckOptions;

/// A fair acquire that began a hold: its invoke and its `ok`.
#[derive(Debug, Clone, Copy)]
struct Grant {
    process: ProcessId,
    invoke: i64,
    invoke_index: u32,
    ok: i64,
    ok_index: u32,
}

pub fn check(names: &Names, options: &CheckOptions, findings: &mut Findings) {
    let history = names.history;
    let holds = names.holds;
    let mut grants: Vec<Vec<Grant>> = vec![Vec::new(); history.keys.len()];
    // The acquire each process has under way: (invoke time, index, marked fair).
    let mut invokes: Vec<Option<(i64, u32, bool)>> = vec![None; history.processes.len()];
    for (position, op) in history.ops.iter().enumerate() {
        if op.f != OpF::Acquire || !op.is_client() {
            continue;
        }
        let p = op.process as usize;
        if op.ty == OpType::Invoke {
            invokes[p] = Some((op.time, op.index, op.flags & flags::FAIR != 0));
            continue;
        }
        let Some((invoke, invoke_index, fair)) = invokes[p].take() else {
            continue;
        };
        let hold = holds.op_hold[position];
        // Only an `ok` that began its hold: a nested acquire was never in the queue.
        let began = hold != NO_HOLD && holds.holds[hold as usize].begin_index == op.index;
        if op.ty == OpType::Ok && fair && began {
            grants[op.key as usize].push(Grant {
                process: op.process,
                invoke,
                invoke_index,
                ok: op.time,
                ok_index: op.index,
            });
        }
    }
    for (key, key_grants) in grants.iter_mut().enumerate() {
        jumps(names, key as KeyId, key_grants, options, findings);
    }
}

/// Finds the grants on one key that overtook an earlier-invoked acquire still pending.
fn jumps(
    names: &Names,
    key: KeyId,
    grants: &mut [Grant],
    options: &CheckOptions,
    findings: &mut Findings,
) {
    grants.sort_by_key(|g| (g.invoke, g.invoke_index));
    // latest_ok[i]: the latest `ok` among grants[..=i]. It never decreases, so the first
    // grant whose `ok` came after B's is where it first exceeds B's `ok`.
    let latest_ok: Vec<i64> = grants
        .iter()
        .scan(i64::MIN, |latest, g| {
            *latest = (*latest).max(g.ok);
            Some(*latest)
        })
        .collect();
    let mut jumped: Vec<(usize, usize)> = Vec::new();
    for (b, later) in grants.iter().enumerate() {
        // Acquires invoked more than the tolerance before B's.
        let earlier = grants.partition_point(|g| {
            g.invoke < later.invoke.saturating_sub(options.fairness_tolerance_ns)
        });
        if earlier == 0 || latest_ok[earlier - 1] <= later.ok {
            continue;
        }
        let a = latest_ok[..earlier].partition_point(|&ok| ok <= later.ok);
        jumped.push((a, b));
    }
    // Report in the order the queue was jumped.
    jumped.sort_by_key(|&(_, b)| (grants[b].ok, grants[b].ok_index));
    for (a, b) in jumped {
        let (waiting, jumper) = (grants[a], grants[b]);
        findings.add("unfair", || {
            describe(names, key, &waiting, &jumper, options.fairness_tolerance_ns)
        });
    }
}

fn describe(names: &Names, key: KeyId, waiting: &Grant, jumper: &Grant, tolerance: i64) -> Anomaly {
    let process = |p| names.process(p);
    let key_name = names.history.key_name(key).to_string();
    Anomaly {
        kind: "unfair".into(),
        key: key_name.clone(),
        processes: vec![process(waiting.process), process(jumper.process)],
        indices: vec![
            u64::from(waiting.invoke_index),
            u64::from(waiting.ok_index),
            u64::from(jumper.invoke_index),
            u64::from(jumper.ok_index),
        ],
        explanation: format!(
            "process {} asked for the fair lock {key_name} at {} (event {}), {} after process {} (at {}, event {}), yet got it first, at {} (event {}); process {} waited until {} (event {}): it was overtaken in the queue a fair lock promises (fairness tolerance {}).",
            process(jumper.process),
            fmt_time(jumper.invoke),
            jumper.invoke_index,
            fmt_span(jumper.invoke.saturating_sub(waiting.invoke)),
            process(waiting.process),
            fmt_time(waiting.invoke),
            waiting.invoke_index,
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
