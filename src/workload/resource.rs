//! The resource a lock guards: a counter on the separate storage server, one per lock key.
//!
//! Plain, it accepts every write (what an unfenced application does). Fenced, a Lua script
//! rejects a write whose token is below the highest it has accepted: Kleppmann's fencing,
//! which keeps stale holders out even when the lock fails.

use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use redis::Script;

use crate::topology::{node_url, Node};

/// Sets the value unless the token is below the highest accepted; 1 accepted, 0 rejected.
const FENCED_WRITE: &str = r#"
local highest = tonumber(redis.call('GET', KEYS[2]) or '-1')
local token = tonumber(ARGV[1])
if token < highest then
  return 0
end
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SET', KEYS[1], ARGV[2])
return 1
"#;

/// What a write came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteResult {
    Accepted,
    /// The fenced resource refused a stale token; the highest it had accepted.
    Rejected {
        highest: Option<i64>,
    },
    /// A conditional write found the value changed since it was read (an optimistic
    /// lock's conflict), with why: certainly not written.
    Conflict(String),
}

/// One client's handle on the guarded resource.
#[derive(Clone)]
pub struct Resource {
    connection: MultiplexedConnection,
    fenced: bool,
    script: Script,
    /// Where the connection came from, if shared: told when it fails.
    shared: Option<(Arc<Storage>, u64)>,
}

/// A worker's connection to the storage server, shared by its clients. With a connection
/// per client every read and write cost its own send and receive on both ends; on one
/// multiplexed connection the requests of the clients that are ready together go out in
/// one write and their replies come back in one read. The storage server is never faulted
/// and a worker's clients share its faults (a kill, a pause, a cut link), so the sharing is
/// nothing a client can observe. A connection that failed is dropped, and the next client
/// to ask makes a new one.
pub struct Storage {
    node: Node,
    password: Option<String>,
    fenced: bool,
    link: tokio::sync::Mutex<Link>,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Storage({}:{})", self.node.host, self.node.port)
    }
}

#[derive(Default)]
struct Link {
    /// Counts the connections made, so that a failure only drops the one it happened on.
    generation: u64,
    connection: Option<MultiplexedConnection>,
}

impl Storage {
    pub fn new(storage: &Node, password: Option<&str>, fenced: bool) -> Arc<Storage> {
        Arc::new(Storage {
            node: storage.clone(),
            password: password.map(str::to_string),
            fenced,
            link: tokio::sync::Mutex::new(Link::default()),
        })
    }

    /// A handle on the resource over the shared connection, connecting if there is none.
    pub async fn resource(self: &Arc<Self>) -> redis::RedisResult<Resource> {
        let mut link = self.link.lock().await;
        let connection = match &link.connection {
            Some(connection) => connection.clone(),
            None => {
                let client = redis::Client::open(node_url(&self.node, self.password.as_deref()))?;
                let connection = client.get_multiplexed_async_connection().await?;
                link.generation += 1;
                link.connection = Some(connection.clone());
                connection
            }
        };
        Ok(Resource {
            connection,
            fenced: self.fenced,
            script: Script::new(FENCED_WRITE),
            shared: Some((self.clone(), link.generation)),
        })
    }

    async fn failed(&self, generation: u64) {
        let mut link = self.link.lock().await;
        if link.generation == generation {
            link.connection = None;
        }
    }
}

fn value_key(lock_key: &str) -> String {
    format!("resource:{lock_key}")
}

fn fence_key(lock_key: &str) -> String {
    format!("resource:{lock_key}:highest-token")
}

impl Resource {
    pub async fn connect(
        storage: &Node,
        password: Option<&str>,
        fenced: bool,
    ) -> redis::RedisResult<Resource> {
        let client = redis::Client::open(node_url(storage, password))?;
        let connection = client.get_multiplexed_async_connection().await?;
        Ok(Resource {
            connection,
            fenced,
            script: Script::new(FENCED_WRITE),
            shared: None,
        })
    }

    /// Says that a request on this handle's connection failed or timed out: a shared
    /// connection is dropped for the clients that ask next.
    pub async fn failed(&self) {
        if let Some((storage, generation)) = &self.shared {
            storage.failed(*generation).await;
        }
    }

    /// The counter's value (None: never written).
    pub async fn read(&mut self, lock_key: &str) -> redis::RedisResult<Option<i64>> {
        let read = redis::cmd("GET")
            .arg(value_key(lock_key))
            .query_async(&mut self.connection)
            .await;
        if read.is_err() {
            self.failed().await;
        }
        read
    }

    /// Writes `value` carrying `token`. A fenced resource needs a token: a write without one
    /// is rejected, since it cannot be ordered against the others.
    pub async fn write(
        &mut self,
        lock_key: &str,
        token: Option<i64>,
        value: i64,
    ) -> redis::RedisResult<WriteResult> {
        let written = self.try_write(lock_key, token, value).await;
        if written.is_err() {
            self.failed().await;
        }
        written
    }

    async fn try_write(
        &mut self,
        lock_key: &str,
        token: Option<i64>,
        value: i64,
    ) -> redis::RedisResult<WriteResult> {
        if !self.fenced {
            let () = redis::cmd("SET")
                .arg(value_key(lock_key))
                .arg(value)
                .query_async(&mut self.connection)
                .await?;
            return Ok(WriteResult::Accepted);
        }
        let Some(token) = token else {
            return Ok(WriteResult::Rejected { highest: None });
        };
        let accepted: i64 = self
            .script
            .key(value_key(lock_key))
            .key(fence_key(lock_key))
            .arg(token)
            .arg(value)
            .invoke_async(&mut self.connection)
            .await?;
        if accepted == 1 {
            return Ok(WriteResult::Accepted);
        }
        let highest: Option<i64> = redis::cmd("GET")
            .arg(fence_key(lock_key))
            .query_async(&mut self.connection)
            .await?;
        Ok(WriteResult::Rejected { highest })
    }
}
