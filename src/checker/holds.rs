//! Holds: who held which lock when, derived once from the history and shared by every check.
//!
//! The rules of docs/src/reference/history.md: a hold of (process, key) begins at the `ok` of an `acquire` and ends at
//! the `invoke` of that process's next `release` of the key, at a nemesis `kill` listing the
//! process, or at the end of the history. A second `acquire` by a holder nests; the hold ends
//! when the count returns to zero. An `acquire` that ended `info` never begins a hold. The
//! lease ends at the acquire's invoke + `lease_ms`; each `renew` ok and each nested acquire
//! ok sets it again to that operation's invoke + its `lease_ms`, shorter or longer (a nested
//! acquire's `null`: the lock no longer expires). A renew ok gives a lease to a hold that had
//! none. `Holds::lease_end_at` is that one rule; every check and picture reads it from there.

use crate::history::compact::{flags, KeyId, Op, OpF, OpType, ProcessId, NEMESIS};
use crate::history::History;

/// Marks "no hold" in `Holds::op_hold`.
pub const NO_HOLD: u32 = u32::MAX;
/// The end of a hold still open when the history ends: no event is later. (Whether a hold is
/// open is `end_cause`, never this value: an event may itself happen at `i64::MAX`.)
pub const OPEN: i64 = i64::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldEnd {
    /// Ended at the invoke of a release (its outcome in `Hold::release`).
    Released,
    /// Ended at a nemesis kill listing the process.
    Killed,
    /// Still held when the history ended.
    Open,
}

/// How the release that ended a hold turned out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseOutcome {
    /// No release ended this hold (killed or open), or it is still pending.
    None,
    Ok {
        time: i64,
        index: u32,
    },
    Fail {
        time: i64,
        index: u32,
    },
    Info {
        time: i64,
        index: u32,
    },
}

#[derive(Debug, Clone)]
pub struct Hold {
    pub key: KeyId,
    pub process: ProcessId,
    pub acquire_invoke: i64,
    pub acquire_invoke_index: u32,
    /// The acquire `ok`.
    pub begin: i64,
    pub begin_index: u32,
    /// `OPEN` if still held at the end of the history.
    pub end: i64,
    /// The release invoke or the kill that ended it.
    pub end_index: Option<u32>,
    pub end_cause: HoldEnd,
    pub release: ReleaseOutcome,
    pub token: Option<i64>,
    /// The most recent lease length promised, ms (None: held until released).
    pub lease_ms: Option<i64>,
    /// The first acquire's promise: its invoke + `lease_ms` (None: no lease).
    pub initial_lease_end: Option<i64>,
    /// When the lease runs out as the hold's last renew or nested acquire ok left it,
    /// counting only what certainly happened; None: no lease.
    pub lease_end: Option<i64>,
    /// When the lease might run out, counting renews that ended `info` as having worked.
    pub lease_end_possible: Option<i64>,
    /// The invoke of the operation whose promise `lease_end_possible` counts from: the
    /// acquire, or the renew (or nested acquire) that last set it or may have.
    pub lease_set_index: u32,
    /// The grant's lease had already run out when the grant returned (`bad-lease`): the
    /// holder was told it holds a lock it never held under its lease.
    pub dead_grant: bool,
    /// Acquired in `shared` mode (a reader): shared holds may overlap one another. A nested
    /// acquire in exclusive mode makes the whole hold exclusive (the stricter reading).
    pub shared: bool,
}

impl Hold {
    /// Whether this hold and `other` overlap: each begins strictly before the other ends.
    pub fn overlaps(&self, other: &Hold) -> bool {
        self.begin < other.end && other.begin < self.end
    }
}

/// A lease set by a renew `ok` or a nested acquire `ok`: from `invoke` on, the lease of
/// `hold` runs to `lease_end` (None: the lock no longer expires).
#[derive(Debug, Clone, Copy)]
pub struct Renewal {
    pub hold: u32,
    pub invoke: i64,
    pub lease_end: Option<i64>,
}

/// An acquire `ok` whose lease promise cannot be right (`bad-lease`).
#[derive(Debug, Clone, Copy)]
pub struct BadLease {
    pub key: KeyId,
    pub process: ProcessId,
    pub invoke_index: u32,
    pub ok_index: u32,
    pub invoke: i64,
    pub ok: i64,
    pub lease_ms: i64,
    /// The ttl the invoke asked for, if it said.
    pub ttl_ms: Option<i64>,
    /// The lease had run out by the time the grant returned (`lease_ms` <= its latency).
    pub dead: bool,
    /// The lease ends after the grant + the ttl asked for.
    pub too_long: bool,
}

