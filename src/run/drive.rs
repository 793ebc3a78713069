//! The run under way: the clients started and released together, the nemesis acting on
//! them, everything recorded and checked as it comes, then every fault healed and the
//! counters read. `drive` is the order of those steps; each is a function here.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::ProgressBar;
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinHandle;

use crate::clock::RunClock;
use crate::cluster::{self, Cluster, Endpoints};
use crate::fake_clock::Preload;
use crate::fleet::Fleet;
use crate::history::RecordedLine;
use crate::nemesis::executor::{self, Targets};
use crate::nemesis::journal::Journal;
use crate::nemesis::network::Network;
use crate::nemesis::{self, FaultKind, PlannedFault, Stage};
use crate::outfile;
use crate::report::{Anomaly, AnomalyKind};
use crate::workload::spec::WorkloadSpec;
use crate::workload::worker::WorkerConfig;

use super::online::{collect_found, Finished, Found, Online};
use super::progress::{progress_bar, ProgressLines};
use super::recorder::{record_and_forward, Counts};
use super::{check_scripts, crash_points_of, final_reads, io_error, RunError, RunOptions, RunPlan};

/// What `drive` leaves for the run's outcome.
pub(super) struct Driven {
    pub counts: Counts,
    /// Seconds the clients took to connect, before the run's clock started.
    pub ready_s: f64,
    /// How many faults took effect on the running workload.
    pub faults_acted: usize,
    pub stopped: Option<String>,
    pub unhealed: Vec<String>,
    pub planned: usize,
    pub acting: usize,
    pub proven: Option<String>,
    pub online: Option<Finished>,
    /// The kinds the online checker reported while the run went on.
    pub found_kinds: Vec<AnomalyKind>,
}

