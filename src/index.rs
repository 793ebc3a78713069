//! The index of a results folder, `index.html` and `index.json`: every run and audit in
//! it, newest first, with what ran, its verdict, its first anomaly, how long it took and a
//! link to its page (Jepsen's browsable store). Rewritten after each run, rerun and audit
//! that writes there, from what the folders hold (run.json, report.json, workload.toml,
//! audit.json), so it never goes stale and needs no state of its own. Links are relative:
//! the folder works from `file://` and as a CI artifact.
//!
//! It is written into `results/` (where runs and audits go by default) and into any folder
//! that has an `index.json` already (`lockaudit index DIR` starts one): never into a folder
//! of the user's that did not ask for it.

use std::path::{Path, PathBuf};

use askama::Template;
use serde::{Deserialize, Serialize};

use crate::audit::Matrix;
use crate::plot::html::relative_url;
use crate::report::{AnomalyKind, Report};
use crate::run_record::RunRecord;
use crate::units::fmt_time;

/// What `index.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Index {
    /// When it was written, RFC 3339 (UTC).
    pub written: String,
    /// Newest first.
    pub entries: Vec<Entry>,
}

/// One run or audit of the folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// `run` or `audit`.
    pub kind: String,
    /// Its folder's name.
    pub folder: String,
    /// Its page, relative to the index (`./<folder>/index.html`, `./<folder>/audit.html`);
    /// None while it has none.
    pub page: Option<String>,
    /// When it began, RFC 3339 (UTC).
    pub started: String,
    /// A run's workload: algorithm, nemesis, topology, seed (an audit: its seed).
    pub algorithm: Option<String>,
    pub nemesis: Option<String>,
    pub topology: Option<String>,
    pub seed: Option<u64>,
    /// valid, invalid, unknown, interrupted, unfinished (no report yet: under way or
    /// killed); an audit: passed, failed, unfinished.
    pub verdict: String,
    /// "2 unavailable, 1 overlap"; an audit: "7 cells: 6 ok, 1 differs".
    pub found: String,
    pub first_anomaly: Option<FirstAnomaly>,
    /// Wall time, seconds.
    pub seconds: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FirstAnomaly {
    pub kind: AnomalyKind,
    /// When it began, ms of run time.
    pub at_ms: f64,
}

/// The folders an index is kept in: `results/` by name, or one with an index.json.
pub fn keeps_an_index(dir: &Path) -> bool {
    dir.file_name().is_some_and(|n| n == "results") || dir.join("index.json").is_file()
}

/// Rewrites `dir`'s index if it keeps one (see [`keeps_an_index`]). Where it is, and a
/// failure (a warning: the index never fails the run or audit that wrote there), are said
/// on stderr: it is a notice beside the verdict, not part of it.
pub fn update_after(dir: &Path) {
    // A run folder named without a folder (`--out run1`) is in the current one.
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    if !keeps_an_index(dir) {
        return;
    }
    match write(dir) {
        Ok(paths) => {
            if let Some(html) = paths.first() {
                crate::note!("index: {}", html.display());
            }
        }
        Err(e) => crate::note!(
            "lockaudit: warning: the index of {} was not written: {e}",
            dir.display()
        ),
    }
}

/// Why the index could not be made.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("cannot list {}: {error}", dir.display())]
    List { dir: PathBuf, error: std::io::Error },
    #[error("{0}")]
    Json(serde_json::Error),
    #[error("cannot write {}: {error}", path.display())]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// Writes `dir/index.html` and `dir/index.json` from its folders; returns their paths.
pub fn write(dir: &Path) -> Result<Vec<PathBuf>, IndexError> {
    let index = scan(dir)?;
    let html_path = dir.join("index.html");
    let json_path = dir.join("index.json");
    let json = serde_json::to_string_pretty(&index).map_err(IndexError::Json)? + "\n";
    let written = |path: &Path| {
        let path = path.to_path_buf();
        move |error| IndexError::Write { path, error }
    };
    crate::outfile::write(&json_path, json).map_err(written(&json_path))?;
    crate::outfile::write(&html_path, render(&index, dir)).map_err(written(&html_path))?;
    Ok(vec![html_path, json_path])
}

