//! Pictures of a run: timelines, latency and rate and fairness charts, and the HTML report.

pub mod charts;
pub mod fonts;
pub mod html;
pub mod model;
pub mod timeline;

use std::path::{Path, PathBuf};

use crate::checker::{self, CheckOptions};
use crate::history::{self, HistoryError};
use crate::report::Report;

/// Why a picture or the report page could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The input (a run folder, a history or a report) is missing or malformed.
    #[error("{}: {message}", path.display())]
    Input { path: PathBuf, message: String },
    /// The history does not read.
    #[error(transparent)]
    History(#[from] HistoryError),
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// plotters failed to draw or encode a picture.
    #[error("cannot draw {}: {message}", path.display())]
    Draw { path: PathBuf, message: String },
}

impl PlotError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        PlotError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// A drawing error while making `path` (any `Display`able plotters error).
    pub fn draw(path: &Path, message: impl std::fmt::Display) -> Self {
        PlotError::Draw {
            path: path.to_path_buf(),
            message: message.to_string(),
        }
    }
}

use crate::history::compact::{OpF, OpType};
use crate::history::History;

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

    std::fs::create_dir_all(&out_dir).map_err(|e| PlotError::io(&out_dir, e))?;
    let mut files = Vec::new();

    let groups = match run_dir {
        Some(dir) => timeline::ProcessGroups::from_run_dir(dir),
        None => timeline::ProcessGroups::none(),
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

/// A nemesis fault as a stretch of the run's clock: a `pause` until its `resume`, a
/// `partition` until its `heal`, a `kill` until its `restart`; a fault with no end (a clock
/// jump, a failover, a crash point, a client kill) is an instant, `start == end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultBand {
    /// ns on the run's clock.
    pub start: i64,
    pub end: i64,
    /// The opening fault's name: `pause`, `kill`, ...
    pub name: String,
    pub targets: Vec<String>,
    /// The events that opened and closed it.
    pub indices: Vec<u32>,
    /// Opened and never closed: it lasts to the end of the history.
    pub unhealed: bool,
}

impl FaultBand {
    pub fn is_instant(&self) -> bool {
        self.start == self.end && !self.unhealed
    }

    /// `pause worker-0`, `failover redis-0`, `kill worker-0, worker-1`.
    pub fn label(&self) -> String {
        if self.targets.is_empty() {
            self.name.clone()
        } else {
            format!("{} {}", self.name, self.targets.join(", "))
        }
    }
}

/// The fault that ends a fault of this name, if it is a stretch rather than an instant.
fn closer_of(name: &str) -> Option<&'static str> {
    Some(match name {
        "pause" => "resume",
        "partition" => "heal",
        "latency" => "heal",
        "kill" => "restart",
        "stop" => "start",
        _ => return None,
    })
}

/// Every fault of `history` as a band, in order of start. None is dropped: an unmatched
/// closer is an instant of its own, an unmatched opener lasts to the end (a kill with no
/// restart is an instant: the client process is gone, a fresh one takes its slot).
pub fn fault_bands(history: &History) -> Vec<FaultBand> {
    let end_of_history = history.time_span().1;
    let mut bands: Vec<FaultBand> = Vec::new();
    // Bands still open: (position in `bands`, the closer's name).
    let mut open: Vec<(usize, &'static str)> = Vec::new();
    for op in &history.ops {
        if op.f != OpF::Fault || op.ty == OpType::Invoke {
            continue;
        }
        let Some(fault) = usize::try_from(op.a)
            .ok()
            .and_then(|i| history.faults.get(i))
        else {
            continue;
        };
        let shares_target = |band: &FaultBand| {
            band.targets.is_empty()
                || fault.targets.is_empty()
                || band.targets.iter().any(|t| fault.targets.contains(t))
        };
        let closing = open
            .iter()
            .position(|&(b, closer)| closer == fault.name && shares_target(&bands[b]));
        if let Some(i) = closing {
            let (b, _) = open.remove(i);
            bands[b].end = fault.time;
            bands[b].indices.push(fault.index);
            bands[b].unhealed = false;
            continue;
        }
        let closer = closer_of(&fault.name);
        bands.push(FaultBand {
            start: fault.time,
            end: if closer.is_some() {
                end_of_history.max(fault.time)
            } else {
                fault.time
            },
            name: fault.name.clone(),
            targets: fault.targets.clone(),
            indices: vec![fault.index],
            unhealed: closer.is_some(),
        });
        if let Some(closer) = closer {
            open.push((bands.len() - 1, closer));
        }
    }
    for band in &mut bands {
        if band.unhealed && band.name == "kill" {
            band.end = band.start;
            band.unhealed = false;
        }
    }
    bands
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(lines: &[&str]) -> History {
        let text = lines.join("\n") + "\n";
        history::reader::read_jsonl(text.as_bytes(), "test", None).expect("a valid history")
    }

    fn nemesis(index: u32, time: i64, f: &str, target: &str) -> String {
        format!(
            r#"{{"index":{index},"time":{time},"process":"nemesis","type":"info","f":"{f}","value":{{"targets":["{target}"],"processes":[]}}}}"#
        )
    }

    #[test]
    fn faults_pair_into_bands_and_none_is_dropped() {
        let lines = [
            nemesis(0, 10, "pause", "worker-0"),
            nemesis(1, 20, "pause", "worker-1"),
            nemesis(2, 30, "resume", "worker-1"),
            nemesis(3, 40, "kill", "worker-2"),
            nemesis(4, 50, "clock", "redis-0"),
            nemesis(5, 60, "resume", "worker-0"),
            nemesis(6, 70, "resume", "worker-9"),
            nemesis(7, 80, "partition", "redis-1"),
            nemesis(8, 90, "kill", "redis-2"),
            nemesis(9, 95, "restart", "redis-2"),
            r#"{"index":10,"time":100,"process":0,"type":"invoke","f":"acquire","key":"a"}"#
                .to_string(),
        ];
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let bands = fault_bands(&history(&refs));
        let got: Vec<(&str, i64, i64, bool, bool)> = bands
            .iter()
            .map(|b| (b.name.as_str(), b.start, b.end, b.is_instant(), b.unhealed))
            .collect();
        assert_eq!(
            got,
            vec![
                ("pause", 10, 60, false, false),
                ("pause", 20, 30, false, false),
                ("kill", 40, 40, true, false),
                ("clock", 50, 50, true, false),
                ("resume", 70, 70, true, false),
                ("partition", 80, 100, false, true),
                ("kill", 90, 95, false, false),
            ]
        );
        assert_eq!(bands[0].indices, vec![0, 5]);
        assert_eq!(bands[0].label(), "pause worker-0");
    }
}
