//! A run folder's record of what ran: `run.json` ([`RunRecord`]: the command line, passwords
//! redacted, lockaudit's version and commit, the seed and whether it was drawn, the
//! topology, the schedule, the checker's options and each server's version; when it began
//! and ended) and the names of the files beside it. `workload.toml` beside it holds the
//! workload as it ran (`lockaudit rerun` replays the two), a schedule file is kept as
//! `schedule.toml`.
//!
//! The format alone, so that what reads a run folder (its page, the index) need not import
//! the controller that writes it (`run::record`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::checker::CheckOptions;
use crate::presets::Nemesis;
use crate::report::AnomalyKind;
use crate::topology::ServerVersion;

/// The file's name in a run folder.
pub const RUN_JSON: &str = "run.json";

/// A schedule file's copy in a run folder (its `nemesis` named a file, not a preset).
pub const SCHEDULE_COPY: &str = "schedule.toml";

/// What `run.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// lockaudit's version, `0.1.0`.
    pub version: String,
    /// The git commit lockaudit was built from.
    pub commit: String,
    /// The command as given (`lockaudit run --algorithm ...`, or the audit's for a cell),
    /// every password replaced by `(redacted)`.
    pub command: Vec<String>,
    /// The folder it was given in: relative paths in `command` are relative to it.
    pub cwd: String,
    /// When the run began and ended, RFC 3339 (UTC); `ended` None: it never ended (killed).
    pub started: String,
    #[serde(default)]
    pub ended: Option<String>,
    /// Wall time from start to end, seconds.
    #[serde(default)]
    pub seconds: Option<f64>,
    /// Where that wall time went (a run that ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<Phases>,
    pub algorithm: String,
    /// A preset, or the schedule file as named (kept as `schedule.toml`).
    pub nemesis: Nemesis,
    /// Whether `nemesis` names a file, copied into the folder as [`SCHEDULE_COPY`].
    #[serde(default)]
    pub schedule_file: bool,
    pub topology: String,
    pub seed: u64,
    /// The seed was drawn for this run (no `--seed`, none in the workload).
    #[serde(default)]
    pub seed_drawn: bool,
    /// false: `--redis`, servers lockaudit did not start (a rerun cannot start them).
    pub servers_started: bool,
    /// Each server and its version, once they serve.
    #[serde(default)]
    pub servers: Vec<ServerVersion>,
    /// How the run was watched and the checker's bounds: a rerun checks as this run did.
    pub options: RunOptions,
}

impl RunRecord {
    /// Writes it into the run folder `dir`, whole.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)? + "\n";
        crate::outfile::write(&dir.join(RUN_JSON), text)
    }

    /// Reads a run folder's run.json; the error names the file.
    pub fn read(dir: &Path) -> Result<RunRecord, RecordError> {
        let path = dir.join(RUN_JSON);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) => return Err(RecordError::Read { path, error }),
        };
        serde_json::from_str(&text).map_err(|error| RecordError::Malformed { path, error })
    }
}

/// Why a run folder's run.json could not be read. The message quotes the cause, so it is
/// not also the `source()`.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{}: cannot read: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: not a run record: {error}", path.display())]
    Malformed {
        path: PathBuf,
        error: serde_json::Error,
    },
}

/// Where a run's wall time went, in seconds, one phase after another: what an audit that
/// must be fast is tuned by (a cell that proves its flaw in 0.1 s still pays for its
/// servers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    /// From the start to servers that serve: the folder, starting them (or checking the
    /// ones given), their versions.
    pub setup_s: f64,
    /// The workers, the nemesis and its healing: from the first worker started to the
    /// last one stopped.
    pub workload_s: f64,
    /// Stopping the servers lockaudit started (their logs brought back from hosts).
    pub teardown_s: f64,
    /// Of `workload_s`, the clients' start: from the first worker started to every client
    /// connected, before the run's clock (and its faults) started.
    #[serde(default)]
    pub clients_ready_s: f64,
    /// The verdict and its files (`report.json`), after the servers stopped.
    pub verdict_s: f64,
}

impl Phases {
    /// The phases' sum.
    pub fn total(&self) -> f64 {
        self.setup_s + self.workload_s + self.teardown_s + self.verdict_s
    }
}

/// How a run is watched while it goes on.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunOptions {
    pub stop_when: StopWhen,
    /// Check the history while it is recorded (the verdict is the same without; only
    /// `StopWhen` and the progress bar's anomalies need it).
    pub online_check: bool,
    /// The checker's bounds, for the verdict and for checking online.
    pub check: CheckOptions,
    /// The progress bar, or its lines where no terminal shows it. Off for an audit's cells,
    /// which run side by side: the audit prints a line per cell instead.
    pub progress: bool,
    /// A run cut short by a signal prints its verdict as report.json's text (`--json`)
    /// rather than the summary. How the verdict is shown, not what ran: not recorded.
    #[serde(skip)]
    pub json: bool,
    /// The run's verdict is the command's exit (`lockaudit run`): once report.json is
    /// written, a signal changes neither. Not for an audit's cell, whose audit goes on.
    #[serde(skip)]
    pub owns_exit: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            stop_when: StopWhen::Never,
            online_check: true,
            check: CheckOptions::default(),
            progress: true,
            json: false,
            owns_exit: false,
        }
    }
}

/// When a run may end before its time limit: once the history proves what it was run for.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StopWhen {
    /// Never: the run takes its whole time limit.
    #[default]
    Never,
    /// At the first anomaly of any kind (`run --stop-on-anomaly`).
    FirstAnomaly,
    /// Once an anomaly of each of `kinds` was found, and, if `inside_lease`, an overlap that
    /// began inside the earlier holder's lease (an audit cell's expectation).
    Found {
        kinds: Vec<AnomalyKind>,
        inside_lease: bool,
    },
}
