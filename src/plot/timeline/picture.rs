//! One timeline picture: the model laid out into a scene (lanes, bars, marks, fault bands,
//! anomaly regions, axis, titles and legend), painted as SVG and PNG.

use std::path::{Path, PathBuf};

use plotters::backend::{BitMapBackend, SVGBackend};
use plotters::drawing::IntoDrawingArea;
use plotters::style::text_anchor::HPos;
use plotters::style::RGBColor;

use crate::plot::error::PlotError;
use crate::plot::groups::ProcessGroups;
use crate::plot::model::{self, bar, mark, Model, XScale};

use super::legend::{legend, Extras};
use super::paint::paint;
use super::scene::{Fill, Label, Rows, Scene};
use super::style::{
    fault_color, text_width, ANOMALY, ARROW, ATTEMPT, FAIL, GRID, HATCH_BUDGET, HATCH_SPACING,
    HOLD, INFO, LATENCY, LEASE, LEASE_IDLE, MARK_GAP, MAX_ANOMALY_ROWS, MAX_FAULT_ROWS, MUTED,
    PAST_LEASE, ROW, RUN_BUDGET, SHAPE_SPACING, SHARED, SHARED_PAST_LEASE, SMALL_SIZE, TEXT,
    TEXT_SIZE, TITLE_SIZE, TOKEN_SPACING, WRITE, WRITE_REJECTED, ZEBRA,
};
use super::text::seconds;

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

/// Where a queue jump's arrow was drawn (pixel coordinates of the picture).
#[derive(Debug, Clone, PartialEq)]
pub struct ArrowMark {
    /// Index into `Report::anomalies` (an `unfair` one).
    pub anomaly: usize,
    pub x: i32,
    /// From the overtaken waiter's lane (`y.0`) to the overtaker's (`y.1`, the head).
    pub y: (i32, i32),
    pub label: String,
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
    /// Queue jumps, as arrows between lanes.
    pub arrows: Vec<ArrowMark>,
    /// Holds drawn in `shared` mode (readers).
    pub shared_holds: usize,
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

pub(super) struct Texts {
    pub(super) title: String,
    pub(super) subtitle: Vec<String>,
}

pub(super) fn draw_picture(
    m: &Model,
    texts: Texts,
    out_dir: &Path,
    stem: &str,
    focus: Option<usize>,
    width: u32,
) -> Result<Picture, PlotError> {
    let mut scene = Scene::default();
    let header_bottom = header(&mut scene, m, &texts);
    let mut d = Drawing {
        m,
        layout: Layout::new(m, focus, header_bottom),
        scene,
    };
    d.background();
    d.fault_bands();
    let style = LaneStyle::choose(m, &d.layout, focus);
    for (i, cells) in m.cells.iter().enumerate() {
        d.lane(i, cells, &style);
    }
    d.lane_labels();
    d.groups();
    let anomalies = d.anomalies();
    let arrows = d.arrows();
    let y = d.axis();
    let Drawing {
        layout, mut scene, ..
    } = d;
    let extras = Extras {
        shared: m.shared_holds > 0,
        arrows: !m.arrows.is_empty(),
    };
    let y = legend(&mut scene, y, width as i32, extras);
    let height = (y + 10) as u32;

    let all_texts = scene.labels.iter().map(|l| l.text.clone()).collect();
    let path_svg = out_dir.join(format!("{stem}.svg"));
    let path_png = out_dir.join(format!("{stem}.png"));
    write_picture(&scene, [&path_svg, &path_png], (width, height))?;
    Ok(Picture {
        path_svg,
        path_png,
        key: m.key.clone(),
        anomaly: focus,
        x_range_ns: (m.scale.t0, m.scale.t1),
        scale: m.scale,
        width,
        height,
        lanes_y: (layout.lanes_top, layout.lanes_bottom),
        lanes: m.lanes.len(),
        title: texts.title,
        anomalies,
        arrows,
        shared_holds: m.shared_holds,
        notes: m.notes.clone(),
        texts: all_texts,
    })
}

/// The title, the subtitle and the model's notes; returns the row below them.
fn header(scene: &mut Scene, m: &Model, texts: &Texts) -> i32 {
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
    y + 6
}

/// Where a picture's parts go, top to bottom: the fault labels' strip, the anomaly labels'
/// strip, then the lanes.
struct Layout {
    scale: XScale,
    /// (row, x, index into `Model::bands`) of each fault label that found a place.
    fault_labels: Vec<(usize, i32, usize)>,
    unlabelled_bands: usize,
    fault_top: i32,
    /// Per anomaly item: (row, x, width) of its label, if it found a place.
    anomaly_labels: Vec<Option<(usize, i32, i32)>>,
    anomaly_top: i32,
    lane_h: i32,
    /// Between two groups of lanes.
    group_gap: i32,
    lanes_top: i32,
    lanes_bottom: i32,
    /// Each lane's top row.
    lane_y: Vec<i32>,
}

impl Layout {
    /// The layout of `m` below row `y`.
    fn new(m: &Model, focus: Option<usize>, mut y: i32) -> Layout {
        let scale = m.scale;
        // Fault labels, then anomaly labels, above the lanes.
        let (fault_labels, unlabelled_bands) = place_fault_labels(m);
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

        let anomaly_labels = place_anomaly_labels(m, focus);
        let anomaly_strip = anomaly_labels
            .iter()
            .flatten()
            .map(|(r, _, _)| r + 1)
            .max()
            .unwrap_or(0) as i32
            * ROW;
        let anomaly_top = y;
        y += anomaly_strip + 4;

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
        Layout {
            scale,
            fault_labels,
            unlabelled_bands,
            fault_top,
            anomaly_labels,
            anomaly_top,
            lane_h,
            group_gap,
            lanes_top,
            lanes_bottom,
            lane_y,
        }
    }

