//! Online checking: the same checks, run on a history while it is being recorded, so that
//! an anomaly is reported as soon as the events recorded so far prove it.
//!
//! Events arrive in the order the recorder writes them, which is not quite time order: each
//! worker's stream is in time order, but the streams are merged as they come, and a worker
//! that is paused (SIGSTOP) delivers what it recorded just before the pause only after it
//! resumes. So a check judges only the events up to a *horizon*, a time before which nothing
//! more can arrive: `SETTLE` before the latest event seen, and before every worker pause that
//! is still on or ended less than `SETTLE` ago. The history up to the horizon is checked
//! whole, by the same checks as a finished history (but `lost-update`, which has no final
//! read yet: `register::Seen::SoFar`); an anomaly it shows is reported once, if its kind is
//! one a later event cannot take back (`proven_early`, and `lost-update` where the writes are
//! known to be increments: `OnlineChecker::increments_only`). The final verdict is `check`
//! on everything, identical to `lockaudit check` on the recorded file.

use std::collections::{BTreeMap, HashSet};

use crate::history::build::HistoryBuilder;
use crate::history::reader::push_recorded_line;
use crate::history::{HistoryError, OpF, OpType, RecordedLine};
use crate::report::{Anomaly, AnomalyKind, Report};

use super::{check, check_so_far, CheckOptions};

/// How long after an event every event of an earlier time has arrived, as a worker that is
/// not paused delivers its events (a pipe and a channel: microseconds; a loaded machine
/// stalls a process for far less than this).
pub const SETTLE_NS: i64 = 500_000_000;

/// Whether events after the horizon cannot take back an anomaly of `kind`, so that one in
/// the history up to the horizon is in the final verdict too: holds only grow as later
/// events end them, a pending acquire takes no part until it completes, and each such kind
/// is judged from operations completed before the horizon. That is every kind but
/// `AnomalyKind::only_at_the_end`. (Tested on every reference history, the recorded runs and generated
/// histories: `tests/it/online.rs`.)
///
/// One rule can still move: an `info` acquire blocks its key for the longest lease seen, so
/// a longer lease granted after the horizon lengthens the block and can shorten a free
/// stretch reported as `unavailable`. The run says so if that ever happens.
pub fn proven_early(kind: AnomalyKind) -> bool {
    !kind.only_at_the_end()
}

/// Whether an anomaly of `kind` found up to the horizon is reported early by a checker told
/// that the history's writes are increments (`OnlineChecker::increments_only`) or not.
pub fn reported_early(kind: AnomalyKind, increments_only: bool) -> bool {
    proven_early(kind) || (increments_only && kind == AnomalyKind::LostUpdate)
}

/// Whether two reports of an anomaly are of the same violation. Mostly: the same kind, key
/// and start. But a `token-order` anomaly stands for a strongly connected component of the
/// key's precedence graph (`precedence.rs`), and components grow and merge as holds are
/// added, so the final verdict may name the one reported early by another of its cycles:
/// one per key. And an `unavailable` free stretch may start later once a longer lease is
/// seen, or earlier once its beginning has settled: the same stretch if the spans meet.
pub fn same_violation(a: &Anomaly, b: &Anomaly) -> bool {
    if a.kind != b.kind || a.key != b.key {
        return false;
    }
    match a.kind {
        AnomalyKind::TokenOrder => true,
        AnomalyKind::Unavailable => a.start <= b.end && b.start <= a.end,
        _ => a.start == b.start,
    }
}

/// The most events online checking keeps (40 bytes each, and as much again while a check
/// copies the settled part): a run at full speed reaches it after minutes; from then on the
/// run's verdict comes from reading its file back.
pub const MAX_EVENTS: u64 = 10_000_000;

