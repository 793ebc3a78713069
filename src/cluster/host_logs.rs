//! On Ctrl-C, what a normal end does with the servers on hosts, within the cleanup's
//! deadline: each server's log fetched into the run folder (`redis/<name>.log`), one SSH
//! command per host, all hosts at once; then the run's folder removed from each host whose
//! logs all came back (after every fetch: hosts may share a file system, as the namespace
//! test bed's do). Where that cannot be done in time, stderr says where the run's folder is
//! left on which host. The servers themselves die with the ssh sessions once the cleanup
//! kills them.

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use super::on_exit::{self, Registration};
use super::ssh::Ssh;
use super::ClusterError;
use crate::shell::quote;

/// The command that removes the run's folder `remote_dir` from a host, and the private
/// folder beside it that holds a database's data (owned by the database's user, who must
/// reach it where the run's folder is the login user's alone).
pub(super) fn remove_command(remote_dir: &str) -> String {
    format!(
        "rm -rf {} {}",
        crate::shell::quote(remote_dir),
        crate::shell::quote(&scratch_dir(remote_dir))
    )
}

/// The private folder beside the run's folder on a host (`remove_command`).
pub(super) fn scratch_dir(remote_dir: &str) -> String {
    format!("{remote_dir}-scratch")
}

/// One server's log on its host.
#[derive(Debug, Clone)]
pub struct HostLog {
    pub ssh: Arc<Ssh>,
    /// `master-0`: the local file is `<name>.log`.
    pub name: String,
    /// Its path on the host.
    pub path: String,
}

/// Registers the Ctrl-C job for the logs of `logs`, the run's folder `remote_dir` on each
/// of `hosts`, and the local folder `local` (`<run>/redis`).
pub fn on_interrupt(
    logs: Vec<HostLog>,
    hosts: Vec<Arc<Ssh>>,
    remote_dir: String,
    local: PathBuf,
) -> Registration {
    on_exit::register(move |deadline| rescue(&logs, &hosts, &remote_dir, &local, deadline))
}

/// The command for one host: each log's size on a line, then that many bytes of it (the
/// server may still write to it); it fails at the first log missing.
fn script(paths: &[&str]) -> String {
    let files: Vec<String> = paths.iter().map(|p| quote(p)).collect();
    format!(
        "for f in {}; do s=$(wc -c < \"$f\") || exit 1; echo \"$s\"; head -c \"$s\" \"$f\" || \
         exit 1; done",
        files.join(" ")
    )
}

/// Splits what [`script`] printed into the logs, in order; None if it is cut short.
fn split(mut out: &[u8], count: usize) -> Option<Vec<Vec<u8>>> {
    let mut logs = Vec::new();
    for _ in 0..count {
        let eol = out.iter().position(|b| *b == b'\n')?;
        let size: usize = std::str::from_utf8(&out[..eol]).ok()?.trim().parse().ok()?;
        let rest = &out[eol + 1..];
        logs.push(rest.get(..size)?.to_vec());
        out = &rest[size..];
    }
    Some(logs)
}

fn rescue(logs: &[HostLog], hosts: &[Arc<Ssh>], remote_dir: &str, local: &Path, by: Instant) {
    let fetched = fetch(logs, hosts, local, by);
    let rm = remove_command(remote_dir);
    let complete: Vec<bool> = fetched.iter().map(|f| matches!(f, Some(Ok(_)))).collect();
    let removed = each_host(hosts, by, move |i, ssh| {
        complete[i].then(|| {
            ssh.run("remove the run folder", &rm)
                .map(|_| 0)
                .map_err(HostLogError::Ssh)
        })
    });
    let count: usize = fetched.iter().flatten().flatten().sum();
    crate::note!(
        "lockaudit: interrupted; fetched {count} of {} logs from the hosts into {}",
        logs.len(),
        local.display()
    );
    for (i, ssh) in hosts.iter().enumerate() {
        let why = match (&fetched[i], &removed[i]) {
            (Some(Ok(_)), Some(Ok(_))) => continue,
            (Some(Err(e)), _) | (_, Some(Err(e))) => e.to_string(),
            _ => "no answer in time".into(),
        };
        crate::note!(
            "lockaudit: the run's folder is left on {}: {remote_dir} ({why})",
            ssh.target()
        );
    }
}

