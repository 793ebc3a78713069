//! `run.json`: what ran, so that a run folder says how to get it again. The command line
//! (passwords redacted), lockaudit's version and commit, the seed and whether it was drawn,
//! the topology, the schedule, the checker's options and each server's version; when it
//! began and ended. `workload.toml` beside it holds the workload as it ran (`lockaudit
//! rerun` replays the two), a schedule file is kept as `schedule.toml`.
//!
//! Written when the run starts, again once its servers said their versions, and at its
//! end: an interrupted run still says what it was.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::cluster::ServerVersion;

use super::{topology_name, RunOptions, RunPlan, Servers};

/// The file's name in a run folder.
pub const RUN_JSON: &str = "run.json";

/// A schedule file's copy in a run folder (its `nemesis` named a file, not a preset).
pub const SCHEDULE_COPY: &str = "schedule.toml";

/// lockaudit's version (Cargo's) and the git commit it was built from ("unknown" for a
/// build outside a repository; build.rs).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const COMMIT: &str = env!("LOCKAUDIT_COMMIT");

/// What `run.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// lockaudit's version, `0.1.0`.
    pub version: String,
    /// The git commit lockaudit was built from.
    pub commit: String,
    /// The command as given (`lockaudit run --algorithm ...`, or the audit's for a cell),
    /// every password replaced by `(redacted)`.
    pub command: Vec<String>,
    /// The folder it was given in: relative paths in `command` are relative to it.
    pub cwd: String,
    /// When the run began and ended, RFC 3339 (UTC); `ended` None: it never ended (killed).
    pub started: String,
    #[serde(default)]
    pub ended: Option<String>,
    /// Wall time from start to end, seconds.
    #[serde(default)]
    pub seconds: Option<f64>,
    /// Where that wall time went (a run that ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<Phases>,
    pub algorithm: String,
    /// A preset's name or the schedule file as named (kept as `schedule.toml`).
    pub nemesis: String,
    /// Whether `nemesis` names a file, copied into the folder as [`SCHEDULE_COPY`].
    #[serde(default)]
    pub schedule_file: bool,
    pub topology: String,
    pub seed: u64,
    /// The seed was drawn for this run (no `--seed`, none in the workload).
    #[serde(default)]
    pub seed_drawn: bool,
    /// false: `--redis`, servers lockaudit did not start (a rerun cannot start them).
    pub servers_started: bool,
    /// Each server and its version, once they serve.
    #[serde(default)]
    pub servers: Vec<ServerVersion>,
    /// How the run was watched and the checker's bounds: a rerun checks as this run did.
    pub options: RunOptions,
}

impl RunRecord {
    /// The record of `plan` as it starts now, named by this process's command line.
    pub fn of(plan: &RunPlan) -> RunRecord {
        let spec = &plan.spec;
        let nemesis = plan.nemesis_name().to_string();
        RunRecord {
            version: VERSION.to_string(),
            commit: COMMIT.to_string(),
            command: redact_argv(std::env::args()),
            cwd: std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
            started: now(),
            ended: None,
            seconds: None,
            phases: None,
            algorithm: spec.algorithm.clone(),
            schedule_file: names_a_file(&nemesis),
            nemesis,
            topology: topology_name(match &plan.servers {
                Servers::Existing(endpoints) => endpoints.topology,
                Servers::Owned { .. } => spec.topology(),
            }),
            seed: spec.seed,
            seed_drawn: plan.seed_drawn,
            servers_started: matches!(plan.servers, Servers::Owned { .. }),
            servers: Vec::new(),
            options: plan.options.clone(),
        }
    }

    /// Writes it into the run folder `dir`, whole.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)? + "\n";
        crate::outfile::write(&dir.join(RUN_JSON), text)
    }

    /// Reads a run folder's run.json; the error names the file.
    pub fn read(dir: &Path) -> Result<RunRecord, String> {
        let path = dir.join(RUN_JSON);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a run record: {e}", path.display()))
    }

    /// Marks the run ended now, `seconds` after it began, its time spent as `phases`.
    pub fn end(&mut self, seconds: f64, phases: Phases) {
        self.ended = Some(now());
        self.seconds = Some(seconds);
        self.phases = Some(phases);
    }
}

