//! Random histories of a possibly faulty lock, for `tests/it/differential.rs`.
//!
//! A small simulation: client slots take per-key locks from a lock server that may be
//! correct or faulty (it grants a held lock, reports leases that are over or longer than
//! the ttl asked for, hands out repeated or falling tokens, refuses renewals and releases it
//! should accept, frees nothing on release), with blocking acquires (fair or not), shared
//! acquires, reentrant acquires, renewals, writes to a fenced or unfenced resource,
//! operations that end `info`, kills of clients, server pauses, partitions and latency
//! (healed or not), histories cut off with operations still pending, times that are often
//! equal (whole milliseconds), and a shuffled merge of the processes' streams. Every server
//! effect happens at the operation's invoke.

use lockaudit::history::{Event, EventType};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

const MS: i64 = 1_000_000;

/// Options of the check a generated history is meant for.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub liveness_ns: i64,
    pub starvation_ns: i64,
    pub fairness_ns: i64,
}

#[derive(Debug, Clone)]
struct KeyCfg {
    name: String,
    lease_ms: Option<i64>,
    ask_ttl: bool,
    tokens: bool,
    fenced: bool,
    /// Probability that the server grants a lock someone holds.
    steal: f64,
    /// Probability that a grant reports a lease already over, or longer than the ttl.
    bad_lease: f64,
    /// Probability that a token repeats or goes back.
    bad_token: f64,
    /// Probability that a renew or release is refused though the lock is ours.
    refuse: f64,
    /// A release answers ok and frees nothing.
    release_frees_nothing: bool,
    fair: bool,
}

#[derive(Debug, Clone)]
struct Holder {
    process: u64,
    shared: bool,
    count: u32,
    lease_end: Option<i64>,
}

#[derive(Debug, Clone, Default)]
struct Server {
    holders: Vec<Holder>,
    counter: i64,
    max_written: Option<i64>,
    /// (slot, invoke time, shared)
    waiters: Vec<(usize, i64, bool)>,
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    Idle,
    Waiting {
        key: usize,
        deadline: i64,
        shared: bool,
    },
    Holding {
        key: usize,
        token: Option<i64>,
        depth: u32,
        steps: u32,
    },
}

#[derive(Debug, Clone)]
struct Slot {
    process: u64,
    next: i64,
    state: State,
    /// Position in `events` of its last completion, and its operation's invoke time.
    last_completion: Option<(usize, i64)>,
}

struct Sim {
    rng: StdRng,
    keys: Vec<KeyCfg>,
    servers: Vec<Server>,
    slots: Vec<Slot>,
    events: Vec<Event>,
    next_process: u64,
    info_prob: f64,
    /// Until when a server-side fault makes `info` outcomes likely.
    trouble_until: i64,
    coarse: bool,
    nesting: f64,
    renewing: f64,
    shared: f64,
    blocking: f64,
    /// Probability that a renew or nested acquire promises a lease other than the key's: of
    /// another length, one on a lock that has none (a library's renewal notice), or (a
    /// nested acquire) none at all. Each sets the hold's lease, on the server as in the
    /// history.
    varied_leases: f64,
}

fn value_of(ok: Option<(Option<i64>, Option<i64>)>) -> Option<Value> {
    ok.map(|(token, lease)| json!({"token": token, "lease_ms": lease}))
}

impl Sim {
    /// The lease a renew (or, `nested`, a reentrant acquire) of `key` promises.
    fn promised(&mut self, key: usize, nested: bool) -> Option<i64> {
        let usual = self.keys[key].lease_ms;
        if !self.rng.random_bool(self.varied_leases) {
            return usual;
        }
        if nested && self.rng.random_bool(0.3) {
            return None;
        }
        Some(self.rng.random_range(1..3_000))
    }

    fn time(&mut self, lo: i64, hi: i64) -> i64 {
        let t = self.rng.random_range(lo..=hi);
        if self.coarse {
            t / MS * MS
        } else {
            t
        }
    }

    fn latency(&mut self) -> i64 {
        match self.rng.random_range(0..20) {
            0..=2 => 0,
            3..=15 => self.time(0, 5 * MS),
            16..=18 => self.time(5 * MS, 100 * MS),
            _ => self.time(100 * MS, 2_000 * MS),
        }
    }

    fn gap(&mut self, lease_ms: Option<i64>) -> i64 {
        match self.rng.random_range(0..20) {
            0..=3 => 0,
            4..=16 => self.time(0, 30 * MS),
            17..=18 => self.time(30 * MS, 500 * MS),
            _ => {
                let long = lease_ms.unwrap_or(1_000).max(1) * MS * 2;
                self.time(0, long)
            }
        }
    }

