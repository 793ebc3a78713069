//! Synthetic histories of a correct lock, and injectors of exactly one violation.
//!
//! `generate` simulates clients taking per-key locks from a lock that is correct by
//! construction (a FIFO-fair mutex per key with leases), with the faults of a real run:
//! clients killed while holding (their lock stays taken until its lease ends), operations
//! that end `info` (timeouts), renewals, reentrant acquires, holders slow enough to outlive
//! their lease (nobody tries the key meanwhile, so their failed renew / release is an
//! expected loss), and a shuffled merge of the processes' streams. The histories follow
//! docs/history-format.md and the reader accepts every one of them; the checker must find no
//! anomaly in any of them. `generate_to` streams the same history as JSONL without keeping
//! it in memory (ten million events take a few seconds).
//!
//! The `inject_*` functions take such a history and add exactly one violation, returning the
//! indices the checker's anomaly must name (see `Injection`).
//!
//! How the simulated lock stays correct under the checker's rules:
//! - Every server-side effect happens at the operation's invoke (its linearization point),
//!   so a lease counted by the server ends exactly where the checker counts it
//!   (invoke + `lease_ms`).
//! - A holder invokes every operation of its hold while its lease still has room for that
//!   operation and one more, so it can always renew or release in time.
//! - A killed holder's lock stays taken until its lease ends (a renew cut short by the kill
//!   never reached the server); an `acquire` that ends `info` takes the lock for one lease if
//!   it was free (a ghost holder); a `release` that ends `info` leaves the lock to its lease.
//!   Without leases nothing is ever killed (the lock would never be freed: that is the
//!   `setnx-del` deadlock, an anomaly) and indeterminate operations never hold the lock.
//! - Waiters are served first come, first served and retry every few ms, so nobody waits
//!   longer than the holds queued before it (keep `processes × hold + lease` well under the
//!   starvation bound) and a free key is taken again within one retry interval.
//! - A nested (reentrant) acquire neither changes the token nor extends the lease.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::io::{self, BufWriter, Write};

use serde_json::{json, Value};

use crate::history::{Event, EventType, HistoryWriter, Process};

const MS: i64 = 1_000_000;
const US: i64 = 1_000;

/// What to simulate. Times are in ns on the run's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthConfig {
    pub seed: u64,
    /// Keys `lock:0`, `lock:1`, ...
    pub keys: usize,
    /// Concurrent client slots; a killed or retired client's slot is taken by a fresh process.
    pub processes: usize,
    /// About how many events: once this many are written nobody starts trying a key; the
    /// waiters get their lock, every hold finishes, and the final reads follow.
    pub events: usize,
    /// The lease every acquisition gets; `None`: locks are held until released.
    pub lease_ms: Option<i64>,
    /// Acquisitions get fencing tokens from a per-key counter (writes carry them).
    pub fenced: bool,
    /// Counter workload: every hold reads the guarded resource and writes read + 1; the
    /// history ends with a final read of every key.
    pub writes: bool,
    /// Probability that a hold renews and lasts one to two leases longer.
    pub renew_prob: f64,
    /// Probability, per operation and per pause between operations, that the client is
    /// killed there (only with leases).
    pub kill_prob: f64,
    /// Probability that an acquire, or a hold's final release, ends `info` (a timeout).
    pub info_prob: f64,
    /// Probability that a hold acquires the key again (nested) and releases it twice.
    pub reentrant_prob: f64,
    /// Probability that a holder outlives its lease (only with leases; no renewing, no
    /// nesting); its late renew and release fail, expected losses that are not anomalies.
    pub expire_prob: f64,
    /// Events of different processes are written up to this much out of time order.
    pub shuffle_window_ns: i64,
    /// Invoke-to-completion time of an operation (min, max).
    pub latency_ns: (i64, i64),
    /// Pause between two operations of a hold.
    pub gap_ns: (i64, i64),
    /// How long a hold lasts at least (before renewals), from its acquire's completion.
    pub hold_ns: (i64, i64),
    /// Pause between a release and the next attempt.
    pub think_ns: (i64, i64),
    /// Pause between a failed attempt and the next.
    pub retry_ns: (i64, i64),
}

impl Default for SynthConfig {
    fn default() -> Self {
        SynthConfig {
            seed: 0,
            keys: 2,
            processes: 4,
            events: 2_000,
            lease_ms: Some(300),
            fenced: false,
            writes: true,
            renew_prob: 0.2,
            kill_prob: 0.005,
            info_prob: 0.01,
            reentrant_prob: 0.1,
            expire_prob: 0.02,
            shuffle_window_ns: 0,
            latency_ns: (50 * US, 2 * MS),
            gap_ns: (10 * US, 500 * US),
            hold_ns: (0, 20 * MS),
            think_ns: (0, 20 * MS),
            retry_ns: (MS, 10 * MS),
        }
    }
}

impl SynthConfig {
    /// A large, busy history for benchmarks: 64 keys, 256 clients, every fault.
    pub fn benchmark(seed: u64, events: usize) -> Self {
        SynthConfig {
            seed,
            keys: 64,
            processes: 256,
            events,
            lease_ms: Some(1_000),
            fenced: true,
            writes: true,
            renew_prob: 0.1,
            kill_prob: 0.0005,
            info_prob: 0.001,
            reentrant_prob: 0.05,
            expire_prob: 0.005,
            shuffle_window_ns: MS,
            ..SynthConfig::default()
        }
    }
}

/// The name of key number `k`.
pub fn key_name(k: usize) -> String {
    format!("lock:{k}")
}

/// Generates the history `config` describes, indices 0, 1, 2, ...
pub fn generate(config: &SynthConfig) -> Vec<Event> {
    let keys: Vec<String> = (0..config.keys.max(1)).map(key_name).collect();
    let mut events = Vec::with_capacity(config.events + config.events / 8 + 64);
    let sink = |rec: &Rec| -> io::Result<()> {
        let index = events.len() as u64;
        events.push(rec.event(index, &keys));
        Ok(())
    };
    Sim::new(config, sink)
        .run()
        .expect("collecting events cannot fail");
    events
}

/// Streams the history `config` describes to `out` as JSONL, keeping only a small window of
/// it in memory. Writes the same bytes as `write_jsonl(&generate(config), out)`. Returns the
/// number of events written.
pub fn generate_to<W: Write>(config: &SynthConfig, out: W) -> io::Result<u64> {
    let keys: Vec<String> = (0..config.keys.max(1)).map(key_name).collect();
    let mut writer = LineWriter {
        out: BufWriter::with_capacity(1 << 20, out),
        line: Vec::with_capacity(256),
        index: 0,
        keys,
    };
    Sim::new(config, |rec: &Rec| writer.write(rec)).run()?;
    writer.out.flush()?;
    Ok(writer.index)
}

/// Writes `events` as JSONL through the recorder's `HistoryWriter` (which numbers them 0, 1,
/// 2, ... in the order given).
pub fn write_jsonl<W: Write>(events: &[Event], out: W) -> io::Result<()> {
    let mut writer = HistoryWriter::new(out);
    for event in events {
        writer.append(&mut event.clone())?;
    }
    writer.flush()
}

// ---------------------------------------------------------------------------------------
// Randomness: splitmix64, small and deterministic across platforms.

#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi` (`lo` if the range is empty).
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            lo
        } else {
            lo + self.below((hi - lo) as u64 + 1) as i64
        }
    }

    fn range_of(&mut self, (lo, hi): (i64, i64)) -> i64 {
        self.range(lo, hi)
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next_u64() >> 11) as f64) * (1.0 / (1u64 << 53) as f64) < p
    }
}

// ---------------------------------------------------------------------------------------
// The compact record the simulator emits (no heap allocation per event).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Acquire,
    Release,
    Renew,
    Read,
    Write,
    Kill,
}

