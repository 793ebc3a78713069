//! `audit --merge DIR...`: the folders of an audit's shards (`audit --shard K/N`) joined into
//! the audit they are shares of: every round's cells back in the matrix's order, their
//! run folders where the shards keep them. Shards that do not make one whole audit are
//! refused before anything is written.

use std::path::{Component, Path, PathBuf};

use super::matrix::{Cell, Matrix};
use super::rounds::Audit;
use super::shard::{Plan, Shard};

/// Why shard folders do not join into one audit. Each names the folder or file at fault.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("--merge: {} is no folder", .0.display())]
    NotAFolder(PathBuf),
    #[error("--merge: {}: cannot read it ({error}): {} is no audit folder", .file.display(), .dir.display())]
    NoAuditJson {
        dir: PathBuf,
        file: PathBuf,
        error: std::io::Error,
    },
    #[error("--merge: {}: cannot read it ({error}): shard {index} of {of} records {rounds} rounds", .file.display())]
    NoRound {
        file: PathBuf,
        index: usize,
        of: usize,
        rounds: usize,
        error: std::io::Error,
    },
    #[error("--merge: {}: not an audit.json: {error}", .file.display())]
    BadJson {
        file: PathBuf,
        error: serde_json::Error,
    },
    #[error("--merge: {}: no `shard` in it: {} is the folder of a whole audit, not of one run with --shard K/N", .file.display(), .dir.display())]
    NotAShard { dir: PathBuf, file: PathBuf },
    #[error("--merge: {}: shard {index} of {of} was interrupted by {signal}: its cells are incomplete; run that shard again", .file.display())]
    Interrupted {
        file: PathBuf,
        index: usize,
        of: usize,
        signal: String,
    },
    #[error("--merge: {} and {} are shards of different audits: {what}", .a.display(), .b.display())]
    Different {
        a: PathBuf,
        b: PathBuf,
        what: String,
    },
    #[error("--merge: shard {index} of {of} is given twice: {} and {}", .a.display(), .b.display())]
    Twice {
        index: usize,
        of: usize,
        a: PathBuf,
        b: PathBuf,
    },
    #[error("--merge: shard {missing} of {of} is missing: given shards {given} of {of}")]
    Missing {
        missing: usize,
        of: usize,
        given: String,
    },
    #[error("--merge: {}: its cells are not those of shard {index} of {of} of the audit it records", .file.display())]
    WrongCells {
        file: PathBuf,
        index: usize,
        of: usize,
    },
}

/// One shard as read: its folder, its record, and its rounds' matrices.
struct ShardRead {
    dir: PathBuf,
    shard: Shard,
    rounds: Vec<Matrix>,
}

/// The audit of the shards in `dirs` (in any order), as one audit of the whole matrix
/// would have written it (its cells' run folders are in the shards' folders), and the plan
/// they share.
pub fn merge(dirs: &[PathBuf]) -> Result<(Audit, Plan), MergeError> {
    let mut shards = Vec::new();
    for dir in dirs {
        shards.push(read_shard(dir)?);
    }
    check_one_audit(&shards)?;
    let plan = shards[0].shard.matrix.clone();
    shards.sort_by_key(|s| s.shard.index);
    let rounds = (0..plan.rounds)
        .map(|round| merge_round(&plan, &shards, round))
        .collect();
    // The shards ran side by side: the audit took as long as the longest.
    let seconds = shards.iter().map(shard_seconds).fold(0.0, f64::max);
    Ok((Audit::of_rounds(rounds, seconds), plan))
}

/// `dir/audit.json` and each further round's (`dir/round-<i>/audit.json`), each checked to
/// be the same shard, whole, with its share's cells.
fn read_shard(dir: &Path) -> Result<ShardRead, MergeError> {
    if !dir.is_dir() {
        return Err(MergeError::NotAFolder(dir.to_path_buf()));
    }
    let (top, shard) = read_round(dir, &dir.join("audit.json"))?;
    let rounds_recorded = shard.matrix.rounds;
    // One round: the folder's audit.json is it. With more, that one is each cell over the
    // rounds, and every round's own matrix is in round-<i>/.
    let mut rounds = if rounds_recorded > 1 {
        Vec::new()
    } else {
        vec![top]
    };
    for round in rounds.len()..rounds_recorded {
        let file = round_file(dir, round, rounds_recorded);
        let (matrix, this) = read_round(dir, &file).map_err(|e| match e {
            MergeError::NoAuditJson { error, .. } => MergeError::NoRound {
                file: file.clone(),
                index: shard.index,
                of: shard.of,
                rounds: shard.matrix.rounds,
                error,
            },
            e => e,
        })?;
        if this != shard {
            return Err(MergeError::Different {
                a: dir.join("audit.json"),
                b: file,
                what: differences(&shard, &this),
            });
        }
        rounds.push(matrix);
    }
    let share = shard.spec().share(&shard.matrix.cells);
    for (round, matrix) in rounds.iter().enumerate() {
        let same = matrix.cells.len() == share.len()
            && (matrix.cells.iter().zip(&share))
                .all(|(c, p)| c.algorithm == p.algorithm && c.nemesis == p.nemesis);
        if !same {
            return Err(MergeError::WrongCells {
                file: round_file(dir, round, rounds_recorded),
                index: shard.index,
                of: shard.of,
            });
        }
    }
    Ok(ShardRead {
        dir: dir.to_path_buf(),
        shard,
        rounds,
    })
}