/// Why online checking stopped before the end.
#[derive(Debug, thiserror::Error)]
pub enum Stopped {
    /// A line the history format rejects.
    #[error(transparent)]
    Rejected(#[from] HistoryError),
    #[error("online checking keeps at most {0} events")]
    TooLong(u64),
}

/// Checks a history as its events arrive.
pub struct OnlineChecker {
    source: String,
    builder: HistoryBuilder,
    options: CheckOptions,
    lines: u64,
    /// The latest event time seen.
    latest: i64,
    /// Workers paused and not yet resumed: target name -> time of the pause.
    paused: BTreeMap<String, i64>,
    /// Pauses that ended: (time of the pause, time of the resume).
    resumed: Vec<(i64, i64)>,
    /// The longest ttl an acquire asked for so far (ms).
    longest_ttl_ms: Option<i64>,
    /// The horizon of the last check: an event before it that arrives now is late.
    judged_until: i64,
    late: u64,
    /// What was reported: (kind, key, start) of the anomalies compared by start, and the
    /// latest report of each other violation (`same_violation`), with its span kept up to date.
    reported: HashSet<(AnomalyKind, String, i64)>,
    reported_spans: Vec<Anomaly>,
    broken: Option<Stopped>,
    max_events: u64,
    /// Whether every write is known to be its process's read + 1 (`increments_only`).
    increments_only: bool,
}

impl OnlineChecker {
    /// `source` names the history (its path) in error messages.
    pub fn new(source: &str, options: CheckOptions) -> Self {
        OnlineChecker {
            source: source.to_string(),
            builder: HistoryBuilder::new(source),
            options,
            lines: 0,
            latest: i64::MIN,
            paused: BTreeMap::new(),
            resumed: Vec::new(),
            longest_ttl_ms: None,
            judged_until: i64::MIN,
            late: 0,
            reported: HashSet::new(),
            reported_spans: Vec::new(),
            broken: None,
            max_events: MAX_EVENTS,
            increments_only: false,
        }
    }

    /// Promises that every read and write of the history is lockaudit's own client's
    /// (`workload::client`): a read returns an integer or null, and every write, whatever
    /// its outcome, is its process's last read of the key + 1. A key that is a counter so
    /// far then stays one to the end (a write that is no increment would make it none, and
    /// take its `lost-update` back), so two acknowledged increments of the same value, which
    /// no later event undoes, are reported as `lost-update` while the run goes on.
    pub fn increments_only(mut self) -> Self {
        self.increments_only = true;
        self
    }

    /// Keeps at most `events` events instead of `MAX_EVENTS`.
    pub fn with_max_events(mut self, events: u64) -> Self {
        self.max_events = events;
        self
    }

    /// Adds the next line the recorder wrote, read from its parse (numbered as in the file).
    /// A line the history format rejects stops online checking: the error is kept for
    /// `finish`.
    pub fn push(&mut self, line: &RecordedLine) {
        if self.broken.is_some() {
            return;
        }
        if self.lines >= self.max_events {
            self.broken = Some(Stopped::TooLong(self.max_events));
            self.builder = HistoryBuilder::new(&self.source);
            return;
        }
        self.lines += 1;
        let pushed = match line.event(self.lines - 1) {
            Some(event) => self.builder.push(self.lines, &event),
            // The format refuses the line: reading its text says why, as `check` would.
            None => push_recorded_line(
                &mut self.builder,
                &self.source,
                self.lines,
                line.text().as_bytes(),
            ),
        };
        if let Err(error) = pushed {
            self.broken = Some(error.into());
            return;
        }
        let Some((op, fault)) = self.builder.last() else {
            return;
        };
        let time = op.time;
        if time < self.judged_until {
            self.late += 1;
        }
        self.latest = self.latest.max(time);
        if op.f == OpF::Acquire && op.ty == OpType::Invoke {
            if let Some(ttl) = op.ttl_ms() {
                self.longest_ttl_ms = Some(self.longest_ttl_ms.map_or(ttl, |l| l.max(ttl)));
            }
        }
        let Some(fault) = fault else {
            return;
        };
        match fault.name.as_str() {
            // Only a pause of workers (it lists the clients it stopped) holds back events.
            "pause" if !fault.processes.is_empty() => {
                for target in &fault.targets {
                    self.paused.entry(target.clone()).or_insert(time);
                }
            }
            // A worker killed or restarted while paused was resumed first, or never
            // delivers what it held back.
            "resume" | "kill" | "restart" => {
                for target in &fault.targets {
                    if let Some(paused_at) = self.paused.remove(target) {
                        self.resumed.push((paused_at, time));
                    }
                }
            }
            _ => {}
        }
    }

