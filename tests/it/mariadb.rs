//! The MariaDB server lockaudit owns and the mariadb-get-lock client, against a real
//! mariadbd: it starts, answers only the lock user with the password, keeps a committed row
//! through SIGKILL and a restart (InnoDB's crash recovery), drops every named lock in the
//! crash, and leaves no process and no data behind; the lock excludes, waits, dies with its
//! session, and a lost session is a `lost` notice or, with `reconnect`, a new session.

use crate::common;
use crate::common::{data_base, processes_mentioning};

use std::time::{Duration, Instant};

use lockaudit::cluster::{self, ClusterSpec, Endpoints, Topology};
use lockaudit::locks::{self, Acquired, LockClient, LockOptions, NoticeKind, Outcome};
use mysql_async::prelude::Queryable;
use nix::sys::signal::Signal;

async fn session(
    endpoints: &Endpoints,
    user: &str,
    password: &str,
) -> Result<mysql_async::Conn, String> {
    let node = &endpoints.nodes[0];
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname(node.host.clone())
        .tcp_port(node.port)
        .user(Some(user))
        .pass(Some(password))
        .prefer_socket(false);
    tokio::time::timeout(Duration::from_secs(5), mysql_async::Conn::new(opts))
        .await
        .map_err(|_| "no connection within 5 s".to_string())?
        .map_err(|e| e.to_string())
}

/// Whether every thread of `pid` is stopped (`T` in its task's status).
fn every_thread_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("status"))
            .is_ok_and(|s| s.lines().any(|l| l.starts_with("State:\tT")))
    })
}

async fn start(dir: &common::RunDir) -> cluster::Cluster {
    cluster::start(&ClusterSpec::new(Topology::Mariadb, dir.path()))
        .await
        .expect("mariadb starts")
}

#[tokio::test]
async fn the_server_starts_answers_survives_a_crash_and_leaves_nothing() {
    common::require_mariadb();
    let dir = common::RunDir::new();
    let mut cluster = start(&dir).await;
    let endpoints = cluster.endpoints();
    assert_eq!(endpoints.topology, Topology::Mariadb);
    assert_eq!(endpoints.nodes.len(), 1);
    assert_eq!(endpoints.nodes[0].name, "master-0");
    let password = endpoints.password.clone().unwrap();
    let user = cluster::MARIADB_USER;
    assert!(session(&endpoints, user, "not-the-password").await.is_err());
    // The bootstrap's passwordless root is gone: the port lets in the lock user only.
    assert!(session(&endpoints, "root", "").await.is_err());
    let mut db = session(&endpoints, user, &password)
        .await
        .expect("connects");
    let (bind, flush): (String, i64) = db
        .query_first("SELECT @@bind_address, @@innodb_flush_log_at_trx_commit")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((bind.as_str(), flush), ("127.0.0.1", 1));
    db.query_drop("CREATE TABLE lockaudit.kept (v INT) ENGINE=InnoDB")
        .await
        .unwrap();
    db.query_drop("INSERT INTO lockaudit.kept VALUES (42)")
        .await
        .unwrap();

    // A pause: a query on an open session gets no answer until the resume. SIGSTOP stops
    // mariadbd's threads as each next runs: the query waits until every one has (a query
    // sent at once was seen answered by a thread not yet stopped).
    let pid = cluster.pid("master-0").unwrap();
    cluster.signal("master-0", Signal::SIGSTOP).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !every_thread_stopped(pid) {
        assert!(Instant::now() < deadline, "mariadbd did not stop");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let paused = tokio::time::timeout(Duration::from_millis(500), db.query_drop("SELECT 1")).await;
    assert!(paused.is_err(), "a paused server answered: {paused:?}");
    cluster.signal("master-0", Signal::SIGCONT).unwrap();
    drop(db);

    // SIGKILL, then a restart on the same folder: InnoDB's log brings the row back.
    cluster.kill("master-0").unwrap();
    assert!(!cluster::is_live(pid));
    cluster.restart("master-0").await.expect("restarts");
    let mut db = session(&cluster.endpoints(), user, &password)
        .await
        .unwrap();
    let v: Option<i64> = db
        .query_first("SELECT v FROM lockaudit.kept")
        .await
        .unwrap();
    assert_eq!(v, Some(42));
    let log = std::fs::read_to_string(cluster.log_path("master-0").unwrap()).unwrap();
    assert!(
        log.contains("Starting crash recovery"),
        "no crash recovery in the log:\n{log}"
    );
    drop(db);

    // Emptied: a fresh bootstrap, the table is gone, the password still works.
    cluster
        .restart_empty("master-0")
        .await
        .expect("restarts empty");
    let mut db = session(&cluster.endpoints(), user, &password)
        .await
        .unwrap();
    assert!(db.query_drop("SELECT v FROM lockaudit.kept").await.is_err());
    drop(db);

    // The data is outside the run folder, in a private folder that goes with the server,
    // and the bootstrap file with the password is gone from it; the log stays.
    let pid = cluster.pid("master-0").unwrap();
    let data = cluster.data_dir("master-0").unwrap().to_path_buf();
    let scratch = data.parent().unwrap().to_path_buf();
    assert!(!data.starts_with(dir.path()), "{}", data.display());
    assert_eq!(common::mode(&scratch), 0o700);
    let names: Vec<String> = std::fs::read_dir(&scratch)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".sql")), "{names:?}");
    let log = cluster.log_path("master-0").unwrap().to_path_buf();
    assert!(log.starts_with(dir.path()), "{}", log.display());
    drop(cluster);
    assert!(!cluster::is_live(pid), "mariadbd outlived the cluster");
    assert!(!scratch.exists(), "{} is left", scratch.display());
    assert!(log.exists());
}

