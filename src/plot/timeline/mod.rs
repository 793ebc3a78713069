//! Timelines: per key, one lane per client process (grouped by worker), a bar per hold with
//! its acquire and release latencies (a reader's shared hold light and hatched, a writer's
//! solid), leases and their ends, failed and indeterminate operations, writes with their
//! tokens, nemesis faults as bands and every anomaly in red, a queue jump also as an arrow
//! from the waiter overtaken to the process that got the lock.
//! One picture of the whole run per key, and a zoomed picture around the first anomaly of
//! each of the worst episodes (`report::episodes`). Each is written as SVG and PNG.
//!
//! `model` turns the history into drawable items merged to the pixel; here they are laid out
//! (`picture`, with its `legend`) into a `scene` of shapes and texts, which `paint` paints
//! with plotters (the same painting for both backends). `style` holds the colours and sizes.

mod legend;
mod paint;
mod picture;
mod scene;
mod style;
mod text;

use std::path::Path;

use crate::checker::holds;
use crate::history::compact::KeyId;
use crate::history::History;
use crate::report::{episodes, Anomaly, AnomalyKind, Report};

use crate::plot::error::PlotError;
use crate::plot::fonts;
use crate::plot::model::{self, Model, Source, View, XScale};

pub use crate::plot::groups::ProcessGroups;
pub use picture::{AnomalyMark, ArrowMark, Picture};

use picture::{draw_picture, Texts};
use text::{file_safe, plural, seconds, wrap};

/// How to draw the timelines.
#[derive(Debug, Clone)]
pub struct TimelineOptions {
    /// Picture width in pixels.
    pub width: u32,
    /// At most this many keys get a whole-run timeline: keys with anomalies first (by their
    /// first anomaly), then the busiest.
    pub max_keys: usize,
    /// Zoomed pictures of the worst this many episodes (`report::episodes`), one each.
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
    let (chosen, key_note) = choose_keys(history, report, options.max_keys);
    // Zooms go to the worst episodes, one each (on its first anomaly), not to the first
    // anomalies by time.
    let zooms: Vec<usize> = episodes(&report.anomalies)
        .iter()
        .take(options.zooms)
        .map(|e| e.first())
        .collect();
    let mut needed: Vec<KeyId> = chosen.iter().map(|&k| k as KeyId).collect();
    for &a in &zooms {
        if let Some(k) = key_id(history, &report.anomalies[a].key) {
            needed.push(k as KeyId);
        }
    }
    needed.sort_unstable();
    needed.dedup();
    let src = Source::new(history, &holds, report, groups, &needed);
    let width = options.width.max(400);

    let (first, last) = history.time_span();
    // Saturating: a history may span the whole of i64 (history/extreme-times.jsonl).
    let pad = (last.saturating_sub(first) / 100).max(1_000_000);
    let frame = Frame {
        src: &src,
        out_dir,
        max_lanes: options.max_lanes,
        width,
        left: if groups.is_none() { 96 } else { 176 },
        right: width as i32 - 24,
        // Not before the run began (time 0), unless the history does.
        whole: (
            first.saturating_sub(pad).max(first.min(0)),
            last.saturating_add(pad),
        ),
    };
    let mut pictures = Vec::new();
    for &k in &chosen {
        pictures.push(frame.whole_run(k, key_note.as_deref())?);
    }
    for &a in &zooms {
        pictures.push(frame.zoom(a)?);
    }
    Ok(pictures)
}

/// The position of the key called `name` in `history.keys`.
fn key_id(history: &History, name: &str) -> Option<usize> {
    history.keys.iter().position(|k| k == name)
}

