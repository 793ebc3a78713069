//! The run's charts: acquire latency over time (by outcome, log scale), acquisitions per
//! second over time, and acquisitions per client process (fairness). Each is written as SVG
//! and PNG with the bundled font.
//!
//! Size is bounded whatever the history's length: latency points are merged when they fall
//! in the same 3-pixel cell (a sparse history keeps every point), rates are counted in at
//! most `RATE_BUCKETS` buckets, fairness draws at most `FAIRNESS_BARS` bars, and fault bands
//! narrower than a pixel apart are merged into one band (never dropped).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::history::compact::{OpF, OpType, NEMESIS};
use crate::history::History;
use crate::report::Report;

use super::{fonts, FaultBand, PlotError};

/// Every chart's size in pixels.
pub const WIDTH: u32 = 1200;
pub const HEIGHT: u32 = 520;

/// Outcome colours, as the timelines draw them (orange is the timelines' "held past the
/// lease", red is for anomalies only).
pub const OK_COLOR: RGBColor = RGBColor(31, 119, 180);
pub const FAIL_COLOR: RGBColor = RGBColor(90, 90, 90);
pub const INFO_COLOR: RGBColor = RGBColor(148, 52, 200);
/// Nemesis fault bands (drawn at low opacity) and their labels.
pub const FAULT_COLOR: RGBColor = RGBColor(110, 110, 110);
const QUANTILE_COLOR: RGBColor = RGBColor(20, 20, 20);

/// Latency points closer than this many pixels (on both axes) are drawn as one.
const CELL_PX: i32 = 3;
/// At most this many rate buckets.
pub const RATE_BUCKETS: i64 = 150;
/// At most this many bars; more processes are ranked and grouped.
pub const FAIRNESS_BARS: usize = 120;
/// Draw p50 / p99 lines over the latency points when there are at least this many ok.
const QUANTILE_MIN_POINTS: usize = 500;
const QUANTILE_BUCKETS: usize = 100;
/// A time bucket needs this many ok acquires for its p50 / p99 to be drawn.
const QUANTILE_MIN_BUCKET: usize = 20;

/// One chart as written.
#[derive(Debug, Clone)]
pub struct ChartFiles {
    /// `latency`, `rate` or `fairness`: the files' stem.
    pub name: &'static str,
    /// The chart's title, as drawn.
    pub title: String,
    pub svg: PathBuf,
    pub png: PathBuf,
}

/// Draws the latency, rate and fairness charts of `history` into `out_dir`. `label` names
/// the run in the titles (a picture may be seen without its page).
pub fn draw_charts(
    history: &History,
    report: &Report,
    bands: &[FaultBand],
    label: &str,
    out_dir: &Path,
) -> Result<Vec<ChartFiles>, PlotError> {
    fonts::register();
    let axis = TimeAxis::of(history);
    let latency = LatencyChart::new(history, bands, axis, label);
    let rate = RateChart::new(history, bands, axis, label);
    let fairness = FairnessChart::new(history, report, label);
    Ok(vec![
        render(&latency, "latency", out_dir)?,
        render(&rate, "rate", out_dir)?,
        render(&fairness, "fairness", out_dir)?,
    ])
}

/// A chart that can draw itself on any plotters backend.
trait Chart {
    fn title(&self) -> String;
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

fn render(chart: &impl Chart, name: &'static str, out_dir: &Path) -> Result<ChartFiles, PlotError> {
    let svg_path = out_dir.join(format!("{name}.svg"));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        chart
            .draw(&root)
            .map_err(|m| PlotError::draw(&svg_path, m))?;
        root.present().map_err(|e| PlotError::draw(&svg_path, e))?;
    }
    std::fs::write(&svg_path, svg).map_err(|e| PlotError::io(&svg_path, e))?;

    let png_path = out_dir.join(format!("{name}.png"));
    {
        let root = BitMapBackend::new(&png_path, (WIDTH, HEIGHT)).into_drawing_area();
        chart
            .draw(&root)
            .map_err(|m| PlotError::draw(&png_path, m))?;
        root.present().map_err(|e| PlotError::draw(&png_path, e))?;
    }
    Ok(ChartFiles {
        name,
        title: chart.title(),
        svg: svg_path,
        png: png_path,
    })
}

