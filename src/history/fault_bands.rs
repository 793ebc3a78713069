//! The nemesis faults of a history as stretches of the run's clock, as every picture and the
//! page show them.

use super::{fault_spans, History};

/// A nemesis fault as a stretch of the run's clock: a `pause` until its `resume`, a
/// `partition` until its `heal`, a `kill` until its `restart`; a fault with no end (a clock
/// jump, a failover, a crash point, a client kill never restarted) is an instant,
/// `start == end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultBand {
    /// ns on the run's clock.
    pub start: i64,
    pub end: i64,
    /// The opening fault's name: `pause`, `kill`, ...
    pub name: String,
    pub targets: Vec<String>,
    /// The events that opened and closed it.
    pub indices: Vec<u32>,
    /// Opened and never closed: it lasts to the end of the history.
    pub unhealed: bool,
}

impl FaultBand {
    pub fn is_instant(&self) -> bool {
        self.start == self.end && !self.unhealed
    }

    /// `pause worker-0`, `failover redis-0`, `kill worker-0, worker-1`.
    pub fn label(&self) -> String {
        if self.targets.is_empty() {
            self.name.clone()
        } else {
            format!("{} {}", self.name, self.targets.join(", "))
        }
    }
}

/// Every fault of `history` as a band, in order of start, paired as
/// `history::fault_spans` pairs them (the checker's rule): a heal with nothing to end is an
/// instant of its own, a fault never healed lasts to the end (a client kill never restarted
/// is an instant: its processes are gone, fresh ones take their slots).
pub fn fault_bands(history: &History) -> Vec<FaultBand> {
    let end_of_history = history.time_span().1;
    fault_spans(history)
        .into_iter()
        .map(|span| {
            let fault = &history.faults[span.begin];
            FaultBand {
                start: span.start,
                end: span.end_or(end_of_history),
                name: fault.name.clone(),
                targets: fault.targets.clone(),
                indices: std::iter::once(span.begin)
                    .chain(span.heals.iter().copied())
                    .map(|f| history.faults[f].index)
                    .collect(),
                unhealed: span.end.is_none(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::history;

    fn history(lines: &[&str]) -> History {
        let text = lines.join("\n") + "\n";
        history::reader::read_jsonl(text.as_bytes(), "test", None).expect("a valid history")
    }

    fn nemesis(index: u32, time: i64, f: &str, target: &str) -> String {
        format!(
            r#"{{"index":{index},"time":{time},"process":"nemesis","type":"info","f":"{f}","value":{{"targets":["{target}"],"processes":[]}}}}"#
        )
    }

    #[test]
    fn faults_pair_into_bands_and_none_is_dropped() {
        let lines = [
            nemesis(0, 10, "pause", "worker-0"),
            nemesis(1, 20, "pause", "worker-1"),
            nemesis(2, 30, "resume", "worker-1"),
            nemesis(3, 40, "kill", "worker-2"),
            nemesis(4, 50, "clock", "redis-0"),
            nemesis(5, 60, "resume", "worker-0"),
            nemesis(6, 70, "resume", "worker-9"),
            nemesis(7, 80, "partition", "redis-1"),
            nemesis(8, 90, "kill", "redis-2"),
            nemesis(9, 95, "restart", "redis-2"),
            r#"{"index":10,"time":100,"process":0,"type":"invoke","f":"acquire","key":"a"}"#
                .to_string(),
        ];
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let bands = fault_bands(&history(&refs));
        let got: Vec<(&str, i64, i64, bool, bool)> = bands
            .iter()
            .map(|b| (b.name.as_str(), b.start, b.end, b.is_instant(), b.unhealed))
            .collect();
        assert_eq!(
            got,
            vec![
                ("pause", 10, 60, false, false),
                ("pause", 20, 30, false, false),
                ("kill", 40, 40, true, false),
                ("clock", 50, 50, true, false),
                ("resume", 70, 70, true, false),
                ("partition", 80, 100, false, true),
                ("kill", 90, 95, false, false),
            ]
        );
        assert_eq!(bands[0].indices, vec![0, 5]);
        assert_eq!(bands[0].label(), "pause worker-0");
    }
}