    fn push(&mut self, mut event: Event) -> usize {
        event.index = self.events.len() as u64;
        self.events.push(event);
        self.events.len() - 1
    }

    fn client(&mut self, time: i64, process: u64, ty: EventType, f: &str, key: usize) -> usize {
        let name = self.keys[key].name.clone();
        self.push(Event::client(0, time, process, ty, f, &name))
    }

    fn retire(&mut self, slot: usize, at: i64) {
        self.slots[slot].process = self.next_process;
        self.next_process += 1;
        self.slots[slot].state = State::Idle;
        self.slots[slot].next = at;
    }

    fn info(&mut self, now: i64) -> bool {
        let p = if now < self.trouble_until {
            self.info_prob * 5.0 + 0.1
        } else {
            self.info_prob
        };
        self.rng.random_bool(p.min(1.0))
    }

    /// Drops holders whose lease ran out (the server expires them).
    fn expire(&mut self, key: usize, now: i64) {
        self.servers[key]
            .holders
            .retain(|h| h.lease_end.is_none_or(|end| end > now));
    }

    fn grantable(&mut self, key: usize, now: i64, shared: bool) -> bool {
        self.expire(key, now);
        let holders = &self.servers[key].holders;
        holders.is_empty() || (shared && holders.iter().all(|h| h.shared))
    }

    /// The server grants `process` the key at `now`; returns (token, reported lease).
    fn grant(
        &mut self,
        key: usize,
        process: u64,
        now: i64,
        shared: bool,
        latency: i64,
    ) -> (Option<i64>, Option<i64>) {
        let cfg = self.keys[key].clone();
        let server = &mut self.servers[key];
        server.counter += 1;
        let mut token = server.counter;
        if cfg.tokens && self.rng.random_bool(cfg.bad_token) {
            token -= self.rng.random_range(1..=2);
        }
        self.servers[key].holders.push(Holder {
            process,
            shared,
            count: 1,
            lease_end: cfg.lease_ms.map(|l| now + l * MS),
        });
        let mut lease = cfg.lease_ms;
        if let Some(l) = lease {
            if self.rng.random_bool(cfg.bad_lease) {
                lease = Some(if self.rng.random_bool(0.5) {
                    (latency / MS).max(0)
                } else {
                    l + self.rng.random_range(1..=1_000)
                });
            }
        }
        (cfg.tokens.then_some(token), lease)
    }

    fn acquire_value(&mut self, key: usize, shared: bool, wait: Option<i64>) -> Option<Value> {
        let cfg = &self.keys[key];
        if self.rng.random_bool(0.2) {
            return None;
        }
        let mut v = serde_json::Map::new();
        if cfg.ask_ttl {
            if let Some(l) = cfg.lease_ms {
                v.insert("ttl_ms".into(), json!(l));
            }
        }
        if shared {
            v.insert("mode".into(), json!("shared"));
        } else if self.rng.random_bool(0.3) {
            v.insert("mode".into(), json!("exclusive"));
        }
        if cfg.fair || self.rng.random_bool(0.1) {
            v.insert("fair".into(), json!(cfg.fair));
        }
        if let Some(w) = wait {
            v.insert("wait_ms".into(), json!(w / MS));
        }
        Some(Value::Object(v))
    }

