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
    /// Starts a dead worker again with fresh process numbers. Ok(false): it was not dead.
    fn restart(&mut self, worker: usize) -> impl Future<Output = Result<bool, String>>;
    /// Sends a command to the worker. False if it is not running.
    fn command(&mut self, worker: usize, command: &WorkerCommand) -> impl Future<Output = bool>;
}
