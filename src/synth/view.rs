//! Holds as the checker derives them, found in an event vector: where the injectors look
//! for a place to put their violation.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::history::{Event, EventType, Process};

use super::config::MS;

/// A hold as the checker derives it, found in an event vector (positions, not indices).
#[derive(Debug, Clone)]
pub(super) struct HoldView {
    pub(super) key: String,
    /// Position of the acquire ok that began it, and of every nested one.
    pub(super) oks: Vec<usize>,
    pub(super) begin_time: i64,
    pub(super) token: Option<i64>,
    pub(super) lease_ms: Option<i64>,
    /// The lease end at the hold's end (set by renews and nested acquires), if it had one.
    pub(super) lease_end: Option<i64>,
    /// When it ended (i64::MAX: still open at the end of the history).
    pub(super) end_time: i64,
    /// The release invoke that ended it, and that release's completion.
    pub(super) release: Option<(usize, Option<usize>)>,
    pub(super) killed: bool,
    /// Renew completions: (position, the lease end before it).
    pub(super) renews: Vec<(usize, Option<i64>)>,
    /// Accepted writes: (invoke position, ok position).
    pub(super) writes: Vec<(usize, usize)>,
    /// Write completions that ended `info` during the hold.
    pub(super) info_writes: usize,
}

impl HoldView {
    pub(super) fn begin(&self) -> usize {
        self.oks[0]
    }
}

pub(super) struct View {
    /// Every hold, ordered by its beginning.
    pub(super) holds: Vec<HoldView>,
    pub(super) max_pid: u64,
    /// Processes that only ever read (the final reader).
    pub(super) readers: HashSet<u64>,
}

pub(super) fn payload_i64(event: &Event, field: &str) -> Option<i64> {
    event.value.as_ref()?.get(field)?.as_i64()
}

pub(super) fn time_order(events: &[Event]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..events.len()).collect();
    order.sort_by_key(|&i| (events[i].time, events[i].index, i));
    order
}

pub(super) fn view(events: &[Event]) -> View {
    let mut holds: Vec<HoldView> = Vec::new();
    let mut open: HashMap<(u64, String), (usize, u32)> = HashMap::new();
    // Per process: the pending invoke (position, time), and the hold it acts in.
    let mut pending: HashMap<u64, (usize, i64, Option<usize>)> = HashMap::new();
    let mut max_pid = 0;
    let mut acquirers = HashSet::new();
    let mut readers = HashSet::new();
    for pos in time_order(events) {
        let e = &events[pos];
        let pid = match e.process {
            Process::Nemesis => {
                let listed: Vec<u64> = e
                    .value
                    .as_ref()
                    .and_then(|v| v.get("processes"))
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_u64).collect())
                    .unwrap_or_default();
                for &p in &listed {
                    max_pid = max_pid.max(p);
                }
                if e.f == "kill" {
                    open.retain(|(p, _), (h, _)| {
                        if listed.contains(p) {
                            holds[*h].end_time = e.time;
                            holds[*h].killed = true;
                            false
                        } else {
                            true
                        }
                    });
                }
                continue;
            }
            Process::Client(pid) => pid,
        };
        max_pid = max_pid.max(pid);
        let key = e.key.clone().unwrap_or_default();
        let slot = (pid, key.clone());
        if e.ty == EventType::Invoke {
            let mut hold = open.get(&slot).map(|&(h, _)| h);
            match e.f.as_str() {
                "acquire" => {
                    acquirers.insert(pid);
                }
                "read" => {
                    readers.insert(pid);
                }
                "release" => {
                    if let Some((h, count)) = open.get_mut(&slot) {
                        *count -= 1;
                        if *count == 0 {
                            let h = *h;
                            holds[h].end_time = e.time;
                            holds[h].release = Some((pos, None));
                            open.remove(&slot);
                        } else {
                            hold = None;
                        }
                    }
                }
                _ => {}
            }
            pending.insert(pid, (pos, e.time, hold));
            continue;
        }
        let Some((invoke, invoke_time, hold)) = pending.remove(&pid) else {
            continue;
        };
        match (e.f.as_str(), e.ty) {
            ("acquire", EventType::Ok) => {
                if let Some((h, count)) = open.get_mut(&slot) {
                    *count += 1;
                    holds[*h].oks.push(pos);
                    // A nested acquire sets the lease as a renew does (null: no expiry).
                    holds[*h].lease_end = payload_i64(e, "lease_ms").map(|l| invoke_time + l * MS);
                } else {
                    let lease_ms = payload_i64(e, "lease_ms");
                    open.insert(slot, (holds.len(), 1));
                    holds.push(HoldView {
                        key,
                        oks: vec![pos],
                        begin_time: e.time,
                        token: payload_i64(e, "token"),
                        lease_ms,
                        lease_end: lease_ms.map(|l| invoke_time + l * MS),
                        end_time: i64::MAX,
                        release: None,
                        killed: false,
                        renews: Vec::new(),
                        writes: Vec::new(),
                        info_writes: 0,
                    });
                }
            }
            ("release", _) => {
                if let Some(h) = hold {
                    if let Some((r, None)) = holds[h].release {
                        holds[h].release = Some((r, Some(pos)));
                    }
                }
            }
            ("renew", ty) => {
                if let Some(h) = hold {
                    let before = holds[h].lease_end;
                    holds[h].renews.push((pos, before));
                    if ty == EventType::Ok {
                        if let Some(l) = payload_i64(e, "lease_ms") {
                            holds[h].lease_end = Some(invoke_time + l * MS);
                        }
                    }
                }
            }
            ("write", EventType::Ok) => {
                if let Some(h) = hold {
                    holds[h].writes.push((invoke, pos));
                }
            }
            ("write", EventType::Info) => {
                if let Some(h) = hold {
                    holds[h].info_writes += 1;
                }
            }
            _ => {}
        }
    }
    holds.sort_by_key(|h| (h.begin_time, h.begin()));
    let readers = readers.difference(&acquirers).copied().collect();
    View {
        holds,
        max_pid,
        readers,
    }
}
