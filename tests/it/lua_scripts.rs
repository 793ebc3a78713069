//! `algorithm = "lua"`: locks written as Lua scripts, against real redis-server processes.
//!
//! The clients run the example scripts of `examples/lua/` (set-nx-px, Redisson's reentrant
//! lock and its read-write lock, read through their workload files as a run reads them); then
//! the real binary runs the set-nx-px example end to end, without faults (valid) and under
//! `pause-clients` (overlap), as the built-in `set-nx-px` does, and the rw-lock example
//! without faults (valid, readers sharing).

use crate::common;
use crate::common::redis_locks::{assert_fail, assert_ok, lease, pttl, raw, start};
use common::{
    acquire_fair_marks, acquire_ttls, assert_exit, kinds, overlapping_shared_holds, report,
};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockaudit::cluster::Endpoints;
use lockaudit::locks::{
    self, Acquired, LockClient, LockError, LockOptions, LuaScripts, Mode, Outcome,
};
use lockaudit::workload::WorkloadSpec;
use redis::aio::MultiplexedConnection;
use serde_json::Value;

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/lua")
        .join(format!("{name}.toml"))
}

/// The scripts of an example workload, read as `lockaudit run` reads them.
fn scripts_of(name: &str) -> LuaScripts {
    let spec = WorkloadSpec::from_file(&example(name)).expect("example workload reads");
    assert!(spec.algorithm.is_scripted());
    spec.lua_scripts().expect("scripts read")
}

fn opts(scripts: &LuaScripts, ttl_ms: u64, owner: &str) -> LockOptions {
    LockOptions {
        ttl_ms,
        retry_attempts: 0,
        op_timeout_ms: 500,
        client_id: owner.into(),
        scripts: Some(scripts.clone()),
        ..LockOptions::default()
    }
}

async fn client(endpoints: &Endpoints, options: &LockOptions) -> Box<dyn LockClient> {
    match locks::connect(locks::SCRIPTED, endpoints, options).await {
        Ok(c) => c,
        Err(e) => panic!("lua: connect: {e}"),
    }
}

/// The hold count of `owner` in a reentrant lock's hash.
async fn holds(conn: &mut MultiplexedConnection, key: &str, owner: &str) -> Option<i64> {
    redis::cmd("HGET")
        .arg(key)
        .arg(owner)
        .query_async(conn)
        .await
        .expect("HGET")
}

fn assert_not_ours(o: &Outcome, what: &str) {
    assert!(matches!(o, Outcome::Fail(_)), "{what}: {o:?}");
}

const RELEASED: Outcome = Outcome::Ok { lease_ms: None };

#[tokio::test]
async fn set_nx_px_scripts_exclude_release_renew_and_refuse_a_foreign_release() {
    let servers = start().await;
    let ep = servers.cluster.endpoints();
    let scripts = scripts_of("set-nx-px");
    let o = LockOptions {
        watchdog: true,
        ..opts(&scripts, 300, "owner-a")
    };
    let mut a = client(&ep, &o).await;
    let mut b = client(&ep, &opts(&scripts, 300, "owner-b")).await;
    assert!(a.renews(), "a renew script and watchdog = true");
    assert_eq!(a.renew_every(), Some(Duration::from_millis(100)));
    assert!(!b.renews(), "no watchdog");
    let key = "lock:x";
    let mut r = raw(&ep).await;

    let first = a.acquire(key).await;
    assert!(lease(&first).is_some_and(|l| l >= 300), "{first:?}");
    let value: String = redis::cmd("GET")
        .arg(key)
        .query_async(&mut r)
        .await
        .expect("GET");
    assert_eq!(value.len(), 36, "ARGV[3] is a fresh UUID: {value}");
    assert_fail(&b.acquire(key).await, "a second client while held");
    // The second client's release must not free the first one's lock.
    assert_not_ours(&b.release(key).await, "a foreign release");
    assert_not_ours(&b.renew(key).await, "a foreign renew");
    assert_fail(
        &b.acquire(key).await,
        "still held after the foreign release",
    );

    // Renewing keeps it past twice the ttl.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        match a.renew(key).await {
            Outcome::Ok { lease_ms: Some(l) } => assert!(l >= 300, "renew lease {l}"),
            other => panic!("renew: {other:?}"),
        }
    }
    assert_fail(&b.acquire(key).await, "held through renewals");
    let left = pttl(&mut r, key).await;
    assert!(left > 0 && left <= 300, "pttl {left}");

    assert_eq!(a.release(key).await, RELEASED);
    assert_eq!(pttl(&mut r, key).await, -2, "released: the key is gone");
    assert_not_ours(&a.release(key).await, "a second release");
    assert_ok(&b.acquire(key).await, "free after the release");

    // Without renewals the lease runs out, and the old holder finds out.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_ok(&a.acquire(key).await, "free after b's lease ran out");
    assert_not_ours(&b.release(key).await, "b's lease ran out");
    assert_eq!(a.release(key).await, RELEASED);
}

