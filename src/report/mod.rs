//! The checker's verdict as plain data: `report.json` and the human
//! summary printed by `lockaudit check`.

pub mod episodes;
mod kind;
mod per_key;
mod summary;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use episodes::{episodes, Class, Episode};
#[cfg(test)]
pub use kind::{counted, named};
pub use kind::{AnomalyKind, KindCounts, ANOMALY_KINDS};
pub use per_key::PerKey;
pub use summary::render_summary;

/// One thing that went wrong, with the events that show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Anomaly {
    pub kind: AnomalyKind,
    pub key: String,
    /// The client processes involved, as numbered in the history.
    pub processes: Vec<u64>,
    /// The `index` of every event involved, ascending.
    pub indices: Vec<u64>,
    /// One sentence a person can follow.
    pub explanation: String,
    /// Where on the run's clock it happened, in ns: what a plot shades.
    pub start: i64,
    pub end: i64,
    /// overlap: whether the earlier holder's lease had already run out when it began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expired: Option<bool>,
    /// Fencing tokens involved, where the implementation issued them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tokens: Vec<i64>,
    /// stale-write / token-order: the cycle in the precedence graph, step by step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cycle: Vec<String>,
}

/// One check's verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    pub valid: bool,
    /// Anomalies found, by kind (all of them, including any left out of `anomalies`).
    pub counts: KindCounts,
    /// Figures particular to the check.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub figures: BTreeMap<String, serde_json::Value>,
}

/// Per-key liveness and usage figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KeyStats {
    pub acquisitions: u64,
    pub failed_attempts: u64,
    pub indeterminate_attempts: u64,
    /// Time from a client's first attempt to its acquisition, in ms.
    pub wait_ms: Percentiles,
    /// `wait_ms` split by the mode of the acquire that ended the wait: `exclusive` (also
    /// acquires without a mode) and `shared`; a mode with no acquisition is left out.
    #[serde(default, skip_serializing_if = "WaitsByMode::is_empty")]
    pub wait_ms_by_mode: WaitsByMode,
    /// Grants that jumped the queue: a first acquisition whose wait began more than the
    /// fairness tolerance after another's that ended in a later grant (any acquires, fair or
    /// not; see checker/fairness.rs for what a wait is).
    #[serde(default)]
    pub queue_jumps: u64,
    /// Of `queue_jumps`, those of a fair-marked acquire over a fair-marked one: the key's
    /// `unfair` count. Only for a key with acquires marked `fair`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_jumps_fair: Option<u64>,
    /// Jain's fairness index of acquisitions over the processes that tried: 1 is perfectly
    /// even, 1/n is one process getting everything.
    pub fairness: f64,
    pub holds: u64,
    pub holds_outliving_lease: u64,
    /// Failed renews or releases after the lease had run out (expected, not anomalies).
    pub expected_losses: u64,
    pub longest_free_ms: f64,
}

/// A key's waits by the mode of the acquire that ended them, written as a JSON object with
/// a member per mode that had an acquisition (`{"exclusive": {...}, "shared": {...}}`).
/// Two fields rather than a map: a map costs an allocation for each of a million keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitsByMode {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive: Option<Percentiles>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<Percentiles>,
}

impl WaitsByMode {
    pub fn is_empty(&self) -> bool {
        self.exclusive.is_none() && self.shared.is_none()
    }

    /// The modes that had an acquisition, by name: exclusive first.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &Percentiles)> {
        [("exclusive", &self.exclusive), ("shared", &self.shared)]
            .into_iter()
            .filter_map(|(mode, p)| p.as_ref().map(|p| (mode, p)))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    /// Percentiles (nearest rank) of `values`, which it sorts.
    pub fn of(values: &mut [f64]) -> Percentiles {
        if values.is_empty() {
            return Percentiles::default();
        }
        values.sort_by(f64::total_cmp);
        let rank = |q: f64| {
            let i = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1;
            values[i]
        };
        Percentiles {
            count: values.len() as u64,
            p50: rank(0.50),
            p90: rank(0.90),
            p99: rank(0.99),
            max: values[values.len() - 1],
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub events: u64,
    pub processes: u64,
    pub keys: u64,
    pub faults: u64,
    /// First and last event time, ns.
    pub time_span_ns: [i64; 2],
    /// In name order in JSON.
    pub per_key: PerKey,
}

/// Everything `lockaudit check` concludes about one history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// `Some(true)`: a lock was exercised and held up; `Some(false)`: anomalies found;
    /// `None`: unknown, the history proves nothing either way (`unknown` says why).
    pub valid: Option<bool>,
    /// Why the verdict is unknown (only with `valid: null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
    /// The anomalies found, ordered by time; at most `anomaly_limit` of each kind.
    pub anomalies: Vec<Anomaly>,
    pub checks: BTreeMap<String, CheckResult>,
    pub stats: Stats,
    /// Anomalies found but left out of `anomalies`, by kind.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub omitted: KindCounts,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Report {
    /// The exit code: 0 valid, 1 anomalies found, 3 unknown (nothing was
    /// tested, so nothing was proven).
    pub fn exit_code(&self) -> i32 {
        match self.valid {
            Some(true) => 0,
            Some(false) => 1,
            None => 3,
        }
    }

    /// Valid: a lock was exercised and no anomaly was found.
    pub fn is_valid(&self) -> bool {
        self.valid == Some(true)
    }

    /// Anomalies were found.
    pub fn is_invalid(&self) -> bool {
        self.valid == Some(false)
    }

    /// How many anomalies of `kind` were found, listed or not.
    pub fn count(&self, kind: AnomalyKind) -> u64 {
        self.checks
            .values()
            .filter_map(|c| c.counts.get(&kind))
            .sum()
    }

    /// When the first listed anomaly of a kind `wanted` accepts began, in ns of run time:
    /// the time to first anomaly of the audit, the index and `rerun`.
    pub fn first_anomaly_ns(&self, wanted: impl Fn(AnomalyKind) -> bool) -> Option<i64> {
        self.anomalies
            .iter()
            .filter(|a| wanted(a.kind))
            .map(|a| a.start)
            .min()
    }
}

/// The median of `values` (the mean of the middle two of an even count); None for none.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if !n.is_multiple_of(2) => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let mut values: Vec<f64> = (1..=100).map(f64::from).collect();
        let p = Percentiles::of(&mut values);
        assert_eq!((p.p50, p.p90, p.p99, p.max), (50.0, 90.0, 99.0, 100.0));
        assert_eq!(Percentiles::of(&mut []).count, 0);
    }

    #[test]
    fn key_stats_of_an_older_report_still_read_and_empty_figures_are_left_out() {
        let old = r#"{"acquisitions":2,"failed_attempts":0,"indeterminate_attempts":0,
            "wait_ms":{"count":2,"p50":1.0,"p90":2.0,"p99":2.0,"max":2.0},"fairness":1.0,
            "holds":2,"holds_outliving_lease":0,"expected_losses":0,"longest_free_ms":0.0}"#;
        let stats: KeyStats = serde_json::from_str(old).unwrap();
        assert_eq!(stats.acquisitions, 2);
        assert!(stats.wait_ms_by_mode.is_empty());
        assert_eq!((stats.queue_jumps, stats.queue_jumps_fair), (0, None));
        let json = serde_json::to_value(&stats).unwrap();
        assert!(json.get("wait_ms_by_mode").is_none() && json.get("queue_jumps_fair").is_none());
        assert_eq!(json["queue_jumps"], 0);
    }
}
