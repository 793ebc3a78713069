//! `lockaudit run`: the plan from the flags (`run::plan`), the run, what it found.

use crate::note;
use crate::report::render_summary;
use crate::run::plan::{Overrides, Purpose, Request, RunPlan, WorkloadSource};
use crate::run::{RunError, RunOutcome, StopWhen};

use super::{print_out, RunArgs, EXIT_CANNOT_RUN};

/// The plan `run`'s flags ask for.
pub fn plan(args: RunArgs) -> anyhow::Result<RunPlan> {
    // Without a file, the algorithm's own workload, built in (workloads/<algorithm>.toml).
    let source = match args.workload {
        Some(path) => WorkloadSource::File(path),
        None => WorkloadSource::Builtin(args.algorithm.unwrap_or(crate::locks::DEFAULT_ALGORITHM)),
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
    request.options.json = args.json;
    // The run's verdict is the command's exit.
    request.options.owns_exit = true;
    Ok(RunPlan::build(&source, request)?)
}

/// Runs the workload the flags describe. Progress and notices go to stderr; the verdict
/// to stdout, as text (the run folder first) or, with `--json`, as report.json's text alone
/// (the lines that name the folder and its files then go to stderr).
pub fn command(args: RunArgs) -> anyhow::Result<u8> {
    let plan = plan(args)?;
    let json = plan.options.json;
    for note in &plan.notes {
        note!("lockaudit: {note}");
    }
    // The one thing needed to get this run's faults and timings again; and the folder, to
    // look into while the run goes on.
    let drawn = if plan.seed_drawn {
        "drawn for this run; "
    } else {
        ""
    };
    note!(
        "seed: {} ({drawn}rerun with --seed {}, or lockaudit rerun {})",
        plan.spec.seed,
        plan.spec.seed,
        plan.dir.display()
    );
    crate::cluster::leftovers::clean_and_keep_note_beside(&plan.dir);
    crate::cluster::install_cleanup_handlers();
    let runtime = tokio::runtime::Runtime::new()?;
    let result = runtime.block_on(crate::run::run(&plan));
    crate::cluster::leftovers::forget();
    match result {
        Ok(outcome) => {
            let (text, files) = verdict(&plan, &outcome);
            if json {
                crate::streams::err(&format!("run: {}\n{files}", outcome.dir.display()));
                print_out(&outcome.report_json)?;
            } else {
                print_out(&(text + &files))?;
            }
            // The pictures are a courtesy: failing to draw them never changes the verdict.
            match crate::plot::plot(&outcome.dir) {
                Ok(summary) => {
                    let line = format!("plots: {}\n", summary.index.display());
                    match json {
                        true => crate::streams::err(&line),
                        false => print_out(&line)?,
                    }
                }
                Err(error) => {
                    note!("lockaudit: warning: the plots could not be drawn: {error}")
                }
            }
            // The results folder's index lists this run too (a failure is a warning).
            if let Some(results) = outcome.dir.parent() {
                crate::index::update_after(results);
            }
            if let Some(why) = &outcome.stopped {
                note!("lockaudit: the run was stopped before its time limit: {why}");
            }
            // A fault left in force: the run was not the one planned.
            for failure in &outcome.unhealed {
                note!("lockaudit: the run could not be carried out: {failure}");
            }
            if let Some(why) = &outcome.untested {
                note!("lockaudit: UNTESTED: {why}");
            }
            Ok(outcome.exit_code())
        }
        Err(RunError::Schedule(why)) => {
            anyhow::bail!("{}: {why}", plan.nemesis_name())
        }
        Err(RunError::Workload(why)) => {
            anyhow::bail!("workload ({}): {why}", plan.spec.algorithm)
        }
        Err(error) => {
            note!("lockaudit: the run could not be carried out: {error}");
            Ok(EXIT_CANNOT_RUN)
        }
    }
}

/// The verdict as text: the run folder, how it stopped, what the nemesis did, what was
/// recorded, the summary; then, apart, the line naming report.json (with `--json`, the
/// only part of the text that is still printed, on stderr).
fn verdict(plan: &RunPlan, outcome: &RunOutcome) -> (String, String) {
    let mut text = format!("run: {}\n", outcome.dir.display());
    if let Some(what) = &outcome.proven {
        text += &format!(
            "stopped early: {what} was proven while the run went on (--stop-on-anomaly)\n"
        );
    }
    let history = outcome.dir.join("history.jsonl");
    let (planned, acting) = (outcome.planned, outcome.acting);
    let nemesis = plan.nemesis_name();
    // A run that stopped early never reached the faults planned after that.
    let unhealed;
    let healed = if !outcome.unhealed.is_empty() {
        unhealed = format!(
            "{} heals FAILED (below; those faults stayed in force)",
            outcome.unhealed.len()
        );
        &unhealed
    } else if outcome.proven.is_some() {
        "those injected before the run stopped all healed (the history shows which)"
    } else {
        "all healed before the end"
    };
    if planned > 0 && acting == planned {
        text += &format!("nemesis: {nemesis}, {planned} faults planned (nemesis.json), {healed}\n");
    } else if planned > 0 && acting > 0 {
        text += &format!(
            "nemesis: {nemesis}, {planned} faults planned (nemesis.json), {} of them NOT APPLICABLE to this run and left out ({}); of the other {acting}, {healed}\n",
            planned - acting,
            outcome.not_applicable.join("; ")
        );
    } else if !outcome.not_applicable.is_empty() {
        text += &format!(
            "nemesis: {nemesis}: NOT APPLICABLE to this run ({})\n",
            outcome.not_applicable.join("; ")
        );
    }
    let c = outcome.counts;
    let (done, what, failed) = c.done(plan.spec.algorithm.optimistic);
    text += &format!(
        "recorded: {done} {what}, {failed} failed attempts, {} indeterminate operations\n",
        c.indeterminate
    );
    text += &render_summary(&outcome.report, &history.display().to_string());
    if let Some(why) = &outcome.untested {
        text += &format!("UNTESTED: {why}\n");
    }
    let files = format!("report: {}\n", outcome.dir.join("report.json").display());
    (text, files)
}
