//! The ZooKeeper ensemble lockaudit owns and the zk-lock recipe, against real servers: the
//! ensemble starts with one leader, a server killed through the service seam comes back,
//! a killed leader is replaced, an isolated one steps down while the others elect, nothing
//! is left behind; the recipe's znodes are Curator's,
//! it excludes, and its fencing tokens grow; a holder whose servers all fall silent loses
//! its lock at its lease's end and answers every operation within its time limit; a short
//! run under client pauses records acquires and renewals.

use crate::common;
use crate::common::{alive, until};

use std::process::Command;
use std::time::{Duration, Instant};

use lockaudit::cluster::{self, zookeeper, ClusterSpec, Endpoints, Topology};
use lockaudit::locks::{self, zk_lock, Acquired, LockClient, LockOptions, Outcome};
use nix::sys::signal::Signal;

fn servers(endpoints: &Endpoints) -> Vec<(String, String, u16)> {
    endpoints
        .nodes
        .iter()
        .map(|n| (n.name.clone(), n.host.clone(), n.port))
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
    let dir = common::RunDir::new();
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
    let dir = common::RunDir::new();
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
    let (ended, unhealed) = cluster.end_failover(failover).await;
    assert!(ended.iter().any(|h| h.f == "restart"), "{ended:?}");
    assert!(unhealed.is_empty(), "{unhealed:?}");
    assert!(cluster.pid(&before).is_some());
}

/// The servers' own quorum and election ports, from their configs in `dir` (each config
/// names its own listeners and the others' proxies).
fn listener_ports(dir: &std::path::Path) -> Vec<u16> {
    let mut ports = Vec::new();
    for i in 0..3 {
        let config = std::fs::read_to_string(dir.join(format!("zookeeper/zk-{i}.cfg"))).unwrap();
        let own = format!("server.{}=127.0.0.1:", i + 1);
        let line = config.lines().find_map(|l| l.strip_prefix(&own)).unwrap();
        ports.extend(line.split(':').map(|p| p.parse::<u16>().unwrap()));
    }
    ports
}

/// The connections a server among `pids` opened straight to a listener of `ports`, around
/// the proxies (established sockets whose remote port is one of `ports`).
fn around_the_proxies(pids: &[u32], ports: &[u16]) -> Vec<String> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let port = |f: &str| u16::from_str_radix(f.rsplit_once(':').unwrap().1, 16).unwrap();
            if fields[3] == "01" && ports.contains(&port(fields[2])) {
                inodes.push((format!("socket:[{}]", fields[9]), port(fields[2])));
            }
        }
    }
    let mut found = Vec::new();
    for pid in pids {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.filter_map(Result::ok) {
            let Ok(link) = std::fs::read_link(fd.path()) else {
                continue;
            };
            if let Some((_, port)) = inodes.iter().find(|(i, _)| link.as_os_str() == i.as_str()) {
                found.push(format!("pid {pid} to port {port}"));
            }
        }
    }
    found
}

