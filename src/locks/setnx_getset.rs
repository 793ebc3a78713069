//! `setnx-getset`: the lock recipe of the old Redis `SETNX` documentation.
//!
//! Seed: `SETNX key <now + ttl + 1>` (a timestamp from the client's clock); when taken, `GET`
//! it and, if that time has passed, take over with `GETSET key <now + ttl + 1>`, winning only
//! if the old value GETSET returns is still expired; release = unconditional `DEL`.
//! Flaws it must show: a paused or slow holder DELs the next holder's lock (`overlap`); a
//! client whose clock runs ahead (`clock_skew_ms`) sees live locks as expired and steals
//! them; a loser's GETSET rewrites the winner's expiry. Timestamps are Unix milliseconds.
//!
//! The lease is what the client's own clock promises: until its timestamp, counted from the
//! acquire's start on the same clock.

use async_trait::async_trait;

use super::conn::Conn;
use super::{Acquired, LockClient, LockOptions, Outcome};

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &[
    "setnx-getset:after-setnx",
    "setnx-getset:after-get",
    "setnx-getset:after-getset",
    "setnx-getset:before-del",
];

pub(crate) struct SetnxGetset {
    conn: Conn,
    options: LockOptions,
}

impl SetnxGetset {
    pub(crate) fn new(conn: Conn, options: LockOptions) -> Self {
        SetnxGetset { conn, options }
    }

    /// The value the recipe stores: "current Unix time + lock timeout + 1".
    fn expiry(&self) -> i64 {
        self.options
            .client_now_ms()
            .saturating_add(self.options.ttl())
            .saturating_add(1)
    }
}

/// What one try found.
enum Try {
    Won(i64),
    Taken,
    Done(Acquired),
}

impl SetnxGetset {
    async fn attempt(&mut self, key: &str) -> Try {
        let expires = self.expiry();
        let mut setnx = redis::cmd("SETNX");
        setnx.arg(key).arg(expires);
        match self.conn.query::<bool>(&setnx).await {
            Ok(true) => {
                self.options.step(STEPS[0]);
                return Try::Won(expires);
            }
            Ok(false) => {}
            Err(e) => return Try::Done(e.before_write()),
        }
        let mut get = redis::cmd("GET");
        get.arg(key);
        let current = match self.conn.query::<Option<String>>(&get).await {
            Ok(Some(v)) => v,
            // Released between SETNX and GET: try again.
            Ok(None) => return Try::Taken,
            // A read changes nothing: we certainly do not hold the lock.
            Err(e) => return Try::Done(Acquired::Fail(e.message().to_string())),
        };
        let Ok(current) = current.trim().parse::<i64>() else {
            return Try::Done(Acquired::Fail(format!(
                "lock value {current:?} is not a timestamp"
            )));
        };
        if current >= self.options.client_now_ms() {
            return Try::Taken;
        }
        self.options.step(STEPS[1]);
        // Expired (by our clock): take over. GETSET writes whatever happens next, so a loser
        // still leaves its own expiry on the winner's lock, as the recipe does.
        let expires = self.expiry();
        let mut getset = redis::cmd("GETSET");
        getset.arg(key).arg(expires);
        let old = match self.conn.query::<Option<String>>(&getset).await {
            Ok(old) => old,
            Err(e) => return Try::Done(e.before_write()),
        };
        // Still expired (or gone: then our GETSET created it): ours.
        let won = match old {
            None => true,
            Some(v) => v
                .trim()
                .parse::<i64>()
                .map(|old| old < self.options.client_now_ms())
                .unwrap_or(false),
        };
        if won {
            self.options.step(STEPS[2]);
            Try::Won(expires)
        } else {
            Try::Taken
        }
    }
}

#[async_trait]
impl LockClient for SetnxGetset {
    fn ttl_ms(&self) -> Option<i64> {
        // The stored expiry is the client clock + this ttl (+ 1 ms).
        Some(self.options.ttl())
    }

    async fn acquire(&mut self, key: &str) -> Acquired {
        let start_clock = self.options.client_now_ms();
        for attempt in 0..=self.options.retry_attempts {
            if attempt > 0 {
                tokio::time::sleep(self.options.retry_delay(attempt - 1)).await;
            }
            match self.attempt(key).await {
                // The "+ 1" of the recipe is a margin, not part of the promise: the lease is
                // the ttl from the moment the timestamp was taken, on the client's clock,
                // counted from the start. That clock reads whole milliseconds, so the
                // difference of two readings overstates the time between them by up to 1 ms:
                // 1 ms less of it, so that the promise never outlasts the grant + the ttl.
                Try::Won(expires) => {
                    let ttl = self.options.ttl();
                    let taken_at = expires.saturating_sub(ttl).saturating_sub(1);
                    let elapsed = taken_at.saturating_sub(start_clock).saturating_sub(1);
                    return Acquired::Ok {
                        token: None,
                        lease_ms: Some(ttl.saturating_add(elapsed.max(0))),
                    };
                }
                Try::Taken => continue,
                Try::Done(outcome) => return outcome,
            }
        }
        Acquired::Fail("held by another client".into())
    }

    async fn release(&mut self, key: &str) -> Outcome {
        self.options.step(STEPS[3]);
        // Unconditional, as in the recipe: after a pause this deletes the next holder's
        // lock, and still reports `ok`.
        self.conn.plain_del(key).await
    }
}
