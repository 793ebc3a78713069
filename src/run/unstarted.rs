//! The folder of a run that could not be carried out (no redis-server, a server that would
//! not start, a schedule that does not fit the run): removed when nothing in it is worth
//! keeping, so that `results/` holds runs, not husks. Kept when it has a history (the run
//! had begun) or a log with something in it (a server or worker that failed says why in its
//! own log), and kept untouched when it was there before the run: it is the user's.

use std::path::{Path, PathBuf};

/// What became of the folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Left {
    /// Removed: only what the run writes before it starts was in it (workload.toml,
    /// run.json, empty logs, the servers' configs and empty data folders).
    Removed,
    /// Kept, and why ("it has the server's log (redis/master-0.log)").
    Kept(String),
}

/// The outermost folder that creating `dir` will make (`dir` itself, or `results/` when
/// that is missing too); None when `dir` is there already. Asked before the run.
pub fn to_be_made(dir: &Path) -> Option<PathBuf> {
    let mut made = None;
    let mut at = Some(dir);
    while let Some(path) = at.filter(|p| !p.as_os_str().is_empty() && !p.exists()) {
        made = Some(path.to_path_buf());
        at = path.parent();
    }
    made
}

/// Tidies `dir` after its run failed; `made`: what [`to_be_made`] said before the run
/// (None: the folder was there, and is the user's). The folders the run made around it
/// (`results/`) go too when nothing else is in them. Says on stderr what it did, as the
/// run's folder was already named there.
pub fn tidy(dir: &Path, made: Option<&Path>) -> Left {
    let left = decide(dir, made.is_none());
    match &left {
        Left::Kept(why) => crate::note!("lockaudit: kept {}: {why}", dir.display()),
        Left::Removed => match std::fs::remove_dir_all(dir) {
            Ok(()) => {
                crate::note!(
                    "lockaudit: removed {}: the run did not get under way, and nothing in its folder was worth keeping",
                    dir.display()
                );
                remove_made_parents(dir, made);
            }
            Err(e) => {
                let why = format!("it could not be removed: {e}");
                crate::note!("lockaudit: kept {}: {why}", dir.display());
                return Left::Kept(why);
            }
        },
    }
    left
}

/// Removes the folders between `dir` and `made` (both ends included) that the run made,
/// while they are empty: another run's folder beside it keeps `results/`.
fn remove_made_parents(dir: &Path, made: Option<&Path>) {
    let Some(made) = made.filter(|m| dir.starts_with(m) && *m != dir) else {
        return;
    };
    let mut at = dir.parent();
    while let Some(parent) = at {
        if std::fs::remove_dir(parent).is_err() || parent == made {
            break;
        }
        at = parent.parent();
    }
}

/// Whether `dir` is worth keeping, and why (without touching it).
fn decide(dir: &Path, existed: bool) -> Left {
    if existed {
        return Left::Kept("it was there before the run".into());
    }
    if !dir.is_dir() {
        return Left::Removed;
    }
    if std::fs::metadata(dir.join("history.jsonl")).is_ok_and(|m| m.len() > 0) {
        return Left::Kept("it has the run's history".into());
    }
    let mut logs = Vec::new();
    logs_with_content(dir, dir, &mut logs);
    logs.sort();
    match logs.as_slice() {
        [] => Left::Removed,
        [one] => Left::Kept(format!("it has a log that may say why ({})", one.display())),
        [first, rest @ ..] => Left::Kept(format!(
            "it has logs that may say why ({} and {} more)",
            first.display(),
            rest.len()
        )),
    }
}

/// Every `*.log` under `dir` with something in it, relative to `root`. Symbolic links are
/// not followed: the folder's own files only.
fn logs_with_content(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() {
            logs_with_content(root, &path, out);
        } else if kind.is_file()
            && path.extension().is_some_and(|e| e == "log")
            && entry.metadata().is_ok_and(|m| m.len() > 0)
        {
            out.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_with_only_what_precedes_the_start_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("run");
        std::fs::create_dir_all(dir.join("redis/master-0")).unwrap();
        std::fs::write(dir.join("workload.toml"), "algorithm = \"set-nx-px\"\n").unwrap();
        std::fs::write(dir.join("run.json"), "{}").unwrap();
        std::fs::write(dir.join("redis/master-0.log"), "").unwrap();
        assert_eq!(tidy(&dir, Some(&dir)), Left::Removed);
        assert!(!dir.exists());
        assert!(root.path().exists());
    }

    #[test]
    fn the_folders_made_around_a_removed_run_go_while_empty() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("results/2026-11-28");
        let made = to_be_made(&dir);
        assert_eq!(made.as_deref(), Some(root.path().join("results").as_path()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(tidy(&dir, made.as_deref()), Left::Removed);
        assert!(!root.path().join("results").exists());
        assert!(root.path().exists());

        // Another run's folder made beside it meanwhile: results/ stays.
        let made = to_be_made(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(root.path().join("results/other")).unwrap();
        assert_eq!(tidy(&dir, made.as_deref()), Left::Removed);
        assert!(root.path().join("results/other").exists());

        // Already there: nothing to make, and the folder is kept as the user's.
        assert_eq!(to_be_made(root.path()), None);
    }

    #[test]
    fn a_log_with_content_a_history_or_a_folder_that_was_there_keeps_it() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("run");
        std::fs::create_dir_all(dir.join("redis")).unwrap();
        std::fs::write(dir.join("workload.toml"), "x").unwrap();
        std::fs::write(dir.join("redis/master-0.log"), "Address already in use\n").unwrap();
        assert_eq!(
            tidy(&dir, Some(&dir)),
            Left::Kept("it has a log that may say why (redis/master-0.log)".into())
        );
        assert!(dir.join("redis/master-0.log").exists());

        let dir = root.path().join("begun");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("history.jsonl"), "{}\n").unwrap();
        assert!(matches!(tidy(&dir, Some(&dir)), Left::Kept(_)));

        // The user's own folder, named with --out: whatever is in it stays.
        let dir = root.path().join("mine");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        assert_eq!(
            tidy(&dir, None),
            Left::Kept("it was there before the run".into())
        );
        assert!(dir.join("notes.txt").exists());
    }
}
