//! Liveness: `unavailable` and `starvation`, plus the per-key figures of the report.
//!
//! When is a key free (docs/src/reference/history.md)? From the `ok` of a release by its last holder; from the
//! end of the lease of a holder that was killed or released with `info`; from the end of the
//! longest lease any acquire was granted on the key (a renew's lease does not count) after an
//! acquire that ended `info`, counted from its
//! completion (or from the heal of a server-side fault in force then: the request can still
//! take effect when the server or the link comes back); for a holder killed with no lease at
//! all, from its death; and for an `info` acquire on a key whose acquisitions show no lease,
//! from that completion (if it took the lock, its retired process can never release it: the
//! lock itself deadlocked). So each hold, and each acquire that may have taken the lock,
//! *blocks* the key over an interval; the key is free in the gaps between blocking intervals.
//! A key with no acquisition at all gives no ground either way and is not judged.

use rustc_hash::FxHashMap as HashMap;

use crate::history::compact::{flags, KeyId, OpF, OpType, ProcessId};
use crate::report::{Anomaly, AnomalyKind, KeyStats, Percentiles};
use crate::units::{fmt_span, fmt_time};

use super::fairness::Wait;
use super::findings::{Findings, Names};
use super::grouped::{self, Grouped};
use super::holds::{ms_to_ns, Hold, HoldEnd, ReleaseOutcome, UncertainAcquire, NO_HOLD, OPEN};
use super::CheckOptions;

/// An interval over which the key was (or may have been) taken, and what ends it.
///
/// 24 bytes: a history of indeterminate acquires has a block every two events. Why the key
/// counts as free at `free_from` is worked out from `source` only for a gap that is
/// reported (`Sources::freed`).
#[derive(Debug, Clone, Copy)]
struct Block {
    start: i64,
    free_from: i64,
    /// The invoke of the acquire that began it.
    start_index: u32,
    /// The hold (`names.holds.holds`) or, with `UNCERTAIN` set, the uncertain acquire
    /// (`names.holds.uncertain_acquires`) it stands for. Each has fewer than 2^31: a
    /// history has fewer than 2^32 events, and an acquire takes two.
    source: u32,
}

/// Marks a block's `source` as an uncertain acquire.
const UNCERTAIN: u32 = 1 << 31;

const _: () = assert!(std::mem::size_of::<Block>() == 24);

impl Block {
    /// The acquire ended `info` (or never ended): it may not have taken the lock at all.
    fn uncertain(&self) -> bool {
        self.source & UNCERTAIN != 0
    }
}

/// What the blocks' sources are looked up in.
struct Sources<'a> {
    names: &'a Names<'a>,
    faults: &'a [ServerFault],
    longest_lease: &'a [Option<i64>],
}

impl Sources<'_> {
    /// Why the key counts as free at `block.free_from`.
    fn freed(&self, block: &Block) -> Freed {
        let holds = &self.names.holds;
        let id = (block.source & !UNCERTAIN) as usize;
        if block.uncertain() {
            uncertain_free(
                &holds.uncertain_acquires[id],
                self.faults,
                self.longest_lease,
            )
            .1
        } else {
            free_from(&holds.holds[id]).1
        }
    }
}

/// Why a key counts as free from a block's `free_from`, for the explanation. Event indices.
/// The explanation says what the history shows (a release returned ok, a lease ran out),
/// and that the rule takes the key as free from then: never that it *was* free, which a
/// release that frees nothing (lua-getset's) would belie.
#[derive(Debug, Clone, Copy)]
enum Freed {
    /// It never does (the block lasts to the end of the history).
    Never,
    /// The holder's release returned `ok`, or came back `fail` (the implementation said the
    /// lock was no longer ours).
    Released {
        process: ProcessId,
        release: u32,
        failed: bool,
    },
    /// The lease of a hold ran out after its holder was killed or its release ended `info`.
    /// `acquired` is the acquire's `ok`; `renewed`, the invoke of the renew (or nested
    /// acquire) whose promise the lease end counts from, when not the acquire's.
    LeaseRanOut {
        process: ProcessId,
        acquired: u32,
        renewed: Option<u32>,
        ended: u32,
        killed: bool,
    },
    /// The holder had no lease: killed, or its release ended `info`; nobody can free it.
    NoLease {
        process: ProcessId,
        ended: u32,
        killed: bool,
    },
    /// An acquire that ended `info`: the longest lease seen on the key from its completion
    /// (or from the heal of a server fault in force then); with no lease seen, at once.
    Uncertain {
        process: ProcessId,
        completion: u32,
        lease_ms: Option<i64>,
        heal: Option<u32>,
    },
}

