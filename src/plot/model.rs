//! What a timeline shows, merged to the pixel: lanes of processes, per-column cells of holds,
//! latencies, leases and marks, fault bands and anomaly regions. `timeline.rs` lays these out
//! and paints them; nothing here knows about plotters.
//!
//! Merging: each lane keeps one cell per pixel column. A hold, a latency or a lease marks the
//! columns it covers (at least one), so holds closer than a pixel fall into one bar and every
//! mark is kept once per column. Bars, lines and marks are then drawn as runs of equal
//! columns, so what is drawn is bounded by lanes × columns whatever the history's length.
//! Anomalies are never merged or dropped: each one is its own region, at least a few pixels
//! wide. Fault bands of one kind that touch at the pixel are merged into one band (with a
//! count), never dropped.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::checker::holds::{Holds, ReleaseOutcome};
use crate::history::compact::{KeyId, OpF, OpType, ProcessId};
use crate::history::History;
use crate::report::{Anomaly, Report};

use super::timeline::ProcessGroups;

/// The x transform of a picture: run time in ns to pixel columns. Column `left` is `t0`,
/// column `right` is `t1`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct XScale {
    pub t0: i64,
    pub t1: i64,
    /// The first and one past the last pixel column of the plot area.
    pub left: i32,
    pub right: i32,
}

impl XScale {
    pub fn new(t0: i64, t1: i64, left: i32, right: i32) -> XScale {
        XScale {
            t0,
            t1: t1.max(t0.saturating_add(1)),
            left,
            right: right.max(left + 1),
        }
    }

    /// The picture x coordinate of time `ns` (not clamped).
    pub fn x(&self, ns: i64) -> f64 {
        let span = (self.t1 - self.t0) as f64;
        self.left as f64 + (ns.saturating_sub(self.t0)) as f64 / span * self.width() as f64
    }

    /// The picture column time `ns` falls into (not clamped).
    pub fn column(&self, ns: i64) -> i32 {
        let x = self.x(ns).floor();
        x.clamp(i32::MIN as f64, i32::MAX as f64) as i32
    }

    /// Columns of the plot area.
    pub fn width(&self) -> usize {
        (self.right - self.left) as usize
    }

    pub fn ns_per_px(&self) -> f64 {
        (self.t1 - self.t0) as f64 / self.width() as f64
    }

    /// The plot-relative columns `[first, last]` that `[a, b]` covers, at least one, clipped
    /// to the plot; None if it lies outside.
    pub fn cells(&self, a: i64, b: i64) -> Option<(usize, usize)> {
        let (a, b) = (a.min(b), a.max(b));
        if b < self.t0 || a > self.t1 {
            return None;
        }
        let w = self.width() as i64;
        let first = (self.column(a) - self.left) as i64;
        let end = (self.x(b).ceil() as i64 - self.left as i64).max(first + 1);
        let first = first.clamp(0, w - 1);
        let last = (end - 1).clamp(first, w - 1);
        Some((first as usize, last as usize))
    }

    /// The plot-relative column of an instant, if it lies in the plot.
    pub fn cell(&self, t: i64) -> Option<usize> {
        self.cells(t, t).map(|(c, _)| c)
    }
}

/// Bar classes of a lane's column, higher wins when merged into one column.
pub mod bar {
    pub const NONE: u8 = 0;
    /// Acquire latency (invoke → ok) or release latency (invoke → completion).
    pub const LATENCY: u8 = 1;
    /// Held, within its lease.
    pub const HOLD: u8 = 2;
    /// Held after its lease ran out.
    pub const PAST_LEASE: u8 = 3;
}