    // One arm per step of a client, as the generated histories' shape reads best.
    #[allow(clippy::too_many_lines)]
    fn act(&mut self, s: usize, now: i64) {
        let process = self.slots[s].process;
        match self.slots[s].state.clone() {
            State::Idle => {
                let key = self.rng.random_range(0..self.keys.len());
                let shared = self.rng.random_bool(self.shared);
                let wait = self
                    .rng
                    .random_bool(self.blocking)
                    .then(|| self.time(0, 3_000 * MS));
                let value = self.acquire_value(key, shared, wait);
                let mut invoke = Event::client(0, now, process, EventType::Invoke, "acquire", "");
                invoke.key = Some(self.keys[key].name.clone());
                invoke.value = value;
                self.push(invoke);
                let lat = self.latency();
                let steal = self.keys[key].steal;
                let free = self.grantable(key, now, shared);
                if free || self.rng.random_bool(steal) {
                    let (token, lease) = self.grant(key, process, now, shared, lat);
                    if self.info(now) {
                        let c = self.client(now + lat, process, EventType::Info, "acquire", key);
                        self.slots[s].last_completion = Some((c, now));
                        let gap = self.gap(None);
                        self.retire(s, now + lat + gap);
                        return;
                    }
                    let c = self.client(now + lat, process, EventType::Ok, "acquire", key);
                    self.events[c].value = value_of(Some((token, lease)));
                    self.slots[s].last_completion = Some((c, now));
                    let steps = self.rng.random_range(0..5);
                    self.slots[s].state = State::Holding {
                        key,
                        token,
                        depth: 1,
                        steps,
                    };
                    let gap = self.gap(self.keys[key].lease_ms);
                    self.slots[s].next = now + lat + gap;
                } else if let Some(w) = wait {
                    self.servers[key].waiters.push((s, now, shared));
                    self.slots[s].state = State::Waiting {
                        key,
                        deadline: now + w,
                        shared,
                    };
                    self.slots[s].last_completion = None;
                    self.slots[s].next = now + w;
                } else {
                    let ty = if self.info(now) {
                        EventType::Info
                    } else {
                        EventType::Fail
                    };
                    let c = self.client(now + lat, process, ty, "acquire", key);
                    self.slots[s].last_completion = Some((c, now));
                    let next = now + lat + self.time(0, 300 * MS);
                    if ty == EventType::Info {
                        self.retire(s, next);
                    } else {
                        self.slots[s].next = next;
                    }
                }
            }
            State::Waiting { key, shared, .. } => {
                // The wait ran out.
                self.servers[key].waiters.retain(|w| w.0 != s);
                if self.grantable(key, now, shared) {
                    let (token, lease) = self.grant(key, process, now, shared, 0);
                    let c = self.client(now, process, EventType::Ok, "acquire", key);
                    self.events[c].value = value_of(Some((token, lease)));
                    self.slots[s].last_completion = Some((c, now));
                    self.slots[s].state = State::Holding {
                        key,
                        token,
                        depth: 1,
                        steps: self.rng.random_range(0..4),
                    };
                    self.slots[s].next = now + self.gap(self.keys[key].lease_ms);
                } else {
                    let c = self.client(now, process, EventType::Fail, "acquire", key);
                    self.slots[s].last_completion = Some((c, now));
                    self.slots[s].state = State::Idle;
                    self.slots[s].next = now + self.time(0, 300 * MS);
                }
            }
            State::Holding {
                key,
                token,
                depth,
                steps,
            } => {
                let lat = self.latency();
                let ours = |sim: &mut Sim| {
                    sim.expire(key, now);
                    sim.servers[key]
                        .holders
                        .iter()
                        .position(|h| h.process == process)
                };
                if steps > 0 {
                    let choice = self.rng.random_range(0..10);
                    let (f, ty, value) = if choice < 4 {
                        // A write.
                        let cfg = self.keys[key].clone();
                        let server = &mut self.servers[key];
                        let accepted = !cfg.fenced
                            || match (token, server.max_written) {
                                (Some(t), Some(m)) => t >= m,
                                _ => true,
                            };
                        if accepted {
                            if let Some(t) = token {
                                server.max_written =
                                    Some(server.max_written.map_or(t, |m| m.max(t)));
                            }
                        }
                        let ty = if self.rng.random_bool(self.info_prob) {
                            EventType::Info
                        } else if accepted {
                            EventType::Ok
                        } else {
                            EventType::Fail
                        };
                        let v = json!({"token": token, "value": self.rng.random_range(0..100)});
                        ("write", ty, Some(v))
                    } else if choice < 7 && self.rng.random_bool(self.renewing) {
                        let held = ours(self);
                        let refuse = self.rng.random_bool(self.keys[key].refuse);
                        let promised = self.promised(key, false);
                        let ty = match held {
                            _ if self.info(now) => EventType::Info,
                            Some(h) if !refuse => {
                                self.servers[key].holders[h].lease_end =
                                    promised.map(|l| now + l * MS);
                                EventType::Ok
                            }
                            _ => EventType::Fail,
                        };
                        let v = (ty == EventType::Ok).then(|| json!({"lease_ms": promised}));
                        ("renew", ty, v)
                    } else if choice < 9 && self.rng.random_bool(self.nesting) {
                        let held = ours(self);
                        let promised = self.promised(key, true);
                        let ty = match held {
                            _ if self.info(now) => EventType::Info,
                            Some(h) => {
                                // A reentrant acquire sets the lease, as a renew does.
                                let holder = &mut self.servers[key].holders[h];
                                holder.count += 1;
                                holder.lease_end = promised.map(|l| now + l * MS);
                                EventType::Ok
                            }
                            None => EventType::Fail,
                        };
                        let v = (ty == EventType::Ok)
                            .then(|| json!({"token": token, "lease_ms": promised}));
                        let mut invoke =
                            Event::client(0, now, process, EventType::Invoke, "acquire", "");
                        invoke.key = Some(self.keys[key].name.clone());
                        invoke.value = self.acquire_value(key, false, None);
                        self.push(invoke);
                        let c = self.client(now + lat, process, ty, "acquire", key);
                        self.events[c].value = v;
                        self.slots[s].last_completion = Some((c, now));
                        let depth = depth + u32::from(ty == EventType::Ok);
                        self.after(s, key, token, depth, steps - 1, now + lat, ty);
                        return;
                    } else {
                        (
                            "write",
                            EventType::Ok,
                            Some(json!({"token": token, "value": 0})),
                        )
                    };
                    self.client(now, process, EventType::Invoke, f, key);
                    let c = self.client(now + lat, process, ty, f, key);
                    if f == "write" {
                        let i = self.events.len() - 2;
                        self.events[i].value = value.clone();
                    }
                    self.events[c].value = value;
                    self.slots[s].last_completion = Some((c, now));
                    self.after(s, key, token, depth, steps - 1, now + lat, ty);
                } else {
                    // Release.
                    self.client(now, process, EventType::Invoke, "release", key);
                    let held = ours(self);
                    let refuse = self.rng.random_bool(self.keys[key].refuse);
                    let info = self.info(now);
                    let ty = match held {
                        _ if info => EventType::Info,
                        Some(_) if refuse => EventType::Fail,
                        Some(_) => EventType::Ok,
                        None => EventType::Fail,
                    };
                    // What the server did: an info release may or may not have happened.
                    let happened = match ty {
                        EventType::Ok => !self.keys[key].release_frees_nothing,
                        EventType::Info => held.is_some() && self.rng.random_bool(0.5),
                        _ => false,
                    };
                    if let (true, Some(h)) = (happened, held) {
                        let holder = &mut self.servers[key].holders[h];
                        holder.count = holder.count.saturating_sub(1);
                        if holder.count == 0 {
                            self.servers[key].holders.remove(h);
                            self.wake(key, now);
                        }
                    }
                    let c = self.client(now + lat, process, ty, "release", key);
                    self.slots[s].last_completion = Some((c, now));
                    let depth = depth.saturating_sub(1);
                    self.after(s, key, token, depth, 0, now + lat, ty);
                }
            }
        }
    }

