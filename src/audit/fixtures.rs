//! Matrices for the renderers' tests.

use super::matrix::{Cell, Matrix};
use crate::report::named;
use crate::workload::expect::Expectation;

pub const NEMESES: [&str; 12] = crate::nemesis::PRESETS;
pub const ALGORITHMS: [&str; crate::locks::ALGORITHMS.len()] = crate::locks::ALGORITHMS;

pub use crate::report::counted as found;

pub fn expect(must: &[&str], may: &[&str]) -> Expectation {
    Expectation {
        must: named(must),
        may: named(may),
        ..Expectation::default()
    }
}

/// Two algorithms × three nemeses: one pass with expected kinds, one differs, one
/// error, one skipped, two plain passes.
pub fn small() -> Matrix {
    let mut m = Matrix {
        started_wall: "2026-05-01T10:00:00Z".into(),
        seconds: 95.5,
        seed: 42,
        ..Matrix::default()
    };
    m.push(Cell::judge("setnx-del", "none", expect(&[], &[]), found(&[])).with_run("r/a", 10.5));
    m.push(
        Cell::judge(
            "setnx-del",
            "kill-clients",
            expect(&["unavailable"], &[]),
            found(&[("unavailable", 3), ("overlap", 0)]),
        )
        .with_run("r/b", 11.25),
    );
    let mut differs = Cell::judge(
        "set-nx-px",
        "pause-clients",
        expect(&["overlap"], &[]),
        found(&[("overlap", 2), ("stale-write", 1)]),
    )
    .with_run("r/c", 12.0);
    differs.first_anomaly_ms = Some(2310.0);
    differs.events = 500;
    differs.faults = 4;
    m.push(differs);
    m.push(Cell::error(
        "set-nx-px",
        "failover",
        expect(&["overlap"], &[]),
        "redis-server exited",
    ));
    m.push(Cell::not_applicable(
        "setnx-del",
        "failover",
        expect(&[], &[]),
        "failover needs replicas",
    ));
    m.push(Cell::judge("set-nx-px", "none", expect(&[], &[]), found(&[])).with_run("r/f", 9.0));
    m.push(
        Cell::judge("set-nx-px", "kill-clients", expect(&[], &[]), found(&[])).with_run("r/g", 9.0),
    );
    m
}

/// The full grid, every cell a pass except where `odd` says.
pub fn full(odd: impl Fn(&str, &str) -> Option<Cell>) -> Matrix {
    let mut m = Matrix::default();
    for a in ALGORITHMS {
        for n in NEMESES {
            let cell = odd(a, n).unwrap_or_else(|| {
                Cell::judge(a, n, expect(&[], &[]), found(&[]))
                    .with_run(format!("results/audit/{a}-{n}"), 1.0)
            });
            m.push(cell);
        }
    }
    m
}
