//! The anomaly kinds the checker reports, as one enum: `ALL`'s order is the order summaries,
//! the page and the audit list them in, and its names (kebab-case) are the ones every JSON
//! output, `[expect]` tables and `Anomaly::kind` use.

use serde::{Deserialize, Serialize};

/// One kind of anomaly. Serialized as its name (`"stale-write"`); read from a name, an
/// unknown one refused with the known ones listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum AnomalyKind {
    Overlap,
    BadLease,
    LostLock,
    StaleWrite,
    TokenOrder,
    DuplicateToken,
    Starvation,
    Unavailable,
    Unfair,
    LostUpdate,
}

impl AnomalyKind {
    /// Every kind, in the order a summary lists them.
    pub const ALL: [AnomalyKind; 10] = [
        AnomalyKind::Overlap,
        AnomalyKind::BadLease,
        AnomalyKind::LostLock,
        AnomalyKind::StaleWrite,
        AnomalyKind::TokenOrder,
        AnomalyKind::DuplicateToken,
        AnomalyKind::Starvation,
        AnomalyKind::Unavailable,
        AnomalyKind::Unfair,
        AnomalyKind::LostUpdate,
    ];

    /// Its name, as reports write it.
    pub const fn as_str(self) -> &'static str {
        match self {
            AnomalyKind::Overlap => "overlap",
            AnomalyKind::BadLease => "bad-lease",
            AnomalyKind::LostLock => "lost-lock",
            AnomalyKind::StaleWrite => "stale-write",
            AnomalyKind::TokenOrder => "token-order",
            AnomalyKind::DuplicateToken => "duplicate-token",
            AnomalyKind::Starvation => "starvation",
            AnomalyKind::Unavailable => "unavailable",
            AnomalyKind::Unfair => "unfair",
            AnomalyKind::LostUpdate => "lost-update",
        }
    }

    /// The kind named `name`, if any.
    pub fn parse(name: &str) -> Option<AnomalyKind> {
        AnomalyKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Whether only the finished history can show it: `lost-update`, since a later write
    /// that is not its process's last read + 1 makes the key no counter at all, and the
    /// final read of a prefix is not the final read. (Where every write is known to be an
    /// increment, two acknowledged increments of one value are proven early:
    /// `checker::online::reported_early`.)
    pub const fn only_at_the_end(self) -> bool {
        matches!(self, AnomalyKind::LostUpdate)
    }

    /// `kinds`' names joined by `separator`: `overlap, stale-write`.
    pub fn join(kinds: &[AnomalyKind], separator: &str) -> String {
        let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        names.join(separator)
    }

    /// The known names for messages: `overlap, bad-lease, ...`.
    pub fn known() -> String {
        ANOMALY_KINDS.join(", ")
    }
}

/// The kinds' names, in `AnomalyKind::ALL`'s order (the order a summary lists them).
pub const ANOMALY_KINDS: [&str; AnomalyKind::ALL.len()] = {
    let mut names = [""; AnomalyKind::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = AnomalyKind::ALL[i].as_str();
        i += 1;
    }
    names
};

impl std::fmt::Display for AnomalyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for AnomalyKind {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        AnomalyKind::parse(name).ok_or_else(|| {
            format!(
                "\"{name}\" is no anomaly kind (known: {})",
                AnomalyKind::known()
            )
        })
    }
}

impl TryFrom<String> for AnomalyKind {
    type Error = String;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        name.parse()
    }
}

/// Counts by kind, as reports carry them: in name order, as JSON writes them.
pub type KindCounts = std::collections::BTreeMap<AnomalyKind, u64>;

/// Kinds order by name, as their names did when reports carried names: maps and sets of
/// kinds (`counts`, `found`, `omitted`) list them alphabetically, byte for byte as before.
/// `ALL` is the display order.
impl Ord for AnomalyKind {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for AnomalyKind {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Kinds by name, for tests: `named(&["overlap"])`.
#[cfg(test)]
pub fn named(names: &[&str]) -> Vec<AnomalyKind> {
    names.iter().map(|n| n.parse().expect("a kind")).collect()
}

/// Counts by kind name, for tests: `counted(&[("overlap", 2)])`.
#[cfg(test)]
pub fn counted(counts: &[(&str, u64)]) -> KindCounts {
    counts
        .iter()
        .map(|(n, c)| (n.parse().expect("a kind"), *c))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_serde_names_and_kinds_sort_by_name() {
        assert_eq!(
            ANOMALY_KINDS,
            [
                "overlap",
                "bad-lease",
                "lost-lock",
                "stale-write",
                "token-order",
                "duplicate-token",
                "starvation",
                "unavailable",
                "unfair",
                "lost-update",
            ]
        );
        for kind in AnomalyKind::ALL {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{kind}\""));
            assert_eq!(serde_json::from_str::<AnomalyKind>(&json).unwrap(), kind);
            assert_eq!(AnomalyKind::parse(kind.as_str()), Some(kind));
        }
        let mut sorted = AnomalyKind::ALL;
        sorted.sort();
        let mut names = ANOMALY_KINDS;
        names.sort();
        assert_eq!(sorted.map(AnomalyKind::as_str), names);
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_known_ones() {
        let e = serde_json::from_str::<AnomalyKind>("\"overlapp\"").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("\"overlapp\" is no anomaly kind (known: overlap, bad-lease,"),
            "{e}"
        );
        assert_eq!(AnomalyKind::parse("Overlap"), None);
    }
}
