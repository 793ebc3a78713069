//! `lost-lock`: a renew that failed, or a release that failed (the implementation itself
//! found the lock no longer ours), while the hold's lease had not yet run out, or it had
//! none. A failure after the lease ran out is expected and only counted in the stats.
//!
//! "Not yet run out" is judged when the failure came back: the server may have looked at the
//! lock any time up to then, so a lease that ran out during the call excuses it.

use crate::history::compact::OpF;
use crate::report::{Anomaly, AnomalyKind};
use crate::units::{fmt_span, fmt_time};

use super::findings::{Findings, Names};

/// Returns the number of expected losses (after the lease ran out), per key.
pub fn check(names: &Names, findings: &mut Findings) -> Vec<u64> {
    let mut expected = vec![0u64; names.history.keys.len()];
    for loss in &names.holds.losses {
        let hold = &names.holds.holds[loss.hold as usize];
        let lost_within_lease = loss.lease_end.is_none_or(|end| end > loss.completion_time);
        if !lost_within_lease {
            expected[hold.key as usize] += 1;
            continue;
        }
        findings.add(AnomalyKind::LostLock, || {
            let what = if loss.f == OpF::Renew { "renew" } else { "release" };
            let lease = match loss.lease_end {
                Some(end) => format!(
                    "its lease still had {} to run (until {})",
                    fmt_span(end.saturating_sub(loss.completion_time)),
                    fmt_time(end)
                ),
                None => "it had no lease, so only a release could free it".to_string(),
            };
            Anomaly {
                kind: AnomalyKind::LostLock,
                key: names.key(hold),
                processes: vec![names.process(hold.process)],
                indices: vec![
                    u64::from(hold.begin_index),
                    u64::from(loss.invoke_index),
                    u64::from(loss.completion_index),
                ],
                // The history shows only what the implementation answered: a client library
                // that retries a release script after a lost reply gets "not ours" for a
                // lock its first attempt freed, and no history can tell that apart.
                explanation: format!(
                    "{}'s {what} (event {}) came back failed at {}: the implementation said the lock on {} was no longer ours, yet {lease}. Either the lock was lost, or the answer was wrong{}.",
                    names.hold(hold),
                    loss.completion_index,
                    fmt_time(loss.completion_time),
                    names.key(hold),
                    if loss.f == OpF::Renew {
                        ""
                    } else {
                        " (a client library that retries a release whose reply was lost gets just this answer for a lock its first attempt freed)"
                    }
                ),
                start: hold.begin,
                end: loss.completion_time,
                lease_expired: Some(false),
                tokens: hold.token.into_iter().collect(),
                cycle: Vec::new(),
            }
        });
    }
    expected
}
