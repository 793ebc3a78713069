//! The compact, checkable form of a history.
//!
//! A history of ten million events must fit in about a gigabyte, so the checker does not keep
//! `Event`s. Each event becomes one 40-byte `Op`: strings (keys, processes, fault names) are
//! interned to dense ids and the payload is reduced to the integers the checks use. Faults are
//! rare and keep their details in `History::faults`.

/// Dense id of a client process (see `History::processes`) or `NEMESIS`.
pub type ProcessId = u32;
/// Dense id of a key (see `History::keys`).
pub type KeyId = u32;

pub const NEMESIS: ProcessId = u32::MAX;
pub const NO_KEY: KeyId = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum OpType {
    Invoke,
    Ok,
    Fail,
    Info,
}

impl OpType {
    pub fn is_completion(self) -> bool {
        self != OpType::Invoke
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum OpF {
    Acquire,
    Release,
    Renew,
    Read,
    Write,
    /// A nemesis fault; its details are in `History::faults[op.a]`.
    Fault,
}

impl OpF {
    pub fn name(self) -> &'static str {
        match self {
            OpF::Acquire => "acquire",
            OpF::Release => "release",
            OpF::Renew => "renew",
            OpF::Read => "read",
            OpF::Write => "write",
            OpF::Fault => "fault",
        }
    }

    pub fn from_client_name(name: &str) -> Option<OpF> {
        Some(match name {
            "acquire" => OpF::Acquire,
            "release" => OpF::Release,
            "renew" => OpF::Renew,
            "read" => OpF::Read,
            "write" => OpF::Write,
            _ => return None,
        })
    }
}

/// Which of an op's payload slots hold a value.
pub mod flags {
    /// `token` is set (acquire ok, write).
    pub const TOKEN: u8 = 1;
    /// `lease_ms` is set (acquire ok, renew ok).
    pub const LEASE: u8 = 2;
    /// `value` holds an integer (read ok, write).
    pub const INT_VALUE: u8 = 4;
    /// The value was JSON null (read ok of an empty resource).
    pub const NULL_VALUE: u8 = 8;
    /// The value was present but not an integer (the register check skips such keys).
    pub const OTHER_VALUE: u8 = 16;
    /// `ttl_ms` is set in `b` (acquire invoke: the ttl the client asked for).
    pub const TTL: u8 = 32;
    /// The acquire asked for a `shared` lock (acquire invoke).
    pub const SHARED: u8 = 64;
    /// The acquire asked for a lock that promises first-come-first-served order.
    pub const FAIR: u8 = 128;
}

/// One event, reduced to what the checks need. 40 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    pub time: i64,
    /// The fencing token, or the fault's position in `History::faults`.
    pub a: i64,
    /// `lease_ms` (acquire ok, renew ok), `ttl_ms` (acquire invoke) or the integer value
    /// (read ok, write).
    pub b: i64,
    /// The event's `index`: its position in the file.
    pub index: u32,
    pub process: ProcessId,
    pub key: KeyId,
    pub ty: OpType,
    pub f: OpF,
    pub flags: u8,
}

impl Op {
    pub fn token(&self) -> Option<i64> {
        (self.flags & flags::TOKEN != 0).then_some(self.a)
    }

    pub fn lease_ms(&self) -> Option<i64> {
        (self.flags & flags::LEASE != 0).then_some(self.b)
    }

    /// The ttl an acquire invoke asked for, ms.
    pub fn ttl_ms(&self) -> Option<i64> {
        (self.flags & flags::TTL != 0).then_some(self.b)
    }

    pub fn int_value(&self) -> Option<i64> {
        (self.flags & flags::INT_VALUE != 0).then_some(self.b)
    }

    pub fn is_client(&self) -> bool {
        self.process != NEMESIS
    }
}

/// A nemesis event with its details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub index: u32,
    pub time: i64,
    pub ty: OpType,
    /// The fault's name: `kill`, `pause`, `resume`, ...
    pub name: String,
    pub targets: Vec<String>,
    /// The client processes it affected (dense ids).
    pub processes: Vec<ProcessId>,
}

/// A validated history, its events ordered by (time, index).
#[derive(Debug, Default)]
pub struct History {
    pub ops: Vec<Op>,
    pub faults: Vec<Fault>,
    /// Dense key id -> the key's name.
    pub keys: Vec<String>,
    /// Dense process id -> the process number in the file.
    pub processes: Vec<u64>,
    /// Things the reader forgave, such as a truncated final line.
    pub warnings: Vec<String>,
}

impl History {
    pub fn key_name(&self, key: KeyId) -> &str {
        &self.keys[key as usize]
    }

    /// The process number as written in the file.
    pub fn process_number(&self, process: ProcessId) -> u64 {
        self.processes[process as usize]
    }

    /// The time of the first and last events (0, 0 for an empty history).
    pub fn time_span(&self) -> (i64, i64) {
        match (self.ops.first(), self.ops.last()) {
            (Some(first), Some(last)) => (first.time, last.time),
            _ => (0, 0),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_op_is_forty_bytes() {
        // The memory budget (100 bytes per event, all checks included) depends on this.
        assert_eq!(std::mem::size_of::<super::Op>(), 40);
    }
}
