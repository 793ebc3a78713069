//! Fencing: `stale-write`, `duplicate-token` and `token-order`.
//!
//! - stale-write: a write accepted (`ok`) under hold H, invoked after the resource had
//!   already accepted a write made under a later hold H' of the same key (H' began after H
//!   began). Needs no tokens; names them where there are any. "After" is strictly after: a
//!   write invoked in the nanosecond the other was accepted is not known to come later.
//! - duplicate-token: two holds of one key got the same token.
//! - token-order: a hold that ended before another began got a token that is not lower;
//!   found as cycles in the precedence graph (see `precedence.rs`).

use rustc_hash::FxHashMap as HashMap;

use crate::history::compact::{KeyId, Op, OpF, OpType, ProcessId};
use crate::report::{Anomaly, AnomalyKind};
use crate::units::fmt_time;

use super::findings::{Findings, Names};
use super::grouped::{self, Grouped};
use super::holds::{Hold, NO_HOLD};
use super::precedence::{self, Order, Step};

pub fn check(names: &Names, findings: &mut Findings) {
    duplicate_tokens(names, findings);
    token_order(names, findings);
    stale_writes(names, findings);
}

fn duplicate_tokens(names: &Names, findings: &mut Findings) {
    let holds = &names.holds.holds;
    let mut first_with: HashMap<(u32, i64), usize> = HashMap::default();
    for (id, hold) in holds.iter().enumerate() {
        let Some(token) = hold.token else { continue };
        let first = *first_with.entry((hold.key, token)).or_insert(id);
        if first == id {
            continue;
        }
        let earlier = &holds[first];
        findings.add(AnomalyKind::DuplicateToken, || Anomaly {
            kind: AnomalyKind::DuplicateToken,
            key: names.key(hold),
            processes: vec![names.process(earlier.process), names.process(hold.process)],
            indices: vec![u64::from(earlier.begin_index), u64::from(hold.begin_index)],
            explanation: format!(
                "{} and {} were both given token {token} for {}: a fenced resource cannot tell them apart.",
                names.hold(earlier),
                names.hold(hold),
                names.key(hold)
            ),
            start: earlier.begin,
            end: names.holds.shown_end(hold),
            lease_expired: None,
            tokens: vec![token, token],
            cycle: Vec::new(),
        });
    }
}

fn token_order(names: &Names, findings: &mut Findings) {
    let holds = &names.holds.holds;
    let keys = names.history.keys.len();
    let mut per_key = Grouped::new(grouped::counts(keys, holds.iter().map(|h| h.key)), 0u32);
    let mut tokened = vec![false; keys];
    for (id, hold) in holds.iter().enumerate() {
        per_key.put(hold.key, id as u32);
        tokened[hold.key as usize] |= hold.token.is_some();
    }
    for key in (0..keys).filter(|&key| tokened[key]) {
        for cycle in precedence::token_order_cycles(holds, per_key.of(key as KeyId)) {
            findings.add(AnomalyKind::TokenOrder, || {
                describe_token_cycle(names, &cycle)
            });
        }
    }
}

fn describe_token_cycle(names: &Names, cycle: &[Step]) -> Anomaly {
    let holds = &names.holds.holds;
    let hold = |id: u32| &holds[id as usize];
    let steps: Vec<String> = cycle
        .iter()
        .enumerate()
        .map(|(n, step)| {
            let (a, b) = (hold(step.from), hold(step.to));
            let why = match step.order {
                Order::Realtime => format!(
                    "ended at {} before {} began at {} (real time)",
                    fmt_time(a.end),
                    names.hold(b),
                    fmt_time(b.begin)
                ),
                Order::Token if a.token == b.token => format!(
                    "has the same token as {}, so tokens do not put that one first (token order)",
                    names.hold(b)
                ),
                Order::Token => format!("has a lower token than {} (token order)", names.hold(b)),
            };
            format!("{}. {} {why}", n + 1, names.hold(a))
        })
        .collect();
    let members: Vec<&Hold> = cycle.iter().map(|s| hold(s.from)).collect();
    let mut processes: Vec<u64> = members.iter().map(|h| names.process(h.process)).collect();
    processes.dedup();
    let start = members.iter().map(|h| h.begin).min().unwrap_or(0);
    let end = members
        .iter()
        .map(|h| names.holds.shown_end(h))
        .max()
        .unwrap_or(start);
    Anomaly {
        kind: AnomalyKind::TokenOrder,
        key: names.key(members[0]),
        processes,
        indices: members
            .iter()
            .flat_map(|h| std::iter::once(h.begin_index).chain(h.end_index))
            .map(u64::from)
            .collect(),
        explanation: format!(
            "{} holds of {} form a cycle: real time puts one before the other, yet its token is not lower, so a fenced resource would reject the later holder's writes.",
            members.len(),
            names.key(members[0])
        ),
        start,
        end,
        lease_expired: None,
        tokens: members.iter().filter_map(|h| h.token).collect(),
        cycle: steps,
    }
}

