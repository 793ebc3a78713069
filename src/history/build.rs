//! Turns events, in file order, into a validated compact `History`.
//!
//! Both the JSONL reader and the EDN importer feed this one builder, so the rules of
//! docs/src/reference/history.md are enforced in one place: the index sequence, one pending operation per
//! process, completions that match their invoke and come no earlier, retired processes that
//! stay retired, and per-process time order.

use rustc_hash::FxHashMap as HashMap;

use super::cache::prefetch_read;
use super::compact::{flags, Fault, History, KeyId, Op, OpF, OpType, ProcessId, NEMESIS, NO_KEY};
use super::error::HistoryError;
use super::event::{EventType, Process};
use super::key_table::KeyTable;

/// The shape of a payload's `value` field (a read's result or a write's argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ValueShape {
    #[default]
    Absent,
    Null,
    Int(i64),
    Other,
}

/// The payload members the builder may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    Token,
    LeaseMs,
    TtlMs,
    WaitMs,
    Mode,
    Fair,
    Targets,
    Processes,
}

/// A payload member present with a value of the wrong type: its field as the input names it,
/// and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct WrongMember {
    pub slot: Slot,
    pub field: String,
    pub message: String,
}

/// The parts of an event's `value` object the checks use. Each member is used only by the
/// events the format gives it a meaning for (`uses`):
///
/// | member | used by |
/// |---|---|
/// | `token` | acquire ok, write |
/// | `lease_ms` | acquire ok, renew ok |
/// | `ttl_ms`, `wait_ms`, `mode` (`shared`), `fair` | acquire invoke |
/// | `value` | read, write |
/// | `targets`, `processes` | nemesis |
///
/// Any other member is unknown to the event and ignored, whatever it holds. So the readers
/// do not judge members: they list a wrong one in `EventRef::wrong`, and the builder rejects
/// it only where the event uses it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Payload {
    pub token: Option<i64>,
    pub lease_ms: Option<i64>,
    pub ttl_ms: Option<i64>,
    pub shared: bool,
    pub fair: bool,
    pub value: ValueShape,
    pub targets: Vec<String>,
    pub processes: Vec<u64>,
}

impl WrongMember {
    pub fn note(list: &mut Vec<WrongMember>, slot: Slot, field: &str, message: String) {
        list.push(WrongMember {
            slot,
            field: field.to_string(),
            message,
        });
    }
}

/// Whether an event of this kind uses the member `slot` (see `Payload`).
fn uses(f: OpF, ty: OpType, slot: Slot) -> bool {
    match (f, ty) {
        (OpF::Fault, _) => matches!(slot, Slot::Targets | Slot::Processes),
        (OpF::Acquire, OpType::Invoke) => {
            matches!(slot, Slot::TtlMs | Slot::WaitMs | Slot::Mode | Slot::Fair)
        }
        (OpF::Acquire, OpType::Ok) => matches!(slot, Slot::Token | Slot::LeaseMs),
        (OpF::Renew, OpType::Ok) => slot == Slot::LeaseMs,
        (OpF::Write, _) => slot == Slot::Token,
        _ => false,
    }
}

/// One event as the readers hand it over, borrowing its strings.
#[derive(Debug, Clone)]
pub struct EventRef<'a> {
    pub index: u64,
    pub time: i64,
    pub process: Process,
    pub ty: EventType,
    pub f: &'a str,
    pub key: Option<&'a str>,
    pub payload: Payload,
    /// Payload members of the wrong type (`wait_ms` is only checked, so it is only here).
    /// Kept out of `Payload`, so that the fast path's events carry no list to drop.
    pub wrong: &'a [WrongMember],
}

/// A client event as `push_client` checks it: where it is, whose, what and on which key.
struct ClientEvent<'e> {
    line: u64,
    /// The process's number in the file, and its id.
    number: u64,
    process: ProcessId,
    f: OpF,
    key: KeyId,
    key_name: &'e str,
    time: i64,
}

/// What the builder remembers of a process to check its next event, kept to 40 bytes: a
/// history may have millions of processes, and each event looks up its own at random, so
/// the smaller these are, the more of them the cache holds.
///
/// Lines are 1-based, so 0 stands for "none". A kill is rare and kept aside (`killed`).
#[derive(Debug, Clone, Copy)]
struct ProcessState {
    /// The time of this process's latest event (`i64::MIN`: none yet).
    last_time: i64,
    /// The time and line of its latest invoke (line 0: none). While an operation is
    /// pending, this is its invoke.
    invoke_time: i64,
    invoke_line: u64,
    /// The line whose `info` completion retired this process (0: not retired).
    retired_line: u64,
    /// The pending operation's key, valid when `pending` is set.
    pending_key: KeyId,
    pending: Option<OpF>,
    /// Whether a nemesis `kill` listed it (its time and line are in `killed`).
    killed: bool,
}