fn font(size: u32) -> FontDesc<'static> {
    (fonts::FAMILY, size).into_font()
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The run's time axis in seconds, shared by the latency and rate charts.
#[derive(Debug, Clone, Copy)]
struct TimeAxis {
    start: f64,
    end: f64,
}

impl TimeAxis {
    fn of(history: &History) -> TimeAxis {
        let (first, last) = history.time_span();
        let (first, last) = (secs(first), secs(last));
        if last - first < 1e-3 {
            // One instant (or nothing): a second around it, so that the axis can say where.
            let start = if (0.0..=1.0).contains(&first) {
                0.0
            } else {
                first - 0.5
            };
            return TimeAxis {
                start,
                end: last + 0.5,
            };
        }
        // Runs start at 0; a history cut out of a longer one starts where it starts.
        let start = if first >= 0.0 && first < (last - first) * 0.2 {
            0.0
        } else {
            first
        };
        let span = (last - start).max(1e-3);
        TimeAxis {
            start,
            end: last + span * 0.02,
        }
    }

    fn span(&self) -> f64 {
        self.end - self.start
    }

    fn format(&self, v: f64) -> String {
        let span = self.span();
        let decimals = if span < 0.05 {
            4
        } else if span < 0.5 {
            3
        } else if span < 5.0 {
            2
        } else if span < 50.0 {
            1
        } else {
            0
        };
        format!("{v:.decimals$}")
    }
}

fn secs(ns: i64) -> f64 {
    ns as f64 / 1e9
}

/// "1,234,567".
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A latency in ms as a short label: `250µs`, `2ms`, `1.5s`.
fn format_ms(ms: f64) -> String {
    fn trim(v: f64) -> String {
        let s = if v >= 100.0 {
            format!("{v:.0}")
        } else if v >= 10.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.2}")
        };
        let s = if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        };
        s
    }
    if ms >= 1000.0 {
        format!("{}s", trim(ms / 1000.0))
    } else if ms >= 1.0 {
        format!("{}ms", trim(ms))
    } else {
        format!("{}µs", trim(ms * 1000.0))
    }
}

// ---------------------------------------------------------------------------------------
// Fault bands

/// Shades `bands` over the plotting area `area` (pixel coordinates relative to it), merging
/// bands that fall within a pixel of each other, and labels them along the top where there
/// is room. `x_px` maps a time in seconds to a pixel column of `area`.
fn draw_fault_bands<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    x_px: &dyn Fn(f64) -> i32,
    bands: &[FaultBand],
) -> Result<(), String> {
    let (width, height) = area.dim_in_pixel();
    let (width, height) = (width as i32, height as i32);
    let mut stretches: Vec<MergedBand> = Vec::new();
    let mut instants: Vec<MergedBand> = Vec::new();
    let mut sorted: Vec<&FaultBand> = bands.iter().collect();
    sorted.sort_by_key(|b| (b.start, b.end));
    for band in sorted {
        let x0 = x_px(secs(band.start)).clamp(-1, width);
        let x1 = x_px(secs(band.end)).clamp(-1, width);
        let list = if band.is_instant() {
            &mut instants
        } else {
            &mut stretches
        };
        match list.last_mut() {
            Some(last) if x0 <= last.x1 + 1 => last.add(band, x1),
            _ => list.push(MergedBand::new(band, x0, x1)),
        }
    }
    let shade = FAULT_COLOR.mix(0.22).filled();
    for s in &stretches {
        area.draw(&Rectangle::new(
            [(s.x0, 0), (s.x1.max(s.x0 + 2), height)],
            shade,
        ))
        .map_err(err)?;
    }
    // A lone instant is a dark line; instants closer than a pixel apart merge into a band
    // shaded like a stretch (a line per fault would paint the chart grey).
    let line = FAULT_COLOR.mix(0.75).filled();
    for s in &instants {
        if s.count == 1 || s.x1 <= s.x0 + 1 {
            area.draw(&Rectangle::new([(s.x0 - 1, 0), (s.x0 + 1, height)], line))
                .map_err(err)?;
        } else {
            area.draw(&Rectangle::new([(s.x0 - 1, 0), (s.x1 + 1, height)], shade))
                .map_err(err)?;
        }
    }

    // Labels in up to three rows along the top; a label that fits nowhere is left out (its
    // band is still drawn, and the page lists every fault).
    let style = font(12).color(&RGBColor(60, 60, 60));
    let mut rows = [i32::MIN; 3];
    let mut all: Vec<&MergedBand> = stretches.iter().chain(instants.iter()).collect();
    all.sort_by_key(|b| b.x0);
    for band in all {
        let text = band.label();
        let (w, _) = area.estimate_text_size(&text, &style).map_err(err)?;
        let w = w as i32;
        let x = (band.x0 + 3).min(width - w - 2).max(0);
        if let Some(row) = rows.iter().position(|&end| end < x) {
            rows[row] = x + w + 6;
            let y = 4 + 15 * row as i32;
            // A light backing keeps the label readable over lines and points.
            area.draw(&Rectangle::new(
                [(x - 2, y - 1), (x + w + 2, y + 13)],
                WHITE.mix(0.75).filled(),
            ))
            .map_err(err)?;
            area.draw(&Text::new(text, (x, y), style.clone()))
                .map_err(err)?;
        }
    }
    Ok(())
}