impl Freed {
    /// The events the explanation names.
    fn indices(self) -> Vec<u32> {
        match self {
            Freed::Never => Vec::new(),
            Freed::Released { release, .. } => vec![release],
            Freed::LeaseRanOut {
                acquired,
                renewed,
                ended,
                ..
            } => std::iter::once(acquired)
                .chain(renewed)
                .chain(std::iter::once(ended))
                .collect(),
            Freed::NoLease { ended, .. } => vec![ended],
            Freed::Uncertain {
                completion, heal, ..
            } => std::iter::once(completion).chain(heal).collect(),
        }
    }

    /// What the history shows at `at`, and why the key counts as free from then: "process 3's
    /// release returned ok at 0.053s (event 12), so lock:0 should have been free".
    fn describe(self, names: &Names, key: &str, at: i64) -> String {
        let p = |process: ProcessId| names.process(process);
        let at = fmt_time(at);
        match self {
            Freed::Never => format!("nothing held {key} from the start of the history at {at}, so it should have been free"),
            Freed::Released { process, release, failed: false } => format!(
                "process {}'s release returned ok at {at} (event {release}), so {key} should have been free",
                p(process)
            ),
            Freed::Released { process, release, failed: true } => format!(
                "process {}'s release came back failed at {at} (event {release}): the implementation said the lock was no longer its own, so {key} should have been free",
                p(process)
            ),
            Freed::LeaseRanOut { process, acquired, renewed, ended, killed } => format!(
                "the lease of process {} (acquired at event {acquired}{}) ran out at {at}, {}, so {key} should have been free",
                p(process),
                match renewed {
                    Some(r) => format!(", the lease last set by the request invoked at event {r}"),
                    None => String::new(),
                },
                if killed {
                    format!("the process having been killed (event {ended})")
                } else {
                    format!("its release having ended without an answer (event {ended})")
                }
            ),
            Freed::NoLease { process, ended, killed } => format!(
                "process {}, holding {key} with no lease, {} at {at} (event {ended}): nobody could release it any more, a deadlock of the lock itself",
                p(process),
                if killed { "was killed" } else { "got no answer to its release" }
            ),
            Freed::Uncertain { process, completion, lease_ms: Some(ms), heal } => format!(
                "the longest lease seen on {key} ({ms}ms) ran out at {at}, counted from {}, so {key} should have been free even had that acquire taken it",
                match heal {
                    Some(h) => format!(
                        "the heal of a server fault (event {h}) in force when process {}'s acquire ended without an answer (event {completion})",
                        p(process)
                    ),
                    None => format!("process {}'s acquire ending without an answer (event {completion})", p(process)),
                }
            ),
            Freed::Uncertain { process, completion, lease_ms: None, .. } => format!(
                "process {}'s acquire ended without an answer at {at} (event {completion}) on a lock that never expires: had it taken {key}, nobody could release it, a deadlock of the lock itself",
                p(process)
            ),
        }
    }
}

/// An attempt to acquire: its invoke and completion.
#[derive(Debug, Clone, Copy)]
struct Attempt {
    process: ProcessId,
    invoke: i64,
    invoke_index: u32,
    completion: i64,
    completion_index: u32,
    ty: OpType,
    /// The invoke's `SHARED` and `FAIR` flags.
    flags: u8,
    /// An `ok` that began a hold (not a nested acquire by the holder).
    began: bool,
}

