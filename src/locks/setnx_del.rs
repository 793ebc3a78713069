//! `setnx-del`: the oldest Redis lock.
//!
//! Seed: `SETNX key 1` takes the lock (1: ours, 0: retry later); `DEL key` releases it.
//! Flaw it must show: nothing ever expires the key, so a holder that crashes blocks everyone
//! forever (`unavailable` after a client kill). Its lease is therefore "until released"
//! (None), and its release is a plain DEL that always reports `ok`, whoever's lock it was.

use async_trait::async_trait;

use super::conn::Conn;
use super::{Acquired, LockClient, LockOptions, Outcome};

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &["setnx-del:after-setnx", "setnx-del:before-del"];

pub(crate) struct SetnxDel {
    conn: Conn,
    options: LockOptions,
}

impl SetnxDel {
    pub(crate) fn new(conn: Conn, options: LockOptions) -> Self {
        SetnxDel { conn, options }
    }
}

#[async_trait]
impl LockClient for SetnxDel {
    fn ttl_ms(&self) -> Option<i64> {
        // No expiry: the recipe asks for none.
        None
    }

    async fn acquire(&mut self, key: &str) -> Acquired {
        let mut setnx = redis::cmd("SETNX");
        setnx.arg(key).arg(1);
        for attempt in 0..=self.options.retry_attempts {
            if attempt > 0 {
                tokio::time::sleep(self.options.retry_delay(attempt - 1)).await;
            }
            match self.conn.query::<bool>(&setnx).await {
                Ok(true) => {
                    self.options.step(STEPS[0]);
                    return Acquired::Ok {
                        token: None,
                        lease_ms: None,
                    };
                }
                Ok(false) => continue,
                Err(e) => return e.before_write(),
            }
        }
        Acquired::Fail("held by another client".into())
    }

    async fn release(&mut self, key: &str) -> Outcome {
        self.options.step(STEPS[1]);
        self.conn.plain_del(key).await
    }
}