fn opts(wait_ms: u64) -> LockOptions {
    LockOptions {
        retry_attempts: 0,
        op_timeout_ms: 5000,
        wait_ms,
        ..LockOptions::default()
    }
}

async fn lock(endpoints: &Endpoints, options: LockOptions) -> Box<dyn LockClient> {
    locks::connect("mariadb-get-lock", endpoints, &options)
        .await
        .unwrap_or_else(|e| panic!("mariadb-get-lock: {e}"))
}

fn ok(acquired: &Acquired) -> bool {
    matches!(acquired, Acquired::Ok { lease_ms: None, .. })
}

fn token(acquired: &Acquired) -> i64 {
    match acquired {
        Acquired::Ok {
            token: Some(t),
            lease_ms: None,
        } => *t,
        other => panic!("no token: {other:?}"),
    }
}

#[tokio::test]
async fn get_lock_excludes_waits_and_dies_with_its_session() {
    common::require_mariadb();
    let dir = common::RunDir::new();
    let cluster = start(&dir).await;
    let e = cluster.endpoints();
    let (mut a, mut b) = (lock(&e, opts(0)).await, lock(&e, opts(0)).await);
    assert_eq!(a.wait_ms(), Some(0));
    assert!(ok(&a.acquire("lock:0").await));
    assert!(matches!(b.acquire("lock:0").await, Acquired::Fail(_)));
    assert!(
        ok(&b.acquire("lock:1").await),
        "another key is another lock"
    );
    assert_eq!(
        b.release("lock:0").await,
        Outcome::Fail("held by another session".into())
    );
    assert_eq!(a.release("lock:0").await, Outcome::Ok { lease_ms: None });
    assert!(
        matches!(a.release("lock:0").await, Outcome::Fail(why) if why.contains("no such lock"))
    );

    // A waiting acquire gets the lock once its holder releases, not before.
    assert!(ok(&a.acquire("lock:0").await));
    let mut waiter = lock(&e, opts(4000)).await;
    let released = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let at = Instant::now();
        (a.release("lock:0").await, at)
    });
    let asked = Instant::now();
    let got = waiter.acquire("lock:0").await;
    let granted = Instant::now();
    let (release, released_at) = released.await.unwrap();
    assert_eq!(release, Outcome::Ok { lease_ms: None });
    assert!(ok(&got), "{got:?}");
    assert!(
        granted >= released_at && granted - asked >= Duration::from_millis(300),
        "granted {:?} after the ask, before the release",
        granted - asked
    );

    // A session that ends (a killed client) gives its locks back: a waiting acquire gets it.
    drop(b);
    let mut c = lock(&e, opts(4000)).await;
    assert!(
        ok(&c.acquire("lock:1").await),
        "the dead session's lock stayed"
    );

    // Fenced: each grant's token is above every earlier one of the key, whoever took it.
    let fenced = LockOptions {
        fenced: true,
        ..opts(0)
    };
    let (mut f, mut g) = (lock(&e, fenced.clone()).await, lock(&e, fenced).await);
    let t1 = token(&f.acquire("lock:9").await);
    f.release("lock:9").await;
    let t2 = token(&g.acquire("lock:9").await);
    g.release("lock:9").await;
    let t3 = token(&f.acquire("lock:9").await);
    assert!(t1 < t2 && t2 < t3, "{t1} {t2} {t3}");
    drop(waiter);
}