/// Marks and lines of a lane's column (bit flags).
pub mod mark {
    /// The lease runs here (a thin line over the bar).
    pub const LEASE: u16 = 1;
    /// An acquire that failed, or an operation whose outcome is unknown, is under way.
    pub const ATTEMPT: u16 = 1 << 1;
    /// An operation failed here (acquire, renew, release, read).
    pub const FAIL: u16 = 1 << 2;
    /// An operation ended `info` here (or never ended).
    pub const INFO: u16 = 1 << 3;
    /// A lease ended here.
    pub const LEASE_END: u16 = 1 << 4;
    /// A write the resource accepted was invoked here.
    pub const WRITE: u16 = 1 << 5;
    /// A write the resource rejected was invoked here.
    pub const WRITE_REJECTED: u16 = 1 << 6;
    /// A fault touched this process here (shaded darker than the band across all lanes).
    pub const FAULT: u16 = 1 << 7;
    /// The lease runs on after the hold ended without a clean release (killed, release
    /// failed or unknown): the lock may still be taken.
    pub const LEASE_AFTER: u16 = 1 << 8;
    /// A lease ended here after its hold had been cleanly released (it no longer mattered).
    pub const LEASE_END_IDLE: u16 = 1 << 9;
    /// An acquire that ended `info` may hold the lock here (to its invoke + the longest
    /// lease seen on the key, as the liveness check counts it).
    pub const MAYBE: u16 = 1 << 10;
    pub const ALL: [u16; 11] = [
        LEASE,
        ATTEMPT,
        FAIL,
        INFO,
        LEASE_END,
        WRITE,
        WRITE_REJECTED,
        FAULT,
        LEASE_AFTER,
        LEASE_END_IDLE,
        MAYBE,
    ];
}

/// One row of the picture.
#[derive(Debug, Clone, PartialEq)]
pub struct Lane {
    pub label: String,
    /// The worker group, when the groups are known.
    pub group: Option<u64>,
    /// The process numbers drawn in this row (more than one when rows are shared).
    pub processes: Vec<u64>,
}

/// A write tick's label.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WriteLabel {
    pub cell: usize,
    pub token: Option<i64>,
    pub rejected: bool,
}

/// One lane's columns.
#[derive(Debug, Clone, Default)]
pub struct Cells {
    pub bar: Vec<u8>,
    pub marks: Vec<u16>,
    /// First write per column, for token labels.
    pub writes: Vec<WriteLabel>,
    /// The latest lease end beyond the right edge of the picture, if a lease runs past it.
    pub lease_beyond: Option<i64>,
}

impl Cells {
    fn new(width: usize) -> Cells {
        Cells {
            bar: vec![bar::NONE; width],
            marks: vec![0; width],
            writes: Vec::new(),
            lease_beyond: None,
        }
    }

    fn fill_bar(&mut self, cells: Option<(usize, usize)>, class: u8) {
        if let Some((a, b)) = cells {
            for c in &mut self.bar[a..=b] {
                *c = (*c).max(class);
            }
        }
    }

    fn set(&mut self, cells: Option<(usize, usize)>, flag: u16) {
        if let Some((a, b)) = cells {
            for c in &mut self.marks[a..=b] {
                *c |= flag;
            }
        }
    }
}

/// A run of equal columns `[start, end)` (plot-relative).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub start: usize,
    pub end: usize,
    pub value: u8,
}

/// Runs of equal, non-zero values; runs of one value separated by at most `gap` empty
/// columns are joined (gap 0: only touching columns).
pub fn runs(values: impl Iterator<Item = u8>, gap: usize) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for (i, v) in values.enumerate() {
        if v == 0 {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.value == v && i <= last.end + gap => last.end = i + 1,
            _ => out.push(Run {
                start: i,
                end: i + 1,
                value: v,
            }),
        }
    }
    out
}

/// A nemesis fault as a span of run time.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// The fault's name (the starting one of a pair: `pause`, `partition`, ...).
    pub name: String,
    pub label: String,
    pub start: i64,
    pub end: i64,
    /// A single event rather than a start/end pair.
    pub instant: bool,
    /// Started but never ended in the history.
    pub unended: bool,
    pub processes: Vec<ProcessId>,
    pub indices: Vec<u32>,
}

/// A fault band as drawn: one or more faults of one kind merged at the pixel.
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    pub name: String,
    pub label: String,
    /// Plot-relative columns `[start, end)`.
    pub start: usize,
    pub end: usize,
    pub count: usize,
    /// Every fault in it is an instant (a kill, a clock jump, …), not a span.
    pub instant: bool,
    /// Lanes the faults named.
    pub lanes: Vec<usize>,
}

