//! Output files written whole or not at all: the report, the pictures, the page, the audit's
//! tables, everything written in one go (the history, streamed as the run goes, is not).
//!
//! Each file is written under a temporary name in its own folder, `.partial-<pid>-<n>-<name>`
//! (the extension kept, for writers that choose a format by it), and renamed into place once
//! complete: a reader sees the old file or the new one, never half of one, and a write that
//! fails (a full disk) removes its temporary file and leaves the old one. A Ctrl-C
//! (`abandon_all`) removes the temporary files of writes under way and refuses new ones, so an
//! interrupted command leaves nothing half written behind.
//!
//! The data is not synced to the disk before the rename: what this guards against is a reader
//! or a failed write, not a power cut.

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

struct Partial {
    /// Set by `abandon_all`: no file is written any more.
    abandoned: bool,
    /// The temporary files of the writes under way.
    paths: BTreeSet<PathBuf>,
}

static PARTIAL: Mutex<Partial> = Mutex::new(Partial {
    abandoned: false,
    paths: BTreeSet::new(),
});

fn partial() -> std::sync::MutexGuard<'static, Partial> {
    PARTIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn abandoned() -> io::Error {
    io::Error::new(
        io::ErrorKind::Interrupted,
        "interrupted: no more files are written",
    )
}

/// Writes `bytes` to `path`, whole or not at all.
pub fn write(path: &Path, bytes: impl AsRef<[u8]>) -> io::Result<()> {
    write_via(
        path,
        |tmp| {
            let mut file = std::fs::File::create(tmp)?;
            file.write_all(bytes.as_ref())?;
            file.flush()
        },
        |e| e,
    )
}

/// Lets `fill` write the file at a temporary path beside `path` (same folder, same
/// extension), then renames it to `path`. If `fill` fails, or the rename does, the temporary
/// file is removed and `path` is left as it was; `io` turns this module's own I/O errors
/// (naming `path`'s folder) into `fill`'s error type.
pub fn write_via<T, E>(
    path: &Path,
    fill: impl FnOnce(&Path) -> Result<T, E>,
    io: impl FnOnce(io::Error) -> E,
) -> Result<T, E> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(
        ".partial-{}-{}-{name}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    {
        let mut partial = partial();
        if partial.abandoned {
            return Err(io(abandoned()));
        }
        partial.paths.insert(tmp.clone());
    }
    let filled = fill(&tmp);
    let mut partial = partial();
    let done = match filled {
        // Abandoned meanwhile: the file is gone already.
        Ok(_) if partial.abandoned => Err(io(abandoned())),
        Ok(value) => std::fs::rename(&tmp, path).map(|()| value).map_err(io),
        Err(e) => Err(e),
    };
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    partial.paths.remove(&tmp);
    done
}

/// Removes the temporary files of every write under way and makes every later write fail
/// (the process is about to exit on a signal). Returns how many were removed.
pub fn abandon_all() -> usize {
    let mut partial = partial();
    partial.abandoned = true;
    std::mem::take(&mut partial.paths)
        .iter()
        .filter(|p| std::fs::remove_file(p).is_ok())
        .count()
}

/// Whether `name` is one of this module's temporary files (for tests and clean-ups).
pub fn is_partial(name: &str) -> bool {
    name.starts_with(".partial-")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_file_is_replaced_whole_and_a_failed_fill_leaves_the_old_one_and_no_partial_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        write(&path, "old\n").unwrap();
        write(&path, "new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        let failed: Result<(), String> = write_via(
            &path,
            |tmp| {
                assert!(is_partial(&tmp.file_name().unwrap().to_string_lossy()));
                assert_eq!(tmp.extension().unwrap(), "json");
                std::fs::write(tmp, "half").unwrap();
                Err("the drawing failed".to_string())
            },
            |e| e.to_string(),
        );
        assert_eq!(failed, Err("the drawing failed".to_string()));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        assert_eq!(names(dir.path()), vec!["report.json"]);
        // A folder that does not exist: the error, no panic.
        let gone = dir.path().join("no/such/folder/index.html");
        let e = write(&gone, "x").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
