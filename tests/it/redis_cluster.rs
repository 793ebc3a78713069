//! `Topology::Cluster` against real redis-server processes in cluster mode: the cluster
//! forms, keys route by slot through redis-rs's cluster client, and the cluster itself
//! promotes a replica when its master dies. No mocks.

use std::time::{Duration, Instant};

use lockaudit::cluster::{self, sharded, ClusterSpec, Topology};

fn is_live(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

/// Three masters with a replica each form within the time Redis allows (a master is `ok`
/// no sooner than 2 s after it started), a key written through the cluster client lands on
/// its slot's master, a killed master's replica is promoted and the cluster is ok again,
/// and dropping the cluster leaves no process behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_forms_routes_and_promotes_a_replica() {
    let dir = common::RunDir::new();
    let begun = Instant::now();
    let mut c = cluster::start(&ClusterSpec::new(Topology::Cluster, dir.path()))
        .await
        .expect("the cluster forms");
    let took = begun.elapsed();
    assert!(took < Duration::from_secs(8), "formed in {took:?}");
    let e = c.endpoints();
    assert_eq!(e.topology, Topology::Cluster);
    let names: Vec<&str> = e.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "master-0",
            "master-1",
            "master-2",
            "replica-3",
            "replica-4",
            "replica-5"
        ]
    );
    let pw = c.password().to_string();
    for n in &e.nodes[..3] {
        assert_eq!(
            sharded::is_master(&n.host, n.port, &pw).await,
            Some(true),
            "{}",
            n.name
        );
    }
    for n in &e.nodes[3..] {
        assert_eq!(
            sharded::is_master(&n.host, n.port, &pw).await,
            Some(false),
            "{}",
            n.name
        );
    }

    // Keys spread over the slots are reachable through the cluster client.
    let urls: Vec<String> = e.nodes.iter().map(|n| e.url(n)).collect();
    let client = redis::cluster::ClusterClient::new(urls).unwrap();
    let mut conn = client.get_async_connection().await.expect("cluster client");
    for i in 0..30 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query_async(&mut conn)
            .await
            .expect("SET through the cluster client");
    }

    // master-0 dies: after the node timeout the cluster promotes replica-3.
    let pids: Vec<u32> = e.nodes.iter().filter_map(|n| n.pid).collect();
    c.kill("master-0").unwrap();
    let replica = e.nodes[3].port;
    let deadline = Instant::now() + Duration::from_secs(15);
    while sharded::is_master("127.0.0.1", replica, &pw).await != Some(true) {
        assert!(Instant::now() < deadline, "replica-3 never promoted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let promoted = begun.elapsed();
    while !sharded::is_ok(&e.nodes[1].host, e.nodes[1].port, &pw).await {
        assert!(
            Instant::now() < deadline,
            "the cluster did not return to ok"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("formed in {took:?}; replica-3 master {promoted:?} after the start");
    // The cluster client follows the new map.
    let mut written = false;
    while !written {
        written = redis::cmd("SET")
            .arg("k0")
            .arg("again")
            .query_async::<()>(&mut conn)
            .await
            .is_ok();
        assert!(Instant::now() < deadline, "writes never resumed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(conn);
    drop(c);
    for pid in pids {
        assert!(!is_live(pid), "pid {pid} left behind");
    }
}

use crate::common;

fn lockaudit() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_lockaudit"))
}

/// The servers of the run in `out` (pids from its endpoints.json) still alive. By pid:
/// redis-server rewrites its command line, so it cannot be found by the run's folder.
fn servers_left(out: &std::path::Path) -> Vec<u32> {
    let text = std::fs::read_to_string(out.join("endpoints.json")).unwrap();
    let e: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut nodes: Vec<&serde_json::Value> = e["nodes"].as_array().unwrap().iter().collect();
    nodes.push(&e["storage"]);
    let pids: Vec<u32> = nodes
        .iter()
        .filter_map(|n| n["pid"].as_u64().map(|p| p as u32))
        .collect();
    assert_eq!(pids.len(), 7, "{text}");
    pids.into_iter().filter(|&p| is_live(p)).collect()
}

/// Without faults set-nx-px on a cluster is valid; with the failover preset (a lagging
/// replica promoted by TAKEOVER) it overlaps inside a live lease, and the history records
/// the failover. No server outlives either run.
#[test]
fn set_nx_px_on_a_cluster_is_valid_and_overlaps_under_failover() {
    let dir = common::RunDir::new();
    let calm = dir.path().join("calm");
    let out = lockaudit()
        .args(["run", "--algorithm", "set-nx-px", "--topology", "cluster"])
        .args(["--time-limit", "4s", "--seed", "1", "--out"])
        .arg(&calm)
        .output()
        .unwrap();
    common::assert_exit(&out, 0);
    assert!(std::fs::read_to_string(calm.join("cluster-start-ms.txt")).is_ok());
    assert_eq!(
        servers_left(&calm),
        Vec::<u32>::new(),
        "servers left behind"
    );

    let failover = dir.path().join("failover");
    let out = lockaudit()
        .args(["run", "--algorithm", "set-nx-px", "--topology", "cluster"])
        .args([
            "--nemesis",
            "failover",
            "--time-limit",
            "20s",
            "--seed",
            "1",
            "--out",
        ])
        .arg(&failover)
        .output()
        .unwrap();
    common::assert_exit(&out, 1);
    let report = common::report(&failover);
    let inside = report["anomalies"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["kind"] == "overlap" && a["lease_expired"] == false);
    assert!(inside, "no overlap inside a lease: {report}");
    let history = std::fs::read_to_string(failover.join("history.jsonl")).unwrap();
    assert!(history.contains(r#""f":"failover""#) && history.contains("takeover"));
    assert_eq!(
        servers_left(&failover),
        Vec::<u32>::new(),
        "servers left behind"
    );
}

/// RedLock over one cluster's masters is refused as bad input, naming why.
#[test]
fn redlock_on_a_cluster_is_refused() {
    let dir = common::RunDir::new();
    let out = lockaudit()
        .args([
            "run",
            "--seed",
            "1",
            "--algorithm",
            "redlock",
            "--topology",
            "cluster",
            "--out",
        ])
        .arg(dir.path().join("r"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not RedLock"), "{err}");
    // Nor can it audit a cluster it did not start.
    let out = lockaudit()
        .args([
            "run",
            "--seed",
            "1",
            "--algorithm",
            "set-nx-px",
            "--topology",
            "cluster",
        ])
        .args(["--redis", "redis://127.0.0.1:1", "--out"])
        .arg(dir.path().join("e"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--redis with topology cluster"), "{err}");
}

/// A master paused past the node timeout is replaced by the cluster itself, and the run
/// records that promotion as a `failover` by the cluster (seed 2 pauses master-1 first).
#[test]
fn a_promotion_by_the_cluster_is_recorded() {
    let dir = common::RunDir::new();
    let out_dir = dir.path().join("pause");
    let out = lockaudit()
        .args(["run", "--algorithm", "set-nx-px", "--topology", "cluster"])
        .args([
            "--nemesis",
            "pause-servers",
            "--time-limit",
            "8s",
            "--seed",
            "2",
            "--out",
        ])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    let history = std::fs::read_to_string(out_dir.join("history.jsonl")).unwrap();
    let promoted = history.lines().any(|l| {
        l.contains(r#""f":"failover""#)
            && l.contains(r#""by":"cluster""#)
            && l.contains("replica-4")
    });
    assert!(promoted, "no promotion recorded");
    assert_eq!(
        servers_left(&out_dir),
        Vec::<u32>::new(),
        "servers left behind"
    );
}

/// An external adapter is told `topology: "cluster"` and every node (protocol 1.3): the
/// Rust example adapter's set-nx-px reaches the cluster through them and stays valid.
#[test]
fn an_external_adapter_locks_on_a_cluster() {
    let dir = common::RunDir::new();
    let workload = dir.path().join("w.toml");
    std::fs::write(
        &workload,
        format!(
            "algorithm = \"external\"\nadapter = [{:?}]\nadapter_options = {{ algorithm = \"set-nx-px\" }}\ntopology = \"cluster\"\nclients = 4\nworkers = 2\nkeys = 3\nttl = \"1s\"\nhold = {{ min = \"1ms\", max = \"10ms\" }}\nthink = \"2ms\"\n",
            env!("CARGO_BIN_EXE_lockaudit-adapter")
        ),
    )
    .unwrap();
    let out_dir = dir.path().join("run");
    let out = lockaudit()
        .args(["run", "--seed", "1"])
        .arg(&workload)
        .args(["--time-limit", "3s", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    common::assert_exit(&out, 0);
    let report = common::report(&out_dir);
    for key in ["lock:0", "lock:1", "lock:2"] {
        let n = report["stats"]["per_key"][key]["acquisitions"]
            .as_u64()
            .unwrap_or(0);
        assert!(n > 10, "{key}: {n} acquisitions");
    }
    assert_eq!(
        servers_left(&out_dir),
        Vec::<u32>::new(),
        "servers left behind"
    );
}

/// A partition cuts a worker off from one cluster node: the cluster client's requests go
/// through the worker's proxies (the slot map's real addresses mapped to them by node
/// name), so requests for that node's keys time out instead of going around the cut.
#[test]
fn a_partition_cuts_a_cluster_client_off() {
    let dir = common::RunDir::new();
    let out_dir = dir.path().join("part");
    let out = lockaudit()
        .args(["run", "--algorithm", "set-nx-px", "--topology", "cluster"])
        .args([
            "--nemesis",
            "partition",
            "--time-limit",
            "6s",
            "--seed",
            "1",
            "--out",
        ])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    let history = std::fs::read_to_string(out_dir.join("history.jsonl")).unwrap();
    assert!(history.contains(r#""f":"partition""#));
    let cut = history
        .lines()
        .filter(|l| l.contains(r#""type":"info""#) && l.contains("cluster: timed out"))
        .count();
    assert!(cut > 0, "no request was held by the cut link");
    assert_eq!(
        servers_left(&out_dir),
        Vec::<u32>::new(),
        "servers left behind"
    );
}