/// An anomaly as drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct AnomalyItem {
    /// Index into `Report::anomalies`.
    pub anomaly: usize,
    /// Plot-relative columns `[start, end)`, at least `MIN_ANOMALY_PX` wide.
    pub start: usize,
    pub end: usize,
    /// The lanes it concerns; empty: every lane.
    pub lanes: Vec<usize>,
    pub label: String,
}

pub const MIN_ANOMALY_PX: usize = 3;
const MIN_BAND_PX: usize = 2;

/// Everything one picture draws.
#[derive(Debug, Clone)]
pub struct Model {
    pub key: String,
    pub scale: XScale,
    pub lanes: Vec<Lane>,
    pub cells: Vec<Cells>,
    pub bands: Vec<Band>,
    pub anomalies: Vec<AnomalyItem>,
    /// Things the picture must say about what it merged or left out.
    pub notes: Vec<String>,
    /// Holds drawn.
    pub holds: usize,
    /// Client processes drawn.
    pub processes: usize,
}

/// The faults of `history` as spans, paired as the other pictures pair them
/// (`super::fault_bands`: `pause` … `resume`, `partition` … `heal`, `kill` … `restart`, the
/// rest instants), with the client processes they hit.
pub fn faults(history: &History) -> Vec<Fault> {
    let by_index: HashMap<u32, &crate::history::compact::Fault> =
        history.faults.iter().map(|f| (f.index, f)).collect();
    super::fault_bands(history)
        .into_iter()
        .map(|band| {
            let mut processes: Vec<ProcessId> = band
                .indices
                .iter()
                .filter_map(|i| by_index.get(i))
                .flat_map(|f| f.processes.iter().copied())
                .collect();
            processes.sort_unstable();
            processes.dedup();
            let who = if band.targets.is_empty() {
                processes
                    .iter()
                    .map(|&p| format!("p{}", history.process_number(p)))
                    .collect::<Vec<_>>()
                    .join(",")
            } else {
                band.targets.join(",")
            };
            let mut label = if who.is_empty() {
                band.name.clone()
            } else {
                format!("{} {}", band.name, who)
            };
            label = shorten(&label, 32);
            if band.unhealed {
                label.push_str(" (never ended)");
            }
            Fault {
                instant: band.is_instant(),
                unended: band.unhealed,
                name: band.name,
                label,
                start: band.start,
                end: band.end,
                processes,
                indices: band.indices,
            }
        })
        .collect()
}

/// `text`, cut to `max` characters with an ellipsis.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// The label of anomaly number `n` (0-based) in pictures: `#1 overlap within lease [1, 4]`.
pub fn anomaly_label(n: usize, a: &Anomaly) -> String {
    let qualifier = match (a.kind.as_str(), a.lease_expired) {
        ("overlap", Some(true)) => " after lease expiry",
        ("overlap", Some(false)) => " within lease",
        _ => "",
    };
    // The first events and the last (where a stale write or a failed release usually is).
    let all: Vec<String> = a.indices.iter().map(|i| i.to_string()).collect();
    let shown = if all.len() > 6 {
        format!(
            "{}, …, {}",
            all[..3].join(", "),
            all[all.len() - 2..].join(", ")
        )
    } else {
        all.join(", ")
    };
    format!("#{} {}{} [{}]", n + 1, a.kind, qualifier, shown)
}

/// What the pictures of one history share: holds, faults, ops and holds by key.
pub struct Source<'a> {
    pub history: &'a History,
    pub holds: &'a Holds,
    pub report: &'a Report,
    pub groups: &'a ProcessGroups,
    pub faults: Vec<Fault>,
    /// Positions in `history.ops` of each key's client ops (time order).
    pub key_ops: HashMap<KeyId, Vec<u32>>,
    /// Positions in `holds.holds` of each key's holds.
    pub key_holds: HashMap<KeyId, Vec<u32>>,
    /// Time of each event, by its index (for anomalies' events).
    pub index_time: Vec<i64>,
}

