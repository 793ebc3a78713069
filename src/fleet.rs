//! The worker processes of a run, as the controller and the nemesis see them: start, kill,
//! pause, resume, restart, and send commands to `lockaudit worker` children.
//!
//! Each worker's stdout is pumped line by line to the recorder, each line parsed here once
//! (`RecordedLine`: what the recorder and the online checker read). On the way the pump
//! keeps a ledger of the worker's logical processes (which one is current in each slot, which
//! operation each has pending), because a killed worker cannot say what it was doing: the
//! controller then records a nemesis `kill` listing its processes and an `info` completion
//! (error "killed") for each pending operation, as docs/src/reference/history.md asks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, watch};

use crate::cluster;
use crate::history::{EventType, Process, RecordedLine};
use crate::nemesis::workers::{worker_name, Remains, WorkerState, Workers};
use crate::workload::controls::WorkerCommand;
use crate::workload::sink::WorkerNote;
use crate::workload::worker::WorkerConfig;

/// Why the fleet could not start a worker, or its clients could not start.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("cannot find the lockaudit binary: {0}")]
    NoBinary(std::io::Error),
    /// Workers are this program again: gone if it was rebuilt or removed meanwhile.
    #[error("cannot start a worker ({}): {error}", exe.display())]
    Spawn { exe: PathBuf, error: std::io::Error },
    /// The worker's `stdin` or `stdout` was not piped.
    #[error("a worker has no {0}")]
    NoPipe(&'static str),
    #[error("{0}")]
    Config(serde_json::Error),
    #[error("cannot configure a worker: {0}")]
    Configure(std::io::Error),
    #[error("cannot write the run folder {path}: {error}")]
    Io { path: String, error: std::io::Error },
    /// A client of the worker could not start: why, in the worker's words.
    #[error("{worker}: {why}")]
    NotReady { worker: String, why: String },
    #[error("{worker}'s clients were not ready within {secs} s")]
    ReadyTimeout { worker: String, secs: u64 },
    /// The worker ended first: its log and the log's last lines, on one line.
    #[error("{worker} ended before its clients were ready ({}: {tail})", log.display())]
    EndedBeforeReady {
        worker: String,
        log: PathBuf,
        tail: String,
    },
}

/// What the pump has seen of one worker's logical processes.
#[derive(Debug, Default)]
struct Ledger {
    /// Slot -> its current (not retired) process.
    current: BTreeMap<u64, u64>,
    /// Process -> (f, key) of its operation under way.
    pending: BTreeMap<u64, (String, String)>,
    /// The highest process number seen.
    max_process: Option<u64>,
    /// The worker's exit code once it ended on its own terms (None: running, or killed by a
    /// signal).
    exit_code: Option<i32>,
    /// The latest event time seen from the worker.
    last_event_ns: Option<i64>,
    /// When the worker said it was killing itself (a crash point).
    died_at_ns: Option<i64>,
    /// When its output ended (run ns): it was dead by then.
    exited_at_ns: Option<i64>,
    /// What it said of its clients' start: how many connected, or why one could not.
    ready: Option<Result<usize, String>>,
    /// When it stopped recording, at the run's stop (`WorkerNote::Stopped`).
    stopped_at_ns: Option<i64>,
}

impl Ledger {
    fn note(&mut self, line: &RecordedLine, total_slots: u64) {
        let time = line.time();
        self.last_event_ns = Some(self.last_event_ns.map_or(time, |t| t.max(time)));
        let Process::Client(process) = line.process() else {
            return;
        };
        self.max_process = Some(self.max_process.map_or(process, |m| m.max(process)));
        let slot = process % total_slots.max(1);
        match line.ty() {
            EventType::Invoke => {
                self.current.insert(slot, process);
                let key = line.key().unwrap_or_default().to_string();
                self.pending.insert(process, (line.f().to_string(), key));
            }
            EventType::Info => {
                self.pending.remove(&process);
                if self.current.get(&slot) == Some(&process) {
                    self.current.remove(&slot);
                }
            }
            EventType::Ok | EventType::Fail => {
                self.pending.remove(&process);
            }
        }
    }
}

struct Handle {
    config: WorkerConfig,
    state: WorkerState,
    pid: Option<u32>,
    stdin: Option<ChildStdin>,
    ledger: Arc<Mutex<Ledger>>,
    /// The worker's log as this start of it writes it, for the error if it cannot start.
    log: cluster::LogCursor,
    /// Changes whenever the pump notes something of the worker's start or stop; closed
    /// when the worker has exited.
    changes: watch::Receiver<()>,
    /// Pumps stdout, then waits for the child; ends when the process has exited.
    task: Option<tokio::task::JoinHandle<()>>,
}

