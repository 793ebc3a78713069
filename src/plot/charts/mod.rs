//! The run's charts: acquire latency over time (by outcome, log scale), acquisitions per
//! second over time, and acquisitions per client process (fairness). Each is written as SVG
//! and PNG with the bundled font.
//!
//! Size is bounded whatever the history's length: latency points are merged when they fall
//! in the same 3-pixel cell (a sparse history keeps every point), rates are counted in at
//! most `RATE_BUCKETS` buckets, fairness draws at most `FAIRNESS_BARS` bars, and fault bands
//! narrower than a pixel apart are merged into one band (never dropped).

//!
//! The parts: `chart` (what every chart shares: its size, its files, the drawing on either
//! backend), `axis` and `format` (the time axis and number labels), `outcome` (ok, fail,
//! info and their colours), `bands` (nemesis fault bands over a chart), and one module per
//! chart: `latency`, `rate`, `fairness`.

mod axis;
mod bands;
mod chart;
mod fairness;
mod format;
mod latency;
mod outcome;
mod rate;

use std::path::Path;

use crate::history::{FaultBand, History};
use crate::plot::error::PlotError;
use crate::plot::fonts;
use crate::report::Report;

pub use bands::FAULT_COLOR;
pub use chart::{ChartFiles, HEIGHT, WIDTH};
pub use fairness::FAIRNESS_BARS;
pub use outcome::{FAIL_COLOR, INFO_COLOR, OK_COLOR};
pub use rate::RATE_BUCKETS;

use axis::TimeAxis;
use chart::render;
use fairness::FairnessChart;
use latency::LatencyChart;
use rate::RateChart;

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
