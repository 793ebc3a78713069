//! The lock algorithms under audit, all behind one trait.
//!
//! Each module is one seed algorithm, written the way its source writes it, flaws included:
//! the point of lockaudit is to show those flaws in a history, so none is "fixed" here.
//! `table.rs` is the one table of them: each algorithm's entry says what it runs on, its
//! crash points, its client's constructor, what kind of lock it is and its built-in
//! workload. `connect` builds a client for an algorithm by name from its entry;
//! `fenced: true` wraps any of them so that every successful acquire also takes a fencing
//! token from `INCR`. Besides the built-ins, `connect` accepts `lua` (`SCRIPTED`): a lock
//! the workload writes itself as Lua scripts (`lua_script.rs` documents the calling
//! convention), and `external` (`EXTERNAL`), a lock client of another program.
//!
//! Outcomes follow docs/src/reference/history.md: `ok` took effect, `fail` certainly did not, `info`
//! nobody knows (a timeout, a connection lost after the request was sent). Leases are
//! counted from the start of the `acquire` / `renew` call and are lower bounds: the key
//! cannot expire before them as long as the server's clock runs true.

mod conn;
mod etcd_lease;
mod etcd_lock;
mod etcd_txn;
pub mod external;
mod fair_lock;
mod fenced;
mod lua_getset;
mod lua_script;
mod mariadb_get_lock;
mod pg;
mod pg_advisory;
mod pg_lock_column;
mod pg_row;
mod pg_version;
mod redisson_replies;
mod redlock;
mod reentrant;
mod rw_lock;
mod set_nx_px;
mod setnx_del;
mod setnx_expire;
mod setnx_getset;
mod table;
mod waiter;
mod watch_multi;
pub mod zk_lock;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

use crate::topology::{Endpoints, Topology};
use conn::Conn;
pub use lua_script::LuaScripts;
pub use table::{
    algorithm, builtins_where, known_algorithms, named, service_name, shared_mode_builtins,
    Algorithm, ClientClock, Declared, NotOnCluster, ALGORITHMS, DEFAULT_ALGORITHM, EXTERNAL,
    PSEUDO, SCRIPTED, TABLE,
};

/// How an acquire ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// Taken: the fencing token if the algorithm issues one, and the lease promised from the
    /// acquire's start (None: until released).
    Ok {
        token: Option<i64>,
        lease_ms: Option<i64>,
    },
    /// Certainly not taken.
    Fail(String),
    /// Unknown (the connection failed mid-request, a timeout).
    Info(String),
}

/// How a release or renew ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Done; for a renew, the new lease from the renew's start.
    Ok { lease_ms: Option<i64> },
    /// The implementation found the lock no longer ours.
    Fail(String),
    /// Unknown.
    Info(String),
}

/// A renewal or loss a lock's library found by itself and reported (an external adapter's
/// notice, docs/src/reference/protocol.md 1.1), with the moment lockaudit read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub at: Instant,
    pub kind: NoticeKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoticeKind {
    /// The library extended the lock: it now runs `lease_ms` from `at` (None: no expiry).
    Renewed { key: String, lease_ms: Option<i64> },
    /// The library found the lock no longer ours.
    Lost { key: String, error: String },
}

/// How a write of the guarded counter kept by the lock itself ended (`LockClient::write_counter`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CounterWrite {
    /// Accepted (for a lock whose transaction commits at release: by the statement).
    Accepted,
    /// Certainly not written (a version that changed meanwhile), with why.
    Rejected(String),
    /// Unknown.
    Unknown(String),
}

/// Why a read of the guarded counter kept by the lock returned no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CounterError {
    /// Certainly nothing happened (no connection could be made): a `fail`, and the client
    /// goes on with its session.
    Refused(String),
    /// Unknown (a session broken or timed out mid-request): `info`, the client retires.
    Unknown(String),
}

impl std::fmt::Display for CounterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CounterError::Refused(why) | CounterError::Unknown(why) => f.write_str(why),
        }
    }
}

/// The mode an acquire asks for (docs/src/reference/history.md's `mode` on the acquire invoke):
/// a writer excludes everyone, readers share with readers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Exclusive,
    Shared,
}

