//! The etcd cluster lockaudit owns and the etcd locks, against real etcd members: the
//! cluster starts with a leader and answers only with the run's password, a member killed
//! and restarted through the service seam rejoins, nothing is left behind; etcd-lock and
//! etcd-txn exclude each other while leases live, give growing fencing tokens, and hand the
//! lock on once a holder's lease runs out (the flaw a paused holder meets); a leader cut
//! off from the others through the members' peer proxies is replaced, serves no read, and
//! rejoins when healed.

use crate::common;
use crate::common::{alive, until};

use std::process::Command;
use std::time::{Duration, Instant};

use lockaudit::cluster::{self, ClusterSpec, Endpoints, Topology};
use lockaudit::locks::{self, Acquired, LockClient, LockOptions, Outcome};

fn urls(endpoints: &Endpoints) -> Vec<String> {
    endpoints
        .nodes
        .iter()
        .map(|n| format!("http://{}:{}", n.host, n.port))
        .collect()
}

async fn client(algorithm: &str, endpoints: &Endpoints, fenced: bool) -> Box<dyn LockClient> {
    let options = LockOptions {
        ttl_ms: 2000,
        retry_attempts: 0,
        fenced,
        op_timeout_ms: 2000,
        ..LockOptions::default()
    };
    locks::connect(algorithm, endpoints, &options)
        .await
        .unwrap_or_else(|e| panic!("{algorithm} connects: {e}"))
}

fn token(acquired: &Acquired) -> Option<i64> {
    match acquired {
        Acquired::Ok { token, .. } => *token,
        other => panic!("not acquired: {other:?}"),
    }
}

#[tokio::test]
async fn the_cluster_starts_with_a_leader_answers_only_the_run_and_leaves_nothing() {
    common::require_etcd();
    let dir = common::RunDir::new();
    let begun = Instant::now();
    let mut cluster = cluster::start(&ClusterSpec::new(Topology::Etcd, dir.path()))
        .await
        .expect("etcd starts");
    eprintln!("etcd cluster ready in {:?}", begun.elapsed());
    let endpoints = cluster.endpoints();
    let names: Vec<&str> = endpoints.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["etcd-0", "etcd-1", "etcd-2"]);
    let pids: Vec<u32> = endpoints.nodes.iter().filter_map(|n| n.pid).collect();
    assert_eq!(pids.len(), 3);
    let password = endpoints.password.clone().unwrap();

    // Without the password etcd refuses; with it, every member knows the same leader.
    let mut stranger = cluster::etcd::connect(&urls(&endpoints), None, Duration::from_secs(2))
        .await
        .expect("a connection (refused per request)");
    let refused = stranger.put("lockaudit/stranger", "x", None).await;
    assert!(
        refused.is_err(),
        "a client without the password wrote: {refused:?}"
    );
    let mut leaders = Vec::new();
    for url in urls(&endpoints) {
        let mut c = cluster::etcd::connect(&[url], Some(&password), Duration::from_secs(2))
            .await
            .unwrap();
        leaders.push(c.status().await.expect("status").leader());
    }
    assert!(
        leaders[0] != 0 && leaders.iter().all(|l| *l == leaders[0]),
        "{leaders:?}"
    );

    // Through the seam: a member killed is gone, restarted on its data it serves again.
    let killed = cluster.pid("etcd-1").unwrap();
    cluster.kill("etcd-1").unwrap();
    assert!(!cluster::is_live(killed));
    assert!(cluster.pid("etcd-1").is_none());
    cluster
        .restart("etcd-1")
        .await
        .expect("rejoins on its data");
    assert!(cluster.pid("etcd-1").is_some());
    let emptied = cluster.restart_empty("etcd-1").await;
    assert!(
        matches!(emptied, Err(cluster::ClusterError::Unsupported { .. })),
        "{emptied:?}"
    );

    let mut all = pids.clone();
    all.extend(cluster.pid("etcd-1"));
    drop(cluster);
    assert_eq!(alive(&all), 0, "an etcd member outlived its cluster");
}

