//! The process-wide registry of children, and the one thread that spawns them.
//!
//! - Every child is spawned by one long-lived thread with `PR_SET_PDEATHSIG = SIGKILL`. The
//!   kernel sends that signal when the *thread* that forked the child ends, not the process,
//!   so forking from a tokio worker or a test thread would kill servers when that thread
//!   exits; the spawner thread lives as long as the process, so children die exactly when
//!   lockaudit dies, even by SIGKILL.
//! - A pid is in the registry from spawn until it has been reaped, and it is signalled only
//!   while holding the registry lock. An unreaped child stays a zombie, so its pid cannot be
//!   reused: a signal sent through the registry never reaches a stranger.
//! - Children get their own process group, so a Ctrl-C in the terminal reaches lockaudit
//!   alone, which then tears down in order instead of racing its servers' own SIGINT exits.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex, MutexGuard, OnceLock, TryLockError};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use super::exit::Exit;
use super::leftovers;

/// A registered child.
struct Entry {
    /// For messages.
    name: String,
    /// Spawned here and reaped only through the registry. False for children spawned
    /// elsewhere (tokio workers) and announced with [`register_child`]: their owner reaps
    /// them, so the registry must check they are still unreaped before signalling.
    owned: bool,
    /// Its children must share its fate (postgres and its backends): SIGSTOP, SIGCONT and
    /// SIGKILL reach them too. See [`signal`].
    tree: bool,
}

/// Children spawned and not yet reaped, by pid.
struct Registry {
    children: BTreeMap<u32, Entry>,
    /// Set by the signal handler: the process is about to exit, spawn nothing more.
    closing: bool,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    children: BTreeMap::new(),
    closing: false,
});

/// Set with `Registry::closing`, before the Ctrl-C cleanup kills anything, and readable
/// without the lock (which the cleanup holds while it reaps): see [`shutting_down`].
static EXITING: AtomicBool = AtomicBool::new(false);

/// Whether lockaudit is shutting down (Ctrl-C, SIGTERM, SIGHUP): the cleanup handler is
/// killing every child and the process exits next. From then on a child that ends was
/// stopped by lockaudit itself, not by a fault: the nemesis must not record it as a kill,
/// and nothing may be started again (a spawn is refused anyway). The flag is set before the
/// first child is signalled, so whoever sees a child die of the cleanup sees it set.
pub fn shutting_down() -> bool {
    EXITING.load(Ordering::SeqCst)
}

/// Marks lockaudit as shutting down (see [`shutting_down`]) without killing anything yet:
/// from now on nothing is spawned, injected or recorded as a fault, while the Ctrl-C
/// cleanup still uses the children it needs (the ssh connections) before [`kill_all`].
pub fn begin_exit() {
    if let Some(mut reg) = try_registry(Duration::from_secs(1)) {
        reg.closing = true;
    }
    EXITING.store(true, Ordering::SeqCst);
}

/// The registry, even if a thread panicked while holding it: the map stays consistent
/// because every update is a single insert or remove.
fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The registry within `patience`, or None: the panic hook must not deadlock if the
/// panicking thread itself holds the lock.
fn try_registry(patience: Duration) -> Option<MutexGuard<'static, Registry>> {
    let deadline = Instant::now() + patience;
    loop {
        match REGISTRY.try_lock() {
            Ok(guard) => return Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => return Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(TryLockError::WouldBlock) => return None,
        }
    }
}

/// Pids of all registered children (for tests and diagnostics).
pub fn registered_pids() -> Vec<u32> {
    registry().children.keys().copied().collect()
}

fn nix_pid(pid: u32) -> Pid {
    // Pids come from the kernel via std::process::Child::id and always fit in i32.
    Pid::from_raw(pid as i32)
}

/// One non-blocking wait; Some when the child is gone (reaped now, or not ours anymore).
fn reap_now(pid: u32) -> Option<Exit> {
    match waitpid(nix_pid(pid), Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::Exited(_, code)) => Some(Exit::Code(code)),
        Ok(WaitStatus::Signaled(_, sig, _)) => Some(Exit::Signal(sig)),
        Ok(_) => None,
        // ECHILD: not our child any more (reaped elsewhere); nothing left to wait for.
        Err(Errno::ECHILD) => Some(Exit::Unknown),
        Err(_) => None,
    }
}

type SpawnReply = mpsc::Sender<io::Result<Child>>;

