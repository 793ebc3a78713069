//! A second, deliberately naive checker, used only by tests (`tests/it/differential.rs`).
//!
//! Written from the format's rules (docs/src/reference/history.md, "What the checker derives"
//! and "Anomalies"), not from `src/checker/`: it reads the JSON lines
//! with serde_json into plain structs, keeps everything in vectors, compares every pair it
//! needs to (quadratic and worse is fine: histories here are small) and does its arithmetic
//! in i128, so that nothing can wrap. It reports each anomaly in a normalised form
//! (`Finding`) that `tests/it/differential.rs` also derives from the real checker's report.
//!
//! Where the format's rules leave a choice, it takes the one that page states, and these (each checked
//! against the rules when the two checkers first disagreed on it):
//! - a hold is shared only if every acquire `ok` in it (nested ones too) asked for `shared`;
//! - a failed release during a hold is a lost lock whether it ends the hold or only a nested
//!   acquisition (the implementation found the lock no longer ours while we held it);
//! - whether a lease still ran at a failure counts every earlier operation of the process,
//!   even one in the same nanosecond;
//! - a write is stale only if invoked strictly after the later holder's write was accepted;
//! - a free stretch runs from the instant the key is free up to (not including) the invoke
//!   that next takes it, or the end of the history: a failed attempt counts if invoked in
//!   it and answered by its end;
//! - a killed holder's renew or nested acquire that ended `info` may have extended its lease
//!   by the last length promised: the key is free only once that possible lease is over;
//! - touching holds are ordered for token order, except two holds of zero length at one
//!   instant, which are simultaneous;
//! - a run of failed attempts (starvation) is broken by an acquisition of any key between
//!   two attempts in the process's own order of events.
//!
//! What a finding names, per kind (`events` are event `index`es, ascending):
//! - overlap: the two holds' beginning acquire `ok`s; `detail` = whether the earlier holder's
//!   lease had run out when the later hold began.
//! - bad-lease: the acquire `ok`.
//! - lost-lock: the hold's beginning acquire `ok` and the failed renew / release completion.
//! - stale-write: the stale hold's beginning acquire `ok` and the stale write's `ok`.
//! - duplicate-token: every hold of the key given that token (one finding per token, `count`
//!   = the holds beyond the first).
//! - token-order: every hold of a cycle group (a strongly connected component of the
//!   precedence graph that contains a real-time step).
//! - unavailable: no events; `detail` = the free stretch `start..end`; `processes` = the
//!   processes whose failed attempts lie wholly inside it.
//! - starvation: the first attempt's invoke and the last failure of the run.
//! - unfair: B's acquire `ok` (B jumped the queue) and that of the earliest-invoked fair
//!   acquire A it overtook.
//! - lost-update: no events and no processes (one finding per counter key).

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;

const NS_PER_MS: i128 = 1_000_000;
/// A hold that never ended, a key never freed.
const FOREVER: i128 = i128::MAX;

#[derive(Debug, Clone)]
pub struct Options {
    pub liveness_ns: i64,
    pub starvation_ns: i64,
    pub fairness_ns: i64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            liveness_ns: 1_000_000_000,
            starvation_ns: 10_000_000_000,
            fairness_ns: 10_000_000,
        }
    }
}

/// One line of a history, as the format writes it.
#[derive(Debug, Clone, Deserialize)]
pub struct Line {
    pub index: u64,
    pub time: i64,
    pub process: Value,
    #[serde(rename = "type")]
    pub ty: String,
    pub f: String,
    #[serde(default)]
    pub key: Option<String>,
    #[serde(default)]
    pub value: Value,
}

impl Line {
    /// The client process, or `None` for the nemesis.
    pub fn client(&self) -> Option<u64> {
        self.process.as_u64()
    }

    fn field(&self, name: &str) -> Option<&Value> {
        self.value.get(name).filter(|v| !v.is_null())
    }

    fn int(&self, name: &str) -> Option<i64> {
        self.field(name).and_then(Value::as_i64)
    }