    /// The pixel column of model column `c`.
    fn x(&self, c: usize) -> i32 {
        self.scale.left + c as i32
    }
}

/// Each fault band's label in the first row where it fits; how many fit nowhere.
fn place_fault_labels(m: &Model) -> (Vec<(usize, i32, usize)>, usize) {
    let (left, right) = (m.scale.left, m.scale.right);
    let mut rows = Rows::new(MAX_FAULT_ROWS);
    let mut labels = Vec::new();
    let mut unlabelled = 0;
    for (b, band) in m.bands.iter().enumerate() {
        let w = text_width(&band.label, SMALL_SIZE);
        let x = (left + band.start as i32).min(right - w).max(left);
        match rows.place(x, x + w) {
            Some(row) => labels.push((row, x, b)),
            None => unlabelled += 1,
        }
    }
    (labels, unlabelled)
}

/// Each anomaly's label in the first row where it fits, the focus of a zoom first.
fn place_anomaly_labels(m: &Model, focus: Option<usize>) -> Vec<Option<(usize, i32, i32)>> {
    let (left, right) = (m.scale.left, m.scale.right);
    let mut rows = Rows::new(MAX_ANOMALY_ROWS);
    let mut labels: Vec<Option<(usize, i32, i32)>> = vec![None; m.anomalies.len()];
    let mut order: Vec<usize> = (0..m.anomalies.len()).collect();
    order.sort_by_key(|&i| (Some(m.anomalies[i].anomaly) != focus, m.anomalies[i].start));
    for i in order {
        let item = &m.anomalies[i];
        if item.label.is_empty() {
            continue;
        }
        let w = text_width(&item.label, SMALL_SIZE);
        let x = (left + item.start as i32).min(right - w).max(left);
        if let Some(row) = rows.place(x, x + w) {
            labels[i] = Some((row, x, w));
        }
    }
    labels
}

/// How every lane draws its runs and marks, chosen once for the whole picture.
struct LaneStyle {
    /// Runs of equal columns are joined across gaps this wide (0: none joined).
    gap: usize,
    /// Marks this close join into one run.
    mark_gap: usize,
    /// Readers' holds are hatched.
    hatch: bool,
    /// Lanes are tall enough for token labels.
    label_tokens: bool,
    /// Each kind of mark drawn as small ticks (a rug) in every lane.
    fail_rug: bool,
    info_rug: bool,
    write_rug: bool,
    end_rug: bool,
    /// A write tick's width.
    tick_w: i32,
}

impl LaneStyle {
    fn choose(m: &Model, layout: &Layout, focus: Option<usize>) -> LaneStyle {
        let lane_h = layout.lane_h;
        // Runs of equal columns, joined across small gaps if there are too many.
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
                                model::runs(c.marks.iter().map(|&v| u8::from(v & f != 0)), gap)
                                    .len()
                            })
                            .sum::<usize>()
                })
                .sum();
            if total <= RUN_BUDGET || gap >= 64 {
                break;
            }
            gap = (gap * 2).max(1);
        }
        // Readers' holds are hatched where the lanes are tall enough and the stripes few
        // enough.
        let shared_columns: usize = m
            .cells
            .iter()
            .map(|c| {
                c.bar
                    .iter()
                    .filter(|&&b| b == bar::SHARED || b == bar::SHARED_PAST_LEASE)
                    .count()
            })
            .sum();
        let hatch = lane_h >= 8 && shared_columns / HATCH_SPACING as usize <= HATCH_BUDGET;
        // Marks a few pixels apart join into a run; a run wider than a mark is a dense
        // stretch, drawn as a thin strip so that it does not hide the bars. And where any
        // lane has many marks of a kind, every lane draws that kind as small ticks (a rug),
        // so that marks do not bury the holds and one kind looks the same in every lane.
        let mark_gap = gap.max(MARK_GAP);
        let plot_w = m.scale.width();
        let rug_of = |flag: u16, min_lane_h: i32| {
            lane_h < min_lane_h
                || m.cells.iter().any(|c| {
                    model::runs(c.marks.iter().map(|&v| u8::from(v & flag != 0)), mark_gap).len()
                        > plot_w / SHAPE_SPACING
                })
        };
        LaneStyle {
            gap,
            mark_gap,
            hatch,
            label_tokens: lane_h >= 14,
            fail_rug: rug_of(mark::FAIL, 10),
            info_rug: rug_of(mark::INFO, 8),
            write_rug: rug_of(mark::WRITE, 0) || rug_of(mark::WRITE_REJECTED, 0),
            end_rug: rug_of(mark::LEASE_END, 0) || rug_of(mark::LEASE_END_IDLE, 0),
            tick_w: if lane_h >= 16 && focus.is_some() {
                2
            } else {
                1
            },
        }
    }
}

