//! What a run leaves that nobody needs once it ended, and the note that lets the next run
//! clean it up should lockaudit be killed outright.
//!
//! - Scratch folders: a service node's data that its run folder need not keep once the
//!   node stopped (`ServiceNode::scratch`: etcd's preallocated WAL, 64 MB a member;
//!   ZooKeeper's snapshots). A normal end removes them as each cluster stops; Ctrl-C, once
//!   every child is stopped, removes every one still listed here ([`remove_scratch`]).
//! - The note (`.lockaudit-<pid>.json`, in the folder that holds the run or audit folder,
//!   see [`keep_note_in`]): a SIGKILL runs no code, so while children or scratch folders
//!   exist this file lists them, with lockaudit's own pid and the start time of each pid
//!   (so that a pid the kernel gave to another process since is never signalled). It is
//!   removed at a normal end and on Ctrl-C; the next `run` or `audit` into the same folder
//!   finds a note whose lockaudit is gone and cleans what it names ([`clean_notes_in`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

/// The note's name prefix; `<prefix><pid>.json`.
const NOTE_PREFIX: &str = ".lockaudit-";

/// A process and when it started (`/proc/<pid>/stat`'s starttime, clock ticks since boot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Started {
    pid: u32,
    start: u64,
}

/// The note's content.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Note {
    /// The lockaudit that wrote it.
    lockaudit: Option<Started>,
    /// Its children by name (`etcd-0`, `child 1234` for a worker).
    children: BTreeMap<String, Started>,
    /// Scratch folders to remove.
    folders: BTreeSet<PathBuf>,
}

struct State {
    /// Where the note goes; None: keep none (a test, a subcommand that starts nothing).
    path: Option<PathBuf>,
    children: BTreeMap<u32, (String, u64)>,
    folders: BTreeSet<PathBuf>,
    /// Whether a note is on disk now.
    written: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    path: None,
    children: BTreeMap::new(),
    folders: BTreeSet::new(),
    written: false,
});

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// When `pid` started, in clock ticks since boot (None once it is gone or a zombie, which
/// no signal can end).
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's closing parenthesis: state is field 3, starttime field 22.
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    if fields.next()? == "Z" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// The note of this process in `dir`.
fn note_path(dir: &Path) -> PathBuf {
    dir.join(format!("{NOTE_PREFIX}{}.json", std::process::id()))
}

/// Keeps this process's note in `dir` (the folder that holds the run or audit folder) from
/// now on, while it has children or scratch folders.
pub fn keep_note_in(dir: &Path) {
    let mut state = state();
    state.path = Some(note_path(dir));
    write(&mut state);
}

/// Writes the note as the state says, or removes it when there is nothing left to name.
fn write(state: &mut State) {
    let Some(path) = state.path.clone() else {
        return;
    };
    if state.children.is_empty() && state.folders.is_empty() {
        if state.written {
            let _ = std::fs::remove_file(&path);
            state.written = false;
        }
        return;
    }
    let me = std::process::id();
    let note = Note {
        lockaudit: start_time(me).map(|start| Started { pid: me, start }),
        children: state
            .children
            .iter()
            .map(|(&pid, (name, start))| {
                (format!("{name} ({pid})"), Started { pid, start: *start })
            })
            .collect(),
        folders: state.folders.clone(),
    };
    let Ok(text) = serde_json::to_string_pretty(&note) else {
        return;
    };
    // Whole or not at all: a temporary name, then a rename.
    let partial = path.with_extension("json.partial");
    if std::fs::write(&partial, text + "\n").is_ok() && std::fs::rename(&partial, &path).is_ok() {
        state.written = true;
    } else {
        let _ = std::fs::remove_file(&partial);
    }
}

/// A child was spawned (called by the registry).
pub(super) fn child_started(pid: u32, name: &str) {
    let mut state = state();
    if let Some(start) = start_time(pid) {
        state.children.insert(pid, (name.to_string(), start));
        write(&mut state);
    }
}

/// A child was reaped (called by the registry).
pub(super) fn child_gone(pid: u32) {
    let mut state = state();
    if state.children.remove(&pid).is_some() {
        write(&mut state);
    }
}

/// `folder` is scratch: removed once its node stopped, at a normal end or on Ctrl-C.
pub(super) fn scratch(folder: &Path) {
    let mut state = state();
    if state.folders.insert(folder.to_path_buf()) {
        write(&mut state);
    }
}

/// Removes the scratch `folder` now (its node stopped) and forgets it.
pub(super) fn remove(folder: &Path) {
    let _ = std::fs::remove_dir_all(folder);
    let mut state = state();
    if state.folders.remove(folder) {
        write(&mut state);
    }
}

/// Ctrl-C, once every child is stopped: removes every scratch folder still listed, then the
/// note. Returns the bytes freed.
pub fn remove_scratch() -> u64 {
    let mut state = state();
    let mut freed = 0;
    for folder in std::mem::take(&mut state.folders) {
        freed += size_of(&folder);
        let _ = std::fs::remove_dir_all(&folder);
    }
    state.children.clear();
    write(&mut state);
    freed
}

