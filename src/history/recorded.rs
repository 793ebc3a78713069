//! A line on its way into a run's history: the text a worker (or the controller) wrote, kept
//! with its event, parsed once where the line enters the controller. The kill ledger, the
//! recorder and the online checker read the parse; the recorder writes the text.
//!
//! The text is always in the writer's own layout (`HistoryWriter::append_line` renumbers it
//! as it is): a worker's line usually is, and one in any other layout is rewritten as the
//! recorder writes an `Event`, then read as the file will have it, so that what the online
//! checker judges is what `lockaudit check` reads back.

use std::ops::Range;

use super::build::{EventRef, Payload, WrongMember};
use super::compact::OpF;
use super::event::{Event, EventType, Process};
use super::{fast_line, reader, writer};

/// One of the event's strings: where it lies in the text, a client operation's name (the
/// fast scanner names those rather than pointing into the line), or its own (serde
/// unescaped it).
#[derive(Debug, Clone, PartialEq)]
enum Text {
    At(Range<usize>),
    Name(&'static str),
    Own(Box<str>),
}

impl Text {
    fn of(s: &str, text: &str) -> Text {
        // Comparing addresses only: a string that borrows from `text` lies inside it.
        let start = (s.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
        if start <= text.len() && text.len() - start >= s.len() {
            Text::At(start..start + s.len())
        } else if let Some(f) = OpF::from_client_name(s) {
            Text::Name(f.name())
        } else {
            Text::Own(s.into())
        }
    }

    fn get<'a>(&'a self, text: &'a str) -> &'a str {
        match self {
            Text::At(range) => &text[range.clone()],
            Text::Name(name) => name,
            Text::Own(s) => s,
        }
    }
}

/// An event line and its event. Plain data, moved from the pump to the recorder and on to
/// the online checker.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedLine {
    text: String,
    time: i64,
    process: Process,
    ty: EventType,
    f: Text,
    key: Option<Text>,
    /// What the checker reads of `value`, and its members of the wrong type; None if the
    /// format refuses the line (a `value` that is no object): the checker says why from the
    /// text, as `check` does from the file.
    payload: Option<(Payload, Vec<WrongMember>)>,
}

/// A line that is no event (a worker bug, not history): serde's reason and the line.
#[derive(Debug, thiserror::Error)]
#[error("{error}: {text}")]
pub struct NotAnEvent {
    pub text: String,
    pub error: serde_json::Error,
}

impl RecordedLine {
    /// Parses a line (trailing whitespace and line end ignored). A line in the writer's
    /// layout that the fast scanner reads is kept as it is; any other event is rewritten
    /// (`from_event`).
    pub fn parse(mut text: String) -> Result<RecordedLine, NotAnEvent> {
        text.truncate(text.trim_ascii_end().len());
        if writer::in_own_layout(&text) {
            let parts = fast_line::parse(text.as_bytes()).map(|event| Parts::of(event, &text));
            if let Some(parts) = parts {
                return Ok(parts.with_text(text));
            }
        }
        match serde_json::from_str::<Event>(&text) {
            Ok(event) => Ok(RecordedLine::from_event(&event)),
            Err(error) => Err(NotAnEvent { text, error }),
        }
    }

    /// The line the recorder writes for `event` (the controller's own events, and lines in
    /// another layout), with its event read from that line.
    pub fn from_event(event: &Event) -> RecordedLine {
        let mut bytes = Vec::new();
        writer::write_line(&mut bytes, event);
        bytes.pop(); // its `\n`
                     // `write_line` writes UTF-8 (the event's strings, escaped or not).
        let text = String::from_utf8(bytes).unwrap_or_default();
        let parts = reader::with_event(text.as_bytes(), |read| Parts::of(read, &text));
        match parts {
            Ok(parts) => parts.with_text(text),
            // The format refuses its payload: the strings come from the event itself.
            Err(_) => RecordedLine {
                time: event.time,
                process: event.process,
                ty: event.ty,
                f: Text::Own(event.f.as_str().into()),
                key: event.key.as_deref().map(|k| Text::Own(k.into())),
                payload: None,
                text,
            },
        }
    }

    /// The line as it will be written, but for its index.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn time(&self) -> i64 {
        self.time
    }