/// One client's handle on one algorithm. A client runs one operation at a time.
#[async_trait]
pub trait LockClient: Send {
    async fn acquire(&mut self, key: &str) -> Acquired;
    async fn release(&mut self, key: &str) -> Outcome;
    /// An acquire in `mode`. Exclusive is `acquire`; a lock without a shared mode
    /// (`shared()` false) refuses a shared acquire without asking the server.
    async fn acquire_mode(&mut self, key: &str, mode: Mode) -> Acquired {
        match mode {
            Mode::Exclusive => self.acquire(key).await,
            Mode::Shared => Acquired::Fail("this lock has no shared mode".into()),
        }
    }
    /// The release of a hold taken in `mode`. Exclusive is `release`.
    async fn release_mode(&mut self, key: &str, mode: Mode) -> Outcome {
        match mode {
            Mode::Exclusive => self.release(key).await,
            Mode::Shared => Outcome::Fail("this lock has no shared mode".into()),
        }
    }
    /// Whether `acquire_mode` takes `Mode::Shared`, for a lock whose table entry leaves it to
    /// the workload or the adapter (`lua`, `external`); a built-in's is its entry's
    /// `shared_mode` (`Algorithm::takes_shared`).
    fn shared(&self) -> bool {
        false
    }
    /// Whether the lock promises first-come-first-served order among waiting acquires (the
    /// acquire invoke's `fair`), for a lock whose table entry leaves it to the workload or
    /// the adapter; a built-in's is its entry's `fair` (`Algorithm::is_fair`).
    fn fair(&self) -> bool {
        false
    }
    /// The longest an acquire waits for the lock (the acquire invoke's `wait_ms`), for a
    /// lock whose acquire blocks for a given time; None for a lock that retries by its own
    /// policy or tries once.
    fn wait_ms(&self) -> Option<i64> {
        None
    }
    /// Extends a held lock. The recipes without renewal keep this default: the lease
    /// stays as it was (`renews()` is false, so workers never call it).
    async fn renew(&mut self, _key: &str) -> Outcome {
        Outcome::Ok { lease_ms: None }
    }
    /// Whether `renew` does anything (the watchdog renews every ttl/3 while holding).
    fn renews(&self) -> bool {
        false
    }
    /// The ttl each acquire asks the lock for, in ms, as its request sends it (docs/src/reference/history.md's
    /// `ttl_ms` on the acquire invoke, so that the checker can flag a grant promising more
    /// than was asked). None for a lock with no expiry (`setnx-del`), which asks for none.
    fn ttl_ms(&self) -> Option<i64>;
    /// How often the holder should call `renew` (the watchdog period, ttl/3), when
    /// `renews()`; None otherwise. The worker drives the watchdog so that every renewal is
    /// an operation in the history.
    fn renew_every(&self) -> Option<Duration> {
        None
    }
    /// The next renewal or loss the lock's library reports by itself, waiting for it. A
    /// lock whose library reports none (every built-in) never gives one.
    async fn next_notice(&mut self) -> Option<Notice> {
        std::future::pending().await
    }
    /// A notice already reported and not yet taken, without waiting.
    fn try_notice(&mut self) -> Option<Notice> {
        None
    }
    /// The counter of `key` (None: never written), for an algorithm whose table entry says
    /// it keeps the counter (`keeps_counter`, `counter_with_lock`).
    async fn read_counter(&mut self, _key: &str) -> Result<Option<i64>, CounterError> {
        Err(CounterError::Refused("this lock keeps no counter".into()))
    }
    /// Writes the counter of `key`, where `read_counter` reads it.
    async fn write_counter(&mut self, _key: &str, _value: i64) -> CounterWrite {
        CounterWrite::Unknown("this lock keeps no counter".into())
    }
    /// Whether the lock hands out fencing tokens of its own at run time (an external
    /// adapter that said `fencing: true`): `--fenced` then writes with them rather than with
    /// `INCR`'s. A built-in says so in its table entry (`Algorithm::own_tokens`).
    fn own_tokens(&self) -> bool {
        false
    }
}

/// The step a fenced client announces between winning the lock and taking its token.
pub const FENCED_STEP: &str = fenced::STEP;

/// Called with each step name as the client reaches it.
pub type StepHook = Arc<dyn Fn(&str) + Send + Sync>;

