//! `rw-lock`: Redisson's `RReadWriteLock`, a reentrant read-write lock.
//!
//! Seed: one hash per lock with a `mode` field (`read` / `write`) and a count per owner. A
//! reader (`RedissonReadLock`) takes it when there is no mode, when the mode is `read`, or
//! when the mode is `write` and the writer is itself (a writer may also read); each read
//! level also sets a timeout key `{lock}:<owner>:rwlock_timeout:<n>` with the lease, and the
//! hash's expiry is the longest lease any reader holds. A writer (`RedissonWriteLock`, owner
//! field `<owner>:write`) takes it only when there is no mode, or re-enters its own write
//! mode (its re-entry adds a ttl to the hash's remaining time). The watchdog renews every
//! ttl/3: a reader `PEXPIRE`s the hash and every reader's timeout keys, a writer the hash.
//! Release decrements; the last reader (or a writer whose reads are gone) deletes the hash
//! and `PUBLISH`es to `redisson_rwlock:{lock}`; a writer that still reads leaves the mode
//! `read`.
//! Flaws it must show: those of `reentrant` (the lease runs out in a pause, a failover loses
//! the hash), and one of its own: both unlock scripts answer "unlocked" (1) when the hash is
//! gone, so a holder whose lease ran out is told its release succeeded (no `lost-lock`
//! where `reentrant` reports one); readers keep the hash alive for each other, and a steady
//! stream of readers keeps a writer out (no writer preference).
//! The scripts are Redisson's (`tryLockInnerAsync`, `unlockInnerAsync`,
//! `renewExpirationAsync` of both classes); the owner is `client_id`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::Script;

use super::conn::Conn;
use super::redisson_replies::{renewed, unlock_outcome};
use super::waiter::Waiter;
use super::{ms_between, Acquired, LockClient, LockOptions, Mode, Outcome};

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &["rw-lock:after-lock", "rw-lock:before-unlock"];

/// RedissonReadLock: KEYS[1] lock, KEYS[2] this owner's timeout prefix; ARGV[1] lease ms,
/// ARGV[2] owner, ARGV[3] owner's write name. nil: taken; else the hash's PTTL.
const READ_LOCK: &str = r"
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
    redis.call('hset', KEYS[1], 'mode', 'read');
    redis.call('hset', KEYS[1], ARGV[2], 1);
    redis.call('set', KEYS[2] .. ':1', 1);
    redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1);
    local key = KEYS[2] .. ':' .. ind;
    redis.call('set', key, 1);
    redis.call('pexpire', key, ARGV[1]);
    local remainTime = redis.call('pttl', KEYS[1]);
    redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1]));
    return nil;
end;
return redis.call('pttl', KEYS[1]);
";

/// RedissonReadLock: KEYS[1] lock, KEYS[2] channel, KEYS[3] this owner's timeout prefix,
/// KEYS[4] the timeout keys' prefix; ARGV[1] unlock message, ARGV[2] owner. nil: not ours;
/// 0: still held; 1: unlocked (also when the hash is gone).
const READ_UNLOCK: &str = r"
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
    redis.call('publish', KEYS[2], ARGV[1]);
    return 1;
end;
local lockExists = redis.call('hexists', KEYS[1], ARGV[2]);
if (lockExists == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1);
if (counter == 0) then
    redis.call('hdel', KEYS[1], ARGV[2]);
end;
redis.call('del', KEYS[3] .. ':' .. (counter+1));
if (redis.call('hlen', KEYS[1]) > 1) then
    local maxRemainTime = -3;
    local keys = redis.call('hkeys', KEYS[1]);
    for n, key in ipairs(keys) do
        counter = tonumber(redis.call('hget', KEYS[1], key));
        if type(counter) == 'number' then
            for i=counter, 1, -1 do
                local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i);
                maxRemainTime = math.max(remainTime, maxRemainTime);
            end;
        end;
    end;
    if maxRemainTime > 0 then
        redis.call('pexpire', KEYS[1], maxRemainTime);
        return 0;
    end;
    if mode == 'write' then
        return 0;
    end;
end;
redis.call('del', KEYS[1]);
redis.call('publish', KEYS[2], ARGV[1]);
return 1;
";

