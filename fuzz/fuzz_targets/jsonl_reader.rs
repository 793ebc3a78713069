//! Any bytes, read as a JSONL history: a history or an error naming a line, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockaudit::history::{reader::read_jsonl, HistoryError};

fuzz_target!(|data: &[u8]| {
    match read_jsonl(data, "fuzz.jsonl", Some(data.len() as u64)) {
        Ok(history) => assert!(history.ops.len() <= data.len()),
        Err(HistoryError::Invalid { line, .. }) => assert!(line >= 1),
        Err(HistoryError::Io { error, .. }) => panic!("no I/O on a slice: {error}"),
    }
});