/// A worker that died without being killed by the nemesis, found at the run's stop: for the
/// controller to record (a `kill` and an `info` for each pending operation), with why.
#[derive(Debug)]
pub struct Death {
    pub worker: usize,
    pub remains: Remains,
    pub cause: &'static str,
    /// The earliest it may have died (run ns), given how it was found.
    pub earliest_ns: i64,
}

/// The run's workers.
pub struct Fleet {
    dir: PathBuf,
    events: mpsc::UnboundedSender<RecordedLine>,
    /// Each worker's number is sent here when its process has exited (for whatever reason).
    exits: mpsc::UnboundedSender<usize>,
    workers: Vec<Handle>,
    /// The run's clock once it has started (`go`); the pumps time exits on it.
    base_ns: Arc<AtomicI64>,
}

impl Fleet {
    /// Starts one worker per config. Exits are announced on the returned receiver.
    pub async fn start(
        dir: &Path,
        configs: Vec<WorkerConfig>,
        events: mpsc::UnboundedSender<RecordedLine>,
    ) -> Result<(Fleet, mpsc::UnboundedReceiver<usize>), FleetError> {
        let (exits, exited) = mpsc::unbounded_channel();
        let mut fleet = Fleet {
            dir: dir.to_path_buf(),
            events,
            exits,
            workers: Vec::new(),
            base_ns: Arc::new(AtomicI64::new(0)),
        };
        for config in configs {
            let handle = fleet.spawn(config).await?;
            fleet.workers.push(handle);
        }
        Ok((fleet, exited))
    }

    pub fn pid(&self, worker: usize) -> Option<u32> {
        self.workers.get(worker).and_then(|w| w.pid)
    }

    /// The highest client process number any worker has used (None: none yet). Complete once
    /// `finish` has returned: every worker's output has been read by then.
    pub fn max_process(&self) -> Option<u64> {
        self.workers
            .iter()
            .filter_map(|w| lock(&w.ledger).max_process)
            .max()
    }

    async fn spawn(&self, config: WorkerConfig) -> Result<Handle, FleetError> {
        let exe = worker_exe()?;
        let log_path = self.dir.join(format!("worker-{}.log", config.worker));
        let log_cursor = cluster::LogCursor::at_end(&log_path);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|error| FleetError::Io {
                path: log_path.display().to_string(),
                error,
            })?;
        let mut command = Command::new(&exe);
        command
            .arg("worker")
            .arg("--run")
            .arg(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            // Its own process group, shared with the adapters it starts (external lock
            // clients): faults aimed at the worker reach them too.
            .process_group(0);
        // Registered as it is spawned, and refused once a Ctrl-C has begun the shutdown:
        // no worker starts after the cleanup has stopped the others.
        let mut child = cluster::spawn_foreign(|| command.spawn(), Child::id)
            .map_err(|error| FleetError::Spawn { exe, error })?;
        let pid = child.id();
        let mut stdin = child.stdin.take().ok_or(FleetError::NoPipe("stdin"))?;
        let line = serde_json::to_string(&config).map_err(FleetError::Config)? + "\n";
        stdin
            .write_all(line.as_bytes())
            .await
            .map_err(FleetError::Configure)?;
        let stdout = child.stdout.take().ok_or(FleetError::NoPipe("stdout"))?;
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let (changed, changes) = watch::channel(());
        let task = tokio::spawn(pump(
            child,
            stdout,
            Pumped {
                worker: config.worker,
                total_slots: config.total_slots,
                ledger: ledger.clone(),
                changed,
                base_ns: self.base_ns.clone(),
            },
            self.events.clone(),
            self.exits.clone(),
        ));
        Ok(Handle {
            config,
            state: WorkerState::Running,
            pid,
            // Stdin stays open: the worker stops when it closes, that is, when we are gone.
            stdin: Some(stdin),
            ledger,
            log: log_cursor,
            changes,
            task: Some(task),
        })
    }

