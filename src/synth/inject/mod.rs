//! Injecting exactly one violation into a history of a correct lock.

mod lease;
mod liveness;
mod lost_update;
mod overlap;
mod tokens;

pub use lease::{inject_bad_lease, inject_lost_lock};
pub use liveness::{inject_starvation, inject_unavailable, inject_unfair};
pub use lost_update::inject_lost_update;
pub use overlap::{inject_overlap, inject_stale_write};
pub use tokens::{inject_duplicate_token, inject_token_order};

use crate::history::{Event, EventType};

use super::rng::Rng;

/// The anomaly kinds the injectors produce: every kind the checker reports.
pub const INJECTABLE: [&str; 10] = crate::report::ANOMALY_KINDS;

/// What an injector did.
#[derive(Debug, Clone, PartialEq)]
pub struct Injection {
    pub kind: &'static str,
    pub key: String,
    /// The `index` of every injected event the anomaly must name, ascending (indices after
    /// the history was renumbered 0, 1, 2, ...).
    pub indices: Vec<u64>,
    /// Other kinds this violation logically implies (they may be reported too).
    pub implies: &'static [&'static str],
}

/// Other anomaly kinds that an injected violation of `kind` logically implies:
/// - a stale write is made under a hold that is still going when the later hold's write is
///   accepted, so the two holds overlap; and it overwrites the register, so one acknowledged
///   increment may be missing from the final read (`lost-update`);
/// - a duplicate token on two holds one after the other is also a token that is not lower
///   than an earlier hold's (`token-order`).
pub fn implied_by(kind: &str) -> &'static [&'static str] {
    match kind {
        "stale-write" => &["overlap", "lost-update"],
        "duplicate-token" => &["token-order"],
        _ => &[],
    }
}

/// Injects one violation of `kind` (one of `INJECTABLE`); `None` if the history has no
/// place for it (e.g. no tokens for `token-order`).
pub fn inject(
    kind: &str,
    events: &mut Vec<Event>,
    seed: u64,
    liveness_bound_ns: i64,
    starvation_bound_ns: i64,
) -> Option<Injection> {
    match kind {
        "overlap" => inject_overlap(events, seed),
        "bad-lease" => inject_bad_lease(events, seed),
        "lost-lock" => inject_lost_lock(events, seed),
        "stale-write" => inject_stale_write(events, seed),
        "token-order" => inject_token_order(events, seed),
        "duplicate-token" => inject_duplicate_token(events, seed),
        "starvation" => inject_starvation(events, seed, starvation_bound_ns),
        "unavailable" => inject_unavailable(events, seed, liveness_bound_ns),
        "unfair" => inject_unfair(events, seed),
        "lost-update" => inject_lost_update(events, seed),
        _ => None,
    }
}

/// Renumbers `events` 0, 1, 2, ... in vector order.
fn renumber(events: &mut [Event]) {
    for (i, e) in events.iter_mut().enumerate() {
        e.index = i as u64;
    }
}

/// Merges `new` (in time order) into `events`: each goes just before the first event later
/// than it. Returns the positions the new events got, in their order.
fn merge(events: &mut Vec<Event>, new: Vec<Event>) -> Vec<usize> {
    let old = std::mem::take(events);
    events.reserve(old.len() + new.len());
    let mut positions = Vec::with_capacity(new.len());
    let mut new = new.into_iter().peekable();
    for e in old {
        while let Some(n) = new.next_if(|n| n.time < e.time) {
            positions.push(events.len());
            events.push(n);
        }
        events.push(e);
    }
    for n in new {
        positions.push(events.len());
        events.push(n);
    }
    renumber(events);
    positions
}

fn client(time: i64, pid: u64, ty: EventType, f: &str, key: &str) -> Event {
    Event::client(0, time, pid, ty, f, key)
}

fn done(kind: &'static str, key: &str, mut indices: Vec<u64>) -> Option<Injection> {
    indices.sort_unstable();
    indices.dedup();
    Some(Injection {
        kind,
        key: key.to_string(),
        indices,
        implies: implied_by(kind),
    })
}

fn pick<T: Copy>(rng: &mut Rng, items: &[T]) -> Option<T> {
    if items.is_empty() {
        None
    } else {
        Some(items[rng.below(items.len() as u64) as usize])
    }
}

/// Where an event that was at `old` before `merge` is now, given the new events' positions.
fn new_position(old: usize, inserted: &[usize]) -> usize {
    // Inserted positions are ascending; the event moved by the number inserted before it.
    let mut pos = old;
    for &p in inserted {
        if p <= pos {
            pos += 1;
        } else {
            break;
        }
    }
    pos
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::reader::read_jsonl;
    use crate::synth::tests::{busy, bytes};
    use crate::synth::{generate, MS};

    #[test]
    fn injections_leave_a_readable_history() {
        for kind in INJECTABLE {
            for seed in 0..2 {
                let mut events = generate(&busy(seed));
                let injection = inject(kind, &mut events, seed, 1_000 * MS, 10_000 * MS)
                    .unwrap_or_else(|| panic!("{kind}: no place to inject"));
                assert_eq!(injection.kind, kind);
                assert!(!injection.indices.is_empty());
                for (i, e) in events.iter().enumerate() {
                    assert_eq!(e.index, i as u64);
                }
                read_jsonl(bytes(&events).as_slice(), "synth", None)
                    .unwrap_or_else(|e| panic!("{kind} seed {seed}: {e}"));
            }
        }
    }
}
