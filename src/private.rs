//! Files and folders that only the run's user may read: whatever holds a server's password
//! (endpoints.json, a sentinel.conf, PostgreSQL's password file) and the folders that hold
//! them. Made with their mode from the start (`open(2)`'s and `mkdir(2)`'s mode), never
//! written first and closed afterwards: there is no moment at which another local user
//! could open them.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A secret file's mode: read and write for its owner only.
pub const FILE_MODE: u32 = 0o600;

/// A private folder's mode: its owner only may list or enter it.
pub const DIR_MODE: u32 = 0o700;

/// Makes `dir` (and any missing parent, with the usual mode) a folder that only this user
/// may list or enter. One that already exists is closed to others too: for the folders
/// lockaudit names itself inside a run folder (`redis`, `postgres`, `ssh`).
pub fn create_dir(dir: &Path) -> std::io::Result<()> {
    if !make_dir(dir)? {
        close(dir, DIR_MODE)?;
    }
    Ok(())
}

/// A run folder: made private as [`create_dir`] makes it, but one that is there already
/// (`--dir` naming the user's own folder) keeps its mode; what it comes to hold that is
/// secret is private by its own mode or its subfolder's.
pub fn create_run_dir(dir: &Path) -> std::io::Result<()> {
    make_dir(dir).map(|_| ())
}

/// Makes `dir` with mode 0700 (its missing parents with the usual mode); false if it was
/// there already.
fn make_dir(dir: &Path) -> std::io::Result<bool> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    match DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Opens `path` for writing, emptied, readable by this user only: created with mode 0600,
/// or, if it was there already, made 0600 before anything is written into it.
pub fn create_file(path: &Path) -> std::io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .open(path)?;
    if file.metadata()?.permissions().mode() & 0o7777 != FILE_MODE {
        file.set_permissions(Permissions::from_mode(FILE_MODE))?;
    }
    Ok(file)
}

/// Writes `contents` to `path` as [`create_file`] makes it.
pub fn write(path: &Path, contents: impl AsRef<[u8]>) -> std::io::Result<()> {
    create_file(path)?.write_all(contents.as_ref())
}

/// What [`replace`] could not do, to which file or folder.
#[derive(Debug)]
pub struct ReplaceError {
    pub action: &'static str,
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// Writes `contents` to `path` (its folder made as [`create_dir`] makes it, if missing),
/// replacing it whole: a temporary file beside it, renamed over it, so that a reader never
/// finds it half-written (a fake clock's offset file is read on every time call).
pub fn replace(path: &Path, contents: &[u8]) -> Result<(), ReplaceError> {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let failed = |action, path: &Path, source| ReplaceError {
        action,
        path: path.to_path_buf(),
        source,
    };
    if let Some(folder) = path.parent().filter(|f| !f.exists()) {
        create_dir(folder).map_err(|e| failed("create the folder", folder, e))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = PathBuf::from(tmp);
    write(&tmp, contents).map_err(|e| failed("write", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        failed("replace", path, e)
    })
}

/// Takes away whatever access others had to `path` (the group's too).
fn close(path: &Path, mode: u32) -> std::io::Result<()> {
    let now = std::fs::metadata(path)?.permissions().mode() & 0o7777;
    if now & 0o077 != 0 {
        std::fs::set_permissions(path, Permissions::from_mode(now & !0o077 | (mode & 0o700)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn files_and_folders_are_the_owners_alone_also_when_they_were_there_before() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("a/b");
        create_dir(&sub).unwrap();
        assert_eq!(mode(&sub), 0o700);
        std::fs::set_permissions(&sub, Permissions::from_mode(0o755)).unwrap();
        create_dir(&sub).unwrap();
        assert_eq!(mode(&sub), 0o700);
        // A run folder the user made keeps its mode; a new one is private.
        std::fs::set_permissions(dir.path(), Permissions::from_mode(0o755)).unwrap();
        create_run_dir(dir.path()).unwrap();
        assert_eq!(mode(dir.path()), 0o755);
        let run = dir.path().join("run");
        create_run_dir(&run).unwrap();
        assert_eq!(mode(&run), 0o700);

        let file = sub.join("secret");
        write(&file, "pw").unwrap();
        assert_eq!(mode(&file), 0o600);
        std::fs::set_permissions(&file, Permissions::from_mode(0o644)).unwrap();
        write(&file, "pw2").unwrap();
        assert_eq!(mode(&file), 0o600);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "pw2");
    }
}
