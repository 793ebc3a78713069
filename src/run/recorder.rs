//! The recorder: merges the workers' event streams into `history.jsonl`.
//!
//! Events are appended in the order they arrive, numbered in sequence, and flushed after each
//! batch, so a controller killed mid-run still leaves a history that checks (at most its
//! last line cut short, which the reader forgives). Once a signal has begun the shutdown,
//! no client's line is taken any more.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::watch;

use crate::history::{EventType, HistoryWriter, Process, RecordedLine};

/// Live counts for the progress bar and the final summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub events: u64,
    pub acquisitions: u64,
    pub failed_acquires: u64,
    /// Acknowledged (`ok`) and refused (`fail`) writes: what an optimistic lock, which
    /// acquires nothing, does.
    pub writes: u64,
    pub failed_writes: u64,
    pub indeterminate: u64,
    /// The highest client process number seen, so that the controller's own final reads
    /// can use a number no client had.
    pub max_process: u64,
}

impl Counts {
    pub(super) fn add(&mut self, process: Process, ty: EventType, f: &str) {
        self.events += 1;
        if let Process::Client(p) = process {
            self.max_process = self.max_process.max(p);
        }
        match (f, ty) {
            ("acquire", EventType::Ok) => self.acquisitions += 1,
            ("acquire", EventType::Fail) => self.failed_acquires += 1,
            ("write", EventType::Ok) => self.writes += 1,
            ("write", EventType::Fail) => self.failed_writes += 1,
            (_, EventType::Info) if matches!(process, Process::Client(_)) => {
                self.indeterminate += 1
            }
            _ => {}
        }
    }
}

impl Counts {
    /// What the clients got done: their acquisitions, or for an `optimistic` lock (it
    /// acquires nothing) their acknowledged writes; what it is called; and how many of those
    /// attempts failed.
    pub fn done(&self, optimistic: bool) -> (u64, &'static str, u64) {
        if optimistic {
            (self.writes, "writes", self.failed_writes)
        } else {
            (self.acquisitions, "acquisitions", self.failed_acquires)
        }
    }

    /// For the progress bar and lines: "1012 acquisitions, 3 failed, 0 indeterminate".
    pub fn progress(&self, optimistic: bool) -> String {
        let (done, what, failed) = self.done(optimistic);
        format!(
            "{done} {what}, {failed} failed, {} indeterminate",
            self.indeterminate
        )
    }
}

/// Counts one line and appends it, renumbered; returns whether it was. Its text is in the
/// writer's layout (`RecordedLine`), written as it is; were it not, it is reported and
/// dropped.
fn append(
    writer: &mut HistoryWriter<BufWriter<File>>,
    tally: &mut Counts,
    line: &RecordedLine,
) -> std::io::Result<bool> {
    if !writer.append_line(line.text())? {
        tracing::warn!(
            "dropped a line in no layout the writer knows: {}",
            line.text()
        );
        return Ok(false);
    }
    tally.add(line.process(), line.ty(), line.f());
    Ok(true)
}

/// Appends event lines from `lines` to `path` until every sender is gone; publishes counts.
pub async fn record(
    path: &Path,
    lines: UnboundedReceiver<RecordedLine>,
    counts: watch::Sender<Counts>,
) -> std::io::Result<Counts> {
    record_and_forward(path, lines, counts, None).await
}

/// `record`, which also hands the lines it appended, in the same order, to `forward` (the
/// online checker; it numbers them itself, as they are numbered in the file): all those of
/// one batch at once, since a send per line cost the recorder and the checker's thread a
/// wakeup each.
pub async fn record_and_forward(
    path: &Path,
    lines: UnboundedReceiver<RecordedLine>,
    counts: watch::Sender<Counts>,
    forward: Option<std::sync::mpsc::Sender<Vec<RecordedLine>>>,
) -> std::io::Result<Counts> {
    record_until(path, lines, counts, forward, crate::cluster::shutting_down).await
}

