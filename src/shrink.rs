//! Shrinking a failing history to a bug report: the smallest sub-history that still shows
//! one anomaly, found by delta debugging (Zeller's ddmin) with the checker as the oracle.
//!
//! The history is cut into units that keep it well-formed whatever subset is kept: a client
//! operation (its invoke and its completion; an invoke never completed alone) and a fault
//! (a `pause` with its `resume`, a `partition` with its `heal`, ... as the checker pairs
//! them, `history::fault_spans`; an instant fault alone). The file's lines stay as they were; only `index` is
//! renumbered, since the format wants 0, 1, 2, ... in file order.
//!
//! "Still shows it" is stricter than "the checker reports an anomaly of that kind": removing
//! a release lengthens its hold to the end of the history, and removing a failed attempt
//! moves a free stretch, so a subset can show an anomaly of the same kind that the original
//! never had; and without the first holder's acquire and release, a failed attempt seems
//! to find the key free from the start. The kept history must show *the same* anomaly: the
//! target's kind on the target's key, beginning at the same instant, for an overlap with the
//! same lease class, and every event it names among those the original check named for it.
//!
//! Speed comes from cutting first: the target's events, then its key's operations and the
//! faults near it in time, widening until the cut still shows it (checks of a few hundred
//! events cost microseconds, of the whole history tens of milliseconds); ddmin then works on
//! what is left, and a last pass removes units one at a time until none can go (1-minimal).

use crate::checker::{self, CheckOptions};
use crate::history::build::HistoryBuilder;
use crate::history::compact::{KeyId, NEMESIS, NO_KEY};
use crate::history::{fault_spans, History, HistoryWriter, RecordedLine};
use crate::report::{episodes, Anomaly, AnomalyKind};

/// Why a history cannot be shrunk.
#[derive(Debug, thiserror::Error)]
pub enum ShrinkError {
    #[error("no anomaly to keep: the checker finds the history valid")]
    NoAnomaly,
    #[error("no {kind} anomaly to keep: the checker finds {found}")]
    KindNotFound { kind: AnomalyKind, found: String },
    #[error("line {line}: the format refuses this event: check the history first")]
    Refused { line: usize },
}

/// A shrunk history: which of the original lines it keeps, and what it shows.
#[derive(Debug, Clone)]
pub struct Shrunk {
    pub kind: AnomalyKind,
    /// The anomaly kept, as the check of the whole history reported it.
    pub target: Anomaly,
    /// The original lines kept (0-based, which is their `index`), ascending.
    pub kept: Vec<usize>,
    pub events_before: usize,
    /// How many histories the checker judged.
    pub checks: usize,
}

/// A part of the history kept or dropped as a whole: its lines, ascending.
#[derive(Debug, Clone)]
struct Unit {
    lines: Vec<usize>,
    /// Its time span, ns.
    start: i64,
    end: i64,
    /// The client process, None for a fault.
    process: Option<u32>,
    key: KeyId,
}

/// Shrinks `lines`, the events of a history in file order (each the line whose `index` is
/// its position), to the fewest units that still show the same anomaly of `kind`, or by
/// default of the worst episode's kind (the first anomaly of the first episode the summary
/// lists). `options` are the checker's, as `check` would use them.
pub fn shrink(
    lines: &[RecordedLine],
    kind: Option<AnomalyKind>,
    options: &CheckOptions,
) -> Result<Shrunk, ShrinkError> {
    let options = CheckOptions {
        // Every anomaly listed: the kept one must be found among them.
        anomaly_limit: usize::MAX,
        threads: 1,
        ..options.clone()
    };
    let all: Vec<usize> = (0..lines.len()).collect();
    let history = build(lines, &all)?;
    let report = checker::check(&history, &options);
    let target = choose(&report.anomalies, kind)?;
    let kind = target.kind;
    let units = units(&history);
    let mut oracle = Oracle {
        lines,
        units: &units,
        options: &options,
        target: &target,
        checks: 1,
    };
    let cut = oracle.cut(&history);
    let kept = oracle.ddmin(cut);
    let kept = oracle.one_at_a_time(kept);
    let checks = oracle.checks;
    let mut kept_lines: Vec<usize> = kept
        .iter()
        .flat_map(|&u| units[u].lines.iter().copied())
        .collect();
    kept_lines.sort_unstable();
    Ok(Shrunk {
        kind,
        target,
        kept: kept_lines,
        events_before: lines.len(),
        checks,
    })
}

