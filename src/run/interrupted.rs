//! A run cut short by Ctrl-C or SIGTERM: once the cleanup has stopped every child, the
//! history recorded so far is checked and `report.json` written, marked
//! `"interrupted": "SIGINT"`, and the verdict printed on stdout (the summary, or with
//! `--json` that report.json's text); the process then exits 130 (143 for SIGTERM). What
//! the run had proven before the signal is kept.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::checker::{self, CheckOptions};
use crate::cluster::on_exit::{self, Registration};
use crate::history;
use crate::outfile;
use crate::report::{render_summary, Report};

use super::{report_json, RunOptions};

/// Registers the interrupted run's report for `dir`; dropping the registration (the run
/// ended) withdraws it. `finishing` is held while either report is written, so that the
/// run's own and this one never race; it says whether the run's own was (then a signal
/// leaves it as it is). `options.json`: print the report's JSON, not the summary; an
/// audit's cell (no progress of its own) prints nothing: its audit says what was cut.
pub(super) fn register(
    dir: &Path,
    options: &RunOptions,
    warnings: &[String],
    finishing: Arc<Mutex<bool>>,
) -> Registration {
    let dir = dir.to_path_buf();
    let check = options.check.clone();
    let (json, print) = (options.json, options.progress);
    let warnings = warnings.to_vec();
    on_exit::register_after_stop(move |signal| {
        let finishing = finishing.lock().unwrap_or_else(|p| p.into_inner());
        if *finishing {
            return;
        }
        match write_report(&dir, &check, &warnings, signal) {
            Ok(_) if !print => {}
            Ok((report, json_text, history)) => {
                let covers = format!(
                    "interrupted by {signal}: the verdict covers the {} events recorded before it\n",
                    report.stats.events
                );
                let report_line = format!(
                    "report: {} (marked interrupted)\n",
                    dir.join("report.json").display()
                );
                // The process ends next: a stdout that cannot take it has nothing more to
                // lose, and the exit code is the signal's either way.
                if json {
                    crate::streams::err(&format!("run: {}\n{covers}{report_line}", dir.display()));
                    let _ = crate::streams::out(&json_text);
                } else {
                    let mut text = format!("run: {}\n{covers}", dir.display());
                    text += &render_summary(&report, &history.display().to_string());
                    text += &report_line;
                    let _ = crate::streams::out(&text);
                }
            }
            Err(why) => crate::note!("lockaudit: interrupted by {signal}: no report: {why}"),
        }
    })
}

/// Writes the run's own report with `write`, unless a signal came first (then the report is
/// the interruption's to write, and None is returned). `own`: the run's verdict is the
/// command's, with this exit code (`lockaudit run`): from then on a signal changes neither
/// (`on_exit::give_verdict`). Otherwise (an audit's cell) a signal after it leaves the
/// report as it is.
pub(super) fn write_verdict(
    finishing: &Mutex<bool>,
    own: Option<u8>,
    write: impl FnOnce() -> std::io::Result<()>,
) -> Option<std::io::Result<()>> {
    let mut written = finishing.lock().unwrap_or_else(|p| p.into_inner());
    let result = match own {
        Some(code) => on_exit::give_verdict(code, write),
        None => (!crate::cluster::shutting_down()).then(write),
    };
    *written = matches!(result, Some(Ok(())));
    let given = own.is_some() && *written;
    drop(written);
    if given {
        on_exit::hold_after_verdict();
    }
    result
}

/// Why an interrupted run has no report (the message quotes the cause).
#[derive(Debug, thiserror::Error)]
enum NoReport {
    #[error("the run was interrupted before it recorded anything")]
    NothingRecorded,
    #[error("the history recorded so far does not read back: {0}")]
    Unreadable(history::HistoryError),
    #[error("{0}")]
    Json(serde_json::Error),
    #[error("cannot write {}: {error}", path.display())]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// Checks the history recorded so far in `dir` and writes its report, marked interrupted by
/// `signal`.
fn write_report(
    dir: &Path,
    check: &CheckOptions,
    warnings: &[String],
    signal: &str,
) -> Result<(Report, String, PathBuf), NoReport> {
    let path = dir.join("history.jsonl");
    if !path.is_file() {
        return Err(NoReport::NothingRecorded);
    }
    // The recorder flushes each batch as it writes it; a last line cut short is forgiven.
    let history = history::read_file(&path).map_err(NoReport::Unreadable)?;
    let report = checker::check(&history, check);
    let text = report_json(&report, warnings, Some(signal), None).map_err(NoReport::Json)?;
    let report_path = dir.join("report.json");
    if let Err(error) = outfile::write(&report_path, &text) {
        return Err(NoReport::Write {
            path: report_path,
            error,
        });
    }
    Ok((report, text, path))
}
