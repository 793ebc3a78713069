//! How a history's nemesis events pair into faults that last: a `pause` until the `resume`
//! of its targets, a `partition` or `latency` until their `heal`, a `kill` until their
//! `restart` (docs/src/reference/history.md, "Faults and their heals"). The one rule the
//! checker's liveness, the pictures' fault bands and `shrink` read, so that what the checker
//! calls in force is what the pictures draw and what `shrink` keeps together.

use super::compact::{History, OpF, OpType};

/// The event that ends a fault of this name, for a fault that lasts; None: an instant (a
/// clock step, a failover, a crash point, a heal with nothing to end).
pub fn closer_of(name: &str) -> Option<&'static str> {
    Some(match name {
        "pause" => "resume",
        "partition" | "latency" => "heal",
        "kill" => "restart",
        "stop" => "start",
        _ => return None,
    })
}

/// Whether the fault a closer of this name ends acts on each of its targets alone (a
/// process paused, killed, stopped), so that a closer naming some of them heals those. A
/// partition's or a latency's targets name its links together: a `heal` ends it only by
/// naming them all (the heal of worker-1's cut from redis-1 is no heal of worker-0's).
fn one_by_one(closer: &str) -> bool {
    matches!(closer, "resume" | "restart" | "start")
}

/// A fault as a stretch of the history's clock, or an instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultSpan {
    /// Its event: a position in `History::faults`.
    pub begin: usize,
    /// The events that healed it, in order (positions in `History::faults`); the last one
    /// ended it. A heal naming only some of its targets heals those: the fault lasts until
    /// every target has been healed.
    pub heals: Vec<usize>,
    /// ns on the history's clock.
    pub start: i64,
    /// Its own time for an instant; the time of the heal that ended it; None: never healed,
    /// it lasts to the end of the history.
    pub end: Option<i64>,
}

impl FaultSpan {
    /// Its end, a fault never healed ending with the history (`end_of_history`).
    pub fn end_or(&self, end_of_history: i64) -> i64 {
        self.end.unwrap_or(end_of_history.max(self.start))
    }
}

