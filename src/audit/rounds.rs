//! An audit's rounds (`--rounds N`): each cell's reach over them (how many rounds met its
//! expectation, found each `must` kind, and how soon), the matrix of each cell over the
//! rounds judged by its workload's rate, and the detection table. Everything here is
//! derived from the rounds' matrices, so an audit read back from its files (`--merge`) has
//! the same.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::presets::Column;
use crate::report::{AnomalyKind, Percentiles};
use crate::units::Millis;
use crate::workload::expect::Rate;

use super::matrix::{Cell, CellRounds, Matrix, Status};
use super::text::duration_text;

/// How often one cell reached its expectation over the rounds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reach {
    pub algorithm: String,
    pub nemesis: Column,
    pub must: Vec<AnomalyKind>,
    /// The error its runs must stop on, for a cell that expects one instead of kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Runs that reached a verdict.
    pub runs: usize,
    /// Runs that met the expectation.
    pub passed: usize,
    /// Runs that must meet it: the expectation's `rate` of `runs`, rounded up; all without one.
    #[serde(default)]
    pub required: usize,
    /// The expectation's rate, if it states one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// Per `must` kind, the runs that found it.
    #[serde(default)]
    pub found: BTreeMap<AnomalyKind, usize>,
    /// Per run that found them, when the first anomaly of a `must` kind began (ms of run
    /// time).
    pub first_anomaly_ms: Vec<f64>,
    /// Per run that met it, when its proof of every `must` kind was complete (ms of run
    /// time; `Cell::proven_ms`).
    #[serde(default)]
    pub proven_ms: Vec<f64>,
}

impl Reach {
    pub fn median_first_ms(&self) -> Option<f64> {
        crate::report::median(&self.first_anomaly_ms)
    }

    pub fn median_proven_ms(&self) -> Option<f64> {
        crate::report::median(&self.proven_ms)
    }

    /// The 90th percentile (nearest rank) of the time to proof.
    pub fn p90_proven_ms(&self) -> Option<f64> {
        let mut values = self.proven_ms.clone();
        (!values.is_empty()).then(|| Percentiles::of(&mut values).p90)
    }

    /// The cell over the rounds, as its `rounds` in the matrix.
    pub fn summary(&self) -> CellRounds {
        CellRounds {
            met: self.passed,
            of: self.runs,
            required: self.required,
            found: self.found.clone(),
            median_proven_ms: self.median_proven_ms(),
            p90_proven_ms: self.p90_proven_ms(),
        }
    }
}

/// Each cell's reach over `rounds`, in the matrix's order: how many of its runs met their
/// expectation, how many had to, which `must` kinds they found, and when they found and
/// proved them. A cell not applicable is no run; one cut short by a signal is left out (it
/// reached no verdict).
pub fn reach_of(rounds: &[Matrix]) -> Vec<Reach> {
    // One entry per cell, in the matrix's order (rows, then columns), as its first round
    // has it.
    let mut reach: Vec<Reach> = (grid_of(rounds).ordered_cells().into_iter())
        .map(|cell| Reach {
            algorithm: cell.algorithm.clone(),
            nemesis: cell.nemesis.clone(),
            must: cell.expected.must.clone(),
            error: cell.expected.error.clone(),
            rate: cell.expected.rate,
            found: cell.expected.must.iter().map(|&k| (k, 0)).collect(),
            ..Reach::default()
        })
        .collect();
    let place: BTreeMap<(String, Column), usize> = (reach.iter().enumerate())
        .map(|(i, r)| ((r.algorithm.clone(), r.nemesis.clone()), i))
        .collect();
    for cell in rounds.iter().flat_map(|round| &round.cells) {
        let entry = &mut reach[place[&(cell.algorithm.clone(), cell.nemesis.clone())]];
        if cell.status == Status::NotApplicable || cell.interrupted.is_some() {
            continue;
        }
        entry.runs += 1;
        entry.passed += usize::from(!cell.status.fails());
        for (kind, rounds) in entry.found.iter_mut() {
            *rounds += usize::from(cell.found.get(kind).is_some_and(|n| *n > 0));
        }
        if let Some(ms) = cell
            .first_anomaly_ms
            .filter(|_| !cell.expected.must.is_empty())
        {
            entry.first_anomaly_ms.push(ms);
        }
        if let Some(ms) = cell.proven_ms.filter(|_| !cell.status.fails()) {
            entry.proven_ms.push(ms);
        }
    }
    for entry in &mut reach {
        entry.required = entry
            .rate
            .map_or(entry.runs, |rate| rate.required(entry.runs));
    }
    reach
}

