//! `lockaudit run`: the controller. It starts the servers, spawns the worker processes,
//! records their events into `results/<run>/history.jsonl` while they are checked online
//! (`online.rs`), stops everything at the time limit (or once `StopWhen` is met), heals
//! every fault, reads the guarded counters one last time, and takes the checker's verdict.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use crate::checker;
use crate::cluster::{self, Cluster, ClusterSpec, Endpoints};
use crate::fleet::FleetError;
use crate::history::{self, Event, EventType, RecordedLine};
use crate::locks;
use crate::nemesis::FaultKind;
use crate::outfile;
use crate::report::{AnomalyKind, Report};
use crate::run_record::{Phases, RunRecord, RUN_JSON, SCHEDULE_COPY};
use crate::topology::hosts::parse_targets;

use crate::clock::{wall_ms, RunClock};
use crate::workload::client::key_name;
use crate::workload::resource::Resource;
use crate::workload::spec::WorkloadSpec;

pub use existing::{
    preflight, redis_url_endpoints, PreflightError, RedisUrlError, PREFLIGHT_TIMEOUT,
};
pub use plan::RunPlan;
// A run's options are part of its record (run.json); they are the run's own API too.
pub use crate::run_record::{RunOptions, StopWhen};
use recorder::Counts;

mod adapter_logs;
mod drive;
use drive::{drive, Driven};
use online::Finished;
mod existing;
mod interrupted;
pub mod online;
pub mod plan;
mod progress;
pub mod record;
pub mod recorder;
pub mod rerun;
pub mod unstarted;

/// Why a run could not be carried out (exit 3), as opposed to what it found.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Cluster(#[from] cluster::ClusterError),
    #[error(transparent)]
    Fleet(#[from] FleetError),
    #[error("{0}")]
    Setup(String),
    /// Servers lockaudit did not start (`--redis`) cannot be used.
    #[error(transparent)]
    Preflight(#[from] PreflightError),
    /// report.json's text could not be made.
    #[error("{0}")]
    ReportJson(serde_json::Error),
    #[error("cannot write {path}: {error}")]
    Io { path: String, error: std::io::Error },
    /// The schedule does not fit this run (a target it does not have): bad input.
    #[error("nemesis: {0}")]
    Schedule(String),
    /// The workload cannot run as written (a Lua script Redis cannot compile): bad input.
    #[error("{0}")]
    Workload(String),
}

/// A run's result: where it went and what the checker said.
pub struct RunOutcome {
    pub dir: PathBuf,
    /// Where the run's wall time went (also in `run.json`).
    pub phases: Phases,
    pub report: Report,
    /// `report.json`'s text, as written: what `--json` prints.
    pub report_json: String,
    pub counts: Counts,
    /// Why the run stopped before its time limit, if it did (an adapter's `error`): the
    /// history and report cover what ran, but the run could not be carried out.
    pub stopped: Option<String>,
    /// The heals that failed, each naming its fault, its target and the error: those faults
    /// stayed in force, so the run could not be carried out as planned.
    pub unhealed: Vec<String>,
    /// The kinds of fault of the schedule that could not act on this run, each with why
    /// ("clock-skew: set-nx-px never reads the client's wall clock ..."): left out of what
    /// the nemesis did, marked in `nemesis.json`, listed in `report.json` as `warnings`.
    pub not_applicable: Vec<String>,
    /// How many faults the plan holds, and how many of them could act.
    pub planned: usize,
    pub acting: usize,
    /// Why the run tested nothing of what it was asked to (its faults never acted), though
    /// its history is valid: no pass, exit 3.
    pub untested: Option<String>,
    /// Why the run ended before its time limit because it had proven what it was run for
    /// (`StopWhen`): "overlap on lock:3 at 2.41 s".
    pub proven: Option<String>,
}

impl RunOutcome {
    /// Why the run, though it ran, could not be carried out (exit 3): it stopped before its
    /// time limit, or a fault could not be healed.
    pub fn cannot_run(&self) -> Option<String> {
        let unhealed = match self.unhealed.as_slice() {
            [] => None,
            [one] => Some(format!("a fault was not healed: {one}")),
            many => Some(format!(
                "{} faults were not healed: {}",
                many.len(),
                many.join("; ")
            )),
        };
        match (&self.stopped, unhealed) {
            (Some(stopped), Some(unhealed)) => Some(format!("{stopped}; {unhealed}")),
            (stopped, unhealed) => stopped.clone().or(unhealed),
        }
    }

    /// The exit `lockaudit run` gives this outcome (docs/src/reference/exit-codes.md).
    pub fn exit_code(&self) -> u8 {
        exit_code(
            &self.report,
            self.stopped.is_some() || !self.unhealed.is_empty(),
            self.untested.is_some(),
        )
    }
}

/// A run's exit: 3 when it could not be carried out (stopped before its time, a fault not
/// healed) or tested nothing (`untested`), else the verdict's. The one place that decides
/// it, for `run` and for a signal that comes after the verdict.
fn exit_code(report: &Report, cannot_run: bool, untested: bool) -> u8 {
    if cannot_run || untested {
        3
    } else {
        report.exit_code() as u8
    }
}

/// Where the run's servers are: started by lockaudit, or already running elsewhere.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Servers {
    Owned {
        redis_server: Option<PathBuf>,
        redis_sentinel: Option<PathBuf>,
    },
    /// `--redis URL`: lockaudit starts nothing and cannot fault the servers.
    Existing(Endpoints),
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
    move |error| RunError::Io {
        path: path.display().to_string(),
        error,
    }
}

