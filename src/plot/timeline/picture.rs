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
        if item.label.is_empty() {
            continue;
        }
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
    // Readers' holds are hatched where the lanes are tall enough and the stripes few enough.
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
                bar::SHARED => (at(0.3), at(0.92), SHARED),
                bar::HOLD => (at(0.3), at(0.92), HOLD),
                bar::SHARED_PAST_LEASE => (at(0.3), at(0.92), SHARED_PAST_LEASE),
                _ => (at(0.3), at(0.92), PAST_LEASE),
            };
            let (x0, x1, y1) = (band_x(run.start), band_x(run.end), y1.max(y0 + 1));
            scene.fill(x0, y0, x1, y1, color, 1.0);
            // A reader's hold: light, edged and hatched, unlike a writer's solid bar.
            let ink = match run.value {
                bar::SHARED => Some(HOLD),
                bar::SHARED_PAST_LEASE => Some(PAST_LEASE),
                _ => None,
            };
            if let Some(ink) = ink {
                scene.fill(x0, y0, x1, y0 + 1, ink, 1.0);
                scene.fill(x0, y1 - 1, x1, y1, ink, 1.0);
                if hatch && y1 - y0 >= 4 {
                    scene.hatch((x0, y0 + 1, x1, y1 - 1), HATCH_SPACING, ink);
                }
            }
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
    // Queue jumps: an arrow from the overtaken waiter's pending acquire to the lane of the
    // process that got the lock, a few pixels inside the anomaly's region (whose edge is at
    // that moment, so that the two do not blur into one line), labelled beside it.
    let mut arrows = Vec::new();
    let mut arrow_labels: Vec<[i32; 4]> = Vec::new();
    for arrow in &m.arrows {
        let x = (band_x(arrow.cell) + 4).min(right - 2);
        let (from_top, to_top) = (lane_y[arrow.from], lane_y[arrow.to]);
        let y_from = from_top + (lane_h as f64 * 0.62).round() as i32;
        let y_to = if to_top > from_top {
            to_top + (lane_h as f64 * 0.3).round() as i32
        } else {
            to_top + (lane_h as f64 * 0.92).round() as i32
        };
        scene.arrow(x, y_from, y_to, ARROW);
        if lane_h >= 10 {
            // Left of the arrow, clear of the red region it starts (its edges would cut
            // through the text); else right of it; left out where both would cover another
            // arrow's label (the legend says what an arrow is).
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
                scene.labels.push(Label {
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

    let labelled_items = m.anomalies.iter().filter(|a| !a.label.is_empty()).count();
    let unlabelled = m
        .anomalies
        .iter()
        .zip(&anomaly_labels)
        .filter(|(a, l)| !a.label.is_empty() && l.is_none())
        .count();

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
            "   ·   {unlabelled} of {labelled_items} anomalies drawn here are too close to others to be labelled; every one is drawn in red"
        ));
    }
    if unlabelled_bands > 0 {
        axis_title.push_str(&format!("   ·   {unlabelled_bands} fault bands unlabelled"));
    }
    scene.text(axis_title, left, y, SMALL_SIZE, MUTED);
    y += ROW + 10;

    // Legend.
    let extras = Extras {
        shared: m.shared_holds > 0,
        arrows: !m.arrows.is_empty(),
    };
    y = legend(&mut scene, y, width as i32, extras);
    let height = (y + 10) as u32;

    for l in &scene.labels {
        all_texts.push(l.text.clone());
    }
    let path_svg = out_dir.join(format!("{stem}.svg"));
    let path_png = out_dir.join(format!("{stem}.png"));
    // Each drawn under a temporary name and renamed into place whole (`outfile`).
    for (path, bitmap) in [(&path_svg, false), (&path_png, true)] {
        crate::outfile::write_via(
            path,
            |tmp| {
                let draw_error = |message| PlotError::Draw {
                    path: path.clone(),
                    message,
                };
                if bitmap {
                    let root = BitMapBackend::new(tmp, (width, height)).into_drawing_area();
                    paint(&root, &scene, true).map_err(draw_error)
                } else {
                    let root = SVGBackend::new(tmp, (width, height)).into_drawing_area();
                    paint(&root, &scene, false).map_err(draw_error)
                }
            },
            |e| PlotError::io(path, e),
        )?;
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
        arrows,
        shared_holds: m.shared_holds,
        notes: m.notes.clone(),
        texts: all_texts,
    })
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
