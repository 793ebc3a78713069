//! `fair-lock`: Redisson's `RFairLock`, a reentrant lock that grants waiters in arrival order.
//!
//! Seed: the hash `{owner: count}` of `reentrant`, plus a waiting queue (the list
//! `redisson_lock_queue:{lock}`) and each waiter's timeout (the sorted set
//! `redisson_lock_timeout:{lock}`, scores in the client's wall-clock ms). The acquire script
//! first drops waiters at the head whose timeout has passed, then grants the lock when it is
//! free and the queue is empty or headed by the caller, and otherwise enqueues the caller
//! with the timeout of the waiter before it (or the lock's PTTL) + the thread wait time, and
//! answers the expected wait. A waiting acquire polls as `tryLock(waitTime)` does: it
//! subscribes to its own channel `redisson_lock__channel:{lock}:<owner>`, which an unlock
//! publishes to for the head of the queue, and waits for the message or the expected wait;
//! when its wait time is up it takes itself out of the queue (`acquireFailed`). A grant
//! takes every remaining waiter's timeout down by one wait time. The thread wait time is the
//! acquire's `wait_ms` (as `tryLock(waitTime, ...)` makes it); an acquire that does not
//! wait (`wait_ms` 0) runs the script's no-queue variant (`tryLock()`).
//! Flaws it must show: those of `reentrant`, plus its queue's: a waiter that stops polling
//! (a paused or dead client) keeps its place until its timeout and is then dropped, so those
//! behind it overtake it, and the timeouts come from each client's own clock, so a client
//! whose clock runs ahead finds every waiter stale and drops them all. Its unlock answers
//! "unlocked" (1) when the lock is gone, so a holder whose lease ran out is told its
//! release succeeded.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::Script;

use super::conn::Conn;
use super::redisson_replies::{renewed, unlock_outcome};
use super::waiter::Waiter;
use super::{ms_between, Acquired, LockClient, LockOptions, Outcome};

/// The named steps (crash points). `queued`: the first try found the lock taken and put
/// this client in the queue, which it leaves dead.
pub(crate) const STEPS: &[&str] = &[
    "fair-lock:after-lock",
    "fair-lock:queued",
    "fair-lock:before-unlock",
];

/// `tryLockInnerAsync`, `EVAL_LONG`: KEYS[1] lock, KEYS[2] queue, KEYS[3] timeouts; ARGV[1]
/// lease ms, ARGV[2] owner, ARGV[3] thread wait ms, ARGV[4] the client's now (ms). nil:
/// taken; else the expected wait in ms.
const LOCK: &str = r"
while true do
    local firstThreadId2 = redis.call('lindex', KEYS[2], 0);
    if firstThreadId2 == false then
        break;
    end;
    local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));
    if timeout <= tonumber(ARGV[4]) then
        redis.call('zrem', KEYS[3], firstThreadId2);
        redis.call('lpop', KEYS[2]);
    else
        break;
    end;
end;
if (redis.call('exists', KEYS[1]) == 0)
    and ((redis.call('exists', KEYS[2]) == 0)
        or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
    redis.call('lpop', KEYS[2]);
    redis.call('zrem', KEYS[3], ARGV[2]);
    local keys = redis.call('zrange', KEYS[3], 0, -1);
    for i = 1, #keys, 1 do
        redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);
    end;
    redis.call('hset', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
local timeout = redis.call('zscore', KEYS[3], ARGV[2]);
if timeout ~= false then
    return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4]);
end;
local lastThreadId = redis.call('lindex', KEYS[2], -1);
local ttl;
if lastThreadId ~= false and lastThreadId ~= ARGV[2] then
    ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);
else
    ttl = redis.call('pttl', KEYS[1]);
end;
local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);
if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2]);
end;
return ttl;
";

/// `tryLockInnerAsync`, `EVAL_NULL_BOOLEAN` (an acquire that does not wait): KEYS as
/// `LOCK`; ARGV[1] lease ms, ARGV[2] owner, ARGV[3] the client's now (ms), ARGV[4] thread
/// wait ms. nil: taken; 1: not.
const TRY_LOCK: &str = r"
while true do
    local firstThreadId2 = redis.call('lindex', KEYS[2], 0);
    if firstThreadId2 == false then
        break;
    end;
    local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));
    if timeout <= tonumber(ARGV[3]) then
        redis.call('zrem', KEYS[3], firstThreadId2);
        redis.call('lpop', KEYS[2]);
    else
        break;
    end;
