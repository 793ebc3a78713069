//! The two output streams. Standard output carries the verdict and what a program reads
//! (the summary, the run folder's path, `--json`); standard error carries progress, notices
//! and warnings. A reader that leaves early (`lockaudit run | head -1`) is no error: the
//! rest is simply not wanted, and the command still ends as its verdict says, its servers
//! stopped. (`println!` and `eprintln!` would panic on the closed pipe instead.)
//!
//! SIGPIPE stays ignored, as Rust starts every program: the controller also writes to its
//! workers' stdin, and a worker that died must not kill it. So a closed pipe shows up as
//! `BrokenPipe` here, and is let go.

use std::io::{self, Write};

/// Writes `text` to standard output. A reader that left is Ok; any other failure (a full
/// disk behind `> file`) is returned.
pub fn out(text: &str) -> io::Result<()> {
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Writes `text` to standard error. A failure is dropped: there is nowhere left to tell of
/// it.
pub fn err(text: &str) {
    let _ = io::stderr().lock().write_all(text.as_bytes());
}

/// A line on standard error, as `eprintln!` writes it, but never a panic when stderr is
/// closed (`lockaudit run 2>&1 | head -1`).
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::streams::err(&format!("{}\n", format_args!($($arg)*)))
    };
}