/// How a client runs its algorithm. Plain data (serde) except the two live hooks, which a
/// worker sets after reading the options.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct LockOptions {
    /// The lock's time to live (PX / EXPIRE / the timestamp's distance), in ms.
    pub ttl_ms: u64,
    /// Retries inside one acquire after the first try found the lock taken (0: try once).
    /// This is the algorithm's own retry policy; errors are never retried.
    pub retry_attempts: u32,
    /// Wait between tries (before the first retry; later ones per `retry_backoff_factor`).
    pub retry_backoff_ms: u64,
    /// Each further retry waits this many times longer (1.0: a fixed delay).
    pub retry_backoff_factor: f64,
    /// Cap of the backed-off wait.
    pub retry_backoff_max_ms: u64,
    /// A random extra wait in [0, jitter] per retry, so contenders spread out (redlock-rb
    /// uses 50). Default 0, so that `retry_backoff_ms` alone is the wait.
    pub retry_jitter_ms: u64,
    /// Renew while holding (set-nx-px, reentrant, redlock): `renews()` turns true.
    pub watchdog: bool,
    /// Take a fencing token from `INCR` on every successful acquire.
    pub fenced: bool,
    /// RedLock: drift = ttl × drift_factor + 2 ms.
    pub drift_factor: f64,
    /// RedLock: masters needed; None: N/2 + 1.
    pub quorum: Option<usize>,
    /// RedLock: the per-node time limit; None: ttl/20, at least 10 ms.
    pub node_timeout_ms: Option<u64>,
    /// The owner's identity (unique per logical client): reentrant's hash field. Empty: a
    /// random one is made at connect.
    pub client_id: String,
    /// Added to the client's wall clock by the algorithms that read it (setnx-getset,
    /// lua-getset): the clock-skew fault.
    pub clock_skew_ms: i64,
    /// Time limit of one request (connect included); past it the outcome is `info`.
    pub op_timeout_ms: u64,
    /// The step at which the worker means to die (one of `crash_points`); carried here for
    /// the worker's `on_step` hook, which does the dying.
    pub crash_point: Option<String>,
    /// `lua` only: the scripts' texts (the workload's `scripts`, read from its files).
    pub scripts: Option<LuaScripts>,
    /// `external` only: the adapter's argv (program first; never run through a shell).
    pub adapter: Option<Vec<String>>,
    /// `external` only: the workload's `adapter_options`, passed as `options` in `init`.
    pub adapter_options: Option<serde_json::Value>,
    /// `external` and `fair-lock`: an acquire's `wait_ms` (0: try once).
    pub wait_ms: u64,
    /// `external` only: the workload takes shared holds (`read_share` > 0), so requests
    /// carry `mode`. Off, an adapter of protocol 1.1 sees no field it does not know.
    pub modes: bool,
    /// `lua` and `external`: the workload declares the lock fair (its `fair`): `fair()` is
    /// true, so acquire invokes say `fair` and the checker judges overtaking; an adapter is
    /// sent `fair: true`.
    pub fair: bool,
    /// The run folder: an adapter's working directory and where its stderr log goes
    /// (`adapter-<process>.log`). None: the current directory, stderr discarded.
    pub run_dir: Option<std::path::PathBuf>,
    /// The history's process number of this client incarnation (the adapter's `client`).
    pub process: u64,
    /// The session locks (`Algorithm::session_locks`): a statement that finds its session
    /// ended opens a new one and goes on, telling nobody, as a connection pool does; off,
    /// the loss of a held lock is a `lost` notice.
    pub reconnect: bool,
    /// Called with each step name as the client reaches it.
    #[serde(skip)]
    pub on_step: Option<StepHook>,
    /// A skew the worker can change while the client runs (ms, added to `clock_skew_ms`).
    #[serde(skip)]
    pub live_skew_ms: Option<Arc<AtomicI64>>,
    /// `external` only: the faked wall clock to start the adapter under (the worker moves
    /// it when the nemesis skews this client's clock).
    #[serde(skip)]
    pub adapter_clock: Option<crate::fake_clock::FakeClock>,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            ttl_ms: 2000,
            retry_attempts: 3,
            retry_backoff_ms: 100,
            retry_backoff_factor: 1.0,
            retry_backoff_max_ms: 10_000,
            retry_jitter_ms: 0,
            watchdog: false,
            fenced: false,
            drift_factor: 0.01,
            quorum: None,
            node_timeout_ms: None,
            client_id: String::new(),
            clock_skew_ms: 0,
            op_timeout_ms: 1000,
            crash_point: None,
            scripts: None,
            adapter: None,
            adapter_options: None,
            wait_ms: 0,
            modes: false,
            fair: false,
            run_dir: None,
            process: 0,
            reconnect: false,
            on_step: None,
            live_skew_ms: None,
            adapter_clock: None,
        }
    }
}