    /// Waits until every worker has connected its clients (`WorkerConfig::await_go`), for
    /// at most `limit`. The error says which worker could not, and why: a client's own
    /// error, the worker's end, or the time it took.
    pub async fn await_ready(&mut self, limit: Duration) -> Result<(), FleetError> {
        let until = tokio::time::Instant::now() + limit;
        for (w, handle) in self.workers.iter_mut().enumerate() {
            let worker = worker_name(w);
            let waited = wait_for(handle, until, |ledger| ledger.ready.is_some()).await;
            let ready = lock(&handle.ledger).ready.clone();
            match (waited, ready) {
                (_, Some(Ok(_))) => {}
                (_, Some(Err(why))) => return Err(FleetError::NotReady { worker, why }),
                (Waited::TimedOut, None) => {
                    return Err(FleetError::ReadyTimeout {
                        worker,
                        secs: limit.as_secs(),
                    })
                }
                (_, None) => {
                    return Err(FleetError::EndedBeforeReady {
                        worker,
                        log: handle.log.path().to_path_buf(),
                        tail: handle.log.tail(5).replace('\n', " | "),
                    })
                }
            }
        }
        Ok(())
    }

    /// Starts every worker's clients on the run's clock, whose zero is `base_ns`. A worker
    /// restarted later starts at once, on the same clock.
    pub async fn go(&mut self, base_ns: i64) {
        self.base_ns.store(base_ns, Ordering::SeqCst);
        for w in 0..self.workers.len() {
            self.workers[w].config.base_ns = base_ns;
            self.workers[w].config.await_go = false;
            self.command(w, &WorkerCommand::Go { base_ns }).await;
        }
    }

    /// The run's clock, once `go` has started it.
    fn now_ns(&self) -> i64 {
        crate::clock::monotonic_ns() - self.base_ns.load(Ordering::SeqCst)
    }

    fn set_paused(&mut self, worker: usize, paused: bool) -> bool {
        let Some(handle) = self.workers.get_mut(worker) else {
            return false;
        };
        let (from, to, signal) = if paused {
            (WorkerState::Running, WorkerState::Paused, Signal::SIGSTOP)
        } else {
            (WorkerState::Paused, WorkerState::Running, Signal::SIGCONT)
        };
        if handle.state != from {
            return false;
        }
        let Some(pid) = handle.pid else { return false };
        match signal_group(pid, signal) {
            Some(Ok(())) => {
                handle.state = to;
                true
            }
            _ => false,
        }
    }

    /// Ends the run's workers, so that the history says what happened up to its last
    /// event: workers may first end on their own until `limit` from now (their clients stop
    /// at the deadline and finish the cycle under way); then every one still running stops
    /// recording (`WorkerCommand::Stop`) and says so, keeping its connections, and only
    /// when all have stopped are their inputs closed and their sessions ended. No client's
    /// session ends while another client is still recorded, whichever way the run stops.
    ///
    /// Returns the workers that died meanwhile (a crash point reached at the end, a worker
    /// that hung and was killed, one that crashed), for the controller to record.
    pub async fn finish(&mut self, limit: Duration) -> Vec<Death> {
        let until = tokio::time::Instant::now() + limit;
        for handle in &mut self.workers {
            if let Some(task) = handle.task.as_mut() {
                if tokio::time::timeout_at(until, &mut *task).await.is_ok() {
                    handle.task = None;
                }
            }
        }
        let mut deaths = Vec::new();
        // Those still running stop recording, all at once.
        for w in 0..self.workers.len() {
            if self.workers[w].task.is_some() {
                self.command(w, &WorkerCommand::Stop).await;
            }
        }
        let until = tokio::time::Instant::now() + STOP_PATIENCE;
        for w in 0..self.workers.len() {
            let handle = &mut self.workers[w];
            if handle.task.is_none() {
                continue;
            }
            let waited = wait_for(handle, until, |ledger| ledger.stopped_at_ns.is_some()).await;
            if waited == Waited::Ended {
                // Its pump has read all it wrote, and is reaping it. If it died before it
                // could stop (a crash point, a crash), that is recorded below.
                if let Some(task) = handle.task.take() {
                    let _ = task.await;
                }
            }
            if waited == Waited::TimedOut {
                // Hung (or still frozen): killed, and recorded as killed from the signal on.
                let earliest_ns = self.now_ns();
                tracing::warn!("{} did not stop recording; killing it", worker_name(w));
                let remains = Workers::kill(self, w).await;
                deaths.push(Death {
                    worker: w,
                    remains,
                    cause: "it did not stop when the run did, and was killed",
                    earliest_ns,
                });
            }
        }
        // Every worker that ended unasked is dead, whatever it left: record it.
        for w in 0..self.workers.len() {
            let handle = &self.workers[w];
            if handle.task.as_ref().is_some_and(|t| !t.is_finished())
                || matches!(handle.state, WorkerState::Dead | WorkerState::Finished)
            {
                continue;
            }
            let clean = {
                let ledger = lock(&handle.ledger);
                ledger.exit_code == Some(0) && ledger.died_at_ns.is_none()
            };
            if !clean {
                let earliest_ns = self.now_ns();
                let remains = Workers::reap(self, w).await;
                deaths.push(Death {
                    worker: w,
                    remains,
                    cause: "it died while the run was ending",
                    earliest_ns,
                });
            }
        }
        // Every worker has stopped recording or ended: now their connections may close.
        for handle in &mut self.workers {
            handle.stdin = None;
        }
        let until = tokio::time::Instant::now() + STOP_PATIENCE;
        for handle in &mut self.workers {
            if let Some(task) = handle.task.as_mut() {
                if tokio::time::timeout_at(until, &mut *task).await.is_err() {
                    if let Some(pid) = handle.pid {
                        let _ = signal_group(pid, Signal::SIGCONT);
                        let _ = signal_group(pid, Signal::SIGKILL);
                    }
                    let _ = task.await;
                }
            }
            handle.task = None;
            handle.stdin = None;
            if handle.state != WorkerState::Dead {
                handle.state = WorkerState::Finished;
            }
            if let Some(pid) = handle.pid.take() {
                cluster::unregister_child(pid);
            }
        }
        deaths
    }
}