impl<'a> Source<'a> {
    /// Collects what the pictures of `keys` need.
    pub fn new(
        history: &'a History,
        holds: &'a Holds,
        report: &'a Report,
        groups: &'a ProcessGroups,
        keys: &[KeyId],
    ) -> Source<'a> {
        let mut key_ops: HashMap<KeyId, Vec<u32>> = keys.iter().map(|&k| (k, Vec::new())).collect();
        let mut key_holds: HashMap<KeyId, Vec<u32>> =
            keys.iter().map(|&k| (k, Vec::new())).collect();
        let mut index_time = Vec::new();
        if !report.anomalies.is_empty() {
            index_time = vec![i64::MIN; history.ops.len()];
        }
        for (i, op) in history.ops.iter().enumerate() {
            if let Some(slot) = index_time.get_mut(op.index as usize) {
                *slot = op.time;
            }
            if !op.is_client() {
                continue;
            }
            if let Some(list) = key_ops.get_mut(&op.key) {
                list.push(i as u32);
            }
        }
        for (i, h) in holds.holds.iter().enumerate() {
            if let Some(list) = key_holds.get_mut(&h.key) {
                list.push(i as u32);
            }
        }
        Source {
            history,
            holds,
            report,
            groups,
            faults: faults(history),
            key_ops,
            key_holds,
            index_time,
        }
    }

    /// The time of the event with index `index`, if there is one.
    pub fn time_of(&self, index: u64) -> Option<i64> {
        self.index_time
            .get(index as usize)
            .copied()
            .filter(|&t| t != i64::MIN)
    }

    fn key_id(&self, key: &str) -> Option<KeyId> {
        self.history
            .keys
            .iter()
            .position(|k| k == key)
            .map(|k| k as KeyId)
    }
}

/// What a picture covers.
pub struct View<'v> {
    pub key: &'v str,
    pub scale: XScale,
    /// Lanes only for processes active in the window (zooms); otherwise every process that
    /// touched the key.
    pub active_only: bool,
    /// Rows beyond this are shared (see `lanes`).
    pub max_lanes: usize,
    /// Anomalies to draw (indices into `Report::anomalies`).
    pub anomalies: Vec<usize>,
}

/// A process's activity on the key: its first and last moment.
#[derive(Debug, Clone, Copy)]
struct Activity {
    process: ProcessId,
    first: i64,
    last: i64,
}

