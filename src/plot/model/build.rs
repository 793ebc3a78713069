//! The model of one picture.

use std::collections::HashMap;

use crate::checker::holds::ReleaseOutcome;
use crate::history::compact::{KeyId, OpF, OpType, ProcessId};
use crate::report::{Anomaly, AnomalyKind};

use super::items::{
    bar, mark, AnomalyItem, ArrowItem, Band, Cells, Model, WriteLabel, MIN_ANOMALY_PX, MIN_BAND_PX,
};
use super::labels::anomaly_label;
use super::lanes::{lanes, Activity};
use super::scale::XScale;
use super::source::{Source, View};

/// Builds the model of one picture.
pub fn build(src: &Source, view: &View) -> Model {
    let key_id = src.key_id(view.key);
    let no_ops = Vec::new();
    let ops: &[u32] = key_id.and_then(|k| src.key_ops.get(&k)).unwrap_or(&no_ops);
    let key_holds: &[u32] = key_id
        .and_then(|k| src.key_holds.get(&k))
        .unwrap_or(&no_ops);
    let by_number: HashMap<u64, ProcessId> = src
        .history
        .processes
        .iter()
        .enumerate()
        .map(|(i, &n)| (n, i as ProcessId))
        .collect();

    let mut notes = Vec::new();
    let activity = activity(src, view, ops, key_holds, &by_number);
    let (lanes, lane_of) = lanes(src, view, activity.into_values().collect(), &mut notes);
    let b = Builder {
        src,
        view,
        scale: view.scale,
        t0: view.scale.t0,
        t1: view.scale.t1,
        width: view.scale.width(),
        key_id,
        ops,
        key_holds,
        by_number,
        lane_of,
    };
    let mut cells: Vec<Cells> = (0..lanes.len()).map(|_| Cells::new(b.width)).collect();
    let (holds_drawn, shared_drawn) = b.holds(&mut cells);
    b.uncertain_acquires(&mut cells);
    b.operations(&mut cells);
    let bands = b.fault_bands(&mut cells, &mut notes);
    let (anomalies, arrows) = b.anomalies();

    let processes = lanes.iter().map(|l| l.processes.len()).sum();
    Model {
        key: view.key.to_string(),
        scale: b.scale,
        lanes,
        cells,
        bands,
        anomalies,
        arrows,
        notes,
        holds: holds_drawn,
        shared_holds: shared_drawn,
        processes,
    }
}

/// Who is active in the picture, and when: each process's operations and holds on the key
/// (in the window only, for a zoom), and the processes of the anomalies drawn, which always
/// get a lane.
fn activity(
    src: &Source,
    view: &View,
    ops: &[u32],
    key_holds: &[u32],
    by_number: &HashMap<u64, ProcessId>,
) -> HashMap<ProcessId, Activity> {
    let (history, holds) = (src.history, src.holds);
    let (t0, t1) = (view.scale.t0, view.scale.t1);
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
        touch(p, from, holds.history_end);
    }
    for &h in key_holds {
        let hold = &holds.holds[h as usize];
        touch(hold.process, hold.acquire_invoke, holds.shown_end(hold));
    }
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
    activity
}

/// One picture's model being built: what it draws from, its window, and each process's
/// lane.
struct Builder<'a> {
    src: &'a Source<'a>,
    view: &'a View<'a>,
    scale: XScale,
    t0: i64,
    t1: i64,
    /// Columns.
    width: usize,
    key_id: Option<KeyId>,
    /// The key's operations and holds (positions in the history and in `Holds::holds`).
    ops: &'a [u32],
    key_holds: &'a [u32],
    /// Process number -> process id.
    by_number: HashMap<u64, ProcessId>,
    lane_of: HashMap<ProcessId, usize>,
}

