//! The human summary `lockaudit check` prints: the verdict, each check, the episodes of anomalies worst
//! first (see `episodes`), each with its first anomaly.

use std::fmt::Write;

use super::episodes::episodes;
use super::{Report, ANOMALY_KINDS};
use crate::units::fmt_span;

/// How many episodes the summary spells out (worst first), each with its first anomaly.
const SHOWN: usize = 6;

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
    let total: u64 = ANOMALY_KINDS.iter().map(|k| report.count(k)).sum();
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
    #[test]
    fn counts_read_as_english() {
        assert_eq!(super::counted(1, "key"), "1 key");
        assert_eq!(super::counted(4, "key"), "4 keys");
        assert_eq!(super::counted(2, "process"), "2 processes");
        assert_eq!(super::counted(3, "anomaly"), "3 anomalies");
        assert_eq!(super::counted(0, "fault"), "0 faults");
    }
}
