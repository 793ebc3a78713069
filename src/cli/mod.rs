//! The command line: every subcommand's flags (clap), and one function per subcommand
//! that carries it out and says what its exit code is (`main.rs` only dispatches). What a
//! run is gets decided by `run::plan`, from the flags `run` and `audit` hand it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::audit::shard::ShardSpec;
use crate::checker::CheckOptions;
use crate::locks::Algorithm;
use crate::presets::{Nemesis, Preset};
use crate::run::plan::Hosts;
use crate::units::Millis;
use crate::units::{nanos, parse_duration};

pub mod audit;
pub mod check;
pub mod rerun;
pub mod run;
pub mod shrink;
pub mod tools;

/// Exit code for bad input or usage (docs/src/reference/exit-codes.md).
pub const EXIT_BAD_INPUT: u8 = 2;

/// The exit codes, as the help of `lockaudit` and of each verdict-giving subcommand ends
/// (a macro, so that `concat!` can put examples before it).
macro_rules! exit_codes_help {
    () => {
        "Exit codes:
  0  valid: a lock was exercised and held up (audit: every cell met its expectation)
  1  anomalies found (audit: a cell differs from its expectation)
  2  bad input or usage (the file, line and field are named)
  3  unknown (nothing was proven), or the run could not be carried out"
    };
}

#[derive(Parser)]
#[command(
    name = "lockaudit",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("LOCKAUDIT_COMMIT"), ")"),
    about = "Audit distributed locks: record, check, draw",
    after_help = exit_codes_help!()
)]
pub struct Cli {
    /// More log output (repeat for more).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run a workload against real Redis, record its history, and check it.
    #[command(after_help = concat!("Examples:\n  lockaudit run --algorithm set-nx-px --nemesis pause-clients\n  lockaudit run --algorithm etcd-lock --nemesis pause-clients --seed 7\n  lockaudit run examples/adapters/redis-py.toml --nemesis kill-clients --time-limit 20s\n\n", exit_codes_help!()))]
    Run(RunArgs),
    /// Run a run folder's run again, as it was (its workload.toml with its seed, topology
    /// and schedule; its checker options), N times, and say how often each kind of anomaly
    /// it found came back and how soon. Exit 0 when every rerun was valid, 1 when any found
    /// anomalies, 3 when any could not be carried out or proved nothing.
    #[command(after_help = concat!("Examples:\n  lockaudit rerun results/2026-11-27T212413Z-setnx-del-kill-clients\n  lockaudit rerun results/2026-11-27T212413Z-setnx-del-kill-clients --repeat 10\n\n", exit_codes_help!()))]
    Rerun(RerunArgs),
    /// Every algorithm under every nemesis preset: a verdict matrix, judged against what
    /// each workload file expects (exit 1 when a cell differs).
    #[command(after_help = concat!("Examples:\n  lockaudit audit --quick\n  lockaudit audit --algorithms set-nx-px,redlock --nemeses none,pause-clients\n  lockaudit audit --cells fair-lock:pause-clients --rounds 10\n\n", exit_codes_help!()))]
    Audit(AuditArgs),
    /// (internal) One worker process of a run; the controller starts it.
    #[command(hide = true)]
    Worker(WorkerArgs),
    /// Check an external lock client (an adapter speaking docs/src/reference/protocol.md) against fresh
    /// servers: prints a checklist, exit 0 when every check passes, 1 if not. Examples:
    /// lockaudit adapter-test -- python3 examples/adapters/redis_py_lock.py (one server, no
    /// options); lockaudit adapter-test examples/adapters/redis-py.toml (the workload's
    /// adapter, topology, masters and adapter_options).
    AdapterTest(AdapterTestArgs),
    /// Check a history (JSONL, or Jepsen EDN by its .edn name) and print the verdict.
    #[command(after_help = concat!("Examples:\n  lockaudit check results/RUN/history.jsonl\n  lockaudit check history.edn --json\n\n", exit_codes_help!()))]
    Check(CheckArgs),
    /// Draw a run: timelines, latency, rate and fairness charts (SVG and PNG) and
    /// index.html. A run folder gets them inside it; a history file gets `<stem>-plots/`
    /// next to it.
    Plot(PlotArgs),
    /// Shrink a failing history to the fewest operations and faults that still show one
    /// of its anomalies (delta debugging, the checker as the judge): a history to attach to
    /// a bug report, with its timeline.
    #[command(after_help = "Examples:
  lockaudit shrink results/RUN
  lockaudit shrink results/RUN/history.jsonl --kind stale-write --out bug.jsonl

Exit codes:
  0  the shrunk history and its timeline were written
  2  bad input: an unreadable history (file, line and field named), an unknown kind, a kind
     the history does not show, or a valid history")]
    Shrink(ShrinkArgs),
    /// Write DIR/index.html and index.json: every run and audit folder in DIR, newest first,
    /// with its verdict and a link to its page. results/ keeps one by itself; a folder
    /// given here keeps its index from then on (every run and audit into it rewrites it).
    Index(IndexArgs),
    /// Write a synthetic history of a correct, fenced lock under kills and timeouts (for
    /// benchmarks and experiments: it checks valid).
    Synth(SynthArgs),
    /// Print a shell completion script: `lockaudit completions bash >
    /// /etc/bash_completion.d/lockaudit` (or zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// Print the manual page (roff): `lockaudit man > lockaudit.1; man ./lockaudit.1`.
    Man,
}

