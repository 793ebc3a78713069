//! Importer for Jepsen / Knossos EDN histories (being written).

use std::path::Path;

use super::compact::History;
use super::error::HistoryError;

pub fn read_edn_file(path: &Path) -> Result<History, HistoryError> {
    Err(HistoryError::at(&path.display().to_string(), 0, "", "EDN import is not built yet".into()))
}
