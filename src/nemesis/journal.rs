//! The nemesis's side of the history: the fault events it records, through the recorder's
//! channel, on the run's clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::clock::{wall_ms, RunClock};
use crate::history::{Event, EventType, RecordedLine};

use super::workers::Remains;

/// Records nemesis events into the history (through the recorder's channel).
#[derive(Clone)]
pub struct Journal {
    pub events: mpsc::UnboundedSender<RecordedLine>,
    pub clock: RunClock,
    /// How many faults took effect on the running workload (`acted`).
    acted: Arc<AtomicUsize>,
}

impl Journal {
    pub fn new(events: mpsc::UnboundedSender<RecordedLine>, clock: RunClock) -> Journal {
        Journal {
            events,
            clock,
            acted: Arc::default(),
        }
    }

    /// A fault of the plan took effect: a worker killed, paused or its clock moved, a server
    /// faulted, a link cut, a crash point reached (an armed one that no client reached did
    /// nothing). A run whose plan had faults to inject and none of which acted tested
    /// nothing about them.
    pub fn acted(&self) {
        self.acted.fetch_add(1, Ordering::SeqCst);
    }

    /// How many faults took effect so far.
    pub fn faults_acted(&self) -> usize {
        self.acted.load(Ordering::SeqCst)
    }
    /// A nemesis event: `f` with `{targets, processes, ...extra}`.
    pub fn fault(&self, f: &str, targets: &[String], processes: &[u64], extra: Map<String, Value>) {
        self.fault_at(self.clock.now(), f, targets, processes, extra);
    }

    /// A nemesis event that happened at `time` (run ns), earlier than now.
    pub fn fault_at(
        &self,
        time: i64,
        f: &str,
        targets: &[String],
        processes: &[u64],
        extra: Map<String, Value>,
    ) {
        let targets: Vec<&str> = targets.iter().map(String::as_str).collect();
        let mut event = Event::nemesis(0, time, f, &targets, processes);
        if let Some(Value::Object(value)) = event.value.as_mut() {
            value.extend(extra);
        }
        event.wall = Some(wall_ms());
        self.send(&event);
    }

    /// The `info` completions of a killed worker's pending operations, at its death.
    pub fn killed(&self, remains: &Remains, died_ns: i64) {
        for (process, f, key) in &remains.pending {
            let mut event = Event::client(0, died_ns, *process, EventType::Info, f, key);
            event.error = Some("killed".into());
            event.wall = Some(wall_ms());
            self.send(&event);
        }
    }

    fn send(&self, event: &Event) {
        let _ = self.events.send(RecordedLine::from_event(event));
    }
}
