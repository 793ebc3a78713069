//! The streaming JSONL reader.
//!
//! Reads through a 1 MiB buffer (never the whole file at once) and parses each line where it
//! lies: first with the fast scanner of `fast_line.rs`, and if it steps aside, with serde
//! into borrowed fields. Only a line that fails both is parsed again, slowly, to name the
//! field at fault.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use super::build::{EventRef, HistoryBuilder, Payload, ValueShape};
use super::compact::History;
use super::error::HistoryError;
use super::event::{EventType, Process};
use super::fast_line;

/// The shortest plausible line is about 60 bytes; reserving for that many events costs no
/// resident memory for what goes unused, and spares the op vector from doubling.
const MIN_LINE_BYTES: u64 = 60;

/// Reads and validates the JSONL history at `path`.
pub fn read_jsonl_file(path: &Path) -> Result<History, HistoryError> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| HistoryError::io(&name, e))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    read_jsonl(file, &name, Some(size))
}

/// Reads and validates a JSONL history from any reader; `source` names it in messages and
/// `size_hint` (bytes), if known, lets the reader reserve memory once.
pub fn read_jsonl<R: Read>(
    input: R,
    source: &str,
    size_hint: Option<u64>,
) -> Result<History, HistoryError> {
    let mut reader = BufReader::with_capacity(1 << 20, input);
    let mut builder = HistoryBuilder::new(source);
    if let Some(size) = size_hint {
        builder.reserve((size / MIN_LINE_BYTES) as usize);
    }
    // Lines are parsed where they lie in the read buffer; only a line cut by the buffer's
    // edge is copied, into `carry`.
    let mut carry: Vec<u8> = Vec::new();
    let mut line_no: u64 = 0;
    loop {
        let buffer = reader.fill_buf().map_err(|e| HistoryError::io(source, e))?;
        if buffer.is_empty() {
            break;
        }
        let filled = buffer.len();
        let mut rest = buffer;
        if !carry.is_empty() {
            match memchr::memchr(b'\n', rest) {
                Some(end) => {
                    carry.extend_from_slice(&rest[..=end]);
                    rest = &rest[end + 1..];
                    line_no += 1;
                    if let Flow::Stop = handle_line(&mut builder, source, line_no, &carry)? {
                        return Ok(builder.finish());
                    }
                    carry.clear();
                }
                None => {
                    carry.extend_from_slice(rest);
                    reader.consume(filled);
                    continue;
                }
            }
        }
        while let Some(end) = memchr::memchr(b'\n', rest) {
            line_no += 1;
            if let Flow::Stop = handle_line(&mut builder, source, line_no, &rest[..=end])? {
                return Ok(builder.finish());
            }
            rest = &rest[end + 1..];
        }
        carry.extend_from_slice(rest);
        reader.consume(filled);
    }
    if !carry.is_empty() {
        line_no += 1;
        handle_line(&mut builder, source, line_no, &carry)?;
    }
    Ok(builder.finish())
}

enum Flow {
    Go,
    Stop,
}

/// Parses one line (with its `\n`, unless it is the unterminated last one) into `builder`.
fn handle_line(
    builder: &mut HistoryBuilder,
    source: &str,
    line_no: u64,
    line: &[u8],
) -> Result<Flow, HistoryError> {
    let terminated = line.last() == Some(&b'\n');
    let text = trim_line_end(line);
    if let Some(event) = fast_line::parse(text) {
        builder.push(line_no, &event)?;
        return Ok(Flow::Go);
    }
    if text.iter().all(u8::is_ascii_whitespace) {
        if terminated {
            return Err(HistoryError::at(source, line_no, "", "empty line".into()));
        }
        return Ok(Flow::Stop);
    }
    match parse_line(text) {
        Ok(raw) => builder.push(line_no, &raw.as_event_ref())?,
        Err(serde_error) => {
            // Only the final line may be cut short: the recorder was killed mid-write.
            if !terminated && serde_error.is_eof() {
                builder.warn(format!(
                    "{source}:{line_no}: skipped a truncated final line ({} bytes)",
                    text.len()
                ));
                return Ok(Flow::Stop);
            }
            return Err(diagnose(source, line_no, text, &serde_error));
        }
    }
    Ok(Flow::Go)
}