impl Op {
    fn name(self) -> &'static str {
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
enum Val {
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
enum Why {
    None,
    Killed,
    Timeout,
    Expired,
}

impl Why {
    fn message(self) -> Option<&'static str> {
        match self {
            Why::None => None,
            Why::Killed => Some("killed"),
            Why::Timeout => Some("timeout"),
            Why::Expired => Some("lock not held by us (lease expired)"),
        }
    }
}

const HELD_REASON: &str = "held by another client";

#[derive(Debug, Clone, Copy)]
struct Rec {
    time: i64,
    pid: u64,
    /// Whose stream the event belongs to, for the shuffled merge: a slot, the nemesis or the
    /// final reader.
    stream: u32,
    ty: EventType,
    op: Op,
    key: u32,
    val: Val,
    why: Why,
}

impl Rec {
    fn event(&self, index: u64, keys: &[String]) -> Event {
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

/// Formats records as the same JSON lines serde writes for `Event` (its field order; payload
/// objects with their keys sorted, as serde_json's map keeps them).
struct LineWriter<W: Write> {
    out: BufWriter<W>,
    line: Vec<u8>,
    index: u64,
    keys: Vec<String>,
}

fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

fn push_i64(buf: &mut Vec<u8>, v: i64) {
    if v < 0 {
        buf.push(b'-');
    }
    push_u64(buf, v.unsigned_abs());
}

fn push_opt(buf: &mut Vec<u8>, v: Option<i64>) {
    match v {
        Some(v) => push_i64(buf, v),
        None => buf.extend_from_slice(b"null"),
    }
}

impl<W: Write> LineWriter<W> {
    fn write(&mut self, rec: &Rec) -> io::Result<()> {
        let b = &mut self.line;
        b.clear();
        b.extend_from_slice(b"{\"index\":");
        push_u64(b, self.index);
        b.extend_from_slice(b",\"time\":");
        push_i64(b, rec.time);
        b.extend_from_slice(b",\"process\":");
        if let Val::Kill { slot, pid } = rec.val {
            b.extend_from_slice(b"\"nemesis\",\"type\":\"info\",\"f\":\"kill\"");
            b.extend_from_slice(b",\"value\":{\"processes\":[");
            push_u64(b, pid);
            b.extend_from_slice(b"],\"targets\":[\"worker-");
            push_u64(b, u64::from(slot));
            b.extend_from_slice(b"\"]}}\n");
        } else {
            push_u64(b, rec.pid);
            b.extend_from_slice(b",\"type\":\"");
            b.extend_from_slice(rec.ty.name().as_bytes());
            b.extend_from_slice(b"\",\"f\":\"");
            b.extend_from_slice(rec.op.name().as_bytes());
            b.extend_from_slice(b"\",\"key\":\"");
            b.extend_from_slice(self.keys[rec.key as usize].as_bytes());
            b.push(b'"');
            match rec.val {
                Val::None | Val::Kill { .. } => {}
                Val::Acquire { token, lease } => {
                    b.extend_from_slice(b",\"value\":{\"lease_ms\":");
                    push_opt(b, lease);
                    b.extend_from_slice(b",\"token\":");
                    push_opt(b, token);
                    b.push(b'}');
                }
                Val::Held => {
                    b.extend_from_slice(b",\"value\":{\"reason\":\"");
                    b.extend_from_slice(HELD_REASON.as_bytes());
                    b.extend_from_slice(b"\"}");
                }
                Val::Renew { lease } => {
                    b.extend_from_slice(b",\"value\":{\"lease_ms\":");
                    push_i64(b, lease);
                    b.push(b'}');
                }
                Val::Write { token, value } => {
                    b.extend_from_slice(b",\"value\":{\"token\":");
                    push_opt(b, token);
                    b.extend_from_slice(b",\"value\":");
                    push_i64(b, value);
                    b.push(b'}');
                }
                Val::Read { value } => {
                    b.extend_from_slice(b",\"value\":{\"value\":");
                    push_opt(b, value);
                    b.push(b'}');
                }
            }
            if let Some(message) = rec.why.message() {
                b.extend_from_slice(b",\"error\":\"");
                b.extend_from_slice(message.as_bytes());
                b.push(b'"');
            }
            b.extend_from_slice(b"}\n");
        }
        self.index += 1;
        self.out.write_all(&self.line)
    }
}

// ---------------------------------------------------------------------------------------
// The shuffled merge: each event is delayed by a random amount up to the window, but never
// ahead of an earlier event of its own stream (a kill belongs to the nemesis's stream and
// to its victim's, so the victim's last invoke always comes before it).

struct Delayed {
    at: i64,
    seq: u64,
    rec: Rec,
}

impl PartialEq for Delayed {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Delayed {}
impl PartialOrd for Delayed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Delayed {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

struct Shuffler {
    window: i64,
    last: Vec<i64>,
    heap: BinaryHeap<Reverse<Delayed>>,
    seq: u64,
    rng: Rng,
}

impl Shuffler {
    fn push<S: FnMut(&Rec) -> io::Result<()>>(&mut self, rec: Rec, sink: &mut S) -> io::Result<()> {
        if self.window <= 0 {
            return sink(&rec);
        }
        let mut at = rec.time + self.rng.range(0, self.window);
        at = at.max(self.last[rec.stream as usize]);
        if let Val::Kill { slot, .. } = rec.val {
            at = at.max(self.last[slot as usize]);
            self.last[slot as usize] = at;
        }
        self.last[rec.stream as usize] = at;
        // Every later event is at or after `rec.time`: what is due by then can go.
        while let Some(Reverse(top)) = self.heap.peek() {
            if top.at > rec.time {
                break;
            }
            let Some(Reverse(top)) = self.heap.pop() else {
                break;
            };
            sink(&top.rec)?;
        }
        self.seq += 1;
        self.heap.push(Reverse(Delayed {
            at,
            seq: self.seq,
            rec,
        }));
        Ok(())
    }

    fn finish<S: FnMut(&Rec) -> io::Result<()>>(&mut self, sink: &mut S) -> io::Result<()> {
        while let Some(Reverse(top)) = self.heap.pop() {
            sink(&top.rec)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// The simulation.

const NOBODY: u32 = u32::MAX;

const W_NESTED_ACQUIRE: u8 = 1;
const W_READ: u8 = 2;
const W_WRITE: u8 = 4;
const W_NESTED_RELEASE: u8 = 8;

/// The server's view of one key.
struct KeyState {
    holder: u32,
    count: u32,
    /// The holder's lease end (i64::MAX without leases).
    expires: i64,
    /// Taken by a dead or unknown client until then.
    ghost_until: i64,
    next_token: i64,
    value: Option<i64>,
    /// Slots waiting, first come first served.
    waiters: VecDeque<u32>,
    /// A holder past its lease is winding down: nobody tries the key meanwhile.
    reserved: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Next: pick a key and try it.
    Idle,
    /// Next: try the same key again.
    Retry,
    /// Holding: choose the next operation.
    Decide,
    /// Holding past the lease: a failing renew, then a failing release.
    Expired,
    /// An operation is in flight: complete it.
    Complete,
    Done,
}

#[derive(Debug, Clone, Copy)]
enum Effect {
    AcquireOk,
    NestedOk,
    AcquireFail,
    /// The operation ended `info`: the process retires.
    Retire,
    ReleaseOk,
    ExpiredFail,
    RenewOk,
    ReadOk,
    WriteOk,
    /// The client dies before the completion; a pending renew is undone.
    Killed {
        renew_undo: Option<i64>,
    },
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    op: Op,
    ty: EventType,
    val: Val,
    why: Why,
    effect: Effect,
    /// The lease end an acquire or renew gave.
    lease_end: i64,
}

const NO_PENDING: Pending = Pending {
    op: Op::Read,
    ty: EventType::Ok,
    val: Val::None,
    why: Why::None,
    effect: Effect::ReadOk,
    lease_end: 0,
};

struct Slot {
    pid: u64,
    phase: Phase,
    key: u32,
    in_queue: bool,
    count: u32,
    token: Option<i64>,
    expires: i64,
    hold_until: i64,
    renewing: bool,
    expiring: bool,
    expired_renewed: bool,
    work: u8,
    read_value: Option<i64>,
    pending: Pending,
}

impl Slot {
    fn end_hold(&mut self) {
        self.count = 0;
        self.token = None;
        self.work = 0;
        self.renewing = false;
        self.expiring = false;
        self.expired_renewed = false;
        self.read_value = None;
    }
}

struct Sim<S> {
    rng: Rng,
    keys: Vec<KeyState>,
    slots: Vec<Slot>,
    queue: BinaryHeap<Reverse<(i64, u64, u32)>>,
    seq: u64,
    next_pid: u64,
    emitted: u64,
    target: u64,
    stopping: bool,
    last_time: i64,
    shuffler: Shuffler,
    sink: S,
    // Derived settings.
    lease_ms: Option<i64>,
    lease_ns: i64,
    fenced: bool,
    writes: bool,
    renew_prob: f64,
    kill_prob: f64,
    info_prob: f64,
    reentrant_prob: f64,
    expire_prob: f64,
    latency: (i64, i64),
    gap: (i64, i64),
    hold: (i64, i64),
    think: (i64, i64),
    retry: (i64, i64),
    /// The longest an operation and the pause after it take.
    step_max: i64,
}

fn ordered((lo, hi): (i64, i64), floor: i64) -> (i64, i64) {
    let lo = lo.max(floor);
    (lo, hi.max(lo))
}

impl<S: FnMut(&Rec) -> io::Result<()>> Sim<S> {
    fn new(config: &SynthConfig, sink: S) -> Self {
        let processes = config.processes.max(1);
        let lease_ms = config.lease_ms.map(|l| l.max(1));
        let lease_ns = lease_ms.map_or(i64::MAX, |l| l.saturating_mul(MS));
        let mut latency = ordered(config.latency_ns, 2);
        let mut gap = ordered(config.gap_ns, 1);
        if lease_ms.is_some() {
            // A hold needs several operations' room inside one lease.
            let limit = (lease_ns / 16).max(2);
            latency = (latency.0.min(limit / 2), latency.1.min(limit));
            gap = (gap.0.min(limit / 2), gap.1.min(limit));
        }
        let mut rng = Rng::new(config.seed);
        let shuffle_rng = Rng::new(rng.next_u64());
        let keys = (0..config.keys.max(1))
            .map(|_| KeyState {
                holder: NOBODY,
                count: 0,
                expires: i64::MAX,
                ghost_until: i64::MIN,
                next_token: 1,
                value: None,
                waiters: VecDeque::with_capacity(processes),
                reserved: false,
            })
            .collect();
        let slots = (0..processes)
            .map(|i| Slot {
                pid: i as u64,
                phase: Phase::Idle,
                key: 0,
                in_queue: false,
                count: 0,
                token: None,
                expires: i64::MAX,
                hold_until: 0,
                renewing: false,
                expiring: false,
                expired_renewed: false,
                work: 0,
                read_value: None,
                pending: NO_PENDING,
            })
            .collect();
        Sim {
            rng,
            keys,
            slots,
            queue: BinaryHeap::with_capacity(processes * 2),
            seq: 0,
            next_pid: processes as u64,
            emitted: 0,
            target: config.events as u64,
            stopping: config.events == 0,
            last_time: -1,
            shuffler: Shuffler {
                window: config.shuffle_window_ns.max(0),
                last: vec![i64::MIN; processes + 2],
                heap: BinaryHeap::new(),
                seq: 0,
                rng: shuffle_rng,
            },
            sink,
            lease_ms,
            lease_ns,
            fenced: config.fenced,
            writes: config.writes,
            renew_prob: config.renew_prob,
            kill_prob: if lease_ms.is_some() {
                config.kill_prob
            } else {
                0.0
            },
            info_prob: config.info_prob,
            reentrant_prob: config.reentrant_prob,
            expire_prob: config.expire_prob,
            latency,
            gap,
            hold: ordered(config.hold_ns, 0),
            think: ordered(config.think_ns, 0),
            retry: ordered(config.retry_ns, 1),
            step_max: latency.1 + gap.1,
        }
    }

    fn nemesis_stream(&self) -> u32 {
        self.slots.len() as u32
    }

    fn reader_stream(&self) -> u32 {
        self.slots.len() as u32 + 1
    }

    fn run(mut self) -> io::Result<()> {
        for s in 0..self.slots.len() as u32 {
            let t = self.rng.range_of(self.think);
            self.schedule(s, t, Phase::Idle);
        }
        while let Some(Reverse((t, _, s))) = self.queue.pop() {
            self.step(s, t)?;
        }
        if self.writes {
            self.final_reads()?;
        }
        let Sim {
            mut shuffler,
            mut sink,
            ..
        } = self;
        shuffler.finish(&mut sink)
    }

    fn schedule(&mut self, s: u32, t: i64, phase: Phase) {
        self.slots[s as usize].phase = phase;
        self.seq += 1;
        self.queue.push(Reverse((t, self.seq, s)));
    }

    fn emit(&mut self, mut rec: Rec) -> io::Result<()> {
        // Strictly increasing times: no two events share a nanosecond.
        rec.time = rec.time.max(self.last_time + 1);
        self.last_time = rec.time;
        self.emitted += 1;
        if self.emitted >= self.target {
            self.stopping = true;
        }
        self.shuffler.push(rec, &mut self.sink)
    }

    fn emit_client(
        &mut self,
        s: u32,
        t: i64,
        ty: EventType,
        op: Op,
        val: Val,
        why: Why,
    ) -> io::Result<()> {
        let slot = &self.slots[s as usize];
        let rec = Rec {
            time: t,
            pid: slot.pid,
            stream: s,
            ty,
            op,
            key: slot.key,
            val,
            why,
        };
        self.emit(rec)
    }

    fn emit_kill(&mut self, s: u32, t: i64) -> io::Result<()> {
        let pid = self.slots[s as usize].pid;
        let rec = Rec {
            time: t,
            pid: u64::MAX,
            stream: self.nemesis_stream(),
            ty: EventType::Info,
            op: Op::Kill,
            key: 0,
            val: Val::Kill { slot: s, pid },
            why: Why::None,
        };
        self.emit(rec)
    }

    fn step(&mut self, s: u32, t: i64) -> io::Result<()> {
        match self.slots[s as usize].phase {
            Phase::Idle | Phase::Retry => {
                // Once the budget is spent nobody starts trying, but a waiter keeps trying
                // until it gets the lock: a key's last free stretch then has no failed
                // attempt in it, however long the history goes on.
                if self.stopping && self.slots[s as usize].phase == Phase::Idle {
                    self.slots[s as usize].phase = Phase::Done;
                    return Ok(());
                }
                // A queued waiter is not killed: the lock is kept for it (first come, first
                // served), so others would be refused while the key is free, and if it died
                // before its turn that refusal would stand in a free stretch of the key.
                let queued = self.slots[s as usize].in_queue;
                if !queued && self.rng.chance(self.kill_prob) {
                    self.emit_kill(s, t)?;
                    return self.after_kill(s, t, None);
                }
                if self.slots[s as usize].phase == Phase::Idle {
                    self.slots[s as usize].key = self.rng.below(self.keys.len() as u64) as u32;
                }
                let k = self.slots[s as usize].key as usize;
                if self.keys[k].reserved {
                    let next = t + self.rng.range_of(self.retry);
                    self.schedule(s, next, Phase::Retry);
                    return Ok(());
                }
                self.invoke_acquire(s, t)
            }
            Phase::Decide => self.decide(s, t),
            Phase::Expired => self.expired(s, t),
            Phase::Complete => self.complete(s, t),
            Phase::Done => Ok(()),
        }
    }

    fn leave_queue(&mut self, s: u32) {
        let slot = &mut self.slots[s as usize];
        if slot.in_queue {
            slot.in_queue = false;
            let waiters = &mut self.keys[slot.key as usize].waiters;
            if let Some(pos) = waiters.iter().position(|&w| w == s) {
                waiters.remove(pos);
            }
        }
    }

    /// Emits the invoke and decides whether the client dies before the completion; returns
    /// when the completion (or the death) happens.
    fn begin(&mut self, s: u32, t: i64, op: Op, val: Val) -> io::Result<(bool, i64)> {
        self.emit_client(s, t, EventType::Invoke, op, val, Why::None)?;
        let latency = self.rng.range_of(self.latency);
        if self.rng.chance(self.kill_prob) {
            Ok((true, t + self.rng.range(1, latency - 1)))
        } else {
            Ok((false, t + latency))
        }
    }

    fn finish_begin(
        &mut self,
        s: u32,
        at: i64,
        killed: bool,
        mut pending: Pending,
        undo: Option<i64>,
    ) {
        if killed {
            pending.ty = EventType::Info;
            pending.val = Val::None;
            pending.why = Why::Killed;
            pending.effect = Effect::Killed { renew_undo: undo };
        }
        self.slots[s as usize].pending = pending;
        self.schedule(s, at, Phase::Complete);
    }

    fn timeout(&mut self) -> i64 {
        self.rng.range(self.latency.1, self.latency.1 * 10)
    }

    fn invoke_acquire(&mut self, s: u32, t: i64) -> io::Result<()> {
        let (killed, mut at) = self.begin(s, t, Op::Acquire, Val::None)?;
        let nested = self.slots[s as usize].count > 0;
        let info = !killed && !nested && self.rng.chance(self.info_prob);
        let k = self.slots[s as usize].key as usize;
        let lease = self.lease_ms;
        let ks = &self.keys[k];
        let grant = nested
            || (ks.holder == NOBODY
                && t >= ks.ghost_until
                && ks.waiters.front().is_none_or(|&w| w == s));
        let mut pending = Pending {
            op: Op::Acquire,
            ty: EventType::Ok,
            val: Val::None,
            why: Why::None,
            effect: Effect::AcquireOk,
            lease_end: 0,
        };
        if info {
            if grant && lease.is_some() {
                // It took the lock, and nobody will ever release it: a ghost for one lease.
                let ks = &mut self.keys[k];
                ks.ghost_until = ks.ghost_until.max(t + self.lease_ns);
                if self.fenced {
                    ks.next_token += 1;
                }
            }
            self.leave_queue(s);
            pending.ty = EventType::Info;
            pending.why = Why::Timeout;
            pending.effect = Effect::Retire;
            at = t + self.timeout();
        } else if nested {
            self.keys[k].count += 1;
            pending.val = Val::Acquire {
                token: self.slots[s as usize].token,
                lease,
            };
            pending.effect = Effect::NestedOk;
        } else if grant {
            let fenced = self.fenced;
            let lease_ns = self.lease_ns;
            let ks = &mut self.keys[k];
            ks.holder = s;
            ks.count = 1;
            ks.expires = t.saturating_add(lease_ns);
            let token = fenced.then(|| {
                ks.next_token += 1;
                ks.next_token - 1
            });
            if ks.waiters.front() == Some(&s) {
                ks.waiters.pop_front();
                self.slots[s as usize].in_queue = false;
            }
            pending.val = Val::Acquire { token, lease };
            pending.lease_end = self.keys[k].expires;
        } else {
            let slot = &mut self.slots[s as usize];
            if !slot.in_queue {
                slot.in_queue = true;
                self.keys[k].waiters.push_back(s);
            }
            pending.ty = EventType::Fail;
            pending.val = Val::Held;
            pending.effect = Effect::AcquireFail;
        }
        self.finish_begin(s, at, killed, pending, None);
        Ok(())
    }

    fn invoke_release(&mut self, s: u32, t: i64) -> io::Result<()> {
        let (killed, mut at) = self.begin(s, t, Op::Release, Val::None)?;
        let k = self.slots[s as usize].key as usize;
        let outer = self.slots[s as usize].count == 1;
        let info = !killed && outer && self.rng.chance(self.info_prob);
        let mut pending = Pending {
            op: Op::Release,
            ty: EventType::Ok,
            val: Val::None,
            why: Why::None,
            effect: Effect::ReleaseOk,
            lease_end: 0,
        };
        let leased = self.lease_ms.is_some();
        let ks = &mut self.keys[k];
        ks.count -= 1;
        if ks.count == 0 {
            ks.holder = NOBODY;
            if info && leased {
                // The release may not have happened: the lock is left to its lease.
                ks.ghost_until = ks.ghost_until.max(ks.expires);
            }
        }
        if info {
            pending.ty = EventType::Info;
            pending.why = Why::Timeout;
            pending.effect = Effect::Retire;
            at = t + self.timeout();
        }
        self.finish_begin(s, at, killed, pending, None);
        Ok(())
    }

    fn invoke_renew(&mut self, s: u32, t: i64) -> io::Result<()> {
        let (killed, at) = self.begin(s, t, Op::Renew, Val::None)?;
        let k = self.slots[s as usize].key as usize;
        let old = self.keys[k].expires;
        self.keys[k].expires = t + self.lease_ns;
        let pending = Pending {
            op: Op::Renew,
            ty: EventType::Ok,
            val: Val::Renew {
                lease: self.lease_ms.unwrap_or(0),
            },
            why: Why::None,
            effect: Effect::RenewOk,
            lease_end: t + self.lease_ns,
        };
        self.finish_begin(s, at, killed, pending, Some(old));
        Ok(())
    }

    fn invoke_read(&mut self, s: u32, t: i64) -> io::Result<()> {
        let (killed, at) = self.begin(s, t, Op::Read, Val::None)?;
        let value = self.keys[self.slots[s as usize].key as usize].value;
        let pending = Pending {
            op: Op::Read,
            ty: EventType::Ok,
            val: Val::Read { value },
            why: Why::None,
            effect: Effect::ReadOk,
            lease_end: 0,
        };
        self.finish_begin(s, at, killed, pending, None);
        Ok(())
    }

    fn invoke_write(&mut self, s: u32, t: i64) -> io::Result<()> {
        let slot = &self.slots[s as usize];
        let val = Val::Write {
            token: slot.token,
            value: slot.read_value.unwrap_or(0) + 1,
        };
        let Val::Write { value, .. } = val else {
            unreachable!()
        };
        let (killed, at) = self.begin(s, t, Op::Write, val)?;
        // A write cut short by a kill may or may not have reached the resource.
        if !killed || self.rng.chance(0.5) {
            let k = self.slots[s as usize].key as usize;
            self.keys[k].value = Some(value);
        }
        let pending = Pending {
            op: Op::Write,
            ty: EventType::Ok,
            val,
            why: Why::None,
            effect: Effect::WriteOk,
            lease_end: 0,
        };
        self.finish_begin(s, at, killed, pending, None);
        Ok(())
    }

    /// A holder past its lease: its renew and release both fail, and free the lock.
    fn expired(&mut self, s: u32, t: i64) -> io::Result<()> {
        let renew = !self.slots[s as usize].expired_renewed && self.rng.chance(0.5);
        let op = if renew { Op::Renew } else { Op::Release };
        let (killed, at) = self.begin(s, t, op, Val::None)?;
        if renew {
            self.slots[s as usize].expired_renewed = true;
        } else {
            let ks = &mut self.keys[self.slots[s as usize].key as usize];
            ks.holder = NOBODY;
            ks.count = 0;
            ks.reserved = false;
        }
        let pending = Pending {
            op,
            ty: EventType::Fail,
            val: Val::None,
            why: Why::Expired,
            effect: Effect::ExpiredFail,
            lease_end: 0,
        };
        self.finish_begin(s, at, killed, pending, None);
        Ok(())
    }

    fn decide(&mut self, s: u32, t: i64) -> io::Result<()> {
        if self.rng.chance(self.kill_prob) {
            self.emit_kill(s, t)?;
            return self.after_kill(s, t, None);
        }
        let sm = self.step_max;
        let slot = &self.slots[s as usize];
        let expires = slot.expires;
        // Room for an operation started at `x` to complete and the next to start.
        let room = |x: i64| x.saturating_add(sm) < expires;
        let work = slot.work;
        if work != 0 && room(t + sm) {
            let slot = &mut self.slots[s as usize];
            return if work & W_NESTED_ACQUIRE != 0 {
                slot.work &= !W_NESTED_ACQUIRE;
                self.invoke_acquire(s, t)
            } else if work & W_READ != 0 {
                slot.work &= !W_READ;
                self.invoke_read(s, t)
            } else if work & W_WRITE != 0 {
                slot.work &= !W_WRITE;
                self.invoke_write(s, t)
            } else {
                slot.work &= !W_NESTED_RELEASE;
                self.invoke_release(s, t)
            };
        }
        if work != 0 || t < slot.hold_until {
            if work == 0 && room(t + sm) {
                let wake = slot.hold_until.min(expires.saturating_sub(2 * sm));
                self.schedule(s, wake, Phase::Decide);
                return Ok(());
            }
            if slot.renewing {
                return self.invoke_renew(s, t);
            }
        }
        let slot = &mut self.slots[s as usize];
        if slot.count > 1 {
            slot.work &= !W_NESTED_RELEASE;
            return self.invoke_release(s, t);
        }
        if slot.expiring {
            // Outlive the lease; nobody tries the key until this holder lets go.
            slot.expiring = false;
            self.keys[slot.key as usize].reserved = true;
            let wake = expires + self.rng.range(MS, 20 * MS);
            self.schedule(s, wake, Phase::Expired);
            return Ok(());
        }
        self.invoke_release(s, t)
    }

    fn complete(&mut self, s: u32, t: i64) -> io::Result<()> {
        let p = self.slots[s as usize].pending;
        if let Effect::Killed { renew_undo } = p.effect {
            self.emit_kill(s, t)?;
            self.emit_client(s, t, EventType::Info, p.op, Val::None, Why::Killed)?;
            return self.after_kill(s, t, renew_undo);
        }
        self.emit_client(s, t, p.ty, p.op, p.val, p.why)?;
        let gap = self.rng.range_of(self.gap);
        match p.effect {
            Effect::AcquireOk => {
                let token = match p.val {
                    Val::Acquire { token, .. } => token,
                    _ => None,
                };
                self.plan_hold(s, t, token, p.lease_end);
                self.schedule(s, t + gap, Phase::Decide);
            }
            Effect::NestedOk => {
                self.slots[s as usize].count += 1;
                self.schedule(s, t + gap, Phase::Decide);
            }
            Effect::AcquireFail => {
                let next = t + self.rng.range_of(self.retry);
                self.schedule(s, next, Phase::Retry);
            }
            Effect::Retire => self.new_process(s, t),
            Effect::ReleaseOk => {
                let slot = &mut self.slots[s as usize];
                slot.count -= 1;
                if slot.count == 0 {
                    slot.end_hold();
                    let next = t + self.rng.range_of(self.think);
                    self.schedule(s, next, Phase::Idle);
                } else {
                    self.schedule(s, t + gap, Phase::Decide);
                }
            }
            Effect::ExpiredFail => {
                if p.op == Op::Renew {
                    self.schedule(s, t + gap, Phase::Expired);
                } else {
                    self.slots[s as usize].end_hold();
                    let next = t + self.rng.range_of(self.think);
                    self.schedule(s, next, Phase::Idle);
                }
            }
            Effect::RenewOk => {
                self.slots[s as usize].expires = p.lease_end;
                self.schedule(s, t + gap, Phase::Decide);
            }
            Effect::ReadOk => {
                if let Val::Read { value } = p.val {
                    self.slots[s as usize].read_value = value;
                }
                self.schedule(s, t + gap, Phase::Decide);
            }
            Effect::WriteOk => self.schedule(s, t + gap, Phase::Decide),
            Effect::Killed { .. } => unreachable!(),
        }
        Ok(())
    }

    fn plan_hold(&mut self, s: u32, t: i64, token: Option<i64>, lease_end: i64) {
        let leased = self.lease_ms.is_some();
        let reentrant = self.rng.chance(self.reentrant_prob);
        let renewing = leased && self.rng.chance(self.renew_prob);
        let expiring = leased && !reentrant && !renewing && self.rng.chance(self.expire_prob);
        let mut length = self.rng.range_of(self.hold);
        if renewing {
            length += self.rng.range(self.lease_ns / 2, self.lease_ns * 3 / 2);
        }
        let mut work = 0;
        if reentrant {
            work |= W_NESTED_ACQUIRE | W_NESTED_RELEASE;
        }
        if self.writes {
            work |= W_READ | W_WRITE;
        }
        let slot = &mut self.slots[s as usize];
        slot.count = 1;
        slot.token = token;
        slot.expires = lease_end;
        slot.hold_until = t + length;
        slot.renewing = renewing;
        slot.expiring = expiring;
        slot.expired_renewed = false;
        slot.work = work;
        slot.read_value = None;
    }

    /// The client of slot `s` died at `t`: a lock it held stays taken until its lease ends.
    fn after_kill(&mut self, s: u32, t: i64, renew_undo: Option<i64>) -> io::Result<()> {
        let k = self.slots[s as usize].key as usize;
        let ks = &mut self.keys[k];
        if ks.holder == s {
            if let Some(old) = renew_undo {
                ks.expires = old;
            }
            ks.ghost_until = ks.ghost_until.max(ks.expires);
            ks.holder = NOBODY;
            ks.count = 0;
            ks.reserved = false;
        }
        self.leave_queue(s);
        self.new_process(s, t);
        Ok(())
    }

    /// A fresh process takes over slot `s` (its predecessor was killed or retired).
    fn new_process(&mut self, s: u32, t: i64) {
        self.leave_queue(s);
        let pid = self.next_pid;
        self.next_pid += 1;
        let slot = &mut self.slots[s as usize];
        slot.pid = pid;
        slot.end_hold();
        let next = t + self.rng.range(MS, 10 * MS);
        self.schedule(s, next, Phase::Idle);
    }

    fn final_reads(&mut self) -> io::Result<()> {
        let pid = self.next_pid;
        self.next_pid += 1;
        let stream = self.reader_stream();
        let mut t = self.last_time + MS;
        for k in 0..self.keys.len() {
            let value = self.keys[k].value;
            let mut rec = Rec {
                time: t,
                pid,
                stream,
                ty: EventType::Invoke,
                op: Op::Read,
                key: k as u32,
                val: Val::None,
                why: Why::None,
            };
            self.emit(rec)?;
            t += self.rng.range_of(self.latency);
            rec.time = t;
            rec.ty = EventType::Ok;
            rec.val = Val::Read { value };
            self.emit(rec)?;
            t += self.rng.range_of(self.gap);
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Injecting one violation.

/// The anomaly kinds the injectors produce: every kind the checker reports.
pub const INJECTABLE: [&str; 10] = crate::report::ANOMALY_KINDS;

/// What an injector did.
#[derive(Debug, Clone, PartialEq)]
pub struct Injection {
    pub kind: &'static str,
    pub key: String,
    /// The `index` of every injected event the anomaly must name, ascending (indices after
    /// the history was renumbered 0, 1, 2, ...).
    pub indices: Vec<u64>,
    /// Other kinds this violation logically implies (they may be reported too).
    pub implies: &'static [&'static str],
}

/// Other anomaly kinds that an injected violation of `kind` logically implies:
/// - a stale write is made under a hold that is still going when the later hold's write is
///   accepted, so the two holds overlap; and it overwrites the register, so one acknowledged
///   increment may be missing from the final read (`lost-update`);
/// - a duplicate token on two holds one after the other is also a token that is not lower
///   than an earlier hold's (`token-order`).
pub fn implied_by(kind: &str) -> &'static [&'static str] {
    match kind {
        "stale-write" => &["overlap", "lost-update"],
        "duplicate-token" => &["token-order"],
        _ => &[],
    }
}

/// Injects one violation of `kind` (one of `INJECTABLE`); `None` if the history has no
/// place for it (e.g. no tokens for `token-order`).
pub fn inject(
    kind: &str,
    events: &mut Vec<Event>,
    seed: u64,
    liveness_bound_ns: i64,
    starvation_bound_ns: i64,
) -> Option<Injection> {
    match kind {
        "overlap" => inject_overlap(events, seed),
        "bad-lease" => inject_bad_lease(events, seed),
        "lost-lock" => inject_lost_lock(events, seed),
        "stale-write" => inject_stale_write(events, seed),
        "token-order" => inject_token_order(events, seed),
        "duplicate-token" => inject_duplicate_token(events, seed),
        "starvation" => inject_starvation(events, seed, starvation_bound_ns),
        "unavailable" => inject_unavailable(events, seed, liveness_bound_ns),
        "unfair" => inject_unfair(events, seed),
        "lost-update" => inject_lost_update(events, seed),
        _ => None,
    }
}

/// A hold as the checker derives it, found in an event vector (positions, not indices).
#[derive(Debug, Clone)]
struct HoldView {
    key: String,
    /// Position of the acquire ok that began it, and of every nested one.
    oks: Vec<usize>,
    begin_time: i64,
    token: Option<i64>,
    lease_ms: Option<i64>,
    /// The lease end at the hold's end (moved by renews), if it had a lease.
    lease_end: Option<i64>,
    /// When it ended (i64::MAX: still open at the end of the history).
    end_time: i64,
    /// The release invoke that ended it, and that release's completion.
    release: Option<(usize, Option<usize>)>,
    killed: bool,
    /// Renew completions: (position, the lease end before it).
    renews: Vec<(usize, Option<i64>)>,
    /// Accepted writes: (invoke position, ok position).
    writes: Vec<(usize, usize)>,
    /// Write completions that ended `info` during the hold.
    info_writes: usize,
}

impl HoldView {
    fn begin(&self) -> usize {
        self.oks[0]
    }
}

struct View {
    /// Every hold, ordered by its beginning.
    holds: Vec<HoldView>,
    max_pid: u64,
    /// Processes that only ever read (the final reader).
    readers: HashSet<u64>,
}

fn payload_i64(event: &Event, field: &str) -> Option<i64> {
    event.value.as_ref()?.get(field)?.as_i64()
}

fn time_order(events: &[Event]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..events.len()).collect();
    order.sort_by_key(|&i| (events[i].time, events[i].index, i));
    order
}

fn view(events: &[Event]) -> View {
    let mut holds: Vec<HoldView> = Vec::new();
    let mut open: HashMap<(u64, String), (usize, u32)> = HashMap::new();
    // Per process: the pending invoke (position, time), and the hold it acts in.
    let mut pending: HashMap<u64, (usize, i64, Option<usize>)> = HashMap::new();
    let mut max_pid = 0;
    let mut acquirers = HashSet::new();
    let mut readers = HashSet::new();
    for pos in time_order(events) {
        let e = &events[pos];
        let pid = match e.process {
            Process::Nemesis => {
                let listed: Vec<u64> = e
                    .value
                    .as_ref()
                    .and_then(|v| v.get("processes"))
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_u64).collect())
                    .unwrap_or_default();
                for &p in &listed {
                    max_pid = max_pid.max(p);
                }
                if e.f == "kill" {
                    open.retain(|(p, _), (h, _)| {
                        if listed.contains(p) {
                            holds[*h].end_time = e.time;
                            holds[*h].killed = true;
                            false
                        } else {
                            true
                        }
                    });
                }
                continue;
            }
            Process::Client(pid) => pid,
        };
        max_pid = max_pid.max(pid);
        let key = e.key.clone().unwrap_or_default();
        let slot = (pid, key.clone());
        if e.ty == EventType::Invoke {
            let mut hold = open.get(&slot).map(|&(h, _)| h);
            match e.f.as_str() {
                "acquire" => {
                    acquirers.insert(pid);
                }
                "read" => {
                    readers.insert(pid);
                }
                "release" => {
                    if let Some((h, count)) = open.get_mut(&slot) {
                        *count -= 1;
                        if *count == 0 {
                            let h = *h;
                            holds[h].end_time = e.time;
                            holds[h].release = Some((pos, None));
                            open.remove(&slot);
                        } else {
                            hold = None;
                        }
                    }
                }
                _ => {}
            }
            pending.insert(pid, (pos, e.time, hold));
            continue;
        }
        let Some((invoke, invoke_time, hold)) = pending.remove(&pid) else {
            continue;
        };
        match (e.f.as_str(), e.ty) {
            ("acquire", EventType::Ok) => {
                if let Some((h, count)) = open.get_mut(&slot) {
                    *count += 1;
                    holds[*h].oks.push(pos);
                } else {
                    let lease_ms = payload_i64(e, "lease_ms");
                    open.insert(slot, (holds.len(), 1));
                    holds.push(HoldView {
                        key,
                        oks: vec![pos],
                        begin_time: e.time,
                        token: payload_i64(e, "token"),
                        lease_ms,
                        lease_end: lease_ms.map(|l| invoke_time + l * MS),
                        end_time: i64::MAX,
                        release: None,
                        killed: false,
                        renews: Vec::new(),
                        writes: Vec::new(),
                        info_writes: 0,
                    });
                }
            }
            ("release", _) => {
                if let Some(h) = hold {
                    if let Some((r, None)) = holds[h].release {
                        holds[h].release = Some((r, Some(pos)));
                    }
                }
            }
            ("renew", ty) => {
                if let Some(h) = hold {
                    let before = holds[h].lease_end;
                    holds[h].renews.push((pos, before));
                    if ty == EventType::Ok {
                        if let Some(l) = payload_i64(e, "lease_ms") {
                            holds[h].lease_end = Some(invoke_time + l * MS);
                        }
                    }
                }
            }
            ("write", EventType::Ok) => {
                if let Some(h) = hold {
                    holds[h].writes.push((invoke, pos));
                }
            }
            ("write", EventType::Info) => {
                if let Some(h) = hold {
                    holds[h].info_writes += 1;
                }
            }
            _ => {}
        }
    }
    holds.sort_by_key(|h| (h.begin_time, h.begin()));
    let readers = readers.difference(&acquirers).copied().collect();
    View {
        holds,
        max_pid,
        readers,
    }
}

/// Renumbers `events` 0, 1, 2, ... in vector order.
fn renumber(events: &mut [Event]) {
    for (i, e) in events.iter_mut().enumerate() {
        e.index = i as u64;
    }
}

/// Merges `new` (in time order) into `events`: each goes just before the first event later
/// than it. Returns the positions the new events got, in their order.
fn merge(events: &mut Vec<Event>, new: Vec<Event>) -> Vec<usize> {
    let old = std::mem::take(events);
    events.reserve(old.len() + new.len());
    let mut positions = Vec::with_capacity(new.len());
    let mut new = new.into_iter().peekable();
    for e in old {
        while let Some(n) = new.next_if(|n| n.time < e.time) {
            positions.push(events.len());
            events.push(n);
        }
        events.push(e);
    }
    for n in new {
        positions.push(events.len());
        events.push(n);
    }
    renumber(events);
    positions
}

fn client(time: i64, pid: u64, ty: EventType, f: &str, key: &str) -> Event {
    Event::client(0, time, pid, ty, f, key)
}

fn done(kind: &'static str, key: &str, mut indices: Vec<u64>) -> Option<Injection> {
    indices.sort_unstable();
    indices.dedup();
    Some(Injection {
        kind,
        key: key.to_string(),
        indices,
        implies: implied_by(kind),
    })
}

fn pick<T: Copy>(rng: &mut Rng, items: &[T]) -> Option<T> {
    if items.is_empty() {
        None
    } else {
        Some(items[rng.below(items.len() as u64) as usize])
    }
}

/// A second process acquires a key inside another's hold (and its lease) and releases it
/// before that hold ends: one overlap, inside the lease. Names both acquire oks.
pub fn inject_overlap(events: &mut Vec<Event>, seed: u64) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let v = view(events);
    let candidates: Vec<usize> = (0..v.holds.len())
        .filter(|&h| {
            let hold = &v.holds[h];
            hold.release.is_some() && hold.end_time - hold.begin_time >= 10 * US
        })
        .collect();
    let hold = &v.holds[pick(&mut rng, &candidates)?];
    let mut span = hold.end_time - hold.begin_time;
    if let Some(lease) = hold.lease_ms {
        span = span.min(lease * MS / 2);
    }
    let q = v.max_pid + 1;
    let b = hold.begin_time;
    let key = hold.key.clone();
    let new = vec![
        client(b + span / 5, q, EventType::Invoke, "acquire", &key),
        client(b + 2 * span / 5, q, EventType::Ok, "acquire", &key)
            .with_value(json!({ "token": null, "lease_ms": hold.lease_ms })),
        client(b + 3 * span / 5, q, EventType::Invoke, "release", &key),
        client(b + 4 * span / 5, q, EventType::Ok, "release", &key),
    ];
    let begin = hold.begin();
    let positions = merge(events, new);
    let begin = new_position(begin, &positions);
    done("overlap", &key, vec![begin as u64, positions[1] as u64])
}

/// Where an event that was at `old` before `merge` is now, given the new events' positions.
fn new_position(old: usize, inserted: &[usize]) -> usize {
    // Inserted positions are ascending; the event moved by the number inserted before it.
    let mut pos = old;
    for &p in inserted {
        if p <= pos {
            pos += 1;
        } else {
            break;
        }
    }
    pos
}

/// A process takes the lock just before a later hold H′ begins and, after H′'s first write
/// was accepted, writes the same value and is accepted too: a stale write (implying the
/// overlap of the two holds). Names the stale write's ok and H′'s write ok.
pub fn inject_stale_write(events: &mut Vec<Event>, seed: u64) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let v = view(events);
    let mut candidates = Vec::new();
    let mut last_end: HashMap<&str, i64> = HashMap::new();
    for (h, hold) in v.holds.iter().enumerate() {
        let prev_end = last_end
            .insert(hold.key.as_str(), hold.end_time)
            .unwrap_or(hold.begin_time - 2 * MS);
        if hold.release.is_none() || hold.writes.is_empty() {
            continue;
        }
        let write_ok = events[hold.writes[0].1].time;
        if hold.begin_time - prev_end >= 3 && hold.end_time - write_ok >= 8 {
            candidates.push((h, prev_end));
        }
    }
    let (h, prev_end) = pick(&mut rng, &candidates)?;
    let hold = &v.holds[h];
    let key = hold.key.clone();
    let (_, later_ok) = hold.writes[0];
    let w = events[later_ok].time;
    let value = events[later_ok]
        .value
        .as_ref()
        .and_then(|p| p.get("value"))
        .cloned()
        .unwrap_or(Value::Null);
    let gap = (hold.end_time - w).min(MS);
    let before = hold.begin_time - prev_end;
    let r = v.max_pid + 1;
    let payload = json!({ "token": null, "value": value });
    // The grant comes back within a millisecond, well inside its lease: a correct grant.
    let granted = prev_end + 2 * before / 3;
    let new = vec![
        client(
            granted - (before / 3).min(MS),
            r,
            EventType::Invoke,
            "acquire",
            &key,
        ),
        client(granted, r, EventType::Ok, "acquire", &key)
            .with_value(json!({ "token": null, "lease_ms": hold.lease_ms })),
        client(w + gap / 4, r, EventType::Invoke, "write", &key).with_value(payload.clone()),
        client(w + gap / 2, r, EventType::Ok, "write", &key).with_value(payload),
        client(w + 3 * gap / 4, r, EventType::Invoke, "release", &key),
        client(w + 7 * gap / 8, r, EventType::Ok, "release", &key),
    ];
    let positions = merge(events, new);
    let later = new_position(later_ok, &positions);
    done("stale-write", &key, vec![positions[3] as u64, later as u64])
}

/// Consecutive holds of a key that both carry tokens: (earlier, later).
fn token_pairs(v: &View) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    let mut last: HashMap<&str, usize> = HashMap::new();
    for (h, hold) in v.holds.iter().enumerate() {
        if let Some(&prev) = last.get(hold.key.as_str()) {
            if v.holds[prev].token.is_some() && hold.token.is_some() {
                pairs.push((prev, h));
            }
        }
        last.insert(hold.key.as_str(), h);
    }
    pairs
}

fn set_token(events: &mut [Event], hold: &HoldView, token: i64) {
    let writes = hold.writes.iter().flat_map(|&(i, o)| [i, o]);
    for pos in hold.oks.iter().copied().chain(writes) {
        if let Some(Value::Object(map)) = events[pos].value.as_mut() {
            map.insert("token".into(), json!(token));
        }
    }
}

/// The later of two consecutive holds gets the earlier one's token (its writes too).
/// Implies token-order (an equal token is not lower). Names both acquire oks.
pub fn inject_duplicate_token(events: &mut [Event], seed: u64) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let v = view(events);
    let (a, b) = pick(&mut rng, &token_pairs(&v))?;
    let token = v.holds[a].token?;
    set_token(events, &v.holds[b], token);
    renumber(events);
    let key = v.holds[a].key.clone();
    done(
        "duplicate-token",
        &key,
        vec![v.holds[a].begin() as u64, v.holds[b].begin() as u64],
    )
}

/// A grant promises a longer lease than its acquire asked for: the acquire's invoke gains a
/// `ttl_ms` below the `lease_ms` of its ok by more than the grant's latency. Names the
/// invoke and the ok.
pub fn inject_bad_lease(events: &mut [Event], seed: u64) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let v = view(events);
    let leased: Vec<usize> = (0..v.holds.len())
        .filter(|&h| v.holds[h].lease_ms.is_some_and(|ms| ms > 0))
        .collect();
    let hold = &v.holds[pick(&mut rng, &leased)?];
    let ok = hold.begin();
    let invoke = (0..ok)
        .rev()
        .find(|&i| events[i].process == events[ok].process && events[i].ty == EventType::Invoke)?;
    // A lease counts from the invoke and a ttl from the request, so the checker allows the
    // grant's latency on top of the ttl: ask for less than the lease by more than that.
    let latency_ms = (events[ok].time - events[invoke].time + MS - 1) / MS;
    let ttl_ms = hold.lease_ms? - latency_ms - 1;
    if ttl_ms < 0 {
        return None;
    }
    events[invoke].value = Some(json!({ "ttl_ms": ttl_ms }));
    renumber(events);
    done("bad-lease", &hold.key, vec![invoke as u64, ok as u64])
}

/// Two consecutive holds swap tokens, so the earlier (ended before the later began) has the
/// higher one. Names both acquire oks.
pub fn inject_token_order(events: &mut [Event], seed: u64) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let v = view(events);
    let (a, b) = pick(&mut rng, &token_pairs(&v))?;
    let (ta, tb) = (v.holds[a].token?, v.holds[b].token?);
    set_token(events, &v.holds[a], tb);
    set_token(events, &v.holds[b], ta);
    renumber(events);
    let key = v.holds[a].key.clone();
    done(
        "token-order",
        &key,
        vec![v.holds[a].begin() as u64, v.holds[b].begin() as u64],
    )
}

