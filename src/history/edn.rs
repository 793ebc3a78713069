//! Importer for Jepsen / Knossos EDN histories of lock tests.
//!
//! Two layouts are accepted:
//!
//! - Jepsen's `history.edn`: one op map per line, no enclosing collection;
//! - Knossos data files: one top-level vector (or list) of op maps.
//!
//! An op may be a plain map or a tagged record (`#jepsen.history.Op{...}`); `#_` discards and
//! `;` comments are allowed between ops.
//!
//! The input is streamed. A scanner (`scan.rs`) splits it into the text of one op at a time,
//! tracking the line each op's map starts on; `edn-format` parses that text; the op is
//! converted and pushed to the same `HistoryBuilder` the JSONL reader uses, so every rule of
//! the format applies identically. Neither the file nor a vector of EDN values is ever held
//! whole. (`edn_format::Parser` can iterate top-level forms, but it would parse the Knossos
//! layout's one vector as a single giant value and reports no positions.) The scanner also
//! bounds what `edn-format` would crash or run out of memory on: nesting, a form's size,
//! absurd numbers, a malformed `\u` character literal.
//!
//! Errors name the file, the line (where the op's map starts; for a syntax error, where it
//! is) and the field at fault.
//!
//! How an op map becomes an event:
//!
//! | EDN | event |
//! |---|---|
//! | `:type` `:invoke` / `:ok` / `:fail` / `:info` | `type` |
//! | `:f` keyword (or string) | `f` |
//! | `:process` integer ≥ 0, or `:nemesis` | `process` |
//! | `:time` integer ns | `time`; absent on every op: synthesized as index × 1 ms, with a warning |
//! | `:index` | `index`; absent: the op's position, counting from 0 |
//! | `:key` keyword, string or integer | `key`; absent or nil: `"lock"` (Knossos lock tests have one lock) |
//! | `:value` map | `:token`, `:lease-ms` / `:lease_ms`, `:ttl-ms`, `:mode`, `:fair`, `:wait-ms`, `:value`, `:targets`, `:processes`, as in JSONL |
//! | `:value` integer, `:read` / `:write` | the register value |
//! | `:value nil`, `:read` `:ok` | the register was empty (`{"value": null}`) |
//! | `:value` vector / set of ints, nemesis `:kill` | the killed processes |
//! | `:value` vector / set of names, nemesis | the fault's targets |
//!
//! Any other `:value` (Jepsen nemeses write all sorts) is ignored, as are unknown fields
//! (`:error` included) and the members of a `:value` map the op does not use (whatever they
//! hold).

mod scan;

use std::collections::BTreeMap;
use std::fmt::{self, Display, Write};
use std::fs::File;
use std::io::Read;
use std::path::Path;

use edn_format::{Keyword, Parser, ParserOptions, Value};

use super::build::{EventRef, HistoryBuilder, Payload, Slot, ValueShape, WrongMember};
use super::compact::History;
use super::error::HistoryError;
use super::event::{EventType, Process};
use scan::Scanner;

/// The shortest plausible op (`{:process 0, :type :ok, :f :acquire}`) is about 40 bytes;
/// reserving for that many costs no resident memory for what goes unused.
const MIN_OP_BYTES: u64 = 40;

/// Synthesized times advance by this much per op (1 ms).
const SYNTHETIC_STEP_NS: i64 = 1_000_000;

/// The key of client ops that name none.
const DEFAULT_KEY: &str = "lock";

/// The longest rendering of a value quoted in an error message.
const MAX_QUOTE_CHARS: usize = 80;

/// The longest parser error message quoted (it may quote a value of the form).
const MAX_ERROR_CHARS: usize = 200;

/// Reads and validates the Jepsen / Knossos EDN history at `path`.
pub fn read_edn_file(path: &Path) -> Result<History, HistoryError> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| HistoryError::io(&name, e))?;
    let size = file.metadata().map(|m| m.len()).ok();
    import(file, &name, size)
}

/// Reads and validates a Jepsen / Knossos EDN history from any reader; `source` names it in
/// messages.
pub fn read_edn<R: Read>(input: R, source: &str) -> Result<History, HistoryError> {
    import(input, source, None)
}

/// Where the times come from, decided by the first op.
#[derive(Debug, Clone, Copy)]
enum Times {
    /// The first op (at this line) had `:time`: every op must.
    Given { first_line: u64 },
    /// The first op (at this line) had none: no op may, and times are synthesized.
    Synthesized { first_line: u64 },
}

