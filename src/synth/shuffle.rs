//! The shuffled merge: each event is delayed by a random amount up to the window, but never
//! ahead of an earlier event of its own stream (a kill belongs to the nemesis's stream and
//! to its victim's, so the victim's last invoke always comes before it).

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::io;

use super::record::{Rec, Val};
use super::rng::Rng;

struct Delayed {
    at: i64,
    seq: u64,
    rec: Rec,
}

impl PartialEq for Delayed {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Delayed {}
impl PartialOrd for Delayed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Delayed {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

pub(super) struct Shuffler {
    window: i64,
    last: Vec<i64>,
    heap: BinaryHeap<Reverse<Delayed>>,
    seq: u64,
    rng: Rng,
}

impl Shuffler {
    /// A merge that delays events up to `window` ns (none if it is 0 or less), for `streams`
    /// streams.
    pub(super) fn new(window: i64, streams: usize, rng: Rng) -> Self {
        Shuffler {
            window: window.max(0),
            last: vec![i64::MIN; streams],
            heap: BinaryHeap::new(),
            seq: 0,
            rng,
        }
    }

    pub(super) fn push<S: FnMut(&Rec) -> io::Result<()>>(
        &mut self,
        rec: Rec,
        sink: &mut S,
    ) -> io::Result<()> {
        if self.window <= 0 {
            return sink(&rec);
        }
        let mut at = rec.time + self.rng.range(0, self.window);
        at = at.max(self.last[rec.stream as usize]);
        if let Val::Kill { slot, .. } = rec.val {
            at = at.max(self.last[slot as usize]);
            self.last[slot as usize] = at;
        }
        self.last[rec.stream as usize] = at;
        // Every later event is at or after `rec.time`: what is due by then can go.
        while let Some(Reverse(top)) = self.heap.peek() {
            if top.at > rec.time {
                break;
            }
            let Some(Reverse(top)) = self.heap.pop() else {
                break;
            };
            sink(&top.rec)?;
        }
        self.seq += 1;
        self.heap.push(Reverse(Delayed {
            at,
            seq: self.seq,
            rec,
        }));
        Ok(())
    }

    pub(super) fn finish<S: FnMut(&Rec) -> io::Result<()>>(
        &mut self,
        sink: &mut S,
    ) -> io::Result<()> {
        while let Some(Reverse(top)) = self.heap.pop() {
            sink(&top.rec)?;
        }
        Ok(())
    }
}
