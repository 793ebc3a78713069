//! The servers' password stays the run's: every file that holds it is 0600 and the folders
//! that hold those are closed to others, so another local user can neither read it nor list
//! the run folder; no long-lived process shows it in its command line; and a PostgreSQL run
//! (postgres as its own user when lockaudit is root) works in a private run folder.
//!
//! Tried for real as another user (`setpriv` to `nobody`, and to `postgres`), which needs
//! root: without it each test prints a SKIPPED line and returns.

use crate::common;

use std::path::Path;
use std::process::Command;

use lockaudit::cluster::{self, ClusterSpec, Topology};

fn lockaudit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockaudit"))
}

/// The password a run's endpoints.json names (read as root).
fn password_of(run: &Path) -> String {
    let text = std::fs::read_to_string(run.join("endpoints.json")).expect("endpoints.json");
    let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let password = value["password"].as_str().expect("a password").to_string();
    assert!(password.len() >= 16, "{password}");
    password
}

/// A Sentinel run in a folder any user may pass through (as `results/` is): `nobody` cannot
/// read endpoints.json, a sentinel.conf, a server's password file or log, nor list the run
/// folder or its `redis` folder; each of those files holds the password (root reads it).
#[test]
fn another_user_cannot_read_the_password_of_a_run() {
    if !common::require_root("another user cannot read the password of a run") {
        return;
    }
    let dir = common::RunDir::new();
    let run = dir.path().join("run");
    let output = lockaudit()
        .args([
            "run",
            "--seed",
            "1",
            "--algorithm",
            "set-nx-px",
            "--topology",
            "sentinel",
        ])
        .args(["--nemesis", "none", "--time-limit", "2s", "--out"])
        .arg(&run)
        .output()
        .expect("lockaudit run");
    common::assert_exit(&output, 0);
    let password = password_of(&run);
    // Others pass through the folder above: only the run's own modes keep them out.
    assert_eq!(common::mode(dir.path()) & 0o005, 0o005);

    assert_eq!(common::mode(&run), 0o700, "the run folder");
    assert_eq!(common::mode(&run.join("redis")), 0o700, "its redis folder");
    common::assert_denied("nobody", &run);
    common::assert_denied("nobody", &run.join("redis"));
    let endpoints = run.join("endpoints.json");
    assert_eq!(common::mode(&endpoints), 0o600, "endpoints.json");
    common::assert_denied("nobody", &endpoints);
    for i in 0..3 {
        let conf = run.join(format!("redis/sentinel-{i}/sentinel.conf"));
        let text = std::fs::read_to_string(&conf).expect("sentinel.conf");
        assert!(text.contains(&password), "{}", conf.display());
        assert_eq!(common::mode(&conf), 0o600, "{}", conf.display());
        common::assert_denied("nobody", &conf);
    }
    // Each redis-server's config (its one argument, rather than `--requirepass`).
    for name in ["master-0", "replica-1", "replica-2", "storage"] {
        let conf = run.join(format!("redis/{name}.conf"));
        let text = std::fs::read_to_string(&conf).expect("the server's config");
        assert!(text.contains(&password), "{}", conf.display());
        assert_eq!(common::mode(&conf), 0o600, "{}", conf.display());
        common::assert_denied("nobody", &conf);
    }
    common::assert_denied("nobody", &run.join("redis/storage.log"));
}

/// While the servers run, none of their command lines shows the password (Redis rewrites
/// its process title; the sentinels read it from their 0600 config).
#[tokio::test]
async fn no_server_shows_the_password_in_its_command_line() {
    let dir = common::RunDir::new();
    let cluster = cluster::start(&ClusterSpec::new(Topology::Sentinel, dir.path()))
        .await
        .expect("a Sentinel deployment starts");
    let endpoints = cluster.endpoints();
    let password = endpoints.password.clone().expect("a password");
    let servers: Vec<_> = endpoints
        .nodes
        .iter()
        .chain(&endpoints.sentinels)
        .chain([&endpoints.storage])
        .collect();
    assert_eq!(servers.len(), 3 + 3 + 1);
    for node in servers {
        let pid = node.pid.expect("a pid");
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("its command line");
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        assert!(
            !cmdline.contains(&password),
            "{} shows the password: {cmdline}",
            node.name
        );
    }
    cluster.shutdown().await;
}

/// As root, a PostgreSQL run whose run folder is private (0700, as `mktemp -d` makes it)
/// works and leaves it so: postgres, run as the `postgres` user, keeps its data in a
/// private folder of its own outside it. Neither `nobody` nor the `postgres` user can read
/// endpoints.json or list the run folder.
#[test]
fn a_postgres_run_in_a_private_folder_works_and_keeps_its_secret() {
    if !common::require_root("a postgres run in a private folder") {
        return;
    }
    common::require_postgres();
    use std::os::unix::fs::PermissionsExt;
    let dir = common::RunDir::new();
    // As `mktemp -d` makes it.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let run = dir.path();
    let output = lockaudit()
        .args([
            "run",
            "--seed",
            "1",
            "--algorithm",
            "pg-advisory",
            "--nemesis",
            "none",
        ])
        .args(["--time-limit", "2s", "--out"])
        .arg(run)
        .output()
        .expect("lockaudit run");
    common::assert_exit(&output, 0);
    password_of(run);
    assert_eq!(common::mode(run), 0o700, "opened to postgres");
    // Only the server's log: its data was elsewhere.
    let logs = run.join("postgres");
    assert_eq!(common::mode(&logs), 0o700);
    let endpoints = run.join("endpoints.json");
    assert_eq!(common::mode(&endpoints), 0o600);
    for user in ["nobody", "postgres"] {
        if user == "postgres" && nix::unistd::User::from_name(user).ok().flatten().is_none() {
            continue;
        }
        common::assert_denied(user, run);
        common::assert_denied(user, &endpoints);
        common::assert_denied(user, &run.join("redis"));
        common::assert_denied(user, &logs);
    }
}
