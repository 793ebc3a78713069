//! Any bytes, imported as a Jepsen EDN history: a history or an error naming a line, never a
//! panic, a stack overflow or an allocation that runs out of memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockaudit::history::{edn::read_edn, HistoryError};

fuzz_target!(|data: &[u8]| {
    match read_edn(data, "fuzz.edn") {
        Ok(history) => assert!(history.ops.len() <= data.len()),
        Err(HistoryError::Invalid { line, .. }) => assert!(line >= 1),
        Err(HistoryError::Io { error, .. }) => panic!("no I/O on a slice: {error}"),
    }
});