/// RedissonReadLock: KEYS[1] lock, KEYS[2] the timeout keys' prefix; ARGV[1] lease ms,
/// ARGV[2] owner. 1: renewed (the hash and every reader's timeout keys); 0: not ours.
const READ_RENEW: &str = r"
local counter = redis.call('hget', KEYS[1], ARGV[2]);
if (counter ~= false) then
    redis.call('pexpire', KEYS[1], ARGV[1]);
    if (redis.call('hlen', KEYS[1]) > 1) then
        local keys = redis.call('hkeys', KEYS[1]);
        for n, key in ipairs(keys) do
            counter = tonumber(redis.call('hget', KEYS[1], key));
            if type(counter) == 'number' then
                for i=counter, 1, -1 do
                    redis.call('pexpire', KEYS[2] .. ':' .. key .. ':rwlock_timeout:' .. i, ARGV[1]);
                end;
            end;
        end;
    end;
    return 1;
end;
return 0;
";

/// RedissonWriteLock: KEYS[1] lock; ARGV[1] lease ms, ARGV[2] owner's write name. nil:
/// taken; else the hash's PTTL.
const WRITE_LOCK: &str = r"
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
    redis.call('hset', KEYS[1], 'mode', 'write');
    redis.call('hset', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
if (mode == 'write') then
    if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
        redis.call('hincrby', KEYS[1], ARGV[2], 1);
        local currentExpire = redis.call('pttl', KEYS[1]);
        redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]);
        return nil;
    end;
end;
return redis.call('pttl', KEYS[1]);
";

/// RedissonWriteLock: KEYS[1] lock, KEYS[2] channel; ARGV[1] read-unlock message, ARGV[2]
/// lease ms, ARGV[3] owner's write name. nil: not ours; 0: still held; 1: unlocked (also
/// when the hash is gone).
const WRITE_UNLOCK: &str = r"
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
    redis.call('publish', KEYS[2], ARGV[1]);
    return 1;
end;
if (mode == 'write') then
    local lockExists = redis.call('hexists', KEYS[1], ARGV[3]);
    if (lockExists == 0) then
        return nil;
    else
        local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
        if (counter > 0) then
            redis.call('pexpire', KEYS[1], ARGV[2]);
            return 0;
        else
            redis.call('hdel', KEYS[1], ARGV[3]);
            if (redis.call('hlen', KEYS[1]) == 1) then
                redis.call('del', KEYS[1]);
                redis.call('publish', KEYS[2], ARGV[1]);
            else
                redis.call('hset', KEYS[1], 'mode', 'read');
            end;
            return 1;
        end;
    end;
end;
return nil;
";

/// RedissonLock's renewal, which the write lock inherits: KEYS[1] lock; ARGV[1] lease ms,
/// ARGV[2] owner's write name. 1: renewed; 0: not ours.
const WRITE_RENEW: &str = r"
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return 1;
end;
return 0;
";

/// Redisson's `LockPubSub` messages.
const UNLOCK_MESSAGE: i64 = 0;
const READ_UNLOCK_MESSAGE: i64 = 1;

/// Redisson's channel of a read-write lock.
fn channel(key: &str) -> String {
    format!("redisson_rwlock:{{{key}}}")
}

/// The prefix of every reader's timeout keys (`suffixName`'s `{lock}`).
fn timeout_keys_prefix(key: &str) -> String {
    format!("{{{key}}}")
}

pub(crate) struct RwLock {
    conn: Conn,
    options: LockOptions,
    read_lock: Script,
    read_unlock: Script,
    read_renew: Script,
    write_lock: Script,
    write_unlock: Script,
    write_renew: Script,
    waiter: Waiter,
    /// Per key, the read and write levels this client holds: what the watchdog renews.
    held: HashMap<String, (u32, u32)>,
}

impl RwLock {
    pub(crate) fn new(conn: Conn, options: LockOptions) -> Self {
        RwLock {
            conn,
            options,
            read_lock: Script::new(READ_LOCK),
            read_unlock: Script::new(READ_UNLOCK),
            read_renew: Script::new(READ_RENEW),
            write_lock: Script::new(WRITE_LOCK),
            write_unlock: Script::new(WRITE_UNLOCK),
            write_renew: Script::new(WRITE_RENEW),
            waiter: Waiter::default(),
            held: HashMap::new(),
        }
    }

    /// The owner's write-lock name (`getWriteLockName`).
    fn write_name(&self) -> String {
        format!("{}:write", self.options.client_id)
    }

    /// This owner's read timeout prefix (`getReadWriteTimeoutNamePrefix`).
    fn timeout_prefix(&self, key: &str) -> String {
        format!("{{{key}}}:{}:rwlock_timeout", self.options.client_id)
    }

