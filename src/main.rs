//! The `lockaudit` command line: thin; the library does the work.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use lockaudit::checker::{self, CheckOptions};
use lockaudit::history;
use lockaudit::report::render_summary;
use lockaudit::units::{nanos, parse_duration};

/// Exit code for bad input or usage (DESIGN.md).
const EXIT_BAD_INPUT: u8 = 2;

#[derive(Parser)]
#[command(
    name = "lockaudit",
    version,
    about = "Audit distributed locks: record, check, draw"
)]
struct Cli {
    /// More log output (repeat for more).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check a history (JSONL, or Jepsen EDN by its .edn name) and print the verdict.
    Check {
        /// The history file.
        history: PathBuf,
        /// Write report.json into this folder (created if missing).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print the report as JSON on stdout instead of the summary.
        #[arg(long)]
        json: bool,
        /// A free key with failed attempts for longer than this is `unavailable`.
        #[arg(long, default_value = "1s", value_parser = parse_duration)]
        liveness_bound: std::time::Duration,
        /// A process trying for longer than this while others acquire is starving.
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        starvation_bound: std::time::Duration,
        /// List at most this many anomalies of each kind (all are counted).
        #[arg(long, default_value_t = 1000)]
        limit: usize,
    },
    /// Write a synthetic history of a correct, fenced lock under kills and timeouts (for
    /// benchmarks and experiments: it checks valid).
    Synth {
        /// Where to write the JSONL history.
        #[arg(long)]
        out: PathBuf,
        /// About how many events.
        #[arg(long, default_value_t = 1_000_000)]
        events: usize,
        #[arg(long, default_value_t = 1000)]
        keys: usize,
        /// Concurrent client processes.
        #[arg(long, default_value_t = 2000)]
        processes: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let level = match cli.verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();

    match run(cli.command) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("lockaudit: {error:#}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

/// This process's peak resident memory (Linux's VmHWM), for `-v` and the benchmark.
fn peak_resident_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn run(command: Command) -> anyhow::Result<u8> {
    match command {
        Command::Check {
            history: path,
            out,
            json,
            liveness_bound,
            starvation_bound,
            limit,
        } => {
            let started = std::time::Instant::now();
            let history = history::read_file(&path)?;
            tracing::info!(
                "read {} events in {:.3}s",
                history.ops.len(),
                started.elapsed().as_secs_f64()
            );
            let started = std::time::Instant::now();
            let options = CheckOptions {
                liveness_bound_ns: nanos(liveness_bound),
                starvation_bound_ns: nanos(starvation_bound),
                anomaly_limit: limit,
            };
            let report = checker::check(&history, &options);
            tracing::info!("checked in {:.3}s", started.elapsed().as_secs_f64());
            if let Some(dir) = &out {
                std::fs::create_dir_all(dir)
                    .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
                let file = dir.join("report.json");
                let text = serde_json::to_string_pretty(&report)?;
                std::fs::write(&file, text + "\n")
                    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", file.display()))?;
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", render_summary(&report, &path.display().to_string()));
                if let Some(dir) = &out {
                    println!("report: {}", dir.join("report.json").display());
                }
            }
            if let Some(peak) = peak_resident_kib() {
                tracing::info!("peak resident memory {peak} KiB");
            }
            Ok(report.exit_code() as u8)
        }
        Command::Synth {
            out,
            events,
            keys,
            processes,
            seed,
        } => {
            let config = lockaudit::synth::SynthConfig {
                events,
                keys,
                processes,
                seed,
                fenced: true,
                ..lockaudit::synth::SynthConfig::default()
            };
            let file = std::fs::File::create(&out)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", out.display()))?;
            let written = lockaudit::synth::generate_to(&config, std::io::BufWriter::new(file))
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", out.display()))?;
            eprintln!("wrote {written} events to {}", out.display());
            Ok(0)
        }
    }
}
