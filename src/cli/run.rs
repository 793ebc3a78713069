//! `lockaudit run`: the plan from the flags (`run::plan`), the run, what it found.

use crate::report::render_summary;
use crate::run::plan::{Overrides, Purpose, Request, RunPlan, WorkloadSource};
use crate::run::{RunError, StopWhen};
use crate::workload::WorkloadSpec;

use super::{RunArgs, EXIT_CANNOT_RUN};

/// The plan `run`'s flags ask for.
pub fn plan(args: RunArgs) -> anyhow::Result<RunPlan> {
    // Without a file, the algorithm's own workload, built in (workloads/<algorithm>.toml).
    let source = match args.workload {
        Some(path) => WorkloadSource::File(path),
        None => WorkloadSource::Builtin(
            args.algorithm
                .clone()
                .unwrap_or_else(|| WorkloadSpec::default().algorithm),
        ),
    };
    let mut request = Request::new(Purpose::Run);
    request.overrides = Overrides {
        algorithm: args.algorithm,
        clients: args.clients,
        workers: args.workers,
        keys: args.keys,
        ttl: args.ttl,
        hold: args.hold,
        time_limit: args.time_limit,
        seed: args.seed,
        nemesis: args.nemesis,
        topology: args.topology,
        fenced: args.fenced,
        watchdog: args.watchdog,
    };
    request.hosts = args.hosts.hosts();
    request.redis = args.redis;
    request.redis_server = args.redis_server;
    request.redis_sentinel = args.redis_sentinel;
    request.out = args.out;
    request.options.stop_when = if args.stop_on_anomaly {
        StopWhen::FirstAnomaly
    } else {
        StopWhen::Never
    };
    request.options.online_check = !args.no_online_check;
    request.options.check = args.bounds.check_options();
    RunPlan::build(&source, request)
}

/// Runs the workload the flags describe, prints the run folder and the verdict.
pub fn command(args: RunArgs) -> anyhow::Result<u8> {
    let plan = plan(args)?;
    for note in &plan.notes {
        eprintln!("lockaudit: {note}");
    }
    println!("run: {}", plan.dir.display());
    // The one thing needed to get this run's faults and timings again.
    let drawn = if plan.seed_drawn {
        "drawn for this run; "
    } else {
        ""
    };
    eprintln!(
        "seed: {} ({drawn}rerun with --seed {}, or lockaudit rerun {})",
        plan.spec.seed,
        plan.spec.seed,
        plan.dir.display()
    );
    crate::cluster::install_cleanup_handlers();
    let runtime = tokio::runtime::Runtime::new()?;
    match runtime.block_on(crate::run::run(&plan)) {
        Ok(outcome) => {
            if let Some(what) = &outcome.proven {
                println!(
                    "stopped early: {what} was proven while the run went on (--stop-on-anomaly)"
                );
            }
            let history = outcome.dir.join("history.jsonl");
            let (planned, acting) = (outcome.planned, outcome.acting);
            let nemesis = plan.nemesis_name();
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
            let (done, what, failed) = c.done(crate::locks::is_optimistic(&plan.spec.algorithm));
            println!(
                "recorded: {done} {what}, {failed} failed attempts, {} indeterminate operations",
                c.indeterminate
            );
            print!(
                "{}",
                render_summary(&outcome.report, &history.display().to_string())
            );
            println!("report: {}", outcome.dir.join("report.json").display());
            // The pictures are a courtesy: failing to draw them never changes the verdict.
            match crate::plot::plot(&outcome.dir) {
                Ok(summary) => println!("plots: {}", summary.index.display()),
                Err(error) => {
                    eprintln!("lockaudit: warning: the plots could not be drawn: {error}")
                }
            }
            // The results folder's index lists this run too (a failure is a warning).
            if let Some(results) = outcome.dir.parent() {
                crate::index::update_after(results);
            }
            if let Some(why) = &outcome.stopped {
                eprintln!("lockaudit: the run was stopped before its time limit: {why}");
                return Ok(EXIT_CANNOT_RUN);
            }
            Ok(outcome.report.exit_code() as u8)
        }
        Err(RunError::Schedule(why)) => {
            anyhow::bail!("{}: {why}", plan.nemesis_name())
        }
        Err(RunError::Workload(why)) => {
            anyhow::bail!("workload ({}): {why}", plan.spec.algorithm)
        }
        Err(error) => {
            eprintln!("lockaudit: the run could not be carried out: {error}");
            Ok(EXIT_CANNOT_RUN)
        }
    }
}
