//! What external lock clients' adapters said on stderr that a person must see: a crash or
//! an uncaught error's traceback in an `adapter-<process>.log` of the run folder. An
//! adapter that failed this way may have turned operations `info` or made the library
//! misbehave, and the verdict alone does not say so; the run names each such adapter with
//! the last lines of its trace, on stderr and in `report.json`'s warnings.

use std::path::Path;

/// How many lines of a trace are quoted: its last ones, which name the error.
const QUOTED_LINES: usize = 4;

/// One adapter log's trouble: the log's file name and the trace's last lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trouble {
    pub log: String,
    pub last_lines: Vec<String>,
}

impl Trouble {
    /// "adapter-12.log: a traceback: ... | OSError: [Errno 22] Invalid argument".
    pub fn text(&self) -> String {
        format!(
            "{}: a crash or uncaught error: {}",
            self.log,
            self.last_lines.join(" | ")
        )
    }
}

/// The adapter logs of `dir` that hold a trace, in the order of their process numbers.
pub fn troubles(dir: &Path) -> Vec<Trouble> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut logs: Vec<(u64, String)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let process = name
                .strip_prefix("adapter-")?
                .strip_suffix(".log")?
                .parse()
                .ok()?;
            Some((process, name))
        })
        .collect();
    logs.sort();
    logs.into_iter()
        .filter_map(|(_, name)| {
            let text = std::fs::read_to_string(dir.join(&name)).ok()?;
            trace(&text).map(|last_lines| Trouble {
                log: name,
                last_lines,
            })
        })
        .collect()
}

/// The last lines of the first trace in an adapter's stderr, if there is one: Python's
/// `Traceback (most recent call last):`, a Rust panic, or a Node error's stack (`    at `
/// lines after an error line).
fn trace(text: &str) -> Option<Vec<String>> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().position(|l| {
        l.starts_with("Traceback (most recent call last)")
            || l.contains("panicked at")
            || l.starts_with("Uncaught ")
    });
    let start = match start {
        Some(start) => start,
        // Node: an error line followed by its stack.
        None => lines
            .windows(2)
            .position(|w| w[1].trim_start().starts_with("at ") && w[0].contains("Error"))?,
    };
    // The trace runs to the first line after it that is neither indented nor part of it:
    // its last line names the error.
    let mut end = start + 1;
    while end < lines.len() {
        let line = lines[end];
        let part_of_it = line.starts_with(' ') || line.starts_with('\t') || end == start + 1;
        if !part_of_it {
            // Python's last line, the exception itself, is not indented.
            end += 1;
            break;
        }
        end += 1;
    }
    let trace = &lines[start..end.min(lines.len())];
    let quoted = trace[trace.len().saturating_sub(QUOTED_LINES)..]
        .iter()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    Some(quoted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_python_traceback_is_found_and_its_last_lines_quoted() {
        let log = "connecting\nTraceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n    time.sleep(0.2)\nOSError: [Errno 22] Invalid argument\nafter\n";
        let lines = trace(log).expect("a trace");
        assert_eq!(
            lines.last().unwrap(),
            "OSError: [Errno 22] Invalid argument"
        );
        assert!(lines.iter().any(|l| l == "time.sleep(0.2)"), "{lines:?}");
        assert!(!lines.iter().any(|l| l == "after"), "{lines:?}");
    }

    #[test]
    fn a_node_stack_and_a_rust_panic_are_found_and_a_quiet_log_is_not() {
        let node = "ready\nError: unable to achieve a quorum\n    at Redlock.acquire (x.js:1:2)\n    at main (y.js:3:4)\n";
        let lines = trace(node).expect("a node trace");
        assert!(
            lines.iter().any(|l| l.starts_with("Error: unable")),
            "{lines:?}"
        );
        let rust = "thread 'main' panicked at src/x.rs:3:5:\nboom\n";
        assert!(trace(rust).is_some());
        assert_eq!(trace("started\nlock acquired\nreleased\n"), None);
        // A warning that mentions an error, with no stack, is no crash.
        assert_eq!(trace("Error: retrying\nok\n"), None);
    }

    #[test]
    fn the_logs_of_a_run_folder_are_read_in_process_order() {
        let dir = tempfile::tempdir().unwrap();
        let trace = "Traceback (most recent call last):\n  File \"a.py\"\nValueError: x\n";
        std::fs::write(dir.path().join("adapter-12.log"), trace).unwrap();
        std::fs::write(dir.path().join("adapter-3.log"), trace).unwrap();
        std::fs::write(dir.path().join("adapter-4.log"), "fine\n").unwrap();
        std::fs::write(dir.path().join("worker-0.log"), trace).unwrap();
        let found = troubles(dir.path());
        let logs: Vec<&str> = found.iter().map(|t| t.log.as_str()).collect();
        assert_eq!(logs, ["adapter-3.log", "adapter-12.log"]);
        assert!(
            found[0].text().ends_with("ValueError: x"),
            "{}",
            found[0].text()
        );
    }
}