/// One lane's rows: `at(f)` is the row a fraction `f` of the lane's height down.
#[derive(Clone, Copy)]
struct LaneBox {
    top: i32,
    h: i32,
}

impl LaneBox {
    fn at(self, f: f64) -> i32 {
        self.top + (self.h as f64 * f).round() as i32
    }
}

/// The runs of the columns of `cells` whose marks have `flag`, joined across `gap`.
fn flag_runs(cells: &model::Cells, flag: u16, gap: usize) -> Vec<model::Run> {
    model::runs(cells.marks.iter().map(|&v| u8::from(v & flag != 0)), gap)
}

/// A picture being drawn: the model, where its parts go and what is painted so far.
struct Drawing<'a> {
    m: &'a Model,
    layout: Layout,
    scene: Scene,
}

impl Drawing<'_> {
    /// Zebra lanes and the time grid.
    fn background(&mut self) {
        let l = &self.layout;
        let (left, right) = (l.scale.left, l.scale.right);
        if l.lane_h >= 6 {
            for (i, &ly) in l.lane_y.iter().enumerate() {
                if i % 2 == 1 {
                    self.scene.under(left, ly, right, ly + l.lane_h, ZEBRA, 1.0);
                }
            }
        }
        for (t, _) in time_ticks(&l.scale) {
            let x = l.scale.column(t);
            self.scene
                .under(x, l.lanes_top, x + 1, l.lanes_bottom, GRID, 1.0);
        }
    }

    /// Fault bands across every lane (`faults_and_attempts` darkens the lanes they name),
    /// and their labels.
    fn fault_bands(&mut self) {
        let l = &self.layout;
        for band in &self.m.bands {
            let c = fault_color(&band.name);
            self.scene.under(
                l.x(band.start),
                l.fault_top,
                l.x(band.end),
                l.lanes_bottom,
                c,
                if band.instant { 0.1 } else { 0.14 },
            );
        }
        for &(row, x, b) in &l.fault_labels {
            self.scene.text(
                self.m.bands[b].label.clone(),
                x,
                l.fault_top + row as i32 * ROW + 1,
                SMALL_SIZE,
                MUTED,
            );
        }
    }

    /// Lane `i`: its faults and attempts, bars, leases, marks and token labels.
    fn lane(&mut self, i: usize, cells: &model::Cells, style: &LaneStyle) {
        let lane = LaneBox {
            top: self.layout.lane_y[i],
            h: self.layout.lane_h,
        };
        self.faults_and_attempts(lane, cells, style);
        self.bars(lane, cells, style);
        self.leases(lane, cells, style);
        self.failures(lane, cells, style);
        self.infos(lane, cells, style);
        let sparse_writes = self.writes(lane, cells, style);
        // Tokens where the lane's writes are sparse enough to read.
        if style.label_tokens
            && sparse_writes
            && cells.writes.len() <= self.layout.scale.width() / TOKEN_SPACING
        {
            self.tokens(lane, cells, style);
        }
    }

    /// Where the lane's process was under a fault, and its pending attempts.
    fn faults_and_attempts(&mut self, lane: LaneBox, cells: &model::Cells, style: &LaneStyle) {
        let l = &self.layout;
        for run in flag_runs(cells, mark::FAULT, style.gap) {
            self.scene.under(
                l.x(run.start),
                lane.top,
                l.x(run.end),
                lane.top + lane.h,
                FAIL,
                0.3,
            );
        }
        for run in flag_runs(cells, mark::ATTEMPT, style.gap) {
            let y0 = lane.at(0.78);
            self.scene.fill(
                l.x(run.start),
                y0,
                l.x(run.end),
                y0 + 1.max(lane.h / 12),
                ATTEMPT,
                1.0,
            );
        }
    }

    /// Latency and hold bars; a reader's hold light, edged and hatched.
    fn bars(&mut self, lane: LaneBox, cells: &model::Cells, style: &LaneStyle) {
        let l = &self.layout;
        for run in model::runs(cells.bar.iter().copied(), style.gap) {
            let (y0, y1, color) = match run.value {
                bar::LATENCY => (lane.at(0.42), lane.at(0.82), LATENCY),
                bar::SHARED => (lane.at(0.3), lane.at(0.92), SHARED),
                bar::HOLD => (lane.at(0.3), lane.at(0.92), HOLD),
                bar::SHARED_PAST_LEASE => (lane.at(0.3), lane.at(0.92), SHARED_PAST_LEASE),
                _ => (lane.at(0.3), lane.at(0.92), PAST_LEASE),
            };
            let (x0, x1, y1) = (l.x(run.start), l.x(run.end), y1.max(y0 + 1));
            self.scene.fill(x0, y0, x1, y1, color, 1.0);
            // A reader's hold: light, edged and hatched, unlike a writer's solid bar.
            let ink = match run.value {
                bar::SHARED => Some(HOLD),
                bar::SHARED_PAST_LEASE => Some(PAST_LEASE),
                _ => None,
            };
            if let Some(ink) = ink {
                self.scene.fill(x0, y0, x1, y0 + 1, ink, 1.0);
                self.scene.fill(x0, y1 - 1, x1, y1, ink, 1.0);
                if style.hatch && y1 - y0 >= 4 {
                    self.scene
                        .hatch((x0, y0 + 1, x1, y1 - 1), HATCH_SPACING, ink);
                }
            }
        }
    }

    /// The thin lines above a lane's bars (the lease, faint where the lock may still be
    /// taken after the hold ended, and an info acquire's possible hold), a lease that
    /// outlasts the picture, and where leases end.
    fn leases(&mut self, lane: LaneBox, cells: &model::Cells, style: &LaneStyle) {
        let l = &self.layout;
        let line_h = 1.max(lane.h / 10);
        for (flag, color, alpha) in [
            (mark::LEASE, LEASE, 1.0),
            (mark::LEASE_AFTER, LEASE, 0.45),
            (mark::MAYBE, INFO, 0.45),
        ] {
            let y0 = lane.at(0.12);
            for run in flag_runs(cells, flag, style.gap) {
                self.scene
                    .fill(l.x(run.start), y0, l.x(run.end), y0 + line_h, color, alpha);
            }
        }
        if let (Some(until), true) = (cells.lease_beyond, lane.h >= 16) {
            let text = format!("lease to {} s ▸", seconds(until, 3));
            self.scene.labels.push(Label {
                text,
                x: l.scale.right - 2,
                y: lane.at(0.12) - 6,
                size: 11.0,
                color: RGBColor(20, 110, 20),
                h: HPos::Right,
                boxed: true,
            });
        }
        let tri = (lane.h / 4).clamp(1, 6);
        for (flag, color) in [(mark::LEASE_END_IDLE, LEASE_IDLE), (mark::LEASE_END, LEASE)] {
            for run in flag_runs(cells, flag, style.mark_gap) {
                let x = l.x(run.start) + (run.end - run.start) as i32 / 2;
                let (y0, y1) = (lane.at(0.02), lane.at(0.3));
                if style.end_rug || run.end - run.start > MARK_GAP {
                    self.scene
                        .fill(l.x(run.start), y0, l.x(run.end), y1, color, 1.0);
                    continue;
                }
                self.scene
                    .polygons
                    .push((vec![(x - tri, y0), (x + tri, y0), (x, y1)], color));
            }
        }
    }

    /// Failed operations: a small × where readable, else a strip at the lane's foot.
    fn failures(&mut self, lane: LaneBox, cells: &model::Cells, style: &LaneStyle) {
        let l = &self.layout;
        for run in flag_runs(cells, mark::FAIL, style.mark_gap) {
            let (x0, x1) = (l.x(run.start), l.x(run.end));
            if style.fail_rug || is_dense(&run) {
                self.scene.top_fills.push(Fill {
                    x0,
                    y0: lane.at(0.86),
                    x1: x1.max(x0 + 1),
                    y1: lane.top + lane.h,
                    color: FAIL,
                    alpha: 1.0,
                });
                continue;
            }
            let r = (lane.h / 5).clamp(2, 4);
            let (cx, cy) = (x0 + (x1 - x0 - 1) / 2, lane.at(0.7));
            self.scene.cross(cx, cy, r);
        }
    }

    /// Operations of unknown outcome: a diamond where readable, else a strip.
    fn infos(&mut self, lane: LaneBox, cells: &model::Cells, style: &LaneStyle) {
        let l = &self.layout;
        for run in flag_runs(cells, mark::INFO, style.mark_gap) {
            let (x0, x1) = (l.x(run.start), l.x(run.end));
            if style.info_rug || is_dense(&run) {
                self.scene.top_fills.push(Fill {
                    x0,
                    y0: lane.at(0.2),
                    x1: x1.max(x0 + 1),
                    y1: lane.at(0.3).max(lane.at(0.2) + 1),
                    color: INFO,
                    alpha: 1.0,
                });
                continue;
            }
            let r = (lane.h / 5).clamp(2, 5);
            let (cx, cy) = (x0 + (x1 - x0 - 1) / 2, lane.at(0.6));
            self.scene.polygons.push((
                vec![(cx, cy - r), (cx + r, cy), (cx, cy + r), (cx - r, cy)],
                INFO,
            ));
        }
    }

    /// Writes to the guarded resource, each its own tick where they are sparse; whether
    /// they all were (so that their tokens can be labelled).
    fn writes(&mut self, lane: LaneBox, cells: &model::Cells, style: &LaneStyle) -> bool {
        let l = &self.layout;
        let mut sparse_writes = true;
        for (flag, color) in [(mark::WRITE, WRITE), (mark::WRITE_REJECTED, WRITE_REJECTED)] {
            let rug = style.write_rug;
            sparse_writes &= !rug;
            for run in flag_runs(cells, flag, style.mark_gap) {
                let x0 = l.x(run.start);
                if rug || is_dense(&run) {
                    sparse_writes = false;
                    let x1 = l.x(run.end);
                    self.scene.top_fills.push(Fill {
                        x0,
                        y0: lane.at(0.3),
                        x1,
                        y1: lane.at(0.38).max(lane.at(0.3) + 1),
                        color,
                        alpha: 1.0,
                    });
                    continue;
                }
                // Each write of the run as its own tick.
                for c in run.start..run.end {
                    if cells.marks[c] & flag != 0 {
                        let x = l.x(c);
                        self.scene.top_fills.push(Fill {
                            x0: x,
                            y0: lane.at(0.1),
                            x1: x + style.tick_w,
                            y1: lane.top + lane.h,
                            color,
                            alpha: 1.0,
                        });
                    }
                }
            }
        }
        sparse_writes
    }

    /// Each write's token beside its tick, where it does not cover the next one's.
    fn tokens(&mut self, lane: LaneBox, cells: &model::Cells, style: &LaneStyle) {
        let l = &self.layout;
        let (left, right, tick_w) = (l.scale.left, l.scale.right, style.tick_w);
        let size = (lane.h as f64 * 0.55).clamp(9.0, 12.0);
        let mut free_from = i32::MIN;
        for (j, w) in cells.writes.iter().enumerate() {
            let text = match (w.token, w.rejected) {
                (Some(t), false) => format!("w{t}"),
                (Some(t), true) => format!("w{t} rejected"),
                (None, false) => "w".to_string(),
                (None, true) => "w rejected".to_string(),
            };
            let tick = l.x(w.cell);
            let tw = text_width(&text, size) + 2;
            let next = cells.writes.get(j + 1).map_or(right, |n| l.x(n.cell));
            // Right of the tick, or left of it where the right is taken.
            let x = if tick + tick_w + 2 + tw < next.min(right) {
                tick + tick_w + 2
            } else {
                tick - 2 - tw
            };
            if x >= free_from.max(left) && x + tw < next.min(right) + tick_w {
                self.scene.labels.push(Label {
                    text,
                    x,
                    y: lane.at(0.1),
                    size,
                    color: TEXT,
                    h: HPos::Left,
                    boxed: true,
                });
                free_from = x + tw + 2;
            }
        }
    }

    /// Each lane's label left of it (every few lanes where they are thin).
    fn lane_labels(&mut self) {
        let l = &self.layout;
        let lane_label_size = (l.lane_h as f64 * 0.75).clamp(8.0, 12.0);
        let every = if l.lane_h >= 9 {
            1
        } else {
            (12 / l.lane_h.max(1)) as usize + 1
        };
        for (i, lane) in self.m.lanes.iter().enumerate() {
            if i % every != 0 {
                continue;
            }
            self.scene.labels.push(Label {
                text: lane.label.clone(),
                x: l.scale.left - 6,
                y: l.lane_y[i] + l.lane_h / 2 - (lane_label_size * 0.45) as i32,
                size: lane_label_size,
                color: TEXT,
                h: HPos::Right,
                boxed: false,
            });
        }
    }

    /// A bracket and a label for each group of lanes, a line between groups.
    fn groups(&mut self) {
        let (m, l) = (self.m, &self.layout);
        let mut g = 0;
        while g < m.lanes.len() {
            let group = m.lanes[g].group;
            let mut e = g;
            while e < m.lanes.len() && m.lanes[e].group == group {
                e += 1;
            }
            if let Some(group) = group {
                let (top, bottom) = (l.lane_y[g], l.lane_y[e - 1] + l.lane_h);
                self.scene.fill(8, top, 11, bottom, MUTED, 1.0);
                if g > 0 {
                    self.scene.fill(
                        8,
                        top - l.group_gap / 2 - 1,
                        l.scale.right,
                        top - l.group_gap / 2,
                        MUTED,
                        0.6,
                    );
                }
                self.scene.text(
                    ProcessGroups::group_label(group),
                    16,
                    top + (bottom - top) / 2 - 7,
                    SMALL_SIZE,
                    TEXT,
                );
            }
            g = e;
        }
    }

    /// Anomalies, in red, over everything in the lanes: a region on each lane it concerns,
    /// brackets joining them up to its label.
    fn anomalies(&mut self) -> Vec<AnomalyMark> {
        let (m, l) = (self.m, &self.layout);
        let lane_h = l.lane_h;
        let mut marks = Vec::new();
        for (i, item) in m.anomalies.iter().enumerate() {
            let (x0, x1) = (l.x(item.start), l.x(item.end));
            let rows: Vec<(i32, i32)> = if item.lanes.is_empty() {
                vec![(l.lanes_top, l.lanes_bottom)]
            } else {
                item.lanes
                    .iter()
                    .map(|&n| (l.lane_y[n], l.lane_y[n] + lane_h))
                    .collect()
            };
            let top = rows.iter().map(|r| r.0).min().unwrap_or(l.lanes_top);
            let bottom = rows.iter().map(|r| r.1).max().unwrap_or(l.lanes_bottom);
            let edge = if x1 - x0 >= 6 && lane_h >= 6 { 2 } else { 1 };
            for &(r0, r1) in &rows {
                self.scene.under(x0, r0, x1, r1, ANOMALY, 0.3);
                for (a0, b0, a1, b1) in [
                    (x0, r0, x1, r0 + edge),
                    (x0, r1 - edge, x1, r1),
                    (x0, r0, x0 + edge, r1),
                    (x1 - edge, r0, x1, r1),
                ] {
                    self.scene.outlines.push(Fill {
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
            let label = l.anomaly_labels[i];
            let bracket_top = label.map_or(top, |(row, _, _)| {
                l.anomaly_top + row as i32 * ROW + ROW - 2
            });
            for x in [x0, x1 - 1] {
                self.scene.outlines.push(Fill {
                    x0: x,
                    y0: bracket_top,
                    x1: x + 1,
                    y1: bottom,
                    color: ANOMALY,
                    alpha: 0.9,
                });
            }
            let label_box = label.map(|(row, lx, w)| {
                let ly = l.anomaly_top + row as i32 * ROW;
                self.scene.labels.push(Label {
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
        marks
    }

    /// Queue jumps: an arrow from the overtaken waiter's pending acquire to the lane of the
    /// process that got the lock, a few pixels inside the anomaly's region (whose edge is at
    /// that moment, so that the two do not blur into one line), labelled beside it.
    fn arrows(&mut self) -> Vec<ArrowMark> {
        let (m, l) = (self.m, &self.layout);
        let (left, right, lane_h) = (l.scale.left, l.scale.right, l.lane_h);
        let mut arrows = Vec::new();
        let mut arrow_labels: Vec<[i32; 4]> = Vec::new();
        for arrow in &m.arrows {
            let x = (l.x(arrow.cell) + 4).min(right - 2);
            let (from_top, to_top) = (l.lane_y[arrow.from], l.lane_y[arrow.to]);
            let y_from = from_top + (lane_h as f64 * 0.62).round() as i32;
            let y_to = if to_top > from_top {
                to_top + (lane_h as f64 * 0.3).round() as i32
            } else {
                to_top + (lane_h as f64 * 0.92).round() as i32
            };
            self.scene.arrow(x, y_from, y_to, ARROW);
            if lane_h >= 10 {
                // Left of the arrow, clear of the red region it starts (its edges would cut
                // through the text); else right of it; left out where both would cover
                // another arrow's label (the legend says what an arrow is).
                let size = 11.0;
                let w = text_width(&arrow.label, size);
                let y = (y_from + y_to) / 2 - 6;
                let free = |x0: i32, placed: &[[i32; 4]]| {
                    x0 > left
                        && x0 + w < right
                        && placed.iter().all(|b| {
                            x0 + w + 4 <= b[0] || x0 >= b[2] + 4 || y + 13 <= b[1] || y >= b[3]
                        })
                };
                let place = [
                    (x - 10 - w, x - 10, HPos::Right),
                    (x + 10, x + 10, HPos::Left),
                ]
                .into_iter()
                .find(|&(x0, _, _)| free(x0, &arrow_labels));
                if let Some((x0, lx, h)) = place {
                    arrow_labels.push([x0, y, x0 + w, y + 13]);
                    self.scene.labels.push(Label {
                        text: arrow.label.clone(),
                        x: lx,
                        y,
                        size,
                        color: ARROW,
                        h,
                        boxed: true,
                    });
                }
            }
            arrows.push(ArrowMark {
                anomaly: arrow.anomaly,
                x,
                y: (y_from, y_to),
                label: arrow.label.clone(),
            });
        }
        arrows
    }

    /// The time axis under the lanes and its title (which says what went unlabelled);
    /// returns the row below it.
    fn axis(&mut self) -> i32 {
        let (m, l) = (self.m, &self.layout);
        let labelled_items = m.anomalies.iter().filter(|a| !a.label.is_empty()).count();
        let unlabelled = m
            .anomalies
            .iter()
            .zip(&l.anomaly_labels)
            .filter(|(a, l)| !a.label.is_empty() && l.is_none())
            .count();
        let (left, right) = (l.scale.left, l.scale.right);
        let mut y = l.lanes_bottom + 2;
        self.scene.fill(left, y, right, y + 1, MUTED, 1.0);
        for (t, text) in time_ticks(&l.scale) {
            let x = l.scale.column(t);
            self.scene.fill(x, y, x + 1, y + 5, MUTED, 1.0);
            self.scene.labels.push(Label {
                text,
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
                "   ·   {unlabelled} of {labelled_items} anomalies drawn here are too close to others to be labelled; every one is drawn in red"
            ));
        }
        if l.unlabelled_bands > 0 {
            axis_title.push_str(&format!(
                "   ·   {} fault bands unlabelled",
                l.unlabelled_bands
            ));
        }
        self.scene.text(axis_title, left, y, SMALL_SIZE, MUTED);
        y + ROW + 10
    }
}

/// A run of marks wider than a mark: a dense stretch.
fn is_dense(run: &model::Run) -> bool {
    run.end - run.start > MARK_GAP
}

/// Paints `scene` as SVG and PNG, each under a temporary name and renamed into place whole
/// (`outfile`).
fn write_picture(
    scene: &Scene,
    [path_svg, path_png]: [&PathBuf; 2],
    (width, height): (u32, u32),
) -> Result<(), PlotError> {
    for (path, bitmap) in [(path_svg, false), (path_png, true)] {
        crate::outfile::write_via(
            path,
            |tmp| {
                let draw_error = |error| PlotError::Draw {
                    path: path.clone(),
                    error,
                };
                if bitmap {
                    let root = BitMapBackend::new(tmp, (width, height)).into_drawing_area();
                    paint(&root, scene, true).map_err(draw_error)
                } else {
                    let root = SVGBackend::new(tmp, (width, height)).into_drawing_area();
                    paint(&root, scene, false).map_err(draw_error)
                }
            },
            |e| PlotError::io(path, e),
        )?;
    }
    Ok(())
}

/// Tick times and labels: a round step giving about one tick per 110 pixels.
fn time_ticks(scale: &XScale) -> Vec<(i64, String)> {
    let span = scale.span();
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
