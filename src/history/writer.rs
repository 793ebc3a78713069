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

    /// Appends a line already in the writer's own layout (`{"index":<n>,...}`, as workers
    /// write them), renumbering it without parsing the rest. False, and nothing written, if
    /// the line is not in that layout: the caller then appends it as an `Event`.
    pub fn append_line(&mut self, line: &str) -> io::Result<bool> {
        const PREFIX: &str = "{\"index\":";
        let Some(rest) = line.strip_prefix(PREFIX) else {
            return Ok(false);
        };
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || !rest[digits..].starts_with(',') || line.contains('\n') {
            return Ok(false);
        }
        write!(self.out, "{PREFIX}{}", self.next_index)?;
        self.out.write_all(rest[digits..].trim_end().as_bytes())?;
        self.out.write_all(b"\n")?;
        self.next_index += 1;
        Ok(true)
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
    fn a_line_in_the_writers_layout_is_renumbered_as_it_is() {
        let mut writer = HistoryWriter::new(Vec::new());
        let line = r#"{"index":0,"time":5,"process":1,"type":"invoke","f":"acquire","key":"k"}"#;
        assert!(writer.append_line(line).unwrap());
        assert!(writer.append_line(line).unwrap());
        assert!(!writer.append_line(r#"{"time":5,"index":0}"#).unwrap());
        let text = String::from_utf8(writer.into_inner()).unwrap();
        assert_eq!(
            text,
            format!(
                "{line}\n{}\n",
                line.replacen("\"index\":0", "\"index\":1", 1)
            )
        );
    }

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
