//! How a child process ended, as the registry reaps it and a guard reports it.

use std::fmt;

use nix::sys::signal::Signal;

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(Signal),
    /// Someone else reaped it (the Ctrl-C or panic cleanup), so the status is not known.
    Unknown,
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Code(code) => write!(f, "exit code {code}"),
            Exit::Signal(sig) => write!(f, "killed by {sig}"),
            Exit::Unknown => f.write_str("ended (status collected by the cleanup handler)"),
        }
    }
}
