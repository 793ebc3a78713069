//! Injecting exactly one violation into a history of a correct lock.

mod edit;
mod injection;
mod lease;
mod liveness;
mod lost_update;
mod overlap;
mod tokens;

pub use injection::{implied_by, Injection, INJECTABLE};
pub use lease::{inject_bad_lease, inject_lost_lock};
pub use liveness::{inject_starvation, inject_unavailable, inject_unfair};
pub use lost_update::inject_lost_update;
pub use overlap::{inject_overlap, inject_stale_write};
pub use tokens::{inject_duplicate_token, inject_token_order};

use crate::history::Event;
use crate::report::AnomalyKind;

/// Injects one violation of `kind`; `None` if the history has no place for it (e.g. no
/// tokens for `token-order`).
pub fn inject(
    kind: AnomalyKind,
    events: &mut Vec<Event>,
    seed: u64,
    liveness_bound_ns: i64,
    starvation_bound_ns: i64,
) -> Option<Injection> {
    match kind {
        AnomalyKind::Overlap => inject_overlap(events, seed),
        AnomalyKind::BadLease => inject_bad_lease(events, seed),
        AnomalyKind::LostLock => inject_lost_lock(events, seed),
        AnomalyKind::StaleWrite => inject_stale_write(events, seed),
        AnomalyKind::TokenOrder => inject_token_order(events, seed),
        AnomalyKind::DuplicateToken => inject_duplicate_token(events, seed),
        AnomalyKind::Starvation => inject_starvation(events, seed, starvation_bound_ns),
        AnomalyKind::Unavailable => inject_unavailable(events, seed, liveness_bound_ns),
        AnomalyKind::Unfair => inject_unfair(events, seed),
        AnomalyKind::LostUpdate => inject_lost_update(events, seed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::reader::read_jsonl;
    use crate::synth::config::MS;
    use crate::synth::fixtures::busy;
    use crate::synth::generate::{generate, write_jsonl};

    fn bytes(events: &[Event]) -> Vec<u8> {
        let mut out = Vec::new();
        write_jsonl(events, &mut out).unwrap();
        out
    }

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