/// When an acquire that ended `info` (or never ended) stops blocking its key, and why: the
/// longest lease seen on the key after its completion, or after the heal of a server fault
/// in force then (the request may still take effect at the heal); with no lease seen, at
/// its completion. Never, if it never ended.
fn uncertain_free(
    uncertain: &UncertainAcquire,
    faults: &[ServerFault],
    longest_lease: &[Option<i64>],
) -> (i64, Freed) {
    let Some(completion) = uncertain.completion_index() else {
        return (OPEN, Freed::Never);
    };
    let late = faults
        .iter()
        .filter(|f| f.start <= uncertain.completion && uncertain.completion < f.heal)
        .max_by_key(|f| f.heal);
    let from = late.map_or(uncertain.completion, |f| f.heal.max(uncertain.completion));
    let lease_ms = longest_lease[uncertain.key as usize];
    let freed = Freed::Uncertain {
        process: uncertain.process,
        completion,
        lease_ms,
        heal: late.and(lease_ms).and(late.and_then(|f| f.heal_index)),
    };
    match lease_ms {
        Some(ms) => (from.saturating_add(ms_to_ns(ms)), freed),
        None => (uncertain.completion, freed),
    }
}

/// When `hold` stops blocking its key, and why.
fn free_from(hold: &Hold) -> (i64, Freed) {
    let process = hold.process;
    // Killed, or released with no answer: the lock goes when the lease runs out; with no
    // lease, never, so the key counts as free from then on and waiting on it shows.
    let ended = |time: i64, index: u32, killed: bool| match hold.lease_end_possible {
        Some(lease_end) => (
            lease_end,
            Freed::LeaseRanOut {
                process,
                acquired: hold.begin_index,
                renewed: (hold.lease_set_index != hold.acquire_invoke_index)
                    .then_some(hold.lease_set_index),
                ended: index,
                killed,
            },
        ),
        None => (
            time,
            Freed::NoLease {
                process,
                ended: index,
                killed,
            },
        ),
    };
    match (hold.end_cause, hold.release, hold.end_index) {
        (HoldEnd::Released, ReleaseOutcome::Ok { time, index }, _) => (
            time,
            Freed::Released {
                process,
                release: index,
                failed: false,
            },
        ),
        // The implementation found the lock no longer ours: whoever had it, it was not us
        // by the time the answer came.
        (HoldEnd::Released, ReleaseOutcome::Fail { time, index }, _) => (
            time,
            Freed::Released {
                process,
                release: index,
                failed: true,
            },
        ),
        (HoldEnd::Released, ReleaseOutcome::Info { time, index }, _) => ended(time, index, false),
        (HoldEnd::Killed, _, Some(index)) => ended(hold.end, index, true),
        // A release still under way when the history ended frees nothing we know of.
        _ => (OPEN, Freed::Never),
    }
}

/// A server-side fault (a paused server, a cut or slowed link) from its start to its heal:
/// a request given up on during it may still take effect when it heals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ServerFault {
    pub(crate) start: i64,
    pub(crate) heal: i64,
    pub(crate) heal_index: Option<u32>,
}

/// The server-side faults of `history`: a `pause` of anything but a client's worker, a
/// `partition`, a `latency`, each until its heal as `history::fault_spans` pairs them (the
/// rule the pictures and `shrink` read too). Never healed: to the end of the history.
pub(crate) fn server_faults(history: &crate::history::History) -> Vec<ServerFault> {
    let is_worker = |t: &String| t.starts_with("worker-");
    let (_, end) = history.time_span();
    crate::history::fault_spans(history)
        .into_iter()
        .filter(|span| {
            let fault = &history.faults[span.begin];
            match fault.name.as_str() {
                "pause" => !fault.targets.iter().all(is_worker),
                "partition" | "latency" => true,
                _ => false,
            }
        })
        .map(|span| ServerFault {
            start: span.start,
            heal: span.end_or(end),
            heal_index: span
                .end
                .and(span.heals.last())
                .map(|&h| history.faults[h].index),
        })
        .collect()
}

