//! The JSONL writer the recorder uses: one event per line, in the order received; and
//! `write_line`, the one serialiser of an event line, which the workers use too.

use std::io::{self, Write};

use super::event::{Event, Process};

/// Appends `event` as one JSON line (with its `\n`) to `out`, byte for byte what
/// `serde_json::to_writer` writes for it, without serde's generic path: the workers write
/// two lines per operation, and serde's per-member calls and escaping checks were a good
/// part of a worker's time. An event with unknown members (`extra`) goes through serde.
pub fn write_line(out: &mut Vec<u8>, event: &Event) {
    if !event.extra.is_empty() {
        // Writing JSON to a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, event);
        out.push(b'\n');
        return;
    }
    let mut numbers = itoa::Buffer::new();
    out.extend_from_slice(b"{\"index\":");
    out.extend_from_slice(numbers.format(event.index).as_bytes());
    out.extend_from_slice(b",\"time\":");
    out.extend_from_slice(numbers.format(event.time).as_bytes());
    out.extend_from_slice(b",\"process\":");
    match event.process {
        Process::Client(p) => out.extend_from_slice(numbers.format(p).as_bytes()),
        Process::Nemesis => out.extend_from_slice(b"\"nemesis\""),
    }
    out.extend_from_slice(b",\"type\":\"");
    out.extend_from_slice(event.ty.name().as_bytes());
    out.extend_from_slice(b"\",\"f\":");
    write_str(out, &event.f);
    if let Some(key) = &event.key {
        out.extend_from_slice(b",\"key\":");
        write_str(out, key);
    }
    if let Some(value) = &event.value {
        out.extend_from_slice(b",\"value\":");
        let _ = serde_json::to_writer(&mut *out, value);
    }
    if let Some(error) = &event.error {
        out.extend_from_slice(b",\"error\":");
        write_str(out, error);
    }
    if let Some(node) = &event.node {
        out.extend_from_slice(b",\"node\":");
        write_str(out, node);
    }
    if let Some(wall) = event.wall {
        out.extend_from_slice(b",\"wall\":");
        out.extend_from_slice(numbers.format(wall).as_bytes());
    }
    out.extend_from_slice(b"}\n");
}

/// A JSON string: as it is between quotes when nothing in it needs escaping (every string a
/// client writes), else escaped by serde_json.
fn write_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

const INDEX_PREFIX: &str = "{\"index\":";

/// What follows the index of a line in the writer's own layout (`{"index":<n>,...}`, one
/// line), or None for a line in any other.
fn after_index(line: &str) -> Option<&str> {
    let rest = line.strip_prefix(INDEX_PREFIX)?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let rest = &rest[digits..];
    (digits > 0 && rest.starts_with(',') && !line.contains('\n')).then_some(rest)
}

/// Whether `append_line` takes `line` as it is (renumbered).
pub fn in_own_layout(line: &str) -> bool {
    after_index(line).is_some()
}

/// Writes events as JSON lines. The recorder calls `flush` after each batch it receives, so
/// a killed controller leaves at most one truncated final line, which the reader forgives.
pub struct HistoryWriter<W: Write> {
    out: W,
    next_index: u64,
    /// The line being written, kept to save an allocation per event.
    line: Vec<u8>,
}

impl<W: Write> HistoryWriter<W> {
    pub fn new(out: W) -> Self {
        HistoryWriter {
            out,
            next_index: 0,
            line: Vec::new(),
        }
    }

    /// The index the next event will be given.
    pub fn next_index(&self) -> u64 {
        self.next_index
    }

    /// Appends `event`, overwriting its `index` with the next one in sequence so that the
    /// file's indices always start at 0 and grow by exactly 1.
    pub fn append(&mut self, event: &mut Event) -> io::Result<()> {
        event.index = self.next_index;
        self.line.clear();
        write_line(&mut self.line, event);
        self.out.write_all(&self.line)?;
        self.next_index += 1;
        Ok(())
    }

    /// Appends a line already in the writer's own layout (`{"index":<n>,...}`, as workers
    /// write them), renumbering it without parsing the rest. False, and nothing written, if
    /// the line is not in that layout: the caller then appends it as an `Event`.
    pub fn append_line(&mut self, line: &str) -> io::Result<bool> {
        let Some(rest) = after_index(line) else {
            return Ok(false);
        };
        write!(self.out, "{INDEX_PREFIX}{}", self.next_index)?;
        self.out.write_all(rest.trim_end().as_bytes())?;
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

    fn serde_line(event: &Event) -> String {
        serde_json::to_string(event).unwrap() + "\n"
    }

    fn written(event: &Event) -> String {
        let mut out = Vec::new();
        write_line(&mut out, event);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn write_line_writes_what_serde_writes() {
        let mut events = vec![
            Event::client(3, -5, 7, EventType::Invoke, "acquire", "lock:a")
                .with_value(serde_json::json!({"ttl_ms": 2000})),
            Event::client(4, 20, 0, EventType::Ok, "write", "lock:0")
                .with_value(serde_json::json!({"token": null, "value": 3})),
            Event::client(5, 21, 2, EventType::Fail, "acquire", "k\"\\\n\u{1}é")
                .with_error("held by \"another\"\tclient"),
            Event::client(6, i64::MAX, u64::MAX, EventType::Info, "renew", "")
                .with_error("timeout"),
            Event::nemesis(u64::MAX, 30, "kill", &["worker-0"], &[0, 1]),
        ];
        events[1].wall = Some(1_764_000_000_000);
        events[3].node = Some("n\u{7f}1".into());
        let mut with_extra = Event::client(7, 1, 1, EventType::Ok, "read", "lock:1");
        with_extra
            .extra
            .insert("worker".into(), serde_json::json!("w-1"));
        events.push(with_extra);
        for event in &events {
            assert_eq!(written(event), serde_line(event));
        }
    }

    proptest::proptest! {
        #[test]
        fn write_line_writes_what_serde_writes_for_any_strings(
            f in "\\PC*", key in proptest::option::of(".*"), error in proptest::option::of(".*"),
            time in proptest::num::i64::ANY, process in proptest::num::u64::ANY,
            wall in proptest::option::of(proptest::num::i64::ANY),
        ) {
            let mut event = Event::client(1, time, process, EventType::Fail, &f, "");
            event.key = key;
            event.error = error;
            event.wall = wall;
            proptest::prop_assert_eq!(written(&event), serde_line(&event));
        }
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
