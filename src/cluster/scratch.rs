//! A private folder outside the run folder, for the data of a server that runs as another
//! user (PostgreSQL as the `postgres` user when lockaudit is root): the run folder may sit
//! where that user cannot pass, as anywhere in root's home (0700), and the run folder is not
//! opened to it. Made by `mkdtemp` (0700, a name no one can guess) in `$TMPDIR`, or in /tmp
//! when that user cannot reach `$TMPDIR`; removed when dropped (the run's end, an error, a
//! panic) and on Ctrl-C once the children are stopped (`on_exit::register_after_stop`). A
//! SIGKILL of lockaudit leaves it behind, as `lockaudit-<what>-XXXXXX`, listed in the run's
//! note for the next run to remove (`leftovers`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::error::ClusterError;
use super::on_exit;

/// A folder removed with everything in it when this is dropped.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
    _on_exit: on_exit::Registration,
}

impl ScratchDir {
    /// A new folder `lockaudit-<what>-XXXXXX` in the first of `$TMPDIR` and /tmp that
    /// `reachable` accepts (it returns why not, which the error repeats when neither is).
    pub fn create<E: std::fmt::Display>(
        what: &str,
        reachable: impl Fn(&Path) -> Result<(), E>,
    ) -> Result<ScratchDir, ClusterError> {
        let mut bases = vec![std::env::temp_dir()];
        if bases[0] != Path::new("/tmp") {
            bases.push(PathBuf::from("/tmp"));
        }
        let mut refused = Vec::new();
        let Some(base) = bases.iter().find(|base| match reachable(base) {
            Ok(()) => true,
            Err(why) => {
                refused.push(why.to_string());
                false
            }
        }) else {
            return Err(ClusterError::InvalidSpec(refused.join("; ")));
        };
        let template = base.join(format!("lockaudit-{what}-XXXXXX"));
        let made = nix::unistd::mkdtemp(&template)
            .map_err(|e| ClusterError::io("create a private folder in", base, e.into()))?;
        // Absolute and without symbolic links: the path servers are given and report back.
        let path = match made.canonicalize() {
            Ok(path) => path,
            Err(e) => {
                let _ = std::fs::remove_dir(&made);
                return Err(ClusterError::io("resolve the folder", made, e));
            }
        };
        let doomed = path.clone();
        let _on_exit = on_exit::register_after_stop(move |_| remove(&doomed));
        // In the run's note too, for the next run to remove should lockaudit be SIGKILLed.
        super::leftovers::scratch(&path);
        Ok(ScratchDir { path, _on_exit })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        remove(&self.path);
        super::leftovers::remove(&self.path);
    }
}

/// Removes `path` and what it holds. A server's last processes may still be exiting and
/// writing a file as the folder is emptied ("directory not empty"), so it tries again for
/// up to a second before saying what it leaves behind.
fn remove(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        match std::fs::remove_dir_all(path) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) if Instant::now() >= deadline => {
                crate::note!("lockaudit: cannot remove {}: {e}", path.display());
                return;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn it_is_private_and_gone_once_dropped() {
        let scratch = ScratchDir::create("test", |_| Ok::<(), String>(())).unwrap();
        let path = scratch.path().to_path_buf();
        assert!(path.is_absolute());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700);
        std::fs::create_dir(path.join("data")).unwrap();
        std::fs::write(path.join("data/file"), "x").unwrap();
        drop(scratch);
        assert!(!path.exists(), "{} is left", path.display());
    }

    #[test]
    fn a_base_no_one_may_reach_is_named() {
        let err = ScratchDir::create("test", |base| Err(format!("not {}", base.display())))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not /tmp"), "{err}");
    }
}