/// The command ended normally: nothing it noted is left to clean (its clusters stopped and
/// removed their scratch folders), so its note goes.
pub fn forget() {
    let mut state = state();
    state.children.clear();
    state.folders.clear();
    write(&mut state);
    state.path = None;
}

/// Where `run` and `audit` keep their note: beside their folder, in `dir`'s parent (the
/// results folder). First cleans up after any lockaudit killed outright that left a note
/// there, saying so on stderr.
pub fn clean_and_keep_note_beside(dir: &Path) {
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    for line in clean_notes_in(parent) {
        crate::note!("{line}");
    }
    keep_note_in(parent);
}

/// The bytes of the files under `path`.
fn size_of(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| size_of(&e.path()))
                .sum()
        })
        .unwrap_or(0)
}

/// Whether `p` is the very process that was noted (same pid, same start).
fn still_running(p: &Started) -> bool {
    start_time(p.pid) == Some(p.start)
}

/// Cleans up after every lockaudit that left a note in `dir` and is gone (killed
/// outright): SIGKILLs the children it names that still run (the same pid started at the
/// same time, never a stranger that got the pid since), removes its scratch folders and
/// the note. A note whose lockaudit still runs is left alone. Returns one line per note
/// cleaned, for stderr.
pub fn clean_notes_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mine = note_path(dir);
    let mut said = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(NOTE_PREFIX) || !name.ends_with(".json") || path == mine {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(note) = serde_json::from_str::<Note>(&text) else {
            continue;
        };
        if note.lockaudit.as_ref().is_some_and(still_running) {
            continue;
        }
        let mut stopped = Vec::new();
        for (name, child) in &note.children {
            if still_running(child) {
                let pid = nix::unistd::Pid::from_raw(child.pid as i32);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT);
                if nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).is_ok() {
                    stopped.push(name.clone());
                }
            }
        }
        let mut freed = 0;
        let mut removed = 0;
        for folder in &note.folders {
            if folder.exists() {
                freed += size_of(folder);
                if std::fs::remove_dir_all(folder).is_ok() {
                    removed += 1;
                }
            }
        }
        let _ = std::fs::remove_file(&path);
        let by = note.lockaudit.map_or("a lockaudit".to_string(), |l| {
            format!("lockaudit {}", l.pid)
        });
        let mut did = Vec::new();
        if !stopped.is_empty() {
            did.push(format!(
                "stopped {} process(es) it left running ({})",
                stopped.len(),
                stopped.join(", ")
            ));
        }
        did.push(format!(
            "removed {removed} data folder(s) ({} MB)",
            freed / 1_000_000
        ));
        said.push(format!(
            "lockaudit: {by} was killed before it could clean up ({}): {}",
            path.display(),
            did.join(", ")
        ));
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A note of a gone lockaudit: a child that is still the noted process is killed, one
    /// whose pid now names another process (another start time) is not; its folders go.
    #[test]
    fn a_note_of_a_gone_lockaudit_is_cleaned_and_a_reused_pid_is_spared() {
        let dir = tempfile::tempdir().unwrap();
        let mut noted = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let mut stranger = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let folder = dir.path().join("run/etcd/etcd-0");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("wal"), vec![0u8; 4096]).unwrap();
        let started = |pid: u32| Started {
            pid,
            start: start_time(pid).unwrap(),
        };
        // A pid that is no process: lockaudit itself is gone.
        let mut note = Note {
            lockaudit: Some(Started {
                pid: u32::MAX / 2,
                start: 1,
            }),
            ..Note::default()
        };
        note.children.insert("etcd-0".into(), started(noted.id()));
        let mut reused = started(stranger.id());
        reused.start += 1;
        note.children.insert("etcd-1".into(), reused);
        note.folders.insert(folder.clone());
        let path = dir.path().join(".lockaudit-12345.json");
        std::fs::write(&path, serde_json::to_string(&note).unwrap()).unwrap();

        let said = clean_notes_in(dir.path());
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].contains("stopped 1 process(es) it left running (etcd-0"),
            "{said:?}"
        );
        assert!(said[0].contains("removed 1 data folder(s)"), "{said:?}");
        assert!(!folder.exists());
        assert!(!path.exists());
        let status = noted.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        assert_eq!(stranger.try_wait().unwrap(), None, "a stranger was killed");
        let _ = stranger.kill();
        let _ = stranger.wait();
    }

    /// A note whose lockaudit still runs (here: this test process) is left alone.
    #[test]
    fn a_note_of_a_running_lockaudit_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("data");
        std::fs::create_dir(&folder).unwrap();
        let me = std::process::id();
        let mut note = Note {
            lockaudit: Some(Started {
                pid: me,
                start: start_time(me).unwrap(),
            }),
            ..Note::default()
        };
        note.folders.insert(folder.clone());
        let path = dir.path().join(".lockaudit-1.json");
        std::fs::write(&path, serde_json::to_string(&note).unwrap()).unwrap();
        assert!(clean_notes_in(dir.path()).is_empty());
        assert!(folder.exists() && path.exists());
    }
}
