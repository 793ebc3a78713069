//! Unit tests of every rule, on hand-written histories: each anomaly kind found when present
//! and silent when absent, with the tricky cases beside them.
//!
//! Histories are written one event per line as `time_ms process type f key [value-json]`;
//! `time_ms` may be fractional, `process` may be `nemesis` (then `f` is the fault and `key`
//! is `-`). Indices are assigned in line order.

use serde_json::Value;

use super::{check, CheckOptions};
use crate::history::reader::read_jsonl;
use crate::report::{Anomaly, AnomalyKind, Report};

fn history_text(text: &str) -> String {
    let mut out = String::new();
    for (index, line) in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        let mut parts = line.split_whitespace();
        let time_ms: f64 = parts.next().unwrap().parse().unwrap();
        let process = parts.next().unwrap();
        let ty = parts.next().unwrap();
        let f = parts.next().unwrap();
        let key = parts.next().unwrap();
        let rest: Vec<&str> = parts.collect();
        let value: Option<Value> =
            (!rest.is_empty()).then(|| serde_json::from_str(&rest.join(" ")).unwrap());
        let mut event = serde_json::json!({
            "index": index,
            "time": (time_ms * 1e6).round() as i64,
            "type": ty,
            "f": f,
        });
        event["process"] = match process.parse::<u64>() {
            Ok(p) => p.into(),
            Err(_) => process.into(),
        };
        if key != "-" {
            event["key"] = key.into();
        }
        if let Some(value) = value {
            event["value"] = value;
        }
        out.push_str(&event.to_string());
        out.push('\n');
    }
    out
}

fn run_with(text: &str, options: &CheckOptions) -> Report {
    let jsonl = history_text(text);
    let history = read_jsonl(jsonl.as_bytes(), "test", None).expect("a valid history");
    check(&history, options)
}

fn run(text: &str) -> Report {
    run_with(text, &CheckOptions::default())
}

/// The anomalies of the kind named `kind` (a misspelt name fails the test).
fn of_kind<'a>(report: &'a Report, kind: &str) -> Vec<&'a Anomaly> {
    let kind: AnomalyKind = kind.parse().unwrap();
    report.anomalies.iter().filter(|a| a.kind == kind).collect()
}

fn kinds_sorted(report: &Report) -> Vec<&str> {
    let mut kinds: Vec<&str> = report.anomalies.iter().map(|a| a.kind.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    kinds
}

fn kinds(report: &Report) -> Vec<&str> {
    let mut kinds: Vec<&str> = report.anomalies.iter().map(|a| a.kind.as_str()).collect();
    kinds.dedup();
    kinds
}

fn only<'a>(report: &'a Report, kind: &str) -> &'a Anomaly {
    let found = of_kind(report, kind);
    assert_eq!(
        found.len(),
        1,
        "expected one {kind}: {:#?}",
        report.anomalies
    );
    assert_eq!(kinds(report), vec![kind], "{:#?}", report.anomalies);
    found[0]
}

fn assert_valid(report: &Report) {
    assert!(
        report.is_valid(),
        "expected valid, got {:#?}",
        report.anomalies
    );
    assert!(report.anomalies.is_empty());
}

// ---------------------------------------------------------------- overlap

#[test]
fn overlap_inside_the_lease_is_the_lock_failing() {
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k {"lease_ms":1000}
        100  1 invoke acquire k
        101  1 ok     acquire k {"lease_ms":1000}
        200  0 invoke release k
        201  0 ok     release k
        300  1 invoke release k
        301  1 ok     release k
    "#);
    let overlap = only(&report, "overlap");
    assert_eq!(overlap.lease_expired, Some(false));
    assert!(overlap.indices.contains(&1) && overlap.indices.contains(&3));
    assert_eq!(overlap.processes, vec![0, 1]);
    assert_eq!((overlap.start, overlap.end), (101_000_000, 200_000_000));
    assert!(overlap.explanation.contains("the lock itself failed"));
    assert!(report.is_invalid());
}

#[test]
fn overlap_after_the_lease_ran_out_is_a_lease_expiry_hazard() {
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k {"lease_ms":100}
        500  1 invoke acquire k
        501  1 ok     acquire k {"lease_ms":100}
        550  0 invoke release k
        551  0 fail   release k
        560  1 invoke release k
        561  1 ok     release k
    "#);
    let overlap = only(&report, "overlap");
    assert_eq!(overlap.lease_expired, Some(true));
    assert!(
        overlap.explanation.contains("lease-expiry hazard"),
        "{}",
        overlap.explanation
    );
    // The failed release came after the lease ran out: expected, not a lost lock.
    assert_eq!(report.stats.per_key["k"].expected_losses, 1);
}

#[test]
fn a_renew_moves_the_lease_so_a_later_overlap_is_inside_it() {
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k {"lease_ms":100}
        80   0 invoke renew   k
        81   0 ok     renew   k {"lease_ms":100}
        150  1 invoke acquire k
        151  1 ok     acquire k {"lease_ms":100}
    "#);
    assert_eq!(only(&report, "overlap").lease_expired, Some(false));
}

