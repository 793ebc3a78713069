//! Helpers shared by the integration tests that run `lockaudit` and read its run folder.
// Each test crate uses the helpers it needs.
#![allow(dead_code)]

use std::path::Path;
use std::process::Output;

use serde_json::Value;

/// The run folder's `report.json`.
pub fn report(out: &Path) -> Value {
    let text = std::fs::read_to_string(out.join("report.json")).expect("report.json");
    serde_json::from_str(&text).expect("report.json is JSON")
}

/// The anomaly kinds a report lists, sorted, each once.
pub fn kinds(report: &Value) -> Vec<String> {
    let mut kinds: Vec<String> = report["anomalies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["kind"].as_str().map(str::to_string))
        .collect();
    kinds.sort();
    kinds.dedup();
    kinds
}

/// The `value.ttl_ms` of every acquire invoke in the run's history (None where it has none).
pub fn acquire_ttls(out: &Path) -> Vec<Option<i64>> {
    let text = std::fs::read_to_string(out.join("history.jsonl")).expect("history.jsonl");
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["f"] == "acquire" && e["type"] == "invoke")
        .map(|e| e["value"]["ttl_ms"].as_i64())
        .collect()
}

/// Asserts that `output` exited with `code`, showing its stdout and stderr if not; returns
/// its stdout.
pub fn assert_exit(output: &Output, code: i32) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(
        output.status.code(),
        Some(code),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}
