//! Acquire latency over time, by outcome, on a log scale, with p50 and p99 when there are
//! enough points.

use std::collections::HashSet;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::history::compact::{OpF, OpType, NEMESIS};
use crate::history::{FaultBand, History};

use super::axis::TimeAxis;
use super::bands::{draw_fault_bands, fault_legend};
use super::chart::{font, Chart};
use super::format::{format_ms, secs, thousands};
use super::outcome::{Outcome, INFO_COLOR, OUTCOMES};
use crate::plot::error::DrawError;

const QUANTILE_COLOR: RGBColor = RGBColor(20, 20, 20);

/// Latency points closer than this many pixels (on both axes) are drawn as one.
const CELL_PX: i32 = 3;
/// Draw p50 / p99 lines over the latency points when there are at least this many ok.
const QUANTILE_MIN_POINTS: usize = 500;
const QUANTILE_BUCKETS: usize = 100;
/// A time bucket needs this many ok acquires for its p50 / p99 to be drawn.
const QUANTILE_MIN_BUCKET: usize = 20;

/// An acquire with its outcome: (invoke time s, latency ms).
pub(super) struct LatencyChart<'b> {
    points: [Vec<(f64, f64)>; 3],
    /// Acquires with no completion when the history ended.
    pending: usize,
    /// (bucket mid time s, p50 ms, p99 ms) of ok acquires, when there are enough.
    quantiles: Vec<(f64, f64, f64)>,
    y: (f64, f64),
    axis: TimeAxis,
    bands: &'b [FaultBand],
    label: String,
}

/// The smallest latency drawn: a completion in the same ns as its invoke is drawn here.
const MIN_LATENCY_MS: f64 = 1e-3;

impl<'b> LatencyChart<'b> {
    pub(super) fn new(
        history: &History,
        bands: &'b [FaultBand],
        axis: TimeAxis,
        label: &str,
    ) -> Self {
        let mut invoked: Vec<Option<i64>> = vec![None; history.processes.len()];
        let mut points: [Vec<(f64, f64)>; 3] = [Vec::new(), Vec::new(), Vec::new()];
        for op in &history.ops {
            if op.process == NEMESIS || op.f != OpF::Acquire {
                continue;
            }
            let Some(slot) = invoked.get_mut(op.process as usize) else {
                continue;
            };
            let outcome = match op.ty {
                OpType::Invoke => {
                    *slot = Some(op.time);
                    continue;
                }
                OpType::Ok => Outcome::Ok,
                OpType::Fail => Outcome::Fail,
                OpType::Info => Outcome::Info,
            };
            if let Some(start) = slot.take() {
                let ms = (op.time.saturating_sub(start) as f64 / 1e6).max(MIN_LATENCY_MS);
                points[outcome as usize].push((secs(start), ms));
            }
        }
        let pending = invoked.iter().filter(|s| s.is_some()).count();

        let (mut lo, mut hi) = (f64::INFINITY, 0f64);
        for p in points.iter().flatten() {
            lo = lo.min(p.1);
            hi = hi.max(p.1);
        }
        if hi == 0.0 {
            (lo, hi) = (1.0, 10.0);
        }
        // Whole decades, so that the axis always has labelled powers of ten.
        let lo = 10f64.powf(lo.log10().floor());
        let mut hi = 10f64.powf(hi.log10().ceil());
        if hi <= lo {
            hi = lo * 10.0;
        }

        let quantiles = if points[0].len() >= QUANTILE_MIN_POINTS {
            ok_quantiles(&points[0], axis)
        } else {
            Vec::new()
        };
        LatencyChart {
            points,
            pending,
            quantiles,
            y: (lo, hi),
            axis,
            bands,
            label: label.to_string(),
        }
    }
}

