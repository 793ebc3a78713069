//! The worker's outgoing events.

use std::io::Write;
use std::sync::Mutex;

use tokio::sync::Notify;

use crate::history::Event;

/// The worker's outgoing events: clients push, the writer task drains to stdout. A plain
/// buffer rather than a channel so that a client about to crash the worker on purpose can
/// write out everything recorded before it (its own invoke included) first.
#[derive(Debug, Default)]
pub struct EventSink {
    buffer: Mutex<Vec<Event>>,
    ready: Notify,
}

impl EventSink {
    pub fn send(&self, event: Event) {
        self.buffer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event);
        self.ready.notify_one();
    }

    /// Waits until a client has pushed something.
    pub async fn ready(&self) {
        self.ready.notified().await;
    }

    fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.buffer.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Writes every buffered event to stdout and flushes.
    pub fn write_out(&self) -> std::io::Result<()> {
        let events = self.take();
        if events.is_empty() {
            return Ok(());
        }
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        for event in &events {
            serde_json::to_writer(&mut out, event)?;
            out.write_all(b"\n")?;
        }
        out.flush()
    }
}
