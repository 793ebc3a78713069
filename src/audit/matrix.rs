//! The verdict matrix of `lockaudit audit`: one cell per algorithm × nemesis preset. Its
//! renderings live beside it — a table for the terminal (`table.rs`), Markdown for people
//! (`audit.md`, `markdown.rs`), JSON for scripts (`audit.json`, `json.rs`) and JUnit XML for
//! CI (`audit.xml`, `junit.rs`); `write_all` here writes the three files.
//!
//! A cell passes when what its run found meets the workload's [`Expectation`] for that
//! nemesis; it differs when it does not; it is an error when the run could not be carried
//! out; it is not applicable ("n/a") when no fault of the preset can act on the cell's run
//! (failover without replicas, clock-skew on a client that never reads its clock): such a
//! cell is no pass (it proves nothing about the fault) and no failure, and it is not run.
//! The audit passes when no cell differs and none is an error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::shard::Shard;
use crate::presets::Column;
use crate::report::{AnomalyKind, KindCounts};
use crate::run_record::Phases;
use crate::workload::expect::Expectation;

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
    /// The run was carried out and its history is valid, but none of its preset's faults
    /// acted on the running clients (`why` says so): it tested nothing of what the cell
    /// asks, so it is no pass, and it fails the audit.
    Untested,
}

impl Status {
    /// Whether this cell fails the audit.
    pub fn fails(self) -> bool {
        matches!(self, Status::Differs | Status::Error | Status::Untested)
    }

    /// "pass", "differs", "error", "n/a".
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Differs => "differs",
            Status::Error => "error",
            Status::NotApplicable => "n/a",
            Status::Untested => "untested",
        }
    }
}

/// One algorithm under one nemesis preset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub algorithm: String,
    pub nemesis: Column,
    pub status: Status,
    /// Differs: how (from [`Expectation::differs`]); Error: the error; n/a: why no fault of
    /// the preset can act.
    #[serde(default)]
    pub why: Option<String>,
    /// Anomaly counts by kind (kinds with a count of zero are left out).
    #[serde(default)]
    pub found: KindCounts,
    #[serde(default)]
    pub expected: Expectation,
    /// The cell's run folder (`history.jsonl`, `report.json`, `index.html`, ...).
    #[serde(default, with = "lossy_path")]
    pub run_dir: Option<PathBuf>,
    /// Whether the run folder has its report page, `index.html` (a run that could not
    /// start has none): the renderings link only a page that exists.
    #[serde(default = "page_by_default")]
    pub page: bool,
    /// Wall time the cell took, in seconds.
    #[serde(default)]
    pub seconds: f64,
    /// When the cell began, in seconds from the audit's start (with `--jobs`, cells run
    /// side by side).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_s: Option<f64>,
    /// When the first anomaly began on the run's clock, in ms: time to first anomaly.
    #[serde(default)]
    pub first_anomaly_ms: Option<f64>,
    /// When the run had proven what the cell must find, in ms of the run's clock: for each
    /// `must` kind, its first anomaly's proof (an overlap at the second grant, another kind
    /// at its end: a lost update's final read), the latest of those. None when nothing must
    /// be found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proven_ms: Option<f64>,
    /// Where the cell's run spent its time (servers, workload, teardown, verdict); None for a
    /// cell whose run did not end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<Phases>,
    /// Events in the cell's history.
    #[serde(default)]
    pub events: u64,
    /// Faults the nemesis injected.
    #[serde(default)]
    pub faults: u64,
    /// The signal that cut the cell's run short ("SIGINT"), before its verdict: an error
    /// cell, its figures those of the history recorded before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    /// With more than one round: the cell over them all, whose `status` follows the rate
    /// rule; the rest of the cell is the round it links to. None for a one-round audit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<CellRounds>,
}

/// A cell over an audit's rounds (`audit --rounds N`): how many met the expectation, how
/// many had to, how often each `must` kind was found and how soon it was proven. Rounds
/// not applicable or cut short by a signal count for nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CellRounds {
    /// Rounds that met the expectation.
    pub met: usize,
    /// Rounds that reached a verdict.
    pub of: usize,
    /// Rounds that must meet it: the expectation's `rate` of `of`, rounded up; all without one.
    pub required: usize,
    /// Per `must` kind, the rounds that found it.
    #[serde(default)]
    pub found: BTreeMap<AnomalyKind, usize>,
    /// The median and 90th percentile (nearest rank) of `proven_ms` over the rounds that met
    /// the expectation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_proven_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p90_proven_ms: Option<f64>,
}

