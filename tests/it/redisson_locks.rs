//! `rw-lock` and `fair-lock`, Redisson's read-write and fair locks, against real
//! redis-server processes (no mocks): readers share and writers exclude, both nest, the
//! watchdog renews, a fair lock grants waiters in their queue's order and drops a waiter that
//! stopped polling once its wait time is over; and `lockaudit run` of each built-in workload
//! is valid without faults.

use crate::common;
use crate::common::redis_locks::{client, raw, start};

use std::process::Command;
use std::time::{Duration, Instant};

use lockaudit::locks::{Acquired, LockOptions, Mode, Outcome};

fn opts(ttl_ms: u64, owner: &str) -> LockOptions {
    LockOptions {
        ttl_ms,
        retry_attempts: 0,
        op_timeout_ms: 1000,
        client_id: owner.into(),
        ..LockOptions::default()
    }
}

fn ok(a: &Acquired, what: &str) {
    assert!(matches!(a, Acquired::Ok { .. }), "{what}: {a:?}");
}

fn refused(a: &Acquired, what: &str) {
    assert!(matches!(a, Acquired::Fail(_)), "{what}: {a:?}");
}

fn released(o: &Outcome, what: &str) {
    assert!(matches!(o, Outcome::Ok { .. }), "{what}: {o:?}");
}

#[tokio::test]
async fn rw_lock_readers_share_and_a_writer_excludes_both() {
    let servers = start().await;
    let ep = servers.cluster.endpoints();
    let mut a = client("rw-lock", &ep, &opts(5000, "a")).await;
    let mut b = client("rw-lock", &ep, &opts(5000, "b")).await;
    let mut w = client("rw-lock", &ep, &opts(5000, "w")).await;
    assert!(lockaudit::locks::algorithm("rw-lock")
        .unwrap()
        .takes_shared(&*a));
    let key = "lock:rw";

    ok(&a.acquire_mode(key, Mode::Shared).await, "first reader");
    ok(
        &b.acquire_mode(key, Mode::Shared).await,
        "second reader shares",
    );
    refused(&w.acquire(key).await, "writer while read");
    released(&a.release_mode(key, Mode::Shared).await, "first reader");
    refused(
        &w.acquire_mode(key, Mode::Exclusive).await,
        "writer while one reads",
    );
    released(&b.release_mode(key, Mode::Shared).await, "second reader");

    ok(&w.acquire(key).await, "writer once the readers left");
    refused(
        &a.acquire_mode(key, Mode::Shared).await,
        "reader while written",
    );
    refused(&b.acquire(key).await, "writer while written");
    released(&w.release(key).await, "writer");
    ok(
        &a.acquire_mode(key, Mode::Shared).await,
        "reader after the writer",
    );
    // Another owner's release is refused, as RLock's IllegalMonitorStateException.
    assert!(matches!(
        b.release_mode(key, Mode::Shared).await,
        Outcome::Fail(_)
    ));
    released(&a.release_mode(key, Mode::Shared).await, "reader");
    let mut r = raw(&ep).await;
    let exists: i64 = redis::cmd("EXISTS")
        .arg(key)
        .query_async(&mut r)
        .await
        .unwrap();
    assert_eq!(exists, 0, "the last release deletes the hash");
}