const _: () = assert!(std::mem::size_of::<ProcessState>() <= 40);

impl Default for ProcessState {
    fn default() -> Self {
        ProcessState {
            last_time: i64::MIN,
            invoke_time: 0,
            invoke_line: 0,
            retired_line: 0,
            pending_key: NO_KEY,
            pending: None,
            killed: false,
        }
    }
}

impl ProcessState {
    fn last_invoke(&self) -> Option<(i64, u64)> {
        (self.invoke_line != 0).then_some((self.invoke_time, self.invoke_line))
    }
}

/// Process numbers below this are looked up in a vector rather than a hash map.
const DIRECT_PROCESS_LIMIT: usize = 1 << 22;

/// Where a process number is in `HistoryBuilder::direct_ids`, if it is looked up there.
fn direct_index(number: u64) -> Option<usize> {
    usize::try_from(number)
        .ok()
        .filter(|&n| n < DIRECT_PROCESS_LIMIT)
}

/// Accumulates events in file order; `finish` orders them by time.
pub struct HistoryBuilder {
    source: String,
    history: History,
    /// Key names to ids; a name's slot can be prefetched (`prefetch_ids`).
    key_ids: KeyTable,
    /// Dense ids of process numbers below `DIRECT_PROCESS_LIMIT` (`NEMESIS`: not seen).
    direct_ids: Vec<ProcessId>,
    /// Dense ids of larger process numbers.
    process_ids: HashMap<u64, ProcessId>,
    states: Vec<ProcessState>,
    /// The earliest (by time) nemesis `kill` that listed a process: its time and line.
    killed: HashMap<ProcessId, (i64, u64)>,
}

fn convert_type(ty: EventType) -> OpType {
    match ty {
        EventType::Invoke => OpType::Invoke,
        EventType::Ok => OpType::Ok,
        EventType::Fail => OpType::Fail,
        EventType::Info => OpType::Info,
    }
}

impl HistoryBuilder {
    /// `source` names the input (a path) in error messages.
    pub fn new(source: &str) -> Self {
        HistoryBuilder {
            source: source.to_string(),
            history: History::default(),
            key_ids: KeyTable::default(),
            direct_ids: Vec::new(),
            process_ids: HashMap::default(),
            states: Vec::new(),
            killed: HashMap::default(),
        }
    }

    /// Makes room for about `events` events up front, so the op vector never doubles (and
    /// never holds two copies) while a large history streams in.
    pub fn reserve(&mut self, events: usize) {
        // A guess from the file's size, not a need: where the machine refuses it (a huge
        // file), the vector grows as the events come instead.
        let _ = self.history.ops.try_reserve(events);
    }

    pub fn warn(&mut self, warning: String) {
        self.history.warnings.push(warning);
    }

    /// How many client processes have been seen so far.
    pub fn processes(&self) -> usize {
        self.states.len()
    }

    pub fn len(&self) -> usize {
        self.history.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.history.ops.is_empty()
    }

    fn error(&self, line: u64, field: &str, message: String) -> HistoryError {
        HistoryError::at(&self.source, line, field, message)
    }

    fn intern_key(&mut self, key: &str) -> KeyId {
        let hash = KeyTable::hash(key);
        if let Some(id) = self.key_ids.find(hash, key, &self.history.keys) {
            return id;
        }
        let id = self.history.keys.len() as KeyId;
        self.history.keys.push(key.to_string());
        self.key_ids.insert(hash, key, id, &self.history.keys);
        id
    }

    fn intern_process(&mut self, number: u64) -> ProcessId {
        // Process numbers are usually small and dense: look those up by position, which
        // stays fast when a long run retires hundreds of thousands of them.
        let direct = direct_index(number);
        let known = match direct {
            Some(n) => self.direct_ids.get(n).copied().filter(|&id| id != NEMESIS),
            None => self.process_ids.get(&number).copied(),
        };
        if let Some(id) = known {
            return id;
        }
        let id = self.history.processes.len() as ProcessId;
        self.history.processes.push(number);
        match direct {
            Some(n) => {
                if self.direct_ids.len() <= n {
                    self.direct_ids.resize(n + 1, NEMESIS);
                }
                self.direct_ids[n] = id;
            }
            None => {
                self.process_ids.insert(number, id);
            }
        }
        self.states.push(ProcessState::default());
        id
    }

