//! The checks: one module per property, all reading the holds derived from one history.

use crate::history::History;
use crate::report::Report;

/// Bounds and limits of a check.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// `unavailable`: a free stretch longer than this with failed attempts (default 1 s).
    pub liveness_bound_ns: i64,
    /// `starvation`: trying for longer than this while others acquire (default 10 s).
    pub starvation_bound_ns: i64,
    /// At most this many anomalies of each kind are listed; all are counted.
    pub anomaly_limit: usize,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            liveness_bound_ns: 1_000_000_000,
            starvation_bound_ns: 10_000_000_000,
            anomaly_limit: 1000,
        }
    }
}

/// Runs every check on `history`.
pub fn check(history: &History, options: &CheckOptions) -> Report {
    let _ = (history, options);
    todo!("being written")
}