/// The keys that get a whole-run picture (keys with anomalies first, by their first
/// anomaly, then the busiest; at most `max_keys`), and the note saying so if some are left
/// out.
fn choose_keys(
    history: &History,
    report: &Report,
    max_keys: usize,
) -> (Vec<usize>, Option<String>) {
    let mut busy = vec![0u64; history.keys.len()];
    for op in &history.ops {
        if let Some(n) = busy.get_mut(op.key as usize) {
            *n += 1;
        }
    }
    let mut chosen: Vec<usize> = Vec::new();
    let mut anomaly_keys = 0usize;
    for a in &report.anomalies {
        if let Some(k) = key_id(history, &a.key) {
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
    chosen.truncate(max_keys.max(1));
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
    (chosen, key_note)
}

/// What every picture of one history shares: its source, where it goes, its width and
/// columns, and the whole run's span.
struct Frame<'a> {
    src: &'a Source<'a>,
    out_dir: &'a Path,
    max_lanes: usize,
    width: u32,
    /// The lanes' first and last pixel columns.
    left: i32,
    right: i32,
    /// The whole run, with a margin, ns.
    whole: (i64, i64),
}

impl Frame<'_> {
    /// The picture of key `k` over the whole run, `key_note` first among its notes.
    fn whole_run(&self, k: usize, key_note: Option<&str>) -> Result<Picture, PlotError> {
        let (history, report, whole) = (self.src.history, self.src.report, self.whole);
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
            scale: XScale::new(whole.0, whole.1, self.left, self.right),
            active_only: false,
            max_lanes: self.max_lanes,
            anomalies,
        };
        let mut m = model::build(self.src, &view);
        if let Some(note) = key_note {
            m.notes.insert(0, note.to_string());
        }
        let stem = format!("timeline-{}", file_safe(name));
        let title = format!(
            "{name}: the whole run, {} – {} s",
            seconds(whole.0, 2),
            seconds(whole.1, 2)
        );
        let subtitle = summary_line(&m, report, history);
        draw_picture(
            &m,
            Texts {
                title,
                subtitle: vec![subtitle],
            },
            self.out_dir,
            &stem,
            None,
            self.width,
        )
    }

    /// The zoomed picture of anomaly `a`, with the anomalies of its key in the window.
    fn zoom(&self, a: usize) -> Result<Picture, PlotError> {
        let report = self.src.report;
        let anomaly = &report.anomalies[a];
        let (t0, t1) = self.zoom_window(anomaly);
        let view = View {
            key: &anomaly.key,
            scale: XScale::new(t0, t1, self.left, self.right),
            active_only: true,
            max_lanes: self.max_lanes,
            anomalies: report
                .anomalies
                .iter()
                .enumerate()
                .filter(|(i, b)| *i == a || (b.key == anomaly.key && b.start <= t1 && b.end >= t0))
                .map(|(i, _)| i)
                .collect(),
        };
        let m = model::build(self.src, &view);
        draw_picture(
            &m,
            zoom_texts(a, anomaly, (t0, t1), self.width),
            self.out_dir,
            &format!("zoom-{}", a + 1),
            Some(a),
            self.width,
        )
    }

    /// The anomaly's span, widened to its events that lie near it (an event far away, such
    /// as the acquire of a hold that began long before, would shrink the anomaly to a
    /// sliver: its hold runs in from the left edge instead), with a margin.
    fn zoom_window(&self, anomaly: &Anomaly) -> (i64, i64) {
        let (start, end) = (
            anomaly.start.min(anomaly.end),
            anomaly.start.max(anomaly.end),
        );
        let reach = end.saturating_sub(start).max(1_000_000).saturating_mul(2);
        let (mut lo, mut hi) = (start, end);
        for &i in &anomaly.indices {
            if let Some(t) = self.src.time_of(i) {
                if t >= start.saturating_sub(reach) && t <= end.saturating_add(reach) {
                    lo = lo.min(t);
                    hi = hi.max(t);
                }
            }
        }
        let span = hi.saturating_sub(lo).max(0);
        let min_window = 2_000_000;
        let pad = (span / 5).max((min_window - span) / 2).max(100_000);
        // Not before the run's first event nor after its last (with the whole run's margin).
        (
            lo.saturating_sub(pad).max(self.whole.0),
            hi.saturating_add(pad).min(self.whole.1),
        )
    }
}

/// A zoom's title (the anomaly, its events, the window) and subtitle (its explanation,
/// wrapped, and its tokens).
fn zoom_texts(a: usize, anomaly: &Anomaly, (t0, t1): (i64, i64), width: u32) -> Texts {
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
    Texts { title, subtitle }
}

fn summary_line(m: &Model, report: &Report, history: &History) -> String {
    let mut kinds: Vec<(AnomalyKind, usize)> = Vec::new();
    let mut drawn: Vec<usize> = m.anomalies.iter().map(|item| item.anomaly).collect();
    drawn.dedup();
    for a in drawn {
        let kind = report.anomalies[a].kind;
        match kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((kind, 1)),
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
