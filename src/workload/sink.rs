//! The worker's outgoing events.

use std::io::Write;
use std::sync::Mutex;

use tokio::sync::Notify;

use crate::clock::RunClock;
use crate::history::writer::write_line;
use crate::history::Event;

/// What a worker tells the controller besides its events, one JSON line each on stdout
/// (externally tagged, so no line of it begins as an event line does).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerNote {
    /// Every client of the worker has connected (an adapter answered its `init`): the
    /// worker waits for `WorkerCommand::Go` before its clients start their cycles.
    Ready { clients: usize },
    /// A client could not connect: the run cannot be carried out, and this says why.
    NotReady { why: String },
    /// The worker took `WorkerCommand::Stop`: no event of it follows this line, and its
    /// clients keep their connections (and so their sessions' locks) until stdin closes.
    Stopped { at_ns: i64 },
    /// The worker's last word before it kills itself at a crash point
    /// (`EventSink::write_out_and_die`): the controller records its death at `at_ns`.
    Died { at_ns: i64 },
}

impl WorkerNote {
    /// The line to write, newline included.
    pub fn line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default() + "\n"
    }

    /// The note a line holds, or None for an event line (or anything else).
    pub fn read(line: &str) -> Option<WorkerNote> {
        let tagged = [
            "{\"ready\":",
            "{\"not_ready\":",
            "{\"stopped\":",
            "{\"died\":",
        ];
        if !tagged.iter().any(|t| line.starts_with(t)) {
            return None;
        }
        serde_json::from_str(line).ok()
    }
}

/// The worker's outgoing events: clients push, the writer task drains to stdout. A plain
/// buffer rather than a channel so that a client about to crash the worker on purpose can
/// write out everything recorded before it (its own invoke included) first.
///
/// Events are serialised as they are pushed, into one buffer of lines that the writer
/// writes with one `write` for all the events pushed since its last: a `write` per event
/// (stdout is line-buffered) was the worker's largest single cost.
///
/// Once `stop` has run, events are dropped: the worker has told the controller that nothing
/// of it follows.
#[derive(Debug, Default)]
pub struct EventSink {
    lines: Mutex<Vec<u8>>,
    ready: Notify,
    stopped: std::sync::atomic::AtomicBool,
}

impl EventSink {
    /// Buffers an event; false if the worker has stopped recording (`stop`), when the
    /// event is dropped. Decided under the buffer's lock, which `stop` takes too: an event
    /// is either written out before the `Stopped` note or not at all.
    pub fn send(&self, event: &Event) -> bool {
        let mut lines = self.lock();
        if self.stopped.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        write_line(&mut lines, event);
        drop(lines);
        self.ready.notify_one();
        true
    }

    /// Writes out every buffered event, then a `Stopped` note with `clock`'s reading; every
    /// event sent after this is dropped. Holds stdout throughout, so that no event line can
    /// follow the note.
    pub fn stop(&self, clock: RunClock) -> std::io::Result<()> {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        let lines = {
            let mut lines = self.lock();
            self.stopped
                .store(true, std::sync::atomic::Ordering::Relaxed);
            std::mem::take(&mut *lines)
        };
        out.write_all(&lines)?;
        let note = WorkerNote::Stopped { at_ns: clock.now() };
        out.write_all(note.line().as_bytes())?;
        out.flush()
    }

    /// Writes a note to stdout, after every event buffered so far.
    pub fn note(&self, note: &WorkerNote) -> std::io::Result<()> {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        out.write_all(&self.take(Vec::new()))?;
        out.write_all(note.line().as_bytes())?;
        out.flush()
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

    /// Writes out every buffered event, then a `Died` note with `clock`'s reading, and
    /// SIGKILLs this process while still holding stdout, so that no event of a later time
    /// can follow the line: the controller records the worker's death at that reading.
    ///
    /// A worker already stopped does not die: the controller counts on its sessions lasting
    /// until every worker has stopped recording.
    pub fn write_out_and_die(&self, clock: RunClock) {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        if self.stopped.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let _ = out.write_all(&self.take(Vec::new()));
        let died = WorkerNote::Died { at_ns: clock.now() };
        let _ = out.write_all(died.line().as_bytes());
        let _ = out.flush();
        // SIGKILL, not abort: no core dump, no unwinding, exactly a crash.
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }

    /// Writes every buffered event to stdout and flushes; `spare` is an emptied buffer to
    /// swap in, and what is returned the one written (to pass as `spare` next time).
    pub fn write_out(&self, spare: Vec<u8>) -> std::io::Result<Vec<u8>> {
        // stdout is taken before the buffer, as `stop` takes it: lines taken here are written
        // before any note that follows.
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        let lines = self.take(spare);
        if !lines.is_empty() {
            out.write_all(&lines)?;
            out.flush()?;
        }
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_worker_note_reads_back_and_an_event_line_is_none() {
        use super::WorkerNote;
        for note in [
            WorkerNote::Ready { clients: 4 },
            WorkerNote::NotReady {
                why: "client 3: cannot connect: \"refused\"".into(),
            },
            WorkerNote::Stopped { at_ns: 12 },
            WorkerNote::Died { at_ns: 1_234_567 },
        ] {
            let line = note.line();
            assert!(line.ends_with('\n'));
            assert_eq!(WorkerNote::read(line.trim_end()), Some(note));
        }
        let event = r#"{"index":0,"time":1,"process":1,"type":"invoke","f":"acquire"}"#;
        assert_eq!(WorkerNote::read(event), None);
        assert_eq!(WorkerNote::read(r#"{"ready":"#), None);
        assert_eq!(WorkerNote::read(r#"{"died":{"at_ns":x}}"#), None);
    }
}
