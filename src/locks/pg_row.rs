//! `pg-row`: a row lock held by an open transaction.
//!
//! Seed: a row per key (inserted once if missing); `BEGIN; SELECT value FROM lockaudit_rows
//! WHERE key = $1 FOR UPDATE NOWAIT` takes the lock (a "could not obtain lock" error:
//! taken, roll back and retry later), the transaction stays open through the critical
//! section, and `COMMIT` releases it. A shared acquire (a reader) locks `FOR SHARE NOWAIT`.
//!
//! The guarded counter is that very row: the critical section reads and updates it inside
//! the lock's transaction, as such locks are used, and the update becomes visible with the
//! `COMMIT` that releases the lock. So the history's `write` `ok` is the `UPDATE`'s, not a
//! commit's: a holder that dies between the two (killed, or its server crashes) loses that
//! write with its transaction, and the checker, which only sees the acknowledged `UPDATE`,
//! reports the missing increment as a `lost-update`.
//!
//! Weak spots: the server ends the transaction, and so the lock, when the session dies
//! (a killed client frees its rows at once, with nothing written), and a server crash does
//! the same to every holder at once while they may still be working; a holder that is
//! paused or cut off keeps its transaction open, and its rows locked, for as long as that
//! lasts (no lease: waiters are refused meanwhile).

use std::collections::HashSet;

use async_trait::async_trait;
use tokio_postgres::Client;

use super::pg::{acquire_error, describe, is_lock_not_available, outcome_error};
use super::{Acquired, CounterError, CounterWrite, LockClient, LockOptions, Mode, Outcome};

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &["pg-row:after-lock", "pg-row:before-commit"];

pub(crate) struct PgRow {
    session: Client,
    options: LockOptions,
    /// Keys whose row this client has made sure of.
    rows: HashSet<String>,
    /// The key whose transaction is open.
    open: Option<String>,
}

impl PgRow {
    pub(crate) fn new(session: Client, options: LockOptions) -> Self {
        PgRow {
            session,
            options,
            rows: HashSet::new(),
            open: None,
        }
    }

    /// One try: BEGIN and lock the row; Ok(false) when it was locked by another session.
    async fn try_lock(&mut self, key: &str, mode: Mode) -> Result<bool, tokio_postgres::Error> {
        let sql = match mode {
            Mode::Exclusive => "SELECT value FROM lockaudit_rows WHERE key = $1 FOR UPDATE NOWAIT",
            Mode::Shared => "SELECT value FROM lockaudit_rows WHERE key = $1 FOR SHARE NOWAIT",
        };
        self.session.batch_execute("BEGIN").await?;
        match self.session.query(sql, &[&key]).await {
            Ok(_) => Ok(true),
            Err(e) => {
                // An aborted transaction must be ended before the next statement.
                self.session.batch_execute("ROLLBACK").await?;
                if is_lock_not_available(&e) {
                    Ok(false)
                } else {
                    Err(e)
                }
            }
        }
    }

    async fn take(&mut self, key: &str, mode: Mode) -> Acquired {
        if !self.rows.contains(key) {
            let insert = "INSERT INTO lockaudit_rows (key) VALUES ($1) ON CONFLICT DO NOTHING";
            if let Err(e) = self.session.execute(insert, &[&key]).await {
                return acquire_error(&e);
            }
            self.rows.insert(key.to_string());
        }
        for attempt in 0..=self.options.retry_attempts {
            if attempt > 0 {
                tokio::time::sleep(self.options.retry_delay(attempt - 1)).await;
            }
            match self.try_lock(key, mode).await {
                Ok(true) => {
                    self.open = Some(key.to_string());
                    self.options.step(STEPS[0]);
                    return Acquired::Ok {
                        token: None,
                        lease_ms: None,
                    };
                }
                Ok(false) => continue,
                // A refusal after BEGIN was rolled back; a broken session is unknown.
                Err(e) => return acquire_error(&e),
            }
        }
        Acquired::Fail("row locked by another transaction".into())
    }

    async fn commit(&mut self, key: &str) -> Outcome {
        if self.open.as_deref() != Some(key) {
            return Outcome::Fail("no open transaction holds this row".into());
        }
        self.options.step(STEPS[1]);
        self.open = None;
        match self.session.batch_execute("COMMIT").await {
            Ok(()) => Outcome::Ok { lease_ms: None },
            Err(e) => outcome_error(&e),
        }
    }
}

#[async_trait]
impl LockClient for PgRow {
    fn ttl_ms(&self) -> Option<i64> {
        None
    }

    async fn acquire(&mut self, key: &str) -> Acquired {
        self.take(key, Mode::Exclusive).await
    }

    async fn release(&mut self, key: &str) -> Outcome {
        self.commit(key).await
    }

    async fn acquire_mode(&mut self, key: &str, mode: Mode) -> Acquired {
        self.take(key, mode).await
    }

    async fn release_mode(&mut self, key: &str, _mode: Mode) -> Outcome {
        self.commit(key).await
    }

    /// Inside the lock's transaction when one is open; else (the run's final reads) on its
    /// own, seeing what was committed.
    async fn read_counter(&mut self, key: &str) -> Result<Option<i64>, CounterError> {
        let sql = "SELECT value FROM lockaudit_rows WHERE key = $1";
        match self.session.query_opt(sql, &[&key]).await {
            Ok(row) => Ok(row.and_then(|r| r.get::<_, Option<i64>>(0))),
            // Whatever broke, the session (and the lock's transaction) is in doubt.
            Err(e) => Err(CounterError::Unknown(describe(&e))),
        }
    }

    async fn write_counter(&mut self, key: &str, value: i64) -> CounterWrite {
        let sql = "UPDATE lockaudit_rows SET value = $2 WHERE key = $1";
        match self.session.execute(sql, &[&key, &value]).await {
            Ok(1) => CounterWrite::Accepted,
            Ok(n) => CounterWrite::Unknown(format!("the UPDATE changed {n} rows")),
            Err(e) => CounterWrite::Unknown(describe(&e)),
        }
    }
}
