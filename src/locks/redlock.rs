//! `redlock`: Redis's distributed lock over N independent masters.
//!
//! Seed (antirez's algorithm, as redlock-rb writes it): note the time, `SET key <value> NX PX
//! ttl` on every master in turn with a short per-node timeout; the lock is held when a quorum
//! (N/2 + 1) said yes and validity = ttl − elapsed − (ttl × drift_factor + 2 ms) is still
//! positive; otherwise unlock every master. Release = compare-and-delete on every master.
//! Flaws it must show: a holder paused past its validity, a master whose clock jumps, or a
//! master restarted without persistence lets a second client win a quorum: `overlap` inside
//! the lease. The lease reported is the validity, counted from the acquire's start.
//!
//! Renew is Redsync's `Extend` (compare-and-PEXPIRE on every master, quorum and validity as
//! for acquire); it runs only with `watchdog`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::Script;

use super::conn::{Conn, OpError};
use super::set_nx_px::{COMPARE_AND_DELETE, COMPARE_AND_PEXPIRE};
use super::{
    ms_between, ms_since_ceil, random_id, Acquired, LockClient, LockError, LockOptions, Outcome,
};

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &[
    "redlock:after-first-set",
    "redlock:after-quorum",
    "redlock:before-unlock",
];

/// The per-node time limit: "small compared to the total lock auto-release time".
pub(crate) fn node_timeout(options: &LockOptions) -> Duration {
    Duration::from_millis(
        options
            .node_timeout_ms
            .unwrap_or((options.ttl_ms / 20).max(10))
            .max(1),
    )
}

/// What one master said.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Vote {
    Yes,
    No,
    Unknown,
}

pub(crate) struct Redlock {
    masters: Vec<Conn>,
    options: LockOptions,
    quorum: usize,
    /// Our value per key we hold (or may hold after an `info` acquire).
    values: HashMap<String, String>,
    unlock: Script,
    extend: Script,
}

impl Redlock {
    pub(crate) fn new(masters: Vec<Conn>, options: LockOptions) -> Result<Self, LockError> {
        let n = masters.len();
        let quorum = options.quorum.unwrap_or(n / 2 + 1);
        if n == 0 || quorum == 0 || quorum > n {
            return Err(LockError::Endpoints(format!(
                "redlock needs 1 <= quorum <= masters; got quorum {quorum} of {n}"
            )));
        }
        Ok(Redlock {
            masters,
            options,
            quorum,
            values: HashMap::new(),
            unlock: Script::new(COMPARE_AND_DELETE),
            extend: Script::new(COMPARE_AND_PEXPIRE),
        })
    }

    /// ttl × drift_factor + 2 ms, as redlock-rb.
    fn drift(&self) -> i64 {
        (self.options.ttl_ms as f64 * self.options.drift_factor.max(0.0)) as i64 + 2
    }

    /// One round of `SET NX PX` over the masters, in order.
    async fn lock_all(&mut self, key: &str, value: &str) -> Vec<Vote> {
        let mut set = redis::cmd("SET");
        set.arg(key)
            .arg(value)
            .arg("NX")
            .arg("PX")
            .arg(self.options.ttl_ms);
        let mut votes = Vec::with_capacity(self.masters.len());
        let mut first = true;
        for master in &mut self.masters {
            let vote = match master.query::<Option<String>>(&set).await {
                Ok(Some(_)) => Vote::Yes,
                Ok(None) | Err(OpError::Definite(_)) => Vote::No,
                Err(OpError::Unknown(_)) => Vote::Unknown,
            };
            if vote == Vote::Yes && first {
                first = false;
                self.options.step(STEPS[0]);
            }
            votes.push(vote);
        }
        votes
    }

    /// Compare-and-delete on every master (even those that said no, as the algorithm says).
    /// Per master: Yes deleted ours, No ours was not there, Unknown no answer.
    async fn unlock_all(&mut self, key: &str, value: &str) -> Vec<Vote> {
        let mut invocation = self.unlock.key(key);
        invocation.arg(value);
        let mut votes = Vec::with_capacity(self.masters.len());
        for master in &mut self.masters {
            votes.push(match master.eval::<i64>(&invocation).await {
                Ok(1) => Vote::Yes,
                Ok(_) => Vote::No,
                Err(_) => Vote::Unknown,
            });
        }
        votes
    }
}