fn import<R: Read>(
    input: R,
    source: &str,
    size_hint: Option<u64>,
) -> Result<History, HistoryError> {
    let mut scanner = Scanner::new(input, source);
    let mut builder = HistoryBuilder::new(source);
    if let Some(size) = size_hint {
        builder.reserve((size / MIN_OP_BYTES) as usize);
    }
    let mut times: Option<Times> = None;
    // The op's position in the file, counting from 0.
    let mut position: u64 = 0;
    while let Some(line) = scanner.next_form()? {
        let at = |field: &str, message: String| {
            HistoryError::at(source, line, field, annotate(message, position))
        };
        let map = op_map(parse_form(scanner.form_text(), source, line)?)
            .map_err(|message| at("", message))?;
        let op = convert(map).map_err(|(field, message)| at(field, message))?;
        let synthesized = (position as i64).saturating_mul(SYNTHETIC_STEP_NS);
        let time = match (op.time, times) {
            (Some(time), None) => {
                times = Some(Times::Given { first_line: line });
                time
            }
            (None, None) => {
                times = Some(Times::Synthesized { first_line: line });
                synthesized
            }
            (Some(time), Some(Times::Given { .. })) => time,
            (None, Some(Times::Synthesized { .. })) => synthesized,
            (None, Some(Times::Given { first_line })) => {
                return Err(at(
                    "time",
                    format!(
                        "missing, but the first op (line {first_line}) has one: :time must be on every op or on none"
                    ),
                ))
            }
            (Some(_), Some(Times::Synthesized { first_line })) => {
                return Err(at(
                    "time",
                    format!(
                        "present, but the first op (line {first_line}) has none: :time must be on every op or on none"
                    ),
                ))
            }
        };
        let event = EventRef {
            index: op.index.unwrap_or(position),
            time,
            process: op.process,
            ty: op.ty,
            f: &op.f,
            key: op.key.as_deref(),
            payload: op.payload,
            wrong: &op.wrong,
        };
        builder
            .push(line, &event)
            .map_err(|error| annotate_error(error, position))?;
        position += 1;
    }
    if let Some(Times::Synthesized { .. }) = times {
        builder.warn(format!(
            "{source}: no op has :time; synthesized time = index × 1 ms, which keeps the order \
             of events but makes durations, leases and liveness bounds meaningless"
        ));
    }
    Ok(builder.finish())
}

/// Adds the op's position to a message: the line alone is ambiguous where several op maps
/// share one line (a Knossos vector written on a single line).
fn annotate(message: String, position: u64) -> String {
    format!(
        "{message} [op #{}, counting from 1; the line is where its map starts]",
        position + 1
    )
}

fn annotate_error(error: HistoryError, position: u64) -> HistoryError {
    match error {
        HistoryError::Invalid {
            source_name,
            line,
            field,
            message,
        } => HistoryError::Invalid {
            source_name,
            line,
            field,
            message: annotate(message, position),
        },
        other => other,
    }
}

// ---------------------------------------------------------------------------------------
// Parsing one form and converting it.
// ---------------------------------------------------------------------------------------

/// Parses the text of one form, which starts at `line`. The scanner has refused what is
/// known to crash `edn-format`; a panic all the same is reported as an error in the form.
fn parse_form(text: &str, source: &str, line: u64) -> Result<Value, HistoryError> {
    std::panic::catch_unwind(|| parse_checked_form(text, source, line)).unwrap_or_else(|_| {
        Err(HistoryError::at(
            source,
            line,
            "",
            "not valid EDN: the EDN parser failed on this form".into(),
        ))
    })
}

fn parse_checked_form(text: &str, source: &str, line: u64) -> Result<Value, HistoryError> {
    let mut parser = Parser::from_str(text, ParserOptions::default());
    match parser.next() {
        Some(Ok(value)) => match parser.next() {
            None => Ok(value),
            Some(_) => Err(HistoryError::at(
                source,
                line,
                "",
                format!("not valid EDN: unexpected text after {}", quote(&value)),
            )),
        },
        Some(Err(error)) => {
            // Parse again, slowly, for the position. edn-format 3.3 swaps the names:
            // `ParserErrorWithContext::col` counts lines (from 1), `row` counts columns.
            let (line, column) = match edn_format::parse_str(text) {
                Err(located) => {
                    let newlines = text.matches('\n').count();
                    let lines_in = located.col.saturating_sub(1).min(newlines);
                    (line + lines_in as u64, Some(located.row))
                }
                Ok(_) => (line, None),
            };
            let at = column.map_or(String::new(), |c| format!(" (column {c})"));
            Err(HistoryError::at(
                source,
                line,
                "",
                format!("not valid EDN: {}{at}", shorten(&error, MAX_ERROR_CHARS)),
            ))
        }
        // Only blanks: the scanner never hands those over.
        None => Err(HistoryError::at(source, line, "", "empty form".into())),
    }
}

/// An op is a map, or a record tagged with its type (`#jepsen.history.Op{...}`).
fn op_map(value: Value) -> Result<BTreeMap<Value, Value>, String> {
    match value {
        Value::Map(map) => Ok(map),
        Value::TaggedElement(tag, inner) => match *inner {
            Value::Map(map) => Ok(map),
            other => Err(format!(
                "expected an op map, found #{tag} {}",
                quote(&other)
            )),
        },
        other => Err(format!("expected an op map, found {}", quote(&other))),
    }
}

