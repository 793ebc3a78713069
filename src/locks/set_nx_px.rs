//! `set-nx-px`: the single-instance lock of the Redis documentation.
//!
//! Seed: `SET key <random value> NX PX ttl`; release by a Lua compare-and-delete (DEL only if
//! the value is still ours); renew by a Lua compare-and-PEXPIRE (the optional watchdog).
//! Flaws it must show: the lease runs out while the holder is paused, and the next holder
//! overlaps it (`overlap` after lease expiry, and unfenced a `stale-write`); asynchronous
//! replication loses the key on failover (`overlap` inside the lease).
//! The value is fresh per acquisition; the lease counts from the moment SET was sent.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::Script;

use super::conn::Conn;
use super::{ms_between, random_id, Acquired, LockClient, LockOptions, Outcome};

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &["set-nx-px:after-set", "set-nx-px:before-release"];

/// The documentation's release script.
pub(crate) const COMPARE_AND_DELETE: &str = r#"
if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("del", KEYS[1])
else
  return 0
end
"#;

/// The matching extension: ARGV[2] is the new ttl in ms.
pub(crate) const COMPARE_AND_PEXPIRE: &str = r#"
if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("pexpire", KEYS[1], ARGV[2])
else
  return 0
end
"#;

pub(crate) struct SetNxPx {
    conn: Conn,
    options: LockOptions,
    /// Our value per key we hold (or may hold after an `info` acquire).
    values: HashMap<String, String>,
    release: Script,
    renew: Script,
}

impl SetNxPx {
    pub(crate) fn new(conn: Conn, options: LockOptions) -> Self {
        SetNxPx {
            conn,
            options,
            values: HashMap::new(),
            release: Script::new(COMPARE_AND_DELETE),
            renew: Script::new(COMPARE_AND_PEXPIRE),
        }
    }
}

#[async_trait]
impl LockClient for SetNxPx {
    fn ttl_ms(&self) -> Option<i64> {
        // `PX ttl`.
        Some(self.options.ttl())
    }

    async fn acquire(&mut self, key: &str) -> Acquired {
        let start = Instant::now();
        let value = random_id();
        let mut set = redis::cmd("SET");
        set.arg(key)
            .arg(&value)
            .arg("NX")
            .arg("PX")
            .arg(self.options.ttl_ms);
        for attempt in 0..=self.options.retry_attempts {
            if attempt > 0 {
                tokio::time::sleep(self.options.retry_delay(attempt - 1)).await;
            }
            let sent = Instant::now();
            match self.conn.query::<Option<String>>(&set).await {
                Ok(Some(_)) => {
                    self.values.insert(key.to_string(), value);
                    self.options.step(STEPS[0]);
                    return Acquired::Ok {
                        token: None,
                        lease_ms: Some(ms_between(start, sent).saturating_add(self.options.ttl())),
                    };
                }
                Ok(None) => continue,
                Err(e) => {
                    // The SET may have landed: remember the value so a release can undo it.
                    self.values.insert(key.to_string(), value);
                    return e.before_write();
                }
            }
        }
        Acquired::Fail("held by another client".into())
    }

    async fn release(&mut self, key: &str) -> Outcome {
        self.options.step(STEPS[1]);
        let Some(value) = self.values.get(key).cloned() else {
            return Outcome::Fail("not held by this client".into());
        };
        let mut invocation = self.release.key(key);
        invocation.arg(&value);
        match self.conn.eval::<i64>(&invocation).await {
            Ok(1) => {
                self.values.remove(key);
                Outcome::Ok { lease_ms: None }
            }
            Ok(_) => {
                self.values.remove(key);
                Outcome::Fail("the lock's value is not ours (expired or taken)".into())
            }
            Err(e) => e.outcome(),
        }
    }

    async fn renew(&mut self, key: &str) -> Outcome {
        let start = Instant::now();
        let Some(value) = self.values.get(key).cloned() else {
            return Outcome::Fail("not held by this client".into());
        };
        let mut invocation = self.renew.key(key);
        invocation.arg(&value).arg(self.options.ttl_ms);
        let sent = Instant::now();
        match self.conn.eval::<i64>(&invocation).await {
            Ok(1) => Outcome::Ok {
                lease_ms: Some(ms_between(start, sent).saturating_add(self.options.ttl())),
            },
            Ok(_) => Outcome::Fail("the lock's value is not ours (expired or taken)".into()),
            Err(e) => e.outcome(),
        }
    }

    fn renews(&self) -> bool {
        self.options.watchdog
    }

    fn renew_every(&self) -> Option<Duration> {
        self.options.watchdog_period()
    }
}
