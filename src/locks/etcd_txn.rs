//! `etcd-txn`: the lock many libraries write by hand on etcd: a lease, and a transaction
//! that creates the lock key with it only if the key does not exist.
//!
//! Acquire: grant a lease; `Txn(if create_revision(key) == 0 then put(key, id, lease))`,
//! retried by the workload's policy while the lease is young (at most half of it), the lease
//! revoked when the lock was not won. Release: `Txn(if value(key) == id then delete(key))`
//! (fail when the key is no longer ours), then the lease is revoked. Renew (with the
//! watchdog): one keep-alive of the lease.
//!
//! Flaw it must show: the lease runs out while the holder is paused, and the next holder
//! overlaps it (`overlap` after the lease ran out, unfenced a `stale-write`). Fenced, the
//! token is the key's create revision (the revision of the winning transaction).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};

use super::etcd_lease::{ttl_seconds, within, EtcdRequestError, Lease};
use super::{random_id, Acquired, LockClient, LockOptions, Outcome};

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &["etcd-txn:after-put", "etcd-txn:before-release"];

struct Held {
    lease: Lease,
    value: String,
}

pub(crate) struct EtcdTxn {
    client: Client,
    options: LockOptions,
    held: HashMap<String, Held>,
}

impl EtcdTxn {
    pub(crate) fn new(client: Client, options: LockOptions) -> Self {
        EtcdTxn {
            client,
            options,
            held: HashMap::new(),
        }
    }

    /// One try: Ok(Some(revision)) won, Ok(None) the key exists, Err unknown.
    async fn try_create(
        &mut self,
        key: &str,
        value: &str,
        lease: i64,
    ) -> Result<Option<i64>, EtcdRequestError> {
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key,
                value,
                Some(PutOptions::new().with_lease(lease)),
            )]);
        let timeout = self.options.op_timeout();
        let reply = within("txn", timeout, self.client.txn(txn)).await?;
        Ok(reply
            .succeeded()
            .then(|| reply.header().map(|h| h.revision()).unwrap_or_default()))
    }
}

#[async_trait]
impl LockClient for EtcdTxn {
    async fn acquire(&mut self, key: &str) -> Acquired {
        let begun = Instant::now();
        let timeout = self.options.op_timeout();
        let lease = match Lease::grant(&mut self.client, ttl_seconds(&self.options), timeout).await
        {
            Ok(lease) => lease,
            Err(why) => return Acquired::Fail(why.to_string()),
        };
        let value = random_id();
        let young = Duration::from_millis(u64::try_from(lease.ttl_ms / 2).unwrap_or(0));
        let mut retry = 0;
        loop {
            match self.try_create(key, &value, lease.id).await {
                Ok(Some(revision)) => {
                    self.options.step("etcd-txn:after-put");
                    let lease_ms = lease.ttl_ms;
                    self.held.insert(key.to_string(), Held { lease, value });
                    return Acquired::Ok {
                        token: self.options.fenced.then_some(revision),
                        lease_ms: Some(lease_ms),
                    };
                }
                Ok(None) => {}
                Err(why) => {
                    // Whatever the transaction did goes with the lease.
                    return if lease.revoke(&mut self.client, timeout).await {
                        Acquired::Fail(format!("{why}; lease revoked"))
                    } else {
                        Acquired::Info(format!("{why}; the lease could not be revoked"))
                    };
                }
            }
            let delay = self.options.retry_delay(retry);
            if retry >= self.options.retry_attempts || begun.elapsed() + delay >= young {
                let _ = lease.revoke(&mut self.client, timeout).await;
                return Acquired::Fail("held by another client".into());
            }
            retry += 1;
            tokio::time::sleep(delay).await;
        }
    }

    async fn release(&mut self, key: &str) -> Outcome {
        let Some(held) = self.held.remove(key) else {
            return Outcome::Fail("not held by this client".into());
        };
        self.options.step("etcd-txn:before-release");
        let timeout = self.options.op_timeout();
        let txn = Txn::new()
            .when([Compare::value(key, CompareOp::Equal, held.value.as_str())])
            .and_then([TxnOp::delete(key, None)]);
        let outcome = match within("txn", timeout, self.client.txn(txn)).await {
            Ok(reply) if reply.succeeded() => Outcome::Ok { lease_ms: None },
            Ok(_) => Outcome::Fail("the lock key is no longer ours".into()),
            Err(why) => Outcome::Info(why.to_string()),
        };
        let _ = held.lease.revoke(&mut self.client, timeout).await;
        outcome
    }

    async fn renew(&mut self, key: &str) -> Outcome {
        let timeout = self.options.op_timeout();
        match self.held.get_mut(key) {
            Some(held) => held.lease.keep_alive(&mut self.client, timeout).await,
            None => Outcome::Fail("not held by this client".into()),
        }
    }

    fn renews(&self) -> bool {
        self.options.watchdog
    }

    fn renew_every(&self) -> Option<Duration> {
        self.options.watchdog_period()
    }

    fn ttl_ms(&self) -> Option<i64> {
        Some(ttl_seconds(&self.options).saturating_mul(1000))
    }
}