/// `lease_floor_ms`: the least an `info` acquire blocks its key for, whatever leases were
/// seen (`None` for a finished history: only what was seen). Returns the per-key figures
/// and, per key, the waits that ended in a first acquisition (for the fairness check).
pub fn check(
    names: &Names,
    options: &CheckOptions,
    lease_floor_ms: Option<i64>,
    findings: &mut Findings,
) -> (Vec<KeyStats>, Grouped<Wait>) {
    let history = names.history;
    let keys = history.keys.len();
    let (history_start, history_end) = history.time_span();

    // Gather, per key, what blocked it and every attempt to acquire it.
    // One list each for every key, grouped by key as it is filled: a list per key would
    // cost an allocation per key (a history may have a million keys with a few events
    // each), and gathering first then grouping would hold two copies.
    let block_counts = grouped::counts(
        keys,
        (names.holds.holds.iter().map(|h| h.key))
            .chain(names.holds.uncertain_acquires.iter().map(|u| u.key)),
    );
    let mut blocks = Grouped::new(block_counts, NO_BLOCK);
    let mut stats = hold_blocks(names, &mut blocks);
    let mut longest_lease: Vec<Option<i64>> = vec![lease_floor_ms; keys];
    let attempts = gather_attempts(names, &mut longest_lease);
    let faults = server_faults(history);
    uncertain_blocks(names, &faults, &longest_lease, &mut blocks);
    let sources = Sources {
        names,
        faults: &faults,
        longest_lease: &longest_lease,
    };
    // Each key's blocks and attempts are now in the order put (attempts: by completion).
    let progress = progress_by_process(&attempts, history.processes.len());

    // The waits that ended in a first acquisition, key after key (for the fairness check).
    let mut waits: Vec<Wait> = Vec::new();
    let mut wait_starts: Vec<u32> = Vec::with_capacity(keys + 1);
    let mut scratch = Scratch::default();
    for (key, stat) in stats.iter_mut().enumerate() {
        let key = key as KeyId;
        let key_blocks = blocks.of_mut(key);
        // Stable: ties in the order gathered, holds first.
        key_blocks.sort_by_key(|b| b.start);
        let key_blocks = blocks.of(key);
        let key_attempts = attempts.of(key);
        // A key nobody ever acquired gives no ground either way: not judged.
        if stat.holds > 0 {
            unavailable(
                &sources,
                options,
                key,
                key_blocks,
                key_attempts,
                (history_start, history_end),
                stat,
                findings,
            );
        }
        wait_starts.push(waits.len() as u32);
        starvation(
            names,
            options,
            key,
            key_attempts,
            &progress,
            stat,
            &mut scratch,
            &mut waits,
            findings,
        );
    }
    wait_starts.push(waits.len() as u32);
    (stats, Grouped::from_parts(waits, wait_starts))
}

/// Puts the block of each hold, and returns the per-key figures counted from the holds.
fn hold_blocks(names: &Names, blocks: &mut Grouped<Block>) -> Vec<KeyStats> {
    let mut stats: Vec<KeyStats> = vec![KeyStats::default(); names.history.keys.len()];
    for (id, hold) in names.holds.holds.iter().enumerate() {
        let (free, _) = free_from(hold);
        blocks.put(
            hold.key,
            Block {
                // The acquisition may have taken effect as early as its invoke.
                start: hold.acquire_invoke,
                free_from: free.max(hold.acquire_invoke),
                start_index: hold.acquire_invoke_index,
                source: id as u32,
            },
        );
        let stat = &mut stats[hold.key as usize];
        stat.holds += 1;
        if let Some(lease_end) = hold.lease_end {
            if names.holds.shown_end(hold) > lease_end {
                stat.holds_outliving_lease += 1;
            }
        }
    }
    stats
}

