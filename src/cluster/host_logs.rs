//! On Ctrl-C, what a normal end does with the servers on hosts, within the cleanup's
//! deadline: each server's log fetched into the run folder (`redis/<name>.log`), and the
//! run's folder removed from each host whose logs all came back. Where that cannot be done
//! in time, stderr says where the run's folder is left on which host. The servers themselves
//! die with the ssh sessions once the cleanup kills them.

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use super::on_exit::{self, Registration};
use super::ssh::Ssh;
use crate::shell::quote;

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

fn rescue(logs: &[HostLog], hosts: &[Arc<Ssh>], remote_dir: &str, local: &Path, by: Instant) {
    // Every log at once; what is not back by the deadline counts as not fetched.
    let dir = local.to_path_buf();
    let fetched = parallel(logs.iter().cloned(), by, move |log: HostLog| {
        let text = log
            .ssh
            .run(
                &format!("read the log of {}", log.name),
                &format!("cat {}", quote(&log.path)),
            )
            .map_err(|e| e.to_string())?;
        let path = dir.join(format!("{}.log", log.name));
        std::fs::write(&path, text.stdout).map_err(|e| format!("{}: {e}", path.display()))
    });
    let missing = |ssh: &Arc<Ssh>| -> Vec<String> {
        logs.iter()
            .zip(&fetched)
            .filter(|(log, ok)| Arc::ptr_eq(&log.ssh, ssh) && !matches!(ok, Some(Ok(()))))
            .map(|(log, ok)| match ok {
                Some(Err(e)) => format!("{}: {e}", log.name),
                _ => format!("{}: no answer in time", log.name),
            })
            .collect()
    };
    let complete: Vec<Arc<Ssh>> = hosts
        .iter()
        .filter(|ssh| missing(ssh).is_empty())
        .cloned()
        .collect();
    let rm = format!("rm -rf {}", quote(remote_dir));
    let removed = parallel(complete.iter().cloned(), by, move |ssh: Arc<Ssh>| {
        ssh.run("remove the run folder", &rm)
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    let fetched_count = fetched.iter().filter(|f| matches!(f, Some(Ok(())))).count();
    eprintln!(
        "lockaudit: interrupted; fetched {fetched_count} of {} logs from the hosts into {}",
        logs.len(),
        local.display()
    );
    for ssh in hosts {
        let why = match complete.iter().position(|c| Arc::ptr_eq(c, ssh)) {
            Some(i) => match &removed[i] {
                Some(Ok(())) => continue,
                Some(Err(e)) => e.clone(),
                None => "no answer in time to remove it".into(),
            },
            None => missing(ssh).join("; "),
        };
        eprintln!(
            "lockaudit: the run's folder is left on {}: {remote_dir} ({why})",
            ssh.target()
        );
    }
}

/// `work` on each item in a thread of its own; each outcome, or None if not done by `by`.
fn parallel<T: Send + 'static, R: Send + 'static>(
    items: impl Iterator<Item = T>,
    by: Instant,
    work: impl Fn(T) -> R + Send + Sync + Clone + 'static,
) -> Vec<Option<R>> {
    let (tx, rx) = mpsc::channel();
    let mut count = 0;
    for (i, item) in items.enumerate() {
        let (tx, work) = (tx.clone(), work.clone());
        std::thread::spawn(move || {
            let _ = tx.send((i, work(item)));
        });
        count += 1;
    }
    let mut outcomes: Vec<Option<R>> = (0..count).map(|_| None).collect();
    for _ in 0..count {
        let Some(left) = by.checked_duration_since(Instant::now()) else {
            break;
        };
        match rx.recv_timeout(left) {
            Ok((i, outcome)) => outcomes[i] = Some(outcome),
            Err(_) => break,
        }
    }
    outcomes
}