impl std::fmt::Debug for LockOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockOptions")
            .field("ttl_ms", &self.ttl_ms)
            .field("retry_attempts", &self.retry_attempts)
            .field("retry_backoff_ms", &self.retry_backoff_ms)
            .field("retry_backoff_factor", &self.retry_backoff_factor)
            .field("retry_backoff_max_ms", &self.retry_backoff_max_ms)
            .field("retry_jitter_ms", &self.retry_jitter_ms)
            .field("watchdog", &self.watchdog)
            .field("fenced", &self.fenced)
            .field("drift_factor", &self.drift_factor)
            .field("quorum", &self.quorum)
            .field("node_timeout_ms", &self.node_timeout_ms)
            .field("client_id", &self.client_id)
            .field("clock_skew_ms", &self.clock_skew_ms)
            .field("op_timeout_ms", &self.op_timeout_ms)
            .field("crash_point", &self.crash_point)
            .field("scripts", &self.scripts.as_ref().map(|_| "set"))
            .field("adapter", &self.adapter)
            .field("adapter_options", &self.adapter_options)
            .field("wait_ms", &self.wait_ms)
            .field("modes", &self.modes)
            .field("fair", &self.fair)
            .field("run_dir", &self.run_dir)
            .field("process", &self.process)
            .field("reconnect", &self.reconnect)
            .field("on_step", &self.on_step.as_ref().map(|_| "set"))
            .field("live_skew_ms", &self.live_skew_ms)
            .finish()
    }
}

impl LockOptions {
    /// Announces a step to the hook, if any.
    pub(crate) fn step(&self, name: &str) {
        if let Some(hook) = &self.on_step {
            hook(name);
        }
    }

    /// Sets `crash_point` and a hook that SIGKILLs this process when the client reaches it:
    /// the worker's way to die at a window too narrow for a random kill.
    pub fn die_at(mut self, point: &str) -> Self {
        let wanted = point.to_string();
        self.crash_point = Some(wanted.clone());
        self.on_step = Some(Arc::new(move |name: &str| {
            if name == wanted {
                // SIGKILL, not abort: no core dump, no unwinding, exactly a crash.
                let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
            }
        }));
        self
    }

    /// The watchdog's period (ttl/3) when it is on: what `renew_every` answers for the
    /// algorithms that renew.
    pub(crate) fn watchdog_period(&self) -> Option<Duration> {
        self.watchdog
            .then(|| Duration::from_millis((self.ttl_ms / 3).max(1)))
    }

    pub(crate) fn ttl(&self) -> i64 {
        i64::try_from(self.ttl_ms).unwrap_or(i64::MAX)
    }

    pub(crate) fn op_timeout(&self) -> Duration {
        Duration::from_millis(self.op_timeout_ms.max(1))
    }

    /// The client's wall clock in ms since the epoch, skew included: the clock the
    /// timestamp algorithms trust.
    pub(crate) fn client_now_ms(&self) -> i64 {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        let live = self
            .live_skew_ms
            .as_ref()
            .map(|s| s.load(Ordering::Relaxed))
            .unwrap_or(0);
        wall.saturating_add(self.clock_skew_ms).saturating_add(live)
    }