/// A value as EDN, shortened for a message.
fn quote(value: &Value) -> String {
    shorten(value, MAX_QUOTE_CHARS)
}

/// `value` displayed, cut at about `max` characters: it is never written out whole, as a
/// form of a megabyte may be a value of many more when displayed.
fn shorten(value: &dyn Display, max: usize) -> String {
    /// Stops the display once it has `max` bytes.
    struct Bounded {
        text: String,
        max: usize,
    }
    impl Write for Bounded {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let room = self.max.saturating_sub(self.text.len());
            if s.len() <= room {
                self.text.push_str(s);
                return Ok(());
            }
            let mut cut = room;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            self.text.push_str(&s[..cut]);
            Err(fmt::Error)
        }
    }
    let mut out = Bounded {
        text: String::new(),
        max,
    };
    if write!(out, "{value}").is_err() {
        out.text.push_str("...");
    }
    out.text
}

/// A keyword's text without the colon: `name` or `namespace/name`.
fn keyword_text(keyword: &Keyword) -> String {
    match keyword.namespace() {
        Some(namespace) => format!("{namespace}/{}", keyword.name()),
        None => keyword.name().to_string(),
    }
}

fn is_keyword(value: &Value, name: &str) -> bool {
    matches!(value, Value::Keyword(k) if k.namespace().is_none() && k.name() == name)
}