/// A release (or renew) that succeeded inside its lease fails instead ("lock not held by
/// us"). Names the failed completion.
pub fn inject_lost_lock(events: &mut [Event], seed: u64) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let v = view(events);
    let in_lease =
        |pos: usize, lease_end: Option<i64>| lease_end.is_none_or(|end| events[pos].time < end);
    // Only holds that end with a release ok: the key is then free from that release, whatever
    // the checker makes of a lease a failed renew did not move.
    let mut candidates = Vec::new();
    for (h, hold) in v.holds.iter().enumerate() {
        let Some((_, Some(done_at))) = hold.release else {
            continue;
        };
        if events[done_at].ty != EventType::Ok {
            continue;
        }
        if in_lease(done_at, hold.lease_end) {
            candidates.push((done_at, h));
        }
        for &(renew, before) in &hold.renews {
            if events[renew].ty == EventType::Ok && in_lease(renew, before) {
                candidates.push((renew, h));
            }
        }
    }
    let (pos, h) = pick(&mut rng, &candidates)?;
    let key = v.holds[h].key.clone();
    let e = &mut events[pos];
    e.ty = EventType::Fail;
    e.value = None;
    e.error = Some("lock not held by us".into());
    renumber(events);
    done("lost-lock", &key, vec![pos as u64])
}