impl Builder<'_> {
    fn lane_index(&self, p: ProcessId) -> Option<usize> {
        self.lane_of.get(&p).copied()
    }

    /// Holds, their latencies and leases; how many holds, and shared ones, are drawn.
    fn holds(&self, cells: &mut [Cells]) -> (usize, usize) {
        let holds = self.src.holds;
        let (scale, t0, t1) = (&self.scale, self.t0, self.t1);
        let mut holds_drawn = 0;
        let mut shared_drawn = 0;
        for &h in self.key_holds {
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
            let Some(lane) = self.lane_index(hold.process) else {
                continue;
            };
            holds_drawn += 1;
            shared_drawn += usize::from(hold.shared);
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
            // A reader's hold (acquired in `shared` mode) is drawn as such: other readers may
            // hold the lock with it, so two readers' bars side by side are no overlap.
            let (held, past) = if hold.shared {
                (bar::SHARED, bar::SHARED_PAST_LEASE)
            } else {
                (bar::HOLD, bar::PAST_LEASE)
            };
            c.fill_bar(scale.cells(hold.begin, end), held);
            self.lease(c, h, end, past);
        }
        (holds_drawn, shared_drawn)
    }

    /// The lease of hold `h` (shown to `end`): its covered stretches, and the hold's parts
    /// outside them drawn `past` its lease. Each renewal sets the lease as
    /// `Holds::lease_end_at` counts it (None: no expiry from then on).
    fn lease(&self, c: &mut Cells, h: u32, end: i64, past: u8) {
        let holds = self.src.holds;
        let hold = &holds.holds[h as usize];
        let (scale, t0, t1) = (&self.scale, self.t0, self.t1);
        let from = holds.renewals.partition_point(|r| r.hold < h);
        let to = holds.renewals.partition_point(|r| r.hold <= h);
        let renewals = &holds.renewals[from..to];
        if hold.initial_lease_end.is_none() && renewals.iter().all(|r| r.lease_end.is_none()) {
            return;
        }
        // (from, to, leased, ends): leased, a lease line runs there, and where `ends` it
        // runs out at `to`; not leased, the lock had no expiry (nothing drawn, and not past
        // a lease either). `i64::MAX`: no expiry to the end.
        let forever = i64::MAX;
        let mut stretches: Vec<(i64, i64, bool, bool)> = Vec::new();
        let (mut s, mut e) = (hold.acquire_invoke, hold.initial_lease_end);
        for r in renewals {
            match (e, r.lease_end) {
                (Some(until), _) if r.invoke > until => {
                    stretches.push((s, until, true, true));
                    (s, e) = (r.invoke, r.lease_end);
                }
                (Some(_), Some(_)) | (None, None) => e = r.lease_end,
                (Some(_), None) => {
                    stretches.push((s, r.invoke, true, false));
                    (s, e) = (r.invoke, None);
                }
                (None, Some(_)) => {
                    stretches.push((s, r.invoke, false, false));
                    (s, e) = (r.invoke, r.lease_end);
                }
            }
        }
        stretches.push((s, e.unwrap_or(forever), e.is_some(), e.is_some()));
        // After a clean release the rest of the lease no longer matters: its line stops
        // with the hold and its end is drawn faint.
        let clean = matches!(hold.release, ReleaseOutcome::Ok { .. });
        let mut covered_to = hold.begin;
        for &(s, e, leased, ends) in &stretches {
            if !leased {
                // No expiry: drawn as a hold with no lease is, with no line and no end.
                if s > covered_to && covered_to < end {
                    c.fill_bar(scale.cells(covered_to, s.min(end)), past);
                }
                covered_to = covered_to.max(e);
                continue;
            }
            if s < end {
                c.set(scale.cells(s, e.min(end)), mark::LEASE);
            }
            if e > end && !clean {
                c.set(scale.cells(s.max(end), e), mark::LEASE_AFTER);
            }
            let drawn_to = if clean { e.min(end) } else { e };
            if ends && drawn_to > t1 && s <= t1 {
                c.lease_beyond = Some(c.lease_beyond.map_or(e, |b: i64| b.max(e)));
            }
            if ends && e >= t0 && e <= t1 {
                let flag = if clean && e > end {
                    mark::LEASE_END_IDLE
                } else {
                    mark::LEASE_END
                };
                c.set(scale.cells(e, e), flag);
            }
            if s > covered_to && covered_to < end {
                c.fill_bar(scale.cells(covered_to, s.min(end)), past);
            }
            covered_to = covered_to.max(e);
        }
        if covered_to < end {
            c.fill_bar(scale.cells(covered_to, end), past);
        }
    }

    /// Acquires that ended `info` may hold the lock to the longest lease seen on the key.
    fn uncertain_acquires(&self, cells: &mut [Cells]) {
        let (history, holds) = (self.src.history, self.src.holds);
        let longest_lease = self
            .ops
            .iter()
            .map(|&pos| &history.ops[pos as usize])
            .filter(|op| op.f == OpF::Acquire && op.ty == OpType::Ok)
            .filter_map(|op| op.lease_ms())
            .max();
        for u in &holds.uncertain_acquires {
            if Some(u.key) != self.key_id {
                continue;
            }
            let until = longest_lease.map_or(holds.history_end, |ms| {
                u.invoke.saturating_add(crate::checker::holds::ms_to_ns(ms))
            });
            if until < self.t0 || u.invoke > self.t1 {
                continue;
            }
            if let Some(lane) = self.lane_index(u.process) {
                cells[lane].set(self.scale.cells(u.invoke, until), mark::MAYBE);
            }
        }
    }

    /// Operations: failed and indeterminate ones, attempts, writes; and those still under
    /// way when the history ended.
    fn operations(&self, cells: &mut [Cells]) {
        let history = self.src.history;
        let (scale, t0, t1) = (&self.scale, self.t0, self.t1);
        let mut pending: HashMap<ProcessId, (i64, Option<i64>)> = HashMap::new();
        for &pos in self.ops {
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
            let Some(lane) = self.lane_index(op.process) else {
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
                // A write's rejection is drawn as the write's own mark; a release's failure
                // is drawn with its hold.
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
        let history_end = self.src.holds.history_end;
        for (p, (invoke, _)) in pending {
            if let Some(lane) = self.lane_index(p) {
                if invoke <= t1 {
                    cells[lane].set(scale.cells(invoke, history_end), mark::ATTEMPT);
                    cells[lane].set(scale.cells(history_end, history_end), mark::INFO);
                }
            }
        }
    }

    /// The faults in the window as bands (at least a few pixels wide, merged where they
    /// touch), marked on the lanes of the processes they hit; a note for those that hit
    /// only processes with no lane.
    fn fault_bands(&self, cells: &mut [Cells], notes: &mut Vec<String>) -> Vec<Band> {
        let (scale, t0, t1, width) = (&self.scale, self.t0, self.t1, self.width);
        let mut bands = Vec::new();
        let mut left_out = 0usize;
        for fault in &self.src.faults {
            if fault.end < t0 || fault.start > t1 {
                continue;
            }
            let fault_lanes: Vec<usize> = fault
                .processes
                .iter()
                .filter_map(|&p| self.lane_index(p))
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
        if left_out > 0 {
            notes.push(format!(
                "{left_out} client fault(s) on processes with no lane here are not shown"
            ));
        }
        merge_bands(bands)
    }

    /// Anomalies: every one, at least a few pixels wide; a queue jump also as an arrow.
    fn anomalies(&self) -> (Vec<AnomalyItem>, Vec<ArrowItem>) {
        let (scale, t0, t1, width) = (&self.scale, self.t0, self.t1, self.width);
        let lane_of_number = |n: u64| self.by_number.get(&n).and_then(|&p| self.lane_index(p));
        let mut anomalies = Vec::new();
        let mut arrows = Vec::new();
        for &a in &self.view.anomalies {
            let anomaly = &self.src.report.anomalies[a];
            if let Some(arrow) = queue_jump(a, anomaly, scale, lane_of_number) {
                arrows.push(arrow);
            }
            if anomaly.kind == AnomalyKind::LostUpdate {
                self.lost_update(a, anomaly, &mut anomalies);
                continue;
            }
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
                .filter_map(|&n| lane_of_number(n))
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
        (anomalies, arrows)
    }

    /// A lost update concerns the whole run: drawn as marks on the events it names (the
    /// final read, the writes of a duplicated value), not as a region over every lane; the
    /// first one labelled.
    fn lost_update(&self, a: usize, anomaly: &Anomaly, anomalies: &mut Vec<AnomalyItem>) {
        let (src, scale, width) = (self.src, &self.scale, self.width);
        let mut events: Vec<(i64, u64)> = anomaly
            .indices
            .iter()
            .filter_map(|&i| src.time_of(i).map(|t| (t, i)))
            .filter(|&(t, _)| t >= self.t0 && t <= self.t1)
            .collect();
        events.sort_unstable();
        let mut labelled = false;
        for (t, i) in events {
            let Some((first, _)) = scale.cells(t, t) else {
                continue;
            };
            let start = first
                .saturating_sub(1)
                .min(width.saturating_sub(MIN_ANOMALY_PX));
            let lanes: Vec<usize> = src
                .process_of(i)
                .and_then(|p| self.lane_index(p))
                .into_iter()
                .collect();
            if lanes.is_empty() {
                continue;
            }
            anomalies.push(AnomalyItem {
                anomaly: a,
                start,
                end: (start + MIN_ANOMALY_PX).min(width),
                lanes,
                label: if labelled {
                    String::new()
                } else {
                    anomaly_label(a, anomaly)
                },
            });
            labelled = true;
        }
    }
}

/// An `unfair` anomaly's arrow: at the time the overtaker got the lock (the anomaly's
/// start), from the lane of the waiter it overtook (named first, its acquire still pending)
/// to the overtaker's lane (named second). None for other kinds, outside the picture, or
/// when both share one row.
fn queue_jump(
    a: usize,
    anomaly: &Anomaly,
    scale: &XScale,
    lane_of: impl Fn(u64) -> Option<usize>,
) -> Option<ArrowItem> {
    if anomaly.kind != AnomalyKind::Unfair {
        return None;
    }
    let [waiter, jumper] = anomaly.processes[..] else {
        return None;
    };
    let cell = scale.cell(anomaly.start)?;
    let (from, to) = (lane_of(waiter)?, lane_of(jumper)?);
    (from != to).then(|| ArrowItem {
        anomaly: a,
        cell,
        from,
        to,
        label: format!("p{jumper} jumped ahead of p{waiter}"),
    })
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