    fn strings(&self, name: &str) -> Vec<String> {
        self.field(name)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn numbers(&self, name: &str) -> Vec<u64> {
        self.field(name)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default()
    }
}

/// Parses a JSONL history; a last line that does not parse (cut short) is skipped.
pub fn parse(text: &str) -> Result<Vec<Line>, String> {
    let pieces: Vec<&str> = text.split('\n').collect();
    let mut lines = Vec::new();
    for (n, piece) in pieces.iter().enumerate() {
        if piece.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Line>(piece) {
            Ok(line) => lines.push(line),
            Err(_) if n + 1 == pieces.len() => {}
            Err(e) => return Err(format!("line {}: {e}", n + 1)),
        }
    }
    Ok(lines)
}

/// One anomaly in normalised form.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    pub kind: String,
    pub key: String,
    pub events: Vec<u64>,
    pub processes: Vec<u64>,
    pub detail: String,
    /// How many anomalies this stands for (duplicate-token: the extra holds).
    pub count: u64,
}

impl Finding {
    fn new(kind: &str, key: &str, mut events: Vec<u64>, mut processes: Vec<u64>) -> Self {
        events.sort_unstable();
        events.dedup();
        processes.sort_unstable();
        processes.dedup();
        Finding {
            kind: kind.to_string(),
            key: key.to_string(),
            events,
            processes,
            detail: String::new(),
            count: 1,
        }
    }

    fn with_detail(mut self, detail: String) -> Self {
        self.detail = detail;
        self
    }
}

/// An operation: an invoke and its completion, if any (positions in time order).
#[derive(Debug, Clone)]
struct Op {
    process: u64,
    f: String,
    key: String,
    invoke: usize,
    done: Option<usize>,
}

/// How a hold ended.
#[derive(Debug, Clone, Copy, PartialEq)]
enum End {
    /// The release (an op id) whose invoke ended it.
    Release(usize),
    /// A nemesis kill (a position) listing the process.
    Kill(usize),
    /// Still held at the end of the history.
    Open,
}

#[derive(Debug, Clone)]
pub struct Hold {
    pub process: u64,
    pub key: String,
    /// Index of the acquire `ok` that began it.
    pub begin_index: u64,
    pub begin: i128,
    pub end: i128,
    end_cause: End,
    pub token: Option<i64>,
    pub shared: bool,
    /// The lease from the acquire (None: none).
    first_lease: Option<i128>,
    /// The length of the last lease promised (acquire, renew or nested acquire `ok`).
    last_ms: Option<i64>,
    /// Each renew `ok` and nested acquire `ok` sets the lease anew, from its invoke on:
    /// (invoke, the lease it set; None: no expiry).
    changes: Vec<(i128, Option<i128>)>,
    /// Renews and nested acquires during the hold that ended `info` (invoke times): they may
    /// have extended the lease by the last length promised.
    maybe_extended: Vec<(i128, Option<i64>)>,
    /// Failed renews and releases during the hold: (op id, how many lease changes came
    /// before it in the process's order).
    failures: Vec<(usize, usize)>,
    /// Accepted writes under the hold (op ids).
    writes: Vec<usize>,
}

impl Hold {
    /// The lease as it stood counting the changes made by operations invoked before `t`.
    fn lease_before(&self, t: i128) -> Option<i128> {
        let n = self.changes.iter().filter(|(at, _)| *at < t).count();
        self.lease_after(n)
    }

    /// The lease after the first `n` changes: the last of them set it.
    fn lease_after(&self, n: usize) -> Option<i128> {
        match n {
            0 => self.first_lease,
            n => self.changes[..n].last().and_then(|&(_, lease)| lease),
        }
    }

    /// The latest the lease may have run to: renews and nested acquires that ended `info`
    /// may have taken effect (for when the key is free after the holder is gone).
    fn possible_lease(&self) -> Option<i128> {
        let mut lease = self.lease_before(FOREVER)?;
        for &(at, ms) in &self.maybe_extended {
            if let Some(ms) = ms {
                lease = lease.max(at + i128::from(ms) * NS_PER_MS);
            }
        }
        Some(lease)
    }
}

