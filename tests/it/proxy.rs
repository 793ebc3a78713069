//! The nemesis proxy between redis-rs clients and real redis-server processes.
//!
//! Each test starts its own servers and proxies on free ports. Timing assertions are lower
//! bounds (latency added, an answer withheld for a while) or generous ratios, so a loaded
//! machine makes them slower, not flaky.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use lockaudit::cluster::{self, Cluster, ClusterSpec, Topology};
use lockaudit::nemesis::proxy::Proxy;
use redis::aio::MultiplexedConnection;
use redis::RedisResult;
use tempfile::TempDir;

/// A single redis-server with its temporary folder.
struct Server {
    cluster: Cluster,
    _dir: TempDir,
    addr: SocketAddr,
    password: String,
}

impl Server {
    async fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let cluster = cluster::start(&ClusterSpec::new(Topology::Single, dir.path()))
            .await
            .unwrap();
        let ep = cluster.endpoints();
        let node = &ep.nodes[0];
        let addr = format!("{}:{}", node.host, node.port).parse().unwrap();
        Server {
            cluster,
            _dir: dir,
            addr,
            password: ep.password.clone().unwrap(),
        }
    }

    /// A URL for this server's password at `addr` (the server or a proxy in front of it).
    fn url(&self, addr: SocketAddr) -> String {
        format!("redis://:{}@{}/", self.password, addr)
    }

    async fn direct(&self) -> MultiplexedConnection {
        connect(&self.url(self.addr)).await.unwrap()
    }

    async fn shutdown(self) {
        self.cluster.shutdown().await;
    }
}

/// Generous timeouts: redis-rs's defaults (1 s connect, 500 ms response) would turn the
/// held answers and added latency below into client-side errors.
async fn connect(url: &str) -> RedisResult<MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(10)))
        .set_response_timeout(Some(Duration::from_secs(10)));
    redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

async fn ping(conn: &mut MultiplexedConnection) -> RedisResult<String> {
    redis::cmd("PING").query_async(conn).await
}

async fn get(conn: &mut MultiplexedConnection, key: &str) -> RedisResult<Option<String>> {
    redis::cmd("GET").arg(key).query_async(conn).await
}

async fn set(conn: &mut MultiplexedConnection, key: &str, value: &[u8]) {
    let () = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query_async(conn)
        .await
        .unwrap();
}

/// Waits up to 5 s for `done`, polling.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "not within 5 s: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The sockets of this process that listen on `addr`'s port (`socket:[inode]`). Asked of
/// the kernel rather than by connecting: once a proxy lets its port go, another test's
/// server may take it, in this process too (all modules' tests share it), so a test
/// follows the proxy's own socket.
fn listening_sockets(addr: SocketAddr) -> Vec<String> {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("read /proc/net/tcp");
    let port = format!(":{:04X}", addr.port());
    // Columns: sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode.
    let inodes: Vec<String> = table
        .lines()
        .skip(1)
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|cols| cols.len() > 9 && cols[3] == "0A" && cols[1].ends_with(&port))
        .map(|cols| format!("socket:[{}]", cols[9]))
        .collect();
    std::fs::read_dir("/proc/self/fd")
        .expect("list /proc/self/fd")
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            inodes
                .iter()
                .find(|inode| target.as_os_str() == inode.as_str())
        })
        .cloned()
        .collect()
}

/// Whether any of `sockets` still listens on `addr`'s port.
fn still_listens(addr: SocketAddr, sockets: &[String]) -> bool {
    listening_sockets(addr).iter().any(|s| sockets.contains(s))
}