/// A spawn request: the command, its name, whether signals reach its children, the reply.
type SpawnRequest = (Command, String, bool, SpawnReply);

/// The channel to the spawner thread, started on first use.
fn spawner() -> &'static Mutex<mpsc::Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        let spawned = std::thread::Builder::new()
            .name("lockaudit-spawner".into())
            .spawn(move || {
                for (mut cmd, name, tree, reply) in rx {
                    let _ = reply.send(spawn_registered(&mut cmd, name, tree));
                }
            });
        if let Err(err) = spawned {
            // Without the thread every spawn reports this error (the sender's peer is gone).
            tracing::error!("cannot start the spawner thread: {err}");
        }
        Mutex::new(tx)
    })
}

/// Spawns under the registry lock, so that a cleanup running concurrently either sees the
/// new pid or refuses the spawn: no child can slip past a Ctrl-C.
fn spawn_registered(cmd: &mut Command, name: String, tree: bool) -> io::Result<Child> {
    let mut reg = registry();
    if reg.closing {
        return Err(io::Error::other("lockaudit is shutting down"));
    }
    let parent = std::process::id();
    // SAFETY: the hook runs in the forked child before exec and calls only umask, prctl
    // and getppid, all async-signal-safe; it allocates nothing (errors are plain errnos: a
    // malloc lock held by another thread at fork time would deadlock) and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            // What the servers write is this user's alone: a sentinel rewrites its config
            // (with the password) into a new file, Redis its data and log.
            nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
            // The parent may have died between fork and prctl: then no signal will come.
            if nix::unistd::getppid().as_raw() as u32 != parent {
                return Err(io::Error::from(Errno::ESRCH));
            }
            Ok(())
        });
    }
    cmd.process_group(0);
    let child = cmd.spawn()?;
    leftovers::child_started(child.id(), &name);
    reg.children.insert(
        child.id(),
        Entry {
            name,
            owned: true,
            tree,
        },
    );
    Ok(child)
}

/// Spawns `cmd` through the spawner thread and registers it as owned; with `tree`, its
/// children are paused, resumed and killed with it (see [`signal`]).
pub fn spawn(name: &str, cmd: Command, tree: bool) -> io::Result<Child> {
    let (reply_tx, reply_rx) = mpsc::channel();
    spawner()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .send((cmd, name.to_string(), tree, reply_tx))
        .map_err(|_| io::Error::other("the spawner thread is not running"))?;
    reply_rx
        .recv()
        .map_err(|_| io::Error::other("the spawner thread is not running"))?
}

/// Sends `signal` to `pid` if it is registered (not yet reaped); None if it is not.
///
/// A child spawned with `tree` passes SIGSTOP, SIGCONT and SIGKILL on to its children:
/// postgres's backends, each its own session leader, so that neither its process group
/// nor anything but their pids reach them. A pause of the postmaster alone would leave
/// every session answering, and a kill of it alone would leave backends holding its shared
/// memory (a restart then refuses to start). The parent is stopped first and resumed last,
/// so that while its children are signalled it can neither fork nor reap one (their pids
/// cannot be reused meanwhile). Other signals (SIGTERM) go to the parent only, which stops
/// its children in its own order. The result is the parent's.
pub fn signal(pid: u32, signal: Signal) -> Option<Result<(), Errno>> {
    let reg = registry();
    let entry = reg.children.get(&pid)?;
    if entry.tree {
        if let Some(result) = signal_tree(pid, signal) {
            return Some(result);
        }
    }
    Some(kill(nix_pid(pid), signal))
}

/// SIGSTOP, SIGCONT or SIGKILL to `pid` and its children, in an order that keeps the
/// children's pids ours (see [`signal`]); None for other signals.
fn signal_tree(pid: u32, signal: Signal) -> Option<Result<(), Errno>> {
    let children = |pid| super::procfs::children_of(pid).into_iter().map(nix_pid);
    match signal {
        Signal::SIGSTOP | Signal::SIGKILL => {
            let result = kill(nix_pid(pid), Signal::SIGSTOP);
            for child in children(pid) {
                let _ = kill(child, signal);
            }
            Some(if signal == Signal::SIGKILL {
                kill(nix_pid(pid), Signal::SIGKILL)
            } else {
                result
            })
        }
        Signal::SIGCONT => {
            for child in children(pid) {
                let _ = kill(child, signal);
            }
            Some(kill(nix_pid(pid), signal))
        }
        _ => None,
    }
}

