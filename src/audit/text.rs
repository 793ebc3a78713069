//! Small text helpers the renderings share.

use std::time::Duration;

/// Line breaks folded to spaces.
pub(super) fn one_line(text: &str) -> String {
    text.split(['\n', '\r'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// "2.31s".
pub(super) fn seconds_text(seconds: f64) -> String {
    format!("{seconds:.2}s")
}

/// "12m 3s" (whole seconds; "0s" for less).
pub(super) fn duration_text(seconds: f64) -> String {
    let whole = if seconds.is_finite() && seconds > 0.0 {
        seconds.round() as u64
    } else {
        0
    };
    humantime::format_duration(Duration::from_secs(whole)).to_string()
}