/// Builds the model of one picture.
pub fn build(src: &Source, view: &View) -> Model {
    let history = src.history;
    let holds = src.holds;
    let scale = view.scale;
    let (t0, t1) = (scale.t0, scale.t1);
    let key_id = src.key_id(view.key);
    let no_ops = Vec::new();
    let ops: &[u32] = key_id.and_then(|k| src.key_ops.get(&k)).unwrap_or(&no_ops);
    let key_holds: &[u32] = key_id
        .and_then(|k| src.key_holds.get(&k))
        .unwrap_or(&no_ops);
    let history_end = holds.history_end;

    // Who is active, and when.
    let mut activity: HashMap<ProcessId, Activity> = HashMap::new();
    let mut touch = |p: ProcessId, a: i64, b: i64| {
        if view.active_only && (b < t0 || a > t1) {
            return;
        }
        let e = activity.entry(p).or_insert(Activity {
            process: p,
            first: a,
            last: b,
        });
        e.first = e.first.min(a);
        e.last = e.last.max(b);
    };
    {
        let mut pending: HashMap<ProcessId, i64> = HashMap::new();
        for &pos in ops {
            let op = &history.ops[pos as usize];
            if op.ty == OpType::Invoke {
                pending.insert(op.process, op.time);
                touch(op.process, op.time, op.time);
            } else {
                let from = pending.remove(&op.process).unwrap_or(op.time);
                touch(op.process, from, op.time);
            }
        }
        for (p, from) in pending {
            touch(p, from, history_end);
        }
    }
    for &h in key_holds {
        let hold = &holds.holds[h as usize];
        touch(hold.process, hold.acquire_invoke, holds.shown_end(hold));
    }
    // The processes of the anomalies drawn always get a lane.
    let by_number: HashMap<u64, ProcessId> = history
        .processes
        .iter()
        .enumerate()
        .map(|(i, &n)| (n, i as ProcessId))
        .collect();
    for &a in &view.anomalies {
        let anomaly = &src.report.anomalies[a];
        for n in &anomaly.processes {
            if let Some(&p) = by_number.get(n) {
                activity.entry(p).or_insert(Activity {
                    process: p,
                    first: anomaly.start,
                    last: anomaly.end,
                });
            }
        }
    }

    let mut notes = Vec::new();
    let (lanes, lane_of) = lanes(src, view, activity.into_values().collect(), &mut notes);
    let width = scale.width();
    let mut cells: Vec<Cells> = (0..lanes.len()).map(|_| Cells::new(width)).collect();
    let lane_index = |p: ProcessId| lane_of.get(&p).copied();

    // Holds, their latencies and leases.
    let mut holds_drawn = 0;
    for &h in key_holds {
        let hold = &holds.holds[h as usize];
        let end = holds.shown_end(hold);
        let release_done = match hold.release {
            ReleaseOutcome::Ok { time, .. }
            | ReleaseOutcome::Fail { time, .. }
            | ReleaseOutcome::Info { time, .. } => Some(time),
            ReleaseOutcome::None => None,
        };
        let lease_end_final = hold.lease_end.unwrap_or(i64::MIN);
        let reach = end.max(release_done.unwrap_or(end)).max(lease_end_final);
        if reach < t0 || hold.acquire_invoke > t1 {
            continue;
        }
        let Some(lane) = lane_index(hold.process) else {
            continue;
        };
        holds_drawn += 1;
        let c = &mut cells[lane];
        c.fill_bar(scale.cells(hold.acquire_invoke, hold.begin), bar::LATENCY);
        if let Some(done) = release_done {
            c.fill_bar(scale.cells(end, done), bar::LATENCY);
            match hold.release {
                ReleaseOutcome::Fail { .. } => c.set(scale.cells(done, done), mark::FAIL),
                ReleaseOutcome::Info { .. } => c.set(scale.cells(done, done), mark::INFO),
                _ => {}
            }
        }
        c.fill_bar(scale.cells(hold.begin, end), bar::HOLD);
        // The lease: its covered stretches, and the hold's parts outside them.
        if let Some(first_end) = hold.initial_lease_end {
            let from = holds.renewals.partition_point(|r| r.hold < h);
            let to = holds.renewals.partition_point(|r| r.hold <= h);
            let mut renewals: Vec<(i64, i64)> = holds.renewals[from..to]
                .iter()
                .map(|r| (r.invoke, r.lease_end))
                .collect();
            renewals.sort_unstable();
            let mut stretches: Vec<(i64, i64)> = Vec::new();
            let (mut s, mut e) = (hold.acquire_invoke, first_end);
            for (invoke, lease_end) in renewals {
                if invoke > e {
                    stretches.push((s, e));
                    (s, e) = (invoke, lease_end);
                } else {
                    e = e.max(lease_end);
                }
            }
            stretches.push((s, e));
            // After a clean release the rest of the lease no longer matters: its line stops
            // with the hold and its end is drawn faint.
            let clean = matches!(hold.release, ReleaseOutcome::Ok { .. });
            let mut covered_to = hold.begin;
            for &(s, e) in &stretches {
                if s < end {
                    c.set(scale.cells(s, e.min(end)), mark::LEASE);
                }
                if e > end && !clean {
                    c.set(scale.cells(s.max(end), e), mark::LEASE_AFTER);
                }
                let drawn_to = if clean { e.min(end) } else { e };
                if drawn_to > t1 && s <= t1 {
                    c.lease_beyond = Some(c.lease_beyond.map_or(e, |b: i64| b.max(e)));
                }
                if e >= t0 && e <= t1 {
                    let flag = if clean && e > end {
                        mark::LEASE_END_IDLE
                    } else {
                        mark::LEASE_END
                    };
                    c.set(scale.cells(e, e), flag);
                }
                if s > covered_to && covered_to < end {
                    c.fill_bar(scale.cells(covered_to, s.min(end)), bar::PAST_LEASE);
                }
                covered_to = covered_to.max(e);
            }
            if covered_to < end {
                c.fill_bar(scale.cells(covered_to, end), bar::PAST_LEASE);
            }
        }
    }

    // Acquires that ended `info` may hold the lock to the longest lease seen on the key.
    let longest_lease = ops
        .iter()
        .map(|&pos| &history.ops[pos as usize])
        .filter(|op| op.f == OpF::Acquire && op.ty == OpType::Ok)
        .filter_map(|op| op.lease_ms())
        .max();
    for u in &holds.uncertain_acquires {
        if Some(u.key) != key_id {
            continue;
        }
        let until = longest_lease.map_or(history_end, |ms| {
            u.invoke.saturating_add(crate::checker::holds::ms_to_ns(ms))
        });
        if until < t0 || u.invoke > t1 {
            continue;
        }
        if let Some(lane) = lane_index(u.process) {
            cells[lane].set(scale.cells(u.invoke, until), mark::MAYBE);
        }
    }

    // Operations: failed and indeterminate ones, attempts, writes.
    let mut pending: HashMap<ProcessId, (i64, Option<i64>)> = HashMap::new();
    for &pos in ops {
        let op = &history.ops[pos as usize];
        if op.time > t1 && op.ty == OpType::Invoke {
            continue;
        }
        if op.ty == OpType::Invoke {
            pending.insert(op.process, (op.time, op.token()));
            continue;
        }
        let (invoke, token) = pending.remove(&op.process).unwrap_or((op.time, None));
        if op.time < t0 || invoke > t1 {
            continue;
        }
        let Some(lane) = lane_index(op.process) else {
            continue;
        };
        let c = &mut cells[lane];
        match (op.f, op.ty) {
            (OpF::Acquire, OpType::Fail) | (_, OpType::Info) => {
                c.set(scale.cells(invoke, op.time), mark::ATTEMPT);
            }
            (OpF::Write, OpType::Ok | OpType::Fail) => {
                let flag = if op.ty == OpType::Ok {
                    mark::WRITE
                } else {
                    mark::WRITE_REJECTED
                };
                if let Some(cell) = scale.cell(invoke).filter(|_| invoke >= t0) {
                    if c.marks[cell] & (mark::WRITE | mark::WRITE_REJECTED) == 0 {
                        c.writes.push(WriteLabel {
                            cell,
                            token: token.or(op.token()),
                            rejected: op.ty == OpType::Fail,
                        });
                    }
                    c.marks[cell] |= flag;
                }
            }
            _ => {}
        }
        match op.ty {
            // A write's rejection is drawn as the write's own mark; a release's failure is
            // drawn with its hold above.
            OpType::Fail if op.f != OpF::Write && op.f != OpF::Release => {
                c.set(scale.cells(op.time, op.time), mark::FAIL)
            }
            OpType::Info if op.f != OpF::Release => {
                c.set(scale.cells(op.time, op.time), mark::INFO)
            }
            _ => {}
        }
    }
    // Operations never completed: still under way when the history ended.
    for (p, (invoke, _)) in pending {
        if let Some(lane) = lane_index(p) {
            if invoke <= t1 {
                cells[lane].set(scale.cells(invoke, history_end), mark::ATTEMPT);
                cells[lane].set(scale.cells(history_end, history_end), mark::INFO);
            }
        }
    }

    // Faults.
    let mut bands = Vec::new();
    let mut left_out = 0usize;
    for fault in &src.faults {
        if fault.end < t0 || fault.start > t1 {
            continue;
        }
        let fault_lanes: Vec<usize> = fault
            .processes
            .iter()
            .filter_map(|&p| lane_index(p))
            .collect();
        if !fault.processes.is_empty() && fault_lanes.is_empty() {
            left_out += 1;
            continue;
        }
        let Some((a, b)) = scale.cells(fault.start, fault.end) else {
            continue;
        };
        let end = (b + 1).max(a + MIN_BAND_PX).min(width);
        let start = end.saturating_sub(MIN_BAND_PX).min(a);
        for &lane in &fault_lanes {
            let cells_of = Some((start, end - 1));
            cells[lane].set(cells_of, mark::FAULT);
        }
        bands.push(Band {
            name: fault.name.clone(),
            label: fault.label.clone(),
            start,
            end,
            count: 1,
            instant: fault.instant,
            lanes: fault_lanes,
        });
    }
    let bands = merge_bands(bands);
    if left_out > 0 {
        notes.push(format!(
            "{left_out} client fault(s) on processes with no lane here are not shown"
        ));
    }

    // Anomalies: every one, at least a few pixels wide.
    let mut anomalies = Vec::new();
    for &a in &view.anomalies {
        let anomaly = &src.report.anomalies[a];
        let (s, e) = (
            anomaly.start.min(anomaly.end),
            anomaly.start.max(anomaly.end),
        );
        let Some((first, last)) = scale.cells(s.max(t0), e.min(t1)) else {
            continue;
        };
        let mut end = (last + 1).max(first + MIN_ANOMALY_PX).min(width);
        let start = end.saturating_sub(MIN_ANOMALY_PX).min(first);
        end = end.max(start + 1);
        let mut item_lanes: Vec<usize> = anomaly
            .processes
            .iter()
            .filter_map(|n| by_number.get(n).and_then(|&p| lane_index(p)))
            .collect();
        item_lanes.sort_unstable();
        item_lanes.dedup();
        anomalies.push(AnomalyItem {
            anomaly: a,
            start,
            end,
            lanes: item_lanes,
            label: anomaly_label(a, anomaly),
        });
    }

    let processes = lanes.iter().map(|l| l.processes.len()).sum();
    Model {
        key: view.key.to_string(),
        scale,
        lanes,
        cells,
        bands,
        anomalies,
        notes,
        holds: holds_drawn,
        processes,
    }
}