/// The final read of a key (whose increments were all acknowledged) reports one less than
/// it should: the last acknowledged increment is missing. Names the final read (a counting
/// check cannot tell which increment was lost).
pub fn inject_lost_update(events: &mut [Event], seed: u64) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let v = view(events);
    let order = time_order(events);
    // The final read of each key, by the process that only reads.
    let mut finals: HashMap<String, usize> = HashMap::new();
    for &pos in &order {
        let e = &events[pos];
        if let Process::Client(pid) = e.process {
            if e.f == "read" && e.ty == EventType::Ok && v.readers.contains(&pid) {
                finals.insert(e.key.clone().unwrap_or_default(), pos);
            }
        }
    }
    let mut candidates: Vec<(usize, String)> = Vec::new();
    let mut keys: Vec<&String> = finals.keys().collect();
    keys.sort();
    for key in keys {
        let read = finals[key];
        let Some(value) = payload_i64(&events[read], "value") else {
            continue;
        };
        let held: Vec<&HoldView> = v.holds.iter().filter(|h| &h.key == key).collect();
        if value < 1 || held.iter().any(|h| h.info_writes > 0) {
            continue;
        }
        let write = held
            .iter()
            .flat_map(|h| h.writes.iter())
            .map(|&(_, ok)| ok)
            .find(|&ok| payload_i64(&events[ok], "value") == Some(value));
        if write.is_some() {
            candidates.push((read, key.clone()));
        }
    }
    if candidates.is_empty() {
        return None;
    }
    let (read, key) = candidates[rng.below(candidates.len() as u64) as usize].clone();
    let value = payload_i64(&events[read], "value")?;
    events[read].value = Some(json!({ "value": value - 1 }));
    renumber(events);
    done("lost-update", &key, vec![read as u64])
}

