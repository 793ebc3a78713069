//! The verdict matrix of `lockaudit audit`: one cell per algorithm × nemesis preset, and its
//! renderings — a table for the terminal, Markdown for people (`audit.md`), JSON for scripts
//! (`audit.json`) and JUnit XML for CI (`audit.xml`).
//!
//! A cell passes when what its run found meets the workload's [`Expectation`] for that
//! nemesis; it differs when it does not; it is an error when the run could not be carried
//! out; it is not applicable ("n/a") when no fault of the preset can act on the cell's run
//! (failover without replicas, clock-skew on a client that never reads its clock): such a
//! cell is no pass (it proves nothing about the fault) and no failure, and it is not run.
//! The audit passes when no cell differs and none is an error.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::expect::Expectation;
use crate::report::ANOMALY_KINDS;

/// The widest the terminal table tries to stay.
const TABLE_WIDTH: usize = 120;

/// How one cell came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// What was found meets the expectation.
    Pass,
    /// What was found differs from the expectation (`why` says how).
    Differs,
    /// The run could not be carried out (`why` holds the error).
    Error,
    /// Not applicable: no fault of the preset can act on this algorithm or setup (`why`
    /// says why), so the cell was not run. Neither a pass nor a failure. Written "n/a"
    /// ("skipped", as older audits wrote it, reads as this).
    #[serde(rename = "n/a", alias = "skipped")]
    NotApplicable,
}

impl Status {
    /// Whether this cell fails the audit.
    pub fn fails(self) -> bool {
        matches!(self, Status::Differs | Status::Error)
    }

    /// "pass", "differs", "error", "n/a".
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Differs => "differs",
            Status::Error => "error",
            Status::NotApplicable => "n/a",
        }
    }
}

/// One algorithm under one nemesis preset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub algorithm: String,
    pub nemesis: String,
    pub status: Status,
    /// Differs: how (from [`Expectation::differs`]); Error: the error; n/a: why no fault of
    /// the preset can act.
    #[serde(default)]
    pub why: Option<String>,
    /// Anomaly counts by kind (kinds with a count of zero are left out).
    #[serde(default)]
    pub found: BTreeMap<String, u64>,
    #[serde(default)]
    pub expected: Expectation,
    /// The cell's run folder (`history.jsonl`, `report.json`, `index.html`, ...).
    #[serde(default, with = "lossy_path")]
    pub run_dir: Option<PathBuf>,
    /// Wall time the cell took, in seconds.
    #[serde(default)]
    pub seconds: f64,
    /// When the first anomaly began on the run's clock, in ms: time to first anomaly.
    #[serde(default)]
    pub first_anomaly_ms: Option<f64>,
    /// Events in the cell's history.
    #[serde(default)]
    pub events: u64,
    /// Faults the nemesis injected.
    #[serde(default)]
    pub faults: u64,
}

impl Cell {
    /// A cell whose run was carried out: Pass if `found` meets `expected`, else Differs with
    /// the expectation's explanation. Kinds counted zero are dropped from `found`. The run's
    /// particulars (`run_dir`, `seconds`, `first_anomaly_ms`, `events`, `faults`) start
    /// empty: set the fields, or use [`Cell::with_run`].
    pub fn judge(
        algorithm: impl Into<String>,
        nemesis: impl Into<String>,
        expected: Expectation,
        found: BTreeMap<String, u64>,
    ) -> Cell {
        let found: BTreeMap<String, u64> = found.into_iter().filter(|(_, n)| *n > 0).collect();
        let why = expected.differs(&found);
        let status = if why.is_some() {
            Status::Differs
        } else {
            Status::Pass
        };
        Cell {
            algorithm: algorithm.into(),
            nemesis: nemesis.into(),
            status,
            why,
            found,
            expected,
            run_dir: None,
            seconds: 0.0,
            first_anomaly_ms: None,
            events: 0,
            faults: 0,
        }
    }

    /// A cell whose run could not be carried out.
    pub fn error(
        algorithm: impl Into<String>,
        nemesis: impl Into<String>,
        expected: Expectation,
        error: impl Into<String>,
    ) -> Cell {
        Cell {
            status: Status::Error,
            why: Some(error.into()),
            ..Cell::judge(algorithm, nemesis, expected, BTreeMap::new())
        }
    }

    /// A cell not run because no fault of its preset can act on it, and why (e.g.
    /// "failover needs replicas").
    pub fn not_applicable(
        algorithm: impl Into<String>,
        nemesis: impl Into<String>,
        expected: Expectation,
        reason: impl Into<String>,
    ) -> Cell {
        Cell {
            status: Status::NotApplicable,
            why: Some(reason.into()),
            ..Cell::judge(algorithm, nemesis, expected, BTreeMap::new())
        }
    }

    /// Sets the run's folder and wall time.
    pub fn with_run(mut self, run_dir: impl Into<PathBuf>, seconds: f64) -> Cell {
        self.run_dir = Some(run_dir.into());
        self.seconds = seconds;
        self
    }

    /// Total anomalies found.
    pub fn anomalies(&self) -> u64 {
        self.found.values().sum()
    }

    /// The kinds found with their counts, in `ANOMALY_KINDS` order, then any other kind.
    fn kinds(&self) -> Vec<(&str, u64)> {
        let mut kinds: Vec<(&str, u64)> = ANOMALY_KINDS
            .iter()
            .filter_map(|k| self.found.get(*k).map(|n| (*k, *n)))
            .collect();
        kinds.extend(
            self.found
                .iter()
                .filter(|(k, _)| !ANOMALY_KINDS.contains(&k.as_str()))
                .map(|(k, n)| (k.as_str(), *n)),
        );
        kinds.retain(|(_, n)| *n > 0);
        kinds
    }

