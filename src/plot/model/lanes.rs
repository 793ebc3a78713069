//! The rows of a picture: a lane per process, or shared rows when there are too many.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::history::compact::ProcessId;

use super::items::Lane;
use super::source::{Source, View};

/// A process's activity on the key: its first and last moment.
#[derive(Debug, Clone, Copy)]
pub(super) struct Activity {
    pub(super) process: ProcessId,
    pub(super) first: i64,
    pub(super) last: i64,
}

/// The rows of a picture and each process's row.
///
/// One row per process, ordered by worker group, slot and process number, unless there are
/// more than `max_lanes` processes: then processes share rows. With known groups a process
/// shares the row of its slot (`p % clients`: the processes that replaced one another after
/// an `info`); without groups, processes whose activity on the key never overlaps (with two
/// pixels to spare) share a row, packed greedily in order of first activity.
pub(super) fn lanes(
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
