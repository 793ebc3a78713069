//! The history's event, as one JSON line of docs/src/reference/history.md (version 1).
//!
//! `Event` is the owned, faithful form: the writer emits it and importers produce it. The
//! reader does not build `Event`s (that would allocate per line); it parses straight into
//! the compact form of `compact.rs`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Who did an event: a logical client, or the nemesis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Process {
    Client(u64),
    Nemesis,
}

impl Serialize for Process {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Process::Client(id) => s.serialize_u64(*id),
            Process::Nemesis => s.serialize_str("nemesis"),
        }
    }
}

impl<'de> Deserialize<'de> for Process {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Process;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an integer >= 0 or the string \"nemesis\"")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Process, E> {
                Ok(Process::Client(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Process, E> {
                u64::try_from(v)
                    .map(Process::Client)
                    .map_err(|_| E::custom(format!("process must be >= 0, found {v}")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Process, E> {
                if v == "nemesis" {
                    Ok(Process::Nemesis)
                } else {
                    Err(E::custom(format!(
                        "process must be an integer or \"nemesis\", found \"{v}\""
                    )))
                }
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl std::fmt::Display for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Process::Client(id) => write!(f, "{id}"),
            Process::Nemesis => f.write_str("nemesis"),
        }
    }
}

/// How an operation started or ended (Jepsen's invoke / ok / fail / info).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventType {
    /// A client started an operation.
    Invoke,
    /// It took effect.
    Ok,
    /// It certainly did not take effect.
    Fail,
    /// Nobody knows whether it took effect.
    Info,
}

impl EventType {
    pub fn name(self) -> &'static str {
        match self {
            EventType::Invoke => "invoke",
            EventType::Ok => "ok",
            EventType::Fail => "fail",
            EventType::Info => "info",
        }
    }
}

/// One line of a history file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub index: u64,
    /// Nanoseconds since the run began, on the run's one monotonic clock.
    pub time: i64,
    pub process: Process,
    #[serde(rename = "type")]
    pub ty: EventType,
    /// The operation (`acquire`, `release`, `renew`, `read`, `write`) or the fault's name.
    pub f: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Wall-clock unix time in ms, for humans only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall: Option<i64>,
    /// Fields this version does not know: kept, so a rewrite loses nothing.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Event {
    /// A client event with no payload; set the optional fields afterwards as needed.
    pub fn client(index: u64, time: i64, process: u64, ty: EventType, f: &str, key: &str) -> Self {
        Event {
            index,
            time,
            process: Process::Client(process),
            ty,
            f: f.to_string(),
            key: Some(key.to_string()),
            value: None,
            error: None,
            node: None,
            wall: None,
            extra: Map::new(),
        }
    }

    /// A nemesis `info` event for fault `f` aimed at `targets`, affecting client `processes`.
    pub fn nemesis(index: u64, time: i64, f: &str, targets: &[&str], processes: &[u64]) -> Self {
        let value = serde_json::json!({ "targets": targets, "processes": processes });
        Event {
            index,
            time,
            process: Process::Nemesis,
            ty: EventType::Info,
            f: f.to_string(),
            key: None,
            value: Some(value),
            error: None,
            node: None,
            wall: None,
            extra: Map::new(),
        }
    }

    pub fn with_value(mut self, value: Value) -> Self {
        self.value = Some(value);
        self
    }

    pub fn with_error(mut self, error: &str) -> Self {
        self.error = Some(error.to_string());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_the_example_line_and_keeps_unknown_fields() {
        let line = r#"{"index":1,"time":91000,"process":0,"type":"ok","f":"acquire","key":"lock:a","value":{"token":33,"lease_ms":2000},"worker":"w-1"}"#;
        let event: Event = serde_json::from_str(line).unwrap();
        assert_eq!(event.process, Process::Client(0));
        assert_eq!(event.ty, EventType::Ok);
        assert_eq!(event.extra["worker"], "w-1");
        let again: Event = serde_json::from_str(&serde_json::to_string(&event).unwrap()).unwrap();
        assert_eq!(again, event);
    }

    #[test]
    fn nemesis_process_is_a_string() {
        let event = Event::nemesis(2, 95000, "pause", &["worker-0"], &[0]);
        let text = serde_json::to_string(&event).unwrap();
        assert!(text.contains(r#""process":"nemesis""#), "{text}");
        assert!(serde_json::from_str::<Process>(r#""client""#).is_err());
        assert!(serde_json::from_str::<Process>("-1").is_err());
    }
}
