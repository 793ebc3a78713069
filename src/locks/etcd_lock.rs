//! `etcd-lock`: etcd's own lock service (the v3 `Lock` / `Unlock` calls, which etcd serves
//! with its `concurrency.Mutex`), on a lease the client keeps alive, as etcd's clients do.
//!
//! Acquire: grant a lease, then `Lock(name, lease)`, which puts a key `<name>/<lease>` and
//! returns once every key under `<name>` created before it is gone. The wait is bounded by
//! half the lease (no keep-alive is needed while waiting); a waiter that gives up revokes
//! its lease, which deletes its key. Release: `Unlock(key)` deletes the key (whether or not
//! it was still there), then the lease is revoked. Renew: one keep-alive of the lease,
//! recorded with the TTL etcd restored; a lease found gone is the lock lost.
//!
//! Flaw it must show (Jepsen, etcd 3.4.3): the lock is only as good as the lease, and a
//! holder paused past its lease keeps working while another holds the lock: `overlap`
//! after the lease ran out, a `stale-write` unfenced and lost updates of the counter.
//! Fenced (`--fenced`), the token is the lock key's create revision, which grows with every
//! new holder, and the guarded resource refuses a stale one.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{Client, LockOptions as EtcdLockOptions};

use super::etcd_lease::{ttl_seconds, within, EtcdRequestError, Lease};
use super::{Acquired, LockClient, LockOptions, Outcome};

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &["etcd-lock:after-lock", "etcd-lock:before-release"];

/// A hold: the lease and the key `Lock` returned.
struct Held {
    lease: Lease,
    key: Vec<u8>,
}

pub(crate) struct EtcdLock {
    client: Client,
    options: LockOptions,
    held: HashMap<String, Held>,
}

impl EtcdLock {
    pub(crate) fn new(client: Client, options: LockOptions) -> Self {
        EtcdLock {
            client,
            options,
            held: HashMap::new(),
        }
    }

    /// How long `Lock` may wait: half the lease asked for (capped by the workload's
    /// `wait`), so that a waiting key never outlives its lease unrenewed.
    fn wait(&self) -> Duration {
        let half = ttl_seconds(&self.options) * 500;
        let wait = match self.options.wait_ms {
            0 => half,
            ms => half.min(i64::try_from(ms).unwrap_or(i64::MAX)),
        };
        Duration::from_millis(u64::try_from(wait.max(1)).unwrap_or(1))
    }
}

/// The create revision of `key`: the fencing token (None: the key is gone).
pub(crate) async fn create_revision(
    client: &mut Client,
    key: &[u8],
    timeout: Duration,
) -> Result<Option<i64>, EtcdRequestError> {
    let reply = within("reading the lock key", timeout, client.get(key, None)).await?;
    Ok(reply.kvs().first().map(|kv| kv.create_revision()))
}

#[async_trait]
impl LockClient for EtcdLock {
    async fn acquire(&mut self, name: &str) -> Acquired {
        let timeout = self.options.op_timeout();
        let lease = match Lease::grant(&mut self.client, ttl_seconds(&self.options), timeout).await
        {
            Ok(lease) => lease,
            Err(why) => return Acquired::Fail(why.to_string()),
        };
        let wait = self.wait();
        let locked = tokio::time::timeout(
            wait,
            self.client
                .lock(name, Some(EtcdLockOptions::new().with_lease(lease.id))),
        )
        .await;
        let key = match locked {
            Ok(Ok(reply)) => reply.key().to_vec(),
            failed => {
                let why = match failed {
                    Ok(Err(e)) => format!("lock: {e}"),
                    _ => format!("not granted within {wait:?}"),
                };
                // Our waiting key (or the lock, granted as we gave up) goes with the lease.
                return if lease.revoke(&mut self.client, timeout).await {
                    Acquired::Fail(format!("{why}; lease revoked"))
                } else {
                    Acquired::Info(format!("{why}; the lease could not be revoked"))
                };
            }
        };
        self.options.step("etcd-lock:after-lock");
        let token = if self.options.fenced {
            match create_revision(&mut self.client, &key, timeout).await {
                Ok(Some(revision)) => Some(revision),
                Ok(None) => {
                    // Gone already: the lease ran out between the grant and now.
                    let _ = lease.revoke(&mut self.client, timeout).await;
                    return Acquired::Fail("the lock key was gone once granted".into());
                }
                Err(why) => {
                    let _ = lease.revoke(&mut self.client, timeout).await;
                    return Acquired::Info(why.to_string());
                }
            }
        } else {
            None
        };
        let lease_ms = lease.ttl_ms;
        self.held.insert(name.to_string(), Held { lease, key });
        Acquired::Ok {
            token,
            lease_ms: Some(lease_ms),
        }
    }

    async fn release(&mut self, name: &str) -> Outcome {
        let Some(held) = self.held.remove(name) else {
            return Outcome::Fail("not held by this client".into());
        };
        self.options.step("etcd-lock:before-release");
        let timeout = self.options.op_timeout();
        let outcome = match within("unlock", timeout, self.client.unlock(held.key.clone())).await {
            Ok(_) => Outcome::Ok { lease_ms: None },
            Err(why) => Outcome::Info(why.to_string()),
        };
        // The lease carries nothing else; it would expire anyway.
        let _ = held.lease.revoke(&mut self.client, timeout).await;
        outcome
    }

    async fn renew(&mut self, name: &str) -> Outcome {
        let timeout = self.options.op_timeout();
        match self.held.get_mut(name) {
            Some(held) => held.lease.keep_alive(&mut self.client, timeout).await,
            None => Outcome::Fail("not held by this client".into()),
        }
    }

    /// etcd's clients keep a lock's lease alive for as long as they hold it.
    fn renews(&self) -> bool {
        true
    }

    fn renew_every(&self) -> Option<Duration> {
        Some(Duration::from_millis((self.options.ttl_ms / 3).max(1)))
    }

    fn ttl_ms(&self) -> Option<i64> {
        Some(ttl_seconds(&self.options).saturating_mul(1000))
    }

    fn wait_ms(&self) -> Option<i64> {
        i64::try_from(self.wait().as_millis()).ok()
    }
}
