//! Acquisitions per client process, ranked: is the lock fair?

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::history::compact::{OpF, OpType, NEMESIS};
use crate::history::History;
use crate::report::Report;

use super::chart::{font, Chart};
use super::outcome::OK_COLOR;
use crate::plot::error::DrawError;

/// At most this many bars; more processes are ranked and grouped.
pub const FAIRNESS_BARS: usize = 120;

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

pub(super) struct FairnessChart {
    bars: Vec<Bar>,
    processes: usize,
    /// Processes per bar, when ranked and grouped.
    group: usize,
    never_acquired: usize,
    jain: String,
    /// "; 3 queue jumps", or nothing: for the axis under the bars (the title is full).
    queue_jumps: String,
    label: String,
}

impl FairnessChart {
    pub(super) fn new(history: &History, report: &Report, label: &str) -> Self {
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
            queue_jumps: queue_jumps(report),
            label: label.to_string(),
        }
    }
}

/// The queue jumps over all keys (report.json has them per key), where there were any or
/// where acquires were marked fair: "; 3 queue jumps (1 fair over fair)".
fn queue_jumps(report: &Report) -> String {
    let keys = report.stats.per_key.values();
    let all: u64 = keys.clone().map(|s| s.queue_jumps).sum();
    let fair: Option<u64> = keys.filter_map(|s| s.queue_jumps_fair).reduce(|a, b| a + b);
    let plural = if all == 1 { "" } else { "s" };
    match fair {
        Some(fair) => format!("; {all} queue jump{plural} ({fair} fair over fair)"),
        None if all > 0 => format!("; {all} queue jump{plural}"),
        None => String::new(),
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

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE)?;
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
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..y_max)?;
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
                "client process ({} that tried to acquire; {} never acquired{})",
                self.processes, self.never_acquired, self.queue_jumps
            )
        } else {
            format!(
                "{} processes ranked by acquisitions, most first, {} per bar (mean; whisker: least to most); {} never acquired{}",
                self.processes, self.group, self.never_acquired, self.queue_jumps
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
            .draw()?;

        let half = 0.38;
        chart
            .draw_series(self.bars.iter().enumerate().map(|(i, b)| {
                let x = i as f64;
                Rectangle::new(
                    [(x - half, 0.0), (x + half, b.attempted)],
                    RGBColor(120, 120, 120).stroke_width(1),
                )
            }))?
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
            }))?
            .label("acquisitions (filled)")
            .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], OK_COLOR.filled()));
        if self.group > 1 {
            chart.draw_series(self.bars.iter().enumerate().map(|(i, b)| {
                let x = i as f64;
                PathElement::new(
                    vec![(x, b.min as f64), (x, b.max as f64)],
                    BLACK.stroke_width(1),
                )
            }))?;
        }
        // A process that tried and never acquired has no bar of its own: mark it.
        chart.draw_series(
            self.bars
                .iter()
                .enumerate()
                .filter(|(_, b)| b.max == 0)
                .map(|(i, _)| {
                    EmptyElement::at((i as f64, 0.0))
                        + Text::new("0", (-4, -16), font(12).color(&RGBColor(200, 30, 30)))
                }),
        )?;
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
