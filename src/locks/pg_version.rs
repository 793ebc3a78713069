//! `pg-version`: optimistic concurrency control with a version column. No lock at all.
//!
//! Seed: read the counter row and its version (`SELECT value, version FROM
//! lockaudit_counters WHERE key = $1`), work, then write it conditionally:
//! `UPDATE lockaudit_counters SET value = $2, version = version + 1 WHERE key = $1 AND
//! version = $3`. No row updated: someone wrote since the read (a conflict, certainly not
//! written), so the client reads again and retries. Each statement commits on its own.
//!
//! The guarded counter is that row: the version check is the whole mechanism, so it must
//! sit on the same row as the value. There is nothing to hold, so the history has no
//! acquire or release: its reads and conditional writes are judged by `lost-update` (see
//! docs/src/reference/history.md on how an optimistic algorithm fits the checker).
//!
//! Weak spots: none for lost updates as long as every writer goes through the version
//! check; a writer who does not (a plain UPDATE elsewhere) is not part of this recipe.
//! Under contention it starves: every conflict is a retry.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use tokio_postgres::Client;

use super::pg::describe;
use super::{Acquired, CounterError, CounterWrite, LockClient, LockOptions, Outcome};

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &["pg-version:after-read", "pg-version:before-write"];

pub(crate) struct PgVersion {
    session: Client,
    options: LockOptions,
    /// Keys whose row this client has made sure of.
    rows: HashSet<String>,
    /// The version each key had at this client's last read.
    read: HashMap<String, i64>,
}

impl PgVersion {
    pub(crate) fn new(session: Client, options: LockOptions) -> Self {
        PgVersion {
            session,
            options,
            rows: HashSet::new(),
            read: HashMap::new(),
        }
    }
}

#[async_trait]
impl LockClient for PgVersion {
    fn ttl_ms(&self) -> Option<i64> {
        None
    }

    async fn acquire(&mut self, _key: &str) -> Acquired {
        Acquired::Fail("pg-version takes no lock (optimistic)".into())
    }

    async fn release(&mut self, _key: &str) -> Outcome {
        Outcome::Fail("pg-version takes no lock (optimistic)".into())
    }

    async fn read_counter(&mut self, key: &str) -> Result<Option<i64>, CounterError> {
        let unknown = |e: tokio_postgres::Error| CounterError::Unknown(describe(&e));
        if !self.rows.contains(key) {
            let insert = "INSERT INTO lockaudit_counters (key) VALUES ($1) ON CONFLICT DO NOTHING";
            self.session
                .execute(insert, &[&key])
                .await
                .map_err(unknown)?;
            self.rows.insert(key.to_string());
        }
        let select = "SELECT value, version FROM lockaudit_counters WHERE key = $1";
        let row = self
            .session
            .query_one(select, &[&key])
            .await
            .map_err(unknown)?;
        let value: Option<i64> = row.try_get(0).map_err(unknown)?;
        let version: i64 = row.try_get(1).map_err(unknown)?;
        self.read.insert(key.to_string(), version);
        self.options.step(STEPS[0]);
        Ok(value)
    }

    async fn write_counter(&mut self, key: &str, value: i64) -> CounterWrite {
        let Some(version) = self.read.remove(key) else {
            return CounterWrite::Rejected("no read of this key to write after".into());
        };
        self.options.step(STEPS[1]);
        let update = "UPDATE lockaudit_counters SET value = $2, version = version + 1 \
                      WHERE key = $1 AND version = $3";
        match self
            .session
            .execute(update, &[&key, &value, &version])
            .await
        {
            Ok(1) => CounterWrite::Accepted,
            Ok(_) => CounterWrite::Rejected(format!("version {version} is no longer current")),
            // The server refused the statement: it rolled back, nothing was written.
            Err(e) if e.as_db_error().is_some() && !e.is_closed() => {
                CounterWrite::Rejected(describe(&e))
            }
            Err(e) => CounterWrite::Unknown(describe(&e)),
        }
    }
}
