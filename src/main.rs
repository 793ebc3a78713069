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
        .init();

    match run(cli.command) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("lockaudit: {error:#}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
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
            Ok(report.exit_code() as u8)
        }
    }
}