/// Bands of one kind that touch at the pixel become one.
fn merge_bands(mut bands: Vec<Band>) -> Vec<Band> {
    bands.sort_by(|a, b| (a.name.as_str(), a.start).cmp(&(b.name.as_str(), b.start)));
    let mut out: Vec<Band> = Vec::new();
    for band in bands {
        match out.last_mut() {
            Some(last) if last.name == band.name && band.start <= last.end => {
                last.end = last.end.max(band.end);
                last.count += 1;
                last.instant &= band.instant;
                last.lanes.extend(band.lanes);
                last.lanes.sort_unstable();
                last.lanes.dedup();
            }
            _ => out.push(band),
        }
    }
    for band in &mut out {
        if band.count > 1 {
            band.label = format!("{} ×{}", band.name, band.count);
        }
    }
    out.sort_by_key(|b| b.start);
    out
}

/// The rows of a picture and each process's row.
///
/// One row per process, ordered by worker group, slot and process number, unless there are
/// more than `max_lanes` processes: then processes share rows. With known groups a process
/// shares the row of its slot (`p % clients`: the processes that replaced one another after
/// an `info`); without groups, processes whose activity on the key never overlaps (with two
/// pixels to spare) share a row, packed greedily in order of first activity.
fn lanes(
    src: &Source,
    view: &View,
    mut activity: Vec<Activity>,
    notes: &mut Vec<String>,
) -> (Vec<Lane>, HashMap<ProcessId, usize>) {
    let history = src.history;
    let groups = src.groups;
    let number = |p: ProcessId| history.process_number(p);
    activity.sort_by_key(|a| {
        let n = number(a.process);
        (groups.group(n), groups.slot(n), n)
    });
    let mut lane_of = HashMap::new();
    let mut lanes: Vec<Lane> = Vec::new();
    let label_one = |n: u64| format!("p{n}");
    if activity.len() <= view.max_lanes.max(1) {
        for a in &activity {
            let n = number(a.process);
            lane_of.insert(a.process, lanes.len());
            lanes.push(Lane {
                label: label_one(n),
                group: groups.group(n),
                processes: vec![n],
            });
        }
        return (lanes, lane_of);
    }

    if !groups.is_none() {
        let mut row_of_slot: HashMap<u64, usize> = HashMap::new();
        for a in &activity {
            let n = number(a.process);
            let slot = groups.slot(n).unwrap_or(n);
            let row = *row_of_slot.entry(slot).or_insert_with(|| {
                lanes.push(Lane {
                    label: String::new(),
                    group: groups.group(n),
                    processes: Vec::new(),
                });
                lanes.len() - 1
            });
            lanes[row].processes.push(n);
            lane_of.insert(a.process, row);
        }
        notes.push(format!(
            "{} processes in {} rows: processes that replaced one another in a client slot (p % clients) share its row",
            activity.len(),
            lanes.len()
        ));
    } else {
        activity.sort_by_key(|a| (a.first, number(a.process)));
        let spare = (2.0 * view.scale.ns_per_px()).ceil() as i64;
        // Rows by the time they are free again.
        let mut free: BinaryHeap<Reverse<(i64, usize)>> = BinaryHeap::new();
        for a in &activity {
            let n = number(a.process);
            let row = match free.peek() {
                Some(&Reverse((until, row))) if until.saturating_add(spare) < a.first => {
                    free.pop();
                    row
                }
                _ => {
                    lanes.push(Lane {
                        label: String::new(),
                        group: None,
                        processes: Vec::new(),
                    });
                    lanes.len() - 1
                }
            };
            lanes[row].processes.push(n);
            lane_of.insert(a.process, row);
            free.push(Reverse((a.last, row)));
        }
        notes.push(format!(
            "{} processes in {} rows: processes whose activity on this key never overlaps share a row",
            activity.len(),
            lanes.len()
        ));
    }
    for lane in &mut lanes {
        lane.label = match lane.processes.as_slice() {
            [one] => label_one(*one),
            [first, rest @ ..] => format!("p{first} +{}", rest.len()),
            [] => String::new(),
        };
    }
    (lanes, lane_of)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_cover_at_least_one_column_and_clip() {
        let s = XScale::new(0, 1000, 10, 110); // 10 ns per pixel
        assert_eq!(s.cells(0, 0), Some((0, 0)));
        assert_eq!(s.cells(5, 6), Some((0, 0)));
        assert_eq!(s.cells(0, 25), Some((0, 2)));
        assert_eq!(s.cells(-50, 2000), Some((0, 99)));
        assert_eq!(s.cells(1001, 2000), None);
        assert_eq!(s.column(500), 60);
    }

    #[test]
    fn runs_join_equal_neighbours() {
        let r = runs([0, 2, 2, 1, 0, 1, 1].into_iter(), 0);
        assert_eq!(
            r,
            vec![
                Run {
                    start: 1,
                    end: 3,
                    value: 2
                },
                Run {
                    start: 3,
                    end: 4,
                    value: 1
                },
                Run {
                    start: 5,
                    end: 7,
                    value: 1
                },
            ]
        );
        assert_eq!(runs([1, 0, 1].into_iter(), 1).len(), 1);
    }

    #[test]
    fn labels_name_kind_and_events() {
        let a = Anomaly {
            kind: "overlap".into(),
            key: "k".into(),
            processes: vec![0, 1],
            indices: vec![1, 4, 5, 6, 9],
            explanation: String::new(),
            start: 0,
            end: 1,
            lease_expired: Some(false),
            tokens: vec![],
            cycle: vec![],
        };
        assert_eq!(
            anomaly_label(0, &a),
            "#1 overlap within lease [1, 4, 5, 6, 9]"
        );
        let many = Anomaly {
            indices: (1..=9).collect(),
            lease_expired: None,
            kind: "stale-write".into(),
            ..a
        };
        assert_eq!(anomaly_label(1, &many), "#2 stale-write [1, 2, 3, …, 8, 9]");
    }
}