/// Every client's attempts to acquire, grouped by key in completion order; raises
/// `longest_lease` of each key to the longest lease an acquire was granted on it.
fn gather_attempts(names: &Names, longest_lease: &mut [Option<i64>]) -> Grouped<Attempt> {
    let history = names.history;
    let mut attempts = Grouped::new(attempt_counts(history), NO_ATTEMPT);
    // Each process's pending acquire invoke, as its position in `ops` (`NONE`: none): 4
    // bytes a process, where a history of indeterminate acquires has a process every two
    // events. Dropped on return: it is not needed past here, where the check peaks.
    const NONE: u32 = u32::MAX;
    let mut invokes: Vec<u32> = vec![NONE; history.processes.len()];
    for (position, op) in history.ops.iter().enumerate() {
        if op.f != OpF::Acquire || !op.is_client() {
            continue;
        }
        let p = op.process as usize;
        if op.ty == OpType::Invoke {
            invokes[p] = position as u32;
            continue;
        }
        let invoke = std::mem::replace(&mut invokes[p], NONE);
        let Some(invoke) = history.ops.get(invoke as usize) else {
            continue;
        };
        let (invoke, invoke_index, invoke_flags) = (
            invoke.time,
            invoke.index,
            invoke.flags & (flags::SHARED | flags::FAIR),
        );
        let hold = names.holds.op_hold[position];
        let began = op.ty == OpType::Ok
            && hold != NO_HOLD
            && names.holds.holds[hold as usize].begin_index == op.index;
        if let Some(ms) = op.lease_ms() {
            let longest = &mut longest_lease[op.key as usize];
            *longest = Some(longest.map_or(ms, |l| l.max(ms)));
        }
        attempts.put(
            op.key,
            Attempt {
                process: op.process,
                invoke,
                invoke_index,
                completion: op.time,
                completion_index: op.index,
                ty: op.ty,
                flags: invoke_flags,
                began,
            },
        );
    }
    attempts
}

/// Puts the block of each acquire that may have taken the lock: after the holds' (ties
/// sort holds first) and once the attempts are gathered, since such a block lasts as long
/// as the longest lease seen on its key.
fn uncertain_blocks(
    names: &Names,
    faults: &[ServerFault],
    longest_lease: &[Option<i64>],
    blocks: &mut Grouped<Block>,
) {
    for (id, uncertain) in names.holds.uncertain_acquires.iter().enumerate() {
        let (free, _) = uncertain_free(uncertain, faults, longest_lease);
        blocks.put(
            uncertain.key,
            Block {
                start: uncertain.invoke,
                free_from: free.max(uncertain.invoke),
                start_index: uncertain.invoke_index,
                source: id as u32 | UNCERTAIN,
            },
        );
    }
}

/// Each process's successful acquisitions of any key, in time order: a process that gets
/// somewhere is not starving, so they break its runs of failures.
/// (time, index): one process's events are in that order in the file, so it places an
/// acquisition between two attempts even when all three share a nanosecond.
/// Grouped by process rather than a vector per process: a history may have a million.
fn progress_by_process(attempts: &Grouped<Attempt>, processes: usize) -> Grouped<(i64, u32)> {
    let acquired = || attempts.all().iter().filter(|a| a.ty == OpType::Ok);
    let mut progress = Grouped::new(
        grouped::counts(processes, acquired().map(|a| a.process)),
        (0i64, 0u32),
    );
    for a in acquired() {
        progress.put(a.process, (a.completion, a.completion_index));
    }
    for process in 0..processes as ProcessId {
        progress.of_mut(process).sort_unstable();
    }
    progress
}

const NO_BLOCK: Block = Block {
    start: 0,
    free_from: 0,
    start_index: 0,
    source: 0,
};

const NO_ATTEMPT: Attempt = Attempt {
    process: 0,
    invoke: 0,
    invoke_index: 0,
    completion: 0,
    completion_index: 0,
    ty: OpType::Invoke,
    flags: 0,
    began: false,
};

/// How many attempts `check` gathers per key: the completions of client acquires whose
/// invoke came before them.
fn attempt_counts(history: &crate::history::History) -> Vec<u32> {
    let mut counts = vec![0u32; history.keys.len()];
    let mut invoked = vec![false; history.processes.len()];
    for op in &history.ops {
        if op.f != OpF::Acquire || !op.is_client() {
            continue;
        }
        let pending = &mut invoked[op.process as usize];
        if op.ty == OpType::Invoke {
            *pending = true;
        } else if std::mem::take(pending) {
            counts[op.key as usize] += 1;
        }
    }
    counts
}