fn trim_line_end(line: &[u8]) -> &[u8] {
    let mut end = line.len();
    while end > 0 && (line[end - 1] == b'\n' || line[end - 1] == b'\r') {
        end -= 1;
    }
    &line[..end]
}

/// A line as serde sees it, borrowing from the buffer.
#[derive(Deserialize)]
struct RawLine<'a> {
    index: u64,
    time: i64,
    process: Process,
    #[serde(rename = "type")]
    ty: EventType,
    #[serde(borrow)]
    f: Cow<'a, str>,
    #[serde(borrow, default)]
    key: Option<Cow<'a, str>>,
    #[serde(default)]
    value: Option<RawPayload>,
}

impl RawLine<'_> {
    fn as_event_ref(&self) -> EventRef<'_> {
        let payload = match &self.value {
            Some(raw) => Payload {
                token: raw.token,
                lease_ms: raw.lease_ms,
                ttl_ms: raw.ttl_ms,
                shared: raw.mode == Some(LockMode::Shared),
                fair: raw.fair == Some(true),
                value: raw.value,
                targets: raw.targets.clone().unwrap_or_default(),
                processes: raw.processes.clone().unwrap_or_default(),
            },
            None => Payload::default(),
        };
        EventRef {
            index: self.index,
            time: self.time,
            process: self.process,
            ty: self.ty,
            f: &self.f,
            key: self.key.as_deref(),
            payload,
        }
    }
}

#[derive(Deserialize)]
struct RawPayload {
    #[serde(default)]
    token: Option<i64>,
    #[serde(default)]
    lease_ms: Option<i64>,
    /// Acquire invoke options: the ttl asked for, the lock mode, fairness, the wait allowed
    /// (read so a wrong type is an error; the checks do not use the wait).
    #[serde(default)]
    ttl_ms: Option<i64>,
    #[serde(default)]
    mode: Option<LockMode>,
    #[serde(default)]
    fair: Option<bool>,
    #[serde(default)]
    #[allow(dead_code)]
    wait_ms: Option<i64>,
    #[serde(default)]
    value: ValueShape,
    #[serde(default)]
    targets: Option<Vec<String>>,
    #[serde(default)]
    processes: Option<Vec<u64>>,
}

#[derive(Deserialize, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum LockMode {
    Exclusive,
    Shared,
}

