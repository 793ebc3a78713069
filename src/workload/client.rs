//! One logical client's loop: acquire; in the critical section read the guarded counter,
//! hold (work), write it + 1 (carrying the token); release; think; again, until the deadline.
//! With a `read_share` (rw-lock, lua, external), that share of the cycles are reads instead: the acquire
//! asks for `shared` mode, and the critical section reads and holds but never writes.
//!
//! Every operation is recorded as an invoke just before it starts and a completion as soon
//! as it ends (docs/src/reference/history.md). An operation that ends `info` retires the process: its state is
//! unknown, so the slot goes on as a fresh process with a fresh lock client (a new owner id),
//! never reusing the old one's identity.

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::history::{Event, EventType};
use crate::locks::{
    self, Acquired, Algorithm, CounterError, CounterWrite, LockClient, LockError, LockOptions,
    Mode, Notice, NoticeKind, Outcome,
};
use crate::topology::Endpoints;

use super::controls::Controls;
use super::resource::{Resource, Storage, WriteResult};
use super::sink::EventSink;
use super::spec::WorkloadSpec;
use crate::clock::{wall_ms, RunClock};
use crate::units::Span;

/// Who this client is and where it works.
#[derive(Debug, Clone)]
pub struct ClientPlan {
    /// The client's slot, 0..total_slots.
    pub slot: u64,
    pub total_slots: u64,
    /// The generation of the slot's first process (see `WorkerConfig::first_generation`).
    pub first_generation: u64,
    pub spec: WorkloadSpec,
    pub endpoints: Endpoints,
    /// Run time (ns) at which the client stops starting new cycles.
    pub deadline_ns: i64,
    /// The worker's crash point and clock skew, set by the nemesis, and the run's clock.
    pub controls: Arc<Controls>,
    /// The run folder (`lockaudit worker --run`): external adapters run and log there.
    pub run_dir: Option<std::path::PathBuf>,
    /// The worker's connection to the storage server, shared by its clients.
    pub storage: Arc<Storage>,
}

/// What an acquire came to, for the loop.
enum Taken {
    /// Ours, with the fencing token if any.
    Held(Option<i64>),
    Refused,
    /// Unknown: the process is retired.
    Retired,
}

/// How a completion came out, for recording.
enum Done {
    Ok(Option<serde_json::Value>),
    Fail(Option<serde_json::Value>, String),
    Info(String),
}

/// How a critical section ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    /// Done (its write accepted, or refused by a fenced resource).
    Done,
    /// Its conditional write found the counter changed since the read (optimistic).
    Conflict,
    /// Its read certainly did not happen (the counter's server refused the connection):
    /// a lock holder gives up and releases, an optimistic client retries.
    Refused,
    /// The process was retired on the way.
    Retired,
}

/// Why a client could not connect, and whether trying again could help.
struct ConnectError {
    why: String,
    lasting: bool,
    /// An adapter that failed its start (see `connect_first`).
    adapter: bool,
}

/// Why a client could not make its first incarnation, naming it (`client 3`). `why` is
/// the last attempt's reason, in words: a lock client's error or the storage server's.
#[derive(Debug, thiserror::Error)]
pub enum ConnectFirstError {
    /// Trying again cannot help: the workload's scripts, an unknown algorithm.
    #[error("{client}: {why}")]
    Lasting { client: String, why: String },
    /// An external adapter that failed its start three times.
    #[error("{client}: {why} (3 tries)")]
    AdapterGaveUp { client: String, why: String },
    #[error("{client} could not connect within {secs} s: {why}")]
    TimedOut {
        client: String,
        secs: u64,
        why: String,
    },
}

/// The client's current identity.
struct Incarnation {
    process: u64,
    lock: Box<dyn LockClient>,
    resource: Resource,
    /// The guarded counter is the lock's own (`Algorithm::counter_with_lock`), not on the
    /// storage server.
    counter_with_lock: bool,
}