/// Everything the naive checker derived from one history.
pub struct Analysis {
    pub lines: Vec<Line>,
    pub holds: Vec<Hold>,
    /// Every group of two or more holds of one tokened key that reach each other in the
    /// precedence graph (violating or not), as sorted begin indices.
    pub groups: Vec<Vec<u64>>,
    pub findings: Vec<Finding>,
}

impl Analysis {
    /// The line with this `index`.
    pub fn line(&self, index: u64) -> Option<&Line> {
        self.lines.iter().find(|l| l.index == index)
    }

    /// The hold that an acquire `ok` with this index began.
    pub fn hold_begun_by(&self, index: u64) -> Option<&Hold> {
        self.holds.iter().find(|h| h.begin_index == index)
    }
}

// The reference checker reads the rules top to bottom in one function, on purpose: it
// shares no structure with the checker it is compared against (tests/differential.rs).
#[allow(clippy::too_many_lines)]
pub fn check(lines: Vec<Line>, options: &Options) -> Analysis {
    // Order by time; events at the same time stay in file order (a process's own events are
    // in time order in the file, so this keeps each process's order).
    let mut ev = lines.clone();
    ev.sort_by_key(|l| l.time);
    let t = |pos: usize| i128::from(ev[pos].time);
    let history_start = ev.first().map_or(0, |l| i128::from(l.time));
    let history_end = ev.last().map_or(0, |l| i128::from(l.time));

    // Operations.
    let mut ops: Vec<Op> = Vec::new();
    let mut pending: BTreeMap<u64, usize> = BTreeMap::new();
    for (pos, line) in ev.iter().enumerate() {
        let Some(p) = line.client() else { continue };
        if line.ty == "invoke" {
            pending.insert(p, ops.len());
            ops.push(Op {
                process: p,
                f: line.f.clone(),
                key: line.key.clone().unwrap_or_default(),
                invoke: pos,
                done: None,
            });
        } else if let Some(id) = pending.remove(&p) {
            ops[id].done = Some(pos);
        }
    }
    let outcome = |op: &Op| op.done.map(|d| ev[d].ty.as_str()).unwrap_or("pending");
    let kills: Vec<usize> = (0..ev.len())
        .filter(|&pos| ev[pos].client().is_none() && ev[pos].f == "kill")
        .collect();

    // Holds, process by process, in each process's order.
    let mut holds: Vec<Hold> = Vec::new();
    let processes: BTreeSet<u64> = ops.iter().map(|o| o.process).collect();
    for &p in &processes {
        // key -> (hold id, nesting count)
        let mut open: BTreeMap<String, (usize, u32)> = BTreeMap::new();
        for (id, op) in ops.iter().enumerate().filter(|(_, o)| o.process == p) {
            let inv = t(op.invoke);
            match (op.f.as_str(), outcome(op)) {
                ("acquire", "ok") => {
                    let done = op.done.unwrap();
                    let lease = ev[done]
                        .int("lease_ms")
                        .map(|ms| inv + i128::from(ms) * NS_PER_MS);
                    if let Some((h, count)) = open.get_mut(&op.key) {
                        *count += 1;
                        // A reentrant exclusive acquire makes the whole hold exclusive.
                        let mode = ev[op.invoke].field("mode").and_then(Value::as_str);
                        holds[*h].shared &= mode == Some("shared");
                        holds[*h].changes.push((inv, lease));
                        holds[*h].last_ms = ev[done].int("lease_ms");
                    } else {
                        let mode = ev[op.invoke].field("mode").and_then(Value::as_str);
                        open.insert(op.key.clone(), (holds.len(), 1));
                        holds.push(Hold {
                            process: p,
                            key: op.key.clone(),
                            begin_index: ev[done].index,
                            begin: t(done),
                            end: FOREVER,
                            end_cause: End::Open,
                            token: ev[done].int("token"),
                            shared: mode == Some("shared"),
                            first_lease: lease,
                            last_ms: ev[done].int("lease_ms"),
                            changes: Vec::new(),
                            maybe_extended: Vec::new(),
                            failures: Vec::new(),
                            writes: Vec::new(),
                        });
                    }
                }
                ("acquire", "info") => {
                    if let Some(&(h, _)) = open.get(&op.key) {
                        let ms = holds[h].last_ms;
                        holds[h].maybe_extended.push((inv, ms));
                    }
                }
                ("release", result) => {
                    if let Some((h, count)) = open.get_mut(&op.key) {
                        let h = *h;
                        *count -= 1;
                        // A failed release is a loss whether it ends the hold or only a
                        // nested acquisition: either way the implementation found the lock
                        // no longer ours while we held it.
                        if result == "fail" {
                            let before = holds[h].changes.len();
                            holds[h].failures.push((id, before));
                        }
                        if *count == 0 {
                            open.remove(&op.key);
                            holds[h].end = inv;
                            holds[h].end_cause = End::Release(id);
                        }
                    }
                }
                ("renew", result) => {
                    if let Some(&(h, _)) = open.get(&op.key) {
                        if result == "ok" {
                            let done = op.done.unwrap();
                            if let Some(ms) = ev[done].int("lease_ms") {
                                let lease = inv + i128::from(ms) * NS_PER_MS;
                                holds[h].changes.push((inv, Some(lease)));
                                holds[h].last_ms = Some(ms);
                            }
                        } else if result == "fail" {
                            let before = holds[h].changes.len();
                            holds[h].failures.push((id, before));
                        } else if result == "info" {
                            let ms = holds[h].last_ms;
                            holds[h].maybe_extended.push((inv, ms));
                        }
                    }
                }
                ("write", "ok") => {
                    if let Some(&(h, _)) = open.get(&op.key) {
                        holds[h].writes.push(id);
                    }
                }
                _ => {}
            }
        }
    }
    // A kill listing the holder ends its hold, if it comes before the hold's release.
    for hold in &mut holds {
        let kill = kills.iter().copied().find(|&k| {
            ev[k].numbers("processes").contains(&hold.process)
                && t(k) >= hold.begin
                && t(k) < hold.end
        });
        if let Some(k) = kill {
            hold.end = t(k);
            hold.end_cause = End::Kill(k);
            // Renews or a release after the kill cannot have happened; keep only earlier ones.
            let end = hold.end;
            hold.failures.retain(|&(id, _)| t(ops[id].invoke) < end);
        }
    }

    let mut findings = Vec::new();

    // overlap
    for (i, a) in holds.iter().enumerate() {
        for b in holds.iter().skip(i + 1) {
            if a.key != b.key || a.process == b.process {
                continue;
            }
            if !(a.begin < b.end && b.begin < a.end) {
                continue;
            }
            if a.shared && b.shared {
                continue;
            }
            let (earlier, later) = if (a.begin, a.begin_index) <= (b.begin, b.begin_index) {
                (a, b)
            } else {
                (b, a)
            };
            let expired = earlier
                .lease_before(later.begin)
                .is_some_and(|l| l <= later.begin);
            findings.push(
                Finding::new(
                    "overlap",
                    &a.key,
                    vec![a.begin_index, b.begin_index],
                    vec![a.process, b.process],
                )
                .with_detail(format!("lease_expired={expired}")),
            );
        }
    }

    // bad-lease: every acquire ok, nested ones too.
    for op in ops
        .iter()
        .filter(|o| o.f == "acquire" && outcome(o) == "ok")
    {
        let done = op.done.unwrap();
        let Some(ms) = ev[done].int("lease_ms") else {
            continue;
        };
        let lease = i128::from(ms) * NS_PER_MS;
        let latency = t(done) - t(op.invoke);
        let dead = lease <= latency;
        let too_long = ev[op.invoke]
            .int("ttl_ms")
            .is_some_and(|ttl| lease > i128::from(ttl) * NS_PER_MS + latency);
        if dead || too_long {
            findings.push(Finding::new(
                "bad-lease",
                &op.key,
                vec![ev[done].index],
                vec![op.process],
            ));
        }
    }

    // lost-lock: judged when the failure came back.
    for hold in &holds {
        for &(id, before) in &hold.failures {
            let Some(done) = ops[id].done else { continue };
            let back = t(done);
            // The lease as the process's own earlier operations left it.
            let lease = hold.lease_after(before);
            if lease.is_none_or(|l| l > back) {
                findings.push(Finding::new(
                    "lost-lock",
                    &hold.key,
                    vec![hold.begin_index, ev[done].index],
                    vec![hold.process],
                ));
            }
        }
    }

    // stale-write
    for h in &holds {
        for &w in &h.writes {
            let invoked = t(ops[w].invoke);
            let stale = holds.iter().any(|later| {
                later.key == h.key
                    && later.begin > h.begin
                    && later
                        .writes
                        .iter()
                        .any(|&w2| t(ops[w2].done.unwrap()) < invoked)
            });
            if stale {
                findings.push(Finding::new(
                    "stale-write",
                    &h.key,
                    vec![h.begin_index, ev[ops[w].done.unwrap()].index],
                    vec![h.process],
                ));
            }
        }
    }

    // duplicate-token
    let mut by_token: BTreeMap<(String, i64), Vec<&Hold>> = BTreeMap::new();
    for h in &holds {
        if let Some(token) = h.token {
            by_token.entry((h.key.clone(), token)).or_default().push(h);
        }
    }
    for ((key, token), group) in &by_token {
        if group.len() > 1 {
            let mut f = Finding::new(
                "duplicate-token",
                key,
                group.iter().map(|h| h.begin_index).collect(),
                group.iter().map(|h| h.process).collect(),
            )
            .with_detail(format!("token={token}"));
            f.count = group.len() as u64 - 1;
            findings.push(f);
        }
    }

    // token-order: per key with tokens, the precedence graph's strongly connected groups.
    let mut groups = Vec::new();
    let keys: BTreeSet<&String> = holds.iter().map(|h| &h.key).collect();
    for key in &keys {
        let hs: Vec<&Hold> = holds.iter().filter(|h| &h.key == *key).collect();
        if hs.iter().all(|h| h.token.is_none()) {
            continue;
        }
        let n = hs.len();
        // a ended no later than b began (touching holds are ordered), unless b also ended no
        // later than a began: two holds of zero length at one instant are simultaneous.
        let realtime =
            |a: usize, b: usize| a != b && hs[a].end <= hs[b].begin && hs[b].end > hs[a].begin;
        let by_token = |a: usize, b: usize| {
            a != b && matches!((hs[a].token, hs[b].token), (Some(x), Some(y)) if x <= y)
        };
        // reach[a][b]: a path from a to b (transitive closure, Floyd-Warshall).
        let mut reach: Vec<Vec<bool>> = (0..n)
            .map(|a| (0..n).map(|b| realtime(a, b) || by_token(a, b)).collect())
            .collect();
        for m in 0..n {
            let through = reach[m].clone();
            for row in reach.iter_mut() {
                if row[m] {
                    for (cell, &onward) in row.iter_mut().zip(&through) {
                        *cell |= onward;
                    }
                }
            }
        }
        let mut seen = vec![false; n];
        for a in 0..n {
            if seen[a] {
                continue;
            }
            let members: Vec<usize> = (0..n)
                .filter(|&b| b == a || (reach[a][b] && reach[b][a]))
                .collect();
            for &m in &members {
                seen[m] = true;
            }
            if members.len() < 2 {
                continue;
            }
            let begins: Vec<u64> = members.iter().map(|&m| hs[m].begin_index).collect();
            let mut sorted = begins.clone();
            sorted.sort_unstable();
            groups.push(sorted);
            let has_realtime = members
                .iter()
                .any(|&x| members.iter().any(|&y| realtime(x, y)));
            if has_realtime {
                findings.push(Finding::new(
                    "token-order",
                    key,
                    begins,
                    members.iter().map(|&m| hs[m].process).collect(),
                ));
            }
        }
    }

    // unavailable
    let faults = server_faults(&ev);
    let keys: BTreeSet<String> = ops
        .iter()
        .filter(|o| o.f == "acquire")
        .map(|o| o.key.clone())
        .collect();
    for key in &keys {
        let acquired: Vec<&Op> = ops
            .iter()
            .filter(|o| &o.key == key && o.f == "acquire" && outcome(o) == "ok")
            .collect();
        if acquired.is_empty() {
            continue;
        }
        let longest: Option<i128> = acquired
            .iter()
            .filter_map(|o| ev[o.done.unwrap()].int("lease_ms"))
            .map(|ms| i128::from(ms) * NS_PER_MS)
            .max();
        // (from, free from): the key is taken, or may be, over [from, free from).
        let mut blocks: Vec<(i128, i128)> = Vec::new();
        for hold in holds.iter().filter(|h| &h.key == key) {
            let acquire = ops
                .iter()
                .find(|o| {
                    o.f == "acquire" && o.done.is_some_and(|d| ev[d].index == hold.begin_index)
                })
                .unwrap();
            let free = match hold.end_cause {
                End::Open => FOREVER,
                End::Kill(k) => hold.possible_lease().unwrap_or(t(k)),
                End::Release(id) => match (outcome(&ops[id]), ops[id].done) {
                    ("ok" | "fail", Some(d)) => t(d),
                    ("info", Some(d)) => hold.possible_lease().unwrap_or(t(d)),
                    _ => FOREVER,
                },
            };
            blocks.push((t(acquire.invoke), free));
        }
        for op in ops.iter().filter(|o| &o.key == key && o.f == "acquire") {
            match (outcome(op), op.done) {
                ("info", Some(d)) => {
                    let completed = t(d);
                    let free = match longest {
                        None => completed,
                        Some(lease) => {
                            let healed = faults
                                .iter()
                                .filter(|&&(start, heal)| start <= completed && completed < heal)
                                .map(|&(_, heal)| heal)
                                .max()
                                .unwrap_or(completed)
                                .max(completed);
                            healed.saturating_add(lease)
                        }
                    };
                    blocks.push((t(op.invoke), free));
                }
                ("pending", _) => blocks.push((t(op.invoke), FOREVER)),
                _ => {}
            }
        }
        let taken_at = |s: i128| blocks.iter().any(|&(from, free)| from <= s && s < free);
        let mut starts: BTreeSet<i128> = BTreeSet::new();
        starts.insert(history_start);
        for &(_, free) in &blocks {
            if free >= history_start && free < history_end {
                starts.insert(free);
            }
        }
        for &s in &starts {
            if taken_at(s) {
                continue;
            }
            let e = blocks
                .iter()
                .map(|&(from, _)| from)
                .filter(|&from| from > s)
                .min()
                .unwrap_or(history_end)
                .min(history_end);
            if e - s <= i128::from(options.liveness_ns) {
                continue;
            }
            let failed: Vec<u64> = ops
                .iter()
                .filter(|o| &o.key == key && o.f == "acquire" && outcome(o) == "fail")
                .filter(|o| s <= t(o.invoke) && t(o.invoke) < e && t(o.done.unwrap()) <= e)
                .map(|o| o.process)
                .collect();
            if failed.is_empty() {
                continue;
            }
            findings.push(
                Finding::new("unavailable", key, Vec::new(), failed)
                    .with_detail(format!("{s}..{e}")),
            );
        }
    }

    // starvation: runs of failed attempts of a key by one process, broken by any
    // acquisition of the process (any key) and by an attempt of the key that did not fail.
    for &p in &processes {
        let mine: Vec<&Op> = ops
            .iter()
            .filter(|o| o.process == p && o.f == "acquire")
            .collect();
        // key -> (first attempt, last failure)
        let mut runs: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        let mut ended: Vec<(String, usize, usize)> = Vec::new();
        for op in mine {
            match outcome(op) {
                "fail" => {
                    let run = runs
                        .entry(op.key.clone())
                        .or_insert((op.invoke, op.done.unwrap()));
                    run.1 = op.done.unwrap();
                }
                "ok" => {
                    ended.extend(
                        std::mem::take(&mut runs)
                            .into_iter()
                            .map(|(k, (a, b))| (k, a, b)),
                    );
                }
                _ => {
                    if let Some((a, b)) = runs.remove(&op.key) {
                        ended.push((op.key.clone(), a, b));
                    }
                }
            }
        }
        ended.extend(runs.into_iter().map(|(k, (a, b))| (k, a, b)));
        for (key, first, last) in ended {
            let (from, to) = (t(first), t(last));
            if to - from <= i128::from(options.starvation_ns) {
                continue;
            }
            let others = ops.iter().any(|o| {
                o.key == key
                    && o.f == "acquire"
                    && o.process != p
                    && outcome(o) == "ok"
                    && from < t(o.done.unwrap())
                    && t(o.done.unwrap()) < to
            });
            if others {
                findings.push(Finding::new(
                    "starvation",
                    &key,
                    vec![ev[first].index, ev[last].index],
                    vec![p],
                ));
            }
        }
    }

    // unfair: fair first acquisitions only (a nested acquire by the holder never queued).
    // One finding per grant B that overtook a fair acquire A invoked more than the tolerance
    // earlier and granted later; it names the earliest-invoked such A.
    let fair = |o: &Op| ev[o.invoke].field("fair").and_then(Value::as_bool) == Some(true);
    let began_hold = |o: &Op| {
        let index = ev[o.done.unwrap()].index;
        holds.iter().any(|h| h.begin_index == index)
    };
    let grants: Vec<&Op> = ops
        .iter()
        .filter(|o| o.f == "acquire" && outcome(o) == "ok" && fair(o) && began_hold(o))
        .collect();
    for b in &grants {
        let b_done = t(b.done.unwrap());
        let overtaken = grants
            .iter()
            .filter(|a| {
                a.key == b.key
                    && t(b.invoke) - t(a.invoke) > i128::from(options.fairness_ns)
                    && b_done < t(a.done.unwrap())
            })
            .min_by_key(|a| (t(a.invoke), ev[a.invoke].index));
        if let Some(a) = overtaken {
            findings.push(Finding::new(
                "unfair",
                &b.key,
                vec![ev[a.done.unwrap()].index, ev[b.done.unwrap()].index],
                vec![a.process, b.process],
            ));
        }
    }

    // lost-update, on counter keys: every value an integer or null (0), every acknowledged
    // write its process's last read of the key + 1. The final read is the last read that
    // returned, of those invoked after every acknowledged write was answered; the start, the
    // first read that returned of those invoked before any write.
    let counter_keys: BTreeSet<String> = ops
        .iter()
        .filter(|o| o.f == "read" || o.f == "write")
        .map(|o| o.key.clone())
        .collect();
    for key in &counter_keys {
        let mine: Vec<&Op> = ops
            .iter()
            .filter(|o| &o.key == key && (o.f == "read" || o.f == "write"))
            .collect();
        // The `value` member: Some(Some(n)) an integer (null: 0), Some(None) anything else,
        // None absent.
        let number = |line: &Line| -> Option<Option<i128>> {
            let v = line.value.get("value")?;
            Some(if v.is_null() {
                Some(0)
            } else {
                v.as_i64().map(i128::from)
            })
        };
        let mut counter = true;
        for o in &mine {
            for pos in std::iter::once(o.invoke).chain(o.done) {
                if number(&ev[pos]) == Some(None) {
                    counter = false;
                }
            }
        }
        // (value, ok position, process) of each acknowledged write.
        let mut acked: Vec<(i128, usize, u64)> = Vec::new();
        let mut last_read: BTreeMap<u64, i128> = BTreeMap::new();
        let mut reads: Vec<(usize, usize, i128)> = Vec::new();
        for o in &mine {
            let Some(done) = o.done else { continue };
            match (o.f.as_str(), ev[done].ty.as_str()) {
                ("read", "ok") => match number(&ev[done]).flatten() {
                    Some(v) => {
                        last_read.insert(o.process, v);
                        reads.push((o.invoke, done, v));
                    }
                    None => counter = false,
                },
                ("write", "ok") => match number(&ev[o.invoke]).flatten() {
                    Some(v) => {
                        if last_read.get(&o.process) != Some(&(v - 1)) {
                            counter = false;
                        }
                        acked.push((v, done, o.process));
                    }
                    None => counter = false,
                },
                _ => {}
            }
        }
        if acked.is_empty() || !counter {
            continue;
        }
        let first_write = mine
            .iter()
            .filter(|o| o.f == "write")
            .map(|o| t(o.invoke))
            .min();
        let start = reads
            .iter()
            .filter(|r| first_write.is_none_or(|w| t(r.0) < w))
            .min_by_key(|r| (t(r.1), ev[r.1].index))
            .map_or(0, |r| r.2);
        let last_ack = acked.iter().map(|a| t(a.1)).max().unwrap_or(i128::MIN);
        let Some(&(_, _, final_value)) = reads
            .iter()
            .filter(|r| t(r.0) > last_ack)
            .max_by_key(|r| (t(r.1), ev[r.1].index))
        else {
            // No final read: only duplicate values can show a loss.
            if has_duplicates(&acked) {
                findings.push(Finding::new("lost-update", key, Vec::new(), Vec::new()));
            }
            continue;
        };
        let below_count = final_value < start + acked.len() as i128;
        let below_a_write = acked.iter().any(|a| final_value < a.0);
        if below_count || below_a_write || has_duplicates(&acked) {
            findings.push(Finding::new("lost-update", key, Vec::new(), Vec::new()));
        }
    }

    findings.sort();
    Analysis {
        lines,
        holds,
        groups,
        findings,
    }
}

