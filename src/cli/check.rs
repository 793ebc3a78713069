//! `lockaudit check`: a history's verdict, as a summary or report.json.

use crate::checker::{self, CheckOptions};
use crate::history;
use crate::report::render_summary;

use super::{print_out, CheckArgs};

/// Reads and checks the history, prints the verdict; the exit code is the report's.
pub fn command(args: CheckArgs) -> anyhow::Result<u8> {
    let CheckArgs {
        history: path,
        out,
        json,
        bounds,
        limit,
        threads,
    } = args;
    let started = std::time::Instant::now();
    let history = history::read_file_with_threads(&path, threads.into())?;
    tracing::info!(
        "read {} events in {:.3}s",
        history.ops.len(),
        started.elapsed().as_secs_f64()
    );
    let started = std::time::Instant::now();
    let options = CheckOptions {
        anomaly_limit: limit,
        threads: threads.into(),
        ..bounds.check_options()
    };
    let report = checker::check(&history, &options);
    tracing::info!("checked in {:.3}s", started.elapsed().as_secs_f64());
    // Written once for both the file and `--json`: with a million keys the report
    // runs to hundreds of megabytes.
    let report_json = match out.is_some() || json {
        true => Some(serde_json::to_string_pretty(&report)? + "\n"),
        false => None,
    };
    if let (Some(dir), Some(text)) = (&out, &report_json) {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        let file = dir.join("report.json");
        crate::outfile::write(&file, text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", file.display()))?;
    }
    let text = match report_json {
        Some(text) if json => {
            // Only the report on stdout: where its file went is a notice.
            if let Some(dir) = &out {
                crate::note!("report: {}", dir.join("report.json").display());
            }
            text
        }
        _ => {
            let mut text = render_summary(&report, &path.display().to_string());
            if let Some(dir) = &out {
                text += &format!("report: {}\n", dir.join("report.json").display());
            }
            text
        }
    };
    print_out(&text)?;
    if let Some(peak) = crate::sys::peak_resident_kib() {
        tracing::info!("peak resident memory {peak} KiB");
    }
    let code = report.exit_code() as u8;
    // The command ends here, and the system takes the memory back at once: freeing
    // a million keys' names and figures one by one would cost as much as a check.
    std::mem::forget(report);
    std::mem::forget(history);
    Ok(code)
}
