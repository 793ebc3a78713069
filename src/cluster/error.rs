//! What can go wrong while starting, reaching or stopping the servers.

use std::io;
use std::path::PathBuf;

use nix::errno::Errno;
use nix::sys::signal::Signal;

use crate::fake_clock::FakeClockError;
use crate::topology::hosts::BadHost;

/// A cluster that could not be set up or driven.
///
/// The CLI maps every variant to exit code 3 ("the run could not be carried out") except
/// `InvalidSpec`, `BadHost`, `UnknownNode` and `Unsupported`, which are bad input (exit 2): see
/// [`ClusterError::exit_code`].
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A binary is neither where the caller said nor on PATH.
    #[error(
        "{binary} not found {location}: install it with `apt-get install {package}` \
         (or pass --{binary} PATH)"
    )]
    MissingBinary {
        /// `redis-server` or `redis-sentinel`.
        binary: String,
        /// The Debian package that ships it.
        package: String,
        /// `on PATH`, or `at /the/path/given`.
        location: String,
    },

    /// PostgreSQL's `postgres` and `initdb` are not both installed where we looked.
    #[error(
        "postgres and initdb not found {location}: install them with \
         `apt-get install postgresql` (or set LOCKAUDIT_POSTGRES_BIN to the folder holding both)"
    )]
    MissingPostgres {
        /// `on PATH or in /usr/lib/postgresql/<version>/bin`, or `in /the/folder given`.
        location: String,
    },

    /// A lock service's server program (etcd) is not installed where we looked.
    #[error(
        "{program} not found {location}: install it with `apt-get install {package}` \
         (or set {env} to its path)"
    )]
    MissingService {
        program: String,
        package: String,
        /// `on PATH`, or `at /the/path (from $ENV)`.
        location: String,
        /// The environment variable naming the program.
        env: String,
    },

    /// A server's fake clock could not be set up (libfaketime missing) or written.
    #[error(transparent)]
    Clock(#[from] FakeClockError),

    /// A port the caller asked for is taken.
    #[error(
        "port {port} on 127.0.0.1, wanted for {node}, is already in use: choose another base \
         port or stop whatever listens there"
    )]
    PortInUse { node: String, port: u16 },

    /// The kernel would not hand out a loopback port.
    #[error("no free port on 127.0.0.1: {0}")]
    NoFreePort(#[source] io::Error),

    /// A server or sentinel exited, or did not become ready in time.
    #[error("{node} (port {port}) did not start: {reason}\nlast lines of {}:\n{tail}", log.display())]
    StartFailed {
        node: String,
        port: u16,
        reason: String,
        log: PathBuf,
        tail: String,
    },

    /// The Redis Cluster's nodes started but did not form a cluster in time.
    #[error("forming the Redis Cluster: {node} (127.0.0.1:{port}): {reason}")]
    Form {
        node: String,
        port: u16,
        reason: String,
    },

    /// The binary exists but could not be run.
    #[error("cannot run {}: {source}", binary.display())]
    Spawn {
        binary: PathBuf,
        #[source]
        source: io::Error,
    },

    /// A folder or file of the run could not be made or written.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// The spec asks for something impossible (zero masters, ports past 65535).
    #[error("invalid cluster: {0}")]
    InvalidSpec(String),

    /// A host's `ssh://` URL names no usable host.
    #[error(transparent)]
    BadHost(#[from] BadHost),

    /// No node of that name in this cluster.
    #[error("no node named `{0}` in this cluster")]
    UnknownNode(String),

    /// The node exists but cannot do that: a clock offset for a cluster started without
    /// fake clocks, or for storage or a sentinel; emptying a sentinel.
    #[error("cannot {action} {node}: {reason}")]
    Unsupported {
        action: &'static str,
        node: String,
        reason: String,
    },

    /// A host reached over SSH failed: the connection, a command, or a server started there.
    #[error("{host}: cannot {action}: {reason}")]
    Remote {
        /// `ssh://user@host`.
        host: String,
        action: String,
        reason: String,
    },

    /// A signal to a node could not be delivered.
    #[error(transparent)]
    Signal(#[from] SignalError),
}

impl ClusterError {
    /// The process exit code (docs/src/reference/exit-codes.md): 2 for bad input, 3 when the run could not
    /// be carried out.
    pub fn exit_code(&self) -> i32 {
        match self {
            ClusterError::InvalidSpec(_)
            | ClusterError::BadHost(_)
            | ClusterError::UnknownNode(_)
            | ClusterError::Unsupported { .. } => 2,
            _ => 3,
        }
    }

    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        ClusterError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// Why a lock server could not end its clients' sessions (`kill-session`). The reason is
/// in the words of the service's client library (each has its own error type).
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    #[error("{node}: cannot connect: {reason}")]
    Connect { node: String, reason: String },
    /// The request that lists or ends them failed: `CLIENT KILL`, `pg_terminate_backend`,
    /// `LeaseLeases`, `KILL CONNECTION 12`.
    #[error("{node}: {request}: {reason}")]
    Refused {
        node: String,
        request: String,
        reason: String,
    },
}

/// Why a signal could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    #[error("{name} (pid {pid}) is no longer running")]
    Gone { name: String, pid: u32 },
    #[error("cannot send {signal} to {name} (pid {pid}): {source}")]
    Failed {
        name: String,
        pid: u32,
        signal: Signal,
        source: Errno,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_libfaketime_is_a_run_that_could_not_be_carried_out() {
        let missing =
            crate::fake_clock::Libfaketime::find_in(Some("/nonexistent/libfaketime.so.1".into()))
                .unwrap_err();
        let text = missing.to_string();
        let err = ClusterError::from(missing);
        assert_eq!(err.to_string(), text);
        assert_eq!(err.exit_code(), 3);
    }

    #[test]
    fn a_bad_host_url_is_bad_input() {
        let bad = crate::topology::hosts::SshTarget::parse("ssh://-oProxyCommand=id").unwrap_err();
        let err = ClusterError::from(bad);
        assert_eq!(
            err.to_string(),
            "invalid cluster: host `ssh://-oProxyCommand=id`: the host must be a name or an IPv4 address"
        );
        assert_eq!(err.exit_code(), 2);
    }
}
