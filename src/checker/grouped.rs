//! Lists grouped by key (or by process), all in one vector. A history may have a million
//! keys or processes with a few items each: a vector for each would cost an allocation and
//! a free apiece, which then outweighs the checking itself. Groups are numbered densely
//! from 0, as `KeyId`s and `ProcessId`s are.

use crate::history::compact::KeyId;

/// Key `k`'s items lie after those of the keys before it, in the order they were put.
pub struct Grouped<T> {
    items: Vec<T>,
    /// Key `k`'s items are `items[starts[k]..starts[k + 1]]`.
    starts: Vec<u32>,
    /// Where each key's next item goes, while filling.
    next: Vec<u32>,
}

/// How many of `keys` go to each key, for `Grouped::new`.
pub fn counts(key_count: usize, keys: impl Iterator<Item = KeyId>) -> Vec<u32> {
    let mut counts = vec![0u32; key_count];
    for key in keys {
        counts[key as usize] += 1;
    }
    counts
}

impl<T: Copy> Grouped<T> {
    /// Room for `counts[k]` items of each key `k`, `filler` until they are put.
    pub fn new(counts: &[u32], filler: T) -> Self {
        let mut starts = Vec::with_capacity(counts.len() + 1);
        let mut at = 0u32;
        starts.push(0);
        for &count in counts {
            at += count;
            starts.push(at);
        }
        Grouped {
            items: vec![filler; at as usize],
            next: starts[..counts.len()].to_vec(),
            starts,
        }
    }

    /// Puts `item` after the items of `key` put so far.
    pub fn put(&mut self, key: KeyId, item: T) {
        let slot = &mut self.next[key as usize];
        debug_assert!(
            *slot < self.starts[key as usize + 1],
            "more items than counted"
        );
        self.items[*slot as usize] = item;
        *slot += 1;
    }
}

impl<T> Grouped<T> {
    /// Grouped items filled key after key: `starts` has one entry per key and one more.
    pub fn from_parts(items: Vec<T>, starts: Vec<u32>) -> Self {
        debug_assert_eq!(starts.last().copied(), Some(items.len() as u32));
        Grouped {
            items,
            starts,
            next: Vec::new(),
        }
    }

    pub fn of(&self, key: KeyId) -> &[T] {
        let k = key as usize;
        &self.items[self.starts[k] as usize..self.starts[k + 1] as usize]
    }

    pub fn of_mut(&mut self, key: KeyId) -> &mut [T] {
        let k = key as usize;
        &mut self.items[self.starts[k] as usize..self.starts[k + 1] as usize]
    }

    /// Every key's items, key after key.
    pub fn all(&self) -> &[T] {
        &self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_come_back_by_key_in_the_order_put() {
        let keys = [2, 0, 2, 1, 2];
        let mut grouped = Grouped::new(&counts(4, keys.iter().copied()), 0usize);
        for (n, &key) in keys.iter().enumerate() {
            grouped.put(key, n);
        }
        assert_eq!(grouped.of(0), &[1]);
        assert_eq!(grouped.of(1), &[3]);
        assert_eq!(grouped.of(2), &[0, 2, 4]);
        assert!(grouped.of(3).is_empty());
        assert_eq!(grouped.all(), &[1, 3, 0, 2, 4]);
        grouped.of_mut(2).reverse();
        assert_eq!(grouped.of(2), &[4, 2, 0]);
    }

    #[test]
    fn parts_filled_key_after_key_read_back_the_same() {
        let grouped = Grouped::from_parts(vec!['a', 'b', 'c'], vec![0, 2, 2, 3]);
        assert_eq!(grouped.of(0), &['a', 'b']);
        assert!(grouped.of(1).is_empty());
        assert_eq!(grouped.of(2), &['c']);
    }
}
