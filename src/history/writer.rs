//! The JSONL writer the recorder uses: one event per line, in the order received.

use std::io::{self, Write};

use super::event::Event;

/// Writes events as JSON lines. The recorder calls `flush` after each batch it receives, so
/// a killed controller leaves at most one truncated final line, which the reader forgives.
pub struct HistoryWriter<W: Write> {
    out: W,
    next_index: u64,
}

impl<W: Write> HistoryWriter<W> {
    pub fn new(out: W) -> Self {
        HistoryWriter { out, next_index: 0 }
    }

    /// The index the next event will be given.
    pub fn next_index(&self) -> u64 {
        self.next_index
    }

    /// Appends `event`, overwriting its `index` with the next one in sequence so that the
    /// file's indices always start at 0 and grow by exactly 1.
    pub fn append(&mut self, event: &mut Event) -> io::Result<()> {
        event.index = self.next_index;
        serde_json::to_writer(&mut self.out, event)?;
        self.out.write_all(b"\n")?;
        self.next_index += 1;
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::event::EventType;
    use crate::history::reader::read_jsonl;

    #[test]
    fn what_the_writer_writes_the_reader_reads() {
        let mut writer = HistoryWriter::new(Vec::new());
        let mut events = vec![
            Event::client(7, 10, 0, EventType::Invoke, "acquire", "lock:a"),
            Event::client(7, 20, 0, EventType::Ok, "acquire", "lock:a")
                .with_value(serde_json::json!({"token": 1, "lease_ms": 500})),
            Event::nemesis(7, 30, "kill", &["worker-0"], &[0]),
        ];
        for event in &mut events {
            writer.append(event).unwrap();
        }
        let bytes = writer.into_inner();
        let history = read_jsonl(bytes.as_slice(), "mem", None).unwrap();
        assert_eq!(history.ops.len(), 3);
        assert_eq!(history.ops[1].token(), Some(1));
        assert_eq!(history.faults[0].name, "kill");
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.starts_with("{\"index\":0,"), "{text}");
        assert!(text.ends_with("}\n"));
    }
}