    /// "overlap ×2, stale-write ×1" or "nothing".
    fn found_text(&self) -> String {
        let kinds = self.kinds();
        if kinds.is_empty() {
            return "nothing".into();
        }
        kinds
            .iter()
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// "must overlap; may stale-write, lost-lock" or "a valid run".
    fn expected_text(&self) -> String {
        let mut parts = Vec::new();
        if !self.expected.must.is_empty() {
            parts.push(format!("must {}", self.expected.must.join(", ")));
        }
        if !self.expected.may.is_empty() {
            parts.push(format!("may {}", self.expected.may.join(", ")));
        }
        if parts.is_empty() {
            "a valid run".into()
        } else {
            parts.join("; ")
        }
    }

    /// The reason, or a stand-in when none was given.
    fn why_text(&self) -> &str {
        self.why.as_deref().unwrap_or(match self.status {
            Status::Pass => "as expected",
            Status::Differs => "differs from the expectation",
            Status::Error => "the run could not be carried out",
            Status::NotApplicable => "not applicable",
        })
    }

    /// The cell's report page, `run_dir/index.html`.
    fn report_page(&self) -> Option<PathBuf> {
        self.run_dir.as_ref().map(|dir| dir.join("index.html"))
    }
}

/// How many cells came out which way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub cells: usize,
    pub passed: usize,
    pub differs: usize,
    pub errors: usize,
    /// Not applicable ("n/a"): not run, neither passed nor failed. (`skipped` in older
    /// audits.)
    #[serde(alias = "skipped")]
    pub not_applicable: usize,
}

/// Every algorithm under every nemesis preset.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Matrix {
    /// Row order.
    pub algorithms: Vec<String>,
    /// Column order.
    pub nemeses: Vec<String>,
    pub cells: Vec<Cell>,
    /// When the audit began, RFC 3339 wall time.
    #[serde(default)]
    pub started_wall: String,
    /// Wall time of the whole audit, in seconds.
    #[serde(default)]
    pub seconds: f64,
    #[serde(default)]
    pub seed: u64,
}

/// What `audit.json` holds: the verdict and counts up front, then the matrix.
#[derive(Serialize)]
struct JsonOut<'a> {
    passed: bool,
    counts: Counts,
    #[serde(flatten)]
    matrix: &'a Matrix,
}

impl Matrix {
    /// Adds a cell, and its algorithm and nemesis to the row and column orders if new.
    pub fn push(&mut self, cell: Cell) {
        if !self.algorithms.contains(&cell.algorithm) {
            self.algorithms.push(cell.algorithm.clone());
        }
        if !self.nemeses.contains(&cell.nemesis) {
            self.nemeses.push(cell.nemesis.clone());
        }
        self.cells.push(cell);
    }