/// A renew or release that found the lock no longer ours.
#[derive(Debug, Clone, Copy)]
pub struct LockLoss {
    pub hold: u32,
    pub f: OpF,
    pub invoke_index: u32,
    pub completion_index: u32,
    pub completion_time: i64,
    /// The hold's certain lease end when the failure came back (None: no lease).
    pub lease_end: Option<i64>,
}

/// An acquire that ended `info` (or never ended): it may have taken the lock.
///
/// 32 bytes: a history of indeterminate acquires has one every two events.
#[derive(Debug, Clone, Copy)]
pub struct UncertainAcquire {
    pub key: KeyId,
    pub process: ProcessId,
    pub invoke: i64,
    pub invoke_index: u32,
    /// The `info` completion, or the end of the history if none came.
    pub completion: i64,
    /// The `info` completion's index; `NEVER_ENDED` if none came.
    completion_index: u32,
}

/// `UncertainAcquire::completion_index` of an acquire that never ended.
const NEVER_ENDED: u32 = u32::MAX;

const _: () = assert!(std::mem::size_of::<UncertainAcquire>() == 32);

impl UncertainAcquire {
    /// The `info` completion's index; None if the acquire never ended.
    pub fn completion_index(&self) -> Option<u32> {
        (self.completion_index != NEVER_ENDED).then_some(self.completion_index)
    }
}

#[derive(Debug, Default)]
pub struct Holds {
    /// In order of `begin` (ties: by the index of the acquire ok).
    pub holds: Vec<Hold>,
    /// For each op (by position in `History::ops`), the hold it belongs to or `NO_HOLD`:
    /// an acquire ok -> the hold it began or nested into; a release, renew, read or write
    /// (invoke and completion) -> the process's hold of that key when it was invoked.
    pub op_hold: Vec<u32>,
    /// Sorted by hold, then time.
    pub renewals: Vec<Renewal>,
    pub losses: Vec<LockLoss>,
    pub uncertain_acquires: Vec<UncertainAcquire>,
    /// Acquire oks (nested ones too) whose lease promise cannot be right.
    pub bad_leases: Vec<BadLease>,
    /// The time of the last event.
    pub history_end: i64,
}

impl Holds {
    /// The certain lease end of `hold` as it stood at time `t`, counting renewals invoked
    /// before `t` (a renew under way may already have taken effect). None: no lease.
    pub fn lease_end_at(&self, hold: u32, t: i64) -> Option<i64> {
        let first = self.holds[hold as usize].initial_lease_end;
        // `renewals` is sorted by hold, each hold's in time order: the last one invoked
        // before `t` set the lease.
        let from = self.renewals.partition_point(|r| r.hold < hold);
        let to = self.renewals.partition_point(|r| r.hold <= hold);
        self.renewals[from..to]
            .iter()
            .take_while(|r| r.invoke < t)
            .last()
            .map_or(first, |r| r.lease_end)
    }

    /// The end of `hold` for display and spans: the last event time if it is still open.
    pub fn shown_end(&self, hold: &Hold) -> i64 {
        if hold.end_cause == HoldEnd::Open {
            self.history_end
        } else {
            hold.end
        }
    }
}

pub fn ms_to_ns(ms: i64) -> i64 {
    ms.saturating_mul(1_000_000)
}

/// What a process holds right now: (key, hold, nesting count).
type Held = Vec<(KeyId, u32, u32)>;

/// The op a process has under way, and the hold it belongs to.
#[derive(Debug, Clone, Copy)]
struct Pending {
    position: usize,
    hold: u32,
    /// A release that only decremented a nested count: its outcome is not the hold's.
    nested_release: bool,
}

/// Derives every hold of `history` in one pass over its time-ordered ops.
pub fn derive(history: &History) -> Holds {
    let ops = &history.ops;
    let acquisitions = ops
        .iter()
        .filter(|op| op.f == OpF::Acquire && op.ty == OpType::Ok)
        .count();
    let mut derivation = Derivation {
        ops,
        out: Holds {
            // Sized once: growing a vector of a million holds would copy it again and again.
            holds: Vec::with_capacity(acquisitions),
            op_hold: vec![NO_HOLD; ops.len()],
            history_end: history.time_span().1,
            ..Holds::default()
        },
        held: vec![Vec::new(); history.processes.len()],
        pending: vec![None; history.processes.len()],
    };

    for (position, op) in ops.iter().enumerate() {
        if op.process == NEMESIS {
            let fault = &history.faults[op.a as usize];
            if fault.name == "kill" {
                derivation.kill(op, &fault.processes);
            }
            continue;
        }
        if op.ty == OpType::Invoke {
            derivation.invoke(position, op);
        } else {
            derivation.complete(position, op);
        }
    }

    derivation.out.renewals.sort_by_key(|r| r.hold);
    derivation.unfinished_acquires();
    derivation.out
}

