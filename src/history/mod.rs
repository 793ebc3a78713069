//! Histories: the event types, the JSONL reader and writer, and importers
//! (docs/src/reference/history.md is the contract).

pub mod build;
mod cache;
pub mod compact;
pub mod edn;
pub mod error;
pub mod event;
pub(crate) mod fast_line;
pub mod fault_bands;
pub mod fault_spans;
mod key_table;
pub mod reader;
pub mod recorded;
pub mod threaded;
pub mod writer;

use std::path::Path;

pub use compact::{History, Op, OpF, OpType};
pub use error::HistoryError;
pub use event::{Event, EventType, Process};
pub use fault_bands::{fault_bands, FaultBand};
pub use fault_spans::{fault_spans, FaultSpan};
pub use recorded::RecordedLine;
pub use writer::HistoryWriter;

/// Reads a history by its file name: `.edn` is imported from Jepsen, anything else is JSONL.
pub fn read_file(path: &Path) -> Result<History, HistoryError> {
    if path.extension().is_some_and(|e| e == "edn") {
        edn::read_edn_file(path)
    } else {
        reader::read_jsonl_file(path)
    }
}

/// `read_file` with `threads` threads: a JSONL file is read and parsed by `threads - 1`
/// workers while the calling thread builds the history, parsing too whenever it would wait
/// (`threaded`); the history is the same.
pub fn read_file_with_threads(path: &Path, threads: usize) -> Result<History, HistoryError> {
    if threads < 2 || path.extension().is_some_and(|e| e == "edn") {
        return read_file(path);
    }
    let (file, name, size) = reader::open(path)?;
    threaded::read_jsonl_threaded(file, &name, size, threads - 1)
}
