//! The other subcommands: `worker` (a run's worker process), `adapter-test`, `plot`,
//! `synth`, `index`, `completions` and `man`.

use std::path::PathBuf;

use crate::workload::WorkloadSpec;

use super::{
    print_out, AdapterTestArgs, CompletionsArgs, IndexArgs, PlotArgs, SynthArgs, WorkerArgs,
};

/// `lockaudit worker`: one worker process of a run, until its stdin closes.
pub fn worker(args: WorkerArgs) -> anyhow::Result<u8> {
    // One thread per worker: the machine's cores are shared by several workers and
    // the servers, and a client spends its time waiting on Redis anyway.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(crate::workload::worker::run_worker_in(args.run));
    // The blocking read of stdin never ends on its own: do not wait for it.
    runtime.shutdown_background();
    result?;
    Ok(0)
}

/// `lockaudit adapter-test`: the checklist of an external lock client; 0 when it passes.
pub fn adapter_test(args: AdapterTestArgs) -> anyhow::Result<u8> {
    let AdapterTestArgs {
        redis_server,
        redis_sentinel,
        argv,
    } = args;
    use crate::adapter_test::Setup;
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
            setup.ttl_ms = Some(spec.ttl.0);
            setup.options = spec
                .adapter_options_json()
                .unwrap_or_else(|| serde_json::json!({}));
            let topology = serde_json::to_value(setup.topology)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            // Only the independent topology has a number of masters to tell.
            let masters = match setup.topology {
                crate::cluster::Topology::Independent => format!(
                    " ({} master{})",
                    setup.masters,
                    if setup.masters == 1 { "" } else { "s" }
                ),
                _ => String::new(),
            };
            print_out(&format!(
                "adapter-test: {} on the {topology} topology{masters}, options {}\n",
                adapter.join(" "),
                setup.options
            ))?;
            adapter
        }
        _ => argv,
    };
    crate::cluster::install_cleanup_handlers();
    // One thread: the adapters are forked from it, and die with it (PDEATHSIG).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let checks = runtime.block_on(crate::adapter_test::run(&argv, &setup))?;
    let passed = crate::adapter_test::passed(&checks);
    let mut text: String = checks.iter().map(|c| c.line() + "\n").collect();
    text += if passed {
        "adapter-test: passed\n"
    } else {
        "adapter-test: FAILED\n"
    };
    print_out(&text)?;
    Ok(if passed { 0 } else { 1 })
}

/// `lockaudit plot`: a run's pictures and page.
pub fn plot(args: PlotArgs) -> anyhow::Result<u8> {
    let target = args.target;
    // Ctrl-C: the files under way are removed (each is written under a temporary
    // name), and the command exits 130 (143 for SIGTERM).
    crate::cluster::install_cleanup_handlers();
    let summary = crate::plot::plot(&target)?;
    for note in &summary.notes {
        crate::note!("lockaudit: {note}");
    }
    let files: String = summary
        .files
        .iter()
        .map(|f| format!("{}\n", f.display()))
        .collect();
    print_out(&files)?;
    Ok(0)
}

/// `lockaudit index`: the index of a folder of runs and audits.
pub fn index(args: IndexArgs) -> anyhow::Result<u8> {
    if !args.dir.is_dir() {
        anyhow::bail!("{}: no such folder", args.dir.display());
    }
    let paths = crate::index::write(&args.dir)?;
    let text: String = paths.iter().map(|p| format!("{}\n", p.display())).collect();
    print_out(&text)?;
    Ok(0)
}

/// `lockaudit synth`: a synthetic history of a correct, fenced lock.
pub fn synth(args: SynthArgs) -> anyhow::Result<u8> {
    let SynthArgs {
        out,
        events,
        keys,
        processes,
        seed,
    } = args;
    let config = crate::synth::SynthConfig {
        events,
        keys,
        processes,
        seed,
        fenced: true,
        ..crate::synth::SynthConfig::default()
    };
    let written = crate::outfile::write_via(
        &out,
        |tmp| {
            let file = std::fs::File::create(tmp)?;
            crate::synth::generate_to(&config, std::io::BufWriter::new(file))
        },
        |e| e,
    )
    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", out.display()))?;
    crate::note!("wrote {written} events to {}", out.display());
    Ok(0)
}

/// `lockaudit completions SHELL`: the shell's completion script, from the same clap
/// definition that parses the flags (so it cannot fall behind them).
pub fn completions(args: CompletionsArgs) -> anyhow::Result<u8> {
    use clap::CommandFactory;
    let mut command = super::Cli::command();
    // Written whole first: clap_complete panics on a write that fails (`| head`).
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "lockaudit", &mut script);
    print_out(&String::from_utf8_lossy(&script))?;
    Ok(0)
}

/// `lockaudit man`: the manual page, roff on stdout, from the clap definition.
pub fn man() -> anyhow::Result<u8> {
    use clap::CommandFactory;
    let mut page = Vec::new();
    clap_mangen::Man::new(super::Cli::command()).render(&mut page)?;
    print_out(&String::from_utf8_lossy(&page))?;
    Ok(0)
}
