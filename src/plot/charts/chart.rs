//! What every chart shares: its size, its files, and drawing it on either backend.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::plot::error::{DrawError, PlotError};
use crate::plot::fonts;

/// Every chart's size in pixels.
pub const WIDTH: u32 = 1200;
pub const HEIGHT: u32 = 520;

/// One chart as written.
#[derive(Debug, Clone)]
pub struct ChartFiles {
    /// `latency`, `rate` or `fairness`: the files' stem.
    pub name: &'static str,
    /// The chart's title, as drawn.
    pub title: String,
    pub svg: PathBuf,
    pub png: PathBuf,
}

/// A chart that can draw itself on any plotters backend.
pub(super) trait Chart {
    fn title(&self) -> String;
    /// Draws on `root`; the backends' errors are `'static` (to be kept in a `DrawError`).
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static;
}

pub(super) fn render(
    chart: &impl Chart,
    name: &'static str,
    out_dir: &Path,
) -> Result<ChartFiles, PlotError> {
    let svg_path = out_dir.join(format!("{name}.svg"));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        chart
            .draw(&root)
            .map_err(|m| PlotError::draw(&svg_path, m))?;
        root.present().map_err(|e| PlotError::draw(&svg_path, e))?;
    }
    crate::outfile::write(&svg_path, svg).map_err(|e| PlotError::io(&svg_path, e))?;

    let png_path = out_dir.join(format!("{name}.png"));
    crate::outfile::write_via(
        &png_path,
        |tmp| {
            let root = BitMapBackend::new(tmp, (WIDTH, HEIGHT)).into_drawing_area();
            chart
                .draw(&root)
                .map_err(|m| PlotError::draw(&png_path, m))?;
            root.present().map_err(|e| PlotError::draw(&png_path, e))
        },
        |e| PlotError::io(&png_path, e),
    )?;
    Ok(ChartFiles {
        name,
        title: chart.title(),
        svg: svg_path,
        png: png_path,
    })
}

pub(super) fn font(size: u32) -> FontDesc<'static> {
    (fonts::FAMILY, size).into_font()
}
