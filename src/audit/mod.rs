//! `lockaudit audit`: every algorithm under every nemesis preset, as a verdict matrix.

pub mod expect;
pub mod matrix;
pub mod runner;

pub use expect::Expectation;
pub use matrix::{Cell, Counts, Matrix, Status};