/// Every nemesis event of `history` that is not an `invoke`, as a fault span, in the
/// history's order (time, then index), each event in exactly one span: a heal is in the
/// spans it healed, or an instant of its own if it healed none.
///
/// The rule: a fault of a kind that lasts (`closer_of`) is healed by the later events of its
/// closer's name. One naming no target heals every such fault in force; a fault naming no
/// target is healed by the next one, whatever it names. Otherwise a `resume`, `restart` or
/// `start` heals the targets it names in every such fault in force, which ends once each
/// of its targets is healed (one resume of a server ends both of two nested pauses of it:
/// one SIGCONT resumes it); a `heal` ends each partition or latency in force all of whose
/// targets it names (worker-1's heal from redis-1 leaves worker-0's cut from redis-1 in
/// force). An event that names no target and no process acts on nothing: neither a fault
/// nor a heal, an instant. A heal that ends nothing is an instant of its own. A `kill` of
/// clients only (`worker-N` targets, or only processes) that no `restart` heals is an instant:
/// the processes are gone for good and fresh ones take their slots; any other fault never
/// healed lasts to the end of the history.
pub fn fault_spans(history: &History) -> Vec<FaultSpan> {
    let mut spans: Vec<FaultSpan> = Vec::new();
    // Faults in force: (position in `spans`, the closer's name, targets not yet healed,
    // whether it named no target at all).
    let mut open: Vec<(usize, &'static str, Vec<&str>, bool)> = Vec::new();
    for op in &history.ops {
        if op.f != OpF::Fault || op.ty == OpType::Invoke {
            continue;
        }
        let Some((position, fault)) = usize::try_from(op.a)
            .ok()
            .and_then(|i| Some((i, history.faults.get(i)?)))
        else {
            continue;
        };
        let instant = FaultSpan {
            begin: position,
            heals: Vec::new(),
            start: fault.time,
            end: Some(fault.time),
        };
        if fault.targets.is_empty() && fault.processes.is_empty() {
            spans.push(instant);
            continue;
        }
        let mut healed_any = false;
        open.retain_mut(|(span, closer, left, untargeted)| {
            if *closer != fault.name {
                return true;
            }
            let named = |t: &&str| fault.targets.iter().any(|h| h == t);
            let before = left.len();
            if fault.targets.is_empty() || *untargeted || left.iter().all(named) {
                left.clear();
            } else if one_by_one(closer) {
                left.retain(|t| !named(t));
            }
            if left.len() == before && !*untargeted {
                return true;
            }
            healed_any = true;
            spans[*span].heals.push(position);
            if left.is_empty() {
                spans[*span].end = Some(fault.time);
            }
            !left.is_empty()
        });
        if healed_any {
            continue;
        }
        match closer_of(&fault.name) {
            Some(closer) => {
                open.push((
                    spans.len(),
                    closer,
                    fault.targets.iter().map(String::as_str).collect(),
                    fault.targets.is_empty(),
                ));
                spans.push(FaultSpan {
                    end: None,
                    ..instant
                });
            }
            None => spans.push(instant),
        }
    }
    for span in spans.iter_mut().filter(|s| s.end.is_none()) {
        let fault = &history.faults[span.begin];
        if fault.name == "kill" && fault.targets.iter().all(|t| t.starts_with("worker-")) {
            span.end = Some(span.start);
        }
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::history::reader::read_jsonl;

    fn nemesis(index: u32, time: i64, f: &str, targets: &[&str]) -> String {
        format!(
            r#"{{"index":{index},"time":{time},"process":"nemesis","type":"info","f":"{f}","value":{{"targets":{},"processes":[]}}}}"#,
            serde_json::to_string(targets).expect("names")
        )
    }

    /// (the fault's name, start, end, its heals' names), per span.
    fn spans_of(lines: &[String]) -> Vec<(String, i64, Option<i64>, usize)> {
        let text = lines.join("\n") + "\n";
        let history = read_jsonl(text.as_bytes(), "test", None).expect("a valid history");
        fault_spans(&history)
            .iter()
            .map(|s| {
                (
                    history.faults[s.begin].name.clone(),
                    s.start,
                    s.end,
                    s.heals.len(),
                )
            })
            .collect()
    }

    #[test]
    fn a_fault_on_several_targets_lasts_until_each_is_healed() {
        let got = spans_of(&[
            nemesis(0, 10, "pause", &["redis-0", "redis-1"]),
            nemesis(1, 20, "resume", &["redis-0"]),
            nemesis(2, 30, "resume", &["redis-1"]),
        ]);
        assert_eq!(got, vec![("pause".into(), 10, Some(30), 2)]);
    }

    #[test]
    fn an_untargeted_heal_heals_everything_of_its_kind_and_an_untargeted_fault_the_next() {
        let got = spans_of(&[
            nemesis(0, 10, "partition", &["worker-0", "redis-1"]),
            nemesis(1, 20, "latency", &["worker-1", "redis-2"]),
            nemesis(2, 30, "heal", &[]).replace(r#""processes":[]"#, r#""processes":[3]"#),
            nemesis(3, 40, "partition", &[]).replace(r#""processes":[]"#, r#""processes":[3]"#),
            nemesis(4, 50, "heal", &["redis-7"]),
            // Acts on nothing: no heal.
            nemesis(5, 60, "partition", &["redis-0"]),
            nemesis(6, 70, "heal", &[]),
        ]);
        assert_eq!(
            got,
            vec![
                ("partition".into(), 10, Some(30), 1),
                ("latency".into(), 20, Some(30), 1),
                ("partition".into(), 40, Some(50), 1),
                ("partition".into(), 60, None, 0),
                ("heal".into(), 70, Some(70), 0),
            ]
        );
    }

    #[test]
    fn a_client_kill_never_restarted_is_an_instant_a_server_s_lasts() {
        let got = spans_of(&[
            nemesis(0, 10, "kill", &["worker-0"]),
            nemesis(1, 20, "kill", &["redis-0"]),
        ]);
        assert_eq!(
            got,
            vec![
                ("kill".into(), 10, Some(10), 0),
                ("kill".into(), 20, None, 0)
            ]
        );
    }
}