/// The cells of every round, each the first time it comes, with the rows and columns in
/// the rounds' order.
fn grid_of(rounds: &[Matrix]) -> Matrix {
    let mut grid = Matrix::default();
    for cell in rounds.iter().flat_map(|round| &round.cells) {
        if grid.cell(&cell.algorithm, cell.nemesis.name()).is_none() {
            grid.push(cell.clone());
        }
    }
    grid
}

/// The matrix of `rounds` (more than one) per cell over them: each cell is the round it
/// links to (the first that met its expectation when enough did, else the first that did
/// not), with its status by the rate rule and its `rounds`. Below its rate a cell differs,
/// unless every round that reached a verdict failed the same other way (an error, untested):
/// then it is that.
fn over_rounds(rounds: &[Matrix], reach: &[Reach], seconds: f64) -> Matrix {
    let first = rounds.first().cloned().unwrap_or_default();
    let grid = grid_of(rounds);
    let mut matrix = Matrix {
        cells: Vec::new(),
        algorithms: grid.algorithms,
        nemeses: grid.nemeses,
        seconds,
        rounds: Some(rounds.len()),
        interrupted: rounds.iter().find_map(|r| r.interrupted.clone()),
        ..first
    };
    for r in reach {
        // The cell in each round, with the round's seed.
        let cells: Vec<(u64, &Cell)> = rounds
            .iter()
            .filter_map(|round| {
                let cell = round
                    .cells
                    .iter()
                    .find(|c| c.algorithm == r.algorithm && c.nemesis == r.nemesis)?;
                Some((round.seed, cell))
            })
            .collect();
        let counted: Vec<&(u64, &Cell)> = cells
            .iter()
            .filter(|(_, c)| c.status != Status::NotApplicable && c.interrupted.is_none())
            .collect();
        let summary = r.summary();
        let mut cell = if counted.is_empty() {
            // Not applicable, or cut short, in every round: as the first round has it.
            cells[0].1.clone()
        } else if summary.met_rate() {
            let (_, met) = counted
                .iter()
                .find(|(_, c)| !c.status.fails())
                .unwrap_or(&counted[0]);
            let mut cell = (*met).clone();
            cell.status = Status::Pass;
            cell
        } else {
            let (seed, missed) = counted
                .iter()
                .find(|(_, c)| c.status.fails())
                .unwrap_or(&counted[0]);
            let mut cell = (*missed).clone();
            let same = counted.iter().all(|(_, c)| c.status == missed.status);
            if !(same && matches!(missed.status, Status::Error | Status::Untested)) {
                cell.status = Status::Differs;
            }
            cell.why = Some(format!(
                "met its expectation in {} of {} rounds, needs {}; seed {seed}: {}",
                summary.met,
                summary.of,
                summary.required,
                missed.why_text()
            ));
            cell
        };
        cell.rounds = Some(summary);
        matrix.push(cell);
    }
    matrix
}

/// The audit's result: its matrix (with more than one round, each cell over them all), each
/// round's own, and the reach over all rounds.
pub struct Audit {
    pub matrix: Matrix,
    pub rounds: Vec<Matrix>,
    pub reach: Vec<Reach>,
    /// Wall time of the whole audit, in seconds: with `--jobs`, rounds overlap, so their
    /// times do not add up to it.
    pub seconds: f64,
}

impl Audit {
    /// The audit of `rounds` (matrices of the same cells, one per seed): with one round,
    /// its matrix; with more, each cell over them all by the rate rule; and each cell's
    /// reach.
    pub fn of_rounds(rounds: Vec<Matrix>, seconds: f64) -> Audit {
        let reach = reach_of(&rounds);
        let matrix = match rounds.len() {
            0 | 1 => rounds.first().cloned().unwrap_or_default(),
            _ => over_rounds(&rounds, &reach, seconds),
        };
        Audit {
            matrix,
            reach,
            rounds,
            seconds,
        }
    }