/// Where in `held` the hold of `key` is, if the process holds it.
fn position_of(held: &Held, key: KeyId) -> Option<usize> {
    held.iter().position(|&(k, _, _)| k == key)
}

/// What `derive` keeps while it walks the ops.
struct Derivation<'a> {
    ops: &'a [Op],
    out: Holds,
    /// Per process.
    held: Vec<Held>,
    /// Per process.
    pending: Vec<Option<Pending>>,
}

impl Derivation<'_> {
    /// A nemesis `kill` ends every hold of the processes it lists.
    fn kill(&mut self, op: &Op, processes: &[ProcessId]) {
        for &p in processes {
            for (_, hold, _) in self.held[p as usize].drain(..) {
                let h = &mut self.out.holds[hold as usize];
                h.end = op.time;
                h.end_index = Some(op.index);
                h.end_cause = HoldEnd::Killed;
            }
        }
    }

    /// An invoke belongs to the process's hold of its key, if any; a release ends that hold
    /// unless it only unwinds one level of nesting.
    fn invoke(&mut self, position: usize, op: &Op) {
        let p = op.process as usize;
        let current = position_of(&self.held[p], op.key);
        let hold = current.map_or(NO_HOLD, |i| self.held[p][i].1);
        let mut nested_release = false;
        if op.f == OpF::Release {
            if let Some(i) = current {
                let entry = &mut self.held[p][i];
                entry.2 -= 1;
                if entry.2 == 0 {
                    let h = &mut self.out.holds[hold as usize];
                    h.end = op.time;
                    h.end_index = Some(op.index);
                    h.end_cause = HoldEnd::Released;
                    self.held[p].swap_remove(i);
                } else {
                    nested_release = true;
                }
            }
        }
        self.pending[p] = Some(Pending {
            position,
            hold,
            nested_release,
        });
        self.out.op_hold[position] = hold;
    }

    /// A completion: it belongs to the hold its invoke belonged to.
    fn complete(&mut self, position: usize, op: &Op) {
        let p = op.process as usize;
        let Some(invoke) = self.pending[p].take() else {
            return; // validated away by the reader; nothing to attribute
        };
        let invoke_op = &self.ops[invoke.position];
        let hold = invoke.hold;
        let out = &mut self.out;
        out.op_hold[position] = hold;

        match (op.f, op.ty) {
            (OpF::Acquire, OpType::Ok) => self.acquired(position, invoke_op, op),
            (OpF::Acquire, OpType::Info) => {
                if let Some(i) = position_of(&self.held[p], op.key) {
                    // A nested acquire that may have renewed the lease.
                    let hold = self.held[p][i].1;
                    possibly_extend_lease(out, hold, invoke_op.time, invoke_op.index);
                }
                // Like any acquire that ended `info` (nested ones too: the format makes no
                // exception), it may take effect as late as its completion, or a heal.
                out.uncertain_acquires.push(UncertainAcquire {
                    key: op.key,
                    process: op.process,
                    invoke: invoke_op.time,
                    invoke_index: invoke_op.index,
                    completion: op.time,
                    completion_index: op.index,
                });
            }
            (OpF::Renew, OpType::Ok) if hold != NO_HOLD => {
                // A renew ok without a lease (the format always gives one) says nothing.
                if let Some(ms) = op.lease_ms() {
                    let end = invoke_op.time.saturating_add(ms_to_ns(ms));
                    set_lease(
                        out,
                        hold,
                        (invoke_op.time, invoke_op.index),
                        Some(end),
                        Some(ms),
                    );
                }
            }
            (OpF::Renew, OpType::Info) if hold != NO_HOLD => {
                possibly_extend_lease(out, hold, invoke_op.time, invoke_op.index);
            }
            (OpF::Renew | OpF::Release, OpType::Fail) if hold != NO_HOLD => {
                out.losses.push(LockLoss {
                    hold,
                    f: op.f,
                    invoke_index: invoke_op.index,
                    completion_index: op.index,
                    completion_time: op.time,
                    lease_end: out.holds[hold as usize].lease_end,
                });
            }
            _ => {}
        }
        if op.f == OpF::Release && hold != NO_HOLD && !invoke.nested_release {
            self.out.holds[hold as usize].release = match op.ty {
                OpType::Ok => ReleaseOutcome::Ok {
                    time: op.time,
                    index: op.index,
                },
                OpType::Fail => ReleaseOutcome::Fail {
                    time: op.time,
                    index: op.index,
                },
                _ => ReleaseOutcome::Info {
                    time: op.time,
                    index: op.index,
                },
            };
        }
    }

    /// An acquire `ok`: a new hold, or one more level of the holder's.
    fn acquired(&mut self, position: usize, invoke_op: &Op, op: &Op) {
        let p = op.process as usize;
        let out = &mut self.out;
        let lease_end = op
            .lease_ms()
            .map(|ms| invoke_op.time.saturating_add(ms_to_ns(ms)));
        let bad = bad_lease(invoke_op, op);
        if let Some(bad) = bad {
            out.bad_leases.push(bad);
        }
        if let Some(i) = position_of(&self.held[p], op.key) {
            // Reentrant: nest, and the new promise sets the lease as a renew does.
            let (_, nested_into, count) = &mut self.held[p][i];
            *count += 1;
            let nested_into = *nested_into;
            out.op_hold[position] = nested_into;
            out.holds[nested_into as usize].shared &= invoke_op.flags & flags::SHARED != 0;
            set_lease(
                out,
                nested_into,
                (invoke_op.time, invoke_op.index),
                lease_end,
                op.lease_ms(),
            );
        } else {
            let id = out.holds.len() as u32;
            out.holds.push(Hold {
                key: op.key,
                process: op.process,
                acquire_invoke: invoke_op.time,
                acquire_invoke_index: invoke_op.index,
                begin: op.time,
                begin_index: op.index,
                end: OPEN,
                end_index: None,
                end_cause: HoldEnd::Open,
                release: ReleaseOutcome::None,
                token: op.token(),
                lease_ms: op.lease_ms(),
                initial_lease_end: lease_end,
                lease_end,
                lease_end_possible: lease_end,
                lease_set_index: invoke_op.index,
                dead_grant: bad.is_some_and(|b| b.dead),
                shared: invoke_op.flags & flags::SHARED != 0,
            });
            self.held[p].push((op.key, id, 1));
            out.op_hold[position] = id;
        }
    }

    /// Acquires still under way when the history ended may have taken the lock too.
    fn unfinished_acquires(&mut self) {
        for (p, pending) in self.pending.iter().enumerate() {
            if let Some(invoke) = pending {
                let op = &self.ops[invoke.position];
                if op.f == OpF::Acquire && self.held[p].iter().all(|&(key, _, _)| key != op.key) {
                    self.out.uncertain_acquires.push(UncertainAcquire {
                        key: op.key,
                        process: op.process,
                        invoke: op.time,
                        invoke_index: op.index,
                        completion: self.out.history_end,
                        completion_index: NEVER_ENDED,
                    });
                }
            }
        }
    }
}