impl CellRounds {
    /// Whether enough rounds met the expectation.
    pub fn met_rate(&self) -> bool {
        self.met >= self.required
    }

    /// The `must` kinds with the rounds that found them, in `AnomalyKind::ALL`'s order.
    pub fn found_in_order(&self) -> impl Iterator<Item = (AnomalyKind, usize)> + '_ {
        AnomalyKind::ALL
            .into_iter()
            .filter_map(|k| self.found.get(&k).map(|n| (k, *n)))
    }

    /// "9/10", and per `must` kind found in another number of rounds, " (overlap 10/10)".
    pub fn rate_text(&self) -> String {
        let mut text = format!("{}/{}", self.met, self.of);
        let kinds: Vec<String> = self
            .found_in_order()
            .filter(|(_, n)| *n != self.met)
            .map(|(k, n)| format!("{k} {n}/{}", self.of))
            .collect();
        if !kinds.is_empty() {
            text += &format!(" ({})", kinds.join(", "));
        }
        text
    }
}

impl Cell {
    /// A cell whose run was carried out: Pass if `found` meets `expected`, else Differs with
    /// the expectation's explanation. Kinds counted zero are dropped from `found`. The run's
    /// particulars (`run_dir`, `seconds`, `first_anomaly_ms`, `events`, `faults`) start
    /// empty: set the fields, or use [`Cell::with_run`].
    pub fn judge(
        algorithm: impl Into<String>,
        nemesis: impl Into<Column>,
        expected: Expectation,
        found: KindCounts,
    ) -> Cell {
        let found: KindCounts = found.into_iter().filter(|(_, n)| *n > 0).collect();
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
            page: false,
            seconds: 0.0,
            started_s: None,
            first_anomaly_ms: None,
            proven_ms: None,
            phases: None,
            events: 0,
            faults: 0,
            interrupted: None,
            rounds: None,
        }
    }

    /// A cell whose run could not be carried out.
    pub fn error(
        algorithm: impl Into<String>,
        nemesis: impl Into<Column>,
        expected: Expectation,
        error: impl Into<String>,
    ) -> Cell {
        Cell {
            status: Status::Error,
            why: Some(error.into()),
            ..Cell::judge(algorithm, nemesis, expected, BTreeMap::new())
        }
    }

    /// A cell whose run was valid but none of whose faults acted, and why.
    pub fn untested(
        algorithm: impl Into<String>,
        nemesis: impl Into<Column>,
        expected: Expectation,
        why: impl Into<String>,
    ) -> Cell {
        Cell {
            status: Status::Untested,
            why: Some(why.into()),
            ..Cell::judge(algorithm, nemesis, expected, BTreeMap::new())
        }
    }

    /// A cell not run because no fault of its preset can act on it, and why (e.g.
    /// "failover needs replicas").
    pub fn not_applicable(
        algorithm: impl Into<String>,
        nemesis: impl Into<Column>,
        expected: Expectation,
        reason: impl Into<String>,
    ) -> Cell {
        Cell {
            status: Status::NotApplicable,
            why: Some(reason.into()),
            ..Cell::judge(algorithm, nemesis, expected, BTreeMap::new())
        }
    }

    /// Sets the run's folder and wall time; the folder is taken to hold its report page
    /// (clear `page` if it does not).
    pub fn with_run(mut self, run_dir: impl Into<PathBuf>, seconds: f64) -> Cell {
        self.run_dir = Some(run_dir.into());
        self.page = true;
        self.seconds = seconds;
        self
    }

    /// Total anomalies found.
    pub fn anomalies(&self) -> u64 {
        self.found.values().sum()
    }

    /// What a cell that found no anomaly shows: "error" for one whose run had to stop on
    /// an error (`Expectation::error`, met), "ok" for any other pass, "valid" otherwise.
    pub(super) fn nothing_found_text(&self) -> &'static str {
        match self.status {
            Status::Pass if self.expected.error.is_some() => "error",
            Status::Pass => "ok",
            _ => "valid",
        }
    }

    /// The kinds found with their counts, in `AnomalyKind::ALL`'s order.
    pub(super) fn kinds(&self) -> Vec<(AnomalyKind, u64)> {
        AnomalyKind::ALL
            .into_iter()
            .filter_map(|k| self.found.get(&k).map(|n| (k, *n)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// "overlap ×2, stale-write ×1" or "nothing".
    pub(super) fn found_text(&self) -> String {
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
    pub(super) fn expected_text(&self) -> String {
        let mut parts = Vec::new();
        if !self.expected.must.is_empty() {
            parts.push(format!(
                "must {}",
                AnomalyKind::join(&self.expected.must, ", ")
            ));
        }
        if !self.expected.may.is_empty() {
            parts.push(format!(
                "may {}",
                AnomalyKind::join(&self.expected.may, ", ")
            ));
        }
        if parts.is_empty() {
            "a valid run".into()
        } else {
            parts.join("; ")
        }
    }

    /// The reason, or a stand-in when none was given.
    pub(super) fn why_text(&self) -> &str {
        self.why.as_deref().unwrap_or(match self.status {
            Status::Pass => "as expected",
            Status::Differs => "differs from the expectation",
            Status::Error => "the run could not be carried out",
            Status::NotApplicable => "not applicable",
            Status::Untested => "no fault of the preset acted",
        })
    }

    /// The cell's report page, `run_dir/index.html`, if it has one.
    pub(super) fn report_page(&self) -> Option<PathBuf> {
        self.run_dir
            .as_ref()
            .filter(|_| self.page)
            .map(|dir| dir.join("index.html"))
    }
}

/// An `audit.json` written before `page` was recorded: a cell with a run folder linked it.
fn page_by_default() -> bool {
    true
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
    /// Valid, but none of the preset's faults acted: no pass.
    #[serde(default)]
    pub untested: usize,
}

/// Every algorithm under every nemesis preset.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Matrix {
    /// Row order.
    pub algorithms: Vec<String>,
    /// Column order.
    pub nemeses: Vec<Column>,
    pub cells: Vec<Cell>,
    /// When the audit began, RFC 3339 wall time.
    #[serde(default)]
    pub started_wall: String,
    /// Wall time of the whole audit, in seconds.
    #[serde(default)]
    pub seconds: f64,
    /// The seed of the first round (each round adds 1).
    #[serde(default)]
    pub seed: u64,
    /// With more than one round (`audit --rounds`): how many; each cell is then over them
    /// all (`Cell::rounds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<usize>,
    /// The hosts the lock servers ran on (`audit --node`); empty: this machine.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// The signal that cut the audit short ("SIGINT"): the matrix holds the cells that
    /// finished, and those cut short marked `interrupted`; the others never ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    /// `audit --shard K/N`: which share of which whole audit this matrix holds (its cells
    /// are that share's); `audit --merge` joins the shares. None for a whole audit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
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

    /// "seed 7", or over rounds "seeds 7 to 16".
    pub fn seeds_text(&self) -> String {
        match self.rounds {
            Some(n) if n > 1 => format!("seeds {} to {}", self.seed, self.seed + n as u64 - 1),
            _ => format!("seed {}", self.seed),
        }
    }

    /// The cell of `algorithm` under `nemesis`, if there is one.
    pub fn cell(&self, algorithm: &str, nemesis: &str) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.algorithm == algorithm && c.nemesis == *nemesis)
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
                Status::Untested => counts.untested += 1,
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
    pub fn counts_text(&self) -> String {
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
        if c.untested > 0 {
            parts.push(format!("{} untested", c.untested));
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

    /// "time in cells: setup 12% · workload 80% · teardown 5% · verdict 3% (of 410 s over 22
    /// runs)": where the cells' runs spent their time, summed (side by side, the runs' time
    /// exceeds the audit's). None when no cell's run ended.
    pub fn phases_text(&self) -> Option<String> {
        let phases: Vec<&Phases> = self
            .ordered_cells()
            .into_iter()
            .filter_map(|c| c.phases.as_ref())
            .collect();
        let sum = |f: fn(&Phases) -> f64| phases.iter().map(|p| f(p)).sum::<f64>();
        let total = sum(Phases::total);
        if total <= 0.0 {
            return None;
        }
        let share = |f: fn(&Phases) -> f64| (100.0 * sum(f) / total).round();
        Some(format!(
            "time in cells: setup {}% · workload {}% · teardown {}% · verdict {}% (of {:.0} s over {} run{})",
            share(|p| p.setup_s),
            share(|p| p.workload_s),
            share(|p| p.teardown_s),
            share(|p| p.verdict_s),
            total,
            phases.len(),
            if phases.len() == 1 { "" } else { "s" }
        ))
    }

    /// Writes `audit.md` and `audit.html` (links relative to `dir`), `audit.json` and
    /// `audit.xml` into `dir`, creating it if needed; returns their paths.
    pub fn write_all(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir)?;
        let files = [
            ("audit.md", self.to_markdown_in(dir)),
            ("audit.html", self.to_html_in(dir)),
            ("audit.json", self.to_json() + "\n"),
            ("audit.xml", self.to_junit()),
        ];
        let mut paths = Vec::new();
        for (name, text) in files {
            let path = dir.join(name);
            crate::outfile::write(&path, text)?;
            paths.push(path);
        }
        Ok(paths)
    }
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
    use crate::audit::fixtures::{expect, found, full, small};

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
    fn the_cells_time_is_shared_out_by_phase_over_the_runs_that_ended() {
        let mut m = small();
        // No cell's run ended with its phases: nothing to say.
        assert_eq!(m.phases_text(), None);
        let phases = |setup_s, workload_s, teardown_s, verdict_s| Phases {
            setup_s,
            workload_s,
            teardown_s,
            verdict_s,
            ..Phases::default()
        };
        m.cells[0].phases = Some(phases(1.0, 6.0, 0.5, 0.5));
        m.cells[1].phases = Some(phases(1.0, 10.0, 0.5, 0.5));
        // 2 + 16 + 1 + 1 = 20 s over two runs; the cells without phases count for nothing.
        assert_eq!(
            m.phases_text().as_deref(),
            Some("time in cells: setup 10% · workload 80% · teardown 5% · verdict 5% (of 20 s over 2 runs)")
        );
        assert!(m.to_table().contains("workload 80%"), "{}", m.to_table());
        assert!(m.to_markdown().contains("workload 80%"));
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
                not_applicable: 1,
                untested: 0,
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
    fn an_untested_cell_fails_the_audit_and_every_rendering_says_so() {
        let m = full(|a, n| {
            (a == "redlock" && n == "mix")
                .then(|| Cell::untested(a, n, expect(&["overlap"], &[]), "no fault acted: ..."))
        });
        assert!(!m.passed());
        assert_eq!(m.counts().untested, 1);
        assert_eq!(m.failures().len(), 1);
        assert!(
            m.counts_text().ends_with("1 untested"),
            "{}",
            m.counts_text()
        );
        assert!(m.to_table().contains("untested"), "{}", m.to_table());
        assert!(
            m.to_markdown().contains("(untested): no fault acted"),
            "{}",
            m.to_markdown()
        );
        let json = m.to_json();
        assert!(json.contains(r#""status": "untested""#), "{json}");
        assert_eq!(Matrix::from_json(&json).unwrap(), m);
        let dir = tempfile::tempdir().unwrap();
        let paths = m.write_all(dir.path()).unwrap();
        let xml = std::fs::read_to_string(&paths[3]).unwrap();
        assert!(xml.contains(r#"type="untested""#), "{xml}");
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
        assert_eq!(names, ["audit.md", "audit.html", "audit.json", "audit.xml"]);
        let md = std::fs::read_to_string(&paths[0]).unwrap();
        assert!(md.contains("[ok](setnx-del-none/index.html)"), "{md}");
        let html = std::fs::read_to_string(&paths[1]).unwrap();
        assert!(
            html.contains(r#"href="./setnx-del-none/index.html""#),
            "{html}"
        );
        let json = std::fs::read_to_string(&paths[2]).unwrap();
        assert_eq!(Matrix::from_json(&json).unwrap(), m);
        let xml = std::fs::read_to_string(&paths[3]).unwrap();
        roxmltree::Document::parse(&xml).unwrap();
    }
}
