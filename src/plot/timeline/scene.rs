//! Everything a picture paints, as plain shapes and texts in pixel coordinates.

use plotters::style::text_anchor::HPos;
use plotters::style::RGBColor;

use super::style::FAIL;

/// A text to draw.
#[derive(Clone)]
pub(super) struct Label {
    pub(super) text: String,
    pub(super) x: i32,
    pub(super) y: i32,
    pub(super) size: f64,
    pub(super) color: RGBColor,
    pub(super) h: HPos,
    /// Draw a white box behind it.
    pub(super) boxed: bool,
}

/// A filled rectangle `[x0, x1) × [y0, y1)`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fill {
    pub(super) x0: i32,
    pub(super) y0: i32,
    pub(super) x1: i32,
    pub(super) y1: i32,
    pub(super) color: RGBColor,
    pub(super) alpha: f64,
}

/// Everything a picture paints, in order, in pixel coordinates.
#[derive(Default)]
pub(super) struct Scene {
    /// Backgrounds: lanes, grid, fault bands, anomaly regions.
    pub(super) under: Vec<Fill>,
    pub(super) fills: Vec<Fill>,
    pub(super) polygons: Vec<(Vec<(i32, i32)>, RGBColor)>,
    /// Anomaly outlines, over the bars.
    pub(super) outlines: Vec<Fill>,
    /// Marks: drawn last, over the outlines.
    pub(super) top_fills: Vec<Fill>,
    pub(super) labels: Vec<Label>,
}

impl Scene {
    /// The × of a failed operation, centred on (cx, cy), `r` pixels to each side.
    pub(super) fn cross(&mut self, cx: i32, cy: i32, r: i32) {
        for (from, to) in [
            ((cx - r, cy - r), (cx + r, cy + r)),
            ((cx + r, cy - r), (cx - r, cy + r)),
        ] {
            self.polygons
                .push((vec![from, (from.0 + 1, from.1), (to.0 + 1, to.1), to], FAIL));
        }
    }

    pub(super) fn fill(&mut self, x0: i32, y0: i32, x1: i32, y1: i32, color: RGBColor, alpha: f64) {
        if x1 > x0 && y1 > y0 {
            self.fills.push(Fill {
                x0,
                y0,
                x1,
                y1,
                color,
                alpha,
            });
        }
    }

    pub(super) fn under(
        &mut self,
        x0: i32,
        y0: i32,
        x1: i32,
        y1: i32,
        color: RGBColor,
        alpha: f64,
    ) {
        if x1 > x0 && y1 > y0 {
            self.under.push(Fill {
                x0,
                y0,
                x1,
                y1,
                color,
                alpha,
            });
        }
    }

    pub(super) fn text(
        &mut self,
        text: impl Into<String>,
        x: i32,
        y: i32,
        size: f64,
        color: RGBColor,
    ) {
        self.labels.push(Label {
            text: text.into(),
            x,
            y,
            size,
            color,
            h: HPos::Left,
            boxed: false,
        });
    }
}

/// Greedy placement of labels in a few rows: returns the row for `[x0, x1)`, if one is free.
pub(super) struct Rows {
    pub(super) ends: Vec<i32>,
}

impl Rows {
    pub(super) fn new(n: usize) -> Rows {
        Rows {
            ends: vec![i32::MIN; n],
        }
    }

    pub(super) fn place(&mut self, x0: i32, x1: i32) -> Option<usize> {
        let row = self.ends.iter().position(|&end| end + 8 <= x0)?;
        self.ends[row] = x1;
        Some(row)
    }
}
