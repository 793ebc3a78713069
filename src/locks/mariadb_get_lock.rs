//! `mariadb-get-lock`: MariaDB's named user locks.
//!
//! Seed: `SELECT GET_LOCK(name, wait_s)` takes the lock (1: ours; 0: another session held
//! it for the whole wait; NULL: an error, nothing taken), `SELECT RELEASE_LOCK(name)` gives
//! it back (1: ours, released; 0: another session's; NULL: no such lock), on a session of
//! its own per client. No expiry: the server holds the lock as long as the session lives,
//! and ends it with the session.
//!
//! Weak spots, as pg-advisory's: the lock lives in the server's memory only, so a server
//! crash (or restart) drops every lock while the holders may still be inside their critical
//! section, and a `KILL CONNECTION` drops one session's; a client the server cannot see die
//! (paused, cut off) keeps its lock for as long as that lasts.
//!
//! What the client does when its session is gone is `LockOptions::reconnect`:
//! - false (the default): it watches its session while it holds a lock (a ping every
//!   `WATCH_EVERY`), and when the session is gone reports each held lock `Lost` (a
//!   notice), so that the history shows the hold ended there; the next acquire opens a new
//!   session;
//! - true: as a connection pool does, it checks the session before each statement and opens
//!   a new one silently when it is gone, and carries on: a holder keeps working (and
//!   writing) after the server dropped its lock, and its release on the new session finds
//!   no such lock.
//!
//! The guarded counter is on the Redis storage server, as pg-advisory's: a named lock
//! guards something the database knows nothing of, and a counter written on the lock's own
//! session would fail with it, hiding the overlap a lost session causes. Fenced
//! (`--fenced`), the token comes from MariaDB itself: the holder increments the lock's row
//! in `lockaudit_fence` (InnoDB, committed, so a crash recovery keeps it) right after the
//! grant, and the storage server refuses a write whose token is lower than one it took.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use tokio::sync::{mpsc, Mutex};
use tokio::task::JoinHandle;

use super::{Acquired, LockClient, LockError, LockOptions, Notice, NoticeKind, Outcome};
use crate::topology::mariadb::client_opts as mariadb_client_opts;
use crate::topology::Endpoints;

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &[
    "mariadb-get-lock:after-lock",
    "mariadb-get-lock:before-release",
];

/// How often a client that holds a lock checks its session (`reconnect` false).
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// The fencing tokens, one row per lock name.
const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS lockaudit_fence \
                      (name VARCHAR(64) PRIMARY KEY, token BIGINT NOT NULL) ENGINE=InnoDB";

/// MariaDB's error for a wrong password (ER_ACCESS_DENIED_ERROR).
const ACCESS_DENIED: u16 = 1045;

/// A client's first session and how to open the next.
pub(crate) struct Session {
    conn: Conn,
    opts: Opts,
}

/// A session on the lock's server (`nodes[0]`), the fencing table made sure of, within the
/// options' time limit.
pub(crate) async fn session(
    endpoints: &Endpoints,
    options: &LockOptions,
) -> Result<Session, LockError> {
    let node = endpoints
        .nodes
        .first()
        .ok_or_else(|| LockError::Endpoints("no MariaDB node".into()))?;
    let password = endpoints.password.as_deref().unwrap_or_default();
    let opts = mariadb_client_opts(&node.host, node.port, password);
    let address = format!("{}:{}", node.host, node.port);
    let limit = options.op_timeout() * 3;
    let connect = async {
        let mut conn = Conn::new(opts.clone()).await?;
        conn.query_drop(SCHEMA).await?;
        Ok::<_, mysql_async::Error>(conn)
    };
    match tokio::time::timeout(limit, connect).await {
        Ok(Ok(conn)) => Ok(Session { conn, opts }),
        Ok(Err(mysql_async::Error::Server(e))) if e.code == ACCESS_DENIED => Err(LockError::Auth(
            format!("MariaDB at {address}: {}", e.message),
        )),
        Ok(Err(e)) => Err(LockError::Endpoints(format!("MariaDB at {address}: {e}"))),
        Err(_) => Err(LockError::Endpoints(format!(
            "MariaDB at {address}: no session within {limit:?}"
        ))),
    }
}

