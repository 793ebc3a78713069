//! The report's per-key figures: a map from key name to `KeyStats`, written to JSON as an
//! object in name order.
//!
//! Not a `BTreeMap`: a history may have a million keys, and a map would move every
//! `KeyStats` (a few hundred bytes) into its nodes in name order and sort the names up
//! front, which cost a check of such a history about a sixth of its time. Here the figures
//! stay where the checks left them, in the order the history first named the keys, and
//! the name order is worked out only when something asks for it (JSON, `iter`).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::OnceLock;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::KeyStats;

#[derive(Clone, Default)]
pub struct PerKey {
    /// Key names, each once, and their figures at the same position.
    names: Vec<String>,
    stats: Vec<KeyStats>,
    /// Positions in name order, once asked for.
    by_name: OnceLock<Vec<u32>>,
}

impl PerKey {
    /// `names` (distinct) and their `stats`, position by position.
    pub fn from_parts(names: Vec<String>, stats: Vec<KeyStats>) -> Self {
        assert_eq!(names.len(), stats.len(), "a name for each key's figures");
        PerKey {
            names,
            stats,
            by_name: OnceLock::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The figures of the key named `name`.
    pub fn get(&self, name: &str) -> Option<&KeyStats> {
        let order = self.by_name();
        let at = order
            .binary_search_by(|&i| self.names[i as usize].as_str().cmp(name))
            .ok()?;
        Some(&self.stats[order[at] as usize])
    }

    /// Adds or replaces the figures of the key named `name`.
    pub fn insert(&mut self, name: String, stats: KeyStats) {
        match self.names.iter().position(|n| *n == name) {
            Some(i) => self.stats[i] = stats,
            None => {
                self.names.push(name);
                self.stats.push(stats);
                self.by_name = OnceLock::new();
            }
        }
    }

    /// Every key and its figures, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &KeyStats)> + Clone {
        self.by_name()
            .iter()
            .map(|&i| (&self.names[i as usize], &self.stats[i as usize]))
    }

    /// Every key's figures, in no particular order: for sums and filters, which need no
    /// sorting of the names.
    pub fn values(&self) -> impl Iterator<Item = &KeyStats> + Clone {
        self.stats.iter()
    }

    /// Every key and its figures, in no particular order.
    pub fn unordered(&self) -> impl Iterator<Item = (&String, &KeyStats)> {
        self.names.iter().zip(&self.stats)
    }

    fn by_name(&self) -> &[u32] {
        self.by_name.get_or_init(|| {
            let mut order: Vec<u32> = (0..self.names.len() as u32).collect();
            order.sort_unstable_by(|&a, &b| self.names[a as usize].cmp(&self.names[b as usize]));
            order
        })
    }
}

impl std::ops::Index<&str> for PerKey {
    type Output = KeyStats;

    fn index(&self, name: &str) -> &KeyStats {
        self.get(name)
            .unwrap_or_else(|| panic!("no key named {name:?} in per_key"))
    }
}

/// Equal when they hold the same keys with the same figures, whatever their order.
impl PartialEq for PerKey {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl fmt::Debug for PerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for PerKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for PerKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<String, KeyStats>::deserialize(deserializer)?;
        let (names, stats) = map.into_iter().unzip();
        Ok(PerKey::from_parts(names, stats))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(acquisitions: u64) -> KeyStats {
        KeyStats {
            acquisitions,
            ..KeyStats::default()
        }
    }

    #[test]
    fn json_lists_keys_in_name_order_and_reads_back_equal() {
        let names = ["lock:10", "lock:2", "a", "lock:1"];
        let per_key = PerKey::from_parts(
            names.iter().map(|n| n.to_string()).collect(),
            (0..4).map(stats).collect(),
        );
        let json = serde_json::to_string(&per_key).unwrap();
        let order: Vec<usize> = ["\"a\"", "\"lock:1\"", "\"lock:10\"", "\"lock:2\""]
            .iter()
            .map(|n| json.find(n).unwrap())
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{json}");
        let back: PerKey = serde_json::from_str(&json).unwrap();
        assert_eq!(back, per_key);
        assert_eq!(back["lock:2"].acquisitions, 1);
        assert_eq!(per_key["lock:1"].acquisitions, 3);
        assert_eq!(per_key.get("lock:3"), None);
        // Same JSON as the map it replaced.
        let map: BTreeMap<String, KeyStats> = serde_json::from_str(&json).unwrap();
        assert_eq!(serde_json::to_string(&map).unwrap(), json);
    }

    #[test]
    fn insert_replaces_a_key_and_reorders_for_a_new_one() {
        let mut per_key = PerKey::default();
        per_key.insert("b".into(), stats(1));
        assert_eq!(per_key["b"].acquisitions, 1);
        per_key.insert("a".into(), stats(2));
        per_key.insert("b".into(), stats(3));
        let listed: Vec<(&str, u64)> = per_key
            .iter()
            .map(|(n, s)| (n.as_str(), s.acquisitions))
            .collect();
        assert_eq!(listed, [("a", 2), ("b", 3)]);
        assert_eq!(per_key.len(), 2);
    }
}