/// A fresh folder under `root` named by what runs, `<time>-<algorithm>-<nemesis>`, plus
/// the topology when it is not the algorithm's own (`-replicated`): the time first (UTC,
/// `2025-01-31T120000Z`), so that a listing sorts oldest first; a schedule file by its
/// stem. Two runs in the same second get `-2`, `-3`, ...
pub fn new_run_dir(root: &Path, spec: &WorkloadSpec) -> PathBuf {
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "");
    root.join(unused_name(root, &format!("{stamp}-{}", run_name(spec))))
}

/// `<algorithm>-<nemesis>[-<topology>]`, safe as a file name: what a run folder's name says
/// after its time.
pub fn run_name(spec: &WorkloadSpec) -> String {
    let nemesis = spec.nemesis_name();
    // A schedule file by its stem: `nemesis/pause-long.toml` is `pause-long`.
    let nemesis = if nemesis.ends_with(".toml") {
        Path::new(nemesis)
            .file_stem()
            .map_or("schedule".into(), |s| s.to_string_lossy())
    } else {
        nemesis.into()
    };
    let mut name = format!("{}-{nemesis}", spec.algorithm);
    let natural = spec.algorithm.topology;
    if let Some(topology) = spec.topology.filter(|t| *t != natural) {
        name.push('-');
        name.push_str(&topology_name(topology));
    }
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `single`, `replicated`, ...: a topology as the flag and the workload file spell it.
pub fn topology_name(topology: cluster::Topology) -> String {
    serde_json::to_value(topology)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// `name`, or `name-2`, `name-3`, ... : the first not yet taken in `root`.
fn unused_name(root: &Path, name: &str) -> String {
    let mut candidate = name.to_string();
    let mut n = 1;
    while root.join(&candidate).exists() {
        n += 1;
        candidate = format!("{name}-{n}");
    }
    candidate
}

/// Carries out the run `plan` decided: its workload under its fault schedule, into its
/// folder. A run that cannot be carried out removes the folder it made unless something
/// in it is worth keeping (`unstarted`).
pub async fn run(plan: &RunPlan) -> Result<RunOutcome, RunError> {
    let made = unstarted::to_be_made(&plan.dir);
    let result = run_in_folder(plan).await;
    if result.is_err() {
        unstarted::tidy(&plan.dir, made.as_deref());
    }
    result
}

async fn run_in_folder(plan: &RunPlan) -> Result<RunOutcome, RunError> {
    let RunPlan {
        schedule,
        dir,
        options,
        ..
    } = plan;
    let dir = dir.as_path();
    let began = std::time::Instant::now();
    let mut record = write_what_runs(plan)?;
    let record_path = dir.join(RUN_JSON);
    let (not_applicable, warnings) = announce_faults(plan);
    // Ctrl-C or SIGTERM: once every child is stopped, the history recorded so far is
    // checked and its report written, marked interrupted. `finishing` keeps that and this
    // function's own report from being written at once.
    let finishing = Arc::new(Mutex::new(false));
    let _interrupted = interrupted::register(dir, options, &warnings, finishing.clone());

    let (endpoints, mut owned) = start_servers(plan).await?;
    record.servers = cluster::server_versions(&endpoints).await;
    record.write(dir).map_err(io_error(&record_path))?;
    let endpoints_text =
        serde_json::to_string_pretty(&endpoints).map_err(|e| RunError::Setup(e.to_string()))?;
    // The password is in it: readable by this user only (docs/src/guide/secrets.md).
    crate::private::write(&dir.join("endpoints.json"), endpoints_text)
        .map_err(io_error(&dir.join("endpoints.json")))?;

    let mut phases = Phases {
        setup_s: began.elapsed().as_secs_f64(),
        ..Default::default()
    };
    let workload_began = std::time::Instant::now();
    let result = drive(plan, &endpoints, owned.as_mut()).await;
    phases.workload_s = workload_began.elapsed().as_secs_f64();
    let teardown_began = std::time::Instant::now();
    if let Some(cluster) = owned {
        cluster.shutdown().await;
    }
    phases.teardown_s = teardown_began.elapsed().as_secs_f64();
    let verdict_began = std::time::Instant::now();
    let Driven {
        counts,
        ready_s,
        faults_acted,
        stopped,
        unhealed,
        planned,
        acting,
        proven,
        online,
        found_kinds,
    } = result?;
    phases.clients_ready_s = ready_s;
    if let Some(peak) = crate::sys::peak_resident_kib() {
        tracing::info!("recorder peak resident memory {peak} KiB");
    }

    if let Some(late) = online.as_ref().map(|o| o.late_events).filter(|&n| n > 0) {
        tracing::warn!(
            "{late} events reached the online checker after it had judged their time; the verdict below is on every event"
        );
    }
    let report = final_report(online, dir, options, &found_kinds)?;
    // A run whose faults never acted tested nothing about them: valid as the history is,
    // it is no pass (exit 3), and an audit counts its cell as untested.
    let untested = (acting > 0 && faults_acted == 0 && report.valid == Some(true)).then(|| {
        format!(
            "no fault acted: of the {acting} faults of the nemesis {} that could act on this run, none took effect while the clients ran (see nemesis.json); the run proves nothing about them",
            schedule.name
        )
    });
    let mut warnings = warnings;
    warnings.extend(adapter_troubles(dir));
    // The checker judges the history; what the run could not do is the run's to add.
    let report_text =
        report_json(&report, &warnings, None, untested.as_deref()).map_err(RunError::ReportJson)?;
    let report_path = dir.join("report.json");
    // Interrupted meanwhile: the report is the interruption's to write, and the process
    // ends with it. Written: a signal no longer changes it (nor, for `run`, the exit).
    let own = options.owns_exit.then(|| {
        exit_code(
            &report,
            stopped.is_some() || !unhealed.is_empty(),
            untested.is_some(),
        )
    });
    let written = interrupted::write_verdict(&finishing, own, || {
        outfile::write(&report_path, &report_text)
    });
    match written {
        Some(written) => written.map_err(io_error(&report_path))?,
        None => std::future::pending::<()>().await,
    }
    phases.verdict_s = verdict_began.elapsed().as_secs_f64();
    record.end(began.elapsed().as_secs_f64(), phases);
    record.write(dir).map_err(io_error(&record_path))?;
    Ok(RunOutcome {
        dir: dir.to_path_buf(),
        phases,
        report,
        report_json: report_text,
        counts,
        stopped,
        unhealed,
        not_applicable,
        planned,
        acting,
        untested,
        proven,
    })
}

/// Makes the run folder and writes what runs, for a person and for `rerun`: the workload
/// as it runs, run.json, and the schedule file's text as it was (the file may change or not
/// be there for a rerun).
fn write_what_runs(plan: &RunPlan) -> Result<RunRecord, RunError> {
    let dir = plan.dir.as_path();
    // Private to this user from the start: it holds the servers' password (endpoints.json).
    crate::private::create_run_dir(dir).map_err(io_error(dir))?;
    let spec_text =
        toml::to_string_pretty(&plan.spec).map_err(|e| RunError::Setup(e.to_string()))?;
    outfile::write(&dir.join("workload.toml"), spec_text)
        .map_err(io_error(&dir.join("workload.toml")))?;
    let record = RunRecord::of(plan);
    record.write(dir).map_err(io_error(&dir.join(RUN_JSON)))?;
    if record.schedule_file {
        let copy = dir.join(SCHEDULE_COPY);
        let file = record.nemesis.name();
        let text = std::fs::read(file).map_err(|e| RunError::Io {
            path: file.to_string(),
            error: e,
        })?;
        if Path::new(file) != copy {
            outfile::write(&copy, text).map_err(io_error(&copy))?;
        }
    }
    Ok(record)
}

/// Says, before the run starts, which of its faults cannot act (never passed off as
/// injected and healed) and whether the schedule fits its time. Returns those faults
/// ("kind: why") and what report.json adds for them (the checker judges the history only).
fn announce_faults(plan: &RunPlan) -> (Vec<String>, Vec<String>) {
    let not_applicable: Vec<String> = (plan.not_applicable.iter())
        .map(|(kind, why)| format!("{}: {why}", kind.name()))
        .collect();
    if !not_applicable.is_empty() {
        let all = plan.nothing_acts.is_some();
        crate::note!(
            "lockaudit: warning: {} of the nemesis {} can act on this run ({}); {}",
            if all { "no fault" } else { "not every fault" },
            plan.schedule.name,
            not_applicable.join("; "),
            if all {
                "it runs without faults, and proves nothing about them"
            } else {
                "those faults are left out (marked in nemesis.json)"
            }
        );
    }
    if let Some(why) = &plan.misfit {
        crate::note!("lockaudit: warning: {why}");
    }
    let warnings = not_applicable
        .iter()
        .map(|why| format!("a fault that cannot act on this run was left out: {why}"))
        .chain(plan.misfit.clone())
        .collect();
    (not_applicable, warnings)
}

/// The servers the run's clients use: a Redis already running (checked first), or the
/// cluster lockaudit starts and owns.
async fn start_servers(plan: &RunPlan) -> Result<(Endpoints, Option<Cluster>), RunError> {
    let (spec, schedule, dir) = (&plan.spec, &plan.schedule, plan.dir.as_path());
    let kinds = schedule.kinds();
    match plan.servers.clone() {
        Servers::Existing(mut endpoints) => {
            if let Some(kind) = kinds.iter().find(|k| !k.targets_workers()) {
                return Err(RunError::Setup(format!(
                    "the nemesis {} needs servers lockaudit starts itself; with --redis only client faults are possible",
                    kind.name()
                )));
            }
            preflight(&mut endpoints, PREFLIGHT_TIMEOUT).await?;
            crate::note!(
                "lockaudit: using a Redis it did not start ({}:{}): server-side faults are unavailable",
                endpoints.nodes[0].host, endpoints.nodes[0].port
            );
            Ok((endpoints, None))
        }
        Servers::Owned {
            redis_server,
            redis_sentinel,
        } => {
            let mut cluster_spec = ClusterSpec::new(spec.topology(), dir);
            cluster_spec.masters = spec.masters;
            cluster_spec.redis_server = redis_server;
            cluster_spec.redis_sentinel = redis_sentinel;
            cluster_spec.persistence = schedule.needs_persistence();
            cluster_spec.fake_clocks = kinds.contains(&FaultKind::ClockJump);
            cluster_spec.hosts = parse_targets(&spec.nodes).map_err(cluster::ClusterError::from)?;
            cluster_spec.ssh_key = spec.ssh_key.clone();
            cluster_spec.remote_dir = spec.remote_dir.clone();
            cluster_spec.accept_new_host_keys = spec.accept_new_host_keys;
            let begun = std::time::Instant::now();
            let cluster = cluster::start(&cluster_spec).await?;
            if cluster_spec.topology == cluster::Topology::Cluster {
                // Forming a cluster takes seconds, not milliseconds: say how long, and keep it.
                let ms = begun.elapsed().as_millis();
                crate::note!(
                    "lockaudit: Redis Cluster of {} masters with a replica each ready in {ms} ms",
                    cluster_spec.shards
                );
                outfile::write(&dir.join("cluster-start-ms.txt"), format!("{ms}\n"))
                    .map_err(io_error(dir))?;
            } else if cluster_spec.topology.own_locks_only() {
                let ms = begun.elapsed().as_millis();
                crate::note!(
                    "lockaudit: {} ready in {ms} ms",
                    cluster_spec.topology.service_name()
                );
                outfile::write(&dir.join("cluster-start-ms.txt"), format!("{ms}\n"))
                    .map_err(io_error(dir))?;
            }
            Ok((cluster.endpoints(), Some(cluster)))
        }
    }
}

/// The verdict on every event. The online checker has every event the file has, in its
/// order: its final verdict is `check` on the file (tests/it/online.rs). Without it, or
/// should it have stopped, the file is read. A kind reported while the run went on that
/// the verdict takes back is said.
fn final_report(
    online: Option<Finished>,
    dir: &Path,
    options: &RunOptions,
    found_kinds: &[AnomalyKind],
) -> Result<Report, RunError> {
    if let Some(late) = online.as_ref().map(|o| o.late_events).filter(|&n| n > 0) {
        tracing::warn!(
            "{late} events reached the online checker after it had judged their time; the verdict below is on every event"
        );
    }
    let report = match online.map(|o| o.report) {
        Some(Ok(report)) => report,
        other => {
            if let Some(Err(e)) = other {
                tracing::warn!("online checking stopped ({e}); reading the history back");
            }
            let history_path = dir.join("history.jsonl");
            let history = history::read_file(&history_path).map_err(|e| {
                RunError::Setup(format!("the recorded history does not read back: {e}"))
            })?;
            checker::check(&history, &options.check)
        }
    };
    let taken_back: Vec<&str> = found_kinds
        .iter()
        .filter(|&&kind| report.count(kind) == 0)
        .map(|kind| kind.as_str())
        .collect();
    if !taken_back.is_empty() {
        crate::note!(
            "lockaudit: warning: reported while the run went on but not in the final verdict: {taken_back:?} (a lease granted later lengthened a block; the final verdict is on every event)"
        );
    }
    Ok(report)
}

/// An adapter that crashed or printed a traceback: named, with its trace's last lines, for
/// the verdict alone would not say the harness or the library broke. The first few are
/// named; a library that fails every time needs no more. Said, and returned for
/// report.json's warnings.
fn adapter_troubles(dir: &Path) -> Vec<String> {
    let mut warnings = Vec::new();
    let troubles = adapter_logs::troubles(dir);
    for trouble in troubles.iter().take(3) {
        crate::note!("lockaudit: warning: an adapter failed: {}", trouble.text());
        warnings.push(format!("an adapter failed: {}", trouble.text()));
    }
    if troubles.len() > 3 {
        let more = format!(
            "{} more adapters failed the same way or another (their adapter-*.log)",
            troubles.len() - 3
        );
        crate::note!("lockaudit: warning: {more}");
        warnings.push(more);
    }
    warnings
}

/// `report.json`'s text: the checker's report, with the run's `warnings`, for a run cut
/// short by a signal `"interrupted": "SIGINT"`, and for a run whose faults never acted
/// `"untested": why`.
fn report_json(
    report: &Report,
    warnings: &[String],
    interrupted: Option<&str>,
    untested: Option<&str>,
) -> Result<String, serde_json::Error> {
    let mut value = serde_json::to_value(report)?;
    if let Some(object) = value.as_object_mut() {
        if !warnings.is_empty() {
            object.insert("warnings".into(), warnings.into());
        }
        if let Some(why) = untested {
            object.insert("untested".into(), why.into());
        }
        if let Some(signal) = interrupted {
            object.insert("interrupted".into(), signal.into());
        }
    }
    Ok(serde_json::to_string_pretty(&value)? + "\n")
}

/// A workload's own Lua scripts must compile before any worker starts: a client that
/// cannot load them would only retry its connection until the time limit.
async fn check_scripts(spec: &WorkloadSpec, endpoints: &Endpoints) -> Result<(), RunError> {
    if !spec.algorithm.is_scripted() {
        return Ok(());
    }
    let options = locks::LockOptions {
        ttl_ms: spec.ttl.0,
        op_timeout_ms: spec.op_timeout.0,
        scripts: spec.lua_scripts(),
        ..locks::LockOptions::default()
    };
    match locks::connect(spec.algorithm.name, endpoints, &options).await {
        Ok(_) => Ok(()),
        Err(e @ locks::LockError::Scripts(_)) => Err(RunError::Workload(e.to_string())),
        // Unreachable servers and the like are the clients' to meet and record.
        Err(_) => Ok(()),
    }
}

/// The steps a crash point can name for this workload's lock client.
fn crash_points_of(spec: &WorkloadSpec) -> Vec<String> {
    let mut points: Vec<String> = (spec.algorithm.steps.iter())
        .map(|p| p.to_string())
        .collect();
    if spec.fenced {
        points.push(locks::FENCED_STEP.to_string());
    }
    points
}

/// After the clients stop: one read of each key's counter, for the lost-update check.
async fn final_reads(
    spec: &WorkloadSpec,
    endpoints: &Endpoints,
    clock: RunClock,
    process: u64,
    events: &mpsc::UnboundedSender<RecordedLine>,
) {
    // Interrupted: the storage server is being stopped, and its silence observes nothing.
    if cluster::shutting_down() {
        return;
    }
    let mut reader = match CounterReader::connect(spec, endpoints).await {
        Ok(reader) => reader,
        Err(e) => {
            tracing::warn!("cannot reach the guarded counters for the final reads: {e}");
            return;
        }
    };
    let record = |ty: EventType, key: &str, value: Option<serde_json::Value>| {
        let mut event = Event::client(0, clock.now(), process, ty, "read", key);
        event.value = value;
        event.wall = Some(wall_ms());
        send_event(events, &event);
    };
    for k in 0..spec.keys {
        let key = key_name(k);
        record(EventType::Invoke, &key, None);
        match reader.read(&key).await {
            Ok(value) => record(
                EventType::Ok,
                &key,
                Some(serde_json::json!({ "value": value })),
            ),
            Err(_) if cluster::shutting_down() => return,
            Err(e) => {
                let mut event =
                    Event::client(0, clock.now(), process, EventType::Info, "read", &key);
                // What the history records of it is its words.
                event.error = Some(e.to_string());
                send_event(events, &event);
                return;
            }
        }
    }
}

/// Why a final read could not be made: a client of the lock or the storage server could
/// not connect, or the read failed. In the words of whichever failed.
#[derive(Debug, thiserror::Error)]
enum FinalReadError {
    #[error("{0}")]
    Lock(locks::LockError),
    #[error("{0}")]
    Counter(locks::CounterError),
    #[error("{0}")]
    Storage(redis::RedisError),
}

/// Where the final reads find the counters: the storage server, or the lock's own
/// server for a lock that keeps them (pg-row), read through a fresh client of it.
enum CounterReader {
    Storage(Resource),
    Lock(Box<dyn locks::LockClient>),
}

impl CounterReader {
    async fn connect(spec: &WorkloadSpec, endpoints: &Endpoints) -> Result<Self, FinalReadError> {
        if spec.algorithm.counter_with_lock(spec.fenced) {
            let options = locks::LockOptions {
                op_timeout_ms: 5000,
                ..locks::LockOptions::default()
            };
            return locks::connect(spec.algorithm.name, endpoints, &options)
                .await
                .map(CounterReader::Lock)
                .map_err(FinalReadError::Lock);
        }
        let password = endpoints.password.as_deref();
        Resource::connect(&endpoints.storage, password, spec.fenced)
            .await
            .map(CounterReader::Storage)
            .map_err(FinalReadError::Storage)
    }

    async fn read(&mut self, key: &str) -> Result<Option<i64>, FinalReadError> {
        match self {
            CounterReader::Storage(resource) => {
                resource.read(key).await.map_err(FinalReadError::Storage)
            }
            CounterReader::Lock(lock) => lock
                .read_counter(key)
                .await
                .map_err(FinalReadError::Counter),
        }
    }
}

fn send_event(events: &mpsc::UnboundedSender<RecordedLine>, event: &Event) {
    let _ = events.send(RecordedLine::from_event(event));
}

#[cfg(test)]
mod tests {
    use super::progress::ProgressLines;
    use super::*;

    #[test]
    fn a_progress_line_every_five_seconds_of_run_time() {
        let counts = Counts {
            events: 4121,
            acquisitions: 1012,
            failed_acquires: 3,
            ..Counts::default()
        };
        let mut lines = ProgressLines::new(true, false);
        assert_eq!(lines.due(4_999_999_999, &counts, ""), None);
        assert_eq!(
            lines.due(5_000_000_000, &counts, "").as_deref(),
            Some("progress: 5s, 4121 events, 1012 acquisitions, 3 failed, 0 indeterminate; anomalies so far: none")
        );
        assert_eq!(lines.due(9_000_000_000, &counts, ""), None);
        // A late wake-up prints one line, not one per interval missed.
        let line = lines
            .due(16_000_000_000, &counts, "overlap ×2")
            .expect("due");
        assert!(line.starts_with("progress: 16s, "), "{line}");
        assert!(line.ends_with("; anomalies so far: overlap ×2"), "{line}");
        assert_eq!(lines.due(19_000_000_000, &counts, ""), None);
        let mut offline = ProgressLines::new(false, false);
        let line = offline.due(5_000_000_000, &counts, "").expect("due");
        assert!(
            line.ends_with("checked at the end (--no-online-check)"),
            "{line}"
        );
    }

    #[test]
    fn an_optimistic_locks_progress_line_counts_its_writes() {
        // What the recorder counts of an optimistic client's cycles: reads and conditional
        // writes, acknowledged or refused (a conflict), and no acquire.
        let mut counts = Counts::default();
        for (ty, f) in [
            (EventType::Invoke, "read"),
            (EventType::Ok, "read"),
            (EventType::Invoke, "write"),
            (EventType::Ok, "write"),
            (EventType::Invoke, "write"),
            (EventType::Fail, "write"),
            (EventType::Invoke, "write"),
            (EventType::Ok, "write"),
        ] {
            counts.add(history::Process::Client(1), ty, f);
        }
        let mut lines = ProgressLines::new(true, true);
        assert_eq!(
            lines.due(5_000_000_000, &counts, "").as_deref(),
            Some("progress: 5s, 8 events, 2 writes, 1 failed, 0 indeterminate; anomalies so far: none")
        );
        // A lock that acquires says its acquisitions, as before.
        let mut lines = ProgressLines::new(true, false);
        let line = lines.due(5_000_000_000, &counts, "").expect("due");
        assert!(line.contains(", 0 acquisitions, 0 failed,"), "{line}");
        let optimistic = |name| locks::algorithm(name).unwrap().optimistic;
        assert!(optimistic("watch-multi") && optimistic("pg-version"));
        assert!(!optimistic("set-nx-px"));
    }
}