#[async_trait]
impl LockClient for Redlock {
    fn ttl_ms(&self) -> Option<i64> {
        // `PX ttl` on every master.
        Some(self.options.ttl())
    }

    async fn acquire(&mut self, key: &str) -> Acquired {
        let start = Instant::now();
        let value = random_id();
        self.values.insert(key.to_string(), value.clone());
        for attempt in 0..=self.options.retry_attempts {
            if attempt > 0 {
                tokio::time::sleep(self.options.retry_delay(attempt - 1)).await;
            }
            let round = Instant::now();
            let votes = self.lock_all(key, &value).await;
            let yes = votes.iter().filter(|v| **v == Vote::Yes).count();
            let validity = self
                .options
                .ttl()
                .saturating_sub(ms_since_ceil(round))
                .saturating_sub(self.drift());
            if yes >= self.quorum && validity > 0 {
                self.options.step(STEPS[1]);
                return Acquired::Ok {
                    token: None,
                    lease_ms: Some(ms_between(start, round).saturating_add(validity)),
                };
            }
            self.options.step(STEPS[2]);
            let unlocked = self.unlock_all(key, &value).await;
            // Masters that may still carry our value: they took it (or may have) and the
            // unlock did not confirm it gone.
            let lingering = votes
                .iter()
                .zip(&unlocked)
                .filter(|(set, del)| **set != Vote::No && **del == Vote::Unknown)
                .count();
            if lingering >= self.quorum {
                return Acquired::Info(format!(
                    "{yes} of {} masters locked (validity {validity} ms), and {lingering} \
                     may still hold our value",
                    self.masters.len()
                ));
            }
        }
        self.values.remove(key);
        Acquired::Fail("no quorum".into())
    }

    async fn release(&mut self, key: &str) -> Outcome {
        let Some(value) = self.values.get(key).cloned() else {
            return Outcome::Fail("not held by this client".into());
        };
        let votes = self.unlock_all(key, &value).await;
        let deleted = votes.iter().filter(|v| **v == Vote::Yes).count();
        let unknown = votes.iter().filter(|v| **v == Vote::Unknown).count();
        let n = self.masters.len();
        if deleted >= self.quorum {
            self.values.remove(key);
            Outcome::Ok { lease_ms: None }
        } else if deleted + unknown < self.quorum {
            // A majority of masters no longer had our value: the lock was not ours.
            self.values.remove(key);
            Outcome::Fail(format!("our value was on only {deleted} of {n} masters"))
        } else {
            Outcome::Info(format!(
                "deleted on {deleted} of {n} masters, {unknown} did not answer"
            ))
        }
    }

    async fn renew(&mut self, key: &str) -> Outcome {
        let start = Instant::now();
        let Some(value) = self.values.get(key).cloned() else {
            return Outcome::Fail("not held by this client".into());
        };
        let mut invocation = self.extend.key(key);
        invocation.arg(&value).arg(self.options.ttl_ms);
        let mut extended = 0;
        let mut unknown = 0;
        for master in &mut self.masters {
            match master.eval::<i64>(&invocation).await {
                Ok(1) => extended += 1,
                Ok(_) => {}
                Err(_) => unknown += 1,
            }
        }
        let validity = self
            .options
            .ttl()
            .saturating_sub(ms_since_ceil(start))
            .saturating_sub(self.drift());
        let n = self.masters.len();
        if extended >= self.quorum && validity > 0 {
            Outcome::Ok {
                lease_ms: Some(validity),
            }
        } else if extended + unknown < self.quorum {
            Outcome::Fail(format!("our value was on only {extended} of {n} masters"))
        } else {
            Outcome::Info(format!(
                "extended on {extended} of {n} masters, {unknown} did not answer, \
                 validity {validity} ms"
            ))
        }
    }

    fn renews(&self) -> bool {
        self.options.watchdog
    }

    fn renew_every(&self) -> Option<Duration> {
        self.options.watchdog_period()
    }
}
