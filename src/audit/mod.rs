//! `lockaudit audit`: every algorithm under every nemesis preset, as a verdict matrix.

pub mod matrix;
pub mod runner;

// What a workload expects of a nemesis is the workload's to say; the matrix judges by it.
pub use crate::workload::expect::{self, Expectation};
pub use matrix::{Cell, Counts, Matrix, Status};
