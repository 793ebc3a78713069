//! The worker's outgoing events.

use std::io::Write;
use std::sync::Mutex;

use tokio::sync::Notify;

use crate::clock::RunClock;
use crate::history::writer::write_line;
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
///
/// Events are serialised as they are pushed, into one buffer of lines that the writer
/// writes with one `write` for all the events pushed since its last: a `write` per event
/// (stdout is line-buffered) was the worker's largest single cost.
#[derive(Debug, Default)]
pub struct EventSink {
    lines: Mutex<Vec<u8>>,
    ready: Notify,
}

impl EventSink {
    pub fn send(&self, event: &Event) {
        write_line(&mut self.lock(), event);
        self.ready.notify_one();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until a client has pushed something.
    pub async fn ready(&self) {
        self.ready.notified().await;
    }

    /// The lines pushed since the last take; `spare` (emptied) takes their place, so that
    /// the writer's two buffers are reused rather than allocated anew.
    fn take(&self, spare: Vec<u8>) -> Vec<u8> {
        let mut spare = spare;
        spare.clear();
        std::mem::replace(&mut *self.lock(), spare)
    }

    /// Writes out every buffered event, then a `DIED_AT` line with `clock`'s reading, and
    /// SIGKILLs this process while still holding stdout, so that no event of a later time
    /// can follow the line: the controller records the worker's death at that reading.
    pub fn write_out_and_die(&self, clock: RunClock) {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        let _ = out.write_all(&self.take(Vec::new()));
        let _ = writeln!(out, "{{\"{DIED_AT}\":{}}}", clock.now());
        let _ = out.flush();
        // SIGKILL, not abort: no core dump, no unwinding, exactly a crash.
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }

    /// Writes every buffered event to stdout and flushes; `spare` is an emptied buffer to
    /// swap in, and what is returned the one written (to pass as `spare` next time).
    pub fn write_out(&self, spare: Vec<u8>) -> std::io::Result<Vec<u8>> {
        let lines = self.take(spare);
        if !lines.is_empty() {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            out.write_all(&lines)?;
            out.flush()?;
        }
        Ok(lines)
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
