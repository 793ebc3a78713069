//! The nemesis faults as spans of run time, with the client processes they hit.

use std::collections::HashMap;

use crate::history::compact::ProcessId;
use crate::history::{fault_bands, History};

use super::labels::shorten;

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

/// The faults of `history` as spans, paired as the other pictures pair them
/// (`fault_bands`: `pause` … `resume`, `partition` … `heal`, `kill` … `restart`, the
/// rest instants), with the client processes they hit.
pub fn faults(history: &History) -> Vec<Fault> {
    let by_index: HashMap<u32, &crate::history::compact::Fault> =
        history.faults.iter().map(|f| (f.index, f)).collect();
    fault_bands(history)
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