/// Where round `round` (from 0) of an audit folder of `rounds` rounds is written: the
/// folder's own audit.json for a one-round audit, else `round-<round>/`.
fn round_file(dir: &Path, round: usize, rounds: usize) -> PathBuf {
    match rounds {
        1 => dir.join("audit.json"),
        _ => dir.join(format!("round-{round}")).join("audit.json"),
    }
}

/// One round's matrix of a shard, and the shard it records; refused if it records none,
/// or was cut short.
fn read_round(dir: &Path, file: &Path) -> Result<(Matrix, Shard), MergeError> {
    let text = std::fs::read_to_string(file).map_err(|error| MergeError::NoAuditJson {
        dir: dir.to_path_buf(),
        file: file.to_path_buf(),
        error,
    })?;
    let matrix = Matrix::from_json(&text).map_err(|error| MergeError::BadJson {
        file: file.to_path_buf(),
        error,
    })?;
    let Some(shard) = matrix.shard.clone() else {
        return Err(MergeError::NotAShard {
            dir: dir.to_path_buf(),
            file: file.to_path_buf(),
        });
    };
    if shard.index == 0 || shard.index > shard.of {
        return Err(MergeError::WrongCells {
            file: file.to_path_buf(),
            index: shard.index,
            of: shard.of,
        });
    }
    if let Some(signal) = matrix.interrupted.clone() {
        return Err(MergeError::Interrupted {
            file: file.to_path_buf(),
            index: shard.index,
            of: shard.of,
            signal,
        });
    }
    Ok((matrix, shard))
}

fn differences(a: &Shard, b: &Shard) -> String {
    a.differences(b).join(", ")
}

/// The shards are of one audit (the same plan, the same N), each once, none missing.
fn check_one_audit(shards: &[ShardRead]) -> Result<(), MergeError> {
    let Some(first) = shards.first() else {
        return Err(MergeError::Missing {
            missing: 1,
            of: 1,
            given: "none".into(),
        });
    };
    for other in &shards[1..] {
        let what = differences(&first.shard, &other.shard);
        if !what.is_empty() {
            return Err(MergeError::Different {
                a: first.dir.clone(),
                b: other.dir.clone(),
                what,
            });
        }
    }
    let of = first.shard.of;
    let mut by_index: Vec<Option<&ShardRead>> = vec![None; of];
    for shard in shards {
        let slot = &mut by_index[shard.shard.index - 1];
        if let Some(earlier) = slot {
            return Err(MergeError::Twice {
                index: shard.shard.index,
                of,
                a: earlier.dir.clone(),
                b: shard.dir.clone(),
            });
        }
        *slot = Some(shard);
    }
    if let Some(missing) = by_index.iter().position(Option::is_none) {
        let given: Vec<String> = (by_index.iter().enumerate())
            .filter(|(_, s)| s.is_some())
            .map(|(i, _)| (i + 1).to_string())
            .collect();
        return Err(MergeError::Missing {
            missing: missing + 1,
            of,
            given: given.join(", "),
        });
    }
    Ok(())
}

/// Round `round` of the whole audit: every shard's cells at their places in the plan's
/// order; the round began when its first shard's did and took as long as its longest.
/// `shards` are one per index.
fn merge_round(plan: &Plan, shards: &[ShardRead], round: usize) -> Matrix {
    let matrices: Vec<&Matrix> = shards.iter().map(|s| &s.rounds[round]).collect();
    let mut matrix = Matrix {
        started_wall: (matrices.iter())
            .map(|m| m.started_wall.clone())
            .filter(|w| !w.is_empty())
            .min()
            .unwrap_or_default(),
        seconds: matrices.iter().map(|m| m.seconds).fold(0.0, f64::max),
        seed: plan.seed + round as u64,
        hosts: (matrices.iter())
            .map(|m| m.hosts.clone())
            .find(|h| !h.is_empty())
            .unwrap_or_default(),
        ..Matrix::default()
    };
    // Each shard's cells back at the places its share took them from (`ShardSpec::holds`,
    // the one rule; `read_shard` checked they are that share's).
    let mut placed: Vec<Option<Cell>> = vec![None; plan.cells.len()];
    for shard in shards {
        let spec = shard.shard.spec();
        let places = (0..plan.cells.len()).filter(|&i| spec.holds(i));
        for (i, cell) in places.zip(&shard.rounds[round].cells) {
            let mut cell = cell.clone();
            cell.run_dir = cell.run_dir.map(|d| in_shard(&d, &shard.dir));
            placed[i] = Some(cell);
        }
    }
    for cell in placed.into_iter().flatten() {
        matrix.push(cell);
    }
    matrix
}

