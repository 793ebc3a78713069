//! The legend under a timeline.

use plotters::style::RGBColor;

use super::scene::Scene;
use super::style::{
    fault_color, text_width, ANOMALY, ARROW, ATTEMPT, HATCH_SPACING, HOLD, INFO, LATENCY, LEASE,
    PAST_LEASE, ROW, SHARED, SMALL_SIZE, TEXT, WRITE, WRITE_REJECTED,
};

/// Legend entries only some pictures need.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Extras {
    /// Some holds were taken in `shared` mode (readers).
    pub(super) shared: bool,
    /// Some queue jumps are drawn as arrows.
    pub(super) arrows: bool,
}

/// A swatch's height in pixels.
const SWATCH_H: i32 = 14;

/// Draws the legend from row `y`; returns the row below it.
pub(super) fn legend(scene: &mut Scene, mut y: i32, width: i32, extras: Extras) -> i32 {
    let mut x = 12;
    for (swatch, text) in entries(extras) {
        let w = 24 + 6 + text_width(text, SMALL_SIZE) + 18;
        if x + w > width - 12 {
            x = 12;
            y += ROW + 4;
        }
        swatch.draw(scene, x, y);
        scene.text(text, x + 30, y, SMALL_SIZE, TEXT);
        x += w;
    }
    y + ROW + 4
}

/// What an entry's sample looks like.
#[derive(Clone, Copy)]
enum Swatch {
    Bar(RGBColor, f64, f64),
    Shared,
    Arrow,
    Tick(RGBColor),
    Line(RGBColor),
    Faint(RGBColor),
    Triangle(RGBColor),
    Cross,
    Diamond(RGBColor),
    Band(RGBColor),
    Anomaly,
}

/// The legend's entries, in order: a sample and what it means.
fn entries(extras: Extras) -> Vec<(Swatch, &'static str)> {
    let mut items: Vec<(Swatch, &'static str)> = vec![(
        Swatch::Bar(HOLD, 0.3, 0.92),
        if extras.shared {
            "hold (write, exclusive): acquire ok → release invoke"
        } else {
            "hold: acquire ok → release invoke"
        },
    )];
    if extras.shared {
        items.push((
            Swatch::Shared,
            "read (shared) hold: readers may hold it together, no overlap",
        ));
    }
    items.extend([
        (
            Swatch::Bar(LATENCY, 0.42, 0.82),
            "acquire / release latency",
        ),
        (
            Swatch::Bar(PAST_LEASE, 0.3, 0.92),
            if extras.shared {
                "held after its lease ran out (hatched: a reader)"
            } else {
                "held after its lease ran out"
            },
        ),
        (Swatch::Line(LEASE), "lease"),
        (
            Swatch::Triangle(LEASE),
            "lease end (faint: after a clean release)",
        ),
        (
            Swatch::Faint(LEASE),
            "lease after a kill or unclean release (may still be taken)",
        ),
        (
            Swatch::Faint(INFO),
            "may hold: info acquire, to the longest lease",
        ),
        (
            Swatch::Line(ATTEMPT),
            "failed acquire, or op of unknown outcome",
        ),
        (Swatch::Cross, "failed op"),
        (Swatch::Diamond(INFO), "indeterminate (info) op"),
        (Swatch::Tick(WRITE), "write accepted (w<token>)"),
        (Swatch::Tick(WRITE_REJECTED), "write rejected"),
        (
            Swatch::Band(fault_color("pause")),
            "fault (darker: processes it hit)",
        ),
        (Swatch::Anomaly, "anomaly #n kind [event indices]"),
    ]);
    if extras.arrows {
        items.push((
            Swatch::Arrow,
            "queue jump (unfair): from the waiter overtaken to who got the lock",
        ));
    }
    items
}

impl Swatch {
    /// Draws the sample in the 24 × 14 pixels at (`x`, `y`).
    fn draw(self, scene: &mut Scene, x: i32, y: i32) {
        let h = SWATCH_H;
        let at = |f: f64| y + (h as f64 * f) as i32;
        match self {
            Swatch::Bar(c, a, b) => scene.fill(x, at(a), x + 24, at(b), c, 1.0),
            Swatch::Shared => {
                let (y0, y1) = (at(0.3), at(0.92));
                scene.fill(x, y0, x + 24, y1, SHARED, 1.0);
                scene.fill(x, y0, x + 24, y0 + 1, HOLD, 1.0);
                scene.fill(x, y1 - 1, x + 24, y1, HOLD, 1.0);
                scene.hatch((x, y0 + 1, x + 24, y1 - 1), HATCH_SPACING, HOLD);
            }
            Swatch::Arrow => {
                // Sideways, to fit the row: from the waiter (the square) to the overtaker.
                scene.top_polygons.push((
                    vec![
                        (x + 2, y + 4),
                        (x + 8, y + 4),
                        (x + 8, y + 10),
                        (x + 2, y + 10),
                    ],
                    ARROW,
                ));
                scene.top_polygons.push((
                    vec![
                        (x + 8, y + 6),
                        (x + 18, y + 6),
                        (x + 18, y + 8),
                        (x + 8, y + 8),
                    ],
                    ARROW,
                ));
                scene.top_polygons.push((
                    vec![(x + 17, y + 2), (x + 24, y + 7), (x + 17, y + 12)],
                    ARROW,
                ));
            }
            Swatch::Tick(c) => scene.fill(x + 11, y, x + 13, y + h, c, 1.0),
            Swatch::Line(c) => scene.fill(x, at(0.45), x + 24, at(0.45) + 2, c, 1.0),
            Swatch::Faint(c) => scene.fill(x, at(0.45), x + 24, at(0.45) + 2, c, 0.45),
            Swatch::Triangle(c) => scene
                .polygons
                .push((vec![(x + 6, y + 1), (x + 18, y + 1), (x + 12, y + 10)], c)),
            Swatch::Cross => {
                let (cx, cy, r) = (x + 12, y + 7, 5);
                scene.cross(cx, cy, r);
            }
            Swatch::Diamond(c) => scene.polygons.push((
                vec![
                    (x + 12, y + 1),
                    (x + 18, y + 7),
                    (x + 12, y + 13),
                    (x + 6, y + 7),
                ],
                c,
            )),
            Swatch::Band(c) => scene.fill(x, y, x + 24, y + h, c, 0.35),
            Swatch::Anomaly => {
                scene.fill(x, y, x + 24, y + h, ANOMALY, 0.22);
                scene.fill(x, y, x + 24, y + 2, ANOMALY, 1.0);
                scene.fill(x, y + h - 2, x + 24, y + h, ANOMALY, 1.0);
                scene.fill(x, y, x + 2, y + h, ANOMALY, 1.0);
                scene.fill(x + 22, y, x + 24, y + h, ANOMALY, 1.0);
            }
        }
    }
}
