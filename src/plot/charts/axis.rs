//! The run's time axis in seconds, shared by the latency and rate charts.

use crate::history::History;

use super::format::secs;

/// The run's time axis in seconds, shared by the latency and rate charts.
#[derive(Debug, Clone, Copy)]
pub(super) struct TimeAxis {
    pub(super) start: f64,
    pub(super) end: f64,
}

impl TimeAxis {
    pub(super) fn of(history: &History) -> TimeAxis {
        let (first, last) = history.time_span();
        let (first, last) = (secs(first), secs(last));
        if last - first < 1e-3 {
            // One instant (or nothing): a second around it, so that the axis can say where.
            let start = if (0.0..=1.0).contains(&first) {
                0.0
            } else {
                first - 0.5
            };
            return TimeAxis {
                start,
                end: last + 0.5,
            };
        }
        // Runs start at 0; a history cut out of a longer one starts where it starts.
        let start = if first >= 0.0 && first < (last - first) * 0.2 {
            0.0
        } else {
            first
        };
        let span = (last - start).max(1e-3);
        TimeAxis {
            start,
            end: last + span * 0.02,
        }
    }

    pub(super) fn span(&self) -> f64 {
        self.end - self.start
    }

    pub(super) fn format(&self, v: f64) -> String {
        let span = self.span();
        let decimals = if span < 0.05 {
            4
        } else if span < 0.5 {
            3
        } else if span < 5.0 {
            2
        } else if span < 50.0 {
            1
        } else {
            0
        };
        format!("{v:.decimals$}")
    }
}