/// Appends a section after all lock activity: returns (the section's start, the key, its
/// longest lease in ms, whether it is fenced and its highest token) and leaves the final
/// reads to be moved after the section.
struct Tail {
    start: i64,
    key: String,
    lease_ms: Option<i64>,
    max_token: Option<i64>,
    next_pid: u64,
    finals: Vec<Event>,
}

fn tail(events: &mut Vec<Event>, rng: &mut Rng) -> Option<Tail> {
    let v = view(events);
    let mut keys: Vec<&str> = v.holds.iter().map(|h| h.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    let key = pick(rng, &keys)?.to_string();
    let lease_ms = v
        .holds
        .iter()
        .filter(|h| h.key == key)
        .filter_map(|h| h.lease_ms)
        .max();
    let max_token = v
        .holds
        .iter()
        .filter(|h| h.key == key)
        .filter_map(|h| h.token)
        .max();
    let longest = v.holds.iter().filter_map(|h| h.lease_ms).max().unwrap_or(0);
    let is_reader = |e: &Event| matches!(e.process, Process::Client(p) if v.readers.contains(&p));
    let end = events
        .iter()
        .filter(|e| !is_reader(e))
        .map(|e| e.time)
        .max()
        .unwrap_or(0);
    let mut finals = Vec::new();
    let mut rest = Vec::with_capacity(events.len());
    for e in events.drain(..) {
        if is_reader(&e) {
            finals.push(e);
        } else {
            rest.push(e);
        }
    }
    *events = rest;
    renumber(events);
    Some(Tail {
        start: end + longest * MS + 10 * MS,
        key,
        lease_ms,
        max_token,
        next_pid: v.max_pid + 1,
        finals,
    })
}

/// Puts the section and then the final reads (moved after it) into `events`; returns the
/// section's positions.
fn close_tail(events: &mut Vec<Event>, section: Vec<Event>, mut finals: Vec<Event>) -> Vec<usize> {
    let end = section.iter().map(|e| e.time).max().unwrap_or(0) + 10 * MS;
    if let Some(first) = finals.iter().map(|e| e.time).min() {
        if first < end {
            for e in &mut finals {
                e.time += end - first;
            }
        }
    }
    let n = section.len();
    let mut all = section;
    finals.sort_by_key(|e| (e.time, e.index));
    all.extend(finals);
    let positions = merge(events, all);
    positions[..n].to_vec()
}

/// After all lock activity, a new process fails to acquire a free key twice, more than the
/// liveness bound apart: unavailable. Names both failed completions.
pub fn inject_unavailable(
    events: &mut Vec<Event>,
    seed: u64,
    liveness_bound_ns: i64,
) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let t = tail(events, &mut rng)?;
    // An indeterminate acquire on a key that never showed a lease may hold it for good
    // (docs/history-format.md gives it no end), so no later stretch of that key is certainly free.
    let uncertain = events.iter().any(|e| {
        e.f == "acquire" && e.ty == EventType::Info && e.key.as_deref() == Some(t.key.as_str())
    });
    if t.lease_ms.is_none() && uncertain {
        return None;
    }
    let u = t.next_pid;
    let key = t.key.clone();
    let held = json!({ "reason": "lock held (not yet expired)" });
    let second = t.start + liveness_bound_ns + 200 * MS;
    let section = vec![
        client(t.start, u, EventType::Invoke, "acquire", &key),
        client(t.start + 100 * US, u, EventType::Fail, "acquire", &key).with_value(held.clone()),
        client(second, u, EventType::Invoke, "acquire", &key),
        client(second + 100 * US, u, EventType::Fail, "acquire", &key).with_value(held),
    ];
    let positions = close_tail(events, section, t.finals);
    done(
        "unavailable",
        &key,
        vec![positions[1] as u64, positions[3] as u64],
    )
}