/// Any JSON value, reduced to the shape the register check cares about.
impl<'de> Deserialize<'de> for ValueShape {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ShapeVisitor;
        impl<'de> Visitor<'de> for ShapeVisitor {
            type Value = ValueShape;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_i64<E>(self, v: i64) -> Result<ValueShape, E> {
                Ok(ValueShape::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<ValueShape, E> {
                Ok(i64::try_from(v).map_or(ValueShape::Other, ValueShape::Int))
            }
            fn visit_f64<E>(self, _: f64) -> Result<ValueShape, E> {
                Ok(ValueShape::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<ValueShape, E> {
                Ok(ValueShape::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<ValueShape, E> {
                Ok(ValueShape::Other)
            }
            fn visit_unit<E>(self) -> Result<ValueShape, E> {
                Ok(ValueShape::Null)
            }
            fn visit_none<E>(self) -> Result<ValueShape, E> {
                Ok(ValueShape::Null)
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<ValueShape, D2::Error> {
                d.deserialize_any(self)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ValueShape, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(ValueShape::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ValueShape, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(ValueShape::Other)
            }
        }
        d.deserialize_any(ShapeVisitor)
    }
}

fn parse_line(text: &[u8]) -> Result<RawLine<'_>, serde_json::Error> {
    serde_json::from_slice(text)
}

/// Parses a line that serde rejected into a generic value and names the field at fault.
fn diagnose(source: &str, line: u64, text: &[u8], serde_error: &serde_json::Error) -> HistoryError {
    let at = |field: &str, message: String| HistoryError::at(source, line, field, message);
    let value: Value = match serde_json::from_slice(text) {
        Ok(v) => v,
        Err(e) => {
            return at(
                "",
                format!(
                    "not valid JSON: {} (column {})",
                    strip_position(&e),
                    e.column()
                ),
            )
        }
    };
    let Some(object) = value.as_object() else {
        return at("", "not a JSON object".into());
    };
    let describe = |v: &Value| match v {
        Value::Null => "null".to_string(),
        Value::String(s) => format!("the string \"{s}\""),
        other => other.to_string(),
    };
    for (field, want) in [
        ("index", "an integer >= 0"),
        ("time", "an integer (nanoseconds)"),
        ("process", "an integer >= 0 or \"nemesis\""),
        ("type", "\"invoke\", \"ok\", \"fail\" or \"info\""),
        ("f", "a string"),
    ] {
        let Some(v) = object.get(field) else {
            return at(field, "missing (required)".into());
        };
        let fits = match field {
            "index" => v.as_u64().is_some(),
            "time" => v.as_i64().is_some(),
            "process" => v.as_u64().is_some() || v.as_str() == Some("nemesis"),
            "type" => matches!(v.as_str(), Some("invoke" | "ok" | "fail" | "info")),
            _ => v.is_string(),
        };
        if !fits {
            return at(field, format!("expected {want}, found {}", describe(v)));
        }
    }
    if let Some(key) = object.get("key") {
        if !key.is_string() && !key.is_null() {
            return at("key", format!("expected a string, found {}", describe(key)));
        }
    }
    match object.get("value") {
        None | Some(Value::Null) => {}
        Some(Value::Object(payload)) => {
            for field in ["token", "lease_ms", "ttl_ms", "wait_ms"] {
                match payload.get(field) {
                    None | Some(Value::Null) => {}
                    Some(v) if v.as_i64().is_some() => {}
                    Some(v) => {
                        return at(
                            &format!("value.{field}"),
                            format!("expected an integer or null, found {}", describe(v)),
                        )
                    }
                }
            }
            if let Some(v) = payload.get("mode") {
                if !matches!(v, Value::Null) && !matches!(v.as_str(), Some("exclusive" | "shared"))
                {
                    return at(
                        "value.mode",
                        format!(
                            "expected \"exclusive\" or \"shared\", found {}",
                            describe(v)
                        ),
                    );
                }
            }
            if let Some(v) = payload.get("fair") {
                if !v.is_null() && !v.is_boolean() {
                    return at(
                        "value.fair",
                        format!("expected true or false, found {}", describe(v)),
                    );
                }
            }
            if let Some(v) = payload.get("processes") {
                let ok = v.is_null()
                    || v.as_array()
                        .is_some_and(|a| a.iter().all(|p| p.as_u64().is_some()));
                if !ok {
                    return at(
                        "value.processes",
                        format!("expected a list of process numbers, found {}", describe(v)),
                    );
                }
            }
            if let Some(v) = payload.get("targets") {
                let ok =
                    v.is_null() || v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
                if !ok {
                    return at(
                        "value.targets",
                        format!("expected a list of names, found {}", describe(v)),
                    );
                }
            }
        }
        Some(other) => {
            return at(
                "value",
                format!("expected an object or null, found {}", describe(other)),
            )
        }
    }
    at("", strip_position(serde_error))
}

/// serde_json appends " at line 1 column N"; our messages carry their own position.
fn strip_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(pos) => text[..pos].to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::compact::{flags, OpF, OpType};

    fn read(text: &str) -> Result<History, HistoryError> {
        read_jsonl(text.as_bytes(), "test.jsonl", None)
    }

    fn error_of(text: &str) -> (u64, String, String) {
        let error = read(text).expect_err("should be rejected");
        let message = error.to_string();
        (
            error.line().unwrap(),
            error.field().unwrap_or("").to_string(),
            message,
        )
    }

    const EXAMPLE: &str = r#"{"index":0,"time":1200,"process":0,"type":"invoke","f":"acquire","key":"lock:a"}
{"index":1,"time":91000,"process":0,"type":"ok","f":"acquire","key":"lock:a","value":{"token":33,"lease_ms":2000}}
{"index":2,"time":95000,"process":"nemesis","type":"info","f":"pause","value":{"targets":["worker-0"],"processes":[0]}}
{"index":3,"time":2100000000,"process":1,"type":"invoke","f":"acquire","key":"lock:a"}
{"index":4,"time":2100090000,"process":1,"type":"ok","f":"acquire","key":"lock:a","value":{"token":34,"lease_ms":2000}}
{"index":5,"time":2100200000,"process":1,"type":"invoke","f":"write","key":"lock:a","value":{"token":34,"value":"b"}}
"#;

    #[test]
    fn reads_the_example_into_compact_ops() {
        let history = read(EXAMPLE).unwrap();
        assert_eq!(history.ops.len(), 6);
        assert_eq!(history.keys, vec!["lock:a"]);
        assert_eq!(history.processes, vec![0, 1]);
        let ok = history.ops[1];
        assert_eq!((ok.ty, ok.f), (OpType::Ok, OpF::Acquire));
        assert_eq!((ok.token(), ok.lease_ms()), (Some(33), Some(2000)));
        assert_eq!(history.faults[0].name, "pause");
        assert_eq!(history.faults[0].targets, vec!["worker-0"]);
        assert_eq!(history.faults[0].processes, vec![0]);
        let write = history.ops[5];
        assert_eq!(write.token(), Some(34));
        assert_eq!(write.int_value(), None, "\"b\" is not an integer");
    }

    #[test]
    fn small_and_huge_process_numbers_both_keep_their_identity() {
        let text = r#"{"index":0,"time":1,"process":1099511627776,"type":"invoke","f":"acquire","key":"k"}
{"index":1,"time":2,"process":3,"type":"invoke","f":"acquire","key":"k"}
{"index":2,"time":3,"process":1099511627776,"type":"fail","f":"acquire","key":"k"}
{"index":3,"time":4,"process":3,"type":"fail","f":"acquire","key":"k"}
"#;
        let history = read(text).unwrap();
        assert_eq!(history.processes, vec![1 << 40, 3]);
        let owners: Vec<u32> = history.ops.iter().map(|op| op.process).collect();
        assert_eq!(owners, vec![0, 1, 0, 1]);
    }

    #[test]
    fn orders_a_slightly_unsorted_merge_by_time() {
        let text = r#"{"index":0,"time":100,"process":0,"type":"invoke","f":"acquire","key":"k"}
{"index":1,"time":50,"process":1,"type":"invoke","f":"acquire","key":"k"}
{"index":2,"time":120,"process":0,"type":"fail","f":"acquire","key":"k"}
"#;
        let history = read(text).unwrap();
        let indices: Vec<u32> = history.ops.iter().map(|op| op.index).collect();
        assert_eq!(indices, vec![1, 0, 2]);
    }

    /// Hands out a few bytes per read, so lines straddle every buffer edge.
    struct Dribble<'a>(&'a [u8]);

    impl Read for Dribble<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.len().min(out.len()).min(7);
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn lines_cut_by_the_buffer_edge_read_the_same() {
        let whole = read(EXAMPLE).unwrap();
        let dribbled = read_jsonl(Dribble(EXAMPLE.as_bytes()), "test.jsonl", None).unwrap();
        assert_eq!(whole.ops, dribbled.ops);
        let cut = format!("{EXAMPLE}{}", r#"{"index":6,"time":2100300000,"#);
        let dribbled = read_jsonl(Dribble(cut.as_bytes()), "test.jsonl", None).unwrap();
        assert_eq!((dribbled.ops.len(), dribbled.warnings.len()), (6, 1));
    }

    #[test]
    fn skips_one_truncated_final_line_with_a_warning() {
        let text = format!(
            "{EXAMPLE}{}",
            r#"{"index":6,"time":2100300000,"process":1,"ty"#
        );
        let history = read(&text).unwrap();
        assert_eq!(history.ops.len(), 6);
        assert_eq!(history.warnings.len(), 1);
        assert!(
            history.warnings[0].contains("test.jsonl:7"),
            "{:?}",
            history.warnings
        );
    }

    #[test]
    fn reads_the_acquire_options_and_names_a_wrong_one() {
        let options = r#"{"ttl_ms":1500,"mode":"shared","fair":true,"wait_ms":200}"#;
        let text = EXAMPLE.replacen(
            r#""f":"acquire","key":"lock:a"}"#,
            &format!(r#""f":"acquire","key":"lock:a","value":{options}}}"#),
            1,
        );
        let history = read(&text).unwrap();
        let invoke = &history.ops[0];
        assert_eq!(invoke.ttl_ms(), Some(1500));
        assert_ne!(invoke.flags & flags::SHARED, 0);
        assert_ne!(invoke.flags & flags::FAIR, 0);
        let plain = read(EXAMPLE).unwrap();
        assert_eq!(plain.ops[0].ttl_ms(), None);
        assert_eq!(plain.ops[0].flags & (flags::SHARED | flags::FAIR), 0);
        for (wrong, field) in [
            (r#""mode":"shared""#, r#""mode":"read""#),
            (r#""fair":true"#, r#""fair":"yes""#),
            (r#""ttl_ms":1500"#, r#""ttl_ms":1.5"#),
            (r#""wait_ms":200"#, r#""wait_ms":"2s""#),
        ]
        .map(|(from, to)| (text.replacen(from, to, 1), to.split('"').nth(1).unwrap()))
        {
            let (line, got, message) = error_of(&wrong);
            assert_eq!(
                (line, got.as_str()),
                (1, &*format!("value.{field}")),
                "{message}"
            );
        }
        // A negative ttl is no ttl at all.
        let (_, got, _) = error_of(&text.replacen("1500", "-1", 1));
        assert_eq!(got, "value.ttl_ms");
    }

    #[test]
    fn a_truncated_line_in_the_middle_is_an_error() {
        let text = EXAMPLE.replacen(r#""lease_ms":2000}}"#, r#""lease_ms":20"#, 1);
        let (line, _, message) = error_of(&text);
        assert_eq!(line, 2, "{message}");
    }

    #[test]
    fn names_the_field_of_a_wrong_type() {
        let text = EXAMPLE.replacen(r#""token":33"#, r#""token":"33""#, 1);
        let (line, field, message) = error_of(&text);
        assert_eq!((line, field.as_str()), (2, "value.token"), "{message}");
        let text = EXAMPLE.replacen(r#""time":91000"#, r#""time":"soon""#, 1);
        assert_eq!(error_of(&text).1, "time");
        let text = EXAMPLE.replacen(r#""type":"ok""#, r#""type":"done""#, 1);
        assert_eq!(error_of(&text).1, "type");
        let text = EXAMPLE.replacen(r#","f":"acquire""#, "", 1);
        let (_, field, message) = error_of(&text);
        assert_eq!(field, "f");
        assert!(message.contains("missing"), "{message}");
    }

    #[test]
    fn rejects_a_broken_index_sequence() {
        let text = EXAMPLE.replacen(r#""index":3"#, r#""index":4"#, 1);
        let (line, field, message) = error_of(&text);
        assert_eq!((line, field.as_str()), (4, "index"));
        assert!(message.contains("expected 3"), "{message}");
    }

    #[test]
    fn rejects_a_completion_before_its_invoke() {
        let text = r#"{"index":0,"time":100,"process":0,"type":"invoke","f":"acquire","key":"k"}
{"index":1,"time":99,"process":0,"type":"ok","f":"acquire","key":"k"}
"#;
        let (line, field, message) = error_of(text);
        assert_eq!((line, field.as_str()), (2, "time"), "{message}");
    }

    #[test]
    fn rejects_a_second_invoke_while_one_is_pending() {
        let text = r#"{"index":0,"time":100,"process":0,"type":"invoke","f":"acquire","key":"k"}
{"index":1,"time":200,"process":0,"type":"invoke","f":"release","key":"k"}
"#;
        let (line, _, message) = error_of(text);
        assert_eq!(line, 2);
        assert!(message.contains("still pending"), "{message}");
    }

    #[test]
    fn rejects_a_retired_process_reused() {
        let text = r#"{"index":0,"time":100,"process":0,"type":"invoke","f":"acquire","key":"k"}
{"index":1,"time":200,"process":0,"type":"info","f":"acquire","key":"k","error":"timeout"}
{"index":2,"time":300,"process":0,"type":"invoke","f":"acquire","key":"k"}
"#;
        let (line, field, message) = error_of(text);
        assert_eq!((line, field.as_str()), (3, "process"));
        assert!(message.contains("retired"), "{message}");
    }

    #[test]
    fn rejects_a_killed_process_reused_but_accepts_its_pending_completion() {
        let text = r#"{"index":0,"time":100,"process":0,"type":"invoke","f":"acquire","key":"k"}
{"index":1,"time":150,"process":"nemesis","type":"info","f":"kill","value":{"targets":["worker-0"],"processes":[0]}}
{"index":2,"time":150,"process":0,"type":"info","f":"acquire","key":"k","error":"killed"}
"#;
        assert!(read(text).is_ok());
        let text = r#"{"index":0,"time":150,"process":"nemesis","type":"info","f":"kill","value":{"targets":["worker-0"],"processes":[0]}}
{"index":1,"time":200,"process":0,"type":"invoke","f":"acquire","key":"k"}
"#;
        let (line, field, message) = error_of(text);
        assert_eq!((line, field.as_str()), (2, "process"));
        assert!(message.contains("killed"), "{message}");
    }

    #[test]
    fn rejects_a_completion_with_no_invoke() {
        let text = r#"{"index":0,"time":100,"process":0,"type":"ok","f":"release","key":"k"}
"#;
        let (line, _, message) = error_of(text);
        assert_eq!(line, 1);
        assert!(message.contains("no invoke"), "{message}");
    }

    #[test]
    fn rejects_a_completion_of_another_operation_or_key() {
        let text = r#"{"index":0,"time":100,"process":0,"type":"invoke","f":"acquire","key":"k"}
{"index":1,"time":200,"process":0,"type":"ok","f":"release","key":"k"}
"#;
        assert_eq!(error_of(text).1, "f");
        let text = r#"{"index":0,"time":100,"process":0,"type":"invoke","f":"acquire","key":"k"}
{"index":1,"time":200,"process":0,"type":"ok","f":"acquire","key":"other"}
"#;
        assert_eq!(error_of(text).1, "key");
    }

    #[test]
    fn rejects_unknown_client_operations_and_missing_keys() {
        let text = r#"{"index":0,"time":100,"process":0,"type":"invoke","f":"aquire","key":"k"}
"#;
        assert_eq!(error_of(text).1, "f");
        let text = r#"{"index":0,"time":100,"process":0,"type":"invoke","f":"acquire"}
"#;
        assert_eq!(error_of(text).1, "key");
    }

    #[test]
    fn rejects_garbage_and_non_objects() {
        let (line, _, message) = error_of("{\"index\":0}\nnot json\n");
        assert_eq!(line, 1, "{message}");
        let (line, _, message) = error_of("[1,2]\n");
        assert_eq!(line, 1);
        assert!(message.contains("not a JSON object"), "{message}");
    }
}
