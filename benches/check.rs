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
//! Then the adversarial shapes (see `adversarial`), each at one size, with its slowdown
//! against the `synth` shape of that size (the target: at most 2×).
//!
//! The two shapes are also checked with `--threads N` (the machine's cores; set by
//! `LOCKAUDIT_BENCH_THREADS`, 1 skips it), and the speed-up over one thread printed.
//!
//! `LOCKAUDIT_BENCH_EVENTS=1000000,10000000` (the default) picks the sizes;
//! `LOCKAUDIT_BENCH_ADVERSARIAL_EVENTS` the adversarial shapes' size (default: the largest
//! size; 0 skips them); `LOCKAUDIT_BENCH_SHAPES=one-key,deep-reentrancy` runs only those
//! adversarial shapes; `LOCKAUDIT_BENCH_RUNS=3` the runs per history;
//! `LOCKAUDIT_BENCH_DIR=folder` writes the histories there and keeps them.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use lockaudit::synth::{generate_to, SynthConfig};

const MS: i64 = 1_000_000;
const US: i64 = 1_000;

/// The headline history: 1000 keys, 2000 concurrent processes, every fault.
fn headline(events: usize) -> SynthConfig {
    SynthConfig {
        events,
        keys: 1000,
        processes: 2000,
        seed: 7,
        fenced: true,
        ..SynthConfig::default()
    }
}

/// A shape meant to find an accidental quadratic or a blow-up in the checker, and the exit
/// code `lockaudit check` must give on it.
struct Shape {
    name: &'static str,
    what: &'static str,
    config: SynthConfig,
    exit: i32,
}

fn adversarial(events: usize) -> Vec<Shape> {
    let base = headline(events);
    vec![
        Shape {
            name: "all-info",
            what: "every acquire ends info (so each process retires after one try: a new process every two events); nothing is proven, so the verdict is unknown (exit 3)",
            config: SynthConfig {
                info_prob: 1.0,
                ..base.clone()
            },
            exit: 3,
        },
        Shape {
            name: "one-key",
            what: "one key, 8 processes: every hold of the history on the same key",
            config: SynthConfig {
                keys: 1,
                processes: 8,
                ..base.clone()
            },
            exit: 0,
        },
        Shape {
            name: "million-keys",
            what: "1,000,000 keys, 2000 processes (each key held about once, then read at the end)",
            config: SynthConfig {
                keys: 1_000_000,
                ..base.clone()
            },
            exit: 0,
        },
        Shape {
            name: "million-processes",
            what: "1,000,000 concurrent processes on 100,000 keys",
            config: SynthConfig {
                keys: 100_000,
                processes: 1_000_000,
                ..base.clone()
            },
            exit: 0,
        },
        Shape {
            name: "deep-reentrancy",
            what: "every hold nests 1000 acquires deep (and renews to make room), then releases them",
            config: SynthConfig {
                processes: 200,
                reentrant_prob: 1.0,
                reentrant_depth: 1000,
                renew_prob: 1.0,
                kill_prob: 0.0,
                latency_ns: (2 * US, 20 * US),
                gap_ns: (US, 5 * US),
                ..base.clone()
            },
            exit: 0,
        },
        Shape {
            name: "renew-chains",
            what: "every hold renews a 1 ms lease for 0.5 to 1 s: chains of about 500 to 1000 renewals",
            config: SynthConfig {
                processes: 64,
                lease_ms: Some(1),
                renew_prob: 1.0,
                reentrant_prob: 0.0,
                kill_prob: 0.0,
                latency_ns: (2 * US, 20 * US),
                gap_ns: (US, 5 * US),
                hold_ns: (500 * MS, 1000 * MS),
                ..base
            },
            exit: 0,
        },
    ]
}

/// One measured history: its events, file size, best wall time and peak resident KiB.
struct Measured {
    events: u64,
    file_mb: f64,
    seconds: f64,
    peak_kib: u64,
}

impl Measured {
    fn rate(&self) -> f64 {
        self.events as f64 / self.seconds
    }

    fn print(&self, shape: &str, against: Option<f64>) {
        let slowdown = against.map_or(String::new(), |rate| format!("{:.2}", rate / self.rate()));
        println!(
            "{:>17} {:>11} {:>8.0} {:>8.3} {:>10.0} {:>8.0} {:>8.1} {:>8}",
            shape,
            self.events,
            self.file_mb,
            self.seconds,
            self.rate(),
            self.peak_kib as f64 / 1024.0,
            self.peak_kib as f64 * 1024.0 / self.events as f64,
            slowdown
        );
    }
}

fn env_list(name: &str) -> Option<Vec<String>> {
    std::env::var(name)
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect())
}