end;
if (redis.call('exists', KEYS[1]) == 0)
    and ((redis.call('exists', KEYS[2]) == 0)
        or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
    redis.call('lpop', KEYS[2]);
    redis.call('zrem', KEYS[3], ARGV[2]);
    local keys = redis.call('zrange', KEYS[3], 0, -1);
    for i = 1, #keys, 1 do
        redis.call('zincrby', KEYS[3], -tonumber(ARGV[4]), keys[i]);
    end;
    redis.call('hset', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
return 1;
";

/// `acquireFailedAsync`: KEYS[1] queue, KEYS[2] timeouts; ARGV[1] owner, ARGV[2] thread
/// wait ms. Takes the owner out of the queue; those behind it move up one wait time.
const ACQUIRE_FAILED: &str = r"
local queue = redis.call('lrange', KEYS[1], 0, -1);
local i = 1;
while i <= #queue and queue[i] ~= ARGV[1] do
    i = i + 1;
end;
i = i + 1;
while i <= #queue do
    redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i]);
    i = i + 1;
end;
redis.call('zrem', KEYS[2], ARGV[1]);
redis.call('lrem', KEYS[1], 0, ARGV[1]);
";

/// `unlockInnerAsync`: KEYS[1] lock, KEYS[2] queue, KEYS[3] timeouts, KEYS[4] channel;
/// ARGV[1] unlock message, ARGV[2] lease ms, ARGV[3] owner, ARGV[4] the client's now (ms).
/// nil: not ours; 0: still held (nested); 1: unlocked (also when the lock is gone).
const UNLOCK: &str = r"
while true do
    local firstThreadId2 = redis.call('lindex', KEYS[2], 0);
    if firstThreadId2 == false then
        break;
    end;
    local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));
    if timeout <= tonumber(ARGV[4]) then
        redis.call('zrem', KEYS[3], firstThreadId2);
        redis.call('lpop', KEYS[2]);
    else
        break;
    end;
end;
if (redis.call('exists', KEYS[1]) == 0) then
    local nextThreadId = redis.call('lindex', KEYS[2], 0);
    if nextThreadId ~= false then
        redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]);
    end;
    return 1;
end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    return 0;
end;
redis.call('del', KEYS[1]);
local nextThreadId = redis.call('lindex', KEYS[2], 0);
if nextThreadId ~= false then
    redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]);
end;
return 1;
";

/// RedissonLock's renewal: KEYS[1] lock; ARGV[1] lease ms, ARGV[2] owner. 1: renewed; 0:
/// not ours.
const RENEW: &str = r"
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return 1;
end;
return 0;
";

/// Redisson's unlock message.
const UNLOCK_MESSAGE: i64 = 0;

fn queue(key: &str) -> String {
    format!("redisson_lock_queue:{{{key}}}")
}

fn timeouts(key: &str) -> String {
    format!("redisson_lock_timeout:{{{key}}}")
}

fn channel(key: &str) -> String {
    format!("redisson_lock__channel:{{{key}}}")
}

pub(crate) struct FairLock {
    conn: Conn,
    options: LockOptions,
    lock: Script,
    try_lock: Script,
    acquire_failed: Script,
    unlock: Script,
    renew: Script,
    waiter: Waiter,
}

impl FairLock {
    pub(crate) fn new(conn: Conn, options: LockOptions) -> Self {
        FairLock {
            conn,
            options,
            lock: Script::new(LOCK),
            try_lock: Script::new(TRY_LOCK),
            acquire_failed: Script::new(ACQUIRE_FAILED),
            unlock: Script::new(UNLOCK),
            renew: Script::new(RENEW),
            waiter: Waiter::default(),
        }
    }

    /// This owner's channel, the one an unlock publishes to when it heads the queue.
    fn own_channel(&self, key: &str) -> String {
        format!("{}:{}", channel(key), self.options.client_id)
    }

    /// One `LOCK`: None when taken, else the expected wait.
    async fn try_queued(&mut self, key: &str) -> Result<Option<i64>, Acquired> {
        let mut invocation = self.lock.key(key);
        invocation
            .key(queue(key))
            .key(timeouts(key))
            .arg(self.options.ttl_ms)
            .arg(&self.options.client_id)
            .arg(self.options.wait_ms)
            .arg(self.options.client_now_ms());
        self.conn
            .eval::<Option<i64>>(&invocation)
            .await
            .map_err(|e| e.before_write())
    }

