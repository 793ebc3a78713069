//! `run.json` as the controller writes it (the format: `crate::run_record`): the record of a
//! plan as it starts, and its end.
//!
//! Written when the run starts, again once its servers said their versions, and at its
//! end: an interrupted run still says what it was.

use crate::presets::{Nemesis, Preset};
use crate::run_record::{Phases, RunRecord};

use super::{topology_name, RunPlan, Servers};

/// lockaudit's version (Cargo's) and the git commit it was built from ("unknown" for a
/// build outside a repository; build.rs).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const COMMIT: &str = env!("LOCKAUDIT_COMMIT");

impl RunRecord {
    /// The record of `plan` as it starts now, named by this process's command line.
    pub fn of(plan: &RunPlan) -> RunRecord {
        let spec = &plan.spec;
        let nemesis = plan
            .spec
            .nemesis
            .clone()
            .unwrap_or(Nemesis::Preset(Preset::None));
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
            algorithm: spec.algorithm.name.to_string(),
            schedule_file: nemesis.preset().is_none(),
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

    /// Marks the run ended now, `seconds` after it began, its time spent as `phases`.
    pub fn end(&mut self, seconds: f64, phases: Phases) {
        self.ended = Some(now());
        self.seconds = Some(seconds);
        self.phases = Some(phases);
    }
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
}