/// A cell's run folder as the shard wrote it (`<its --out>/<row>/<cell>`), in the shard's
/// folder as given to --merge: where the shard ran and where its folder is now may differ
/// (a CI job's artifact, downloaded elsewhere).
fn in_shard(run_dir: &Path, shard_dir: &Path) -> PathBuf {
    let parts: Vec<Component> = run_dir.components().collect();
    match parts.as_slice() {
        [.., row, cell] if matches!((row, cell), (Component::Normal(_), Component::Normal(_))) => {
            shard_dir.join(row).join(cell)
        }
        _ => run_dir.to_path_buf(),
    }
}

/// How long a shard's audit took: the end of its last cell, from its start (cells record
/// when they began); else its rounds' times added up.
fn shard_seconds(shard: &ShardRead) -> f64 {
    let cells = shard.rounds.iter().flat_map(|m| &m.cells);
    let ends = cells.filter_map(|c| c.started_s.map(|s| s + c.seconds));
    match ends.reduce(f64::max) {
        Some(end) => end,
        None => shard.rounds.iter().map(|m| m.seconds).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::shard::tests::plan;
    use crate::audit::shard::ShardSpec;
    use crate::audit::Expectation;

    const CELLS: [(&str, &str); 5] = [
        ("px", "none"),
        ("px", "kill-clients"),
        ("getset", "none"),
        ("getset", "pause-clients"),
        ("fair", "none"),
    ];

    /// Writes shard `index` of `of` of an audit of CELLS into `root/<name>`, each cell with
    /// a run folder under the `--out` it ran with (`ran/<name>`, elsewhere).
    fn write_shard(root: &Path, name: &str, index: usize, of: usize, plan: &Plan) -> PathBuf {
        let spec = ShardSpec { index, of };
        let mut m = Matrix {
            seed: plan.seed,
            shard: Some(Shard {
                index,
                of,
                matrix: plan.clone(),
            }),
            ..Matrix::default()
        };
        for c in spec.share(&plan.cells) {
            let cell = Cell::judge(
                c.algorithm.clone(),
                c.nemesis.clone(),
                Expectation::default(),
                Default::default(),
            );
            let run = Path::new("ran").join(name).join(&c.algorithm);
            m.push(cell.with_run(run.join(c.nemesis.name()), 1.0));
        }
        let dir = root.join(name);
        m.write_all(&dir).unwrap();
        dir
    }

    fn shards(root: &Path, of: usize, plan: &Plan) -> Vec<PathBuf> {
        (1..=of)
            .map(|k| write_shard(root, &format!("s{k}"), k, of, plan))
            .collect()
    }

    #[test]
    fn shards_merge_back_into_the_matrix_order_with_their_run_folders() {
        let root = tempfile::tempdir().unwrap();
        for of in 1..=6 {
            let plan = plan(&CELLS, 7);
            let sub = root.path().join(of.to_string());
            let mut dirs = shards(&sub, of, &plan);
            // In any order.
            dirs.reverse();
            let (audit, _) = merge(&dirs).unwrap();
            let order: Vec<(String, String)> = (audit.matrix.cells.iter())
                .map(|c| (c.algorithm.clone(), c.nemesis.name().to_string()))
                .collect();
            let want: Vec<(String, String)> = (CELLS.iter())
                .map(|(a, n)| (a.to_string(), n.to_string()))
                .collect();
            assert_eq!(order, want, "{of} shards");
            assert_eq!(audit.rounds.len(), 1);
            assert_eq!(audit.matrix.seed, 7);
            assert!(audit.matrix.shard.is_none(), "the merge is a whole audit");
            // The fourth cell was shard (3 % of) + 1's, and its folder is in that shard's.
            let k = 3 % of + 1;
            assert_eq!(
                audit.matrix.cells[3].run_dir.as_deref(),
                Some(
                    sub.join(format!("s{k}"))
                        .join("getset/pause-clients")
                        .as_path()
                )
            );
        }
    }

    #[test]
    fn every_round_is_merged() {
        let root = tempfile::tempdir().unwrap();
        let mut plan = plan(&CELLS, 3);
        plan.rounds = 2;
        let dirs = shards(root.path(), 2, &plan);
        // Each shard's rounds in round-0/ and round-1/ (its own audit.json is each cell
        // over them).
        for dir in &dirs {
            let first = std::fs::read_to_string(dir.join("audit.json")).unwrap();
            let mut second = Matrix::from_json(&first).unwrap();
            Matrix::from_json(&first)
                .unwrap()
                .write_all(&dir.join("round-0"))
                .unwrap();
            second.seed = 4;
            second.write_all(&dir.join("round-1")).unwrap();
        }
        let (audit, _) = merge(&dirs).unwrap();
        assert_eq!(audit.rounds.len(), 2);
        assert_eq!(audit.rounds[1].seed, 4);
        assert_eq!(audit.rounds[1].cells.len(), CELLS.len());
        assert_eq!(audit.reach.len(), CELLS.len());
        assert!(audit.reach.iter().all(|r| r.runs == 2));
        // A round missing is named.
        std::fs::remove_file(dirs[1].join("round-1/audit.json")).unwrap();
        let why = merge(&dirs).err().unwrap().to_string();
        assert!(
            why.contains("s2/round-1/audit.json") && why.contains("shard 2 of 2 records 2 rounds"),
            "{why}"
        );
    }

    #[test]
    fn what_is_no_whole_audit_is_refused_with_its_reason() {
        let root = tempfile::tempdir().unwrap();
        let base = plan(&CELLS, 1);
        let dirs = shards(root.path(), 3, &base);
        let refused = |dirs: &[PathBuf]| merge(dirs).err().expect("refused").to_string();
        let why = refused(&[dirs[0].clone(), dirs[2].clone()]);
        assert!(
            why.contains("shard 2 of 3 is missing: given shards 1, 3 of 3"),
            "{why}"
        );
        let why = refused(&[dirs[0].clone(), dirs[1].clone(), dirs[0].clone()]);
        assert!(why.contains("shard 1 of 3 is given twice"), "{why}");
        // A shard of another seed.
        let other = write_shard(root.path(), "other", 2, 3, &plan(&CELLS, 2));
        let why = refused(&[dirs[0].clone(), other.clone(), dirs[2].clone()]);
        assert!(
            why.contains("are shards of different audits: seed 1 and 2")
                && why.contains("s1")
                && why.contains("other"),
            "{why}"
        );
        // Of another N.
        let four = write_shard(root.path(), "four", 2, 4, &base);
        let why = refused(&[dirs[0].clone(), four]);
        assert!(why.contains("shards of 3 and of 4"), "{why}");
        // A folder without audit.json, one that is no folder, a whole audit.
        let empty = root.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let why = refused(&[empty]);
        assert!(
            why.contains("empty/audit.json") && why.contains("is no audit folder"),
            "{why}"
        );
        let why = refused(&[root.path().join("nowhere")]);
        assert!(why.contains("nowhere is no folder"), "{why}");
        let whole = root.path().join("whole");
        Matrix::default().write_all(&whole).unwrap();
        let why = refused(&[whole]);
        assert!(why.contains("no `shard` in it"), "{why}");
        // An interrupted shard.
        let file = dirs[1].join("audit.json");
        let mut m = Matrix::from_json(&std::fs::read_to_string(&file).unwrap()).unwrap();
        m.interrupted = Some("SIGINT".into());
        std::fs::write(&file, m.to_json()).unwrap();
        let why = refused(&dirs);
        assert!(
            why.contains("shard 2 of 3 was interrupted by SIGINT"),
            "{why}"
        );
        // Cells that are not the shard's share.
        m.interrupted = None;
        m.cells.pop();
        std::fs::write(&file, m.to_json()).unwrap();
        let why = refused(&dirs);
        assert!(why.contains("are not those of shard 2 of 3"), "{why}");
        // Not JSON.
        std::fs::write(&file, "{").unwrap();
        assert!(refused(&dirs).contains("not an audit.json"));
    }

    #[test]
    fn an_empty_shard_is_part_of_the_whole() {
        let root = tempfile::tempdir().unwrap();
        let plan = plan(&CELLS[..2], 1);
        let dirs = shards(root.path(), 3, &plan);
        let json = std::fs::read_to_string(dirs[2].join("audit.json")).unwrap();
        assert!(Matrix::from_json(&json).unwrap().cells.is_empty());
        assert_eq!(merge(&dirs).unwrap().0.matrix.cells.len(), 2);
        let why = merge(&dirs[..2]).err().unwrap().to_string();
        assert!(why.contains("shard 3 of 3 is missing"), "{why}");
    }
}