    /// After an operation of a hold completed at `at` with `ty`.
    #[allow(clippy::too_many_arguments)]
    fn after(
        &mut self,
        s: usize,
        key: usize,
        token: Option<i64>,
        depth: u32,
        steps: u32,
        at: i64,
        ty: EventType,
    ) {
        let gap = self.gap(self.keys[key].lease_ms);
        if ty == EventType::Info {
            self.retire(s, at + gap);
        } else if depth == 0 {
            self.slots[s].state = State::Idle;
            self.slots[s].next = at + gap;
        } else {
            self.slots[s].state = State::Holding {
                key,
                token,
                depth,
                steps,
            };
            self.slots[s].next = at + gap;
        }
    }

    /// A release freed the key at `now`: a waiter may get it.
    fn wake(&mut self, key: usize, now: i64) {
        if self.servers[key].waiters.is_empty() {
            return;
        }
        let pick = if self.keys[key].fair && !self.rng.random_bool(0.1) {
            0
        } else {
            self.rng.random_range(0..self.servers[key].waiters.len())
        };
        let (s, _, shared) = self.servers[key].waiters.remove(pick);
        if !self.grantable(key, now, shared) {
            self.servers[key].waiters.insert(pick, (s, now, shared));
            return;
        }
        let process = self.slots[s].process;
        let lat = self.latency();
        let (token, lease) = self.grant(key, process, now, shared, lat);
        let c = self.client(now + lat, process, EventType::Ok, "acquire", key);
        self.events[c].value = value_of(Some((token, lease)));
        let invoke = match self.slots[s].state {
            State::Waiting { .. } => now,
            _ => now,
        };
        self.slots[s].last_completion = Some((c, invoke));
        self.slots[s].state = State::Holding {
            key,
            token,
            depth: 1,
            steps: self.rng.random_range(0..4),
        };
        let gap = self.gap(self.keys[key].lease_ms);
        self.slots[s].next = now + lat + gap;
    }

