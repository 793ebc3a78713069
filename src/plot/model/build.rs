//! The model of one picture.

use std::collections::HashMap;

use crate::checker::holds::ReleaseOutcome;
use crate::history::compact::{OpF, OpType, ProcessId};
use crate::report::AnomalyKind;

use super::items::{
    bar, mark, AnomalyItem, ArrowItem, Band, Cells, Model, WriteLabel, MIN_ANOMALY_PX, MIN_BAND_PX,
};
use super::labels::anomaly_label;
use super::lanes::{lanes, Activity};
use super::source::{Source, View};

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
    let mut shared_drawn = 0;
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
        // The lease: its covered stretches, and the hold's parts outside them. Each renewal
        // sets the lease as `Holds::lease_end_at` counts it (None: no expiry from then on).
        let from = holds.renewals.partition_point(|r| r.hold < h);
        let to = holds.renewals.partition_point(|r| r.hold <= h);
        let renewals = &holds.renewals[from..to];
        if hold.initial_lease_end.is_some() || renewals.iter().any(|r| r.lease_end.is_some()) {
            // (from, to, leased, ends): leased, a lease line runs there, and where `ends`
            // it runs out at `to`; not leased, the lock had no expiry (nothing drawn, and
            // not past a lease either). `i64::MAX`: no expiry to the end.
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
    let mut arrows = Vec::new();
    for &a in &view.anomalies {
        let anomaly = &src.report.anomalies[a];
        if let Some(arrow) = queue_jump(a, anomaly, &scale, |n| {
            by_number.get(&n).and_then(|&p| lane_index(p))
        }) {
            arrows.push(arrow);
        }
        if anomaly.kind == AnomalyKind::LostUpdate {
            // It concerns the whole run: drawn as marks on the events it names (the final
            // read, the writes of a duplicated value), not as a region over every lane.
            let mut events: Vec<(i64, u64)> = anomaly
                .indices
                .iter()
                .filter_map(|&i| src.time_of(i).map(|t| (t, i)))
                .filter(|&(t, _)| t >= t0 && t <= t1)
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
                let lanes: Vec<usize> =
                    src.process_of(i).and_then(lane_index).into_iter().collect();
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
        arrows,
        notes,
        holds: holds_drawn,
        shared_holds: shared_drawn,
        processes,
    }
}

/// An `unfair` anomaly's arrow: at the time the overtaker got the lock (the anomaly's
/// start), from the lane of the waiter it overtook (named first, its acquire still pending)
/// to the overtaker's lane (named second). None for other kinds, outside the picture, or
/// when both share one row.
fn queue_jump(
    a: usize,
    anomaly: &crate::report::Anomaly,
    scale: &super::scale::XScale,
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
