//! `pg-lock-column`: the "LOCK column = Y/N" flag many applications keep in a table.
//!
//! Seed: a row per key (inserted once if missing) with `locked` 'Y' or 'N' and `owner`;
//! `UPDATE lockaudit_locks SET locked = 'Y', owner = $1 WHERE key = $2 AND locked = 'N'`
//! takes the lock (one row updated: ours; none: taken, retry later), and
//! `UPDATE ... SET locked = 'N', owner = NULL WHERE key = $2 AND owner = $1` releases it
//! (none updated: it was not ours). Each statement commits on its own.
//!
//! Weak spot: nothing expires the flag. A holder that dies (killed, or retired after an
//! `info`) leaves 'Y' behind for good, and so does a take whose answer was lost after it
//! committed: the key is deadlocked (`unavailable`). The flag is durable, so a server crash
//! and its recovery keep every stuck 'Y' too.
//!
//! The guarded counter is on the Redis storage server, as for `pg-advisory`: the flag is
//! committed at once and outlives its session by design, so the work it guards happens in
//! other transactions or outside the database, not in the lock's own.

use std::collections::HashSet;

use async_trait::async_trait;
use tokio_postgres::Client;

use super::pg::{acquire_error, outcome_error};
use super::{Acquired, LockClient, LockOptions, Outcome};

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &[
    "pg-lock-column:after-update",
    "pg-lock-column:before-release",
];

pub(crate) struct PgLockColumn {
    session: Client,
    options: LockOptions,
    /// Keys whose row this client has made sure of.
    rows: HashSet<String>,
}

impl PgLockColumn {
    pub(crate) fn new(session: Client, options: LockOptions) -> Self {
        PgLockColumn {
            session,
            options,
            rows: HashSet::new(),
        }
    }
}

#[async_trait]
impl LockClient for PgLockColumn {
    fn ttl_ms(&self) -> Option<i64> {
        None
    }

    async fn acquire(&mut self, key: &str) -> Acquired {
        if !self.rows.contains(key) {
            let insert = "INSERT INTO lockaudit_locks (key) VALUES ($1) ON CONFLICT DO NOTHING";
            if let Err(e) = self.session.execute(insert, &[&key]).await {
                return acquire_error(&e);
            }
            self.rows.insert(key.to_string());
        }
        let take =
            "UPDATE lockaudit_locks SET locked = 'Y', owner = $1 WHERE key = $2 AND locked = 'N'";
        for attempt in 0..=self.options.retry_attempts {
            if attempt > 0 {
                tokio::time::sleep(self.options.retry_delay(attempt - 1)).await;
            }
            match self
                .session
                .execute(take, &[&self.options.client_id, &key])
                .await
            {
                Ok(1) => {
                    self.options.step(STEPS[0]);
                    return Acquired::Ok {
                        token: None,
                        lease_ms: None,
                    };
                }
                Ok(_) => continue,
                Err(e) => return acquire_error(&e),
            }
        }
        Acquired::Fail("locked = 'Y'".into())
    }

    async fn release(&mut self, key: &str) -> Outcome {
        self.options.step(STEPS[1]);
        let give_back =
            "UPDATE lockaudit_locks SET locked = 'N', owner = NULL WHERE key = $2 AND owner = $1";
        match self
            .session
            .execute(give_back, &[&self.options.client_id, &key])
            .await
        {
            Ok(1) => Outcome::Ok { lease_ms: None },
            Ok(_) => Outcome::Fail("the flag is not ours".into()),
            Err(e) => outcome_error(&e),
        }
    }
}
