//! Leases and releases: `bad-lease` (a grant longer than asked for) and `lost-lock` (a release
//! or renew inside the lease that fails).

use serde_json::json;

use crate::history::{Event, EventType};
use crate::report::AnomalyKind;
use crate::synth::config::MS;
use crate::synth::rng::Rng;
use crate::synth::view::view;

use super::edit::{pick, renumber};
use super::injection::{done, Injection};

/// A grant promises a longer lease than its acquire asked for: the acquire's invoke gains a
/// `ttl_ms` below the `lease_ms` of its ok by more than the grant's latency. Names the
/// invoke and the ok.
pub fn inject_bad_lease(events: &mut [Event], seed: u64) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let v = view(events);
    let leased: Vec<usize> = (0..v.holds.len())
        .filter(|&h| v.holds[h].lease_ms.is_some_and(|ms| ms > 0))
        .collect();
    let hold = &v.holds[pick(&mut rng, &leased)?];
    let ok = hold.begin();
    let invoke = (0..ok)
        .rev()
        .find(|&i| events[i].process == events[ok].process && events[i].ty == EventType::Invoke)?;
    // A lease counts from the invoke and a ttl from the request, so the checker allows the
    // grant's latency on top of the ttl: ask for less than the lease by more than that.
    let latency_ms = (events[ok].time - events[invoke].time + MS - 1) / MS;
    let ttl_ms = hold.lease_ms? - latency_ms - 1;
    if ttl_ms < 0 {
        return None;
    }
    events[invoke].value = Some(json!({ "ttl_ms": ttl_ms }));
    renumber(events);
    done(
        AnomalyKind::BadLease,
        &hold.key,
        vec![invoke as u64, ok as u64],
    )
}

/// A release (or renew) that succeeded inside its lease fails instead ("lock not held by
/// us"). Names the failed completion.
pub fn inject_lost_lock(events: &mut [Event], seed: u64) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let v = view(events);
    let in_lease =
        |pos: usize, lease_end: Option<i64>| lease_end.is_none_or(|end| events[pos].time < end);
    // Only holds that end with a release ok: the key is then free from that release, whatever
    // the checker makes of a lease a failed renew did not move.
    let mut candidates = Vec::new();
    for (h, hold) in v.holds.iter().enumerate() {
        let Some((_, Some(done_at))) = hold.release else {
            continue;
        };
        if events[done_at].ty != EventType::Ok {
            continue;
        }
        if in_lease(done_at, hold.lease_end) {
            candidates.push((done_at, h));
        }
        for &(renew, before) in &hold.renews {
            if events[renew].ty == EventType::Ok && in_lease(renew, before) {
                candidates.push((renew, h));
            }
        }
    }
    let (pos, h) = pick(&mut rng, &candidates)?;
    let key = v.holds[h].key.clone();
    let e = &mut events[pos];
    e.ty = EventType::Fail;
    e.value = None;
    e.error = Some("lock not held by us".into());
    renumber(events);
    done(AnomalyKind::LostLock, &key, vec![pos as u64])
}
