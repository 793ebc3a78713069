//! Anomalies ranked by how bad they are and grouped into episodes, for the summary and the
//! page: the worst first, and one fault's dozens of overlaps as one line.
//!
//! The rank, worst first: a stale write got through; a grant came with a lease it could not
//! keep; two holders overlapped inside the earlier one's live lease (the lock itself
//! failed); a lock was lost before its lease ran out; the fencing tokens were duplicated or
//! out of order; the lock deadlocked (unavailable); a process starved; a fair lock let
//! someone jump the queue; two holders overlapped after the earlier one's lease ran out (a
//! lease-expiry hazard: the clients' fault as much as the lock's); a counter lost updates (a
//! consequence of the above, judged over the whole run, so it explains least).
//!
//! An episode is a run of anomalies of one class (kind, and for overlaps whether the lease
//! still ran) whose time spans intersect or lie within `NEAR_NS` of each other, on any key:
//! a paused worker's holds overlap on every key it held, and its stale writes come when it
//! wakes, all within its pause plus a lease.

use super::{Anomaly, AnomalyKind};
use crate::units::fmt_time;

/// Anomalies of one class closer than this (1 s) belong to one episode. A fault's
/// consequences lie within the fault plus a lease (leases are around a second in the
/// workloads), and the nemesis presets space their faults 1–4 s apart, so a second joins
/// what one fault caused and mostly keeps separate faults apart; it is also the default
/// liveness bound, the checker's own notion of "a while".
pub const NEAR_NS: i64 = 1_000_000_000;

/// The classes of anomalies, worst first (the order of the page and the summary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    StaleWrite,
    BadLease,
    OverlapInLease,
    LostLock,
    Token,
    Unavailable,
    Starvation,
    Unfair,
    OverlapAfterLease,
    LostUpdate,
}

impl Class {
    pub fn of(anomaly: &Anomaly) -> Class {
        Class::of_kind(anomaly.kind, anomaly.lease_expired)
    }

    /// The class of an anomaly of `kind`; for an overlap, by whether the earlier holder's
    /// lease had run out (`Anomaly::lease_expired`).
    pub fn of_kind(kind: AnomalyKind, lease_expired: Option<bool>) -> Class {
        match kind {
            AnomalyKind::StaleWrite => Class::StaleWrite,
            AnomalyKind::BadLease => Class::BadLease,
            // An overlap whose lease class is unknown is taken at its worst.
            AnomalyKind::Overlap if lease_expired == Some(true) => Class::OverlapAfterLease,
            AnomalyKind::Overlap => Class::OverlapInLease,
            AnomalyKind::LostLock => Class::LostLock,
            AnomalyKind::DuplicateToken | AnomalyKind::TokenOrder => Class::Token,
            AnomalyKind::Unavailable => Class::Unavailable,
            AnomalyKind::Starvation => Class::Starvation,
            AnomalyKind::Unfair => Class::Unfair,
            AnomalyKind::LostUpdate => Class::LostUpdate,
        }
    }

    /// What the class adds to its kind's name: "inside a live lease" for overlaps.
    pub fn qualifier(self) -> &'static str {
        match self {
            Class::OverlapInLease => "inside a live lease",
            Class::OverlapAfterLease => "after a lease ran out",
            _ => "",
        }
    }
}

/// Where `kind` stands in the order worst first (overlaps at their worst), for lists by kind.
pub fn kind_rank(kind: AnomalyKind) -> Class {
    Class::of_kind(kind, None)
}

/// Anomalies of one class close in time: what one fault caused.
#[derive(Debug, Clone, PartialEq)]
pub struct Episode {
    pub class: Class,
    /// The anomalies' kinds, each once, in order of first appearance.
    pub kinds: Vec<AnomalyKind>,
    /// Positions in the anomaly list given to `episodes`, in time order.
    pub anomalies: Vec<usize>,
    /// The keys involved, sorted, each once.
    pub keys: Vec<String>,
    /// The processes involved, sorted, each once.
    pub processes: Vec<u64>,
    /// The union of the anomalies' spans, ns on the run's clock.
    pub start: i64,
    pub end: i64,
}

impl Episode {
    /// The first anomaly (by start): the one a reader is shown first.
    pub fn first(&self) -> usize {
        self.anomalies[0]
    }

