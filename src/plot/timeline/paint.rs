//! Paints a scene with plotters, on either backend.

use plotters::backend::DrawingBackend;
use plotters::coord::Shift;
use plotters::drawing::DrawingArea;
use plotters::element::{Polygon, Rectangle, Text};
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{Color, FontDesc, FontStyle, TextStyle};

use crate::plot::error::DrawError;
use crate::plot::fonts;

use super::scene::{Fill, Scene};
use super::style::{text_width, WHITE};

/// Where plotters puts a glyph's ink and where it belongs: plotters' ab_glyph renderer
/// starts each glyph's ink at a whole-pixel pen position, dropping the glyph's left side
/// bearing, so small text drawn whole has uneven gaps. Drawn glyph by glyph instead, each
/// glyph goes where its pen position (the advance of the text before it, measured at 8× the
/// size for sub-pixel precision) plus its side bearing (estimated as half of what its advance
/// leaves around its ink) puts it, rounded once.
struct Glyphs;

/// Metrics at `GLYPH_SCALE`× the size: (advance, ink width), per (char, size).
type GlyphMetrics = std::collections::HashMap<(char, u64), (f64, f64)>;
const GLYPH_SCALE: f64 = 8.0;

impl Glyphs {
    fn metrics(c: char, size: f64) -> (f64, f64) {
        static CACHE: std::sync::OnceLock<std::sync::Mutex<GlyphMetrics>> =
            std::sync::OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let key = (c, size.to_bits());
        if let Some(m) = cache.lock().ok().and_then(|m| m.get(&key).copied()) {
            return m;
        }
        let big = FontDesc::new(fonts::FAMILY.into(), size * GLYPH_SCALE, FontStyle::Normal);
        let text = c.to_string();
        let advance = big.box_size(&text).map(|(w, _)| w as f64).unwrap_or(0.0);
        let (mut lo, mut hi) = (i32::MAX, i32::MIN);
        let drawn = big.draw(&text, (0, 0), |x, _, a| {
            if a > 0.0 {
                lo = lo.min(x);
                hi = hi.max(x);
            }
            Ok::<(), ()>(())
        });
        let ink = match drawn {
            Ok(Ok(())) if hi >= lo => (hi - lo + 1) as f64,
            _ => 0.0,
        };
        let m = (advance / GLYPH_SCALE, ink / GLYPH_SCALE);
        if let Ok(mut map) = cache.lock() {
            map.insert(key, m);
        }
        m
    }

    /// Each visible character of `text` with its x, for text starting at `x`.
    fn place(text: &str, x: i32, size: f64) -> Vec<(char, i32)> {
        let big = FontDesc::new(fonts::FAMILY.into(), size * GLYPH_SCALE, FontStyle::Normal);
        let mut out = Vec::with_capacity(text.len());
        for (i, c) in text.char_indices() {
            if c.is_whitespace() {
                continue;
            }
            let pen = big
                .box_size(&text[..i])
                .map(|(w, _)| w as f64)
                .unwrap_or(0.0)
                / GLYPH_SCALE;
            let (advance, ink) = Glyphs::metrics(c, size);
            let bearing = ((advance - ink) / 2.0).max(0.0);
            out.push((c, x + (pen + bearing).round() as i32));
        }
        out
    }
}

/// Paints `scene`; `per_glyph`: place text glyph by glyph (bitmaps, see `Glyphs`).
pub(super) fn paint<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    scene: &Scene,
    per_glyph: bool,
) -> Result<(), DrawError>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let fill = |f: &Fill| {
        root.draw(&Rectangle::new(
            [(f.x0, f.y0), (f.x1, f.y1)],
            f.color.mix(f.alpha).filled(),
        ))
    };
    for f in scene.under.iter().chain(&scene.fills) {
        fill(f)?;
    }
    for (points, color) in &scene.polygons {
        root.draw(&Polygon::new(points.clone(), color.filled()))?;
    }
    for f in scene.outlines.iter().chain(&scene.top_fills) {
        fill(f)?;
    }
    for (points, color) in &scene.top_polygons {
        root.draw(&Polygon::new(points.clone(), color.filled()))?;
    }
    for l in &scene.labels {
        let style: TextStyle = FontDesc::new(fonts::FAMILY.into(), l.size, FontStyle::Normal)
            .color(&l.color)
            .pos(Pos::new(l.h, VPos::Top));
        if l.boxed {
            let w = text_width(&l.text, l.size);
            let x0 = match l.h {
                HPos::Left => l.x,
                HPos::Center => l.x - w / 2,
                HPos::Right => l.x - w,
            };
            root.draw(&Rectangle::new(
                [(x0 - 1, l.y), (x0 + w + 2, l.y + l.size as i32 + 1)],
                WHITE.mix(0.85).filled(),
            ))?;
        }
        if per_glyph {
            let w = text_width(&l.text, l.size);
            let x0 = match l.h {
                HPos::Left => l.x,
                HPos::Center => l.x - w / 2,
                HPos::Right => l.x - w,
            };
            let style = style.pos(Pos::new(HPos::Left, VPos::Top));
            let mut buf = [0u8; 4];
            for (c, x) in Glyphs::place(&l.text, x0, l.size) {
                root.draw(&Text::new(
                    &*c.encode_utf8(&mut buf),
                    (x, l.y),
                    style.clone(),
                ))?;
            }
        } else {
            root.draw(&Text::new(l.text.as_str(), (l.x, l.y), style))?;
        }
    }
    Ok(root.present()?)
}
