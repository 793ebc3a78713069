//! What an injector did, and what its violation implies.

use crate::report::AnomalyKind;

/// The anomaly kinds the injectors produce: every kind the checker reports.
pub const INJECTABLE: [AnomalyKind; 10] = AnomalyKind::ALL;

/// What an injector did.
#[derive(Debug, Clone, PartialEq)]
pub struct Injection {
    pub kind: AnomalyKind,
    pub key: String,
    /// The `index` of every injected event the anomaly must name, ascending (indices after
    /// the history was renumbered 0, 1, 2, ...).
    pub indices: Vec<u64>,
    /// Other kinds this violation logically implies (they may be reported too).
    pub implies: &'static [AnomalyKind],
}

/// Other anomaly kinds that an injected violation of `kind` logically implies:
/// - a stale write is made under a hold that is still going when the later hold's write is
///   accepted, so the two holds overlap; and it overwrites the register, so one acknowledged
///   increment may be missing from the final read (`lost-update`);
/// - a duplicate token on two holds one after the other is also a token that is not lower
///   than an earlier hold's (`token-order`).
pub fn implied_by(kind: AnomalyKind) -> &'static [AnomalyKind] {
    match kind {
        AnomalyKind::StaleWrite => &[AnomalyKind::Overlap, AnomalyKind::LostUpdate],
        AnomalyKind::DuplicateToken => &[AnomalyKind::TokenOrder],
        _ => &[],
    }
}

pub(super) fn done(kind: AnomalyKind, key: &str, mut indices: Vec<u64>) -> Option<Injection> {
    indices.sort_unstable();
    indices.dedup();
    Some(Injection {
        kind,
        key: key.to_string(),
        indices,
        implies: implied_by(kind),
    })
}