#[tokio::test]
async fn rw_lock_nests_reads_and_writes_and_a_writer_may_read() {
    let servers = start().await;
    let ep = servers.cluster.endpoints();
    let mut w = client("rw-lock", &ep, &opts(5000, "w")).await;
    let mut other = client("rw-lock", &ep, &opts(5000, "o")).await;
    let key = "lock:rw";
    let mut r = raw(&ep).await;

    ok(&w.acquire(key).await, "write");
    ok(&w.acquire(key).await, "nested write");
    let count: i64 = redis::cmd("HGET")
        .arg(key)
        .arg("w:write")
        .query_async(&mut r)
        .await
        .unwrap();
    assert_eq!(count, 2);
    ok(&w.acquire_mode(key, Mode::Shared).await, "the writer reads");
    refused(
        &other.acquire_mode(key, Mode::Shared).await,
        "another reader while written",
    );
    released(&w.release(key).await, "inner write");
    released(&w.release(key).await, "outer write");
    // The writer's read remains: the mode goes back to read, and readers may join.
    let mode: String = redis::cmd("HGET")
        .arg(key)
        .arg("mode")
        .query_async(&mut r)
        .await
        .unwrap();
    assert_eq!(mode, "read");
    ok(
        &other.acquire_mode(key, Mode::Shared).await,
        "reader joins the writer's read",
    );
    ok(&other.acquire_mode(key, Mode::Shared).await, "nested read");
    released(
        &w.release_mode(key, Mode::Shared).await,
        "the writer's read",
    );
    released(&other.release_mode(key, Mode::Shared).await, "inner read");
    refused(&w.acquire(key).await, "still read once");
    released(&other.release_mode(key, Mode::Shared).await, "outer read");
    ok(&w.acquire(key).await, "free again");
}

#[tokio::test]
async fn rw_lock_watchdog_renews_reads_and_writes() {
    let servers = start().await;
    let ep = servers.cluster.endpoints();
    let o = |owner: &str| LockOptions {
        watchdog: true,
        ..opts(300, owner)
    };
    let mut reader = client("rw-lock", &ep, &o("r")).await;
    let mut writer = client("rw-lock", &ep, &o("w")).await;
    assert!(reader.renews());
    assert_eq!(reader.renew_every(), Some(Duration::from_millis(100)));
    for (mode, holder) in [(Mode::Shared, &mut reader), (Mode::Exclusive, &mut writer)] {
        let key = format!("lock:{mode:?}");
        ok(&holder.acquire_mode(&key, mode).await, "take");
        for _ in 0..4 {
            tokio::time::sleep(Duration::from_millis(150)).await;
            match holder.renew(&key).await {
                Outcome::Ok { lease_ms: Some(l) } => assert!(l >= 300, "renew lease {l}"),
                other => panic!("{mode:?}: renew: {other:?}"),
            }
        }
        let mut r = raw(&ep).await;
        let left: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(&mut r)
            .await
            .unwrap();
        assert!(
            left > 0 && left <= 300,
            "{mode:?}: pttl {left} after 600 ms"
        );
        released(&holder.release_mode(&key, mode).await, "release");
        assert!(matches!(holder.renew(&key).await, Outcome::Fail(_)));
    }
    // An expired hash: the release still answers "unlocked", as Redisson's scripts do.
    ok(
        &reader.acquire_mode("lock:gone", Mode::Shared).await,
        "take",
    );
    tokio::time::sleep(Duration::from_millis(450)).await;
    released(
        &reader.release_mode("lock:gone", Mode::Shared).await,
        "release after expiry",
    );
}

#[tokio::test]
async fn a_lock_without_a_shared_mode_refuses_a_shared_acquire() {
    let servers = start().await;
    let ep = servers.cluster.endpoints();
    let mut a = client("reentrant", &ep, &opts(5000, "a")).await;
    assert!(!lockaudit::locks::algorithm("reentrant")
        .unwrap()
        .takes_shared(&*a));
    assert!(!lockaudit::locks::algorithm("reentrant")
        .unwrap()
        .is_fair(&*a));
    refused(
        &a.acquire_mode("lock:x", Mode::Shared).await,
        "shared on reentrant",
    );
    ok(
        &a.acquire_mode("lock:x", Mode::Exclusive).await,
        "exclusive",
    );
    released(&a.release_mode("lock:x", Mode::Exclusive).await, "release");
}