#[allow(clippy::too_many_arguments)]
fn unavailable(
    sources: &Sources,
    options: &CheckOptions,
    key: KeyId,
    blocks: &[Block],
    attempts: &[Attempt],
    (history_start, history_end): (i64, i64),
    stats: &mut KeyStats,
    findings: &mut Findings,
) {
    // Failed attempts, by invoke time (attempts are in completion order). An attempt counts
    // against a free stretch only if it lies wholly inside: one invoked before the key was
    // freed, or answered after the next acquisition was invoked, may have been refused
    // while the key was (or had just been) taken.
    let mut failed: Vec<&Attempt> = attempts.iter().filter(|a| a.ty == OpType::Fail).collect();
    failed.sort_by_key(|a| a.invoke);
    let names = sources.names;
    let mut free_since = history_start;
    // The block whose end freed the key last (None: nothing held it yet).
    let mut freed_by: Option<&Block> = None;
    let mut longest_free = 0i64;
    let mut report_gap = |start: i64, end: i64, freed_by: Option<&Block>, next: Option<&Block>| {
        // Times may lie anywhere in i64: a span saturates rather than wraps.
        let span = end.saturating_sub(start);
        longest_free = longest_free.max(span);
        if span <= options.liveness_bound_ns {
            return;
        }
        let from = failed.partition_point(|a| a.invoke < start);
        let during: Vec<&&Attempt> = failed[from..]
            .iter()
            .take_while(|a| a.invoke < end)
            .filter(|a| a.completion <= end)
            .collect();
        if during.is_empty() {
            return;
        }
        findings.add(AnomalyKind::Unavailable, || {
            let freed = freed_by.map_or(Freed::Never, |b| sources.freed(b));
            let mut processes: Vec<u64> = during.iter().map(|a| names.process(a.process)).collect();
            processes.sort_unstable();
            processes.dedup();
            let mut indices: Vec<u64> = freed
                .indices()
                .into_iter()
                .chain(next.map(|b| b.start_index))
                .map(u64::from)
                .collect();
            indices.extend(during.iter().take(5).flat_map(|a| {
                [u64::from(a.invoke_index), u64::from(a.completion_index)]
            }));
            let key_name = names.history.key_name(key);
            let how_free = freed.describe(names, key_name, start);
            let until = match next {
                Some(b) if b.uncertain() => format!(
                    "an acquire that may have taken it (it ended without an answer) was invoked at {} (event {})",
                    fmt_time(end),
                    b.start_index
                ),
                Some(b) => format!(
                    "the next acquire that succeeded was invoked at {} (event {})",
                    fmt_time(end),
                    b.start_index
                ),
                None => format!("the end of the history at {}", fmt_time(end)),
            };
            Anomaly {
                kind: AnomalyKind::Unavailable,
                key: key_name.to_string(),
                processes,
                indices,
                explanation: format!(
                    "{how_free}; yet from then until {until}, {} with no acquisition, {} attempts to acquire it failed (liveness bound {}).",
                    fmt_span(span),
                    during.len(),
                    fmt_span(options.liveness_bound_ns)
                ),
                start,
                end,
                lease_expired: None,
                tokens: Vec::new(),
                cycle: Vec::new(),
            }
        });
    };
    for block in blocks {
        if block.start > free_since {
            report_gap(free_since, block.start, freed_by, Some(block));
        }
        if block.free_from >= free_since {
            free_since = block.free_from;
            freed_by = Some(block);
        }
    }
    if free_since < history_end {
        report_gap(free_since, history_end, freed_by, None);
    }
    stats.longest_free_ms = longest_free as f64 / 1e6;
}

/// The working lists of `starvation`, emptied and reused key after key: allocating them
/// anew for each of a million keys would cost more than the checking.
#[derive(Default)]
struct Scratch {
    successes: Vec<(i64, ProcessId)>,
    /// Per process: the first attempt of its current run of failures.
    streaks: HashMap<ProcessId, Streak>,
    waits: Vec<f64>,
    /// The same waits by the mode of the acquire that ended them: [exclusive, shared].
    waits_by_mode: [Vec<f64>; 2],
    per_process: HashMap<ProcessId, u64>,
    ends: Vec<Streak>,
}

