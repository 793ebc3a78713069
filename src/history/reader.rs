//! The streaming JSONL reader.
//!
//! Reads through a 1 MiB buffer (never the whole file at once) and parses each line where it
//! lies: first with the fast scanner of `fast_line.rs`, and if it steps aside, with serde
//! into borrowed fields. Only a line that fails both is parsed again, slowly, to name the
//! field at fault.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::marker::PhantomData;
use std::path::Path;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use super::build::{EventRef, HistoryBuilder, Payload, Slot, ValueShape, WrongMember};
use super::compact::History;
use super::error::HistoryError;
use super::event::{EventType, Process};
use super::fast_line;

/// The shortest plausible line is about 60 bytes; reserving for that many events costs no
/// resident memory for what goes unused, and spares the op vector from doubling.
pub(super) const MIN_LINE_BYTES: u64 = 60;

/// The longest line the reader takes, in bytes without its `\n`. An event is a few hundred
/// bytes; without a bound, a file with no newline at all (`/dev/zero`) would grow one line
/// buffer until memory ran out.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// The longest rendering of a value quoted in an error message.
const MAX_QUOTE_CHARS: usize = 80;

/// How many lines the reader reads ahead of the one it hands to the builder (see
/// `HistoryBuilder::prefetch_ids`): enough to cover two waits on main memory, one after the
/// other (a process's id, then its state).
pub(super) const AHEAD: usize = 3;

/// From how many processes or keys on the reader reads ahead: their states (40 bytes each)
/// or the key table's slots (32 bytes, at most half full) then outgrow the caches. It
/// counts every process seen, not those still in use, so a long history of a few thousand
/// at a time may cross it too: reading ahead then costs it about 8%, where it saves a
/// history of a million at a time about 25%.
const MANY: usize = 1 << 18;

/// Whether lines are read ahead to prefetch what pushing them needs (see `MANY`).
pub(super) fn reads_ahead(builder: &HistoryBuilder) -> bool {
    builder.processes() > MANY || builder.keys() > MANY
}

/// Reads and validates the JSONL history at `path`.
pub fn read_jsonl_file(path: &Path) -> Result<History, HistoryError> {
    let (file, name, size) = open(path)?;
    read_jsonl(file, &name, size)
}

/// The file at `path`, its name for messages and its size, if known.
pub(super) fn open(path: &Path) -> Result<(File, String, Option<u64>), HistoryError> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| HistoryError::io(&name, e))?;
    let size = file.metadata().map(|m| m.len()).ok();
    Ok((file, name, size))
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
                    line_no += 1;
                    check_length(source, line_no, carry.len() + end)?;
                    carry.extend_from_slice(&rest[..=end]);
                    rest = &rest[end + 1..];
                    if let Flow::Stop = handle_line(&mut builder, source, line_no, &carry)? {
                        return Ok(builder.finish());
                    }
                    carry.clear();
                }
                None => {
                    check_length(source, line_no + 1, carry.len() + rest.len())?;
                    carry.extend_from_slice(rest);
                    reader.consume(filled);
                    continue;
                }
            }
        }
        // Lines read but not yet pushed, oldest first. With many processes or keys, each
        // line is read `AHEAD` lines before it is pushed, so that its process state and key
        // slot can be fetched meanwhile; with few, they are all in the cache and the detour
        // would only cost.
        let mut ahead: VecDeque<(u64, EventRef)> = VecDeque::with_capacity(AHEAD);
        loop {
            // Most lines are in serde's layout: read where they lie, their end found by the
            // scan itself rather than by searching for the newline first.
            if let Some((event, end)) = fast_line::parse_canonical_prefix(rest) {
                if rest.get(end) == Some(&b'\n') {
                    line_no += 1;
                    rest = &rest[end + 1..];
                    if !reads_ahead(&builder) {
                        builder.push(line_no, &event)?;
                        continue;
                    }
                    if ahead.len() == AHEAD {
                        if let Some((line, earlier)) = ahead.pop_front() {
                            builder.push(line, &earlier)?;
                        }
                    }
                    // The line read before this one is fetched in two steps: its ids were
                    // asked for then, its process state now.
                    if let Some((_, previous)) = ahead.back() {
                        builder.prefetch_state(previous);
                    }
                    builder.prefetch_ids(&event);
                    ahead.push_back((line_no, event));
                    continue;
                }
            }
            // Every line read goes in before the next one is judged.
            for (line, earlier) in ahead.drain(..) {
                builder.push(line, &earlier)?;
            }
            let Some(end) = memchr::memchr(b'\n', rest) else {
                break;
            };
            line_no += 1;
            if let Flow::Stop = handle_line(&mut builder, source, line_no, &rest[..=end])? {
                return Ok(builder.finish());
            }
            rest = &rest[end + 1..];
        }
        check_length(source, line_no + 1, rest.len())?;
        carry.extend_from_slice(rest);
        reader.consume(filled);
    }
    if !carry.is_empty() {
        line_no += 1;
        handle_line(&mut builder, source, line_no, &carry)?;
    }
    Ok(builder.finish())
}