    /// "38 overlaps inside a live lease on lock:0..3 between 2.100s and 4.300s",
    /// "1 stale-write on lock:a at 2.100s".
    pub fn headline(&self) -> String {
        let n = self.anomalies.len();
        let kind = if self.kinds.len() == 1 {
            let kind = self.kinds[0];
            match (n, kind) {
                (1, _) => kind.to_string(),
                // Adjectives and uncountables read as kinds of anomaly.
                (
                    _,
                    AnomalyKind::Unavailable
                    | AnomalyKind::Unfair
                    | AnomalyKind::Starvation
                    | AnomalyKind::TokenOrder,
                ) => format!("{kind} anomalies"),
                _ => format!("{kind}s"),
            }
        } else {
            AnomalyKind::join(&self.kinds, " / ")
        };
        let qualifier = self.class.qualifier();
        let qualifier = if qualifier.is_empty() {
            String::new()
        } else {
            format!(" {qualifier}")
        };
        let when = if self.start == self.end {
            format!("at {}", fmt_time(self.start))
        } else {
            format!(
                "between {} and {}",
                fmt_time(self.start),
                fmt_time(self.end)
            )
        };
        format!("{n} {kind}{qualifier} on {} {when}", keys_text(&self.keys))
    }
}

/// `lock:a`; `lock:a, lock:c`; `lock:0..3` (keys of one stem numbered in a row); up to 4
/// keys named; `lock:a, lock:b and 5 more keys`.
pub fn keys_text(keys: &[String]) -> String {
    if keys.len() <= 2 {
        return keys.join(", ");
    }
    let numbered: Option<Vec<(&str, u64)>> = keys
        .iter()
        .map(|k| {
            let digits = k.len() - k.trim_end_matches(|c: char| c.is_ascii_digit()).len();
            let (stem, n) = k.split_at(k.len() - digits);
            n.parse().ok().map(|n| (stem, n))
        })
        .collect();
    if let Some(mut numbered) = numbered {
        numbered.sort_by_key(|&(_, n)| n);
        let stem = numbered[0].0;
        let consecutive = numbered.windows(2).all(|w| w[1].1 == w[0].1 + 1);
        if consecutive && numbered.iter().all(|&(s, _)| s == stem) {
            let (lo, hi) = (numbered[0].1, numbered[numbered.len() - 1].1);
            return format!("{stem}{lo}..{hi}");
        }
    }
    if keys.len() <= 4 {
        return keys.join(", ");
    }
    let more = keys.len() - 2;
    let noun = if more == 1 { "key" } else { "keys" };
    format!("{}, {} and {more} more {noun}", keys[0], keys[1])
}

