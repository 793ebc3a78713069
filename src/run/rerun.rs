//! `lockaudit rerun`: a run folder's run again, as it was: its workload.toml (the workload
//! as it ran, with its seed, topology and nemesis), its schedule file as it was
//! (`schedule.toml`) and the checker's options of its run.json. Then how often each kind of
//! anomaly the original found came back, and how soon: the first step from one red run to
//! a bug report, "it comes back in 9 of 10 runs, after about 2 s".

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::presets::Nemesis;
use crate::report::{median, AnomalyKind, Report};

use super::plan::{PlanError, Purpose, Request, RunPlan, WorkloadSource};
use crate::run_record::{RecordError, RunRecord, RUN_JSON, SCHEDULE_COPY};

/// Why a run folder cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{}: no such run folder", .0.display())]
    NoSuchFolder(PathBuf),
    #[error("{}: not a run folder: it has no workload.toml", .0.display())]
    NoWorkload(PathBuf),
    #[error(transparent)]
    Record(#[from] RecordError),
    /// Its servers were given (`--redis`), not started: a rerun cannot start them again.
    #[error(
        "{}: ran against servers lockaudit did not start (--redis); run its workload against \
         them again: lockaudit run {} --redis URL ({topology} topology)",
        dir.display(),
        workload.display()
    )]
    ServersGiven {
        dir: PathBuf,
        workload: PathBuf,
        topology: String,
    },
    #[error("{}: not a lockaudit report: {error}", path.display())]
    NotAReport {
        path: PathBuf,
        error: serde_json::Error,
    },
}

/// A run folder read for replaying.
#[derive(Debug, Clone)]
pub struct Replay {
    pub dir: PathBuf,
    /// Its run.json; None for a folder from before run.json (its workload.toml still
    /// holds the seed: the checker's options are then the defaults).
    pub record: Option<RunRecord>,
    /// Its report.json, if it has one: what the reruns are compared with.
    pub original: Option<Report>,
}

impl Replay {
    /// Reads the run folder `dir`. The error names the path and what is missing.
    pub fn read(dir: &Path) -> Result<Replay, ReplayError> {
        if !dir.is_dir() {
            return Err(ReplayError::NoSuchFolder(dir.to_path_buf()));
        }
        let workload = dir.join("workload.toml");
        if !workload.is_file() {
            return Err(ReplayError::NoWorkload(dir.to_path_buf()));
        }
        let record = if dir.join(RUN_JSON).is_file() {
            Some(RunRecord::read(dir)?)
        } else {
            None
        };
        if let Some(r) = record.as_ref().filter(|r| !r.servers_started) {
            return Err(ReplayError::ServersGiven {
                dir: dir.to_path_buf(),
                workload,
                topology: r.topology.clone(),
            });
        }
        let report_path = dir.join("report.json");
        let original = match std::fs::read_to_string(&report_path) {
            Ok(text) => {
                Some(
                    serde_json::from_str(&text).map_err(|error| ReplayError::NotAReport {
                        path: report_path,
                        error,
                    })?,
                )
            }
            Err(_) => None,
        };
        Ok(Replay {
            dir: dir.to_path_buf(),
            record,
            original,
        })
    }

    /// The plan of one rerun, into a new folder under `root`: the recorded workload (its
    /// seed included), its schedule file's copy, the recorded checker options.
    pub fn plan(&self, root: &Path) -> Result<RunPlan, PlanError> {
        let mut request = Request::new(Purpose::Run);
        if let Some(record) = &self.record {
            if record.schedule_file {
                let copy = self.dir.join(SCHEDULE_COPY);
                if !copy.is_file() {
                    return Err(PlanError::ScheduleNotKept {
                        dir: self.dir.clone(),
                        file: record.nemesis.to_string(),
                        copy,
                    });
                }
                request.overrides.nemesis = Some(Nemesis::File(copy.display().to_string()));
            }
            request.options = record.options.clone();
        }
        request.root = root.to_path_buf();
        let source = WorkloadSource::File(self.dir.join("workload.toml"));
        RunPlan::build(&source, request)
    }
}

/// How one kind of anomaly fared over the reruns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recurrence {
    pub kind: AnomalyKind,
    /// Whether the original found it (false: only reruns did).
    pub original: bool,
    /// When the original's first of this kind began, ms of run time.
    pub original_first_ms: Option<f64>,
    /// Reruns that found it, of `runs` that were carried out.
    pub found: usize,
    pub runs: usize,
    /// Per rerun that found it (and listed one), when its first began, ms of run time.
    pub first_ms: Vec<f64>,
}