    /// The first of two steps that bring what `push` will need for `event` into the cache
    /// before it is pushed: its key's slot and where its process's id is. With a million
    /// processes or keys, each would otherwise be a wait on main memory (the reader asks
    /// only once there are many: see `reader::MANY`).
    pub fn prefetch_ids(&self, event: &EventRef) {
        if let Some(key) = event.key {
            self.key_ids.prefetch(KeyTable::hash(key));
        }
        if let Some(n) = Self::direct_number(event) {
            if let Some(id) = self.direct_ids.get(n) {
                prefetch_read(id);
            }
        }
    }

    /// The second step, a line or more after `prefetch_ids`: the process's state, found
    /// through its id (by now in the cache).
    pub fn prefetch_state(&self, event: &EventRef) {
        let Some(&id) = Self::direct_number(event).and_then(|n| self.direct_ids.get(n)) else {
            return;
        };
        if let Some(state) = self.states.get(id as usize) {
            prefetch_read(state);
        }
    }

    /// Where a client event's process number is in `direct_ids`, if it is looked up there.
    fn direct_number(event: &EventRef) -> Option<usize> {
        match event.process {
            Process::Client(number) => direct_index(number),
            Process::Nemesis => None,
        }
    }

    /// How many keys have been seen so far.
    pub fn keys(&self) -> usize {
        self.key_ids.len()
    }

    /// Adds the event found at `line` (1-based) of the source.
    pub fn push(&mut self, line: u64, event: &EventRef) -> Result<(), HistoryError> {
        let expected = self.history.ops.len() as u64;
        if event.index != expected {
            return Err(self.error(
                line,
                "index",
                format!(
                    "expected {expected} (indices start at 0 and grow by 1 per line), found {}",
                    event.index
                ),
            ));
        }
        if expected >= u64::from(u32::MAX) {
            return Err(self.error(line, "index", "more than 4294967295 events".into()));
        }
        let index = expected as u32;
        let ty = convert_type(event.ty);
        match event.process {
            Process::Nemesis => self.push_fault(line, index, ty, event),
            Process::Client(number) => self.push_client(line, index, ty, number, event),
        }
    }

    /// A wrong member the event uses is an error at `line`.
    fn check_members(
        &self,
        line: u64,
        f: OpF,
        ty: OpType,
        wrong: &[WrongMember],
    ) -> Result<(), HistoryError> {
        match wrong.iter().find(|w| uses(f, ty, w.slot)) {
            Some(wrong) => Err(self.error(line, &wrong.field, wrong.message.clone())),
            None => Ok(()),
        }
    }

    fn push_fault(
        &mut self,
        line: u64,
        index: u32,
        ty: OpType,
        event: &EventRef,
    ) -> Result<(), HistoryError> {
        self.check_members(line, OpF::Fault, ty, event.wrong)?;
        let numbers = &event.payload.processes;
        let processes: Vec<ProcessId> = numbers.iter().map(|&p| self.intern_process(p)).collect();
        if event.f == "kill" {
            for (&p, &number) in processes.iter().zip(numbers) {
                let state = &mut self.states[p as usize];
                // The file may be a little out of time order across processes: the kill and
                // the process's own events are ordered by (time, index), not by line. This
                // kill comes after every event above it in the file with the same time.
                if let Some((time, invoke_line)) =
                    state.last_invoke().filter(|&(t, _)| t > event.time)
                {
                    return Err(self.error(
                        line,
                        "value.processes",
                        format!(
                            "kills process {number} at {}, before its invoke at line {invoke_line} (at {time}): a killed process may not be used again",
                            event.time
                        ),
                    ));
                }
                state.killed = true;
                let killed = self.killed.entry(p).or_insert((event.time, line));
                if event.time < killed.0 {
                    *killed = (event.time, line);
                }
            }
        }
        let fault_id = self.history.faults.len() as i64;
        self.history.faults.push(Fault {
            index,
            time: event.time,
            ty,
            name: event.f.to_string(),
            targets: event.payload.targets.clone(),
            processes,
        });
        self.history.ops.push(Op {
            time: event.time,
            a: fault_id,
            b: 0,
            index,
            process: NEMESIS,
            key: NO_KEY,
            ty,
            f: OpF::Fault,
            flags: 0,
        });
        Ok(())
    }

