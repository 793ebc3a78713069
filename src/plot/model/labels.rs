//! Texts the pictures share.

use crate::report::{Anomaly, AnomalyKind};

/// `text`, cut to `max` characters with an ellipsis.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// The label of anomaly number `n` (0-based) in pictures: `#1 overlap within lease [1, 4]`.
pub fn anomaly_label(n: usize, a: &Anomaly) -> String {
    let qualifier = match (a.kind, a.lease_expired) {
        (AnomalyKind::Overlap, Some(true)) => " after lease expiry",
        (AnomalyKind::Overlap, Some(false)) => " within lease",
        _ => "",
    };
    // The first events and the last (where a stale write or a failed release usually is).
    let all: Vec<String> = a.indices.iter().map(|i| i.to_string()).collect();
    let shown = if all.len() > 6 {
        format!(
            "{}, …, {}",
            all[..3].join(", "),
            all[all.len() - 2..].join(", ")
        )
    } else {
        all.join(", ")
    };
    format!("#{} {}{} [{}]", n + 1, a.kind, qualifier, shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_kind_and_events() {
        let a = Anomaly {
            kind: AnomalyKind::Overlap,
            key: "k".into(),
            processes: vec![0, 1],
            indices: vec![1, 4, 5, 6, 9],
            explanation: String::new(),
            start: 0,
            end: 1,
            lease_expired: Some(false),
            tokens: vec![],
            cycle: vec![],
        };
        assert_eq!(
            anomaly_label(0, &a),
            "#1 overlap within lease [1, 4, 5, 6, 9]"
        );
        let many = Anomaly {
            indices: (1..=9).collect(),
            lease_expired: None,
            kind: AnomalyKind::StaleWrite,
            ..a
        };
        assert_eq!(anomaly_label(1, &many), "#2 stale-write [1, 2, 3, …, 8, 9]");
    }
}
