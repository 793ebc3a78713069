//! Workloads: the spec of what clients do, the client loop, the worker processes that run
//! clients, the recorder that merges their events, and the controller of a run.

pub mod client;
pub mod controls;
pub mod expect;
pub mod fleet;
pub mod recorder;
pub mod resource;
pub mod run;
pub mod sink;
pub mod spec;
pub mod worker;

pub use spec::WorkloadSpec;
