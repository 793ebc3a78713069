//! The nemesis: faults, their schedules, and the executor that injects and heals them.
//!
//! `schedule` reads `nemesis/*.toml` files and builds the presets; `plan` turns a schedule
//! into the concrete faults of one run (same seed, same plan); `executor` injects them
//! into the run's workers and servers, records each as a nemesis event, and heals them;
//! `network` owns the TCP proxies that partitions, latency and manual failovers act on;
//! `journal` records what the nemesis did into the history. The nemesis acts on worker
//! processes only through `workers::Workers`, which the run's controller hands it.

pub mod executor;
pub mod journal;
pub mod network;
pub mod plan;
pub mod proxy;
pub mod schedule;
pub mod source_ports;
pub mod workers;

pub use plan::{plan, PlanError, PlannedFault, Stage};
pub use schedule::{
    FaultKind, FaultRule, InvalidSchedule, Preset, Schedule, ScheduleError, PRESETS,
};
