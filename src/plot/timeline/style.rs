//! The timelines' colours, sizes and spacings. Red is for anomalies only.

use plotters::style::{FontDesc, FontStyle, RGBColor};

use crate::plot::fonts;

pub(super) const ANOMALY: RGBColor = RGBColor(220, 20, 20);
/// A queue jump's arrow (an anomaly, so red; darker, to stand out of its red region).
pub(super) const ARROW: RGBColor = RGBColor(170, 0, 0);
pub(super) const HOLD: RGBColor = RGBColor(31, 119, 180);
/// A reader's (shared) hold: this light fill, hatched and edged in `HOLD`.
pub(super) const SHARED: RGBColor = RGBColor(214, 230, 244);
/// A reader's hold after its lease ran out: this light fill, hatched and edged in
/// `PAST_LEASE`.
pub(super) const SHARED_PAST_LEASE: RGBColor = RGBColor(252, 226, 184);
/// Hatching stripes this many pixels apart.
pub(super) const HATCH_SPACING: i32 = 6;
/// Above this many hatching stripes in one picture, shared holds are drawn unhatched.
pub(super) const HATCH_BUDGET: usize = 6_000;
pub(super) const LATENCY: RGBColor = RGBColor(158, 202, 232);
pub(super) const PAST_LEASE: RGBColor = RGBColor(245, 166, 35);
pub(super) const LEASE: RGBColor = RGBColor(44, 160, 44);
/// A lease end that came after a clean release.
pub(super) const LEASE_IDLE: RGBColor = RGBColor(170, 220, 170);
pub(super) const ATTEMPT: RGBColor = RGBColor(175, 175, 175);
pub(super) const FAIL: RGBColor = RGBColor(90, 90, 90);
pub(super) const INFO: RGBColor = RGBColor(148, 52, 200);
pub(super) const WRITE: RGBColor = RGBColor(0, 0, 0);
pub(super) const WRITE_REJECTED: RGBColor = RGBColor(150, 150, 150);
pub(super) const TEXT: RGBColor = RGBColor(20, 20, 20);
pub(super) const MUTED: RGBColor = RGBColor(95, 95, 95);
pub(super) const GRID: RGBColor = RGBColor(228, 228, 228);
pub(super) const ZEBRA: RGBColor = RGBColor(246, 246, 246);
pub(super) const WHITE: RGBColor = RGBColor(255, 255, 255);

pub(super) fn fault_color(name: &str) -> RGBColor {
    match name {
        "pause" => RGBColor(120, 120, 120),
        "partition" | "slow" => RGBColor(148, 103, 189),
        "kill" | "crash-point" | "stop" => RGBColor(60, 60, 60),
        "clock" => RGBColor(23, 160, 180),
        "failover" => RGBColor(70, 100, 170),
        _ => RGBColor(127, 127, 127),
    }
}

pub(super) const TITLE_SIZE: f64 = 18.0;
pub(super) const TEXT_SIZE: f64 = 14.0;
pub(super) const SMALL_SIZE: f64 = 13.0;
pub(super) const ROW: i32 = 17;
pub(super) const MAX_FAULT_ROWS: usize = 2;
pub(super) const MAX_ANOMALY_ROWS: usize = 3;
/// Marks closer than this (pixels) join into a strip.
pub(super) const MARK_GAP: usize = 3;
/// Marks are drawn as shapes only in lanes with at most one per this many pixels (of a
/// kind); otherwise as small ticks.
pub(super) const SHAPE_SPACING: usize = 40;
/// Token labels only in lanes with at most one write per this many pixels.
pub(super) const TOKEN_SPACING: usize = 60;
/// Above this many runs, bars and marks are joined across small gaps to keep files small.
pub(super) const RUN_BUDGET: usize = 40_000;

pub(super) fn text_width(text: &str, size: f64) -> i32 {
    FontDesc::new(fonts::FAMILY.into(), size, FontStyle::Normal)
        .box_size(text)
        .map(|(w, _)| w as i32)
        .unwrap_or_else(|_| (text.chars().count() as f64 * size * 0.62) as i32)
}
