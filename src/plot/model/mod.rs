//! What a timeline shows, merged to the pixel: lanes of processes, per-column cells of holds
//! (exclusive, or shared: a reader's, from its acquire's `"mode": "shared"`), latencies,
//! leases and marks, fault bands, anomaly regions, and queue jumps (`unfair`) as arrows from
//! the overtaken waiter's lane to the overtaker's. `timeline` lays these out
//! and paints them; nothing here knows about plotters.
//!
//! Merging: each lane keeps one cell per pixel column. A hold, a latency or a lease marks the
//! columns it covers (at least one), so holds closer than a pixel fall into one bar and every
//! mark is kept once per column. Bars, lines and marks are then drawn as runs of equal
//! columns, so what is drawn is bounded by lanes × columns whatever the history's length.
//! Anomalies are never merged or dropped: each one is its own region, at least a few pixels
//! wide. Fault bands of one kind that touch at the pixel are merged into one band (with a
//! count), never dropped.
//!
//! The parts: `scale` (run time to pixel columns), `items` (what a picture draws: lanes,
//! cells, bands, anomaly regions, arrows), `source` (what the pictures of one history share and
//! what one covers), `faults` (the nemesis faults as spans), `build` (the model of one
//! picture) with `lanes` (its rows), and `labels`.

mod build;
mod faults;
mod items;
mod labels;
mod lanes;
mod scale;
mod source;

pub use build::build;
pub use faults::{faults, Fault};
pub use items::{
    bar, mark, runs, AnomalyItem, ArrowItem, Band, Cells, Lane, Model, Run, WriteLabel,
    MIN_ANOMALY_PX,
};
pub use labels::{anomaly_label, shorten};
pub use scale::XScale;
pub use source::{Source, View};
