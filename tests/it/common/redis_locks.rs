//! A redis-server and lock clients on it, for the tests of the Redis locks.

use lockaudit::cluster::{self, Cluster, ClusterSpec, Endpoints, Topology};
use lockaudit::locks::{self, Acquired, LockClient, LockOptions};
use redis::aio::MultiplexedConnection;

use super::RunDir;

/// A redis-server of its own, and the folder it keeps its files in (kept if the test fails).
pub struct Servers {
    pub cluster: Cluster,
    _dir: RunDir,
}

/// Starts a single redis-server.
pub async fn start() -> Servers {
    let dir = RunDir::new();
    let spec = ClusterSpec::new(Topology::Single, dir.path());
    let cluster = cluster::start(&spec).await.expect("start redis-server");
    Servers { cluster, _dir: dir }
}

/// A plain connection to the first node, to look at what the locks wrote.
pub async fn raw(endpoints: &Endpoints) -> MultiplexedConnection {
    let node = &endpoints.nodes[0];
    let url = match &endpoints.password {
        Some(pw) => format!("redis://:{pw}@{}:{}/", node.host, node.port),
        None => format!("redis://{}:{}/", node.host, node.port),
    };
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("raw connection")
}

/// `algorithm`'s client, connected.
pub async fn client(
    algorithm: &str,
    endpoints: &Endpoints,
    options: &LockOptions,
) -> Box<dyn LockClient> {
    match locks::connect(algorithm, endpoints, options).await {
        Ok(c) => c,
        Err(e) => panic!("{algorithm}: connect: {e}"),
    }
}

/// The key's time to live, in ms (-2: no key, -1: no expiry).
pub async fn pttl(conn: &mut MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query_async(conn)
        .await
        .expect("PTTL")
}

/// The lease of an acquire that must have succeeded.
pub fn lease(a: &Acquired) -> Option<i64> {
    match a {
        Acquired::Ok { lease_ms, .. } => *lease_ms,
        other => panic!("expected ok, got {other:?}"),
    }
}

/// Asserts that the acquire succeeded.
pub fn assert_ok(a: &Acquired, what: &str) {
    assert!(matches!(a, Acquired::Ok { .. }), "{what}: {a:?}");
}

/// Asserts that the acquire failed.
pub fn assert_fail(a: &Acquired, what: &str) {
    assert!(matches!(a, Acquired::Fail(_)), "{what}: {a:?}");
}
