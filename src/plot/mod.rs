//! Pictures of a run: timelines, latency and rate and fairness charts, and the HTML report.

pub mod charts;
mod error;
pub mod fonts;
mod groups;
pub mod html;
pub mod model;
pub mod timeline;

use std::path::{Path, PathBuf};

use crate::checker::{self, CheckOptions};
use crate::history;
use crate::report::Report;

use crate::history::fault_bands;
pub use error::PlotError;
pub use groups::ProcessGroups;

/// What `plot` wrote.
#[derive(Debug, Clone)]
pub struct PlotSummary {
    /// The folder the pictures and the page went to.
    pub out_dir: PathBuf,
    /// Its `index.html`.
    pub index: PathBuf,
    /// Every file written, pictures first, `index.html` last.
    pub files: Vec<PathBuf>,
    /// The verdict drawn.
    pub valid: Option<bool>,
    pub anomalies: usize,
    /// How the page was made, where it matters (no report.json, a stale one, ...).
    pub notes: Vec<String>,
}

/// Draws a run: `target` is a run folder (history.jsonl, and report.json, workload.toml,
/// endpoints.json if present; the pictures go into the folder) or a history file (the
/// pictures go next to it into `<stem>-plots/`). Without a report.json the history is
/// checked with the default options. Writes the timelines, the latency, rate and fairness
/// charts, and `index.html`.
pub fn plot(target: &Path) -> Result<PlotSummary, PlotError> {
    let input = |message: &str| PlotError::Input {
        path: target.to_path_buf(),
        message: message.to_string(),
    };
    let (history_path, out_dir, run_dir) = if target.is_dir() {
        let history_path = target.join("history.jsonl");
        if !history_path.is_file() {
            return Err(input("not a run folder: it has no history.jsonl"));
        }
        (history_path, target.to_path_buf(), Some(target))
    } else if target.is_file() {
        let stem = target
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "history".into());
        let parent = target.parent().unwrap_or_else(|| Path::new(""));
        (
            target.to_path_buf(),
            parent.join(format!("{stem}-plots")),
            None,
        )
    } else {
        return Err(input("no such run folder or history file"));
    };
    let title = run_dir
        .unwrap_or(target)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| target.display().to_string());

    let history = history::read_file(&history_path)?;
    let mut notes = Vec::new();
    let report = match run_dir
        .map(|d| d.join("report.json"))
        .filter(|p| p.is_file())
    {
        Some(path) => {
            let text = std::fs::read_to_string(&path).map_err(|e| PlotError::io(&path, e))?;
            let report: Report = serde_json::from_str(&text).map_err(|e| PlotError::Input {
                path: path.clone(),
                message: format!("not a lockaudit report: {e}"),
            })?;
            if report.stats.events == history.ops.len() as u64 {
                report
            } else {
                notes.push(format!(
                    "report.json describes {} events but history.jsonl has {}: the page shows the history checked again with the default options.",
                    report.stats.events,
                    history.ops.len()
                ));
                checker::check(&history, &CheckOptions::default())
            }
        }
        None => {
            if run_dir.is_some() {
                notes.push(
                    "The run folder has no report.json: the history was checked with the default options."
                        .to_string(),
                );
            }
            checker::check(&history, &CheckOptions::default())
        }
    };
    let read_optional = |name: &str| -> Result<Option<String>, PlotError> {
        match run_dir.map(|d| d.join(name)).filter(|p| p.is_file()) {
            Some(path) => std::fs::read_to_string(&path)
                .map(Some)
                .map_err(|e| PlotError::io(&path, e)),
            None => Ok(None),
        }
    };
    let workload = read_optional("workload.toml")?;
    let endpoints = read_optional("endpoints.json")?;
    let record = run_dir.and_then(|d| crate::run_record::RunRecord::read(d).ok());
    let raw_files = run_dir.map(raw_files).unwrap_or_default();

    std::fs::create_dir_all(&out_dir).map_err(|e| PlotError::io(&out_dir, e))?;
    let mut files = Vec::new();

    let groups = match run_dir {
        Some(dir) => ProcessGroups::from_run_dir(dir),
        None => ProcessGroups::none(),
    };
    let started = std::time::Instant::now();
    let pictures = timeline::draw_timelines(
        &history,
        &report,
        &groups,
        &out_dir,
        &timeline::TimelineOptions::default(),
    )?;
    tracing::info!(
        "drew {} timelines in {:.3}s",
        pictures.len(),
        started.elapsed().as_secs_f64()
    );
    let timelines: Vec<html::TimelineLink> = pictures
        .iter()
        .map(|p| html::TimelineLink {
            key: p.key.clone(),
            anomaly: p.anomaly,
            png: p.path_png.clone(),
            svg: p.path_svg.clone(),
            notes: p.notes.clone(),
            shared_holds: p.shared_holds,
            arrows: p.arrows.len(),
        })
        .collect();
    for t in &timelines {
        files.push(t.svg.clone());
        files.push(t.png.clone());
    }

    let started = std::time::Instant::now();
    let bands = fault_bands(&history);
    let charts = charts::draw_charts(&history, &report, &bands, &title, &out_dir)?;
    tracing::info!("drew the charts in {:.3}s", started.elapsed().as_secs_f64());
    for c in &charts {
        files.push(c.svg.clone());
        files.push(c.png.clone());
    }

    let page = html::Page {
        title,
        source: history_path.display().to_string(),
        report: &report,
        timelines: &timelines,
        charts: &charts,
        bands: &bands,
        workload,
        endpoints,
        notes: notes.clone(),
        run_dir: run_dir.map(Path::to_path_buf),
        record,
        raw_files,
    };
    let index = html::write_index(&page, &out_dir)?;
    files.push(index.clone());
    Ok(PlotSummary {
        out_dir,
        index,
        files,
        valid: report.valid,
        anomalies: report.anomalies.len(),
        notes,
    })
}

/// The run's own files a reader may want whole, as the page links them: the history, the
/// report, what ran, the fault plan, the logs. Never endpoints.json nor a server's
/// configuration: they hold the servers' password.
fn raw_files(dir: &Path) -> Vec<PathBuf> {
    let fixed = [
        "history.jsonl",
        "report.json",
        "workload.toml",
        crate::run_record::RUN_JSON,
        crate::run_record::SCHEDULE_COPY,
        "nemesis.json",
    ];
    let mut files: Vec<PathBuf> = fixed
        .iter()
        .map(|name| dir.join(name))
        .filter(|p| p.is_file())
        .collect();
    // Logs: the workers' beside the history, the servers' one folder down (redis/, ...).
    let logs_in = |folder: &Path| -> Vec<PathBuf> {
        let mut logs: Vec<PathBuf> = std::fs::read_dir(folder)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "log"))
            .collect();
        logs.sort();
        logs
    };
    files.extend(logs_in(dir));
    let mut folders: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    folders.sort();
    for folder in folders {
        files.extend(logs_in(&folder));
    }
    files
}
