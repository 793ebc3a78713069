//! Workload specs: what the clients do, as a TOML file (`workloads/*.toml`) that command-line
//! flags override. Every duration is a string such as `"250ms"` or `"30s"`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

use crate::audit::Expectation;
use crate::cluster::Topology;
use crate::tomlfile::{self, FileError};
use crate::units::parse_duration;

/// A duration written as `"250ms"`, kept as milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Millis(pub u64);

impl Millis {
    pub fn duration(self) -> Duration {
        Duration::from_millis(self.0)
    }
}

/// From a string (`"250ms"`, as files write it) or a whole number of milliseconds (as the
/// controller hands a spec to its workers).
impl<'de> Deserialize<'de> for Millis {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Ms(u64),
            Text(String),
        }
        match Form::deserialize(d)? {
            Form::Ms(ms) => Ok(Millis(ms)),
            Form::Text(text) => parse_duration(&text)
                .map(|d| Millis(d.as_millis() as u64))
                .map_err(serde::de::Error::custom),
        }
    }
}

impl std::str::FromStr for Millis {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        parse_duration(text).map(|d| Millis(d.as_millis() as u64))
    }
}

/// A time drawn uniformly from `min..=max` (`hold = { min = "10ms", max = "50ms" }`, or one
/// duration string for a fixed time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Span {
    pub min: Millis,
    pub max: Millis,
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Fixed(Millis),
            Range { min: Millis, max: Millis },
        }
        match Form::deserialize(d)? {
            Form::Fixed(m) => Ok(Span { min: m, max: m }),
            Form::Range { min, max } if min.0 <= max.0 => Ok(Span { min, max }),
            Form::Range { .. } => Err(serde::de::Error::custom("`min` is larger than `max`")),
        }
    }
}

/// How a client keeps trying for a lock inside one acquire (the algorithm's own policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retry {
    /// Extra tries after the first (0: try once).
    pub attempts: u32,
    /// Wait between tries.
    pub backoff: Millis,
}

/// Everything a run's clients do. Field docs are the TOML keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkloadSpec {
    /// One of `locks::ALGORITHMS`.
    pub algorithm: String,
    /// Where the lock lives; the algorithm's natural topology if absent.
    pub topology: Option<Topology>,
    /// Masters for the `independent` topology.
    pub masters: usize,
    /// Logical clients, spread over `workers` OS processes.
    pub clients: usize,
    pub workers: usize,
    /// Distinct lock keys (fewer keys, more contention).
    pub keys: usize,
    pub ttl: Millis,
    /// Time in the critical section between the read and the write (the work).
    pub hold: Span,
    /// Time between a release and the next acquire.
    pub think: Span,
    pub retry: Retry,
    /// Renew every ttl/3 while holding (for algorithms that renew).
    pub watchdog: bool,
    /// Fencing tokens from INCR, checked by a fenced resource.
    pub fenced: bool,
    /// In the critical section, take the lock again and release it once (reentrancy).
    pub nested: bool,
    /// An operation not answered within this is indeterminate (`info`).
    pub op_timeout: Millis,
    pub time_limit: Millis,
    pub seed: u64,
    /// The fault schedule: a preset's name or a `nemesis/*.toml` file (`--nemesis`).
    pub nemesis: Option<String>,
    /// Per nemesis preset, the anomaly kinds `lockaudit audit` must and may find.
    pub expect: BTreeMap<String, Expectation>,
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec {
            algorithm: "set-nx-px".into(),
            topology: None,
            masters: 5,
            clients: 8,
            workers: 2,
            keys: 1,
            ttl: Millis(1000),
            hold: Span {
                min: Millis(5),
                max: Millis(50),
            },
            think: Span {
                min: Millis(0),
                max: Millis(10),
            },
            retry: Retry {
                attempts: 0,
                backoff: Millis(10),
            },
            watchdog: false,
            fenced: false,
            nested: false,
            op_timeout: Millis(2000),
            time_limit: Millis(30_000),
            seed: 1,
            nemesis: None,
            expect: BTreeMap::new(),
        }
    }
}

