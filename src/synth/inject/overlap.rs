//! A second holder inside another's hold: `overlap`, and `stale-write` (a write accepted from
//! a holder that a later hold has overtaken).

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::history::{Event, EventType};
use crate::report::AnomalyKind;
use crate::synth::config::{MS, US};
use crate::synth::rng::Rng;
use crate::synth::view::view;

use super::edit::{client, merge, new_position, pick};
use super::injection::{done, Injection};

/// A second process acquires a key inside another's hold (and its lease) and releases it
/// before that hold ends: one overlap, inside the lease. Names both acquire oks.
pub fn inject_overlap(events: &mut Vec<Event>, seed: u64) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let v = view(events);
    let candidates: Vec<usize> = (0..v.holds.len())
        .filter(|&h| {
            let hold = &v.holds[h];
            hold.release.is_some() && hold.end_time - hold.begin_time >= 10 * US
        })
        .collect();
    let hold = &v.holds[pick(&mut rng, &candidates)?];
    let mut span = hold.end_time - hold.begin_time;
    if let Some(lease) = hold.lease_ms {
        span = span.min(lease * MS / 2);
    }
    let q = v.max_pid + 1;
    let b = hold.begin_time;
    let key = hold.key.clone();
    let new = vec![
        client(b + span / 5, q, EventType::Invoke, "acquire", &key),
        client(b + 2 * span / 5, q, EventType::Ok, "acquire", &key)
            .with_value(json!({ "token": null, "lease_ms": hold.lease_ms })),
        client(b + 3 * span / 5, q, EventType::Invoke, "release", &key),
        client(b + 4 * span / 5, q, EventType::Ok, "release", &key),
    ];
    let begin = hold.begin();
    let positions = merge(events, new);
    let begin = new_position(begin, &positions);
    done(
        AnomalyKind::Overlap,
        &key,
        vec![begin as u64, positions[1] as u64],
    )
}

/// A process takes the lock just before a later hold H′ begins and, after H′'s first write
/// was accepted, writes the same value and is accepted too: a stale write (implying the
/// overlap of the two holds). Names the stale write's ok and H′'s write ok.
pub fn inject_stale_write(events: &mut Vec<Event>, seed: u64) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let v = view(events);
    let mut candidates = Vec::new();
    let mut last_end: HashMap<&str, i64> = HashMap::new();
    for (h, hold) in v.holds.iter().enumerate() {
        let prev_end = last_end
            .insert(hold.key.as_str(), hold.end_time)
            .unwrap_or(hold.begin_time - 2 * MS);
        if hold.release.is_none() || hold.writes.is_empty() {
            continue;
        }
        let write_ok = events[hold.writes[0].1].time;
        if hold.begin_time - prev_end >= 3 && hold.end_time - write_ok >= 8 {
            candidates.push((h, prev_end));
        }
    }
    let (h, prev_end) = pick(&mut rng, &candidates)?;
    let hold = &v.holds[h];
    let key = hold.key.clone();
    let (_, later_ok) = hold.writes[0];
    let w = events[later_ok].time;
    let value = events[later_ok]
        .value
        .as_ref()
        .and_then(|p| p.get("value"))
        .cloned()
        .unwrap_or(Value::Null);
    let gap = (hold.end_time - w).min(MS);
    let before = hold.begin_time - prev_end;
    let r = v.max_pid + 1;
    let payload = json!({ "token": null, "value": value });
    // The grant comes back within a millisecond, well inside its lease: a correct grant.
    let granted = prev_end + 2 * before / 3;
    let new = vec![
        client(
            granted - (before / 3).min(MS),
            r,
            EventType::Invoke,
            "acquire",
            &key,
        ),
        client(granted, r, EventType::Ok, "acquire", &key)
            .with_value(json!({ "token": null, "lease_ms": hold.lease_ms })),
        client(w + gap / 4, r, EventType::Invoke, "write", &key).with_value(payload.clone()),
        client(w + gap / 2, r, EventType::Ok, "write", &key).with_value(payload),
        client(w + 3 * gap / 4, r, EventType::Invoke, "release", &key),
        client(w + 7 * gap / 8, r, EventType::Ok, "release", &key),
    ];
    let positions = merge(events, new);
    let later = new_position(later_ok, &positions);
    done(
        AnomalyKind::StaleWrite,
        &key,
        vec![positions[3] as u64, later as u64],
    )
}
