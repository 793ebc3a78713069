//! The ZooKeeper ensemble lockaudit owns and the zk-lock recipe, against real servers: the
//! ensemble starts with one leader, a server killed through the service seam comes back,
//! a killed leader is replaced, nothing is left behind; the recipe's znodes are Curator's,
//! it excludes, and its fencing tokens grow; a short run under client pauses records
//! acquires and renewals.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use lockaudit::cluster::{self, zookeeper, ClusterSpec, Endpoints, Topology};
use lockaudit::locks::{self, zk_lock, Acquired, LockClient, LockOptions, Outcome};

fn alive(pids: &[u32]) -> usize {
    pids.iter().filter(|&&p| cluster::is_live(p)).count()
}

fn servers(endpoints: &Endpoints) -> Vec<(String, u16)> {
    endpoints
        .nodes
        .iter()
        .map(|n| (n.name.clone(), n.port))
        .collect()
}

async fn start(dir: &std::path::Path) -> cluster::Cluster {
    let begun = Instant::now();
    let cluster = cluster::start(&ClusterSpec::new(Topology::Zookeeper, dir))
        .await
        .expect("ZooKeeper starts");
    eprintln!("ZooKeeper ready in {:?}", begun.elapsed());
    cluster
}

#[tokio::test]
async fn the_ensemble_starts_with_one_leader_takes_a_server_back_and_leaves_nothing() {
    common::require_zookeeper();
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = start(dir.path()).await;
    let endpoints = cluster.endpoints();
    let names: Vec<&str> = endpoints.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["zk-0", "zk-1", "zk-2"]);
    let pids: Vec<u32> = endpoints.nodes.iter().filter_map(|n| n.pid).collect();
    assert_eq!(pids.len(), 3);

    // Every server serves, exactly one as leader.
    let roles = zookeeper::roles(&servers(&endpoints)).await;
    assert_eq!(roles.len(), 3, "{roles:?}");
    assert_eq!(
        roles.iter().filter(|(_, leads)| *leads).count(),
        1,
        "{roles:?}"
    );

    // Through the seam: a server killed is gone; restarted on its data it serves again,
    // and so does one restarted empty (the leader sends it a snapshot).
    let killed = cluster.pid("zk-1").unwrap();
    cluster.kill("zk-1").unwrap();
    assert!(!cluster::is_live(killed));
    assert!(cluster.pid("zk-1").is_none());
    cluster.restart("zk-1").await.expect("rejoins on its data");
    let port = cluster.port("zk-1").unwrap();
    assert!(zookeeper::mode(port).await.is_ok());
    cluster.restart_empty("zk-2").await.expect("rejoins empty");
    assert!(zookeeper::mode(cluster.port("zk-2").unwrap()).await.is_ok());

    let mut all = pids.clone();
    all.extend(cluster.pid("zk-1"));
    all.extend(cluster.pid("zk-2"));
    drop(cluster);
    assert_eq!(alive(&all), 0, "a ZooKeeper server outlived its ensemble");
}

