//! What one picture draws, merged to the pixel: lanes and their cells, fault bands, anomaly
//! regions.

use super::scale::XScale;

/// Bar classes of a lane's column, higher wins when merged into one column.
pub mod bar {
    pub const NONE: u8 = 0;
    /// Acquire latency (invoke → ok) or release latency (invoke → completion).
    pub const LATENCY: u8 = 1;
    /// Held in `shared` mode (a reader), within its lease: other readers may hold it too.
    /// Below `HOLD`, so that a column where a shared row also holds it exclusively is drawn
    /// exclusive.
    pub const SHARED: u8 = 2;
    /// Held (exclusively), within its lease.
    pub const HOLD: u8 = 3;
    /// Held in `shared` mode after its lease ran out.
    pub const SHARED_PAST_LEASE: u8 = 4;
    /// Held (exclusively) after its lease ran out.
    pub const PAST_LEASE: u8 = 5;
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
    pub(super) fn new(width: usize) -> Cells {
        Cells {
            bar: vec![bar::NONE; width],
            marks: vec![0; width],
            writes: Vec::new(),
            lease_beyond: None,
        }
    }

    pub(super) fn fill_bar(&mut self, cells: Option<(usize, usize)>, class: u8) {
        if let Some((a, b)) = cells {
            for c in &mut self.bar[a..=b] {
                *c = (*c).max(class);
            }
        }
    }

    pub(super) fn set(&mut self, cells: Option<(usize, usize)>, flag: u16) {
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
    /// Empty for the second and later marks of one anomaly (a lost update's writes).
    pub label: String,
}

/// A queue jump (an `unfair` anomaly) as drawn: an arrow at one column, from the lane of the
/// waiter that was overtaken (its acquire still pending there) to the lane of the process
/// that got the lock at that moment.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrowItem {
    /// Index into `Report::anomalies`.
    pub anomaly: usize,
    /// Plot-relative column: when the overtaker got the lock.
    pub cell: usize,
    /// The overtaken waiter's lane.
    pub from: usize,
    /// The overtaker's lane.
    pub to: usize,
    /// `p1 jumped ahead of p0`.
    pub label: String,
}

pub const MIN_ANOMALY_PX: usize = 3;
pub(super) const MIN_BAND_PX: usize = 2;

/// Everything one picture draws.
#[derive(Debug, Clone)]
pub struct Model {
    pub key: String,
    pub scale: XScale,
    pub lanes: Vec<Lane>,
    pub cells: Vec<Cells>,
    pub bands: Vec<Band>,
    pub anomalies: Vec<AnomalyItem>,
    /// Queue jumps (`unfair`), as arrows between lanes.
    pub arrows: Vec<ArrowItem>,
    /// Things the picture must say about what it merged or left out.
    pub notes: Vec<String>,
    /// Holds drawn.
    pub holds: usize,
    /// Of them, held in `shared` mode (readers).
    pub shared_holds: usize,
    /// Client processes drawn.
    pub processes: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