/// The session a client uses: None once it is gone (a statement broke on it, or its watcher
/// found it dead). A statement takes the connection out while it runs and puts it back
/// when it completed, so that a statement abandoned half-way (a timeout) leaves no session
/// in an unknown state behind: the next statement opens a new one.
type Shared = Arc<Mutex<Option<Conn>>>;

pub(crate) struct MariadbGetLock {
    session: Shared,
    opts: Opts,
    options: LockOptions,
    /// The locks this client's current session holds (the watcher reports them lost), and
    /// those it reported lost and the holder has not released yet.
    held: Arc<StdMutex<Held>>,
    notices: mpsc::UnboundedReceiver<Notice>,
    watcher: Option<JoinHandle<()>>,
}

/// A client's locks: those its session holds, and those the watcher reported lost.
#[derive(Default)]
struct Held {
    now: Vec<String>,
    lost: Vec<String>,
}

/// Why a statement has no answer.
enum Failed {
    /// The server refused it: nothing was done, the session lives.
    Refused(String),
    /// No session could be opened: nothing was sent.
    NoSession(String),
    /// The session broke (or the statement timed out) with the statement sent: unknown.
    Broken(String),
}

impl MariadbGetLock {
    pub(crate) fn new(session: Session, options: LockOptions) -> Self {
        let shared: Shared = Arc::new(Mutex::new(Some(session.conn)));
        let held = Arc::new(StdMutex::new(Held::default()));
        let (tx, notices) = mpsc::unbounded_channel();
        let watcher =
            (!options.reconnect).then(|| tokio::spawn(watch(shared.clone(), held.clone(), tx)));
        MariadbGetLock {
            session: shared,
            opts: session.opts,
            options,
            held,
            notices,
            watcher,
        }
    }

    /// The session to run a statement on, taken out of `slot`: the current one (checked
    /// with a ping first, and replaced silently if it is gone, when `reconnect`), or a new
    /// one when there is none.
    async fn take(&self, slot: &mut Option<Conn>) -> Result<Conn, Failed> {
        if let Some(mut conn) = slot.take() {
            if !self.options.reconnect {
                return Ok(conn);
            }
            let pinged = tokio::time::timeout(self.options.op_timeout(), conn.ping()).await;
            if matches!(pinged, Ok(Ok(()))) {
                return Ok(conn);
            }
            // Gone: its locks went with it; a pool would hand out another connection.
            self.held_mut().now.clear();
        }
        match tokio::time::timeout(self.options.op_timeout(), Conn::new(self.opts.clone())).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(Failed::NoSession(format!("no session: {e}"))),
            Err(_) => Err(Failed::NoSession(format!(
                "no session within {:?}",
                self.options.op_timeout()
            ))),
        }
    }

    /// `sql` with `params`, its first column of its first row (`None`: SQL NULL).
    async fn query(
        &mut self,
        sql: &str,
        params: mysql_async::Params,
    ) -> Result<Option<i64>, Failed> {
        let session = self.session.clone();
        let mut slot = session.lock().await;
        let mut conn = self.take(&mut slot).await?;
        match conn.exec_first::<Option<i64>, _, _>(sql, params).await {
            Ok(row) => {
                *slot = Some(conn);
                Ok(row.flatten())
            }
            Err(mysql_async::Error::Server(e)) => {
                *slot = Some(conn);
                Err(Failed::Refused(format!("{} ({})", e.message, e.code)))
            }
            Err(e) => {
                // The session is gone, and whatever it held with it.
                self.held_mut().now.clear();
                Err(Failed::Broken(e.to_string()))
            }
        }
    }

    fn held_mut(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next fencing token of `key`: its row in `lockaudit_fence` incremented, read
    /// back through `LAST_INSERT_ID` on the same session.
    async fn token(&mut self, key: &str) -> Result<i64, String> {
        let bump = "INSERT INTO lockaudit_fence (name, token) VALUES (?, LAST_INSERT_ID(1)) \
                    ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1)";
        let describe = |f: Failed| match f {
            Failed::Refused(e) | Failed::NoSession(e) | Failed::Broken(e) => e,
        };
        self.query(bump, (key,).into()).await.map_err(describe)?;
        self.query("SELECT LAST_INSERT_ID()", mysql_async::Params::Empty)
            .await
            .map_err(describe)?
            .ok_or_else(|| "LAST_INSERT_ID() returned NULL".to_string())
    }
}