impl Recurrence {
    pub fn median_first_ms(&self) -> Option<f64> {
        median(&self.first_ms)
    }
}

/// Per kind of anomaly the original found, then per kind only reruns found, how often and
/// how soon the reruns found it; in the order summaries use (`AnomalyKind`).
pub fn recurrences(original: Option<&Report>, reruns: &[Report]) -> Vec<Recurrence> {
    let kinds_of = |report: &Report| -> Vec<AnomalyKind> {
        AnomalyKind::ALL
            .into_iter()
            .filter(|&k| report.count(k) > 0)
            .collect()
    };
    let first_ms = |report: &Report, kind: AnomalyKind| {
        report
            .first_anomaly_ns(|k| k == kind)
            .map(|ns| ns as f64 / 1e6)
    };
    let mut rows: BTreeMap<(bool, usize), Recurrence> = BTreeMap::new();
    let mut add = |kind: AnomalyKind, original: Option<&Report>| {
        let rank = AnomalyKind::ALL
            .iter()
            .position(|&k| k == kind)
            .expect("every kind is in ALL");
        rows.entry((original.is_none(), rank))
            .or_insert_with(|| Recurrence {
                kind,
                original: original.is_some(),
                original_first_ms: original.and_then(|r| first_ms(r, kind)),
                found: 0,
                runs: reruns.len(),
                first_ms: Vec::new(),
            });
    };
    let originals = original.map(kinds_of).unwrap_or_default();
    for &kind in &originals {
        add(kind, original);
    }
    for report in reruns {
        for kind in kinds_of(report) {
            if !originals.contains(&kind) {
                add(kind, None);
            }
        }
    }
    let mut rows: Vec<Recurrence> = rows.into_values().collect();
    for row in &mut rows {
        for report in reruns {
            if report.count(row.kind) > 0 {
                row.found += 1;
                row.first_ms.extend(first_ms(report, row.kind));
            }
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Anomaly, CheckResult};

    fn report(found: &[(&str, i64)]) -> Report {
        let mut check = CheckResult::default();
        let mut anomalies = Vec::new();
        for (kind, start_ms) in found {
            let kind: AnomalyKind = kind.parse().unwrap();
            *check.counts.entry(kind).or_default() += 1;
            anomalies.push(Anomaly {
                kind,
                key: "lock:0".into(),
                processes: vec![],
                indices: vec![],
                explanation: String::new(),
                start: start_ms * 1_000_000,
                end: start_ms * 1_000_000,
                lease_expired: None,
                tokens: vec![],
                cycle: vec![],
            });
        }
        Report {
            valid: Some(found.is_empty()),
            anomalies,
            checks: [("all".to_string(), check)].into(),
            ..Report::default()
        }
    }

    #[test]
    fn each_kind_of_the_original_is_counted_over_the_reruns_with_its_median_time() {
        let original = report(&[("overlap", 900), ("unavailable", 100)]);
        let reruns = [
            report(&[("overlap", 1000), ("overlap", 400)]),
            report(&[("unavailable", 300), ("lost-update", 50)]),
            report(&[("overlap", 2000)]),
        ];
        let rows = recurrences(Some(&original), &reruns);
        let summary: Vec<(&str, bool, usize, Option<f64>)> = rows
            .iter()
            .map(|r| (r.kind.as_str(), r.original, r.found, r.median_first_ms()))
            .collect();
        assert_eq!(
            summary,
            [
                ("overlap", true, 2, Some(1200.0)),
                ("unavailable", true, 1, Some(300.0)),
                ("lost-update", false, 1, Some(50.0)),
            ]
        );
        assert_eq!(rows[0].original_first_ms, Some(900.0));
        assert!(rows.iter().all(|r| r.runs == 3));
        // A valid original: only what the reruns found, marked new.
        let rows = recurrences(Some(&report(&[])), &reruns[2..]);
        assert_eq!(rows.len(), 1);
        assert!(!rows[0].original);
    }

    #[test]
    fn a_folder_that_is_no_run_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        assert!(Replay::read(&gone)
            .unwrap_err()
            .to_string()
            .contains("no such run folder"));
        let err = Replay::read(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains(&dir.path().display().to_string()) && err.contains("no workload.toml"),
            "{err}"
        );
        let given = ReplayError::ServersGiven {
            dir: PathBuf::from("results/r"),
            workload: PathBuf::from("results/r/workload.toml"),
            topology: "single".into(),
        };
        assert_eq!(
            given.to_string(),
            "results/r: ran against servers lockaudit did not start (--redis); run its workload against them again: lockaudit run results/r/workload.toml --redis URL (single topology)"
        );
    }
}
