//! Acquisitions per second over time, by outcome.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::history::compact::{OpF, OpType, NEMESIS};
use crate::history::{FaultBand, History};

use super::axis::TimeAxis;
use super::bands::{draw_fault_bands, fault_legend};
use super::chart::{font, Chart};
use super::format::{format_ms, secs, thousands};
use super::outcome::{Outcome, OUTCOMES};
use crate::plot::error::DrawError;

/// At most this many rate buckets.
pub const RATE_BUCKETS: i64 = 150;

/// Bucket widths to choose from, in ns.
const NICE_WIDTHS_NS: [i64; 17] = [
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
    2_000_000_000,
    5_000_000_000,
    10_000_000_000,
    15_000_000_000,
    30_000_000_000,
    60_000_000_000,
    120_000_000_000,
    300_000_000_000,
    600_000_000_000,
    1_800_000_000_000,
];

pub(super) struct RateChart<'b> {
    /// (start ns, end ns, acquire completions by outcome) per bucket; the last bucket ends
    /// with the history, so a partial one is not drawn as a drop.
    buckets: Vec<(i64, i64, [u64; 3])>,
    totals: [u64; 3],
    width_ns: i64,
    axis: TimeAxis,
    bands: &'b [FaultBand],
    label: String,
}

impl<'b> RateChart<'b> {
    pub(super) fn new(
        history: &History,
        bands: &'b [FaultBand],
        axis: TimeAxis,
        label: &str,
    ) -> Self {
        let start_ns = (axis.start * 1e9) as i64;
        let end_ns = history.time_span().1.max(start_ns + 1);
        let span_ns = end_ns.saturating_sub(start_ns);
        let width_ns = NICE_WIDTHS_NS
            .iter()
            .copied()
            .find(|w| span_ns / w < RATE_BUCKETS)
            .unwrap_or_else(|| span_ns / RATE_BUCKETS + 1);
        let n = span_ns.div_euclid(width_ns) as usize + 1;
        let mut buckets: Vec<(i64, i64, [u64; 3])> = (0..n as i64)
            .map(|b| {
                let t0 = start_ns.saturating_add(b.saturating_mul(width_ns));
                (t0, t0.saturating_add(width_ns).min(end_ns), [0; 3])
            })
            .collect();
        let mut totals = [0u64; 3];
        for op in &history.ops {
            if op.process == NEMESIS || op.f != OpF::Acquire {
                continue;
            }
            let outcome = match op.ty {
                OpType::Invoke => continue,
                OpType::Ok => Outcome::Ok,
                OpType::Fail => Outcome::Fail,
                OpType::Info => Outcome::Info,
            };
            let b = (op.time.saturating_sub(start_ns) / width_ns).clamp(0, n as i64 - 1) as usize;
            buckets[b].2[outcome as usize] += 1;
            totals[outcome as usize] += 1;
        }
        // A last bucket cut short by the end of the history joins the one before it, so
        // that a few events in a sliver of time are not drawn as a spike or a drop.
        if buckets.len() >= 2 {
            if let Some(&(t0, t1, counts)) = buckets.last() {
                if t1.saturating_sub(t0).saturating_mul(4) < width_ns {
                    buckets.pop();
                    if let Some(previous) = buckets.last_mut() {
                        previous.1 = t1;
                        for (c, add) in previous.2.iter_mut().zip(counts) {
                            *c += add;
                        }
                    }
                }
            }
        }
        RateChart {
            buckets,
            totals,
            width_ns,
            axis,
            bands,
            label: label.to_string(),
        }
    }

    fn bucket_label(&self) -> String {
        format_ms(self.width_ns as f64 / 1e6)
    }

    /// Completions per second of `outcome` in a bucket.
    fn rate(bucket: &(i64, i64, [u64; 3]), outcome: Outcome) -> f64 {
        let seconds = ((bucket.1 - bucket.0).max(1)) as f64 / 1e9;
        bucket.2[outcome as usize] as f64 / seconds
    }
}

impl Chart for RateChart<'_> {
    fn title(&self) -> String {
        format!(
            "Acquisitions and failed attempts per second (per {}) — {}",
            self.bucket_label(),
            self.label
        )
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE)?;
        let max = self
            .buckets
            .iter()
            .flat_map(|b| OUTCOMES.map(|(o, _, _)| Self::rate(b, o)))
            .fold(0f64, f64::max);
        // Head room for the fault labels and the legend.
        let y_max = (max * 1.3).max(1.0);
        let mut chart = ChartBuilder::on(root)
            .caption(self.title(), font(20))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(self.axis.start..self.axis.end, 0f64..y_max)?;
        let x_fmt = |v: &f64| self.axis.format(*v);
        let y_fmt = |v: &f64| {
            if y_max < 10.0 {
                format!("{v:.1}")
            } else {
                format!("{v:.0}")
            }
        };
        chart
            .configure_mesh()
            .x_desc("time since the run began (s)")
            .y_desc("acquire completions per second")
            .x_max_light_lines(2)
            .y_max_light_lines(2)
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&y_fmt)
            .label_style(font(13))
            .axis_desc_style(font(14))
            .light_line_style(RGBColor(235, 235, 235))
            .bold_line_style(RGBColor(215, 215, 215))
            .draw()?;

        let area = chart.plotting_area();
        let (x_range, _) = area.get_pixel_range();
        let map = |t: f64| area.map_coordinate(&(t, 0.0)).0 - x_range.start;
        draw_fault_bands(&area.strip_coord_spec(), &map, self.bands)?;
        fault_legend(&mut chart, self.bands)?;

        // Acquisitions last, on top.
        for (outcome, name, color) in OUTCOMES.iter().rev().copied() {
            // A step line: flat across each bucket.
            let mut line = Vec::with_capacity(self.buckets.len() * 2);
            if self.totals[outcome as usize] > 0 {
                for bucket in &self.buckets {
                    let v = Self::rate(bucket, outcome);
                    line.push((secs(bucket.0), v));
                    line.push((secs(bucket.1), v));
                }
            }
            let width = if outcome == Outcome::Ok { 2 } else { 1 };
            let label = match outcome {
                Outcome::Ok => format!("acquired ({} in all)", thousands(self.totals[0] as usize)),
                _ => format!(
                    "acquire {name} ({} in all)",
                    thousands(self.totals[outcome as usize] as usize)
                ),
            };
            chart
                .draw_series(LineSeries::new(line, color.stroke_width(width)))?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
                });
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
