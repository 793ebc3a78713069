//! Collects anomalies as the checks find them: every one is counted, the first
//! `limit` of each kind are kept with their explanation (built only if kept).

use std::collections::BTreeMap;

use crate::history::compact::ProcessId;
use crate::history::History;
use crate::report::{Anomaly, AnomalyKind, KindCounts};

use super::holds::{Hold, Holds};

pub struct Findings {
    limit: usize,
    anomalies: Vec<Anomaly>,
    counts: KindCounts,
}

impl Findings {
    pub fn new(limit: usize) -> Self {
        Findings {
            limit,
            anomalies: Vec::new(),
            counts: BTreeMap::new(),
        }
    }

    /// Counts one anomaly of `kind`; `make` builds it if it is among the first `limit`.
    pub fn add(&mut self, kind: AnomalyKind, make: impl FnOnce() -> Anomaly) {
        let count = self.counts.entry(kind).or_insert(0);
        *count += 1;
        if *count as usize <= self.limit {
            let mut anomaly = make();
            debug_assert_eq!(anomaly.kind, kind);
            anomaly.indices.sort_unstable();
            anomaly.indices.dedup();
            self.anomalies.push(anomaly);
        }
    }

    /// Adds what `later` found, as if its checks had run after these: every anomaly is
    /// counted, and of each kind only as many listed as the limit still leaves room for.
    pub fn append(&mut self, later: Findings) {
        let limit = self.limit as u64;
        let mut listed: KindCounts = (self.counts.iter())
            .map(|(&kind, &n)| (kind, n.min(limit)))
            .collect();
        for anomaly in later.anomalies {
            let n = listed.entry(anomaly.kind).or_insert(0);
            if *n < limit {
                *n += 1;
                self.anomalies.push(anomaly);
            }
        }
        for (kind, n) in later.counts {
            *self.counts.entry(kind).or_insert(0) += n;
        }
    }

    pub fn into_parts(self) -> (Vec<Anomaly>, KindCounts) {
        (self.anomalies, self.counts)
    }
}

/// Names things in explanations the way the history does.
pub struct Names<'a> {
    pub history: &'a History,
    pub holds: &'a Holds,
}

impl Names<'_> {
    pub fn process(&self, p: ProcessId) -> u64 {
        self.history.process_number(p)
    }

    pub fn key(&self, hold: &Hold) -> String {
        self.history.key_name(hold.key).to_string()
    }

    /// "process 3 (acquired at 2.100s, event 4, token 17)"
    pub fn hold(&self, hold: &Hold) -> String {
        let token = hold
            .token
            .map(|t| format!(", token {t}"))
            .unwrap_or_default();
        format!(
            "process {} (acquired at {}, event {}{token})",
            self.process(hold.process),
            crate::units::fmt_time(hold.begin),
            hold.begin_index
        )
    }

    /// "until it released at 3.000s (event 9)" and the like.
    pub fn hold_end(&self, hold: &Hold) -> String {
        use super::holds::HoldEnd;
        let at = crate::units::fmt_time(self.holds.shown_end(hold));
        match (hold.end_cause, hold.end_index) {
            (HoldEnd::Released, Some(i)) => format!("until its release at {at} (event {i})"),
            (HoldEnd::Killed, Some(i)) => format!("until it was killed at {at} (event {i})"),
            _ => "until the end of the history".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Findings;
    use crate::report::{Anomaly, AnomalyKind};

    fn anomaly(kind: AnomalyKind, n: usize) -> Anomaly {
        Anomaly {
            kind,
            key: "k".into(),
            processes: vec![],
            indices: vec![n as u64],
            explanation: format!("{kind} number {n}"),
            start: n as i64,
            end: n as i64,
            lease_expired: None,
            tokens: vec![],
            cycle: vec![],
        }
    }

    /// Findings split at any point and appended are what one list finds: the same listed,
    /// in the same order, and the same counts.
    #[test]
    fn appending_is_finding_in_one_list() {
        use AnomalyKind::{LostLock, Overlap, Unfair};
        let kinds = [Overlap, Overlap, Unfair, Overlap, Unfair, Unfair, LostLock];
        for limit in 0..4 {
            let mut whole = Findings::new(limit);
            for (n, &kind) in kinds.iter().enumerate() {
                whole.add(kind, || anomaly(kind, n));
            }
            let whole = whole.into_parts();
            for split in 0..=kinds.len() {
                let (mut first, mut second) = (Findings::new(limit), Findings::new(limit));
                for (n, &kind) in kinds.iter().enumerate() {
                    let part = if n < split { &mut first } else { &mut second };
                    part.add(kind, || anomaly(kind, n));
                }
                first.append(second);
                assert_eq!(first.into_parts(), whole, "limit {limit}, split at {split}");
            }
        }
    }
}