/// The latest-beginning hold whose write the resource has accepted so far, per key.
#[derive(Debug, Clone, Copy)]
struct Accepted {
    hold: u32,
    write_invoke: u32,
    write_ok: u32,
    time: i64,
    token: Option<i64>,
}

/// A write under way, and the accepted write of a later hold that it came after, if any.
#[derive(Debug, Clone, Copy)]
struct PendingWrite {
    hold: u32,
    invoke: u32,
    invoke_time: i64,
    token: Option<i64>,
    after: Option<Accepted>,
}

fn stale_writes(names: &Names, findings: &mut Findings) {
    let history = names.history;
    let holds = &names.holds.holds;
    let mut latest: Vec<Option<Accepted>> = vec![None; history.keys.len()];
    // Writes accepted at the time now being read: a write invoked in the same nanosecond
    // was not invoked after them (the file orders events of one nanosecond arbitrarily, so
    // they only count from the next nanosecond on).
    let mut accepted_now: Vec<(usize, Accepted)> = Vec::new();
    // By process: few write at once, and a vector over every process would cost a history
    // of millions of them (one every two events) more than all its writes.
    let mut pending: HashMap<ProcessId, PendingWrite> = HashMap::default();
    for (position, op) in history.ops.iter().enumerate() {
        if op.f != OpF::Write {
            continue;
        }
        if accepted_now.first().is_some_and(|(_, a)| a.time < op.time) {
            for (key, accepted) in accepted_now.drain(..) {
                let newer = latest[key].is_none_or(|a| {
                    holds[a.hold as usize].begin < holds[accepted.hold as usize].begin
                });
                if newer {
                    latest[key] = Some(accepted);
                }
            }
        }
        let hold = names.holds.op_hold[position];
        if hold == NO_HOLD {
            continue; // a write outside any hold is not attributed to one
        }
        let key = op.key as usize;
        match op.ty {
            OpType::Invoke => {
                let begin = holds[hold as usize].begin;
                let after = latest[key].filter(|a| holds[a.hold as usize].begin > begin);
                pending.insert(
                    op.process,
                    PendingWrite {
                        hold,
                        invoke: op.index,
                        invoke_time: op.time,
                        token: op.token(),
                        after,
                    },
                );
            }
            OpType::Ok => {
                let Some(write) = pending.remove(&op.process) else {
                    continue;
                };
                if let Some(witness) = write.after {
                    findings.add(AnomalyKind::StaleWrite, || {
                        describe_stale(names, op, &write, &witness)
                    });
                }
                accepted_now.push((
                    key,
                    Accepted {
                        hold,
                        write_invoke: write.invoke,
                        write_ok: op.index,
                        time: op.time,
                        token: write.token,
                    },
                ));
            }
            _ => {
                pending.remove(&op.process);
            }
        }
    }
}

fn describe_stale(names: &Names, ok: &Op, write: &PendingWrite, witness: &Accepted) -> Anomaly {
    let holds = &names.holds.holds;
    let (stale, later) = (&holds[write.hold as usize], &holds[witness.hold as usize]);
    let token = |t: Option<i64>| t.map(|t| format!(", token {t}")).unwrap_or_default();
    let cycle = vec![
        format!(
            "1. {} began before {} (lock order)",
            names.hold(stale),
            names.hold(later)
        ),
        format!(
            "2. the resource accepted process {}'s write (event {}{}) at {}, before process {}'s write (event {}{}) was invoked at {} (resource order)",
            names.process(later.process),
            witness.write_ok,
            token(witness.token),
            fmt_time(witness.time),
            names.process(stale.process),
            write.invoke,
            token(write.token),
            fmt_time(write.invoke_time),
        ),
    ];
    Anomaly {
        kind: AnomalyKind::StaleWrite,
        key: names.key(stale),
        processes: vec![names.process(stale.process), names.process(later.process)],
        indices: vec![
            u64::from(stale.begin_index),
            u64::from(later.begin_index),
            u64::from(witness.write_invoke),
            u64::from(witness.write_ok),
            u64::from(write.invoke),
            u64::from(ok.index),
        ],
        explanation: format!(
            "The resource guarded by {} accepted a write (event {}) from {} after it had already accepted one from the later {}: the earlier holder's stale write got through.",
            names.key(stale),
            ok.index,
            names.hold(stale),
            names.hold(later),
        ),
        start: witness.time,
        end: ok.time,
        lease_expired: None,
        tokens: write.token.into_iter().chain(witness.token).collect(),
        cycle,
    }
}