#[tokio::test]
async fn forwards_commands_and_counts_bytes() {
    let server = Server::start().await;
    let proxy = Proxy::start("p", server.addr).await.unwrap();
    assert_eq!(proxy.upstream(), server.addr);
    assert_eq!(proxy.addr().port(), proxy.port());
    assert_ne!(proxy.port(), server.addr.port());

    let mut conn = connect(&server.url(proxy.addr())).await.unwrap();
    assert_eq!(ping(&mut conn).await.unwrap(), "PONG");
    set(&mut conn, "k", b"v").await;
    assert_eq!(get(&mut conn, "k").await.unwrap().as_deref(), Some("v"));

    // A value spanning many reads arrives intact both ways.
    let big: Vec<u8> = (0..1_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    set(&mut conn, "big", &big).await;
    let back: Vec<u8> = redis::cmd("GET")
        .arg("big")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(back == big, "the 1 MB value came back changed");

    let stats = proxy.stats();
    assert_eq!(stats.accepted, 1, "{stats:?}");
    assert_eq!(stats.active, 1, "{stats:?}");
    assert!(stats.bytes_up > 1_000_000, "{stats:?}");
    assert!(stats.bytes_down > 1_000_000, "{stats:?}");
    assert!(!stats.cut && stats.latency.is_zero(), "{stats:?}");

    // The client closing closes the upstream side too, and the connection task ends.
    drop(conn);
    eventually("the connection ends after the client closes", || {
        proxy.stats().active == 0
    })
    .await;
    proxy.stop().await;
    server.shutdown().await;
}

#[tokio::test]
async fn cut_holds_both_directions_until_heal() {
    let server = Server::start().await;
    let proxy = Proxy::start("p", server.addr).await.unwrap();
    let url = server.url(proxy.addr());
    let mut conn = connect(&url).await.unwrap();
    set(&mut conn, "x", b"1").await;

    // A request already waiting upstream: its answer is produced during the cut and must
    // not come back through it.
    let mut blocked_conn = connect(&url).await.unwrap();
    let mut blpop = Box::pin(async move {
        redis::cmd("BLPOP")
            .arg("q")
            .arg(0)
            .query_async::<(String, String)>(&mut blocked_conn)
            .await
    });
    assert!(tokio::time::timeout(Duration::from_millis(50), &mut blpop)
        .await
        .is_err());
    let mut direct = server.direct().await;
    loop {
        let info: String = redis::cmd("INFO")
            .arg("clients")
            .query_async(&mut direct)
            .await
            .unwrap();
        if info.contains("blocked_clients:1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    proxy.cut();
    assert!(proxy.stats().cut);
    let before = proxy.stats();
    let () = redis::cmd("RPUSH")
        .arg("q")
        .arg("item")
        .query_async(&mut direct)
        .await
        .unwrap();

    // A request sent during the cut (kept alive, not dropped, so its answer is awaited).
    let mut during = conn.clone();
    let mut get_x = Box::pin(async move { get(&mut during, "x").await });
    // And a connection opened during the cut: accepted, but its handshake gets no answer.
    let mut opening = Box::pin(connect(&url));

    let window = Duration::from_millis(300);
    assert!(
        tokio::time::timeout(window, &mut get_x).await.is_err(),
        "GET answered through a cut"
    );
    assert!(
        tokio::time::timeout(window, &mut blpop).await.is_err(),
        "BLPOP answered through a cut"
    );
    assert!(
        tokio::time::timeout(window, &mut opening).await.is_err(),
        "a new connection completed its handshake through a cut"
    );
    let after = proxy.stats();
    assert_eq!(
        (before.bytes_up, before.bytes_down),
        (after.bytes_up, after.bytes_down),
        "bytes forwarded during the cut"
    );
    assert_eq!(after.accepted, before.accepted + 1, "{after:?}");

    proxy.heal();
    assert!(!proxy.stats().cut);
    let held = tokio::time::timeout(Duration::from_secs(5), get_x)
        .await
        .expect("the held GET is answered after heal");
    assert_eq!(held.unwrap().as_deref(), Some("1"));
    let popped = tokio::time::timeout(Duration::from_secs(5), blpop)
        .await
        .expect("the held BLPOP reply is delivered after heal");
    assert_eq!(popped.unwrap(), ("q".to_owned(), "item".to_owned()));
    let mut opened = tokio::time::timeout(Duration::from_secs(5), opening)
        .await
        .expect("the held handshake completes after heal")
        .unwrap();
    assert_eq!(ping(&mut opened).await.unwrap(), "PONG");
    set(&mut conn, "x", b"2").await;
    assert_eq!(get(&mut conn, "x").await.unwrap().as_deref(), Some("2"));

    proxy.stop().await;
    server.shutdown().await;
}

#[tokio::test]
async fn latency_delays_each_direction_and_keeps_order() {
    let server = Server::start().await;
    let proxy = Proxy::start("p", server.addr).await.unwrap();
    let mut conn = connect(&server.url(proxy.addr())).await.unwrap();
    ping(&mut conn).await.unwrap();

    let delay = Duration::from_millis(200);
    proxy.set_latency(delay);
    assert_eq!(proxy.stats().latency, delay);
    let begun = Instant::now();
    assert_eq!(ping(&mut conn).await.unwrap(), "PONG");
    let slow = begun.elapsed();
    assert!(slow >= 2 * delay, "a round trip took {slow:?}");

    // A pipeline of 200 INCRs: many chunks in flight; replies must come back in order.
    let mut pipe = redis::pipe();
    for _ in 0..200 {
        pipe.cmd("INCR").arg("n");
    }
    let begun = Instant::now();
    let counts: Vec<i64> = pipe.query_async(&mut conn).await.unwrap();
    assert_eq!(counts, (1..=200).collect::<Vec<i64>>());
    assert!(begun.elapsed() >= 2 * delay);

    proxy.heal();
    assert!(proxy.stats().latency.is_zero());
    let begun = Instant::now();
    for _ in 0..5 {
        ping(&mut conn).await.unwrap();
    }
    let fast = begun.elapsed() / 5;
    assert!(
        fast * 4 < slow,
        "after heal {fast:?}, with latency {slow:?}"
    );

    proxy.stop().await;
    server.shutdown().await;
}

#[tokio::test]
async fn retarget_moves_new_connections_and_closes_old_ones() {
    let a = Server::start().await;
    let b = Server::start().await;
    // Both servers got their own password; give B A's, so one URL works for both.
    let mut b_direct = b.direct().await;
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg(&a.password)
        .query_async(&mut b_direct)
        .await
        .unwrap();
    set(&mut a.direct().await, "x", b"from-a").await;
    set(&mut b_direct, "x", b"from-b").await;

    let proxy = Proxy::start("vip", a.addr).await.unwrap();
    let url = a.url(proxy.addr());
    let mut old = connect(&url).await.unwrap();
    assert_eq!(get(&mut old, "x").await.unwrap().as_deref(), Some("from-a"));

    proxy.retarget(b.addr);
    assert_eq!(proxy.upstream(), b.addr);
    assert_eq!(proxy.stats().upstream, b.addr);
    // The old connection must never read A again: it fails (redis-rs's multiplexed
    // connection does not reconnect) or, were it to reconnect, reads B.
    match get(&mut old, "x").await {
        Err(err) => eprintln!("old connection after retarget: {err} ({:?})", err.kind()),
        Ok(value) => assert_eq!(value.as_deref(), Some("from-b")),
    }
    let mut new = connect(&url).await.unwrap();
    assert_eq!(get(&mut new, "x").await.unwrap().as_deref(), Some("from-b"));
    assert_eq!(proxy.stats().accepted, 2);

    // reset_connections: the same without moving.
    proxy.reset_connections();
    assert!(get(&mut new, "x").await.is_err());
    let mut again = connect(&url).await.unwrap();
    assert_eq!(
        get(&mut again, "x").await.unwrap().as_deref(),
        Some("from-b")
    );
    eventually("the reset connections end", || proxy.stats().active == 1).await;

    proxy.stop().await;
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn upstream_down_fails_the_client_promptly() {
    let (_reserved, nowhere) = common::refusing_port();
    assert!(
        std::net::TcpListener::bind(nowhere).is_err(),
        "another server could take the reserved port"
    );
    let proxy = Proxy::start("p", nowhere).await.unwrap();
    let begun = Instant::now();
    let result = connect(&format!("redis://:pw@{}/", proxy.addr())).await;
    let took = begun.elapsed();
    let err = result.expect_err("no server behind the proxy, no connection");
    eprintln!("connect through a proxy to a dead port: {err} after {took:?}");
    assert!(took < Duration::from_secs(1), "failed only after {took:?}");
    assert!(proxy.stats().accepted >= 1);
    eventually("the failed connection ends", || proxy.stats().active == 0).await;
    proxy.stop().await;
}

#[tokio::test]
async fn stop_and_drop_close_the_port_and_the_connections() {
    let server = Server::start().await;

    let proxy = Proxy::start("p", server.addr).await.unwrap();
    let addr = proxy.addr();
    let mut conn = connect(&server.url(addr)).await.unwrap();
    ping(&mut conn).await.unwrap();
    let watcher = proxy.clone();
    let sockets = listening_sockets(addr);
    assert!(!sockets.is_empty(), "the probe misses a running proxy");
    proxy.stop().await;
    assert!(
        !still_listens(addr, &sockets),
        "a stopped proxy still listens"
    );
    assert!(ping(&mut conn).await.is_err(), "a connection outlived stop");
    assert_eq!(watcher.stats().active, 0);
    drop(watcher);

    // Dropping the last clone does the same, asynchronously.
    let proxy = Proxy::start("p", server.addr).await.unwrap();
    let addr = proxy.addr();
    let mut conn = connect(&server.url(addr)).await.unwrap();
    ping(&mut conn).await.unwrap();
    let sockets = listening_sockets(addr);
    assert!(!sockets.is_empty(), "the probe misses a running proxy");
    let clone = proxy.clone();
    drop(proxy);
    ping(&mut conn)
        .await
        .expect("a clone keeps the proxy running");
    drop(clone);
    eventually("the dropped proxy stops listening", || {
        !still_listens(addr, &sockets)
    })
    .await;
    assert!(ping(&mut conn).await.is_err(), "a connection outlived drop");

    server.shutdown().await;
}
