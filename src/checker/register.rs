//! The register check: `lost-update`.
//!
//! Value shapes (docs/src/reference/history.md, "Counter values"): under the lock a client reads the resource
//! (`read` ok `{"value": n}`, null meaning 0) and writes the read value + 1 (`write` invoke
//! `{"token": t, "value": n + 1}`). Every acknowledged (`ok`) write is then one increment,
//! and the counter must end at least at its initial value plus the acknowledged increments,
//! and at least at the value of every acknowledged write. A lost update shows as a final
//! read below either, or as two acknowledged writes of the same value (two increments from
//! the same base: one of them vanished). The second bound catches what the count misses
//! when writes that ended `info` land late: they add to the count's slack, and one that
//! lands after an acknowledged write overwrites it with a lower value.
//!
//! A key is only checked as a counter when every value is an integer (or null) and every
//! acknowledged write is its process's last read of the key + 1; other workloads are skipped
//! and counted in the figures, never guessed at.
//!
//! While a history is unfinished (online checking), its last read is not the final read,
//! and later writes may still set the counter back up (an `info` write landing late, a
//! write from a fresher read): a read below an acknowledged write proves nothing yet. Two
//! acknowledged increments of the same value stay in the history whatever comes, so only
//! those are judged then (`Seen::SoFar`).

use crate::history::compact::{flags, KeyId, OpF, OpType, ProcessId, NO_KEY};
use crate::report::{Anomaly, AnomalyKind};
use crate::units::fmt_time;

use super::findings::{Findings, Names};
use super::grouped::{self, Grouped};

#[derive(Debug, Default)]
struct Counter {
    is_counter: bool,
    /// The first read's value, if it was invoked before any write.
    initial: Option<i64>,
    first_write_invoke: Option<i64>,
}

/// An acknowledged write: (value, ok index, process, ok time).
type Acked = (i64, u32, ProcessId, i64);
/// A read that returned: (invoke time, completion time, value, index).
type Read = (i64, i64, i64, u32);

/// How much of the history the check sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// All of it: the full rule.
    Whole,
    /// The events up to a horizon, more to come: duplicate increments only.
    SoFar,
}

/// Returns (keys checked as counters, keys skipped).
pub fn check(names: &Names, seen: Seen, findings: &mut Findings) -> (u64, u64) {
    let history = names.history;
    // The reads and writes key by key, each key's in history order: a key's ops are then
    // judged together, with no map over every (process, key) pair read and no sort of every
    // key's lists (a million keys, each read once at the end, made both the bulk of this
    // check).
    let positions = || {
        history
            .ops
            .iter()
            .enumerate()
            .filter(|(_, op)| matches!(op.f, OpF::Read | OpF::Write))
    };
    let mut by_key = Grouped::new(
        grouped::counts(history.keys.len(), positions().map(|(_, op)| op.key)),
        0u32,
    );
    for (position, op) in positions() {
        by_key.put(op.key, position as u32);
    }
    if by_key.all().is_empty() {
        // Nothing to judge, and no need for the lists below (a history of millions of
        // processes that never read or write would pay for them anyway).
        return (0, 0);
    }
    // Per process: its pending op's invoke (time, value), and its last read of the key
    // being judged (with that key: a read of an earlier key is not this key's).
    let mut invoked: Vec<Option<(i64, Option<i64>)>> = vec![None; history.processes.len()];
    let mut last_read: Vec<(KeyId, i64)> = vec![(NO_KEY, 0); history.processes.len()];
    // The key's acknowledged writes and returned reads, reused from key to key.
    let mut acked: Vec<Acked> = Vec::new();
    let mut reads: Vec<Read> = Vec::new();
    let (mut checked, mut skipped) = (0, 0);
    for key in 0..history.keys.len() as KeyId {
        let mut counter = Counter {
            is_counter: true,
            ..Counter::default()
        };
        acked.clear();
        reads.clear();
        for &position in by_key.of(key) {
            let op = &history.ops[position as usize];
            if op.flags & flags::OTHER_VALUE != 0 {
                counter.is_counter = false;
            }
            let value = if op.flags & flags::NULL_VALUE != 0 {
                Some(0)
            } else {
                op.int_value()
            };
            let p = op.process as usize;
            if op.ty == OpType::Invoke {
                invoked[p] = Some((op.time, value));
                if op.f == OpF::Write {
                    counter.first_write_invoke.get_or_insert(op.time);
                }
                continue;
            }
            let Some((invoke_time, invoke_value)) = invoked[p].take() else {
                continue;
            };
            match (op.f, op.ty) {
                (OpF::Read, OpType::Ok) => {
                    let Some(v) = value else {
                        counter.is_counter = false;
                        continue;
                    };
                    if counter.first_write_invoke.is_none_or(|w| invoke_time < w)
                        && counter.initial.is_none()
                    {
                        counter.initial = Some(v);
                    }
                    reads.push((invoke_time, op.time, v, op.index));
                    last_read[p] = (key, v);
                }
                (OpF::Write, OpType::Ok) => {
                    let Some(v) = invoke_value else {
                        counter.is_counter = false;
                        continue;
                    };
                    // A write of i64::MIN cannot be an increment of anything.
                    if v.checked_sub(1)
                        .is_none_or(|before| last_read[p] != (key, before))
                    {
                        counter.is_counter = false;
                    }
                    acked.push((v, op.index, op.process, op.time));
                }
                _ => {}
            }
        }
        if acked.is_empty() {
            continue;
        }
        if !counter.is_counter {
            skipped += 1;
            continue;
        }
        checked += 1;
        // By value, as `lost_updates` wants.
        acked.sort_unstable();
        lost_updates(names, key, &counter, &acked, &reads, seen, findings);
    }
    (checked, skipped)
}

