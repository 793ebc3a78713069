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
//! A session the server ends (`kill-session`: `pg_terminate_backend`) takes its locks with
//! it while the client lives on. By default the client notices: its connection's end is a
//! `lost` notice for each key it held (`next_notice`), and its next acquire opens a new
//! session. With the workload's `reconnect = true` it behaves as a connection pool does:
//! a statement finding its session gone opens a new one and goes on, telling nobody, so
//! a holder carries on in a critical section whose lock another may already have (the
//! silent reconnect of Rails' `with_advisory_lock`, rails/rails#58658).
//!
//! The guarded counter is on the Redis storage server, not in the database: an advisory
//! lock guards something the database knows nothing of (a job, a file, another service),
//! and a counter written on the lock's own session would die with it, hiding the very
//! overlap a server crash causes.

use std::collections::VecDeque;
use std::time::Instant;

use async_trait::async_trait;

use super::pg::{acquire_error, key_hash, outcome_error, session, Session};
use super::{Acquired, LockClient, LockOptions, Mode, Notice, NoticeKind, Outcome};
use crate::topology::Endpoints;

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &["pg-advisory:after-lock", "pg-advisory:before-unlock"];

/// What a `lost` notice, and a release on an ended session, say.
const SESSION_ENDED: &str = "the server ended the session, and its advisory locks with it";

pub(crate) struct PgAdvisory {
    session: Session,
    /// Where the next session is opened.
    endpoints: Endpoints,
    options: LockOptions,
    /// The keys taken on this session and not released, each with whether its loss was
    /// told (a `lost` notice queued).
    held: Vec<(String, bool)>,
    /// `lost` notices not yet taken.
    lost: VecDeque<Notice>,
}

impl PgAdvisory {
    pub(crate) fn new(session: Session, options: LockOptions, endpoints: &Endpoints) -> Self {
        PgAdvisory {
            session,
            endpoints: endpoints.clone(),
            options,
            held: Vec::new(),
            lost: VecDeque::new(),
        }
    }

    /// When the session's connection ended, if it did.
    fn ended_at(&self) -> Option<Instant> {
        let ended = *self.session.ended.borrow();
        ended.or_else(|| self.session.client.is_closed().then(Instant::now))
    }

    /// Queues a `lost` notice for each key the ended session held, once (none with
    /// `reconnect`: a pool tells nobody).
    fn tell_losses(&mut self) {
        if self.options.reconnect {
            return;
        }
        let Some(at) = self.ended_at() else {
            return;
        };
        for (key, told) in self.held.iter_mut().filter(|(_, told)| !*told) {
            *told = true;
            self.lost.push_back(Notice {
                at,
                kind: NoticeKind::Lost {
                    key: key.clone(),
                    error: SESSION_ENDED.into(),
                },
            });
        }
    }

    /// A new session in place of an ended one; what the old one held is gone with it.
    async fn reopen(&mut self) -> Result<(), String> {
        self.tell_losses();
        self.session = session(&self.endpoints, &self.options)
            .await
            .map_err(|e| format!("cannot open a new session: {e}"))?;
        if !self.options.reconnect {
            self.held.clear();
        }
        Ok(())
    }

    async fn take(&mut self, key: &str, mode: Mode) -> Acquired {
        // Both ways a new session for an acquire: nothing is held on an ended one.
        if self.ended_at().is_some() {
            if let Err(e) = self.reopen().await {
                return Acquired::Fail(e);
            }
        }
        let sql = match mode {
            Mode::Exclusive => "SELECT pg_try_advisory_lock($1)",
            Mode::Shared => "SELECT pg_try_advisory_lock_shared($1)",
        };
        let k = key_hash(key);
        for attempt in 0..=self.options.retry_attempts {
            if attempt > 0 {
                tokio::time::sleep(self.options.retry_delay(attempt - 1)).await;
            }
            match self.session.client.query_one(sql, &[&k]).await {
                Ok(row) => match row.try_get::<_, bool>(0) {
                    Ok(true) => {
                        self.held.push((key.to_string(), false));
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
        if let Some(i) = self.held.iter().position(|(k, _)| k == key) {
            self.held.remove(i);
        }
        if self.ended_at().is_some() {
            if !self.options.reconnect {
                // Certain: the server freed the lock when it ended the session.
                return Outcome::Fail(SESSION_ENDED.into());
            }
            // A pool hands out a new session, on which the unlock finds nothing to free.
            if let Err(e) = self.reopen().await {
                return Outcome::Info(e);
            }
        }
        let sql = match mode {
            Mode::Exclusive => "SELECT pg_advisory_unlock($1)",
            Mode::Shared => "SELECT pg_advisory_unlock_shared($1)",
        };
        match self.session.client.query_one(sql, &[&key_hash(key)]).await {
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

    /// A held key's loss when the session ends (never with `reconnect`).
    async fn next_notice(&mut self) -> Option<Notice> {
        loop {
            if let Some(notice) = self.try_notice() {
                return Some(notice);
            }
            if self.options.reconnect || self.held.iter().all(|(_, told)| *told) {
                return std::future::pending().await;
            }
            // A driver gone without a word ended the session as well.
            let _ = self.session.ended.wait_for(Option::is_some).await;
            if self.ended_at().is_none() {
                return std::future::pending().await;
            }
        }
    }

    fn try_notice(&mut self) -> Option<Notice> {
        self.tell_losses();
        self.lost.pop_front()
    }
}