    /// One try: None when taken, else the hash's PTTL.
    async fn try_lock(&mut self, key: &str, mode: Mode) -> Result<Option<i64>, Acquired> {
        let invocation = match mode {
            Mode::Shared => {
                let mut i = self.read_lock.key(key);
                i.key(self.timeout_prefix(key))
                    .arg(self.options.ttl_ms)
                    .arg(&self.options.client_id)
                    .arg(self.write_name());
                i
            }
            Mode::Exclusive => {
                let mut i = self.write_lock.key(key);
                i.arg(self.options.ttl_ms).arg(self.write_name());
                i
            }
        };
        self.conn
            .eval::<Option<i64>>(&invocation)
            .await
            .map_err(|e| e.before_write())
    }

    fn count(&mut self, key: &str, mode: Mode, up: bool) {
        let entry = self.held.entry(key.to_string()).or_default();
        let level = match mode {
            Mode::Shared => &mut entry.0,
            Mode::Exclusive => &mut entry.1,
        };
        *level = if up {
            level.saturating_add(1)
        } else {
            level.saturating_sub(1)
        };
        if *entry == (0, 0) {
            self.held.remove(key);
        }
    }
}

#[async_trait]
impl LockClient for RwLock {
    fn ttl_ms(&self) -> Option<i64> {
        // `PEXPIRE ttl` (or longer: a reader keeps the longest, a writer's re-entry adds).
        Some(self.options.ttl())
    }

    async fn acquire(&mut self, key: &str) -> Acquired {
        self.acquire_mode(key, Mode::Exclusive).await
    }

    async fn release(&mut self, key: &str) -> Outcome {
        self.release_mode(key, Mode::Exclusive).await
    }

    async fn acquire_mode(&mut self, key: &str, mode: Mode) -> Acquired {
        let start = Instant::now();
        let channel = channel(key);
        let mut subscribed = false;
        let mut outcome = Acquired::Fail("held by another client".into());
        for attempt in 0..=self.options.retry_attempts {
            let sent = Instant::now();
            let holder_pttl = match self.try_lock(key, mode).await {
                Ok(None) => {
                    self.options.step(STEPS[0]);
                    self.count(key, mode, true);
                    outcome = Acquired::Ok {
                        token: None,
                        lease_ms: Some(ms_between(start, sent).saturating_add(self.options.ttl())),
                    };
                    break;
                }
                Ok(Some(pttl)) => pttl,
                Err(e) => {
                    outcome = e;
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
            // As Redisson: wait for an unlock message at most the hash's remaining ttl.
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

    async fn release_mode(&mut self, key: &str, mode: Mode) -> Outcome {
        self.options.step(STEPS[1]);
        // The hold ends whatever the answer: an `info` retires the client anyway.
        self.count(key, mode, false);
        let reply = match mode {
            Mode::Shared => {
                let mut i = self.read_unlock.key(key);
                i.key(channel(key))
                    .key(self.timeout_prefix(key))
                    .key(timeout_keys_prefix(key))
                    .arg(UNLOCK_MESSAGE)
                    .arg(&self.options.client_id);
                self.conn.eval::<Option<i64>>(&i).await
            }
            Mode::Exclusive => {
                let mut i = self.write_unlock.key(key);
                i.key(channel(key))
                    .arg(READ_UNLOCK_MESSAGE)
                    .arg(self.options.ttl_ms)
                    .arg(self.write_name());
                self.conn.eval::<Option<i64>>(&i).await
            }
        };
        unlock_outcome(reply)
    }

    /// The watchdog of each mode held: the write lock's renewal, then the read lock's.
    async fn renew(&mut self, key: &str) -> Outcome {
        let start = Instant::now();
        let (reads, writes) = self.held.get(key).copied().unwrap_or((0, 0));
        if reads == 0 && writes == 0 {
            return Outcome::Fail("lock not held by this client".into());
        }
        let sent = Instant::now();
        if writes > 0 {
            let mut i = self.write_renew.key(key);
            i.arg(self.options.ttl_ms).arg(self.write_name());
            if let Err(outcome) = renewed(self.conn.eval::<i64>(&i).await) {
                return outcome;
            }
        }
        if reads > 0 {
            let mut i = self.read_renew.key(key);
            i.key(timeout_keys_prefix(key))
                .arg(self.options.ttl_ms)
                .arg(&self.options.client_id);
            if let Err(outcome) = renewed(self.conn.eval::<i64>(&i).await) {
                return outcome;
            }
        }
        Outcome::Ok {
            lease_ms: Some(ms_between(start, sent).saturating_add(self.options.ttl())),
        }
    }

    fn renews(&self) -> bool {
        self.options.watchdog
    }

    fn renew_every(&self) -> Option<Duration> {
        self.options.watchdog_period()
    }
}