/// Reaps `pid` if it has ended: Some(how) once it is gone (`Exit::Unknown` if the cleanup
/// reaped it first), None while it runs or is stopped.
pub fn try_reap(pid: u32) -> Option<Exit> {
    let mut reg = registry();
    if !reg.children.contains_key(&pid) {
        return Some(Exit::Unknown);
    }
    let exit = reap_now(pid);
    if exit.is_some() {
        reg.children.remove(&pid);
        leftovers::child_gone(pid);
    }
    exit
}

/// Announces a child spawned elsewhere (a worker from `tokio::process`), so that the
/// Ctrl-C handler and the panic hook kill it too. Its owner keeps reaping it; call
/// [`unregister_child`] once it has been waited for (the cleanup also skips a pid that is
/// no longer an unreaped child of ours, so a forgotten unregister cannot hit a stranger).
pub fn register_child(pid: u32) {
    let mut reg = registry();
    if !reg.children.contains_key(&pid) {
        leftovers::child_started(pid, "worker");
    }
    reg.children.entry(pid).or_insert(Entry {
        name: format!("child {pid}"),
        owned: false,
        tree: false,
    });
}

/// Spawns a child whose owner reaps it (a worker from `tokio::process`) under the registry
/// lock and announces it as [`register_child`] does, or refuses once lockaudit is shutting
/// down: a spawn racing the Ctrl-C cleanup either happens before it (and the cleanup kills
/// the child) or not at all. `spawn` must be quick (a fork and exec); `pid` names the child.
pub fn spawn_foreign<C>(
    spawn: impl FnOnce() -> io::Result<C>,
    pid: impl FnOnce(&C) -> Option<u32>,
) -> io::Result<C> {
    let mut reg = registry();
    if reg.closing {
        return Err(io::Error::other("lockaudit is shutting down"));
    }
    let child = spawn()?;
    if let Some(pid) = pid(&child) {
        if !reg.children.contains_key(&pid) {
            leftovers::child_started(pid, "worker");
        }
        reg.children.entry(pid).or_insert(Entry {
            name: format!("child {pid}"),
            owned: false,
            tree: false,
        });
    }
    Ok(child)
}

/// Forgets a child announced with [`register_child`].
pub fn unregister_child(pid: u32) {
    let mut reg = registry();
    if reg.children.get(&pid).is_some_and(|e| !e.owned) {
        reg.children.remove(&pid);
        leftovers::child_gone(pid);
    }
}

/// Whether `pid` is still a child of ours that nobody has reaped (alive or a zombie): only
/// then is its pid certainly not reused. Looks without reaping (`WNOWAIT`).
fn still_our_child(pid: u32) -> bool {
    use nix::sys::wait::{waitid, Id};
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    waitid(Id::Pid(nix_pid(pid)), flags).is_ok()
}

/// Resumes and SIGKILLs every registered child, then reaps them (waiting at most
/// `patience` in total). Returns how many were signalled. Used by the Ctrl-C handler
/// (`exiting`: the process ends next, so foreign children are reaped too, and no spawn is
/// allowed any more) and by the panic hook (the process may go on: foreign children are
/// left to their owner to reap). Guards whose child was reaped here later report
/// `Exit::Unknown`.
pub fn kill_all(patience: Duration, exiting: bool) -> usize {
    let Some(mut reg) = try_registry(patience) else {
        return 0;
    };
    if exiting {
        reg.closing = true;
        EXITING.store(true, Ordering::SeqCst);
    }
    reg.children
        .retain(|&pid, entry| entry.owned || still_our_child(pid));
    let pids: Vec<u32> = reg.children.keys().copied().collect();
    for (&pid, entry) in &reg.children {
        tracing::debug!(pid, name = %entry.name, "cleanup: killing");
        if entry.tree {
            let _ = signal_tree(pid, Signal::SIGKILL);
        }
        let _ = kill(nix_pid(pid), Signal::SIGCONT);
        let _ = kill(nix_pid(pid), Signal::SIGKILL);
    }
    if !exiting {
        reg.children.retain(|_, entry| entry.owned);
    }
    let deadline = Instant::now() + patience;
    while !reg.children.is_empty() && Instant::now() < deadline {
        let reaped: Vec<u32> = reg
            .children
            .keys()
            .copied()
            .filter(|&pid| reap_now(pid).is_some())
            .collect();
        for pid in reaped {
            reg.children.remove(&pid);
            leftovers::child_gone(pid);
        }
        if !reg.children.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    pids.len()
}
