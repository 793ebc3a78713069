//! Workloads: the spec of what clients do (and what they expect of each nemesis), the
//! client loop, and `lockaudit worker`, the process that runs clients. The controller that
//! starts workers and records their events is `run`; the workers as processes are `fleet`.

pub mod builtin;
pub mod client;
pub mod controls;
pub mod expect;
pub mod inventory;
pub mod resource;
pub mod sink;
pub mod spec;
pub mod worker;

pub use spec::WorkloadSpec;
