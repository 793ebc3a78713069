//! Carries out a plan during a run: injects each fault at its time, heals it when its time
//! is up, records both in the history, notices workers that die on their own (a crash
//! point), and heals everything still open when the run's time is up.
//!
//! One task does it all, one action at a time, so faults never race each other; every
//! action is short (a signal, a restart of a few ms, a command line).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, Notify};

use nix::sys::signal::Signal;

use crate::cluster::{self, Cluster, Endpoints, Failover, Happened, Leaders, SessionEnd};
use crate::workload::controls::WorkerCommand;

use super::journal::Journal;
use super::network::Network;
use super::plan::PlannedFault;
use super::schedule::FaultKind;
use super::workers::{worker_name, Remains, WorkerState, Workers};

/// What the nemesis acts on.
pub struct Targets<'a, W: Workers> {
    /// The worker processes (the fleet).
    pub workers: &'a mut W,
    /// The servers' real addresses (the sentinels, for a Sentinel failover).
    pub endpoints: &'a Endpoints,
    /// The servers lockaudit started (None with `--redis`: no server faults).
    pub cluster: Option<&'a mut Cluster>,
    /// The proxies between clients and servers, when the plan needs them.
    pub network: Option<&'a mut Network>,
}

fn extra(pairs: &[(&str, Value)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Begin,
    End,
}

/// Why `execute` returned when lockaudit began shutting down (Ctrl-C).
pub const SHUTTING_DOWN: &str = "lockaudit is shutting down (interrupted)";

/// A heal that did not happen: the fault stays in force, the history records no heal of
/// it on that target, and the run ends as an error naming it (it could not be carried out
/// as planned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealFailure {
    /// The fault's kind (`pause-server`), when the heal was its own; None for the run's
    /// final heal of whatever is left (`heal_all`).
    pub fault: Option<&'static str>,
    /// The heal: `resume`, `restart`, `clock 0`, `heal`.
    pub heal: &'static str,
    /// A server, a worker, or a link.
    pub target: String,
    pub error: String,
}

impl std::fmt::Display for HealFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (heal, target, error) = (self.heal, &self.target, &self.error);
        match self.fault {
            Some(fault) => write!(f, "{fault} on {target} not healed ({heal} failed): {error}"),
            None => write!(
                f,
                "{target} not healed at the run's end ({heal} failed): {error}"
            ),
        }
    }
}

/// Adds a heal failure, unless the same heal of the same target failed already (the run's
/// end tries again what a fault's own heal could not do).
fn push_failure(list: &mut Vec<HealFailure>, failure: HealFailure) {
    tracing::warn!("{failure}");
    if !list
        .iter()
        .any(|f| f.heal == failure.heal && f.target == failure.target)
    {
        list.push(failure);
    }
}

/// What `execute` leaves: why it stopped early, if it did, and the heals that failed.
#[derive(Debug, Default)]
pub struct Executed {
    pub stopped: Option<String>,
    pub unhealed: Vec<HealFailure>,
}

/// Runs the plan until `deadline_ms` of run time, then heals what is still open. Returns
/// early, with why, when a worker stopped because its lock client cannot go on (an external
/// adapter answered `error`: docs/src/reference/protocol.md stops the run); the caller then heals everything.
///
/// Returns at once, with [`SHUTTING_DOWN`], when lockaudit begins shutting down (Ctrl-C):
/// the cleanup handler is stopping every child, and that is no fault. From then on nothing
/// is injected, healed or restarted, and a worker that ends is not recorded as killed.
pub async fn execute<W: Workers>(
    plan: &[PlannedFault],
    targets: &mut Targets<'_, W>,
    journal: &Journal,
    exits: &mut mpsc::UnboundedReceiver<usize>,
    deadline_ms: u64,
) -> Executed {
    execute_until(plan, targets, journal, exits, deadline_ms, &Notify::new()).await
}

/// `execute`, which also returns (with `None`, as at the deadline) when `stop` is notified:
/// the run has proven what it was run for. Between two steps of the plan, never inside one,
/// so no fault is left half made or half healed.
pub async fn execute_until<W: Workers>(
    plan: &[PlannedFault],
    targets: &mut Targets<'_, W>,
    journal: &Journal,
    exits: &mut mpsc::UnboundedReceiver<usize>,
    deadline_ms: u64,
    stop: &Notify,
) -> Executed {
    let mut state = Executor {
        begun: vec![false; plan.len()],
        on: vec![Vec::new(); plan.len()],
        armed: BTreeMap::new(),
        failovers: BTreeMap::new(),
        leaders: Leaders::default(),
        unhealed: Vec::new(),
    };
    let stopped = carry_out(plan, targets, journal, exits, deadline_ms, stop, &mut state).await;
    // Stopped before the deadline (a finding proven, an adapter's error): the faults still in
    // force are healed as their own ends would heal them, so that a heal that fails is told
    // with its fault. A killed worker is not started again: the run is ending.
    if !cluster::shutting_down() {
        for (i, fault) in plan.iter().enumerate() {
            if state.begun[i] && fault.kind != FaultKind::KillClient {
                state.end(i, fault, targets, journal).await;
            }
        }
    }
    Executed {
        stopped,
        unhealed: state.unhealed,
    }
}