#[tokio::test]
async fn reentrant_scripts_nest_and_count_holds() {
    let servers = start().await;
    let ep = servers.cluster.endpoints();
    let scripts = scripts_of("reentrant");
    let mut a = client(&ep, &opts(&scripts, 5000, "owner-a")).await;
    let mut b = client(&ep, &opts(&scripts, 5000, "owner-b")).await;
    let key = "lock:x";
    let mut r = raw(&ep).await;
    assert_ok(&a.acquire(key).await, "first");
    assert_ok(&a.acquire(key).await, "nested");
    assert_eq!(
        holds(&mut r, key, "owner-a").await,
        Some(2),
        "ARGV[1] is the owner"
    );
    assert_fail(&b.acquire(key).await, "another owner");
    assert_not_ours(&b.release(key).await, "another owner's release");
    assert_eq!(a.release(key).await, RELEASED, "inner release");
    assert_eq!(holds(&mut r, key, "owner-a").await, Some(1));
    assert_fail(&b.acquire(key).await, "still held once");
    assert_eq!(a.release(key).await, RELEASED, "outer release");
    assert_eq!(holds(&mut r, key, "owner-a").await, None, "deleted at zero");
    assert_not_ours(&a.release(key).await, "a third release is not ours");
    assert_ok(&b.acquire(key).await, "free after both releases");
    assert_not_ours(&a.release(key).await, "cannot release another owner's lock");
}