    /// The time up to which every event has arrived, as far as the events show.
    pub fn horizon(&mut self) -> i64 {
        let mut horizon = self.latest.saturating_sub(SETTLE_NS);
        for &paused_at in self.paused.values() {
            horizon = horizon.min(paused_at.saturating_sub(SETTLE_NS));
        }
        let latest = self.latest;
        // A resumed worker delivers what it held back at once; after `SETTLE` it has.
        self.resumed
            .retain(|&(_, resumed_at)| resumed_at > latest.saturating_sub(SETTLE_NS));
        for &(paused_at, _) in &self.resumed {
            horizon = horizon.min(paused_at.saturating_sub(SETTLE_NS));
        }
        horizon
    }

    /// Checks the history up to the horizon; returns the anomalies it proves that were not
    /// reported before.
    pub fn poll(&mut self) -> Vec<Anomaly> {
        let horizon = self.horizon();
        self.check_until(horizon)
    }

    /// Checks the events up to `horizon` (all that came, if it is `i64::MAX`); returns the
    /// anomalies of the kinds `reported_early` names, not reported before.
    pub fn check_until(&mut self, horizon: i64) -> Vec<Anomaly> {
        if self.broken.is_some() || horizon <= self.judged_until {
            return Vec::new();
        }
        self.judged_until = horizon;
        let history = self.builder.snapshot_until(horizon);
        // A lease granted after the horizon may be longer than any seen before it, and
        // lengthen what an `info` acquire blocks: judge with at least the ttl asked for.
        let report = check_so_far(&history, &self.options, self.longest_ttl_ms);
        let mut new = Vec::new();
        for anomaly in report.anomalies {
            if !reported_early(anomaly.kind, self.increments_only) {
                continue;
            }
            if matches!(
                anomaly.kind,
                AnomalyKind::TokenOrder | AnomalyKind::Unavailable
            ) {
                match self
                    .reported_spans
                    .iter_mut()
                    .find(|r| same_violation(r, &anomaly))
                {
                    // Known: remember its span as it is now, for the next comparison.
                    Some(known) => *known = anomaly,
                    None => {
                        self.reported_spans.push(anomaly.clone());
                        new.push(anomaly);
                    }
                }
            } else if self
                .reported
                .insert((anomaly.kind, anomaly.key.clone(), anomaly.start))
            {
                new.push(anomaly);
            }
        }
        new
    }

    /// Events that arrived after a check had judged their time (see `SETTLE_NS`): if any
    /// did, an anomaly reported early may not be in the final verdict.
    pub fn late_events(&self) -> u64 {
        self.late
    }

    /// The final verdict on every event, or why online checking stopped: the first line the
    /// format rejects, or too many events.
    pub fn finish(self) -> Result<Report, Stopped> {
        if let Some(error) = self.broken {
            return Err(error);
        }
        Ok(check(&self.builder.finish(), &self.options))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    fn line(index: u64, time_ms: i64, process: u64, ty: &str, f: &str, value: &str) -> String {
        format!(
            r#"{{"index":{index},"time":{},"process":{process},"type":"{ty}","f":"{f}","key":"lock:0"{value}}}"#,
            time_ms * MS
        )
    }

    fn nemesis(time_ms: i64, f: &str, processes: &str) -> String {
        format!(
            r#"{{"index":0,"time":{},"process":"nemesis","type":"info","f":"{f}","value":{{"targets":["worker-0"],"processes":{processes}}}}}"#,
            time_ms * MS
        )
    }

    fn recorded(line: &str) -> RecordedLine {
        RecordedLine::parse(line.to_string()).expect("an event line")
    }

    fn push(online: &mut OnlineChecker, lines: &[String]) {
        for l in lines {
            online.push(&recorded(l));
        }
        assert!(online.broken.is_none(), "{:?}", online.broken);
    }

    /// Two clients hold the lock at once from 100 ms on.
    fn overlap() -> Vec<String> {
        vec![
            line(0, 0, 1, "invoke", "acquire", ""),
            line(0, 10, 1, "ok", "acquire", ""),
            line(0, 50, 2, "invoke", "acquire", ""),
            line(0, 100, 2, "ok", "acquire", ""),
        ]
    }

    #[test]
    fn an_anomaly_is_reported_once_when_the_settled_history_proves_it() {
        let mut online = OnlineChecker::new("live", CheckOptions::default());
        push(&mut online, &overlap());
        // The latest event is at 100 ms: nothing is settled yet.
        assert_eq!(online.horizon(), 100 * MS - SETTLE_NS);
        assert!(online.poll().is_empty());
        push(&mut online, &[line(0, 1_200, 3, "invoke", "acquire", "")]);
        let found = online.poll();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].kind, AnomalyKind::Overlap);
        push(&mut online, &[line(0, 1_300, 3, "fail", "acquire", "")]);
        assert!(online.poll().is_empty(), "reported twice");
        let report = online.finish().unwrap();
        assert_eq!(report.anomalies.len(), 1);
    }