    /// One line per round (its counts, time and seed) and one for the whole audit, whose
    /// verdict is the matrix's: every cell at its rate.
    ///
    /// ```text
    /// round 1 of 2, seed 1: 2 cells: 2 ok in 21s: PASSED
    /// round 2 of 2, seed 2: 2 cells: 2 ok in 20s: PASSED
    /// 2 rounds: 4 runs in 41s: PASSED
    /// ```
    pub fn rounds_text(&self) -> String {
        let mut out = String::new();
        let total = self.rounds.len();
        for (i, round) in self.rounds.iter().enumerate() {
            out.push_str(&format!(
                "round {} of {total}, seed {}: {} in {}: {}\n",
                i + 1,
                round.seed,
                round.counts_text(),
                duration_text(round.seconds),
                if round.passed() { "PASSED" } else { "FAILED" }
            ));
        }
        let runs: usize = self
            .rounds
            .iter()
            .flat_map(|r| &r.cells)
            .filter(|c| c.status != Status::NotApplicable)
            .count();
        let seconds = self.seconds;
        let below = self.matrix.failures().len();
        let failed = self.rounds.iter().filter(|r| !r.passed()).count();
        out.push_str(&format!(
            "{total} round{}: {runs} run{} in {}: {}\n",
            if total == 1 { "" } else { "s" },
            if runs == 1 { "" } else { "s" },
            duration_text(seconds),
            match (below, failed) {
                (0, 0) => "PASSED".to_string(),
                (0, _) =>
                    format!("PASSED (every cell at its rate; {failed} of {total} rounds failed)"),
                (1, _) => "FAILED (1 cell below its rate)".to_string(),
                _ => format!("FAILED ({below} cells below their rate)"),
            }
        ));
        out
    }
}