struct MergedBand {
    x0: i32,
    x1: i32,
    count: usize,
    /// Fault name -> how many.
    names: BTreeMap<String, usize>,
    first_label: String,
    unhealed: bool,
}

impl MergedBand {
    fn new(band: &FaultBand, x0: i32, x1: i32) -> MergedBand {
        let mut merged = MergedBand {
            x0,
            x1,
            count: 0,
            names: BTreeMap::new(),
            first_label: band.label(),
            unhealed: false,
        };
        merged.add(band, x1);
        merged
    }

    fn add(&mut self, band: &FaultBand, x1: i32) {
        self.x1 = self.x1.max(x1);
        self.count += 1;
        *self.names.entry(band.name.clone()).or_default() += 1;
        self.unhealed |= band.unhealed;
    }

    fn label(&self) -> String {
        let mut text = if self.count == 1 {
            self.first_label.clone()
        } else {
            self.names
                .iter()
                .map(|(name, n)| {
                    if *n == 1 {
                        name.clone()
                    } else {
                        format!("{name} ×{n}")
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        if self.unhealed {
            text.push_str(" (never healed)");
        }
        text
    }
}

/// Adds a legend entry for the fault bands (an empty series carrying only the label).
fn fault_legend<'a, DB: DrawingBackend + 'a, Y: Ranged>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
    bands: &[FaultBand],
) -> Result<(), String> {
    if bands.is_empty() {
        return Ok(());
    }
    chart
        .draw_series(std::iter::empty::<Circle<(f64, Y::ValueType), i32>>())
        .map_err(err)?
        .label(format!("nemesis fault ({})", bands.len()))
        .legend(|(x, y)| {
            Rectangle::new(
                [(x, y - 6), (x + 14, y + 6)],
                FAULT_COLOR.mix(0.35).filled(),
            )
        });
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Latency

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ok = 0,
    Fail = 1,
    Info = 2,
}

const OUTCOMES: [(Outcome, &str, RGBColor); 3] = [
    (Outcome::Ok, "ok", OK_COLOR),
    (Outcome::Fail, "fail", FAIL_COLOR),
    (Outcome::Info, "info", INFO_COLOR),
];

/// An acquire with its outcome: (invoke time s, latency ms).
struct LatencyChart<'b> {
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
    fn new(history: &History, bands: &'b [FaultBand], axis: TimeAxis, label: &str) -> Self {
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

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(err)?;
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
            )
            .map_err(err)?;
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
            .draw()
            .map_err(err)?;

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
                .draw_series(kept.into_iter().map(|p| Circle::new(p, radius, style)))
                .map_err(err)?
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
                    .draw_series(LineSeries::new(line, style))
                    .map_err(err)?
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
                .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
                .map_err(err)?
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
            .draw()
            .map_err(err)?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Rate

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

struct RateChart<'b> {
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
    fn new(history: &History, bands: &'b [FaultBand], axis: TimeAxis, label: &str) -> Self {
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

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(err)?;
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
            .build_cartesian_2d(self.axis.start..self.axis.end, 0f64..y_max)
            .map_err(err)?;
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
            .draw()
            .map_err(err)?;

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
                .draw_series(LineSeries::new(line, color.stroke_width(width)))
                .map_err(err)?
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
            .draw()
            .map_err(err)?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Fairness

/// One bar: a process, or a group of processes ranked together.
struct Bar {
    label: String,
    /// Acquisitions (mean of the group).
    acquired: f64,
    /// Acquire attempts (mean of the group).
    attempted: f64,
    /// The group's least and most acquisitions (equal for one process).
    min: u64,
    max: u64,
}

struct FairnessChart {
    bars: Vec<Bar>,
    processes: usize,
    /// Processes per bar, when ranked and grouped.
    group: usize,
    never_acquired: usize,
    jain: String,
    label: String,
}

impl FairnessChart {
    fn new(history: &History, report: &Report, label: &str) -> Self {
        let n = history.processes.len();
        let mut attempted = vec![0u64; n];
        let mut acquired = vec![0u64; n];
        for op in &history.ops {
            if op.process == NEMESIS || op.f != OpF::Acquire {
                continue;
            }
            let p = op.process as usize;
            match op.ty {
                OpType::Invoke => attempted[p] += 1,
                OpType::Ok => acquired[p] += 1,
                _ => {}
            }
        }
        // Processes that tried, in the history's numbering.
        let mut tried: Vec<(u64, u64, u64)> = (0..n)
            .filter(|&p| attempted[p] > 0)
            .map(|p| (history.processes[p], acquired[p], attempted[p]))
            .collect();
        let never_acquired = tried.iter().filter(|t| t.1 == 0).count();
        let (bars, group) = if tried.len() <= FAIRNESS_BARS {
            tried.sort_by_key(|t| t.0);
            let bars = tried
                .iter()
                .map(|&(p, ok, tries)| Bar {
                    label: p.to_string(),
                    acquired: ok as f64,
                    attempted: tries as f64,
                    min: ok,
                    max: ok,
                })
                .collect();
            (bars, 1)
        } else {
            // Too many to draw one by one: rank by acquisitions, most first, and draw each
            // group of `group` neighbours as its mean with a min-max whisker.
            tried.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let group = tried.len().div_ceil(FAIRNESS_BARS);
            let bars = tried
                .chunks(group)
                .enumerate()
                .map(|(i, chunk)| {
                    let len = chunk.len() as f64;
                    Bar {
                        label: format!("{}", i * group + 1),
                        acquired: chunk.iter().map(|t| t.1 as f64).sum::<f64>() / len,
                        attempted: chunk.iter().map(|t| t.2 as f64).sum::<f64>() / len,
                        min: chunk.iter().map(|t| t.1).min().unwrap_or(0),
                        max: chunk.iter().map(|t| t.1).max().unwrap_or(0),
                    }
                })
                .collect();
            (bars, group)
        };
        FairnessChart {
            processes: tried.len(),
            bars,
            group,
            never_acquired,
            jain: jain_summary(report),
            label: label.to_string(),
        }
    }
}

/// Jain's index from the report: the one key's, or the lowest and the mean over keys.
fn jain_summary(report: &Report) -> String {
    let keys: Vec<(&String, f64)> = report
        .stats
        .per_key
        .iter()
        .filter(|(_, s)| s.acquisitions + s.failed_attempts + s.indeterminate_attempts > 0)
        .map(|(k, s)| (k, s.fairness))
        .collect();
    match keys.as_slice() {
        [] => "Jain's index: no attempts".to_string(),
        [(key, f)] => format!("Jain's index {f:.3} ({key})"),
        _ => {
            let (min_key, min) = keys
                .iter()
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(k, f)| (*k, *f))
                .unwrap_or((keys[0].0, keys[0].1));
            let mean = keys.iter().map(|k| k.1).sum::<f64>() / keys.len() as f64;
            format!(
                "Jain's index per key: lowest {min:.3} ({min_key}), mean {mean:.3} over {} keys",
                keys.len()
            )
        }
    }
}

impl Chart for FairnessChart {
    fn title(&self) -> String {
        format!(
            "Acquisitions per client process — {} — {}",
            self.jain, self.label
        )
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(err)?;
        let n = self.bars.len().max(1);
        let top = self
            .bars
            .iter()
            .map(|b| b.attempted.max(b.max as f64))
            .fold(0f64, f64::max);
        let y_max = (top * 1.25).max(1.0);
        let mut chart = ChartBuilder::on(root)
            .caption(self.title(), font(20))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..y_max)
            .map_err(err)?;
        let x_fmt = |v: &f64| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 {
                self.bars
                    .get(i as usize)
                    .map(|b| b.label.clone())
                    .unwrap_or_default()
            } else {
                String::new()
            }
        };
        // Counts are whole numbers (a group's mean is not, but its axis is the same).
        let y_fmt = |v: &f64| {
            if v.fract().abs() < 1e-9 {
                format!("{v:.0}")
            } else {
                String::new()
            }
        };
        let y_labels = (y_max.ceil() as usize + 1).clamp(2, 10);
        let x_desc = if self.group == 1 {
            format!(
                "client process ({} that tried to acquire; {} never acquired)",
                self.processes, self.never_acquired
            )
        } else {
            format!(
                "{} processes ranked by acquisitions, most first, {} per bar (mean; whisker: least to most); {} never acquired",
                self.processes, self.group, self.never_acquired
            )
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc(x_desc)
            .y_desc(if self.group == 1 {
                "acquire attempts and acquisitions"
            } else {
                "per process (mean of the bar)"
            })
            .y_max_light_lines(2)
            .x_labels(n.min(40))
            .y_labels(y_labels)
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&y_fmt)
            .label_style(font(13))
            .axis_desc_style(font(14))
            .light_line_style(RGBColor(235, 235, 235))
            .bold_line_style(RGBColor(215, 215, 215))
            .draw()
            .map_err(err)?;

        let half = 0.38;
        chart
            .draw_series(self.bars.iter().enumerate().map(|(i, b)| {
                let x = i as f64;
                Rectangle::new(
                    [(x - half, 0.0), (x + half, b.attempted)],
                    RGBColor(120, 120, 120).stroke_width(1),
                )
            }))
            .map_err(err)?
            .label("acquire attempts (outline)")
            .legend(|(x, y)| {
                Rectangle::new(
                    [(x, y - 6), (x + 14, y + 6)],
                    RGBColor(120, 120, 120).stroke_width(1),
                )
            });
        chart
            .draw_series(self.bars.iter().enumerate().map(|(i, b)| {
                let x = i as f64;
                Rectangle::new(
                    [(x - half, 0.0), (x + half, b.acquired)],
                    OK_COLOR.mix(0.85).filled(),
                )
            }))
            .map_err(err)?
            .label("acquisitions (filled)")
            .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], OK_COLOR.filled()));
        if self.group > 1 {
            chart
                .draw_series(self.bars.iter().enumerate().map(|(i, b)| {
                    let x = i as f64;
                    PathElement::new(
                        vec![(x, b.min as f64), (x, b.max as f64)],
                        BLACK.stroke_width(1),
                    )
                }))
                .map_err(err)?;
        }
        // A process that tried and never acquired has no bar of its own: mark it.
        chart
            .draw_series(
                self.bars
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.max == 0)
                    .map(|(i, _)| {
                        EmptyElement::at((i as f64, 0.0))
                            + Text::new("0", (-4, -16), font(12).color(&RGBColor(200, 30, 30)))
                    }),
            )
            .map_err(err)?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .label_font(font(13))
            .draw()
            .map_err(err)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_latencies_and_counts() {
        assert_eq!(format_ms(0.25), "250µs");
        assert_eq!(format_ms(2.0), "2ms");
        assert_eq!(format_ms(1500.0), "1.5s");
        assert_eq!(format_ms(10.0), "10ms");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(12), "12");
    }
}
