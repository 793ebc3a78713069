//! The compact record the simulator emits (no heap allocation per event), and how it becomes
//! an `Event`.

use serde_json::json;

use crate::history::{Event, EventType};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Acquire,
    Release,
    Renew,
    Read,
    Write,
    Kill,
}

impl Op {
    pub(super) fn name(self) -> &'static str {
        match self {
            Op::Acquire => "acquire",
            Op::Release => "release",
            Op::Renew => "renew",
            Op::Read => "read",
            Op::Write => "write",
            Op::Kill => "kill",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Val {
    None,
    /// `{"lease_ms": .., "token": ..}`
    Acquire {
        token: Option<i64>,
        lease: Option<i64>,
    },
    /// `{"reason": "held by another client"}`
    Held,
    /// `{"lease_ms": ..}`
    Renew {
        lease: i64,
    },
    /// `{"token": .., "value": ..}`
    Write {
        token: Option<i64>,
        value: i64,
    },
    /// `{"value": ..}`
    Read {
        value: Option<i64>,
    },
    /// The nemesis kill of `pid`, the client of slot `slot`.
    Kill {
        slot: u32,
        pid: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Why {
    None,
    Killed,
    Timeout,
    Expired,
}

impl Why {
    pub(super) fn message(self) -> Option<&'static str> {
        match self {
            Why::None => None,
            Why::Killed => Some("killed"),
            Why::Timeout => Some("timeout"),
            Why::Expired => Some("lock not held by us (lease expired)"),
        }
    }
}

pub(super) const HELD_REASON: &str = "held by another client";

#[derive(Debug, Clone, Copy)]
pub(super) struct Rec {
    pub(super) time: i64,
    pub(super) pid: u64,
    /// Whose stream the event belongs to, for the shuffled merge: a slot, the nemesis or the
    /// final reader.
    pub(super) stream: u32,
    pub(super) ty: EventType,
    pub(super) op: Op,
    pub(super) key: u32,
    pub(super) val: Val,
    pub(super) why: Why,
}

impl Rec {
    pub(super) fn event(&self, index: u64, keys: &[String]) -> Event {
        if let Val::Kill { slot, pid } = self.val {
            let target = format!("worker-{slot}");
            return Event::nemesis(index, self.time, "kill", &[target.as_str()], &[pid]);
        }
        let mut event = Event::client(
            index,
            self.time,
            self.pid,
            self.ty,
            self.op.name(),
            &keys[self.key as usize],
        );
        event.value = match self.val {
            Val::None | Val::Kill { .. } => None,
            Val::Acquire { token, lease } => Some(json!({ "token": token, "lease_ms": lease })),
            Val::Held => Some(json!({ "reason": HELD_REASON })),
            Val::Renew { lease } => Some(json!({ "lease_ms": lease })),
            Val::Write { token, value } => Some(json!({ "token": token, "value": value })),
            Val::Read { value } => Some(json!({ "value": value })),
        };
        event.error = self.why.message().map(str::to_string);
        event
    }
}
