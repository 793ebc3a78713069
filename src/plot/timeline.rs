//! Timelines: per key, one lane per client process (grouped by worker), a bar per hold with
//! its acquire and release latencies, leases and their ends, failed and indeterminate
//! operations, writes with their tokens, nemesis faults as bands and every anomaly in red.
//! One picture of the whole run per key, and a zoomed picture around each of the first
//! anomalies. Each is written as SVG and PNG.
//!
//! `model.rs` turns the history into drawable items merged to the pixel; this file lays them
//! out and paints them with plotters (the same painting for both backends).

use std::path::{Path, PathBuf};

use plotters::backend::{BitMapBackend, DrawingBackend, SVGBackend};
use plotters::coord::Shift;
use plotters::drawing::{DrawingArea, IntoDrawingArea};
use plotters::element::{Polygon, Rectangle, Text};
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{Color, FontDesc, FontStyle, RGBColor, TextStyle};

use crate::checker::holds;
use crate::history::compact::KeyId;
use crate::history::History;
use crate::report::Report;
use crate::workload::WorkloadSpec;

use super::model::{self, bar, mark, Model, Source, View, XScale};
use super::{fonts, PlotError};

/// Which worker (OS process) each client process ran in, for grouping lanes.
///
/// In a run, process number `p` is the client in slot `p % clients` (a process retired after
/// an `info` is replaced by `p + clients` in the same slot), and slot `s` runs in worker
/// `s % workers`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessGroups {
    /// 0: no groups known.
    clients: u64,
    workers: u64,
}

impl ProcessGroups {
    /// No groups: one lane per process, ordered by number.
    pub fn none() -> ProcessGroups {
        ProcessGroups::default()
    }

    pub fn new(clients: usize, workers: usize) -> ProcessGroups {
        ProcessGroups {
            clients: clients as u64,
            workers: (workers as u64).max(1),
        }
    }

    pub fn from_spec(spec: &WorkloadSpec) -> ProcessGroups {
        ProcessGroups::new(spec.clients, spec.workers)
    }

    /// From `<dir>/workload.toml`; `none()` if there is none or it does not read (with a
    /// warning: the lanes are then drawn ungrouped, which is no reason to draw nothing).
    pub fn from_run_dir(dir: &Path) -> ProcessGroups {
        match ProcessGroups::try_from_run_dir(dir) {
            Ok(groups) => groups,
            Err(e) => {
                tracing::warn!("lanes drawn without worker groups: {e}");
                ProcessGroups::none()
            }
        }
    }

    /// From `<dir>/workload.toml`; `none()` if the directory has none (a bare history), an
    /// error if it does not read.
    pub fn try_from_run_dir(dir: &Path) -> Result<ProcessGroups, PlotError> {
        let path = dir.join("workload.toml");
        if !path.is_file() {
            return Ok(ProcessGroups::none());
        }
        let spec = WorkloadSpec::from_file(&path).map_err(|e| PlotError::Input {
            path: path.clone(),
            message: e.to_string(),
        })?;
        Ok(ProcessGroups::from_spec(&spec))
    }

    pub fn is_none(&self) -> bool {
        self.clients == 0
    }

    /// The client slot of process number `p`.
    pub fn slot(&self, p: u64) -> Option<u64> {
        (self.clients > 0).then(|| p % self.clients)
    }

    /// The worker of process number `p`.
    pub fn group(&self, p: u64) -> Option<u64> {
        self.slot(p).map(|s| s % self.workers)
    }

    /// `worker-<n>`, the name faults use for the worker.
    pub fn group_label(group: u64) -> String {
        format!("worker-{group}")
    }
}

/// How to draw the timelines.
#[derive(Debug, Clone)]
pub struct TimelineOptions {
    /// Picture width in pixels.
    pub width: u32,
    /// At most this many keys get a whole-run timeline: keys with anomalies first (by their
    /// first anomaly), then the busiest.
    pub max_keys: usize,
    /// Zoomed pictures around the first this many anomalies.
    pub zooms: usize,
    /// More processes than this in one picture share rows (see `model::lanes`).
    pub max_lanes: usize,
}

impl Default for TimelineOptions {
    fn default() -> Self {
        TimelineOptions {
            width: 1600,
            max_keys: 16,
            zooms: 10,
            max_lanes: 64,
        }
    }
}

/// Where an anomaly was drawn in a picture (pixel coordinates of the picture).
#[derive(Debug, Clone, PartialEq)]
pub struct AnomalyMark {
    /// Index into `Report::anomalies`.
    pub anomaly: usize,
    /// Columns `[start, end)` of the red region.
    pub x: (i32, i32),
    /// Rows `[top, bottom)` of the red region (lanes it concerns, outermost).
    pub y: (i32, i32),
    pub label: String,
    /// The label's box `[x0, y0, x1, y1)`, if it fitted.
    pub label_box: Option<[i32; 4]>,
}

/// One drawn picture, for the HTML page.
#[derive(Debug, Clone)]
pub struct Picture {
    pub path_svg: PathBuf,
    pub path_png: PathBuf,
    pub key: String,
    /// For a zoom: the anomaly it shows (index into `Report::anomalies`); `zoom-<n>` shows
    /// anomaly `n - 1`.
    pub anomaly: Option<usize>,
    /// The run time the x axis spans, ns.
    pub x_range_ns: (i64, i64),
    /// The transform from run time to pixel columns the drawing used.
    pub scale: XScale,
    pub width: u32,
    pub height: u32,
    /// Pixel rows `[top, bottom)` of the lanes.
    pub lanes_y: (i32, i32),
    pub lanes: usize,
    pub title: String,
    pub anomalies: Vec<AnomalyMark>,
    /// What the picture says it merged or left out.
    pub notes: Vec<String>,
    /// Every text drawn (for checking the font covers it).
    pub texts: Vec<String>,
}

impl Picture {
    /// The pixel column of run time `ns`.
    pub fn column(&self, ns: i64) -> i32 {
        self.scale.column(ns)
    }
}

