//! What to simulate: `SynthConfig` and its presets.

/// A millisecond and a microsecond, in ns (times are ns on the run's clock).
pub(super) const MS: i64 = 1_000_000;
pub(super) const US: i64 = 1_000;

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
    /// Probability that a hold acquires the key again (nested) and releases it as often.
    pub reentrant_prob: f64,
    /// How many nested acquires such a hold makes (at least 1), each one level deeper, as
    /// long as its lease leaves room for them (a renewing hold renews to make room).
    pub reentrant_depth: u32,
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
            reentrant_depth: 1,
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