    #[test]
    fn a_paused_worker_holds_the_horizon_back_until_it_has_delivered() {
        let mut online = OnlineChecker::new("live", CheckOptions::default());
        push(
            &mut online,
            &[
                line(0, 0, 1, "invoke", "acquire", ""),
                line(0, 10, 1, "ok", "acquire", ""),
                nemesis(2_000, "pause", "[1]"),
                line(0, 9_000, 2, "invoke", "acquire", ""),
            ],
        );
        assert_eq!(online.horizon(), 2_000 * MS - SETTLE_NS);
        push(&mut online, &[nemesis(9_500, "resume", "[1]")]);
        // Resumed, but what it held back may still be on its way.
        assert_eq!(online.horizon(), 2_000 * MS - SETTLE_NS);
        push(&mut online, &[line(0, 10_600, 2, "fail", "acquire", "")]);
        assert_eq!(online.horizon(), 10_600 * MS - SETTLE_NS);
    }

    #[test]
    fn a_paused_server_does_not_hold_the_horizon_back() {
        let mut online = OnlineChecker::new("live", CheckOptions::default());
        push(
            &mut online,
            &[
                nemesis(100, "pause", "[]"),
                line(0, 5_000, 1, "invoke", "acquire", ""),
            ],
        );
        assert_eq!(online.horizon(), 5_000 * MS - SETTLE_NS);
    }

    #[test]
    fn an_event_older_than_the_last_horizon_is_counted_late() {
        let mut online = OnlineChecker::new("live", CheckOptions::default());
        push(&mut online, &[line(0, 3_000, 1, "invoke", "acquire", "")]);
        online.poll();
        assert_eq!(online.late_events(), 0);
        push(&mut online, &[line(0, 1_000, 2, "invoke", "acquire", "")]);
        assert_eq!(online.late_events(), 1);
    }

    #[test]
    fn a_history_longer_than_the_bound_is_let_go_of() {
        let mut online = OnlineChecker::new("live", CheckOptions::default()).with_max_events(3);
        push(&mut online, &overlap()[..3]);
        assert!(online.finish().is_ok());
        let mut online = OnlineChecker::new("live", CheckOptions::default()).with_max_events(3);
        for line in overlap() {
            online.push(&recorded(&line));
        }
        assert_eq!(online.builder.len(), 0, "the events are let go of");
        assert!(online.poll().is_empty());
        assert!(matches!(online.finish(), Err(Stopped::TooLong(3))));
    }

    #[test]
    fn a_line_the_format_rejects_stops_online_checking_with_its_error() {
        let mut online = OnlineChecker::new("live.jsonl", CheckOptions::default());
        online.push(&recorded(
            r#"{"index":0,"time":5,"process":1,"type":"ok","f":"acquire","key":"k"}"#,
        ));
        let error = online.finish().unwrap_err().to_string();
        assert!(error.contains("live.jsonl:1"), "{error}");
    }

    // ------------------------------------------------ lost-update while the run goes on

