//! The human summary `lockaudit check` prints: the verdict, each check, the episodes of anomalies worst
//! first (see `episodes`), each with its first anomaly.

use std::fmt::Write;

use super::episodes::episodes;
use super::{AnomalyKind, KeyStats, Report};
use crate::units::fmt_span;

/// How many episodes the summary spells out (worst first), each with its first anomaly.
const SHOWN: usize = 6;

/// How many keys the per-key section lists (most queue jumps first).
const KEYS_SHOWN: usize = 8;

pub fn render_summary(report: &Report, source: &str) -> String {
    let mut out = String::new();
    let stats = &report.stats;
    let _ = writeln!(
        out,
        "{source}: {}, {}, {}, {} over {}",
        counted(stats.events, "event"),
        counted(stats.processes, "process"),
        counted(stats.keys, "key"),
        counted(stats.faults, "fault"),
        fmt_span(stats.time_span_ns[1].saturating_sub(stats.time_span_ns[0]))
    );
    for warning in &report.warnings {
        let _ = writeln!(out, "warning: {warning}");
    }
    let total: u64 = AnomalyKind::ALL.into_iter().map(|k| report.count(k)).sum();
    match report.valid {
        Some(true) => {
            let _ = writeln!(out, "VALID: no anomalies");
        }
        Some(false) => {
            let _ = writeln!(out, "INVALID: {}", counted(total, "anomaly"));
        }
        None => {
            let why = report.unknown.as_deref().unwrap_or("nothing was tested");
            let _ = writeln!(out, "UNKNOWN: {why}");
        }
    }
    for (name, check) in &report.checks {
        let found: Vec<String> = check
            .counts
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(kind, n)| format!("{n} {kind}"))
            .collect();
        let verdict = if check.valid { "ok" } else { "FAIL" };
        let line = format!("  {name:<17} {verdict:<5} {}", found.join(", "));
        let _ = writeln!(out, "{}", line.trim_end());
    }
    per_key(&mut out, report);
    let episodes = episodes(&report.anomalies);
    if !episodes.is_empty() {
        let _ = writeln!(out, "episodes, worst first (the first anomaly of each):");
        for episode in episodes.iter().take(SHOWN) {
            let anomaly = &report.anomalies[episode.first()];
            let events: Vec<String> = anomaly.indices.iter().map(u64::to_string).collect();
            let _ = writeln!(
                out,
                "  {}\n    [{}] {} (events {})\n      {}",
                episode.headline(),
                anomaly.kind,
                anomaly.key,
                events.join(", "),
                anomaly.explanation
            );
            for step in &anomaly.cycle {
                let _ = writeln!(out, "        {step}");
            }
        }
        let more = episodes.len().saturating_sub(SHOWN);
        if more > 0 {
            let rest: usize = episodes[SHOWN..].iter().map(|e| e.anomalies.len()).sum();
            let _ = writeln!(
                out,
                "  … and {} more ({}; all listed in report.json, up to the limit)",
                counted(more as u64, "episode"),
                counted(rest as u64, "anomaly"),
            );
        }
    }
    out
}