    fn push_client(
        &mut self,
        line: u64,
        index: u32,
        ty: OpType,
        number: u64,
        event: &EventRef,
    ) -> Result<(), HistoryError> {
        let Some(f) = OpF::from_client_name(event.f) else {
            return Err(self.error(
                line,
                "f",
                format!(
                    "unknown client operation \"{}\" (expected acquire, release, renew, read or write)",
                    event.f
                ),
            ));
        };
        let Some(key_name) = event.key else {
            return Err(self.error(line, "key", "missing (required for client events)".into()));
        };
        let key = self.intern_key(key_name);
        let client = ClientEvent {
            line,
            number,
            process: self.intern_process(number),
            f,
            key,
            key_name,
            time: event.time,
        };
        let state = self.states[client.process as usize];
        if state.last_time != i64::MIN {
            let last = state.last_time;
            if event.time < last {
                return Err(self.error(
                    line,
                    "time",
                    format!(
                        "process {number} goes back in time: {} after an event of its own at {last}",
                        event.time
                    ),
                ));
            }
        }
        if ty == OpType::Invoke {
            self.check_invoke(&client, &state)?;
        } else {
            self.check_completion(&client, &state, event.ty)?;
        }
        self.advance(&client, ty);
        self.check_members(line, f, ty, event.wrong)?;
        let op = self.client_op(&client, index, ty, &event.payload)?;
        self.history.ops.push(op);
        Ok(())
    }

    /// An invoke by a process that may still invoke (neither retired nor killed) and has
    /// nothing pending.
    fn check_invoke(&self, c: &ClientEvent, state: &ProcessState) -> Result<(), HistoryError> {
        let (line, number) = (c.line, c.number);
        if state.retired_line != 0 {
            let retired = state.retired_line;
            return Err(self.error(
                line,
                "process",
                format!(
                    "process {number} was retired by its info completion at line {retired} and may not be used again"
                ),
            ));
        }
        // Ordered by (time, index), this invoke comes after a kill timed no later.
        let killed = match state.killed {
            true => self.killed.get(&c.process).copied(),
            false => None,
        };
        if let Some((time, killed)) = killed.filter(|&(t, _)| t <= c.time) {
            return Err(self.error(
                line,
                "process",
                format!(
                    "process {number} was killed at line {killed} (at {time}) and may not be used again"
                ),
            ));
        }
        if let Some(pending) = state.pending {
            return Err(self.error(
                line,
                "type",
                format!(
                    "process {number} invokes {} while its {} invoked at line {} is still pending",
                    c.f.name(),
                    pending.name(),
                    state.invoke_line
                ),
            ));
        }
        Ok(())
    }

    /// A completion (of type `ty`) of the operation its process has pending, on the same
    /// key, no earlier than its invoke.
    fn check_completion(
        &self,
        c: &ClientEvent,
        state: &ProcessState,
        ty: EventType,
    ) -> Result<(), HistoryError> {
        let (line, number, f) = (c.line, c.number, c.f);
        let Some(pending) = state.pending else {
            return Err(self.error(
                line,
                "type",
                format!(
                    "{} completion of {} by process {number} with no invoke pending",
                    ty.name(),
                    f.name()
                ),
            ));
        };
        if pending != f {
            return Err(self.error(
                line,
                "f",
                format!(
                    "completion of {} does not match the pending {} invoked at line {}",
                    f.name(),
                    pending.name(),
                    state.invoke_line
                ),
            ));
        }
        if state.pending_key != c.key {
            return Err(self.error(
                line,
                "key",
                format!(
                    "completion names key \"{}\" but the {} invoked at line {} named \"{}\"",
                    c.key_name,
                    f.name(),
                    state.invoke_line,
                    self.history.keys[state.pending_key as usize]
                ),
            ));
        }
        if c.time < state.invoke_time {
            return Err(self.error(
                line,
                "time",
                format!(
                    "completion at {} is earlier than its invoke at {} (line {})",
                    c.time, state.invoke_time, state.invoke_line
                ),
            ));
        }
        Ok(())
    }

    /// The process's state after the event: its time, what it has pending, whether an info
    /// completion retired it.
    fn advance(&mut self, c: &ClientEvent, ty: OpType) {
        let state = &mut self.states[c.process as usize];
        state.last_time = c.time;
        if ty == OpType::Invoke {
            state.invoke_time = c.time;
            state.invoke_line = c.line;
            state.pending = Some(c.f);
            state.pending_key = c.key;
        } else {
            state.pending = None;
        }
        if ty == OpType::Info {
            state.retired_line = c.line;
        }
    }

