//! The last-resort cleanups: Ctrl-C / SIGTERM / SIGHUP, and panics.

use std::io;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::leftovers;
use super::on_exit;
use super::registry::kill_all;

/// How long Ctrl-C waits for the work that needs the children (`on_exit`) before killing
/// them: fetching the logs on hosts is two SSH round trips, which took more than 2 s on a
/// loaded 2-core machine (CI with four test streams fetched none of five logs in 2 s), so
/// it gets the patience of any command on a host. A second Ctrl-C skips the wait.
const ON_EXIT_DEADLINE: Duration = super::ssh::COMMAND_TIMEOUT;

/// The signals that interrupt lockaudit.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Inside a runtime's context.
    fn register() -> io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next of them to arrive.
    async fn next(&mut self) -> Signal {
        tokio::select! {
            _ = self.int.recv() => Signal::SIGINT,
            _ = self.term.recv() => Signal::SIGTERM,
            _ = self.hup.recv() => Signal::SIGHUP,
        }
    }
}

/// Runs `work` in a thread named `name` until it is done or another signal arrives: None
/// once done (or if no thread could be started: nothing to wait for), else what reports the
/// work's end, still under way.
fn until_done_or_signalled(
    runtime: &tokio::runtime::Runtime,
    signals: &mut Signals,
    name: &str,
    work: impl FnOnce() + Send + 'static,
) -> Option<tokio::sync::oneshot::Receiver<()>> {
    let (done, ended) = tokio::sync::oneshot::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            work();
            let _ = done.send(());
        });
    if spawned.is_err() {
        return None;
    }
    runtime.block_on(async {
        let mut ended = ended;
        tokio::select! {
            _ = &mut ended => None,
            _ = signals.next() => Some(ended),
        }
    })
}

/// Installs, once per process, the two last-resort cleanups (guards' `Drop` is the first):
///
/// - SIGINT, SIGTERM, SIGHUP: the jobs registered in `on_exit` run (at most
///   [`ON_EXIT_DEADLINE`]; a second signal skips them), then every registered child is
///   resumed, SIGKILLed and reaped, the services' scratch folders removed (`leftovers`),
///   then the jobs registered with `on_exit::register_after_stop` (a run checks the history
///   recorded so far and writes its report marked interrupted; a second signal cuts them
///   short), then the temporary files of writes under way are removed (`outfile`), and the
///   process exits with 128 + the signal number (130 for Ctrl-C, 143 for SIGTERM). The
///   history is streamed and flushed as it is written, so exiting then loses nothing.
///   A signal after the command's verdict (`on_exit::give_verdict`) does none of this: the
///   command ends as its verdict says.
/// - A panic hook that does the same (without exiting) after the previous hook has printed
///   the message: a panic is a bug that voids the run, and with `panic = "abort"`, or a
///   panic in a thread that does not own the cluster, no `Drop` would end the servers.
///
/// The signals are watched by a dedicated thread with its own small tokio runtime, so this
/// works whether or not the caller runs inside a runtime. Children are also protected
/// against a SIGKILL of lockaudit itself by `PR_SET_PDEATHSIG`, which needs no handler.
///
/// A failure to install (the OS refusing a thread or a signal handler) is logged, not
/// returned: the guards and the parent-death signal still protect the run.
pub fn install_cleanup_handlers() {
    if let Err(err) = try_install_cleanup_handlers() {
        tracing::error!("cannot install the Ctrl-C and panic cleanup: {err}");
        crate::note!("lockaudit: cannot install the Ctrl-C and panic cleanup: {err}");
    }
}

fn try_install_cleanup_handlers() -> io::Result<()> {
    // A lock, not a flag: two threads racing here must not install two hooks.
    static INSTALLED: Mutex<bool> = Mutex::new(false);
    let mut installed = INSTALLED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if *installed {
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Registered here, before returning, so that a signal arriving right after is caught.
    let mut signals = {
        let _context = runtime.enter();
        Signals::register()?
    };
    std::thread::Builder::new()
        .name("lockaudit-signals".into())
        .spawn(move || {
            let signal = runtime.block_on(signals.next());
            // After the command's verdict a signal interrupts nothing: no child is left, and
            // the command ends as its verdict says. A second signal ends it at once, still
            // with the verdict's code.
            if let Some(code) = on_exit::verdict_or_begin_exit() {
                crate::note!(
                    "lockaudit: {} after the verdict: the run ends as its verdict says (exit \
                     {code}; interrupt again to exit now)",
                    signal.as_str()
                );
                on_exit::signalled_after_verdict();
                runtime.block_on(signals.next());
                crate::outfile::abandon_all();
                std::process::exit(code.into());
            }
            // First what needs the children alive (the logs on hosts, over ssh), bounded,
            // in a thread of its own: a second signal skips it.
            let mut skipped = None;
            if on_exit::any() {
                crate::note!(
                    "lockaudit: interrupted ({}): bringing the servers' logs back from the hosts \
                     (at most {}s; interrupt again to skip)",
                    signal.as_str(),
                    ON_EXIT_DEADLINE.as_secs()
                );
                skipped =
                    until_done_or_signalled(&runtime, &mut signals, "lockaudit-on-exit", || {
                        on_exit::run_all(Instant::now() + ON_EXIT_DEADLINE)
                    });
                if skipped.is_some() {
                    crate::note!("lockaudit: interrupted again: not waiting for the logs");
                }
            }
            let killed = kill_all(Duration::from_secs(3), true);
            // The servers' data a normal end would not keep either (etcd's WAL).
            let freed = leftovers::remove_scratch();
            if freed > 0 {
                crate::note!(
                    "lockaudit: removed the servers' data folders ({} MB), as a normal end does",
                    freed / 1_000_000
                );
            }
            if let Some(fetching) = skipped {
                // With the ssh connections gone the skipped jobs end at once, saying which
                // host keeps what: give them a moment to say it.
                runtime.block_on(async {
                    let _ = tokio::time::timeout(Duration::from_secs(2), fetching).await;
                });
            }
            match killed {
                0 => crate::note!("lockaudit: interrupted ({})", signal.as_str()),
                _ => crate::note!(
                    "lockaudit: interrupted ({}); stopped {killed} child process(es)",
                    signal.as_str()
                ),
            }
            // Then what the command can save of its work (a run's report of the history
            // so far), in a thread of its own: a second signal ends the process at once.
            let name = signal.as_str();
            let cut =
                until_done_or_signalled(&runtime, &mut signals, "lockaudit-interrupted", || {
                    on_exit::run_after_stop(name)
                });
            if cut.is_some() {
                crate::note!("lockaudit: interrupted again: exiting at once");
            }
            // Nothing half written stays behind (the files under way are written under
            // temporary names, `outfile`).
            let removed = crate::outfile::abandon_all();
            if removed > 0 {
                crate::note!("lockaudit: removed {removed} partly written file(s)");
            }
            std::process::exit(128 + signal as i32);
        })?;

    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        let killed = kill_all(Duration::from_secs(2), false);
        if killed > 0 {
            crate::note!("lockaudit: panic; stopped {killed} child process(es)");
        }
    }));
    *installed = true;
    Ok(())
}
