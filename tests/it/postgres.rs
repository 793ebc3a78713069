//! The PostgreSQL node lockaudit owns, against real postgres processes: it starts, answers
//! only with the password, keeps a committed row through SIGKILL and a restart (crash
//! recovery from the WAL), pauses with its backends, and leaves no process behind.

use crate::common;
use crate::common::{alive, data_base, processes_mentioning};

use std::time::Duration;

use lockaudit::cluster::{self, ClusterError, ClusterSpec, Endpoints, Topology};
use nix::sys::signal::Signal;

async fn client(endpoints: &Endpoints, password: &str) -> Result<tokio_postgres::Client, String> {
    let node = &endpoints.nodes[0];
    let mut config = cluster::pg_client_config(&node.host, node.port, password);
    config.connect_timeout(Duration::from_secs(5));
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    Ok(client)
}

#[tokio::test]
async fn the_node_starts_answers_survives_a_crash_and_leaves_nothing() {
    common::require_postgres();
    let dir = common::RunDir::new();
    let mut cluster = cluster::start(&ClusterSpec::new(Topology::Postgres, dir.path()))
        .await
        .expect("postgres starts");
    let endpoints = cluster.endpoints();
    assert_eq!(endpoints.topology, Topology::Postgres);
    assert_eq!(endpoints.nodes.len(), 1);
    assert_eq!(endpoints.nodes[0].name, "master-0");
    let password = endpoints.password.clone().unwrap();
    let wrong = client(&endpoints, "not-the-password").await;
    assert!(wrong.is_err(), "a wrong password must be refused");
    let db = client(&endpoints, &password).await.expect("connects");
    let fsync: String = db.query_one("SHOW fsync", &[]).await.unwrap().get(0);
    assert_eq!(fsync, "on");
    let listen: String = db
        .query_one("SHOW listen_addresses", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(listen, "127.0.0.1");
    db.batch_execute("CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")
        .await
        .unwrap();

    // A pause stops the backends too: a query on an open session gets no answer.
    let pid = cluster.pid("master-0").unwrap();
    cluster.signal("master-0", Signal::SIGSTOP).unwrap();
    let paused =
        tokio::time::timeout(Duration::from_millis(500), db.query_one("SELECT 1", &[])).await;
    assert!(paused.is_err(), "a paused server answered: {paused:?}");
    cluster.signal("master-0", Signal::SIGCONT).unwrap();
    let resumed = tokio::time::timeout(Duration::from_secs(5), db.query_one("SELECT 1", &[])).await;
    assert!(matches!(resumed, Ok(Ok(_))), "{resumed:?}");

    // SIGKILL of the postmaster and its backends, then a restart on the same folder: the
    // WAL brings the committed row back.
    let tree = cluster::process_tree(pid);
    assert!(
        tree.len() >= 3,
        "postmaster, its helpers and our session: {tree:?}"
    );
    cluster.kill("master-0").unwrap();
    assert_eq!(alive(&tree), 0, "a backend outlived the kill");
    assert!(db.query_one("SELECT 1", &[]).await.is_err());
    cluster.restart("master-0").await.expect("restarts");
    let db = client(&cluster.endpoints(), &password).await.unwrap();
    let v: i32 = db
        .query_one("SELECT v FROM kept", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, 42);
    let log = std::fs::read_to_string(cluster.log_path("master-0").unwrap()).unwrap();
    assert!(
        log.contains("not properly shut down"),
        "no crash recovery in the log:\n{log}"
    );

    // Emptied: a fresh initdb, the table is gone.
    cluster
        .restart_empty("master-0")
        .await
        .expect("restarts empty");
    let db = client(&cluster.endpoints(), &password).await.unwrap();
    assert!(db.query_one("SELECT v FROM kept", &[]).await.is_err());

    let tree = cluster::process_tree(cluster.pid("master-0").unwrap());
    assert!(
        tree.len() >= 3,
        "postmaster, its helpers and our session: {tree:?}"
    );
    // The data is outside the run folder, in a private folder that goes with the server;
    // the log is in the run folder and stays.
    let data = cluster.data_dir("master-0").unwrap().to_path_buf();
    let scratch = data.parent().unwrap().to_path_buf();
    assert!(!data.starts_with(dir.path()), "{}", data.display());
    assert_eq!(common::mode(&scratch), 0o700);
    let log = cluster.log_path("master-0").unwrap().to_path_buf();
    assert!(log.starts_with(dir.path()), "{}", log.display());
    drop(cluster);
    assert_eq!(alive(&tree), 0, "processes left after the drop");
    assert!(!scratch.exists(), "{} is left", scratch.display());
    assert!(log.exists());
    drop(db);
}

#[tokio::test]
async fn a_missing_postgres_names_the_package_and_exits_3() {
    let dir = common::RunDir::new();
    let mut spec = ClusterSpec::new(Topology::Postgres, dir.path());
    spec.postgres_bin = Some(dir.path().join("no-such-folder"));
    let err = cluster::start(&spec).await.unwrap_err();
    assert!(matches!(err, ClusterError::MissingPostgres { .. }), "{err}");
    assert_eq!(err.exit_code(), 3);
    let text = err.to_string();
    assert!(text.contains("apt-get install postgresql"), "{text}");
    assert!(text.contains("no-such-folder"), "{text}");
}

/// The child side of `a_killed_controller_leaves_no_postgres`, chosen by the env var.
#[tokio::test]
async fn helper_postgres_process() {
    let Ok(dir) = std::env::var("LOCKAUDIT_PG_TEST_HELPER") else {
        return;
    };
    let cluster = cluster::start(&ClusterSpec::new(Topology::Postgres, &dir))
        .await
        .unwrap();
    println!("PID {}", cluster.pid("master-0").unwrap());
    tokio::time::sleep(Duration::from_secs(60)).await;
}

#[test]
fn a_killed_controller_leaves_no_postgres() {
    use std::io::BufRead;
    common::require_postgres();
    let (dir, data) = (common::RunDir::new(), data_base());
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .arg(common::test_name(module_path!(), "helper_postgres_process"))
        .args(["--exact", "--nocapture"])
        .env("LOCKAUDIT_PG_TEST_HELPER", dir.path())
        // A SIGKILLed controller cannot remove the server's data: it goes with `data`.
        .env("TMPDIR", data.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let pid: u32 = loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the helper ended early"
        );
        if let Some((_, pid)) = line.trim().split_once("PID ") {
            break pid.parse().unwrap();
        }
    };
    let tree = cluster::process_tree(pid);
    assert!(tree.len() >= 2, "the postmaster and its helpers: {tree:?}");
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while alive(&tree) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(alive(&tree), 0, "postgres outlived its controller");
}