    /// The wait before retry number `retry` (0 for the first retry).
    pub(crate) fn retry_delay(&self, retry: u32) -> Duration {
        let factor = self
            .retry_backoff_factor
            .max(0.0)
            .powi(i32::try_from(retry).unwrap_or(i32::MAX));
        let base = (self.retry_backoff_ms as f64 * factor).min(self.retry_backoff_max_ms as f64);
        let jitter = if self.retry_jitter_ms > 0 {
            rand::random_range(0..=self.retry_jitter_ms)
        } else {
            0
        };
        Duration::from_millis(base.max(0.0) as u64 + jitter)
    }
}

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("unknown lock algorithm {0:?} (known: {known})", known = known_algorithms())]
    UnknownAlgorithm(String),
    /// `lua` without scripts, or with a script Redis cannot compile.
    #[error("lua scripts: {0}")]
    Scripts(String),
    #[error("bad endpoints: {0}")]
    Endpoints(String),
    #[error("authentication failed: {0}")]
    Auth(String),
    /// `external`: the adapter could not be started or did not complete its `init`.
    #[error("external adapter: {0}")]
    Adapter(external::AdapterError),
}

/// Builds a client of `algorithm` on `endpoints`.
///
/// Single, replicated and independent topologies use `nodes[0]` (the primary) for every
/// algorithm but RedLock; Sentinel asks the sentinels for the primary (and again after each
/// failed request). RedLock uses every node of an independent topology, else the one
/// primary. Servers that are down now are not an error (they are reached lazily); a wrong
/// password is.
pub async fn connect(
    algorithm: &str,
    endpoints: &Endpoints,
    options: &LockOptions,
) -> Result<Box<dyn LockClient>, LockError> {
    let Some(entry) = table::algorithm(algorithm) else {
        return Err(LockError::UnknownAlgorithm(algorithm.to_string()));
    };
    let mut options = options.clone();
    if options.client_id.is_empty() {
        options.client_id = random_id();
    }
    let inner = entry.connect.client(endpoints, &options).await?;
    if !options.fenced || entry.own_tokens || inner.own_tokens() {
        return Ok(inner);
    }
    // The counter lives on the storage server, which the nemesis never faults: fencing needs
    // a token source that outlives the lock servers' faults. On a lock server that restarts
    // empty or fails over with lag, INCR hands out old numbers again and a stale write gets
    // through with a higher token than its successor's (an audit with the counter there
    // found exactly that: redlock --fenced under kill-servers).
    let mut counter = Conn::direct(
        &endpoints.storage,
        endpoints.password.as_deref(),
        options.op_timeout(),
    )?;
    counter.probe().await?;
    Ok(Box::new(fenced::Fenced::new(inner, counter, options)))
}

/// The connection to the lock's primary for the single-server algorithms.
async fn primary(endpoints: &Endpoints, options: &LockOptions) -> Result<Conn, LockError> {
    let password = endpoints.password.as_deref();
    let timeout = options.op_timeout();
    if endpoints.topology == Topology::Cluster {
        if endpoints.nodes.is_empty() {
            return Err(LockError::Endpoints(
                "cluster topology without nodes".into(),
            ));
        }
        let mut conn = Conn::cluster(&endpoints.nodes, password, timeout).await?;
        conn.probe().await?;
        return Ok(conn);
    }
    if endpoints.topology == Topology::Sentinel {
        let master = endpoints.master_name.as_deref().ok_or_else(|| {
            LockError::Endpoints("sentinel topology without a master name".into())
        })?;
        if endpoints.sentinels.is_empty() {
            return Err(LockError::Endpoints(
                "sentinel topology without sentinels".into(),
            ));
        }
        // Sentinels may or may not share the data nodes' password: try with it, and
        // without when the sentinels refuse it.
        let mut conn = Conn::sentinel(&endpoints.sentinels, master, password, true, timeout)?;
        match conn.probe().await {
            Ok(()) => return Ok(conn),
            Err(first) if password.is_some() => {
                let mut conn =
                    Conn::sentinel(&endpoints.sentinels, master, password, false, timeout)?;
                return match conn.probe().await {
                    Ok(()) => Ok(conn),
                    Err(_) => Err(first),
                };
            }
            Err(e) => return Err(e),
        }
    }
    let node = endpoints
        .nodes
        .first()
        .ok_or_else(|| LockError::Endpoints("no lock nodes".into()))?;
    let mut conn = Conn::direct(node, password, timeout)?;
    conn.probe().await?;
    Ok(conn)
}

