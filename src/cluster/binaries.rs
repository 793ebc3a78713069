//! Finding redis-server and redis-sentinel: the path given by a flag, else PATH.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::error::ClusterError;

/// How to run a sentinel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SentinelBinary {
    /// `redis-sentinel CONFIG`.
    Sentinel(PathBuf),
    /// `redis-server CONFIG --sentinel`: the same program in sentinel mode, used when no
    /// `redis-sentinel` is installed (Debian ships it in a separate package).
    ServerInSentinelMode(PathBuf),
}

impl SentinelBinary {
    pub fn program(&self) -> &Path {
        match self {
            SentinelBinary::Sentinel(path) | SentinelBinary::ServerInSentinelMode(path) => path,
        }
    }
}

/// redis-server: `given` if set (a path, or a bare name looked up on PATH), else PATH.
pub fn redis_server(given: Option<&Path>) -> Result<PathBuf, ClusterError> {
    find("redis-server", "redis-server", given)
}

/// redis-sentinel: `given` if set; else `redis-sentinel` on PATH; else `server` in sentinel
/// mode.
pub fn redis_sentinel(given: Option<&Path>, server: &Path) -> Result<SentinelBinary, ClusterError> {
    if given.is_none() {
        if let Some(found) = on_path(Path::new("redis-sentinel"), std::env::var_os("PATH")) {
            return Ok(SentinelBinary::Sentinel(found));
        }
        return Ok(SentinelBinary::ServerInSentinelMode(server.to_path_buf()));
    }
    find("redis-sentinel", "redis-sentinel", given).map(SentinelBinary::Sentinel)
}

fn find(binary: &str, package: &str, given: Option<&Path>) -> Result<PathBuf, ClusterError> {
    let wanted = given.unwrap_or(Path::new(binary));
    let bare_name = wanted.components().count() == 1 && !wanted.is_absolute();
    let found = if bare_name {
        on_path(wanted, std::env::var_os("PATH"))
    } else {
        is_executable(wanted).then(|| wanted.to_path_buf())
    };
    found.ok_or_else(|| ClusterError::MissingBinary {
        binary: binary.to_string(),
        package: package.to_string(),
        location: if bare_name {
            if given.is_some() {
                format!("as `{}` on PATH", wanted.display())
            } else {
                "on PATH".to_string()
            }
        } else {
            format!("at {}", wanted.display())
        },
    })
}

fn on_path(name: &Path, path_var: Option<OsString>) -> Option<PathBuf> {
    let path_var = path_var?;
    std::env::split_paths(&path_var)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_path_names_the_package_and_the_flag() {
        let err = redis_server(Some(Path::new("/nonexistent/redis-server"))).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, ClusterError::MissingBinary { .. }));
        assert!(text.contains("apt-get install redis-server"), "{text}");
        assert!(text.contains("--redis-server PATH"), "{text}");
        assert!(text.contains("/nonexistent/redis-server"), "{text}");
    }

    #[test]
    fn bare_names_are_looked_up_on_the_given_path() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("fake-redis");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let found = on_path(Path::new("fake-redis"), Some(dir.path().as_os_str().into()));
        assert_eq!(found, Some(exe.clone()));
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(
            on_path(Path::new("fake-redis"), Some(dir.path().as_os_str().into())),
            None,
            "a file without the x bit is not a binary"
        );
    }
}