/// How long a worker may take to stop recording, or to exit once its input closed.
const STOP_PATIENCE: Duration = Duration::from_secs(5);

/// How a wait on one worker came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waited {
    /// What was waited for holds of its ledger.
    Met,
    /// The worker ended (its output read to the end) before `met` was seen to hold; it may
    /// hold of what it wrote last.
    Ended,
    TimedOut,
}

/// Waits until `met` holds of the worker's ledger, the worker ends, or `until`.
async fn wait_for(
    handle: &mut Handle,
    until: tokio::time::Instant,
    met: impl Fn(&Ledger) -> bool,
) -> Waited {
    loop {
        if met(&lock(&handle.ledger)) {
            return Waited::Met;
        }
        match tokio::time::timeout_at(until, handle.changes.changed()).await {
            Ok(Ok(())) => {}
            // Closed: the pump has read everything the worker wrote (`met` may hold now).
            Ok(Err(_)) => return Waited::Ended,
            Err(_) => return Waited::TimedOut,
        }
    }
}

/// How the nemesis acts on the workers.
impl Workers for Fleet {
    type RestartError = FleetError;
    /// Resumes every paused worker (the run's end heals every fault).
    fn resume_all(&mut self) -> Vec<usize> {
        (0..self.workers.len())
            .filter(|&w| self.resume(w))
            .collect()
    }

