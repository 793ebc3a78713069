//! `setnx-expire`: SETNX, then give the key a time to live.
//!
//! Seed: `SETNX key 1`, and when it returns 1, a separate `EXPIRE key <ttl seconds>`;
//! release `DEL key`.
//! Flaw it must show: the two commands are not atomic, so a client that dies between them
//! (crash point `setnx-expire:after-setnx`) leaves a lock that never expires: `unavailable`.
//! EXPIRE speaks whole seconds, so the ttl is rounded up to a second. The lease counts from
//! the moment EXPIRE was sent. Release is a plain DEL and always reports `ok`.

use std::time::Instant;

use async_trait::async_trait;

use super::conn::Conn;
use super::{ms_between, ttl_seconds, Acquired, LockClient, LockOptions, Outcome};

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &[
    "setnx-expire:after-setnx",
    "setnx-expire:after-expire",
    "setnx-expire:before-del",
];

pub(crate) struct SetnxExpire {
    conn: Conn,
    options: LockOptions,
}

impl SetnxExpire {
    pub(crate) fn new(conn: Conn, options: LockOptions) -> Self {
        SetnxExpire { conn, options }
    }
}

#[async_trait]
impl LockClient for SetnxExpire {
    fn ttl_ms(&self) -> Option<i64> {
        // EXPIRE speaks whole seconds: the ttl rounded up is what the request asks.
        Some(ttl_seconds(self.options.ttl_ms).saturating_mul(1000))
    }

    async fn acquire(&mut self, key: &str) -> Acquired {
        let start = Instant::now();
        let ttl_s = ttl_seconds(self.options.ttl_ms);
        let mut setnx = redis::cmd("SETNX");
        setnx.arg(key).arg(1);
        let mut expire = redis::cmd("EXPIRE");
        expire.arg(key).arg(ttl_s);
        for attempt in 0..=self.options.retry_attempts {
            if attempt > 0 {
                tokio::time::sleep(self.options.retry_delay(attempt - 1)).await;
            }
            match self.conn.query::<bool>(&setnx).await {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => return e.before_write(),
            }
            // The window the recipe leaves open: the key exists and has no expiry.
            self.options.step(STEPS[0]);
            let sent = Instant::now();
            // EXPIRE's reply (0 when the key vanished meanwhile) is ignored, as in the seed.
            return match self.conn.query::<i64>(&expire).await {
                Ok(_) => {
                    self.options.step(STEPS[1]);
                    Acquired::Ok {
                        token: None,
                        lease_ms: Some(ms_between(start, sent).saturating_add(ttl_s * 1000)),
                    }
                }
                // SETNX took: the lock is ours, perhaps with no expiry at all.
                Err(e) => Acquired::Info(format!("SETNX ok, EXPIRE failed: {}", e.message())),
            };
        }
        Acquired::Fail("held by another client".into())
    }

    async fn release(&mut self, key: &str) -> Outcome {
        self.options.step(STEPS[2]);
        self.conn.plain_del(key).await
    }
}
