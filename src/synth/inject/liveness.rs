//! A section appended after all lock activity: `unavailable`, `starvation`, `unfair`.

use serde_json::json;

use crate::history::{Event, EventType, Process};
use crate::report::AnomalyKind;
use crate::synth::config::{MS, US};
use crate::synth::record::HELD_REASON;
use crate::synth::rng::Rng;
use crate::synth::view::view;

use super::edit::{client, merge, pick, renumber};
use super::injection::{done, Injection};

/// Appends a section after all lock activity: returns (the section's start, the key, its
/// longest lease in ms, whether it is fenced and its highest token) and leaves the final
/// reads to be moved after the section.
struct Tail {
    start: i64,
    key: String,
    lease_ms: Option<i64>,
    max_token: Option<i64>,
    next_pid: u64,
    finals: Vec<Event>,
}

fn tail(events: &mut Vec<Event>, rng: &mut Rng) -> Option<Tail> {
    let v = view(events);
    let mut keys: Vec<&str> = v.holds.iter().map(|h| h.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    let key = pick(rng, &keys)?.to_string();
    let lease_ms = v
        .holds
        .iter()
        .filter(|h| h.key == key)
        .filter_map(|h| h.lease_ms)
        .max();
    let max_token = v
        .holds
        .iter()
        .filter(|h| h.key == key)
        .filter_map(|h| h.token)
        .max();
    let longest = v.holds.iter().filter_map(|h| h.lease_ms).max().unwrap_or(0);
    let is_reader = |e: &Event| matches!(e.process, Process::Client(p) if v.readers.contains(&p));
    let end = events
        .iter()
        .filter(|e| !is_reader(e))
        .map(|e| e.time)
        .max()
        .unwrap_or(0);
    let mut finals = Vec::new();
    let mut rest = Vec::with_capacity(events.len());
    for e in events.drain(..) {
        if is_reader(&e) {
            finals.push(e);
        } else {
            rest.push(e);
        }
    }
    *events = rest;
    renumber(events);
    Some(Tail {
        start: end + longest * MS + 10 * MS,
        key,
        lease_ms,
        max_token,
        next_pid: v.max_pid + 1,
        finals,
    })
}

/// Puts the section and then the final reads (moved after it) into `events`; returns the
/// section's positions.
fn close_tail(events: &mut Vec<Event>, section: Vec<Event>, mut finals: Vec<Event>) -> Vec<usize> {
    let end = section.iter().map(|e| e.time).max().unwrap_or(0) + 10 * MS;
    if let Some(first) = finals.iter().map(|e| e.time).min() {
        if first < end {
            for e in &mut finals {
                e.time += end - first;
            }
        }
    }
    let n = section.len();
    let mut all = section;
    finals.sort_by_key(|e| (e.time, e.index));
    all.extend(finals);
    let positions = merge(events, all);
    positions[..n].to_vec()
}

/// After all lock activity, a new process fails to acquire a free key twice, more than the
/// liveness bound apart: unavailable. Names both failed completions.
pub fn inject_unavailable(
    events: &mut Vec<Event>,
    seed: u64,
    liveness_bound_ns: i64,
) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let t = tail(events, &mut rng)?;
    // An indeterminate acquire on a key that never showed a lease may hold it for good
    // (docs/src/reference/history.md gives it no end), so no later stretch of that key is certainly free.
    let uncertain = events.iter().any(|e| {
        e.f == "acquire" && e.ty == EventType::Info && e.key.as_deref() == Some(t.key.as_str())
    });
    if t.lease_ms.is_none() && uncertain {
        return None;
    }
    let u = t.next_pid;
    let key = t.key.clone();
    let held = json!({ "reason": "lock held (not yet expired)" });
    let second = t.start + liveness_bound_ns + 200 * MS;
    let section = vec![
        client(t.start, u, EventType::Invoke, "acquire", &key),
        client(t.start + 100 * US, u, EventType::Fail, "acquire", &key).with_value(held.clone()),
        client(second, u, EventType::Invoke, "acquire", &key),
        client(second + 100 * US, u, EventType::Fail, "acquire", &key).with_value(held),
    ];
    let positions = close_tail(events, section, t.finals);
    done(
        AnomalyKind::Unavailable,
        &key,
        vec![positions[1] as u64, positions[3] as u64],
    )
}

