//! The built-in lock algorithms against real redis-server processes (no mocks; rw-lock and
//! fair-lock have tests/it/redisson_locks.rs): each excludes a second client while held, frees
//! on release (except `lua-getset`, whose release frees nothing), expires, renews, nests,
//! fences, and shows the flaw its seed is known for.
//!
//! Every test starts its own servers through `lockaudit::cluster`, so tests run in parallel
//! and a failing one leaves nothing behind (the cluster's guard ends its servers on drop).

use crate::common::redis_locks::{assert_fail, assert_ok, client, lease, pttl};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lockaudit::cluster::{self, Cluster, ClusterSpec, Endpoints, Topology};
use lockaudit::locks::{self, Acquired, LockError, LockOptions, Outcome};
use nix::sys::signal::Signal;
use redis::aio::MultiplexedConnection;

/// A running cluster and the folder its data lives in (kept until the test ends).
struct Servers {
    cluster: Cluster,
    _dir: tempfile::TempDir,
}

impl Servers {
    fn endpoints(&self) -> Endpoints {
        self.cluster.endpoints()
    }
}

async fn start(topology: Topology, masters: usize) -> Servers {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut spec = ClusterSpec::new(topology, dir.path());
    spec.masters = masters;
    let cluster = cluster::start(&spec).await.expect("start redis-server");
    Servers { cluster, _dir: dir }
}

/// Options for quick tests: no retries (a taken lock fails at once), short time limits.
fn opts(ttl_ms: u64) -> LockOptions {
    LockOptions {
        ttl_ms,
        retry_attempts: 0,
        op_timeout_ms: 500,
        ..LockOptions::default()
    }
}

/// A plain connection to lock node `i`, to look at what the algorithm left in Redis.
async fn raw(endpoints: &Endpoints, i: usize) -> MultiplexedConnection {
    let node = &endpoints.nodes[i];
    let mut url = format!("redis://{}:{}/", node.host, node.port);
    if let Some(pw) = &endpoints.password {
        url = format!("redis://:{pw}@{}:{}/", node.host, node.port);
    }
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("raw connection")
}

fn token(a: &Acquired) -> i64 {
    match a {
        Acquired::Ok { token: Some(t), .. } => *t,
        other => panic!("expected ok with a token, got {other:?}"),
    }
}

const RELEASED: Outcome = Outcome::Ok { lease_ms: None };

/// Pauses lock nodes with SIGSTOP and resumes them (SIGCONT) when dropped, so a failing
/// assertion never leaves a server stopped.
struct Paused<'a> {
    cluster: &'a Cluster,
    names: Vec<String>,
}

impl<'a> Paused<'a> {
    fn new(servers: &'a Servers, nodes: &[usize]) -> Self {
        let ep = servers.endpoints();
        let names: Vec<String> = nodes.iter().map(|&i| ep.nodes[i].name.clone()).collect();
        for name in &names {
            servers
                .cluster
                .signal(name, Signal::SIGSTOP)
                .expect("SIGSTOP");
        }
        Paused {
            cluster: &servers.cluster,
            names,
        }
    }
}

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = self.cluster.signal(name, Signal::SIGCONT);
        }
    }
}

/// Crashes lock node `i` (SIGKILL): it stays down.
fn kill_node(servers: &mut Servers, i: usize) {
    let name = servers.endpoints().nodes[i].name.clone();
    servers.cluster.kill(&name).expect("kill");
}

/// Two clients, one key: the second cannot take the lock while the first holds it, and can
/// once the first released it.
async fn excludes_then_hands_over(algorithm: &str, topology: Topology) {
    let servers = start(topology, 5).await;
    let ep = servers.endpoints();
    let o = opts(5000);
    let mut a = client(algorithm, &ep, &o).await;
    let mut b = client(algorithm, &ep, &o).await;
    let key = "lock:x";

    let first = a.acquire(key).await;
    assert_ok(&first, algorithm);
    match (algorithm, lease(&first)) {
        ("setnx-del", None) => {}
        ("redlock", Some(l)) => assert!(l > 0 && l < 5000, "redlock validity {l}"),
        (_, Some(l)) => assert!(l >= 5000, "{algorithm}: lease {l} shorter than the ttl"),
        (_, None) => panic!("{algorithm}: no lease"),
    }
    assert_fail(&b.acquire(key).await, "second client while held");
    assert_eq!(a.release(key).await, RELEASED, "{algorithm}: release");
    assert_ok(&b.acquire(key).await, "second client after release");
    assert_eq!(
        b.release(key).await,
        RELEASED,
        "{algorithm}: second release"
    );
}

