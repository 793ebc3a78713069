//! Why a picture or the report page could not be made.

use std::path::{Path, PathBuf};

use plotters::drawing::DrawingAreaErrorKind;

use crate::history::HistoryError;

/// Why a picture or the report page could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The input (a run folder, a history or a report) is missing or malformed.
    #[error("{}: {message}", path.display())]
    Input { path: PathBuf, message: String },
    /// The history does not read.
    #[error(transparent)]
    History(#[from] HistoryError),
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// plotters failed to draw or encode a picture.
    #[error("cannot draw {}: {error}", path.display())]
    Draw { path: PathBuf, error: DrawError },
}

/// plotters' own error while drawing, on whichever backend it drew. Kept whole rather than
/// as its text; the message quotes it, so it is not also `PlotError::Draw`'s `source()`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DrawError(Box<dyn std::error::Error + Send + Sync>);

impl<E: std::error::Error + Send + Sync + 'static> From<DrawingAreaErrorKind<E>> for DrawError {
    fn from(error: DrawingAreaErrorKind<E>) -> Self {
        DrawError(Box::new(error))
    }
}

impl PlotError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        PlotError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// A drawing error while making `path`.
    pub fn draw(path: &Path, error: impl Into<DrawError>) -> Self {
        PlotError::Draw {
            path: path.to_path_buf(),
            error: error.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drawing_error_says_plotters_words_once() {
        let error = PlotError::draw(
            Path::new("out/latency.svg"),
            DrawingAreaErrorKind::<std::io::Error>::LayoutError,
        );
        assert_eq!(error.to_string(), "cannot draw out/latency.svg: Bad layout");
        // The message quotes the cause: `{:#}` must not say it twice.
        assert!(std::error::Error::source(&error).is_none());
        let PlotError::Draw { error, .. } = &error else {
            panic!("{error:?}")
        };
        assert!(matches!(
            error
                .0
                .downcast_ref::<DrawingAreaErrorKind<std::io::Error>>(),
            Some(DrawingAreaErrorKind::LayoutError)
        ));
    }
}