    /// The cell of `algorithm` under `nemesis`, if there is one.
    pub fn cell(&self, algorithm: &str, nemesis: &str) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.algorithm == algorithm && c.nemesis == nemesis)
    }

    /// True when every cell passed or was not applicable: a cell that differs from its
    /// expectation, or whose run failed, fails the audit.
    pub fn passed(&self) -> bool {
        !self.cells.iter().any(|c| c.status.fails())
    }

    pub fn counts(&self) -> Counts {
        let mut counts = Counts {
            cells: self.cells.len(),
            ..Counts::default()
        };
        for cell in &self.cells {
            match cell.status {
                Status::Pass => counts.passed += 1,
                Status::Differs => counts.differs += 1,
                Status::Error => counts.errors += 1,
                Status::NotApplicable => counts.not_applicable += 1,
            }
        }
        counts
    }

    /// The cells in table order (rows, then columns); cells outside the grid come last, in
    /// the order they were added.
    pub fn ordered_cells(&self) -> Vec<&Cell> {
        let position = |c: &Cell| {
            let row = self.algorithms.iter().position(|a| *a == c.algorithm);
            let column = self.nemeses.iter().position(|n| *n == c.nemesis);
            match (row, column) {
                (Some(r), Some(k)) => (0, r, k),
                _ => (1, 0, 0),
            }
        };
        let mut cells: Vec<&Cell> = self.cells.iter().collect();
        cells.sort_by_key(|c| position(c)); // stable: strays keep their order
        cells
    }

    /// Cells that differ or errored, in table order.
    pub fn failures(&self) -> Vec<&Cell> {
        self.ordered_cells()
            .into_iter()
            .filter(|c| c.status.fails())
            .collect()
    }

    /// "77 cells: 70 ok, 4 differ, 1 error, 2 n/a".
    fn counts_text(&self) -> String {
        let c = self.counts();
        let mut parts = vec![format!("{} ok", c.passed)];
        if c.differs > 0 {
            parts.push(format!(
                "{} differ{}",
                c.differs,
                if c.differs == 1 { "s" } else { "" }
            ));
        }
        if c.errors > 0 {
            parts.push(format!(
                "{} error{}",
                c.errors,
                if c.errors == 1 { "" } else { "s" }
            ));
        }
        if c.not_applicable > 0 {
            parts.push(format!("{} n/a", c.not_applicable));
        }
        format!(
            "{} cell{}: {}",
            c.cells,
            if c.cells == 1 { "" } else { "s" },
            parts.join(", ")
        )
    }

    /// The terminal table: a row per algorithm, a column per nemesis, each cell "ok", the
    /// kinds found (abbreviated), "✗" when they differ from the expectation, "ERR" when the
    /// run failed, "n/a" when not applicable ("?" if the grid has no such cell). Headers and kinds
    /// are abbreviated as far as needed to fit 120 columns; a legend says what they stand
    /// for. Below: one line per failing or not-applicable cell, and the counts.
    pub fn to_table(&self) -> String {
        let mut chosen = None;
        for level in [Level::Full, Level::ShortHeaders, Level::Codes] {
            let grid = self.grid(level);
            let fits = grid.width() <= TABLE_WIDTH;
            chosen = Some((level, grid));
            if fits {
                break;
            }
        }
        let Some((level, grid)) = chosen else {
            return String::new();
        };

        let mut out = String::new();
        let widths = grid.widths();
        let mut line = |row: &[String]| {
            let mut text = String::new();
            for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
                if i > 0 {
                    text.push_str("  ");
                }
                text.push_str(cell);
                text.extend(std::iter::repeat_n(' ', width - cell.chars().count()));
            }
            let _ = writeln!(out, "{}", text.trim_end());
        };
        line(&grid.header);
        let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
        line(&rule);
        for row in &grid.rows {
            line(row);
        }

        for chunk in wrap("legend: ", &self.legend(level), TABLE_WIDTH) {
            let _ = writeln!(out, "{chunk}");
        }

        let listed: Vec<&Cell> = self
            .ordered_cells()
            .into_iter()
            .filter(|c| c.status != Status::Pass)
            .collect();
        if !listed.is_empty() {
            out.push('\n');
        }
        // Failures first: they are what the reader came for.
        for cell in listed
            .iter()
            .filter(|c| c.status.fails())
            .chain(listed.iter().filter(|c| !c.status.fails()))
        {
            let marker = match cell.status {
                Status::Differs => "✗  ",
                Status::Error => "ERR",
                _ => "n/a",
            };
            let mut text = format!(
                "{marker} {} × {}: {}",
                cell.algorithm,
                cell.nemesis,
                one_line(cell.why_text())
            );
            if cell.status == Status::Differs {
                if let Some(ms) = cell.first_anomaly_ms {
                    let _ = write!(text, ", first anomaly at {}", seconds_text(ms / 1e3));
                }
            }
            if let Some(dir) = &cell.run_dir {
                let _ = write!(text, " ({})", dir.display());
            }
            let _ = writeln!(out, "{text}");
        }

        let _ = writeln!(
            out,
            "\n{} in {}, seed {}: {}",
            self.counts_text(),
            duration_text(self.seconds),
            self.seed,
            if self.passed() { "PASSED" } else { "FAILED" }
        );
        out
    }

    /// The header and rows of the terminal table at one abbreviation level.
    fn grid(&self, level: Level) -> Grid {
        let mut header = vec!["algorithm".to_string()];
        header.extend(self.nemeses.iter().map(|n| match level {
            Level::Full => n.clone(),
            _ => short_nemesis(n).to_string(),
        }));
        let rows = self
            .algorithms
            .iter()
            .map(|algorithm| {
                let mut row = vec![algorithm.clone()];
                row.extend(self.nemeses.iter().map(
                    |nemesis| match self.cell(algorithm, nemesis) {
                        Some(cell) => cell_text(cell, level),
                        None => "?".into(),
                    },
                ));
                row
            })
            .collect();
        Grid { header, rows }
    }

    /// What the table's marks and abbreviations stand for (only those it shows).
    fn legend(&self, level: Level) -> Vec<String> {
        let grid = self.grid(level);
        let shown = |text: &str| grid.rows.iter().flatten().any(|c| c == text);
        let mut parts = vec!["ok = valid, as expected".to_string()];
        parts.push("kinds alone = anomalies found, all expected".into());
        parts.push("✗ = differs from the expectation".into());
        parts.push("ERR = the run failed".into());
        parts
            .push("n/a = not applicable (no fault of the preset can act: not run, no pass)".into());
        if shown("?") {
            parts.push("? = not run".into());
        }
        let mut kinds: Vec<String> = Vec::new();
        for kind in ANOMALY_KINDS {
            let short = short_kind(kind, level);
            let used = self.cells.iter().any(|c| {
                c.status != Status::Error
                    && c.status != Status::NotApplicable
                    && c.found.get(kind).is_some_and(|n| *n > 0)
            });
            if used && short != kind {
                kinds.push(format!("{short} = {kind}"));
            }
        }
        parts.extend(kinds);
        if level != Level::Full {
            for nemesis in &self.nemeses {
                let short = short_nemesis(nemesis);
                if short != nemesis {
                    parts.push(format!("{short} = {nemesis}"));
                }
            }
        }
        parts
    }

    /// Markdown: the verdict, a table (a row per algorithm, a column per nemesis, each cell
    /// linking to its run's `index.html`), the time to first anomaly when known, the
    /// differences, and a legend. Links use the run folders as they are stored; see
    /// [`Matrix::to_markdown_in`] for links relative to where the file is written.
    pub fn to_markdown(&self) -> String {
        self.markdown(None)
    }

    /// As [`Matrix::to_markdown`], for a file written in `dir`: links are made relative to it.
    pub fn to_markdown_in(&self, dir: &Path) -> String {
        self.markdown(Some(dir))
    }

    fn markdown(&self, base: Option<&Path>) -> String {
        let link = |cell: &Cell| {
            cell.report_page().map(|page| {
                let target = match base {
                    Some(base) => relative_to(&page, base),
                    None => page,
                };
                url_path(&target)
            })
        };
        let mut out = String::new();
        let _ = writeln!(out, "# lockaudit audit\n");
        let _ = writeln!(
            out,
            "**{}** — {}. Started {}, took {}, seed {}.\n",
            if self.passed() { "PASSED" } else { "FAILED" },
            self.counts_text(),
            md_text(&self.started_wall),
            duration_text(self.seconds),
            self.seed
        );

        let table_head = |out: &mut String| {
            let _ = write!(out, "| algorithm |");
            for nemesis in &self.nemeses {
                let _ = write!(out, " {} |", md_text(nemesis));
            }
            let _ = write!(out, "\n|---|");
            for _ in &self.nemeses {
                let _ = write!(out, "---|");
            }
            out.push('\n');
        };
        table_head(&mut out);
        for algorithm in &self.algorithms {
            let _ = write!(out, "| {} |", md_text(algorithm));
            for nemesis in &self.nemeses {
                let text = match self.cell(algorithm, nemesis) {
                    None => "?".to_string(),
                    Some(cell) => {
                        let text = match cell.status {
                            Status::Differs => format!("**{} ✗**", md_kinds(cell)),
                            Status::Error => "**ERR**".to_string(),
                            Status::NotApplicable => "n/a".to_string(),
                            Status::Pass => md_kinds(cell),
                        };
                        match link(cell) {
                            Some(url) => format!("[{text}]({url})"),
                            None => text,
                        }
                    }
                };
                let _ = write!(out, " {text} |");
            }
            out.push('\n');
        }

        if self.cells.iter().any(|c| c.first_anomaly_ms.is_some()) {
            let _ = writeln!(out, "\n## Time to first anomaly\n");
            table_head(&mut out);
            for algorithm in &self.algorithms {
                let _ = write!(out, "| {} |", md_text(algorithm));
                for nemesis in &self.nemeses {
                    let text = self
                        .cell(algorithm, nemesis)
                        .and_then(|c| c.first_anomaly_ms)
                        .map_or("–".to_string(), |ms| seconds_text(ms / 1e3));
                    let _ = write!(out, " {text} |");
                }
                out.push('\n');
            }
        }

        let _ = writeln!(out, "\n## Differences\n");
        let failures = self.failures();
        if failures.is_empty() {
            let _ = writeln!(out, "None: every cell that ran met its expectation.");
        }
        for cell in failures {
            let label = match cell.status {
                Status::Error => "error",
                _ => "differs",
            };
            let _ = write!(
                out,
                "- **{} × {}** ({label}): {}. Found {}; expected {}.",
                md_text(&cell.algorithm),
                md_text(&cell.nemesis),
                md_text(&one_line(cell.why_text())),
                md_text(&cell.found_text()),
                md_text(&cell.expected_text())
            );
            if let Some(ms) = cell.first_anomaly_ms {
                let _ = write!(out, " First anomaly at {}.", seconds_text(ms / 1e3));
            }
            if let Some(url) = link(cell) {
                let _ = write!(out, " [report]({url})");
            }
            out.push('\n');
        }
        let not_applicable: Vec<&Cell> = self
            .ordered_cells()
            .into_iter()
            .filter(|c| c.status == Status::NotApplicable)
            .collect();
        if !not_applicable.is_empty() {
            let _ = writeln!(out, "\n## Not applicable\n");
            let _ = writeln!(
                out,
                "No fault of the preset can act on these cells, so they were not run: they pass nothing.\n"
            );
            for cell in not_applicable {
                let _ = writeln!(
                    out,
                    "- {} × {}: {}",
                    md_text(&cell.algorithm),
                    md_text(&cell.nemesis),
                    md_text(&one_line(cell.why_text()))
                );
            }
        }

        let _ = writeln!(out, "\n## Legend\n");
        let _ = writeln!(
            out,
            "- **ok**: valid, as expected\n\
             - anomaly kinds alone: found, and all of them expected\n\
             - **✗**: differs from the expectation (see Differences)\n\
             - **ERR**: the run could not be carried out\n\
             - **n/a**: not applicable, not run: no fault of the preset can act (see Not applicable)"
        );
        if self
            .algorithms
            .iter()
            .any(|a| self.nemeses.iter().any(|n| self.cell(a, n).is_none()))
        {
            let _ = writeln!(out, "- **?**: not run");
        }
        let _ = writeln!(
            out,
            "\nEach cell links to its run's report. Anomaly kinds: {}.",
            ANOMALY_KINDS.join(", ")
        );
        out
    }

    /// `audit.json`: `{"passed", "counts", "algorithms", "nemeses", "cells": [...],
    /// "started_wall", "seconds", "seed"}`, pretty. [`Matrix::from_json`] reads it back.
    pub fn to_json(&self) -> String {
        let out = JsonOut {
            passed: self.passed(),
            counts: self.counts(),
            matrix: self,
        };
        // Only strings, integers, floats and maps: serialising cannot fail.
        serde_json::to_string_pretty(&out).expect("a matrix serialises to JSON")
    }

    /// Reads `audit.json` back (its `passed` and `counts` are derived, and ignored).
    pub fn from_json(text: &str) -> Result<Matrix, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// JUnit XML for CI: one `<testsuite>`, one `<testcase classname=ALGORITHM
    /// name=NEMESIS>` per cell; a cell that differs is a `<failure>`, one that errored an
    /// `<error>`, a not-applicable one `<skipped>` (its message begins "not applicable: ");
    /// each case's `<system-out>` names its run folder.
    pub fn to_junit(&self) -> String {
        let c = self.counts();
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            out,
            "<testsuite name=\"lockaudit audit\" tests=\"{}\" failures=\"{}\" errors=\"{}\" \
             skipped=\"{}\" time=\"{:.3}\" timestamp=\"{}\">",
            c.cells,
            c.differs,
            c.errors,
            c.not_applicable,
            self.seconds,
            xml_escape(&self.started_wall)
        );
        let _ = writeln!(
            out,
            "  <properties>\n    <property name=\"seed\" value=\"{}\"/>\n  </properties>",
            self.seed
        );
        for cell in self.ordered_cells() {
            let _ = writeln!(
                out,
                "  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\">",
                xml_escape(&cell.algorithm),
                xml_escape(&cell.nemesis),
                cell.seconds
            );
            let why = xml_escape(cell.why_text());
            match cell.status {
                Status::Pass => {}
                Status::Differs => {
                    let _ = writeln!(
                        out,
                        "    <failure message=\"{why}\" type=\"differs\">{}</failure>",
                        xml_escape(&details(cell))
                    );
                }
                Status::Error => {
                    let _ = writeln!(
                        out,
                        "    <error message=\"{why}\" type=\"error\">{}</error>",
                        xml_escape(&details(cell))
                    );
                }
                Status::NotApplicable => {
                    let _ = writeln!(out, "    <skipped message=\"not applicable: {why}\"/>");
                }
            }
            let mut system_out = String::new();
            match &cell.run_dir {
                Some(dir) => {
                    let _ = writeln!(system_out, "run folder: {}", dir.display());
                }
                None => system_out.push_str("run folder: none\n"),
            }
            let _ = write!(
                system_out,
                "found: {}; expected: {}; events: {}; faults: {}",
                cell.found_text(),
                cell.expected_text(),
                cell.events,
                cell.faults
            );
            let _ = writeln!(
                out,
                "    <system-out>{}</system-out>\n  </testcase>",
                xml_escape(&system_out)
            );
        }
        out.push_str("</testsuite>\n");
        out
    }

    /// Writes `audit.md` (links relative to `dir`), `audit.json` and `audit.xml` into `dir`,
    /// creating it if needed; returns their paths.
    pub fn write_all(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir)?;
        let files = [
            ("audit.md", self.to_markdown_in(dir)),
            ("audit.json", self.to_json() + "\n"),
            ("audit.xml", self.to_junit()),
        ];
        let mut paths = Vec::new();
        for (name, text) in files {
            let path = dir.join(name);
            std::fs::write(&path, text)?;
            paths.push(path);
        }
        Ok(paths)
    }
}

