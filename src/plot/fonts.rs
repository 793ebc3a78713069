//! The one font every picture uses, shipped in the repository (DejaVu Sans, see
//! assets/fonts/DejaVuSans-LICENSE.txt) and rendered in pure Rust by ab_glyph, so no system
//! font library is needed.

use std::sync::Once;

/// The family name pictures ask for.
pub const FAMILY: &str = "sans-serif";

static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// Registers the font with plotters (once per process); call before drawing any text.
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TrueType font checked in with the code; failing to parse
        // them would be a broken build, not bad input.
        if plotters::style::register_font(FAMILY, plotters::style::FontStyle::Normal, FONT).is_err()
        {
            tracing::error!("the bundled DejaVu Sans font did not load: text will be missing");
        }
    });
}