#[tokio::test]
async fn an_isolated_leader_steps_down_the_others_elect_and_it_rejoins_when_healed() {
    common::require_zookeeper();
    let dir = common::RunDir::new();
    let mut cluster = start(dir.path()).await;
    let endpoints = cluster.endpoints();
    let old = cluster.leader().await.expect("a leader");
    let old_port = cluster.port(&old).unwrap();
    let others: Vec<(String, String, u16)> = servers(&endpoints)
        .into_iter()
        .filter(|(name, _, _)| *name != old)
        .collect();
    // Only between servers: storage is no server.
    assert!(cluster.cut_link(&old, "storage").is_err());

    // Isolated: every link between it and the others, both ways (quorum and election).
    let pairs: Vec<(String, String)> = others
        .iter()
        .flat_map(|(o, _, _)| [(old.clone(), o.clone()), (o.clone(), old.clone())])
        .collect();
    for result in cluster.cut_links(&pairs) {
        result.expect("cut");
    }
    let new = until(
        "the other two elect a leader of their own",
        Duration::from_secs(30),
        || zookeeper::leader(&others),
    )
    .await;
    assert_ne!(new, old);
    // Without a quorum of followers the old leader gives up leading (and, alone, serves
    // as nothing).
    until(
        &format!("{old} stops serving as leader"),
        Duration::from_secs(30),
        || async { (zookeeper::mode(old_port).await != Ok(zookeeper::Mode::Leader)).then_some(()) },
    )
    .await;
    assert!(
        zookeeper::mode(old_port).await.is_err(),
        "the isolated {old} serves"
    );

    for healed in cluster.heal_links(&pairs) {
        assert!(healed);
    }
    until(
        &format!("{old} rejoins as a follower"),
        Duration::from_secs(30),
        || async {
            (zookeeper::mode(old_port).await == Ok(zookeeper::Mode::Follower)).then_some(())
        },
    )
    .await;

    // zk-0, the lowest id, cut off and healed: it dials the others to elect, and each,
    // having the higher id, drops its connection and calls back the address zk-0 names in
    // its election hello, which must be zk-0's proxy.
    let zk0 = cluster.port("zk-0").unwrap();
    let pairs: Vec<(String, String)> = ["zk-1", "zk-2"]
        .iter()
        .flat_map(|o| {
            [
                ("zk-0".to_string(), o.to_string()),
                (o.to_string(), "zk-0".to_string()),
            ]
        })
        .collect();
    for result in cluster.cut_links(&pairs) {
        result.expect("cut");
    }
    until("zk-0 stops serving", Duration::from_secs(30), || async {
        zookeeper::mode(zk0).await.is_err().then_some(())
    })
    .await;
    assert!(cluster.heal_links(&pairs).into_iter().all(|healed| healed));
    until("zk-0 serves again", Duration::from_secs(30), || async {
        zookeeper::mode(zk0).await.ok()
    })
    .await;
    let pids: Vec<u32> = endpoints.nodes.iter().filter_map(|n| n.pid).collect();
    let around = around_the_proxies(&pids, &listener_ports(dir.path()));
    assert!(
        around.is_empty(),
        "connections around the proxies: {around:?}"
    );
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

/// A session on `connect`, authenticated as the run's digest user with `password` if given.
async fn session(
    connect: &str,
    password: Option<&str>,
) -> Result<zookeeper_client::Client, zookeeper_client::Error> {
    let mut connector = zookeeper_client::Client::connector();
    if let Some(password) = password {
        connector = connector.with_auth("digest", zookeeper::digest(password).as_bytes());
    }
    connector.connect(connect).await
}

#[tokio::test]
async fn only_the_run_s_digest_user_reads_or_writes_the_lock_nodes() {
    common::require_zookeeper();
    let dir = common::RunDir::new();
    let cluster = start(dir.path()).await;
    let endpoints = cluster.endpoints();
    let connect =
        zookeeper::connect_string(endpoints.nodes.iter().map(|n| (n.host.as_str(), n.port)));
    let password = endpoints.password.clone().unwrap();
    let key = "lock:acl";
    let folder = zk_lock::lock_dir(key);
    let mut holder = client(&endpoints, false).await;
    assert!(matches!(holder.acquire(key).await, Acquired::Ok { .. }));
    let run = session(&connect, Some(&password)).await.unwrap();
    let node = format!("{folder}/{}", run.list_children(&folder).await.unwrap()[0]);

    // No credentials, or another user's: refused everywhere, the root included.
    let stranger = session(&connect, None).await.unwrap();
    let impostor = session(&connect, Some("not-the-run-s-password"))
        .await
        .unwrap();
    for other in [&stranger, &impostor] {
        let refused = |r: Result<(), zookeeper_client::Error>, what: &str| {
            assert_eq!(r, Err(zookeeper_client::Error::NoAuth), "{what}");
        };
        refused(
            other.list_children(&folder).await.map(drop),
            "list the lock's folder",
        );
        refused(other.get_data(&node).await.map(drop), "read the lock node");
        refused(other.delete(&node, None).await, "delete the lock node");
        refused(other.list_children("/").await.map(drop), "list the root");
        let open = zookeeper_client::CreateMode::Persistent
            .with_acls(zookeeper_client::Acls::anyone_all());
        refused(
            other
                .create(&format!("{folder}/x"), b"", &open)
                .await
                .map(drop),
            "create beside the lock node",
        );
        refused(
            other.create("/x", b"", &open).await.map(drop),
            "create at the root",
        );
        refused(
            other
                .set_acl("/", &zookeeper_client::Acls::anyone_all(), None)
                .await
                .map(drop),
            "take the root",
        );
    }
    // The run's user reads the node, and the lock is still held.
    assert!(run.get_data(&node).await.is_ok());
    assert!(matches!(holder.release(key).await, Outcome::Ok { .. }));
}

#[tokio::test]
async fn the_recipe_lays_out_curators_nodes_excludes_and_fences_with_czxid() {
    common::require_zookeeper();
    let dir = common::RunDir::new();
    let cluster = start(dir.path()).await;
    let endpoints = cluster.endpoints();
    let connect =
        zookeeper::connect_string(endpoints.nodes.iter().map(|n| (n.host.as_str(), n.port)));
    let password = endpoints.password.clone().unwrap();
    let observer = session(&connect, Some(&password))
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

/// Every ZooKeeper server of `cluster` sent `signal`.
fn signal_all(cluster: &cluster::Cluster, signal: Signal) {
    let names: Vec<String> = cluster
        .endpoints()
        .nodes
        .iter()
        .map(|n| n.name.clone())
        .collect();
    assert_eq!(names.len(), 3);
    for acted in cluster.signal_many(&names, signal) {
        acted
            .result
            .unwrap_or_else(|e| panic!("{signal} {}: {e}", acted.name));
    }
}

/// A holder whose servers all fall silent (paused), called as the worker's loop calls it:
/// its check, ttl/3 after the grant, answers `fail` (the lock lost to it) once its lease has
/// run out, not `info`, which would retire it as a holder that may still work while its
/// session expires; and, its session over, its next acquire, which must open a new one,
/// answers within the operation's time limit (the worker's own limit would make it `info`).
#[tokio::test]
async fn a_holder_whose_servers_fall_silent_loses_its_lock_at_its_lease_s_end_in_time() {
    common::require_zookeeper();
    let dir = tempfile::tempdir().unwrap();
    let cluster = start(dir.path()).await;
    let endpoints = cluster.endpoints();
    let op_timeout = Duration::from_millis(2000);
    let mut holder = client(&endpoints, false).await;
    let key = "lock:silent";
    let invoked = Instant::now();
    let lease_ms = match holder.acquire(key).await {
        Acquired::Ok {
            lease_ms: Some(ms), ..
        } => ms,
        other => panic!("not granted with a lease: {other:?}"),
    };
    let lease_end = invoked + Duration::from_millis(u64::try_from(lease_ms).unwrap());
    // The worker's cadence: the first check comes ttl/3 into the hold.
    tokio::time::sleep(holder.renew_every().unwrap()).await;

    signal_all(&cluster, Signal::SIGSTOP);
    let asked = Instant::now();
    let renewed = holder.renew(key).await;
    let answered = Instant::now();
    assert!(
        matches!(renewed, Outcome::Fail(_)),
        "a check no server answers by the lease's end: {renewed:?}"
    );
    assert!(
        answered >= lease_end,
        "lost {:?} before the lease's end: a lost-lock",
        lease_end - answered
    );
    assert!(
        answered - asked < op_timeout,
        "the check took {:?}",
        answered - asked
    );

    // Checks until the client itself sees its session over (the crate gives it up 7/5 of
    // the session after the servers last answered), each within the time limit.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let asked = Instant::now();
        let again = holder.renew(key).await;
        assert!(
            asked.elapsed() < op_timeout,
            "a check took {:?}",
            asked.elapsed()
        );
        match again {
            Outcome::Fail(why) if why.starts_with("the session ended") => break,
            Outcome::Fail(_) => {}
            other => panic!("a check with every server paused: {other:?}"),
        }
        assert!(Instant::now() < deadline, "the session never ended");
    }
    let asked = Instant::now();
    let acquired = holder.acquire(key).await;
    assert!(
        asked.elapsed() < op_timeout,
        "an acquire opening a session took {:?}: {acquired:?}",
        asked.elapsed()
    );
    assert!(
        matches!(&acquired, Acquired::Fail(why) if why.contains("a new session")),
        "{acquired:?}"
    );
    signal_all(&cluster, Signal::SIGCONT);
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
    let dir = common::RunDir::new();
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
    let dir = common::RunDir::new();
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
