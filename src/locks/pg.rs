//! The PostgreSQL side of the database locks: one session per lock client, the tables,
//! lock keys as bigints, and how a database error reads as an outcome.
//!
//! Each lock client has its own session (a connection with its driver task): session
//! locks (advisory locks, a transaction's row locks) belong to it, and the server releases
//! them when the session ends, whether the client released them, was killed, or was retired
//! after an `info` (dropping the client closes the connection).

use std::time::Instant;

use tokio::sync::watch;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

use super::{Acquired, LockError, LockOptions, Outcome};
use crate::topology::postgres::client_config as pg_client_config;
use crate::topology::Endpoints;

/// The rows of `pg-row` (the locked row is the guarded counter), the flags of
/// `pg-lock-column`, and the versioned counters of `pg-version`.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS lockaudit_rows (key text PRIMARY KEY, value bigint);
CREATE TABLE IF NOT EXISTS lockaudit_locks (key text PRIMARY KEY, locked char(1) NOT NULL DEFAULT 'N', owner text);
CREATE TABLE IF NOT EXISTS lockaudit_counters (key text PRIMARY KEY, value bigint, version bigint NOT NULL DEFAULT 0);
";

/// The advisory lock that serialises the schema's creation: concurrent `CREATE TABLE IF NOT
/// EXISTS` of one table can fail on the catalog's unique index.
const SCHEMA_LOCK: i64 = 0x6c6f_636b_6175_6469; // "lockaudi"

/// A session: its client, and when its connection ended (None while it lives), which its
/// driver task sets as it ends: the server closed it (`pg_terminate_backend`, a crash) or
/// it broke.
pub(crate) struct Session {
    pub client: Client,
    pub ended: watch::Receiver<Option<Instant>>,
}

/// A session on the lock's server (`nodes[0]`), the schema made sure of, within the
/// options' time limit.
pub(crate) async fn session(
    endpoints: &Endpoints,
    options: &LockOptions,
) -> Result<Session, LockError> {
    let node = endpoints
        .nodes
        .first()
        .ok_or_else(|| LockError::Endpoints("no PostgreSQL node".into()))?;
    let password = endpoints.password.as_deref().unwrap_or_default();
    let mut config = pg_client_config(&node.host, node.port, password);
    config.connect_timeout(options.op_timeout());
    let address = format!("{}:{}", node.host, node.port);
    let connect = async {
        let (client, connection) = config.connect(NoTls).await?;
        let (tell, ended) = watch::channel(None);
        tokio::spawn(async move {
            let _ = connection.await;
            let _ = tell.send(Some(Instant::now()));
        });
        client
            .batch_execute(&format!(
                "SELECT pg_advisory_xact_lock({SCHEMA_LOCK}); {SCHEMA}"
            ))
            .await?;
        Ok::<_, tokio_postgres::Error>(Session { client, ended })
    };
    // The schema in one implicit transaction: the advisory lock is held until it commits.
    match tokio::time::timeout(options.op_timeout() * 3, connect).await {
        Ok(Ok(session)) => Ok(session),
        Ok(Err(e)) if e.code() == Some(&SqlState::INVALID_PASSWORD) => {
            Err(LockError::Auth(format!("PostgreSQL at {address}: {e}")))
        }
        Ok(Err(e)) => Err(LockError::Endpoints(format!(
            "PostgreSQL at {address}: {}",
            describe(&e)
        ))),
        Err(_) => Err(LockError::Endpoints(format!(
            "PostgreSQL at {address}: no session within {:?}",
            options.op_timeout() * 3
        ))),
    }
}

/// The lock key as the bigint advisory locks take: the 64-bit FNV-1a hash of its bytes,
/// stable across processes and builds (std's hasher is not), so that every client maps a
/// key to the same lock.
pub(crate) fn key_hash(key: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    i64::from_ne_bytes(hash.to_ne_bytes())
}

/// The error's text with its SQL state and the server's message, when it has them.
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

/// Whether the server answered that the row is locked by someone else (`NOWAIT`).
pub(crate) fn is_lock_not_available(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE)
}

/// An error of an acquire: the server refused the statement (`fail`: nothing was taken,
/// the transaction is rolled back) or the session broke (`info`: a lock taken as the
/// session died is released with it, but nobody knows).
pub(crate) fn acquire_error(e: &tokio_postgres::Error) -> Acquired {
    if e.as_db_error().is_some() && !e.is_closed() {
        Acquired::Fail(describe(e))
    } else {
        Acquired::Info(describe(e))
    }
}

/// An error of a release (`COMMIT`, an unlock, an `UPDATE`): `info`. The statement may
/// have taken effect before the session broke, and the session's locks ended with it
/// anyway: nobody knows which came first.
pub(crate) fn outcome_error(e: &tokio_postgres::Error) -> Outcome {
    Outcome::Info(describe(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_hashes_are_stable_and_differ() {
        assert_eq!(key_hash("lock:0"), key_hash("lock:0"));
        assert_ne!(key_hash("lock:0"), key_hash("lock:1"));
        // FNV-1a of the empty string is its offset basis.
        assert_eq!(key_hash(""), 0xcbf2_9ce4_8422_2325_u64 as i64);
    }
}
