//! Lists grouped by key (or by process), all in one vector. A history may have a million
//! keys or processes with a few items each: a vector for each would cost an allocation and
//! a free apiece, which then outweighs the checking itself. Groups are numbered densely
//! from 0, as `KeyId`s and `ProcessId`s are.

/// Group `g`'s items lie after those of the groups before it, in the order they were put.
///
/// One number per group: where its items end. While filling, that is where its next item
/// goes; once every group has the items it was counted for, it is the group's end, and
/// the end of the group before is its start. (A million groups: 4 MB, not 8.)
pub struct Grouped<T> {
    items: Vec<T>,
    ends: Vec<u32>,
}

/// How many of `groups` go to each group, for `Grouped::new`.
pub fn counts(group_count: usize, groups: impl Iterator<Item = u32>) -> Vec<u32> {
    let mut counts = vec![0u32; group_count];
    for group in groups {
        counts[group as usize] += 1;
    }
    counts
}

impl<T: Copy> Grouped<T> {
    /// Room for `counts[g]` items of each group `g`, `filler` until they are put. Every
    /// group must then get exactly its count before any is read.
    pub fn new(counts: Vec<u32>, filler: T) -> Self {
        // Each group's start, in the counts' own memory.
        let mut ends = counts;
        let mut at = 0u32;
        for end in &mut ends {
            let count = *end;
            *end = at;
            at += count;
        }
        Grouped {
            items: vec![filler; at as usize],
            ends,
        }
    }

    /// Puts `item` after the items of `group` put so far.
    pub fn put(&mut self, group: u32, item: T) {
        let slot = &mut self.ends[group as usize];
        self.items[*slot as usize] = item;
        *slot += 1;
    }
}

impl<T> Grouped<T> {
    /// Grouped items filled group after group: `starts` has one entry per group and one
    /// more (the first 0, the last `items.len()`).
    pub fn from_parts(items: Vec<T>, mut starts: Vec<u32>) -> Self {
        debug_assert_eq!(starts.first().copied(), Some(0));
        debug_assert_eq!(starts.last().copied(), Some(items.len() as u32));
        starts.remove(0);
        Grouped {
            items,
            ends: starts,
        }
    }

    fn range(&self, group: u32) -> std::ops::Range<usize> {
        let g = group as usize;
        let start = match g {
            0 => 0,
            _ => self.ends[g - 1] as usize,
        };
        start..self.ends[g] as usize
    }

    pub fn of(&self, group: u32) -> &[T] {
        &self.items[self.range(group)]
    }

    pub fn of_mut(&mut self, group: u32) -> &mut [T] {
        let range = self.range(group);
        &mut self.items[range]
    }

    /// Every group's items, group after group.
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
        let mut grouped = Grouped::new(counts(4, keys.iter().copied()), 0usize);
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
