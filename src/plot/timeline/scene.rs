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
    /// Arrows (queue jumps), over everything but the labels.
    pub(super) top_polygons: Vec<(Vec<(i32, i32)>, RGBColor)>,
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

    /// Diagonal stripes (`/`, 2 pixels wide, `spacing` apart on a grid fixed to the picture,
    /// so that the stripes of neighbouring runs line up) over `[x0, x1) × [y0, y1)`.
    pub(super) fn hatch(
        &mut self,
        (x0, y0, x1, y1): (i32, i32, i32, i32),
        spacing: i32,
        color: RGBColor,
    ) {
        let h = y1 - y0;
        if h <= 0 || x1 <= x0 || spacing <= 0 {
            return;
        }
        // The stripe whose bottom left corner is at `s` reaches `s + h` at the top.
        let mut s = x0 - h - 2;
        s -= s.rem_euclid(spacing);
        while s < x1 {
            let stripe = [(s, y1), (s + 2, y1), (s + 2 + h, y0), (s + h, y0)]
                .map(|(x, y)| (x as f64, y as f64));
            let clipped = clip_x(&clip_x(&stripe, x0 as f64, 1.0), x1 as f64, -1.0);
            if clipped.len() >= 3 {
                let points = clipped
                    .iter()
                    .map(|&(x, y)| (x.round() as i32, y.round() as i32))
                    .collect();
                self.polygons.push((points, color));
            }
            s += spacing;
        }
    }

    /// A vertical arrow at `x` from `y_from` to `y_to` (its head there), 3 pixels wide,
    /// with a small square where it starts.
    pub(super) fn arrow(&mut self, x: i32, y_from: i32, y_to: i32, color: RGBColor) {
        let dir = if y_to >= y_from { 1 } else { -1 };
        let head = 8.min((y_to - y_from).abs() / 2).max(3);
        let neck = y_to - dir * head;
        let (a, b) = (y_from.min(neck), y_from.max(neck));
        let square =
            |(x0, y0, x1, y1): (i32, i32, i32, i32)| vec![(x0, y0), (x1, y0), (x1, y1), (x0, y1)];
        self.top_polygons
            .push((square((x - 1, a, x + 2, b)), color));
        self.top_polygons.push((
            vec![(x - head + 1, neck), (x + head, neck), (x, y_to)],
            color,
        ));
        self.top_polygons
            .push((square((x - 3, y_from - 3, x + 4, y_from + 4)), color));
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

/// The part of polygon `points` on one side of the vertical line at `edge`: `side` 1.0 keeps
/// x ≥ edge, -1.0 keeps x ≤ edge (one step of Sutherland–Hodgman).
fn clip_x(points: &[(f64, f64)], edge: f64, side: f64) -> Vec<(f64, f64)> {
    let inside = |p: (f64, f64)| (p.0 - edge) * side >= 0.0;
    let mut out = Vec::with_capacity(points.len() + 2);
    for (i, &p) in points.iter().enumerate() {
        let q = points[(i + 1) % points.len()];
        if inside(p) {
            out.push(p);
        }
        if inside(p) != inside(q) {
            let t = (edge - p.0) / (q.0 - p.0);
            out.push((edge, p.1 + t * (q.1 - p.1)));
        }
    }
    out
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
