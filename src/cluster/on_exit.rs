//! Work the Ctrl-C cleanup does before it kills the children, because it needs them alive:
//! the servers' logs on other hosts come back over the ssh connections, which die with the
//! other children. Each job gets a deadline and runs in a thread of its own; the cleanup
//! waits for them no longer than that, so an unreachable host cannot hold lockaudit up.
//! And the work it does after (`register_after_stop`), and the command's verdict, after
//! which a signal interrupts nothing (`give_verdict`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

type Job = Arc<dyn Fn(Instant) + Send + Sync>;
/// Work after the children are stopped, given the signal's name ("SIGINT").
type AfterJob = Arc<dyn Fn(&'static str) + Send + Sync>;

static JOBS: Mutex<BTreeMap<u64, Job>> = Mutex::new(BTreeMap::new());
static AFTER: Mutex<BTreeMap<u64, AfterJob>> = Mutex::new(BTreeMap::new());
static NEXT: AtomicU64 = AtomicU64::new(0);

/// A registered job; dropping it unregisters it (its owner ended normally).
#[derive(Debug)]
pub struct Registration(u64);

/// Registers `job`, run once on Ctrl-C (SIGINT, SIGTERM, SIGHUP) with the time it must be
/// done by.
pub fn register(job: impl Fn(Instant) + Send + Sync + 'static) -> Registration {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    JOBS.lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, Arc::new(job));
    Registration(id)
}

/// Registers `job`, run on Ctrl-C (SIGINT, SIGTERM, SIGHUP) once every child is stopped,
/// with the signal's name: what the command can still save of its work (a run's report of
/// the history recorded so far). It has no deadline of its own; a second signal ends the
/// process at once.
pub fn register_after_stop(job: impl Fn(&'static str) + Send + Sync + 'static) -> Registration {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    AFTER
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, Arc::new(job));
    Registration(id)
}

impl Drop for Registration {
    fn drop(&mut self) {
        JOBS.lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.0);
        AFTER
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.0);
    }
}

/// Runs every `register_after_stop` job, one after the other, in this thread, the latest
/// registered first: an audit's cells (each run's report) before the audit's matrix,
/// which reads them.
pub fn run_after_stop(signal: &'static str) {
    let jobs: Vec<AfterJob> = AFTER
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .rev()
        .cloned()
        .collect();
    for job in jobs {
        job(signal);
    }
}

/// The command's exit code once its verdict is written (`lockaudit run`'s report.json):
/// from then on a signal interrupts nothing, and the command ends as its verdict says.
static VERDICT: Mutex<Option<u8>> = Mutex::new(None);

/// Writes the command's own verdict with `write`, unless a signal came first (lockaudit is
/// shutting down: the verdict is the interruption's, and None is returned). Once written,
/// a signal changes neither the verdict nor the exit, `code`: the two are decided under
/// one lock, so a signal is either before the verdict or after it.
pub fn give_verdict<E>(code: u8, write: impl FnOnce() -> Result<(), E>) -> Option<Result<(), E>> {
    let mut verdict = VERDICT.lock().unwrap_or_else(|p| p.into_inner());
    if super::shutting_down() {
        return None;
    }
    let written = write();
    if written.is_ok() {
        *verdict = Some(code);
    }
    Some(written)
}

/// For the signal handler: the command's exit code if its verdict is written; else
/// lockaudit is marked as shutting down (`registry::begin_exit`), under the same lock as
/// [`give_verdict`].
pub(super) fn verdict_or_begin_exit() -> Option<u8> {
    let verdict = VERDICT.lock().unwrap_or_else(|p| p.into_inner());
    if verdict.is_none() {
        super::registry::begin_exit();
    }
    *verdict
}

/// Set by the signal handler when a signal came after the verdict (the test hook below).
static SIGNALLED_AFTER_VERDICT: (Mutex<bool>, std::sync::Condvar) =
    (Mutex::new(false), std::sync::Condvar::new());

pub(super) fn signalled_after_verdict() {
    let (flag, signalled) = &SIGNALLED_AFTER_VERDICT;
    *flag.lock().unwrap_or_else(|p| p.into_inner()) = true;
    signalled.notify_all();
}

/// The environment variable of the test hook [`hold_after_verdict`].
pub const HOLD_AFTER_VERDICT_ENV: &str = "LOCKAUDIT_HOLD_AFTER_VERDICT";

/// A hook for tests only: with `LOCKAUDIT_HOLD_AFTER_VERDICT` set, the command holds right
/// after its verdict is written, saying so on stderr, until a signal arrives (at most 60 s),
/// so that a test can deliver one at that moment.
pub fn hold_after_verdict() {
    if std::env::var_os(HOLD_AFTER_VERDICT_ENV).is_none() {
        return;
    }
    crate::note!("lockaudit: {HOLD_AFTER_VERDICT_ENV}: holding after the verdict until a signal");
    let (flag, signalled) = &SIGNALLED_AFTER_VERDICT;
    let held = flag.lock().unwrap_or_else(|p| p.into_inner());
    let _ = signalled.wait_timeout_while(held, std::time::Duration::from_secs(60), |s| !*s);
}

/// Whether any job is registered (a run over hosts is under way).
pub fn any() -> bool {
    !JOBS.lock().unwrap_or_else(|p| p.into_inner()).is_empty()
}

/// Runs every job at once and returns when all are done or at `deadline`, whichever comes
/// first (a job still running is left to die with the process).
pub fn run_all(deadline: Instant) {
    let jobs: Vec<Job> = JOBS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .cloned()
        .collect();
    let (done_tx, done) = mpsc::channel();
    for job in &jobs {
        let (job, done_tx) = (job.clone(), done_tx.clone());
        std::thread::spawn(move || {
            job(deadline);
            let _ = done_tx.send(());
        });
    }
    for _ in &jobs {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return;
        };
        if done.recv_timeout(left).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    #[test]
    fn jobs_run_until_unregistered_and_a_slow_one_does_not_hold_the_exit() {
        static RAN: AtomicUsize = AtomicUsize::new(0);
        let quick = register(|_| {
            RAN.fetch_add(1, Ordering::SeqCst);
        });
        let (release, stuck) = mpsc::channel::<()>();
        let stuck = Mutex::new(stuck);
        let slow = register(move |_| {
            let _ = stuck.lock().unwrap().recv();
        });
        // Returns although the slow job never ends.
        run_all(Instant::now() + Duration::from_millis(200));
        assert_eq!(RAN.load(Ordering::SeqCst), 1);
        drop(quick);
        drop(release);
        drop(slow);
        run_all(Instant::now() + Duration::from_millis(200));
        assert_eq!(
            RAN.load(Ordering::SeqCst),
            1,
            "ran after it was unregistered"
        );
    }
}
