//! The docs cannot drift from the binary: every `lockaudit` command in README.md and in the
//! book (docs/src/**/*.md) parses with the real clap definition, the repository files it
//! names exist and load, the cheap ones run and print what the page shows, and the command
//! line reference (docs/src/reference/cli.md) is the binary's own help.
//!
//! The rule for a page:
//! - Only fenced code blocks whose info string is `sh` or `console` are walked; any other
//!   block (`text`, `toml`, `json`, none) is text to read, not commands.
//! - In an `sh` block every line (`\` continues it) is shell; each part of it split at `&&`,
//!   `||`, `;` and `|`, cut at a `>` redirection and at a `#` comment, whose first word is
//!   `lockaudit` is a command. Other programs (`cargo`, `python3`, ...) are not checked.
//! - In a `console` block a line beginning `$ ` is a command (the same way), and the lines
//!   after it, up to the next `$ ` or the block's end, are what it prints on stdout.
//! - Every command must parse (`Cli::try_parse_from`; `--help` counts as parsed).
//! - A path argument under `examples/`, `history/`, `nemesis/` or `workloads/` without a
//!   placeholder (`<`, `$`, `*`) must exist; a workload named by `run`, `adapter-test` or
//!   `audit --algorithms`, and a schedule named by `--nemesis`, must load as those commands
//!   load them (strict: an unknown field is an error). Other paths are the reader's own
//!   files (a walk-through writes them).
//! - A `console` command `lockaudit check ...` runs for real from the repository's root, and
//!   its stdout must be exactly what the block shows.
//!
//! `LOCKAUDIT_BLESS=1 cargo test --test it docs::` rewrites docs/src/reference/cli.md from the
//! binary's help; without it, any difference fails.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::{CommandFactory, Parser};
use lockaudit::cli::Cli;
use lockaudit::nemesis::schedule::Schedule;
use lockaudit::workload::spec::WorkloadSpec;

/// The repository's root: every page's relative paths are read from there.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every page of the book.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).expect("docs/src is readable") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut pages = vec![root().join("README.md")];
    walk(&root().join("docs/src"), &mut pages);
    pages.sort();
    pages
}

/// One command found in a page.
#[derive(Debug)]
struct Walked {
    /// `page:line`, for messages.
    place: String,
    words: Vec<String>,
    /// What a `console` block shows it printing (None: an `sh` block).
    shown: Option<String>,
}

