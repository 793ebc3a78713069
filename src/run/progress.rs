//! What a run shows while it goes on: a bar on a terminal, else a line every few seconds.

use indicatif::{ProgressBar, ProgressStyle};

use crate::workload::spec::WorkloadSpec;

use super::recorder::Counts;

/// How often a progress line is printed when the bar cannot show.
pub(super) const PROGRESS_LINE_EVERY_NS: i64 = 5_000_000_000;

/// The progress lines of a run whose bar is hidden: one every [`PROGRESS_LINE_EVERY_NS`] of
/// run time.
///
/// ```text
/// progress: 5s, 4121 events, 1012 acquisitions, 3 failed, 0 indeterminate; anomalies so far: none
/// ```
///
/// An optimistic lock's line counts its writes instead (`Counts::progress`).
pub(super) struct ProgressLines {
    next_ns: i64,
    online_check: bool,
    optimistic: bool,
}

impl ProgressLines {
    pub(super) fn new(online_check: bool, optimistic: bool) -> ProgressLines {
        ProgressLines {
            next_ns: PROGRESS_LINE_EVERY_NS,
            online_check,
            optimistic,
        }
    }

    /// The line to print at `now_ns` of run time, if one is due; `anomalies` is what the
    /// online checker found so far ("overlap ×2, ...", empty for none).
    pub(super) fn due(&mut self, now_ns: i64, counts: &Counts, anomalies: &str) -> Option<String> {
        if now_ns < self.next_ns {
            return None;
        }
        while self.next_ns <= now_ns {
            self.next_ns += PROGRESS_LINE_EVERY_NS;
        }
        let anomalies = match (self.online_check, anomalies.is_empty()) {
            (false, _) => "anomalies: checked at the end (--no-online-check)".to_string(),
            (true, true) => "anomalies so far: none".to_string(),
            (true, false) => format!("anomalies so far: {anomalies}"),
        };
        Some(format!(
            "progress: {}s, {} events, {}; {anomalies}",
            now_ns / 1_000_000_000,
            counts.events,
            counts.progress(self.optimistic)
        ))
    }
}

/// The bar of a run on a terminal: its time, and the counts so far.
pub(super) fn progress_bar(spec: &WorkloadSpec) -> ProgressBar {
    let bar = ProgressBar::new(spec.time_limit.0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed:>4} [{bar:30}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}