pub(super) enum Flow {
    Go,
    Stop,
}

/// A line of `length` bytes (so far) is an error past `MAX_LINE_BYTES`.
fn check_length(source: &str, line_no: u64, length: usize) -> Result<(), HistoryError> {
    match length <= MAX_LINE_BYTES {
        true => Ok(()),
        false => Err(line_too_long(source, line_no)),
    }
}

/// The error for line `line_no`, longer than `MAX_LINE_BYTES`.
pub(super) fn line_too_long(source: &str, line_no: u64) -> HistoryError {
    HistoryError::at(
        source,
        line_no,
        "",
        format!(
            "the line is longer than {} MiB: a history line is one event of a few hundred bytes",
            MAX_LINE_BYTES >> 20
        ),
    )
}

/// Parses one line (with its `\n`, unless it is the unterminated last one) into `builder`.
pub(super) fn handle_line(
    builder: &mut HistoryBuilder,
    source: &str,
    line_no: u64,
    line: &[u8],
) -> Result<Flow, HistoryError> {
    let terminated = line.last() == Some(&b'\n');
    let text = trim_line_end(line);
    if text.iter().all(u8::is_ascii_whitespace) {
        if terminated {
            return Err(HistoryError::at(source, line_no, "", "empty line".into()));
        }
        return Ok(Flow::Stop);
    }
    match push_event(builder, line_no, text, None)? {
        Parsed::Pushed => Ok(Flow::Go),
        // Only the final line may be cut short: the recorder was killed mid-write.
        Parsed::NotJson(serde_error) if !terminated && serde_error.is_eof() => {
            builder.warn(format!(
                "{source}:{line_no}: skipped a truncated final line ({} bytes)",
                text.len()
            ));
            Ok(Flow::Stop)
        }
        Parsed::NotJson(serde_error) => Err(diagnose(source, line_no, text, &serde_error)),
    }
}

/// What became of a line's text.
enum Parsed {
    Pushed,
    /// serde could not read it as an event: the caller judges why.
    NotJson(serde_json::Error),
}

/// Parses an event's text, by the fast path where it can and by serde otherwise, and adds it
/// to `builder`; `index`, if given, replaces the event's own.
fn push_event(
    builder: &mut HistoryBuilder,
    line_no: u64,
    text: &[u8],
    index: Option<u64>,
) -> Result<Parsed, HistoryError> {
    let pushed = with_event(text, |mut event| {
        event.index = index.unwrap_or(event.index);
        builder.push(line_no, &event)
    });
    match pushed {
        Ok(pushed) => pushed.map(|()| Parsed::Pushed),
        Err(serde_error) => Ok(Parsed::NotJson(serde_error)),
    }
}

/// Reads an event's text as the reader does, by the fast path where it can and by serde
/// otherwise, and hands the event to `use_it`; serde's error if it is no event the format
/// reads (`diagnose` says why).
pub(super) fn with_event<T>(
    text: &[u8],
    use_it: impl FnOnce(EventRef) -> T,
) -> Result<T, serde_json::Error> {
    if let Some(event) = fast_line::parse(text) {
        return Ok(use_it(event));
    }
    let raw = parse_line(text)?;
    let mut wrong = Vec::new();
    Ok(use_it(raw.as_event_ref(&mut wrong)))
}

/// Adds one line of a history as it is being recorded (the text of one event, no line end),
/// numbered `line_no - 1` whatever its own `index` says: the recorder renumbers each line as
/// it writes it, and this sees the line before that.
pub fn push_recorded_line(
    builder: &mut HistoryBuilder,
    source: &str,
    line_no: u64,
    text: &[u8],
) -> Result<(), HistoryError> {
    let index = Some(line_no.saturating_sub(1));
    match push_event(builder, line_no, text, index)? {
        Parsed::Pushed => Ok(()),
        Parsed::NotJson(serde_error) => Err(diagnose(source, line_no, text, &serde_error)),
    }
}