/// A workload file that cannot be used, with its place.
pub type SpecError = FileError;

impl WorkloadSpec {
    /// Reads a workload file; errors name the file, the line and the field.
    pub fn from_file(path: &Path) -> Result<WorkloadSpec, SpecError> {
        let spec: WorkloadSpec = tomlfile::read(path)?;
        let name = path.display().to_string();
        spec.validate()
            .map_err(|message| FileError::whole(&name, message))?;
        Ok(spec)
    }

    pub fn from_toml(text: &str, name: &str) -> Result<WorkloadSpec, SpecError> {
        let spec: WorkloadSpec = tomlfile::parse(text, name)?;
        spec.validate()
            .map_err(|message| FileError::whole(name, message))?;
        Ok(spec)
    }

    /// Checks what the types cannot say.
    pub fn validate(&self) -> Result<(), String> {
        if !crate::locks::ALGORITHMS.contains(&self.algorithm.as_str()) {
            return Err(format!(
                "field `algorithm`: unknown \"{}\" (known: {})",
                self.algorithm,
                crate::locks::ALGORITHMS.join(", ")
            ));
        }
        for (field, value) in [
            ("clients", self.clients),
            ("workers", self.workers),
            ("keys", self.keys),
            ("masters", self.masters),
        ] {
            if value == 0 {
                return Err(format!("field `{field}`: must be at least 1"));
            }
        }
        if self.workers > self.clients {
            return Err(format!(
                "field `workers`: {} workers for {} clients leaves some idle",
                self.workers, self.clients
            ));
        }
        if self.ttl.0 == 0 {
            return Err("field `ttl`: must be longer than 0ms".into());
        }
        for (nemesis, expectation) in &self.expect {
            if let Some(kind) = expectation.unknown_kinds().first() {
                return Err(format!(
                    "field `expect.{nemesis}`: \"{kind}\" is no anomaly kind (known: {})",
                    crate::report::ANOMALY_KINDS.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// The topology the algorithm runs on unless the workload says otherwise.
    pub fn topology(&self) -> Topology {
        self.topology.unwrap_or(if self.algorithm == "redlock" {
            Topology::Independent
        } else {
            Topology::Single
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_workload_with_durations_and_ranges() {
        let spec = WorkloadSpec::from_toml(
            r#"
algorithm = "redlock"
clients = 16
workers = 4
ttl = "2s"
hold = { min = "10ms", max = "20ms" }
think = "5ms"
retry = { attempts = 3, backoff = "25ms" }
"#,
            "w.toml",
        )
        .unwrap();
        assert_eq!(spec.ttl, Millis(2000));
        assert_eq!(spec.hold.max, Millis(20));
        assert_eq!(
            spec.think,
            Span {
                min: Millis(5),
                max: Millis(5)
            }
        );
        assert_eq!(spec.topology(), Topology::Independent);
        assert_eq!(spec.time_limit, WorkloadSpec::default().time_limit);
    }

    #[test]
    fn a_spec_survives_the_trip_to_a_worker() {
        let spec = WorkloadSpec::default();
        let text = serde_json::to_string(&spec).unwrap();
        assert_eq!(serde_json::from_str::<WorkloadSpec>(&text).unwrap(), spec);
    }

    #[test]
    fn errors_name_the_line_and_the_field() {
        let error = WorkloadSpec::from_toml("clients = 4\nttl = \"soon\"\n", "w.toml").unwrap_err();
        assert_eq!(error.line, 2, "{error}");
        assert!(error.to_string().contains("\"soon\""), "{error}");
        assert!(error.to_string().contains("field `ttl`"), "{error}");
        let error = WorkloadSpec::from_toml("clients = 4\nttll = \"1s\"\n", "w.toml").unwrap_err();
        assert_eq!(error.line, 2, "{error}");
        assert!(error.to_string().contains("ttll"), "{error}");
        let error = WorkloadSpec::from_toml("algorithm = \"chubby\"\n", "w.toml").unwrap_err();
        assert!(error.to_string().contains("field `algorithm`"), "{error}");
    }
}