/// The detection table in Markdown, in the matrix's order: per cell that must find
/// something, the rounds that met its expectation (and how many must, when its workload
/// states a rate), the rounds that found each `must` kind, and the median and 90th
/// percentile of the time to proof.
pub fn reach_markdown(reach: &[Reach], time_limit: Millis) -> String {
    let mut out = String::new();
    out.push_str(
        "| algorithm | nemesis | must find | met | found | median time to proof | p90 time to proof |\n|---|---|---|---:|---|---:|---:|\n",
    );
    let fmt = |ms: Option<f64>| {
        ms.map(|v| format!("{:.1} s", v / 1000.0))
            .unwrap_or("—".into())
    };
    // A cell expected valid proves nothing by its rate; one that must stop on an error
    // (a flaw no anomaly shows) has a rate as a kind does.
    let proves = |r: &&Reach| (!r.must.is_empty() || r.error.is_some()) && r.runs > 0;
    for r in reach.iter().filter(proves) {
        let met = match r.rate {
            Some(_) => format!("{}/{} (needs {})", r.passed, r.runs, r.required),
            None => format!("{}/{}", r.passed, r.runs),
        };
        let mut found: Vec<String> = r
            .must
            .iter()
            .map(|k| format!("{k} {}/{}", r.found.get(k).copied().unwrap_or(0), r.runs))
            .collect();
        let mut must = AnomalyKind::join(&r.must, ", ");
        if let Some(error) = &r.error {
            must = format!("the error \"{error}\"");
            found.push(format!("the error {}/{}", r.passed, r.runs));
        }
        out.push_str(&format!(
            "| {} | {} | {must} | {met} | {} | {} | {} |\n",
            r.algorithm,
            r.nemesis,
            found.join(", "),
            fmt(r.median_proven_ms()),
            fmt(r.p90_proven_ms()),
        ));
    }
    out.push_str(&format!(
        "\nEach run at most {:.0} s; \"met\" counts the rounds whose verdict met the workload's expectation (without a rate every round must), \"found\" the rounds that found each kind it must find; the proof is when every kind it must find had been proven (an overlap at the second grant, another kind at its anomaly's end: a lost update's final read), over the rounds that met it; p90 is the nearest rank.\n",
        time_limit.0 as f64 / 1000.0
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Expectation;
    use std::path::Path;

    #[test]
    fn the_median_of_first_anomalies() {
        let mut r = Reach::default();
        assert_eq!(r.median_first_ms(), None);
        r.first_anomaly_ms = vec![300.0, 100.0, 200.0];
        assert_eq!(r.median_first_ms(), Some(200.0));
        r.first_anomaly_ms.push(1000.0);
        assert_eq!(r.median_first_ms(), Some(250.0));
    }

    #[test]
    fn every_round_is_reported() {
        let round = |seed: u64, seconds: f64, overlap: u64| {
            let mut m = Matrix {
                seed,
                seconds,
                ..Matrix::default()
            };
            for nemesis in ["none", "kill-clients"] {
                m.push(Cell::judge(
                    "set-nx-px",
                    nemesis,
                    Expectation::default(),
                    [(AnomalyKind::Overlap, overlap)].into(),
                ));
            }
            m
        };
        // The rounds overlapped (cells side by side): the audit took less than their sum.
        let audit = Audit::of_rounds(vec![round(1, 21.0, 0), round(2, 20.4, 1)], 33.0);
        assert_eq!(
            audit.rounds_text(),
            "round 1 of 2, seed 1: 2 cells: 2 ok in 21s: PASSED\n\
             round 2 of 2, seed 2: 2 cells: 0 ok, 2 differ in 20s: FAILED\n\
             2 rounds: 4 runs in 33s: FAILED (2 cells below their rate)\n"
        );
    }

    /// A cell of `must` kinds (with `rate`) that found `found` in a round; a pass or not as
    /// judged, proven at `proven_ms` when it met its expectation.
    fn round_cell(
        nemesis: &str,
        must: &[&str],
        rate: Option<&str>,
        found: &[(&str, u64)],
        proven_ms: f64,
    ) -> Cell {
        let expected = Expectation {
            must: crate::report::named(must),
            rate: rate.map(|r| Rate::parse(r).unwrap()),
            ..Expectation::default()
        };
        let mut cell = Cell::judge(
            "set-nx-px",
            nemesis,
            expected,
            crate::report::counted(found),
        )
        .with_run(format!("r/{nemesis}"), 1.0);
        if !cell.status.fails() {
            cell.proven_ms = Some(proven_ms);
        }
        cell
    }

    /// Matrices of one cell each, `met` of `rounds` meeting `must = ["overlap"]` with
    /// `rate`.
    fn rounds_of(rate: Option<&str>, met: usize, rounds: usize) -> Vec<Matrix> {
        (0..rounds)
            .map(|i| {
                let mut m = Matrix {
                    seed: 1 + i as u64,
                    ..Matrix::default()
                };
                let found: &[(&str, u64)] = if i < met { &[("overlap", 2)] } else { &[] };
                m.push(round_cell(
                    "pause-clients",
                    &["overlap"],
                    rate,
                    found,
                    100.0 * (i + 1) as f64,
                ));
                m
            })
            .collect()
    }

    #[test]
    fn a_cell_passes_when_enough_rounds_met_its_rate() {
        let status = |rate, met, rounds| {
            let audit = Audit::of_rounds(rounds_of(rate, met, rounds), 1.0);
            let cell = &audit.matrix.cells[0];
            (
                cell.status,
                audit.matrix.passed(),
                cell.rounds.clone().unwrap(),
            )
        };
        // 9/10 over 10 rounds: 9 pass, 8 differ.
        let (s, passed, r) = status(Some("9/10"), 9, 10);
        assert_eq!(
            (s, passed, r.met, r.of, r.required),
            (Status::Pass, true, 9, 10, 9)
        );
        let (s, passed, r) = status(Some("9/10"), 8, 10);
        assert_eq!((s, passed, r.required), (Status::Differs, false, 9));
        // Over 3 rounds, 9/10 needs all three; without a rate, every round.
        assert_eq!(status(Some("9/10"), 2, 3).2.required, 3);
        assert_eq!(status(Some("9/10"), 2, 3).0, Status::Differs);
        assert_eq!(status(None, 9, 10).0, Status::Differs);
        assert_eq!(status(None, 10, 10).0, Status::Pass);
        // A cell below its rate says so, and links to a round that missed; one at its rate
        // to a round that met it.
        let audit = Audit::of_rounds(rounds_of(Some("9/10"), 8, 10), 1.0);
        let cell = &audit.matrix.cells[0];
        assert_eq!(
            cell.why.as_deref(),
            Some("met its expectation in 8 of 10 rounds, needs 9; seed 9: expected but not found: overlap")
        );
        let mut rounds = rounds_of(Some("1/2"), 2, 2);
        rounds.rotate_left(1);
        rounds[0].cells[0] = round_cell("pause-clients", &["overlap"], Some("1/2"), &[], 0.0);
        let audit = Audit::of_rounds(rounds, 1.0);
        assert_eq!(audit.matrix.cells[0].status, Status::Pass);
        assert!(audit.matrix.cells[0]
            .found
            .contains_key(&AnomalyKind::Overlap));
        // Errors in every round stay errors.
        let errors: Vec<Matrix> = (0..2)
            .map(|_| {
                let mut m = Matrix::default();
                m.push(Cell::error("a", "none", Expectation::default(), "boom"));
                m
            })
            .collect();
        assert_eq!(
            Audit::of_rounds(errors, 1.0).matrix.cells[0].status,
            Status::Error
        );
    }

    #[test]
    fn the_reach_counts_each_must_kind_and_the_times_to_proof() {
        let both = ["overlap", "lost-update"];
        let mut rounds = Vec::new();
        for (i, found) in [
            &[("overlap", 1), ("lost-update", 1)][..],
            &[("overlap", 3)],
            &[("overlap", 1), ("lost-update", 2)],
            &[("overlap", 1), ("lost-update", 1)],
            &[("lost-update", 1)],
        ]
        .into_iter()
        .enumerate()
        {
            let mut m = Matrix::default();
            m.push(round_cell(
                "none",
                &both,
                None,
                found,
                [400.0, 0.0, 100.0, 300.0, 0.0][i],
            ));
            rounds.push(m);
        }
        let reach = reach_of(&rounds);
        let r = &reach[0];
        assert_eq!((r.runs, r.passed, r.required), (5, 3, 5));
        assert_eq!(
            r.found,
            [(AnomalyKind::Overlap, 4), (AnomalyKind::LostUpdate, 4)].into()
        );
        // Over the three that met it: 100, 300, 400 (odd), then with 200 (even).
        assert_eq!(r.median_proven_ms(), Some(300.0));
        assert_eq!(r.p90_proven_ms(), Some(400.0));
        let mut even = r.clone();
        even.proven_ms.push(200.0);
        assert_eq!(even.median_proven_ms(), Some(250.0));
        assert_eq!(even.p90_proven_ms(), Some(400.0));
        even.proven_ms = (1..=10).map(|i| f64::from(i) * 100.0).collect();
        assert_eq!(even.p90_proven_ms(), Some(900.0));
        let summary = r.summary();
        assert_eq!(summary.rate_text(), "3/5 (overlap 4/5, lost-update 4/5)");
        // The detection table: the cell's rounds, each kind's, and the times.
        let md = reach_markdown(&reach, Millis(30_000));
        assert!(
            md.contains("| set-nx-px | none | overlap, lost-update | 3/5 | overlap 4/5, lost-update 4/5 | 0.3 s | 0.4 s |"),
            "{md}"
        );
        // With a rate, how many were needed.
        let md = reach_markdown(&reach_of(&rounds_of(Some("9/10"), 9, 10)), Millis(30_000));
        assert!(md.contains("| 9/10 (needs 9) | overlap 9/10 |"), "{md}");
        // A cell that must stop on an error has its rate too; one expected valid has none.
        let expects_error = Expectation {
            error: Some("raised TypeError".into()),
            ..Expectation::default()
        };
        let rounds: Vec<Matrix> = (0..2)
            .map(|i| {
                let mut m = Matrix::default();
                m.push(Cell::judge(
                    "e",
                    "none",
                    Expectation::default(),
                    BTreeMap::new(),
                ));
                let mut cell = Cell::judge("t", "none", expects_error.clone(), BTreeMap::new());
                if i == 1 {
                    cell.status = Status::Differs;
                }
                m.push(cell);
                m
            })
            .collect();
        let md = reach_markdown(&reach_of(&rounds), Millis(30_000));
        assert!(
            md.contains("| t | none | the error \"raised TypeError\" | 1/2 | the error 1/2 |"),
            "{md}"
        );
        assert!(!md.contains("| e | none |"), "{md}");
    }

    #[test]
    fn the_detection_table_keeps_the_matrix_order() {
        let mut m = Matrix::default();
        for (a, n) in [
            ("b", "none"),
            ("b", "kill-clients"),
            ("a", "none"),
            ("a", "kill-clients"),
        ] {
            m.push(Cell::judge(
                a,
                n,
                crate::audit::fixtures::expect(&["overlap"], &[]),
                crate::report::counted(&[("overlap", 1)]),
            ));
        }
        let reach = reach_of(&[m.clone(), m]);
        let order: Vec<String> = reach
            .iter()
            .map(|r| format!("{}:{}", r.algorithm, r.nemesis))
            .collect();
        assert_eq!(
            order,
            ["b:none", "b:kill-clients", "a:none", "a:kill-clients"]
        );
    }

    #[test]
    fn a_one_round_audit_is_its_round_and_more_rounds_carry_their_rates() {
        let small = crate::audit::fixtures::small();
        let audit = Audit::of_rounds(vec![small.clone()], 95.5);
        assert_eq!(audit.matrix, small);
        assert_eq!(audit.matrix.to_json(), small.to_json());
        assert!(!small.to_json().contains("\"rounds\""));
        // Two rounds: each cell carries its rounds, in every rendering.
        let second = Matrix {
            seed: 43,
            ..small.clone()
        };
        let audit = Audit::of_rounds(vec![small, second], 100.0);
        let m = &audit.matrix;
        assert_eq!(m.cells.len(), 7);
        let json: serde_json::Value = serde_json::from_str(&m.to_json()).unwrap();
        let cell = json["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["nemesis"] == "kill-clients" && c["algorithm"] == "setnx-del")
            .unwrap();
        assert_eq!(cell["rounds"]["met"], 2);
        assert_eq!(cell["rounds"]["of"], 2);
        assert_eq!(cell["rounds"]["required"], 2);
        assert_eq!(cell["rounds"]["found"]["unavailable"], 2);
        assert_eq!(Matrix::from_json(&m.to_json()).unwrap(), *m);
        let table = m.to_table();
        assert!(table.contains("unavail 2/2"), "{table}");
        assert!(table.contains("rounds that met the expectation"), "{table}");
        let md = m.to_markdown();
        assert!(md.contains("[unavailable 2/2](r/b/index.html)"), "{md}");
        assert!(
            md.contains(
                "| [**overlap, stale-write ✗** 0/2 (overlap 2/2)](r/c/index.html) | **ERR** 0/2 |"
            ),
            "{md}"
        );
        // The rows and columns keep the rounds' order.
        assert_eq!(m.nemeses, audit.rounds[0].nemeses);
        assert!(md.contains("took 1m 40s, seeds 42 to 43."), "{md}");
        assert!(md.contains("Each cell over 2 rounds: "), "{md}");
        assert!(table.contains("seeds 42 to 43: FAILED"), "{table}");
        assert_eq!(json["rounds"], 2);
        let html = m.to_html_in(Path::new("r"));
        assert!(html.contains(">unavailable 2/2</a>"), "{html}");
        let xml = m.to_junit();
        assert!(
            xml.contains("rounds: met the expectation in 0 of 2 (2 needed); found: overlap 2/2"),
            "{xml}"
        );
        assert!(
            xml.contains(r#"<property name="rounds" value="2"/>"#),
            "{xml}"
        );
        assert!(html.contains("seeds 42 to 43"), "{html}");
        assert!(!m.passed());
    }
}
