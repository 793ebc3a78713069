//! The simulation: clients taking per-key locks from a lock that is correct by construction
//! (see the module above for how it stays correct under the checker's rules).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;

use crate::history::EventType;

use super::config::{SynthConfig, MS};
use super::record::{Op, Rec, Val, Why};
use super::rng::Rng;
use super::shuffle::Shuffler;

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
    /// Nested acquires still to make (`W_NESTED_ACQUIRE` is cleared when none is left).
    nest_left: u32,
    read_value: Option<i64>,
    pending: Pending,
}

impl Slot {
    fn end_hold(&mut self) {
        self.count = 0;
        self.token = None;
        self.work = 0;
        self.nest_left = 0;
        self.renewing = false;
        self.expiring = false;
        self.expired_renewed = false;
        self.read_value = None;
    }
}

pub(super) struct Sim<S> {
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
    reentrant_depth: u32,
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
    pub(super) fn new(config: &SynthConfig, sink: S) -> Self {
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
                // Grown on demand: a million keys times the processes would not fit.
                waiters: VecDeque::new(),
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
                nest_left: 0,
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
            // A stream per slot, the nemesis's and the final reader's.
            shuffler: Shuffler::new(config.shuffle_window_ns, processes + 2, shuffle_rng),
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
            reentrant_depth: config.reentrant_depth.max(1),
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

    pub(super) fn run(mut self) -> io::Result<()> {
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
                slot.nest_left = slot.nest_left.saturating_sub(1);
                if slot.nest_left == 0 {
                    slot.work &= !W_NESTED_ACQUIRE;
                }
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
        slot.nest_left = if reentrant { self.reentrant_depth } else { 0 };
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