/// The anomaly to keep: of `kind`, or of any kind, the first anomaly of the first (worst)
/// episode that has one.
fn choose(anomalies: &[Anomaly], kind: Option<AnomalyKind>) -> Result<Anomaly, ShrinkError> {
    if anomalies.is_empty() {
        return Err(ShrinkError::NoAnomaly);
    }
    let wanted = |a: &Anomaly| kind.is_none_or(|k| a.kind == k);
    let chosen = episodes(anomalies)
        .iter()
        .flat_map(|e| e.anomalies.iter().map(|&i| &anomalies[i]))
        .find(|a| wanted(a));
    match (chosen, kind) {
        (Some(anomaly), _) => Ok(anomaly.clone()),
        (None, Some(kind)) => {
            let mut counts = std::collections::BTreeMap::<&str, usize>::new();
            for a in anomalies {
                *counts.entry(a.kind.as_str()).or_default() += 1;
            }
            let found: Vec<String> = counts.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
            Err(ShrinkError::KindNotFound {
                kind,
                found: found.join(", "),
            })
        }
        (None, None) => Err(ShrinkError::NoAnomaly),
    }
}

/// The history of `kept` (positions in `lines`, ascending), renumbered 0, 1, 2, ...
fn build(lines: &[RecordedLine], kept: &[usize]) -> Result<History, ShrinkError> {
    let mut builder = HistoryBuilder::new("shrink");
    for (n, &line) in kept.iter().enumerate() {
        let event = lines[line]
            .event(n as u64)
            .ok_or(ShrinkError::Refused { line: line + 1 })?;
        // A subset of units breaks none of the format's rules (each process keeps its
        // operations whole and in order); were one broken anyway, that subset shows nothing.
        if builder.push(n as u64 + 1, &event).is_err() {
            return Err(ShrinkError::Refused { line: line + 1 });
        }
    }
    Ok(builder.finish())
}

/// The units of `history` (built from every line, so an op's `index` is its line).
fn units(history: &History) -> Vec<Unit> {
    let end_of_history = history.time_span().1;
    let mut units = Vec::new();
    // Each process's pending invoke: its unit.
    let mut pending: Vec<Option<usize>> = vec![None; history.processes.len()];
    for op in &history.ops {
        if op.process == NEMESIS {
            continue;
        }
        let slot = &mut pending[op.process as usize];
        match slot.take() {
            Some(u) if op.ty.is_completion() => {
                let unit: &mut Unit = &mut units[u];
                unit.lines.push(op.index as usize);
                unit.end = op.time;
            }
            _ => {
                *slot = Some(units.len());
                units.push(Unit {
                    lines: vec![op.index as usize],
                    start: op.time,
                    // Never completed: pending to the end.
                    end: end_of_history,
                    process: Some(op.process),
                    key: op.key,
                });
            }
        }
    }
    // The faults as the checker pairs them (`history::fault_spans`). Faults a heal shares
    // (two nested pauses that one resume ended) are one unit, so that no line is in two:
    // each event's group is found through `root` (union-find on positions in `faults`).
    let mut root: Vec<usize> = (0..history.faults.len()).collect();
    fn find(root: &mut [usize], mut f: usize) -> usize {
        while root[f] != f {
            root[f] = root[root[f]];
            f = root[f];
        }
        f
    }
    let spans = fault_spans(history);
    for span in &spans {
        for &heal in &span.heals {
            let (a, b) = (find(&mut root, span.begin), find(&mut root, heal));
            root[a] = b;
        }
    }
    let mut groups: std::collections::BTreeMap<usize, Unit> = Default::default();
    for span in &spans {
        let (start, end) = (span.start, span.end_or(end_of_history));
        let unit = groups
            .entry(find(&mut root, span.begin))
            .or_insert_with(|| Unit {
                lines: Vec::new(),
                start,
                end,
                process: None,
                key: NO_KEY,
            });
        unit.lines.extend(
            std::iter::once(span.begin)
                .chain(span.heals.iter().copied())
                .map(|f| history.faults[f].index as usize),
        );
        unit.start = unit.start.min(start);
        unit.end = unit.end.max(end);
    }
    let mut in_span = vec![false; history.faults.len()];
    for span in &spans {
        in_span[span.begin] = true;
        span.heals.iter().for_each(|&h| in_span[h] = true);
    }
    for mut unit in groups.into_values() {
        unit.lines.sort_unstable();
        unit.lines.dedup();
        units.push(unit);
    }
    // A nemesis event no span holds (an `invoke`): a unit of its own.
    for (f, fault) in history.faults.iter().enumerate() {
        if !in_span[f] {
            units.push(Unit {
                lines: vec![fault.index as usize],
                start: fault.time,
                end: fault.time,
                process: None,
                key: NO_KEY,
            });
        }
    }
    units.sort_by_key(|u| u.lines[0]);
    units
}

