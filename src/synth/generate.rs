//! The public entry points: the history a config describes, in memory or streamed as JSONL,
//! and any events written as JSONL.

use std::io::{self, Write};

use crate::history::{Event, HistoryWriter};

use super::config::SynthConfig;
use super::line_writer::LineWriter;
use super::record::Rec;
use super::simulator::Sim;

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
    use crate::synth::config::MS;
    use crate::synth::fixtures::busy;

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
}
