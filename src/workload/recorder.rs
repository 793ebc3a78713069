//! The recorder: merges the workers' event streams into `history.jsonl`.
//!
//! Events are appended in the order they arrive, numbered in sequence, and flushed after each
//! batch, so a controller killed mid-run still leaves a history that checks (at most its
//! last line cut short, which the reader forgives).

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::watch;

use crate::history::{Event, EventType, HistoryWriter, Process};

/// Live counts for the progress bar and the final summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub events: u64,
    pub acquisitions: u64,
    pub failed_acquires: u64,
    pub indeterminate: u64,
    /// The highest client process number seen, so that the controller's own final reads
    /// can use a number no client had.
    pub max_process: u64,
}

impl Counts {
    fn add(&mut self, event: &Event) {
        self.events += 1;
        if let Process::Client(p) = event.process {
            self.max_process = self.max_process.max(p);
        }
        match (event.f.as_str(), event.ty) {
            ("acquire", EventType::Ok) => self.acquisitions += 1,
            ("acquire", EventType::Fail) => self.failed_acquires += 1,
            (_, EventType::Info) if matches!(event.process, Process::Client(_)) => {
                self.indeterminate += 1
            }
            _ => {}
        }
    }
}

/// Appends events from `events` to `path` until every sender is gone; publishes counts.
pub async fn record(
    path: &Path,
    mut events: UnboundedReceiver<Event>,
    counts: watch::Sender<Counts>,
) -> std::io::Result<Counts> {
    let file = File::create(path)?;
    let mut writer = HistoryWriter::new(BufWriter::with_capacity(1 << 16, file));
    let mut tally = Counts::default();
    while let Some(mut event) = events.recv().await {
        tally.add(&event);
        writer.append(&mut event)?;
        while let Ok(mut event) = events.try_recv() {
            tally.add(&event);
            writer.append(&mut event)?;
        }
        writer.flush()?;
        counts.send_replace(tally);
    }
    writer.flush()?;
    Ok(tally)
}