/// The keys with something to say about order and modes (some acquire was shared, or
/// marked fair, or overtook a waiter): their waits by mode and their queue jumps (a fair
/// lock's 0 shows too). Nothing for a key with none of these.
fn per_key(out: &mut String, report: &Report) {
    let mut keys: Vec<(&String, &KeyStats)> = report
        .stats
        .per_key
        .unordered()
        .filter(|(_, s)| {
            s.wait_ms_by_mode.shared.is_some() || s.queue_jumps > 0 || s.queue_jumps_fair.is_some()
        })
        .collect();
    if keys.is_empty() {
        return;
    }
    keys.sort_by_key(|(name, s)| (std::cmp::Reverse(s.queue_jumps), *name));
    let _ = writeln!(
        out,
        "per key (wait p50/p99 by mode; queue jumps: grants that overtook an earlier waiter):"
    );
    let ms = |v: f64| fmt_span((v * 1e6) as i64);
    for (name, stats) in keys.iter().take(KEYS_SHOWN) {
        let mut parts = Vec::new();
        // Every key listed shows its waits: a fair lock's queue is judged by them as much
        // as by its jumps.
        if !stats.wait_ms_by_mode.is_empty() {
            let modes: Vec<String> = stats
                .wait_ms_by_mode
                .iter()
                .map(|(mode, p)| format!("{mode} {}/{} ({})", ms(p.p50), ms(p.p99), p.count))
                .collect();
            parts.push(format!("wait {}", modes.join(", ")));
        }
        if stats.queue_jumps > 0 || stats.queue_jumps_fair.is_some() {
            let mut jumps = counted(stats.queue_jumps, "queue jump");
            if let Some(fair) = stats.queue_jumps_fair {
                let _ = write!(jumps, " ({fair} fair over fair)");
            }
            parts.push(jumps);
        }
        let _ = writeln!(out, "  {name}: {}", parts.join("; "));
    }
    if keys.len() > KEYS_SHOWN {
        let _ = writeln!(
            out,
            "  … and {} more (all in report.json)",
            counted((keys.len() - KEYS_SHOWN) as u64, "key")
        );
    }
}

/// "1 key", "2 keys", "1 process", "3 anomalies".
fn counted(n: u64, noun: &str) -> String {
    if n == 1 {
        return format!("1 {noun}");
    }
    let plural = if let Some(stem) = noun
        .strip_suffix('y')
        .filter(|stem| !stem.ends_with(['a', 'e', 'i', 'o', 'u']))
    {
        format!("{stem}ies")
    } else if noun.ends_with('s') {
        format!("{noun}es")
    } else {
        format!("{noun}s")
    };
    format!("{n} {plural}")
}

#[cfg(test)]
mod tests {
    use crate::report::{KeyStats, Percentiles, Report};

    fn waits(count: u64, p50: f64, p99: f64) -> Percentiles {
        Percentiles {
            count,
            p50,
            p90: p99,
            p99,
            max: p99,
        }
    }

    #[test]
    fn the_per_key_section_shows_modes_and_queue_jumps_only_where_they_say_something() {
        let mut report = Report::default();
        let per_key = &mut report.stats.per_key;
        per_key.insert("plain".into(), KeyStats::default());
        let mut rw = KeyStats::default();
        rw.wait_ms_by_mode.exclusive = Some(waits(3, 2.0, 7.0));
        rw.wait_ms_by_mode.shared = Some(waits(2, 0.25, 7.0));
        per_key.insert("rw".into(), rw);
        let mut fair = KeyStats {
            queue_jumps_fair: Some(0),
            ..KeyStats::default()
        };
        fair.wait_ms_by_mode.exclusive = Some(waits(5, 120.0, 900.0));
        per_key.insert("fair".into(), fair);
        per_key.insert(
            "racy".into(),
            KeyStats {
                queue_jumps: 4,
                ..KeyStats::default()
            },
        );
        let text = super::render_summary(&report, "h");
        let section: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("per key"))
            .skip(1)
            .collect();
        assert_eq!(
            section,
            [
                "  racy: 4 queue jumps",
                "  fair: wait exclusive 120ms/900ms (5); 0 queue jumps (0 fair over fair)",
                "  rw: wait exclusive 2ms/7ms (3), shared 250µs/7ms (2)",
            ],
            "{text}"
        );
        // A key with neither shared acquires nor fair ones nor jumps: no section at all.
        let plain = Report::default();
        assert!(!super::render_summary(&plain, "h").contains("per key"));
    }

    #[test]
    fn counts_read_as_english() {
        assert_eq!(super::counted(1, "key"), "1 key");
        assert_eq!(super::counted(4, "key"), "4 keys");
        assert_eq!(super::counted(2, "process"), "2 processes");
        assert_eq!(super::counted(3, "anomaly"), "3 anomalies");
        assert_eq!(super::counted(0, "fault"), "0 faults");
    }
}