// ---- The database locks against the real server, then whole runs. ----

use lockaudit::locks::{self, Acquired, CounterWrite, LockOptions, Mode, Outcome};

fn opts() -> LockOptions {
    LockOptions {
        retry_attempts: 0,
        op_timeout_ms: 5000,
        ..LockOptions::default()
    }
}

async fn lock(algorithm: &str, endpoints: &Endpoints) -> Box<dyn locks::LockClient> {
    locks::connect(algorithm, endpoints, &opts())
        .await
        .unwrap_or_else(|e| panic!("{algorithm}: {e}"))
}

fn ok(acquired: &Acquired) -> bool {
    matches!(acquired, Acquired::Ok { lease_ms: None, .. })
}

#[tokio::test]
async fn pg_advisory_excludes_shares_and_dies_with_its_session() {
    common::require_postgres();
    let dir = common::RunDir::new();
    let cluster = cluster::start(&ClusterSpec::new(Topology::Postgres, dir.path()))
        .await
        .unwrap();
    let e = cluster.endpoints();
    let (mut a, mut b) = (lock("pg-advisory", &e).await, lock("pg-advisory", &e).await);
    assert!(ok(&a.acquire("lock:0").await));
    assert!(matches!(b.acquire("lock:0").await, Acquired::Fail(_)));
    assert!(
        ok(&b.acquire("lock:1").await),
        "another key is another lock"
    );
    assert!(
        matches!(b.release("lock:0").await, Outcome::Fail(_)),
        "not b's"
    );
    assert_eq!(a.release("lock:0").await, Outcome::Ok { lease_ms: None });
    assert!(ok(&b.acquire("lock:0").await));
    // A session that ends (a killed client) gives its locks back at once.
    drop(b);
    let mut c = lock("pg-advisory", &e).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !ok(&c.acquire("lock:0").await) {
        assert!(
            std::time::Instant::now() < deadline,
            "the dead session's lock stayed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ok(&c.acquire("lock:1").await));
    c.release("lock:0").await;
    // Readers share; a writer is refused while they read.
    assert!(lockaudit::locks::algorithm("pg-advisory")
        .unwrap()
        .takes_shared(&*c));
    assert!(ok(&a.acquire_mode("lock:2", Mode::Shared).await));
    assert!(ok(&c.acquire_mode("lock:2", Mode::Shared).await));
    let mut w = lock("pg-advisory", &e).await;
    assert!(matches!(w.acquire("lock:2").await, Acquired::Fail(_)));
    assert_eq!(
        a.release_mode("lock:2", Mode::Shared).await,
        Outcome::Ok { lease_ms: None }
    );
    assert_eq!(
        c.release_mode("lock:2", Mode::Shared).await,
        Outcome::Ok { lease_ms: None }
    );
    assert!(ok(&w.acquire("lock:2").await));
}

/// Ends every client session of the server but the caller's, as `kill-session` does, from
/// a session of the test's own: the backends terminated, each waited for until it exited.
async fn terminate_sessions(endpoints: &Endpoints) -> i64 {
    let db = client(endpoints, endpoints.password.as_deref().unwrap())
        .await
        .unwrap();
    db.query_one(
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) FROM pg_stat_activity \
         WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test]
async fn pg_advisory_tells_a_lost_session_or_with_reconnect_goes_on_silently() {
    common::require_postgres();
    let dir = common::RunDir::new();
    let cluster = cluster::start(&ClusterSpec::new(Topology::Postgres, dir.path()))
        .await
        .unwrap();
    let e = cluster.endpoints();
    let pooled = LockOptions {
        reconnect: true,
        ..opts()
    };
    let mut noticing = lock("pg-advisory", &e).await;
    let mut silent = locks::connect("pg-advisory", &e, &pooled).await.unwrap();
    assert!(ok(&noticing.acquire("lock:0").await));
    assert!(ok(&silent.acquire("lock:1").await));
    assert_eq!(noticing.try_notice(), None, "no loss yet");
    assert!(terminate_sessions(&e).await >= 2);

    // The noticing client is told, once, of the key it held.
    let notice = tokio::time::timeout(Duration::from_secs(5), noticing.next_notice())
        .await
        .expect("a notice within 5 s")
        .expect("a notice");
    match notice.kind {
        locks::NoticeKind::Lost { key, .. } => assert_eq!(key, "lock:0"),
        other => panic!("{other:?}"),
    }
    assert_eq!(noticing.try_notice(), None, "told once");
    // Its release says the lock went with the session; the next acquire opens a new one.
    assert!(matches!(noticing.release("lock:0").await, Outcome::Fail(_)));

    // Both locks are free: another session takes them while their holders still hold.
    let mut other = lock("pg-advisory", &e).await;
    assert!(ok(&other.acquire("lock:0").await));
    assert!(ok(&other.acquire("lock:1").await));
    // The pooled one is told nothing; its release, on a new session, finds nothing to free.
    assert_eq!(silent.try_notice(), None);
    assert!(matches!(silent.release("lock:1").await, Outcome::Fail(_)));
    // Both go on with new sessions.
    assert!(ok(&noticing.acquire("lock:2").await));
    assert!(ok(&silent.acquire("lock:3").await));
    assert!(matches!(
        noticing.acquire("lock:1").await,
        Acquired::Fail(_)
    ));
}

#[tokio::test]
async fn pg_row_locks_the_row_and_commits_the_counter_on_release() {
    common::require_postgres();
    let dir = common::RunDir::new();
    let cluster = cluster::start(&ClusterSpec::new(Topology::Postgres, dir.path()))
        .await
        .unwrap();
    let e = cluster.endpoints();
    let (mut a, mut b) = (lock("pg-row", &e).await, lock("pg-row", &e).await);
    assert!(lockaudit::locks::algorithm("pg-row").unwrap().keeps_counter);
    assert!(ok(&a.acquire("lock:0").await));
    assert!(matches!(b.acquire("lock:0").await, Acquired::Fail(_)));
    assert_eq!(a.read_counter("lock:0").await, Ok(None));
    assert_eq!(a.write_counter("lock:0", 1).await, CounterWrite::Accepted);
    // Not committed yet: another session still sees nothing.
    assert_eq!(b.read_counter("lock:0").await, Ok(None));
    assert_eq!(a.release("lock:0").await, Outcome::Ok { lease_ms: None });
    assert_eq!(b.read_counter("lock:0").await, Ok(Some(1)));
    // A holder that dies before COMMIT loses its write and frees the row.
    assert!(ok(&b.acquire("lock:0").await));
    assert_eq!(b.write_counter("lock:0", 2).await, CounterWrite::Accepted);
    drop(b);
    let mut c = lock("pg-row", &e).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !ok(&c.acquire("lock:0").await) {
        assert!(
            std::time::Instant::now() < deadline,
            "the dead session's row stayed locked"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(c.read_counter("lock:0").await, Ok(Some(1)));
    assert!(matches!(c.release("lock:1").await, Outcome::Fail(_)));
}

fn lockaudit() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_lockaudit"))
}

/// `lockaudit run --algorithm NAME` into `out`, with `extra` flags; its server keeps its
/// data in `data` (see [`data_base`]).
fn run(
    algorithm: &str,
    out: &std::path::Path,
    data: &std::path::Path,
    extra: &[&str],
) -> std::process::Output {
    lockaudit()
        .args(["run", "--seed", "1", "--algorithm", algorithm, "--out"])
        .arg(out)
        .args(extra)
        .env("TMPDIR", data)
        .output()
        .expect("run lockaudit")
}

/// Asserts that the run whose server kept its data in `data` left no process and no data.
fn assert_no_server_left(data: &std::path::Path) {
    let left = processes_mentioning(&data.display().to_string());
    assert!(left.is_empty(), "processes left: {left:?}");
    let kept: Vec<_> = std::fs::read_dir(data)
        .expect("the data folder")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(kept.is_empty(), "the server's data is left: {kept:?}");
}

#[test]
fn every_database_lock_is_valid_without_faults_and_leaves_no_process() {
    common::require_postgres();
    for algorithm in (locks::TABLE.iter())
        .filter(|a| a.service == Some(lockaudit::topology::Topology::Postgres))
        .map(|a| a.name)
    {
        let (dir, data) = (common::RunDir::new(), data_base());
        let out = dir.path().join("run");
        let output = run(algorithm, &out, data.path(), &["--time-limit", "3s"]);
        common::assert_exit(&output, 0);
        let report = common::report(&out);
        assert_eq!(report["valid"], true, "{algorithm}: {report}");
        let left = processes_mentioning(&out.display().to_string());
        assert!(left.is_empty(), "{algorithm}: processes left: {left:?}");
        assert_no_server_left(data.path());
    }
}

#[test]
fn pg_advisory_under_kill_clients_stays_available() {
    common::require_postgres();
    let (dir, data) = (common::RunDir::new(), data_base());
    let out = dir.path().join("run");
    let output = run(
        "pg-advisory",
        &out,
        data.path(),
        &["--nemesis", "kill-clients", "--time-limit", "8s"],
    );
    let report = common::report(&out);
    let kinds = common::kinds(&report);
    assert!(!kinds.contains(&"unavailable".to_string()), "{kinds:?}");
    assert!(
        report["stats"]["faults"].as_u64().unwrap_or(0) >= 2,
        "{report}"
    );
    common::assert_exit(&output, 0);
}

/// A run's history, one JSON value per line.
fn history(out: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out.join("history.jsonl"))
        .expect("history.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// The `kill-session` events of a run: each names master-0 and how many sessions it ended.
fn sessions_ended(events: &[serde_json::Value]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e["process"] == "nemesis" && e["f"] == "kill-session")
        .map(|e| {
            assert_eq!(
                e["value"]["targets"],
                serde_json::json!(["master-0"]),
                "{e}"
            );
            e["value"]["sessions"].as_u64().expect("a count")
        })
        .collect()
}

/// pg-advisory by default notices its session's end: a `lost` notice (a renew `fail`) for
/// the key it held, after which that process writes nothing before its release. No write
/// is ever made under a lock another holds; an overlap can only be the instant between a
/// holder's backend freeing its lock and the holder reading its session's end, when another
/// backend signalled in the same statement had not ended yet (workloads/pg-advisory.toml),
/// and its earlier holder was told then.
#[test]
fn pg_advisory_notices_a_killed_session_and_writes_nothing_after() {
    common::require_postgres();
    let (dir, data) = (common::RunDir::new(), data_base());
    let out = dir.path().join("run");
    let output = run(
        "pg-advisory",
        &out,
        data.path(),
        &["--nemesis", "kill-sessions", "--time-limit", "8s"],
    );
    let report = common::report(&out);
    let kinds = common::kinds(&report);
    for kind in ["stale-write", "lost-update"] {
        assert!(!kinds.contains(&kind.to_string()), "{kinds:?}");
    }
    let events = history(&out);
    let ended = sessions_ended(&events);
    assert!(
        ended.len() >= 2 && ended.iter().all(|&n| n >= 1),
        "{ended:?}"
    );
    // After a `lost` notice the process makes no further write of that key in that hold:
    // its requests up to its release are no writes (a read it had decided on may still come,
    // and an operation sent before the notice may complete after it).
    let mut notices = 0;
    for (i, e) in events.iter().enumerate() {
        if !(e["f"] == "renew" && e["type"] == "fail") {
            continue;
        }
        notices += 1;
        let mut until_release = events[i + 1..].iter().filter(|n| {
            n["process"] == e["process"] && n["key"] == e["key"] && n["type"] == "invoke"
        });
        let mut released = false;
        for next in until_release.by_ref() {
            if next["f"] == "release" {
                released = true;
                break;
            }
            assert_ne!(
                next["f"], "write",
                "a write after the lost notice {e}: {next}"
            );
        }
        assert!(released, "no release follows the lost notice {e}");
    }
    // A loss the client was told of is a lost-lock (no lease: only a release should free it).
    if notices > 0 {
        assert!(kinds.contains(&"lost-lock".to_string()), "{kinds:?}");
    }
    // The earlier holder of any overlap ended its hold at a loss it was told of: its notice
    // just before its release, or its release on the ended session.
    let at = |index: &serde_json::Value| {
        events
            .iter()
            .position(|e| e["index"] == *index)
            .expect("an event of the history")
    };
    for overlap in report["anomalies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["kind"] == "overlap")
    {
        let release = at(&overlap["indices"][2]);
        let (process, key) = (&events[release]["process"], &events[release]["key"]);
        let of_hold = |e: &&serde_json::Value| e["process"] == *process && e["key"] == *key;
        let before = events[..release].iter().rev().find(of_hold).unwrap();
        let after = events[release + 1..].iter().find(of_hold).unwrap();
        let told = (before["f"] == "renew" && before["type"] == "fail")
            || after["error"]
                .as_str()
                .is_some_and(|e| e.contains("ended the session"));
        assert!(told, "{overlap}\n{before}\n{after}");
    }
    assert!(report["untested"].is_null(), "{report}");
    common::assert_exit(&output, if report["valid"] == true { 0 } else { 1 });
    assert_no_server_left(data.path());
}

/// With `reconnect = true` it reconnects silently, as a pool does: the catalogue's entry,
/// whose `[expect]` asks for an overlap inside no lease; `run` must find one.
#[test]
fn pg_advisory_that_reconnects_silently_is_found_overlapping() {
    common::require_postgres();
    let (dir, data) = (common::RunDir::new(), data_base());
    let out = dir.path().join("run");
    let workload = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/bugs/rails-advisory-reconnect.toml");
    let output = lockaudit()
        // Not stopped at its first anomaly, which may be a lost-lock (a release on the new
        // session) before any other client took the freed lock; 15 s give a loaded machine
        // several kills (one every 1.5-3 s).
        .args(["run", "--seed", "1", "--time-limit", "15s"])
        .arg("--out")
        .arg(&out)
        .arg(&workload)
        .env("TMPDIR", data.path())
        .output()
        .expect("run lockaudit");
    common::assert_exit(&output, 1);
    let report = common::report(&out);
    let kinds = common::kinds(&report);
    assert!(kinds.contains(&"overlap".to_string()), "{kinds:?}");
    assert!(!history(&out)
        .iter()
        .any(|e| e["f"] == "renew" && e["type"] == "fail"));
    assert!(!sessions_ended(&history(&out)).is_empty());
    assert_no_server_left(data.path());
}

#[test]
fn a_run_without_postgres_exits_3_naming_the_package() {
    let dir = common::RunDir::new();
    let output = lockaudit()
        .args([
            "run",
            "--seed",
            "1",
            "--algorithm",
            "pg-advisory",
            "--time-limit",
            "2s",
            "--out",
        ])
        .arg(dir.path().join("run"))
        .env(cluster::POSTGRES_BIN_ENV, dir.path().join("empty"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("apt-get install postgresql"), "{stderr}");
}

#[tokio::test]
async fn pg_lock_column_excludes_and_a_dead_holder_deadlocks_the_key() {
    common::require_postgres();
    let dir = common::RunDir::new();
    let cluster = cluster::start(&ClusterSpec::new(Topology::Postgres, dir.path()))
        .await
        .unwrap();
    let e = cluster.endpoints();
    let (mut a, mut b) = (
        lock("pg-lock-column", &e).await,
        lock("pg-lock-column", &e).await,
    );
    assert!(ok(&a.acquire("lock:0").await));
    assert!(matches!(b.acquire("lock:0").await, Acquired::Fail(_)));
    assert!(
        matches!(b.release("lock:0").await, Outcome::Fail(_)),
        "not b's"
    );
    assert_eq!(a.release("lock:0").await, Outcome::Ok { lease_ms: None });
    assert!(ok(&b.acquire("lock:0").await));
    // The session ends, the flag stays: nobody can take the key again.
    drop(b);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut c = lock("pg-lock-column", &e).await;
    assert!(matches!(c.acquire("lock:0").await, Acquired::Fail(_)));
}

#[test]
fn pg_lock_column_under_kill_clients_is_unavailable() {
    common::require_postgres();
    let (dir, data) = (common::RunDir::new(), data_base());
    let out = dir.path().join("run");
    let output = run(
        "pg-lock-column",
        &out,
        data.path(),
        // Long enough for a kill (every 1.5-3 s from 1 s) and the 1 s deadlock after it on
        // a loaded machine: 6 s failed once alongside the other tests at a load of 8.
        &["--nemesis", "kill-clients", "--time-limit", "12s"],
    );
    common::assert_exit(&output, 1);
    let kinds = common::kinds(&common::report(&out));
    assert!(kinds.contains(&"unavailable".to_string()), "{kinds:?}");
}

#[tokio::test]
async fn pg_version_writes_only_on_the_version_it_read() {
    common::require_postgres();
    let dir = common::RunDir::new();
    let cluster = cluster::start(&ClusterSpec::new(Topology::Postgres, dir.path()))
        .await
        .unwrap();
    let e = cluster.endpoints();
    let (mut a, mut b) = (lock("pg-version", &e).await, lock("pg-version", &e).await);
    assert!(
        lockaudit::locks::algorithm("pg-version")
            .unwrap()
            .optimistic
    );
    assert!(
        lockaudit::locks::algorithm("pg-version")
            .unwrap()
            .keeps_counter
    );
    assert_eq!(a.read_counter("lock:0").await, Ok(None));
    assert_eq!(b.read_counter("lock:0").await, Ok(None));
    assert_eq!(a.write_counter("lock:0", 1).await, CounterWrite::Accepted);
    // b read before a's write: its write is refused, and it retries from a fresh read.
    assert!(matches!(
        b.write_counter("lock:0", 1).await,
        CounterWrite::Rejected(_)
    ));
    assert_eq!(b.read_counter("lock:0").await, Ok(Some(1)));
    assert_eq!(b.write_counter("lock:0", 2).await, CounterWrite::Accepted);
    assert_eq!(a.read_counter("lock:0").await, Ok(Some(2)));
}

#[test]
fn the_audit_marks_failover_and_clock_jump_on_postgres_not_applicable() {
    let dir = common::RunDir::new();
    let out = dir.path().join("audit");
    let output = lockaudit()
        .args([
            "audit",
            "--cells",
            "pg-row:failover,pg-advisory:clock-jump",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = common::assert_exit(&output, 0);
    assert!(stdout.contains("no replica to fail over to"), "{stdout}");
    assert!(stdout.contains("locks never expire"), "{stdout}");
    assert!(
        !out.join("pg-row/failover/history.jsonl").exists(),
        "a cell that cannot act ran"
    );
}

#[test]
fn a_database_lock_refuses_an_existing_redis() {
    let output = lockaudit()
        .args([
            "run",
            "--seed",
            "1",
            "--algorithm",
            "pg-advisory",
            "--redis",
            "redis://127.0.0.1:1",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--redis: pg-advisory runs on the PostgreSQL"),
        "{stderr}"
    );
}

#[test]
fn ctrl_c_mid_run_leaves_no_postgres_process() {
    common::require_postgres();
    let (dir, data) = (common::RunDir::new(), data_base());
    let out = dir.path().join("run");
    let mut child = lockaudit()
        .args([
            "run",
            "--seed",
            "1",
            "--algorithm",
            "pg-row",
            "--time-limit",
            "30s",
            "--out",
        ])
        .arg(&out)
        .env("TMPDIR", data.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the clients to work: the server then has their sessions as children.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let postmaster = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "the run never started"
        );
        let history = std::fs::read_to_string(out.join("history.jsonl")).unwrap_or_default();
        let endpoints = std::fs::read_to_string(out.join("endpoints.json")).unwrap_or_default();
        let pid = serde_json::from_str::<serde_json::Value>(&endpoints)
            .ok()
            .and_then(|e| e["nodes"][0]["pid"].as_u64());
        if let (Some(pid), true) = (pid, history.lines().count() > 50) {
            break pid as u32;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let tree = cluster::process_tree(postmaster);
    assert!(
        tree.len() >= 4,
        "postmaster, helpers and sessions: {tree:?}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while alive(&tree) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(alive(&tree), 0, "postgres processes outlived Ctrl-C");
    let left = processes_mentioning(&out.display().to_string());
    assert!(left.is_empty(), "processes left: {left:?}");
    // Its data went with it, although the controller ended by the signal.
    assert_no_server_left(data.path());
}

/// As root, a run from a working folder that the `postgres` user cannot enter (as any clone
/// in root's home, 0700) works: the server's data is in a private folder of its own, which
/// goes at the end, and its log is in the run folder, under `results/` of the working folder.
#[test]
fn a_run_from_a_folder_postgres_cannot_enter_is_valid_and_keeps_its_log() {
    if !common::require_root("a postgres run from a folder only root may enter") {
        return;
    }
    common::require_postgres();
    let (dir, data) = (common::RunDir::new(), data_base());
    // As root's home: root's, 0700.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let output = lockaudit()
        .args(["run", "--seed", "1", "--algorithm", "pg-row"])
        .args(["--nemesis", "none", "--time-limit", "3s"])
        .current_dir(dir.path())
        .env("TMPDIR", data.path())
        .output()
        .expect("run lockaudit");
    common::assert_exit(&output, 0);
    let runs: Vec<_> = std::fs::read_dir(dir.path().join("results"))
        .expect("results/ in the working folder")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let out = &runs[0];
    assert_eq!(common::report(out)["valid"], true);
    let log = std::fs::read_to_string(out.join("postgres/master-0.log")).expect("the log");
    assert!(
        log.contains("database system is ready to accept connections"),
        "{log}"
    );
    assert!(
        !out.join("postgres/master-0").exists(),
        "the data is in the run folder"
    );
    // Nothing was opened to the postgres user.
    assert_eq!(common::mode(dir.path()), 0o700);
    assert_eq!(common::mode(out), 0o700);
    assert_no_server_left(data.path());
}

/// A server that cannot start: the run stops (exit 3) naming its log, which is in the run
/// folder, and the server's private folder is gone.
#[test]
fn a_server_that_cannot_start_leaves_its_log_and_no_data() {
    common::require_postgres();
    let (dir, data) = (common::RunDir::new(), data_base());
    // The real initdb, and a postgres that refuses to start.
    let real = cluster::postgres_bin_dir(None).unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(real.join("initdb"), bin.join("initdb")).unwrap();
    std::fs::write(
        bin.join("postgres"),
        "#!/bin/sh\necho 'FATAL: refused by the test' >&2\nexit 1\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(bin.join("postgres"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    }
    let out = dir.path().join("run");
    let output = lockaudit()
        .args(["run", "--seed", "1", "--algorithm", "pg-row"])
        .args(["--nemesis", "none", "--time-limit", "3s", "--out"])
        .arg(&out)
        .env("TMPDIR", data.path())
        .env(cluster::POSTGRES_BIN_ENV, &bin)
        .output()
        .expect("run lockaudit");
    common::assert_exit(&output, 3);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("refused by the test"), "{stderr}");
    let log = std::fs::read_to_string(out.join("postgres/master-0.log")).expect("the log");
    assert!(log.contains("refused by the test"), "{log}");
    assert_no_server_left(data.path());
}

/// The database locks' behaviour across a server crash, without any race: what the
/// `kill-servers` cells can only catch when a critical section outlasts the restart.
#[tokio::test]
async fn a_server_crash_drops_session_locks_and_keeps_committed_flags() {
    common::require_postgres();
    let dir = common::RunDir::new();
    let mut cluster = cluster::start(&ClusterSpec::new(Topology::Postgres, dir.path()))
        .await
        .unwrap();
    let e = cluster.endpoints();
    let mut advisory = lock("pg-advisory", &e).await;
    let mut row = lock("pg-row", &e).await;
    let mut column = lock("pg-lock-column", &e).await;
    assert!(ok(&advisory.acquire("lock:0").await));
    assert!(ok(&row.acquire("lock:0").await));
    assert_eq!(row.write_counter("lock:0", 7).await, CounterWrite::Accepted);
    assert!(ok(&column.acquire("lock:0").await));

    cluster.kill("master-0").unwrap();
    cluster.restart("master-0").await.unwrap();
    let e = cluster.endpoints();
    // The advisory lock and the row lock died with their sessions: others get them while
    // their holders still believe they hold them, and find out only at their release.
    let mut other = lock("pg-advisory", &e).await;
    assert!(ok(&other.acquire("lock:0").await));
    // Its release cannot succeed: `fail` once the client has noticed its session's end,
    // `info` if its unlock meets the broken session first.
    let released = advisory.release("lock:0").await;
    assert!(
        matches!(released, Outcome::Fail(_) | Outcome::Info(_)),
        "{released:?}"
    );
    let mut other = lock("pg-row", &e).await;
    assert!(ok(&other.acquire("lock:0").await));
    assert_eq!(
        other.read_counter("lock:0").await,
        Ok(None),
        "the UPDATE was never committed"
    );
    assert!(matches!(row.release("lock:0").await, Outcome::Info(_)));
    // The flag was committed: the crash recovery brings it back, and the key stays taken.
    let mut other = lock("pg-lock-column", &e).await;
    assert!(matches!(other.acquire("lock:0").await, Acquired::Fail(_)));
}
