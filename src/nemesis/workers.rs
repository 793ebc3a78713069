//! The narrow interface through which the nemesis acts on worker processes. The run's
//! controller hands the nemesis something that implements it (the fleet); the nemesis knows
//! nothing else of how workers are started or fed.

use std::future::Future;

use crate::workload::controls::WorkerCommand;

/// What a killed worker left behind: its live processes and their pending operations.
#[derive(Debug, Clone, Default)]
pub struct Remains {
    pub processes: Vec<u64>,
    /// (process, f, key)
    pub pending: Vec<(u64, String, String)>,
    /// The latest `time` among the worker's events: it was alive then.
    pub last_event_ns: Option<i64>,
    /// When the worker killed itself at a crash point, by its own clock reading just
    /// before the signal (`workload::sink::WorkerNote::Died`).
    pub died_at_ns: Option<i64>,
    /// When the controller saw the worker's output end, on the run's clock: it was dead by
    /// then.
    pub exited_at_ns: Option<i64>,
}

impl Remains {
    /// When to record the worker's death, given the earliest moment it may have died (for
    /// a kill, just before the signal was sent): never before an event of its own (it was
    /// alive then), and as early as is known, because a server that frees a dead client's
    /// lock at once (a PostgreSQL session) may grant it to another a moment later, before
    /// the controller has even reaped the worker. Recording the death at the reaping would
    /// draw an overlap that never happened.
    pub fn death_ns(&self, earliest: i64) -> i64 {
        let seen = self.exited_at_ns.map_or(earliest, |e| e.min(earliest));
        let earliest = self.died_at_ns.unwrap_or(seen);
        self.last_event_ns.map_or(earliest, |t| t.max(earliest))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerState {
    Running,
    Paused,
    /// Killed by the nemesis, or crashed, and accounted for.
    Dead,
    /// Ended on its own at the end of the run.
    Finished,
}

/// A worker's name in nemesis events and schedule targets: `worker-<n>`.
pub fn worker_name(worker: usize) -> String {
    format!("worker-{worker}")
}

/// The worker processes of a run, numbered from 0.
pub trait Workers {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// None: no such worker.
    fn state(&self, worker: usize) -> Option<WorkerState>;
    /// The worker's live (not retired) client processes.
    fn processes(&self, worker: usize) -> Vec<u64>;
    /// The worker ended on its own because its lock client cannot go on (not a crash).
    fn gave_up(&self, worker: usize) -> bool;
    /// Why a worker gave up, as it said (the adapter and its error), if it can be told.
    fn gave_up_why(&self, _worker: usize) -> Option<String> {
        None
    }
    /// Run time at which clients stop starting new cycles.
    fn deadline_ns(&self) -> i64;
    /// SIGSTOP the worker (and what it started). False if it was not running.
    fn pause(&mut self, worker: usize) -> bool;
    /// SIGCONT. False if it was not paused.
    fn resume(&mut self, worker: usize) -> bool;
    /// Resumes every paused worker; the ones resumed.
    fn resume_all(&mut self) -> Vec<usize>;
    /// SIGKILL, then what it left behind.
    fn kill(&mut self, worker: usize) -> impl Future<Output = Remains>;
    /// Accounts for a worker that ended by itself (a crash point): what it left behind.
    fn reap(&mut self, worker: usize) -> impl Future<Output = Remains>;
    /// Why a worker could not be started again.
    type RestartError: std::fmt::Display;
    /// Starts a dead worker again with fresh process numbers. Ok(false): it was not dead.
    fn restart(&mut self, worker: usize) -> impl Future<Output = Result<bool, Self::RestartError>>;
    /// Sends a command to the worker. False if it is not running.
    fn command(&mut self, worker: usize, command: &WorkerCommand) -> impl Future<Output = bool>;
    /// Whether the worker has ended, or is ending: a command that could not be written to
    /// it means its input is closed, as it is once it finished its run. Waits a little for
    /// its output to end; false if it goes on.
    fn ended(&mut self, worker: usize) -> impl Future<Output = bool>;
}

#[cfg(test)]
mod tests {
    use super::Remains;

    #[test]
    fn a_death_is_recorded_as_early_as_known_but_never_before_the_worker_s_own_events() {
        let mut r = Remains::default();
        // Killed: no earlier than the signal.
        assert_eq!(r.death_ns(100), 100);
        // An event written after the signal was sent (it was still alive): the death follows it.
        r.last_event_ns = Some(130);
        assert_eq!(r.death_ns(100), 130);
        // A crash point's own reading wins over the moment the controller noticed.
        r.died_at_ns = Some(140);
        assert_eq!(r.death_ns(500), 140);
        r.last_event_ns = Some(150);
        assert_eq!(r.death_ns(500), 150);
        // Noticed late: the end of its output, seen earlier, bounds the death.
        let mut r = Remains {
            exited_at_ns: Some(200),
            last_event_ns: Some(120),
            ..Remains::default()
        };
        assert_eq!(r.death_ns(900), 200);
        r.died_at_ns = Some(180);
        assert_eq!(r.death_ns(900), 180);
    }
}
