//! What a workload expects of each nemesis: the anomaly kinds that must be found, and those
//! that may be. A workload file states them under `[expect]`:
//!
//! ```toml
//! [expect]
//! none = {}                                        # valid: no anomaly at all
//! kill-clients = { must = ["unavailable"] }
//! pause-clients = { must = ["overlap"], may = ["stale-write", "lost-lock"] }
//! failover = { must = ["overlap"], inside_lease = true }
//! ```
//!
//! A nemesis the file does not name is expected to leave the run valid.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::report::AnomalyKind;

/// The kinds a cell must and may show; anything else found is a surprise.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Expectation {
    /// Each of these kinds must be found at least once.
    pub must: Vec<String>,
    /// These may be found or not (faults make them likely but not certain).
    pub may: Vec<String>,
    /// At least one overlap must begin while the earlier holder's lease still ran: the lock
    /// itself failed, not just a holder that outlived its lease.
    pub inside_lease: bool,
}

impl Expectation {
    /// Kinds that are not anomaly kinds, for the workload's validation.
    pub fn unknown_kinds(&self) -> Vec<&str> {
        self.must
            .iter()
            .chain(&self.may)
            .map(String::as_str)
            .filter(|k| AnomalyKind::parse(k).is_none())
            .collect()
    }

    /// Why `found` (anomaly counts by kind) differs from the expectation, or None if it
    /// meets it.
    pub fn differs(&self, found: &BTreeMap<String, u64>) -> Option<String> {
        let missing: Vec<&str> = self
            .must
            .iter()
            .filter(|k| found.get(*k).copied().unwrap_or(0) == 0)
            .map(String::as_str)
            .collect();
        let surprising: Vec<String> = found
            .iter()
            .filter(|(k, n)| **n > 0 && !self.must.contains(k) && !self.may.contains(k))
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect();
        let mut why = Vec::new();
        if !missing.is_empty() {
            why.push(format!("expected but not found: {}", missing.join(", ")));
        }
        if !surprising.is_empty() {
            why.push(format!("not expected: {}", surprising.join(", ")));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(kinds: &[(&str, u64)]) -> BTreeMap<String, u64> {
        kinds.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    }

    #[test]
    fn an_empty_expectation_wants_a_valid_run() {
        let e = Expectation::default();
        assert_eq!(e.differs(&found(&[])), None);
        let why = e.differs(&found(&[("overlap", 2)])).expect("differs");
        assert!(why.contains("not expected: overlap ×2"), "{why}");
    }

    #[test]
    fn must_kinds_are_required_and_may_kinds_tolerated() {
        let e = Expectation {
            must: vec!["overlap".into()],
            may: vec!["stale-write".into()],
            ..Expectation::default()
        };
        assert!(e.differs(&found(&[])).expect("missing").contains("overlap"));
        assert_eq!(e.differs(&found(&[("overlap", 1)])), None);
        assert_eq!(
            e.differs(&found(&[("overlap", 1), ("stale-write", 3)])),
            None
        );
        assert!(e
            .differs(&found(&[("overlap", 1), ("lost-update", 1)]))
            .expect("surprise")
            .contains("lost-update"));
    }

    #[test]
    fn unknown_kinds_are_named() {
        let e = Expectation {
            must: vec!["overlapp".into()],
            ..Expectation::default()
        };
        assert_eq!(e.unknown_kinds(), vec!["overlapp"]);
    }
}
