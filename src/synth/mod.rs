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
//!
//! The parts: `config` (what to simulate), `simulator` (the lock and its clients), `record`
//! and `line_writer` (the compact events it emits, and their JSON lines), `shuffle` (the
//! out-of-order merge), `rng`; `view` (holds as the checker derives them) and `inject` (one
//! module per group of injectors).

mod config;
mod inject;
mod line_writer;
mod record;
mod rng;
mod shuffle;
mod simulator;
mod view;

use std::io::{self, Write};

use crate::history::{Event, HistoryWriter};

pub use config::SynthConfig;
pub use inject::{
    implied_by, inject, inject_bad_lease, inject_duplicate_token, inject_lost_lock,
    inject_lost_update, inject_overlap, inject_stale_write, inject_starvation, inject_token_order,
    inject_unavailable, inject_unfair, Injection, INJECTABLE,
};

use line_writer::LineWriter;
use record::Rec;
use simulator::Sim;

const MS: i64 = 1_000_000;
const US: i64 = 1_000;

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
    let mut writer = LineWriter::new(out, keys);
    Sim::new(config, |rec: &Rec| writer.write(rec)).run()?;
    writer.finish()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::reader::read_jsonl;
    use crate::history::EventType;

    /// A small history with every fault, for the tests here and the injectors'.
    pub(super) fn busy(seed: u64) -> SynthConfig {
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

    pub(super) fn bytes(events: &[Event]) -> Vec<u8> {
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
}