pub struct Client {
    plan: ClientPlan,
    events: Arc<EventSink>,
    rng: StdRng,
    generation: u64,
    me: Option<Incarnation>,
    /// The time of the last event recorded, which the next may not precede.
    last_time: i64,
    /// The keys the lock's library said were lost (`lost` notices) since each was last
    /// acquired: a holder that heeds its library makes no further write in that hold.
    lost: Vec<String>,
}

/// The lock keys of a workload: `lock:0`, `lock:1`, ...
pub fn key_name(k: usize) -> String {
    format!("lock:{k}")
}

/// Time limit of a read or write of the guarded counter. The storage server is never
/// faulted, so only a paused worker makes these slow; a long limit keeps a pause from
/// turning them `info` (which would retire a holder that then never releases).
const STORAGE_TIMEOUT: Duration = Duration::from_secs(30);

fn draw(rng: &mut StdRng, span: Span) -> Duration {
    Duration::from_millis(rng.random_range(span.min.0..=span.max.0))
}

impl Client {
    pub fn new(plan: ClientPlan, events: Arc<EventSink>) -> Client {
        let seed = plan.spec.seed
            ^ (plan.slot.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            ^ plan.first_generation.wrapping_mul(0xD1B5_4A32_D192_ED03);
        Client {
            generation: plan.first_generation,
            plan,
            events,
            rng: StdRng::seed_from_u64(seed),
            me: None,
            last_time: 0,
            lost: Vec::new(),
        }
    }

    fn process(&self) -> u64 {
        self.plan.slot + self.generation * self.plan.total_slots
    }

    /// Connects a fresh incarnation if there is none. A failure to connect is no operation
    /// (nothing was invoked): the client waits a moment and tries again. Each attempt is
    /// bounded (the operation timeout, or an adapter's start, whichever is longer), so that
    /// no client hangs unseen in a connect that never completes.
    async fn incarnation(&mut self) -> Option<&mut Incarnation> {
        if self.me.is_none() {
            let limit = Duration::from_millis(self.plan.spec.op_timeout.0)
                .max(locks::external::INIT_PATIENCE);
            let connected = tokio::time::timeout(limit, self.connect())
                .await
                .unwrap_or_else(|_| {
                    Err(ConnectError {
                        why: format!("no connection within {} ms", limit.as_millis()),
                        lasting: false,
                        adapter: false,
                    })
                });
            if let Err(e) = connected {
                tracing::warn!("client {}: cannot connect: {}", self.plan.slot, e.why);
                tokio::time::sleep(Duration::from_millis(100)).await;
                return None;
            }
        }
        self.me.as_mut()
    }

    /// Makes the client's first incarnation before the run's clock starts, trying again
    /// until `limit` has passed; the error says why it could not, naming the client. A
    /// client that can never connect (a lock the workload's scripts cannot make) gives up
    /// at once, and an adapter that failed its start three times
    /// (its library missing, say) gives up then: a slow start may deserve a second try,
    /// a broken one does not deserve thirty seconds of them.
    pub async fn connect_first(&mut self, limit: Duration) -> Result<(), ConnectFirstError> {
        let until = tokio::time::Instant::now() + limit;
        let client = format!("client {}", self.plan.slot);
        let mut adapter_failures = 0;
        loop {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            let why = match tokio::time::timeout(left, self.connect()).await {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(e)) if e.lasting => {
                    return Err(ConnectFirstError::Lasting { client, why: e.why })
                }
                Ok(Err(e)) if e.adapter => {
                    adapter_failures += 1;
                    if adapter_failures >= 3 {
                        return Err(ConnectFirstError::AdapterGaveUp { client, why: e.why });
                    }
                    e.why
                }
                Ok(Err(e)) => e.why,
                Err(_) => "its connection did not complete".to_string(),
            };
            if tokio::time::Instant::now() + Duration::from_millis(100) >= until {
                return Err(ConnectFirstError::TimedOut {
                    client,
                    secs: limit.as_secs(),
                    why,
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The run's clock, which the worker's controls keep: it starts at `WorkerCommand::Go`
    /// when the clients connected first.
    fn clock(&self) -> RunClock {
        self.plan.controls.clock()
    }

    /// Makes a fresh incarnation: a lock client and the storage connection.
    async fn connect(&mut self) -> Result<(), ConnectError> {
        let spec = &self.plan.spec;
        let options = LockOptions {
            ttl_ms: spec.ttl.0,
            retry_attempts: spec.retry.attempts,
            retry_backoff_ms: spec.retry.backoff.0,
            watchdog: spec.watchdog,
            fenced: spec.fenced,
            reconnect: spec.reconnect,
            scripts: spec.lua_scripts(),
            adapter: spec.adapter.clone(),
            adapter_options: spec.adapter_options_json(),
            wait_ms: spec.wait.map_or(0, |w| w.0),
            modes: spec.read_share > 0.0,
            fair: spec.is_fair(),
            run_dir: self.plan.run_dir.clone(),
            process: self.process(),
            client_id: format!("client-{}-{:x}", self.process(), self.rng.random::<u64>()),
            op_timeout_ms: spec.op_timeout.0,
            on_step: Some(self.crash_hook()),
            live_skew_ms: Some(self.plan.controls.skew_ms.clone()),
            adapter_clock: self.plan.controls.adapter_clock.clone(),
            ..LockOptions::default()
        };
        let lock = match locks::connect(spec.algorithm.name, &self.plan.endpoints, &options).await {
            Ok(lock) => lock,
            Err(e) => {
                // Trying again cannot help these: the same scripts would fail the same way.
                // (An unreachable server is `Endpoints` too, and may come up: it is tried
                // again.)
                let lasting = matches!(e, LockError::Scripts(_) | LockError::UnknownAlgorithm(_));
                return Err(ConnectError {
                    why: e.to_string(),
                    lasting,
                    adapter: matches!(e, LockError::Adapter(_)),
                });
            }
        };
        let resource = self
            .plan
            .storage
            .resource()
            .await
            .map_err(|e| ConnectError {
                why: format!("the storage server: {e}"),
                lasting: false,
                adapter: false,
            })?;
        self.me = Some(Incarnation {
            process: self.process(),
            lock,
            resource,
            counter_with_lock: (self.plan.spec.algorithm).counter_with_lock(self.plan.spec.fenced),
        });
        Ok(())
    }

    fn record(
        &mut self,
        process: u64,
        ty: EventType,
        f: &str,
        key: &str,
        value: Option<serde_json::Value>,
        error: Option<String>,
    ) -> bool {
        let now = self.clock().now();
        self.record_at(now, process, ty, f, key, value, error)
    }

    /// Records an operation's invoke, just before it starts. Once the worker has stopped
    /// recording (the run is stopping) nothing is recorded and the operation must not
    /// start: the client waits here, its connections open, until the worker ends.
    async fn invoke(&mut self, process: u64, f: &str, key: &str, value: Option<serde_json::Value>) {
        if !self.record(process, EventType::Invoke, f, key, value, None) {
            std::future::pending::<()>().await;
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn record_at(
        &mut self,
        time: i64,
        process: u64,
        ty: EventType,
        f: &str,
        key: &str,
        value: Option<serde_json::Value>,
        error: Option<String>,
    ) -> bool {
        // A process's events stay in time order (docs/src/reference/history.md).
        let time = time.max(self.last_time);
        self.last_time = time;
        let mut event = Event::client(0, time, process, ty, f, key);
        event.value = value;
        event.error = error;
        event.wall = Some(wall_ms());
        self.events.send(&event)
    }

    /// Waits `pause`, recording the lock library's notices as they come.
    async fn idle(&mut self, pause: Duration) {
        self.idle_holding(pause, None).await;
    }

    /// `idle`, which ends early once the library says `held` is lost (unless the workload
    /// writes after such a notice): the holder leaves its critical section.
    async fn idle_holding(&mut self, pause: Duration, held: Option<&str>) {
        let until = tokio::time::Instant::now() + pause;
        loop {
            if held.is_some_and(|key| self.heeds_loss_of(key)) {
                return;
            }
            let Some(me) = self.me.as_mut() else {
                tokio::time::sleep_until(until).await;
                return;
            };
            let process = me.process;
            let notice = tokio::select! {
                () = tokio::time::sleep_until(until) => return,
                notice = me.lock.next_notice() => notice,
            };
            if let Some(notice) = notice {
                self.record_notice(process, notice);
            }
        }
    }

    /// Whether the library said `key` is lost in this hold, and the client heeds it: it
    /// makes no further write in the hold (`write_after_lost` keeps writing).
    fn heeds_loss_of(&self, key: &str) -> bool {
        !self.plan.spec.write_after_lost && self.lost.iter().any(|k| k == key)
    }

    /// Records the notices the lock's library sent while an operation was pending, now that
    /// it is complete: the process runs one operation at a time.
    fn record_pending_notices(&mut self, process: u64) {
        while let Some(notice) = self.me.as_mut().and_then(|me| me.lock.try_notice()) {
            self.record_notice(process, notice);
        }
    }

    /// One notice as the renew it reports (docs/src/reference/protocol.md): a `renew` invoked and
    /// completed when the notice was read, `ok` with its lease for `renewed`, `fail` for
    /// `lost`. One read while an operation was pending is recorded after that operation's
    /// completion, its lease shortened by the wait so that it still ends where the notice
    /// said.
    fn record_notice(&mut self, process: u64, notice: Notice) {
        let now = self.clock().now();
        let waited = i64::try_from(notice.at.elapsed().as_nanos()).unwrap_or(i64::MAX);
        let read = now.saturating_sub(waited);
        let time = read.max(self.last_time);
        let late_ms = (time - read + 999_999) / 1_000_000;
        match notice.kind {
            NoticeKind::Renewed { key, lease_ms } => {
                let lease_ms = lease_ms.map(|ms| ms.saturating_sub(late_ms).max(0));
                self.record_at(time, process, EventType::Invoke, "renew", &key, None, None);
                let value = json!({ "lease_ms": lease_ms, "notice": true });
                self.record_at(
                    time,
                    process,
                    EventType::Ok,
                    "renew",
                    &key,
                    Some(value),
                    None,
                );
            }
            NoticeKind::Lost { key, error } => {
                if !self.lost.contains(&key) {
                    self.lost.push(key.clone());
                }
                self.record_at(time, process, EventType::Invoke, "renew", &key, None, None);
                let value = json!({ "notice": true });
                let error = format!("the library reported the lock lost: {error}");
                self.record_at(
                    time,
                    process,
                    EventType::Fail,
                    "renew",
                    &key,
                    Some(value),
                    Some(error),
                );
            }
        }
    }

    /// The hook every lock client of this worker announces its steps to: at the armed crash
    /// point the whole worker dies (SIGKILL), after writing out what it recorded so far, so
    /// that the invoke of the operation it dies in is in the history.
    fn crash_hook(&self) -> locks::StepHook {
        let controls = self.plan.controls.clone();
        let events = self.events.clone();
        // The clock when the step is reached: a client connected before the run's clock
        // started (`Go`) must not time its death on the clock it connected on.
        Arc::new(move |step: &str| {
            if controls.is_armed(step) {
                events.write_out_and_die(controls.clock());
            }
        })
    }

    fn complete(&mut self, process: u64, f: &str, key: &str, done: Done) {
        match done {
            Done::Ok(value) => {
                self.record(process, EventType::Ok, f, key, value, None);
                self.record_pending_notices(process);
            }
            Done::Fail(value, error) => {
                self.record(process, EventType::Fail, f, key, value, Some(error));
                self.record_pending_notices(process);
            }
            Done::Info(error) => {
                self.record(process, EventType::Info, f, key, None, Some(error));
                // Retired: the next operation comes from a fresh process and lock client.
                self.me = None;
                self.generation += 1;
            }
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.plan.spec.op_timeout.0)
    }

    /// Runs cycles until the deadline.
    pub async fn run(mut self) {
        while self.clock().now() < self.plan.deadline_ns {
            self.cycle().await;
        }
    }

    async fn cycle(&mut self) {
        let key = key_name(self.rng.random_range(0..self.plan.spec.keys));
        let Some(me) = self.incarnation().await else {
            return;
        };
        let process = me.process;
        // Drawn only for a workload that reads, so that the others keep their sequence.
        let share = self.plan.spec.read_share;
        let mode = if share > 0.0 && self.rng.random_bool(share.min(1.0)) {
            Mode::Shared
        } else {
            Mode::Exclusive
        };

        if self.me.is_some() && self.plan.spec.algorithm.optimistic {
            self.optimistic(process, &key).await;
            let pause = draw(&mut self.rng, self.plan.spec.think);
            self.idle(pause).await;
            return;
        }

        // A fresh hold: what the library said of an earlier one is past.
        self.lost.retain(|k| *k != key);
        let token = match self.acquire(process, &key, mode).await {
            Taken::Held(token) => token,
            Taken::Refused => {
                let pause = draw(&mut self.rng, self.plan.spec.think).max(Duration::from_millis(1));
                self.idle(pause).await;
                return;
            }
            Taken::Retired => return,
        };

        if self.critical_section(process, &key, token, mode).await != Section::Retired {
            self.release(process, &key, mode).await;
        }
        let pause = draw(&mut self.rng, self.plan.spec.think);
        self.idle(pause).await;
    }

    /// Reads the counter, works for the hold time (renewing if the lock asks; with
    /// `nested`, taking the lock again first), then writes the read value + 1. The work sits
    /// between the read and the write, as in a real read-modify-write, so that a holder
    /// paused there writes after its lease ran out: the stale write fencing must stop.
    /// A shared hold (a reader) reads and holds, and writes nothing: readers only read.
    /// `Retired` if the process was retired on the way (its hold is left to its lease).
    async fn critical_section(
        &mut self,
        process: u64,
        key: &str,
        token: Option<i64>,
        mode: Mode,
    ) -> Section {
        self.invoke(process, "read", key, None).await;
        let Some(me) = self.me.as_mut() else {
            return Section::Retired;
        };
        let read = tokio::time::timeout(STORAGE_TIMEOUT, read_counter(me, key)).await;
        let current = match read {
            Ok(Ok(value)) => {
                self.complete(
                    process,
                    "read",
                    key,
                    Done::Ok(Some(json!({ "value": value }))),
                );
                value.unwrap_or(0)
            }
            Ok(Err(CounterError::Refused(why))) => {
                self.complete(process, "read", key, Done::Fail(None, why));
                return Section::Refused;
            }
            Ok(Err(CounterError::Unknown(e))) => {
                self.complete(process, "read", key, Done::Info(e));
                return Section::Retired;
            }
            Err(_) => {
                me.resource.failed().await;
                self.complete(process, "read", key, Done::Info("timeout".into()));
                return Section::Retired;
            }
        };
        if self.plan.spec.nested && !self.nest(process, key, mode).await {
            return Section::Retired;
        }
        if !self.hold(process, key).await {
            return Section::Retired;
        }
        // A reader writes nothing; a holder whose library said the lock is lost leaves its
        // critical section without its write (docs/src/reference/protocol.md).
        if mode == Mode::Shared || self.heeds_loss_of(key) {
            return Section::Done;
        }

        let payload = json!({ "token": token, "value": current + 1 });
        self.invoke(process, "write", key, Some(payload.clone()))
            .await;
        let Some(me) = self.me.as_mut() else {
            return Section::Retired;
        };
        let written =
            tokio::time::timeout(STORAGE_TIMEOUT, write_counter(me, key, token, current + 1)).await;
        match written {
            Ok(Ok(WriteResult::Accepted)) => {
                self.complete(process, "write", key, Done::Ok(Some(payload)));
                Section::Done
            }
            Ok(Ok(WriteResult::Conflict(why))) => {
                self.complete(process, "write", key, Done::Fail(Some(payload), why));
                Section::Conflict
            }
            Ok(Ok(WriteResult::Rejected { highest })) => {
                let why = match (token, highest) {
                    (Some(t), Some(h)) => format!("stale token {t} < {h}"),
                    _ => "no token for a fenced resource".to_string(),
                };
                self.complete(process, "write", key, Done::Fail(Some(payload), why));
                Section::Done
            }
            Ok(Err(e)) => {
                self.complete(process, "write", key, Done::Info(e));
                Section::Retired
            }
            Err(_) => {
                me.resource.failed().await;
                self.complete(process, "write", key, Done::Info("timeout".into()));
                Section::Retired
            }
        }
    }

    /// An optimistic algorithm's cycle (`Algorithm::optimistic`): no lock, only the
    /// read-modify-write of the counter, its write conditional on the value read being
    /// current; a conflict (`fail`: certainly not written) is retried from the read, as
    /// often as the workload's retry policy allows. The history then holds reads and
    /// writes only, and `lost-update` judges them.
    async fn optimistic(&mut self, process: u64, key: &str) {
        let spec = &self.plan.spec;
        let (attempts, backoff) = (spec.retry.attempts, spec.retry.backoff.0);
        for attempt in 0..=attempts {
            if attempt > 0 {
                self.idle(Duration::from_millis(backoff)).await;
            }
            match self
                .critical_section(process, key, None, Mode::Exclusive)
                .await
            {
                Section::Conflict | Section::Refused => continue,
                Section::Done | Section::Retired => return,
            }
        }
    }

    /// Takes the held lock again (in the same mode) and releases it once: the hold must go
    /// on throughout.
    async fn nest(&mut self, process: u64, key: &str, mode: Mode) -> bool {
        match self.acquire(process, key, mode).await {
            Taken::Held(_) => {
                self.release(process, key, mode).await;
                self.me.is_some()
            }
            Taken::Refused => true,
            Taken::Retired => false,
        }
    }

    /// One recorded acquire of `key` in `mode`.
    async fn acquire(&mut self, process: u64, key: &str, mode: Mode) -> Taken {
        let timeout = self.timeout();
        let asked = self
            .me
            .as_ref()
            .and_then(|me| asked(self.plan.spec.algorithm, me.lock.as_ref(), mode));
        self.invoke(process, "acquire", key, asked).await;
        let Some(me) = self.me.as_mut() else {
            return Taken::Retired;
        };
        let acquired = tokio::time::timeout(timeout, me.lock.acquire_mode(key, mode))
            .await
            .unwrap_or_else(|_| Acquired::Info("timeout".into()));
        match acquired {
            Acquired::Ok { token, lease_ms } => {
                let value = json!({ "token": token, "lease_ms": lease_ms });
                self.complete(process, "acquire", key, Done::Ok(Some(value)));
                Taken::Held(token)
            }
            Acquired::Fail(reason) => {
                let value = json!({ "reason": reason });
                self.complete(process, "acquire", key, Done::Fail(Some(value), reason));
                Taken::Refused
            }
            Acquired::Info(error) => {
                self.complete(process, "acquire", key, Done::Info(error));
                Taken::Retired
            }
        }
    }

    /// Sleeps for the hold time, renewing as often as the lock asks (its watchdog), each
    /// renewal an operation in the history.
    async fn hold(&mut self, process: u64, key: &str) -> bool {
        let hold = draw(&mut self.rng, self.plan.spec.hold);
        let Some(every) = self.me.as_ref().and_then(|m| m.lock.renew_every()) else {
            self.idle_holding(hold, Some(key)).await;
            return self.me.is_some();
        };
        let until = tokio::time::Instant::now() + hold;
        loop {
            let now = tokio::time::Instant::now();
            if now >= until || self.heeds_loss_of(key) {
                return true;
            }
            self.idle_holding(every.min(until - now), Some(key)).await;
            if tokio::time::Instant::now() >= until || self.heeds_loss_of(key) {
                return true;
            }
            self.invoke(process, "renew", key, None).await;
            let timeout = self.timeout();
            let Some(me) = self.me.as_mut() else {
                return false;
            };
            let renewed = tokio::time::timeout(timeout, me.lock.renew(key))
                .await
                .unwrap_or_else(|_| Outcome::Info("timeout".into()));
            match renewed {
                Outcome::Ok { lease_ms } => self.complete(
                    process,
                    "renew",
                    key,
                    Done::Ok(Some(json!({ "lease_ms": lease_ms }))),
                ),
                Outcome::Fail(reason) => {
                    // The lock is gone; the application carries on to its release, as a
                    // real one whose watchdog failed would.
                    self.complete(process, "renew", key, Done::Fail(None, reason));
                    self.idle(until.saturating_duration_since(tokio::time::Instant::now()))
                        .await;
                    return true;
                }
                Outcome::Info(error) => {
                    self.complete(process, "renew", key, Done::Info(error));
                    return false;
                }
            }
        }
    }

    async fn release(&mut self, process: u64, key: &str, mode: Mode) {
        let timeout = self.timeout();
        self.invoke(process, "release", key, None).await;
        let Some(me) = self.me.as_mut() else { return };
        let released = tokio::time::timeout(timeout, me.lock.release_mode(key, mode))
            .await
            .unwrap_or_else(|_| Outcome::Info("timeout".into()));
        let done = match released {
            Outcome::Ok { .. } => Done::Ok(None),
            Outcome::Fail(reason) => Done::Fail(None, reason),
            Outcome::Info(error) => Done::Info(error),
        };
        self.complete(process, "release", key, done);
    }
}

/// The guarded counter of `key`: on the storage server, or kept by the lock itself (pg-row's
/// locked row, read inside its transaction).
async fn read_counter(me: &mut Incarnation, key: &str) -> Result<Option<i64>, CounterError> {
    if me.counter_with_lock {
        return me.lock.read_counter(key).await;
    }
    me.resource
        .read(key)
        .await
        .map_err(|e| CounterError::Unknown(e.to_string()))
}

/// Writes the guarded counter of `key` where `read_counter` reads it.
async fn write_counter(
    me: &mut Incarnation,
    key: &str,
    token: Option<i64>,
    value: i64,
) -> Result<WriteResult, String> {
    if !me.counter_with_lock {
        return me
            .resource
            .write(key, token, value)
            .await
            .map_err(|e| e.to_string());
    }
    match me.lock.write_counter(key, value).await {
        CounterWrite::Accepted => Ok(WriteResult::Accepted),
        CounterWrite::Rejected(why) => Ok(WriteResult::Conflict(why)),
        CounterWrite::Unknown(why) => Err(why),
    }
}

/// An acquire invoke's payload (docs/src/reference/history.md): the ttl the request asks for, when
/// the lock has one; `mode` `shared` for a reader (absent: exclusive); `fair` for a lock that
/// promises arrival order; `wait_ms` for a lock whose acquire waits that long. None when
/// there is nothing to say (a plain `setnx-del` acquire).
fn asked(algorithm: &Algorithm, lock: &dyn LockClient, mode: Mode) -> Option<serde_json::Value> {
    let mut payload = serde_json::Map::new();
    if let Some(ttl) = lock.ttl_ms() {
        payload.insert("ttl_ms".into(), json!(ttl));
    }
    if mode == Mode::Shared {
        payload.insert("mode".into(), json!("shared"));
    }
    if algorithm.is_fair(lock) {
        payload.insert("fair".into(), json!(true));
    }
    if let Some(wait) = lock.wait_ms() {
        payload.insert("wait_ms".into(), json!(wait));
    }
    (!payload.is_empty()).then_some(serde_json::Value::Object(payload))
}
