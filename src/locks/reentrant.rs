//! `reentrant`: Redisson's `RLock`, the reentrant lock most Java services use.
//!
//! Seed: a hash `{owner: count}`; a Lua script takes it when the key is absent or already ours
//! (`HINCRBY` + `PEXPIRE`, else returns the `PTTL`), a watchdog renews it every ttl/3, and
//! release decrements, DELs at zero and `PUBLISH`es to the lock's channel to wake waiters.
//! Flaws it must show: as `set-nx-px` (the lease runs out in a pause, failover loses the
//! key), plus renewals that keep a lock alive for a holder that no longer makes progress.
//! The scripts are Redisson's (`tryLockInnerAsync`, `renewExpirationAsync`,
//! `unlockInnerAsync`); the owner field is `client_id`. A nested acquire by the same client
//! increments the count and re-arms the ttl, and is an `ok` of its own (the checker nests it).
//! A contended acquire subscribes to the channel and waits for the unlock message or the
//! lock's remaining ttl, capped by the retry delay, before trying again.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::Script;

use super::conn::Conn;
use super::redisson_replies::{renewed, unlock_outcome};
use super::waiter::Waiter;
use super::{ms_between, Acquired, LockClient, LockOptions, Outcome};

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &["reentrant:after-lock", "reentrant:before-unlock"];

/// KEYS[1] lock, ARGV[1] lease ms, ARGV[2] owner. nil: taken; else the holder's PTTL.
const LOCK: &str = r"
if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
return redis.call('pttl', KEYS[1]);
";

/// KEYS[1] lock, ARGV[1] lease ms, ARGV[2] owner. 1: renewed; 0: not ours.
const RENEW: &str = r"
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return 1;
end;
return 0;
";

/// KEYS[1] lock, KEYS[2] channel, ARGV[1] unlock message, ARGV[2] lease ms, ARGV[3] owner.
/// nil: not ours; 0: still held (nested); 1: released and published.
const UNLOCK: &str = r"
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    return 0;
else
    redis.call('del', KEYS[1]);
    redis.call('publish', KEYS[2], ARGV[1]);
    return 1;
end;
return nil;
";

/// Redisson's unlock message.
const UNLOCK_MESSAGE: i64 = 0;

/// Redisson's channel name for a lock.
fn channel(key: &str) -> String {
    format!("redisson_lock__channel:{{{key}}}")
}

pub(crate) struct Reentrant {
    conn: Conn,
    options: LockOptions,
    lock: Script,
    renew: Script,
    unlock: Script,
    /// The waiters' subscription, made on first contention and kept.
    waiter: Waiter,
}

impl Reentrant {
    pub(crate) fn new(conn: Conn, options: LockOptions) -> Self {
        Reentrant {
            conn,
            options,
            lock: Script::new(LOCK),
            renew: Script::new(RENEW),
            unlock: Script::new(UNLOCK),
            waiter: Waiter::default(),
        }
    }
}

#[async_trait]
impl LockClient for Reentrant {
    fn ttl_ms(&self) -> Option<i64> {
        // `PEXPIRE ttl`.
        Some(self.options.ttl())
    }

    async fn acquire(&mut self, key: &str) -> Acquired {
        let start = Instant::now();
        let channel = channel(key);
        let mut subscribed = false;
        let mut outcome = Acquired::Fail("held by another client".into());
        for attempt in 0..=self.options.retry_attempts {
            let mut invocation = self.lock.key(key);
            invocation
                .arg(self.options.ttl_ms)
                .arg(&self.options.client_id);
            let sent = Instant::now();
            let holder_pttl = match self.conn.eval::<Option<i64>>(&invocation).await {
                Ok(None) => {
                    self.options.step(STEPS[0]);
                    outcome = Acquired::Ok {
                        token: None,
                        lease_ms: Some(ms_between(start, sent).saturating_add(self.options.ttl())),
                    };
                    break;
                }
                Ok(Some(pttl)) => pttl,
                Err(e) => {
                    outcome = e.before_write();
                    break;
                }
            };
            if attempt == self.options.retry_attempts {
                break;
            }
            if !subscribed {
                self.waiter.subscribe(&mut self.conn, &channel).await;
                subscribed = true;
            }
            // As Redisson: wait for the unlock message at most the holder's remaining ttl.
            let delay = self.options.retry_delay(attempt);
            let wait = match u64::try_from(holder_pttl) {
                Ok(ms) => delay.min(Duration::from_millis(ms)),
                Err(_) => delay,
            };
            self.waiter.wait(wait).await;
        }
        if subscribed {
            self.waiter.unsubscribe(self.conn.timeout(), &channel).await;
        }
        outcome
    }

    async fn release(&mut self, key: &str) -> Outcome {
        self.options.step(STEPS[1]);
        let mut invocation = self.unlock.key(key);
        invocation
            .key(channel(key))
            .arg(UNLOCK_MESSAGE)
            .arg(self.options.ttl_ms)
            .arg(&self.options.client_id);
        unlock_outcome(self.conn.eval::<Option<i64>>(&invocation).await)
    }

    async fn renew(&mut self, key: &str) -> Outcome {
        let start = Instant::now();
        let mut invocation = self.renew.key(key);
        invocation
            .arg(self.options.ttl_ms)
            .arg(&self.options.client_id);
        let sent = Instant::now();
        match renewed(self.conn.eval::<i64>(&invocation).await) {
            Ok(()) => Outcome::Ok {
                lease_ms: Some(ms_between(start, sent).saturating_add(self.options.ttl())),
            },
            Err(outcome) => outcome,
        }
    }

    fn renews(&self) -> bool {
        self.options.watchdog
    }

    fn renew_every(&self) -> Option<Duration> {
        self.options.watchdog_period()
    }
}
