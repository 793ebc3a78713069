//! `pg-advisory`: PostgreSQL's session-level advisory locks.
//!
//! Seed: `SELECT pg_try_advisory_lock(k)` takes the lock (true: ours; false: retry later),
//! `SELECT pg_advisory_unlock(k)` releases it, on a session of its own per client; `k` is
//! the lock key hashed to a bigint. A shared acquire (a reader) uses
//! `pg_try_advisory_lock_shared` / `pg_advisory_unlock_shared`. No expiry: the server holds
//! the lock as long as the session lives, and ends it with the session.
//!
//! Weak spots: the lock lives in the server's memory only, so a server crash (or restart)
//! drops every lock while their holders may still be inside their critical section: they
//! learn it only at their next statement on that session. A client the server cannot see
//! die (paused, cut off: its TCP connection stays open) keeps its lock for as long as that
//! lasts. Two keys hashing to one bigint would share a lock (64 bits: never seen here).
//!
//! The guarded counter is on the Redis storage server, not in the database: an advisory
//! lock guards something the database knows nothing of (a job, a file, another service),
//! and a counter written on the lock's own session would die with it, hiding the very
//! overlap a server crash causes.

use async_trait::async_trait;
use tokio_postgres::Client;

use super::pg::{acquire_error, key_hash, outcome_error};
use super::{Acquired, LockClient, LockOptions, Mode, Outcome};

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &["pg-advisory:after-lock", "pg-advisory:before-unlock"];

pub(crate) struct PgAdvisory {
    session: Client,
    options: LockOptions,
}

impl PgAdvisory {
    pub(crate) fn new(session: Client, options: LockOptions) -> Self {
        PgAdvisory { session, options }
    }

    async fn take(&mut self, key: &str, mode: Mode) -> Acquired {
        let sql = match mode {
            Mode::Exclusive => "SELECT pg_try_advisory_lock($1)",
            Mode::Shared => "SELECT pg_try_advisory_lock_shared($1)",
        };
        let k = key_hash(key);
        for attempt in 0..=self.options.retry_attempts {
            if attempt > 0 {
                tokio::time::sleep(self.options.retry_delay(attempt - 1)).await;
            }
            match self.session.query_one(sql, &[&k]).await {
                Ok(row) => match row.try_get::<_, bool>(0) {
                    Ok(true) => {
                        self.options.step(STEPS[0]);
                        return Acquired::Ok {
                            token: None,
                            lease_ms: None,
                        };
                    }
                    Ok(false) => continue,
                    Err(e) => return Acquired::Info(e.to_string()),
                },
                Err(e) => return acquire_error(&e),
            }
        }
        Acquired::Fail("held by another session".into())
    }

    async fn give_back(&mut self, key: &str, mode: Mode) -> Outcome {
        self.options.step(STEPS[1]);
        let sql = match mode {
            Mode::Exclusive => "SELECT pg_advisory_unlock($1)",
            Mode::Shared => "SELECT pg_advisory_unlock_shared($1)",
        };
        match self.session.query_one(sql, &[&key_hash(key)]).await {
            Ok(row) => match row.try_get::<_, bool>(0) {
                Ok(true) => Outcome::Ok { lease_ms: None },
                // The server warns "you don't own a lock of type ...": it was not ours.
                Ok(false) => Outcome::Fail("this session held no such lock".into()),
                Err(e) => Outcome::Info(e.to_string()),
            },
            Err(e) => outcome_error(&e),
        }
    }
}

#[async_trait]
impl LockClient for PgAdvisory {
    fn ttl_ms(&self) -> Option<i64> {
        None
    }

    fn shared(&self) -> bool {
        true
    }

    async fn acquire(&mut self, key: &str) -> Acquired {
        self.take(key, Mode::Exclusive).await
    }

    async fn release(&mut self, key: &str) -> Outcome {
        self.give_back(key, Mode::Exclusive).await
    }

    async fn acquire_mode(&mut self, key: &str, mode: Mode) -> Acquired {
        self.take(key, mode).await
    }

    async fn release_mode(&mut self, key: &str, mode: Mode) -> Outcome {
        self.give_back(key, mode).await
    }
}