/// A field at fault and what is wrong with it.
type Bad = (&'static str, String);

/// An op map's fields, converted but not yet checked against the history's rules.
#[derive(Debug)]
struct Converted {
    index: Option<u64>,
    time: Option<i64>,
    process: Process,
    ty: EventType,
    f: String,
    key: Option<String>,
    payload: Payload,
    /// Payload members of the wrong type: an error only where the event uses them.
    wrong: Vec<WrongMember>,
}

/// The fields of an op map the importer reads (keys without a namespace).
#[derive(Default)]
struct Fields {
    index: Option<Value>,
    time: Option<Value>,
    process: Option<Value>,
    ty: Option<Value>,
    f: Option<Value>,
    key: Option<Value>,
    value: Option<Value>,
}

fn convert(map: BTreeMap<Value, Value>) -> Result<Converted, Bad> {
    let mut fields = Fields::default();
    for (k, v) in map {
        let Value::Keyword(keyword) = k else { continue };
        if keyword.namespace().is_some() {
            continue;
        }
        let slot = match keyword.name() {
            "index" => &mut fields.index,
            "time" => &mut fields.time,
            "process" => &mut fields.process,
            "type" => &mut fields.ty,
            "f" => &mut fields.f,
            "key" => &mut fields.key,
            "value" => &mut fields.value,
            _ => continue,
        };
        *slot = Some(v);
    }

    let index = match fields.index {
        None => None,
        Some(Value::Integer(i)) if i >= 0 => Some(i as u64),
        Some(other) => {
            return Err((
                "index",
                format!("expected an integer >= 0, found {}", quote(&other)),
            ))
        }
    };
    let time = match fields.time {
        None => None,
        Some(Value::Integer(t)) => Some(t),
        Some(other) => {
            return Err((
                "time",
                format!("expected an integer (nanoseconds), found {}", quote(&other)),
            ))
        }
    };
    let process = match fields.process {
        None => return Err(("process", "missing (required)".into())),
        Some(Value::Integer(p)) if p >= 0 => Process::Client(p as u64),
        Some(ref v) if is_keyword(v, "nemesis") => Process::Nemesis,
        Some(other) => {
            return Err((
                "process",
                format!(
                    "expected an integer >= 0 or :nemesis, found {}",
                    quote(&other)
                ),
            ))
        }
    };
    let ty = match fields.ty {
        None => return Err(("type", "missing (required)".into())),
        Some(Value::Keyword(ref k)) if k.namespace().is_none() => match k.name() {
            "invoke" => EventType::Invoke,
            "ok" => EventType::Ok,
            "fail" => EventType::Fail,
            "info" => EventType::Info,
            _ => return Err(bad_type(&Value::Keyword(k.clone()))),
        },
        Some(other) => return Err(bad_type(&other)),
    };
    let f = match fields.f {
        None => return Err(("f", "missing (required)".into())),
        Some(Value::Keyword(k)) => keyword_text(&k),
        Some(Value::String(s)) => s,
        Some(other) => return Err(("f", format!("expected a keyword, found {}", quote(&other)))),
    };
    let key = match process {
        Process::Nemesis => None,
        Process::Client(_) => Some(match fields.key {
            None | Some(Value::Nil) => DEFAULT_KEY.to_string(),
            Some(Value::Keyword(k)) => keyword_text(&k),
            Some(Value::String(s)) => s,
            Some(Value::Integer(i)) => i.to_string(),
            Some(other) => {
                return Err((
                    "key",
                    format!("expected a keyword or a string, found {}", quote(&other)),
                ))
            }
        }),
    };
    let mut wrong = Vec::new();
    let payload = payload(fields.value, process, ty, &f, &mut wrong);
    Ok(Converted {
        index,
        time,
        process,
        ty,
        f,
        key,
        payload,
        wrong,
    })
}

fn bad_type(found: &Value) -> Bad {
    (
        "type",
        format!(
            "expected :invoke, :ok, :fail or :info, found {}",
            quote(found)
        ),
    )
}

/// The op's `:value`, reduced to what the checks use; members of the wrong type listed in
/// `wrong`.
fn payload(
    value: Option<Value>,
    process: Process,
    ty: EventType,
    f: &str,
    wrong: &mut Vec<WrongMember>,
) -> Payload {
    let client = matches!(process, Process::Client(_));
    let register = client && matches!(f, "read" | "write");
    match value {
        // A Knossos read that returned nil found the register empty.
        None | Some(Value::Nil) if register && f == "read" && ty == EventType::Ok => Payload {
            value: ValueShape::Null,
            ..Payload::default()
        },
        None | Some(Value::Nil) => Payload::default(),
        Some(Value::Map(map)) => payload_map(map, wrong),
        Some(other) if register => Payload {
            value: shape(&other),
            ..Payload::default()
        },
        Some(other) if !client => nemesis_list(&other, f),
        // Anything else a client's op carries is not the contract's to interpret.
        Some(_) => Payload::default(),
    }
}

fn shape(value: &Value) -> ValueShape {
    match value {
        Value::Integer(v) => ValueShape::Int(*v),
        Value::Nil => ValueShape::Null,
        _ => ValueShape::Other,
    }
}

/// A `:value` map: the same fields as a JSONL `value` object. A member of the wrong type is
/// noted, not rejected: the builder decides whether the event uses it.
fn payload_map(map: BTreeMap<Value, Value>, wrong: &mut Vec<WrongMember>) -> Payload {
    let mut payload = Payload::default();
    let mut lease_field: Option<&'static str> = None;
    for (k, v) in map {
        let Value::Keyword(keyword) = k else { continue };
        if keyword.namespace().is_some() {
            continue;
        }
        let (p, w) = (&mut payload, &mut *wrong);
        match keyword.name() {
            "token" => p.token = optional_int(w, &v, Slot::Token, "value.token"),
            name @ ("lease-ms" | "lease_ms") => {
                let field = if name == "lease-ms" {
                    "value.lease-ms"
                } else {
                    "value.lease_ms"
                };
                if lease_field.is_some() {
                    let message = "both :lease-ms and :lease_ms are given".to_string();
                    WrongMember::note(w, Slot::LeaseMs, field, message);
                }
                lease_field = Some(field);
                p.lease_ms = optional_int(w, &v, Slot::LeaseMs, field);
            }
            "ttl-ms" | "ttl_ms" => p.ttl_ms = optional_int(w, &v, Slot::TtlMs, "value.ttl_ms"),
            "wait-ms" | "wait_ms" => {
                optional_int(w, &v, Slot::WaitMs, "value.wait_ms");
            }
            "mode" => {
                let mode = match &v {
                    Value::Nil => Some("exclusive"),
                    Value::Keyword(k) if k.namespace().is_none() => Some(k.name()),
                    Value::String(s) => Some(s.as_str()),
                    _ => None,
                };
                match mode {
                    Some("exclusive") => p.shared = false,
                    Some("shared") => p.shared = true,
                    _ => WrongMember::note(
                        w,
                        Slot::Mode,
                        "value.mode",
                        format!("expected :exclusive or :shared, found {}", quote(&v)),
                    ),
                }
            }
            "fair" => match v {
                Value::Nil => p.fair = false,
                Value::Boolean(b) => p.fair = b,
                other => WrongMember::note(
                    w,
                    Slot::Fair,
                    "value.fair",
                    format!("expected true or false, found {}", quote(&other)),
                ),
            },
            "value" => p.value = shape(&v),
            "targets" => match names(&v) {
                Some(names) => p.targets = names,
                None => WrongMember::note(
                    w,
                    Slot::Targets,
                    "value.targets",
                    format!("expected a list of names, found {}", quote(&v)),
                ),
            },
            "processes" => match process_numbers(&v) {
                Some(numbers) => p.processes = numbers,
                None => WrongMember::note(
                    w,
                    Slot::Processes,
                    "value.processes",
                    format!("expected a list of process numbers, found {}", quote(&v)),
                ),
            },
            _ => {}
        }
    }
    payload
}

/// An integer or nil; anything else is noted as wrong and read as nil.
fn optional_int(
    wrong: &mut Vec<WrongMember>,
    value: &Value,
    slot: Slot,
    field: &str,
) -> Option<i64> {
    match value {
        Value::Nil => None,
        Value::Integer(i) => Some(*i),
        other => {
            let message = format!("expected an integer or nil, found {}", quote(other));
            WrongMember::note(wrong, slot, field, message);
            None
        }
    }
}

/// The elements of a vector, list or set.
fn elements(value: &Value) -> Option<Vec<&Value>> {
    match value {
        Value::Vector(items) | Value::List(items) => Some(items.iter().collect()),
        Value::Set(items) => Some(items.iter().collect()),
        _ => None,
    }
}

fn name_of(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Keyword(k) => Some(keyword_text(k)),
        Value::Symbol(s) => Some(s.to_string()),
        _ => None,
    }
}

