//! What Redisson's unlock and renewal scripts answer, read the same way by every Redisson
//! lock here (`reentrant`, `rw-lock`, `fair-lock`).

use super::conn::OpError;
use super::Outcome;

/// An unlock script's answer: a number (0: one level of nesting released, still held; 1:
/// unlocked, or the lock was already gone) is a release; nil is Redisson's
/// IllegalMonitorStateException, the lock held by someone else.
pub(crate) fn unlock_outcome(reply: Result<Option<i64>, OpError>) -> Outcome {
    match reply {
        Ok(Some(_)) => Outcome::Ok { lease_ms: None },
        Ok(None) => Outcome::Fail("attempt to unlock lock, not locked by current client".into()),
        Err(e) => e.outcome(),
    }
}

/// A renewal script's answer: 1 extended the lock; anything else found it no longer ours.
/// Err carries the renew's outcome when it did not extend it.
pub(crate) fn renewed(reply: Result<i64, OpError>) -> Result<(), Outcome> {
    match reply {
        Ok(1) => Ok(()),
        Ok(_) => Err(Outcome::Fail(
            "lock not held by this client any more".into(),
        )),
        Err(e) => Err(e.outcome()),
    }
}