// Colours. Red is for anomalies only.
const ANOMALY: RGBColor = RGBColor(220, 20, 20);
const HOLD: RGBColor = RGBColor(31, 119, 180);
const LATENCY: RGBColor = RGBColor(158, 202, 232);
const PAST_LEASE: RGBColor = RGBColor(245, 166, 35);
const LEASE: RGBColor = RGBColor(44, 160, 44);
/// A lease end that came after a clean release.
const LEASE_IDLE: RGBColor = RGBColor(170, 220, 170);
const ATTEMPT: RGBColor = RGBColor(175, 175, 175);
const FAIL: RGBColor = RGBColor(90, 90, 90);
const INFO: RGBColor = RGBColor(148, 52, 200);
const WRITE: RGBColor = RGBColor(0, 0, 0);
const WRITE_REJECTED: RGBColor = RGBColor(150, 150, 150);
const TEXT: RGBColor = RGBColor(20, 20, 20);
const MUTED: RGBColor = RGBColor(95, 95, 95);
const GRID: RGBColor = RGBColor(228, 228, 228);
const ZEBRA: RGBColor = RGBColor(246, 246, 246);
const WHITE: RGBColor = RGBColor(255, 255, 255);

fn fault_color(name: &str) -> RGBColor {
    match name {
        "pause" => RGBColor(120, 120, 120),
        "partition" | "slow" => RGBColor(148, 103, 189),
        "kill" | "crash-point" | "stop" => RGBColor(60, 60, 60),
        "clock" => RGBColor(23, 160, 180),
        "failover" => RGBColor(70, 100, 170),
        _ => RGBColor(127, 127, 127),
    }
}

const TITLE_SIZE: f64 = 18.0;
const TEXT_SIZE: f64 = 14.0;
const SMALL_SIZE: f64 = 13.0;
const ROW: i32 = 17;
const MAX_FAULT_ROWS: usize = 2;
const MAX_ANOMALY_ROWS: usize = 3;
/// Marks closer than this (pixels) join into a strip.
const MARK_GAP: usize = 3;
/// Marks are drawn as shapes only in lanes with at most one per this many pixels (of a
/// kind); otherwise as small ticks.
const SHAPE_SPACING: usize = 40;
/// Token labels only in lanes with at most one write per this many pixels.
const TOKEN_SPACING: usize = 60;
/// Above this many runs, bars and marks are joined across small gaps to keep files small.
const RUN_BUDGET: usize = 40_000;

fn text_width(text: &str, size: f64) -> i32 {
    FontDesc::new(fonts::FAMILY.into(), size, FontStyle::Normal)
        .box_size(text)
        .map(|(w, _)| w as i32)
        .unwrap_or_else(|_| (text.chars().count() as f64 * size * 0.62) as i32)
}

