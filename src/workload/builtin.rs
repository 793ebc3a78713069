//! The built-in workloads: `workloads/<algorithm>.toml`, compiled into the binary, so that
//! `lockaudit run --algorithm NAME` and `lockaudit audit` use each algorithm's own workload
//! (its hold times, TTL, keys and `[expect]` table) from any folder and after
//! `cargo install`. The files in `workloads/` are their source, included by each
//! algorithm's entry in the table of algorithms (`locks::TABLE`, its `workload`); a unit
//! test parses each.

use super::spec::{SpecError, WorkloadSpec};
use crate::locks;

/// Where a built-in workload comes from, as errors and messages name it.
pub fn source_name(algorithm: &str) -> String {
    format!("workloads/{algorithm}.toml (built in)")
}

/// The text of `algorithm`'s built-in workload, if it has one.
pub fn text(algorithm: &str) -> Option<&'static str> {
    locks::algorithm(algorithm).and_then(|a| a.workload)
}

/// The workload `algorithm` runs when no file is given: its built-in one, or the generic
/// defaults with that algorithm for an algorithm without one (`lua` and `external`, which
/// need a file of their own anyway).
pub fn workload(algorithm: &str) -> Result<WorkloadSpec, SpecError> {
    let entry =
        locks::named(algorithm).map_err(|why| SpecError::whole(&source_name(algorithm), why))?;
    workload_of(entry)
}

/// The workload `algorithm` runs when no file is given, as [`workload`].
pub fn workload_of(algorithm: &'static locks::Algorithm) -> Result<WorkloadSpec, SpecError> {
    match algorithm.workload {
        Some(text) => WorkloadSpec::from_toml(text, &source_name(algorithm.name)),
        None => Ok(WorkloadSpec {
            algorithm,
            ..WorkloadSpec::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::ALGORITHMS;

    #[test]
    fn every_builtin_workload_parses_and_names_its_own_algorithm() {
        for algorithm in ALGORITHMS {
            let text = text(algorithm).unwrap();
            let spec = WorkloadSpec::from_toml(text, &source_name(algorithm))
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(spec.algorithm.name, algorithm);
            assert!(!spec.expect.is_empty(), "{algorithm}: no [expect] table");
        }
    }

    #[test]
    fn every_algorithm_has_one_and_it_is_the_file_in_workloads() {
        for algorithm in ALGORITHMS {
            let builtin = text(algorithm).unwrap_or_else(|| panic!("{algorithm}: none"));
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("workloads")
                .join(format!("{algorithm}.toml"));
            assert_eq!(std::fs::read_to_string(&path).unwrap(), builtin);
        }
        assert!(text(crate::locks::SCRIPTED).is_none() && text(crate::locks::EXTERNAL).is_none());
    }

    #[test]
    fn the_builtin_is_what_an_algorithm_runs_and_others_keep_the_defaults() {
        let redlock = workload("redlock").unwrap();
        assert_eq!(redlock.algorithm.name, "redlock");
        assert_ne!(redlock.hold, WorkloadSpec::default().hold);
        assert!(redlock.expect.contains_key("kill-servers"));
        let lua = workload("lua").unwrap();
        assert_eq!(
            lua,
            WorkloadSpec {
                algorithm: crate::locks::algorithm("lua").unwrap(),
                ..WorkloadSpec::default()
            }
        );
    }
}