    /// A read of the counter guarded by lock:0 by `process`, invoked at `at` ms, returning
    /// `value` (None: null) 10 ms later.
    fn read(at: i64, process: u64, value: Option<i64>) -> Vec<String> {
        let value = value.map_or("null".to_string(), |v| v.to_string());
        vec![
            line(0, at, process, "invoke", "read", ""),
            line(
                0,
                at + 10,
                process,
                "ok",
                "read",
                &format!(r#","value":{{"value":{value}}}"#),
            ),
        ]
    }

    /// A write of `value` by `process`, invoked at `at` ms and ending (`ok`, `fail`,
    /// `info`) 10 ms later, or left pending (`None`).
    fn write(at: i64, process: u64, value: i64, outcome: Option<&str>) -> Vec<String> {
        let payload = format!(r#","value":{{"token":null,"value":{value}}}"#);
        let mut lines = vec![line(0, at, process, "invoke", "write", &payload)];
        lines.extend(outcome.map(|ty| line(0, at + 10, process, ty, "write", &payload)));
        lines
    }

    /// Judges `lines` at each of their times in turn, as a run's checks would: the
    /// lost-updates reported early, each with the time it was first reported (ms), and the
    /// final verdict.
    fn judged(lines: &[Vec<String>], increments_only: bool) -> (Vec<(i64, Anomaly)>, Report) {
        let lines: Vec<String> = lines.concat();
        let mut online = OnlineChecker::new("live", CheckOptions::default());
        if increments_only {
            online = online.increments_only();
        }
        push(&mut online, &lines);
        let mut times: Vec<i64> = lines
            .iter()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["time"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        times.sort_unstable();
        times.dedup();
        let mut early = Vec::new();
        for t in times {
            for anomaly in online.check_until(t) {
                assert_eq!(anomaly.kind, AnomalyKind::LostUpdate, "{anomaly:?}");
                early.push((t / MS, anomaly));
            }
        }
        (early, online.finish().unwrap())
    }

    fn lost_updates(report: &Report) -> Vec<&Anomaly> {
        report
            .anomalies
            .iter()
            .filter(|a| a.kind == AnomalyKind::LostUpdate)
            .collect()
    }

    #[test]
    fn an_increment_written_again_from_a_count_that_lost_it_is_reported_once_acknowledged() {
        // Process 1 increments 0 to 1; the counter loses it (a server restarted empty);
        // process 2 reads 0 again and writes 1: two acknowledged increments from one count.
        let history = [
            read(0, 1, None),
            write(20, 1, 1, Some("ok")),
            read(40, 2, None),
            write(60, 2, 1, Some("ok")),
            read(100, 9, Some(1)),
        ];
        let (early, report) = judged(&history, true);
        assert_eq!(early.len(), 1, "{early:?}");
        let (at, lost) = &early[0];
        // Not at the read that found the count gone, nor while the second write was
        // pending: once it was acknowledged.
        assert_eq!(*at, 70);
        assert_eq!(lost.start, 30 * MS, "from the first acknowledged increment");
        assert!(
            lost.explanation
                .contains("more than one acknowledged increment"),
            "{}",
            lost.explanation
        );
        let final_ones = lost_updates(&report);
        assert_eq!(final_ones.len(), 1, "{:?}", report.anomalies);
        assert!(same_violation(final_ones[0], lost));
        // Without the promise that every write is an increment it waits for the end.
        let (early, report) = judged(&history, false);
        assert!(early.is_empty(), "{early:?}");
        assert_eq!(lost_updates(&report).len(), 1);
    }

    #[test]
    fn a_read_concurrent_with_an_increment_and_written_on_is_a_lost_update_early_and_late() {
        // Process 2 reads 0 while process 1's write of 1 is under way, then writes 1 too.
        let history = [
            read(0, 1, Some(0)),
            vec![line(
                0,
                20,
                1,
                "invoke",
                "write",
                r#","value":{"token":null,"value":1}"#,
            )],
            read(22, 2, Some(0)),
            vec![line(
                0,
                35,
                1,
                "ok",
                "write",
                r#","value":{"token":null,"value":1}"#,
            )],
            write(40, 2, 1, Some("ok")),
            read(100, 9, Some(1)),
        ];
        let (early, report) = judged(&history, true);
        assert_eq!(
            early.iter().map(|(at, _)| *at).collect::<Vec<_>>(),
            vec![50]
        );
        assert!(same_violation(lost_updates(&report)[0], &early[0].1));
    }

    #[test]
    fn a_read_below_an_acknowledged_increment_proves_nothing_while_a_later_write_can_set_it_back() {
        // Process 2 reads 0 after 1 was acknowledged (a stale replica, a counter that lost
        // the write), but process 3 reads 1 and writes 2, and the final read finds 2: every
        // acknowledged increment is there, the final verdict finds nothing, and nothing may
        // be reported on the way.
        let history = [
            read(0, 1, Some(0)),
            write(20, 1, 1, Some("ok")),
            read(40, 2, Some(0)),
            read(60, 3, Some(1)),
            write(80, 3, 2, Some("ok")),
            read(100, 9, Some(2)),
        ];
        let (early, report) = judged(&history, true);
        assert!(early.is_empty(), "{early:?}");
        assert!(lost_updates(&report).is_empty(), "{:?}", report.anomalies);
        // The same read left standing, the final read below the increments: only the end
        // proves it (a write still to come could have set the counter back up).
        let mut short = history[..4].to_vec();
        short.push(read(100, 9, Some(0)));
        let (early, report) = judged(&short, true);
        assert!(early.is_empty(), "{early:?}");
        assert_eq!(lost_updates(&report).len(), 1, "{:?}", report.anomalies);
    }

    #[test]
    fn a_write_that_is_pending_or_ended_unknown_is_no_acknowledged_increment_to_repeat() {
        // Process 1's write of 1 ended `info` (it may have landed or not); process 2 reads 0
        // and writes 1: one acknowledged increment, none lost.
        let history = [
            read(0, 1, Some(0)),
            write(20, 1, 1, Some("info")),
            read(40, 2, Some(0)),
            write(60, 2, 1, Some("ok")),
            read(100, 9, Some(1)),
        ];
        let (early, report) = judged(&history, true);
        assert!(early.is_empty(), "{early:?}");
        assert!(lost_updates(&report).is_empty(), "{:?}", report.anomalies);
        // Still pending at the end of the history: no more an acknowledged increment.
        let mut pending = history.to_vec();
        pending[1] = write(20, 1, 1, None);
        let (early, report) = judged(&pending, true);
        assert!(early.is_empty(), "{early:?}");
        assert!(lost_updates(&report).is_empty(), "{:?}", report.anomalies);
    }

    #[test]
    fn increments_in_sequence_are_never_reported() {
        let mut history = vec![read(0, 1, None)];
        for n in 1..=5 {
            let (at, p) = (n * 40, n as u64);
            history.push(read(at, p, Some(n - 1)));
            history.push(write(at + 20, p, n, Some("ok")));
        }
        history.push(read(400, 9, Some(5)));
        let (early, report) = judged(&history, true);
        assert!(early.is_empty(), "{early:?}");
        assert_eq!(report.valid, Some(true), "{:?}", report.anomalies);
    }

    #[test]
    fn without_the_promise_a_later_write_that_is_no_increment_takes_a_duplicate_back() {
        // Two acknowledged increments of 1, then a write of 7 that is no read + 1: the key is
        // no counter, and the final verdict judges nothing on it. A history that does not
        // come from lockaudit's own clients may do that: nothing is reported early.
        let history = [
            read(0, 1, Some(0)),
            write(20, 1, 1, Some("ok")),
            read(40, 2, Some(0)),
            write(60, 2, 1, Some("ok")),
            write(80, 3, 7, Some("ok")),
        ];
        let (early, report) = judged(&history, false);
        assert!(early.is_empty(), "{early:?}");
        assert!(lost_updates(&report).is_empty(), "{:?}", report.anomalies);
        assert_eq!(
            report.checks["register"].figures["keys_skipped"],
            serde_json::json!(1)
        );
    }
}