#[tokio::test]
async fn setnx_del_excludes_and_release_frees() {
    excludes_then_hands_over("setnx-del", Topology::Single).await;
}

#[tokio::test]
async fn setnx_expire_excludes_and_release_frees() {
    excludes_then_hands_over("setnx-expire", Topology::Single).await;
}

#[tokio::test]
async fn setnx_getset_excludes_and_release_frees() {
    excludes_then_hands_over("setnx-getset", Topology::Single).await;
}

#[tokio::test]
async fn set_nx_px_excludes_and_release_frees() {
    excludes_then_hands_over("set-nx-px", Topology::Single).await;
}

#[tokio::test]
async fn reentrant_excludes_and_release_frees() {
    excludes_then_hands_over("reentrant", Topology::Single).await;
}

#[tokio::test]
async fn redlock_excludes_and_release_frees() {
    excludes_then_hands_over("redlock", Topology::Independent).await;
}

#[tokio::test]
async fn set_nx_px_finds_the_primary_through_sentinel() {
    excludes_then_hands_over("set-nx-px", Topology::Sentinel).await;
}

#[tokio::test]
async fn lua_getset_release_frees_nothing() {
    let servers = start(Topology::Single, 1).await;
    let ep = servers.endpoints();
    let o = opts(1000);
    let mut a = client("lua-getset", &ep, &o).await;
    let mut b = client("lua-getset", &ep, &o).await;
    let key = "lock:x";

    let got = a.acquire(key).await;
    let l = lease(&got).expect("a lease");
    assert!(l >= 1000, "lease {l}");
    assert_fail(&b.acquire(key).await, "second client while held");
    // The release reports success, as the seed believes…
    assert_eq!(a.release(key).await, RELEASED);
    // …yet the lock is still there, and nobody can take it until its timestamp passes.
    assert_fail(&b.acquire(key).await, "second client after the release");
    assert_fail(&a.acquire(key).await, "even the releaser");
    let released = Instant::now();
    let deadline = released + Duration::from_secs(5);
    loop {
        if matches!(b.acquire(key).await, Acquired::Ok { .. }) {
            break;
        }
        assert!(Instant::now() < deadline, "the lock never expired");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        released.elapsed() >= Duration::from_millis(900),
        "taken over only {:?} after the release",
        released.elapsed()
    );
}

#[tokio::test]
async fn set_nx_px_lease_expiry_frees_and_the_old_holder_finds_out() {
    let servers = start(Topology::Single, 1).await;
    let ep = servers.endpoints();
    let o = opts(200);
    let mut a = client("set-nx-px", &ep, &o).await;
    let mut b = client("set-nx-px", &ep, &o).await;
    let key = "lock:x";

    let l = lease(&a.acquire(key).await).expect("a lease");
    assert!((200..400).contains(&l), "lease {l}");
    assert_fail(&b.acquire(key).await, "while the lease runs");
    tokio::time::sleep(Duration::from_millis(260)).await;
    assert_ok(&b.acquire(key).await, "after the lease ran out");
    // The old holder's compare-and-delete / compare-and-pexpire see another value.
    assert!(matches!(a.renew(key).await, Outcome::Fail(_)));
    assert!(matches!(a.release(key).await, Outcome::Fail(_)));
    // …and did not touch the new holder's lock.
    assert_fail(&a.acquire(key).await, "the new holder still holds it");
    assert_eq!(b.release(key).await, RELEASED);
}

/// Renewing every ~ttl/2 keeps the lock well past its ttl.
async fn renew_extends(algorithm: &str) {
    let servers = start(Topology::Single, 1).await;
    let ep = servers.endpoints();
    let o = LockOptions {
        watchdog: true,
        ..opts(300)
    };
    let mut a = client(algorithm, &ep, &o).await;
    let mut b = client(algorithm, &ep, &o).await;
    assert!(a.renews());
    assert_eq!(a.renew_every(), Some(Duration::from_millis(100)));
    let key = "lock:x";

    assert_ok(&a.acquire(key).await, algorithm);
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        match a.renew(key).await {
            Outcome::Ok { lease_ms: Some(l) } => assert!(l >= 300, "renew lease {l}"),
            other => panic!("{algorithm}: renew: {other:?}"),
        }
    }
    // 600 ms after the acquire, twice the ttl: still held.
    assert_fail(&b.acquire(key).await, "held through renewals");
    let mut r = raw(&ep, 0).await;
    let left = pttl(&mut r, key).await;
    assert!(left > 0 && left <= 300, "pttl {left}");
    assert_eq!(a.release(key).await, RELEASED);
    // Without renewals a lease is not extended: a client that never held it cannot renew.
    assert!(matches!(b.renew(key).await, Outcome::Fail(_)));
}