/// How far the terminal table abbreviates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    /// Full nemesis names, short words for kinds ("stale", "unavail").
    Full,
    /// Short nemesis names ("kill-cl"), short words for kinds.
    ShortHeaders,
    /// Short nemesis names, two-letter codes for kinds ("OV+SW").
    Codes,
}

struct Grid {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Grid {
    fn widths(&self) -> Vec<usize> {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        widths
    }

    fn width(&self) -> usize {
        let widths = self.widths();
        widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1)
    }
}

/// A cell of the terminal table.
fn cell_text(cell: &Cell, level: Level) -> String {
    match cell.status {
        Status::Error => "ERR".into(),
        Status::NotApplicable => "n/a".into(),
        Status::Pass | Status::Differs => {
            let kinds = cell.kinds();
            let joiner = if level == Level::Codes { "+" } else { "," };
            let text = if kinds.is_empty() {
                if cell.status == Status::Pass {
                    "ok".to_string()
                } else {
                    "valid".to_string()
                }
            } else {
                kinds
                    .iter()
                    .map(|(k, _)| short_kind(k, level))
                    .collect::<Vec<_>>()
                    .join(joiner)
            };
            if cell.status == Status::Differs {
                text + " ✗"
            } else {
                text
            }
        }
    }
}

/// An anomaly kind for the terminal table.
fn short_kind(kind: &str, level: Level) -> Cow<'_, str> {
    let (word, code) = match kind {
        "overlap" => ("overlap", "OV"),
        "lost-lock" => ("lost-lock", "LL"),
        "stale-write" => ("stale", "SW"),
        "token-order" => ("tok-order", "TO"),
        "duplicate-token" => ("dup-token", "DT"),
        "starvation" => ("starved", "ST"),
        "bad-lease" => ("bad-lease", "BL"),
        "unavailable" => ("unavail", "UN"),
        "unfair" => ("unfair", "UF"),
        "lost-update" => ("lost-upd", "LU"),
        other => return Cow::Borrowed(other),
    };
    Cow::Borrowed(if level == Level::Codes { code } else { word })
}

