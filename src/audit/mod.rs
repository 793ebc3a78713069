//! `lockaudit audit`: every algorithm under every nemesis preset, as a verdict matrix.

#[cfg(test)]
mod fixtures;
mod html;
mod json;
mod junit;
mod markdown;
pub mod matrix;
pub mod merge;
mod paths;
pub mod rounds;
pub mod runner;
pub mod shard;
mod table;
mod text;

// What a workload expects of a nemesis is the workload's to say; the matrix judges by it.
pub use crate::workload::expect::Expectation;
pub use matrix::{Cell, Counts, Matrix, Status};