#[tokio::test]
async fn set_nx_px_renew_extends_the_lease() {
    renew_extends("set-nx-px").await;
}

#[tokio::test]
async fn reentrant_renew_extends_the_lease() {
    renew_extends("reentrant").await;
}

#[tokio::test]
async fn reentrant_nesting_counts() {
    let servers = start(Topology::Single, 1).await;
    let ep = servers.endpoints();
    let o = LockOptions {
        client_id: "owner-a".into(),
        ..opts(5000)
    };
    let mut a = client("reentrant", &ep, &o).await;
    let mut b = client("reentrant", &ep, &opts(5000)).await;
    let key = "lock:x";
    let mut r = raw(&ep, 0).await;

    assert_ok(&a.acquire(key).await, "first");
    assert_ok(&a.acquire(key).await, "nested");
    let count: i64 = redis::cmd("HGET")
        .arg(key)
        .arg("owner-a")
        .query_async(&mut r)
        .await
        .expect("HGET");
    assert_eq!(count, 2);
    assert_fail(&b.acquire(key).await, "another client");
    assert_eq!(a.release(key).await, RELEASED, "inner release");
    assert_fail(&b.acquire(key).await, "still held once");
    assert_eq!(a.release(key).await, RELEASED, "outer release");
    assert!(
        matches!(a.release(key).await, Outcome::Fail(_)),
        "a third release is not ours"
    );
    assert_ok(&b.acquire(key).await, "free after both releases");
    assert!(
        matches!(a.release(key).await, Outcome::Fail(_)),
        "cannot release another owner's lock"
    );
}