#[tokio::test]
async fn steps_are_announced_and_fencing_wraps_a_lua_lock() {
    let servers = start().await;
    let ep = servers.cluster.endpoints();
    let scripts = scripts_of("set-nx-px");
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    let o = LockOptions {
        fenced: true,
        on_step: Some(Arc::new(move |s: &str| {
            log.lock().expect("step log").push(s.to_string());
        })),
        ..opts(&scripts, 1000, "owner-a")
    };
    let mut a = client(&ep, &o).await;
    let mut tokens = Vec::new();
    for _ in 0..3 {
        match a.acquire("lock:x").await {
            Acquired::Ok { token: Some(t), .. } => tokens.push(t),
            other => panic!("fenced acquire: {other:?}"),
        }
        assert_eq!(a.release("lock:x").await, RELEASED);
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    let seen = seen.lock().expect("step log").clone();
    assert_eq!(
        seen[..3],
        [
            "lua:after-acquire",
            locks::FENCED_STEP,
            "lua:before-release"
        ]
    );
    for step in [&seen[0], &seen[2]] {
        assert!(locks::algorithm(locks::SCRIPTED)
            .unwrap()
            .steps
            .contains(&step.as_str()));
    }
}

#[tokio::test]
async fn replies_outside_the_convention_and_script_errors_are_info() {
    let servers = start().await;
    let ep = servers.cluster.endpoints();
    let mut r = raw(&ep).await;
    // Writes, then fails: Redis keeps the write, so the acquire may have taken the lock.
    let half_way = LuaScripts {
        acquire: "redis.call('set', KEYS[1], ARGV[1]); return redis.call('hget', KEYS[1], 'x')"
            .into(),
        release: "return 2".into(),
        renew: Some("return 'yes'".into()),

        ..LuaScripts::default()
    };
    let mut a = client(&ep, &opts(&half_way, 1000, "owner-a")).await;
    match a.acquire("lock:x").await {
        Acquired::Info(m) => assert!(m.contains("WRONGTYPE"), "{m}"),
        other => panic!("a script error after a write: {other:?}"),
    }
    let value: Option<String> = redis::cmd("GET")
        .arg("lock:x")
        .query_async(&mut r)
        .await
        .expect("GET");
    assert_eq!(value.as_deref(), Some("owner-a"), "the write stayed");
    match a.release("lock:x").await {
        Outcome::Info(m) => assert!(m.contains("returned 2"), "{m}"),
        other => panic!("release answered 2: {other:?}"),
    }
    match a.renew("lock:x").await {
        Outcome::Info(m) => assert!(m.contains("\"yes\""), "{m}"),
        other => panic!("renew answered 'yes': {other:?}"),
    }

    // Redisson's own acquire answers the holder's PTTL when the lock is taken: outside the
    // convention, so never read as "taken".
    let redisson = LuaScripts {
        acquire: "return redis.call('pttl', KEYS[1])".into(),
        release: "return 1".into(),
        renew: None,

        ..LuaScripts::default()
    };
    let mut b = client(&ep, &opts(&redisson, 1000, "owner-b")).await;
    assert!(!b.renews());
    assert!(matches!(b.acquire("lock:x").await, Acquired::Info(_)));

    // A script that does not compile is a connect error.
    let broken = LuaScripts {
        acquire: "retrun 1".into(),
        release: "return 1".into(),
        renew: None,

        ..LuaScripts::default()
    };
    match locks::connect(locks::SCRIPTED, &ep, &opts(&broken, 1000, "c")).await {
        Err(LockError::Scripts(m)) => {
            assert!(
                m.contains("acquire script") && m.contains("compiling"),
                "{m}"
            )
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("connected with a script that does not compile"),
    }
    // And `lua` without scripts cannot connect at all.
    let none = LockOptions {
        scripts: None,
        ..opts(&redisson, 1000, "d")
    };
    assert!(matches!(
        locks::connect(locks::SCRIPTED, &ep, &none).await,
        Err(LockError::Scripts(_))
    ));
}

#[tokio::test]
async fn rw_lock_scripts_share_reads_and_exclude_writes() {
    let servers = start().await;
    let ep = servers.cluster.endpoints();
    let scripts = scripts_of("rw-lock");
    assert!(scripts.read_acquire.is_some() && scripts.read_renew.is_some());
    let mut a = client(&ep, &opts(&scripts, 5000, "owner-a")).await;
    let mut b = client(&ep, &opts(&scripts, 5000, "owner-b")).await;
    let mut w = client(&ep, &opts(&scripts, 5000, "owner-w")).await;
    assert!(a.shared(), "read scripts given: a shared mode");
    let key = "lock:x";
    let mut r = raw(&ep).await;

    // Readers share: the second read is taken while the first holds, and a writer waits.
    assert_ok(&a.acquire_mode(key, Mode::Shared).await, "first reader");
    assert_ok(&b.acquire_mode(key, Mode::Shared).await, "second reader");
    assert_eq!(
        holds(&mut r, key, "owner-b").await,
        Some(1),
        "ARGV[1] is the reader"
    );
    assert_fail(&w.acquire(key).await, "a writer while two read");
    // A shared hold is renewed by read_renew (the write renew would find no `owner:write`).
    match a.renew(key).await {
        Outcome::Ok { lease_ms: Some(l) } => assert!(l >= 5000, "renew lease {l}"),
        other => panic!("renew of a shared hold: {other:?}"),
    }
    assert_eq!(a.release_mode(key, Mode::Shared).await, RELEASED);
    assert_fail(&w.acquire(key).await, "a writer while one reads");
    assert_eq!(b.release_mode(key, Mode::Shared).await, RELEASED);
    assert_eq!(
        pttl(&mut r, key).await,
        -2,
        "the last reader deleted the hash"
    );

    // A writer excludes readers and writers; its release frees the lock for them.
    assert_ok(&w.acquire(key).await, "a writer when free");
    assert_fail(
        &a.acquire_mode(key, Mode::Shared).await,
        "a reader while one writes",
    );
    assert_fail(&b.acquire(key).await, "a writer while one writes");
    assert_not_ours(
        &a.release_mode(key, Mode::Shared).await,
        "a reader's release",
    );
    assert_eq!(w.release(key).await, RELEASED);
    assert_ok(
        &a.acquire_mode(key, Mode::Shared).await,
        "a reader after the writer",
    );

    // Without read scripts there is no shared mode: refused without asking the server.
    let mut plain = client(&ep, &opts(&scripts_of("set-nx-px"), 5000, "owner-p")).await;
    assert!(!plain.shared());
    assert_fail(
        &plain.acquire_mode("lock:y", Mode::Shared).await,
        "no shared mode",
    );
    assert_eq!(pttl(&mut r, "lock:y").await, -2, "nothing was written");
}

#[tokio::test]
async fn a_read_script_that_does_not_compile_is_a_connect_error() {
    let servers = start().await;
    let ep = servers.cluster.endpoints();
    let broken = LuaScripts {
        read_acquire: Some("retrun 1".into()),
        read_release: Some("return 1".into()),
        ..scripts_of("set-nx-px")
    };
    match locks::connect(locks::SCRIPTED, &ep, &opts(&broken, 1000, "c")).await {
        Err(LockError::Scripts(m)) => {
            assert!(
                m.contains("read_acquire script") && m.contains("compiling"),
                "{m}"
            )
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("connected with a read script that does not compile"),
    }
}

// --- the real binary ---

fn run(name: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["run", "--seed", "1"])
        .arg(format!("examples/lua/{name}.toml"))
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .expect("run lockaudit")
}

fn acquisitions(report: &Value) -> u64 {
    ["lock:0", "lock:1"]
        .iter()
        .map(|k| {
            report["stats"]["per_key"][k]["acquisitions"]
                .as_u64()
                .unwrap_or(0)
        })
        .sum()
}

#[test]
fn the_set_nx_px_example_runs_valid_without_faults() {
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let output = run("set-nx-px", &out, &["--time-limit", "4s"]);
    let stdout = assert_exit(&output, 0);
    let report = report(&out);
    assert_eq!(report["valid"], Value::Bool(true), "{stdout}");
    assert!(acquisitions(&report) > 0, "no acquisitions: {stdout}");
    // The run folder's workload carries the scripts' texts, and reads back.
    let spec = WorkloadSpec::from_file(&out.join("workload.toml")).expect("workload.toml reads");
    assert!(spec
        .lua_scripts()
        .is_some_and(|s| s.acquire.contains("'NX', 'PX'")));
    // Every acquire invoke records the ttl its script was passed (ARGV[2]: the 1 s ttl).
    let ttls = acquire_ttls(&out);
    assert!(!ttls.is_empty());
    assert!(ttls.iter().all(|t| *t == Some(1000)), "{ttls:?}");
}

#[test]
fn the_set_nx_px_example_overlaps_under_client_pauses() {
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let output = run(
        "set-nx-px",
        &out,
        &["--nemesis", "pause-clients", "--time-limit", "10s"],
    );
    let stdout = assert_exit(&output, 1);
    let report = report(&out);
    let found = kinds(&report);
    assert!(
        found.contains(&"overlap".to_string()),
        "{found:?}\n{stdout}"
    );
}

#[test]
fn a_missing_script_is_bad_input_naming_the_file_and_field() {
    let dir = common::RunDir::new();
    let workload = dir.path().join("w.toml");
    std::fs::write(
        &workload,
        "algorithm = \"lua\"\nscripts = { acquire = \"nope.lua\", release = \"nope.lua\" }\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .args(["run", "--seed", "1"])
        .arg(&workload)
        .arg("--out")
        .arg(dir.path().join("run"))
        .output()
        .expect("run lockaudit");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&workload.display().to_string()), "{stderr}");
    assert!(stderr.contains("field `scripts.acquire`"), "{stderr}");
    assert!(!dir.path().join("run").exists(), "no run started");
}

#[test]
fn a_script_redis_cannot_compile_stops_the_run_as_bad_input() {
    let dir = common::RunDir::new();
    std::fs::write(dir.path().join("acquire.lua"), "this is not lua (\n").unwrap();
    std::fs::write(
        dir.path().join("release.lua"),
        "return redis.call('del', KEYS[1])\n",
    )
    .unwrap();
    let workload = dir.path().join("w.toml");
    std::fs::write(
        &workload,
        "algorithm = \"lua\"\nscripts = { acquire = \"acquire.lua\", release = \"release.lua\" }\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .args(["run", "--seed", "1"])
        .arg(&workload)
        .args(["--time-limit", "30s", "--out"])
        .arg(dir.path().join("run"))
        .output()
        .expect("run lockaudit");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("acquire script"), "{stderr}");
    assert!(stderr.contains("compiling"), "{stderr}");
    // Stopped before any worker started: nothing was recorded.
    assert!(!dir.path().join("run/history.jsonl").exists());
}

#[test]
fn the_rw_lock_example_runs_valid_with_readers_sharing() {
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let output = run("rw-lock", &out, &["--time-limit", "5s"]);
    let stdout = assert_exit(&output, 0);
    let report = report(&out);
    assert_eq!(report["valid"], Value::Bool(true), "{stdout}");
    // Readers really held together: with the mode dropped every hold would be exclusive
    // and no two would overlap.
    let shared = overlapping_shared_holds(&out);
    assert!(shared > 0, "no two shared holds overlapped: {stdout}");
}

#[test]
fn fair_marks_every_acquire_of_a_lua_lock() {
    let dir = common::RunDir::new();
    let workload = dir.path().join("fair.toml");
    let example = std::fs::read_to_string(example("set-nx-px")).unwrap();
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/lua/set-nx-px");
    let text = example
        .replace("\"set-nx-px/", &format!("\"{}/", scripts.display()))
        .replace(
            "\nalgorithm = \"lua\"",
            "\nalgorithm = \"lua\"\nfair = true",
        );
    std::fs::write(&workload, text).unwrap();
    let out = dir.path().join("run");
    let output = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .args(["run", "--seed", "1"])
        .arg(&workload)
        .args(["--time-limit", "2s", "--out"])
        .arg(&out)
        .output()
        .expect("run lockaudit");
    let stdout = assert_exit(&output, 0);
    let marks = acquire_fair_marks(&out);
    assert!(!marks.is_empty(), "{stdout}");
    assert!(marks.iter().all(|m| *m == Some(true)), "{marks:?}");

    // Without `fair`, no acquire says it.
    let plain = dir.path().join("plain");
    let output = run("set-nx-px", &plain, &["--time-limit", "1s"]);
    assert_exit(&output, 0);
    assert!(acquire_fair_marks(&plain).iter().all(Option::is_none));
}

#[test]
fn read_share_without_read_scripts_or_with_a_missing_one_is_bad_input() {
    let dir = common::RunDir::new();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/lua/set-nx-px");
    let base = format!(
        "algorithm = \"lua\"\nread_share = 0.5\nscripts = {{ acquire = \"{0}/acquire.lua\", release = \"{0}/release.lua\"",
        examples.display()
    );
    for (extra, field, names) in [
        ("", "field `scripts.read_acquire`", "read_share"),
        (
            ", read_acquire = \"missing.lua\", read_release = \"missing.lua\"",
            "field `scripts.read_acquire`",
            "missing.lua",
        ),
    ] {
        let workload = dir.path().join("w.toml");
        std::fs::write(&workload, format!("{base}{extra} }}\n")).unwrap();
        let output = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
            .args(["run", "--seed", "1"])
            .arg(&workload)
            .arg("--out")
            .arg(dir.path().join("run"))
            .output()
            .expect("run lockaudit");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(&workload.display().to_string()), "{stderr}");
        assert!(stderr.contains(field), "{stderr}");
        assert!(stderr.contains(names), "{stderr}");
        assert!(!dir.path().join("run").exists(), "no run started");
    }
}

#[test]
fn a_read_script_redis_cannot_compile_stops_the_run_as_bad_input() {
    let dir = common::RunDir::new();
    std::fs::write(dir.path().join("ok.lua"), "return 1\n").unwrap();
    std::fs::write(dir.path().join("broken.lua"), "this is not lua (\n").unwrap();
    let workload = dir.path().join("w.toml");
    std::fs::write(
        &workload,
        "algorithm = \"lua\"\nread_share = 0.5\nscripts = { acquire = \"ok.lua\", release = \"ok.lua\", read_acquire = \"ok.lua\", read_release = \"broken.lua\" }\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .args(["run", "--seed", "1"])
        .arg(&workload)
        .args(["--time-limit", "30s", "--out"])
        .arg(dir.path().join("run"))
        .output()
        .expect("run lockaudit");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("read_release script"), "{stderr}");
    assert!(stderr.contains("compiling"), "{stderr}");
    assert!(!dir.path().join("run/history.jsonl").exists());
}