/// `lockaudit completions`'s argument.
#[derive(clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    pub shell: clap_complete::Shell,
}

/// The checker's bounds, the same for `check`, `run` and `audit` (docs/src/reference/history.md,
/// "The bounds").
#[derive(clap::Args, Debug, Clone)]
pub struct Bounds {
    /// A free key with failed attempts for longer than this is `unavailable`.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub liveness_bound: std::time::Duration,
    /// A process trying for longer than this while others acquire is starving.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub starvation_bound: std::time::Duration,
    /// On a fair lock, an acquire invoked more than this after another that got the lock
    /// first is `unfair`.
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    pub fairness_tolerance: std::time::Duration,
}

impl Bounds {
    pub fn check_options(&self) -> CheckOptions {
        CheckOptions {
            liveness_bound_ns: nanos(self.liveness_bound),
            starvation_bound_ns: nanos(self.starvation_bound),
            fairness_tolerance_ns: nanos(self.fairness_tolerance),
            ..CheckOptions::default()
        }
    }
}

/// `lockaudit audit`'s flags.
#[derive(clap::Args)]
pub struct AuditArgs {
    // The help names every algorithm (algorithms_help).
    #[arg(long, value_delimiter = ',', value_parser = parse_row, help = algorithms_help())]
    pub algorithms: Vec<String>,
    // The help names every preset (nemeses_help).
    #[arg(long, value_delimiter = ',', value_parser = parse_preset, help = nemeses_help())]
    pub nemeses: Vec<Preset>,
    /// Only these cells, as algorithm:nemesis pairs, comma-separated (instead of every
    /// algorithm × every nemesis).
    #[arg(long, value_delimiter = ',')]
    pub cells: Vec<String>,
    /// The longest a cell that must find something runs (it stops once it has).
    #[arg(long, default_value = "30s")]
    pub time_limit: Millis,
    /// How long a cell expected to stay valid runs (nothing ends it early; default 4 s, or
    /// --time-limit if that is shorter).
    #[arg(long)]
    pub valid_time_limit: Option<Millis>,
    /// Every cell runs its whole time, even once it has found what it must.
    #[arg(long)]
    pub no_early_stop: bool,
    #[command(flatten)]
    pub bounds: Bounds,
    /// The seed of the first round's fault plans (each round adds 1).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Every algorithm with fencing tokens: no stale write may get through.
    #[arg(long)]
    pub fenced: bool,
    /// Run each cell this many times (seeds seed, seed+1, ...): each cell's verdict is then
    /// how many rounds met its expectation, against its workload's rate (or every round).
    #[arg(long, alias = "repeat", default_value_t = 1)]
    pub rounds: usize,
    /// One cell per known flaw (once, or --rounds times): those that must find something,
    /// less the faulted cells of a lock whose `none` cell must find the same; every cell
    /// stops as soon as its run has found what it must. The CI gate.
    #[arg(long)]
    pub quick: bool,
    /// How many cells run side by side, each with its own servers and folder (default: two
    /// per core; 1: one after another).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: Option<u16>,
    /// Run only shard K of N of the cells, for one of N machines: the cells at places K,
    /// K+N, K+2N, ... of the audit's list (the same for the same flags on any machine),
    /// every round of each. Its audit.json records the whole audit, for --merge.
    #[arg(long, value_name = "K/N", value_parser = parse_shard)]
    pub shard: Option<ShardSpec>,
    /// Join the folders of the N shards of one audit (--shard K/N) into its matrix, in
    /// --out, as the audit run on one machine would write it; refused (exit 2, nothing
    /// written) if a shard is missing, given twice, interrupted or of another audit.
    #[arg(long, value_name = "DIR", num_args = 1.., conflicts_with_all = MERGE_CONFLICTS)]
    pub merge: Vec<PathBuf>,
    /// A folder of workload files, `<algorithm>.toml`, that override the built-in ones
    /// (an algorithm without a file there keeps its built-in workload).
    #[arg(long)]
    pub workloads: Option<PathBuf>,
    /// The audit folder (default: a new one under results/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the verdict on stdout as one JSON document, audit.json's text, and nothing
    /// else there (the lines naming the folder and its files go to stderr).
    #[arg(long)]
    pub json: bool,
    /// The redis-server binary (default: found on PATH).
    #[arg(long)]
    pub redis_server: Option<PathBuf>,
    /// The redis-sentinel binary (default: found on PATH; with --node, each host's
    /// redis-server in sentinel mode).
    #[arg(long)]
    pub redis_sentinel: Option<PathBuf>,
    #[command(flatten)]
    pub hosts: HostArgs,
}

