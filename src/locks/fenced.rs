//! `--fenced`: any algorithm, plus a fencing token per acquisition.
//!
//! After the lock is won, `INCR <key>:fence` on the storage server (never faulted, so the
//! counter survives the lock servers' restarts and failovers) gives a number that grows with
//! every acquisition of that key, so the guarded resource can reject a write carrying a token
//! lower than one it already accepted.
//! Fencing does not stop overlaps; it stops stale writes from getting through, which is what
//! a fenced run must show.

use std::time::Duration;

use async_trait::async_trait;

use super::conn::Conn;
use super::{Acquired, LockClient, LockOptions, Mode, Notice, Outcome};

/// The step between winning the lock and taking the token.
pub(crate) const STEP: &str = "fenced:before-incr";

/// The counter's key for a lock.
fn counter_key(key: &str) -> String {
    format!("{key}:fence")
}

pub(crate) struct Fenced {
    inner: Box<dyn LockClient>,
    counter: Conn,
    options: LockOptions,
}

impl Fenced {
    pub(crate) fn new(inner: Box<dyn LockClient>, counter: Conn, options: LockOptions) -> Self {
        Fenced {
            inner,
            counter,
            options,
        }
    }
}

#[async_trait]
impl LockClient for Fenced {
    fn ttl_ms(&self) -> Option<i64> {
        self.inner.ttl_ms()
    }

    async fn acquire(&mut self, key: &str) -> Acquired {
        self.acquire_mode(key, Mode::Exclusive).await
    }

    /// Readers take a token too: every acquisition of the key counts, whatever its mode.
    async fn acquire_mode(&mut self, key: &str, mode: Mode) -> Acquired {
        let lease_ms = match self.inner.acquire_mode(key, mode).await {
            Acquired::Ok { lease_ms, .. } => lease_ms,
            other => return other,
        };
        self.options.step(STEP);
        let mut incr = redis::cmd("INCR");
        incr.arg(counter_key(key));
        match self.counter.query::<i64>(&incr).await {
            Ok(token) => Acquired::Ok {
                token: Some(token),
                lease_ms,
            },
            // We hold the lock but have no token to write with: nobody can say what this
            // acquisition amounts to.
            Err(e) => Acquired::Info(format!("locked, but no fencing token: {}", e.message())),
        }
    }

    async fn release(&mut self, key: &str) -> Outcome {
        self.inner.release(key).await
    }

    async fn release_mode(&mut self, key: &str, mode: Mode) -> Outcome {
        self.inner.release_mode(key, mode).await
    }

    fn shared(&self) -> bool {
        self.inner.shared()
    }

    fn fair(&self) -> bool {
        self.inner.fair()
    }

    fn wait_ms(&self) -> Option<i64> {
        self.inner.wait_ms()
    }

    async fn renew(&mut self, key: &str) -> Outcome {
        self.inner.renew(key).await
    }

    fn renews(&self) -> bool {
        self.inner.renews()
    }

    fn renew_every(&self) -> Option<Duration> {
        self.inner.renew_every()
    }

    async fn next_notice(&mut self) -> Option<Notice> {
        self.inner.next_notice().await
    }

    fn try_notice(&mut self) -> Option<Notice> {
        self.inner.try_notice()
    }

    // An optimistic algorithm takes no lock and no token: it runs as it is, its counter its
    // own (`Algorithm::counter_with_lock`).
    async fn read_counter(&mut self, key: &str) -> Result<Option<i64>, super::CounterError> {
        self.inner.read_counter(key).await
    }

    async fn write_counter(&mut self, key: &str, value: i64) -> super::CounterWrite {
        self.inner.write_counter(key, value).await
    }
}