/// Where a run's wall time went, in seconds, one phase after another: what an audit that
/// must be fast is tuned by (a cell that proves its flaw in 0.1 s still pays for its
/// servers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    /// From the start to servers that serve: the folder, starting them (or checking the
    /// ones given), their versions.
    pub setup_s: f64,
    /// The workers, the nemesis and its healing: from the first worker started to the
    /// last one stopped.
    pub workload_s: f64,
    /// Stopping the servers lockaudit started (their logs brought back from hosts).
    pub teardown_s: f64,
    /// Of `workload_s`, the clients' start: from the first worker started to every client
    /// connected, before the run's clock (and its faults) started.
    #[serde(default)]
    pub clients_ready_s: f64,
    /// The verdict and its files (`report.json`), after the servers stopped.
    pub verdict_s: f64,
}

impl Phases {
    /// The phases' sum.
    pub fn total(&self) -> f64 {
        self.setup_s + self.workload_s + self.teardown_s + self.verdict_s
    }
}

/// Whether a `nemesis` names a schedule file rather than a preset.
pub fn names_a_file(nemesis: &str) -> bool {
    !crate::nemesis::PRESETS.contains(&nemesis)
}

fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// The text that stands for a password in a recorded command line.
const REDACTED: &str = "(redacted)";

/// The command line with every password out: a URL's (`redis://:pw@host`,
/// `sentinel://user:pw@a,b/name`, `ssh://u:pw@h`), and the value of any flag whose name says
/// `password` (`--password x`, `--db-password=x`). run.json is readable by whoever can read
/// the run folder, and is shown on its page.
pub fn redact_argv(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut next_is_secret = false;
    for arg in args {
        if next_is_secret {
            next_is_secret = false;
            out.push(REDACTED.to_string());
            continue;
        }
        let flag = arg.starts_with('-') && arg.to_ascii_lowercase().contains("password");
        if flag {
            match arg.split_once('=') {
                Some((name, _)) => out.push(format!("{name}={REDACTED}")),
                None => {
                    next_is_secret = true;
                    out.push(arg);
                }
            }
            continue;
        }
        out.push(redact_url_passwords(&arg));
    }
    out
}

/// `text` with the password of every `scheme://user:password@` in it replaced.
fn redact_url_passwords(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        // The authority runs to the first `/` (sentinel://:pw@a:1,b:2/name) or the end.
        let authority_end = tail.find('/').unwrap_or(tail.len());
        let authority = &tail[..authority_end];
        match authority.rfind('@') {
            Some(at) => {
                let userinfo = &authority[..at];
                match userinfo.split_once(':') {
                    Some((user, _)) => out.push_str(&format!("{user}:{REDACTED}")),
                    None => out.push_str(userinfo),
                }
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[authority_end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<String> {
        redact_argv(args.iter().map(|a| a.to_string()))
    }

    #[test]
    fn no_password_reaches_the_record() {
        let shown = argv(&[
            "lockaudit",
            "run",
            "--redis",
            "redis://:s3cret@127.0.0.1:6379",
            "--redis=sentinel://user:s3cret@a:1,b:2/lockaudit",
            "--node",
            "ssh://root:s3cret@10.0.0.2",
            "--db-password",
            "s3cret",
            "--admin-password=s3cret",
            "--node",
            "ssh://root@10.0.0.3:2222",
        ]);
        let text = shown.join(" ");
        assert!(!text.contains("s3cret"), "{text}");
        assert_eq!(shown[3], "redis://:(redacted)@127.0.0.1:6379");
        assert_eq!(
            shown[4],
            "--redis=sentinel://user:(redacted)@a:1,b:2/lockaudit"
        );
        assert_eq!(shown[6], "ssh://root:(redacted)@10.0.0.2");
        assert_eq!(shown[8], "(redacted)");
        assert_eq!(shown[9], "--admin-password=(redacted)");
        // What holds no password stays as it was.
        assert_eq!(shown[11], "ssh://root@10.0.0.3:2222");
        assert_eq!(argv(&["--time-limit", "2s"]), ["--time-limit", "2s"]);
    }

    #[test]
    fn a_preset_is_no_file() {
        assert!(!names_a_file("kill-clients") && !names_a_file("none"));
        assert!(names_a_file("nemesis/pause-long.toml"));
    }
}
