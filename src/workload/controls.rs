//! What the nemesis tells a running worker, and what those commands change for the
//! worker's clients (a crash point armed, a clock skew).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::cluster::FakeClock;

/// What the nemesis tells a running worker, one JSON line each on its stdin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "kebab-case")]
pub enum WorkerCommand {
    /// The first client to reach this step (a name from `locks::crash_points`) kills the
    /// whole worker on the spot, after writing out the events recorded so far.
    Arm {
        point: String,
    },
    Disarm,
    /// Every client's clock (for the algorithms that read it, and the wall clock of
    /// external adapters started under a faked clock) runs this far ahead (ms; negative:
    /// behind). 0 heals.
    Skew {
        ms: i64,
    },
}

/// What the commands change, shared by the worker's clients.
#[derive(Debug, Default)]
pub struct Controls {
    armed: Mutex<Option<String>>,
    /// Read by every lock client of this worker (`LockOptions::live_skew_ms`).
    pub skew_ms: Arc<AtomicI64>,
    /// The faked wall clock the worker's external adapters run under, when the run skews
    /// client clocks (`WorkerConfig::adapter_clock`): a skew moves it too.
    pub adapter_clock: Option<FakeClock>,
}

impl Controls {
    pub fn with_adapter_clock(adapter_clock: Option<FakeClock>) -> Controls {
        Controls {
            adapter_clock,
            ..Controls::default()
        }
    }

    pub fn apply(&self, command: WorkerCommand) {
        match command {
            WorkerCommand::Arm { point } => *self.armed_slot() = Some(point),
            WorkerCommand::Disarm => *self.armed_slot() = None,
            WorkerCommand::Skew { ms } => {
                self.skew_ms.store(ms, Ordering::Relaxed);
                if let Some(clock) = &self.adapter_clock {
                    if let Err(e) = clock.set(ms) {
                        tracing::error!("worker: cannot skew the adapters' clock: {e}");
                    }
                }
            }
        }
    }

    fn armed_slot(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.armed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether reaching `step` must kill the worker.
    pub fn is_armed(&self, step: &str) -> bool {
        self.armed_slot().as_deref() == Some(step)
    }
}
