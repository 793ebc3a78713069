//! Mutual exclusion: `overlap`, two holds of one key by different processes, each beginning
//! strictly before the other ends (touching holds, a hand-over at the same nanosecond, do
//! not overlap), unless both were acquired in `shared` mode: readers may share, a writer
//! excludes everyone. Each overlap says whether the earlier holder's lease had already run out
//! when it began: a lease-expiry hazard, or the lock itself failed.

use crate::report::{Anomaly, AnomalyKind};
use crate::units::{fmt_span, fmt_time};

use super::findings::{Findings, Names};
use super::holds::Hold;

/// The end of a list of open holds.
const NONE: u32 = u32::MAX;

pub fn check(names: &Names, findings: &mut Findings) {
    let holds = &names.holds.holds;
    // Per key, the holds that have begun and not yet ended, as of the hold being looked at,
    // in begin order: a list linked from `first` through `next`. Linked rather than a
    // vector per key, which would cost an allocation per key (there may be millions).
    let mut first = vec![NONE; names.history.keys.len()];
    let mut next = vec![NONE; holds.len()];
    for (id, hold) in holds.iter().enumerate() {
        let key = hold.key as usize;
        let (mut before, mut a) = (NONE, first[key]);
        while a != NONE {
            let after = next[a as usize];
            let earlier = &holds[a as usize];
            if earlier.end > hold.begin {
                let readers = earlier.shared && hold.shared;
                if earlier.process != hold.process && !readers && earlier.overlaps(hold) {
                    findings.add(AnomalyKind::Overlap, || {
                        describe(names, a, earlier, id as u32, hold)
                    });
                }
                before = a;
            } else if before == NONE {
                first[key] = after;
            } else {
                next[before as usize] = after;
            }
            a = after;
        }
        // `before` is now the last hold still open (NONE: none is).
        match before {
            NONE => first[key] = id as u32,
            _ => next[before as usize] = id as u32,
        }
    }
}

/// `earlier` began no later than `later` (holds are in begin order).
fn describe(
    names: &Names,
    earlier_id: u32,
    earlier: &Hold,
    _later_id: u32,
    later: &Hold,
) -> Anomaly {
    let start = later.begin;
    let end = names
        .holds
        .shown_end(earlier)
        .min(names.holds.shown_end(later));
    let lease = names.holds.lease_end_at(earlier_id, start);
    let lease_expired = lease.is_some_and(|l| l <= start);
    let verdict = match lease {
        // The earlier holder's grant came back with its lease already over, and no renewal
        // revived it: it never held the lock under its lease (`bad-lease`), which is not the
        // hazard of a lease running out during a pause.
        Some(l) if l <= start && earlier.dead_grant && l <= earlier.begin => format!(
            "process {}'s lease had already run out when its grant returned (a bad-lease): the implementation told it that it held a lock it did not hold",
            names.process(earlier.process)
        ),
        Some(l) if l <= start => format!(
            "process {}'s lease had run out {} before, at {}: a lease-expiry hazard",
            names.process(earlier.process),
            fmt_span(start.saturating_sub(l)),
            fmt_time(l)
        ),
        Some(l) => format!(
            "its lease still had {} to run: the lock itself failed",
            fmt_span(l.saturating_sub(start))
        ),
        None => "it had no lease, so the lock itself failed".to_string(),
    };
    let mut indices = vec![u64::from(earlier.begin_index), u64::from(later.begin_index)];
    indices.extend(earlier.end_index.map(u64::from));
    indices.extend(later.end_index.map(u64::from));
    Anomaly {
        kind: AnomalyKind::Overlap,
        key: names.key(later),
        processes: vec![names.process(earlier.process), names.process(later.process)],
        indices,
        explanation: format!(
            "{} acquired {} while {} still held it {}; they overlapped for {} and {verdict}.",
            names.hold(later),
            names.key(later),
            names.hold(earlier),
            names.hold_end(earlier),
            fmt_span(end.saturating_sub(start)),
        ),
        start,
        end,
        lease_expired: Some(lease_expired),
        tokens: earlier.token.into_iter().chain(later.token).collect(),
        cycle: Vec::new(),
    }
}