/// Every run and audit folder directly in `dir`, newest first.
pub fn scan(dir: &Path) -> Result<Index, IndexError> {
    let listing = std::fs::read_dir(dir).map_err(|error| IndexError::List {
        dir: dir.to_path_buf(),
        error,
    })?;
    let mut entries: Vec<Entry> = listing
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .filter_map(|p| entry(dir, &p))
        .collect();
    // RFC 3339 times sort as text; in the same second, `x-2` after `x`.
    entries.sort_by(|a, b| {
        (b.started.as_str(), b.folder.as_str()).cmp(&(a.started.as_str(), a.folder.as_str()))
    });
    Ok(Index {
        written: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        entries,
    })
}

/// The entry of the folder `path` in `dir`; None if it is neither a run nor an audit.
fn entry(dir: &Path, path: &Path) -> Option<Entry> {
    let folder = path.file_name()?.to_string_lossy().into_owned();
    let page = |name: &str| {
        let page = path.join(name);
        page.is_file().then(|| relative_url(dir, &page))
    };
    if let Ok(text) = std::fs::read_to_string(path.join("audit.json")) {
        let matrix = Matrix::from_json(&text).ok()?;
        return Some(Entry {
            kind: "audit".into(),
            page: page("audit.html"),
            started: if matrix.started_wall.is_empty() {
                modified(path)
            } else {
                matrix.started_wall.clone()
            },
            algorithm: Some(matrix.algorithms.join(", ")),
            nemesis: Some(
                (matrix.nemeses.iter().map(|n| n.name()))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            topology: None,
            seed: Some(matrix.seed),
            verdict: if matrix.passed() { "passed" } else { "failed" }.into(),
            found: matrix.counts_text(),
            first_anomaly: None,
            seconds: Some(matrix.seconds),
            folder,
        });
    }
    let record = RunRecord::read(path).ok();
    let report_text = std::fs::read_to_string(path.join("report.json")).ok();
    if record.is_none() && report_text.is_none() {
        return None;
    }
    // A folder from before run.json: what ran is in its workload.toml.
    let workload: toml::Table = std::fs::read_to_string(path.join("workload.toml"))
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or_default();
    let field = |name: &str| {
        workload
            .get(name)
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    let report: Option<Report> = report_text
        .as_deref()
        .and_then(|t| serde_json::from_str(t).ok());
    let interrupted = report_text
        .as_deref()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
        .is_some_and(|v| v.get("interrupted").is_some());
    let verdict = match report.as_ref().map(|r| r.valid) {
        None => "unfinished",
        Some(_) if interrupted => "interrupted",
        Some(Some(true)) => "valid",
        Some(Some(false)) => "invalid",
        Some(None) => "unknown",
    };
    let first_anomaly = report.as_ref().and_then(|r| {
        let at = r.first_anomaly_ns(|_| true)?;
        let first = r.anomalies.iter().find(|a| a.start == at)?;
        Some(FirstAnomaly {
            kind: first.kind,
            at_ms: at as f64 / 1e6,
        })
    });
    Some(Entry {
        kind: "run".into(),
        page: page("index.html"),
        started: record
            .as_ref()
            .map(|r| r.started.clone())
            .unwrap_or_else(|| modified(path)),
        algorithm: record
            .as_ref()
            .map(|r| r.algorithm.clone())
            .or_else(|| field("algorithm")),
        nemesis: record
            .as_ref()
            .map(|r| r.nemesis.to_string())
            .or_else(|| field("nemesis"))
            .or_else(|| Some("none".into())),
        topology: record
            .as_ref()
            .map(|r| r.topology.clone())
            .or_else(|| field("topology")),
        seed: record.as_ref().map(|r| r.seed).or_else(|| {
            workload
                .get("seed")
                .and_then(|v| v.as_integer())
                .and_then(|s| u64::try_from(s).ok())
        }),
        verdict: verdict.into(),
        found: report.as_ref().map(found).unwrap_or_default(),
        first_anomaly,
        seconds: record.as_ref().and_then(|r| r.seconds).or_else(|| {
            report
                .as_ref()
                .map(|r| (r.stats.time_span_ns[1] - r.stats.time_span_ns[0]) as f64 / 1e9)
        }),
        folder,
    })
}

/// "2 unavailable, 1 overlap" (summary order), or "nothing".
fn found(report: &Report) -> String {
    let kinds: Vec<String> = AnomalyKind::ALL
        .into_iter()
        .map(|k| (k, report.count(k)))
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    if kinds.is_empty() {
        "nothing".into()
    } else {
        kinds.join(", ")
    }
}

/// When the folder last changed, RFC 3339: the start of a run that recorded none.
fn modified(path: &Path) -> String {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map(|t| humantime::format_rfc3339_seconds(t).to_string())
        .unwrap_or_default()
}

#[derive(Template)]
#[template(path = "index.html")]
struct IndexHtml {
    title: String,
    version: &'static str,
    entries: Vec<Row>,
}

struct Row {
    started: String,
    what: String,
    seed: Option<u64>,
    verdict: String,
    found: String,
    first_anomaly: Option<FirstText>,
    took: String,
    folder: String,
    page_url: Option<String>,
}

struct FirstText {
    kind: String,
    at: String,
}

/// The page of `index`, written in `dir`.
fn render(index: &Index, dir: &Path) -> String {
    let title = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    let entries = index
        .entries
        .iter()
        .map(|e| Row {
            started: e
                .started
                .replace('T', " ")
                .trim_end_matches('Z')
                .to_string(),
            what: what(e),
            seed: e.seed,
            verdict: e.verdict.clone(),
            found: e.found.clone(),
            first_anomaly: e.first_anomaly.as_ref().map(|f| FirstText {
                kind: f.kind.to_string(),
                at: fmt_time((f.at_ms * 1e6) as i64),
            }),
            took: e
                .seconds
                .map(|s| crate::units::fmt_span((s * 1e9) as i64))
                .unwrap_or_default(),
            folder: e.folder.clone(),
            page_url: e.page.clone(),
        })
        .collect();
    let mut html = IndexHtml {
        title,
        version: crate::run::record::VERSION,
        entries,
    }
    .render()
    .expect("rendering the page into a String cannot fail");
    html.push('\n');
    html
}

/// "lua-getset × none (single)", "audit: set-nx-px, redlock × none, kill-clients".
fn what(e: &Entry) -> String {
    let pair = format!(
        "{} × {}",
        e.algorithm.as_deref().unwrap_or("?"),
        e.nemesis.as_deref().unwrap_or("none")
    );
    match (e.kind.as_str(), &e.topology) {
        ("audit", _) => format!("audit: {pair}"),
        (_, Some(topology)) => format!("{pair} ({topology})"),
        _ => pair,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_record::RUN_JSON;

    fn run_folder(root: &Path, name: &str, started: &str, valid: Option<bool>) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("workload.toml"),
            "algorithm = \"set-nx-px\"\nseed = 7\nnemesis = \"kill-clients\"\n",
        )
        .unwrap();
        let report = Report {
            valid,
            ..Report::default()
        };
        std::fs::write(
            dir.join("report.json"),
            serde_json::to_string(&report).unwrap(),
        )
        .unwrap();
        std::fs::write(dir.join("index.html"), "page").unwrap();
        let record: serde_json::Value = serde_json::json!({
            "version": "0", "commit": "c", "command": [], "cwd": "", "started": started,
            "algorithm": "set-nx-px", "nemesis": "kill-clients", "topology": "single",
            "seed": 7, "servers_started": true,
            "options": serde_json::to_value(crate::run::RunOptions::default()).unwrap(),
        });
        std::fs::write(dir.join(RUN_JSON), record.to_string()).unwrap();
        dir
    }

    #[test]
    fn runs_newest_first_with_links_that_resolve_and_names_escaped() {
        let root = tempfile::tempdir().unwrap();
        run_folder(root.path(), "old", "2025-01-01T10:00:00Z", Some(true));
        run_folder(root.path(), "new <b>", "2025-01-02T10:00:00Z", Some(false));
        std::fs::create_dir(root.path().join("not-a-run")).unwrap();
        let paths = write(root.path()).unwrap();
        let index: Index =
            serde_json::from_str(&std::fs::read_to_string(&paths[1]).unwrap()).unwrap();
        let folders: Vec<&str> = index.entries.iter().map(|e| e.folder.as_str()).collect();
        assert_eq!(folders, ["new <b>", "old"]);
        assert_eq!(index.entries[0].verdict, "invalid");
        assert_eq!(index.entries[1].verdict, "valid");
        assert_eq!(index.entries[1].seed, Some(7));
        let html = std::fs::read_to_string(&paths[0]).unwrap();
        assert!(!html.contains("new <b>"), "{html}");
        assert!(
            html.contains(r#"<a href="./new%20%3Cb%3E/index.html">"#),
            "{html}"
        );
        assert!(html.find("new &#60;b&#62;").unwrap() < html.find(">old<").unwrap());
        // Only results/ or a folder with an index.json keeps one.
        assert!(keeps_an_index(root.path()));
        assert!(!keeps_an_index(&root.path().join("not-a-run")));
        assert!(keeps_an_index(Path::new("x/results")));
    }
}
