//! The guarded register: `lost-update`.

use std::collections::HashMap;

use serde_json::json;

use crate::history::{Event, EventType, Process};
use crate::report::AnomalyKind;
use crate::synth::rng::Rng;
use crate::synth::view::{payload_i64, time_order, view, HoldView};

use super::edit::renumber;
use super::injection::{done, Injection};

/// The final read of a key (whose increments were all acknowledged) reports one less than
/// it should: the last acknowledged increment is missing. Names the final read (a counting
/// check cannot tell which increment was lost).
pub fn inject_lost_update(events: &mut [Event], seed: u64) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let v = view(events);
    let order = time_order(events);
    // The final read of each key, by the process that only reads.
    let mut finals: HashMap<String, usize> = HashMap::new();
    for &pos in &order {
        let e = &events[pos];
        if let Process::Client(pid) = e.process {
            if e.f == "read" && e.ty == EventType::Ok && v.readers.contains(&pid) {
                finals.insert(e.key.clone().unwrap_or_default(), pos);
            }
        }
    }
    let mut candidates: Vec<(usize, String)> = Vec::new();
    let mut keys: Vec<&String> = finals.keys().collect();
    keys.sort();
    for key in keys {
        let read = finals[key];
        let Some(value) = payload_i64(&events[read], "value") else {
            continue;
        };
        let held: Vec<&HoldView> = v.holds.iter().filter(|h| &h.key == key).collect();
        if value < 1 || held.iter().any(|h| h.info_writes > 0) {
            continue;
        }
        let write = held
            .iter()
            .flat_map(|h| h.writes.iter())
            .map(|&(_, ok)| ok)
            .find(|&ok| payload_i64(&events[ok], "value") == Some(value));
        if write.is_some() {
            candidates.push((read, key.clone()));
        }
    }
    if candidates.is_empty() {
        return None;
    }
    let (read, key) = candidates[rng.below(candidates.len() as u64) as usize].clone();
    let value = payload_i64(&events[read], "value")?;
    events[read].value = Some(json!({ "value": value - 1 }));
    renumber(events);
    done(AnomalyKind::LostUpdate, &key, vec![read as u64])
}