pub(super) fn trim_line_end(line: &[u8]) -> &[u8] {
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
    value: Option<ObjectOnly<RawPayload>>,
}

impl RawLine<'_> {
    /// The event, its payload members of the wrong type listed in `wrong`.
    fn as_event_ref<'e>(&'e self, wrong: &'e mut Vec<WrongMember>) -> EventRef<'e> {
        let payload = match &self.value {
            Some(ObjectOnly(raw)) => raw.to_payload(wrong),
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
            wrong,
        }
    }
}

/// A JSON object read as `T`. serde would also read a struct from an array, by position
/// (`[5,1000]` as token 5, lease 1000); the format says object.
struct ObjectOnly<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ObjectOnly<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(ObjectVisitor(PhantomData))
            .map(ObjectOnly)
    }
}

/// The payload members the builder may use, each as any JSON value (null: absent): whether
/// a wrong one matters depends on the event (see `Payload`), so serde must not reject it.
/// This is the slow path; `fast_line` reads the common lines.
#[derive(Deserialize)]
struct RawPayload {
    #[serde(default)]
    token: Option<Value>,
    #[serde(default)]
    lease_ms: Option<Value>,
    #[serde(default)]
    ttl_ms: Option<Value>,
    #[serde(default)]
    wait_ms: Option<Value>,
    #[serde(default)]
    mode: Option<Value>,
    #[serde(default)]
    fair: Option<Value>,
    #[serde(default)]
    value: ValueShape,
    #[serde(default)]
    targets: Option<Value>,
    #[serde(default)]
    processes: Option<Value>,
}

impl RawPayload {
    fn to_payload(&self, wrong: &mut Vec<WrongMember>) -> Payload {
        let w = wrong;
        let mode = |v: &Value| match v.as_str()? {
            "exclusive" => Some(false),
            "shared" => Some(true),
            _ => None,
        };
        let names = |v: &Value| {
            v.as_array()?
                .iter()
                .map(|t| t.as_str().map(str::to_string))
                .collect()
        };
        let numbers = |v: &Value| v.as_array()?.iter().map(Value::as_u64).collect();
        read(
            w,
            &self.wait_ms,
            Slot::WaitMs,
            "wait_ms",
            INT,
            Value::as_i64,
        );
        Payload {
            token: read(w, &self.token, Slot::Token, "token", INT, Value::as_i64),
            lease_ms: read(
                w,
                &self.lease_ms,
                Slot::LeaseMs,
                "lease_ms",
                INT,
                Value::as_i64,
            ),
            ttl_ms: read(w, &self.ttl_ms, Slot::TtlMs, "ttl_ms", INT, Value::as_i64),
            shared: read(w, &self.mode, Slot::Mode, "mode", MODE, mode) == Some(true),
            fair: read(w, &self.fair, Slot::Fair, "fair", BOOL, Value::as_bool) == Some(true),
            value: self.value,
            targets: read(w, &self.targets, Slot::Targets, "targets", NAMES, names)
                .unwrap_or_default(),
            processes: read(
                w,
                &self.processes,
                Slot::Processes,
                "processes",
                NUMBERS,
                numbers,
            )
            .unwrap_or_default(),
        }
    }
}

const INT: &str = "an integer or null";
const MODE: &str = "\"exclusive\" or \"shared\"";
const BOOL: &str = "true or false";
const NAMES: &str = "a list of names";
const NUMBERS: &str = "a list of process numbers";

/// `value.<name>` as `convert` reads it; a value of the wrong type (expected `want`) is listed
/// in `wrong` and read as absent.
fn read<T>(
    wrong: &mut Vec<WrongMember>,
    value: &Option<Value>,
    slot: Slot,
    name: &str,
    want: &str,
    convert: impl FnOnce(&Value) -> Option<T>,
) -> Option<T> {
    let value = value.as_ref()?;
    let converted = convert(value);
    if converted.is_none() {
        let message = format!("expected {want}, found {}", describe(value));
        WrongMember::note(wrong, slot, &format!("value.{name}"), message);
    }
    converted
}