/// Appends to `grants` the waits on `key` that ended in a first acquisition.
#[allow(clippy::too_many_arguments)]
fn starvation(
    names: &Names,
    options: &CheckOptions,
    key: KeyId,
    attempts: &[Attempt],
    progress: &Grouped<(i64, u32)>,
    stats: &mut KeyStats,
    scratch: &mut Scratch,
    grants: &mut Vec<Wait>,
    findings: &mut Findings,
) {
    scratch.clear();
    scratch.successes.extend(
        attempts
            .iter()
            .filter(|a| a.ty == OpType::Ok)
            .map(|a| (a.completion, a.process)),
    );
    for attempt in attempts {
        *scratch.per_process.entry(attempt.process).or_insert(0) +=
            u64::from(attempt.ty == OpType::Ok);
        match attempt.ty {
            OpType::Fail => {
                stats.failed_attempts += 1;
                scratch.failed(attempt, progress);
            }
            OpType::Ok => {
                stats.acquisitions += 1;
                scratch.acquired(attempt, grants);
            }
            _ => {
                stats.indeterminate_attempts += 1;
                scratch
                    .ends
                    .extend(scratch.streaks.remove(&attempt.process));
            }
        }
    }
    scratch.report_starved(names, options, key, findings);
    scratch.wait_figures(attempts, stats);
}

/// Whether `process` acquired anything (any key) strictly between `after` and `before`.
fn progressed(
    progress: &Grouped<(i64, u32)>,
    process: ProcessId,
    after: (i64, u32),
    before: (i64, u32),
) -> bool {
    let times = progress.of(process);
    let i = times.partition_point(|&t| t <= after);
    times.get(i).is_some_and(|&t| t < before)
}

impl Scratch {
    fn clear(&mut self) {
        self.successes.clear();
        self.streaks.clear();
        self.waits.clear();
        self.waits_by_mode.iter_mut().for_each(Vec::clear);
        self.per_process.clear();
        self.ends.clear();
    }

    /// A failed attempt begins or lengthens its process's run of failures.
    fn failed(&mut self, attempt: &Attempt, progress: &Grouped<(i64, u32)>) {
        // A run of failures is broken by the process getting another lock meanwhile.
        if let Some(streak) = self.streaks.get(&attempt.process) {
            if progressed(
                progress,
                attempt.process,
                (streak.last_fail, streak.last_index),
                (attempt.invoke, attempt.invoke_index),
            ) {
                self.ends.extend(self.streaks.remove(&attempt.process));
            }
        }
        let streak = self.streaks.entry(attempt.process).or_insert(Streak {
            process: attempt.process,
            start: attempt.invoke,
            first_index: attempt.invoke_index,
            last_fail: attempt.completion,
            last_index: attempt.completion_index,
            failures: 0,
        });
        streak.last_fail = attempt.completion;
        streak.last_index = attempt.completion_index;
        streak.failures += 1;
    }

    /// A successful attempt ends its process's run of failures: the wait from the run's
    /// first attempt (or its own invoke) is counted, and a first acquisition is a grant.
    fn acquired(&mut self, attempt: &Attempt, grants: &mut Vec<Wait>) {
        let streak = self.streaks.remove(&attempt.process);
        let (started, started_index) = streak
            .as_ref()
            .map_or((attempt.invoke, attempt.invoke_index), |s| {
                (s.start, s.first_index)
            });
        let wait = attempt.completion.saturating_sub(started) as f64 / 1e6;
        self.waits.push(wait);
        let shared = attempt.flags & flags::SHARED != 0;
        self.waits_by_mode[usize::from(shared)].push(wait);
        if attempt.began {
            // A fair acquire that failed left the lock's queue: its retry queues
            // anew, so a fair wait begins at its own invoke (see fairness.rs).
            let fair = attempt.flags & flags::FAIR != 0;
            let (since, since_index) = if fair {
                (attempt.invoke, attempt.invoke_index)
            } else {
                (started, started_index)
            };
            grants.push(Wait {
                process: attempt.process,
                since,
                since_index,
                ok: attempt.completion,
                ok_index: attempt.completion_index,
                fair,
            });
        }
        self.ends.extend(streak);
    }