    pub fn process(&self) -> Process {
        self.process
    }

    pub fn ty(&self) -> EventType {
        self.ty
    }

    pub fn f(&self) -> &str {
        self.f.get(&self.text)
    }

    pub fn key(&self) -> Option<&str> {
        self.key.as_ref().map(|k| k.get(&self.text))
    }

    /// The event as the history's builder takes it, numbered `index`; None if the format
    /// refuses the line (its text says why: `reader::push_recorded_line`).
    pub fn event(&self, index: u64) -> Option<EventRef<'_>> {
        let (payload, wrong) = self.payload.as_ref()?;
        Some(EventRef {
            index,
            time: self.time,
            process: self.process,
            ty: self.ty,
            f: self.f(),
            key: self.key(),
            payload: payload.clone(),
            wrong,
        })
    }
}

/// A parsed event's parts, its strings located in its text.
struct Parts {
    time: i64,
    process: Process,
    ty: EventType,
    f: Text,
    key: Option<Text>,
    payload: Payload,
    wrong: Vec<WrongMember>,
}

impl Parts {
    fn of(event: EventRef, text: &str) -> Parts {
        Parts {
            time: event.time,
            process: event.process,
            ty: event.ty,
            f: Text::of(event.f, text),
            key: event.key.map(|k| Text::of(k, text)),
            wrong: event.wrong.to_vec(),
            payload: event.payload,
        }
    }

    fn with_text(self, text: String) -> RecordedLine {
        RecordedLine {
            text,
            time: self.time,
            process: self.process,
            ty: self.ty,
            f: self.f,
            key: self.key,
            payload: Some((self.payload, self.wrong)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_in_the_writers_layout_is_kept_as_it_is_and_read_once() {
        let text = r#"{"index":7,"time":5,"process":2,"type":"ok","f":"acquire","key":"lock:1","value":{"token":3,"lease_ms":900}}"#;
        let line = RecordedLine::parse(format!("{text} \r")).unwrap();
        assert_eq!(line.text(), text);
        assert_eq!(
            (line.time(), line.process(), line.ty()),
            (5, Process::Client(2), EventType::Ok)
        );
        assert_eq!((line.f(), line.key()), ("acquire", Some("lock:1")));
        // Nothing of the event is copied out of the line.
        assert!(matches!(line.f, Text::Name("acquire")), "{:?}", line.f);
        assert!(matches!(line.key, Some(Text::At(_))), "{:?}", line.key);
        let event = line.event(40).unwrap();
        assert_eq!(event.index, 40);
        assert_eq!(
            (event.payload.token, event.payload.lease_ms),
            (Some(3), Some(900))
        );
    }

    #[test]
    fn a_line_in_another_layout_is_rewritten_as_the_recorder_writes_events() {
        let line = RecordedLine::parse(
            r#"{ "type":"invoke", "f":"write", "key":"k\u00e9", "process":1, "time":9, "index":0, "value":{"value":2,"token":null}, "worker":"w" }"#.into(),
        )
        .unwrap();
        assert_eq!(
            line.text(),
            r#"{"index":0,"time":9,"process":1,"type":"invoke","f":"write","key":"ké","value":{"token":null,"value":2},"worker":"w"}"#
        );
        assert_eq!(line.key(), Some("ké"));
        let event = line.event(0).unwrap();
        assert_eq!(
            event.payload.value,
            crate::history::build::ValueShape::Int(2)
        );
    }

    #[test]
    fn a_payload_the_format_refuses_is_left_to_the_checker_and_no_event_is_refused() {
        let line = RecordedLine::parse(
            r#"{"index":0,"time":1,"process":1,"type":"ok","f":"read","key":"k","value":5}"#.into(),
        )
        .unwrap();
        assert_eq!((line.f(), line.key()), ("read", Some("k")));
        assert!(line.event(0).is_none());
        let refused = RecordedLine::parse(r#"{"index":0,"time":"soon"}"#.into()).unwrap_err();
        assert!(
            refused
                .to_string()
                .ends_with(r#": {"index":0,"time":"soon"}"#),
            "{refused}"
        );
        assert!(RecordedLine::parse("not json".into()).is_err());
    }
}
