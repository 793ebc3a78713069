//! The x transform of a picture: run time to pixel columns.

/// The x transform of a picture: run time in ns to pixel columns. Column `left` is `t0`,
/// column `right` is `t1`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct XScale {
    pub t0: i64,
    pub t1: i64,
    /// The first and one past the last pixel column of the plot area.
    pub left: i32,
    pub right: i32,
}

impl XScale {
    pub fn new(t0: i64, t1: i64, left: i32, right: i32) -> XScale {
        XScale {
            t0,
            t1: t1.max(t0.saturating_add(1)),
            left,
            right: right.max(left + 1),
        }
    }

    /// The picture x coordinate of time `ns` (not clamped).
    pub fn x(&self, ns: i64) -> f64 {
        self.left as f64 + self.since_t0(ns) / self.span() * self.width() as f64
    }

    /// Differences in i128: a history may span the whole of i64
    /// (history/extreme-times.jsonl).
    pub fn span(&self) -> f64 {
        (i128::from(self.t1) - i128::from(self.t0)) as f64
    }

    fn since_t0(&self, ns: i64) -> f64 {
        (i128::from(ns) - i128::from(self.t0)) as f64
    }

    /// The picture column time `ns` falls into (not clamped).
    pub fn column(&self, ns: i64) -> i32 {
        let x = self.x(ns).floor();
        x.clamp(i32::MIN as f64, i32::MAX as f64) as i32
    }

    /// Columns of the plot area.
    pub fn width(&self) -> usize {
        (self.right - self.left) as usize
    }

    pub fn ns_per_px(&self) -> f64 {
        self.span() / self.width() as f64
    }

    /// The plot-relative columns `[first, last]` that `[a, b]` covers, at least one, clipped
    /// to the plot; None if it lies outside.
    pub fn cells(&self, a: i64, b: i64) -> Option<(usize, usize)> {
        let (a, b) = (a.min(b), a.max(b));
        if b < self.t0 || a > self.t1 {
            return None;
        }
        let w = self.width() as i64;
        let first = (self.column(a) - self.left) as i64;
        let end = (self.x(b).ceil() as i64 - self.left as i64).max(first + 1);
        let first = first.clamp(0, w - 1);
        let last = (end - 1).clamp(first, w - 1);
        Some((first as usize, last as usize))
    }

    /// The plot-relative column of an instant, if it lies in the plot.
    pub fn cell(&self, t: i64) -> Option<usize> {
        self.cells(t, t).map(|(c, _)| c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_cover_at_least_one_column_and_clip() {
        let s = XScale::new(0, 1000, 10, 110); // 10 ns per pixel
        assert_eq!(s.cells(0, 0), Some((0, 0)));
        assert_eq!(s.cells(5, 6), Some((0, 0)));
        assert_eq!(s.cells(0, 25), Some((0, 2)));
        assert_eq!(s.cells(-50, 2000), Some((0, 99)));
        assert_eq!(s.cells(1001, 2000), None);
        assert_eq!(s.column(500), 60);
    }
}