/// `record_and_forward`, which takes no client's line once `shutting_down` says so.
async fn record_until(
    path: &Path,
    mut lines: UnboundedReceiver<RecordedLine>,
    counts: watch::Sender<Counts>,
    forward: Option<std::sync::mpsc::Sender<Vec<RecordedLine>>>,
    shutting_down: impl Fn() -> bool,
) -> std::io::Result<Counts> {
    let file = File::create(path)?;
    let mut writer = HistoryWriter::new(BufWriter::with_capacity(1 << 16, file));
    let mut tally = Counts::default();
    let mut batch = Vec::new();
    while let Some(line) = lines.recv().await {
        let mut next = Some(line);
        while let Some(line) = next {
            next = lines.try_recv().ok();
            // From the signal on (Ctrl-C, SIGTERM), the clients' operations are no longer
            // the run's: their servers and workers are being stopped under them, and what
            // they say then ("broken pipe") is the shutdown's doing, not the lock's.
            if matches!(line.process(), Process::Client(_)) && shutting_down() {
                continue;
            }
            if append(&mut writer, &mut tally, &line)? && forward.is_some() {
                batch.push(line);
            }
        }
        writer.flush()?;
        counts.send_replace(tally);
        if let Some(forward) = &forward {
            if !batch.is_empty() {
                // A checker that stopped listening only stops seeing lines.
                let _ = forward.send(std::mem::take(&mut batch));
            }
        }
    }
    writer.flush()?;
    Ok(tally)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Event;

    #[tokio::test]
    async fn an_acquire_invoke_with_its_ttl_is_recorded_as_it_is_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (counts, _) = watch::channel(Counts::default());
        // As a worker writes them (`Event` serialised), numbered 0 by each worker.
        for mut event in [
            Event::client(0, 10, 3, EventType::Invoke, "acquire", "lock:0"),
            Event::client(0, 20, 3, EventType::Ok, "acquire", "lock:0"),
        ] {
            event.value = Some(if event.ty == EventType::Invoke {
                serde_json::json!({ "ttl_ms": 2000 })
            } else {
                serde_json::json!({ "token": null, "lease_ms": 2000 })
            });
            tx.send(RecordedLine::from_event(&event)).unwrap();
        }
        drop(tx);
        let tally = record(&path, rx, counts).await.unwrap();
        assert_eq!(tally.events, 2);
        assert_eq!(tally.acquisitions, 1);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["index"], 0);
        assert_eq!(lines[0]["value"], serde_json::json!({ "ttl_ms": 2000 }));
        assert_eq!(lines[1]["index"], 1);
        let history = crate::history::read_file(&path).expect("the reader accepts ttl_ms");
        assert_eq!(history.ops.len(), 2);
    }

    /// Once the shutdown has begun, a client's line is no longer taken (the nemesis's still
    /// is: its heals are the run's own).
    #[tokio::test]
    async fn no_client_line_is_recorded_once_the_shutdown_began() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (counts, mut seen) = watch::channel(Counts::default());
        let stopping = Arc::new(AtomicBool::new(false));
        let flag = stopping.clone();
        let recorder = tokio::spawn(async move {
            record_until(&path, rx, counts, None, move || flag.load(Ordering::SeqCst)).await
        });
        let invoke = Event::client(0, 10, 3, EventType::Invoke, "acquire", "lock:0");
        tx.send(RecordedLine::from_event(&invoke)).unwrap();
        seen.wait_for(|c| c.events == 1).await.unwrap();
        stopping.store(true, Ordering::SeqCst);
        let broken = Event::client(0, 20, 3, EventType::Info, "acquire", "lock:0");
        tx.send(RecordedLine::from_event(&broken)).unwrap();
        drop(tx);
        let tally = recorder.await.unwrap().unwrap();
        assert_eq!(
            tally.events, 1,
            "a client's line after the signal was recorded"
        );
        assert_eq!(tally.indeterminate, 0);
    }
}
