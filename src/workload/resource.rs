//! The resource a lock guards: a counter on the separate storage server, one per lock key.
//!
//! Plain, it accepts every write (what an unfenced application does). Fenced, a Lua script
//! rejects a write whose token is below the highest it has accepted: Kleppmann's fencing,
//! which keeps stale holders out even when the lock fails.

use redis::aio::MultiplexedConnection;
use redis::Script;

use crate::cluster::{node_url, Node};

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

/// One client's connection to the guarded resource.
#[derive(Clone)]
pub struct Resource {
    connection: MultiplexedConnection,
    fenced: bool,
    script: Script,
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
        })
    }

    /// The counter's value (None: never written).
    pub async fn read(&mut self, lock_key: &str) -> redis::RedisResult<Option<i64>> {
        redis::cmd("GET")
            .arg(value_key(lock_key))
            .query_async(&mut self.connection)
            .await
    }

    /// Writes `value` carrying `token`. A fenced resource needs a token: a write without one
    /// is rejected, since it cannot be ordered against the others.
    pub async fn write(
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
