//! Watching a run while it goes on: the online checker's thread takes the recorder's lines,
//! checks what has settled now and then, and sends each anomaly it proves to the controller,
//! which counts them for the progress bar and ends the run once `StopWhen` is met.

use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::sync::Notify;

use crate::checker::online::{OnlineChecker, Stopped};
use crate::checker::CheckOptions;
use crate::history::{HistoryError, RecordedLine};
use crate::report::{Anomaly, KindCounts, Report};
use crate::run_record::StopWhen;

/// The shortest time between two checks.
const MIN_INTERVAL: Duration = Duration::from_millis(250);

/// A check costs time in proportion to the history so far; waiting this many times as long
/// as the last one took before the next keeps the checker to a twentieth of a core, however
/// long the run, at the price of later reports in a long one.
const INTERVAL_PER_CHECK_TIME: u32 = 20;

/// What the thread leaves when the recorder has finished.
pub struct Finished {
    /// The verdict on every event, or the error of a line the format rejects.
    pub report: Result<Report, Stopped>,
    /// Events that came after a check had judged their time (`OnlineChecker::late_events`).
    pub late_events: u64,
}

/// The running checker: send it batches of the recorder's lines, then `finish`.
pub struct Online {
    lines: Sender<Vec<RecordedLine>>,
    thread: JoinHandle<Finished>,
}

impl Online {
    /// Starts the thread; anomalies go to `found` as they are proven.
    pub fn start(source: &str, options: CheckOptions, found: UnboundedSender<Anomaly>) -> Self {
        let (lines, received) = channel::<Vec<RecordedLine>>();
        // A run's reads and writes are its own clients': every write is an increment.
        let mut checker = OnlineChecker::new(source, options).increments_only();
        let thread = std::thread::spawn(move || {
            let mut interval = MIN_INTERVAL;
            let mut last_check = Instant::now();
            loop {
                let wait = interval.saturating_sub(last_check.elapsed());
                match received.recv_timeout(wait) {
                    Ok(batch) => {
                        let mut next = Some(batch);
                        while let Some(batch) = next {
                            for line in &batch {
                                checker.push(line);
                            }
                            next = received.try_recv().ok();
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => break,
                }
                if last_check.elapsed() >= interval {
                    let began = Instant::now();
                    for anomaly in checker.poll() {
                        let _ = found.send(anomaly);
                    }
                    interval = MIN_INTERVAL.max(began.elapsed() * INTERVAL_PER_CHECK_TIME);
                    last_check = Instant::now();
                }
            }
            let late_events = checker.late_events();
            Finished {
                report: checker.finish(),
                late_events,
            }
        });
        Online { lines, thread }
    }

    /// Where the recorder sends the lines it appended.
    pub fn lines(&self) -> Sender<Vec<RecordedLine>> {
        self.lines.clone()
    }

    /// Waits for the verdict on everything sent (every sender must be gone).
    pub fn finish(self) -> Finished {
        drop(self.lines);
        self.thread.join().unwrap_or_else(|_| Finished {
            report: Err(Stopped::Rejected(HistoryError::io(
                "the online checker",
                std::io::Error::other("its thread panicked"),
            ))),
            late_events: 0,
        })
    }
}

impl StopWhen {
    fn is_met(&self, found: &Found) -> bool {
        match self {
            StopWhen::Never => false,
            StopWhen::FirstAnomaly => !found.kinds.is_empty(),
            StopWhen::Found {
                kinds,
                inside_lease,
            } => {
                !kinds.is_empty()
                    && kinds.iter().all(|k| found.kinds.contains_key(k))
                    && (!inside_lease || found.overlap_inside_lease)
            }
        }
    }
}

/// The anomalies the online checker has proven so far, and whether they end the run.
#[derive(Default)]
pub struct Found {
    /// Kind -> how many.
    pub kinds: KindCounts,
    /// Whether an overlap began inside the earlier holder's lease (a later renewal can only
    /// lengthen a lease, so this holds in the final verdict too).
    pub overlap_inside_lease: bool,
    /// Set once `StopWhen` is met: what met it.
    pub proven: Option<String>,
}

/// Collects what the online checker proves; notifies `stop` once `stop_when` is met.
pub fn collect_found(
    mut found: UnboundedReceiver<Anomaly>,
    stop_when: StopWhen,
    state: Arc<Mutex<Found>>,
    stop: Arc<Notify>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(anomaly) = found.recv().await {
            let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
            *state.kinds.entry(anomaly.kind).or_default() += 1;
            state.overlap_inside_lease |= anomaly.lease_expired == Some(false);
            if state.proven.is_none() && stop_when.is_met(&state) {
                state.proven = Some(format!(
                    "{} on {} at {}",
                    anomaly.kind,
                    anomaly.key,
                    crate::units::fmt_time(anomaly.start)
                ));
                stop.notify_one();
            }
        }
    })
}
