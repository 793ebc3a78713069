//! Editing an event vector: new events, merged in time order, renumbered.

use crate::history::{Event, EventType};
use crate::synth::rng::Rng;

/// Renumbers `events` 0, 1, 2, ... in vector order.
pub(super) fn renumber(events: &mut [Event]) {
    for (i, e) in events.iter_mut().enumerate() {
        e.index = i as u64;
    }
}

/// Merges `new` (in time order) into `events`: each goes just before the first event later
/// than it. Returns the positions the new events got, in their order.
pub(super) fn merge(events: &mut Vec<Event>, new: Vec<Event>) -> Vec<usize> {
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

pub(super) fn client(time: i64, pid: u64, ty: EventType, f: &str, key: &str) -> Event {
    Event::client(0, time, pid, ty, f, key)
}

pub(super) fn pick<T: Copy>(rng: &mut Rng, items: &[T]) -> Option<T> {
    if items.is_empty() {
        None
    } else {
        Some(items[rng.below(items.len() as u64) as usize])
    }
}

/// Where an event that was at `old` before `merge` is now, given the new events' positions.
pub(super) fn new_position(old: usize, inserted: &[usize]) -> usize {
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
