//! `lockaudit audit`: every algorithm under every nemesis preset, as a verdict matrix.

pub mod expect;
#[cfg(test)]
mod fixtures;
mod json;
mod junit;
mod markdown;
pub mod matrix;
mod paths;
pub mod runner;
mod table;
mod text;

pub use expect::Expectation;
pub use matrix::{Cell, Counts, Matrix, Status};
