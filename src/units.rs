//! Durations and times as people write and read them.

use std::time::Duration;

/// Parses a duration such as `"250ms"`, `"30s"`, `"1m 30s"` or `"1.5s"`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    // humantime takes no fractions; "1.5s" is common enough to accept.
    if let Some(seconds) = text.strip_suffix('s') {
        if let Ok(value) = seconds.trim().parse::<f64>() {
            if value.is_finite() && value >= 0.0 {
                return Ok(Duration::from_secs_f64(value));
            }
        }
    }
    humantime::parse_duration(text).map_err(|e| {
        format!("\"{text}\" is not a duration ({e}); write e.g. \"250ms\", \"30s\" or \"2m\"")
    })
}

/// Converts a duration to whole nanoseconds, saturating.
pub fn nanos(duration: Duration) -> i64 {
    i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX)
}

/// A time on the run's clock (ns since the start) for a sentence: `2.100s`.
pub fn fmt_time(ns: i64) -> String {
    format!("{:.3}s", ns as f64 / 1e9)
}

/// A span for a sentence: `450ms`, `2.10s`, `12µs`.
pub fn fmt_span(ns: i64) -> String {
    let abs = ns.unsigned_abs() as f64;
    let sign = if ns < 0 { "-" } else { "" };
    if abs >= 1e9 {
        format!("{sign}{:.2}s", abs / 1e9)
    } else if abs >= 1e6 {
        format!("{sign}{:.0}ms", abs / 1e6)
    } else if abs >= 1e3 {
        format!("{sign}{:.0}µs", abs / 1e3)
    } else {
        format!("{sign}{abs}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_durations_files_use() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("10us").unwrap(), Duration::from_micros(10));
        assert!(parse_duration("soon").unwrap_err().contains("\"soon\""));
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn formats_spans_for_people() {
        assert_eq!(fmt_span(2_100_000_000), "2.10s");
        assert_eq!(fmt_span(450_000_000), "450ms");
        assert_eq!(fmt_span(12_000), "12µs");
        assert_eq!(fmt_time(2_100_000_000), "2.100s");
    }
}
