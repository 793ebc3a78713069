//! Leases: `bad-lease`, an acquire `ok` whose promised lease cannot be right. Either it had
//! already run out when the grant returned (`lease_ms` no longer than the time from the
//! acquire's invoke to its `ok`: the caller is told it holds a lock whose lease is over), or
//! it is longer than the `ttl_ms` the invoke asked for (the library miscounted). A lease is
//! counted from the invoke and a ttl from the request, which may go out later: a lease counts
//! as longer only when it ends after the grant + the ttl.

use crate::report::{Anomaly, AnomalyKind};
use crate::units::{fmt_span, fmt_time};

use super::findings::{Findings, Names};
use super::holds::ms_to_ns;

pub fn check(names: &Names, findings: &mut Findings) {
    for bad in &names.holds.bad_leases {
        findings.add(AnomalyKind::BadLease, || {
            let key = names.history.key_name(bad.key).to_string();
            let latency = bad.ok.saturating_sub(bad.invoke);
            let mut problems = Vec::new();
            if bad.dead {
                problems.push(format!(
                    "its lease of {}ms, counted from the invoke at {}, had run out {} before the grant returned at {}: the caller was told it holds a lock it no longer held",
                    bad.lease_ms,
                    fmt_time(bad.invoke),
                    fmt_span(latency.saturating_sub(ms_to_ns(bad.lease_ms))),
                    fmt_time(bad.ok)
                ));
            }
            if let (true, Some(ttl)) = (bad.too_long, bad.ttl_ms) {
                problems.push(format!(
                    "it promises a lease of {}ms from the invoke where the acquire asked for a ttl of {ttl}ms: the promise ends {} after the grant + the ttl, the latest the lock could live",
                    bad.lease_ms,
                    fmt_span(
                        ms_to_ns(bad.lease_ms)
                            .saturating_sub(ms_to_ns(ttl))
                            .saturating_sub(latency)
                    )
                ));
            }
            Anomaly {
                kind: AnomalyKind::BadLease,
                key: key.clone(),
                processes: vec![names.process(bad.process)],
                indices: vec![u64::from(bad.invoke_index), u64::from(bad.ok_index)],
                explanation: format!(
                    "Process {} acquired {key} (event {}) after {}, but {}.",
                    names.process(bad.process),
                    bad.ok_index,
                    fmt_span(latency),
                    problems.join(", and ")
                ),
                start: bad.invoke,
                end: bad.ok,
                lease_expired: Some(bad.dead),
                tokens: Vec::new(),
                cycle: Vec::new(),
            }
        });
    }
}