#[test]
fn no_lease_means_held_until_released() {
    let report = run(r#"
        0     0 invoke acquire k
        1     0 ok     acquire k {"token":null,"lease_ms":null}
        9000  1 invoke acquire k
        9001  1 ok     acquire k
    "#);
    assert_eq!(only(&report, "overlap").lease_expired, Some(false));
}

#[test]
fn a_hand_over_at_the_same_nanosecond_is_not_an_overlap() {
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k {"lease_ms":1000}
        50   1 invoke acquire k
        100  1 ok     acquire k {"lease_ms":1000}
        100  0 invoke release k
        101  0 ok     release k
        200  1 invoke release k
        201  1 ok     release k
    "#);
    assert_valid(&report);
}

#[test]
fn sequential_holds_of_many_processes_are_valid() {
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k
        2    1 invoke acquire k
        3    1 fail   acquire k
        10   0 invoke release k
        11   0 ok     release k
        12   1 invoke acquire k
        13   1 ok     acquire k
        20   1 invoke release k
        21   1 ok     release k
        22   2 invoke acquire other
        23   2 ok     acquire other
    "#);
    assert_valid(&report);
    assert_eq!(report.stats.per_key["k"].acquisitions, 2);
    assert_eq!(report.stats.per_key["k"].failed_attempts, 1);
}

#[test]
fn reentrant_acquires_nest_and_the_hold_ends_with_the_outer_release() {
    let nested = r#"
        0    0 invoke acquire k
        1    0 ok     acquire k {"lease_ms":1000}
        2    0 invoke acquire k
        3    0 ok     acquire k {"lease_ms":1000}
        4    0 invoke release k
        5    0 ok     release k
        6    1 invoke acquire k
        7    1 ok     acquire k {"lease_ms":1000}
    "#;
    // One release of two nested acquires: process 0 still holds the key.
    let report = run(nested);
    assert_eq!(only(&report, "overlap").processes, vec![0, 1]);

    let released = nested.replace(
        "6    1 invoke acquire k",
        "5.5  0 invoke release k\n 5.7  0 ok release k\n 6    1 invoke acquire k",
    );
    assert_valid(&run(&released));
}

#[test]
fn an_indeterminate_acquire_never_makes_a_holder() {
    let report = run(r#"
        0    0 invoke acquire k
        5    0 info   acquire k
        10   1 invoke acquire k
        11   1 ok     acquire k {"lease_ms":100}
        20   1 invoke release k
        21   1 ok     release k
    "#);
    assert_valid(&report);
    assert_eq!(report.stats.per_key["k"].indeterminate_attempts, 1);
}

#[test]
fn a_killed_holder_holds_no_more() {
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k {"lease_ms":100}
        2    0 invoke write   k {"token":null,"value":1}
        50   nemesis info kill - {"targets":["worker-0"],"processes":[0]}
        50   0 info   write   k
        150  1 invoke acquire k
        151  1 ok     acquire k {"lease_ms":100}
    "#);
    assert_valid(&report);
}

#[test]
fn a_holder_never_released_holds_to_the_end_of_the_history() {
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k {"lease_ms":100}
        900  1 invoke acquire k
        901  1 ok     acquire k {"lease_ms":100}
    "#);
    let overlap = only(&report, "overlap");
    assert_eq!(overlap.lease_expired, Some(true));
    assert!(overlap.explanation.contains("end of the history"));
}

// ---------------------------------------------------------------- bad-lease

#[test]
fn a_grant_returning_after_its_lease_ran_out_is_a_bad_lease() {
    // 200 ms promised from the invoke, granted after 300 ms.
    let report = run(r#"
        0    0 invoke acquire k
        300  0 ok     acquire k {"lease_ms":200}
        310  0 invoke release k
        311  0 ok     release k
    "#);
    let bad = only(&report, "bad-lease");
    assert_eq!(bad.indices, vec![0, 1]);
    assert_eq!(bad.processes, vec![0]);
    assert_eq!(bad.lease_expired, Some(true));
    assert!(
        bad.explanation.contains("had run out 100ms before"),
        "{}",
        bad.explanation
    );
}

#[test]
fn a_lease_exactly_as_long_as_the_wait_is_dead_one_longer_is_not() {
    let text = r#"
        0    0 invoke acquire k
        300  0 ok     acquire k {"lease_ms":LEASE}
        310  0 invoke release k
        311  0 ok     release k
    "#;
    only(&run(&text.replace("LEASE", "300")), "bad-lease");
    assert_valid(&run(&text.replace("LEASE", "301")));
}

#[test]
fn a_lease_longer_than_the_ttl_asked_for_is_a_bad_lease() {
    let text = r#"
        0    0 invoke acquire k {"ttl_ms":1000}
        1    0 ok     acquire k {"lease_ms":LEASE}
        10   0 invoke release k
        11   0 ok     release k
    "#;
    let report = run(&text.replace("LEASE", "9223372036854775807"));
    let bad = only(&report, "bad-lease");
    assert!(
        bad.explanation.contains("asked for a ttl of 1000ms"),
        "{}",
        bad.explanation
    );
    assert_eq!(bad.lease_expired, Some(false));
    assert_valid(&run(&text.replace("LEASE", "1000")));
    // From the invoke, a lease may run the ttl + the 1 ms until the grant: not more.
    assert_valid(&run(&text.replace("LEASE", "1001")));
    only(&run(&text.replace("LEASE", "1002")), "bad-lease");
    // No ttl asked for, or a lock that never expires: nothing to compare with.
    assert_valid(&run(&text
        .replace("LEASE", "5000")
        .replace(r#"{"ttl_ms":1000}"#, "")));
    assert_valid(&run(&text.replace(r#"{"lease_ms":LEASE}"#, "")));
}

#[test]
fn a_nested_grant_with_a_dead_lease_is_a_bad_lease_too() {
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k {"lease_ms":1000}
        10   0 invoke acquire k
        700  0 ok     acquire k {"lease_ms":500}
        710  0 invoke release k
        711  0 ok     release k
        720  0 invoke release k
        721  0 ok     release k
    "#);
    assert_eq!(only(&report, "bad-lease").indices, vec![2, 3]);
}

#[test]
fn an_overlap_after_a_dead_grant_blames_the_grant_not_a_pause() {
    let report = run(r#"
        0    0 invoke acquire k
        300  0 ok     acquire k {"lease_ms":200}
        310  1 invoke acquire k
        311  1 ok     acquire k {"lease_ms":200}
        400  0 invoke release k
        401  0 fail   release k
        410  1 invoke release k
        411  1 ok     release k
    "#);
    assert_eq!(kinds_sorted(&report), ["bad-lease", "overlap"]);
    let overlap = of_kind(&report, "overlap")[0];
    assert_eq!(overlap.lease_expired, Some(true));
    assert!(
        overlap
            .explanation
            .contains("already run out when its grant returned"),
        "{}",
        overlap.explanation
    );
    assert!(
        !overlap.explanation.contains("lease-expiry hazard"),
        "{}",
        overlap.explanation
    );
}

// ---------------------------------------------------------------- lost-lock

#[test]
fn a_renew_failing_inside_the_lease_is_a_lost_lock() {
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k {"lease_ms":1000}
        300  0 invoke renew   k
        301  0 fail   renew   k
    "#);
    let lost = only(&report, "lost-lock");
    assert_eq!(lost.indices, vec![1, 2, 3]);
}

#[test]
fn a_release_failing_with_no_lease_is_a_lost_lock() {
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k
        300  0 invoke release k
        301  0 fail   release k
    "#);
    assert_eq!(only(&report, "lost-lock").indices, vec![1, 2, 3]);
}

#[test]
fn a_nested_release_failing_is_a_lost_lock_and_the_hold_goes_on() {
    // The first release would only have brought the count from 2 to 1: it is not the
    // hold's release, yet the implementation said the lock was no longer ours.
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k
        10   0 invoke acquire k
        11   0 ok     acquire k
        300  0 invoke release k
        301  0 fail   release k
        400  0 invoke release k
        401  0 ok     release k
    "#);
    assert_eq!(only(&report, "lost-lock").indices, vec![1, 4, 5]);
    // The hold went on to the second release: another process taking the lock before
    // then overlaps it.
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k
        10   0 invoke acquire k
        11   0 ok     acquire k
        300  0 invoke release k
        301  0 fail   release k
        350  1 invoke acquire k
        351  1 ok     acquire k
        352  1 invoke release k
        353  1 ok     release k
        400  0 invoke release k
        401  0 ok     release k
    "#);
    assert_eq!(kinds_sorted(&report), ["lost-lock", "overlap"]);
}

#[test]
fn a_failed_release_is_what_the_implementation_said_not_a_proven_loss() {
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k {"lease_ms":1000}
        300  0 invoke release k
        301  0 fail   release k
    "#);
    let lost = only(&report, "lost-lock");
    assert!(
        lost.explanation.contains(
            "release (event 3) came back failed at 0.301s: the implementation said the lock on k was no longer ours, yet its lease still had"
        ),
        "{}",
        lost.explanation
    );
    assert!(
        lost.explanation.contains("retries a release"),
        "{}",
        lost.explanation
    );
    assert!(
        !lost.explanation.contains("the lock was lost."),
        "{}",
        lost.explanation
    );
}

#[test]
fn a_lock_lost_after_its_lease_ran_out_is_expected() {
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k {"lease_ms":100}
        300  0 invoke renew   k
        301  0 fail   renew   k
        302  0 invoke release k
        303  0 fail   release k
    "#);
    assert_valid(&report);
    assert_eq!(report.stats.per_key["k"].expected_losses, 2);
}

#[test]
fn a_lease_running_out_during_the_failing_call_excuses_it() {
    // Lease ends at 100ms; the renew was sent before, answered after.
    let report = run(r#"
        0    0 invoke acquire k
        0    0 ok     acquire k {"lease_ms":100}
        99   0 invoke renew   k
        101  0 fail   renew   k
    "#);
    assert_valid(&report);
}

// ---------------------------------------------------------------- fencing

const PAUSED_HOLDER: &str = r#"
    0     0 invoke acquire k
    1     0 ok     acquire k {"token":33,"lease_ms":100}
    200   1 invoke acquire k
    201   1 ok     acquire k {"token":34,"lease_ms":100}
    202   1 invoke write   k {"token":34,"value":"b"}
    203   1 OUTCOME_B write   k
    300   0 invoke write   k {"token":33,"value":"a"}
    301   0 OUTCOME_A write   k
"#;

#[test]
fn a_stale_write_accepted_after_a_later_holders_write_is_found() {
    let report = run(&PAUSED_HOLDER
        .replace("OUTCOME_A", "ok")
        .replace("OUTCOME_B", "ok"));
    let stale = report
        .anomalies
        .iter()
        .find(|a| a.kind == AnomalyKind::StaleWrite)
        .unwrap();
    assert_eq!(stale.indices, vec![1, 3, 4, 5, 6, 7]);
    assert_eq!(stale.tokens, vec![33, 34]);
    assert_eq!(stale.cycle.len(), 2, "{:?}", stale.cycle);
    assert_eq!(kinds(&report), vec!["overlap", "stale-write"]);
}

#[test]
fn a_fenced_resource_rejecting_the_stale_write_is_not_a_stale_write() {
    let report = run(&PAUSED_HOLDER
        .replace("OUTCOME_A", "fail")
        .replace("OUTCOME_B", "ok"));
    assert_eq!(kinds(&report), vec!["overlap"]);
}

#[test]
fn an_indeterminate_write_is_not_known_to_be_accepted() {
    let report = run(&PAUSED_HOLDER
        .replace("OUTCOME_A", "ok")
        .replace("OUTCOME_B", "info"));
    assert_eq!(kinds(&report), vec!["overlap"]);
}

#[test]
fn stale_writes_need_no_tokens() {
    let text = PAUSED_HOLDER
        .replace("OUTCOME_A", "ok")
        .replace("OUTCOME_B", "ok")
        .replace(r#""token":33,"#, "")
        .replace(r#""token":34,"#, "");
    let report = run(&text);
    let stale = report
        .anomalies
        .iter()
        .find(|a| a.kind == AnomalyKind::StaleWrite)
        .unwrap();
    assert!(stale.tokens.is_empty());
}

/// Process 0's lease (50 ms) runs out, process 1 takes the lock; process 1's write is
/// accepted at 346 ms, the very nanosecond process 0 invokes its own: `FIRST` and `SECOND`
/// are those two lines, in either file order.
const SAME_NS_WRITES: &str = r#"
    241   0 invoke acquire k
    245   0 ok     acquire k {"token":4,"lease_ms":50}
    305   1 invoke acquire k
    305   1 ok     acquire k {"token":5,"lease_ms":50}
    307   1 invoke write   k {"token":5,"value":1}
    FIRST
    SECOND
    347   0 ok     write   k
"#;

#[test]
fn a_write_invoked_in_the_nanosecond_a_later_holders_write_was_accepted_is_not_stale() {
    // "Invoked after the resource had already accepted": in the same nanosecond it was not
    // (yet), and the verdict may not depend on how the file orders one nanosecond's events.
    let accepted = "346   1 ok     write   k";
    let invoked = r#"346   0 invoke write   k {"token":4,"value":2}"#;
    for (first, second) in [(accepted, invoked), (invoked, accepted)] {
        let report = run(&SAME_NS_WRITES
            .replace("FIRST", first)
            .replace("SECOND", second));
        assert_eq!(kinds(&report), vec!["overlap"], "{first} / {second}");
    }
    // One nanosecond later it is stale.
    let later = r#"346.000001   0 invoke write   k {"token":4,"value":2}"#;
    let report = run(&SAME_NS_WRITES
        .replace("FIRST", accepted)
        .replace("SECOND", later));
    assert_eq!(kinds_sorted(&report), vec!["overlap", "stale-write"]);
}

#[test]
fn writes_in_lock_order_are_not_stale() {
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k {"token":1}
        2    0 invoke write   k {"token":1,"value":1}
        3    0 ok     write   k
        4    0 invoke release k
        5    0 ok     release k
        6    1 invoke acquire k
        7    1 ok     acquire k {"token":2}
        8    1 invoke write   k {"token":2,"value":2}
        9    1 ok     write   k
    "#);
    assert_valid(&report);
}

#[test]
fn two_holds_with_one_token_are_a_duplicate() {
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k {"token":7}
        2    0 invoke release k
        3    0 ok     release k
        4    1 invoke acquire k
        5    1 ok     acquire k {"token":7}
    "#);
    // One after the other, the later token is "not lower": token order too (docs/src/reference/history.md).
    let duplicate: Vec<&Anomaly> = of_kind(&report, "duplicate-token");
    assert_eq!(duplicate.len(), 1);
    assert_eq!(duplicate[0].indices, vec![1, 5]);
    let cycle = of_kind(&report, "token-order");
    assert_eq!(cycle.len(), 1, "{:#?}", report.anomalies);
    assert!(cycle[0].indices.contains(&1) && cycle[0].indices.contains(&5));
    assert_eq!(kinds_sorted(&report), ["duplicate-token", "token-order"]);
}

#[test]
fn two_side_by_side_holds_with_one_token_are_a_duplicate_only() {
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k {"token":7}
        2    1 invoke acquire k
        3    1 ok     acquire k {"token":7}
        4    0 invoke release k
        5    0 ok     release k
        6    1 invoke release k
        7    1 ok     release k
    "#);
    assert_eq!(kinds_sorted(&report), ["duplicate-token", "overlap"]);
}

#[test]
fn a_hold_of_zero_length_is_no_token_order_cycle() {
    // Process 0 acquires and invokes its release in the same nanosecond.
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k {"token":1}
        1    0 invoke release k
        2    0 ok     release k
        3    1 invoke acquire k
        4    1 ok     acquire k {"token":2}
        4    1 invoke release k
        5    1 ok     release k
    "#);
    assert_valid(&report);
}

#[test]
fn a_hold_of_zero_length_ending_as_another_begins_precedes_it_in_any_file_order() {
    // At 350 ms process 1 gets token 8 and invokes its release (a hold of zero length), and
    // process 0 gets token 6 and holds on: process 1's hold ended no later than process 0's
    // began, yet its token is not lower. Touching holds are ordered, whichever of the two
    // acquire oks of that nanosecond the file lists first.
    let text = r#"
        269   0 invoke acquire k
        336   1 invoke acquire k
        FIRST
        SECOND
        350   1 invoke release k
        354   1 ok     release k
    "#;
    let zero = r#"350   1 ok     acquire k {"token":8}"#;
    let long = r#"350   0 ok     acquire k {"token":6}"#;
    for (first, second) in [(zero, long), (long, zero)] {
        let report = run(&text.replace("FIRST", first).replace("SECOND", second));
        assert_eq!(kinds(&report), vec!["token-order"], "{first} / {second}");
    }
}

#[test]
fn two_holds_of_zero_length_at_one_instant_are_simultaneous() {
    // Each ended in the nanosecond the other began: neither precedes the other, so no token
    // order is broken, in either file order.
    let text = r#"
        0     0 invoke acquire k
        0     1 invoke acquire k
        FIRST
        SECOND
        1     0 invoke release k
        1     1 invoke release k
        2     0 ok     release k
        2     1 ok     release k
    "#;
    let a = r#"1   0 ok     acquire k {"token":1}"#;
    let b = r#"1   1 ok     acquire k {"token":2}"#;
    for (first, second) in [(a, b), (b, a)] {
        let report = run(&text.replace("FIRST", first).replace("SECOND", second));
        assert_valid(&report);
    }
}

#[test]
fn a_later_hold_with_a_lower_token_is_a_token_order_cycle() {
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k {"token":9}
        2    0 invoke release k
        3    0 ok     release k
        4    1 invoke acquire k
        5    1 ok     acquire k {"token":5}
        6    1 invoke release k
        7    1 ok     release k
    "#);
    let cycle = only(&report, "token-order");
    assert!(
        cycle.indices.contains(&1) && cycle.indices.contains(&5),
        "{cycle:?}"
    );
    assert_eq!(cycle.cycle.len(), 2, "{:?}", cycle.cycle);
    assert!(cycle.cycle.iter().any(|s| s.contains("real time")));
    assert!(cycle.cycle.iter().any(|s| s.contains("token order")));
}

#[test]
fn a_token_order_violation_across_a_chain_of_holds_is_found() {
    // 0 -> 1 -> 2 in real time; the tokens go 5, 9, 6: hold 2 got a token below hold 1's.
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k {"token":5}
        2    0 invoke release k
        3    0 ok     release k
        4    1 invoke acquire k
        5    1 ok     acquire k {"token":9}
        6    1 invoke release k
        7    1 ok     release k
        8    2 invoke acquire k
        9    2 ok     acquire k {"token":6}
    "#);
    let cycle = only(&report, "token-order");
    assert!(
        cycle.indices.contains(&5) && cycle.indices.contains(&9),
        "{cycle:?}"
    );
}

#[test]
fn overlapping_holds_may_have_tokens_in_any_order() {
    // Their order in real time is undefined, so no token order is implied; the overlap
    // itself is reported.
    let report = run(r#"
        0    0 invoke acquire k
        1    0 ok     acquire k {"token":9}
        2    1 invoke acquire k
        3    1 ok     acquire k {"token":5}
        4    0 invoke release k
        5    1 invoke release k
    "#);
    assert_eq!(kinds(&report), vec!["overlap"]);
}

// ---------------------------------------------------------------- liveness

const DEADLOCK: &str = r#"
    0     0 invoke acquire k
    1     0 ok     acquire k LEASE
    10    nemesis info kill - {"targets":["worker-0"],"processes":[0]}
    100   1 invoke acquire k
    101   1 fail   acquire k
    700   1 invoke acquire k
    701   1 fail   acquire k
    1500  1 invoke acquire k
    1501  1 fail   acquire k
    1600  1 invoke acquire k
    1601  1 ok     acquire k {"lease_ms":300}
"#;

#[test]
fn a_killed_holder_with_no_lease_makes_the_key_unavailable() {
    let report = run(&DEADLOCK.replace("LEASE", ""));
    let stuck = only(&report, "unavailable");
    // Free from the kill (event 2) until the next successful acquire was invoked (event 9).
    assert_eq!((stuck.start, stuck.end), (10_000_000, 1_600_000_000));
    assert!(
        stuck.indices.contains(&2) && stuck.indices.contains(&9),
        "{stuck:?}"
    );
}

#[test]
fn a_killed_holders_running_lease_excuses_the_wait() {
    // The lease runs to 1500ms; the next acquisition comes 101ms after it.
    let report = run(&DEADLOCK.replace("LEASE", r#"{"lease_ms":1500}"#));
    assert_valid(&report);
    assert!(report.stats.per_key["k"].longest_free_ms < 1000.0);
}

#[test]
fn the_liveness_bound_is_an_option() {
    let text = DEADLOCK.replace("LEASE", r#"{"lease_ms":1000}"#);
    assert_valid(&run(&text));
    let strict = CheckOptions {
        liveness_bound_ns: 400_000_000,
        ..CheckOptions::default()
    };
    only(&run_with(&text, &strict), "unavailable");
}

#[test]
fn a_release_that_frees_nothing_shows_as_unavailable() {
    // lua-getset's flaw: the release is ok, yet acquires fail until the TTL.
    let report = run(r#"
        0     0 invoke acquire k
        1     0 ok     acquire k {"lease_ms":3000}
        10    0 invoke release k
        11    0 ok     release k
        20    1 invoke acquire k
        21    1 fail   acquire k
        2000  1 invoke acquire k
        2001  1 fail   acquire k
        3100  1 invoke acquire k
        3101  1 ok     acquire k {"lease_ms":3000}
    "#);
    let stuck = only(&report, "unavailable");
    assert_eq!(stuck.start, 11_000_000);
    // What the history shows (a release ok), not that the key was free: it was not.
    assert!(
        stuck.explanation.starts_with(
            "process 0's release returned ok at 0.011s (event 3), so k should have been free; \
             yet from then until the next acquire that succeeded was invoked at 3.100s (event 8)"
        ),
        "{}",
        stuck.explanation
    );
    assert!(
        !stuck.explanation.contains("was free"),
        "{}",
        stuck.explanation
    );
    assert!(
        [3, 8].iter().all(|i| stuck.indices.contains(i)),
        "{stuck:?}"
    );
}

#[test]
fn a_killed_holders_lease_cites_the_acquire_and_the_kill() {
    let report = run(r#"
        0     0 invoke acquire k
        1     0 ok     acquire k {"lease_ms":200}
        50    nemesis info kill - {"targets":["worker-0"],"processes":[0]}
        300   1 invoke acquire k
        301   1 fail   acquire k
        1400  1 invoke acquire k
        1401  1 fail   acquire k
        1500  1 invoke acquire k
        1501  1 ok     acquire k {"lease_ms":200}
    "#);
    let stuck = only(&report, "unavailable");
    assert_eq!(stuck.start, 200_000_000);
    assert!(
        stuck.explanation.starts_with(
            "the lease of process 0 (acquired at event 1) ran out at 0.200s, the process having been killed (event 2), so k should have been free"
        ),
        "{}",
        stuck.explanation
    );
    assert!(
        [1, 2, 7].iter().all(|i| stuck.indices.contains(i)),
        "{stuck:?}"
    );
}

#[test]
fn a_next_acquire_that_ended_info_is_not_said_to_have_succeeded() {
    let report = run(r#"
        0     0 invoke acquire k
        1     0 ok     acquire k {"lease_ms":1000}
        10    0 invoke release k
        11    0 ok     release k
        100   1 invoke acquire k
        101   1 fail   acquire k
        1500  1 invoke acquire k
        1501  1 fail   acquire k
        1600  2 invoke acquire k
        1700  2 info   acquire k
    "#);
    let stuck = of_kind(&report, "unavailable")[0];
    assert!(
        stuck
            .explanation
            .contains("until an acquire that may have taken it (it ended without an answer) was invoked at 1.600s (event 8)"),
        "{}",
        stuck.explanation
    );
    assert!(
        !stuck.explanation.contains("succeeded"),
        "{}",
        stuck.explanation
    );
}

#[test]
fn a_failure_that_may_have_met_the_winner_or_the_holder_does_not_count() {
    // Process 2 fails while process 1's winning acquire is under way; process 3's attempt
    // began before the release. Neither lies wholly inside the 2 s free stretch.
    let report = run(r#"
        0     0 invoke acquire k
        1     0 ok     acquire k {"lease_ms":5000}
        1.5   3 invoke acquire k
        2     0 invoke release k
        3     0 ok     release k
        4     3 fail   acquire k
        2000  1 invoke acquire k
        2001  2 invoke acquire k
        2002  2 fail   acquire k
        2003  1 ok     acquire k {"lease_ms":5000}
    "#);
    assert_valid(&report);
    // The same stretch with one attempt wholly inside it is unavailable.
    let report = run(r#"
        0     0 invoke acquire k
        1     0 ok     acquire k {"lease_ms":5000}
        2     0 invoke release k
        3     0 ok     release k
        500   2 invoke acquire k
        501   2 fail   acquire k
        2000  1 invoke acquire k
        2003  1 ok     acquire k {"lease_ms":5000}
    "#);
    only(&report, "unavailable");
}

#[test]
fn an_optimistic_history_of_reads_and_conditional_writes_is_judged_by_its_counter() {
    // No lock at all (pg-version, watch-multi): the acknowledged writes were exercised.
    let good = r#"
        0    0 invoke read    k
        1    0 ok     read    k {"value":null}
        2    1 invoke read    k
        3    1 ok     read    k {"value":null}
        4    0 invoke write   k {"token":null,"value":1}
        5    0 ok     write   k
        6    1 invoke write   k {"token":null,"value":1}
        7    1 fail   write   k
        8    1 invoke read    k
        9    1 ok     read    k {"value":1}
        10   1 invoke write   k {"token":null,"value":2}
        11   1 ok     write   k
        12   2 invoke read    k
        13   2 ok     read    k {"value":2}
    "#;
    let report = run(good);
    assert_valid(&report);
    assert_eq!(report.valid, Some(true));
    // The conflicting write acknowledged instead: the same value twice, one update lost.
    let lost = run(&good.replace("7    1 fail   write   k", "7    1 ok     write   k"));
    assert_eq!(kinds_sorted(&lost), vec!["lost-update"]);
}

#[test]
fn a_history_in_which_no_acquire_took_effect_is_unknown_not_valid() {
    // Nobody ever held k: no ground for `unavailable`, and nothing was tested either.
    let report = run(r#"
        0     0 invoke acquire k
        5     0 info   acquire k
        100   1 invoke acquire k
        101   1 fail   acquire k
        3000  1 invoke acquire k
        3001  1 fail   acquire k
    "#);
    assert!(report.anomalies.is_empty(), "{:#?}", report.anomalies);
    assert_eq!(report.valid, None);
    assert_eq!(report.exit_code(), 3);
    assert!(report
        .unknown
        .as_deref()
        .unwrap()
        .contains("no acquire took effect"));
    let empty = check(
        &read_jsonl(&b""[..], "empty", None).expect("an empty history reads"),
        &CheckOptions::default(),
    );
    assert_eq!((empty.valid, empty.exit_code()), (None, 3));
}

#[test]
fn a_key_nobody_ever_acquired_is_not_judged_for_unavailability() {
    let report = run(r#"
        0     0 invoke acquire k
        1     0 ok     acquire k
        2     0 invoke release k
        3     0 ok     release k
        10    1 invoke acquire other
        11    1 info   acquire other
        100   2 invoke acquire other
        101   2 fail   acquire other
        3000  2 invoke acquire other
        3001  2 fail   acquire other
    "#);
    assert_valid(&report);
}

#[test]
fn an_indeterminate_acquire_does_not_hide_a_later_deadlock() {
    // The issue's minimal case: one `info` acquire on a lock that never expires, then a
    // holder with no lease killed, then failures for 6 s. Before, the info acquire blocked
    // the key for good and the deadlock passed as valid.
    let mut text = String::from(
        r#"
        0     0 invoke acquire k
        5     0 info   acquire k
        10    1 invoke acquire k
        11    1 ok     acquire k
        20    nemesis info kill - {"targets":["worker-1"],"processes":[1]}
    "#,
    );
    for i in 0..12 {
        let t = 100 + i * 500;
        text.push_str(&format!(
            "{t} 2 invoke acquire k
{} 2 fail acquire k
",
            t + 1
        ));
    }
    let report = run(&text);
    let stuck = only(&report, "unavailable");
    assert_eq!(stuck.start, 20_000_000, "free from the kill: {stuck:?}");
    assert!(
        stuck.explanation.contains("was killed at 0.020s (event 4)"),
        "{}",
        stuck.explanation
    );
    assert!(
        stuck.explanation.contains("deadlock"),
        "{}",
        stuck.explanation
    );
}

#[test]
fn an_indeterminate_acquire_on_a_lock_that_never_expires_frees_the_key_at_once() {
    // If it took the lock, its retired process can never release it: from its completion
    // on, a refused acquire is waiting on a deadlock of the lock itself.
    let report = run(r#"
        0     0 invoke acquire k
        1     0 ok     acquire k
        10    0 invoke release k
        11    0 ok     release k
        20    1 invoke acquire k
        30    1 info   acquire k
        100   2 invoke acquire k
        101   2 fail   acquire k
        1500  2 invoke acquire k
        1501  2 fail   acquire k
    "#);
    let stuck = only(&report, "unavailable");
    assert_eq!(stuck.start, 30_000_000);
    assert!(
        stuck.explanation.contains("never expires"),
        "{}",
        stuck.explanation
    );
    assert!(
        stuck.explanation.contains("until the end of the history"),
        "{}",
        stuck.explanation
    );
}

/// An acquire given up on while a server was paused; `FAULT` is what was paused.
const LATE_REQUEST: &str = r#"
    0     0 invoke acquire k
    1     0 ok     acquire k {"lease_ms":1000}
    10    0 invoke release k
    11    0 ok     release k
    20    nemesis info pause - {"targets":["FAULT"]}
    30    1 invoke acquire k
    500   1 info   acquire k
    1600  2 invoke acquire k
    1601  2 fail   acquire k
    2300  nemesis info resume - {"targets":["FAULT"]}
    3200  2 invoke acquire k
    3201  2 fail   acquire k
    3350  2 invoke acquire k
    3351  2 ok     acquire k {"lease_ms":1000}
"#;

#[test]
fn a_request_held_by_a_paused_server_may_take_effect_at_the_heal() {
    // The server resumed at 2.3 s and ran the SET then: the key is taken until 3.3 s.
    let report = run(&LATE_REQUEST.replace("FAULT", "redis-0"));
    assert_valid(&report);
    // A paused client is no server fault: its request was not held anywhere, so the key
    // counts as free from 0.5 s + 1 s, and the failures until 3.35 s are unavailability.
    let report = run(&LATE_REQUEST.replace("FAULT", "worker-1"));
    let stuck = only(&report, "unavailable");
    assert_eq!(stuck.start, 1_500_000_000);
    assert!(
        stuck.explanation.contains("longest lease seen"),
        "{}",
        stuck.explanation
    );
}

#[test]
fn an_indeterminate_acquire_counts_the_lease_from_its_completion() {
    // Invoked at 0.02 s, given up at 0.9 s: with a 1 s lease it may hold the key to 1.9 s.
    // Counting from the invoke would free it at 1.02 s and call the wait to 2.1 s a 1.08 s
    // stretch of unavailability.
    let report = run(r#"
        0     0 invoke acquire k
        1     0 ok     acquire k {"lease_ms":1000}
        10    0 invoke release k
        11    0 ok     release k
        20    1 invoke acquire k
        900   1 info   acquire k
        1100  2 invoke acquire k
        1101  2 fail   acquire k
        1800  2 invoke acquire k
        1801  2 fail   acquire k
        2100  2 invoke acquire k
        2101  2 ok     acquire k {"lease_ms":1000}
    "#);
    assert_valid(&report);
}

#[test]
fn a_renew_with_a_shorter_lease_shortens_it() {
    // The renew at 0.1 s leaves 200 ms: the killed holder's lock is free from 0.3 s.
    let report = run(r#"
        0     0 invoke acquire k
        1     0 ok     acquire k {"lease_ms":5000}
        100   0 invoke renew   k
        101   0 ok     renew   k {"lease_ms":200}
        150   nemesis info kill - {"targets":["worker-0"],"processes":[0]}
        400   1 invoke acquire k
        401   1 fail   acquire k
        1400  1 invoke acquire k
        1401  1 fail   acquire k
        1500  1 invoke acquire k
        1501  1 ok     acquire k {"lease_ms":5000}
    "#);
    let stuck = only(&report, "unavailable");
    assert_eq!(stuck.start, 300_000_000);
    // The lease end counts from the renew (event 2), not the acquire: both are cited.
    assert!(
        stuck.explanation.contains(
            "lease of process 0 (acquired at event 1, the lease last set by the request invoked at event 2) ran out at 0.300s"
        ),
        "{}",
        stuck.explanation
    );
    assert!(
        [1, 2, 4].iter().all(|i| stuck.indices.contains(i)),
        "{stuck:?}"
    );
    assert!(
        stuck.explanation.contains("killed (event 4)"),
        "{}",
        stuck.explanation
    );
}

/// Issue 26, part 1: the acquire promised no lease; the renew at 0.3 s gives it one of
/// 100 ms, to 0.4 s. `RELEASE_MS`: when the release that then fails is invoked.
const RENEWED_LEASELESS: &str = r#"
    0     0 invoke acquire k
    1     0 ok     acquire k {"token":null,"lease_ms":null}
    300   0 invoke renew   k
    301   0 ok     renew   k {"lease_ms":100}
    RELEASE_MS 0 invoke release k
    RELEASE_DONE 0 fail   release k
"#;

fn renewed_leaseless(release_ms: u32) -> String {
    RENEWED_LEASELESS
        .replace("RELEASE_MS", &release_ms.to_string())
        .replace("RELEASE_DONE", &(release_ms + 1).to_string())
}

#[test]
fn a_renew_gives_a_lease_to_a_hold_that_had_none() {
    // The release fails at 1.101 s, after the renewed lease ran out at 0.4 s: expected.
    let report = run(&renewed_leaseless(1100));
    assert_valid(&report);
    assert_eq!(key_stats(&report).expected_losses, 1);
    assert_eq!(key_stats(&report).holds_outliving_lease, 1);
}

#[test]
fn a_release_failing_inside_a_lease_a_renew_gave_a_leaseless_hold_is_a_lost_lock() {
    // Failed at 0.351 s, with 49 ms of the renewed lease still to run.
    let report = run(&renewed_leaseless(350));
    let lost = only(&report, "lost-lock");
    assert!(lost.indices.contains(&5), "{lost:?}");
    assert!(
        lost.explanation.contains("until 0.400s"),
        "{}",
        lost.explanation
    );
}

/// A holder with no lease renews (a library's `renewed` notice: 1.2 s from 0.3 s, to 1.5 s)
/// and is killed at 0.4 s; process 1 keeps trying.
const KILLED_AFTER_RENEW: &str = r#"
    0     0 invoke acquire k
    1     0 ok     acquire k {"lease_ms":null}
    300   0 invoke renew   k
    301   0 ok     renew   k {"lease_ms":1200}
    400   nemesis info kill - {"targets":["worker-0"],"processes":[0]}
    450   1 invoke acquire k
    451   1 fail   acquire k
    1450  1 invoke acquire k
    1451  1 fail   acquire k
    NEXT  1 invoke acquire k
    NEXT1 1 ok     acquire k {"lease_ms":1000}
"#;

fn killed_after_renew(next_ms: u32) -> String {
    KILLED_AFTER_RENEW
        .replace("NEXT1", &(next_ms + 1).to_string())
        .replace("NEXT", &next_ms.to_string())
}

#[test]
fn a_killed_holder_whose_only_lease_came_from_a_renew_frees_the_key_when_it_runs_out() {
    // Free from 1.5 s, not from the death at 0.4 s: the failures until 1.451 s are excused.
    assert_valid(&run(&killed_after_renew(1600)));
    // Failing on past the renewed lease end is unavailability, counted from that end.
    let mut text = killed_after_renew(3000);
    text = text.replace(
        "    3000  1 invoke",
        "    2600  1 invoke acquire k\n    2601  1 fail   acquire k\n    3000  1 invoke",
    );
    let report = run(&text);
    let stuck = only(&report, "unavailable");
    assert_eq!(stuck.start, 1_500_000_000);
    assert!(
        stuck
            .explanation
            .contains("the lease last set by the request invoked at event 2"),
        "{}",
        stuck.explanation
    );
}

#[test]
fn a_nested_acquire_with_no_lease_makes_the_lock_never_expire() {
    // The 200 ms lease is set to none by the nested acquire at 0.05 s: the release failing
    // at 1.001 s is inside the hold's (endless) promise, a lost lock.
    let report = run(r#"
        0     0 invoke acquire k
        1     0 ok     acquire k {"lease_ms":200}
        50    0 invoke acquire k
        51    0 ok     acquire k {"lease_ms":null}
        500   0 invoke release k
        501   0 ok     release k
        1000  0 invoke release k
        1001  0 fail   release k
    "#);
    let lost = only(&report, "lost-lock");
    assert!(lost.indices.contains(&7), "{lost:?}");
    assert!(
        lost.explanation.contains("it had no lease"),
        "{}",
        lost.explanation
    );
    // An overlap after the first lease's end is inside the hold's promise: the lock failed.
    let report = run(r#"
        0     0 invoke acquire k
        1     0 ok     acquire k {"lease_ms":200}
        50    0 invoke acquire k
        51    0 ok     acquire k {"lease_ms":null}
        700   1 invoke acquire k
        701   1 ok     acquire k {"lease_ms":200}
    "#);
    assert_eq!(only(&report, "overlap").lease_expired, Some(false));
}

#[test]
fn a_nested_acquire_with_a_shorter_lease_shortens_it() {
    // The nested acquire at 0.1 s leaves 200 ms of the 5 s lease: the release failing at
    // 0.501 s comes after the lease ran out at 0.3 s, an expected loss.
    let report = run(r#"
        0     0 invoke acquire k
        1     0 ok     acquire k {"lease_ms":5000}
        100   0 invoke acquire k
        101   0 ok     acquire k {"lease_ms":200}
        500   0 invoke release k
        501   0 fail   release k
    "#);
    assert_valid(&report);
    assert_eq!(key_stats(&report).expected_losses, 1);
    // And a killed holder's key is free from then (as for a renew, above).
    let report = run(r#"
        0     0 invoke acquire k
        1     0 ok     acquire k {"lease_ms":5000}
        100   0 invoke acquire k
        101   0 ok     acquire k {"lease_ms":200}
        150   nemesis info kill - {"targets":["worker-0"],"processes":[0]}
        400   1 invoke acquire k
        401   1 fail   acquire k
        1400  1 invoke acquire k
        1401  1 fail   acquire k
        1500  1 invoke acquire k
        1501  1 ok     acquire k {"lease_ms":5000}
    "#);
    assert_eq!(only(&report, "unavailable").start, 300_000_000);
}

/// An indeterminate acquire on a leased key, and a nemesis event `EVENT` at 0.02 s.
const NEMESIS_AROUND_INFO_ACQUIRE: &str = r#"
    0     0 invoke acquire k
    1     0 ok     acquire k {"lease_ms":1000}
    10    0 invoke release k
    11    0 ok     release k
    20    nemesis EVENT
    30    1 invoke acquire k
    500   1 info   acquire k
    600   nemesis HEAL
    1600  2 invoke acquire k
    1601  2 fail   acquire k
    3200  2 invoke acquire k
    3201  2 fail   acquire k
    3350  2 invoke acquire k
    3351  2 ok     acquire k {"lease_ms":1000}
"#;

fn nemesis_around_info_acquire(event: &str, heal: &str) -> String {
    NEMESIS_AROUND_INFO_ACQUIRE
        .replace("EVENT", event)
        .replace("HEAL", heal)
}

#[test]
fn a_nemesis_event_naming_no_target_and_no_process_acts_on_nothing() {
    let nothing = r#"{"targets":[],"processes":[]}"#;
    // A partition of nothing holds no request back: free from 0.5 s + 1 s.
    let report = run(&nemesis_around_info_acquire(
        &format!("info partition - {nothing}"),
        &format!("info clock - {nothing}"),
    ));
    assert_eq!(only(&report, "unavailable").start, 1_500_000_000);
    // A heal of nothing heals nothing: the cut link holds the request to the end.
    let report = run(&nemesis_around_info_acquire(
        r#"info partition - {"targets":["redis-0"],"processes":[]}"#,
        &format!("info heal - {nothing}"),
    ));
    assert_valid(&report);
    // The same heal naming the link frees the key 1 s after it.
    let report = run(&nemesis_around_info_acquire(
        r#"info partition - {"targets":["redis-0"],"processes":[]}"#,
        r#"info heal - {"targets":["redis-0"],"processes":[]}"#,
    ));
    assert_eq!(only(&report, "unavailable").start, 1_600_000_000);
}

#[test]
fn spans_near_the_ends_of_time_do_not_wrap() {
    let min = i64::MIN;
    let max = i64::MAX;
    let lines = [
        (min, 0, "invoke", "acquire"),
        (min + 10, 0, "ok", "acquire"),
        (min + 20, 0, "invoke", "release"),
        (min + 30, 0, "ok", "release"),
        (min + 40, 1, "invoke", "acquire"),
        (min + 50, 1, "fail", "acquire"),
        (max - 50, 1, "invoke", "acquire"),
        (max - 40, 1, "fail", "acquire"),
        (max - 30, 2, "invoke", "acquire"),
        (max, 2, "ok", "acquire"),
        (max, 2, "invoke", "release"),
        (max, 3, "invoke", "acquire"),
    ];
    let mut text = String::new();
    for (index, (time, process, ty, f)) in lines.iter().enumerate() {
        let value = if *ty == "ok" && *f == "acquire" {
            format!(r#","value":{{"token":{}}}"#, 1 + process)
        } else {
            String::new()
        };
        text.push_str(&format!(
            r#"{{"index":{index},"time":{time},"process":{process},"type":"{ty}","f":"{f}","key":"k"{value}}}"#
        ));
        text.push('\n');
    }
    let history = read_jsonl(text.as_bytes(), "test", None).expect("a valid history");
    let report = check(&history, &CheckOptions::default());
    // Free from min + 30 to the acquire invoked at max - 30: the whole of time.
    let stuck = only(&report, "unavailable");
    assert_eq!((stuck.start, stuck.end), (min + 30, max - 30));
    assert!(report.stats.per_key["k"].longest_free_ms > 9e12);
}

#[test]
fn a_long_free_stretch_nobody_tried_is_not_unavailable() {
    let report = run(r#"
        0     0 invoke acquire k
        1     0 ok     acquire k
        10    0 invoke release k
        11    0 ok     release k
        5000  1 invoke acquire k
        5001  1 ok     acquire k
    "#);
    assert_valid(&report);
}

#[test]
fn an_indeterminate_acquire_blocks_for_the_longest_lease_seen() {
    let report = run(r#"
        0     0 invoke acquire k
        1     0 ok     acquire k {"lease_ms":2000}
        10    0 invoke release k
        11    0 ok     release k
        20    1 invoke acquire k
        30    1 info   acquire k
        40    2 invoke acquire k
        41    2 fail   acquire k
        1900  2 invoke acquire k
        1901  2 fail   acquire k
        2100  2 invoke acquire k
        2101  2 ok     acquire k {"lease_ms":2000}
    "#);
    assert_valid(&report);
}

const STARVING: &str = r#"
    0      0 invoke acquire k
    1      0 ok     acquire k {"lease_ms":1000}
    2      1 invoke acquire k
    500    0 invoke release k
    501    0 ok     release k
    502    2 invoke acquire k
    503    2 ok     acquire k {"lease_ms":1000}
    6000   1 fail   acquire k
    6001   1 invoke acquire k
    11000  1 fail   acquire k
    11001  1 invoke acquire k
    12000  1 FINAL  acquire k
"#;

#[test]
fn a_process_failing_for_longer_than_the_bound_while_others_acquire_starves() {
    let report = run(&STARVING.replace("FINAL", "fail"));
    let starving = report
        .anomalies
        .iter()
        .find(|a| a.kind == AnomalyKind::Starvation)
        .unwrap();
    assert_eq!(starving.processes, vec![1, 2]);
    assert!(starving.indices.contains(&2), "{starving:?}");
}

#[test]
fn no_starvation_when_nobody_else_got_the_lock_or_within_the_bound() {
    let alone = STARVING.replace(
        "502    2 invoke acquire k\n    503    2 ok     acquire k {\"lease_ms\":1000}\n",
        "",
    );
    let report = run(&alone.replace("FINAL", "fail"));
    assert!(
        report
            .anomalies
            .iter()
            .all(|a| a.kind != AnomalyKind::Starvation),
        "{:#?}",
        report.anomalies
    );
    let patient = CheckOptions {
        starvation_bound_ns: 20_000_000_000,
        ..CheckOptions::default()
    };
    let report = run_with(&STARVING.replace("FINAL", "fail"), &patient);
    assert!(report
        .anomalies
        .iter()
        .all(|a| a.kind != AnomalyKind::Starvation));
}

#[test]
fn getting_another_lock_breaks_a_run_of_failures() {
    // Process 1 fails on k for 6 s, takes and releases j, then fails on k for 5 s more: it
    // was making progress, so neither run reaches the 10 s bound.
    let progressing = r#"
    0      0 invoke acquire k
    1      0 ok     acquire k {"lease_ms":1000}
    2      1 invoke acquire k
    500    0 invoke release k
    501    0 ok     release k
    502    2 invoke acquire k
    503    2 ok     acquire k {"lease_ms":1000}
    6000   1 fail   acquire k
    6001   1 invoke acquire j
    6002   1 ok     acquire j {"lease_ms":1000}
    6003   1 invoke release j
    6004   1 ok     release j
    7000   1 invoke acquire k
    11000  1 fail   acquire k
    11001  1 invoke acquire k
    12000  1 fail   acquire k
"#;
    let report = run(progressing);
    assert!(
        report
            .anomalies
            .iter()
            .all(|a| a.kind != AnomalyKind::Starvation),
        "{:#?}",
        report.anomalies
    );
    // The same failures with the acquisition of j failing too: a run of 12 s, starvation.
    let stuck = progressing.replace("6002   1 ok     acquire j {\"lease_ms\":1000}\n    6003   1 invoke release j\n    6004   1 ok     release j\n", "6002   1 fail   acquire j\n");
    assert_ne!(stuck, progressing);
    let report = run(&stuck);
    assert!(report
        .anomalies
        .iter()
        .any(|a| a.kind == AnomalyKind::Starvation));
}

#[test]
fn getting_another_lock_in_the_nanosecond_of_the_next_attempt_breaks_the_run() {
    // Process 1 fails on k, then at 6000 ms its acquire of j returns ok and, in that same
    // nanosecond, it tries k again (and keeps failing until 12 s). Its own events put the
    // acquisition between the two attempts: it was making progress, no starvation.
    let text = r#"
    0      0 invoke acquire k
    1      0 ok     acquire k {"lease_ms":1000}
    2      1 invoke acquire k
    500    0 invoke release k
    501    0 ok     release k
    502    2 invoke acquire k
    503    2 ok     acquire k {"lease_ms":1000}
    5000   1 fail   acquire k
    5999   1 invoke acquire j
    6000   1 ok     acquire j {"lease_ms":100000}
    6000   1 invoke acquire k
    11000  1 fail   acquire k
    11001  1 invoke acquire k
    12000  1 fail   acquire k
"#;
    let report = run(text);
    assert!(
        report
            .anomalies
            .iter()
            .all(|a| a.kind != AnomalyKind::Starvation),
        "{:#?}",
        report.anomalies
    );
}

#[test]
fn a_nested_acquire_that_ended_info_blocks_like_any_info_acquire() {
    // Process 1 holds k (lease 50 ms) and is killed while its nested acquire is under way.
    // That acquire ended `info`: it may have taken effect as late as its completion, so the
    // key is free only from 220 ms + the longest lease seen on k (1 s), not when process 1's
    // own lease would have run out. Process 2's failed attempts at 1.5 s then lie in a free
    // stretch of 380 ms, under the 1 s bound.
    let report = run(r#"
        0      0 invoke acquire k
        1      0 ok     acquire k {"lease_ms":1000}
        100    0 invoke release k
        101    0 ok     release k
        200    1 invoke acquire k
        200    1 ok     acquire k {"lease_ms":50}
        210    1 invoke acquire k
        220    1 info   acquire k
        220    nemesis info kill - {"targets":["worker-1"],"processes":[1]}
        1500   2 invoke acquire k
        1600   2 fail   acquire k
    "#);
    assert_valid(&report);
}

// ---------------------------------------------------------------- lost-update

fn counter_history(second_read: i64, final_read: i64) -> String {
    format!(
        r#"
        0    0 invoke acquire k
        1    0 ok     acquire k
        2    0 invoke read    k
        3    0 ok     read    k {{"value":null}}
        4    0 invoke write   k {{"token":null,"value":1}}
        5    0 ok     write   k
        6    0 invoke release k
        7    0 ok     release k
        8    1 invoke acquire k
        9    1 ok     acquire k
        10   1 invoke read    k
        11   1 ok     read    k {{"value":{second_read}}}
        12   1 invoke write   k {{"token":null,"value":{}}}
        13   1 ok     write   k
        14   1 invoke release k
        15   1 ok     release k
        16   2 invoke read    k
        17   2 ok     read    k {{"value":{final_read}}}
    "#,
        second_read + 1
    )
}

#[test]
fn increments_under_a_correct_lock_lose_nothing() {
    assert_valid(&run(&counter_history(1, 2)));
}

#[test]
fn two_increments_from_the_same_count_are_a_lost_update() {
    let report = run(&counter_history(0, 1));
    let lost = only(&report, "lost-update");
    assert!(
        lost.indices.contains(&5) && lost.indices.contains(&13),
        "{lost:?}"
    );
    assert!(lost.indices.contains(&17));
}

#[test]
fn a_final_read_below_the_acknowledged_increments_is_a_lost_update() {
    let report = run(&counter_history(1, 1));
    let lost = only(&report, "lost-update");
    assert!(lost.explanation.contains("1 lost"), "{}", lost.explanation);
}

/// Issue 26, part 3: two clients read 0 and their writes of 1 end `info`; process 2 reads
/// 1 (one landed) and writes 2, acknowledged; the final read finds `FINAL`.
const LATE_WRITES: &str = r#"
    0    0 invoke read  k
    1    0 ok     read  k {"value":null}
    2    1 invoke read  k
    3    1 ok     read  k {"value":null}
    4    0 invoke write k {"token":null,"value":1}
    5    1 invoke write k {"token":null,"value":1}
    100  0 info   write k
    101  1 info   write k
    200  2 invoke read  k
    201  2 ok     read  k {"value":1}
    202  2 invoke write k {"token":null,"value":2}
    203  2 ok     write k
    300  3 invoke read  k
    301  3 ok     read  k {"value":FINAL}
"#;

#[test]
fn an_acknowledged_increment_overwritten_by_a_late_write_is_a_lost_update() {
    // 1 >= 0 + 1 acknowledged write, so the count says nothing; but the acknowledged 2 is
    // gone: the other write of 1 landed after it.
    let report = run(&LATE_WRITES.replace("FINAL", "1"));
    let lost = only(&report, "lost-update");
    // The overwritten write's ok and the final read.
    assert!(lost.indices.contains(&11), "{lost:?}");
    assert!(lost.indices.contains(&13), "{lost:?}");
    assert_eq!(lost.processes, vec![2]);
    assert!(
        lost.explanation
            .contains("below the 2 that process 2's acknowledged increment wrote"),
        "{}",
        lost.explanation
    );
}

#[test]
fn a_counter_whose_indeterminate_writes_did_not_land_is_valid() {
    // The final read is the acknowledged 2: neither late write of 1 overwrote it.
    assert_valid(&run(&LATE_WRITES.replace("FINAL", "2")));
}

#[test]
fn values_that_are_not_a_counter_are_skipped_not_guessed() {
    let text = counter_history(0, 1).replace(r#"{"value":null}"#, r#"{"value":"x"}"#);
    let report = run(&text);
    assert_valid(&report);
    assert_eq!(report.checks["register"].figures["keys_skipped"], 1);
}

/// Process 0 reads k, then another key, then writes k: its write still counts from its
/// last read of k. `first_write` is the value process 0 writes.
fn counter_read_between(first_write: i64) -> String {
    format!(
        r#"
        0    0 invoke read    k
        1    0 ok     read    k {{"value":3}}
        2    0 invoke read    j
        3    0 ok     read    j {{"value":7}}
        4    0 invoke write   k {{"token":null,"value":{first_write}}}
        5    0 ok     write   k
        6    1 invoke read    k
        7    1 ok     read    k {{"value":3}}
        8    1 invoke write   k {{"token":null,"value":4}}
        9    1 ok     write   k
        10   2 invoke read    k
        11   2 ok     read    k {{"value":4}}
    "#
    )
}

#[test]
fn a_write_counts_from_its_process_last_read_of_that_key_not_of_any_key() {
    let report = run(&counter_read_between(4));
    let lost = only(&report, "lost-update");
    assert_eq!(lost.key, "k");
    assert!(
        lost.indices.contains(&5) && lost.indices.contains(&9),
        "{lost:?}"
    );
    assert_eq!(report.checks["register"].figures["counters_checked"], 1);
}

#[test]
fn a_write_that_is_not_its_last_read_of_the_key_plus_one_is_skipped() {
    // i64::MIN is an increment of nothing (and no overflow).
    for written in [8, i64::MIN] {
        let report = run(&counter_read_between(written));
        assert_valid(&report);
        assert_eq!(report.checks["register"].figures["keys_skipped"], 1);
        assert_eq!(report.checks["register"].figures["counters_checked"], 0);
    }
}

// ---------------------------------------------------------------------------------------
// Shared mode: readers may share, a writer excludes everyone.

#[test]
fn two_shared_holds_may_overlap_but_a_writer_may_not_join_them() {
    let text = r#"
        0    0 invoke acquire k {"mode":"shared"}
        1    0 ok     acquire k
        2    1 invoke acquire k {"mode":"MODE"}
        3    1 ok     acquire k
        10   0 invoke release k
        11   0 ok     release k
        12   1 invoke release k
        13   1 ok     release k
    "#;
    assert_valid(&run(&text.replace("MODE", "shared")));
    let report = run(&text.replace("MODE", "exclusive"));
    assert_eq!(only(&report, "overlap").indices, vec![1, 3, 4, 6]);
    // A writer first and a reader after it: the same overlap.
    let writer_first = text
        .replacen(r#"{"mode":"shared"}"#, "", 1)
        .replace("MODE", "shared");
    only(&run(&writer_first), "overlap");
}

#[test]
fn a_nested_exclusive_acquire_makes_a_shared_hold_exclusive() {
    let report = run(r#"
        0    0 invoke acquire k {"mode":"shared"}
        1    0 ok     acquire k
        2    0 invoke acquire k
        3    0 ok     acquire k
        4    1 invoke acquire k {"mode":"shared"}
        5    1 ok     acquire k
        10   0 invoke release k
        11   0 ok     release k
        12   0 invoke release k
        13   0 ok     release k
        14   1 invoke release k
        15   1 ok     release k
    "#);
    only(&report, "overlap");
}

// ---------------------------------------------------------------------------------------
// Fairness: on a fair lock, a later acquire must not get the lock before an earlier one.

const QUEUE_JUMP: &str = r#"
    0    0 invoke acquire k {"fair":true}
    GAP  1 invoke acquire k {"fair":true}
    30   1 ok     acquire k
    31   1 invoke release k
    32   1 ok     release k
    33   0 END    acquire k
    40   0 invoke release k
    41   0 ok     release k
"#;

fn queue_jump(gap_ms: &str, end: &str) -> String {
    QUEUE_JUMP.replace("GAP", gap_ms).replace("END", end)
}

#[test]
fn a_later_acquire_granted_before_an_earlier_one_on_a_fair_lock_is_unfair() {
    let report = run(&queue_jump("15", "ok"));
    let unfair = only(&report, "unfair");
    assert_eq!(unfair.indices, vec![0, 1, 2, 5]);
    assert_eq!(unfair.processes, vec![0, 1]);
    assert!(
        unfair.explanation.contains("overtaken"),
        "{}",
        unfair.explanation
    );
    assert_eq!(report.checks["fairness"].counts[&AnomalyKind::Unfair], 1);
    assert!(!report.checks["fairness"].valid);
}

#[test]
fn unfair_needs_more_than_the_tolerance_a_fair_mark_and_an_overtaken_grant() {
    // Within the tolerance (10 ms, inclusive): the order of arrival is not known.
    assert_valid(&run(&queue_jump("10", "ok")));
    only(&run(&queue_jump("10.001", "ok")), "unfair");
    // The earlier acquire did not get the lock after all: nobody was overtaken.
    let failed = queue_jump("15", "fail").replace(
        "    40   0 invoke release k\n    41   0 ok     release k\n",
        "",
    );
    assert!(of_kind(&run(&failed), "unfair").is_empty());
    // Not marked fair: no promise of order.
    assert_valid(&run(&queue_jump("15", "ok").replace(r#"{"fair":true}"#, "")));
    // A wider tolerance, from the options.
    let lenient = CheckOptions {
        fairness_tolerance_ns: 20_000_000,
        ..CheckOptions::default()
    };
    assert_valid(&run_with(&queue_jump("15", "ok"), &lenient));
}

#[test]
fn granted_at_the_same_instant_is_not_overtaking() {
    let report = run(r#"
        0    0 invoke acquire k {"fair":true,"mode":"shared"}
        20   1 invoke acquire k {"fair":true,"mode":"shared"}
        30   1 ok     acquire k
        30   0 ok     acquire k
        40   0 invoke release k
        41   0 ok     release k
        42   1 invoke release k
        43   1 ok     release k
    "#);
    assert_valid(&report);
}

#[test]
fn a_reentrant_acquire_by_the_holder_does_not_queue() {
    // Process 1 holds the fair lock and takes it again while process 0 waits: no jump.
    let report = run(r#"
        0    1 invoke acquire k {"fair":true}
        1    1 ok     acquire k
        5    0 invoke acquire k {"fair":true}
        20   1 invoke acquire k {"fair":true}
        21   1 ok     acquire k
        22   1 invoke release k
        23   1 ok     release k
        24   1 invoke release k
        25   1 ok     release k
        26   0 ok     acquire k
        30   0 invoke release k
        31   0 ok     release k
    "#);
    assert_valid(&report);
}

#[test]
fn one_unfair_per_grant_naming_the_acquire_that_waited_longest() {
    let report = run(r#"
        0    0 invoke acquire k {"fair":true}
        5    1 invoke acquire k {"fair":true}
        30   2 invoke acquire k {"fair":true}
        31   2 ok     acquire k
        32   2 invoke release k
        33   2 ok     release k
        34   0 ok     acquire k
        35   0 invoke release k
        36   0 ok     release k
        37   1 ok     acquire k
        38   1 invoke release k
        39   1 ok     release k
    "#);
    let unfair = of_kind(&report, "unfair");
    // Process 2 overtook 0 and 1 (counted once, naming 0); then 0 overtook nobody, and
    // 1, invoked 5 ms after 0 (within the tolerance), was not overtaken by 0.
    assert_eq!(unfair.len(), 1, "{unfair:#?}");
    assert_eq!(unfair[0].processes, vec![0, 2]);
    assert_eq!(unfair[0].indices, vec![0, 2, 3, 6]);
}

// ---------------------------------------------------------------------------------------
// Queue jumps and per-mode waits (KeyStats): every acquire, fair-marked or not.

fn key_stats(report: &Report) -> &crate::report::KeyStats {
    &report.stats.per_key["k"]
}

#[test]
fn a_later_acquire_overtaking_an_earlier_waiter_on_an_unfair_lock_is_a_queue_jump() {
    let report = run(&queue_jump("15", "ok").replace(r#" {"fair":true}"#, ""));
    // No promise of order, so no anomaly; but the figure counts it.
    assert_valid(&report);
    assert_eq!(key_stats(&report).queue_jumps, 1);
    assert_eq!(key_stats(&report).queue_jumps_fair, None);
}

#[test]
fn on_a_fair_lock_the_fair_queue_jumps_are_the_unfair_ones() {
    let report = run(&queue_jump("15", "ok"));
    assert_eq!(report.count(AnomalyKind::Unfair), 1);
    assert_eq!(key_stats(&report).queue_jumps, 1);
    assert_eq!(key_stats(&report).queue_jumps_fair, Some(1));
    // A fair lock kept in order: counted, and zero.
    let fifo = run(r#"
        0    0 invoke acquire k {"fair":true}
        15   1 invoke acquire k {"fair":true}
        20   0 ok     acquire k
        21   0 invoke release k
        22   0 ok     release k
        23   1 ok     acquire k
        24   1 invoke release k
        25   1 ok     release k
    "#);
    assert_valid(&fifo);
    assert_eq!(key_stats(&fifo).queue_jumps, 0);
    assert_eq!(key_stats(&fifo).queue_jumps_fair, Some(0));
}

#[test]
fn no_queue_jump_without_an_overtaken_waiter_that_got_the_lock_later() {
    let unmarked = |text: String| text.replace(r#" {"fair":true}"#, "");
    let jumps = |text: &str| key_stats(&run(text)).queue_jumps;
    // Within the tolerance (10 ms, inclusive).
    assert_eq!(jumps(&unmarked(queue_jump("10", "ok"))), 0);
    // The earlier waiter's acquire failed, or ended without an answer, and it never got
    // the lock: it was not overtaken (an `info` acquire is no wait that ends).
    let gave_up = |end: &str| {
        unmarked(queue_jump("15", end)).replace(
            "    40   0 invoke release k\n    41   0 ok     release k\n",
            "",
        )
    };
    assert_eq!(jumps(&gave_up("fail")), 0);
    assert_eq!(jumps(&gave_up("info")), 0);
    // First come, first served; and a wait that begins as the previous one ends.
    let fifo = r#"
        0    0 invoke acquire k
        15   1 invoke acquire k
        20   0 ok     acquire k
        30   2 invoke acquire k
        31   0 invoke release k
        32   0 ok     release k
        33   1 ok     acquire k
        34   1 invoke release k
        35   1 ok     release k
        35   2 ok     acquire k
        35   3 invoke acquire k
        36   2 invoke release k
        37   2 ok     release k
        38   3 ok     acquire k
        39   3 invoke release k
        40   3 ok     release k
    "#;
    assert_valid(&run(fifo));
    assert_eq!(jumps(fifo), 0);
    // Two readers granted at the same instant: neither overtook the other.
    let together = r#"
        0    0 invoke acquire k {"mode":"shared"}
        20   1 invoke acquire k {"mode":"shared"}
        30   1 ok     acquire k
        30   0 ok     acquire k
        40   0 invoke release k
        41   0 ok     release k
        42   1 invoke release k
        43   1 ok     release k
    "#;
    assert_eq!(jumps(together), 0);
}

#[test]
fn a_run_of_failed_tries_is_one_wait_but_a_fair_retry_queues_anew() {
    // Process 0 tries from 0 ms, fails twice, and gets the lock at 41 ms; process 1 first
    // tried at 15 ms and got it at 25 ms: it overtook process 0's wait.
    let history = r#"
        0    0 invoke acquire k MARK
        1    0 fail   acquire k
        10   0 invoke acquire k MARK
        11   0 fail   acquire k
        15   1 invoke acquire k MARK
        25   1 ok     acquire k
        30   1 invoke release k
        31   1 ok     release k
        40   0 invoke acquire k MARK
        41   0 ok     acquire k
        42   0 invoke release k
        43   0 ok     release k
    "#;
    let unmarked = run(&history.replace("MARK", ""));
    assert_eq!(key_stats(&unmarked).queue_jumps, 1);
    assert_eq!(key_stats(&unmarked).wait_ms.max, 41.0);
    // Marked fair, the failed acquires left the lock's queue: process 0 queued anew at 40
    // ms, behind process 1. Its wait_ms still counts from its first try.
    let fair = run(&history.replace("MARK", r#"{"fair":true}"#));
    assert_valid(&fair);
    assert_eq!(key_stats(&fair).queue_jumps, 0);
    assert_eq!(key_stats(&fair).queue_jumps_fair, Some(0));
    assert_eq!(key_stats(&fair).wait_ms.max, 41.0);
}

#[test]
fn waits_are_split_by_mode() {
    let report = run(r#"
        0    0 invoke acquire k
        2    0 ok     acquire k
        5    1 invoke acquire k {"mode":"shared"}
        6    2 invoke acquire k {"mode":"shared"}
        10   0 invoke release k
        11   0 ok     release k
        12   1 ok     acquire k
        12.5 2 ok     acquire k
        15   3 invoke acquire k
        16   3 fail   acquire k
        18   3 invoke acquire k
        20   1 invoke release k
        20   2 invoke release k
        21   1 ok     release k
        21   2 ok     release k
        22   3 ok     acquire k
        25   3 invoke release k
        26   3 ok     release k
        30   0 invoke acquire k {"mode":"exclusive"}
        31   0 ok     acquire k
        32   0 invoke release k
        33   0 ok     release k
    "#);
    assert_valid(&report);
    let stats = key_stats(&report);
    let figures = |p: &crate::report::Percentiles| (p.count, p.p50, p.p90, p.p99, p.max);
    // Exclusive: 2, 7 (from the first try at 15 ms), 1; shared: 7, 6.5.
    assert_eq!(figures(&stats.wait_ms), (5, 6.5, 7.0, 7.0, 7.0));
    assert_eq!(
        figures(stats.wait_ms_by_mode.exclusive.as_ref().unwrap()),
        (3, 2.0, 7.0, 7.0, 7.0)
    );
    assert_eq!(
        figures(stats.wait_ms_by_mode.shared.as_ref().unwrap()),
        (2, 6.5, 7.0, 7.0, 7.0)
    );
    assert_eq!(stats.queue_jumps, 0);
    // Without shared acquires, one mode only.
    let plain = run(&queue_jump("15", "ok"));
    let modes: Vec<&str> = key_stats(&plain)
        .wait_ms_by_mode
        .iter()
        .map(|(mode, _)| mode)
        .collect();
    assert_eq!(modes, ["exclusive"]);
}

/// All-fair histories with grants in a random order, one hold after another: the fair queue
/// jumps are the `unfair` anomalies, and both match a count by every pair.
#[test]
fn fair_queue_jumps_equal_the_unfair_count_and_a_count_by_pairs() {
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut total = 0;
    for case in 0..200 {
        let n = 2 + next(9) as usize;
        let invokes: Vec<u64> = (0..n).map(|_| next(60)).collect();
        let mut order: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            order.swap(i, next(i as u64 + 1) as usize);
        }
        let mut text = String::new();
        for (p, t) in invokes.iter().enumerate() {
            text.push_str(&format!("{t} {p} invoke acquire k {{\"fair\":true}}\n"));
        }
        let mut granted = vec![0u64; n];
        for (slot, &p) in order.iter().enumerate() {
            let t = 100 + 3 * slot as u64;
            granted[p] = t;
            text.push_str(&format!(
                "{t} {p} ok acquire k\n{} {p} invoke release k\n{} {p} ok release k\n",
                t + 1,
                t + 2
            ));
        }
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_by_key(|l| l.split(' ').next().unwrap().parse::<u64>().unwrap());
        let report = run(&lines.join("\n"));
        let by_pairs = (0..n)
            .filter(|&b| (0..n).any(|a| invokes[b] > invokes[a] + 10 && granted[a] > granted[b]))
            .count() as u64;
        let stats = key_stats(&report);
        assert_eq!(report.count(AnomalyKind::Unfair), by_pairs, "case {case}");
        assert_eq!(stats.queue_jumps_fair, Some(by_pairs), "case {case}");
        assert_eq!(stats.queue_jumps, by_pairs, "case {case}");
        total += by_pairs;
    }
    assert!(total > 50, "too few jumps to test anything: {total}");
}
