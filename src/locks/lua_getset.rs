//! `lua-getset`: the SETNX/GETSET recipe moved into one server-side script.
//!
//! Seed: one `EVAL` runs `SETNX key <now + ttl + 1>` and, when the stored Unix-seconds
//! timestamp is older than `now`, `GETSET`; release is a script that DELs the key only if its
//! timestamp has expired.
//! Flaw it must show: release frees nothing (a held lock is never expired when its holder
//! releases it), so every hand-over waits out the ttl: `unavailable` in a fault-free run.
//! Timestamps are whole seconds from the client's clock (`clock_skew_ms` applies) and the
//! ttl is rounded up to a second. Release always reports `ok`: the script's 0 does not tell
//! the client anything it acts on.

use async_trait::async_trait;
use redis::Script;

use super::conn::Conn;
use super::{ttl_seconds, Acquired, LockClient, LockOptions, Outcome};

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &["lua-getset:after-eval", "lua-getset:before-release"];

/// KEYS[1] the lock, ARGV[1] now (s), ARGV[2] ttl (s). Returns the stored expiry when taken,
/// 0 when not.
const ACQUIRE: &str = r"
local now = tonumber(ARGV[1])
local expires = now + tonumber(ARGV[2]) + 1
if redis.call('SETNX', KEYS[1], expires) == 1 then
  return expires
end
local current = tonumber(redis.call('GET', KEYS[1]))
if current and current < now then
  local old = tonumber(redis.call('GETSET', KEYS[1], expires))
  if old and old < now then
    return expires
  end
end
return 0
";

/// KEYS[1] the lock, ARGV[1] now (s). Deletes the key only when its timestamp has passed.
const RELEASE: &str = r"
local current = tonumber(redis.call('GET', KEYS[1]))
if current and current < tonumber(ARGV[1]) then
  return redis.call('DEL', KEYS[1])
end
return 0
";

pub(crate) struct LuaGetset {
    conn: Conn,
    options: LockOptions,
    acquire: Script,
    release: Script,
}

impl LuaGetset {
    pub(crate) fn new(conn: Conn, options: LockOptions) -> Self {
        LuaGetset {
            conn,
            options,
            acquire: Script::new(ACQUIRE),
            release: Script::new(RELEASE),
        }
    }

    fn now_seconds(&self) -> i64 {
        self.options.client_now_ms().div_euclid(1000)
    }
}

#[async_trait]
impl LockClient for LuaGetset {
    fn ttl_ms(&self) -> Option<i64> {
        // The script stores `now + ttl + 1` in whole seconds (the ttl rounded up): the
        // request asks for the lock until the end of that second, up to ttl + 1 s.
        Some(
            ttl_seconds(self.options.ttl_ms)
                .saturating_add(1)
                .saturating_mul(1000),
        )
    }

    async fn acquire(&mut self, key: &str) -> Acquired {
        let start_clock = self.options.client_now_ms();
        let ttl_s = ttl_seconds(self.options.ttl_ms);
        for attempt in 0..=self.options.retry_attempts {
            if attempt > 0 {
                tokio::time::sleep(self.options.retry_delay(attempt - 1)).await;
            }
            let mut invocation = self.acquire.key(key);
            invocation.arg(self.now_seconds()).arg(ttl_s);
            match self.conn.eval::<i64>(&invocation).await {
                Ok(0) => continue,
                Ok(expires) => {
                    self.options.step(STEPS[0]);
                    // Others see the lock expired once their second passes `expires`; the
                    // client's own promise ends when its clock reaches that second.
                    return Acquired::Ok {
                        token: None,
                        lease_ms: Some(expires.saturating_mul(1000).saturating_sub(start_clock)),
                    };
                }
                Err(e) => return e.before_write(),
            }
        }
        Acquired::Fail("held by another client".into())
    }

    async fn release(&mut self, key: &str) -> Outcome {
        self.options.step(STEPS[1]);
        let mut invocation = self.release.key(key);
        invocation.arg(self.now_seconds());
        // 1: it deleted an expired lock; 0: the lock had not expired and stays. The seed
        // ignores which, so the client goes on as if released.
        match self.conn.eval::<i64>(&invocation).await {
            Ok(_) => Outcome::Ok { lease_ms: None },
            Err(e) => e.outcome(),
        }
    }
}