    /// `acquireFailed`: out of the queue. Its outcome changes nothing for the acquire,
    /// which failed either way; a waiter left in the queue is dropped at its timeout.
    async fn leave_queue(&mut self, key: &str) {
        let mut invocation = self.acquire_failed.key(queue(key));
        invocation
            .key(timeouts(key))
            .arg(&self.options.client_id)
            .arg(self.options.wait_ms);
        let _ = self.conn.eval::<()>(&invocation).await;
    }

    fn granted(&self, start: Instant, sent: Instant) -> Acquired {
        self.options.step(STEPS[0]);
        Acquired::Ok {
            token: None,
            lease_ms: Some(ms_between(start, sent).saturating_add(self.options.ttl())),
        }
    }

    /// `tryLock()` with the algorithm's retry policy: the no-queue variant, never waiting
    /// in line.
    async fn acquire_without_waiting(&mut self, key: &str) -> Acquired {
        let start = Instant::now();
        for attempt in 0..=self.options.retry_attempts {
            let mut invocation = self.try_lock.key(key);
            invocation
                .key(queue(key))
                .key(timeouts(key))
                .arg(self.options.ttl_ms)
                .arg(&self.options.client_id)
                .arg(self.options.client_now_ms())
                .arg(self.options.wait_ms);
            let sent = Instant::now();
            match self.conn.eval::<Option<i64>>(&invocation).await {
                Ok(None) => return self.granted(start, sent),
                Ok(Some(_)) => {}
                Err(e) => return e.before_write(),
            }
            if attempt < self.options.retry_attempts {
                tokio::time::sleep(self.options.retry_delay(attempt)).await;
            }
        }
        Acquired::Fail("held by another client".into())
    }
}

#[async_trait]
impl LockClient for FairLock {
    fn ttl_ms(&self) -> Option<i64> {
        // `PEXPIRE ttl`.
        Some(self.options.ttl())
    }

    fn wait_ms(&self) -> Option<i64> {
        (self.options.wait_ms > 0).then(|| i64::try_from(self.options.wait_ms).unwrap_or(i64::MAX))
    }

    /// `tryLock(wait_ms, ...)`: try, and while the wait time lasts, wait in the queue for
    /// the unlock message or the expected wait and try again; out of the queue when it is
    /// up.
    async fn acquire(&mut self, key: &str) -> Acquired {
        if self.options.wait_ms == 0 {
            return self.acquire_without_waiting(key).await;
        }
        let start = Instant::now();
        let budget = Duration::from_millis(self.options.wait_ms);
        let left = |start: Instant| budget.checked_sub(start.elapsed()).filter(|d| !d.is_zero());
        let channel = self.own_channel(key);
        // As Redisson: one try, which queues the caller; then subscribe to its channel and
        // try again before each wait, so that no unlock message can slip in between.
        let sent = Instant::now();
        match self.try_queued(key).await {
            Ok(None) => return self.granted(start, sent),
            Ok(Some(_)) => {}
            Err(e) => return e,
        }
        self.options.step(STEPS[1]);
        if left(start).is_none() {
            self.leave_queue(key).await;
            return Acquired::Fail("wait time elapsed in the queue".into());
        }
        self.waiter.subscribe(&mut self.conn, &channel).await;
        let outcome = loop {
            let sent = Instant::now();
            let expected = match self.try_queued(key).await {
                Ok(None) => break self.granted(start, sent),
                Ok(Some(ms)) => ms,
                Err(e) => break e,
            };
            let Some(remaining) = left(start) else {
                self.leave_queue(key).await;
                break Acquired::Fail("wait time elapsed in the queue".into());
            };
            // The expected wait when it is shorter, else the rest of the wait time (a past
            // expected wait, negative, waits the rest too).
            let wait = match u64::try_from(expected) {
                Ok(ms) => remaining.min(Duration::from_millis(ms)),
                Err(_) => remaining,
            };
            self.waiter.wait(wait).await;
            if left(start).is_none() {
                self.leave_queue(key).await;
                break Acquired::Fail("wait time elapsed in the queue".into());
            }
        };
        self.waiter.unsubscribe(self.conn.timeout(), &channel).await;
        outcome
    }

    async fn release(&mut self, key: &str) -> Outcome {
        self.options.step(STEPS[2]);
        let mut invocation = self.unlock.key(key);
        invocation
            .key(queue(key))
            .key(timeouts(key))
            .key(channel(key))
            .arg(UNLOCK_MESSAGE)
            .arg(self.options.ttl_ms)
            .arg(&self.options.client_id)
            .arg(self.options.client_now_ms());
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
