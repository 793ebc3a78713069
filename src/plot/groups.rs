//! Which worker each client process ran in, for grouping a timeline's lanes.

use std::path::Path;

use crate::workload::WorkloadSpec;

use super::error::PlotError;

/// Which worker (OS process) each client process ran in, for grouping lanes.
///
/// In a run, process number `p` is the client in slot `p % clients` (a process retired after
/// an `info` is replaced by `p + clients` in the same slot), and slot `s` runs in worker
/// `s % workers`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessGroups {
    /// 0: no groups known.
    clients: u64,
    workers: u64,
}

impl ProcessGroups {
    /// No groups: one lane per process, ordered by number.
    pub fn none() -> ProcessGroups {
        ProcessGroups::default()
    }

    pub fn new(clients: usize, workers: usize) -> ProcessGroups {
        ProcessGroups {
            clients: clients as u64,
            workers: (workers as u64).max(1),
        }
    }

    pub fn from_spec(spec: &WorkloadSpec) -> ProcessGroups {
        ProcessGroups::new(spec.clients, spec.workers)
    }

    /// From `<dir>/workload.toml`; `none()` if there is none or it does not read (with a
    /// warning: the lanes are then drawn ungrouped, which is no reason to draw nothing).
    pub fn from_run_dir(dir: &Path) -> ProcessGroups {
        match ProcessGroups::try_from_run_dir(dir) {
            Ok(groups) => groups,
            Err(e) => {
                tracing::warn!("lanes drawn without worker groups: {e}");
                ProcessGroups::none()
            }
        }
    }

    /// From `<dir>/workload.toml`; `none()` if the directory has none (a bare history), an
    /// error if it does not read.
    pub fn try_from_run_dir(dir: &Path) -> Result<ProcessGroups, PlotError> {
        let path = dir.join("workload.toml");
        if !path.is_file() {
            return Ok(ProcessGroups::none());
        }
        let spec = WorkloadSpec::from_file(&path).map_err(|e| PlotError::Input {
            path: path.clone(),
            message: e.to_string(),
        })?;
        Ok(ProcessGroups::from_spec(&spec))
    }

    pub fn is_none(&self) -> bool {
        self.clients == 0
    }

    /// The client slot of process number `p`.
    pub fn slot(&self, p: u64) -> Option<u64> {
        (self.clients > 0).then(|| p % self.clients)
    }

    /// The worker of process number `p`.
    pub fn group(&self, p: u64) -> Option<u64> {
        self.slot(p).map(|s| s % self.workers)
    }

    /// `worker-<n>`, the name faults use for the worker.
    pub fn group_label(group: u64) -> String {
        format!("worker-{group}")
    }
}
