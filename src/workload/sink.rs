//! The worker's outgoing events.

use std::io::Write;
use std::sync::Mutex;

use tokio::sync::Notify;

use crate::clock::RunClock;
use crate::history::Event;

/// The member of the one line that is no event: `{"died_at_ns": <run ns>}`, written by a
/// worker about to kill itself at a crash point (`EventSink::write_out_and_die`).
pub const DIED_AT: &str = "died_at_ns";

/// The reading of a `DIED_AT` line, or None for any other line.
pub fn died_at(line: &str) -> Option<i64> {
    let rest = line.strip_prefix("{\"")?.strip_prefix(DIED_AT)?;
    rest.strip_prefix("\":")?.strip_suffix('}')?.parse().ok()
}

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

    /// Writes out every buffered event, then a `DIED_AT` line with `clock`'s reading, and
    /// SIGKILLs this process while still holding stdout, so that no event of a later time
    /// can follow the line: the controller records the worker's death at that reading.
    pub fn write_out_and_die(&self, clock: RunClock) {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        for event in &self.take() {
            let _ = serde_json::to_writer(&mut out, event);
            let _ = out.write_all(b"\n");
        }
        let _ = writeln!(out, "{{\"{DIED_AT}\":{}}}", clock.now());
        let _ = out.flush();
        // SIGKILL, not abort: no core dump, no unwinding, exactly a crash.
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_death_line_reads_back_and_nothing_else_is_one() {
        assert_eq!(super::died_at(r#"{"died_at_ns":1234567}"#), Some(1_234_567));
        assert_eq!(super::died_at(r#"{"died_at_ns":x}"#), None);
        assert_eq!(
            super::died_at(r#"{"index":0,"time":1,"process":1,"type":"invoke","f":"acquire"}"#),
            None
        );
    }
}