    /// The run time (ns) at which clients stop starting cycles.
    fn deadline_ns(&self) -> i64 {
        self.workers
            .first()
            .map(|w| w.config.deadline_ns)
            .unwrap_or(i64::MAX)
    }
    fn len(&self) -> usize {
        self.workers.len()
    }
    fn state(&self, worker: usize) -> Option<WorkerState> {
        self.workers.get(worker).map(|w| w.state)
    }
    /// Whether the worker ended on purpose because its lock client cannot go on (an
    /// external adapter answered `error`): restarting it would only meet the same error.
    fn gave_up(&self, worker: usize) -> bool {
        self.workers.get(worker).is_some_and(|w| {
            lock(&w.ledger).exit_code == Some(crate::locks::external::EXIT_ADAPTER_ERROR)
        })
    }
    /// The adapter's message, from the last give-up line of the worker's log.
    fn gave_up_why(&self, worker: usize) -> Option<String> {
        let log = std::fs::read_to_string(self.dir.join(format!("worker-{worker}.log"))).ok()?;
        log.lines()
            .rev()
            .find_map(|l| l.strip_prefix(crate::locks::external::GIVE_UP_PREFIX))
            .map(str::to_string)
    }
    /// The worker's live logical processes (one per slot that has done anything).
    fn processes(&self, worker: usize) -> Vec<u64> {
        self.workers
            .get(worker)
            .map(|w| lock(&w.ledger).current.values().copied().collect())
            .unwrap_or_default()
    }
    /// SIGKILLs the worker (resuming it first if paused) and waits until everything it
    /// wrote has reached the recorder. Returns what it left behind, for the caller to record.
    async fn kill(&mut self, worker: usize) -> Remains {
        let Some(handle) = self.workers.get_mut(worker) else {
            return Remains::default();
        };
        if let Some(pid) = handle.pid {
            let _ = signal_group(pid, Signal::SIGCONT);
            let _ = signal_group(pid, Signal::SIGKILL);
        }
        self.reap(worker).await
    }
    /// Accounts for a worker whose process has exited (killed, or crashed on its own):
    /// waits for its output to drain and returns what it left behind. Idempotent: a worker
    /// already accounted for leaves nothing.
    async fn reap(&mut self, worker: usize) -> Remains {
        let Some(handle) = self.workers.get_mut(worker) else {
            return Remains::default();
        };
        if matches!(handle.state, WorkerState::Dead | WorkerState::Finished) {
            return Remains::default();
        }
        if let Some(task) = handle.task.take() {
            let _ = task.await;
        }
        handle.stdin = None;
        handle.state = WorkerState::Dead;
        if let Some(pid) = handle.pid.take() {
            cluster::unregister_child(pid);
        }
        let mut ledger = lock(&handle.ledger);
        let remains = Remains {
            processes: ledger.current.values().copied().collect(),
            pending: std::mem::take(&mut ledger.pending)
                .into_iter()
                .map(|(p, (f, key))| (p, f, key))
                .collect(),
            last_event_ns: ledger.last_event_ns,
            died_at_ns: ledger.died_at_ns,
            exited_at_ns: ledger.exited_at_ns,
        };
        ledger.current.clear();
        remains
    }
    /// Starts a dead worker again with the same slots and fresh process numbers. False if
    /// it was not dead (a crash was already followed by a restart).
    async fn restart(&mut self, worker: usize) -> Result<bool, FleetError> {
        let Some(handle) = self.workers.get(worker) else {
            return Ok(false);
        };
        if handle.state != WorkerState::Dead {
            return Ok(false);
        }
        let mut config = handle.config.clone();
        let max = lock(&handle.ledger).max_process;
        if let Some(max) = max {
            config.first_generation = max / config.total_slots.max(1) + 1;
        }
        let mut fresh = self.spawn(config).await?;
        // Keep the high-water mark, so a second restart also gets fresh numbers.
        lock(&fresh.ledger).max_process = max;
        std::mem::swap(&mut self.workers[worker], &mut fresh);
        Ok(true)
    }
    /// SIGSTOP: the worker's clients freeze mid-whatever, like a stop-the-world GC pause.
    fn pause(&mut self, worker: usize) -> bool {
        self.set_paused(worker, true)
    }
    /// SIGCONT.
    fn resume(&mut self, worker: usize) -> bool {
        self.set_paused(worker, false)
    }
    /// Whether the worker's output has ended (it exited), waiting up to `STOP_PATIENCE`.
    async fn ended(&mut self, worker: usize) -> bool {
        let Some(handle) = self.workers.get_mut(worker) else {
            return true;
        };
        let until = tokio::time::Instant::now() + STOP_PATIENCE;
        wait_for(handle, until, |_| false).await == Waited::Ended
    }
    /// Sends a command line to the worker (see `WorkerCommand`). False if it is not running.
    async fn command(&mut self, worker: usize, command: &WorkerCommand) -> bool {
        let Some(handle) = self.workers.get_mut(worker) else {
            return false;
        };
        let Some(stdin) = handle.stdin.as_mut() else {
            return false;
        };
        let Ok(line) = serde_json::to_string(command) else {
            return false;
        };
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .is_ok()
            && stdin.flush().await.is_ok()
    }
}

/// The environment variable naming the binary to run as `lockaudit worker` (default: this
/// very binary). Tests that drive a fleet from a test binary point it at lockaudit.
pub const WORKER_EXE_ENV: &str = "LOCKAUDIT_WORKER_EXE";

fn worker_exe() -> Result<PathBuf, FleetError> {
    if let Some(exe) = std::env::var_os(WORKER_EXE_ENV) {
        return Ok(PathBuf::from(exe));
    }
    std::env::current_exe().map_err(FleetError::NoBinary)
}

/// Signals a worker and its process group (the adapters it started): the worker through the
/// registry (so only while it is still our unreaped child), then the whole group. The group
/// is signalled only when the worker was, and its id cannot be reused while any member
/// lives. The result is the worker's.
fn signal_group(pid: u32, signal: Signal) -> Option<Result<(), nix::errno::Errno>> {
    let result = cluster::signal_child(pid, signal)?;
    if result.is_ok() {
        if let Ok(pgid) = i32::try_from(pid) {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), signal);
        }
    }
    Some(result)
}