/// `acked_writes`: the key's acknowledged writes, sorted; `reads`: its reads that returned.
fn lost_updates(
    names: &Names,
    key: KeyId,
    counter: &Counter,
    acked_writes: &[Acked],
    reads: &[Read],
    seen: Seen,
    findings: &mut Findings,
) {
    let key_name = names.history.key_name(key);
    let initial = counter.initial.unwrap_or(0);
    let acked = acked_writes.len() as i64;
    let last_ack = acked_writes.iter().map(|w| w.3).max().unwrap_or(i64::MIN);
    // The final read: the last one invoked after every acknowledged write had completed.
    // An unfinished history has none yet.
    let final_read = reads
        .iter()
        .copied()
        .filter(|r| seen == Seen::Whole && r.0 > last_ack)
        .max_by_key(|r| (r.1, r.3));
    let duplicated: Vec<&[Acked]> = acked_writes
        .chunk_by(|a, b| a.0 == b.0)
        .filter(|group| group.len() > 1)
        .collect();
    let missing = final_read.map_or(0, |r| initial.saturating_add(acked).saturating_sub(r.2));
    // Sorted by value: the last is the highest acknowledged write.
    let overwritten = match (final_read, acked_writes.last().copied()) {
        (Some(r), Some(w)) if r.2 < w.0 => Some(w),
        _ => None,
    };
    if missing <= 0 && overwritten.is_none() && duplicated.is_empty() {
        return;
    }
    findings.add(AnomalyKind::LostUpdate, || {
        let mut indices: Vec<u64> = final_read.iter().map(|r| u64::from(r.3)).collect();
        let mut processes: Vec<u64> = Vec::new();
        if let Some(w) = overwritten {
            indices.push(u64::from(w.1));
            processes.push(names.process(w.2));
        }
        for group in duplicated.iter().take(10) {
            for write in group.iter() {
                indices.push(u64::from(write.1));
                processes.push(names.process(write.2));
            }
        }
        processes.sort_unstable();
        processes.dedup();
        let mut parts = Vec::new();
        if let Some((_, time, value, index)) = final_read {
            if missing > 0 {
                parts.push(format!(
                    "the final read (event {index}, at {}) found {value}, but it started at {initial} and {acked} increments were acknowledged: {missing} lost",
                    fmt_time(time)
                ));
            }
            if let Some((written, ok_index, process, _)) = overwritten {
                parts.push(format!(
                    "the final read (event {index}, at {}) found {value}, below the {written} that process {}'s acknowledged increment wrote (event {ok_index}): it was overwritten",
                    fmt_time(time),
                    names.process(process)
                ));
            }
        }
        if !duplicated.is_empty() {
            let examples: Vec<String> = duplicated
                .iter()
                .take(3)
                .map(|g| {
                    let events: Vec<String> = g.iter().map(|w| w.1.to_string()).collect();
                    format!("value {} by events {}", g[0].0, events.join(", "))
                })
                .collect();
            parts.push(format!(
                "{} values were written by more than one acknowledged increment ({}): each of those increments started from the same count",
                duplicated.len(),
                examples.join("; ")
            ));
        }
        let start = acked_writes.iter().map(|w| w.3).min().unwrap_or(0);
        let end = final_read.map_or(last_ack, |r| r.1);
        Anomaly {
            kind: AnomalyKind::LostUpdate,
            key: key_name.to_string(),
            processes,
            indices,
            explanation: format!("The counter guarded by {key_name} lost updates: {}.", parts.join("; and ")),
            start,
            end,
            lease_expired: None,
            tokens: Vec::new(),
            cycle: Vec::new(),
        }
    });
}