    /// The nemesis kills slot `s` at `now`.
    fn kill(&mut self, s: usize, now: i64) {
        let process = self.slots[s].process;
        let mut killed_op = false;
        if let State::Waiting { key, .. } = self.slots[s].state {
            self.servers[key].waiters.retain(|w| w.0 != s);
            let c = self.client(now, process, EventType::Info, "acquire", key);
            self.events[c].error = Some("killed".into());
            killed_op = true;
        } else if let Some((c, invoked)) = self.slots[s].last_completion {
            if invoked <= now && self.events[c].time > now {
                self.events[c].time = now;
                self.events[c].ty = EventType::Info;
                self.events[c].value = None;
                self.events[c].error = Some("killed".into());
                killed_op = true;
            }
        }
        let _ = killed_op;
        let target = format!("worker-{s}");
        self.push(Event::nemesis(0, now, "kill", &[&target], &[process]));
        self.slots[s].last_completion = None;
        let restart = self.time(0, 500 * MS);
        self.retire(s, now + restart);
    }
}

/// A random history of a possibly faulty lock, and the bounds to check it with.
#[allow(clippy::too_many_lines)]
pub fn generate(seed: u64) -> (Vec<Event>, Bounds) {
    let mut rng = StdRng::seed_from_u64(seed);
    let nkeys = rng.random_range(1..=3);
    let keys: Vec<KeyCfg> = (0..nkeys)
        .map(|k| {
            let lease_ms = match rng.random_range(0..6) {
                0 => None,
                1 => Some(50),
                2 => Some(200),
                3 => Some(1_000),
                _ => Some(rng.random_range(1..3_000)),
            };
            let faulty = rng.random_bool(0.6);
            let p = |rng: &mut StdRng, hi: f64| {
                if faulty {
                    rng.random_range(0.0..hi)
                } else {
                    0.0
                }
            };
            KeyCfg {
                name: format!("lock:{k}"),
                lease_ms,
                ask_ttl: rng.random_bool(0.5),
                tokens: rng.random_bool(0.6),
                fenced: rng.random_bool(0.4),
                steal: p(&mut rng, 0.2),
                bad_lease: p(&mut rng, 0.1),
                bad_token: p(&mut rng, 0.15),
                refuse: p(&mut rng, 0.15),
                release_frees_nothing: faulty && rng.random_bool(0.1),
                fair: rng.random_bool(0.3),
            }
        })
        .collect();
    let nslots = rng.random_range(1..=5);
    let horizon = rng.random_range(200 * MS..=30_000 * MS);
    let max_events = rng.random_range(10..=400);
    let mut sim = Sim {
        coarse: rng.random_bool(0.7),
        info_prob: rng.random_range(0.0..0.08),
        nesting: rng.random_range(0.0..0.5),
        renewing: rng.random_range(0.0..1.0),
        shared: if rng.random_bool(0.3) {
            rng.random_range(0.0..0.8)
        } else {
            0.0
        },
        blocking: if rng.random_bool(0.4) {
            rng.random_range(0.0..0.8)
        } else {
            0.0
        },
        varied_leases: if rng.random_bool(0.5) {
            rng.random_range(0.0..0.5)
        } else {
            0.0
        },
        trouble_until: i64::MIN,
        servers: vec![Server::default(); keys.len()],
        keys,
        slots: Vec::new(),
        events: Vec::new(),
        next_process: nslots as u64,
        rng,
    };
    for s in 0..nslots {
        let next = sim.time(0, 50 * MS);
        sim.slots.push(Slot {
            process: s as u64,
            next,
            state: State::Idle,
            last_completion: None,
        });
    }
    let kill_every = if sim.rng.random_bool(0.5) {
        Some(sim.rng.random_range(100 * MS..=5_000 * MS))
    } else {
        None
    };
    let fault_every = if sim.rng.random_bool(0.5) {
        Some(sim.rng.random_range(100 * MS..=5_000 * MS))
    } else {
        None
    };
    let mut next_kill = kill_every.map(|k| sim.time(0, k));
    let mut next_fault = fault_every.map(|k| sim.time(0, k));
    loop {
        let s = (0..sim.slots.len())
            .min_by_key(|&s| sim.slots[s].next)
            .unwrap();
        let now = sim.slots[s].next;
        if now > horizon || sim.events.len() >= max_events {
            break;
        }
        if let Some(k) = next_kill.filter(|&k| k <= now) {
            let victim = sim.rng.random_range(0..sim.slots.len());
            sim.kill(victim, k);
            next_kill = kill_every.map(|e| k + sim.time(1, e));
            continue;
        }
        if let Some(f) = next_fault.filter(|&f| f <= now) {
            let (name, heal, target) = match sim.rng.random_range(0..4) {
                0 => ("pause", "resume", "redis-0".to_string()),
                1 => ("partition", "heal", "redis-0".to_string()),
                2 => ("latency", "heal", "redis-1".to_string()),
                _ => {
                    let w = sim.rng.random_range(0..sim.slots.len());
                    ("pause", "resume", format!("worker-{w}"))
                }
            };
            let lasts = sim.time(0, 3_000 * MS);
            let processes: Vec<u64> = match target.strip_prefix("worker-") {
                Some(w) => vec![sim.slots[w.parse::<usize>().unwrap()].process],
                None => Vec::new(),
            };
            // Now and then a fault or its heal names no target (a heal of everything).
            let named = |sim: &mut Sim| {
                if sim.rng.random_bool(0.1) {
                    Vec::new()
                } else {
                    vec![target.as_str()]
                }
            };
            let (start_targets, heal_targets) = (named(&mut sim), named(&mut sim));
            sim.push(Event::nemesis(0, f, name, &start_targets, &processes));
            sim.push(Event::nemesis(
                0,
                f + lasts,
                heal,
                &heal_targets,
                &processes,
            ));
            if !target.starts_with("worker-") {
                sim.trouble_until = sim.trouble_until.max(f + lasts);
            }
            next_fault = fault_every.map(|e| f + lasts + sim.time(1, e));
            continue;
        }
        sim.act(s, now);
    }
    // Cut the history off: operations whose completion falls after the end stay pending.
    let end = sim
        .slots
        .iter()
        .map(|s| s.next)
        .min()
        .unwrap_or(0)
        .min(horizon);
    let mut events: Vec<Event> = sim.events.into_iter().filter(|e| e.time <= end).collect();
    // A kill of a process whose operations were all cut off would name a process the
    // history never shows: harmless, kept.
    events.sort_by_key(|e| e.time);
    let mut rng = sim.rng;
    if rng.random_bool(0.3) {
        shuffle(&mut events, &mut rng);
    }
    // Now and then the run's clock sits near an end of the 64-bit range (times may be any
    // integers): leases then reach past i64::MAX, or times are negative.
    let offset = match rng.random_range(0..20) {
        0 => i64::MAX - end - rng.random_range(0..=2_000 * MS),
        1 => i64::MIN + rng.random_range(0..=2_000 * MS),
        _ => 0,
    };
    for (i, e) in events.iter_mut().enumerate() {
        e.index = i as u64;
        e.time += offset;
    }
    let bounds = if rng.random_bool(0.5) {
        Bounds {
            liveness_ns: 1_000 * MS,
            starvation_ns: 10_000 * MS,
            fairness_ns: 10 * MS,
        }
    } else {
        Bounds {
            liveness_ns: rng.random_range(10 * MS..=1_000 * MS),
            starvation_ns: rng.random_range(50 * MS..=3_000 * MS),
            fairness_ns: rng.random_range(0..=100 * MS),
        }
    };
    (events, bounds)
}

/// Merges the processes' streams a little out of time order, each process's own order kept.
fn shuffle(events: &mut Vec<Event>, rng: &mut StdRng) {
    let window = rng.random_range(1..=50 * MS);
    let mut last: std::collections::HashMap<String, i64> = Default::default();
    let mut keyed: Vec<(i64, usize, Event)> = Vec::new();
    for (i, e) in events.drain(..).enumerate() {
        // A kill must stay after every event of the process it kills (the reader refuses a
        // killed process's later invoke), so it moves with that process's stream.
        let killed = e.value.as_ref().and_then(|v| v["processes"][0].as_u64());
        let who = match (e.f.as_str(), killed) {
            ("kill", Some(p)) if e.key.is_none() => p.to_string(),
            _ => e.process.to_string(),
        };
        let jitter = e.time.saturating_add(rng.random_range(0..window));
        let at = last.get(&who).map_or(jitter, |&l| jitter.max(l));
        last.insert(who, at);
        keyed.push((at, i, e));
    }
    keyed.sort_by_key(|(at, i, _)| (*at, *i));
    events.extend(keyed.into_iter().map(|(_, _, e)| e));
}