impl Drop for MariadbGetLock {
    fn drop(&mut self) {
        if let Some(watcher) = &self.watcher {
            watcher.abort();
        }
    }
}

/// While the client holds a lock, pings its session every `WATCH_EVERY`; once the session
/// is gone, reports every lock it held lost and leaves no session behind. A ping waits on
/// a paused server (the session lives, and so does its lock): no timeout, no notice.
async fn watch(session: Shared, held: Arc<StdMutex<Held>>, notices: mpsc::UnboundedSender<Notice>) {
    let holding = || {
        !held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .now
            .is_empty()
    };
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        if !holding() {
            continue;
        }
        let mut slot = session.lock().await;
        if !holding() {
            continue;
        }
        let Some(mut conn) = slot.take() else {
            continue;
        };
        match conn.ping().await {
            Ok(()) => *slot = Some(conn),
            Err(e) => {
                drop(conn);
                let at = Instant::now();
                let lost = {
                    let mut held = held.lock().unwrap_or_else(|e| e.into_inner());
                    let lost = std::mem::take(&mut held.now);
                    held.lost.extend(lost.iter().cloned());
                    lost
                };
                for key in lost {
                    let error = format!("the session that held it ended ({e})");
                    let _ = notices.send(Notice {
                        at,
                        kind: NoticeKind::Lost { key, error },
                    });
                }
            }
        }
    }
}

#[async_trait]
impl LockClient for MariadbGetLock {
    fn ttl_ms(&self) -> Option<i64> {
        None
    }

    fn wait_ms(&self) -> Option<i64> {
        Some(i64::try_from(self.options.wait_ms).unwrap_or(i64::MAX))
    }

    fn own_tokens(&self) -> bool {
        true
    }

    async fn acquire(&mut self, key: &str) -> Acquired {
        let wait_s = self.options.wait_ms as f64 / 1000.0;
        match self
            .query("SELECT GET_LOCK(?, ?)", (key, wait_s).into())
            .await
        {
            Ok(Some(1)) => {}
            Ok(Some(0)) => {
                return Acquired::Fail(format!(
                    "held by another session for the whole wait ({} ms)",
                    self.options.wait_ms
                ))
            }
            Ok(other) => return Acquired::Fail(format!("GET_LOCK returned {other:?}")),
            Err(Failed::Refused(e) | Failed::NoSession(e)) => return Acquired::Fail(e),
            Err(Failed::Broken(e)) => return Acquired::Info(e),
        }
        {
            let mut held = self.held_mut();
            held.lost.retain(|k| k != key);
            held.now.push(key.to_string());
        }
        self.options.step(STEPS[0]);
        let token = if self.options.fenced {
            match self.token(key).await {
                Ok(token) => Some(token),
                Err(e) => return Acquired::Info(format!("locked, but no fencing token: {e}")),
            }
        } else {
            None
        };
        Acquired::Ok {
            token,
            lease_ms: None,
        }
    }

    async fn release(&mut self, key: &str) -> Outcome {
        self.options.step(STEPS[1]);
        let reported_lost = {
            let mut held = self.held_mut();
            held.now.retain(|k| k != key);
            let lost = held.lost.iter().position(|k| k == key);
            lost.map(|i| held.lost.remove(i)).is_some()
        };
        if reported_lost {
            // The watcher reported it lost with its session: there is nothing to release.
            return Outcome::Fail("the session that held it ended".into());
        }
        match self.query("SELECT RELEASE_LOCK(?)", (key,).into()).await {
            Ok(Some(1)) => Outcome::Ok { lease_ms: None },
            Ok(Some(0)) => Outcome::Fail("held by another session".into()),
            Ok(None) => Outcome::Fail("no such lock (the session that took it ended)".into()),
            Ok(Some(other)) => Outcome::Info(format!("RELEASE_LOCK returned {other}")),
            Err(Failed::Refused(e)) => Outcome::Fail(e),
            // No session: the lock went with the old one, but nobody asked the server.
            Err(Failed::NoSession(e) | Failed::Broken(e)) => Outcome::Info(e),
        }
    }

    async fn next_notice(&mut self) -> Option<Notice> {
        match self.notices.recv().await {
            Some(notice) => Some(notice),
            // No watcher (reconnect): no notice, ever.
            None => std::future::pending().await,
        }
    }

    fn try_notice(&mut self) -> Option<Notice> {
        self.notices.try_recv().ok()
    }
}