/// After all lock activity, one new process takes a key again and again while another
/// tries it (always while it is held) for longer than the starvation bound. Names the
/// starving process's first attempt (its invoke: the trying begins there) and its last
/// failure.
pub fn inject_starvation(
    events: &mut Vec<Event>,
    seed: u64,
    starvation_bound_ns: i64,
) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let t = tail(events, &mut rng)?;
    let (holder, starved) = (t.next_pid, t.next_pid + 1);
    let key = t.key.clone();
    let hold = match t.lease_ms {
        Some(lease) => (lease * MS / 2).min(200 * MS),
        None => 200 * MS,
    };
    let cycle = hold + 10 * MS;
    let cycles = (starvation_bound_ns + 500 * MS) / cycle + 2;
    let mut section = Vec::with_capacity(cycles as usize * 6);
    let mut fails = Vec::new();
    let mut token = t.max_token;
    for i in 0..cycles {
        let c = t.start + i * cycle;
        token = token.map(|x| x + 1);
        section.push(client(c, holder, EventType::Invoke, "acquire", &key));
        section.push(
            client(c + 100 * US, holder, EventType::Ok, "acquire", &key)
                .with_value(json!({ "token": token, "lease_ms": t.lease_ms })),
        );
        section.push(client(
            c + hold / 2,
            starved,
            EventType::Invoke,
            "acquire",
            &key,
        ));
        fails.push(section.len());
        section.push(
            client(
                c + hold / 2 + 100 * US,
                starved,
                EventType::Fail,
                "acquire",
                &key,
            )
            .with_value(json!({ "reason": HELD_REASON })),
        );
        section.push(client(c + hold, holder, EventType::Invoke, "release", &key));
        section.push(client(
            c + hold + 100 * US,
            holder,
            EventType::Ok,
            "release",
            &key,
        ));
    }
    let positions = close_tail(events, section, t.finals);
    let first = positions[fails[0] - 1];
    let last = positions[*fails.last()?];
    done(
        AnomalyKind::Starvation,
        &key,
        vec![first as u64, last as u64],
    )
}

/// Two fresh processes ask for the key as a fair lock, 15 ms apart (more than the 10 ms
/// tolerance); the later one gets it first, holds it 1 ms, and only then the earlier one.
pub fn inject_unfair(events: &mut Vec<Event>, seed: u64) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let t = tail(events, &mut rng)?;
    let (waiting, jumper) = (t.next_pid, t.next_pid + 1);
    let key = t.key.clone();
    // The waiting acquire returns 17.2 ms after its invoke: a shorter lease would be dead.
    if t.lease_ms.is_some_and(|l| l <= 18) {
        return None;
    }
    let fair = json!({ "fair": true });
    let grant = |token: Option<i64>| json!({ "token": token, "lease_ms": t.lease_ms });
    let c = t.start;
    let section = vec![
        client(c, waiting, EventType::Invoke, "acquire", &key).with_value(fair.clone()),
        client(c + 15 * MS, jumper, EventType::Invoke, "acquire", &key).with_value(fair),
        client(c + 16 * MS, jumper, EventType::Ok, "acquire", &key)
            .with_value(grant(t.max_token.map(|x| x + 1))),
        client(c + 17 * MS, jumper, EventType::Invoke, "release", &key),
        client(
            c + 17 * MS + 100 * US,
            jumper,
            EventType::Ok,
            "release",
            &key,
        ),
        client(
            c + 17 * MS + 200 * US,
            waiting,
            EventType::Ok,
            "acquire",
            &key,
        )
        .with_value(grant(t.max_token.map(|x| x + 2))),
        client(c + 18 * MS, waiting, EventType::Invoke, "release", &key),
        client(
            c + 18 * MS + 100 * US,
            waiting,
            EventType::Ok,
            "release",
            &key,
        ),
    ];
    let positions = close_tail(events, section, t.finals);
    let indices = [0, 1, 2, 5].map(|i| positions[i] as u64).to_vec();
    done(AnomalyKind::Unfair, &key, indices)
}