/// `lockaudit run`'s flags; each overrides the workload file.
#[derive(clap::Args)]
pub struct RunArgs {
    /// A workload file (workloads/*.toml); without one, the built-in workload of
    /// --algorithm (default set-nx-px): the same file's text, compiled in.
    pub workload: Option<PathBuf>,
    // The help names every algorithm (algorithm_help).
    #[arg(long, value_parser = parse_algorithm, help = algorithm_help())]
    pub algorithm: Option<&'static Algorithm>,
    /// Concurrent lock clients (each a process id in the history).
    #[arg(long)]
    pub clients: Option<usize>,
    /// Worker processes the clients are spread over.
    #[arg(long)]
    pub workers: Option<usize>,
    /// Lock keys the clients share (lock:0, lock:1, ...).
    #[arg(long)]
    pub keys: Option<usize>,
    /// The lock's time to live, its lease (e.g. 500ms, 2s).
    #[arg(long)]
    pub ttl: Option<Millis>,
    /// A fixed hold time (the file can give a range).
    #[arg(long)]
    pub hold: Option<Millis>,
    /// How long the clients work (e.g. 10s).
    #[arg(long)]
    pub time_limit: Option<Millis>,
    /// The random seed of the clients and the fault plan: same seed, same plan.
    #[arg(long)]
    pub seed: Option<u64>,
    // The help names every preset (nemesis_help).
    #[arg(long, value_parser = parse_nemesis, help = nemesis_help())]
    pub nemesis: Option<Nemesis>,
    /// Where the lock lives: single, replicated, sentinel, independent, cluster (a Redis
    /// Cluster of 3 masters with a replica each), postgres, etcd (3 members), zookeeper (3
    /// servers), mariadb (default: the algorithm's own; redlock: independent; pg-*: postgres;
    /// etcd-*: etcd; zk-lock: zookeeper; mariadb-get-lock: mariadb).
    #[arg(long, value_parser = parse_topology)]
    pub topology: Option<crate::cluster::Topology>,
    /// Fencing tokens, checked by a fenced resource.
    #[arg(long)]
    pub fenced: bool,
    /// Renew every ttl/3 while holding.
    #[arg(long)]
    pub watchdog: bool,
    /// The run folder (default: a new one under results/). A new one is made 0700, and
    /// whatever holds the servers' password (endpoints.json, sentinel.conf) 0600: only you
    /// can read it (docs/src/guide/secrets.md).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the report on stdout as one JSON document, report.json's text, and nothing
    /// else there (the lines naming the folder and its files go to stderr).
    #[arg(long)]
    pub json: bool,
    /// End the run at the first anomaly the history proves (checked while it runs): heal
    /// every fault, finish the history, check it whole, draw it, exit 1.
    #[arg(long, conflicts_with = "no_online_check")]
    pub stop_on_anomaly: bool,
    #[command(flatten)]
    pub bounds: Bounds,
    /// Check the history only once the run is over, not while it runs (the verdict is the
    /// same; for measuring what online checking costs).
    #[arg(long)]
    pub no_online_check: bool,
    /// Use a Redis that is already running instead of starting servers:
    /// redis://[:password@]host:port, or sentinel://[:password@]host:port[,host:port]/master
    /// for a Sentinel-watched primary. Server-side faults are then unavailable.
    #[arg(long)]
    pub redis: Option<String>,
    /// The redis-server binary (default: found on PATH; with --node, on each host's PATH).
    #[arg(long)]
    pub redis_server: Option<PathBuf>,
    /// The redis-sentinel binary (default: found on PATH; with --node, each host's
    /// redis-server in sentinel mode).
    #[arg(long)]
    pub redis_sentinel: Option<PathBuf>,
    #[command(flatten)]
    pub hosts: HostArgs,
}

