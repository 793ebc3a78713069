//! `lockaudit rerun RUN_DIR`: the run again, N times, and how often what it found came back.

use std::path::PathBuf;

use crate::report::Report;
use crate::run::rerun::{recurrences, Recurrence, Replay};
use crate::run::RunError;
use crate::units::fmt_time;

use super::{print_out, RerunArgs, EXIT_CANNOT_RUN};
use crate::note;

/// Runs the folder's run `--repeat` times, each verdict on stderr as it comes (progress);
/// then on stdout per kind of anomaly how many reruns found it and the median time to its
/// first, and the folders made.
pub fn command(args: RerunArgs) -> anyhow::Result<u8> {
    let replay = Replay::read(&args.run_dir)?;
    let root = args.out.unwrap_or_else(|| PathBuf::from("results"));
    let first = replay.plan(&root)?;
    let spec = &first.spec;
    let what = format!(
        "rerun of {}: {} × {}, seed {}, {} time{}\n",
        replay.dir.display(),
        spec.algorithm,
        first.nemesis_name(),
        spec.seed,
        args.repeat,
        if args.repeat == 1 { "" } else { "s" }
    );
    crate::streams::err(&what);
    crate::cluster::install_cleanup_handlers();
    let runtime = tokio::runtime::Runtime::new()?;
    let mut reports: Vec<Report> = Vec::new();
    let mut folders = Vec::new();
    let mut cannot_run = false;
    for i in 1..=args.repeat {
        // Each rerun its own folder, named when it starts.
        let plan = if i == 1 {
            first.clone()
        } else {
            replay.plan(&root)?
        };
        folders.push(plan.dir.clone());
        match runtime.block_on(crate::run::run(&plan)) {
            Ok(outcome) => {
                // The pictures are a courtesy, as after `run`.
                if let Err(e) = crate::plot::plot(&outcome.dir) {
                    note!("lockaudit: warning: the plots could not be drawn: {e}");
                }
                note!(
                    "[{i}/{}] {}: {}",
                    args.repeat,
                    outcome.dir.display(),
                    verdict(&outcome.report)
                );
                if let Some(why) = outcome.cannot_run() {
                    note!("[{i}/{}] could not be carried out: {why}", args.repeat);
                    cannot_run = true;
                }
                // Valid, but its faults never acted: it tested nothing (exit 3, as `run`).
                if let Some(why) = &outcome.untested {
                    note!("[{i}/{}] UNTESTED: {why}", args.repeat);
                    cannot_run = true;
                }
                cannot_run |= outcome.report.valid.is_none();
                reports.push(outcome.report);
            }
            Err(RunError::Schedule(why) | RunError::Workload(why)) => anyhow::bail!(why),
            Err(error) => {
                note!(
                    "[{i}/{}] {}: could not be carried out: {error}",
                    args.repeat,
                    plan.dir.display()
                );
                cannot_run = true;
            }
        }
    }
    let rows = recurrences(replay.original.as_ref(), &reports);
    let mut text = what + &table(&rows, replay.original.is_some(), reports.len());
    // A rerun that could not start left no folder, unless it kept one to say why.
    text += "reruns:\n";
    for folder in folders.iter().filter(|f| f.exists()) {
        text += &format!("  {}\n", folder.display());
    }
    print_out(&text)?;
    crate::index::update_after(&root);
    Ok(if cannot_run {
        EXIT_CANNOT_RUN
    } else if reports.iter().any(Report::is_invalid) {
        1
    } else {
        0
    })
}

/// "VALID", "INVALID: 3 overlap, 1 stale-write", "UNKNOWN: why".
fn verdict(report: &Report) -> String {
    match report.valid {
        Some(true) => "VALID".to_string(),
        None => format!(
            "UNKNOWN: {}",
            report.unknown.as_deref().unwrap_or("nothing was proven")
        ),
        Some(false) => {
            let kinds: Vec<String> = crate::report::AnomalyKind::ALL
                .into_iter()
                .map(|k| (k, report.count(k)))
                .filter(|(_, n)| *n > 0)
                .map(|(k, n)| format!("{n} {k}"))
                .collect();
            format!("INVALID: {}", kinds.join(", "))
        }
    }
}

/// The table of what came back:
///
/// ```text
/// anomaly       original at   came back in   median time to first
/// unavailable   0.053s        2 of 2         0.051s
/// overlap       (new)         1 of 2         2.310s
/// ```
fn table(rows: &[Recurrence], had_report: bool, runs: usize) -> String {
    let mut out = String::new();
    if !had_report {
        out.push_str(
            "the original has no report.json: every kind below is what the reruns found\n",
        );
    } else if rows.iter().all(|r| !r.original) {
        out.push_str("the original found no anomaly\n");
    }
    if rows.is_empty() {
        out.push_str(&format!("no rerun of {runs} found any anomaly\n"));
        return out;
    }
    let lines: Vec<[String; 4]> = rows
        .iter()
        .map(|r| {
            [
                r.kind.to_string(),
                match (r.original, r.original_first_ms) {
                    (false, _) => "(new)".to_string(),
                    (true, Some(ms)) => fmt_time((ms * 1e6) as i64),
                    (true, None) => "yes".to_string(),
                },
                format!("{} of {}", r.found, r.runs),
                r.median_first_ms()
                    .map_or("–".to_string(), |ms| fmt_time((ms * 1e6) as i64)),
            ]
        })
        .collect();
    let head = [
        "anomaly",
        "original at",
        "came back in",
        "median time to first",
    ];
    let widths: Vec<usize> = (0..4)
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .chain([head[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    for line in std::iter::once(head.map(str::to_string)).chain(lines) {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(cells.join("   ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::AnomalyKind;

    #[test]
    fn the_table_says_what_came_back_and_what_is_new() {
        let rows = [
            Recurrence {
                kind: AnomalyKind::Unavailable,
                original: true,
                original_first_ms: Some(53.0),
                found: 2,
                runs: 2,
                first_ms: vec![50.0, 52.0],
            },
            Recurrence {
                kind: AnomalyKind::Overlap,
                original: false,
                original_first_ms: None,
                found: 1,
                runs: 2,
                first_ms: vec![2310.0],
            },
        ];
        let text = table(&rows, true, 2);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("anomaly       original at"), "{text}");
        assert!(lines[1].starts_with("unavailable   0.053s"), "{text}");
        assert!(
            lines[1].contains("2 of 2") && lines[1].ends_with("0.051s"),
            "{text}"
        );
        assert!(
            lines[2].contains("(new)") && lines[2].contains("1 of 2"),
            "{text}"
        );
    }
}