/// Spawns the workers, runs the nemesis and records until the workers finish, heals
/// every fault, then reads the counters.
pub(super) async fn drive(
    run_plan: &RunPlan,
    endpoints: &Endpoints,
    cluster: Option<&mut Cluster>,
) -> Result<Driven, RunError> {
    let RunPlan { spec, options, .. } = run_plan;
    let faults = plan_faults(run_plan, endpoints)?;
    let planned = faults.len();
    let acting = faults.iter().filter(|f| f.not_applicable.is_none()).count();
    check_scripts(spec, endpoints).await?;

    let recording = Recording::start(&run_plan.dir, options);
    let (mut network, worker_endpoints) = proxies(run_plan, endpoints).await?;
    let (mut fleet, mut exits, ready_s, clock) =
        start_clients(run_plan, &worker_endpoints, &recording.events).await?;
    let progress = if options.progress {
        progress_bar(spec)
    } else {
        ProgressBar::hidden()
    };
    let watch_progress = watch_progress(run_plan, &progress, clock, &recording);

    let journal = Journal::new(recording.events.clone(), clock);
    let (stopped, unhealed) = {
        let mut targets = Targets {
            workers: &mut fleet,
            endpoints,
            cluster,
            network: network.as_mut(),
        };
        let executed = executor::execute_until(
            &faults,
            &mut targets,
            &journal,
            &mut exits,
            spec.time_limit.0,
            &recording.stop,
        )
        .await;
        let mut unhealed = executed.unhealed;
        if cluster::shutting_down() {
            // Ctrl-C: the cleanup handler is stopping every child and ends the process next.
            // Shutting down is no fault: nothing more is healed, read or recorded.
            std::future::pending::<()>().await;
        }
        executor::heal_all(&mut targets, &journal, &mut unhealed).await;
        (executed.stopped, unhealed)
    };
    let proven = lock(&recording.found).proven.clone();
    let early = says_why_it_stops(
        stopped.as_ref(),
        lock(&recording.write_failed).as_ref(),
        proven.as_ref(),
        &progress,
    );
    stop_clients(spec, &mut fleet, &journal, clock, early).await;
    let faults_acted = journal.faults_acted();
    if let Some(network) = network {
        network.stop().await;
    }
    // A number no client used: the fleet's ledgers have read every worker's output by now,
    // whereas the recorder's counts may still lag behind its queue (a client retired just
    // before the end could then share its number with the final reads).
    let max_process = fleet
        .max_process()
        .unwrap_or(0)
        .max(recording.counts.borrow().max_process);
    final_reads(spec, endpoints, clock, max_process + 1, &recording.events).await;
    drop(journal);
    drop(fleet);
    let (counts, online, found_kinds) = recording.finish(watch_progress, &progress).await?;
    Ok(Driven {
        counts,
        ready_s,
        faults_acted,
        stopped,
        unhealed: unhealed.iter().map(ToString::to_string).collect(),
        planned,
        acting,
        proven,
        online,
        found_kinds,
    })
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The faults of the run's schedule, placed on its workers and servers, each marked with
/// why it cannot act when the plan says so; written to `nemesis.json`.
fn plan_faults(run_plan: &RunPlan, endpoints: &Endpoints) -> Result<Vec<PlannedFault>, RunError> {
    let spec = &run_plan.spec;
    let stage = Stage {
        workers: spec.workers,
        servers: endpoints.nodes.iter().map(|n| n.name.clone()).collect(),
        ttl_ms: spec.ttl.0,
        crash_points: crash_points_of(spec),
        time_limit_ms: spec.time_limit.0,
        seed: spec.seed,
        topology: endpoints.topology,
    };
    let mut faults =
        nemesis::plan(&run_plan.schedule, &stage).map_err(|e| RunError::Schedule(e.to_string()))?;
    for fault in &mut faults {
        fault.not_applicable = run_plan.cannot_act(fault.kind);
    }
    let path = run_plan.dir.join("nemesis.json");
    let text = serde_json::to_string_pretty(&faults).map_err(|e| RunError::Setup(e.to_string()))?;
    outfile::write(&path, text + "\n").map_err(io_error(&path))?;
    Ok(faults)
}

/// The history as it is recorded: the events' queue and its writer, the online checker
/// it feeds, and what that checker has proven.
struct Recording {
    events: mpsc::UnboundedSender<RecordedLine>,
    counts: watch::Receiver<Counts>,
    history_path: PathBuf,
    recorder: JoinHandle<std::io::Result<Counts>>,
    online: Option<Online>,
    found: Arc<Mutex<Found>>,
    collector: JoinHandle<()>,
    /// Rung when the run must stop before its time: proven, or the history cannot be
    /// written.
    stop: Arc<Notify>,
    write_failed: Arc<Mutex<Option<String>>>,
}

impl Recording {
    fn start(dir: &Path, options: &RunOptions) -> Recording {
        let (events, received) = mpsc::unbounded_channel::<RecordedLine>();
        let (counts_tx, counts) = watch::channel(Counts::default());
        let history_path = dir.join("history.jsonl");
        let (found_tx, found_rx) = mpsc::unbounded_channel::<Anomaly>();
        let online = options.online_check.then(|| {
            Online::start(
                &history_path.display().to_string(),
                options.check.clone(),
                found_tx,
            )
        });
        let found = Arc::new(Mutex::new(Found::default()));
        let stop = Arc::new(Notify::new());
        // A recorder that cannot write (a full disk) stops the run at once, and says why:
        // the workers would otherwise go on with nothing recorded.
        let write_failed: Arc<Mutex<Option<String>>> = Arc::default();
        let recorder = tokio::spawn({
            let path = history_path.clone();
            let forward = online.as_ref().map(Online::lines);
            let (stop, write_failed) = (stop.clone(), write_failed.clone());
            async move {
                let recorded = record_and_forward(&path, received, counts_tx, forward).await;
                if let Err(e) = &recorded {
                    *lock(&write_failed) = Some(format!("cannot write {}: {e}", path.display()));
                    stop.notify_one();
                }
                recorded
            }
        });
        let collector = collect_found(
            found_rx,
            options.stop_when.clone(),
            found.clone(),
            stop.clone(),
        );
        Recording {
            events,
            counts,
            history_path,
            recorder,
            online,
            found,
            collector,
            stop,
            write_failed,
        }
    }

    /// Once nothing more is sent: the history written (then the progress shown no more),
    /// the online checker's last word, and the kinds it reported while the run went on.
    async fn finish(
        self,
        watch_progress: JoinHandle<()>,
        progress: &ProgressBar,
    ) -> Result<(Counts, Option<Finished>, Vec<AnomalyKind>), RunError> {
        drop(self.events);
        let counts = self
            .recorder
            .await
            .map_err(|e| RunError::Setup(format!("the recorder failed: {e}")))?
            .map_err(io_error(&self.history_path))?;
        watch_progress.abort();
        progress.finish_and_clear();
        let online = match self.online {
            Some(online) => Some(
                tokio::task::spawn_blocking(move || online.finish())
                    .await
                    .map_err(|e| RunError::Setup(format!("the online checker failed: {e}")))?,
            ),
            None => None,
        };
        self.collector.abort();
        let found_kinds = lock(&self.found).kinds.keys().cloned().collect();
        Ok((counts, online, found_kinds))
    }
}

/// Proxies between clients and servers, when a fault needs them, and the endpoints each
/// worker then uses.
async fn proxies(
    run_plan: &RunPlan,
    endpoints: &Endpoints,
) -> Result<(Option<Network>, Vec<Endpoints>), RunError> {
    let workers = run_plan.spec.workers;
    let kinds = run_plan.schedule.kinds();
    let service = cluster::service(endpoints.topology);
    let needs_network = kinds
        .iter()
        .any(|k| matches!(k, FaultKind::Partition | FaultKind::Latency))
        || (kinds.contains(&FaultKind::Failover) && service.primary_by_hand)
        || (kinds.contains(&FaultKind::KillSession)
            && matches!(service.sessions, cluster::SessionEnd::CutOff));
    if !needs_network {
        return Ok((None, vec![endpoints.clone(); workers]));
    }
    let (network, per_worker) = Network::start(endpoints, workers, true)
        .await
        .map_err(|e| RunError::Setup(format!("cannot set up the proxies: {e}")))?;
    Ok((Some(network), per_worker))
}

/// Starts the workers and waits until every client is ready (an adapter answers its
/// `init`); then starts the run's clock, and with it the schedule's faults and the time
/// limit, and lets the clients go. A client that cannot start stops the run here, before
/// any fault.
async fn start_clients(
    run_plan: &RunPlan,
    worker_endpoints: &[Endpoints],
    events: &mpsc::UnboundedSender<RecordedLine>,
) -> Result<(Fleet, mpsc::UnboundedReceiver<usize>, f64, RunClock), RunError> {
    let spec = &run_plan.spec;
    // An external adapter's clock can only be skewed through a preloaded wall clock.
    let adapter_clock = if spec.algorithm.is_external()
        && run_plan.schedule.kinds().contains(&FaultKind::ClockSkew)
    {
        Some(Preload::find().map_err(|e| {
            RunError::Setup(format!(
                "clock-skew on an external adapter needs its wall clock faked: {e}"
            ))
        })?)
    } else {
        None
    };
    let total = spec.clients as u64;
    let configs = (0..spec.workers)
        .map(|w| WorkerConfig {
            worker: w,
            slots: (0..total)
                .filter(|s| (*s as usize) % spec.workers == w)
                .collect(),
            total_slots: total,
            spec: spec.clone(),
            endpoints: worker_endpoints[w].clone(),
            // Set by `go`, once every client is ready.
            base_ns: 0,
            deadline_ns: (spec.time_limit.0 as i64) * 1_000_000,
            first_generation: 0,
            adapter_clock: adapter_clock.clone(),
            await_go: true,
        })
        .collect();
    let connecting = std::time::Instant::now();
    let (mut fleet, exits) = Fleet::start(&run_plan.dir, configs, events.clone()).await?;
    fleet
        .await_ready(crate::workload::worker::CONNECT_LIMIT + Duration::from_secs(5))
        .await
        .map_err(|why| RunError::Setup(format!("the clients could not start: {why}")))?;
    let ready_s = connecting.elapsed().as_secs_f64();
    if run_plan.options.progress {
        crate::note!(
            "lockaudit: {} clients ready in {} ms",
            spec.clients,
            (ready_s * 1000.0).round()
        );
    }
    let clock = RunClock::start();
    fleet.go(clock.base_ns).await;
    Ok((fleet, exits, ready_s, clock))
}

/// Keeps the progress bar (or, where it cannot show, a line every few seconds) up to date
/// with the counts and what the online checker found.
fn watch_progress(
    run_plan: &RunPlan,
    progress: &ProgressBar,
    clock: RunClock,
    recording: &Recording,
) -> JoinHandle<()> {
    let options = &run_plan.options;
    // Where the bar cannot show (stderr is no terminal: a CI log, a pipe), a line on stderr
    // every few seconds says the run goes on, and how far: progress, never on stdout, which
    // carries the verdict only.
    // An optimistic lock acquires nothing: its progress is its writes.
    let optimistic = run_plan.spec.algorithm.optimistic;
    let mut lines = (options.progress && progress.is_hidden())
        .then(|| ProgressLines::new(options.online_check, optimistic));
    let progress = progress.clone();
    let mut counts = recording.counts.clone();
    let found = recording.found.clone();
    tokio::spawn(async move {
        loop {
            let c = *counts.borrow_and_update();
            let now_ns = clock.now().max(0);
            progress.set_position((now_ns / 1_000_000) as u64);
            let anomalies = (lock(&found).kinds.iter())
                .map(|(kind, n)| format!("{kind} ×{n}"))
                .collect::<Vec<_>>()
                .join(", ");
            if let Some(line) = lines.as_mut().and_then(|l| l.due(now_ns, &c, &anomalies)) {
                crate::note!("{line}");
            }
            progress.set_message(format!(
                "{}{}",
                c.progress(optimistic),
                if anomalies.is_empty() {
                    String::new()
                } else {
                    format!(" · found: {anomalies}")
                }
            ));
            tokio::select! {
                changed = counts.changed() => if changed.is_err() { break },
                () = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
        }
    })
}

/// Says why the run stops before its time, if it does: a fault the nemesis could not carry
/// out or the history not written (`stopped`, `write_failed`), or what the cell had to
/// prove proven.
fn says_why_it_stops(
    stopped: Option<&String>,
    write_failed: Option<&String>,
    proven: Option<&String>,
    progress: &ProgressBar,
) -> bool {
    if let Some(why) = stopped.or(write_failed) {
        crate::note!("lockaudit: stopping the run: {why}");
        true
    } else if let Some(what) = proven {
        progress.suspend(|| {
            crate::note!("lockaudit: proven ({what}): stopping the run, healing every fault")
        });
        true
    } else {
        false
    }
}

/// Clients stop starting cycles at the deadline and finish the one under way; give them
/// the longest a cycle can take (none when the run stops early), then stop the workers,
/// every one recording nothing more before any connection closes. Every worker that died
/// meanwhile is in the history before it is closed.
async fn stop_clients(
    spec: &WorkloadSpec,
    fleet: &mut Fleet,
    journal: &Journal,
    clock: RunClock,
    early: bool,
) {
    let grace =
        Duration::from_millis(spec.hold.max.0 + spec.think.max.0 + 4 * spec.op_timeout.0 + 1000);
    let left = (Duration::from_millis(spec.time_limit.0) + grace)
        .saturating_sub(Duration::from_nanos(clock.now().max(0) as u64));
    let deaths = fleet
        .finish(if early { Duration::ZERO } else { left })
        .await;
    for death in deaths {
        tracing::warn!(
            "{}: {}",
            crate::nemesis::workers::worker_name(death.worker),
            death.cause
        );
        let died = death.remains.death_ns(death.earliest_ns);
        let cause = serde_json::Map::from_iter([("cause".to_string(), death.cause.into())]);
        executor::record_kill(journal, death.worker, &death.remains, cause, died);
    }
}