fn lock(ledger: &Mutex<Ledger>) -> std::sync::MutexGuard<'_, Ledger> {
    ledger
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What the pump of one worker keeps up to date.
struct Pumped {
    worker: usize,
    total_slots: u64,
    ledger: Arc<Mutex<Ledger>>,
    /// Told of each note the worker writes; dropped (closed) when it has exited.
    changed: watch::Sender<()>,
    base_ns: Arc<AtomicI64>,
}

/// Copies the worker's event lines to the recorder, keeping the ledger; when its output
/// closes, waits for the process and announces the exit.
async fn pump(
    mut child: Child,
    stdout: tokio::process::ChildStdout,
    pumped: Pumped,
    events: mpsc::UnboundedSender<RecordedLine>,
    exits: mpsc::UnboundedSender<usize>,
) {
    let Pumped {
        worker,
        total_slots,
        ledger,
        changed,
        base_ns,
    } = pumped;
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(note) = WorkerNote::read(&line) {
            {
                let mut ledger = lock(&ledger);
                match note {
                    WorkerNote::Ready { clients } => ledger.ready = Some(Ok(clients)),
                    WorkerNote::NotReady { why } => ledger.ready = Some(Err(why)),
                    WorkerNote::Stopped { at_ns } => ledger.stopped_at_ns = Some(at_ns),
                    // Its last word before a crash point: its death time.
                    WorkerNote::Died { at_ns } => ledger.died_at_ns = Some(at_ns),
                }
            }
            changed.send_replace(());
            continue;
        }
        // Parsed here once: the ledger, the recorder and the online checker read the parse.
        let line = match RecordedLine::parse(line) {
            Ok(line) => line,
            Err(e) => {
                tracing::warn!("dropped a line of worker {worker} that is no event ({e})");
                continue;
            }
        };
        lock(&ledger).note(&line, total_slots);
        // A recorder that has stopped (it could not write) gets nothing more, but the
        // worker's output is still read to its end: a worker blocked on a full pipe would
        // only overrun the time limit and be blamed for it.
        let _ = events.send(line);
    }
    // Its output ended: it is dead or about to be.
    lock(&ledger).exited_at_ns =
        Some(crate::clock::monotonic_ns() - base_ns.load(Ordering::SeqCst));
    let status = child.wait().await;
    tracing::debug!("worker {worker} ended: {status:?}");
    if let Ok(status) = &status {
        lock(&ledger).exit_code = status.code();
    }
    drop(changed);
    let _ = exits.send(worker);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_follows_processes_and_pending_operations() {
        let mut ledger = Ledger::default();
        let lines = [
            r#"{"index":0,"time":1,"process":1,"type":"invoke","f":"acquire","key":"lock:0"}"#,
            r#"{"index":0,"time":2,"process":3,"type":"invoke","f":"acquire","key":"lock:0"}"#,
            r#"{"index":0,"time":3,"process":1,"type":"ok","f":"acquire","key":"lock:0","value":{"token":null,"lease_ms":100}}"#,
            r#"{"index":0,"time":4,"process":3,"type":"info","f":"acquire","key":"lock:0","error":"timeout"}"#,
            r#"{"index":0,"time":5,"process":1,"type":"invoke","f":"read","key":"lock:0"}"#,
        ];
        for line in lines {
            ledger.note(&RecordedLine::parse(line.into()).unwrap(), 4);
        }
        // Process 3 (slot 3) retired with its info; process 1 (slot 1) is current.
        assert_eq!(
            ledger.current.values().copied().collect::<Vec<_>>(),
            vec![1]
        );
        assert_eq!(
            ledger.pending.get(&1),
            Some(&("read".to_string(), "lock:0".to_string()))
        );
        assert_eq!(ledger.max_process, Some(3));
        // The worker died after its latest event: a kill is timed no earlier.
        assert_eq!(ledger.last_event_ns, Some(5));
        // A line in another layout is read too (rewritten in the writer's).
        let line =
            r#"{"type":"invoke","f":"release","key":"lock:1","process":6,"time":9,"index":0}"#;
        ledger.note(&RecordedLine::parse(line.into()).unwrap(), 4);
        assert_eq!(
            ledger.pending.get(&6),
            Some(&("release".to_string(), "lock:1".to_string()))
        );
        assert_eq!(ledger.current.get(&2), Some(&6));
    }
}
