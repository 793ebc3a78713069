//! The `lockaudit` command line: thin. The flags are parsed in `lockaudit::cli`; each
//! subcommand is one call into the library, and its result is the exit code.

use std::process::ExitCode;

use clap::Parser;

use lockaudit::cli::{self, Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli::init_logging(cli.verbose);
    cli::exit_code(match cli.command {
        Command::Run(args) => cli::run::command(args),
        Command::Rerun(args) => cli::rerun::command(args),
        Command::Audit(args) => cli::audit::command(args),
        Command::Worker(args) => cli::tools::worker(args),
        Command::AdapterTest(args) => cli::tools::adapter_test(args),
        Command::Check(args) => cli::check::command(args),
        Command::Plot(args) => cli::tools::plot(args),
        Command::Shrink(args) => cli::shrink::command(args),
        Command::Index(args) => cli::tools::index(args),
        Command::Synth(args) => cli::tools::synth(args),
        Command::Completions(args) => cli::tools::completions(args),
        Command::Man => cli::tools::man(),
    })
}