/// Draws the timelines of `history` (see the module doc) into `out_dir`.
pub fn draw_timelines(
    history: &History,
    report: &Report,
    groups: &ProcessGroups,
    out_dir: &Path,
    options: &TimelineOptions,
) -> Result<Vec<Picture>, PlotError> {
    fonts::register();
    std::fs::create_dir_all(out_dir).map_err(|source| PlotError::Io {
        path: out_dir.to_path_buf(),
        source,
    })?;
    if history.ops.is_empty() {
        return Ok(Vec::new());
    }
    let holds = holds::derive(history);

    // Which keys get a whole-run picture.
    let mut busy = vec![0u64; history.keys.len()];
    for op in &history.ops {
        if let Some(n) = busy.get_mut(op.key as usize) {
            *n += 1;
        }
    }
    let key_id = |name: &str| history.keys.iter().position(|k| k == name);
    let mut chosen: Vec<usize> = Vec::new();
    let mut anomaly_keys = 0usize;
    for a in &report.anomalies {
        if let Some(k) = key_id(&a.key) {
            if !chosen.contains(&k) {
                chosen.push(k);
                anomaly_keys += 1;
            }
        }
    }
    let mut rest: Vec<usize> = (0..history.keys.len())
        .filter(|k| !chosen.contains(k) && busy[*k] > 0)
        .collect();
    rest.sort_by_key(|&k| (std::cmp::Reverse(busy[k]), k));
    chosen.extend(rest);
    let keys_with_ops = chosen.len();
    chosen.truncate(options.max_keys.max(1));
    let mut key_note = None;
    if keys_with_ops > chosen.len() {
        let left_anomalous = anomaly_keys.saturating_sub(chosen.len());
        key_note = Some(format!(
            "Timelines drawn for {} of {} keys (keys with anomalies first, then the busiest){}",
            chosen.len(),
            keys_with_ops,
            if left_anomalous > 0 {
                format!("; {left_anomalous} keys with anomalies are not drawn")
            } else {
                String::new()
            }
        ));
    }

    let zooms: Vec<usize> = (0..report.anomalies.len().min(options.zooms)).collect();
    let mut needed: Vec<KeyId> = chosen.iter().map(|&k| k as KeyId).collect();
    for &a in &zooms {
        if let Some(k) = key_id(&report.anomalies[a].key) {
            needed.push(k as KeyId);
        }
    }
    needed.sort_unstable();
    needed.dedup();
    let src = Source::new(history, &holds, report, groups, &needed);
    let width = options.width.max(400);
    let left = if groups.is_none() { 96 } else { 176 };
    let right = width as i32 - 24;

    let (first, last) = history.time_span();
    let pad = ((last - first) / 100).max(1_000_000);
    // Not before the run began (time 0), unless the history does.
    let whole = ((first - pad).max(first.min(0)), last + pad);

    let mut pictures = Vec::new();
    for &k in &chosen {
        let name = &history.keys[k];
        let anomalies: Vec<usize> = report
            .anomalies
            .iter()
            .enumerate()
            .filter(|(_, a)| &a.key == name)
            .map(|(i, _)| i)
            .collect();
        let view = View {
            key: name,
            scale: XScale::new(whole.0, whole.1, left, right),
            active_only: false,
            max_lanes: options.max_lanes,
            anomalies,
        };
        let mut m = model::build(&src, &view);
        if let Some(note) = &key_note {
            m.notes.insert(0, note.clone());
        }
        let stem = format!("timeline-{}", file_safe(name));
        let title = format!(
            "{name}: the whole run, {} – {} s",
            seconds(whole.0, 2),
            seconds(whole.1, 2)
        );
        let subtitle = summary_line(&m, report, history);
        pictures.push(draw_picture(
            &m,
            Texts {
                title,
                subtitle: vec![subtitle],
            },
            out_dir,
            &stem,
            None,
            width,
        )?);
    }

    for &a in &zooms {
        let anomaly = &report.anomalies[a];
        // The anomaly's span, widened to its events that lie near it (an event far away,
        // such as the acquire of a hold that began long before, would shrink the anomaly to
        // a sliver: its hold runs in from the left edge instead).
        let (start, end) = (
            anomaly.start.min(anomaly.end),
            anomaly.start.max(anomaly.end),
        );
        let reach = end.saturating_sub(start).max(1_000_000).saturating_mul(2);
        let (mut lo, mut hi) = (start, end);
        for &i in &anomaly.indices {
            if let Some(t) = src.time_of(i) {
                if t >= start - reach && t <= end + reach {
                    lo = lo.min(t);
                    hi = hi.max(t);
                }
            }
        }
        let span = (hi - lo).max(0);
        let min_window = 2_000_000;
        let pad = (span / 5).max((min_window - span) / 2).max(100_000);
        // Not before the run's first event nor after its last (with the whole run's margin).
        let (t0, t1) = ((lo - pad).max(whole.0), (hi + pad).min(whole.1));
        let view = View {
            key: &anomaly.key,
            scale: XScale::new(t0, t1, left, right),
            active_only: true,
            max_lanes: options.max_lanes,
            anomalies: report
                .anomalies
                .iter()
                .enumerate()
                .filter(|(i, b)| *i == a || (b.key == anomaly.key && b.start <= t1 && b.end >= t0))
                .map(|(i, _)| i)
                .collect(),
        };
        let m = model::build(&src, &view);
        let title = format!(
            "Anomaly #{}: {} on {}, events {}; zoomed to {} – {} s",
            a + 1,
            anomaly.kind,
            anomaly.key,
            anomaly
                .indices
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            seconds(t0, 3),
            seconds(t1, 3)
        );
        let mut subtitle = wrap(&anomaly.explanation, ((width as f64) / 7.2) as usize, 3);
        if !anomaly.tokens.is_empty() {
            subtitle.push(format!(
                "tokens: {}",
                anomaly
                    .tokens
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        pictures.push(draw_picture(
            &m,
            Texts { title, subtitle },
            out_dir,
            &format!("zoom-{}", a + 1),
            Some(a),
            width,
        )?);
    }
    Ok(pictures)
}

fn summary_line(m: &Model, report: &Report, history: &History) -> String {
    let mut kinds: Vec<(String, usize)> = Vec::new();
    for item in &m.anomalies {
        let kind = &report.anomalies[item.anomaly].kind;
        match kinds.iter_mut().find(|(k, _)| k == kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((kind.clone(), 1)),
        }
    }
    let anomalies = if kinds.is_empty() {
        "no anomalies".to_string()
    } else {
        kinds
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "{}, {}; {}; {}",
        plural(m.holds, "hold"),
        plural(m.processes, "process"),
        anomalies,
        plural(history.faults.len(), "fault event")
    )
}

fn plural(n: usize, what: &str) -> String {
    match (n, what.ends_with('s')) {
        (1, _) => format!("1 {what}"),
        (_, true) => format!("{n} {what}es"),
        _ => format!("{n} {what}s"),
    }
}

/// `ns` as seconds with `decimals` places.
fn seconds(ns: i64, decimals: usize) -> String {
    format!("{:.*}", decimals, ns as f64 / 1e9)
}

fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Splits `text` into at most `lines` lines of about `width` characters.
fn wrap(text: &str, width: usize, lines: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            out.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push(line);
    }
    if out.len() > lines {
        out.truncate(lines);
        if let Some(last) = out.last_mut() {
            last.push_str(" …");
        }
    }
    out
}

struct Texts {
    title: String,
    subtitle: Vec<String>,
}

/// A text to draw.
#[derive(Clone)]
struct Label {
    text: String,
    x: i32,
    y: i32,
    size: f64,
    color: RGBColor,
    h: HPos,
    /// Draw a white box behind it.
    boxed: bool,
}

/// A filled rectangle `[x0, x1) × [y0, y1)`.
#[derive(Debug, Clone, Copy)]
struct Fill {
    x0: i32,
    y0: i32,
    x1: i32,
    y1: i32,
    color: RGBColor,
    alpha: f64,
}

/// Everything a picture paints, in order, in pixel coordinates.
#[derive(Default)]
struct Scene {
    /// Backgrounds: lanes, grid, fault bands, anomaly regions.
    under: Vec<Fill>,
    fills: Vec<Fill>,
    polygons: Vec<(Vec<(i32, i32)>, RGBColor)>,
    /// Anomaly outlines, over the bars.
    outlines: Vec<Fill>,
    /// Marks: drawn last, over the outlines.
    top_fills: Vec<Fill>,
    labels: Vec<Label>,
}

impl Scene {
    /// The × of a failed operation, centred on (cx, cy), `r` pixels to each side.
    fn cross(&mut self, cx: i32, cy: i32, r: i32) {
        for (from, to) in [
            ((cx - r, cy - r), (cx + r, cy + r)),
            ((cx + r, cy - r), (cx - r, cy + r)),
        ] {
            self.polygons
                .push((vec![from, (from.0 + 1, from.1), (to.0 + 1, to.1), to], FAIL));
        }
    }

    fn fill(&mut self, x0: i32, y0: i32, x1: i32, y1: i32, color: RGBColor, alpha: f64) {
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

    fn under(&mut self, x0: i32, y0: i32, x1: i32, y1: i32, color: RGBColor, alpha: f64) {
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

    fn text(&mut self, text: impl Into<String>, x: i32, y: i32, size: f64, color: RGBColor) {
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
struct Rows {
    ends: Vec<i32>,
}

impl Rows {
    fn new(n: usize) -> Rows {
        Rows {
            ends: vec![i32::MIN; n],
        }
    }

    fn place(&mut self, x0: i32, x1: i32) -> Option<usize> {
        let row = self.ends.iter().position(|&end| end + 8 <= x0)?;
        self.ends[row] = x1;
        Some(row)
    }
}

fn draw_picture(
    m: &Model,
    texts: Texts,
    out_dir: &Path,
    stem: &str,
    focus: Option<usize>,
    width: u32,
) -> Result<Picture, PlotError> {
    let scale = m.scale;
    let (left, right) = (scale.left, scale.right);
    let plot_w = scale.width();
    let mut scene = Scene::default();
    let mut all_texts = Vec::new();

    // Header.
    let mut y = 10;
    scene.text(texts.title.clone(), 12, y, TITLE_SIZE, TEXT);
    y += 26;
    for line in &texts.subtitle {
        scene.text(line.clone(), 12, y, TEXT_SIZE, TEXT);
        y += ROW + 2;
    }
    for note in &m.notes {
        scene.text(format!("Note: {note}"), 12, y, SMALL_SIZE, MUTED);
        y += ROW;
    }
    y += 6;

    // Fault labels, then anomaly labels, above the lanes.
    let band_x = |c: usize| left + c as i32;
    let mut fault_rows = Rows::new(MAX_FAULT_ROWS);
    let mut fault_labels = Vec::new();
    let mut unlabelled_bands = 0;
    for band in &m.bands {
        let w = text_width(&band.label, SMALL_SIZE);
        let x = band_x(band.start).min(right - w).max(left);
        match fault_rows.place(x, x + w) {
            Some(row) => fault_labels.push((row, x, band)),
            None => unlabelled_bands += 1,
        }
    }
    let fault_strip = if m.bands.is_empty() {
        0
    } else {
        fault_labels
            .iter()
            .map(|(r, _, _)| r + 1)
            .max()
            .unwrap_or(0) as i32
            * ROW
    };
    let fault_top = y;
    y += fault_strip;

    let mut anomaly_rows = Rows::new(MAX_ANOMALY_ROWS);
    let mut anomaly_labels: Vec<Option<(usize, i32, i32)>> = vec![None; m.anomalies.len()];
    // The focus of a zoom is labelled first.
    let mut order: Vec<usize> = (0..m.anomalies.len()).collect();
    order.sort_by_key(|&i| (Some(m.anomalies[i].anomaly) != focus, m.anomalies[i].start));
    for i in order {
        let item = &m.anomalies[i];
        let w = text_width(&item.label, SMALL_SIZE);
        let x = band_x(item.start).min(right - w).max(left);
        if let Some(row) = anomaly_rows.place(x, x + w) {
            anomaly_labels[i] = Some((row, x, w));
        }
    }
    let anomaly_strip = anomaly_labels
        .iter()
        .flatten()
        .map(|(r, _, _)| r + 1)
        .max()
        .unwrap_or(0) as i32
        * ROW;
    let anomaly_top = y;
    y += anomaly_strip + 4;

    // Lanes.
    let n = m.lanes.len();
    let lane_h: i32 = if n == 0 {
        24
    } else {
        (900 / n as i32).clamp(2, if focus.is_some() { 40 } else { 32 })
    };
    let group_gap = if lane_h >= 6 { 4 } else { 1 };
    let lanes_top = y;
    let mut lane_y = Vec::with_capacity(n);
    let mut yy = lanes_top;
    for (i, lane) in m.lanes.iter().enumerate() {
        if i > 0 && lane.group != m.lanes[i - 1].group {
            yy += group_gap;
        }
        lane_y.push(yy);
        yy += lane_h;
    }
    let lanes_bottom = yy.max(lanes_top + lane_h);

    // Background: zebra lanes and the time grid.
    if lane_h >= 6 {
        for (i, &ly) in lane_y.iter().enumerate() {
            if i % 2 == 1 {
                scene.under(left, ly, right, ly + lane_h, ZEBRA, 1.0);
            }
        }
    }
    let ticks = time_ticks(&scale);
    for &(t, _) in &ticks {
        let x = scale.column(t);
        scene.under(x, lanes_top, x + 1, lanes_bottom, GRID, 1.0);
    }

    // Fault bands across every lane, darker on the lanes they name.
    for band in &m.bands {
        let c = fault_color(&band.name);
        scene.under(
            band_x(band.start),
            fault_top,
            band_x(band.end),
            lanes_bottom,
            c,
            if band.instant { 0.1 } else { 0.14 },
        );
    }
    for (row, x, band) in &fault_labels {
        scene.text(
            band.label.clone(),
            *x,
            fault_top + *row as i32 * ROW + 1,
            SMALL_SIZE,
            MUTED,
        );
    }

    // Lanes: runs of equal columns, joined across small gaps if there are too many.
    let mut gap = 0;
    loop {
        let total: usize = m
            .cells
            .iter()
            .map(|c| {
                model::runs(c.bar.iter().copied(), gap).len()
                    + mark::ALL
                        .iter()
                        .map(|&f| {
                            model::runs(c.marks.iter().map(|&v| u8::from(v & f != 0)), gap).len()
                        })
                        .sum::<usize>()
            })
            .sum();
        if total <= RUN_BUDGET || gap >= 64 {
            break;
        }
        gap = (gap * 2).max(1);
    }
    let label_tokens = lane_h >= 14;
    // Marks a few pixels apart join into a run; a run wider than a mark is a dense
    // stretch, drawn as a thin strip so that it does not hide the bars. And where any lane
    // has many marks of a kind, every lane draws that kind as small ticks (a rug), so that
    // marks do not bury the holds and one kind looks the same in every lane.
    let mark_gap = gap.max(MARK_GAP);
    let rug_of = |flag: u16, min_lane_h: i32| {
        lane_h < min_lane_h
            || m.cells.iter().any(|c| {
                model::runs(c.marks.iter().map(|&v| u8::from(v & flag != 0)), mark_gap).len()
                    > plot_w / SHAPE_SPACING
            })
    };
    let fail_rug = rug_of(mark::FAIL, 10);
    let info_rug = rug_of(mark::INFO, 8);
    let write_rug = rug_of(mark::WRITE, 0) || rug_of(mark::WRITE_REJECTED, 0);
    let end_rug = rug_of(mark::LEASE_END, 0) || rug_of(mark::LEASE_END_IDLE, 0);
    for (i, cells) in m.cells.iter().enumerate() {
        let ly = lane_y[i];
        let at = |f: f64| ly + (lane_h as f64 * f).round() as i32;
        let flag_runs =
            |f: u16| model::runs(cells.marks.iter().map(|&v| u8::from(v & f != 0)), gap);
        let mark_runs =
            |f: u16| model::runs(cells.marks.iter().map(|&v| u8::from(v & f != 0)), mark_gap);
        for run in flag_runs(mark::FAULT) {
            scene.under(
                band_x(run.start),
                ly,
                band_x(run.end),
                ly + lane_h,
                FAIL,
                0.3,
            );
        }
        for run in flag_runs(mark::ATTEMPT) {
            let y0 = at(0.78);
            scene.fill(
                band_x(run.start),
                y0,
                band_x(run.end),
                y0 + 1.max(lane_h / 12),
                ATTEMPT,
                1.0,
            );
        }
        for run in model::runs(cells.bar.iter().copied(), gap) {
            let (y0, y1, color) = match run.value {
                bar::LATENCY => (at(0.42), at(0.82), LATENCY),
                bar::HOLD => (at(0.3), at(0.92), HOLD),
                _ => (at(0.3), at(0.92), PAST_LEASE),
            };
            scene.fill(
                band_x(run.start),
                y0,
                band_x(run.end),
                y1.max(y0 + 1),
                color,
                1.0,
            );
        }
        let line_h = 1.max(lane_h / 10);
        // The thin lines above a lane's bars: the lease, faint where the lock may still be
        // taken after the hold ended, and an info acquire's possible hold.
        for (flag, color, alpha) in [
            (mark::LEASE, LEASE, 1.0),
            (mark::LEASE_AFTER, LEASE, 0.45),
            (mark::MAYBE, INFO, 0.45),
        ] {
            let y0 = at(0.12);
            for run in flag_runs(flag) {
                scene.fill(
                    band_x(run.start),
                    y0,
                    band_x(run.end),
                    y0 + line_h,
                    color,
                    alpha,
                );
            }
        }
        if let (Some(until), true) = (cells.lease_beyond, lane_h >= 16) {
            let text = format!("lease to {} s ▸", seconds(until, 3));
            scene.labels.push(Label {
                text,
                x: right - 2,
                y: at(0.12) - 6,
                size: 11.0,
                color: RGBColor(20, 110, 20),
                h: HPos::Right,
                boxed: true,
            });
        }
        let tri = (lane_h / 4).clamp(1, 6);
        for (flag, color) in [(mark::LEASE_END_IDLE, LEASE_IDLE), (mark::LEASE_END, LEASE)] {
            for run in mark_runs(flag) {
                let x = band_x(run.start) + (run.end - run.start) as i32 / 2;
                let (y0, y1) = (at(0.02), at(0.3));
                if end_rug || run.end - run.start > MARK_GAP {
                    scene.fill(band_x(run.start), y0, band_x(run.end), y1, color, 1.0);
                    continue;
                }
                scene
                    .polygons
                    .push((vec![(x - tri, y0), (x + tri, y0), (x, y1)], color));
            }
        }
        let dense = |run: &model::Run| run.end - run.start > MARK_GAP;
        let rug = fail_rug;
        for run in mark_runs(mark::FAIL) {
            let (x0, x1) = (band_x(run.start), band_x(run.end));
            if rug || dense(&run) {
                scene.top_fills.push(Fill {
                    x0,
                    y0: at(0.86),
                    x1: x1.max(x0 + 1),
                    y1: ly + lane_h,
                    color: FAIL,
                    alpha: 1.0,
                });
                continue;
            }
            // A small × where it is readable.
            let r = (lane_h / 5).clamp(2, 4);
            let (cx, cy) = (x0 + (x1 - x0 - 1) / 2, at(0.7));
            scene.cross(cx, cy, r);
        }
        let rug = info_rug;
        for run in mark_runs(mark::INFO) {
            let (x0, x1) = (band_x(run.start), band_x(run.end));
            if rug || dense(&run) {
                scene.top_fills.push(Fill {
                    x0,
                    y0: at(0.2),
                    x1: x1.max(x0 + 1),
                    y1: at(0.3).max(at(0.2) + 1),
                    color: INFO,
                    alpha: 1.0,
                });
                continue;
            }
            let r = (lane_h / 5).clamp(2, 5);
            let (cx, cy) = (x0 + (x1 - x0 - 1) / 2, at(0.6));
            scene.polygons.push((
                vec![(cx, cy - r), (cx + r, cy), (cx, cy + r), (cx - r, cy)],
                INFO,
            ));
        }
        let tick_w = if lane_h >= 16 && focus.is_some() {
            2
        } else {
            1
        };
        let mut sparse_writes = true;
        for (flag, color) in [(mark::WRITE, WRITE), (mark::WRITE_REJECTED, WRITE_REJECTED)] {
            let rug = write_rug;
            sparse_writes &= !rug;
            for run in mark_runs(flag) {
                let x0 = band_x(run.start);
                if rug || dense(&run) {
                    sparse_writes = false;
                    let x1 = band_x(run.end);
                    scene.top_fills.push(Fill {
                        x0,
                        y0: at(0.3),
                        x1,
                        y1: at(0.38).max(at(0.3) + 1),
                        color,
                        alpha: 1.0,
                    });
                    continue;
                }
                // Each write of the run as its own tick.
                for c in run.start..run.end {
                    if cells.marks[c] & flag != 0 {
                        let x = band_x(c);
                        scene.top_fills.push(Fill {
                            x0: x,
                            y0: at(0.1),
                            x1: x + tick_w,
                            y1: ly + lane_h,
                            color,
                            alpha: 1.0,
                        });
                    }
                }
            }
        }
        // Tokens where the lane's writes are sparse enough to read.
        let label_tokens =
            label_tokens && sparse_writes && cells.writes.len() <= plot_w / TOKEN_SPACING;
        if label_tokens {
            let size = (lane_h as f64 * 0.55).clamp(9.0, 12.0);
            let mut free_from = i32::MIN;
            for (j, w) in cells.writes.iter().enumerate() {
                let text = match (w.token, w.rejected) {
                    (Some(t), false) => format!("w{t}"),
                    (Some(t), true) => format!("w{t} rejected"),
                    (None, false) => "w".to_string(),
                    (None, true) => "w rejected".to_string(),
                };
                let tick = band_x(w.cell);
                let tw = text_width(&text, size) + 2;
                let next = cells.writes.get(j + 1).map_or(right, |n| band_x(n.cell));
                // Right of the tick, or left of it where the right is taken.
                let x = if tick + tick_w + 2 + tw < next.min(right) {
                    tick + tick_w + 2
                } else {
                    tick - 2 - tw
                };
                if x >= free_from.max(left) && x + tw < next.min(right) + tick_w {
                    scene.labels.push(Label {
                        text,
                        x,
                        y: at(0.1),
                        size,
                        color: TEXT,
                        h: HPos::Left,
                        boxed: true,
                    });
                    free_from = x + tw + 2;
                }
            }
        }
    }

    // Lane and group labels.
    let lane_label_size = (lane_h as f64 * 0.75).clamp(8.0, 12.0);
    let every = if lane_h >= 9 {
        1
    } else {
        (12 / lane_h.max(1)) as usize + 1
    };
    for (i, lane) in m.lanes.iter().enumerate() {
        if i % every != 0 {
            continue;
        }
        scene.labels.push(Label {
            text: lane.label.clone(),
            x: left - 6,
            y: lane_y[i] + lane_h / 2 - (lane_label_size * 0.45) as i32,
            size: lane_label_size,
            color: TEXT,
            h: HPos::Right,
            boxed: false,
        });
    }
    let mut g = 0;
    while g < m.lanes.len() {
        let group = m.lanes[g].group;
        let mut e = g;
        while e < m.lanes.len() && m.lanes[e].group == group {
            e += 1;
        }
        if let Some(group) = group {
            let (top, bottom) = (lane_y[g], lane_y[e - 1] + lane_h);
            scene.fill(8, top, 11, bottom, MUTED, 1.0);
            if g > 0 {
                scene.fill(
                    8,
                    top - group_gap / 2 - 1,
                    right,
                    top - group_gap / 2,
                    MUTED,
                    0.6,
                );
            }
            scene.text(
                ProcessGroups::group_label(group),
                16,
                top + (bottom - top) / 2 - 7,
                SMALL_SIZE,
                TEXT,
            );
        }
        g = e;
    }

    // Anomalies, in red, over everything in the lanes.
    let mut marks = Vec::new();
    for (i, item) in m.anomalies.iter().enumerate() {
        let (x0, x1) = (band_x(item.start), band_x(item.end));
        let rows: Vec<(i32, i32)> = if item.lanes.is_empty() {
            vec![(lanes_top, lanes_bottom)]
        } else {
            item.lanes
                .iter()
                .map(|&l| (lane_y[l], lane_y[l] + lane_h))
                .collect()
        };
        let top = rows.iter().map(|r| r.0).min().unwrap_or(lanes_top);
        let bottom = rows.iter().map(|r| r.1).max().unwrap_or(lanes_bottom);
        let edge = if x1 - x0 >= 6 && lane_h >= 6 { 2 } else { 1 };
        for &(r0, r1) in &rows {
            scene.under(x0, r0, x1, r1, ANOMALY, 0.3);
            for (a0, b0, a1, b1) in [
                (x0, r0, x1, r0 + edge),
                (x0, r1 - edge, x1, r1),
                (x0, r0, x0 + edge, r1),
                (x1 - edge, r0, x1, r1),
            ] {
                scene.outlines.push(Fill {
                    x0: a0,
                    y0: b0,
                    x1: a1,
                    y1: b1,
                    color: ANOMALY,
                    alpha: 1.0,
                });
            }
        }
        // Brackets joining the lanes it concerns, up to its label.
        let label = anomaly_labels[i];
        let bracket_top = label.map_or(top, |(row, _, _)| anomaly_top + row as i32 * ROW + ROW - 2);
        for x in [x0, x1 - 1] {
            scene.outlines.push(Fill {
                x0: x,
                y0: bracket_top,
                x1: x + 1,
                y1: bottom,
                color: ANOMALY,
                alpha: 0.9,
            });
        }
        let label_box = label.map(|(row, lx, w)| {
            let ly = anomaly_top + row as i32 * ROW;
            scene.labels.push(Label {
                text: item.label.clone(),
                x: lx,
                y: ly,
                size: SMALL_SIZE,
                color: ANOMALY,
                h: HPos::Left,
                boxed: true,
            });
            [lx, ly, lx + w, ly + ROW - 2]
        });
        marks.push(AnomalyMark {
            anomaly: item.anomaly,
            x: (x0, x1),
            y: (top, bottom),
            label: item.label.clone(),
            label_box,
        });
    }
    let unlabelled = anomaly_labels.iter().filter(|l| l.is_none()).count();

    // Axis.
    let mut y = lanes_bottom + 2;
    scene.fill(left, y, right, y + 1, MUTED, 1.0);
    for (t, text) in &ticks {
        let x = scale.column(*t);
        scene.fill(x, y, x + 1, y + 5, MUTED, 1.0);
        scene.labels.push(Label {
            text: text.clone(),
            x,
            y: y + 7,
            size: SMALL_SIZE,
            color: TEXT,
            h: HPos::Center,
            boxed: false,
        });
    }
    y += 24;
    let mut axis_title = "run time (s)".to_string();
    if unlabelled > 0 {
        axis_title.push_str(&format!(
            "   ·   {unlabelled} of {} anomalies drawn here are too close to others to be labelled; every one is drawn in red",
            m.anomalies.len()
        ));
    }
    if unlabelled_bands > 0 {
        axis_title.push_str(&format!("   ·   {unlabelled_bands} fault bands unlabelled"));
    }
    scene.text(axis_title, left, y, SMALL_SIZE, MUTED);
    y += ROW + 10;

    // Legend.
    y = legend(&mut scene, y, width as i32, plot_w);
    let height = (y + 10) as u32;

    for l in &scene.labels {
        all_texts.push(l.text.clone());
    }
    let path_svg = out_dir.join(format!("{stem}.svg"));
    let path_png = out_dir.join(format!("{stem}.png"));
    {
        let root = SVGBackend::new(&path_svg, (width, height)).into_drawing_area();
        paint(&root, &scene, false).map_err(|message| PlotError::Draw {
            path: path_svg.clone(),
            message,
        })?;
    }
    {
        let root = BitMapBackend::new(&path_png, (width, height)).into_drawing_area();
        paint(&root, &scene, true).map_err(|message| PlotError::Draw {
            path: path_png.clone(),
            message,
        })?;
    }
    Ok(Picture {
        path_svg,
        path_png,
        key: m.key.clone(),
        anomaly: focus,
        x_range_ns: (scale.t0, scale.t1),
        scale,
        width,
        height,
        lanes_y: (lanes_top, lanes_bottom),
        lanes: m.lanes.len(),
        title: texts.title,
        anomalies: marks,
        notes: m.notes.clone(),
        texts: all_texts,
    })
}

/// Draws the legend from row `y`; returns the row below it.
fn legend(scene: &mut Scene, mut y: i32, width: i32, _plot_w: usize) -> i32 {
    #[derive(Clone, Copy)]
    enum Swatch {
        Bar(RGBColor, f64, f64),
        Tick(RGBColor),
        Line(RGBColor),
        Faint(RGBColor),
        Triangle(RGBColor),
        Cross,
        Diamond(RGBColor),
        Band(RGBColor),
        Anomaly,
    }
    let items: [(Swatch, &str); 14] = [
        (
            Swatch::Bar(HOLD, 0.3, 0.92),
            "hold: acquire ok → release invoke",
        ),
        (
            Swatch::Bar(LATENCY, 0.42, 0.82),
            "acquire / release latency",
        ),
        (
            Swatch::Bar(PAST_LEASE, 0.3, 0.92),
            "held after its lease ran out",
        ),
        (Swatch::Line(LEASE), "lease"),
        (
            Swatch::Triangle(LEASE),
            "lease end (faint: after a clean release)",
        ),
        (
            Swatch::Faint(LEASE),
            "lease after a kill or unclean release (may still be taken)",
        ),
        (
            Swatch::Faint(INFO),
            "may hold: info acquire, to the longest lease",
        ),
        (
            Swatch::Line(ATTEMPT),
            "failed acquire, or op of unknown outcome",
        ),
        (Swatch::Cross, "failed op"),
        (Swatch::Diamond(INFO), "indeterminate (info) op"),
        (Swatch::Tick(WRITE), "write accepted (w<token>)"),
        (Swatch::Tick(WRITE_REJECTED), "write rejected"),
        (
            Swatch::Band(fault_color("pause")),
            "fault (darker: processes it hit)",
        ),
        (Swatch::Anomaly, "anomaly #n kind [event indices]"),
    ];
    let mut x = 12;
    let h = 14;
    for (swatch, text) in items {
        let w = 24 + 6 + text_width(text, SMALL_SIZE) + 18;
        if x + w > width - 12 {
            x = 12;
            y += ROW + 4;
        }
        let at = |f: f64| y + (h as f64 * f) as i32;
        match swatch {
            Swatch::Bar(c, a, b) => scene.fill(x, at(a), x + 24, at(b), c, 1.0),
            Swatch::Tick(c) => scene.fill(x + 11, y, x + 13, y + h, c, 1.0),
            Swatch::Line(c) => scene.fill(x, at(0.45), x + 24, at(0.45) + 2, c, 1.0),
            Swatch::Faint(c) => scene.fill(x, at(0.45), x + 24, at(0.45) + 2, c, 0.45),
            Swatch::Triangle(c) => scene
                .polygons
                .push((vec![(x + 6, y + 1), (x + 18, y + 1), (x + 12, y + 10)], c)),
            Swatch::Cross => {
                let (cx, cy, r) = (x + 12, y + 7, 5);
                scene.cross(cx, cy, r);
            }
            Swatch::Diamond(c) => scene.polygons.push((
                vec![
                    (x + 12, y + 1),
                    (x + 18, y + 7),
                    (x + 12, y + 13),
                    (x + 6, y + 7),
                ],
                c,
            )),
            Swatch::Band(c) => scene.fill(x, y, x + 24, y + h, c, 0.35),
            Swatch::Anomaly => {
                scene.fill(x, y, x + 24, y + h, ANOMALY, 0.22);
                scene.fill(x, y, x + 24, y + 2, ANOMALY, 1.0);
                scene.fill(x, y + h - 2, x + 24, y + h, ANOMALY, 1.0);
                scene.fill(x, y, x + 2, y + h, ANOMALY, 1.0);
                scene.fill(x + 22, y, x + 24, y + h, ANOMALY, 1.0);
            }
        }
        scene.text(text, x + 30, y, SMALL_SIZE, TEXT);
        x += w;
    }
    y + ROW + 4
}

/// Tick times and labels: a round step giving about one tick per 110 pixels.
fn time_ticks(scale: &XScale) -> Vec<(i64, String)> {
    let span = (scale.t1 - scale.t0) as f64;
    let target = (scale.width() as f64 / 110.0).max(2.0);
    let raw = span / target;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
        .max(1.0);
    let decimals = (9.0 - step.log10().floor()).clamp(0.0, 9.0) as usize;
    let first = (scale.t0 as f64 / step).ceil() as i64;
    let mut out = Vec::new();
    let mut k = first;
    loop {
        let t = (k as f64 * step).round() as i64;
        if t > scale.t1 || out.len() > 200 {
            break;
        }
        out.push((t, format!("{:.*}", decimals, t as f64 / 1e9)));
        k += 1;
    }
    out
}

/// Where plotters puts a glyph's ink and where it belongs: plotters' ab_glyph renderer
/// starts each glyph's ink at a whole-pixel pen position, dropping the glyph's left side
/// bearing, so small text drawn whole has uneven gaps. Drawn glyph by glyph instead, each
/// glyph goes where its pen position (the advance of the text before it, measured at 8× the
/// size for sub-pixel precision) plus its side bearing (estimated as half of what its advance
/// leaves around its ink) puts it, rounded once.
struct Glyphs;

/// Metrics at `GLYPH_SCALE`× the size: (advance, ink width), per (char, size).
type GlyphMetrics = std::collections::HashMap<(char, u64), (f64, f64)>;
const GLYPH_SCALE: f64 = 8.0;

impl Glyphs {
    fn metrics(c: char, size: f64) -> (f64, f64) {
        static CACHE: std::sync::OnceLock<std::sync::Mutex<GlyphMetrics>> =
            std::sync::OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let key = (c, size.to_bits());
        if let Some(m) = cache.lock().ok().and_then(|m| m.get(&key).copied()) {
            return m;
        }
        let big = FontDesc::new(fonts::FAMILY.into(), size * GLYPH_SCALE, FontStyle::Normal);
        let text = c.to_string();
        let advance = big.box_size(&text).map(|(w, _)| w as f64).unwrap_or(0.0);
        let (mut lo, mut hi) = (i32::MAX, i32::MIN);
        let drawn = big.draw(&text, (0, 0), |x, _, a| {
            if a > 0.0 {
                lo = lo.min(x);
                hi = hi.max(x);
            }
            Ok::<(), ()>(())
        });
        let ink = match drawn {
            Ok(Ok(())) if hi >= lo => (hi - lo + 1) as f64,
            _ => 0.0,
        };
        let m = (advance / GLYPH_SCALE, ink / GLYPH_SCALE);
        if let Ok(mut map) = cache.lock() {
            map.insert(key, m);
        }
        m
    }

    /// Each visible character of `text` with its x, for text starting at `x`.
    fn place(text: &str, x: i32, size: f64) -> Vec<(char, i32)> {
        let big = FontDesc::new(fonts::FAMILY.into(), size * GLYPH_SCALE, FontStyle::Normal);
        let mut out = Vec::with_capacity(text.len());
        for (i, c) in text.char_indices() {
            if c.is_whitespace() {
                continue;
            }
            let pen = big
                .box_size(&text[..i])
                .map(|(w, _)| w as f64)
                .unwrap_or(0.0)
                / GLYPH_SCALE;
            let (advance, ink) = Glyphs::metrics(c, size);
            let bearing = ((advance - ink) / 2.0).max(0.0);
            out.push((c, x + (pen + bearing).round() as i32));
        }
        out
    }
}

/// Paints `scene`; `per_glyph`: place text glyph by glyph (bitmaps, see `Glyphs`).
fn paint<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    scene: &Scene,
    per_glyph: bool,
) -> Result<(), String> {
    let err = |e: plotters::drawing::DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let fill = |f: &Fill| {
        root.draw(&Rectangle::new(
            [(f.x0, f.y0), (f.x1, f.y1)],
            f.color.mix(f.alpha).filled(),
        ))
    };
    for f in scene.under.iter().chain(&scene.fills) {
        fill(f).map_err(err)?;
    }
    for (points, color) in &scene.polygons {
        root.draw(&Polygon::new(points.clone(), color.filled()))
            .map_err(err)?;
    }
    for f in scene.outlines.iter().chain(&scene.top_fills) {
        fill(f).map_err(err)?;
    }
    for l in &scene.labels {
        let style: TextStyle = FontDesc::new(fonts::FAMILY.into(), l.size, FontStyle::Normal)
            .color(&l.color)
            .pos(Pos::new(l.h, VPos::Top));
        if l.boxed {
            let w = text_width(&l.text, l.size);
            let x0 = match l.h {
                HPos::Left => l.x,
                HPos::Center => l.x - w / 2,
                HPos::Right => l.x - w,
            };
            root.draw(&Rectangle::new(
                [(x0 - 1, l.y), (x0 + w + 2, l.y + l.size as i32 + 1)],
                WHITE.mix(0.85).filled(),
            ))
            .map_err(err)?;
        }
        if per_glyph {
            let w = text_width(&l.text, l.size);
            let x0 = match l.h {
                HPos::Left => l.x,
                HPos::Center => l.x - w / 2,
                HPos::Right => l.x - w,
            };
            let style = style.pos(Pos::new(HPos::Left, VPos::Top));
            let mut buf = [0u8; 4];
            for (c, x) in Glyphs::place(&l.text, x0, l.size) {
                root.draw(&Text::new(
                    &*c.encode_utf8(&mut buf),
                    (x, l.y),
                    style.clone(),
                ))
                .map_err(err)?;
            }
        } else {
            root.draw(&Text::new(l.text.as_str(), (l.x, l.y), style))
                .map_err(err)?;
        }
    }
    root.present().map_err(err)
}
