//! What the pictures of one history share, and what one picture covers.

use std::collections::HashMap;

use crate::checker::holds::Holds;
use crate::history::compact::{KeyId, ProcessId, NEMESIS};
use crate::history::History;
use crate::plot::groups::ProcessGroups;
use crate::report::Report;

use super::faults::{faults, Fault};
use super::scale::XScale;

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
    /// The process of each event, by its index (`NEMESIS` for none).
    pub index_process: Vec<ProcessId>,
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
        let mut index_process = Vec::new();
        if !report.anomalies.is_empty() {
            index_time = vec![i64::MIN; history.ops.len()];
            index_process = vec![NEMESIS; history.ops.len()];
        }
        for (i, op) in history.ops.iter().enumerate() {
            if let Some(slot) = index_time.get_mut(op.index as usize) {
                *slot = op.time;
                index_process[op.index as usize] = op.process;
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
            index_process,
        }
    }

    /// The time of the event with index `index`, if there is one.
    pub fn time_of(&self, index: u64) -> Option<i64> {
        self.index_time
            .get(index as usize)
            .copied()
            .filter(|&t| t != i64::MIN)
    }

    /// The client process of the event with index `index`, if it has one.
    pub fn process_of(&self, index: u64) -> Option<ProcessId> {
        self.index_process
            .get(index as usize)
            .copied()
            .filter(|&p| p != NEMESIS)
    }

    pub(super) fn key_id(&self, key: &str) -> Option<KeyId> {
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