/// Names: a collection of strings / keywords / symbols, or a single one; nil is none.
fn names(value: &Value) -> Option<Vec<String>> {
    if let Value::Nil = value {
        return Some(Vec::new());
    }
    if let Some(name) = name_of(value) {
        return Some(vec![name]);
    }
    elements(value)?.into_iter().map(name_of).collect()
}

fn process_number(value: &Value) -> Option<u64> {
    match value {
        Value::Integer(i) => u64::try_from(*i).ok(),
        _ => None,
    }
}

/// Process numbers: a collection of integers >= 0; nil is none.
fn process_numbers(value: &Value) -> Option<Vec<u64>> {
    if let Value::Nil = value {
        return Some(Vec::new());
    }
    elements(value)?.into_iter().map(process_number).collect()
}

/// A nemesis `:value` that is not a map: a `:kill`'s list of processes, or a list of target
/// names. Anything else (a partition's grudge, `:majority`, ...) says nothing the checks use.
fn nemesis_list(value: &Value, f: &str) -> Payload {
    let mut payload = Payload::default();
    if f == "kill" {
        if let Some(processes) = process_numbers(value) {
            payload.processes = processes;
            return payload;
        }
    }
    if let Some(targets) = names(value) {
        payload.targets = targets;
    }
    payload
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::compact::{OpF, OpType};
    use crate::history::reader::read_jsonl;

    fn read(text: &str) -> Result<History, HistoryError> {
        read_edn(text.as_bytes(), "test.edn")
    }

    fn error_of(text: &str) -> (u64, String, String) {
        let error = read(text).expect_err("should be rejected");
        let message = error.to_string();
        (
            error.line().unwrap_or(0),
            error.field().unwrap_or("").to_string(),
            message,
        )
    }

    fn assert_same(edn: &History, jsonl: &History) {
        assert_eq!(edn.ops, jsonl.ops);
        assert_eq!(edn.faults, jsonl.faults);
        assert_eq!(edn.keys, jsonl.keys);
        assert_eq!(edn.processes, jsonl.processes);
    }

    /// docs/src/reference/history.md's example, with the key Knossos leaves implicit.
    const JSONL: &str = r#"{"index":0,"time":1200,"process":0,"type":"invoke","f":"acquire","key":"lock"}
{"index":1,"time":91000,"process":0,"type":"ok","f":"acquire","key":"lock","value":{"token":33,"lease_ms":2000}}
{"index":2,"time":95000,"process":"nemesis","type":"info","f":"pause","value":{"targets":["worker-0"],"processes":[0]}}
{"index":3,"time":2100000000,"process":1,"type":"invoke","f":"acquire","key":"lock"}
{"index":4,"time":2100090000,"process":1,"type":"ok","f":"acquire","key":"lock","value":{"token":34,"lease_ms":2000}}
{"index":5,"time":2100200000,"process":1,"type":"invoke","f":"write","key":"lock","value":{"token":34,"value":7}}
{"index":6,"time":2100300000,"process":1,"type":"ok","f":"write","key":"lock","value":{"token":34,"value":7}}
{"index":7,"time":3000000000,"process":"nemesis","type":"info","f":"resume","value":{"targets":["worker-0"],"processes":[0]}}
{"index":8,"time":3000100000,"process":0,"type":"invoke","f":"write","key":"lock","value":{"token":33,"value":"a"}}
{"index":9,"time":3000200000,"process":0,"type":"fail","f":"write","key":"lock","value":{"token":33,"value":"a"},"error":"stale token 33 < 34"}
{"index":10,"time":3000300000,"process":1,"type":"invoke","f":"read","key":"lock"}
{"index":11,"time":3000400000,"process":1,"type":"ok","f":"read","key":"lock","value":{"value":7}}
"#;

    /// The same history as Jepsen writes history.edn: one op map per line.
    const EDN_LINES: &str = r#"{:type :invoke, :f :acquire, :value nil, :time 1200, :process 0, :index 0}
{:type :ok, :f :acquire, :value {:token 33, :lease-ms 2000}, :time 91000, :process 0, :index 1}
{:type :info, :f :pause, :value {:targets ["worker-0"], :processes [0]}, :time 95000, :process :nemesis, :index 2}
{:type :invoke, :f :acquire, :value nil, :time 2100000000, :process 1, :index 3}
{:type :ok, :f :acquire, :value {:token 34, :lease_ms 2000}, :time 2100090000, :process 1, :index 4}
{:type :invoke, :f :write, :value {:token 34, :value 7}, :time 2100200000, :process 1, :index 5}
{:type :ok, :f :write, :value {:token 34, :value 7}, :time 2100300000, :process 1, :index 6}
{:type :info, :f :resume, :value {:targets [:worker-0], :processes #{0}}, :time 3000000000, :process :nemesis, :index 7}
{:type :invoke, :f :write, :value {:token 33, :value "a"}, :time 3000100000, :process 0, :index 8}
{:type :fail, :f :write, :value {:token 33, :value "a"}, :time 3000200000, :process 0, :index 9, :error "stale token 33 < 34"}
{:type :invoke, :f :read, :value nil, :time 3000300000, :process 1, :index 10}
{:type :ok, :f :read, :value 7, :time 3000400000, :process 1, :index 11}
"#;

    /// The same again as a Knossos-style vector, pretty-printed over several lines, without
    /// :index, some ops as Jepsen records, with comments and a discarded form.
    const EDN_VECTOR: &str = r#"; a lock test
[{:process 0, :type :invoke, :f :acquire, :time 1200}
 {:process 0, :type :ok, :f :acquire, :time 91000,
  :value {:token 33, :lease-ms 2000}}
 {:process :nemesis, :type :info, :f :pause, :time 95000,
  :value {:targets ["worker-0"], :processes [0]}}
 #_{:process 9, :type :invoke, :f :acquire, :time 96000}
 #jepsen.history.Op{:process 1, :type :invoke, :f :acquire, :time 2100000000}
 #jepsen.history.Op{:process 1, :type :ok, :f :acquire, :time 2100090000,
                    :value {:token 34, :lease-ms 2000}}
 {:process 1, :type :invoke, :f :write, :time 2100200000, :value {:token 34, :value 7}}
 {:process 1, :type :ok, :f :write, :time 2100300000, :value {:token 34, :value 7}}
 {:process :nemesis, :type :info, :f :resume, :time 3000000000,
  :value {:targets ["worker-0"], :processes [0]}}
 {:process 0, :type :invoke, :f :write, :time 3000100000, :value {:token 33, :value "a"}}
 {:process 0, :type :fail, :f :write, :time 3000200000, :value {:token 33, :value "a"},
  :error "stale token 33 < 34 ]}) \" ;"}
 {:process 1, :type :invoke, :f :read, :time 3000300000, :value nil}
 {:process 1, :type :ok, :f :read, :time 3000400000, :value 7}]
"#;

    #[test]
    fn reads_the_acquire_options() {
        let history = read(
            "[{:process 0, :type :invoke, :f :acquire, :time 1, \
               :value {:ttl-ms 900, :mode :shared, :fair true, :wait-ms 5}}]",
        )
        .unwrap();
        let invoke = &history.ops[0];
        assert_eq!(invoke.ttl_ms(), Some(900));
        assert_ne!(invoke.flags & crate::history::compact::flags::SHARED, 0);
        assert_ne!(invoke.flags & crate::history::compact::flags::FAIR, 0);
        let (_, field, message) =
            error_of("[{:process 0, :type :invoke, :f :acquire, :time 1, :value {:mode :read}}]");
        assert_eq!(field, "value.mode", "{message}");
        let (_, field, _) =
            error_of("[{:process 0, :type :invoke, :f :acquire, :time 1, :value {:fair 1}}]");
        assert_eq!(field, "value.fair");
    }

    #[test]
    fn value_members_the_op_does_not_use_are_ignored() {
        // One event a line (lines 1 to 3).
        let text = [
            r#"[{:process 0, :type :invoke, :f :acquire, :time 1, :value {:ttl-ms 5, :token "x"}}"#,
            r#"{:process 0, :type :ok, :f :acquire, :time 2, :value {:token 3, :processes :all, :mode 7, :targets 1}}"#,
            r#"{:process :nemesis, :type :info, :f :kill, :time 3, :value {:processes [0], :token "t", :lease-ms []}}]"#,
        ]
        .join("\n");
        let history = read(&text).unwrap();
        assert_eq!(history.ops[1].token(), Some(3));
        assert_eq!(history.faults[0].processes, vec![0]);
        let (line, field, message) =
            error_of(&text.replacen(":processes [0]", ":processes :all", 1));
        assert_eq!((line, field.as_str()), (3, "value.processes"), "{message}");
        let (line, field, message) = error_of(&text.replacen(":token 3", ":token \"3\"", 1));
        assert_eq!((line, field.as_str()), (2, "value.token"), "{message}");
    }

    #[test]
    fn both_layouts_match_the_equivalent_jsonl() {
        let jsonl = read_jsonl(JSONL.as_bytes(), "test.jsonl", None).unwrap();
        let lines = read(EDN_LINES).unwrap();
        assert_same(&lines, &jsonl);
        let vector = read(EDN_VECTOR).unwrap();
        assert_same(&vector, &jsonl);
        assert!(vector.warnings.is_empty(), "{:?}", vector.warnings);
        assert_eq!(jsonl.keys, vec!["lock"]);
        assert_eq!(vector.ops[1].token(), Some(33));
        assert_eq!(vector.ops[1].lease_ms(), Some(2000));
        assert_eq!(vector.ops[11].int_value(), Some(7));
    }

    #[test]
    fn a_vector_on_one_line_and_a_list_work_too() {
        let jsonl = read_jsonl(JSONL.as_bytes(), "test.jsonl", None).unwrap();
        let one_line: String = EDN_LINES.lines().collect::<Vec<_>>().join(" ");
        assert_same(&read(&format!("[{one_line}]")).unwrap(), &jsonl);
        assert_same(&read(&format!("({one_line})\n")).unwrap(), &jsonl);
        // Positions still tell ops on one line apart.
        let broken = one_line.replacen(":type :ok, :f :write", ":type :done, :f :write", 1);
        let (line, field, message) = error_of(&format!("[{broken}]"));
        assert_eq!((line, field.as_str()), (1, "type"), "{message}");
        assert!(message.contains("op #7"), "{message}");
    }

    #[test]
    fn missing_index_is_the_position_and_a_present_one_must_follow_it() {
        let text = "{:process 0, :type :invoke, :f :acquire, :time 10}\n\
                    {:process 0, :type :ok, :f :acquire, :time 20, :index 1}\n\
                    {:process 0, :type :invoke, :f :release, :time 30}\n";
        let history = read(text).unwrap();
        let indices: Vec<u32> = history.ops.iter().map(|op| op.index).collect();
        assert_eq!(indices, vec![0, 1, 2]);
        let (line, field, message) = error_of(&text.replacen(":index 1", ":index 5", 1));
        assert_eq!((line, field.as_str()), (2, "index"), "{message}");
        assert!(message.contains("expected 1"), "{message}");
        let (_, field, _) = error_of(&text.replacen(":index 1", ":index -1", 1));
        assert_eq!(field, "index");
    }

    #[test]
    fn times_absent_everywhere_are_synthesized_with_a_warning() {
        let text = "[{:process 0, :type :invoke, :f :acquire, :value nil}\n \
                    {:process 0, :type :ok, :f :acquire, :value nil}\n \
                    {:process 1, :type :invoke, :f :read, :value nil}\n \
                    {:process 1, :type :ok, :f :read, :value nil}]";
        let history = read(text).unwrap();
        let times: Vec<i64> = history.ops.iter().map(|op| op.time).collect();
        assert_eq!(times, vec![0, 1_000_000, 2_000_000, 3_000_000]);
        assert_eq!(history.warnings.len(), 1);
        assert!(
            history.warnings[0].contains("synthesized"),
            "{:?}",
            history.warnings
        );
        // A nil read found the register empty; a nil invoke carries nothing.
        assert_ne!(
            history.ops[3].flags & crate::history::compact::flags::NULL_VALUE,
            0
        );
        assert_eq!(history.ops[2].flags, 0);
    }

    #[test]
    fn times_absent_on_only_some_ops_are_an_error() {
        let text = "{:process 0, :type :invoke, :f :acquire, :time 10}\n\
                    {:process 0, :type :ok, :f :acquire}\n";
        let (line, field, message) = error_of(text);
        assert_eq!((line, field.as_str()), (2, "time"), "{message}");
        let text = "{:process 0, :type :invoke, :f :acquire}\n\
                    {:process 0, :type :ok, :f :acquire, :time 10}\n";
        let (line, field, message) = error_of(text);
        assert_eq!((line, field.as_str()), (2, "time"), "{message}");
        assert!(message.contains("line 1"), "{message}");
    }

    #[test]
    fn nemesis_is_a_keyword_process_and_a_kill_may_list_processes() {
        let text = r#"{:process 0, :type :invoke, :f :acquire, :time 10, :key "lock:a"}
{:process 0, :type :ok, :f :acquire, :time 20, :key "lock:a"}
{:process :nemesis, :type :info, :f :kill, :time 30, :value nil}
{:process :nemesis, :type :info, :f :kill, :time 40, :value [0]}
{:process :nemesis, :type :info, :f :start, :time 50, :value ["n1" :n2]}
{:process :nemesis, :type :info, :f :start, :time 60, :value [:isolated {"n1" #{"n2"}}]}
"#;
        let history = read(text).unwrap();
        assert_eq!(history.keys, vec!["lock:a"]);
        assert_eq!(history.faults.len(), 4);
        assert!(history.ops[2..]
            .iter()
            .all(|op| op.f == OpF::Fault && op.ty == OpType::Info));
        assert_eq!(history.faults[0].name, "kill");
        assert!(history.faults[0].processes.is_empty());
        assert_eq!(history.faults[1].processes, vec![0]);
        assert_eq!(history.faults[2].targets, vec!["n1", "n2"]);
        assert!(history.faults[3].targets.is_empty());
        // The killed process may not come back.
        let again = format!(
            "{text}{{:process 0, :type :invoke, :f :release, :time 70, :key \"lock:a\"}}\n"
        );
        let (line, field, message) = error_of(&again);
        assert_eq!((line, field.as_str()), (7, "process"), "{message}");
        assert!(message.contains("killed at line 4"), "{message}");
    }

    #[test]
    fn errors_name_the_line_where_the_op_map_starts_and_the_field() {
        let (line, field, message) = error_of(&EDN_LINES.replacen(":type :ok", ":type :done", 1));
        assert_eq!((line, field.as_str()), (2, "type"), "{message}");
        assert!(message.starts_with("test.edn:2: field `type`"), "{message}");
        assert!(message.contains(":done"), "{message}");

        let (line, field, message) = error_of(&EDN_VECTOR.replacen(":type :ok", ":type :done", 1));
        assert_eq!((line, field.as_str()), (3, "type"), "{message}");

        let text = EDN_LINES.replacen(":process 1", ":process \"1\"", 1);
        let (line, field, message) = error_of(&text);
        assert_eq!((line, field.as_str()), (4, "process"), "{message}");
        assert!(message.contains("\"1\""), "{message}");
        let text = EDN_VECTOR.replacen(":process 1", ":process -1", 1);
        let (line, field, _) = error_of(&text);
        assert_eq!((line, field.as_str()), (8, "process"));
        let (_, field, _) =
            error_of(&EDN_LINES.replacen(":process :nemesis", ":process :chaos", 1));
        assert_eq!(field, "process");

        let (line, field, _) = error_of(&EDN_LINES.replacen(":token 33", ":token \"33\"", 1));
        assert_eq!((line, field.as_str()), (2, "value.token"));
        let (line, field, _) = error_of(&EDN_LINES.replacen(":lease-ms 2000", ":lease-ms 2.5", 1));
        assert_eq!((line, field.as_str()), (2, "value.lease-ms"));
        let (line, field, _) =
            error_of(&EDN_LINES.replacen(":processes [0]", ":processes [\"0\"]", 1));
        assert_eq!((line, field.as_str()), (3, "value.processes"));
        let (line, field, _) = error_of(&EDN_LINES.replacen(":f :acquire, ", "", 1));
        assert_eq!((line, field.as_str()), (1, "f"));
        let (line, field, _) = error_of(&EDN_LINES.replacen(":f :acquire", ":f :aquire", 1));
        assert_eq!((line, field.as_str()), (1, "f"));
        let (line, field, _) = error_of(&EDN_LINES.replacen(":time 91000", ":time \"soon\"", 1));
        assert_eq!((line, field.as_str()), (2, "time"));
    }

    #[test]
    fn builder_rules_apply_with_edn_lines() {
        let text = EDN_LINES.replacen(":time 91000", ":time 1000", 1);
        let (line, field, message) = error_of(&text);
        assert_eq!((line, field.as_str()), (2, "time"), "{message}");
        assert!(message.contains("back in time"), "{message}");
        let text = EDN_LINES.replacen(":type :ok, :f :acquire", ":type :invoke, :f :release", 1);
        let (line, field, message) = error_of(&text);
        assert_eq!((line, field.as_str()), (2, "type"), "{message}");
        assert!(
            message.contains("invoked at line 1 is still pending"),
            "{message}"
        );
    }

    #[test]
    fn syntax_errors_name_their_line() {
        let text = EDN_LINES.replacen(":index 4}", ":index 4", 1);
        let (line, _, message) = error_of(&text);
        assert!(line >= 5, "{message}");
        let (line, _, message) =
            error_of("{:process 0, :type :invoke, :f :acquire}\n{:f :: :process 0}\n");
        assert_eq!(line, 2, "{message}");
        assert!(message.contains("not valid EDN"), "{message}");
        let (line, _, message) = error_of("[{:process 0, :type :invoke, :f :acquire}\n");
        assert_eq!(line, 1, "{message}");
        assert!(message.contains("`[`"), "{message}");
        let (line, _, message) = error_of("[]\n{:process 0}\n");
        assert_eq!(line, 2, "{message}");
        let (line, _, message) = error_of("{:process 0, :type :invoke, :f :acquire}\n42\n");
        assert_eq!(line, 2, "{message}");
        assert!(message.contains("expected an op map"), "{message}");
        let (line, _, message) = error_of("\n\n}\n");
        assert_eq!(line, 3, "{message}");
    }

    #[test]
    fn an_empty_input_is_an_empty_history() {
        assert!(read("").unwrap().ops.is_empty());
        assert!(read("; nothing\n[]\n").unwrap().ops.is_empty());
    }

    #[test]
    fn the_reference_files_import() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("history");
        for name in ["jepsen-lock-overlap.edn", "jepsen-lock-valid.edn"] {
            let history = read_edn_file(&dir.join(name)).unwrap();
            assert!(history.ops.len() > 10, "{name}");
            assert!(
                history.warnings.is_empty(),
                "{name}: {:?}",
                history.warnings
            );
            assert_eq!(history.processes, vec![0, 1], "{name}");
        }
    }
}
