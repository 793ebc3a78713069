//! The command line's own help: exit codes and examples in `--help`, shell completions and
//! the manual page, all from the one clap definition that parses the flags.

use std::process::Command;

/// stdout of `lockaudit <args>`, which must exit 0.
fn lockaudit(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .args(args)
        .output()
        .expect("lockaudit runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(
        output.status.code(),
        Some(0),
        "lockaudit {args:?}:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

const SUBCOMMANDS: [&str; 8] = [
    "run", "rerun", "audit", "check", "plot", "shrink", "index", "synth",
];

#[test]
fn help_ends_with_the_exit_codes_and_examples() {
    let top = lockaudit(&["--help"]);
    assert!(
        top.contains("Exit codes:") && top.contains("2  bad input"),
        "{top}"
    );
    for sub in ["run", "rerun", "audit", "check"] {
        let help = lockaudit(&[sub, "--help"]);
        assert!(help.contains("Examples:\n  lockaudit "), "{sub}:\n{help}");
        assert!(help.contains("1  anomalies found"), "{sub}:\n{help}");
    }
    // shrink's codes are its own: it writes a history, it gives no verdict.
    let shrink = lockaudit(&["shrink", "--help"]);
    assert!(shrink.contains("0  the shrunk history"), "{shrink}");
}

#[test]
fn completions_name_every_subcommand() {
    for shell in ["bash", "zsh", "fish"] {
        let script = lockaudit(&["completions", shell]);
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell}: no {sub}:\n{script}");
        }
        // The flags too, read from the same definition: audit's newest.
        assert!(script.contains("jobs"), "{shell}:\n{script}");
    }
}

#[test]
fn the_manual_page_is_roff_naming_every_subcommand() {
    let page = lockaudit(&["man"]);
    assert!(page.contains(".TH lockaudit"), "{page}");
    for sub in SUBCOMMANDS {
        assert!(page.contains(sub), "no {sub}:\n{page}");
    }
}
