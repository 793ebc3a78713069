//! Why a picture or the report page could not be made.

use std::path::{Path, PathBuf};

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
    #[error("cannot draw {}: {message}", path.display())]
    Draw { path: PathBuf, message: String },
}

impl PlotError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        PlotError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// A drawing error while making `path` (any `Display`able plotters error).
    pub fn draw(path: &Path, message: impl std::fmt::Display) -> Self {
        PlotError::Draw {
            path: path.to_path_buf(),
            message: message.to_string(),
        }
    }
}