    /// The event as an op: `a` carries the token; `b` the ttl asked for on an acquire
    /// invoke, the lease on an acquire or renew ok, the value of a read or write. Members an
    /// event does not use are ignored (see `Payload`).
    fn client_op(
        &self,
        c: &ClientEvent,
        index: u32,
        ty: OpType,
        payload: &Payload,
    ) -> Result<Op, HistoryError> {
        let f = c.f;
        let mut op = Op {
            time: c.time,
            a: 0,
            b: 0,
            index,
            process: c.process,
            key: c.key,
            ty,
            f,
            flags: 0,
        };
        match (f, ty) {
            (OpF::Acquire, OpType::Invoke) => {
                if let Some(ttl) = payload.ttl_ms {
                    if ttl < 0 {
                        return Err(self.error(
                            c.line,
                            "value.ttl_ms",
                            format!("must be >= 0, found {ttl}"),
                        ));
                    }
                    op.b = ttl;
                    op.flags |= flags::TTL;
                }
                if payload.shared {
                    op.flags |= flags::SHARED;
                }
                if payload.fair {
                    op.flags |= flags::FAIR;
                }
            }
            (OpF::Acquire | OpF::Renew, OpType::Ok) => {
                if let Some(token) = payload.token.filter(|_| f == OpF::Acquire) {
                    op.a = token;
                    op.flags |= flags::TOKEN;
                }
                if let Some(lease) = payload.lease_ms {
                    if lease < 0 {
                        return Err(self.error(
                            c.line,
                            "value.lease_ms",
                            format!("must be >= 0, found {lease}"),
                        ));
                    }
                    op.b = lease;
                    op.flags |= flags::LEASE;
                }
            }
            (OpF::Read | OpF::Write, _) => {
                if let Some(token) = payload.token.filter(|_| f == OpF::Write) {
                    op.a = token;
                    op.flags |= flags::TOKEN;
                }
                match payload.value {
                    ValueShape::Int(v) => {
                        op.b = v;
                        op.flags |= flags::INT_VALUE;
                    }
                    ValueShape::Null => op.flags |= flags::NULL_VALUE,
                    ValueShape::Other => op.flags |= flags::OTHER_VALUE,
                    ValueShape::Absent => {}
                }
            }
            _ => {}
        }
        Ok(op)
    }

    /// The event added last, with its fault if it is a nemesis event.
    pub fn last(&self) -> Option<(&Op, Option<&Fault>)> {
        let op = self.history.ops.last()?;
        let fault = (op.process == NEMESIS)
            .then(|| self.history.faults.get(op.a as usize))
            .flatten();
        Some((op, fault))
    }

    /// The history of the events so far whose time is at most `horizon`, ordered as
    /// `finish` orders them: what online checking judges while later events may still come.
    /// Each process's events are in time order, so this is a prefix of each process's own
    /// events; every key and process seen so far is named, whether or not it is in the cut.
    pub fn snapshot_until(&self, horizon: i64) -> History {
        let source = &self.history;
        // Faults are numbered by their position; those in the cut are numbered afresh.
        let mut fault_at = vec![u32::MAX; source.faults.len()];
        let mut faults = Vec::new();
        for (position, fault) in source.faults.iter().enumerate() {
            if fault.time <= horizon {
                fault_at[position] = faults.len() as u32;
                faults.push(fault.clone());
            }
        }
        let mut ops: Vec<Op> = source
            .ops
            .iter()
            .filter(|op| op.time <= horizon)
            .map(|op| {
                let mut op = *op;
                if op.process == NEMESIS {
                    op.a = i64::from(fault_at[op.a as usize]);
                }
                op
            })
            .collect();
        if !ops.is_sorted_by_key(|op| (op.time, op.index)) {
            ops.sort_unstable_by_key(|op| (op.time, op.index));
        }
        History {
            ops,
            faults,
            keys: source.keys.clone(),
            processes: source.processes.clone(),
            warnings: Vec::new(),
        }
    }

    /// Orders the events by (time, index): the file may be a little out of time order where
    /// several processes' streams were merged.
    pub fn finish(mut self) -> History {
        let ops = &mut self.history.ops;
        if !ops.is_sorted_by_key(|op| (op.time, op.index)) {
            // (time, index) is unique, so an unstable (in-place, allocation-free) sort is exact.
            ops.sort_unstable_by_key(|op| (op.time, op.index));
        }
        self.history
    }
}
