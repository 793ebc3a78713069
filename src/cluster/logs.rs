//! Reading a server's log file: only what this start wrote, and its tail for errors.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// A log file from the position it had when a process was started: the file is appended to
/// by every start of a node, and an old "Address already in use" must not fail a new start.
#[derive(Debug, Clone)]
pub struct LogCursor {
    path: PathBuf,
    start: u64,
}

impl LogCursor {
    /// Positioned at the current end of `path` (0 when it does not exist yet).
    pub fn at_end(path: &Path) -> Self {
        let start = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        LogCursor {
            path: path.to_path_buf(),
            start,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Everything written since the cursor (lossy UTF-8; empty if unreadable).
    pub fn since(&self) -> String {
        let mut bytes = Vec::new();
        if let Ok(mut file) = std::fs::File::open(&self.path) {
            if file.seek(SeekFrom::Start(self.start)).is_ok() {
                let _ = file.read_to_end(&mut bytes);
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The last `lines` non-empty lines written since the cursor, for error messages.
    pub fn tail(&self, lines: usize) -> String {
        let text = self.since();
        let kept: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        if kept.is_empty() {
            return "(the log is empty)".to_string();
        }
        kept[kept.len().saturating_sub(lines)..].join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_what_came_after_the_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        std::fs::write(&path, "old: Address already in use\n").unwrap();
        let cursor = LogCursor::at_end(&path);
        assert_eq!(cursor.tail(5), "(the log is empty)");
        std::fs::write(&path, "old: Address already in use\nnew 1\n\nnew 2\n").unwrap();
        assert_eq!(cursor.since(), "new 1\n\nnew 2\n");
        assert_eq!(cursor.tail(1), "new 2");
        assert_eq!(cursor.tail(10), "new 1\nnew 2");
    }
}
