//! `watch-multi`: Redis's optimistic transaction. No lock at all.
//!
//! Seed: `WATCH counter; GET counter`, work, then `MULTI; SET counter n+1; EXEC`. A nil
//! `EXEC` means the watched key changed since the `WATCH`: nothing was written (a
//! conflict), so the client reads again and retries.
//!
//! The guarded counter is on the lock's own server (`master-0`, key `resource:<key>`), not
//! on the storage server: `WATCH` only sees writes on the server it runs on. There is
//! nothing to hold, so the history has no acquire or release: its reads and conditional
//! writes are judged by `lost-update`.
//!
//! Weak spots: the check is only as durable as the server. Without persistence a restart
//! brings the counter back empty, and an asynchronous replica promoted by a failover lacks
//! the writes it had not received: acknowledged increments are lost either way, without
//! any client doing anything wrong.

use async_trait::async_trait;

use super::conn::{Conn, OpError};
use super::{Acquired, CounterError, CounterWrite, LockClient, LockOptions, Outcome};

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &["watch-multi:after-watch", "watch-multi:before-exec"];

fn counter_key(key: &str) -> String {
    format!("resource:{key}")
}

pub(crate) struct WatchMulti {
    conn: Conn,
    options: LockOptions,
    /// The key this connection watches since its last read.
    watching: Option<String>,
}

impl WatchMulti {
    pub(crate) fn new(conn: Conn, options: LockOptions) -> Self {
        WatchMulti {
            conn,
            options,
            watching: None,
        }
    }

    async fn exec(&mut self, key: &str, value: i64) -> Result<redis::Value, OpError> {
        self.conn
            .query::<redis::Value>(&redis::cmd("MULTI"))
            .await?;
        let mut set = redis::cmd("SET");
        set.arg(counter_key(key)).arg(value);
        self.conn.query::<redis::Value>(&set).await?;
        self.conn.query::<redis::Value>(&redis::cmd("EXEC")).await
    }
}

#[async_trait]
impl LockClient for WatchMulti {
    fn ttl_ms(&self) -> Option<i64> {
        None
    }

    async fn acquire(&mut self, _key: &str) -> Acquired {
        Acquired::Fail("watch-multi takes no lock (optimistic)".into())
    }

    async fn release(&mut self, _key: &str) -> Outcome {
        Outcome::Fail("watch-multi takes no lock (optimistic)".into())
    }

    async fn read_counter(&mut self, key: &str) -> Result<Option<i64>, CounterError> {
        self.watching = None;
        // A read changes nothing: a definite failure (the server down) is a `fail`.
        let classify = |e: OpError| match e {
            OpError::Definite(m) => CounterError::Refused(m),
            OpError::Unknown(m) => CounterError::Unknown(m),
        };
        let mut watch = redis::cmd("WATCH");
        watch.arg(counter_key(key));
        self.conn.query::<()>(&watch).await.map_err(classify)?;
        let mut get = redis::cmd("GET");
        get.arg(counter_key(key));
        let value = self
            .conn
            .query::<Option<i64>>(&get)
            .await
            .map_err(classify)?;
        self.watching = Some(key.to_string());
        self.options.step(STEPS[0]);
        Ok(value)
    }

    async fn write_counter(&mut self, key: &str, value: i64) -> CounterWrite {
        // A reconnect since the WATCH (after an error) watches nothing: never EXEC then.
        if self.watching.take().as_deref() != Some(key) {
            return CounterWrite::Rejected("this connection does not watch the key".into());
        }
        self.options.step(STEPS[1]);
        match self.exec(key, value).await {
            Ok(redis::Value::Nil) => {
                CounterWrite::Rejected("EXEC aborted: the watched key changed".into())
            }
            Ok(redis::Value::Array(replies)) if replies.len() == 1 => CounterWrite::Accepted,
            Ok(other) => CounterWrite::Unknown(format!("EXEC answered {other:?}")),
            Err(OpError::Definite(m)) => CounterWrite::Rejected(m),
            Err(OpError::Unknown(m)) => CounterWrite::Unknown(m),
        }
    }
}