#[tokio::test]
async fn etcd_locks_exclude_while_the_lease_lives_and_hand_on_after_it() {
    common::require_etcd();
    let dir = common::RunDir::new();
    let cluster = cluster::start(&ClusterSpec::new(Topology::Etcd, dir.path()))
        .await
        .expect("etcd starts");
    let endpoints = cluster.endpoints();
    for algorithm in ["etcd-lock", "etcd-txn"] {
        let key = format!("lock:{algorithm}");
        let mut a = client(algorithm, &endpoints, true).await;
        let mut b = client(algorithm, &endpoints, true).await;
        let first = a.acquire(&key).await;
        let first_token = token(&first);
        assert!(
            first_token.is_some(),
            "{algorithm}: fenced, a token: {first:?}"
        );
        assert!(
            matches!(first, Acquired::Ok { lease_ms: Some(l), .. } if l >= 2000),
            "{first:?}"
        );

        // While a holds and renews, b is refused.
        assert!(matches!(
            a.renew(&key).await,
            Outcome::Ok { lease_ms: Some(_) }
        ));
        let refused = b.acquire(&key).await;
        assert!(
            matches!(refused, Acquired::Fail(_)),
            "{algorithm}: {refused:?}"
        );

        // a stops renewing (as a paused holder does): once its lease runs out, b gets the
        // lock while a still believes it holds it, with a higher token.
        let deadline = Instant::now() + Duration::from_secs(10);
        let second = loop {
            match b.acquire(&key).await {
                ok @ Acquired::Ok { .. } => break ok,
                other => {
                    assert!(
                        Instant::now() < deadline,
                        "{algorithm}: never handed on: {other:?}"
                    );
                }
            }
        };
        let second_token = token(&second).unwrap();
        assert!(
            second_token > first_token.unwrap(),
            "{algorithm}: tokens must grow"
        );
        // a's keep-alive now finds its lease gone: the lock lost.
        assert!(
            matches!(a.renew(&key).await, Outcome::Fail(_)),
            "{algorithm}"
        );
        assert!(
            matches!(b.release(&key).await, Outcome::Ok { .. }),
            "{algorithm}"
        );
        let third = a.acquire(&key).await;
        assert!(token(&third).unwrap() > second_token, "{algorithm}");
        assert!(matches!(a.release(&key).await, Outcome::Ok { .. }));
    }
}

#[tokio::test]
async fn an_isolated_leader_is_replaced_serves_no_read_and_rejoins_when_healed() {
    common::require_etcd();
    let dir = common::RunDir::new();
    let mut cluster = cluster::start(&ClusterSpec::new(Topology::Etcd, dir.path()))
        .await
        .expect("etcd starts");
    let endpoints = cluster.endpoints();
    let password = endpoints.password.clone().unwrap();
    let url = |name: &str| {
        let node = endpoints.node(name).unwrap();
        format!("http://{}:{}", node.host, node.port)
    };
    let old = cluster.leader().await.expect("a leader");
    let others: Vec<(String, String, u16)> = endpoints
        .nodes
        .iter()
        .filter(|n| n.name != old)
        .map(|n| (n.name.clone(), n.host.clone(), n.port))
        .collect();
    // Only between members: storage is no member.
    assert!(cluster.cut_link(&old, "storage").is_err());

    // Isolated: every link between it and the others, both ways.
    let pairs: Vec<(String, String)> = others
        .iter()
        .flat_map(|(o, _, _)| [(old.clone(), o.clone()), (o.clone(), old.clone())])
        .collect();
    for result in cluster.cut_links(&pairs) {
        result.expect("cut");
    }
    let new = until(
        "the other two elect a leader",
        Duration::from_secs(20),
        || cluster::etcd::leader(&others),
    )
    .await;
    assert_ne!(new, old);
    let isolated = common::etcd_read(&url(&old), &password, "lockaudit/partition").await;
    assert!(
        isolated.is_err(),
        "the isolated {old} served a linearizable read: {isolated:?}"
    );
    // The majority goes on: a write the isolated member has not seen.
    let mut majority =
        cluster::etcd::connect(&[url(&new)], Some(&password), Duration::from_secs(2))
            .await
            .unwrap();
    majority
        .put("lockaudit/partition", "written apart", None)
        .await
        .expect("the majority writes");

    for healed in cluster.heal_links(&pairs) {
        assert!(healed);
    }
    let seen = until(
        &format!("{old} rejoins and reads the majority's write"),
        Duration::from_secs(20),
        || async {
            common::etcd_read(&url(&old), &password, "lockaudit/partition")
                .await
                .ok()
                .flatten()
        },
    )
    .await;
    assert_eq!(seen, "written apart");
}