/// `lockaudit rerun`'s flags.
#[derive(clap::Args)]
pub struct RerunArgs {
    /// The run folder to run again (results/<run>, or an audit's cell).
    pub run_dir: PathBuf,
    /// How many times to run it (each in a folder of its own).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// The folder the reruns' folders are made in (default: results/); its index.html
    /// lists them.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Where the lock's servers run when not on this machine: `run`'s and `audit`'s flags.
#[derive(clap::Args)]
pub struct HostArgs {
    /// Run the lock's servers on this host over SSH, ssh://[user@]host[:port]; repeat it
    /// for several (replaces the workload's `nodes`).
    #[arg(long = "node", value_name = "URL", conflicts_with = "hosts")]
    pub nodes: Vec<String>,
    /// A hosts file: `nodes` (URLs, or tables with a host's own `ssh_key`, `redis_server`,
    /// `etcd`, `java` and `zookeeper_jar`), and `ssh_key`, `remote_dir` and
    /// `accept_new_host_keys` for all (the flags override those).
    #[arg(long, value_name = "FILE")]
    pub hosts: Option<PathBuf>,
    /// The private key for --node hosts (default: ssh's own keys and agent).
    #[arg(long)]
    pub ssh_key: Option<PathBuf>,
    /// The folder on the --node hosts where each run keeps its servers' files (default /tmp;
    /// the run's folder there is made 0700, its files 0600).
    #[arg(long)]
    pub remote_dir: Option<PathBuf>,
    /// Trust a --node host whose SSH key is in none of your known_hosts files yet (recorded
    /// in the run's own ssh/known_hosts). Default: such a host is refused, as ssh does with
    /// StrictHostKeyChecking yes; add its key with `ssh-keyscan HOST >> ~/.ssh/known_hosts`
    /// after checking it. A key that differs from a known one is refused either way.
    #[arg(long)]
    pub accept_new_host_keys: bool,
}

impl HostArgs {
    /// The hosts as the plan takes them (its hosts file read when the plan is built).
    pub fn hosts(self) -> Hosts {
        Hosts {
            nodes: self.nodes.into_iter().map(Into::into).collect(),
            file: self.hosts,
            ssh_key: self.ssh_key,
            remote_dir: self.remote_dir,
            accept_new_host_keys: self.accept_new_host_keys,
        }
    }
}

/// `--algorithm`'s help: the names, from the list the runner knows.
fn algorithm_help() -> String {
    format!(
        "The lock algorithm, one of {}; without a workload file, its built-in workload (default set-nx-px)",
        crate::locks::ALGORITHMS.join(", ")
    )
}

/// `--algorithms`' help.
fn algorithms_help() -> String {
    format!(
        "Algorithms, comma-separated, of {} (default: all), or workload files (*.toml: your own Lua scripts or lock client, judged by its own [expect]), or folders of them (every *.toml in it). A workload file that names its own `nemesis` is audited under it alone, unless --nemeses says otherwise",
        crate::locks::ALGORITHMS.join(", ")
    )
}

/// `--nemesis`' help: the presets, from the list the nemesis knows.
fn nemesis_help() -> String {
    format!(
        "The faults: a preset, one of {}, or a schedule file (nemesis/*.toml)",
        crate::nemesis::PRESETS.join(", ")
    )
}

/// `--nemeses`' help.
fn nemeses_help() -> String {
    format!(
        "Nemesis presets, comma-separated, of {} (default: all)",
        crate::nemesis::PRESETS.join(", ")
    )
}

/// `lockaudit worker`'s flags.
#[derive(clap::Args)]
pub struct WorkerArgs {
    /// The run folder, so that `ps` shows which run a worker belongs to.
    #[arg(long)]
    pub run: Option<PathBuf>,
}

/// `lockaudit adapter-test`'s flags.
#[derive(clap::Args)]
pub struct AdapterTestArgs {
    /// The redis-server binary (default: found on PATH).
    #[arg(long)]
    pub redis_server: Option<PathBuf>,
    /// The redis-sentinel binary, for a workload on the sentinel topology.
    #[arg(long)]
    pub redis_sentinel: Option<PathBuf>,
    /// A workload file (`algorithm = "external"`), or the adapter's argv after `--`,
    /// run without a shell.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub argv: Vec<String>,
}

/// `lockaudit check`'s flags.
#[derive(clap::Args)]
pub struct CheckArgs {
    /// The history file.
    pub history: PathBuf,
    /// Write report.json into this folder (created if missing).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the report as JSON on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub bounds: Bounds,
    /// List at most this many anomalies of each kind (all are counted).
    #[arg(long, default_value_t = 1000)]
    pub limit: usize,
    /// Threads to read and check with (the report is the same with any number).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: u16,
}

/// `lockaudit shrink`'s flags.
#[derive(clap::Args)]
pub struct ShrinkArgs {
    /// The history file (JSONL), or a run folder (its history.jsonl).
    pub history: PathBuf,
    /// The anomaly kind to keep (overlap, stale-write, lost-lock, unavailable, ...);
    /// default: the kind of the worst episode the summary lists first.
    #[arg(long, value_parser = parse_kind)]
    pub kind: Option<crate::report::AnomalyKind>,
    /// Where to write the shrunk history (default: `<stem>.shrunk.jsonl` next to the
    /// history); its timeline goes into `<its stem>-plots/` beside it.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub bounds: Bounds,
}

/// An anomaly kind, with the nearest name for a slip.
fn parse_kind(text: &str) -> Result<crate::report::AnomalyKind, String> {
    text.parse().map_err(|why: String| {
        match crate::suggest::closest(text, crate::report::ANOMALY_KINDS) {
            Some(near) => format!("{why}; did you mean \"{near}\"?"),
            None => why,
        }
    })
}

/// `lockaudit plot`'s argument.
#[derive(clap::Args)]
pub struct PlotArgs {
    /// A run folder (results/<run>) or a history file.
    pub target: PathBuf,
}

/// `lockaudit index`'s argument.
#[derive(clap::Args)]
pub struct IndexArgs {
    /// The folder of runs and audits (results/, or an --out folder's parent).
    pub dir: PathBuf,
}

/// `lockaudit synth`'s flags.
#[derive(clap::Args)]
pub struct SynthArgs {
    /// Where to write the JSONL history.
    #[arg(long)]
    pub out: PathBuf,
    /// About how many events.
    #[arg(long, default_value_t = 1_000_000)]
    pub events: usize,
    /// Lock keys the clients share.
    #[arg(long, default_value_t = 1000)]
    pub keys: usize,
    /// Concurrent client processes.
    #[arg(long, default_value_t = 2000)]
    pub processes: usize,
    /// The random seed: the same seed writes the same history.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// `--topology`: one of the services' topologies, or the nearest name for a slip.
fn parse_topology(text: &str) -> Result<crate::cluster::Topology, String> {
    serde_json::from_value(serde_json::Value::String(text.to_string())).map_err(|_| {
        let names: Vec<String> = crate::cluster::SERVICES
            .iter()
            .map(|s| crate::run::topology_name(s.topology))
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        crate::suggest::unknown("topology", text, &names)
    })
}

/// `text` as given, unless `unknown` says what is wrong with it (the nearest name for a slip).
fn known_name(text: &str, unknown: fn(&str) -> Option<String>) -> Result<String, String> {
    unknown(text).map_or_else(|| Ok(text.to_string()), Err)
}

/// `--algorithm`: a known algorithm.
fn parse_algorithm(text: &str) -> Result<&'static Algorithm, String> {
    crate::locks::named(text)
}

/// `--nemesis`: a preset (an old name as its new one) or a schedule file (whose errors come
/// when it is read).
fn parse_nemesis(text: &str) -> Result<Nemesis, String> {
    let nemesis = Nemesis::named(text);
    known_name(nemesis.name(), crate::presets::unknown_nemesis)?;
    Ok(nemesis)
}

/// One of `--algorithms`: an algorithm or a workload file.
fn parse_row(text: &str) -> Result<String, String> {
    known_name(text, crate::audit::runner::unknown_row)
}

/// `--shard K/N`.
fn parse_shard(text: &str) -> Result<ShardSpec, String> {
    text.parse()
}

/// What `audit --merge` cannot be given: the flags that choose or run cells (the shards
/// did that).
const MERGE_CONFLICTS: [&str; 23] = [
    "algorithms",
    "nemeses",
    "cells",
    "time_limit",
    "valid_time_limit",
    "no_early_stop",
    "liveness_bound",
    "starvation_bound",
    "fairness_tolerance",
    "seed",
    "fenced",
    "rounds",
    "quick",
    "jobs",
    "workloads",
    "shard",
    "redis_server",
    "redis_sentinel",
    "nodes",
    "hosts",
    "ssh_key",
    "remote_dir",
    "accept_new_host_keys",
];

/// One of `--nemeses`: a preset (an old name as its new one).
fn parse_preset(text: &str) -> Result<Preset, String> {
    Preset::named(text).ok_or_else(|| crate::presets::unknown_preset(text))
}

/// Exit code for a run that could not be carried out (docs/src/reference/exit-codes.md).
pub const EXIT_CANNOT_RUN: u8 = 3;

/// Writes `text` to standard output (`streams::out`: a reader that left is no error, and
/// the exit code stays the verdict's).
pub fn print_out(text: &str) -> anyhow::Result<()> {
    crate::streams::out(text).map_err(|e| anyhow::anyhow!("cannot write to standard output: {e}"))
}

/// Log output on stderr: warnings, or more with each `-v` (`RUST_LOG` overrides).
pub fn init_logging(verbose: u8) {
    let level = match verbose {
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
}

/// A subcommand's exit code: its own, or 2 (bad input or usage) with its error on stderr.
pub fn exit_code(result: anyhow::Result<u8>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            crate::note!("lockaudit: {error:#}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every argument of every subcommand, hidden ones included, and their names.
    fn arguments(command: &clap::Command, path: &str, out: &mut Vec<(String, clap::Arg)>) {
        for arg in command.get_arguments() {
            out.push((format!("{path} {}", arg.get_id()), arg.clone()));
        }
        for sub in command.get_subcommands() {
            arguments(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    #[test]
    fn every_flag_of_every_subcommand_has_a_help_line() {
        let mut command = Cli::command();
        command.build();
        let mut args = Vec::new();
        arguments(&command, "lockaudit", &mut args);
        assert!(args.len() > 40, "{} arguments", args.len());
        let empty: Vec<&String> = args
            .iter()
            .filter(|(_, arg)| {
                arg.get_help()
                    .or(arg.get_long_help())
                    .is_none_or(|h| h.to_string().trim().is_empty())
            })
            .map(|(name, _)| name)
            .collect();
        assert!(empty.is_empty(), "flags without help: {empty:?}");
    }

    #[test]
    fn an_old_preset_name_on_the_command_line_is_the_new_one() {
        assert_eq!(
            parse_nemesis("kill-redis"),
            Ok(Nemesis::Preset(Preset::KillServers))
        );
        assert_eq!(parse_preset("pause-redis"), Ok(Preset::PauseServers));
        assert_eq!(parse_preset("mix"), Ok(Preset::Mix));
        let why = parse_preset("pause-redsi").unwrap_err();
        assert!(why.contains("(did you mean \"pause-servers\"?)"), "{why}");
    }

    #[test]
    fn the_algorithm_and_nemesis_helps_name_every_choice() {
        let command = Cli::command();
        let help = |sub: &str, arg: &str| {
            let sub = command.find_subcommand(sub).expect(sub);
            let arg = sub.get_arguments().find(|a| a.get_id() == arg).expect(arg);
            arg.get_help().expect("a help").to_string()
        };
        for (sub, arg, names) in [
            ("run", "algorithm", &crate::locks::ALGORITHMS[..]),
            ("audit", "algorithms", &crate::locks::ALGORITHMS[..]),
            ("run", "nemesis", &crate::nemesis::PRESETS[..]),
            ("audit", "nemeses", &crate::nemesis::PRESETS[..]),
        ] {
            let text = help(sub, arg);
            for name in names {
                assert!(
                    text.contains(name),
                    "{sub} --{arg}: {name} missing from {text:?}"
                );
            }
        }
    }
}