/// A JSON value for a message: strings named as such, long ones shortened.
fn describe(value: &Value) -> String {
    let text = match value {
        Value::String(s) => format!("the string {}", Value::String(s.clone())),
        other => other.to_string(),
    };
    if text.chars().count() <= MAX_QUOTE_CHARS {
        return text;
    }
    let mut short: String = text.chars().take(MAX_QUOTE_CHARS - 3).collect();
    short.push_str("...");
    short
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
    serde_json::from_slice::<ObjectOnly<RawLine>>(text).map(|line| line.0)
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
        // Its members are judged by the builder, which knows which ones the event uses.
        Some(Value::Object(_)) => {}
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

    /// What serde makes of a line: the event as `{:?}`, if it reads with no wrong member.
    fn serde_view(text: &[u8]) -> Option<String> {
        let raw = parse_line(text).ok()?;
        let mut wrong = Vec::new();
        let event = raw.as_event_ref(&mut wrong);
        event.wrong.is_empty().then(|| format!("{event:?}"))
    }

    /// The scanner accepts only what serde reads, and reads it the same.
    fn assert_agrees(text: &[u8]) {
        if let Some(fast) = fast_line::parse(text) {
            assert_eq!(
                Some(format!("{fast:?}")),
                serde_view(text),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
    }

    /// A small deterministic generator for the tests below.
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) as usize) % n
        }
    }

    /// Lines of every kind the recorder, synth and other writers produce.
    const LINES: [&str; 10] = [
        r#"{"index":0,"time":2526179,"process":2,"type":"invoke","f":"acquire","key":"lock:0","value":{"fair":true,"mode":"shared","ttl_ms":600,"wait_ms":2000},"wall":1795670259014}"#,
        r#"{"index":1,"time":10630923,"process":1,"type":"ok","f":"acquire","key":"lock:0","value":{"lease_ms":1000,"token":1},"wall":1795631001515}"#,
        r#"{"index":2,"time":14448143,"process":0,"type":"ok","f":"acquire","key":"lock:0","value":{"lease_ms":null,"token":null},"node":"master-0","wall":1795632001682}"#,
        r#"{"index":3,"time":15,"process":0,"type":"fail","f":"acquire","key":"lock:0","value":{"reason":"held by another client"},"error":"busy"}"#,
        r#"{"index":4,"time":16,"process":3,"type":"ok","f":"read","key":"lock:1","value":{"value":null}}"#,
        r#"{"index":5,"time":17,"process":3,"type":"invoke","f":"write","key":"lock:1","value":{"token":-4,"value":8}}"#,
        r#"{"index":6,"time":18,"process":"nemesis","type":"info","f":"partition","value":{"link":"replication","processes":[1,3],"targets":["master-0","replica-1"]},"wall":1795632002669}"#,
        r#"{"index":7,"time":19,"process":4,"type":"info","f":"release","key":"lock:0","error":"killed","notice":"a \"quoted\" \\ \u00e9 note","extra":{"a":[1,{"b":null}],"c":-1.5e+3,"d":true}}"#,
        r#"{"index":8,"time":20,"process":4,"type":"ok","f":"write","key":"k","value":{"token":2,"value":"b","note":[[],{}]},"wall":null}"#,
        r#"{"index":9,"time":21,"process":5,"type":"invoke","f":"renew","key":"k","value":null,"node":null,"error":null}"#,
    ];

    /// `line` with its members (and its payload's) in an order `rng` picks.
    fn shuffled(line: &str, rng: &mut Lcg) -> String {
        fn shuffle(map: &serde_json::Map<String, Value>, rng: &mut Lcg, inner: bool) -> String {
            let mut members: Vec<String> = map
                .iter()
                .map(|(name, value)| {
                    let value = match value {
                        Value::Object(payload) if inner => shuffle(payload, rng, false),
                        other => other.to_string(),
                    };
                    format!("{}:{value}", Value::String(name.clone()))
                })
                .collect();
            for i in (1..members.len()).rev() {
                members.swap(i, rng.below(i + 1));
            }
            format!("{{{}}}", members.join(","))
        }
        let value: Value = serde_json::from_str(line).unwrap();
        shuffle(value.as_object().unwrap(), rng, true)
    }

    #[test]
    fn the_scanner_reads_every_member_order_as_serde_does() {
        let mut rng = Lcg(7);
        for line in LINES {
            let original = format!("{:?}", fast_line::parse(line.as_bytes()).expect(line));
            assert_eq!(
                Some(&original),
                serde_view(line.as_bytes()).as_ref(),
                "{line}"
            );
            for _ in 0..200 {
                let text = shuffled(line, &mut rng);
                let event = fast_line::parse(text.as_bytes()).expect(&text);
                assert_eq!(format!("{event:?}"), original, "{text}");
            }
            // Optional members absent: each left out in turn.
            let value: Value = serde_json::from_str(line).unwrap();
            for name in ["value", "error", "node", "wall", "notice", "extra", "key"] {
                let mut object = value.as_object().unwrap().clone();
                if object.remove(name).is_some() {
                    let text = Value::Object(object).to_string();
                    assert!(fast_line::parse(text.as_bytes()).is_some(), "{text}");
                    assert_agrees(text.as_bytes());
                }
            }
        }
    }

    #[test]
    fn the_scanner_never_accepts_what_serde_rejects_or_reads_otherwise() {
        // Lines broken at random: a byte deleted, replaced or inserted, some several times.
        const BYTES: &[u8] =
            b"{}[],:\"\\/-+.0123456789eEnulltruefalse xq\t\r\n\x00\x7f\xc3\xa9\xff";
        let mut rng = Lcg(11);
        let mut accepted = 0;
        for line in LINES {
            for _ in 0..3000 {
                let mut text = line.as_bytes().to_vec();
                for _ in 0..1 + rng.below(3) {
                    let at = rng.below(text.len());
                    let byte = BYTES[rng.below(BYTES.len())];
                    match rng.below(3) {
                        0 => {
                            text.remove(at);
                        }
                        1 => text[at] = byte,
                        _ => text.insert(at, byte),
                    }
                }
                assert_agrees(&text);
                accepted += usize::from(fast_line::parse(&text).is_some());
            }
        }
        // Many survive (a changed digit, an extra space): those must agree too.
        assert!(accepted > 1000, "{accepted}");
    }

    #[test]
    fn a_history_reads_the_same_whatever_its_member_order() {
        let mut rng = Lcg(3);
        let plain = read(EXAMPLE).unwrap();
        let text: String = EXAMPLE
            .lines()
            .map(|line| shuffled(line, &mut rng) + "\n")
            .collect();
        let shuffled_history = read(&text).unwrap();
        assert_eq!(plain.ops, shuffled_history.ops);
        assert_eq!(plain.keys, shuffled_history.keys);
        assert_eq!(plain.faults[0].targets, shuffled_history.faults[0].targets);
    }

    #[test]
    fn a_malformed_line_gets_the_same_error_in_any_member_order() {
        let mut rng = Lcg(5);
        for (from, to) in [
            (r#""token":33"#, r#""token":"33""#),
            (r#""token":33"#, r#""token":-0"#),
            (r#""time":91000"#, r#""time":"soon""#),
            (r#""time":91000"#, r#""time":-0"#),
            (r#""time":91000"#, r#""time":9.1e4"#),
            (r#""type":"ok""#, r#""type":"done""#),
            (r#","f":"acquire""#, ""),
            (r#""process":0"#, r#""process":-1"#),
            (r#""key":"lock:a""#, r#""key":7"#),
            (r#"{"token":33,"lease_ms":2000}"#, "[5,1000]"),
            (r#""lease_ms":2000"#, r#""lease_ms":-5"#),
            (r#""lease_ms":2000"#, r#""lease_ms":2000,"lease_ms":2000"#),
            (r#""lease_ms":2000}"#, r#""lease_ms":2000,"x":[1,]}"#),
        ] {
            // The second line broken, and then with its members in other orders (where it
            // is still a JSON object): the error names the same line and field, and says
            // the same.
            let mut lines: Vec<String> = EXAMPLE.lines().map(str::to_string).collect();
            lines[1] = lines[1].replacen(from, to, 1);
            let broken: String = lines.iter().map(|l| format!("{l}\n")).collect();
            let expected = read(&broken).expect_err(to).to_string();
            let Ok(Value::Object(_)) = serde_json::from_str::<Value>(&lines[1]) else {
                continue;
            };
            if to.contains("\"lease_ms\":2000,\"lease_ms\"") {
                continue; // serde_json's map keeps one of a duplicate
            }
            for _ in 0..20 {
                let mut text = String::new();
                for (n, line) in lines.iter().enumerate() {
                    text += &if n == 1 {
                        shuffled(line, &mut rng)
                    } else {
                        line.to_string()
                    };
                    text.push('\n');
                }
                let error = read(&text).expect_err(&text);
                let message = error.to_string();
                assert_eq!(error.line(), Some(2), "{message}");
                assert_eq!(message, expected);
            }
        }
    }

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
    fn a_value_given_as_an_array_is_no_payload_read_by_position() {
        let text = EXAMPLE.replacen(r#"{"token":33,"lease_ms":2000}"#, "[5,1000]", 1);
        let (line, field, message) = error_of(&text);
        assert_eq!((line, field.as_str()), (2, "value"), "{message}");
        assert!(message.contains("expected an object or null"), "{message}");
        let text = EXAMPLE.replacen(
            r#"{"targets":["worker-0"],"processes":[0]}"#,
            r#"[null,null,null,["w"],[0]]"#,
            1,
        );
        let (line, field, message) = error_of(&text);
        assert_eq!((line, field.as_str()), (3, "value"), "{message}");
    }

    #[test]
    fn a_line_given_as_an_array_is_no_event_read_by_position() {
        let (line, field, message) = error_of("[0,1200,0,\"invoke\",\"acquire\",\"lock:a\"]\n");
        assert_eq!((line, field.as_str()), (1, ""), "{message}");
        assert!(message.contains("not a JSON object"), "{message}");
    }

    #[test]
    fn unknown_payload_members_are_ignored_whatever_they_hold() {
        // Members the event does not use, some of a type that would be wrong where used.
        let text = EXAMPLE
            .replacen(
                r#""token":33,"lease_ms":2000"#,
                r#""token":33,"lease_ms":2000,"processes":"all","mode":7,"ttl_ms":"x","note":{"a":[1]}"#,
                1,
            )
            .replacen(
                r#""processes":[0]}"#,
                r#""processes":[0],"token":"x","lease_ms":[],"extra":null}"#,
                1,
            )
            .replacen(
                r#""f":"write","key":"lock:a","value":{"token":34,"value":"b"}"#,
                r#""f":"write","key":"lock:a","value":{"token":34,"value":"b","lease_ms":"long","fair":"x"}"#,
                1,
            );
        let history = read(&text).unwrap();
        assert_eq!(history.ops[1].token(), Some(33));
        assert_eq!(history.ops[1].lease_ms(), Some(2000));
        assert_eq!(history.faults[0].processes, vec![0]);
        assert_eq!(history.ops[5].token(), Some(34));
        // The same members are judged where the event uses them.
        let (line, field, _) =
            error_of(&EXAMPLE.replacen(r#""processes":[0]}"#, r#""processes":"all"}"#, 1));
        assert_eq!((line, field.as_str()), (3, "value.processes"));
        let (line, field, _) = error_of(&EXAMPLE.replacen(
            r#""key":"lock:a"}"#,
            r#""key":"lock:a","value":{"mode":7}}"#,
            1,
        ));
        assert_eq!((line, field.as_str()), (1, "value.mode"));
    }

    /// Endless zero bytes, like `/dev/zero`.
    struct Zeros;

    impl Read for Zeros {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            out.fill(0);
            Ok(out.len())
        }
    }

    #[test]
    fn a_line_longer_than_the_cap_is_an_error_naming_it() {
        let error = read_jsonl(Zeros, "/dev/zero", None).expect_err("no line ends");
        assert_eq!(error.line(), Some(1), "{error}");
        assert!(error.to_string().contains("longer than 16 MiB"), "{error}");
        // After good lines, cut by the buffer or not, terminated or not.
        let long = "x".repeat(MAX_LINE_BYTES + 1);
        for text in [format!("{EXAMPLE}{long}\n"), format!("{EXAMPLE}{long}")] {
            let error = read(&text).expect_err("too long");
            assert_eq!(error.line(), Some(7), "{error}");
            assert!(error.to_string().contains("longer than"), "{error}");
            let dribbled = read_jsonl(Dribble(text.as_bytes()), "test.jsonl", None);
            assert_eq!(dribbled.expect_err("too long").line(), Some(7));
        }
        // A line just at the cap is judged for what it is.
        let at_cap = format!("{EXAMPLE}{}\n", "x".repeat(MAX_LINE_BYTES));
        let error = read(&at_cap).expect_err("not JSON");
        assert!(error.to_string().contains("not valid JSON"), "{error}");
    }

    #[test]
    fn a_kill_is_ordered_with_the_killed_process_by_time_not_by_line() {
        // The kill is written before the release invoke it follows in time: merged streams.
        let text = r#"{"index":0,"time":100,"process":0,"type":"invoke","f":"acquire","key":"k"}
{"index":1,"time":110,"process":0,"type":"ok","f":"acquire","key":"k"}
{"index":2,"time":300,"process":"nemesis","type":"info","f":"kill","value":{"targets":["worker-0"],"processes":[0]}}
{"index":3,"time":290,"process":0,"type":"invoke","f":"release","key":"k"}
{"index":4,"time":300,"process":0,"type":"info","f":"release","key":"k","error":"killed"}
"#;
        let history = read(text).unwrap();
        let indices: Vec<u32> = history.ops.iter().map(|op| op.index).collect();
        assert_eq!(indices, vec![0, 1, 3, 2, 4]);
        // An invoke timed at or after the kill is a reuse, whichever comes first in the file.
        let (line, field, message) = error_of(&text.replacen(r#""time":290"#, r#""time":300"#, 1));
        assert_eq!((line, field.as_str()), (4, "process"), "{message}");
        assert!(message.contains("killed at line 3"), "{message}");
        let before = r#"{"index":0,"time":100,"process":0,"type":"invoke","f":"acquire","key":"k"}
{"index":1,"time":310,"process":0,"type":"fail","f":"acquire","key":"k"}
{"index":2,"time":300,"process":"nemesis","type":"info","f":"kill","value":{"targets":["worker-0"],"processes":[0]}}
"#;
        assert!(read(before).is_ok(), "a completion may follow the kill");
        let reused = before.replacen(r#""index":0,"time":100"#, r#""index":0,"time":305"#, 1);
        let reused = reused.replacen(r#""time":310"#, r#""time":306"#, 1);
        let (line, field, message) = error_of(&reused);
        assert_eq!((line, field.as_str()), (3, "value.processes"), "{message}");
        assert!(message.contains("invoke at line 1"), "{message}");
    }

    #[test]
    fn rejects_garbage_and_non_objects() {
        let (line, _, message) = error_of("{\"index\":0}\nnot json\n");
        assert_eq!(line, 1, "{message}");
        let (line, _, message) = error_of("[1,2]\n");
        assert_eq!(line, 1);
        assert!(message.contains("not a JSON object"), "{message}");
    }

    /// Past `MANY` processes the reader holds lines back to prefetch: every line
    /// still goes in, in file order, and an error names its own line, also when a line of
    /// another layout (read by serde) follows a held-back one.
    #[test]
    fn reading_ahead_keeps_the_file_order_and_the_line_numbers() {
        let mut text = String::new();
        let mut index = 0;
        let mut line = |text: &mut String, body: &str| {
            text.push_str(&format!("{{\"index\":{index},{body}}}\n"));
            index += 1;
        };
        let processes = MANY as u64 + 1000;
        for p in 0..processes {
            let time = p * 10;
            line(
                &mut text,
                &format!("\"time\":{time},\"process\":{p},\"type\":\"invoke\",\"f\":\"read\",\"key\":\"k\""),
            );
            if p + 1 == processes {
                // The completion in another member order: not the fast path's layout.
                line(
                    &mut text,
                    &format!(
                        "\"key\":\"k\",\"f\":\"read\",\"type\":\"ok\",\"process\":{p},\"time\":{}",
                        time + 5
                    ),
                );
            } else {
                line(
                    &mut text,
                    &format!(
                        "\"time\":{},\"process\":{p},\"type\":\"ok\",\"f\":\"read\",\"key\":\"k\"",
                        time + 5
                    ),
                );
            }
        }
        let history = read(&text).expect("a valid history");
        assert_eq!(history.ops.len() as u64, 2 * processes);
        assert_eq!(history.processes.len() as u64, processes);

        // The same, with a completion of a process that invoked nothing as the last line.
        let lines = 2 * processes;
        line(
            &mut text,
            "\"time\":99999999999,\"process\":0,\"type\":\"ok\",\"f\":\"read\",\"key\":\"k\"",
        );
        let (line, field, message) = error_of(&text);
        assert_eq!((line, field.as_str()), (lines + 1, "type"), "{message}");
    }
}
