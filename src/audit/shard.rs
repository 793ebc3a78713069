//! `audit --shard K/N`: one machine's share of an audit's cells, and the record of the whole
//! audit each share carries in its `audit.json`, so that `audit --merge` can join the shares
//! and refuse shares of different audits.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::presets::Column;

/// Which share: shard `index` of `of` (1 <= index <= of).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSpec {
    pub index: usize,
    pub of: usize,
}

impl FromStr for ShardSpec {
    type Err = String;

    /// "2/4".
    fn from_str(text: &str) -> Result<ShardSpec, String> {
        let not = || format!("\"{text}\" is not K/N (shard K of N, e.g. 2/4)");
        let (k, n) = text.split_once('/').ok_or_else(not)?;
        let (index, of): (usize, usize) = (
            k.trim().parse().map_err(|_| not())?,
            n.trim().parse().map_err(|_| not())?,
        );
        if of == 0 || index == 0 || index > of {
            return Err(format!(
                "\"{text}\": K must be between 1 and N (shard K of N, e.g. 2/4)"
            ));
        }
        Ok(ShardSpec { index, of })
    }
}

impl fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.of)
    }
}

impl ShardSpec {
    /// Whether the cell at `position` of the whole list is this shard's: every N-th cell,
    /// from the K-th on. Dealt out like cards, so that shards are within one cell of each
    /// other in size and each gets some of every row (rows are alike in their cells' times).
    pub fn holds(&self, position: usize) -> bool {
        position % self.of == self.index - 1
    }

    /// This shard's cells of `cells` (the whole audit's, in its order), in that order.
    pub fn share<T: Clone>(&self, cells: &[T]) -> Vec<T> {
        cells
            .iter()
            .enumerate()
            .filter(|(i, _)| self.holds(*i))
            .map(|(_, c)| c.clone())
            .collect()
    }
}

/// One cell of the whole audit's plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedCell {
    pub algorithm: String,
    pub nemesis: Column,
}

/// The whole audit a shard is part of: every cell in order, and what changes a verdict.
/// Two shards join only if their plans are equal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Every cell of the audit (after `--quick`'s choice), in the matrix's order.
    pub cells: Vec<PlannedCell>,
    /// The first round's seed.
    pub seed: u64,
    pub rounds: usize,
    pub time_limit_ms: u64,
    pub valid_time_limit_ms: u64,
    pub early_stop: bool,
    pub fenced: bool,
    pub quick: bool,
    /// `--workloads`, as given.
    #[serde(default)]
    pub workloads: Option<String>,
    pub liveness_bound_ns: i64,
    pub starvation_bound_ns: i64,
    pub fairness_tolerance_ns: i64,
}

impl Plan {
    /// What differs between two plans, in words ("seed 1 and 2"); empty if nothing does.
    pub fn differences(&self, other: &Plan) -> Vec<String> {
        let mut out = Vec::new();
        let mut field = |name: &str, a: String, b: String| {
            if a != b {
                out.push(format!("{name} {a} and {b}"));
            }
        };
        field("seed", self.seed.to_string(), other.seed.to_string());
        field("rounds", self.rounds.to_string(), other.rounds.to_string());
        field(
            "--time-limit",
            format!("{}ms", self.time_limit_ms),
            format!("{}ms", other.time_limit_ms),
        );
        field(
            "--valid-time-limit",
            format!("{}ms", self.valid_time_limit_ms),
            format!("{}ms", other.valid_time_limit_ms),
        );
        let flag = |on: bool, name: &str| if on { name.to_string() } else { "none".into() };
        field(
            "--no-early-stop",
            flag(!self.early_stop, "set"),
            flag(!other.early_stop, "set"),
        );
        field(
            "--fenced",
            flag(self.fenced, "set"),
            flag(other.fenced, "set"),
        );
        field("--quick", flag(self.quick, "set"), flag(other.quick, "set"));
        let workloads = |w: &Option<String>| w.clone().unwrap_or_else(|| "built-in".into());
        field(
            "--workloads",
            workloads(&self.workloads),
            workloads(&other.workloads),
        );
        let bounds = |p: &Plan| {
            format!(
                "{}ns/{}ns/{}ns",
                p.liveness_bound_ns, p.starvation_bound_ns, p.fairness_tolerance_ns
            )
        };
        field(
            "bounds (liveness/starvation/fairness)",
            bounds(self),
            bounds(other),
        );
        if self.cells != other.cells {
            out.push(cells_difference(&self.cells, &other.cells));
        }
        out
    }
}

/// How two cell lists differ: their lengths, or the first place they part.
fn cells_difference(a: &[PlannedCell], b: &[PlannedCell]) -> String {
    let name = |c: Option<&PlannedCell>| {
        c.map_or("nothing".to_string(), |c| {
            format!("{} × {}", c.algorithm, c.nemesis)
        })
    };
    let at = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    format!(
        "cells ({} and {} cells; cell {}: {} and {})",
        a.len(),
        b.len(),
        at + 1,
        name(a.get(at)),
        name(b.get(at))
    )
}

