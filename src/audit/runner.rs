//! Runs the audit: each algorithm's workload under each nemesis preset, judged against what
//! its workload file expects. `jobs` cells run side by side, each with its own servers,
//! clients and folder, so that no verdict depends on another cell's; the matrix keeps the
//! cells' order whichever ends first.
//!
//! With `rounds` > 1 every cell runs that many times with consecutive seeds, and the audit's
//! verdict is per cell over the rounds: how many met its expectation, against how many must
//! (its `rate`, or all), and how soon it proved what it must: the figures behind "finds it
//! in 9 of 10 runs".

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::checker::CheckOptions;
use crate::cluster::on_exit;
use crate::locks::ALGORITHMS;
use crate::presets::{Column, Nemesis, Preset};
use crate::report::{AnomalyKind, KindCounts, Report};
use crate::run::plan::{CellRule, Hosts, Overrides, Purpose, Request, WorkloadSource};
use crate::run::{run, RunError, RunPlan};
use crate::units::Millis;
use crate::workload::WorkloadSpec;

use super::matrix::{Cell, Matrix};
use super::rounds::Audit;
use super::shard::{Plan, PlannedCell, Shard, ShardSpec};
use super::Expectation;

/// Why an audit cannot start, or stopped without a matrix. Each names the flag or the
/// file at fault.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// A row (`--algorithms`, `--cells`) that is no algorithm, workload file or folder.
    #[error("{flag}: {why}")]
    UnknownRow { flag: &'static str, why: String },
    #[error("{flag}: no workload file {file}")]
    NoWorkloadFile { flag: &'static str, file: String },
    /// A column (`--nemeses`, `--cells`) that is no preset.
    #[error("{flag}: {why}")]
    UnknownColumn { flag: &'static str, why: String },
    #[error("--rounds must be at least 1")]
    NoRounds,
    #[error("--ssh-key / --remote-dir / --accept-new-host-keys: only with --node")]
    HostOptionsWithoutNode,
    #[error("--node: {0}")]
    Node(#[from] crate::topology::hosts::BadHost),
    #[error("--ssh-key: {} is not a file", .0.display())]
    SshKeyNotAFile(PathBuf),
    #[error("--algorithms: cannot read the folder {folder}: {error}")]
    CannotReadFolder {
        folder: String,
        error: std::io::Error,
    },
    #[error("--algorithms: the folder {0} has no workload file (*.toml)")]
    EmptyFolder(String),
    /// A row's workload that does not read (its file's place named).
    #[error(transparent)]
    Workload(#[from] crate::tomlfile::FileError),
    #[error("--quick: none of these cells must find anything")]
    NothingToQuick,
    #[error("a cell's task failed: {0}")]
    CellTask(#[from] tokio::task::JoinError),
}

/// What to audit.
#[derive(Debug, Clone)]
pub struct AuditOptions {
    pub algorithms: Vec<String>,
    pub nemeses: Vec<Preset>,
    /// Whether `nemeses` was asked for (`--nemeses`). If not, a workload file that names
    /// its own `nemesis` (a bug's reproduction, say) is audited under that one alone.
    pub nemeses_asked: bool,
    /// Only these (algorithm, nemesis) cells instead of the whole cross product.
    pub cells: Option<Vec<(String, Column)>>,
    /// A folder of `<algorithm>.toml` workloads that override the built-in ones (a file
    /// missing there: the built-in workload). None: the built-in workloads.
    pub workloads: Option<PathBuf>,
    /// The longest a cell that must find something runs (it stops once it has).
    pub time_limit: Millis,
    /// How long a cell expected to stay valid runs: nothing ends it early.
    pub valid_time_limit: Millis,
    /// Whether a cell that must find something stops once it has (`--no-early-stop`: every
    /// cell runs its whole time, as audits did before online checking).
    pub early_stop: bool,
    /// The checker's bounds for every cell.
    pub check: CheckOptions,
    pub seed: u64,
    /// Every algorithm with fencing tokens: then no `stale-write` may ever get through.
    pub fenced: bool,
    /// How many times each cell runs, with seeds `seed`, `seed + 1`, ... (`--rounds`).
    pub rounds: usize,
    /// Only the cells that must find something, once each (`audit --quick`): with every
    /// cell stopping once proven, the shortest audit that shows each known flaw.
    pub quick: bool,
    /// How many cells run side by side (each with its own servers and folder).
    pub jobs: usize,
    /// `--shard K/N`: only this share of the cells (every N-th, from the K-th on), every
    /// round of each; its matrices record the whole audit's plan for `--merge`.
    pub shard: Option<ShardSpec>,
    /// The audit's folder: `<algorithm>/<nemesis>[-<n>]/` per cell, and the matrix files.
    pub out: PathBuf,
    pub redis_server: Option<PathBuf>,
    pub redis_sentinel: Option<PathBuf>,
    /// Hosts to run every cell's lock servers on, `ssh://[user@]host[:port]` (empty: this
    /// machine, or what a `--workloads` file names).
    pub nodes: Vec<crate::topology::hosts::NodeEntry>,
    /// The private key for `nodes`.
    pub ssh_key: Option<PathBuf>,
    /// The folder on the hosts where each cell's run keeps its servers' files.
    pub remote_dir: Option<PathBuf>,
    /// Trust a host whose SSH key is in no known_hosts yet.
    pub accept_new_host_keys: bool,
}

impl AuditOptions {
    pub fn new(out: PathBuf) -> AuditOptions {
        AuditOptions {
            algorithms: ALGORITHMS.iter().map(|s| s.to_string()).collect(),
            nemeses: Preset::ALL.to_vec(),
            nemeses_asked: false,
            cells: None,
            workloads: None,
            time_limit: Millis(DEFAULT_CELL_MS),
            valid_time_limit: Millis(DEFAULT_VALID_CELL_MS),
            early_stop: true,
            check: CheckOptions::default(),
            seed: 1,
            fenced: false,
            rounds: 1,
            quick: false,
            jobs: 1,
            shard: None,
            out,
            redis_server: None,
            redis_sentinel: None,
            nodes: Vec::new(),
            ssh_key: None,
            remote_dir: None,
            accept_new_host_keys: false,
        }
    }

    /// The cells to run, in order.
    pub fn cell_list(&self) -> Vec<(String, Column)> {
        match &self.cells {
            Some(cells) => cells.clone(),
            None => self
                .algorithms
                .iter()
                .flat_map(|a| match own_column(a).filter(|_| !self.nemeses_asked) {
                    Some(own) => vec![(a.clone(), own)],
                    None => self
                        .nemeses
                        .iter()
                        .map(|&n| (a.clone(), Column::Preset(n)))
                        .collect(),
                })
                .collect(),
        }
    }

    /// Checks the names before anything runs.
    pub fn validate(&self) -> Result<(), AuditError> {
        let (algorithms, nemeses): (Vec<String>, Vec<Column>) =
            self.cell_list().into_iter().unzip();
        // The flag the names came from, for the message.
        let (rows, columns) = match self.cells {
            Some(_) => ("--cells", "--cells"),
            None => ("--algorithms", "--nemeses"),
        };
        for a in &algorithms {
            if let Some(why) = unknown_row(a) {
                return Err(AuditError::UnknownRow { flag: rows, why });
            }
            if is_workload_file(a) && !Path::new(a).exists() {
                return Err(AuditError::NoWorkloadFile {
                    flag: rows,
                    file: a.clone(),
                });
            }
        }
        for (a, n) in algorithms.iter().zip(&nemeses) {
            // A schedule file is a column only as its own workload's `nemesis` (its file is
            // read only for a column that is no preset).
            if n.preset().is_none() && own_column(a).as_ref() != Some(n) {
                let why = crate::presets::unknown_preset(n.name());
                return Err(AuditError::UnknownColumn { flag: columns, why });
            }
        }
        if self.rounds == 0 {
            return Err(AuditError::NoRounds);
        }
        if self.nodes.is_empty() {
            if self.ssh_key.is_some() || self.remote_dir.is_some() || self.accept_new_host_keys {
                return Err(AuditError::HostOptionsWithoutNode);
            }
        } else {
            crate::topology::hosts::parse_targets(&self.nodes)?;
            if let Some(key) = self.ssh_key.as_ref().filter(|k| !k.is_file()) {
                return Err(AuditError::SshKeyNotAFile(key.clone()));
            }
        }
        Ok(())
    }
}

/// The longest a cell that must find something runs by default: long enough for every
/// must-reach verdict (the reach table of docs/src/performance.md) in 10 of 10 runs, two cells side by side;
/// it stops as soon as it has found what it must, so most take a few seconds. (At 20 s,
/// fair-lock × pause-clients missed in 2 of 10 runs beside another cell.)
pub const DEFAULT_CELL_MS: u64 = 30_000;

/// How long a cell expected to stay valid runs by default: every preset's first fault comes
/// at 1 s, so each acts at least once, and the full matrix stays within minutes. The
/// audit figures of docs/src/performance.md compare its verdicts with 20 s cells.
pub const DEFAULT_VALID_CELL_MS: u64 = 4_000;

/// Whether a row of the matrix names a workload file (your own Lua scripts or lock client)
/// rather than a built-in algorithm.
pub fn is_workload_file(row: &str) -> bool {
    row.ends_with(".toml")
}

/// Why `row` can be no row of the matrix (neither an algorithm nor a workload file), with
/// the nearest algorithm when there is one; None if it can be.
pub fn unknown_row(row: &str) -> Option<String> {
    (!is_workload_file(row) && !ALGORITHMS.contains(&row) && !Path::new(row).is_dir()).then(|| {
        format!(
            "{}; or a workload file (*.toml, such as examples/lua/set-nx-px.toml), or a folder of them",
            crate::suggest::unknown("algorithm", row, &ALGORITHMS)
        )
    })
}

/// Expands each folder among `rows` (`--algorithms examples/bugs/`) into the workload files
/// in it, `*.toml` in name order; the other rows stay as they are.
pub fn expand_folders(rows: Vec<String>) -> Result<Vec<String>, AuditError> {
    let mut expanded = Vec::new();
    for row in rows {
        let path = Path::new(&row);
        if !path.is_dir() {
            expanded.push(row);
            continue;
        }
        let entries = std::fs::read_dir(path).map_err(|error| AuditError::CannotReadFolder {
            folder: row.clone(),
            error,
        })?;
        let mut files: Vec<String> = entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "toml"))
            .map(|p| p.display().to_string())
            .collect();
        if files.is_empty() {
            return Err(AuditError::EmptyFolder(row));
        }
        files.sort();
        expanded.extend(files);
    }
    Ok(expanded)
}

/// The column of a workload file that names its own `nemesis`: the preset, or its schedule
/// file's name (`Nemesis::column`). None for a built-in algorithm, a file
/// that names none, or one that does not read (its row says why when it runs).
fn own_column(row: &str) -> Option<Column> {
    if !is_workload_file(row) {
        return None;
    }
    let spec = WorkloadSpec::from_file(Path::new(row)).ok()?;
    spec.nemesis.map(|n| n.column())
}

/// Reads the workload of a row: a workload file; or `<workloads>/<algorithm>.toml` when
/// `--workloads` names a folder that has it; else the algorithm's built-in workload (the
/// one `run --algorithm` uses).
fn workload_of(options: &AuditOptions, algorithm: &str) -> Result<WorkloadSpec, AuditError> {
    let path = if is_workload_file(algorithm) {
        Some(PathBuf::from(algorithm))
    } else {
        options
            .workloads
            .as_ref()
            .map(|dir| dir.join(format!("{algorithm}.toml")))
            .filter(|path| path.exists())
    };
    let source = match path {
        Some(path) => WorkloadSource::File(path),
        None => match crate::locks::named(algorithm) {
            Ok(entry) => WorkloadSource::Builtin(entry),
            Err(why) => {
                return Err(AuditError::UnknownRow {
                    flag: "--algorithms",
                    why,
                })
            }
        },
    };
    Ok(source.load()?)
}

/// What a cell asks of its run's plan: the audit's time limit, fencing and hosts; `nemesis`
/// (the preset), the cell's folder and what the cell expects.
fn cell_request(
    options: &AuditOptions,
    nemesis: Option<Preset>,
    dir: PathBuf,
    expected: &Expectation,
) -> Request {
    let mut request = Request::new(Purpose::AuditCell);
    request.overrides = Overrides {
        time_limit: Some(options.time_limit),
        fenced: options.fenced,
        nemesis: nemesis.map(Nemesis::Preset),
        ..Overrides::default()
    };
    request.hosts = Hosts {
        nodes: options.nodes.clone(),
        file: None,
        ssh_key: options.ssh_key.clone(),
        remote_dir: options.remote_dir.clone(),
        accept_new_host_keys: options.accept_new_host_keys,
    };
    request.redis_server = options.redis_server.clone();
    request.redis_sentinel = options.redis_sentinel.clone();
    request.out = Some(dir);
    request.options.check = options.check.clone();
    request.options.progress = false;
    request.cell = Some(CellRule {
        must: expected.must.clone(),
        inside_lease: expected.inside_lease,
        early_stop: options.early_stop,
        valid_time_limit: options.valid_time_limit,
    });
    request
}

/// A cell's run, decided as `run` decides one (`RunPlan::from_workload`); the seed is the
/// round's, already in `spec`. A preset is asked of the run; a workload's own schedule file
/// is its own `nemesis`.
fn cell_plan(
    options: &AuditOptions,
    spec: WorkloadSpec,
    nemesis: &Column,
    dir: &Path,
    expected: &Expectation,
) -> Result<RunPlan, String> {
    let request = cell_request(options, nemesis.preset(), dir.to_path_buf(), expected);
    RunPlan::from_workload(spec, request).map_err(|e| e.to_string())
}

/// What a cell expects: the workload's table, and with fencing, never a stale write.
fn expectation(spec: &WorkloadSpec, nemesis: &Column, fenced: bool) -> Expectation {
    let mut e = spec.expect.get(nemesis).cloned().unwrap_or_default();
    if fenced {
        e.must.retain(|&k| k != AnomalyKind::StaleWrite);
        e.may.retain(|&k| k != AnomalyKind::StaleWrite);
    }
    e
}

/// `audit --quick`'s cells: one per known flaw. A cell that must find nothing is left out,
/// and so is one whose every `must` kind its algorithm's `none` cell (also asked for) must
/// find already: the flaw shows without faults, and a fault adds no other (lua-getset's
/// release that frees nothing shows under six presets, but it is one flaw).
fn quick_cells(
    cells: Vec<(String, Column)>,
    must: impl Fn(&str, &Column) -> Vec<AnomalyKind>,
) -> Vec<(String, Column)> {
    let none = Column::Preset(Preset::None);
    let without_faults = |algorithm: &str| {
        if cells.iter().any(|(a, n)| a == algorithm && *n == none) {
            must(algorithm, &none)
        } else {
            Vec::new()
        }
    };
    cells
        .iter()
        .filter(|(algorithm, nemesis)| {
            let kinds = must(algorithm, nemesis);
            if kinds.is_empty() {
                return false;
            }
            let shown = without_faults(algorithm);
            *nemesis == none || shown.is_empty() || !kinds.iter().all(|k| shown.contains(k))
        })
        .cloned()
        .collect()
}

/// Runs every cell; `announce` hears of each as it ends. On Ctrl-C or SIGTERM (once every
/// child is stopped), `interrupted` is given the audit of the cells that finished and of
/// those cut short, marked, with the signal's name; the process then exits.
pub async fn audit(
    options: &AuditOptions,
    mut announce: impl FnMut(usize, usize, &Cell),
    interrupted: impl Fn(Audit, &'static str) + Send + Sync + 'static,
) -> Result<Audit, AuditError> {
    options.validate()?;
    let mut cells = options.cell_list();
    let mut specs = BTreeMap::new();
    for (algorithm, _) in &cells {
        if !specs.contains_key(algorithm) {
            specs.insert(algorithm.clone(), workload_of(options, algorithm)?);
        }
    }
    if options.quick {
        cells = quick_cells(cells, |algorithm, nemesis| {
            expectation(&specs[algorithm], nemesis, options.fenced).must
        });
        if cells.is_empty() {
            return Err(AuditError::NothingToQuick);
        }
    }
    // A shard runs its share of the whole list; its matrices say which, of what.
    let shard = options.shard.map(|spec| Shard {
        index: spec.index,
        of: spec.of,
        matrix: plan_of(options, &cells),
    });
    if let Some(spec) = options.shard {
        cells = spec.share(&cells);
    }
    // Every (round, cell) is a job; `jobs` of them run side by side, each in its own folder
    // with its own servers, so no verdict depends on another cell's.
    let mut queue = cell_jobs(options, &cells, &specs);
    let total = queue.len();
    // Cells that must run alone go first, back to back, so the machine is drained for them
    // once rather than at every turn; the matrix keeps its order all the same.
    queue.sort_by_key(|job| !job.alone);
    // Cells on hosts run one after another: they share the hosts' folders.
    let jobs = if options.nodes.is_empty() {
        options.jobs.max(1)
    } else {
        1
    };
    let rounds: Vec<RoundResult> = (0..options.rounds)
        .map(|round| RoundResult {
            started_wall: None,
            began: None,
            ended: None,
            cells: vec![None; cells.len()],
            seed: options.seed + round as u64,
        })
        .collect();
    let shared = Arc::new(options.clone());
    let audit_began = Instant::now();
    let progress = Arc::new(Mutex::new(Progress {
        shard,
        rounds,
        running: BTreeMap::new(),
        frozen: false,
    }));
    // Ctrl-C or SIGTERM: once every child is stopped and the cells under way have written
    // their reports (their jobs run first), the matrix of the cells that finished, and of
    // those cut short, marked.
    let _interrupted = {
        let (progress, options) = (progress.clone(), shared.clone());
        on_exit::register_after_stop(move |signal| {
            let mut progress = lock(&progress);
            progress.frozen = true;
            let audit = progress.assemble(&options, audit_began, Some(signal));
            drop(progress);
            interrupted(audit, signal);
        })
    };
    let mut queue = queue.into_iter().peekable();
    let mut running = tokio::task::JoinSet::new();
    // Whether the cell running now must be alone.
    let mut alone_running = false;
    let mut done = 0;
    loop {
        // No cell starts once a signal has come.
        while running.len() < jobs && !alone_running && !crate::cluster::shutting_down() {
            let Some(next) = queue.peek() else { break };
            if next.alone && !running.is_empty() {
                break;
            }
            let Some(job) = queue.next() else { break };
            alone_running = job.alone;
            let started_s = audit_began.elapsed().as_secs_f64();
            lock(&progress).started(&job, started_s);
            running.spawn(async move {
                let mut cell = run_cell(
                    &job.algorithm,
                    job.plan,
                    &job.nemesis,
                    &job.dir,
                    job.expected.clone(),
                )
                .await;
                cell.started_s = Some(started_s);
                (job.round, job.index, cell)
            });
        }
        let Some(joined) = running.join_next().await else {
            break;
        };
        let (round, index, cell) = joined?;
        alone_running = false;
        let mut progress = lock(&progress);
        // A cell that ends once a signal has come was cut short by it (its servers and
        // workers killed under it): the interruption marks it, as one still under way.
        if progress.frozen || crate::cluster::shutting_down() {
            continue;
        }
        progress.running.remove(&(round, index));
        done += 1;
        announce(done, total, &cell);
        progress.finished(round, index, cell);
    }
    // A row whose every cell's run could not start has an empty folder left: its cells'
    // own were removed (`run::unstarted`). Only now, with no cell making one beside it.
    for (algorithm, _) in &cells {
        let _ = std::fs::remove_dir(options.out.join(row_folder(algorithm)));
    }
    let audit = lock(&progress).assemble(options, audit_began, None);
    Ok(audit)
}

/// The whole audit's plan, as a shard records it: `cells` (after `--quick`'s choice, before
/// the share) and the options that change a verdict.
fn plan_of(options: &AuditOptions, cells: &[(String, Column)]) -> Plan {
    Plan {
        cells: cells
            .iter()
            .map(|(algorithm, nemesis)| PlannedCell {
                algorithm: algorithm.clone(),
                nemesis: nemesis.clone(),
            })
            .collect(),
        seed: options.seed,
        rounds: options.rounds,
        time_limit_ms: options.time_limit.0,
        valid_time_limit_ms: options.valid_time_limit.0,
        early_stop: options.early_stop,
        fenced: options.fenced,
        quick: options.quick,
        workloads: options.workloads.as_ref().map(|w| w.display().to_string()),
        liveness_bound_ns: options.check.liveness_bound_ns,
        starvation_bound_ns: options.check.starvation_bound_ns,
        fairness_tolerance_ns: options.check.fairness_tolerance_ns,
    }
}

/// Every (round, cell) of the audit as a job: its run planned, its folder, what it expects.
fn cell_jobs(
    options: &AuditOptions,
    cells: &[(String, Column)],
    specs: &BTreeMap<String, WorkloadSpec>,
) -> Vec<CellJob> {
    let mut queue = Vec::new();
    for round in 0..options.rounds {
        for (index, (algorithm, nemesis)) in cells.iter().enumerate() {
            let mut spec = specs[algorithm].clone();
            spec.seed = options.seed + round as u64;
            let folder = row_folder(algorithm);
            let dir = if options.rounds > 1 {
                options.out.join(&folder).join(format!("{nemesis}-{round}"))
            } else {
                options.out.join(&folder).join(nemesis.name())
            };
            let expected = expectation(&spec, nemesis, options.fenced);
            let plan = cell_plan(options, spec, nemesis, &dir, &expected);
            let alone = (plan.as_ref())
                .is_ok_and(|plan| crate::cluster::service(plan.spec.topology()).audit_alone);
            queue.push(CellJob {
                alone,
                round,
                index,
                algorithm: algorithm.clone(),
                nemesis: nemesis.clone(),
                plan,
                dir,
                expected,
            });
        }
    }
    queue
}

fn lock(progress: &Mutex<Progress>) -> std::sync::MutexGuard<'_, Progress> {
    progress.lock().unwrap_or_else(|p| p.into_inner())
}

/// The audit as it goes: the rounds' cells that ended, and those under way.
struct Progress {
    /// With `--shard`, what every round's matrix records.
    shard: Option<Shard>,
    rounds: Vec<RoundResult>,
    /// The cells under way, by (round, place in the matrix).
    running: BTreeMap<(usize, usize), Running>,
    /// Set by the interruption, which has taken the matrix: nothing is added any more.
    frozen: bool,
}

/// A cell under way.
struct Running {
    algorithm: String,
    nemesis: Column,
    dir: PathBuf,
    expected: Expectation,
    began: Instant,
    started_s: f64,
}

impl Progress {
    /// A cell's run begins: its round has begun, and an interruption marks it as cut short.
    fn started(&mut self, job: &CellJob, started_s: f64) {
        let round = &mut self.rounds[job.round];
        round.began.get_or_insert_with(Instant::now);
        round.started_wall.get_or_insert_with(|| {
            humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
        });
        self.running.insert(
            (job.round, job.index),
            Running {
                algorithm: job.algorithm.clone(),
                nemesis: job.nemesis.clone(),
                dir: job.dir.clone(),
                expected: job.expected.clone(),
                began: Instant::now(),
                started_s,
            },
        );
    }

    /// A cell has ended: in its round's matrix.
    fn finished(&mut self, round: usize, index: usize, cell: Cell) {
        self.rounds[round].ended = Some(Instant::now());
        self.rounds[round].cells[index] = Some(cell);
    }

    /// The audit of the cells that ended; `interrupted` by that signal, with the cells
    /// under way too, each marked as cut short by it.
    fn assemble(
        &self,
        options: &AuditOptions,
        audit_began: Instant,
        interrupted: Option<&str>,
    ) -> Audit {
        let rounds: Vec<Matrix> = self
            .rounds
            .iter()
            .enumerate()
            .map(|(r, round)| {
                let mut matrix = Matrix {
                    started_wall: round.started_wall.clone().unwrap_or_default(),
                    seed: round.seed,
                    hosts: options.nodes.iter().map(|n| n.url.clone()).collect(),
                    interrupted: interrupted.map(str::to_string),
                    shard: self.shard.clone(),
                    ..Matrix::default()
                };
                let mut cells = round.cells.clone();
                if let Some(signal) = interrupted {
                    for ((_, index), running) in self.running.range((r, 0)..(r + 1, 0)) {
                        cells[*index] = Some(running.cut(signal));
                    }
                }
                // The matrix keeps the cells' order, whichever ended first.
                for cell in cells.into_iter().flatten() {
                    matrix.push(cell);
                }
                let ended = match interrupted {
                    Some(_) if round.began.is_some() => Some(Instant::now()),
                    _ => round.ended,
                };
                matrix.seconds = match (round.began, ended) {
                    (Some(began), Some(ended)) => ended.duration_since(began).as_secs_f64(),
                    _ => 0.0,
                };
                matrix
            })
            .collect();
        Audit::of_rounds(rounds, audit_began.elapsed().as_secs_f64())
    }
}

impl Running {
    /// The cell cut short by `signal`: an error, with what the history recorded before the
    /// signal showed (its run's report.json, marked interrupted, when it wrote one).
    fn cut(&self, signal: &str) -> Cell {
        let seconds = self.began.elapsed().as_secs_f64();
        let why = format!("interrupted by {signal} after {seconds:.1}s, before its verdict");
        let mut cell = Cell::error(
            self.algorithm.clone(),
            self.nemesis.clone(),
            self.expected.clone(),
            why,
        );
        if self.dir.exists() {
            cell = cell.with_run(&self.dir, seconds);
            cell.page = self.dir.join("index.html").exists();
        } else {
            cell.seconds = seconds;
        }
        let report = std::fs::read_to_string(self.dir.join("report.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<Report>(&text).ok());
        if let Some(report) = report {
            cell.found = found_kinds(&report);
            cell.events = report.stats.events;
            cell.faults = report.stats.faults;
        }
        cell.started_s = Some(self.started_s);
        cell.interrupted = Some(signal.to_string());
        cell
    }
}

/// The folder of a row's cells in the audit folder: the algorithm's name, or a workload
/// file's path with its separators made `_`.
fn row_folder(row: &str) -> String {
    row.trim_end_matches(".toml").replace(['/', '\\'], "_")
}

/// One cell of one round, waiting for its turn.
struct CellJob {
    /// Whether no other cell may run beside it (`Service::audit_alone`).
    alone: bool,
    round: usize,
    /// Its place in the matrix.
    index: usize,
    algorithm: String,
    nemesis: Column,
    /// The cell's run, or why it cannot be planned.
    plan: Result<RunPlan, String>,
    dir: PathBuf,
    expected: Expectation,
}

/// A round's cells as they end, in matrix order, and when it began and ended.
struct RoundResult {
    started_wall: Option<String>,
    began: Option<Instant>,
    ended: Option<Instant>,
    cells: Vec<Option<Cell>>,
    seed: u64,
}

/// One cell: the workload under the preset, judged.
async fn run_cell(
    row: &str,
    plan: Result<RunPlan, String>,
    nemesis: &Column,
    dir: &Path,
    expected: Expectation,
) -> Cell {
    let algorithm = row.to_string();
    let plan = match plan {
        Ok(plan) => plan,
        Err(why) => return Cell::error(algorithm, nemesis, expected, why),
    };
    // No fault of the preset can act here: the run would prove nothing about it. Not run,
    // and no pass.
    if let Some(why) = plan.nothing_acts.clone() {
        return Cell::not_applicable(algorithm, nemesis, expected, why);
    }
    let began = Instant::now();
    let _ = std::fs::remove_dir_all(dir);
    let outcome = run(&plan).await;
    let seconds = began.elapsed().as_secs_f64();
    let mut cell = judge_run(algorithm, nemesis, expected, dir, seconds, outcome);
    // Every cell that recorded a history gets its pictures and report page, valid ones too
    // (they cost little), so that every link of audit.md leads somewhere; a cell whose run
    // left no history links nothing.
    if cell.run_dir.is_some() {
        if dir.join("history.jsonl").exists() {
            if let Err(e) = crate::plot::plot(dir) {
                tracing::warn!("{}: the plots could not be drawn: {e}", dir.display());
            }
        }
        cell.page = dir.join("index.html").exists();
    }
    cell
}

/// The cell of a run's outcome, judged against what it expected.
fn judge_run(
    algorithm: String,
    nemesis: &Column,
    expected: Expectation,
    dir: &Path,
    seconds: f64,
    outcome: Result<crate::run::RunOutcome, RunError>,
) -> Cell {
    // A cell that must stop on an error: the error it stopped on, or why it did not.
    if let Some(wanted) = expected.error.clone() {
        let stopped_on = match &outcome {
            Ok(outcome) => outcome.cannot_run(),
            Err(RunError::Schedule(_) | RunError::Workload(_)) => None,
            Err(e) => Some(e.to_string()),
        };
        let mut cell = Cell::judge(algorithm, nemesis, expected, BTreeMap::new());
        if dir.exists() {
            cell = cell.with_run(dir, seconds);
        }
        match stopped_on {
            Some(why) if why.contains(&wanted) => cell.why = Some(why),
            Some(why) => {
                cell.status = super::matrix::Status::Differs;
                cell.why = Some(format!(
                    "expected an error saying \"{wanted}\"; it stopped on: {why}"
                ));
            }
            None => {
                cell.status = super::matrix::Status::Differs;
                // What the run found instead, if it ran.
                if let Ok(outcome) = &outcome {
                    cell.found = found_kinds(&outcome.report)
                        .into_iter()
                        .filter(|(_, n)| *n > 0)
                        .collect();
                }
                cell.why = Some(format!(
                    "expected an error saying \"{wanted}\"; the run {}",
                    match &outcome {
                        Ok(_) => "ran to its end".to_string(),
                        Err(e) => format!("could not start: {e}"),
                    }
                ));
            }
        }
        return cell;
    }
    match outcome {
        Ok(outcome) if outcome.cannot_run().is_some() => {
            let why = outcome.cannot_run().unwrap_or_default();
            Cell::error(algorithm, nemesis, expected, why).with_run(dir, seconds)
        }
        // Valid, but its faults never acted: it tested nothing the cell asks about.
        Ok(outcome) if outcome.untested.is_some() => {
            let why = outcome.untested.clone().unwrap_or_default();
            let mut cell = Cell::untested(algorithm, nemesis, expected, why).with_run(dir, seconds);
            cell.phases = Some(outcome.phases);
            cell.events = outcome.report.stats.events;
            cell.faults = outcome.report.stats.faults;
            cell
        }
        // Unknown (no acquire took effect): the run proved nothing, so it cannot meet any
        // expectation; as `run` exits 3 for it, the cell is an error, never ok.
        Ok(outcome) if outcome.report.valid.is_none() => {
            let why = format!(
                "unknown verdict: {}",
                outcome
                    .report
                    .unknown
                    .as_deref()
                    .unwrap_or("the history proves nothing")
            );
            let mut cell = Cell::error(algorithm, nemesis, expected, why).with_run(dir, seconds);
            cell.events = outcome.report.stats.events;
            cell.faults = outcome.report.stats.faults;
            cell
        }
        Ok(outcome) => {
            let report = &outcome.report;
            let found = found_kinds(report);
            let mut cell =
                Cell::judge(algorithm, nemesis, expected.clone(), found).with_run(dir, seconds);
            let inside = report
                .anomalies
                .iter()
                .any(|a| a.kind == AnomalyKind::Overlap && a.lease_expired == Some(false));
            if expected.inside_lease && !inside {
                let why = "no overlap inside a lease (every overlap began after the earlier holder's lease ran out)";
                cell.why = Some(match cell.why.take() {
                    Some(w) => format!("{w}; {why}"),
                    None => why.to_string(),
                });
                cell.status = super::matrix::Status::Differs;
            }
            cell.first_anomaly_ms = first_anomaly_ms(report, &expected);
            cell.proven_ms = proven_ms(report, &expected);
            cell.phases = Some(outcome.phases);
            cell.events = report.stats.events;
            cell.faults = report.stats.faults;
            cell
        }
        Err(RunError::Schedule(why) | RunError::Workload(why)) => {
            Cell::error(algorithm, nemesis, expected, why)
        }
        // A run that could not start leaves no folder, unless it kept one to say why.
        Err(e) if dir.exists() => {
            Cell::error(algorithm, nemesis, expected, e.to_string()).with_run(dir, seconds)
        }
        Err(e) => {
            let mut cell = Cell::error(algorithm, nemesis, expected, e.to_string());
            cell.seconds = seconds;
            cell
        }
    }
}

/// Anomaly counts by kind, all of them (listed or not).
fn found_kinds(report: &Report) -> KindCounts {
    AnomalyKind::ALL
        .into_iter()
        .map(|k| (k, report.count(k)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// When `report` had proven every kind `expected` must find (`Cell::proven_ms`): for each,
/// its first anomaly's proof (an overlap's start, another kind's end), the latest of those;
/// an expectation of an overlap inside a lease counts only such overlaps.
fn proven_ms(report: &Report, expected: &Expectation) -> Option<f64> {
    let mut proven = None;
    for &kind in &expected.must {
        let end = report
            .anomalies
            .iter()
            .filter(|a| a.kind == kind)
            .filter(|a| {
                !(expected.inside_lease && kind == AnomalyKind::Overlap)
                    || a.lease_expired == Some(false)
            })
            // An overlap is proven when the second holder's grant returns, the earlier
            // one's release not asked for yet; the others once the history has shown all
            // of it (a lost update's final read, an unavailable stretch's end).
            .map(|a| {
                if a.kind == AnomalyKind::Overlap {
                    a.start
                } else {
                    a.end
                }
            })
            .min()?;
        proven = proven.max(Some(end));
    }
    proven.map(|ns| ns as f64 / 1e6)
}

/// When the first anomaly of a kind the cell must find began (any kind if it must find
/// none), in ms of run time.
fn first_anomaly_ms(report: &Report, expected: &Expectation) -> Option<f64> {
    report
        .first_anomaly_ns(|kind| expected.must.is_empty() || expected.must.contains(&kind))
        .map(|ns| ns as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quick_set_keeps_one_cell_per_flaw() {
        let cell = |a: &str, n: &str| (a.to_string(), Column::named(n));
        let cells = vec![
            cell("getset", "none"),
            cell("getset", "kill-clients"),
            cell("getset", "pause-clients"),
            cell("getset", "partition"),
            cell("px", "none"),
            cell("px", "pause-clients"),
            cell("px", "kill-servers"),
            cell("only-faulted", "kill-clients"),
        ];
        let must = |a: &str, n: &Column| -> Vec<AnomalyKind> {
            let kinds: &[&str] = match (a, n.name()) {
                ("getset", "partition") => &[],
                ("getset", "pause-clients") => &["unavailable", "overlap"],
                ("getset", _) => &["unavailable"],
                ("px", "none") => &[],
                ("px", _) => &["overlap"],
                ("only-faulted", _) => &["unavailable"],
                _ => &[],
            };
            crate::report::named(kinds)
        };
        assert_eq!(
            quick_cells(cells.clone(), must),
            vec![
                // Its own flaw; kill-clients shows only that one; pause-clients one more.
                cell("getset", "none"),
                cell("getset", "pause-clients"),
                // Valid without faults: every faulted cell is a flaw of its own.
                cell("px", "pause-clients"),
                cell("px", "kill-servers"),
                cell("only-faulted", "kill-clients"),
            ]
        );
        // Without its `none` cell asked for, nothing stands for the flaw: every cell stays.
        let without_none: Vec<_> = cells.into_iter().filter(|c| c.1 != *"none").collect();
        assert_eq!(quick_cells(without_none, must).len(), 5);
    }

    #[test]
    fn hosts_are_checked_before_anything_runs() {
        let mut options = AuditOptions::new(PathBuf::from("out"));
        options.ssh_key = Some(PathBuf::from("/etc/hostname"));
        let refused = |o: &AuditOptions| o.validate().unwrap_err().to_string();
        assert!(refused(&options).contains("only with --node"));
        options.nodes = vec!["root@10.77.0.2".into()];
        let err = refused(&options);
        assert!(
            err.contains("--node") && err.contains("root@10.77.0.2"),
            "{err}"
        );
        options.nodes = vec!["ssh://root@10.77.0.2".into()];
        assert!(options.validate().is_ok());
        options.ssh_key = Some(PathBuf::from("/nonexistent/key"));
        let err = refused(&options);
        assert!(
            err.contains("--ssh-key") && err.contains("/nonexistent/key"),
            "{err}"
        );
    }

    #[test]
    fn fencing_forbids_stale_writes_whatever_the_file_says() {
        let mut spec = WorkloadSpec::default();
        spec.expect.insert(
            "pause-clients".into(),
            Expectation {
                must: vec![AnomalyKind::Overlap, AnomalyKind::StaleWrite],
                may: vec![AnomalyKind::StaleWrite, AnomalyKind::LostUpdate],
                ..Expectation::default()
            },
        );
        let e = expectation(&spec, &Column::Preset(Preset::PauseClients), true);
        assert_eq!(e.must, vec![AnomalyKind::Overlap]);
        assert_eq!(e.may, vec![AnomalyKind::LostUpdate]);
        let found: KindCounts = [(AnomalyKind::Overlap, 3), (AnomalyKind::StaleWrite, 1)].into();
        assert!(e.differs(&found).expect("differs").contains("stale-write"));
        assert_eq!(
            expectation(&spec, &Column::Preset(Preset::PauseClients), false)
                .must
                .len(),
            2
        );
    }

    #[test]
    fn a_cell_that_must_stop_on_an_error_passes_only_on_that_error() {
        let expected = Expectation {
            error: Some("raised TypeError".into()),
            ..Expectation::default()
        };
        let dir = Path::new("/nonexistent/cell");
        let judge = |outcome| {
            judge_run(
                "w.toml".into(),
                &Column::default(),
                expected.clone(),
                dir,
                1.0,
                outcome,
            )
        };
        let stopped = |why: &str| Err(RunError::Setup(why.to_string()));
        let cell = judge(stopped(
            "adapter: error reply: acquire raised TypeError: wait()",
        ));
        assert_eq!(cell.status, super::super::matrix::Status::Pass, "{cell:?}");
        assert_eq!(cell.nothing_found_text(), "error");
        let cell = judge(stopped("the clients could not start: no such file"));
        assert_eq!(
            cell.status,
            super::super::matrix::Status::Differs,
            "{cell:?}"
        );
        assert!(
            cell.why.as_deref().is_some_and(|w| w.contains(
                "expected an error saying \"raised TypeError\"; it stopped on: the clients"
            )),
            "{cell:?}"
        );
        // Bad input is never the error a cell expects.
        let cell = judge(Err(RunError::Workload("raised TypeError".into())));
        assert_eq!(
            cell.status,
            super::super::matrix::Status::Differs,
            "{cell:?}"
        );
    }

    #[test]
    fn a_proof_is_complete_when_every_must_kind_has_been_proven() {
        let anomaly = |kind: &str, start_ms: i64, end_ms: i64, expired: Option<bool>| {
            crate::report::Anomaly {
                kind: kind.parse().unwrap(),
                key: "k".into(),
                processes: vec![],
                indices: vec![],
                explanation: String::new(),
                start: start_ms * 1_000_000,
                end: end_ms * 1_000_000,
                lease_expired: expired,
                tokens: vec![],
                cycle: vec![],
            }
        };
        let report = Report {
            anomalies: vec![
                // A lost update begins at the counter's first write and is proven at the end.
                anomaly("lost-update", 0, 9_000, None),
                anomaly("overlap", 3_000, 3_500, Some(true)),
                anomaly("overlap", 4_000, 4_200, Some(false)),
            ],
            ..Report::default()
        };
        let must = |kinds: &[&str], inside_lease: bool| Expectation {
            must: crate::report::named(kinds),
            inside_lease,
            ..Expectation::default()
        };
        // An overlap at the second grant (its start).
        assert_eq!(
            proven_ms(&report, &must(&["overlap"], false)),
            Some(3_000.0)
        );
        assert_eq!(proven_ms(&report, &must(&["overlap"], true)), Some(4_000.0));
        assert_eq!(
            proven_ms(&report, &must(&["overlap", "lost-update"], false)),
            Some(9_000.0)
        );
        // A kind not found: no proof; nothing to find: no proof either.
        assert_eq!(
            proven_ms(&report, &must(&["stale-write", "overlap"], false)),
            None
        );
        assert_eq!(proven_ms(&report, &must(&[], false)), None);
        // The first anomaly, by contrast, is the lost update's start.
        assert_eq!(
            first_anomaly_ms(&report, &must(&["overlap", "lost-update"], false)),
            Some(0.0)
        );
    }

    #[test]
    fn names_are_checked() {
        let mut o = AuditOptions::new(PathBuf::from("x"));
        assert!(o.validate().is_ok());
        // A column that is no preset (nor a workload's own schedule file).
        o.cells = Some(vec![("set-nx-px".into(), Column::named("chaos"))]);
        assert!(o.validate().unwrap_err().to_string().contains("chaos"));
    }

    #[test]
    fn a_folder_of_workloads_is_each_file_and_one_that_names_its_nemesis_is_its_own_cell() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write(
            "a-own-preset.toml",
            "algorithm = \"set-nx-px\"\nnemesis = \"pause-clients\"\n",
        );
        write(
            "b-own-file.toml",
            "algorithm = \"set-nx-px\"\nnemesis = \"schedules/cut-long.toml\"\n\n[expect]\ncut-long = { must = [\"overlap\"] }\n",
        );
        write("c-every-preset.toml", "algorithm = \"set-nx-px\"\n");
        write("notes.md", "not a workload\n");
        std::fs::create_dir(dir.path().join("schedules")).unwrap();
        write("schedules/cut-long.toml", "name = \"cut-long\"\n");
        let folder = dir.path().display().to_string();
        let rows = expand_folders(vec![folder.clone(), "redlock".into()]).unwrap();
        let file = |name: &str| dir.path().join(name).display().to_string();
        assert_eq!(
            rows,
            [
                file("a-own-preset.toml"),
                file("b-own-file.toml"),
                file("c-every-preset.toml"),
                "redlock".into()
            ]
        );
        let mut o = AuditOptions::new(PathBuf::from("x"));
        o.algorithms = rows;
        let cells = o.cell_list();
        assert_eq!(
            cells[0],
            (file("a-own-preset.toml"), "pause-clients".into())
        );
        assert_eq!(cells[1], (file("b-own-file.toml"), "cut-long".into()));
        // The others: every preset.
        assert_eq!(cells.len(), 2 + 2 * Preset::ALL.len());
        assert!(o.validate().is_ok(), "{:?}", o.validate());
        // Asked for, the presets apply to every row.
        o.nemeses_asked = true;
        assert_eq!(o.cell_list().len(), 4 * Preset::ALL.len());
        // A schedule file's name is a column of its own workload only.
        o.cells = Some(vec![("redlock".into(), "cut-long".into())]);
        assert!(o.validate().unwrap_err().to_string().contains("cut-long"));
        // An empty folder is named.
        let empty = tempfile::tempdir().unwrap();
        let why = expand_folders(vec![empty.path().display().to_string()]).unwrap_err();
        assert!(why.to_string().contains("has no workload file"), "{why}");
    }
}
