//! The `lockaudit` command line: thin; the library does the work.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use lockaudit::checker::{self, CheckOptions};
use lockaudit::history;
use lockaudit::report::render_summary;
use lockaudit::units::Millis;
use lockaudit::units::{nanos, parse_duration};
use lockaudit::workload::WorkloadSpec;

/// Exit code for bad input or usage (the README's exit codes).
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
    /// Run a workload against real Redis, record its history, and check it.
    Run(RunArgs),
    /// Every algorithm under every nemesis preset: a verdict matrix, judged against what
    /// each workload file expects (exit 1 when a cell differs).
    Audit(AuditArgs),
    /// (internal) One worker process of a run; the controller starts it.
    #[command(hide = true)]
    Worker {
        /// The run folder, so that `ps` shows which run a worker belongs to.
        #[arg(long)]
        run: Option<PathBuf>,
    },
    /// Check an external lock client (an adapter speaking docs/protocol.md) against fresh
    /// servers: prints a checklist, exit 0 when every check passes, 1 if not. Examples:
    /// lockaudit adapter-test -- python3 examples/adapters/redis_py_lock.py (one server, no
    /// options); lockaudit adapter-test examples/adapters/redis-py.toml (the workload's
    /// adapter, topology, masters and adapter_options).
    AdapterTest {
        /// The redis-server binary (default: found on PATH).
        #[arg(long)]
        redis_server: Option<PathBuf>,
        /// The redis-sentinel binary, for a workload on the sentinel topology.
        #[arg(long)]
        redis_sentinel: Option<PathBuf>,
        /// A workload file (`algorithm = "external"`), or the adapter's argv after `--`,
        /// run without a shell.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        argv: Vec<String>,
    },
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
        #[command(flatten)]
        bounds: Bounds,
        /// List at most this many anomalies of each kind (all are counted).
        #[arg(long, default_value_t = 1000)]
        limit: usize,
        /// Threads to read and check with (the report is the same with any number).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
        threads: u16,
    },
    /// Draw a run: timelines, latency, rate and fairness charts (SVG and PNG) and
    /// index.html. A run folder gets them inside it; a history file gets `<stem>-plots/`
    /// next to it.
    Plot {
        /// A run folder (results/<run>) or a history file.
        target: PathBuf,
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
        /// Lock keys the clients share.
        #[arg(long, default_value_t = 1000)]
        keys: usize,
        /// Concurrent client processes.
        #[arg(long, default_value_t = 2000)]
        processes: usize,
        /// The random seed: the same seed writes the same history.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

/// The checker's bounds, the same for `check`, `run` and `audit` (README: "Choosing the
/// bounds").
#[derive(clap::Args, Debug, Clone)]
struct Bounds {
    /// A free key with failed attempts for longer than this is `unavailable`.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    liveness_bound: std::time::Duration,
    /// A process trying for longer than this while others acquire is starving.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    starvation_bound: std::time::Duration,
    /// On a fair lock, an acquire invoked more than this after another that got the lock
    /// first is `unfair`.
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    fairness_tolerance: std::time::Duration,
}

impl Bounds {
    fn check_options(&self) -> CheckOptions {
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
struct AuditArgs {
    // The help names every algorithm (algorithms_help).
    #[arg(long, value_delimiter = ',', help = algorithms_help())]
    algorithms: Vec<String>,
    // The help names every preset (nemeses_help).
    #[arg(long, value_delimiter = ',', help = nemeses_help())]
    nemeses: Vec<String>,
    /// Only these cells, as algorithm:nemesis pairs, comma-separated (instead of every
    /// algorithm × every nemesis).
    #[arg(long, value_delimiter = ',')]
    cells: Vec<String>,
    /// The longest a cell that must find something runs (it stops once it has).
    #[arg(long, default_value = "20s")]
    time_limit: Millis,
    /// How long a cell expected to stay valid runs (nothing ends it early; default 4 s, or
    /// --time-limit if that is shorter).
    #[arg(long)]
    valid_time_limit: Option<Millis>,
    /// Every cell runs its whole time, even once it has found what it must.
    #[arg(long)]
    no_early_stop: bool,
    #[command(flatten)]
    bounds: Bounds,
    /// The seed of the first round's fault plans (each round adds 1).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Every algorithm with fencing tokens: no stale write may get through.
    #[arg(long)]
    fenced: bool,
    /// Run each cell this many times (seeds seed, seed+1, ...) and report how often each
    /// reached its expectation and the median time to its first anomaly.
    #[arg(long, default_value_t = 1, conflicts_with = "quick")]
    repeat: usize,
    /// Only the cells that must find something (each known flaw), once each; every cell
    /// stops as soon as its run has found what it must. The CI gate.
    #[arg(long)]
    quick: bool,
    /// A folder of workload files, `<algorithm>.toml`, that override the built-in ones
    /// (an algorithm without a file there keeps its built-in workload).
    #[arg(long)]
    workloads: Option<PathBuf>,
    /// The audit folder (default: a new one under results/).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The redis-server binary (default: found on PATH).
    #[arg(long)]
    redis_server: Option<PathBuf>,
    /// The redis-sentinel binary (default: found on PATH; with --node, each host's
    /// redis-server in sentinel mode).
    #[arg(long)]
    redis_sentinel: Option<PathBuf>,
    #[command(flatten)]
    hosts: HostArgs,
}

/// `lockaudit run`'s flags; each overrides the workload file.
#[derive(clap::Args)]
struct RunArgs {
    /// A workload file (workloads/*.toml); without one, the built-in workload of
    /// --algorithm (default set-nx-px): the same file's text, compiled in.
    workload: Option<PathBuf>,
    // The help names every algorithm (algorithm_help).
    #[arg(long, help = algorithm_help())]
    algorithm: Option<String>,
    /// Concurrent lock clients (each a process id in the history).
    #[arg(long)]
    clients: Option<usize>,
    /// Worker processes the clients are spread over.
    #[arg(long)]
    workers: Option<usize>,
    /// Lock keys the clients share (lock:0, lock:1, ...).
    #[arg(long)]
    keys: Option<usize>,
    /// The lock's time to live, its lease (e.g. 500ms, 2s).
    #[arg(long)]
    ttl: Option<Millis>,
    /// A fixed hold time (the file can give a range).
    #[arg(long)]
    hold: Option<Millis>,
    /// How long the clients work (e.g. 10s).
    #[arg(long)]
    time_limit: Option<Millis>,
    /// The random seed of the clients and the fault plan: same seed, same plan.
    #[arg(long)]
    seed: Option<u64>,
    // The help names every preset (nemesis_help).
    #[arg(long, help = nemesis_help())]
    nemesis: Option<String>,
    /// Where the lock lives: single, replicated, sentinel, independent, cluster (a Redis
    /// Cluster of 3 masters with a replica each), postgres (default: the algorithm's own;
    /// redlock: independent).
    #[arg(long, value_parser = parse_topology)]
    topology: Option<lockaudit::cluster::Topology>,
    /// Fencing tokens, checked by a fenced resource.
    #[arg(long)]
    fenced: bool,
    /// Renew every ttl/3 while holding.
    #[arg(long)]
    watchdog: bool,
    /// The run folder (default: a new one under results/). A new one is made 0700, and
    /// whatever holds the servers' password (endpoints.json, sentinel.conf) 0600: only you
    /// can read it (README, "Who can read a run's secrets").
    #[arg(long)]
    out: Option<PathBuf>,
    /// End the run at the first anomaly the history proves (checked while it runs): heal
    /// every fault, finish the history, check it whole, draw it, exit 1.
    #[arg(long, conflicts_with = "no_online_check")]
    stop_on_anomaly: bool,
    #[command(flatten)]
    bounds: Bounds,
    /// Check the history only once the run is over, not while it runs (the verdict is the
    /// same; for measuring what online checking costs).
    #[arg(long)]
    no_online_check: bool,
    /// Use a Redis that is already running instead of starting servers:
    /// redis://[:password@]host:port, or sentinel://[:password@]host:port[,host:port]/master
    /// for a Sentinel-watched primary. Server-side faults are then unavailable.
    #[arg(long)]
    redis: Option<String>,
    /// The redis-server binary (default: found on PATH; with --node, on each host's PATH).
    #[arg(long)]
    redis_server: Option<PathBuf>,
    /// The redis-sentinel binary (default: found on PATH; with --node, each host's
    /// redis-server in sentinel mode).
    #[arg(long)]
    redis_sentinel: Option<PathBuf>,
    #[command(flatten)]
    hosts: HostArgs,
}

/// Where the lock's servers run when not on this machine: `run`'s and `audit`'s flags.
#[derive(clap::Args)]
struct HostArgs {
    /// Run the lock's servers on this host over SSH, ssh://[user@]host[:port]; repeat it
    /// for several (replaces the workload's `nodes`).
    #[arg(long = "node", value_name = "URL", conflicts_with = "hosts")]
    nodes: Vec<String>,
    /// A hosts file: `nodes` (URLs, or tables with a host's own `ssh_key` and
    /// `redis_server`), and `ssh_key`, `remote_dir` and `accept_new_host_keys` for all (the
    /// flags override those).
    #[arg(long, value_name = "FILE")]
    hosts: Option<PathBuf>,
    /// The private key for --node hosts (default: ssh's own keys and agent).
    #[arg(long)]
    ssh_key: Option<PathBuf>,
    /// The folder on the --node hosts where each run keeps its servers' files (default /tmp;
    /// the run's folder there is made 0700, its files 0600).
    #[arg(long)]
    remote_dir: Option<PathBuf>,
    /// Trust a --node host whose SSH key is in none of your known_hosts files yet (recorded
    /// in the run's own ssh/known_hosts). Default: such a host is refused, as ssh does with
    /// StrictHostKeyChecking yes; add its key with `ssh-keyscan HOST >> ~/.ssh/known_hosts`
    /// after checking it. A key that differs from a known one is refused either way.
    #[arg(long)]
    accept_new_host_keys: bool,
}

/// The hosts, from the flags and the hosts file.
struct ResolvedHosts {
    nodes: Vec<lockaudit::cluster::NodeEntry>,
    ssh_key: Option<PathBuf>,
    remote_dir: Option<PathBuf>,
    accept_new_host_keys: bool,
}

impl HostArgs {
    /// The hosts (empty: none given), their key and their folder, from the flags and the
    /// hosts file.
    fn resolve(self) -> anyhow::Result<ResolvedHosts> {
        let file = match &self.hosts {
            Some(path) => lockaudit::workload::inventory::Inventory::from_file(path)?,
            None => Default::default(),
        };
        let nodes = if self.nodes.is_empty() {
            file.nodes
        } else {
            self.nodes.into_iter().map(Into::into).collect()
        };
        Ok(ResolvedHosts {
            nodes,
            ssh_key: self.ssh_key.or(file.ssh_key),
            remote_dir: self.remote_dir.or(file.remote_dir),
            accept_new_host_keys: self.accept_new_host_keys || file.accept_new_host_keys,
        })
    }
}

/// `--algorithm`'s help: the names, from the list the runner knows.
fn algorithm_help() -> String {
    format!(
        "The lock algorithm, one of {}; without a workload file, its built-in workload (default set-nx-px)",
        lockaudit::locks::ALGORITHMS.join(", ")
    )
}

/// `--algorithms`' help.
fn algorithms_help() -> String {
    format!(
        "Algorithms, comma-separated, of {} (default: all), or workload files (*.toml: your own Lua scripts or lock client, judged by its own [expect])",
        lockaudit::locks::ALGORITHMS.join(", ")
    )
}

/// `--nemesis`' help: the presets, from the list the nemesis knows.
fn nemesis_help() -> String {
    format!(
        "The faults: a preset, one of {}, or a schedule file (nemesis/*.toml)",
        lockaudit::nemesis::PRESETS.join(", ")
    )
}

/// `--nemeses`' help.
fn nemeses_help() -> String {
    format!(
        "Nemesis presets, comma-separated, of {} (default: all)",
        lockaudit::nemesis::PRESETS.join(", ")
    )
}

/// How a workload is named in messages: its algorithm.
fn args_workload_name(spec: &WorkloadSpec) -> String {
    format!("workload ({})", spec.algorithm)
}

fn parse_topology(text: &str) -> Result<lockaudit::cluster::Topology, String> {
    serde_json::from_value(serde_json::Value::String(text.to_string())).map_err(|_| {
        "expected single, replicated, sentinel, independent, cluster or postgres".to_string()
    })
}

/// Exit code for a run that could not be carried out (the README's exit codes).
const EXIT_CANNOT_RUN: u8 = 3;

/// Writes `text` to standard output. A reader that stopped reading (`| head`, `| jq` that
/// failed) is not an error of ours: the rest is simply not wanted, and the verdict's exit
/// code still stands. (`print!` would panic.)
fn print_out(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(|e| anyhow::anyhow!("cannot write to standard output: {e}")),
    }
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

/// Resolves the workload, runs it, prints the run folder and the verdict.
fn run_workload(args: RunArgs) -> anyhow::Result<u8> {
    use lockaudit::run::{existing_endpoints, new_run_dir, run, RunOptions, Servers, StopWhen};
    use lockaudit::units::Span;

    // Without a file, the algorithm's own workload, built in (workloads/<algorithm>.toml).
    let mut spec = match &args.workload {
        Some(path) => WorkloadSpec::from_file(path)?,
        None => lockaudit::workload::builtin::workload(
            args.algorithm
                .as_deref()
                .unwrap_or(&WorkloadSpec::default().algorithm),
        )?,
    };
    if let Some(v) = args.algorithm {
        spec.algorithm = v;
    }
    if let Some(v) = args.clients {
        spec.clients = v;
    }
    if let Some(v) = args.workers {
        spec.workers = v;
    }
    spec.workers = spec.workers.min(spec.clients);
    if let Some(v) = args.keys {
        spec.keys = v;
    }
    if let Some(v) = args.ttl {
        spec.ttl = v;
    }
    if let Some(v) = args.hold {
        spec.hold = Span { min: v, max: v };
    }
    if let Some(v) = args.time_limit {
        spec.time_limit = v;
    }
    if let Some(v) = args.seed {
        spec.seed = v;
    }
    if let Some(v) = args.nemesis {
        spec.nemesis = Some(v);
    }
    if let Some(v) = args.topology {
        spec.topology = Some(v);
    }
    spec.fenced |= args.fenced;
    spec.watchdog |= args.watchdog;
    let hosts = args.hosts.resolve()?;
    if !hosts.nodes.is_empty() {
        spec.nodes = hosts.nodes;
    }
    if let Some(v) = hosts.ssh_key {
        spec.ssh_key = Some(v);
    }
    if let Some(v) = hosts.remote_dir {
        spec.remote_dir = Some(v);
    }
    spec.accept_new_host_keys |= hosts.accept_new_host_keys;
    if args.redis.is_some() && !spec.nodes.is_empty() {
        anyhow::bail!("--redis and nodes (--node): either a Redis already running or hosts to start it on, not both");
    }
    spec.validate()
        .map_err(|e| anyhow::anyhow!("workload: {e}"))?;
    let resolve = |spec: &WorkloadSpec| {
        lockaudit::nemesis::Schedule::resolve(
            spec.nemesis.as_deref().unwrap_or("none"),
            &lockaudit::nemesis::schedule::Workload {
                ttl_ms: spec.ttl.0,
                topology: spec.topology(),
            },
        )
    };
    let mut schedule = resolve(&spec)?;
    // A failover needs replicas: unless told where the lock lives, a single-server
    // algorithm runs on a primary with two, as in the audit.
    let chosen = spec.topology.is_some() || args.redis.is_some();
    if let Some(topology) = schedule.topology_for(spec.topology()).filter(|_| !chosen) {
        eprintln!(
            "lockaudit: the nemesis {} fails the primary over: the lock runs on a primary with two replicas (--topology replicated)",
            spec.nemesis.as_deref().unwrap_or("none")
        );
        spec.topology = Some(topology);
        schedule = resolve(&spec)?;
    }

    if args.redis.is_some() && lockaudit::locks::on_postgres(&spec.algorithm) {
        anyhow::bail!(
            "--redis: {} runs on the PostgreSQL server lockaudit starts itself, not on a Redis",
            spec.algorithm
        );
    }
    if args.redis.is_some() && spec.topology == Some(lockaudit::cluster::Topology::Cluster) {
        anyhow::bail!(
            "--redis with topology cluster: lockaudit audits only a Redis Cluster it starts itself (drop --redis)"
        );
    }
    let servers = match &args.redis {
        Some(url) => Servers::Existing(existing_endpoints(url).map_err(|e| anyhow::anyhow!(e))?),
        None => Servers::Owned {
            redis_server: args.redis_server,
            redis_sentinel: args.redis_sentinel,
        },
    };
    let dir = args
        .out
        .unwrap_or_else(|| new_run_dir(std::path::Path::new("results"), &spec));
    println!("run: {}", dir.display());
    lockaudit::cluster::install_cleanup_handlers();
    let runtime = tokio::runtime::Runtime::new()?;
    let options = RunOptions {
        stop_when: if args.stop_on_anomaly {
            StopWhen::FirstAnomaly
        } else {
            StopWhen::Never
        },
        online_check: !args.no_online_check,
        check: args.bounds.check_options(),
    };
    match runtime.block_on(run(&spec, &schedule, &dir, servers, &options)) {
        Ok(outcome) => {
            if let Some(what) = &outcome.proven {
                println!(
                    "stopped early: {what} was proven while the run went on (--stop-on-anomaly)"
                );
            }
            let history = outcome.dir.join("history.jsonl");
            let (planned, acting) = (outcome.planned, outcome.acting);
            let nemesis = spec.nemesis.as_deref().unwrap_or("none");
            // A run that stopped early never reached the faults planned after that.
            let healed = if outcome.proven.is_some() {
                "those injected before the run stopped all healed (the history shows which)"
            } else {
                "all healed before the end"
            };
            if planned > 0 && acting == planned {
                println!("nemesis: {nemesis}, {planned} faults planned (nemesis.json), {healed}");
            } else if planned > 0 && acting > 0 {
                println!(
                    "nemesis: {nemesis}, {planned} faults planned (nemesis.json), {} of them NOT APPLICABLE to this run and left out ({}); of the other {acting}, {healed}",
                    planned - acting,
                    outcome.not_applicable.join("; ")
                );
            } else if !outcome.not_applicable.is_empty() {
                println!(
                    "nemesis: {nemesis}: NOT APPLICABLE to this run ({})",
                    outcome.not_applicable.join("; ")
                );
            }
            let c = outcome.counts;
            println!(
                "recorded: {} acquisitions, {} failed attempts, {} indeterminate operations",
                c.acquisitions, c.failed_acquires, c.indeterminate
            );
            print!(
                "{}",
                render_summary(&outcome.report, &history.display().to_string())
            );
            println!("report: {}", outcome.dir.join("report.json").display());
            // The pictures are a courtesy: failing to draw them never changes the verdict.
            match lockaudit::plot::plot(&outcome.dir) {
                Ok(summary) => println!("plots: {}", summary.index.display()),
                Err(error) => {
                    eprintln!("lockaudit: warning: the plots could not be drawn: {error}")
                }
            }
            if let Some(why) = &outcome.stopped {
                eprintln!("lockaudit: the run was stopped before its time limit: {why}");
                return Ok(EXIT_CANNOT_RUN);
            }
            Ok(outcome.report.exit_code() as u8)
        }
        Err(lockaudit::run::RunError::Schedule(why)) => {
            anyhow::bail!("{}: {why}", spec.nemesis.as_deref().unwrap_or("none"))
        }
        Err(lockaudit::run::RunError::Workload(why)) => {
            anyhow::bail!("{}: {why}", args_workload_name(&spec))
        }
        Err(error) => {
            eprintln!("lockaudit: the run could not be carried out: {error}");
            Ok(EXIT_CANNOT_RUN)
        }
    }
}

/// Runs the matrix, prints it, writes audit.md / audit.json / audit.xml.
fn run_audit(args: AuditArgs) -> anyhow::Result<u8> {
    use lockaudit::audit::runner::{audit, reach_markdown, AuditOptions};

    let out = args.out.unwrap_or_else(|| {
        let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
            .to_string()
            .replace(':', "");
        PathBuf::from("results").join(format!("audit-{stamp}"))
    });
    let mut options = AuditOptions::new(out.clone());
    if !args.algorithms.is_empty() {
        options.algorithms = args.algorithms;
    }
    if !args.nemeses.is_empty() {
        options.nemeses = args.nemeses;
    }
    if !args.cells.is_empty() {
        let mut cells = Vec::new();
        for cell in &args.cells {
            let (a, n) = cell
                .rsplit_once(':')
                .ok_or_else(|| anyhow::anyhow!("--cells: \"{cell}\" is not algorithm:nemesis"))?;
            cells.push((a.to_string(), n.to_string()));
        }
        options.cells = Some(cells);
    }
    options.time_limit = args.time_limit;
    options.early_stop = !args.no_early_stop;
    options.check = args.bounds.check_options();
    options.valid_time_limit = args.valid_time_limit.unwrap_or(Millis(
        args.time_limit
            .0
            .min(lockaudit::audit::runner::DEFAULT_VALID_CELL_MS),
    ));
    options.seed = args.seed;
    options.fenced = args.fenced;
    options.repeat = args.repeat;
    options.quick = args.quick;
    options.workloads = args.workloads;
    options.redis_server = args.redis_server;
    options.redis_sentinel = args.redis_sentinel;
    let hosts = args.hosts.resolve()?;
    (options.nodes, options.ssh_key, options.remote_dir) =
        (hosts.nodes, hosts.ssh_key, hosts.remote_dir);
    options.accept_new_host_keys = hosts.accept_new_host_keys;
    options.validate().map_err(|e| anyhow::anyhow!(e))?;
    println!("audit: {}", out.display());
    lockaudit::cluster::install_cleanup_handlers();
    let runtime = tokio::runtime::Runtime::new()?;
    let result = runtime.block_on(audit(&options, |done, total, cell| {
        let found = if cell.status == lockaudit::audit::Status::NotApplicable {
            "not run".to_string()
        } else if cell.found.is_empty() {
            "valid".to_string()
        } else {
            cell.found
                .iter()
                .map(|(k, n)| format!("{k} ×{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let verdict = match cell.status {
            lockaudit::audit::Status::Pass => "as expected".to_string(),
            lockaudit::audit::Status::NotApplicable => {
                format!("n/a: {}", cell.why.as_deref().unwrap_or("not applicable"))
            }
            _ => format!("DIFFERS: {}", cell.why.as_deref().unwrap_or("")),
        };
        println!(
            "[{done:>3}/{total}] {} × {}: {found} ({verdict}) {:.1}s",
            cell.algorithm, cell.nemesis, cell.seconds
        );
    }));
    let audit = match result {
        Ok(audit) => audit,
        Err(e) => anyhow::bail!(e),
    };
    if options.repeat > 1 {
        println!(
            "\nround 1 of {} (the matrices of the others: round-1/, round-2/, ...):",
            options.repeat
        );
    }
    println!("\n{}", audit.matrix.to_table());
    if options.repeat > 1 {
        print!("{}", audit.rounds_text());
    }
    let mut files = audit
        .matrix
        .write_all(&out)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", out.display()))?;
    let passed = audit.rounds.iter().all(|m| m.passed());
    if options.repeat > 1 {
        let text = reach_markdown(&audit.reach, options.time_limit);
        println!("{text}");
        let path = out.join("reach.md");
        lockaudit::outfile::write(&path, text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        files.push(path);
        for (i, round) in audit.rounds.iter().enumerate().skip(1) {
            let dir = out.join(format!("round-{i}"));
            files.extend(
                round
                    .write_all(&dir)
                    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", dir.display()))?,
            );
        }
    }
    for f in &files {
        println!("{}", f.display());
    }
    Ok(if passed { 0 } else { 1 })
}

fn run(command: Command) -> anyhow::Result<u8> {
    match command {
        Command::Run(args) => run_workload(args),
        Command::Audit(args) => run_audit(args),
        Command::Worker { run } => {
            // One thread per worker: the machine's cores are shared by several workers and
            // the servers, and a client spends its time waiting on Redis anyway.
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let result = runtime.block_on(lockaudit::workload::worker::run_worker_in(run));
            // The blocking read of stdin never ends on its own: do not wait for it.
            runtime.shutdown_background();
            result?;
            Ok(0)
        }
        Command::AdapterTest {
            redis_server,
            redis_sentinel,
            argv,
        } => {
            use lockaudit::locks::adapter_test::Setup;
            let mut setup = Setup {
                redis_server,
                redis_sentinel,
                ..Setup::default()
            };
            let argv = match argv.as_slice() {
                [file] if file.ends_with(".toml") => {
                    let path = PathBuf::from(file);
                    let spec = WorkloadSpec::from_file(&path)?;
                    let Some(adapter) = spec.adapter.clone() else {
                        anyhow::bail!(
                            "{file}: algorithm \"{}\" has no adapter: adapter-test needs a workload with algorithm = \"external\"",
                            spec.algorithm
                        );
                    };
                    setup.topology = spec.topology();
                    setup.masters = spec.masters;
                    setup.options = spec
                        .adapter_options_json()
                        .unwrap_or_else(|| serde_json::json!({}));
                    let topology = serde_json::to_value(setup.topology)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default();
                    // Only the independent topology has a number of masters to tell.
                    let masters = match setup.topology {
                        lockaudit::cluster::Topology::Independent => format!(
                            " ({} master{})",
                            setup.masters,
                            if setup.masters == 1 { "" } else { "s" }
                        ),
                        _ => String::new(),
                    };
                    println!(
                        "adapter-test: {} on the {topology} topology{masters}, options {}",
                        adapter.join(" "),
                        setup.options
                    );
                    adapter
                }
                _ => argv,
            };
            lockaudit::cluster::install_cleanup_handlers();
            // One thread: the adapters are forked from it, and die with it (PDEATHSIG).
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let checks = runtime.block_on(lockaudit::locks::adapter_test::run(&argv, &setup))?;
            for check in &checks {
                println!("{}", check.line());
            }
            let passed = lockaudit::locks::adapter_test::passed(&checks);
            println!(
                "{}",
                if passed {
                    "adapter-test: passed"
                } else {
                    "adapter-test: FAILED"
                }
            );
            Ok(if passed { 0 } else { 1 })
        }
        Command::Check {
            history: path,
            out,
            json,
            bounds,
            limit,
            threads,
        } => {
            let started = std::time::Instant::now();
            let history = history::read_file_with_threads(&path, threads.into())?;
            tracing::info!(
                "read {} events in {:.3}s",
                history.ops.len(),
                started.elapsed().as_secs_f64()
            );
            let started = std::time::Instant::now();
            let options = CheckOptions {
                anomaly_limit: limit,
                threads: threads.into(),
                ..bounds.check_options()
            };
            let report = checker::check(&history, &options);
            tracing::info!("checked in {:.3}s", started.elapsed().as_secs_f64());
            // Written once for both the file and `--json`: with a million keys the report
            // runs to hundreds of megabytes.
            let report_json = match out.is_some() || json {
                true => Some(serde_json::to_string_pretty(&report)? + "\n"),
                false => None,
            };
            if let (Some(dir), Some(text)) = (&out, &report_json) {
                std::fs::create_dir_all(dir)
                    .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
                let file = dir.join("report.json");
                lockaudit::outfile::write(&file, text)
                    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", file.display()))?;
            }
            let text = match report_json {
                Some(text) if json => text,
                _ => {
                    let mut text = render_summary(&report, &path.display().to_string());
                    if let Some(dir) = &out {
                        text += &format!("report: {}\n", dir.join("report.json").display());
                    }
                    text
                }
            };
            print_out(&text)?;
            if let Some(peak) = lockaudit::sys::peak_resident_kib() {
                tracing::info!("peak resident memory {peak} KiB");
            }
            let code = report.exit_code() as u8;
            // The command ends here, and the system takes the memory back at once: freeing
            // a million keys' names and figures one by one would cost as much as a check.
            std::mem::forget(report);
            std::mem::forget(history);
            Ok(code)
        }
        Command::Plot { target } => {
            // Ctrl-C: the files under way are removed (each is written under a temporary
            // name), and the command exits 130 (143 for SIGTERM).
            lockaudit::cluster::install_cleanup_handlers();
            let summary = lockaudit::plot::plot(&target)?;
            for note in &summary.notes {
                eprintln!("lockaudit: {note}");
            }
            for file in &summary.files {
                println!("{}", file.display());
            }
            Ok(0)
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
            let written = lockaudit::outfile::write_via(
                &out,
                |tmp| {
                    let file = std::fs::File::create(tmp)?;
                    lockaudit::synth::generate_to(&config, std::io::BufWriter::new(file))
                },
                |e| e,
            )
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", out.display()))?;
            eprintln!("wrote {written} events to {}", out.display());
            Ok(0)
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
    fn the_algorithm_and_nemesis_helps_name_every_choice() {
        let command = Cli::command();
        let help = |sub: &str, arg: &str| {
            let sub = command.find_subcommand(sub).expect(sub);
            let arg = sub.get_arguments().find(|a| a.get_id() == arg).expect(arg);
            arg.get_help().expect("a help").to_string()
        };
        for (sub, arg, names) in [
            ("run", "algorithm", &lockaudit::locks::ALGORITHMS[..]),
            ("audit", "algorithms", &lockaudit::locks::ALGORITHMS[..]),
            ("run", "nemesis", &lockaudit::nemesis::PRESETS[..]),
            ("audit", "nemeses", &lockaudit::nemesis::PRESETS[..]),
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