/// After all lock activity, one new process takes a key again and again while another
/// tries it (always while it is held) for longer than the starvation bound. Names the
/// starving process's first attempt (its invoke: the trying begins there) and its last
/// failure.
pub fn inject_starvation(
    events: &mut Vec<Event>,
    seed: u64,
    starvation_bound_ns: i64,
) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let t = tail(events, &mut rng)?;
    let (holder, starved) = (t.next_pid, t.next_pid + 1);
    let key = t.key.clone();
    let hold = match t.lease_ms {
        Some(lease) => (lease * MS / 2).min(200 * MS),
        None => 200 * MS,
    };
    let cycle = hold + 10 * MS;
    let cycles = (starvation_bound_ns + 500 * MS) / cycle + 2;
    let mut section = Vec::with_capacity(cycles as usize * 6);
    let mut fails = Vec::new();
    let mut token = t.max_token;
    for i in 0..cycles {
        let c = t.start + i * cycle;
        token = token.map(|x| x + 1);
        section.push(client(c, holder, EventType::Invoke, "acquire", &key));
        section.push(
            client(c + 100 * US, holder, EventType::Ok, "acquire", &key)
                .with_value(json!({ "token": token, "lease_ms": t.lease_ms })),
        );
        section.push(client(
            c + hold / 2,
            starved,
            EventType::Invoke,
            "acquire",
            &key,
        ));
        fails.push(section.len());
        section.push(
            client(
                c + hold / 2 + 100 * US,
                starved,
                EventType::Fail,
                "acquire",
                &key,
            )
            .with_value(json!({ "reason": HELD_REASON })),
        );
        section.push(client(c + hold, holder, EventType::Invoke, "release", &key));
        section.push(client(
            c + hold + 100 * US,
            holder,
            EventType::Ok,
            "release",
            &key,
        ));
    }
    let positions = close_tail(events, section, t.finals);
    let first = positions[fails[0] - 1];
    let last = positions[*fails.last()?];
    done("starvation", &key, vec![first as u64, last as u64])
}