/// Whether two acknowledged writes wrote the same value.
fn has_duplicates(acked: &[(i128, usize, u64)]) -> bool {
    let values: BTreeSet<i128> = acked.iter().map(|a| a.0).collect();
    values.len() < acked.len()
}

/// Server-side faults as (start, heal): a `pause` of anything that is not a client's
/// `worker-N`, a `partition` or a `latency`, healed by the next `resume` (pause) or `heal`
/// naming one of its targets (or naming none, or healing a fault that named none); never
/// healed: forever.
fn server_faults(ev: &[Line]) -> Vec<(i128, i128)> {
    let mut out = Vec::new();
    for (pos, line) in ev.iter().enumerate() {
        if line.client().is_some() {
            continue;
        }
        let targets = line.strings("targets");
        // An event naming no target and no process acts on nothing.
        let acts =
            |l: &Line| !l.strings("targets").is_empty() || !l.numbers("processes").is_empty();
        if !acts(line) {
            continue;
        }
        let healer = match line.f.as_str() {
            "pause" if targets.iter().any(|t| !t.starts_with("worker-")) => "resume",
            "partition" | "latency" => "heal",
            _ => continue,
        };
        let heal = ev[pos + 1..]
            .iter()
            .find(|h| {
                h.client().is_none() && h.f == healer && acts(h) && {
                    // A heal naming no target (only processes) heals everything; a fault
                    // naming none is healed by any heal of its kind.
                    let healed = h.strings("targets");
                    healed.is_empty()
                        || targets.is_empty()
                        || healed.iter().any(|t| targets.contains(t))
                }
            })
            .map_or(FOREVER, |h| i128::from(h.time));
        out.push((i128::from(line.time), heal));
    }
    out
}