fn main() {
    let sizes: Vec<usize> = env_list("LOCKAUDIT_BENCH_EVENTS")
        .unwrap_or_else(|| vec!["1000000".into(), "10000000".into()])
        .iter()
        .map(|s| {
            s.parse()
                .expect("LOCKAUDIT_BENCH_EVENTS: numbers, comma-separated")
        })
        .collect();
    let adversarial_size: usize = std::env::var("LOCKAUDIT_BENCH_ADVERSARIAL_EVENTS")
        .ok()
        .map(|s| {
            s.trim()
                .parse()
                .expect("LOCKAUDIT_BENCH_ADVERSARIAL_EVENTS: a number")
        })
        .unwrap_or_else(|| sizes.iter().copied().max().unwrap_or(0));
    let only = env_list("LOCKAUDIT_BENCH_SHAPES");
    let runs: usize = std::env::var("LOCKAUDIT_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    // `check --threads`, measured beside the one-thread figures (1: not measured).
    let threads: usize = std::env::var("LOCKAUDIT_BENCH_THREADS")
        .ok()
        .map(|s| s.trim().parse().expect("LOCKAUDIT_BENCH_THREADS: a number"))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .min(64); // what `check --threads` accepts
    let mut speedups = Vec::new();
    let binary = env!("CARGO_BIN_EXE_lockaudit");
    let temporary = tempfile::tempdir().expect("a temporary folder");
    // Kept there (named by shape) to be checked by hand, or under callgrind.
    let keep = std::env::var_os("LOCKAUDIT_BENCH_DIR").map(std::path::PathBuf::from);
    let dir = keep.as_deref().unwrap_or(temporary.path());
    let remove = |path: &Path| {
        if keep.is_none() {
            std::fs::remove_file(path).ok();
        }
    };

    println!(
        "{:>17} {:>11} {:>8} {:>8} {:>10} {:>8} {:>8} {:>8}",
        "shape", "events", "file MB", "check s", "events/s", "peak MB", "B/event", "slower"
    );
    // The synth shape's events/s per size: the adversarial shapes' reference.
    let mut synth_rate = BTreeMap::new();
    for &target in &sizes {
        let path = dir.join(format!("synth-{target}.jsonl"));
        write_history(&headline(target), &path);
        let recorded = dir.join(format!("run-{target}.jsonl"));
        with_wall(&path, &recorded).expect("write the recorded-run shape");
        for (shape, file) in [("synth", &path), ("run", &recorded)] {
            let measured = measure(binary, file, runs, 0, 1);
            measured.print(shape, None);
            if shape == "synth" {
                synth_rate.insert(target, measured.rate());
            }
            if threads > 1 {
                let parallel = measure(binary, file, runs, 0, threads);
                parallel.print(&format!("{shape} --threads {threads}"), None);
                speedups.push(format!(
                    "{shape}, {target} events: --threads {threads} reads and checks {:.2}x as many events/s as one thread",
                    parallel.rate() / measured.rate()
                ));
            }
        }
        remove(&recorded);
        remove(&path);
    }

    for line in &speedups {
        println!("{line}");
    }
    if adversarial_size == 0 {
        return;
    }
    let path = dir.join(format!("synth-{adversarial_size}.jsonl"));
    let reference = *synth_rate.entry(adversarial_size).or_insert_with(|| {
        write_history(&headline(adversarial_size), &path);
        let measured = measure(binary, &path, runs, 0, 1);
        measured.print("synth", None);
        measured.rate()
    });
    let mut legend = Vec::new();
    for shape in adversarial(adversarial_size) {
        if only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|n| n == shape.name))
        {
            continue;
        }
        let path = dir.join(format!("{}-{adversarial_size}.jsonl", shape.name));
        write_history(&shape.config, &path);
        measure(binary, &path, runs, shape.exit, 1).print(shape.name, Some(reference));
        legend.push(format!("{}: {}", shape.name, shape.what));
        remove(&path);
    }
    remove(&path);
    println!("\nslower: the synth shape's events/s at {adversarial_size} events over the shape's.");
    for line in legend {
        println!("{line}");
    }
}

fn write_history(config: &SynthConfig, path: &Path) {
    let file = std::fs::File::create(path).expect("create the history");
    let started = Instant::now();
    let events = generate_to(config, BufWriter::new(file)).expect("write the history");
    eprintln!(
        "generated {events} events in {:.1}s",
        started.elapsed().as_secs_f64()
    );
}

/// Checks `file` `runs` times; the best wall time and the highest peak memory.
fn measure(binary: &str, file: &Path, runs: usize, exit: i32, threads: usize) -> Measured {
    let file_mb = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0) as f64 / 1e6;
    let mut best = f64::INFINITY;
    let mut peak_kib = 0u64;
    let mut events = 0;
    for _ in 0..runs.max(1) {
        let run = run_check(binary, file, exit, threads);
        best = best.min(run.seconds);
        peak_kib = peak_kib.max(run.peak_kib);
        events = run.events;
    }
    Measured {
        events,
        file_mb,
        seconds: best,
        peak_kib,
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

/// Runs `lockaudit -v check --threads <threads>` on `path`, which must exit with `exit`;
/// returns its wall time,
/// the events it read and its peak resident KiB.
fn run_check(binary: &str, path: &Path, exit: i32, threads: usize) -> Measured {
    let started = Instant::now();
    let output = Command::new(binary)
        .args(["-v", "check", "--threads", &threads.to_string()])
        .arg(path)
        .output()
        .expect("run lockaudit");
    let seconds = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(exit),
        "{}: expected exit {exit}:\n{}\n{}",
        path.display(),
        String::from_utf8_lossy(&output.stdout),
        stderr
    );
    // `read N events in S s` and `peak resident memory N KiB`.
    let number_after = |label: &str| -> u64 {
        stderr
            .lines()
            .find_map(|l| l.split(label).nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.replace(',', "").parse().ok())
            .unwrap_or_else(|| panic!("lockaudit -v reports `{label}`:\n{stderr}"))
    };
    Measured {
        events: number_after(" read "),
        file_mb: 0.0,
        seconds,
        peak_kib: number_after("peak resident memory "),
    }
}