#[tokio::test]
async fn fenced_rw_lock_gives_readers_tokens_too() {
    let servers = start().await;
    let ep = servers.cluster.endpoints();
    let fenced = |owner: &str| LockOptions {
        fenced: true,
        ..opts(5000, owner)
    };
    let mut a = client("rw-lock", &ep, &fenced("a")).await;
    let mut b = client("rw-lock", &ep, &fenced("b")).await;
    assert!(lockaudit::locks::algorithm("rw-lock")
        .unwrap()
        .takes_shared(&*a));
    let token = |x: &Acquired| match x {
        Acquired::Ok { token: Some(t), .. } => *t,
        other => panic!("no token: {other:?}"),
    };
    let ta = token(&a.acquire_mode("lock:f", Mode::Shared).await);
    let tb = token(&b.acquire_mode("lock:f", Mode::Shared).await);
    assert!(tb > ta);
    refused(&a.acquire("lock:f").await, "writer while read");
}

fn fair(owner: &str, wait_ms: u64) -> LockOptions {
    LockOptions {
        wait_ms,
        op_timeout_ms: 3000,
        ..opts(10_000, owner)
    }
}

#[tokio::test]
async fn fair_lock_grants_waiters_in_queue_order() {
    let servers = start().await;
    let ep = servers.cluster.endpoints();
    let mut holder = client("fair-lock", &ep, &fair("h", 2000)).await;
    assert!(lockaudit::locks::algorithm("fair-lock")
        .unwrap()
        .is_fair(&*holder));
    assert_eq!(holder.wait_ms(), Some(2000));
    let key = "lock:fair";
    ok(&holder.acquire(key).await, "holder");
    ok(&holder.acquire(key).await, "holder nests");
    released(&holder.release(key).await, "inner release");

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut waiters = Vec::new();
    for name in ["w1", "w2", "w3"] {
        let mut c = client("fair-lock", &ep, &fair(name, 2000)).await;
        let tx = tx.clone();
        waiters.push(tokio::spawn(async move {
            let got = c.acquire("lock:fair").await;
            ok(&got, "waiter");
            tx.send(name.to_string()).unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            released(&c.release("lock:fair").await, "waiter release");
        }));
        // Queued one after the other.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut r = raw(&ep).await;
    let queue: Vec<String> = redis::cmd("LRANGE")
        .arg("redisson_lock_queue:{lock:fair}")
        .arg(0)
        .arg(-1)
        .query_async(&mut r)
        .await
        .unwrap();
    assert_eq!(queue, ["w1", "w2", "w3"]);
    drop(tx);
    released(&holder.release(key).await, "holder");
    let mut order = Vec::new();
    for _ in 0..3 {
        order.push(rx.recv().await.expect("a grant"));
    }
    for w in waiters {
        w.await.expect("waiter task");
    }
    assert_eq!(order, ["w1", "w2", "w3"]);
}

#[tokio::test]
async fn fair_lock_drops_a_waiter_that_stopped_polling_after_its_wait_time() {
    let servers = start().await;
    let ep = servers.cluster.endpoints();
    let key = "lock:fair";
    let short = |owner: &str, wait_ms: u64| LockOptions {
        ttl_ms: 1000,
        ..fair(owner, wait_ms)
    };
    let mut holder = client("fair-lock", &ep, &short("h", 600)).await;
    ok(&holder.acquire(key).await, "holder");
    // A waiter that queues and then dies at its first wait (it never polls again). Its
    // timeout: the lock's PTTL (1 s) + its wait time (600 ms) from when it queued.
    let mut dead = client("fair-lock", &ep, &short("dead", 600)).await;
    let queued = Instant::now();
    let dying = tokio::spawn(async move { dead.acquire("lock:fair").await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    dying.abort();
    let mut r = raw(&ep).await;
    let queue: Vec<String> = redis::cmd("LRANGE")
        .arg("redisson_lock_queue:{lock:fair}")
        .arg(0)
        .arg(-1)
        .query_async(&mut r)
        .await
        .unwrap();
    assert_eq!(queue, ["dead"]);
    released(&holder.release(key).await, "holder");

    // The lock is free, but the dead waiter heads the queue: a newcomer waits in vain...
    let mut next = client("fair-lock", &ep, &short("next", 600)).await;
    refused(
        &next.acquire(key).await,
        "behind a dead waiter, within its timeout",
    );
    // ...until the dead waiter's timeout has passed: then it is dropped.
    let mut late = client("fair-lock", &ep, &short("late", 600)).await;
    tokio::time::sleep(Duration::from_millis(1900).saturating_sub(queued.elapsed())).await;
    ok(&late.acquire(key).await, "after the dead waiter's timeout");
    let queue: Vec<String> = redis::cmd("LRANGE")
        .arg("redisson_lock_queue:{lock:fair}")
        .arg(0)
        .arg(-1)
        .query_async(&mut r)
        .await
        .unwrap();
    assert!(queue.is_empty(), "{queue:?}");
}

#[tokio::test]
async fn fair_lock_renews_and_a_waiter_that_gives_up_leaves_the_queue() {
    let servers = start().await;
    let ep = servers.cluster.endpoints();
    let key = "lock:fair";
    // The waiter gives up well before the holder's last renewal runs out (200 ms
    // of waiting against a 600 ms lease), so a slow machine cannot let it in.
    let o = |owner: &str| LockOptions {
        watchdog: true,
        ..fair(owner, 200)
    };
    let mut holder = client(
        "fair-lock",
        &ep,
        &LockOptions {
            ttl_ms: 600,
            ..o("h")
        },
    )
    .await;
    ok(&holder.acquire(key).await, "holder");
    let mut waiter = client("fair-lock", &ep, &o("w")).await;
    // Renewed for longer than one lease: without the renewals it would have expired.
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(matches!(holder.renew(key).await, Outcome::Ok { lease_ms: Some(l) } if l >= 600));
    }
    let started = Instant::now();
    refused(&waiter.acquire(key).await, "held through renewals");
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
    let mut r = raw(&ep).await;
    let queued: i64 = redis::cmd("LLEN")
        .arg("redisson_lock_queue:{lock:fair}")
        .query_async(&mut r)
        .await
        .unwrap();
    assert_eq!(
        queued, 0,
        "a waiter whose wait time ran out takes itself out"
    );
    released(&holder.release(key).await, "holder");
    ok(&waiter.acquire(key).await, "free");
}

fn run_valid(algorithm: &str, extra: &[&str]) {
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let output = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .args([
            "run",
            "--seed",
            "1",
            "--algorithm",
            algorithm,
            "--time-limit",
            "3s",
            "--out",
        ])
        .arg(&out)
        .args(extra)
        .output()
        .expect("run lockaudit");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    let history = std::fs::read_to_string(out.join("history.jsonl")).unwrap();
    match algorithm {
        "rw-lock" => {
            assert!(history.contains(r#""mode":"shared""#), "no reads");
            assert!(history.contains(r#""f":"write""#), "no writes");
        }
        _ => {
            assert!(
                history.contains(r#""fair":true"#),
                "acquires not marked fair"
            );
            // The built-in workload's `wait`, recorded on every acquire.
            let spec =
                lockaudit::workload::builtin::workload("fair-lock").expect("built-in workload");
            let wait = spec.wait.expect("fair-lock waits").0;
            assert!(
                history.contains(&format!(r#""wait_ms":{wait}"#)),
                "no wait_ms {wait}"
            );
        }
    }
}

#[test]
fn a_fault_free_rw_lock_run_is_valid() {
    run_valid("rw-lock", &[]);
}

#[test]
fn a_fault_free_fair_lock_run_is_valid() {
    // An invoke is timed before its request leaves the worker; on a busy machine the
    // scheduler can hold a worker back longer than the default 10 ms tolerance (13 ms beside
    // two CPU hogs in CI), and the later invoke reaches the queue first, which no history
    // tells from a queue jump. 100 ms is the tolerance for a busy machine.
    run_valid("fair-lock", &["--fairness-tolerance", "100ms"]);
}