async fn carry_out<W: Workers>(
    plan: &[PlannedFault],
    targets: &mut Targets<'_, W>,
    journal: &Journal,
    exits: &mut mpsc::UnboundedReceiver<usize>,
    deadline_ms: u64,
    stop: &Notify,
    state: &mut Executor,
) -> Option<String> {
    // (time, step, fault): ends before begins at the same instant, so a target healed and
    // faulted again in the same millisecond is free for the second fault.
    let mut agenda: Vec<(u64, Step, usize)> = Vec::new();
    // A fault that cannot act on this run is only marked in the plan: it is not injected.
    for (i, fault) in plan
        .iter()
        .enumerate()
        .filter(|(_, f)| f.not_applicable.is_none())
    {
        agenda.push((fault.at_ms, Step::Begin, i));
        agenda.push((fault.end_ms().min(deadline_ms), Step::End, i));
    }
    agenda.sort_by_key(|&(t, step, i)| (t, std::cmp::Reverse(step), i));
    // A Redis Cluster or etcd fails over by itself (a master killed or paused past the node
    // timeout, a leader gone): who leads is polled so that each promotion is recorded when
    // seen.
    let mut watch = targets.cluster.as_deref().and_then(Cluster::role_watch);
    let deadline_ns = (deadline_ms as i64).saturating_mul(1_000_000);
    let mut next = 0;
    loop {
        if cluster::shutting_down() {
            return Some(SHUTTING_DOWN.to_string());
        }
        let due_ms = agenda.get(next).map(|a| a.0).unwrap_or(deadline_ms);
        let due = tokio::time::Instant::now()
            + std::time::Duration::from_nanos(
                ((due_ms as i64) * 1_000_000 - journal.clock.now()).max(0) as u64,
            );
        // Read-only, so a poll cut short by another branch loses nothing.
        let poll = async {
            match watch.as_mut() {
                Some(watch) => {
                    tokio::time::sleep(ROLE_POLL).await;
                    (watch.poll().await, watch.decided_by())
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = stop.notified() => return None,
            Some(worker) = exits.recv() => {
                // Stopped by the shutdown's cleanup: no crash, and no restart.
                if cluster::shutting_down() {
                    return Some(SHUTTING_DOWN.to_string());
                }
                // From the deadline on, workers end on their own: that is no crash.
                if journal.clock.now() < deadline_ns {
                    if let Some(why) = state.crashed(worker, targets, journal).await {
                        return Some(why);
                    }
                }
            }
            () = tokio::time::sleep_until(due) => {
                // The agenda done and the deadline reached: the run goes on to its end.
                let &(_, step, i) = agenda.get(next)?;
                if cluster::shutting_down() {
                    return Some(SHUTTING_DOWN.to_string());
                }
                next += 1;
                match step {
                    Step::Begin => state.begin(i, &plan[i], targets, journal).await,
                    Step::End => state.end(i, &plan[i], targets, journal).await,
                }
            }
            (roles, by) = poll => record(journal, state.leaders.saw(roles, by)),
        }
    }
}

struct Executor {
    /// Whether each fault was injected (a fault whose target was busy is skipped, and so is
    /// its healing).
    begun: Vec<bool>,
    /// Worker -> the crash point armed in it.
    armed: BTreeMap<usize, String>,
    /// Failovers the cluster made itself, under way, by fault index.
    failovers: BTreeMap<usize, Failover>,
    /// Who led when last polled (a Redis Cluster's masters, etcd's leader).
    leaders: Leaders,
    /// The servers each server fault acted on, by fault index: what its end heals.
    on: Vec<Vec<String>>,
    /// The heals that failed.
    unhealed: Vec<HealFailure>,
}

/// How often a Redis Cluster's roles are polled: a promotion is recorded within this of
/// the node calling itself master.
const ROLE_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// The worker a client fault acts on: its first target, `worker-3` -> 3.
fn target_worker(fault: &PlannedFault) -> Option<usize> {
    fault.targets.first()?.strip_prefix("worker-")?.parse().ok()
}

impl Executor {
    async fn begin<W: Workers>(
        &mut self,
        i: usize,
        fault: &PlannedFault,
        targets: &mut Targets<'_, W>,
        journal: &Journal,
    ) {
        let done = match fault.kind {
            FaultKind::KillClient => self.kill_worker(fault, targets, journal).await,
            FaultKind::PauseClient | FaultKind::CrashPoint | FaultKind::ClockSkew => {
                self.begin_on_worker(fault, targets, journal).await
            }
            FaultKind::KillServer | FaultKind::PauseServer | FaultKind::ClockJump => {
                self.begin_on_servers(i, fault, targets, journal)
            }
            FaultKind::Failover
                if targets
                    .cluster
                    .as_deref()
                    .is_some_and(Cluster::fails_over_itself) =>
            {
                self.begin_own_failover(i, targets, journal).await
            }
            FaultKind::KillSession => self.end_sessions(fault, targets, journal).await,
            FaultKind::Partition | FaultKind::Latency | FaultKind::Failover => {
                let Some(network) = targets.network.as_deref_mut() else {
                    tracing::warn!("{}: no network of proxies in this run", fault.kind.name());
                    return;
                };
                network
                    .begin(
                        fault,
                        targets.workers,
                        targets.cluster.as_deref_mut(),
                        journal,
                    )
                    .await
            }
        };
        self.begun[i] = done;
        // Arming a crash point is not yet a fault: reaching it is (`crashed`).
        if done && fault.kind != FaultKind::CrashPoint {
            journal.acted();
        }
    }

    /// `pause-client`, `crash-point` (armed, not yet reached) and `clock-skew`: a signal or a
    /// command to the target worker. Whether it acted.
    async fn begin_on_worker<W: Workers>(
        &mut self,
        fault: &PlannedFault,
        targets: &mut Targets<'_, W>,
        journal: &Journal,
    ) -> bool {
        let Some(w) = target_worker(fault) else {
            return false;
        };
        match fault.kind {
            FaultKind::PauseClient => {
                let ok = targets.workers.pause(w);
                if ok {
                    journal.fault(
                        "pause",
                        &fault.targets,
                        &targets.workers.processes(w),
                        Map::new(),
                    );
                }
                ok
            }
            FaultKind::CrashPoint => {
                let Some(point) = fault.point.clone() else {
                    return false;
                };
                if targets.workers.state(w) != Some(WorkerState::Running)
                    || self.armed.contains_key(&w)
                {
                    return false;
                }
                let ok = targets
                    .workers
                    .command(
                        w,
                        &WorkerCommand::Arm {
                            point: point.clone(),
                        },
                    )
                    .await;
                if ok {
                    self.armed.insert(w, point);
                }
                ok
            }
            FaultKind::ClockSkew => {
                let ok = targets
                    .workers
                    .command(
                        w,
                        &WorkerCommand::Skew {
                            ms: fault.offset_ms,
                        },
                    )
                    .await;
                if ok {
                    journal.fault(
                        "clock",
                        &fault.targets,
                        &targets.workers.processes(w),
                        extra(&[("offset_ms", json!(fault.offset_ms))]),
                    );
                }
                ok
            }
            _ => unreachable!("{} is no fault on one worker", fault.kind.name()),
        }
    }

    /// `kill-server`, `pause-server` and `clock-jump`: each target server that it acted on is
    /// kept in `on[i]`, for the fault's end to heal. Whether it acted on any.
    fn begin_on_servers<W: Workers>(
        &mut self,
        i: usize,
        fault: &PlannedFault,
        targets: &mut Targets<'_, W>,
        journal: &Journal,
    ) -> bool {
        let Some(cluster) = targets.cluster.as_deref_mut() else {
            return false;
        };
        let (name, acted_on, extra_fields) = match fault.kind {
            FaultKind::KillServer => ("kill", cluster.kill_many(&fault.targets), Map::new()),
            FaultKind::PauseServer => (
                "pause",
                succeeded(
                    "pause-server",
                    false,
                    cluster.signal_many(&fault.targets, Signal::SIGSTOP),
                ),
                Map::new(),
            ),
            FaultKind::ClockJump => (
                "clock",
                succeeded(
                    "clock-jump",
                    true,
                    cluster.set_clock_offset_many(&fault.targets, fault.offset_ms),
                ),
                extra(&[("offset_ms", json!(fault.offset_ms))]),
            ),
            _ => unreachable!("{} is no fault on servers", fault.kind.name()),
        };
        if !acted_on.is_empty() {
            journal.fault(name, &acted_on, &[], extra_fields);
        }
        self.on[i] = acted_on;
        !self.on[i].is_empty()
    }

    /// A `failover` of a cluster that fails over by itself (a Redis Cluster, etcd): the
    /// cluster begins it, and its end (`end_own_failover`) finishes it.
    async fn begin_own_failover<W: Workers>(
        &mut self,
        i: usize,
        targets: &mut Targets<'_, W>,
        journal: &Journal,
    ) -> bool {
        let Some(cluster) = targets.cluster.as_deref_mut() else {
            return false;
        };
        match cluster.begin_failover().await {
            Ok((failover, happened)) => {
                record(journal, happened);
                self.failovers.insert(i, failover);
                true
            }
            Err(e) => {
                tracing::warn!("failover: {e}");
                false
            }
        }
    }

    /// Heals fault `i`. A heal that fails is recorded as nothing: the fault stays in force
    /// on that target, and the failure is kept for the run's verdict (`unhealed`).
    async fn end<W: Workers>(
        &mut self,
        i: usize,
        fault: &PlannedFault,
        targets: &mut Targets<'_, W>,
        journal: &Journal,
    ) {
        if !std::mem::take(&mut self.begun[i]) {
            return;
        }
        let nodes = std::mem::take(&mut self.on[i]);
        match fault.kind {
            FaultKind::KillClient
            | FaultKind::PauseClient
            | FaultKind::CrashPoint
            | FaultKind::ClockSkew => self.end_on_worker(fault, targets, journal).await,
            FaultKind::KillServer | FaultKind::PauseServer | FaultKind::ClockJump => {
                self.end_on_servers(fault, nodes, targets, journal).await
            }
            FaultKind::Failover if self.failovers.contains_key(&i) => {
                self.end_own_failover(i, fault, targets, journal).await
            }
            // Sessions ended by the server are gone for good: nothing to heal.
            FaultKind::KillSession if fault.duration_ms == 0 || !cut_off(fault) => {}
            FaultKind::Partition
            | FaultKind::Latency
            | FaultKind::Failover
            | FaultKind::KillSession => {
                if let Some(network) = targets.network.as_deref_mut() {
                    let errors = network
                        .end(
                            &as_partition(fault),
                            targets.workers,
                            targets.cluster.as_deref_mut(),
                            journal,
                        )
                        .await;
                    for (link, e) in errors {
                        self.heal_failed(fault, "heal", link, e);
                    }
                }
            }
        }
    }

    /// Keeps a heal of `fault` that failed for the run's verdict.
    fn heal_failed(
        &mut self,
        fault: &PlannedFault,
        heal: &'static str,
        target: String,
        error: String,
    ) {
        push_failure(
            &mut self.unhealed,
            HealFailure {
                fault: Some(fault.kind.name()),
                heal,
                target,
                error,
            },
        );
    }

    /// The end of a fault on one worker: a killed one started again, a paused one resumed,
    /// a crash point nobody reached disarmed, a skewed clock put back.
    async fn end_on_worker<W: Workers>(
        &mut self,
        fault: &PlannedFault,
        targets: &mut Targets<'_, W>,
        journal: &Journal,
    ) {
        let Some(w) = target_worker(fault) else {
            return;
        };
        match fault.kind {
            FaultKind::KillClient => {
                if let Err(e) = self.restart_worker(w, targets, journal).await {
                    self.heal_failed(fault, "restart", worker_name(w), e);
                }
            }
            FaultKind::PauseClient => {
                if targets.workers.resume(w) {
                    journal.fault(
                        "resume",
                        &fault.targets,
                        &targets.workers.processes(w),
                        Map::new(),
                    );
                } else if targets.workers.state(w) == Some(WorkerState::Paused) {
                    // Not resumed, and not dead (a kill ends a pause too): SIGCONT failed.
                    self.heal_failed(
                        fault,
                        "resume",
                        worker_name(w),
                        "SIGCONT failed: it is still stopped".into(),
                    );
                }
            }
            FaultKind::CrashPoint => {
                // Still armed: nobody reached the step in time.
                if self.armed.remove(&w).is_some() {
                    targets.workers.command(w, &WorkerCommand::Disarm).await;
                }
            }
            FaultKind::ClockSkew => {
                if targets
                    .workers
                    .command(w, &WorkerCommand::Skew { ms: 0 })
                    .await
                {
                    journal.fault(
                        "clock",
                        &fault.targets,
                        &targets.workers.processes(w),
                        extra(&[("offset_ms", json!(0))]),
                    );
                } else if matches!(
                    targets.workers.state(w),
                    Some(WorkerState::Running | WorkerState::Paused)
                ) && !targets.workers.ended(w).await
                {
                    // A worker that died, or finished its run (its input closed, its exit
                    // not reaped yet), took its skewed clock with it; a live one kept it.
                    self.heal_failed(
                        fault,
                        "clock 0",
                        worker_name(w),
                        "the command to put its clock back did not reach it".into(),
                    );
                }
            }
            _ => unreachable!("{} is no fault on one worker", fault.kind.name()),
        }
    }

    /// The end of a fault on servers, on the `nodes` its beginning acted on: restarted,
    /// resumed, clocks put back.
    async fn end_on_servers<W: Workers>(
        &mut self,
        fault: &PlannedFault,
        nodes: Vec<String>,
        targets: &mut Targets<'_, W>,
        journal: &Journal,
    ) {
        let Some(cluster) = targets.cluster.as_deref_mut() else {
            return;
        };
        match fault.kind {
            FaultKind::KillServer => {
                let mut restarted = Vec::new();
                for (name, result) in cluster.restart_many(&nodes, fault.persist).await {
                    match result {
                        Ok(()) => restarted.push(name),
                        Err(e) => self.heal_failed(fault, "restart", name, e.to_string()),
                    }
                }
                if !restarted.is_empty() {
                    journal.fault(
                        "restart",
                        &restarted,
                        &[],
                        extra(&[("persisted", json!(fault.persist))]),
                    );
                }
            }
            FaultKind::PauseServer => {
                let acted = cluster.signal_many(&nodes, Signal::SIGCONT);
                let (resumed, errors) = split("resume", acted);
                for (name, e) in errors {
                    // Killed by another fault meanwhile (reaped: no pid): its kill ended the
                    // pause. Anything else is a resume that failed.
                    if cluster.pid(&name).is_some() {
                        self.heal_failed(fault, "resume", name, e);
                    }
                }
                if !resumed.is_empty() {
                    journal.fault("resume", &resumed, &[], Map::new());
                }
            }
            FaultKind::ClockJump => {
                let (healed, errors) =
                    split("clock-jump heal", cluster.set_clock_offset_many(&nodes, 0));
                for (name, e) in errors {
                    self.heal_failed(fault, "clock 0", name, e);
                }
                if !healed.is_empty() {
                    journal.fault("clock", &healed, &[], extra(&[("offset_ms", json!(0))]));
                }
            }
            _ => unreachable!("{} is no fault on servers", fault.kind.name()),
        }
    }

    /// The end of a failover the cluster made by itself: the old primary or leader resumed
    /// or restarted, and the promotions seen recorded.
    async fn end_own_failover<W: Workers>(
        &mut self,
        i: usize,
        fault: &PlannedFault,
        targets: &mut Targets<'_, W>,
        journal: &Journal,
    ) {
        let (Some(failover), Some(cluster)) =
            (self.failovers.remove(&i), targets.cluster.as_deref_mut())
        else {
            return;
        };
        let heal = match failover {
            Failover::PausedPrimary(_) => "resume",
            _ => "restart",
        };
        let (happened, errors) = cluster.end_failover(failover).await;
        for (name, e) in errors {
            self.heal_failed(fault, heal, name, e);
        }
        // A promotion made here is recorded here: the role watch must not again.
        for h in happened.iter().filter(|h| h.f == "failover") {
            h.targets.iter().for_each(|t| self.leaders.promoted(t));
        }
        record(journal, happened);
    }

    /// `kill-session`: each target server ends its clients' sessions (a `kill-session` event
    /// per server, with how many it ended), or, where sessions end only by expiry, the
    /// worker is cut off from every server (a `partition`, healed at the fault's end). It
    /// acted if it ended a session, or cut a worker off.
    async fn end_sessions<W: Workers>(
        &mut self,
        fault: &PlannedFault,
        targets: &mut Targets<'_, W>,
        journal: &Journal,
    ) -> bool {
        if targets.cluster.is_none() {
            return false;
        }
        match cluster::service(targets.endpoints.topology).sessions {
            SessionEnd::Ask(end) => {
                let mut ended = 0;
                for name in &fault.targets {
                    let Some(node) = targets.endpoints.node(name) else {
                        continue;
                    };
                    match end(targets.endpoints, node).await {
                        Ok(n) => {
                            journal.fault(
                                "kill-session",
                                std::slice::from_ref(name),
                                &[],
                                extra(&[("sessions", json!(n))]),
                            );
                            ended += n;
                        }
                        Err(e) => tracing::warn!("kill-session: {e}"),
                    }
                }
                ended > 0
            }
            SessionEnd::CutOff => {
                let Some(network) = targets.network.as_deref_mut() else {
                    tracing::warn!("kill-session: no network of proxies in this run");
                    return false;
                };
                network
                    .begin(
                        &as_partition(fault),
                        targets.workers,
                        targets.cluster.as_deref_mut(),
                        journal,
                    )
                    .await
            }
        }
    }

    /// SIGKILLs the target worker and records the kill and its pending operations.
    async fn kill_worker<W: Workers>(
        &mut self,
        fault: &PlannedFault,
        targets: &mut Targets<'_, W>,
        journal: &Journal,
    ) -> bool {
        let Some(w) = target_worker(fault) else {
            return false;
        };
        if !matches!(
            targets.workers.state(w),
            Some(WorkerState::Running | WorkerState::Paused)
        ) {
            return false;
        }
        self.armed.remove(&w);
        // It cannot die before the signal: the earliest its death may be recorded at.
        let signalled = journal.clock.now();
        let remains = targets.workers.kill(w).await;
        if cluster::shutting_down() {
            // The shutdown's cleanup may have stopped it first; either way the run is over.
            return false;
        }
        record_kill(
            journal,
            w,
            &remains,
            Map::new(),
            remains.death_ns(signalled),
        );
        true
    }

    /// A worker exited on its own: at an armed crash point, or a crash of the harness. Either
    /// way its processes are dead; record it like a kill, and start it again. A worker that
    /// stopped because its lock client cannot go on stops the run: returns why.
    async fn crashed<W: Workers>(
        &mut self,
        worker: usize,
        targets: &mut Targets<'_, W>,
        journal: &Journal,
    ) -> Option<String> {
        if !matches!(
            targets.workers.state(worker),
            Some(WorkerState::Running | WorkerState::Paused)
        ) {
            return None; // killed by us, already accounted for
        }
        let remains = targets.workers.reap(worker).await;
        // A worker that died at a crash point said when (`Remains::died_at_ns`); for any
        // other exit, all that is known is that it is dead by now.
        let died = remains.death_ns(journal.clock.now());
        if cluster::shutting_down() {
            // It died of the shutdown's cleanup, not of a crash.
            return Some(SHUTTING_DOWN.to_string());
        }
        if targets.workers.gave_up(worker) {
            let why = extra(&[(
                "cause",
                json!("its lock client cannot go on (adapter error)"),
            )]);
            record_kill(journal, worker, &remains, why, died);
            let name = worker_name(worker);
            return Some(match targets.workers.gave_up_why(worker) {
                Some(why) => format!(
                    "{name}'s lock adapter answered `error`, so it cannot go on: {why} (see {name}.log)"
                ),
                None => format!(
                    "{name}'s lock adapter answered `error`: it cannot go on (its message is in {name}.log)"
                ),
            });
        }
        let why = match self.armed.remove(&worker) {
            Some(point) => {
                // It said it was dying at a step (`died_at`): the crash point was reached.
                if remains.died_at_ns.is_some() {
                    journal.acted();
                }
                extra(&[("crash_point", json!(point))])
            }
            None => {
                tracing::warn!("{} died unexpectedly; restarting it", worker_name(worker));
                extra(&[("cause", json!("worker died unexpectedly"))])
            }
        };
        record_kill(journal, worker, &remains, why, died);
        if let Err(e) = self.restart_worker(worker, targets, journal).await {
            push_failure(
                &mut self.unhealed,
                HealFailure {
                    fault: Some(FaultKind::CrashPoint.name()),
                    heal: "restart",
                    target: worker_name(worker),
                    error: e,
                },
            );
        }
        None
    }

    async fn restart_worker<W: Workers>(
        &mut self,
        w: usize,
        targets: &mut Targets<'_, W>,
        journal: &Journal,
    ) -> Result<(), String> {
        // A worker started at the deadline would only end again: its clients are done.
        // Nor is anything started once lockaudit is shutting down.
        if journal.clock.now() >= targets.workers.deadline_ns() || cluster::shutting_down() {
            return Ok(());
        }
        // Kept as its words: a heal that failed is recorded with why, whatever failed.
        if targets
            .workers
            .restart(w)
            .await
            .map_err(|e| e.to_string())?
        {
            journal.fault("restart", &[worker_name(w)], &[], Map::new());
        }
        Ok(())
    }
}

/// Whether a `kill-session` is a cut (its targets a worker and the servers: a service whose
/// sessions end only by expiry).
fn cut_off(fault: &PlannedFault) -> bool {
    fault
        .targets
        .first()
        .is_some_and(|t| t.starts_with("worker-"))
}

/// A `kill-session` by cut as the partition of its worker from its servers that it is.
fn as_partition(fault: &PlannedFault) -> PlannedFault {
    let mut cut = fault.clone();
    if cut.kind == FaultKind::KillSession {
        cut.kind = FaultKind::Partition;
        cut.link = super::schedule::Link::Clients;
    }
    cut
}

/// The nodes a fault on several at once acted on; the others' errors are logged (as
/// warnings with `warn`: a node not running cannot be paused, which is no news), and so is
/// the spread (first to last node done), which one record at the end hides.
/// Records what the cluster says happened, in order.
fn record(journal: &Journal, happened: Vec<Happened>) {
    for h in happened {
        journal.fault(h.f, &h.targets, &[], h.extra);
    }
}

fn succeeded(what: &str, warn: bool, acted: Vec<cluster::Acted>) -> Vec<String> {
    let (done, errors) = split(what, acted);
    for (name, e) in errors {
        if warn {
            tracing::warn!("{what} on {name}: {e}");
        } else {
            tracing::debug!("{what} on {name}: {e}");
        }
    }
    done
}

/// The nodes acted on, and the others with why (the spread logged as in `succeeded`).
fn split(what: &str, acted: Vec<cluster::Acted>) -> (Vec<String>, Vec<(String, String)>) {
    let (first, last) = acted.iter().fold((None, None), |(lo, hi), a| {
        (
            Some(lo.map_or(a.after, |l: std::time::Duration| l.min(a.after))),
            Some(hi.map_or(a.after, |h: std::time::Duration| h.max(a.after))),
        )
    });
    if let (Some(first), Some(last)) = (first, last) {
        tracing::debug!(what, nodes = acted.len(), spread = ?(last - first), "acted on several nodes");
    }
    let mut done = Vec::new();
    let mut errors = Vec::new();
    for a in acted {
        match a.result {
            Ok(()) => done.push(a.name),
            Err(e) => errors.push((a.name, e.to_string())),
        }
    }
    (done, errors)
}

/// The `kill` event listing the worker's processes (their holds end here, docs/src/reference/history.md), then
/// an `info` completion for each operation it had under way.
pub fn record_kill(
    journal: &Journal,
    worker: usize,
    remains: &Remains,
    why: Map<String, Value>,
    died_ns: i64,
) {
    let mut processes = remains.processes.clone();
    processes.extend(remains.pending.iter().map(|(p, _, _)| *p));
    processes.sort_unstable();
    processes.dedup();
    journal.fault_at(died_ns, "kill", &[worker_name(worker)], &processes, why);
    journal.killed(remains, died_ns);
}

/// Heals whatever the nemesis may have left: resumes paused workers and servers, restarts
/// killed servers, puts clocks back, heals the network. Called at the end of every run, after
/// `execute` (which heals what it began) as a safety net, e.g. when a heal step failed or
/// the run stopped early. Returns the heals that failed: a worker still stopped, a server
/// not restarted, a clock not put back, a link still cut (a server's SIGCONT is sent to
/// every server, paused or not, so its failure alone is not told apart from a server that
/// died by itself, and is not counted here; `execute` counts the resume of each pause).
/// Adds those to `unhealed`, but for a heal of a target already there.
pub async fn heal_all<W: Workers>(
    targets: &mut Targets<'_, W>,
    journal: &Journal,
    unhealed: &mut Vec<HealFailure>,
) {
    let mut failed = |heal: &'static str, target: String, error: String| {
        push_failure(
            unhealed,
            HealFailure {
                fault: None,
                heal,
                target,
                error,
            },
        )
    };
    let resumed: Vec<String> = targets
        .workers
        .resume_all()
        .into_iter()
        .map(worker_name)
        .collect();
    if !resumed.is_empty() {
        journal.fault("resume", &resumed, &[], Map::new());
    }
    for w in 0..targets.workers.len() {
        if targets.workers.state(w) == Some(WorkerState::Paused) {
            failed(
                "resume",
                worker_name(w),
                "SIGCONT failed: it is still stopped".into(),
            );
        }
        targets.workers.command(w, &WorkerCommand::Disarm).await;
        targets
            .workers
            .command(w, &WorkerCommand::Skew { ms: 0 })
            .await;
    }
    if let Some(network) = targets.network.as_deref_mut() {
        for (link, e) in network.heal_all(targets.workers, journal, targets.cluster.as_deref_mut())
        {
            failed("heal", link, e);
        }
    }
    if let Some(cluster) = targets.cluster.as_deref_mut() {
        for name in cluster.names() {
            if name.starts_with("sentinel") {
                continue;
            }
            if cluster.pid(&name).is_none() {
                match cluster.restart(&name).await {
                    Ok(()) => {
                        journal.fault("restart", std::slice::from_ref(&name), &[], Map::new())
                    }
                    Err(e) => failed("restart", name.clone(), e.to_string()),
                }
            } else {
                let _ = cluster.signal(&name, Signal::SIGCONT);
            }
            if cluster.clock_offset_ms(&name).is_some_and(|o| o != 0) {
                match cluster.set_clock_offset(&name, 0) {
                    Ok(()) => journal.fault(
                        "clock",
                        std::slice::from_ref(&name),
                        &[],
                        extra(&[("offset_ms", json!(0))]),
                    ),
                    Err(e) => failed("clock 0", name.clone(), e.to_string()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::clock::RunClock;
    use crate::history::RecordedLine;
    use crate::nemesis::schedule::Link;

    /// Workers that do what they are told, but for the heals a test makes fail.
    #[derive(Default)]
    struct Fake {
        states: Vec<WorkerState>,
        resume_fails: bool,
        restart_fails: bool,
        /// The command that puts a skewed clock back does not reach the worker.
        put_back_fails: bool,
        /// ... because the worker had finished its run and was exiting.
        finished_before_put_back: bool,
    }

    impl Fake {
        fn new(workers: usize) -> Self {
            Fake {
                states: vec![WorkerState::Running; workers],
                ..Fake::default()
            }
        }
    }

    impl Workers for Fake {
        fn len(&self) -> usize {
            self.states.len()
        }
        fn state(&self, worker: usize) -> Option<WorkerState> {
            self.states.get(worker).copied()
        }
        fn processes(&self, worker: usize) -> Vec<u64> {
            vec![worker as u64]
        }
        fn gave_up(&self, _: usize) -> bool {
            false
        }
        fn deadline_ns(&self) -> i64 {
            i64::MAX
        }
        fn pause(&mut self, worker: usize) -> bool {
            let running = self.states[worker] == WorkerState::Running;
            if running {
                self.states[worker] = WorkerState::Paused;
            }
            running
        }
        fn resume(&mut self, worker: usize) -> bool {
            let paused = self.states[worker] == WorkerState::Paused;
            if paused && !self.resume_fails {
                self.states[worker] = WorkerState::Running;
                return true;
            }
            false
        }
        fn resume_all(&mut self) -> Vec<usize> {
            (0..self.states.len()).filter(|&w| self.resume(w)).collect()
        }
        async fn kill(&mut self, worker: usize) -> Remains {
            self.states[worker] = WorkerState::Dead;
            Remains {
                processes: vec![worker as u64],
                ..Remains::default()
            }
        }
        async fn reap(&mut self, worker: usize) -> Remains {
            self.kill(worker).await
        }
        type RestartError = String;
        async fn restart(&mut self, worker: usize) -> Result<bool, String> {
            if self.states[worker] != WorkerState::Dead {
                return Ok(false);
            }
            if self.restart_fails {
                return Err("cannot spawn lockaudit worker: no such file".into());
            }
            self.states[worker] = WorkerState::Running;
            Ok(true)
        }
        async fn command(&mut self, worker: usize, command: &WorkerCommand) -> bool {
            let put_back = matches!(command, WorkerCommand::Skew { ms: 0 });
            !(put_back && self.put_back_fails) && self.states[worker] != WorkerState::Dead
        }
        async fn ended(&mut self, _worker: usize) -> bool {
            self.finished_before_put_back
        }
    }

    fn fault(kind: FaultKind, at_ms: u64, duration_ms: u64) -> PlannedFault {
        PlannedFault {
            at_ms,
            kind,
            targets: vec!["worker-0".into()],
            duration_ms,
            offset_ms: 500,
            persist: false,
            point: None,
            latency_ms: 0,
            link: Link::Clients,
            not_applicable: None,
        }
    }

    /// Carries out `plan` on `workers` to 60 ms, then the run's final heal: the nemesis
    /// events recorded (`f` and targets) and the heals that failed.
    async fn carry(plan: &[PlannedFault], workers: &mut Fake) -> (Vec<String>, Vec<HealFailure>) {
        let (events, unhealed, _) = carry_with(plan, workers, None).await;
        (events, unhealed)
    }

    /// `carry`, stopped at `stop_at_ms` if given (a finding proven), also returning how many
    /// faults acted.
    async fn carry_with(
        plan: &[PlannedFault],
        workers: &mut Fake,
        stop_at_ms: Option<u64>,
    ) -> (Vec<String>, Vec<HealFailure>, usize) {
        let (tx, mut rx) = mpsc::unbounded_channel::<RecordedLine>();
        let journal = Journal::new(tx, RunClock::start());
        let endpoints = Endpoints {
            topology: crate::cluster::Topology::Single,
            nodes: Vec::new(),
            sentinels: Vec::new(),
            master_name: None,
            storage: crate::cluster::Node {
                name: "storage".into(),
                host: "127.0.0.1".into(),
                port: 1,
                pid: None,
            },
            password: None,
            control_addr: None,
        };
        let mut targets = Targets {
            workers,
            endpoints: &endpoints,
            cluster: None,
            network: None,
        };
        let (_exits_tx, mut exits) = mpsc::unbounded_channel();
        let stop = std::sync::Arc::new(Notify::new());
        if let Some(ms) = stop_at_ms {
            let stop = stop.clone();
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                stop.notify_one();
            });
        }
        let executed = execute_until(plan, &mut targets, &journal, &mut exits, 60, &stop).await;
        assert_eq!(executed.stopped, None);
        let mut unhealed = executed.unhealed;
        heal_all(&mut targets, &journal, &mut unhealed).await;
        let acted = journal.faults_acted();
        drop(journal);
        let mut events = Vec::new();
        while let Some(line) = rx.recv().await {
            let event: Value = serde_json::from_str(line.text()).unwrap();
            events.push(format!(
                "{} {}",
                event["f"].as_str().unwrap(),
                event["value"]["targets"]
            ));
        }
        (events, unhealed, acted)
    }

    #[tokio::test]
    async fn a_run_stopped_early_heals_its_open_faults_as_their_ends_would() {
        // Paused at 5 ms for 50 ms, the run stopped at 20 ms: the pause is healed then, by
        // its own end, so a resume that fails is told with its fault.
        let plan = [fault(FaultKind::PauseClient, 5, 50)];
        let mut workers = Fake::new(1);
        let (events, unhealed, acted) = carry_with(&plan, &mut workers, Some(20)).await;
        assert_eq!(events, [r#"pause ["worker-0"]"#, r#"resume ["worker-0"]"#]);
        assert!(unhealed.is_empty(), "{unhealed:?}");
        assert_eq!(acted, 1);
        let mut workers = Fake::new(1);
        workers.resume_fails = true;
        let (_, unhealed, _) = carry_with(&plan, &mut workers, Some(20)).await;
        assert_eq!(unhealed.len(), 1, "{unhealed:?}");
        assert_eq!(unhealed[0].fault, Some("pause-client"));
    }

    #[tokio::test]
    async fn an_armed_crash_point_that_no_client_reached_did_not_act() {
        let mut armed = fault(FaultKind::CrashPoint, 5, 20);
        armed.point = Some("set-nx-px:after-set".into());
        let (events, _, acted) = carry_with(&[armed], &mut Fake::new(1), None).await;
        assert!(events.is_empty(), "{events:?}");
        assert_eq!(acted, 0);
        let paused = fault(FaultKind::PauseClient, 5, 20);
        let (_, _, acted) = carry_with(&[paused], &mut Fake::new(1), None).await;
        assert_eq!(acted, 1);
    }

    #[tokio::test]
    async fn a_resume_that_fails_is_no_resume_and_is_told_once() {
        let mut workers = Fake::new(1);
        workers.resume_fails = true;
        let (events, unhealed) = carry(&[fault(FaultKind::PauseClient, 5, 20)], &mut workers).await;
        assert_eq!(events, [r#"pause ["worker-0"]"#]);
        // The fault's own heal failed, and the final heal again: one failure, the first.
        assert_eq!(
            unhealed,
            [HealFailure {
                fault: Some("pause-client"),
                heal: "resume",
                target: "worker-0".into(),
                error: "SIGCONT failed: it is still stopped".into(),
            }]
        );
        assert_eq!(
            unhealed[0].to_string(),
            "pause-client on worker-0 not healed (resume failed): SIGCONT failed: it is still stopped"
        );
    }

    #[tokio::test]
    async fn a_pause_that_a_kill_ended_is_no_failed_resume() {
        let mut workers = Fake::new(1);
        workers.restart_fails = true;
        let plan = [
            fault(FaultKind::PauseClient, 5, 30),
            fault(FaultKind::KillClient, 10, 10),
        ];
        let (events, unhealed) = carry(&plan, &mut workers).await;
        assert_eq!(events, [r#"pause ["worker-0"]"#, r#"kill ["worker-0"]"#]);
        // Only the restart failed: the kill ended the pause.
        assert_eq!(unhealed.len(), 1, "{unhealed:?}");
        assert_eq!(
            unhealed[0].to_string(),
            "kill-client on worker-0 not healed (restart failed): cannot spawn lockaudit worker: no such file"
        );
    }

    #[tokio::test]
    async fn a_clock_not_put_back_records_no_clock_0() {
        let mut workers = Fake::new(1);
        workers.put_back_fails = true;
        let (events, unhealed) = carry(&[fault(FaultKind::ClockSkew, 5, 20)], &mut workers).await;
        assert_eq!(events, [r#"clock ["worker-0"]"#]);
        assert_eq!(
            unhealed.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["clock-skew on worker-0 not healed (clock 0 failed): the command to put its clock back did not reach it"]
        );
    }

    #[tokio::test]
    async fn a_clock_whose_worker_finished_its_run_needs_no_putting_back() {
        // The put-back came as the worker ended on its own (its input closed before its
        // exit was reaped): its clients, and their clock, are gone with it.
        let mut workers = Fake::new(1);
        workers.put_back_fails = true;
        workers.finished_before_put_back = true;
        let (events, unhealed) = carry(&[fault(FaultKind::ClockSkew, 5, 20)], &mut workers).await;
        assert_eq!(events, [r#"clock ["worker-0"]"#]);
        assert!(unhealed.is_empty(), "{unhealed:?}");
    }

    #[tokio::test]
    async fn healed_faults_leave_no_failure() {
        let mut workers = Fake::new(1);
        let plan = [
            fault(FaultKind::PauseClient, 5, 10),
            fault(FaultKind::ClockSkew, 20, 10),
            fault(FaultKind::KillClient, 35, 10),
        ];
        let (events, unhealed) = carry(&plan, &mut workers).await;
        assert!(unhealed.is_empty(), "{unhealed:?}");
        assert_eq!(
            events,
            [
                r#"pause ["worker-0"]"#,
                r#"resume ["worker-0"]"#,
                r#"clock ["worker-0"]"#,
                r#"clock ["worker-0"]"#,
                r#"kill ["worker-0"]"#,
                r#"restart ["worker-0"]"#,
            ]
        );
    }
}