/// Two fresh processes ask for the key as a fair lock, 15 ms apart (more than the 10 ms
/// tolerance); the later one gets it first, holds it 1 ms, and only then the earlier one.
pub fn inject_unfair(events: &mut Vec<Event>, seed: u64) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let t = tail(events, &mut rng)?;
    let (waiting, jumper) = (t.next_pid, t.next_pid + 1);
    let key = t.key.clone();
    // The waiting acquire returns 17.2 ms after its invoke: a shorter lease would be dead.
    if t.lease_ms.is_some_and(|l| l <= 18) {
        return None;
    }
    let fair = json!({ "fair": true });
    let grant = |token: Option<i64>| json!({ "token": token, "lease_ms": t.lease_ms });
    let c = t.start;
    let section = vec![
        client(c, waiting, EventType::Invoke, "acquire", &key).with_value(fair.clone()),
        client(c + 15 * MS, jumper, EventType::Invoke, "acquire", &key).with_value(fair),
        client(c + 16 * MS, jumper, EventType::Ok, "acquire", &key)
            .with_value(grant(t.max_token.map(|x| x + 1))),
        client(c + 17 * MS, jumper, EventType::Invoke, "release", &key),
        client(
            c + 17 * MS + 100 * US,
            jumper,
            EventType::Ok,
            "release",
            &key,
        ),
        client(
            c + 17 * MS + 200 * US,
            waiting,
            EventType::Ok,
            "acquire",
            &key,
        )
        .with_value(grant(t.max_token.map(|x| x + 2))),
        client(c + 18 * MS, waiting, EventType::Invoke, "release", &key),
        client(
            c + 18 * MS + 100 * US,
            waiting,
            EventType::Ok,
            "release",
            &key,
        ),
    ];
    let positions = close_tail(events, section, t.finals);
    let indices = [0, 1, 2, 5].map(|i| positions[i] as u64).to_vec();
    done("unfair", &key, indices)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::reader::read_jsonl;

    fn busy(seed: u64) -> SynthConfig {
        SynthConfig {
            seed,
            keys: 3,
            processes: 6,
            events: 5_000,
            fenced: true,
            kill_prob: 0.01,
            info_prob: 0.02,
            renew_prob: 0.3,
            reentrant_prob: 0.2,
            expire_prob: 0.05,
            shuffle_window_ns: MS,
            ..SynthConfig::default()
        }
    }

    fn bytes(events: &[Event]) -> Vec<u8> {
        let mut out = Vec::new();
        write_jsonl(events, &mut out).unwrap();
        out
    }

    #[test]
    fn is_deterministic_and_streams_the_same_bytes() {
        for seed in 0..5 {
            let config = busy(seed);
            let events = generate(&config);
            assert_eq!(events, generate(&config));
            let mut streamed = Vec::new();
            let n = generate_to(&config, &mut streamed).unwrap();
            assert_eq!(n as usize, events.len());
            let written = bytes(&events);
            assert_eq!(
                String::from_utf8(streamed).unwrap(),
                String::from_utf8(written).unwrap()
            );
        }
    }

    #[test]
    fn the_reader_accepts_what_it_generates() {
        for seed in 0..20 {
            let mut config = busy(seed);
            config.lease_ms = if seed % 3 == 0 {
                None
            } else {
                Some(50 + seed as i64 * 20)
            };
            config.writes = seed % 2 == 0;
            config.fenced = seed % 4 < 2;
            let events = generate(&config);
            assert!(events.len() >= config.events, "{} events", events.len());
            let history = read_jsonl(bytes(&events).as_slice(), "synth", None)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            assert_eq!(history.ops.len(), events.len());
        }
    }

    #[test]
    fn extreme_settings_still_make_valid_input() {
        let extremes = [
            SynthConfig {
                events: 0,
                ..SynthConfig::default()
            },
            SynthConfig {
                keys: 1,
                processes: 1,
                lease_ms: Some(1),
                latency_ns: (50 * MS, 100 * MS),
                ..SynthConfig::default()
            },
            SynthConfig {
                kill_prob: 1.0,
                info_prob: 1.0,
                ..SynthConfig::default()
            },
            SynthConfig {
                renew_prob: 1.0,
                reentrant_prob: 1.0,
                expire_prob: 1.0,
                shuffle_window_ns: 50 * MS,
                ..SynthConfig::default()
            },
            SynthConfig {
                lease_ms: None,
                kill_prob: 1.0,
                info_prob: 0.5,
                ..SynthConfig::default()
            },
            SynthConfig {
                keys: 0,
                processes: 0,
                latency_ns: (0, 0),
                gap_ns: (0, 0),
                retry_ns: (0, 0),
                ..SynthConfig::default()
            },
        ];
        for config in extremes {
            let events = generate(&config);
            read_jsonl(bytes(&events).as_slice(), "synth", None)
                .unwrap_or_else(|e| panic!("{config:?}: {e}"));
        }
    }

    #[test]
    fn has_the_faults_it_was_asked_for() {
        let events = generate(&busy(7));
        let count = |f: &dyn Fn(&Event) -> bool| events.iter().filter(|e| f(e)).count();
        assert!(count(&|e| e.f == "kill") > 0);
        assert!(count(&|e| e.ty == EventType::Info && e.error.as_deref() == Some("timeout")) > 0);
        assert!(count(&|e| e.f == "renew" && e.ty == EventType::Ok) > 0);
        assert!(count(&|e| e.f == "renew" && e.ty == EventType::Fail) > 0);
        assert!(count(&|e| e.f == "release" && e.ty == EventType::Fail) > 0);
        assert!(count(&|e| e.f == "write" && e.ty == EventType::Ok) > 0);
        assert!(count(&|e| e.f == "acquire" && e.ty == EventType::Fail) > 0);
        // The shuffle put some events out of time order.
        assert!(events.windows(2).any(|w| w[1].time < w[0].time));
    }

    #[test]
    fn injections_leave_a_readable_history() {
        for kind in INJECTABLE {
            for seed in 0..2 {
                let mut events = generate(&busy(seed));
                let injection = inject(kind, &mut events, seed, 1_000 * MS, 10_000 * MS)
                    .unwrap_or_else(|| panic!("{kind}: no place to inject"));
                assert_eq!(injection.kind, kind);
                assert!(!injection.indices.is_empty());
                for (i, e) in events.iter().enumerate() {
                    assert_eq!(e.index, i as u64);
                }
                read_jsonl(bytes(&events).as_slice(), "synth", None)
                    .unwrap_or_else(|e| panic!("{kind} seed {seed}: {e}"));
            }
        }
    }
}