#[tokio::test]
async fn a_killed_leader_is_replaced_by_another() {
    common::require_zookeeper();
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = start(dir.path()).await;
    let before = cluster.leader().await.expect("a leader");
    let (failover, happened) = cluster.begin_failover().await.expect("the leader killed");
    assert_eq!(happened[0].targets, std::slice::from_ref(&before));
    assert!(cluster.pid(&before).is_none());
    let deadline = Instant::now() + Duration::from_secs(30);
    let after = loop {
        if let Some(leader) = cluster.leader().await {
            break leader;
        }
        assert!(Instant::now() < deadline, "no new leader within 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_ne!(after, before);
    let ended = cluster.end_failover(failover).await;
    assert!(ended.iter().any(|h| h.f == "restart"), "{ended:?}");
    assert!(cluster.pid(&before).is_some());
}

async fn client(endpoints: &Endpoints, fenced: bool) -> Box<dyn LockClient> {
    let options = LockOptions {
        ttl_ms: 2000,
        fenced,
        op_timeout_ms: 2000,
        ..LockOptions::default()
    };
    locks::connect("zk-lock", endpoints, &options)
        .await
        .unwrap_or_else(|e| panic!("zk-lock connects: {e}"))
}

fn token(acquired: &Acquired) -> i64 {
    match acquired {
        Acquired::Ok {
            token: Some(token), ..
        } => *token,
        other => panic!("not acquired with a token: {other:?}"),
    }
}

/// Curator's protected ephemeral sequential name: `_c_<uuid>-lock-<10 digits>`.
fn curator_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("_c_") else {
        return false;
    };
    let (uuid, sequence) = rest.split_at(rest.len().min(36));
    let Some(sequence) = sequence.strip_prefix("-lock-") else {
        return false;
    };
    uuid.len() == 36
        && uuid.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
        && sequence.len() == 10
        && sequence.chars().all(|c| c.is_ascii_digit())
}

#[tokio::test]
async fn the_recipe_lays_out_curators_nodes_excludes_and_fences_with_czxid() {
    common::require_zookeeper();
    let dir = tempfile::tempdir().unwrap();
    let cluster = start(dir.path()).await;
    let endpoints = cluster.endpoints();
    let connect =
        zookeeper::connect_string(endpoints.nodes.iter().map(|n| (n.host.as_str(), n.port)));
    let observer = zookeeper_client::Client::connect(&connect)
        .await
        .expect("an observer's session");
    let key = "lock:layout";
    let folder = zk_lock::lock_dir(key);

    let mut a = client(&endpoints, true).await;
    let mut b = client(&endpoints, true).await;
    let first = a.acquire(key).await;
    let first_token = token(&first);
    assert!(
        matches!(
            first,
            Acquired::Ok {
                lease_ms: Some(2000),
                ..
            }
        ),
        "the session granted is the lease: {first:?}"
    );
    let children = observer.list_children(&folder).await.unwrap();
    assert_eq!(children.len(), 1, "{children:?}");
    assert!(curator_name(&children[0]), "{children:?}");
    let (_, stat) = observer
        .get_data(&format!("{folder}/{}", children[0]))
        .await
        .unwrap();
    assert_ne!(stat.ephemeral_owner, 0, "the lock node is ephemeral");
    assert_eq!(stat.czxid, first_token, "the token is the node's czxid");

    // b waits behind a, gives up after half its session, and its node goes.
    let refused = b.acquire(key).await;
    assert!(matches!(refused, Acquired::Fail(_)), "{refused:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while observer.list_children(&folder).await.unwrap().len() != 1 {
        assert!(Instant::now() < deadline, "b's node stayed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(matches!(
        a.renew(key).await,
        Outcome::Ok { lease_ms: Some(_) }
    ));

    // Released, the next holder's token is higher.
    assert!(matches!(a.release(key).await, Outcome::Ok { .. }));
    assert!(observer.list_children(&folder).await.unwrap().is_empty());
    let second = b.acquire(key).await;
    assert!(token(&second) > first_token, "tokens must grow");
    assert!(matches!(b.release(key).await, Outcome::Ok { .. }));
}

/// `lockaudit run --algorithm zk-lock` for `time_limit` into `out`.
fn run_zk_lock(time_limit: &str, out: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lockaudit"));
    command
        .args([
            "run",
            "--seed",
            "1",
            "--algorithm",
            "zk-lock",
            "--time-limit",
            time_limit,
            "--out",
        ])
        .arg(out);
    command
}

#[test]
fn a_short_run_under_client_pauses_records_acquires_and_renewals() {
    common::require_zookeeper();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let run = run_zk_lock("6s", &out)
        .args(["--nemesis", "pause-clients"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    // Valid or anomalies found: both are verdicts; anything else is an error.
    assert!(
        matches!(run.status.code(), Some(0) | Some(1)),
        "{:?}: {stderr}",
        run.status
    );
    let history = std::fs::read_to_string(out.join("history.jsonl")).unwrap();
    let completed = |f: &str| {
        history
            .lines()
            .any(|l| l.contains(&format!("\"f\":\"{f}\"")) && !l.contains("\"type\":\"invoke\""))
    };
    assert!(
        history
            .lines()
            .any(|l| l.contains("\"f\":\"acquire\"") && l.contains("\"type\":\"ok\"")),
        "no acquire ok"
    );
    assert!(completed("renew"), "no renewal completed");
    // The servers' data folders are gone; their logs stay.
    assert!(out.join("zookeeper/zk-0.log").exists());
    assert!(!out.join("zookeeper/zk-0").exists());
}

#[test]
fn a_missing_zookeeper_is_named_with_its_package() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_zk_lock("2s", &dir.path().join("run"))
        .env(cluster::ZOOKEEPER_ENV, "/nonexistent/zookeeper.jar")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("apt-get install zookeeper")
            && stderr.contains("/nonexistent/zookeeper.jar"),
        "{stderr}"
    );
}
