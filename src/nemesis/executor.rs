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

use crate::cluster::{self, Cluster, Endpoints, Failover, Happened, Leaders};
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
) -> Option<String> {
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
    let mut state = Executor {
        begun: vec![false; plan.len()],
        armed: BTreeMap::new(),
        failovers: BTreeMap::new(),
        leaders: Leaders::default(),
    };
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
            FaultKind::PauseClient => {
                let Some(w) = target_worker(fault) else {
                    return;
                };
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
                let (Some(w), Some(point)) = (target_worker(fault), fault.point.clone()) else {
                    return;
                };
                if targets.workers.state(w) != Some(WorkerState::Running)
                    || self.armed.contains_key(&w)
                {
                    return;
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
                let Some(w) = target_worker(fault) else {
                    return;
                };
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
            FaultKind::KillRedis => {
                let Some(cluster) = targets.cluster.as_deref_mut() else {
                    return;
                };
                let killed = cluster.kill_many(&fault.targets);
                if !killed.is_empty() {
                    journal.fault("kill", &killed, &[], Map::new());
                }
                !killed.is_empty()
            }
            FaultKind::PauseRedis => {
                let Some(cluster) = targets.cluster.as_deref_mut() else {
                    return;
                };
                let paused = succeeded(
                    "pause-redis",
                    false,
                    cluster.signal_many(&fault.targets, Signal::SIGSTOP),
                );
                if !paused.is_empty() {
                    journal.fault("pause", &paused, &[], Map::new());
                }
                !paused.is_empty()
            }
            FaultKind::ClockJump => {
                let Some(cluster) = targets.cluster.as_deref_mut() else {
                    return;
                };
                let moved = succeeded(
                    "clock-jump",
                    true,
                    cluster.set_clock_offset_many(&fault.targets, fault.offset_ms),
                );
                if !moved.is_empty() {
                    journal.fault(
                        "clock",
                        &moved,
                        &[],
                        extra(&[("offset_ms", json!(fault.offset_ms))]),
                    );
                }
                !moved.is_empty()
            }
            FaultKind::Failover
                if targets
                    .cluster
                    .as_deref()
                    .is_some_and(Cluster::fails_over_itself) =>
            {
                let Some(cluster) = targets.cluster.as_deref_mut() else {
                    return;
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
        match fault.kind {
            FaultKind::KillClient => {
                let Some(w) = target_worker(fault) else {
                    return;
                };
                self.restart_worker(w, targets, journal).await;
            }
            FaultKind::PauseClient => {
                let Some(w) = target_worker(fault) else {
                    return;
                };
                if targets.workers.resume(w) {
                    journal.fault(
                        "resume",
                        &fault.targets,
                        &targets.workers.processes(w),
                        Map::new(),
                    );
                }
            }
            FaultKind::CrashPoint => {
                let Some(w) = target_worker(fault) else {
                    return;
                };
                // Still armed: nobody reached the step in time.
                if self.armed.remove(&w).is_some() {
                    targets.workers.command(w, &WorkerCommand::Disarm).await;
                }
            }
            FaultKind::ClockSkew => {
                let Some(w) = target_worker(fault) else {
                    return;
                };
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
                }
            }
            FaultKind::KillRedis => {
                let Some(cluster) = targets.cluster.as_deref_mut() else {
                    return;
                };
                let mut restarted = Vec::new();
                for (name, result) in cluster.restart_many(&fault.targets, fault.persist).await {
                    match result {
                        Ok(()) => restarted.push(name),
                        Err(e) => tracing::warn!("cannot restart {name}: {e}"),
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
            FaultKind::PauseRedis => {
                let Some(cluster) = targets.cluster.as_deref_mut() else {
                    return;
                };
                let resumed = succeeded(
                    "resume",
                    false,
                    cluster.signal_many(&fault.targets, Signal::SIGCONT),
                );
                if !resumed.is_empty() {
                    journal.fault("resume", &resumed, &[], Map::new());
                }
            }
            FaultKind::ClockJump => {
                let Some(cluster) = targets.cluster.as_deref_mut() else {
                    return;
                };
                let healed = succeeded(
                    "clock-jump heal",
                    false,
                    cluster.set_clock_offset_many(&fault.targets, 0),
                );
                if !healed.is_empty() {
                    journal.fault("clock", &healed, &[], extra(&[("offset_ms", json!(0))]));
                }
            }
            FaultKind::Failover if self.failovers.contains_key(&i) => {
                let (Some(failover), Some(cluster)) =
                    (self.failovers.remove(&i), targets.cluster.as_deref_mut())
                else {
                    return;
                };
                let happened = cluster.end_failover(failover).await;
                // A promotion made here is recorded here: the role watch must not again.
                for h in happened.iter().filter(|h| h.f == "failover") {
                    h.targets.iter().for_each(|t| self.leaders.promoted(t));
                }
                record(journal, happened);
            }
            FaultKind::Partition | FaultKind::Latency | FaultKind::Failover => {
                if let Some(network) = targets.network.as_deref_mut() {
                    network
                        .end(
                            fault,
                            targets.workers,
                            targets.cluster.as_deref_mut(),
                            journal,
                        )
                        .await;
                }
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
        self.restart_worker(worker, targets, journal).await;
        None
    }

    async fn restart_worker<W: Workers>(
        &mut self,
        w: usize,
        targets: &mut Targets<'_, W>,
        journal: &Journal,
    ) {
        // A worker started at the deadline would only end again: its clients are done.
        // Nor is anything started once lockaudit is shutting down.
        if journal.clock.now() >= targets.workers.deadline_ns() || cluster::shutting_down() {
            return;
        }
        match targets.workers.restart(w).await {
            Ok(true) => journal.fault("restart", &[worker_name(w)], &[], Map::new()),
            Ok(false) => {}
            Err(e) => tracing::warn!("cannot restart {}: {e}", worker_name(w)),
        }
    }
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
    let (first, last) = acted.iter().fold((None, None), |(lo, hi), a| {
        (
            Some(lo.map_or(a.after, |l: std::time::Duration| l.min(a.after))),
            Some(hi.map_or(a.after, |h: std::time::Duration| h.max(a.after))),
        )
    });
    if let (Some(first), Some(last)) = (first, last) {
        tracing::debug!(what, nodes = acted.len(), spread = ?(last - first), "acted on several nodes");
    }
    acted
        .into_iter()
        .filter_map(|a| match a.result {
            Ok(()) => Some(a.name),
            Err(e) => {
                if warn {
                    tracing::warn!("{what} on {}: {e}", a.name);
                } else {
                    tracing::debug!("{what} on {}: {e}", a.name);
                }
                None
            }
        })
        .collect()
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
/// `execute` (which heals what it began) as a safety net, e.g. when a heal step failed.
pub async fn heal_all<W: Workers>(targets: &mut Targets<'_, W>, journal: &Journal) {
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
        targets.workers.command(w, &WorkerCommand::Disarm).await;
        targets
            .workers
            .command(w, &WorkerCommand::Skew { ms: 0 })
            .await;
    }
    if let Some(network) = targets.network.as_deref_mut() {
        network.heal_all(journal, targets.cluster.as_deref_mut());
    }
    if let Some(cluster) = targets.cluster.as_deref_mut() {
        for name in cluster.names() {
            if name.starts_with("sentinel") {
                continue;
            }
            if cluster.pid(&name).is_none() {
                if cluster.restart(&name).await.is_ok() {
                    journal.fault("restart", std::slice::from_ref(&name), &[], Map::new());
                }
            } else {
                let _ = cluster.signal(&name, Signal::SIGCONT);
            }
            if cluster.clock_offset_ms(&name).is_some_and(|o| o != 0)
                && cluster.set_clock_offset(&name, 0).is_ok()
            {
                journal.fault(
                    "clock",
                    std::slice::from_ref(&name),
                    &[],
                    extra(&[("offset_ms", json!(0))]),
                );
            }
        }
    }
}
