//! Numbers as the charts label them.

pub(super) fn secs(ns: i64) -> f64 {
    ns as f64 / 1e9
}

/// "1,234,567".
pub(super) fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A latency in ms as a short label: `250µs`, `2ms`, `1.5s`.
pub(super) fn format_ms(ms: f64) -> String {
    fn trim(v: f64) -> String {
        let s = if v >= 100.0 {
            format!("{v:.0}")
        } else if v >= 10.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.2}")
        };
        let s = if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        };
        s
    }
    if ms >= 1000.0 {
        format!("{}s", trim(ms / 1000.0))
    } else if ms >= 1.0 {
        format!("{}ms", trim(ms))
    } else {
        format!("{}µs", trim(ms * 1000.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_latencies_and_counts() {
        assert_eq!(format_ms(0.25), "250µs");
        assert_eq!(format_ms(2.0), "2ms");
        assert_eq!(format_ms(1500.0), "1.5s");
        assert_eq!(format_ms(10.0), "10ms");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(12), "12");
    }
}