/// `lockaudit run --algorithm etcd-lock` for `time_limit` into `out`.
fn run_etcd_lock(time_limit: &str, out: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lockaudit"));
    command
        .args([
            "run",
            "--seed",
            "1",
            "--algorithm",
            "etcd-lock",
            "--time-limit",
            time_limit,
            "--out",
        ])
        .arg(out);
    command
}

#[test]
fn a_missing_etcd_is_named_with_its_package() {
    let dir = common::RunDir::new();
    let out = run_etcd_lock("2s", &dir.path().join("run"))
        .env(cluster::ETCD_ENV, "/nonexistent/etcd")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("apt-get install etcd-server") && stderr.contains("/nonexistent/etcd"),
        "{stderr}"
    );
}

#[test]
fn an_etcd_lock_run_without_faults_is_valid() {
    common::require_etcd();
    let dir = common::RunDir::new();
    let out_dir = dir.path().join("run");
    let out = run_etcd_lock("4s", &out_dir).output().unwrap();
    common::assert_exit(&out, 0);
    let history = std::fs::read_to_string(out_dir.join("history.jsonl")).unwrap();
    let acquired = history
        .lines()
        .filter(|l| l.contains("\"f\":\"acquire\"") && l.contains("\"type\":\"ok\""))
        .count();
    assert!(acquired > 10, "{acquired} acquisitions");
}

#[test]
fn a_run_that_isolates_the_leader_records_it_and_stays_exclusive() {
    common::require_etcd();
    let dir = common::RunDir::new();
    let out_dir = dir.path().join("run");
    let schedule = dir.path().join("isolate.toml");
    std::fs::write(
        &schedule,
        "[[fault]]\nat = \"1s\"\nkind = \"partition\"\nlink = \"replication\"\nduration = \"5s\"\n",
    )
    .unwrap();
    let out = run_etcd_lock("10s", &out_dir)
        .arg("--nemesis")
        .arg(&schedule)
        .output()
        .unwrap();
    let code = out.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "{code:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let history = std::fs::read_to_string(out_dir.join("history.jsonl")).unwrap();
    let nemesis: Vec<serde_json::Value> = history
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["process"] == "nemesis")
        .collect();
    let cut = nemesis
        .iter()
        .find(|e| e["f"] == "partition")
        .expect("the isolation recorded");
    assert_eq!(cut["value"]["leader"], true, "{cut}");
    assert_eq!(cut["value"]["link"], "replication", "{cut}");
    let targets: Vec<&str> = cut["value"]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    let mut members = targets.clone();
    members.sort();
    assert_eq!(members, ["etcd-0", "etcd-1", "etcd-2"], "{cut}");
    let healed = nemesis
        .iter()
        .any(|e| e["f"] == "heal" && e["value"]["targets"] == cut["value"]["targets"]);
    assert!(healed, "the isolation healed");
    // The other two elect a leader of their own while it lasts (seen by the role watch).
    assert!(
        nemesis
            .iter()
            .any(|e| e["f"] == "failover" && e["value"]["targets"][0] != targets[0]),
        "no new leader recorded"
    );
    // Only a member is cut off, no client: a correct lock stays exclusive.
    let kinds = common::kinds(&common::report(&out_dir));
    for kind in &kinds {
        assert!(
            ["bad-lease", "lost-lock", "unavailable", "starvation"].contains(&kind.as_str()),
            "{kind} under a leader isolation"
        );
    }
}