/// Writes the lines `kept` (ascending) as a history: each as it was, renumbered.
pub fn write_lines<W: std::io::Write>(
    lines: &[RecordedLine],
    kept: &[usize],
    out: W,
) -> std::io::Result<W> {
    let mut writer = HistoryWriter::new(out);
    for &line in kept {
        // A recorded line's text is always in the writer's layout (`RecordedLine::parse`).
        if !writer.append_line(lines[line].text())? {
            return Err(std::io::Error::other(format!(
                "line {}: not in the writer's layout",
                line + 1
            )));
        }
    }
    writer.flush()?;
    Ok(writer.into_inner())
}

/// Which units a cut keeps.
type Keep<'a> = dyn Fn(&Unit) -> bool + 'a;

/// The checker asked whether a subset still shows the target.
struct Oracle<'a> {
    lines: &'a [RecordedLine],
    units: &'a [Unit],
    options: &'a CheckOptions,
    target: &'a Anomaly,
    checks: usize,
}

impl Oracle<'_> {
    /// Whether the units `kept` (ascending) show the target anomaly.
    fn shows(&mut self, kept: &[usize]) -> bool {
        let mut lines: Vec<usize> = kept
            .iter()
            .flat_map(|&u| self.units[u].lines.iter().copied())
            .collect();
        lines.sort_unstable();
        let Ok(history) = build(self.lines, &lines) else {
            return false;
        };
        self.checks += 1;
        let report = checker::check(&history, self.options);
        let target = self.target;
        report.anomalies.iter().any(|a| {
            a.kind == target.kind
                && a.key == target.key
                && a.start == target.start
                && (a.kind != AnomalyKind::Overlap || a.lease_expired == target.lease_expired)
                && a.indices.iter().all(|&i| {
                    lines
                        .get(i as usize)
                        .is_some_and(|&line| target.indices.binary_search(&(line as u64)).is_ok())
                })
        })
    }

    /// The first of a series of ever wider cuts around the target that still shows it:
    /// the target's own units, then its key's operations by its processes, then by every
    /// process, within ever wider margins of its time, with the faults in that window; at
    /// last its key at any time with every fault, and everything.
    fn cut(&mut self, history: &History) -> Vec<usize> {
        let target = self.target;
        let named = |u: &Unit| {
            u.lines
                .iter()
                .any(|&l| target.indices.binary_search(&(l as u64)).is_ok())
        };
        let key = history
            .keys
            .iter()
            .position(|k| *k == target.key)
            .map_or(NO_KEY, |k| k as KeyId);
        let involved = |u: &Unit| {
            u.process
                .is_some_and(|p| target.processes.contains(&history.process_number(p)))
        };
        let (from, to) = target
            .indices
            .iter()
            .filter_map(|&i| self.units.iter().find(|u| u.lines.contains(&(i as usize))))
            .fold((target.start, target.end), |(a, b), u| {
                (a.min(u.start), b.max(u.end))
            });
        const MS: i64 = 1_000_000;
        let mut tries: Vec<Box<Keep>> = vec![Box::new(named)];
        for margin in [0, 100 * MS, 1000 * MS, 10_000 * MS] {
            let near = move |u: &Unit| {
                u.end >= from.saturating_sub(margin) && u.start <= to.saturating_add(margin)
            };
            let ours = move |u: &Unit| u.key == key || u.process.is_none();
            tries.push(Box::new(move |u: &Unit| {
                named(u) || (near(u) && ours(u) && (u.process.is_none() || involved(u)))
            }));
            tries.push(Box::new(move |u: &Unit| named(u) || (near(u) && ours(u))));
        }
        tries.push(Box::new(move |u: &Unit| {
            u.key == key || u.process.is_none()
        }));
        let mut last: Vec<usize> = Vec::new();
        for keep in tries {
            let cut: Vec<usize> = (0..self.units.len())
                .filter(|&u| keep(&self.units[u]))
                .collect();
            // A wider margin that adds nothing needs no second check.
            if cut == last {
                continue;
            }
            if self.shows(&cut) {
                return cut;
            }
            last = cut;
        }
        (0..self.units.len()).collect()
    }

    /// Zeller's ddmin: try each of `n` chunks alone, then each complement; on success
    /// continue with that, else split finer, until chunks are single units.
    fn ddmin(&mut self, mut set: Vec<usize>) -> Vec<usize> {
        let mut n = 2;
        while set.len() >= 2 {
            let size = set.len().div_ceil(n);
            let chunks: Vec<Vec<usize>> = set.chunks(size).map(<[usize]>::to_vec).collect();
            let mut next = None;
            for chunk in &chunks {
                if self.shows(chunk) {
                    next = Some((chunk.clone(), 2));
                    break;
                }
            }
            if next.is_none() && chunks.len() > 2 {
                for i in 0..chunks.len() {
                    let rest: Vec<usize> = chunks
                        .iter()
                        .enumerate()
                        .filter(|&(j, _)| j != i)
                        .flat_map(|(_, c)| c.iter().copied())
                        .collect();
                    if self.shows(&rest) {
                        next = Some((rest, (n - 1).max(2)));
                        break;
                    }
                }
            }
            match next {
                Some((smaller, granularity)) => {
                    set = smaller;
                    n = granularity;
                }
                None if n >= set.len() => break,
                None => n = (2 * n).min(set.len()),
            }
        }
        set
    }

    /// Removes units one at a time, latest first, while the rest still shows the target,
    /// until no single unit can go.
    fn one_at_a_time(&mut self, mut set: Vec<usize>) -> Vec<usize> {
        loop {
            let mut removed = false;
            let mut i = set.len();
            while i > 0 {
                i -= 1;
                let mut without = set.clone();
                without.remove(i);
                if self.shows(&without) {
                    set = without;
                    removed = true;
                }
            }
            if !removed {
                return set;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::history::reader::read_jsonl;
    use crate::report::Report;

    fn parse(text: &str) -> Vec<RecordedLine> {
        text.lines()
            .map(|l| RecordedLine::parse(l.to_string()).expect("an event line"))
            .collect()
    }

    fn recorded_run(name: &str) -> Vec<RecordedLine> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("history/runs")
            .join(name);
        parse(&std::fs::read_to_string(path).expect("a recorded run"))
    }

    /// The shrunk file's text, as `lockaudit shrink` writes it.
    fn text_of(lines: &[RecordedLine], kept: &[usize]) -> String {
        String::from_utf8(write_lines(lines, kept, Vec::new()).expect("written")).expect("UTF-8")
    }

    /// The real reader's history of `text` (it refuses a file that is not well-formed) and
    /// its check with the default options.
    fn check_text(text: &str) -> (History, Report) {
        let history = read_jsonl(text.as_bytes(), "shrunk", None).expect("a well-formed history");
        let report = checker::check(&history, &CheckOptions::default());
        (history, report)
    }

    fn count(report: &Report, kind: AnomalyKind) -> u64 {
        report
            .checks
            .values()
            .filter_map(|c| c.counts.get(&kind))
            .sum()
    }

    /// Every kept completion's invoke is kept: the line before it of its process, in the
    /// original, is kept and is an invoke.
    fn assert_operations_whole(lines: &[RecordedLine], kept: &[usize]) {
        for &line in kept {
            let event = &lines[line];
            if event.ty() == EventType::Invoke || event.process() == Process::Nemesis {
                continue;
            }
            let invoke = (0..line)
                .rev()
                .find(|&l| lines[l].process() == event.process())
                .expect("a completion has an invoke");
            assert_eq!(lines[invoke].ty(), EventType::Invoke);
            assert!(
                kept.contains(&invoke),
                "line {line} kept without its invoke {invoke}"
            );
        }
    }

    /// Shrinks, and checks what every shrunk history must be: well-formed, showing the kind,
    /// and 1-minimal (without any one of its units, the oracle no longer sees the target).
    fn shrink_and_judge(lines: &[RecordedLine], kind: Option<AnomalyKind>) -> (Shrunk, Report) {
        let shrunk = shrink(lines, kind, &CheckOptions::default()).expect("shrunk");
        assert_operations_whole(lines, &shrunk.kept);
        let (history, report) = check_text(&text_of(lines, &shrunk.kept));
        assert_eq!(history.ops.len(), shrunk.kept.len());
        assert!(count(&report, shrunk.kind) >= 1, "{report:?}");
        if let Some(kind) = kind {
            assert_eq!(shrunk.kind, kind);
        }
        // The units of what was kept, one at a time left out.
        let all = build(lines, &(0..lines.len()).collect::<Vec<_>>()).expect("built");
        let units = units(&all);
        let options = CheckOptions {
            anomaly_limit: usize::MAX,
            ..CheckOptions::default()
        };
        let mut oracle = Oracle {
            lines,
            units: &units,
            options: &options,
            target: &shrunk.target,
            checks: 0,
        };
        let kept: Vec<usize> = (0..units.len())
            .filter(|&u| units[u].lines.iter().all(|l| shrunk.kept.contains(l)))
            .collect();
        let covered: usize = kept.iter().map(|&u| units[u].lines.len()).sum();
        assert_eq!(covered, shrunk.kept.len(), "the kept lines are whole units");
        assert!(oracle.shows(&kept));
        for i in 0..kept.len() {
            let mut without = kept.clone();
            without.remove(i);
            assert!(
                !oracle.shows(&without),
                "unit {:?} could go too",
                units[kept[i]].lines
            );
        }
        (shrunk, report)
    }

    use crate::history::{EventType, Process};

    /// Process 0 holds lock:a and is paused past its lease; process 1 takes lock:a meanwhile
    /// (the overlap); around them, process 2 cycles on lock:b, process 1 takes lock:b, and
    /// process 3's last acquire never completes.
    fn overlap_among_noise() -> String {
        let mut events: Vec<(i64, String)> = Vec::new();
        let ms = 1_000_000i64;
        let client = |t: i64, p: u64, ty: &str, f: &str, key: &str, value: &str| {
            (
                t * ms,
                format!(
                    r#""time":{},"process":{p},"type":"{ty}","f":"{f}","key":"{key}"{value}"#,
                    t * ms
                ),
            )
        };
        let lease = r#","value":{"token":null,"lease_ms":1000}"#;
        events.push(client(0, 0, "invoke", "acquire", "lock:a", ""));
        events.push(client(1, 0, "ok", "acquire", "lock:a", lease));
        events.push((100 * ms, format!(r#""time":{},"process":"nemesis","type":"info","f":"pause","value":{{"targets":["worker-0"],"processes":[0]}}"#, 100 * ms)));
        events.push((2000 * ms, format!(r#""time":{},"process":"nemesis","type":"info","f":"resume","value":{{"targets":["worker-0"],"processes":[0]}}"#, 2000 * ms)));
        events.push(client(2100, 0, "invoke", "release", "lock:a", ""));
        events.push(client(2101, 0, "fail", "release", "lock:a", ""));
        events.push(client(1500, 1, "invoke", "acquire", "lock:a", ""));
        events.push(client(1501, 1, "ok", "acquire", "lock:a", lease));
        events.push(client(1600, 1, "invoke", "release", "lock:a", ""));
        events.push(client(1601, 1, "ok", "release", "lock:a", ""));
        events.push(client(1700, 1, "invoke", "acquire", "lock:b", ""));
        events.push(client(1701, 1, "fail", "acquire", "lock:b", ""));
        for cycle in 0..15 {
            let t = cycle * 200 + 5;
            events.push(client(t, 2, "invoke", "acquire", "lock:b", ""));
            events.push(client(t + 1, 2, "ok", "acquire", "lock:b", lease));
            events.push(client(t + 100, 2, "invoke", "release", "lock:b", ""));
            events.push(client(t + 101, 2, "ok", "release", "lock:b", ""));
        }
        events.push(client(2900, 3, "invoke", "acquire", "lock:a", ""));
        events.sort_by_key(|(t, _)| *t);
        events
            .iter()
            .enumerate()
            .map(|(i, (_, rest))| format!("{{\"index\":{i},{rest}}}\n"))
            .collect()
    }

    #[test]
    fn an_overlap_among_noise_shrinks_to_its_two_acquires() {
        let lines = parse(&overlap_among_noise());
        assert_eq!(lines.len(), 73);
        let (shrunk, report) = shrink_and_judge(&lines, Some(AnomalyKind::Overlap));
        assert_eq!(shrunk.events_before, 73);
        // Each holder's acquire, invoke and ok: nothing else is needed.
        let kept: Vec<(Process, &str)> = shrunk
            .kept
            .iter()
            .map(|&l| (lines[l].process(), lines[l].f()))
            .collect();
        assert_eq!(
            kept,
            [
                (Process::Client(0), "acquire"),
                (Process::Client(0), "acquire"),
                (Process::Client(1), "acquire"),
                (Process::Client(1), "acquire")
            ]
        );
        assert_eq!(report.anomalies[0].lease_expired, Some(true));
    }

    #[test]
    fn an_invoke_never_completed_is_a_unit_of_its_own_and_a_fault_pair_is_one() {
        let lines = parse(&overlap_among_noise());
        let all = build(&lines, &(0..lines.len()).collect::<Vec<_>>()).unwrap();
        let units = units(&all);
        let covered: usize = units.iter().map(|u| u.lines.len()).sum();
        assert_eq!(covered, lines.len(), "every line in one unit");
        let pending = units
            .iter()
            .find(|u| lines[u.lines[0]].process() == Process::Client(3))
            .unwrap();
        assert_eq!(pending.lines.len(), 1);
        let pause = units
            .iter()
            .find(|u| lines[u.lines[0]].f() == "pause")
            .unwrap();
        assert_eq!(
            pause
                .lines
                .iter()
                .map(|&l| lines[l].f())
                .collect::<Vec<_>>(),
            ["pause", "resume"]
        );
    }

    #[test]
    fn a_stale_write_keeps_both_holds_and_both_writes() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("history/stale-write-unfenced.jsonl");
        let lines = parse(&std::fs::read_to_string(path).unwrap());
        let (shrunk, _) = shrink_and_judge(&lines, Some(AnomalyKind::StaleWrite));
        // Two acquires and two writes, invoke and ok each: the pause is not needed.
        assert_eq!(shrunk.kept, [0, 1, 5, 6, 7, 8, 12, 13]);
    }

    #[test]
    fn a_recorded_deadlock_keeps_the_kill_that_freed_the_key() {
        let lines = recorded_run("kill-clients-setnx-del.jsonl");
        let (shrunk, report) = shrink_and_judge(&lines, None);
        assert_eq!(shrunk.kind, AnomalyKind::Unavailable);
        assert!(shrunk.kept.len() <= 20, "{} events", shrunk.kept.len());
        let faults: Vec<&str> = shrunk
            .kept
            .iter()
            .filter(|&&l| lines[l].process() == Process::Nemesis)
            .map(|&l| lines[l].f())
            .collect();
        // The kill, with the restart it pairs with.
        assert_eq!(faults, ["kill", "restart"]);
        assert_eq!(count(&report, AnomalyKind::Unavailable), 1);
    }

    #[test]
    fn recorded_runs_shrink_for_each_kind_they_show() {
        for (run, kind, at_most) in [
            ("mix-reentrant.jsonl", AnomalyKind::LostLock, 4),
            ("pause-clients-rw-lock.jsonl", AnomalyKind::Overlap, 8),
            ("pause-clients-rw-lock.jsonl", AnomalyKind::StaleWrite, 8),
            ("clock-skew-setnx-getset.jsonl", AnomalyKind::Overlap, 8),
        ] {
            let lines = recorded_run(run);
            let (shrunk, _) = shrink_and_judge(&lines, Some(kind));
            assert!(
                shrunk.kept.len() <= at_most,
                "{run} {kind}: {} events",
                shrunk.kept.len()
            );
        }
    }

    #[test]
    fn the_default_kind_is_the_worst_episodes() {
        // pause-clients-rw-lock shows a stale write, the worst class of all.
        let lines = recorded_run("pause-clients-rw-lock.jsonl");
        let shrunk = shrink(&lines, None, &CheckOptions::default()).unwrap();
        assert_eq!(shrunk.kind, AnomalyKind::StaleWrite);
    }

    #[test]
    fn a_kind_the_history_does_not_show_and_a_valid_history_are_refused() {
        let lines = recorded_run("mix-reentrant.jsonl");
        let error =
            shrink(&lines, Some(AnomalyKind::Overlap), &CheckOptions::default()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "no overlap anomaly to keep: the checker finds lost-lock ×1"
        );
        let lines = recorded_run("pause-servers-set-nx-px.jsonl");
        let error = shrink(&lines, None, &CheckOptions::default()).unwrap_err();
        assert!(matches!(error, ShrinkError::NoAnomaly), "{error}");
    }

    #[test]
    fn a_subset_that_shows_the_kind_only_by_a_removed_release_is_not_the_same_anomaly() {
        // Process 0 holds and releases; process 1 takes the key after the release. Without
        // the release, process 0 would hold to the end: an overlap of that kind, but not
        // one the history has. The target here is the real overlap of processes 1 and 2.
        let text = r#"{"index":0,"time":0,"process":0,"type":"invoke","f":"acquire","key":"a"}
{"index":1,"time":1,"process":0,"type":"ok","f":"acquire","key":"a","value":{"token":null,"lease_ms":1000}}
{"index":2,"time":10,"process":0,"type":"invoke","f":"release","key":"a"}
{"index":3,"time":11,"process":0,"type":"ok","f":"release","key":"a"}
{"index":4,"time":20,"process":1,"type":"invoke","f":"acquire","key":"a"}
{"index":5,"time":21,"process":1,"type":"ok","f":"acquire","key":"a","value":{"token":null,"lease_ms":1000}}
{"index":6,"time":30,"process":2,"type":"invoke","f":"acquire","key":"a"}
{"index":7,"time":31,"process":2,"type":"ok","f":"acquire","key":"a","value":{"token":null,"lease_ms":1000}}
"#;
        let lines = parse(text);
        let shrunk = shrink(&lines, Some(AnomalyKind::Overlap), &CheckOptions::default()).unwrap();
        assert_eq!(shrunk.target.indices, [5, 7]);
        assert_eq!(shrunk.kept, [4, 5, 6, 7]);
        // The oracle refuses process 0 and 2 without the release: their overlap is made up.
        let all = build(&lines, &(0..lines.len()).collect::<Vec<_>>()).unwrap();
        let units = units(&all);
        let mut oracle = Oracle {
            lines: &lines,
            units: &units,
            options: &CheckOptions::default(),
            target: &shrunk.target,
            checks: 0,
        };
        // Units: 0 = acquire of 0, 1 = its release, 2 = acquire of 1, 3 = acquire of 2.
        assert!(!oracle.shows(&[0, 3]));
        assert!(oracle.shows(&[2, 3]));
    }

    /// The tricky cases of pairing a fault with its heal, in one history: faults on
    /// different targets that overlap and share one (worker-0's and worker-1's cuts from
    /// redis-1, healed in the other order), nested pauses of one server that one resume
    /// ends, heals with no fault to end, a pause of two servers resumed only in part, a fault
    /// never healed. The checker's liveness, the pictures' bands and shrink's units must
    /// all pair them as `history::fault_spans` does. Before that function, bands ended
    /// worker-0's cut at worker-1's heal and the second pause at the spare resume, and
    /// liveness ended both cuts at the first heal and the two-server pause at its partial
    /// resume.
    #[test]
    fn liveness_bands_and_shrink_pair_faults_and_heals_alike() {
        let nemesis = |index: u32, time: i64, f: &str, targets: &[&str]| {
            format!(
                r#"{{"index":{index},"time":{time},"process":"nemesis","type":"info","f":"{f}","value":{{"targets":{},"processes":[]}}}}"#,
                serde_json::to_string(targets).unwrap()
            )
        };
        let text = [
            nemesis(0, 10, "partition", &["worker-0", "redis-1"]),
            nemesis(1, 20, "partition", &["worker-1", "redis-1"]),
            nemesis(2, 30, "heal", &["worker-1", "redis-1"]),
            nemesis(3, 40, "pause", &["redis-0"]),
            nemesis(4, 50, "pause", &["redis-0"]),
            nemesis(5, 60, "resume", &["redis-0"]),
            nemesis(6, 70, "heal", &["worker-0", "redis-1"]),
            nemesis(7, 80, "resume", &["redis-0"]),
            nemesis(8, 90, "resume", &["redis-2"]),
            nemesis(9, 100, "pause", &["redis-2", "redis-3"]),
            nemesis(10, 110, "resume", &["redis-2"]),
            nemesis(11, 120, "latency", &["worker-2", "redis-3"]),
            r#"{"index":12,"time":200,"process":0,"type":"invoke","f":"acquire","key":"a"}"#.into(),
        ]
        .join("\n");
        let history = read_jsonl(text.as_bytes(), "test", None).unwrap();
        let end = 200;
        // (its events' indices, start, end); an instant ends at its start.
        let expected: Vec<(Vec<u32>, i64, i64)> = vec![
            (vec![0, 6], 10, 70),
            (vec![1, 2], 20, 30),
            (vec![3, 5], 40, 60),
            (vec![4, 5], 50, 60),
            (vec![7], 80, 80),
            (vec![8], 90, 90),
            (vec![9, 10], 100, end),
            (vec![11], 120, end),
        ];
        let spans: Vec<(Vec<u32>, i64, i64)> = fault_spans(&history)
            .iter()
            .map(|s| {
                let events = std::iter::once(s.begin).chain(s.heals.iter().copied());
                let indices = events.map(|f| history.faults[f].index).collect();
                (indices, s.start, s.end_or(end))
            })
            .collect();
        assert_eq!(spans, expected, "fault_spans");

        let bands: Vec<(Vec<u32>, i64, i64)> = crate::history::fault_bands(&history)
            .into_iter()
            .map(|b| (b.indices, b.start, b.end))
            .collect();
        assert_eq!(bands, expected, "the pictures' bands");

        // Liveness: the server-side ones (every one here but the spare resumes), each
        // with the event that healed it.
        let server: Vec<(i64, i64, Option<u32>)> = expected
            .iter()
            .filter(|(events, _, _)| ![7, 8].contains(&events[0]))
            .map(|(events, start, end)| {
                (
                    *start,
                    *end,
                    (*end != 200).then(|| events[events.len() - 1]),
                )
            })
            .collect();
        let liveness: Vec<(i64, i64, Option<u32>)> =
            crate::checker::liveness::server_faults(&history)
                .iter()
                .map(|f| (f.start, f.heal, f.heal_index))
                .collect();
        assert_eq!(liveness, server, "liveness");

        // Shrink: one unit per fault, the two pauses one resume ended together.
        let mut fault_units: Vec<(Vec<usize>, i64, i64)> = units(&history)
            .into_iter()
            .filter(|u| u.process.is_none())
            .map(|u| (u.lines, u.start, u.end))
            .collect();
        fault_units.sort();
        assert_eq!(
            fault_units,
            vec![
                (vec![0, 6], 10, 70),
                (vec![1, 2], 20, 30),
                (vec![3, 4, 5], 40, 60),
                (vec![7], 80, 80),
                (vec![8], 90, 90),
                (vec![9, 10], 100, end),
                (vec![11], 120, end),
            ],
            "shrink's units"
        );
    }
}
