//! What the etcd locks share: the client connection, and a lease granted for one hold, kept
//! alive by the worker's renewals and revoked at the end.
//!
//! etcd counts a lease's TTL on its leader from the moment the grant (or a keep-alive) is
//! applied, which is after the client sent it: a TTL counted from the client's start of the
//! acquire or renew is a lower bound, as the history wants.

use std::time::Duration;

use etcd_client::{Client, LeaseKeepAliveStream, LeaseKeeper};

use super::{LockError, LockOptions, Outcome};
use crate::topology::{etcd, Endpoints};

/// A client of every member of the run's etcd cluster (the endpoints' lock nodes), each
/// request limited to the options' time limit.
pub(crate) async fn connect(
    endpoints: &Endpoints,
    options: &LockOptions,
) -> Result<Client, LockError> {
    if endpoints.nodes.is_empty() {
        return Err(LockError::Endpoints("no etcd members".into()));
    }
    let urls: Vec<String> = endpoints
        .nodes
        .iter()
        .map(|n| format!("http://{}:{}", n.host, n.port))
        .collect();
    let mut client = etcd::connect(&urls, endpoints.password.as_deref(), options.op_timeout())
        .await
        .map_err(|e| LockError::Endpoints(format!("etcd at {}: {e}", urls.join(", "))))?;
    // A wrong password shows here rather than as every acquire failing.
    client
        .status()
        .await
        .map_err(|e| LockError::Auth(format!("etcd at {}: {e}", urls.join(", "))))?;
    Ok(client)
}

/// Why an etcd request got no answer a lock client can use, naming the request (`txn`,
/// `lease grant`); the history records it as the operation's error text.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EtcdRequestError {
    #[error("{what}: {error}")]
    Failed {
        what: &'static str,
        error: etcd_client::Error,
    },
    #[error("{what}: no answer within {timeout:?}")]
    NoAnswer {
        what: &'static str,
        timeout: Duration,
    },
    /// A lease grant etcd answered with a TTL of 0, and why.
    #[error("lease grant refused: {0}")]
    GrantRefused(String),
}

/// `request`, given `timeout`: its answer, or why none came, naming `what` (an error etcd
/// returned, or no answer in time).
pub(crate) async fn within<T>(
    what: &'static str,
    timeout: Duration,
    request: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, EtcdRequestError> {
    match tokio::time::timeout(timeout, request).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(error)) => Err(EtcdRequestError::Failed { what, error }),
        Err(_) => Err(EtcdRequestError::NoAnswer { what, timeout }),
    }
}

/// The lease's TTL in whole seconds that a lock with `ttl_ms` asks for (etcd speaks
/// seconds; rounded up so that the lock never lives shorter than asked).
pub(crate) fn ttl_seconds(options: &LockOptions) -> i64 {
    super::ttl_seconds(options.ttl_ms)
}

/// A granted lease.
pub(crate) struct Lease {
    pub id: i64,
    /// The TTL etcd chose (at least its minimum, 1.5 election timeouts), in ms.
    pub ttl_ms: i64,
    /// The keep-alive stream, opened at the first renewal.
    keeper: Option<(LeaseKeeper, LeaseKeepAliveStream)>,
}

impl Lease {
    /// Grants a lease of `ttl_seconds`.
    pub(crate) async fn grant(
        client: &mut Client,
        ttl_seconds: i64,
        timeout: Duration,
    ) -> Result<Lease, EtcdRequestError> {
        let granted = within(
            "lease grant",
            timeout,
            client.lease_grant(ttl_seconds, None),
        )
        .await?;
        if granted.ttl() <= 0 {
            return Err(EtcdRequestError::GrantRefused(granted.error().to_string()));
        }
        Ok(Lease {
            id: granted.id(),
            ttl_ms: granted.ttl().saturating_mul(1000),
            keeper: None,
        })
    }

    /// One keep-alive: `ok` with the TTL it restored, `fail` when etcd says the lease is gone
    /// (TTL 0: it expired or was revoked, and with it every key it carried), `info` when no
    /// answer came.
    pub(crate) async fn keep_alive(&mut self, client: &mut Client, timeout: Duration) -> Outcome {
        let id = self.id;
        let answer = tokio::time::timeout(timeout, async {
            if self.keeper.is_none() {
                self.keeper = Some(client.lease_keep_alive(id).await?);
            }
            let (keeper, stream) = self.keeper.as_mut().expect("opened above");
            keeper.keep_alive().await?;
            stream.message().await
        })
        .await;
        match answer {
            Ok(Ok(Some(reply))) if reply.ttl() > 0 => Outcome::Ok {
                lease_ms: Some(reply.ttl().saturating_mul(1000)),
            },
            Ok(Ok(Some(_))) => Outcome::Fail(format!("lease {id:x} expired")),
            Ok(Ok(None)) => {
                self.keeper = None;
                Outcome::Info("the keep-alive stream ended".into())
            }
            Ok(Err(e)) => {
                self.keeper = None;
                Outcome::Info(format!("keep-alive: {e}"))
            }
            Err(_) => {
                self.keeper = None;
                Outcome::Info(format!("keep-alive: no answer within {timeout:?}"))
            }
        }
    }

    /// Revokes the lease, deleting every key it carries; true when etcd confirmed it (or
    /// said it was already gone).
    pub(crate) async fn revoke(self, client: &mut Client, timeout: Duration) -> bool {
        match tokio::time::timeout(timeout, client.lease_revoke(self.id)).await {
            Ok(Ok(_)) => true,
            Ok(Err(e)) => e.to_string().contains("requested lease not found"),
            Err(_) => false,
        }
    }
}