/// What a shard's `audit.json` says it is: shard `index` of `of`, of the audit `matrix`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shard {
    pub index: usize,
    pub of: usize,
    pub matrix: Plan,
}

impl Shard {
    pub fn spec(&self) -> ShardSpec {
        ShardSpec {
            index: self.index,
            of: self.of,
        }
    }

    /// What keeps this shard and `other` from being shards of one audit (the number of
    /// shards, then the plan); empty if nothing does.
    pub fn differences(&self, other: &Shard) -> Vec<String> {
        let mut out = Vec::new();
        if self.of != other.of {
            out.push(format!("shards of {} and of {}", self.of, other.of));
        }
        out.extend(self.matrix.differences(&other.matrix));
        out
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub fn plan(cells: &[(&str, &str)], seed: u64) -> Plan {
        Plan {
            cells: cells
                .iter()
                .map(|(a, n)| PlannedCell {
                    algorithm: a.to_string(),
                    nemesis: Column::named(n),
                })
                .collect(),
            seed,
            rounds: 1,
            time_limit_ms: 30_000,
            valid_time_limit_ms: 4_000,
            early_stop: true,
            fenced: false,
            quick: false,
            workloads: None,
            liveness_bound_ns: 1_000_000_000,
            starvation_bound_ns: 10_000_000_000,
            fairness_tolerance_ns: 10_000_000,
        }
    }

    #[test]
    fn shards_are_disjoint_cover_the_list_and_are_balanced() {
        for len in 0..12 {
            let cells: Vec<usize> = (0..len).collect();
            for of in 1..=5 {
                let shares: Vec<Vec<usize>> = (1..=of)
                    .map(|index| ShardSpec { index, of }.share(&cells))
                    .collect();
                let mut all: Vec<usize> = shares.concat();
                all.sort();
                // Disjoint and covering: every cell once.
                assert_eq!(all, cells, "{len} cells, {of} shards");
                let sizes: Vec<usize> = shares.iter().map(Vec::len).collect();
                let (min, max) = (sizes.iter().min(), sizes.iter().max());
                assert!(max.unwrap() - min.unwrap() <= 1, "{sizes:?}");
                // Each share keeps the list's order.
                assert!(shares.iter().all(|s| s.windows(2).all(|w| w[0] < w[1])));
            }
        }
    }

    #[test]
    fn a_share_depends_on_the_list_and_n_alone() {
        let cells = ["a", "b", "c", "d", "e", "f", "g"];
        let spec: ShardSpec = "2/3".parse().unwrap();
        assert_eq!(spec.share(&cells), ["b", "e"]);
        // Only the places count, not what the cells are.
        let places: Vec<usize> = (0..cells.len()).collect();
        assert_eq!(spec.share(&places), [1, 4]);
        assert_eq!(
            "3/3".parse::<ShardSpec>().unwrap().share(&cells),
            ["c", "f"]
        );
        assert!(ShardSpec { index: 5, of: 5 }.share(&cells[..3]).is_empty());
    }

    #[test]
    fn k_of_n_is_checked() {
        assert_eq!(
            "1/1".parse::<ShardSpec>(),
            Ok(ShardSpec { index: 1, of: 1 })
        );
        for bad in ["0/3", "4/3", "1/0"] {
            let why = bad.parse::<ShardSpec>().unwrap_err();
            assert!(why.contains("between 1 and N"), "{bad}: {why}");
        }
        for bad in ["3", "a/b", "1/2/3", ""] {
            let why = bad.parse::<ShardSpec>().unwrap_err();
            assert!(why.contains("is not K/N"), "{bad}: {why}");
        }
    }

    #[test]
    fn a_shard_of_another_audit_is_told_by_what_differs() {
        let shard = |of: usize, plan: Plan| Shard {
            index: 1,
            of,
            matrix: plan,
        };
        let cells = [("px", "none"), ("px", "kill-clients")];
        let one = shard(3, plan(&cells, 1));
        assert!(one.differences(&shard(3, plan(&cells, 1))).is_empty());
        assert_eq!(
            one.differences(&shard(3, plan(&cells, 2))),
            ["seed 1 and 2"]
        );
        assert_eq!(
            one.differences(&shard(4, plan(&cells, 1))),
            ["shards of 3 and of 4"]
        );
        let other = plan(&[("px", "none"), ("px", "pause-clients")], 1);
        assert_eq!(
            one.differences(&shard(3, other)),
            ["cells (2 and 2 cells; cell 2: px × kill-clients and px × pause-clients)"]
        );
        let mut fenced = plan(&cells, 1);
        fenced.fenced = true;
        fenced.rounds = 3;
        assert_eq!(
            one.differences(&shard(3, fenced)),
            ["rounds 1 and 3", "--fenced none and set"]
        );
    }
}