#[tokio::test]
async fn reentrant_waiter_wakes_on_the_unlock_message() {
    let servers = start(Topology::Single, 1).await;
    let ep = servers.endpoints();
    let mut a = client("reentrant", &ep, &opts(10_000)).await;
    // Waits up to 5 s for its one retry, unless the unlock message wakes it.
    let waiting = LockOptions {
        retry_attempts: 1,
        retry_backoff_ms: 5000,
        retry_jitter_ms: 0,
        ..opts(10_000)
    };
    let mut b = client("reentrant", &ep, &waiting).await;
    let key = "lock:x";
    assert_ok(&a.acquire(key).await, "a");
    let started = Instant::now();
    let waiter = tokio::spawn(async move { b.acquire("lock:x").await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(a.release(key).await, RELEASED);
    let got = waiter.await.expect("waiter task");
    assert_ok(&got, "woken waiter");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "woke after {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn fenced_tokens_increase_with_every_acquisition() {
    let servers = start(Topology::Single, 1).await;
    let ep = servers.endpoints();
    let o = LockOptions {
        fenced: true,
        ..opts(5000)
    };
    for algorithm in [
        "setnx-del",
        "setnx-expire",
        "setnx-getset",
        "set-nx-px",
        "reentrant",
    ] {
        let key = format!("lock:{algorithm}");
        let mut a = client(algorithm, &ep, &o).await;
        let mut b = client(algorithm, &ep, &o).await;
        let mut last = 0;
        for round in 0..3 {
            let c = if round % 2 == 0 { &mut a } else { &mut b };
            let t = token(&c.acquire(&key).await);
            assert!(t > last, "{algorithm}: token {t} after {last}");
            last = t;
            assert_eq!(c.release(&key).await, RELEASED, "{algorithm}");
        }
    }
    // lua-getset cannot hand over quickly; one acquisition still gets a token.
    let mut l = client("lua-getset", &ep, &o).await;
    assert!(token(&l.acquire("lock:lua").await) >= 1);
}

#[tokio::test]
async fn fenced_tokens_count_on_the_storage_server_and_survive_a_lock_server_restart() {
    let mut servers = start(Topology::Independent, 5).await;
    let ep = servers.endpoints();
    let o = LockOptions {
        fenced: true,
        ..opts(5000)
    };
    let mut a = client("redlock", &ep, &o).await;
    let mut b = client("redlock", &ep, &o).await;
    let t1 = token(&a.acquire("lock:x").await);
    assert_eq!(a.release("lock:x").await, RELEASED);
    let t2 = token(&b.acquire("lock:x").await);
    assert!(t2 > t1);
    assert_eq!(b.release("lock:x").await, RELEASED);
    let storage_url = ep.url(&ep.storage);
    let mut storage = redis::Client::open(storage_url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("storage");
    let counter: i64 = redis::cmd("GET")
        .arg("lock:x:fence")
        .query_async(&mut storage)
        .await
        .expect("GET");
    assert_eq!(counter, t2);
    // A lock server restarting empty does not set the tokens back.
    servers.cluster.kill("master-0").expect("kill");
    servers
        .cluster
        .restart_empty("master-0")
        .await
        .expect("restart");
    let mut c = client("redlock", &ep, &o).await;
    let t3 = token(&c.acquire("lock:x").await);
    assert!(t3 > t2, "{t3} after {t2}");
}

#[tokio::test]
async fn redlock_needs_a_quorum_of_masters() {
    let mut servers = start(Topology::Independent, 5).await;
    let ep = servers.endpoints();
    // A killed master refuses at once; a live one on a busy machine can take longer than a
    // tight timeout (50 ms left one of three unanswered in CI beside two CPU hogs).
    let o = LockOptions {
        node_timeout_ms: Some(1000),
        ..opts(2000)
    };
    let mut a = client("redlock", &ep, &o).await;
    let key = "lock:x";

    // Two masters down: 3 of 5 is still a quorum.
    kill_node(&mut servers, 3);
    kill_node(&mut servers, 4);
    let l = lease(&a.acquire(key).await).expect("validity");
    assert!(l > 0 && l < 2000, "validity {l}");
    // The lock is on exactly the three live masters.
    for i in 0..3 {
        let mut r = raw(&ep, i).await;
        assert!(pttl(&mut r, key).await > 0, "master {i}");
    }
    assert_eq!(a.release(key).await, RELEASED);

    // A third one down: no quorum, and the partial locks are undone.
    kill_node(&mut servers, 2);
    assert_fail(&a.acquire(key).await, "2 of 5 masters");
    for i in 0..2 {
        let mut r = raw(&ep, i).await;
        assert_eq!(pttl(&mut r, key).await, -2, "master {i} still locked");
    }
}

#[tokio::test]
async fn redlock_with_three_masters_paused_does_not_acquire() {
    let servers = start(Topology::Independent, 5).await;
    let ep = servers.endpoints();
    // Retries do not hide the pause: an indeterminate round ends the acquire at once.
    let o = LockOptions {
        node_timeout_ms: Some(50),
        retry_attempts: 5,
        retry_backoff_ms: 50,
        ..opts(2000)
    };
    let mut a = client("redlock", &ep, &o).await;
    // Connected to every master first: a connection opened to a paused master fails before
    // the SET is sent, a definite failure ("no quorum"), which is not what this test is about.
    assert_ok(&a.acquire("lock:w").await, "before the pause");
    assert_eq!(a.release("lock:w").await, RELEASED);
    let started = Instant::now();
    let got = {
        let _paused = Paused::new(&servers, &[0, 1, 2]);
        a.acquire("lock:x").await
    };
    // The paused masters will run our queued SETs when they wake: the lock may be ours.
    assert!(matches!(got, Acquired::Info(_)), "{got:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
    // Once they are back, the quorum works again.
    assert_ok(&a.acquire("lock:y").await, "after resume");
}

#[tokio::test]
async fn setnx_getset_never_promises_more_than_the_ttl_from_its_start() {
    // The lease is read off a whole-millisecond clock; a tick between the start and the
    // timestamp once made it the ttl + 1 ms, longer than the lock could live (bad-lease).
    let servers = start(Topology::Single, 1).await;
    let ep = servers.endpoints();
    let mut a = client("setnx-getset", &ep, &opts(1000)).await;
    let mut leases = Vec::new();
    for i in 0..300 {
        let key = format!("lock:{i}");
        let started = std::time::Instant::now();
        let got = a.acquire(&key).await;
        let took = started.elapsed();
        let l = lease(&got).expect("lease");
        assert!(
            Duration::from_millis(l as u64) <= Duration::from_millis(1000) + took,
            "a lease of {l} ms after {took:?}"
        );
        leases.push(l);
        assert_eq!(a.release(&key).await, RELEASED);
    }
    assert!(leases.iter().all(|&l| l >= 1000), "{leases:?}");
}

#[tokio::test]
async fn setnx_getset_takes_over_an_expired_lock() {
    let servers = start(Topology::Single, 1).await;
    let ep = servers.endpoints();
    let o = opts(200);
    let mut a = client("setnx-getset", &ep, &o).await;
    let mut b = client("setnx-getset", &ep, &o).await;
    let key = "lock:x";
    let mut r = raw(&ep, 0).await;

    assert_ok(&a.acquire(key).await, "a");
    assert_fail(
        &b.acquire(key).await,
        "b while a's timestamp is in the future",
    );
    // a "crashes": it never releases. Its timestamp passes…
    tokio::time::sleep(Duration::from_millis(250)).await;
    let before: String = redis::cmd("GET")
        .arg(key)
        .query_async(&mut r)
        .await
        .expect("GET");
    let got = b.acquire(key).await;
    let l = lease(&got).expect("lease");
    assert!((200..400).contains(&l), "lease {l}");
    let after: String = redis::cmd("GET")
        .arg(key)
        .query_async(&mut r)
        .await
        .expect("GET");
    assert_ne!(before, after, "GETSET wrote b's timestamp");
    // …and the old holder's unconditional DEL now frees b's lock: the recipe's flaw.
    assert_eq!(a.release(key).await, RELEASED);
    assert_eq!(pttl(&mut r, key).await, -2);
}

#[tokio::test]
async fn setnx_getset_clock_skew_steals_a_live_lock() {
    let servers = start(Topology::Single, 1).await;
    let ep = servers.endpoints();
    let mut a = client("setnx-getset", &ep, &opts(5000)).await;
    let mut honest = client("setnx-getset", &ep, &opts(5000)).await;
    let skewed = LockOptions {
        clock_skew_ms: 10_000,
        ..opts(5000)
    };
    let mut thief = client("setnx-getset", &ep, &skewed).await;
    let key = "lock:x";

    let held = a.acquire(key).await;
    assert!(lease(&held).expect("lease") >= 5000);
    assert_fail(&honest.acquire(key).await, "a client with a true clock");
    // 10 s ahead, the thief sees a's timestamp as long past: both now hold the lock.
    assert_ok(&thief.acquire(key).await, "the skewed client");
}

#[tokio::test]
async fn setnx_expire_crash_between_setnx_and_expire_leaves_a_lock_forever() {
    let servers = start(Topology::Single, 1).await;
    let ep = servers.endpoints();
    let o = LockOptions {
        crash_point: Some("setnx-expire:after-setnx".into()),
        on_step: Some(Arc::new(|step: &str| {
            if step == "setnx-expire:after-setnx" {
                panic!("crash point {step}");
            }
        })),
        ..opts(1000)
    };
    let mut dying = client("setnx-expire", &ep, &o).await;
    let crashed = tokio::spawn(async move { dying.acquire("lock:x").await }).await;
    assert!(crashed.is_err(), "the client died at its crash point");
    let mut r = raw(&ep, 0).await;
    assert_eq!(pttl(&mut r, "lock:x").await, -1, "a lock with no expiry");
    let mut b = client("setnx-expire", &ep, &opts(1000)).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_fail(&b.acquire("lock:x").await, "past the ttl, still locked");
}

#[tokio::test]
async fn setnx_del_promises_until_release_and_never_expires() {
    let servers = start(Topology::Single, 1).await;
    let ep = servers.endpoints();
    let mut a = client("setnx-del", &ep, &opts(100)).await;
    assert_eq!(lease(&a.acquire("lock:x").await), None);
    let mut r = raw(&ep, 0).await;
    assert_eq!(pttl(&mut r, "lock:x").await, -1);
}

#[tokio::test]
async fn steps_are_announced_in_order() {
    let servers = start(Topology::Single, 1).await;
    let ep = servers.endpoints();
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    let o = LockOptions {
        fenced: true,
        on_step: Some(Arc::new(move |s: &str| {
            log.lock().expect("step log").push(s.to_string());
        })),
        ..opts(1000)
    };
    let mut a = client("set-nx-px", &ep, &o).await;
    assert_ok(&a.acquire("lock:x").await, "a");
    assert_eq!(a.release("lock:x").await, RELEASED);
    let seen = seen.lock().expect("step log").clone();
    assert_eq!(
        seen,
        [
            "set-nx-px:after-set",
            locks::FENCED_STEP,
            "set-nx-px:before-release"
        ]
    );
    for step in &seen[..1] {
        assert!(locks::DEFAULT_ALGORITHM.steps.contains(&step.as_str()));
    }
}

#[tokio::test]
async fn a_paused_server_is_info_and_a_dead_one_is_fail() {
    let mut servers = start(Topology::Single, 1).await;
    let ep = servers.endpoints();
    let o = LockOptions {
        op_timeout_ms: 100,
        ..opts(1000)
    };
    let mut a = client("set-nx-px", &ep, &o).await;
    let mut b = client("set-nx-px", &ep, &o).await;
    assert_ok(&a.acquire("lock:x").await, "a");
    {
        let _paused = Paused::new(&servers, &[0]);
        // The request may run when the server wakes: nobody knows.
        assert!(matches!(b.acquire("lock:y").await, Acquired::Info(_)));
        assert!(matches!(a.release("lock:x").await, Outcome::Info(_)));
    }
    kill_node(&mut servers, 0);
    // Nothing can be sent to a server that is gone: certainly not taken.
    assert_fail(&b.acquire("lock:z").await, "server down");
}

#[tokio::test]
async fn a_wrong_password_is_a_connect_error() {
    let servers = start(Topology::Single, 1).await;
    let mut ep = servers.endpoints();
    ep.password = Some("not-the-password".into());
    match locks::connect("set-nx-px", &ep, &opts(1000)).await {
        Err(LockError::Auth(_)) => {}
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("connected with a wrong password"),
    }
    assert!(matches!(
        locks::connect("no-such-lock", &ep, &opts(1000)).await,
        Err(LockError::UnknownAlgorithm(_))
    ));
}

#[tokio::test]
async fn sentinel_clients_follow_a_failover() {
    let mut servers = start(Topology::Sentinel, 1).await;
    let ep = servers.endpoints();
    let o = LockOptions {
        op_timeout_ms: 200,
        ..opts(5000)
    };
    let mut a = client("set-nx-px", &ep, &o).await;
    assert_ok(&a.acquire("lock:before").await, "before the failover");
    kill_node(&mut servers, 0);
    // Until the sentinels promote a replica every acquire fails; then the client, asking
    // the sentinels again after each failed request, finds the new primary.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match a.acquire("lock:after").await {
            Acquired::Ok { .. } => break,
            Acquired::Fail(_) | Acquired::Info(_) => {}
        }
        assert!(Instant::now() < deadline, "no new primary found");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut holders = 0;
    for i in 1..3 {
        let mut r = raw(&ep, i).await;
        if pttl(&mut r, "lock:after").await > 0 {
            holders += 1;
        }
    }
    assert!(holders >= 1, "the lock is on a promoted replica");
}

/// watch-multi: an EXEC after someone else wrote the watched key writes nothing.
#[tokio::test]
async fn watch_multi_exec_fails_after_a_concurrent_write() {
    use lockaudit::locks::CounterWrite;
    let servers = start(Topology::Single, 1).await;
    let e = servers.endpoints();
    let mut a = client("watch-multi", &e, &opts(1000)).await;
    let mut b = client("watch-multi", &e, &opts(1000)).await;
    assert!(
        lockaudit::locks::algorithm("watch-multi")
            .unwrap()
            .optimistic
    );
    assert!(
        lockaudit::locks::algorithm("watch-multi")
            .unwrap()
            .keeps_counter
    );
    assert_eq!(a.read_counter("lock:0").await, Ok(None));
    assert_eq!(b.read_counter("lock:0").await, Ok(None));
    assert_eq!(a.write_counter("lock:0", 1).await, CounterWrite::Accepted);
    assert!(matches!(
        b.write_counter("lock:0", 1).await,
        CounterWrite::Rejected(_)
    ));
    assert_eq!(b.read_counter("lock:0").await, Ok(Some(1)));
    assert_eq!(b.write_counter("lock:0", 2).await, CounterWrite::Accepted);
    // The counter is on the lock's server, where WATCH sees it.
    let mut raw = raw(&e, 0).await;
    let value: Option<i64> = redis::cmd("GET")
        .arg("resource:lock:0")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(value, Some(2));
}