#[tokio::test]
async fn a_server_crash_drops_every_lock_and_keeps_the_tokens() {
    common::require_mariadb();
    let dir = common::RunDir::new();
    let mut cluster = start(&dir).await;
    let e = cluster.endpoints();
    let fenced = LockOptions {
        fenced: true,
        reconnect: true,
        ..opts(0)
    };
    let mut a = lock(&e, fenced.clone()).await;
    let before = token(&a.acquire("lock:0").await);
    cluster.kill("master-0").unwrap();
    cluster.restart("master-0").await.expect("restarts");
    // a never released, yet another session gets the lock: it went with the crash. Its
    // token is still above a's: the committed row came back with InnoDB's log.
    let mut b = lock(&cluster.endpoints(), fenced).await;
    let after = token(&b.acquire("lock:0").await);
    assert!(after > before, "{before} then {after}");
    // a, reconnecting, finds the lock another's.
    assert_eq!(
        a.release("lock:0").await,
        Outcome::Fail("held by another session".into())
    );
}

#[tokio::test]
async fn a_lost_session_is_a_lost_notice_or_with_reconnect_a_new_session() {
    common::require_mariadb();
    let dir = common::RunDir::new();
    let cluster = start(&dir).await;
    let e = cluster.endpoints();
    let node = e.nodes[0].clone();
    let password = e.password.clone().unwrap();
    let mut watched = lock(&e, opts(0)).await;
    let mut pooled = lock(
        &e,
        LockOptions {
            reconnect: true,
            ..opts(0)
        },
    )
    .await;
    assert!(ok(&watched.acquire("lock:0").await));
    assert!(ok(&pooled.acquire("lock:1").await));

    let ended = cluster::mariadb_end_client_sessions(&node.host, node.port, &password)
        .await
        .expect("ends the sessions");
    assert!(ended >= 2, "ended {ended}");

    // Without reconnect: the loss is reported while holding, and the release says so.
    let notice = tokio::time::timeout(Duration::from_secs(5), watched.next_notice())
        .await
        .expect("a notice within 5 s")
        .expect("a notice");
    match notice.kind {
        NoticeKind::Lost { key, error } => {
            assert_eq!(key, "lock:0");
            assert!(error.contains("session"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(watched.release("lock:0").await, Outcome::Fail(_)));
    // The next acquire opens a new session.
    assert!(ok(&watched.acquire("lock:0").await));

    // With reconnect: no notice; the release runs on a new session and finds no such lock,
    // and the client carries on.
    assert!(pooled.try_notice().is_none());
    assert!(
        matches!(pooled.release("lock:1").await, Outcome::Fail(why) if why.contains("no such lock"))
    );
    assert!(ok(&pooled.acquire("lock:1").await));
    assert!(pooled.try_notice().is_none());

    // Only the lock user's client sessions end, not the one that ends them.
    let ended = cluster::mariadb_end_client_sessions(&node.host, node.port, &password)
        .await
        .unwrap();
    assert!(ended >= 2, "ended {ended}");
    assert!(
        cluster::mariadb_end_client_sessions(&node.host, node.port, "wrong")
            .await
            .is_err()
    );
}

// ---- Whole runs. ----

fn lockaudit() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_lockaudit"))
}

#[test]
fn a_run_without_faults_is_valid_and_leaves_no_process_and_no_data() {
    common::require_mariadb();
    let (dir, data) = (common::RunDir::new(), data_base());
    let out = dir.path().join("run");
    let output = lockaudit()
        .args(["run", "--seed", "1", "--algorithm", "mariadb-get-lock"])
        .args(["--time-limit", "3s", "--out"])
        .arg(&out)
        .env("TMPDIR", data.path())
        .output()
        .unwrap();
    common::assert_exit(&output, 0);
    let report = common::report(&out);
    assert_eq!(report["valid"], true, "{report}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert!(
        run.to_string().contains("mariadb 10.") || run.to_string().contains("mariadb 11."),
        "no MariaDB version in run.json: {run}"
    );
    let left = processes_mentioning(&data.path().display().to_string());
    assert!(left.is_empty(), "processes left: {left:?}");
    let kept: Vec<_> = std::fs::read_dir(data.path()).unwrap().flatten().collect();
    assert!(kept.is_empty(), "the server's data is left: {kept:?}");
}

#[test]
fn a_run_without_mariadbd_exits_3_naming_the_package() {
    let dir = common::RunDir::new();
    let output = lockaudit()
        .args(["run", "--seed", "1", "--algorithm", "mariadb-get-lock"])
        .args(["--time-limit", "2s", "--out"])
        .arg(dir.path().join("run"))
        .env(cluster::MARIADBD_ENV, dir.path().join("no-such-mariadbd"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("apt-get install mariadb-server"),
        "{stderr}"
    );
    assert!(stderr.contains("no-such-mariadbd"), "{stderr}");
}

#[test]
fn an_existing_redis_is_refused_naming_mariadb() {
    let output = lockaudit()
        .args(["run", "--seed", "1", "--algorithm", "mariadb-get-lock"])
        .args(["--redis", "redis://127.0.0.1:1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--redis: mariadb-get-lock runs on the MariaDB lockaudit starts itself"),
        "{stderr}"
    );
}

#[test]
fn a_refusing_mariadbd_is_a_start_error_quoting_its_log() {
    use std::os::unix::fs::PermissionsExt;
    common::require_mariadb();
    let (dir, data) = (common::RunDir::new(), data_base());
    // A "server" that says why it will not run and exits: readable and runnable by the
    // unprivileged user it runs as when the test is root.
    let fake = data.path().join("mariadbd");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'refusing to serve: a test' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let output = lockaudit()
        .args(["run", "--seed", "1", "--algorithm", "mariadb-get-lock"])
        .args(["--time-limit", "2s", "--out"])
        .arg(dir.path().join("run"))
        .env(cluster::MARIADBD_ENV, &fake)
        .env("TMPDIR", data.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ne!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("refusing to serve: a test"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let left = processes_mentioning(&data.path().display().to_string());
    assert!(left.is_empty(), "processes left: {left:?}");
}

/// The audit's row of mariadb-get-lock meets its `[expect]`: kill-servers finds the overlap
/// it must, the others what they may, and the cells that cannot act are marked so.
#[test]
fn the_audit_row_meets_its_expectations() {
    common::require_mariadb();
    let (dir, data) = (common::RunDir::new(), data_base());
    let out = dir.path().join("audit");
    let output = lockaudit()
        .args(["audit", "--algorithms", "mariadb-get-lock", "--jobs", "2"])
        .args(["--time-limit", "60s", "--out"])
        .arg(&out)
        .env("TMPDIR", data.path())
        .output()
        .unwrap();
    let matrix = std::fs::read_to_string(out.join("audit.md")).unwrap_or_default();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}\n{matrix}");
    let audit: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("audit.json")).unwrap()).unwrap();
    let cells = audit["cells"].as_array().expect("cells");
    let status = |preset: &str| {
        cells
            .iter()
            .find(|c| c["nemesis"] == preset)
            .unwrap_or_else(|| panic!("no {preset} cell: {matrix}"))
    };
    for preset in ["failover", "clock-jump", "clock-skew"] {
        assert_eq!(status(preset)["status"], "n/a", "{matrix}");
    }
    let passed = cells.iter().filter(|c| c["status"] == "pass").count();
    assert_eq!(passed, cells.len() - 3, "{matrix}");
    assert!(
        status("kill-servers")["found"].get("overlap").is_some(),
        "{matrix}"
    );
    let left = processes_mentioning(&data.path().display().to_string());
    assert!(left.is_empty(), "processes left: {left:?}");
}
