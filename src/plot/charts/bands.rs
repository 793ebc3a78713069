//! Nemesis fault bands shaded over a chart, merged at the pixel and labelled where there is
//! room.

use std::collections::BTreeMap;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::history::FaultBand;

use super::chart::font;
use super::format::secs;
use crate::plot::error::DrawError;

/// Nemesis fault bands (drawn at low opacity) and their labels.
pub const FAULT_COLOR: RGBColor = RGBColor(110, 110, 110);

/// Shades `bands` over the plotting area `area` (pixel coordinates relative to it), merging
/// bands that fall within a pixel of each other, and labels them along the top where there
/// is room. `x_px` maps a time in seconds to a pixel column of `area`.
pub(super) fn draw_fault_bands<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    x_px: &dyn Fn(f64) -> i32,
    bands: &[FaultBand],
) -> Result<(), DrawError>
where
    DB::ErrorType: 'static,
{
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
        ))?;
    }
    // A lone instant is a dark line; instants closer than a pixel apart merge into a band
    // shaded like a stretch (a line per fault would paint the chart grey).
    let line = FAULT_COLOR.mix(0.75).filled();
    for s in &instants {
        if s.count == 1 || s.x1 <= s.x0 + 1 {
            area.draw(&Rectangle::new([(s.x0 - 1, 0), (s.x0 + 1, height)], line))?;
        } else {
            area.draw(&Rectangle::new([(s.x0 - 1, 0), (s.x1 + 1, height)], shade))?;
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
        let (w, _) = area.estimate_text_size(&text, &style)?;
        let w = w as i32;
        let x = (band.x0 + 3).min(width - w - 2).max(0);
        if let Some(row) = rows.iter().position(|&end| end < x) {
            rows[row] = x + w + 6;
            let y = 4 + 15 * row as i32;
            // A light backing keeps the label readable over lines and points.
            area.draw(&Rectangle::new(
                [(x - 2, y - 1), (x + w + 2, y + 13)],
                WHITE.mix(0.75).filled(),
            ))?;
            area.draw(&Text::new(text, (x, y), style.clone()))?;
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
pub(super) fn fault_legend<'a, DB: DrawingBackend + 'a, Y: Ranged>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
    bands: &[FaultBand],
) -> Result<(), DrawError>
where
    DB::ErrorType: 'static,
{
    if bands.is_empty() {
        return Ok(());
    }
    chart
        .draw_series(std::iter::empty::<Circle<(f64, Y::ValueType), i32>>())?
        .label(format!("nemesis fault ({})", bands.len()))
        .legend(|(x, y)| {
            Rectangle::new(
                [(x, y - 6), (x + 14, y + 6)],
                FAULT_COLOR.mix(0.35).filled(),
            )
        });
    Ok(())
}
