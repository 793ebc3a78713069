//! lockaudit: a Jepsen-style correctness checker for distributed locks.
//!
//! The pipeline: a history (`history`) flows into the checks (`checker`), which produce a
//! report (`report`). Each stage's output is plain serde data.

pub mod adapter_test;
pub mod audit;
pub mod checker;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod fake_clock;
pub mod fleet;
pub mod history;
pub mod index;
pub mod locks;
pub mod nemesis;
pub mod outfile;
pub mod plot;
pub mod presets;
pub mod private;
pub mod report;
pub mod run;
pub mod run_record;
pub mod shell;
pub mod shrink;
pub mod streams;
pub mod suggest;
pub mod synth;
pub mod sys;
pub mod tomlfile;
pub mod topology;
pub mod units;
pub mod workload;