/// The `lockaudit` commands of one page's walked blocks.
fn commands(page: &Path) -> Vec<Walked> {
    let text = fs::read_to_string(page).expect("the page is readable");
    let name = page
        .strip_prefix(root())
        .unwrap_or(page)
        .display()
        .to_string();
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((_, line)) = lines.next() {
        let Some(info) = line.trim_start().strip_prefix("```") else {
            continue;
        };
        let info = info.trim().to_string();
        // The block's lines, with their 1-based line numbers.
        let mut block = Vec::new();
        for (n, line) in lines.by_ref() {
            if line.trim_start().starts_with("```") {
                break;
            }
            block.push((n + 1, line.to_string()));
        }
        match info.as_str() {
            "sh" => {
                for (n, line) in joined(&block) {
                    for words in lockaudit_parts(&line) {
                        out.push(Walked {
                            place: format!("{name}:{n}"),
                            words,
                            shown: None,
                        });
                    }
                }
            }
            "console" => {
                let mut i = 0;
                while i < block.len() {
                    let (n, line) = &block[i];
                    i += 1;
                    let Some(first) = line.strip_prefix("$ ") else {
                        continue;
                    };
                    let mut command = vec![(*n, first.to_string())];
                    while command.last().is_some_and(|(_, l)| l.ends_with('\\')) && i < block.len()
                    {
                        command.push(block[i].clone());
                        i += 1;
                    }
                    let mut shown = String::new();
                    while i < block.len() && !block[i].1.starts_with("$ ") {
                        shown.push_str(&block[i].1);
                        shown.push('\n');
                        i += 1;
                    }
                    for (n, line) in joined(&command) {
                        for words in lockaudit_parts(&line) {
                            out.push(Walked {
                                place: format!("{name}:{n}"),
                                words,
                                shown: Some(shown.clone()),
                            });
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The block's logical lines: a line ending in `\` goes on on the next.
fn joined(block: &[(usize, String)]) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open = false;
    for (n, line) in block {
        let (text, more) = match line.trim_end().strip_suffix('\\') {
            Some(text) => (text.to_string(), true),
            None => (line.clone(), false),
        };
        match out.last_mut() {
            Some(last) if open => {
                last.1.push(' ');
                last.1.push_str(text.trim());
            }
            _ => out.push((*n, text)),
        }
        open = more;
    }
    out
}

/// The words of each `lockaudit` command in one line of shell.
fn lockaudit_parts(line: &str) -> Vec<Vec<String>> {
    let Some(words) = shlex::split(line) else {
        // Quotes that do not close: shell no command of ours would be.
        return Vec::new();
    };
    let mut parts = vec![Vec::new()];
    for word in words {
        match word.as_str() {
            "&&" | "||" | ";" | "|" => parts.push(Vec::new()),
            _ if word.starts_with('#') => break,
            _ => parts.last_mut().expect("one part at least").push(word),
        }
    }
    parts
        .into_iter()
        .filter(|p| p.first().is_some_and(|w| w == "lockaudit"))
        .map(|p| {
            // A redirection ends the command's own words.
            p.into_iter()
                .take_while(|w| !w.starts_with('>') && !w.starts_with("2>"))
                .collect()
        })
        .collect()
}

fn every_command() -> Vec<Walked> {
    let all: Vec<Walked> = pages().iter().flat_map(|p| commands(p)).collect();
    assert!(
        all.len() > 30,
        "the walk found only {} commands: is the block rule still the pages' own?",
        all.len()
    );
    all
}

#[test]
fn every_command_in_the_docs_parses() {
    let mut bad = Vec::new();
    for walked in every_command() {
        if let Err(e) = Cli::try_parse_from(&walked.words) {
            use clap::error::ErrorKind;
            if !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                bad.push(format!(
                    "{}: {}\n{}",
                    walked.place,
                    walked.words.join(" "),
                    e
                ));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// A path the repository must hold: under one of its folders of inputs, no placeholder.
fn repository_path(word: &str) -> Option<&str> {
    let word = word.split_once('=').map_or(word, |(_, v)| v);
    let ours = ["examples/", "history/", "nemesis/", "workloads/"]
        .iter()
        .any(|dir| word.starts_with(dir));
    (ours && !word.contains(['<', '$', '*'])).then_some(word)
}

/// The workload and schedule files a command loads (repository paths only).
fn loaded_files(words: &[String]) -> (Vec<&str>, Vec<&str>) {
    let (mut workloads, mut schedules) = (Vec::new(), Vec::new());
    let sub = words.get(1).map(String::as_str);
    for (i, word) in words.iter().enumerate() {
        let before = i.checked_sub(1).map(|j| words[j].as_str());
        if let Some(path) = repository_path(word) {
            match before {
                Some("--nemesis") => schedules.push(path),
                Some("--algorithms") => {}
                _ if matches!(sub, Some("run" | "adapter-test"))
                    && path.ends_with(".toml")
                    && i == 2 =>
                {
                    workloads.push(path)
                }
                _ => {}
            }
        }
        if before == Some("--algorithms") {
            workloads.extend(
                word.split(',')
                    .filter(|a| a.ends_with(".toml"))
                    .filter_map(repository_path),
            );
        }
    }
    (workloads, schedules)
}

#[test]
fn every_file_a_command_names_exists_and_loads() {
    let mut bad = Vec::new();
    for walked in every_command() {
        for word in walked.words.iter().flat_map(|w| w.split(',')) {
            if let Some(path) = repository_path(word) {
                if !root().join(path).exists() {
                    bad.push(format!("{}: {path}: no such file", walked.place));
                }
            }
        }
        let (workloads, schedules) = loaded_files(&walked.words);
        for path in workloads {
            if let Err(e) = WorkloadSpec::from_file(&root().join(path)) {
                bad.push(format!("{}: {e}", walked.place));
            }
        }
        for path in schedules {
            if let Err(e) = Schedule::from_file(&root().join(path)) {
                bad.push(format!("{}: {e}", walked.place));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn every_check_shown_in_a_console_block_prints_what_it_shows() {
    let mut ran = 0;
    let mut bad = Vec::new();
    for walked in every_command() {
        let Some(shown) = &walked.shown else {
            continue;
        };
        if walked.words.get(1).map(String::as_str) != Some("check") {
            continue;
        }
        let output = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
            .args(&walked.words[1..])
            .current_dir(root())
            .output()
            .expect("lockaudit runs");
        ran += 1;
        let printed = String::from_utf8_lossy(&output.stdout);
        if printed != *shown {
            bad.push(format!(
                "{}: {}\n--- the page shows:\n{shown}--- the binary prints:\n{printed}",
                walked.place,
                walked.words.join(" ")
            ));
        }
    }
    assert!(ran > 0, "no `lockaudit check` in a console block was found");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The command line reference: each visible command's long help, as `--help` prints it.
fn cli_reference() -> String {
    let mut cli = Cli::command();
    cli.build();
    let mut out = String::from(
        "# The command line\n\n\
         Every subcommand's `--help`, as the binary prints it (`tests/it/docs.rs` checks that\n\
         this page is the binary's own help; `LOCKAUDIT_BLESS=1 cargo test --test it docs::`\n\
         rewrites it). What the subcommands are for: [Runs, reruns, the index and\n\
         checks](../guide/commands.md).\n",
    );
    let mut section = |title: &str, help: String| {
        out.push_str(&format!("\n## `{title}`\n\n```text\n"));
        out.push_str(help.trim_end());
        out.push_str("\n```\n");
    };
    section("lockaudit", cli.render_long_help().to_string());
    let subs: Vec<String> = cli
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .map(|s| s.get_name().to_string())
        .collect();
    for name in subs {
        let sub = cli.find_subcommand_mut(&name).expect("a listed subcommand");
        section(
            &format!("lockaudit {name}"),
            sub.render_long_help().to_string(),
        );
    }
    out
}

#[test]
fn the_command_line_reference_is_the_binarys_help() {
    let path = root().join("docs/src/reference/cli.md");
    let expected = cli_reference();
    if std::env::var_os("LOCKAUDIT_BLESS").is_some() {
        fs::write(&path, &expected).expect("cli.md is writable");
        return;
    }
    let page = fs::read_to_string(&path).expect("cli.md is readable");
    assert!(
        page == expected,
        "docs/src/reference/cli.md differs from the binary's help: run \
         `LOCKAUDIT_BLESS=1 cargo test --test it docs::` and commit the page"
    );
}

/// The walk itself: a flag the binary lacks, a missing file and a shown output that differs
/// are each caught, so the tests above cannot pass by finding nothing.
#[test]
fn the_walk_catches_a_planted_flag_file_and_output() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let page = dir.path().join("planted.md");
    fs::write(
        &page,
        "```sh\n\
         cargo build --release && lockaudit run --algorithm set-nx-px \\\n  --no-such-flag 3 # a comment\n\
         lockaudit check examples/no-such-history.jsonl > out.txt\n\
         ```\n\n\
         ```text\nlockaudit run --text-blocks-are-not-walked\n```\n\n\
         ```console\n$ lockaudit check history/empty.jsonl\nnot what it prints\n```\n",
    )
    .expect("the page is writable");
    let walked = commands(&page);
    let words: Vec<String> = walked.iter().map(|w| w.words.join(" ")).collect();
    assert_eq!(
        words,
        [
            "lockaudit run --algorithm set-nx-px --no-such-flag 3",
            "lockaudit check examples/no-such-history.jsonl",
            "lockaudit check history/empty.jsonl",
        ]
    );
    let parse = Cli::try_parse_from(&walked[0].words);
    assert!(
        parse.is_err_and(|e| e.to_string().contains("--no-such-flag")),
        "an unknown flag must fail to parse"
    );
    assert_eq!(
        repository_path(&walked[1].words[2]),
        Some("examples/no-such-history.jsonl")
    );
    assert!(!root().join("examples/no-such-history.jsonl").exists());
    assert_eq!(walked[2].shown.as_deref(), Some("not what it prints\n"));
    let run: Vec<String> = [
        "lockaudit",
        "run",
        "examples/lua/set-nx-px.toml",
        "--nemesis",
        "nemesis/gc-pause.toml",
    ]
    .map(String::from)
    .into();
    let (workloads, schedules) = loaded_files(&run);
    assert_eq!(
        (workloads, schedules),
        (
            vec!["examples/lua/set-nx-px.toml"],
            vec!["nemesis/gc-pause.toml"]
        )
    );
}
