//! `lockaudit shrink`: a failing history cut down to what shows one anomaly, written with
//! its timeline.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};

use crate::checker;
use crate::history::{self, RecordedLine};
use crate::plot::{timeline, ProcessGroups};
use crate::report::render_summary;
use crate::shrink;

use super::{print_out, ShrinkArgs};

/// Shrinks the history, writes it and its timeline, prints what was kept; 0 when written.
pub fn command(args: ShrinkArgs) -> anyhow::Result<u8> {
    let started = std::time::Instant::now();
    let ShrinkArgs {
        history: target,
        kind,
        out,
        bounds,
    } = args;
    let path = match target.is_dir() {
        true => target.join("history.jsonl"),
        false => target,
    };
    if path.extension().is_some_and(|e| e == "edn") {
        bail!(
            "{}: shrink keeps a history's own lines, so it reads JSONL histories only",
            path.display()
        );
    }
    // The reader's verdict on the file first: its errors name the line and the field.
    let events = history::read_file(&path)?.ops.len();
    let lines = read_lines(&path, events)?;
    let options = bounds.check_options();
    let shrunk =
        shrink::shrink(&lines, kind, &options).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let out = out.unwrap_or_else(|| beside(&path, ".shrunk.jsonl"));
    crate::cluster::install_cleanup_handlers();
    crate::outfile::write_via(
        &out,
        |tmp| {
            let file = std::fs::File::create(tmp)?;
            shrink::write_lines(&lines, &shrunk.kept, std::io::BufWriter::new(file)).map(drop)
        },
        |e| e,
    )
    .with_context(|| format!("cannot write {}", out.display()))?;
    let seconds = started.elapsed().as_secs_f64();

    // What the shrunk file shows, read back as `check` would read it.
    let history = history::read_file(&out)?;
    let report = checker::check(&history, &options);
    let plots = beside(&out, "-plots");
    // As for `run`, a picture that cannot be drawn is only a warning: the file stands.
    let pictures = timeline::draw_timelines(
        &history,
        &report,
        &ProcessGroups::none(),
        &plots,
        &timeline::TimelineOptions::default(),
    )
    .unwrap_or_else(|e| {
        crate::note!("lockaudit: warning: the timeline was not drawn: {e}");
        Vec::new()
    });
    let target = &shrunk.target;
    let mut text = format!(
        "{}: {} events -> {} events in {seconds:.2}s ({} checks)\nkept: {} on {} (events {} of the original): {}\n",
        path.display(),
        shrunk.events_before,
        shrunk.kept.len(),
        shrunk.checks,
        shrunk.kind,
        target.key,
        join(&target.indices),
        target.explanation,
    );
    text += &render_summary(&report, &out.display().to_string());
    text += &format!("wrote {}\n", out.display());
    for picture in &pictures {
        text += &format!("{}\n", picture.path_png.display());
    }
    print_out(&text)?;
    Ok(0)
}

/// The first `events` lines of `path`, each parsed once (the reader has judged them).
fn read_lines(path: &Path, events: usize) -> anyhow::Result<Vec<RecordedLine>> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut lines = Vec::with_capacity(events);
    for (n, line) in std::io::BufReader::new(file)
        .lines()
        .take(events)
        .enumerate()
    {
        let line = line.with_context(|| format!("cannot read {}", path.display()))?;
        let line = RecordedLine::parse(line)
            .map_err(|e| anyhow!("{}:{}: {}", path.display(), n + 1, e.error))?;
        lines.push(line);
    }
    if lines.len() != events {
        bail!("{}: changed while it was read", path.display());
    }
    Ok(lines)
}

/// `dir/<stem><suffix>` for `dir/<stem>.<ext>`.
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(|| "history".into(), |s| s.to_string_lossy().into_owned());
    path.with_file_name(format!("{stem}{suffix}"))
}

fn join(indices: &[u64]) -> String {
    indices
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