/// RedLock's masters: every node of an independent topology, else the one primary.
async fn redlock_masters(
    endpoints: &Endpoints,
    options: &LockOptions,
) -> Result<Vec<Conn>, LockError> {
    if endpoints.topology == Topology::Cluster {
        let why = (algorithm("redlock").map(Algorithm::on_cluster))
            .and_then(Result::err)
            .map(|e| e.to_string())
            .unwrap_or_default();
        return Err(LockError::Endpoints(why));
    }
    if endpoints.topology != Topology::Independent {
        return Ok(vec![primary(endpoints, options).await?]);
    }
    if endpoints.nodes.is_empty() {
        return Err(LockError::Endpoints("no lock nodes".into()));
    }
    let timeout = redlock::node_timeout(options);
    let mut masters = Vec::with_capacity(endpoints.nodes.len());
    for node in &endpoints.nodes {
        let mut c = Conn::direct(node, endpoints.password.as_deref(), timeout)?;
        c.probe().await?;
        masters.push(c);
    }
    Ok(masters)
}

/// A random 128-bit id in UUID form: lock values and default owner ids.
pub(crate) fn random_id() -> String {
    let v: u128 = rand::random();
    let h = format!("{v:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Whole milliseconds from `from` to `to`, rounded down (leases must not be overstated).
pub(crate) fn ms_between(from: Instant, to: Instant) -> i64 {
    i64::try_from(to.saturating_duration_since(from).as_millis()).unwrap_or(i64::MAX)
}

/// Whole milliseconds elapsed since `from`, rounded up (elapsed time must not be
/// understated when it is subtracted from a lease).
pub(crate) fn ms_since_ceil(from: Instant) -> i64 {
    let us = from.elapsed().as_micros();
    i64::try_from(us.div_ceil(1000)).unwrap_or(i64::MAX)
}

/// `ceil(ms / 1000)`, at least 1: for the recipes that speak whole seconds (EXPIRE, Unix
/// timestamps), so that their lock never lives shorter than `ttl_ms`.
pub(crate) fn ttl_seconds(ttl_ms: u64) -> i64 {
    i64::try_from(ttl_ms.div_ceil(1000).max(1)).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_ids_look_like_uuids_and_differ() {
        let a = random_id();
        let b = random_id();
        assert_eq!(a.len(), 36);
        assert_ne!(a, b);
    }

    #[test]
    fn retry_delay_backs_off_and_caps() {
        let o = LockOptions {
            retry_backoff_ms: 100,
            retry_backoff_factor: 2.0,
            retry_backoff_max_ms: 300,
            retry_jitter_ms: 0,
            ..LockOptions::default()
        };
        assert_eq!(o.retry_delay(0), Duration::from_millis(100));
        assert_eq!(o.retry_delay(1), Duration::from_millis(200));
        assert_eq!(o.retry_delay(5), Duration::from_millis(300));
    }

    #[test]
    fn ttl_seconds_round_up() {
        assert_eq!(ttl_seconds(1), 1);
        assert_eq!(ttl_seconds(1000), 1);
        assert_eq!(ttl_seconds(1001), 2);
    }

    #[test]
    fn every_algorithm_has_crash_points() {
        for a in TABLE {
            assert!(!a.steps.is_empty(), "{a}");
            for p in a.steps {
                assert!(p.starts_with(a.name), "{p}");
            }
        }
    }

    #[test]
    fn lua_is_known_but_not_a_built_in() {
        let known = |name| algorithm(name).is_some();
        assert!(known(SCRIPTED) && known("redlock") && !known("chubby"));
        assert!(!ALGORITHMS.contains(&SCRIPTED));
        assert_eq!(
            algorithm(SCRIPTED).unwrap().steps,
            ["lua:after-acquire", "lua:before-release"]
        );
        let message = LockError::UnknownAlgorithm("chubby".into()).to_string();
        assert!(
            message.contains("redlock, ") && message.ends_with(", lua, external)"),
            "{message}"
        );
        assert!(known(EXTERNAL));
        assert_eq!(
            algorithm(EXTERNAL).unwrap().steps,
            ["external:after-acquire", "external:before-release"]
        );
    }

    #[test]
    fn options_round_trip_through_json_without_hooks() {
        let o = LockOptions::default().die_at("set-nx-px:after-set");
        let text = serde_json::to_string(&o).expect("serializes");
        let back: LockOptions = serde_json::from_str(&text).expect("parses");
        assert_eq!(back.crash_point.as_deref(), Some("set-nx-px:after-set"));
        assert!(back.on_step.is_none());
    }
}