/// Why a host's logs did not all come back, or its run folder stayed on it.
#[derive(Debug, thiserror::Error)]
pub(super) enum HostLogError {
    #[error(transparent)]
    Ssh(ClusterError),
    #[error("a log was cut short")]
    CutShort,
    #[error("{}: {error}", path.display())]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// Each host's logs into `local`, all hosts at once: per host, how many, or why not.
pub(super) fn fetch(
    logs: &[HostLog],
    hosts: &[Arc<Ssh>],
    local: &Path,
    by: Instant,
) -> Vec<Option<Result<usize, HostLogError>>> {
    let (logs, local) = (logs.to_vec(), local.to_path_buf());
    each_host(hosts, by, move |_, ssh| {
        let mine: Vec<&HostLog> = logs.iter().filter(|l| Arc::ptr_eq(&l.ssh, ssh)).collect();
        let paths: Vec<&str> = mine.iter().map(|l| l.path.as_str()).collect();
        let out = match ssh.run_bytes("bring the logs back", &script(&paths)) {
            Ok(out) => out,
            Err(e) => return Some(Err(HostLogError::Ssh(e))),
        };
        let Some(texts) = split(&out, mine.len()) else {
            return Some(Err(HostLogError::CutShort));
        };
        for (log, text) in mine.iter().zip(texts) {
            let path = local.join(format!("{}.log", log.name));
            if let Err(error) = crate::outfile::write(&path, text) {
                return Some(Err(HostLogError::Write { path, error }));
            }
        }
        Some(Ok(mine.len()))
    })
}

/// `work` for every host at once, each in a thread of its own (a host that does not
/// answer is left to die with the process); its outcome, or None if none by `by`.
fn each_host<R: Send + 'static>(
    hosts: &[Arc<Ssh>],
    by: Instant,
    work: impl Fn(usize, &Arc<Ssh>) -> Option<R> + Send + Sync + 'static,
) -> Vec<Option<R>> {
    let work = Arc::new(work);
    let (tx, rx) = mpsc::channel();
    for (i, ssh) in hosts.iter().enumerate() {
        let (ssh, tx, work) = (ssh.clone(), tx.clone(), work.clone());
        std::thread::spawn(move || {
            let _ = tx.send((i, work(i, &ssh)));
        });
    }
    let mut outcomes: Vec<Option<R>> = hosts.iter().map(|_| None).collect();
    for _ in hosts {
        let Some(left) = by.checked_duration_since(Instant::now()) else {
            break;
        };
        match rx.recv_timeout(left) {
            Ok((i, outcome)) => outcomes[i] = outcome,
            Err(_) => break,
        }
    }
    outcomes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_sends_each_log_by_size() {
        let s = script(&["/tmp/run x/master-0.log", "/tmp/run x/master-3.log"]);
        assert_eq!(
            s,
            "for f in '/tmp/run x/master-0.log' '/tmp/run x/master-3.log'; do \
             s=$(wc -c < \"$f\") || exit 1; echo \"$s\"; head -c \"$s\" \"$f\" || exit 1; done"
        );
    }

    #[test]
    fn output_splits_into_the_logs_and_a_short_one_is_refused() {
        let out = b"3\nab\n0\n5\nxy\nz\n";
        let logs = split(out, 3).unwrap();
        assert_eq!(
            logs,
            vec![b"ab\n".to_vec(), Vec::new(), b"xy\nz\n".to_vec()]
        );
        assert_eq!(split(b"9\nshort", 1), None);
        assert_eq!(split(b"", 1), None);
    }
}
