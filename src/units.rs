//! Durations and times as people write and read them.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

/// Text that is no duration, with humantime's reason and examples of what is.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("\"{text}\" is not a duration ({reason}); write e.g. \"250ms\", \"30s\" or \"2m\"")]
pub struct BadDuration {
    /// As given, trimmed.
    pub text: String,
    pub reason: humantime::DurationError,
}

/// Parses a duration such as `"250ms"`, `"30s"`, `"1m 30s"` or `"1.5s"`.
pub fn parse_duration(text: &str) -> Result<Duration, BadDuration> {
    let text = text.trim();
    // humantime takes no fractions; "1.5s" is common enough to accept.
    if let Some(seconds) = text.strip_suffix('s') {
        if let Ok(value) = seconds.trim().parse::<f64>() {
            if value.is_finite() && value >= 0.0 {
                return Ok(Duration::from_secs_f64(value));
            }
        }
    }
    humantime::parse_duration(text).map_err(|reason| BadDuration {
        text: text.to_string(),
        reason,
    })
}

/// A duration written as `"250ms"`, kept as milliseconds. It is written back as text
/// (`"2s"`, `"1500ms"`, [`fmt_millis`]) so that a run's workload.toml reads as its author
/// wrote it, and reads back to the same milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Millis(pub u64);

impl Serialize for Millis {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&fmt_millis(self.0))
    }
}

/// Milliseconds as a duration string that parses back exactly: whole seconds as `"2s"`,
/// anything else as `"1500ms"` (a fraction of a second in `f64` could read back a
/// millisecond short).
pub fn fmt_millis(ms: u64) -> String {
    if ms >= 1000 && ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

impl Millis {
    pub fn duration(self) -> Duration {
        Duration::from_millis(self.0)
    }
}

/// From a string (`"250ms"`, as files write it) or a whole number of milliseconds (as the
/// controller hands a spec to its workers).
impl<'de> Deserialize<'de> for Millis {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Ms(u64),
            Text(String),
        }
        match Form::deserialize(d)? {
            Form::Ms(ms) => Ok(Millis(ms)),
            Form::Text(text) => parse_duration(&text)
                .map(|d| Millis(d.as_millis() as u64))
                .map_err(serde::de::Error::custom),
        }
    }
}

impl std::str::FromStr for Millis {
    type Err = BadDuration;
    fn from_str(text: &str) -> Result<Self, BadDuration> {
        parse_duration(text).map(|d| Millis(d.as_millis() as u64))
    }
}

/// A time drawn uniformly from `min..=max` (`hold = { min = "10ms", max = "50ms" }`, or one
/// duration string for a fixed time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Span {
    pub min: Millis,
    pub max: Millis,
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Fixed(Millis),
            Range { min: Millis, max: Millis },
        }
        match Form::deserialize(d)? {
            Form::Fixed(m) => Ok(Span { min: m, max: m }),
            Form::Range { min, max } if min.0 <= max.0 => Ok(Span { min, max }),
            Form::Range { .. } => Err(serde::de::Error::custom("`min` is larger than `max`")),
        }
    }
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
        let e = parse_duration("soon").unwrap_err();
        assert_eq!(e.text, "soon");
        assert!(
            e.to_string().starts_with("\"soon\" is not a duration ("),
            "{e}"
        );
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn millis_are_written_as_durations_that_read_back_the_same() {
        for (ms, text) in [
            (0, "0ms"),
            (300, "300ms"),
            (2000, "2s"),
            (1500, "1500ms"),
            (1001, "1001ms"),
        ] {
            assert_eq!(fmt_millis(ms), text);
            let json = serde_json::to_string(&Millis(ms)).unwrap();
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(serde_json::from_str::<Millis>(&json).unwrap(), Millis(ms));
        }
    }

    #[test]
    fn formats_spans_for_people() {
        assert_eq!(fmt_span(2_100_000_000), "2.10s");
        assert_eq!(fmt_span(450_000_000), "450ms");
        assert_eq!(fmt_span(12_000), "12µs");
        assert_eq!(fmt_time(2_100_000_000), "2.100s");
    }
}
