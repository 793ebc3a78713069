//! The checker's benchmark: `cargo bench --bench check`.
//!
//! For each size it writes a synthetic history of a correct, fenced lock (many keys and
//! processes, with kills, timeouts, renewals and reentrancy), then runs the real
//! `lockaudit check` on it several times and prints the best wall time as events/s (parse and
//! all checks, end to end, one thread) and the peak resident memory (VmHWM) per event.
//!
//! Each size is measured in two shapes: `synth`, as `lockaudit synth` writes it, and `run`,
//! the same events as `lockaudit run` records them: serde's layout for `Event` with a `wall`
//! member (wall-clock ms) on every line.
//!
//! `LOCKAUDIT_BENCH_EVENTS=1000000,10000000` (the default) picks the sizes;
//! `LOCKAUDIT_BENCH_RUNS=3` the runs per size.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use lockaudit::synth::{generate_to, SynthConfig};

fn main() {
    let sizes: Vec<usize> = std::env::var("LOCKAUDIT_BENCH_EVENTS")
        .unwrap_or_else(|_| "1000000,10000000".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("LOCKAUDIT_BENCH_EVENTS: numbers, comma-separated")
        })
        .collect();
    let runs: usize = std::env::var("LOCKAUDIT_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let binary = env!("CARGO_BIN_EXE_lockaudit");
    let dir = tempfile::tempdir().expect("a temporary folder");

    println!(
        "{:>6} {:>12} {:>9} {:>9} {:>12} {:>10} {:>8}",
        "shape", "events", "file MB", "check s", "events/s", "peak MB", "B/event"
    );
    for target in sizes {
        let path = dir.path().join(format!("synth-{target}.jsonl"));
        let config = SynthConfig {
            events: target,
            keys: 1000,
            processes: 2000,
            seed: 7,
            fenced: true,
            ..SynthConfig::default()
        };
        let file = std::fs::File::create(&path).expect("create the history");
        let started = Instant::now();
        let events = generate_to(&config, BufWriter::new(file)).expect("write the history");
        eprintln!(
            "generated {events} events in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        let recorded = dir.path().join(format!("run-{target}.jsonl"));
        with_wall(&path, &recorded).expect("write the recorded-run shape");
        for (shape, file) in [("synth", &path), ("run", &recorded)] {
            let size_mb = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0) as f64 / 1e6;
            let mut best = f64::INFINITY;
            let mut peak_kib = 0u64;
            for _ in 0..runs {
                let (seconds, kib) = run_check(binary, file);
                best = best.min(seconds);
                peak_kib = peak_kib.max(kib);
            }
            println!(
                "{:>6} {:>12} {:>9.0} {:>9.3} {:>12.0} {:>10.0} {:>8.1}",
                shape,
                events,
                size_mb,
                best,
                events as f64 / best,
                peak_kib as f64 / 1024.0,
                peak_kib as f64 * 1024.0 / events as f64
            );
        }
        std::fs::remove_file(&recorded).ok();
        std::fs::remove_file(&path).ok();
    }
}

/// Copies the history at `from` to `to` with a `wall` member last on each line, where the
/// recorder's `Event` puts it (`"wall":<unix ms>`, after `error` and `node`), ticking 1 ms
/// per 100 events.
fn with_wall(from: &Path, to: &Path) -> std::io::Result<()> {
    let input = BufReader::with_capacity(1 << 20, std::fs::File::open(from)?);
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(to)?);
    for (n, line) in input.lines().enumerate() {
        let line = line?;
        let body = line.strip_suffix('}').expect("a JSON object per line");
        writeln!(
            out,
            "{body},\"wall\":{}}}",
            1_795_631_029_883 + n as u64 / 100
        )?;
    }
    out.flush()
}

/// Runs `lockaudit -v check` on `path`; returns its wall time and peak resident KiB.
fn run_check(binary: &str, path: &Path) -> (f64, u64) {
    let started = Instant::now();
    let output = Command::new(binary)
        .args(["-v", "check"])
        .arg(path)
        .output()
        .expect("run lockaudit");
    let seconds = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "a history of a correct lock must check valid: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        stderr
    );
    let kib = stderr
        .lines()
        .find_map(|l| l.split("peak resident memory ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("lockaudit -v reports its peak memory");
    (seconds, kib)
}