/// A renew ok or a nested acquire ok: the lease now runs to `end` (None: the lock no
/// longer expires), whatever it was before, a hold with no lease included.
fn set_lease(
    out: &mut Holds,
    hold: u32,
    (invoke, invoke_index): (i64, u32),
    end: Option<i64>,
    lease_ms: Option<i64>,
) {
    let h = &mut out.holds[hold as usize];
    h.lease_end = end;
    // An `info` renew or nested acquire retires its process, so none comes before an ok of
    // the same hold: what is possible is what is certain.
    h.lease_end_possible = end;
    h.lease_set_index = invoke_index;
    h.lease_ms = lease_ms;
    out.renewals.push(Renewal {
        hold,
        invoke,
        lease_end: end,
    });
}

/// Whether an acquire `ok` promises a lease that cannot be right: already over when the
/// grant returned, or longer than the ttl the invoke asked for.
fn bad_lease(invoke: &Op, ok: &Op) -> Option<BadLease> {
    let lease_ms = ok.lease_ms()?;
    let latency = ok.time.saturating_sub(invoke.time);
    let dead = ms_to_ns(lease_ms) <= latency;
    let ttl_ms = invoke.ttl_ms();
    // A lease counted from the invoke may honestly exceed the ttl by the time until the
    // request went out (a blocking acquire retries for a while): it is too long only if it
    // ends after the grant + the ttl, the latest any server could have kept the lock.
    let too_long =
        ttl_ms.is_some_and(|ttl| ms_to_ns(lease_ms) > ms_to_ns(ttl).saturating_add(latency));
    (dead || too_long).then_some(BadLease {
        key: ok.key,
        process: ok.process,
        invoke_index: invoke.index,
        ok_index: ok.index,
        invoke: invoke.time,
        ok: ok.time,
        lease_ms,
        ttl_ms,
        dead,
        too_long,
    })
}

/// A renew (or nested acquire) whose outcome is unknown may have moved the lease by the
/// last promised length.
fn possibly_extend_lease(out: &mut Holds, hold: u32, invoke: i64, invoke_index: u32) {
    let h = &mut out.holds[hold as usize];
    if let (Some(possible), Some(ms)) = (h.lease_end_possible, h.lease_ms) {
        let end = invoke.saturating_add(ms_to_ns(ms));
        if end > possible {
            h.lease_end_possible = Some(end);
            h.lease_set_index = invoke_index;
        }
    }
}