/// p50 and p99 of the ok latencies in each of `QUANTILE_BUCKETS` time buckets.
fn ok_quantiles(points: &[(f64, f64)], axis: TimeAxis) -> Vec<(f64, f64, f64)> {
    let width = axis.span() / QUANTILE_BUCKETS as f64;
    let mut buckets: Vec<Vec<f64>> = vec![Vec::new(); QUANTILE_BUCKETS];
    for &(t, ms) in points {
        let b = (((t - axis.start) / width) as usize).min(QUANTILE_BUCKETS - 1);
        buckets[b].push(ms);
    }
    let mut out = Vec::new();
    for (b, values) in buckets.iter_mut().enumerate() {
        if values.len() < QUANTILE_MIN_BUCKET {
            continue;
        }
        values.sort_by(f64::total_cmp);
        let rank =
            |q: f64| values[((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1];
        let mid = axis.start + (b as f64 + 0.5) * width;
        out.push((mid, rank(0.5), rank(0.99)));
    }
    out
}

impl Chart for LatencyChart<'_> {
    fn title(&self) -> String {
        let n = |o: Outcome| thousands(self.points[o as usize].len());
        format!(
            "Acquire latency — {} ok, {} fail, {} info — {}",
            n(Outcome::Ok),
            n(Outcome::Fail),
            n(Outcome::Info),
            self.label
        )
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(root)
            .caption(self.title(), font(20))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(
                self.axis.start..self.axis.end,
                // A hair beyond the decades: plotters finds its labelled powers of ten in
                // floating point, and would miss one that sits exactly on an end.
                (self.y.0 * 0.999..self.y.1 * 1.001).log_scale(),
            )?;
        let x_fmt = |v: &f64| self.axis.format(*v);
        let y_fmt = |v: &f64| format_ms(*v);
        chart
            .configure_mesh()
            .x_desc("time since the run began (s); each point is an acquire, at its invoke")
            .x_max_light_lines(2)
            .y_max_light_lines(1)
            .y_desc("acquire latency (log scale)")
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&y_fmt)
            .label_style(font(13))
            .axis_desc_style(font(14))
            .light_line_style(RGBColor(235, 235, 235))
            .bold_line_style(RGBColor(215, 215, 215))
            .draw()?;

        let area = chart.plotting_area();
        let (x_range, _) = area.get_pixel_range();
        let map = |t: f64| area.map_coordinate(&(t, self.y.0)).0 - x_range.start;
        draw_fault_bands(&area.strip_coord_spec(), &map, self.bands)?;
        fault_legend(&mut chart, self.bands)?;

        // Few points are drawn bigger; many stay small so that the cloud keeps its shape.
        let total: usize = self.points.iter().map(Vec::len).sum();
        let radius = if total < 2000 { 3 } else { 2 };
        // The most numerous outcome first, so that the rarer ones stay visible on top.
        let mut order = OUTCOMES;
        order.sort_by_key(|(o, _, _)| std::cmp::Reverse(self.points[*o as usize].len()));
        for (outcome, name, color) in order {
            let points = &self.points[outcome as usize];
            // One point per 3-pixel cell: a busy run becomes a cloud of bounded size, a
            // sparse one keeps every point where it is.
            let mut seen: HashSet<(i32, i32)> = HashSet::new();
            let area = chart.plotting_area();
            let kept: Vec<(f64, f64)> = points
                .iter()
                .copied()
                .filter(|p| {
                    let (x, y) = area.map_coordinate(p);
                    seen.insert((x.div_euclid(CELL_PX), y.div_euclid(CELL_PX)))
                })
                .collect();
            let style = color.mix(0.8).filled();
            chart
                .draw_series(kept.into_iter().map(|p| Circle::new(p, radius, style)))?
                .label(format!("{name} ({})", thousands(points.len())))
                .legend(move |(x, y)| Circle::new((x + 7, y), 4, color.filled()));
        }
        if !self.quantiles.is_empty() {
            for (label, pick, width) in [("ok p50", 0usize, 2u32), ("ok p99", 1usize, 1u32)] {
                let line = self
                    .quantiles
                    .iter()
                    .map(|&(t, p50, p99)| (t, if pick == 0 { p50 } else { p99 }));
                let style = QUANTILE_COLOR.stroke_width(width);
                chart
                    .draw_series(LineSeries::new(line, style))?
                    .label(label)
                    .legend(move |(x, y)| {
                        PathElement::new(
                            vec![(x, y), (x + 14, y)],
                            QUANTILE_COLOR.stroke_width(width),
                        )
                    });
            }
        }
        if self.pending > 0 {
            chart
                .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
                .label(format!(
                    "{} still pending at the end (not drawn)",
                    self.pending
                ))
                .legend(|(x, y)| Circle::new((x + 7, y), 4, INFO_COLOR.stroke_width(1)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .label_font(font(13))
            .draw()?;
        Ok(())
    }
}