    /// Reports each run of failures longer than the starvation bound during which other
    /// processes acquired the key.
    fn report_starved(
        &mut self,
        names: &Names,
        options: &CheckOptions,
        key: KeyId,
        findings: &mut Findings,
    ) {
        let Scratch {
            successes,
            streaks,
            ends,
            ..
        } = self;
        ends.extend(streaks.drain().map(|(_, streak)| streak));
        ends.sort_unstable_by_key(|s| (s.start, s.first_index));
        for &streak in ends.iter() {
            if streak.last_fail.saturating_sub(streak.start) <= options.starvation_bound_ns {
                continue;
            }
            let from = successes.partition_point(|s| s.0 <= streak.start);
            let others: Vec<&(i64, ProcessId)> = successes[from..]
                .iter()
                .take_while(|s| s.0 < streak.last_fail)
                .filter(|s| s.1 != streak.process)
                .collect();
            if others.is_empty() {
                continue;
            }
            findings.add(AnomalyKind::Starvation, || {
                let starved = names.process(streak.process);
                let mut winners: Vec<u64> = others.iter().map(|s| names.process(s.1)).collect();
                winners.sort_unstable();
                winners.dedup();
                let processes = std::iter::once(starved).chain(winners).collect();
                Anomaly {
                    kind: AnomalyKind::Starvation,
                    key: names.history.key_name(key).to_string(),
                    processes,
                    indices: vec![u64::from(streak.first_index), u64::from(streak.last_index)],
                    explanation: format!(
                        "process {} tried to acquire {} for {} ({} failed attempts, from {} to {}) while other processes acquired it {} times (starvation bound {}).",
                        names.process(streak.process),
                        names.history.key_name(key),
                        fmt_span(streak.last_fail.saturating_sub(streak.start)),
                        streak.failures,
                        fmt_time(streak.start),
                        fmt_time(streak.last_fail),
                        others.len(),
                        fmt_span(options.starvation_bound_ns)
                    ),
                    start: streak.start,
                    end: streak.last_fail,
                    lease_expired: None,
                    tokens: Vec::new(),
                    cycle: Vec::new(),
                }
            });
        }
    }

    /// The key's waits and fairness figures.
    fn wait_figures(&mut self, attempts: &[Attempt], stats: &mut KeyStats) {
        stats.wait_ms = Percentiles::of(&mut self.waits);
        let [exclusive, shared] = &mut self.waits_by_mode;
        let by_mode = |waits: &mut Vec<f64>| (!waits.is_empty()).then(|| Percentiles::of(waits));
        stats.wait_ms_by_mode.exclusive = by_mode(exclusive);
        stats.wait_ms_by_mode.shared = by_mode(shared);
        // Filled in by the fairness check; `Some` marks a key with fair-marked acquires.
        if attempts.iter().any(|a| a.flags & flags::FAIR != 0) {
            stats.queue_jumps_fair = Some(0);
        }
        stats.fairness = jain_index(self.per_process.values().copied());
    }
}

#[derive(Debug, Clone, Copy)]
struct Streak {
    process: ProcessId,
    start: i64,
    first_index: u32,
    last_fail: i64,
    last_index: u32,
    failures: u64,
}

/// Jain's fairness index: (sum x)^2 / (n * sum x^2); 1 when every process got the same.
fn jain_index(counts: impl Iterator<Item = u64>) -> f64 {
    let (mut n, mut sum, mut squares) = (0f64, 0f64, 0f64);
    for c in counts {
        n += 1.0;
        sum += c as f64;
        squares += (c as f64) * (c as f64);
    }
    if squares == 0.0 {
        return 1.0;
    }
    sum * sum / (n * squares)
}

#[cfg(test)]
mod tests {
    #[test]
    fn jain_index_is_one_when_even_and_one_over_n_when_one_takes_all() {
        assert_eq!(super::jain_index([5, 5, 5, 5].into_iter()), 1.0);
        assert_eq!(super::jain_index([8, 0, 0, 0].into_iter()), 0.25);
    }
}
