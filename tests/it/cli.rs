//! The command line's own help: exit codes and examples in `--help`, shell completions and
//! the manual page, all from the one clap definition that parses the flags; and the
//! nearest name for a misspelt one, wherever a name is read.

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

/// `lockaudit <args>` in `dir`, which must exit 2 (bad input) before starting anything:
/// its stderr.
fn refused(dir: &std::path::Path, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("lockaudit runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(2),
        "lockaudit {args:?}:\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        output.stdout.is_empty(),
        "lockaudit {args:?} printed a verdict"
    );
    assert!(
        !dir.join("results").exists(),
        "lockaudit {args:?} made a folder"
    );
    stderr
}

#[test]
fn a_misspelt_name_on_the_command_line_gets_the_nearest_one() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    for (args, said) in [
        (
            &["run", "--algorithm", "set-nx-xp"][..],
            "unknown algorithm \"set-nx-xp\" (did you mean \"set-nx-px\"?)",
        ),
        (
            &["run", "--topology", "singel"],
            "unknown topology \"singel\" (did you mean \"single\"?)",
        ),
        (
            &["run", "--nemesis", "pause-client"],
            "unknown nemesis preset \"pause-client\" (did you mean \"pause-clients\"?)",
        ),
        (
            &["audit", "--algorithms", "set-nx-px,redlok"],
            "unknown algorithm \"redlok\" (did you mean \"redlock\"?)",
        ),
        (
            &["audit", "--nemeses", "none,kill-redsi"],
            "unknown nemesis preset \"kill-redsi\" (did you mean \"kill-servers\"?)",
        ),
        (
            &["audit", "--cells", "set-nx-px:pause-client"],
            "--cells: unknown nemesis preset \"pause-client\" (did you mean \"pause-clients\"?)",
        ),
    ] {
        let stderr = refused(dir, args);
        assert!(stderr.contains(said), "{args:?}:\n{stderr}");
    }
    // Nothing near: the names there are, so that one can be picked.
    let stderr = refused(dir, &["run", "--algorithm", "byzantine-paxos"]);
    assert!(
        stderr.contains("unknown algorithm \"byzantine-paxos\" (known: setnx-del, "),
        "{stderr}"
    );
}

#[test]
fn a_misspelt_name_in_a_workload_or_schedule_file_gets_the_nearest_one_and_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let file = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).unwrap();
        name.to_string()
    };
    for (name, text, said) in [
        (
            "field.toml",
            "algorithm = \"set-nx-px\"\nclinets = 4\n",
            "field.toml:2: unknown field `clinets` (did you mean \"clients\"?)",
        ),
        (
            "algorithm.toml",
            "clients = 4\nalgorithm = \"set-nx-xp\"\n",
            "algorithm.toml:2: field `algorithm`: unknown algorithm \"set-nx-xp\" (did you mean \"set-nx-px\"?)",
        ),
        (
            "topology.toml",
            "algorithm = \"set-nx-px\"\ntopology = \"replicatd\"\n",
            "topology.toml:2: field `topology`: unknown value `replicatd` (did you mean \"replicated\"?)",
        ),
        (
            "nemesis.toml",
            "algorithm = \"set-nx-px\"\n\nnemesis = \"kill-client\"\n",
            "nemesis.toml:3: field `nemesis`: unknown nemesis preset \"kill-client\" (did you mean \"kill-clients\"?)",
        ),
    ] {
        let path = file(name, text);
        let stderr = refused(dir, &["run", &path]);
        assert!(stderr.contains(said), "{name}:\n{stderr}");
    }
    let schedule = file(
        "late.toml",
        "[[fault]]\nat = \"1s\"\nknd = \"kill-client\"\n",
    );
    let stderr = refused(dir, &["run", "--nemesis", &schedule]);
    assert!(
        stderr.contains("late.toml:3: unknown field `knd` (did you mean \"kind\"?)"),
        "{stderr}"
    );
    // rerun reads the run folder's workload.toml the same way.
    std::fs::create_dir(dir.join("old-run")).unwrap();
    std::fs::write(
        dir.join("old-run/workload.toml"),
        "algorithm = \"set-nx-px\"\nseed = 1\ntime_limt = \"2s\"\n",
    )
    .unwrap();
    let stderr = refused(dir, &["rerun", "old-run"]);
    assert!(
        stderr
            .contains("workload.toml:3: unknown field `time_limt` (did you mean \"time_limit\"?)"),
        "{stderr}"
    );
}

#[test]
fn completions_and_the_manual_page_end_quietly_when_their_reader_left() {
    for args in [&["completions", "bash"][..], &["man"]] {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let output = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
            .args(args)
            .stdout(writer)
            .output()
            .expect("lockaudit runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
