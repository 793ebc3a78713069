//! What the nemesis tells a running worker, and what those commands change for the
//! worker's clients (a crash point armed, a clock skew).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::clock::RunClock;
use crate::fake_clock::FakeClock;

/// What the nemesis tells a running worker, one JSON line each on its stdin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "kebab-case")]
pub enum WorkerCommand {
    /// The first client to reach this step (a name from `Algorithm::steps`) kills the
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
    /// The run's clock starts: `base_ns` is its zero on CLOCK_MONOTONIC. A worker started
    /// to wait for it (`WorkerConfig::await_go`) has connected its clients and said so; its
    /// clients begin their cycles now.
    Go {
        base_ns: i64,
    },
    /// The run stops: no client starts another operation, the worker records nothing more
    /// and says so (`sink::WorkerNote::Stopped`), and every connection stays open until
    /// stdin closes, so that no session ends while another worker still records.
    Stop,
}

/// What the commands change, shared by the worker's clients.
#[derive(Debug, Default)]
pub struct Controls {
    armed: Mutex<Option<String>>,
    /// Read by every lock client of this worker (`LockOptions::live_skew_ms`).
    pub skew_ms: Arc<AtomicI64>,
    /// The run's clock's zero (CLOCK_MONOTONIC ns), as the controller sent it: at start,
    /// or with `WorkerCommand::Go` when the worker connected its clients first. Read where
    /// a time is taken outside a client's loop (a crash point's death, the stop).
    base_ns: AtomicI64,
    /// The faked wall clock the worker's external adapters run under, when the run skews
    /// client clocks (`WorkerConfig::adapter_clock`): a skew moves it too.
    pub adapter_clock: Option<FakeClock>,
}

impl Controls {
    pub fn new(base_ns: i64, adapter_clock: Option<FakeClock>) -> Controls {
        Controls {
            adapter_clock,
            base_ns: AtomicI64::new(base_ns),
            ..Controls::default()
        }
    }

    /// The run's clock as it stands now (it starts at `Go`).
    pub fn clock(&self) -> RunClock {
        RunClock {
            base_ns: self.base_ns.load(Ordering::SeqCst),
        }
    }

    /// Starts the run's clock at `base_ns`.
    pub fn start_clock(&self, base_ns: i64) {
        self.base_ns.store(base_ns, Ordering::SeqCst);
    }

    pub fn apply(&self, command: WorkerCommand) {
        match command {
            // Taken by the worker itself, which owns the clock and the output.
            WorkerCommand::Go { .. } | WorkerCommand::Stop => {}
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
