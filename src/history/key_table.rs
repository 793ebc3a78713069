//! The builder's table of key names: a name to its `KeyId`.
//!
//! Not a `HashMap`: with a million keys, or a hundred thousand beside a million process
//! states, each lookup waits on main memory twice (the map's control bytes, then its slot),
//! and a `HashMap` gives no way to ask for either ahead of the lookup. Here a name's hash
//! says where its slot is, so the reader can ask for that slot a few lines before it looks
//! the name up (`prefetch`), and the slot holds the name itself (its first 22 bytes), so
//! that finding a short name touches no other memory.

use std::hash::BuildHasher;

use rustc_hash::FxBuildHasher;

use super::compact::KeyId;

/// How many bytes of a name its slot holds.
const INLINE: usize = 22;

/// The `id` of an empty slot.
const EMPTY: KeyId = KeyId::MAX;

/// One slot: half a cache line.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Slot {
    id: KeyId,
    /// The upper half of the name's hash: most slots that do not hold the name are told
    /// apart by it without comparing bytes.
    tag: u32,
    /// The name's length, or `u16::MAX` for any from that length on.
    len: u16,
    /// The name's first bytes (all of it, up to `INLINE` bytes).
    bytes: [u8; INLINE],
}

const _: () = assert!(std::mem::size_of::<Slot>() == 32);

const EMPTY_SLOT: Slot = Slot {
    id: EMPTY,
    tag: 0,
    len: 0,
    bytes: [0; INLINE],
};

impl Slot {
    fn new(hash: u64, name: &str, id: KeyId) -> Slot {
        let mut bytes = [0; INLINE];
        let head = &name.as_bytes()[..name.len().min(INLINE)];
        bytes[..head.len()].copy_from_slice(head);
        Slot {
            id,
            tag: tag(hash),
            len: short_len(name),
            bytes,
        }
    }

    /// Whether this (full) slot holds `name`; `names` are the names by id, for the bytes of
    /// a long one beyond the slot's.
    fn holds(&self, hash: u64, name: &str, names: &[String]) -> bool {
        if self.tag != tag(hash) || self.len != short_len(name) {
            return false;
        }
        let bytes = name.as_bytes();
        if bytes.len() <= INLINE {
            return self.bytes[..bytes.len()] == *bytes;
        }
        self.bytes[..] == bytes[..INLINE] && names[self.id as usize] == name
    }
}

fn tag(hash: u64) -> u32 {
    (hash >> 32) as u32
}

fn short_len(name: &str) -> u16 {
    u16::try_from(name.len()).unwrap_or(u16::MAX)
}

/// Names to ids, by open addressing with linear probing; at most half full.
#[derive(Default)]
pub struct KeyTable {
    slots: Vec<Slot>,
    len: usize,
}

impl KeyTable {
    /// The hash that `find`, `insert` and `prefetch` take for `name`.
    pub fn hash(name: &str) -> u64 {
        FxBuildHasher.hash_one(name)
    }

    /// Asks the processor to bring the slot where a lookup of the name with this `hash`
    /// begins into the cache; it changes no result.
    pub fn prefetch(&self, hash: u64) {
        if let Some(slot) = self.slots.get(self.home(hash)) {
            super::cache::prefetch_read(slot);
        }
    }

    /// The id of `name` (whose hash is `hash`), if it was inserted. `names` are the names
    /// by id, as inserted.
    pub fn find(&self, hash: u64, name: &str, names: &[String]) -> Option<KeyId> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut at = self.home(hash);
        loop {
            let slot = &self.slots[at];
            if slot.id == EMPTY {
                return None;
            }
            if slot.holds(hash, name, names) {
                return Some(slot.id);
            }
            at = (at + 1) & mask;
        }
    }

    /// Adds `name` (not in the table yet) as `id`. `names` are the names by id, this one
    /// included.
    pub fn insert(&mut self, hash: u64, name: &str, id: KeyId, names: &[String]) {
        debug_assert_eq!(names.get(id as usize).map(String::as_str), Some(name));
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow(names);
        }
        self.place(Slot::new(hash, name, id), hash);
        self.len += 1;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    fn home(&self, hash: u64) -> usize {
        hash as usize & self.slots.len().wrapping_sub(1)
    }

    fn place(&mut self, slot: Slot, hash: u64) {
        let mask = self.slots.len() - 1;
        let mut at = self.home(hash);
        while self.slots[at].id != EMPTY {
            at = (at + 1) & mask;
        }
        self.slots[at] = slot;
    }

    fn grow(&mut self, names: &[String]) {
        let size = (self.slots.len() * 2).max(16);
        let old = std::mem::replace(&mut self.slots, vec![EMPTY_SLOT; size]);
        for slot in old.into_iter().filter(|s| s.id != EMPTY) {
            let hash = Self::hash(&names[slot.id as usize]);
            self.place(slot, hash);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    /// Interns `names` in order, as the builder does, checking every answer against a
    /// `HashMap`.
    fn intern_all(names: &[String]) {
        let mut table = KeyTable::default();
        let mut by_id: Vec<String> = Vec::new();
        let mut reference: HashMap<&str, KeyId> = HashMap::new();
        for name in names {
            let hash = KeyTable::hash(name);
            table.prefetch(hash);
            let found = table.find(hash, name, &by_id);
            assert_eq!(found, reference.get(name.as_str()).copied(), "{name:?}");
            if found.is_none() {
                let id = by_id.len() as KeyId;
                by_id.push(name.clone());
                table.insert(hash, name, id, &by_id);
                reference.insert(name, id);
            }
        }
        assert_eq!(table.len(), reference.len());
        for (name, &id) in &reference {
            assert_eq!(table.find(KeyTable::hash(name), name, &by_id), Some(id));
        }
    }

    #[test]
    fn names_short_long_and_alike_get_one_id_each() {
        let long = "x".repeat(70_000);
        let mut names: Vec<String> = vec![
            String::new(),
            "a".into(),
            "lock:1".into(),
            "lock:1 ".into(),
            "a".repeat(INLINE),
            "a".repeat(INLINE + 1),
            format!("{}b", "a".repeat(INLINE)),
            long.clone(),
            format!("{long}y"),
            "é∂".into(),
        ];
        names.extend((0..5000).map(|i| format!("lock:{i}")));
        names.extend((0..300).map(|i| format!("{}-{i}", "k".repeat(30))));
        let again = names.clone();
        names.extend(again);
        intern_all(&names);
    }

    /// Names alike in their first bytes, length and hash (forced here: one for all, as a
    /// collision would give) are still told apart by their whole bytes.
    #[test]
    fn a_hash_collision_is_settled_by_the_whole_name() {
        let names: Vec<String> = (0..8)
            .map(|i| format!("{}{i}", "k".repeat(INLINE + 5)))
            .chain((0..8).map(|i| format!("short{i}")))
            .collect();
        for group in names.chunks(8) {
            // At most 8 names: the table does not grow (which would rehash by the real hash).
            let mut table = KeyTable::default();
            let mut by_id: Vec<String> = Vec::new();
            for name in group {
                assert_eq!(table.find(7, name, &by_id), None, "{name}");
                by_id.push(name.clone());
                table.insert(7, name, by_id.len() as KeyId - 1, &by_id);
            }
            for (id, name) in group.iter().enumerate() {
                assert_eq!(table.find(7, name, &by_id), Some(id as KeyId), "{name}");
            }
        }
    }

    proptest! {
        #[test]
        fn interning_agrees_with_a_hash_map(names in proptest::collection::vec("[ab]{0,30}", 0..400)) {
            intern_all(&names);
        }
    }
}