/// The anomalies grouped into episodes, worst class first, then by time.
pub fn episodes(anomalies: &[Anomaly]) -> Vec<Episode> {
    let span = |a: &Anomaly| (a.start.min(a.end), a.start.max(a.end));
    let mut order: Vec<usize> = (0..anomalies.len()).collect();
    order.sort_by_key(|&i| (Class::of(&anomalies[i]), span(&anomalies[i]), i));
    let mut out: Vec<Episode> = Vec::new();
    for i in order {
        let a = &anomalies[i];
        let class = Class::of(a);
        let (start, end) = span(a);
        let joins = out
            .last()
            .is_some_and(|e| e.class == class && start <= e.end.saturating_add(NEAR_NS));
        if !joins {
            out.push(Episode {
                class,
                kinds: Vec::new(),
                anomalies: Vec::new(),
                keys: Vec::new(),
                processes: Vec::new(),
                start,
                end,
            });
        }
        let e = out.last_mut().expect("an episode was just pushed");
        e.anomalies.push(i);
        e.end = e.end.max(end);
        if !e.kinds.contains(&a.kind) {
            e.kinds.push(a.kind);
        }
        e.keys.push(a.key.clone());
        e.processes.extend(&a.processes);
    }
    for e in &mut out {
        e.keys.sort();
        e.keys.dedup();
        e.processes.sort_unstable();
        e.processes.dedup();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn anomaly(kind: &str, key: &str, start: i64, end: i64, lease: Option<bool>) -> Anomaly {
        Anomaly {
            kind: kind.parse().unwrap(),
            key: key.into(),
            processes: vec![start as u64 / S as u64],
            indices: vec![],
            explanation: format!("{kind} on {key}"),
            start,
            end,
            lease_expired: lease,
            tokens: vec![],
            cycle: vec![],
        }
    }

    #[test]
    fn no_anomalies_no_episodes() {
        assert!(episodes(&[]).is_empty());
    }

    #[test]
    fn one_anomaly_alone_is_one_episode() {
        let list = [anomaly("stale-write", "lock:a", 2 * S, 2 * S, None)];
        let e = episodes(&list);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].anomalies, vec![0]);
        assert_eq!(e[0].class, Class::StaleWrite);
        assert_eq!(e[0].headline(), "1 stale-write on lock:a at 2.000s");
    }

    #[test]
    fn worst_first_whatever_the_time_order() {
        // As the checker lists them: by time.
        let list = [
            anomaly("lost-update", "lock:0", 0, 10 * S, None),
            anomaly("overlap", "lock:0", S, 2 * S, Some(true)),
            anomaly("unavailable", "lock:1", 3 * S, 5 * S, None),
            anomaly("overlap", "lock:2", 6 * S, 7 * S, Some(false)),
            anomaly("lost-lock", "lock:2", 6 * S, 7 * S, Some(false)),
            anomaly("stale-write", "lock:0", 8 * S, 8 * S, None),
            anomaly("bad-lease", "lock:3", 9 * S, 9 * S, Some(true)),
            anomaly("token-order", "lock:3", 9 * S, 9 * S, None),
            anomaly("starvation", "lock:3", 0, 9 * S, None),
            anomaly("unfair", "lock:3", S, S, None),
            anomaly("duplicate-token", "lock:3", 20 * S, 20 * S, None),
        ];
        let classes: Vec<Class> = episodes(&list).iter().map(|e| e.class).collect();
        assert_eq!(
            classes,
            vec![
                Class::StaleWrite,
                Class::BadLease,
                Class::OverlapInLease,
                Class::LostLock,
                Class::Token,
                Class::Token,
                Class::Unavailable,
                Class::Starvation,
                Class::Unfair,
                Class::OverlapAfterLease,
                Class::LostUpdate,
            ]
        );
    }

    #[test]
    fn touching_spans_join_and_far_ones_do_not() {
        let list = [
            anomaly("overlap", "lock:0", S, 2 * S, Some(true)),
            anomaly("overlap", "lock:1", 2 * S, 3 * S, Some(true)),
            // Within NEAR_NS of the last one's end.
            anomaly("overlap", "lock:2", 3 * S + NEAR_NS, 4 * S, Some(true)),
            // Further: a new episode.
            anomaly("overlap", "lock:3", 5 * S + NEAR_NS + 1, 6 * S, Some(true)),
            // Same time, other lease class: its own episode.
            anomaly("overlap", "lock:3", S, 2 * S, Some(false)),
        ];
        let e = episodes(&list);
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].class, Class::OverlapInLease);
        assert_eq!(e[1].anomalies, vec![0, 1, 2]);
        assert_eq!((e[1].start, e[1].end), (S, 4 * S));
        assert_eq!(e[1].processes, vec![1, 2, 4]);
        assert_eq!(
            e[1].headline(),
            "3 overlaps after a lease ran out on lock:0..2 between 1.000s and 4.000s"
        );
        assert_eq!(e[2].anomalies, vec![3]);
    }

    #[test]
    fn a_long_anomaly_swallows_what_it_spans() {
        let list = [
            anomaly("unavailable", "lock:0", 0, 10 * S, None),
            anomaly("unavailable", "lock:1", 8 * S, 9 * S, None),
            anomaly("unavailable", "lock:1", 10 * S + NEAR_NS / 2, 12 * S, None),
        ];
        let e = episodes(&list);
        assert_eq!(e.len(), 1);
        assert_eq!((e[0].start, e[0].end), (0, 12 * S));
        assert_eq!(
            e[0].headline(),
            "3 unavailable anomalies on lock:0, lock:1 between 0.000s and 12.000s"
        );
    }

    #[test]
    fn keys_read_short() {
        let keys = |ks: &[&str]| ks.iter().map(|k| k.to_string()).collect::<Vec<_>>();
        assert_eq!(keys_text(&keys(&["lock:a"])), "lock:a");
        assert_eq!(keys_text(&keys(&["a", "b"])), "a, b");
        assert_eq!(
            keys_text(&keys(&["lock:0", "lock:1", "lock:2"])),
            "lock:0..2"
        );
        assert_eq!(
            keys_text(&keys(&["lock:0", "lock:2", "lock:3"])),
            "lock:0, lock:2, lock:3"
        );
        assert_eq!(
            keys_text(&keys(&["a", "b", "c", "d", "e"])),
            "a, b and 3 more keys"
        );
    }
}