/// A nemesis preset's column header when space is short.
fn short_nemesis(nemesis: &str) -> &str {
    match nemesis {
        "kill-clients" => "kill-cl",
        "pause-clients" => "pause-cl",
        "kill-redis" => "kill-rd",
        "pause-redis" => "pause-rd",
        "clock-jump" => "clk-jump",
        "clock-skew" => "clk-skew",
        "crash-points" => "crash-pt",
        other => other,
    }
}

/// The kinds of a Markdown cell: "ok", "valid" (found nothing, expected something) or the
/// full kind names.
fn md_kinds(cell: &Cell) -> String {
    let kinds = cell.kinds();
    if kinds.is_empty() {
        return if cell.status == Status::Pass {
            "ok"
        } else {
            "valid"
        }
        .into();
    }
    kinds
        .iter()
        .map(|(k, _)| md_text(k))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The failure or error body of a JUnit case.
fn details(cell: &Cell) -> String {
    let mut text = format!(
        "{} under {}: {}\nfound: {}\nexpected: {}\n",
        cell.algorithm,
        cell.nemesis,
        cell.why_text(),
        cell.found_text(),
        cell.expected_text()
    );
    if let Some(ms) = cell.first_anomaly_ms {
        let _ = writeln!(text, "first anomaly at {}", seconds_text(ms / 1e3));
    }
    match &cell.run_dir {
        Some(dir) => {
            let _ = writeln!(text, "run folder: {}", dir.display());
            let _ = writeln!(text, "report: {}", dir.join("index.html").display());
        }
        None => text.push_str("run folder: none\n"),
    }
    text
}

/// Text for XML attributes and content: the five special characters escaped, line breaks
/// and tabs kept as character references (attributes would fold them to spaces), and
/// characters XML 1.0 forbids shown as `\u{..}`.
fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Text for Markdown: characters that would start markup or split a table cell are
/// backslash-escaped.
fn md_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in one_line(text).chars() {
        if matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '#'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Line breaks folded to spaces.
fn one_line(text: &str) -> String {
    text.split(['\n', '\r'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A path as a Markdown link target: `/`-separated, with characters that would end or
/// confuse the link percent-encoded.
fn url_path(path: &Path) -> String {
    let text = path.to_string_lossy();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '%' | ' ' | '(' | ')' | '<' | '>' | '|' | '[' | ']' | '"' | '#' | '?' => {
                let mut bytes = [0; 4];
                for b in c.encode_utf8(&mut bytes).bytes() {
                    let _ = write!(out, "%{b:02X}");
                }
            }
            c if c.is_control() => {
                let mut bytes = [0; 4];
                for b in c.encode_utf8(&mut bytes).bytes() {
                    let _ = write!(out, "%{b:02X}");
                }
            }
            '\\' => out.push('/'),
            c => out.push(c),
        }
    }
    out
}

/// The components of a path without `.`, or None if it has `..`.
fn plain(path: &Path) -> Option<Vec<Component<'_>>> {
    let parts: Vec<Component> = path
        .components()
        .filter(|c| *c != Component::CurDir)
        .collect();
    (!parts.contains(&Component::ParentDir)).then_some(parts)
}

/// `path` as seen from `base` (both taken as they are, or made absolute against the
/// current folder when one is relative and the other not): `results/a/x` from `results/b`
/// is `../a/x`. Paths with `..` in them are left as they are.
fn relative_to(path: &Path, base: &Path) -> PathBuf {
    let (path, base): (Cow<Path>, Cow<Path>) = if path.is_absolute() == base.is_absolute() {
        (Cow::Borrowed(path), Cow::Borrowed(base))
    } else {
        match (std::path::absolute(path), std::path::absolute(base)) {
            (Ok(p), Ok(b)) => (Cow::Owned(p), Cow::Owned(b)),
            _ => return path.to_path_buf(),
        }
    };
    let (Some(to), Some(from)) = (plain(&path), plain(&base)) else {
        return path.into_owned();
    };
    let common = to.iter().zip(&from).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..from.len() {
        out.push("..");
    }
    for part in &to[common..] {
        out.push(part);
    }
    out
}

/// "2.31s".
fn seconds_text(seconds: f64) -> String {
    format!("{seconds:.2}s")
}

/// "12m 3s" (whole seconds; "0s" for less).
fn duration_text(seconds: f64) -> String {
    let whole = if seconds.is_finite() && seconds > 0.0 {
        seconds.round() as u64
    } else {
        0
    };
    humantime::format_duration(Duration::from_secs(whole)).to_string()
}

/// `prefix` then the entries joined by " · ", broken between entries into lines of at most
/// `width` characters where possible; later lines are indented as deep as the prefix.
fn wrap(prefix: &str, entries: &[String], width: usize) -> Vec<String> {
    let indent = " ".repeat(prefix.chars().count());
    let mut lines: Vec<String> = Vec::new();
    let mut line = prefix.to_string();
    let mut empty = true;
    for entry in entries {
        let len = line.chars().count();
        if !empty && len + 3 + entry.chars().count() > width {
            lines.push(std::mem::take(&mut line));
            line.push_str(&indent);
            empty = true;
        }
        if !empty {
            line.push_str(" · ");
        }
        line.push_str(entry);
        empty = false;
    }
    if !empty {
        lines.push(line);
    }
    lines
}

/// `Option<PathBuf>` as a JSON string, lossily for paths that are not UTF-8 (so that a
/// matrix always serialises).
mod lossy_path {
    use std::path::PathBuf;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(path: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        match path {
            Some(p) => s.serialize_some(&p.to_string_lossy()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        Option::<String>::deserialize(d).map(|p| p.map(PathBuf::from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEMESES: [&str; 11] = crate::nemesis::PRESETS;
    const ALGORITHMS: [&str; 7] = crate::locks::ALGORITHMS;

    fn found(kinds: &[(&str, u64)]) -> BTreeMap<String, u64> {
        kinds.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    }

    fn expect(must: &[&str], may: &[&str]) -> Expectation {
        Expectation {
            must: must.iter().map(|s| s.to_string()).collect(),
            may: may.iter().map(|s| s.to_string()).collect(),
            ..Expectation::default()
        }
    }

    /// Two algorithms × three nemeses: one pass with expected kinds, one differs, one
    /// error, one skipped, two plain passes.
    fn small() -> Matrix {
        let mut m = Matrix {
            started_wall: "2026-05-01T10:00:00Z".into(),
            seconds: 95.5,
            seed: 42,
            ..Matrix::default()
        };
        m.push(
            Cell::judge("setnx-del", "none", expect(&[], &[]), found(&[])).with_run("r/a", 10.5),
        );
        m.push(
            Cell::judge(
                "setnx-del",
                "kill-clients",
                expect(&["unavailable"], &[]),
                found(&[("unavailable", 3), ("overlap", 0)]),
            )
            .with_run("r/b", 11.25),
        );
        let mut differs = Cell::judge(
            "set-nx-px",
            "pause-clients",
            expect(&["overlap"], &[]),
            found(&[("overlap", 2), ("stale-write", 1)]),
        )
        .with_run("r/c", 12.0);
        differs.first_anomaly_ms = Some(2310.0);
        differs.events = 500;
        differs.faults = 4;
        m.push(differs);
        m.push(Cell::error(
            "set-nx-px",
            "failover",
            expect(&["overlap"], &[]),
            "redis-server exited",
        ));
        m.push(Cell::not_applicable(
            "setnx-del",
            "failover",
            expect(&[], &[]),
            "failover needs replicas",
        ));
        m.push(Cell::judge("set-nx-px", "none", expect(&[], &[]), found(&[])).with_run("r/f", 9.0));
        m.push(
            Cell::judge("set-nx-px", "kill-clients", expect(&[], &[]), found(&[]))
                .with_run("r/g", 9.0),
        );
        m
    }

    /// The full grid, every cell a pass except where `odd` says.
    fn full(odd: impl Fn(&str, &str) -> Option<Cell>) -> Matrix {
        let mut m = Matrix::default();
        for a in ALGORITHMS {
            for n in NEMESES {
                let cell = odd(a, n).unwrap_or_else(|| {
                    Cell::judge(a, n, expect(&[], &[]), found(&[]))
                        .with_run(format!("results/audit/{a}-{n}"), 1.0)
                });
                m.push(cell);
            }
        }
        m
    }

    #[test]
    fn judge_follows_the_expectation() {
        let pass = Cell::judge(
            "a",
            "n",
            expect(&["overlap"], &[]),
            found(&[("overlap", 1)]),
        );
        assert_eq!(pass.status, Status::Pass);
        assert_eq!(pass.why, None);
        let differs = Cell::judge("a", "n", expect(&["overlap"], &[]), found(&[]));
        assert_eq!(differs.status, Status::Differs);
        assert!(differs.why.as_deref().unwrap().contains("overlap"));
        // Zero counts are dropped, and do not count as found.
        let zero = Cell::judge("a", "n", expect(&[], &[]), found(&[("overlap", 0)]));
        assert_eq!(zero.status, Status::Pass);
        assert!(zero.found.is_empty());
    }

    #[test]
    fn differs_and_errors_fail_the_audit_skips_do_not() {
        let m = small();
        assert!(!m.passed());
        assert_eq!(
            m.counts(),
            Counts {
                cells: 7,
                passed: 4,
                differs: 1,
                errors: 1,
                not_applicable: 1
            }
        );

        let only_skips = full(|a, n| {
            (a == "setnx-del" && n == "failover")
                .then(|| Cell::not_applicable(a, n, expect(&[], &[]), "no replicas"))
        });
        assert!(only_skips.passed());

        let one_error = full(|a, n| {
            (a == "redlock" && n == "mix").then(|| Cell::error(a, n, expect(&[], &[]), "boom"))
        });
        assert!(!one_error.passed());

        let one_differs = full(|a, n| {
            (a == "redlock" && n == "mix")
                .then(|| Cell::judge(a, n, expect(&[], &[]), found(&[("overlap", 1)])))
        });
        assert!(!one_differs.passed());
        assert_eq!(one_differs.failures().len(), 1);
    }

    #[test]
    fn the_table_has_a_row_per_algorithm_and_abbreviations() {
        let table = small().to_table();
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("algorithm"), "{table}");
        for n in ["none", "kill-clients", "pause-clients", "failover"] {
            assert!(lines[0].contains(n), "{table}");
        }
        let row = |name: &str| {
            *lines
                .iter()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("no row {name}:\n{table}"))
        };
        // setnx-del: none ok, kill-clients unavail (expected), no pause-clients cell, skipped.
        let del: Vec<&str> = row("setnx-del").split_whitespace().collect();
        assert_eq!(del, ["setnx-del", "ok", "unavail", "?", "n/a"], "{table}");
        let px: Vec<&str> = row("set-nx-px").split_whitespace().collect();
        assert_eq!(
            px,
            ["set-nx-px", "ok", "ok", "overlap,stale", "✗", "ERR"],
            "{table}"
        );
        // Columns line up: each cell starts under its header.
        let column = lines[0].find("pause-clients").unwrap();
        let line = row("set-nx-px");
        assert_eq!(
            line.char_indices()
                .position(|(i, _)| i == line.find("overlap").unwrap()),
            Some(column),
            "{table}"
        );
        assert!(table.contains("stale = stale-write"), "{table}");
        assert!(table.contains("unavail = unavailable"), "{table}");
        assert!(table.contains("? = not run"), "{table}");
        // One line per failing or skipped cell, with its run folder.
        assert!(
            table.contains(
                "set-nx-px × pause-clients: not expected: stale-write ×1, first anomaly at 2.31s (r/c)"
            ),
            "{table}"
        );
        assert!(
            table.contains("ERR set-nx-px × failover: redis-server exited"),
            "{table}"
        );
        assert!(
            table.contains("setnx-del × failover: failover needs replicas"),
            "{table}"
        );
        assert!(!table.contains("setnx-del × none"), "{table}");
        assert!(table.contains("FAILED"), "{table}");
    }

    #[test]
    fn the_full_table_fits_in_120_columns() {
        let m = full(|a, n| match (a, n) {
            ("set-nx-px", "pause-clients") => Some(Cell::judge(
                a,
                n,
                expect(&["overlap"], &[]),
                found(&[("overlap", 3), ("stale-write", 2), ("lost-lock", 1)]),
            )),
            ("setnx-getset", "clock-skew") => Some(Cell::judge(
                a,
                n,
                expect(&[], &[]),
                found(&[("overlap", 3), ("stale-write", 2)]),
            )),
            ("redlock", "crash-points") => Some(Cell::error(a, n, expect(&[], &[]), "x")),
            _ => None,
        });
        let table = m.to_table();
        let rows: Vec<&str> = table.lines().take(2 + ALGORITHMS.len()).collect();
        for line in &rows {
            assert!(line.chars().count() <= 120, "{}:\n{table}", line.len());
        }
        for a in ALGORITHMS {
            assert!(rows.iter().any(|l| l.starts_with(a)), "{a}\n{table}");
        }
        assert!(rows[0].contains("kill-cl"), "{table}");
        assert!(table.contains("kill-cl = kill-clients"), "{table}");
        let getset = rows.iter().find(|l| l.starts_with("setnx-getset")).unwrap();
        assert!(
            getset.contains("OV+SW ✗") || getset.contains("overlap,stale ✗"),
            "{table}"
        );
        // Every line of the legend fits too.
        for line in table.lines().filter(|l| !l.contains(" × ")) {
            assert!(line.chars().count() <= 120, "{line}");
        }
    }

    #[test]
    fn the_markdown_has_every_nemesis_every_algorithm_and_links() {
        let m = small();
        let md = m.to_markdown();
        let lines: Vec<&str> = md.lines().collect();
        let header = lines
            .iter()
            .position(|l| l.starts_with("| algorithm |"))
            .expect("a table");
        assert_eq!(
            lines[header],
            "| algorithm | none | kill-clients | pause-clients | failover |"
        );
        assert_eq!(lines[header + 1], "|---|---|---|---|---|");
        assert_eq!(
            lines[header + 2],
            "| setnx-del | [ok](r/a/index.html) | [unavailable](r/b/index.html) | ? | n/a |"
        );
        assert_eq!(
            lines[header + 3],
            "| set-nx-px | [ok](r/f/index.html) | [ok](r/g/index.html) | \
             [**overlap, stale-write ✗**](r/c/index.html) | **ERR** |"
        );
        assert!(md.contains("## Time to first anomaly"), "{md}");
        assert!(md.contains("| 2.31s |"), "{md}");
        let differences = md.split("## Differences").nth(1).expect("differences");
        assert!(
            differences
                .contains("**set-nx-px × pause-clients** (differs): not expected: stale-write ×1"),
            "{md}"
        );
        assert!(differences.contains("[report](r/c/index.html)"), "{md}");
        assert!(
            differences.contains("**set-nx-px × failover** (error): redis-server exited"),
            "{md}"
        );
        assert!(md.contains("## Legend"), "{md}");
        assert!(md.contains("**FAILED**"), "{md}");
    }

    #[test]
    fn markdown_escapes_and_links_relative_to_its_folder() {
        let mut m = Matrix::default();
        m.push(
            Cell::judge("a|b", "none", expect(&[], &[]), found(&[("overlap", 1)]))
                .with_run("results/audit-1/a b", 1.0),
        );
        let md = m.to_markdown_in(Path::new("results/audit-1"));
        assert!(md.contains("| a\\|b |"), "{md}");
        assert!(md.contains("(a%20b/index.html)"), "{md}");
        let md = m.to_markdown_in(Path::new("results/elsewhere"));
        assert!(md.contains("(../audit-1/a%20b/index.html)"), "{md}");
    }

    #[test]
    fn the_legend_wraps_between_entries() {
        let entries: Vec<String> = ["ok = valid", "ERR = the run failed", "OV = overlap"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            wrap("legend: ", &entries, 41),
            [
                "legend: ok = valid · ERR = the run failed",
                "        OV = overlap"
            ]
        );
        assert_eq!(
            wrap("legend: ", &entries, 200),
            ["legend: ok = valid · ERR = the run failed · OV = overlap"]
        );
    }

    #[test]
    fn relative_paths() {
        let rel = |p: &str, b: &str| relative_to(Path::new(p), Path::new(b));
        assert_eq!(rel("results/a/x", "results/b"), PathBuf::from("../a/x"));
        assert_eq!(rel("/r/a/x", "/r/a"), PathBuf::from("x"));
        assert_eq!(rel("./r/a", "r"), PathBuf::from("a"));
        assert_eq!(rel("../r/a", "r"), PathBuf::from("../r/a"));
    }

    #[test]
    fn json_round_trips() {
        let m = small();
        let text = m.to_json();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["passed"], false);
        assert_eq!(value["counts"]["differs"], 1);
        assert_eq!(value["cells"][2]["status"], "differs");
        assert_eq!(value["cells"][2]["found"]["stale-write"], 1);
        assert_eq!(value["cells"][2]["run_dir"], "r/c");
        let back = Matrix::from_json(&text).unwrap();
        assert_eq!(back, m);
        // A hand-trimmed cell still reads, and an older audit's "skipped" is "n/a".
        let cell: Cell =
            serde_json::from_str(r#"{"algorithm": "a", "nemesis": "n", "status": "skipped"}"#)
                .unwrap();
        assert_eq!(cell.status, Status::NotApplicable);
        assert_eq!(
            serde_json::to_value(Status::NotApplicable).unwrap(),
            serde_json::json!("n/a")
        );
    }

    #[test]
    fn junit_parses_with_the_right_counts_and_escapes() {
        let mut m = small();
        m.push(Cell::error(
            "redlock",
            "mix",
            expect(&[], &[]),
            "bad <&\"> 'quote'\nsecond line\u{1b}",
        ));
        let xml = m.to_junit();
        let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
        let suite = doc.root_element();
        assert_eq!(suite.tag_name().name(), "testsuite");
        assert_eq!(suite.attribute("name"), Some("lockaudit audit"));
        assert_eq!(suite.attribute("tests"), Some("8"));
        assert_eq!(suite.attribute("failures"), Some("1"));
        assert_eq!(suite.attribute("errors"), Some("2"));
        assert_eq!(suite.attribute("skipped"), Some("1"));
        assert_eq!(suite.attribute("time"), Some("95.500"));
        let cases: Vec<_> = suite
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        assert_eq!(cases.len(), 8);
        let count = |tag: &str| {
            cases
                .iter()
                .filter(|c| c.children().any(|n| n.has_tag_name(tag)))
                .count()
        };
        assert_eq!(count("failure"), 1);
        assert_eq!(count("error"), 2);
        assert_eq!(count("skipped"), 1);
        assert_eq!(count("system-out"), 8);

        let case = |class: &str, name: &str| {
            *cases
                .iter()
                .find(|c| {
                    c.attribute("classname") == Some(class) && c.attribute("name") == Some(name)
                })
                .unwrap_or_else(|| panic!("no case {class} {name}\n{xml}"))
        };
        let failure = case("set-nx-px", "pause-clients")
            .children()
            .find(|n| n.has_tag_name("failure"))
            .unwrap();
        assert_eq!(
            failure.attribute("message"),
            Some("not expected: stale-write ×1")
        );
        let body = failure.text().unwrap();
        assert!(body.contains("found: overlap ×2, stale-write ×1"), "{body}");
        assert!(body.contains("run folder: r/c"), "{body}");
        assert_eq!(
            case("set-nx-px", "pause-clients").attribute("time"),
            Some("12.000")
        );

        let error = case("redlock", "mix")
            .children()
            .find(|n| n.has_tag_name("error"))
            .unwrap();
        assert_eq!(
            error.attribute("message"),
            Some("bad <&\"> 'quote'\nsecond line\\u{1b}")
        );
        let out = case("setnx-del", "kill-clients")
            .children()
            .find(|n| n.has_tag_name("system-out"))
            .unwrap();
        assert!(out.text().unwrap().contains("run folder: r/b"));
        let skipped = case("setnx-del", "failover")
            .children()
            .find(|n| n.has_tag_name("skipped"))
            .unwrap();
        assert_eq!(
            skipped.attribute("message"),
            Some("not applicable: failover needs replicas")
        );
    }

    #[test]
    fn write_all_writes_the_three_files() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("audit");
        let mut m = small();
        m.cells[0].run_dir = Some(out.join("setnx-del-none"));
        let paths = m.write_all(&out).unwrap();
        let names: Vec<String> = paths
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["audit.md", "audit.json", "audit.xml"]);
        let md = std::fs::read_to_string(&paths[0]).unwrap();
        assert!(md.contains("[ok](setnx-del-none/index.html)"), "{md}");
        let json = std::fs::read_to_string(&paths[1]).unwrap();
        assert_eq!(Matrix::from_json(&json).unwrap(), m);
        let xml = std::fs::read_to_string(&paths[2]).unwrap();
        roxmltree::Document::parse(&xml).unwrap();
    }
}
