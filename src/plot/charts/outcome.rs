//! How an acquire ended, and its colour (as the timelines draw it).

use plotters::style::RGBColor;

/// Outcome colours, as the timelines draw them (orange is the timelines' "held past the
/// lease", red is for anomalies only).
pub const OK_COLOR: RGBColor = RGBColor(31, 119, 180);
pub const FAIL_COLOR: RGBColor = RGBColor(90, 90, 90);
pub const INFO_COLOR: RGBColor = RGBColor(148, 52, 200);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    Ok = 0,
    Fail = 1,
    Info = 2,
}

pub(super) const OUTCOMES: [(Outcome, &str, RGBColor); 3] = [
    (Outcome::Ok, "ok", OK_COLOR),
    (Outcome::Fail, "fail", FAIL_COLOR),
    (Outcome::Info, "info", INFO_COLOR),
];
