//! Fault schedules: `nemesis/*.toml` files and the presets named on the command line.
//!
//! A schedule is a fixed timeline, a random mix, or both:
//!
//! ```toml
//! [[fault]]                      # at a fixed time
//! at = "3s"
//! kind = "pause-client"
//! target = "worker-0"            # default: one picked at random
//! duration = "2500ms"            # or { min = "1s", max = "3s" }
//!
//! [random]                       # drawn with the run's seed: same seed, same schedule
//! start = "1s"
//! every = { min = "2s", max = "4s" }
//! faults = [ { kind = "kill-client", duration = "500ms" }, { kind = "pause-server" } ]
//! ```
//!
//! Presets are schedules built here from the workload (its TTL, topology and algorithm), so
//! that, say, a pause is always longer than the lease it must outlast.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::cluster::Topology;
use crate::locks::Algorithm;
use crate::tomlfile::{self, FileError};
use crate::units::{Millis, Span};

/// What a fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// SIGKILL a worker process; restart it after `duration`.
    KillClient,
    /// SIGSTOP a worker for `duration`, then SIGCONT.
    PauseClient,
    /// SIGKILL `count` lock servers; restart them after `duration`, empty unless `persist`.
    KillServer,
    /// SIGSTOP `count` lock servers for `duration`.
    PauseServer,
    /// Promote a replica: by hand (replicated: with the replication link frozen for
    /// `duration` first, so the replica lags), or by Sentinel (sentinel: the primary is
    /// paused for `duration` and Sentinel elects a new one).
    Failover,
    /// Move a lock server's clock by `offset` for `duration`.
    ClockJump,
    /// Move a worker's client clocks by `offset` for `duration`.
    ClockSkew,
    /// Cut a worker off from `count` lock servers (or, with `link = "replication"`, the
    /// replicas off from the primary; on etcd, the leader off from the other members) for
    /// `duration`.
    Partition,
    /// Delay every byte on those links by `latency` for `duration`.
    Latency,
    /// Arm a crash point in a worker: the first of its clients to reach step `point` kills
    /// it. Waits up to `duration` for that, then disarms; the worker restarts at once.
    CrashPoint,
    /// The server ends its clients' sessions, and the session locks with them, while the
    /// clients live on (`cluster::SessionEnd`): `CLIENT KILL` on `count` Redis servers,
    /// `pg_terminate_backend` on PostgreSQL, every etcd lease revoked, at once; on
    /// ZooKeeper, a worker cut off from every server for `duration` (past its session
    /// timeout), then healed.
    KillSession,
}

impl FaultKind {
    pub const ALL: [FaultKind; 11] = [
        FaultKind::KillClient,
        FaultKind::PauseClient,
        FaultKind::KillServer,
        FaultKind::PauseServer,
        FaultKind::Failover,
        FaultKind::ClockJump,
        FaultKind::ClockSkew,
        FaultKind::Partition,
        FaultKind::Latency,
        FaultKind::CrashPoint,
        FaultKind::KillSession,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillClient => "kill-client",
            FaultKind::PauseClient => "pause-client",
            FaultKind::KillServer => "kill-server",
            FaultKind::PauseServer => "pause-server",
            FaultKind::Failover => "failover",
            FaultKind::ClockJump => "clock-jump",
            FaultKind::ClockSkew => "clock-skew",
            FaultKind::Partition => "partition",
            FaultKind::Latency => "latency",
            FaultKind::CrashPoint => "crash-point",
            FaultKind::KillSession => "kill-session",
        }
    }

    /// Whether its `target` is a worker (else a server). Partitions and latency act on the
    /// links between a worker and some `servers`.
    pub fn targets_workers(self) -> bool {
        matches!(
            self,
            FaultKind::KillClient
                | FaultKind::PauseClient
                | FaultKind::ClockSkew
                | FaultKind::CrashPoint
                | FaultKind::Partition
                | FaultKind::Latency
        )
    }
}

/// The kinds' names, for an unknown one's error.
const KIND_NAMES: [&str; 11] = [
    "kill-client",
    "pause-client",
    "kill-server",
    "pause-server",
    "failover",
    "clock-jump",
    "clock-skew",
    "partition",
    "latency",
    "crash-point",
    "kill-session",
];

/// By name; an old name (`kill-redis`) is read as its new one, with a notice
/// (`presets::current_kind`), so old schedule files still run.
impl<'de> Deserialize<'de> for FaultKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let name = crate::presets::current_kind(&text);
        if let Some(kind) = FaultKind::ALL.into_iter().find(|k| k.name() == name) {
            return Ok(kind);
        }
        // A slip of an old name (`pause-redsi`) is no near miss of a new one: said here, in
        // the words `tomlfile` gives a near miss.
        match crate::presets::near_old_kind(&text) {
            Some(new) if crate::suggest::closest(&text, KIND_NAMES).is_none() => {
                Err(serde::de::Error::custom(format!(
                    "unknown value `{text}` (did you mean \"{new}\"?)"
                )))
            }
            _ => Err(serde::de::Error::unknown_variant(&text, &KIND_NAMES)),
        }
    }
}

/// Which links a network fault cuts or slows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Link {
    /// Between a worker's clients and lock servers.
    #[default]
    Clients,
    /// Between the primary and its replicas; on etcd, between the leader of the moment and
    /// the other members.
    Replication,
}

/// A signed duration: `"+20s"`, `"-5m"`, `"20s"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Offset(pub i64);

impl<'de> Deserialize<'de> for Offset {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let trimmed = text.trim();
        let (sign, rest) = match trimmed.strip_prefix('-') {
            Some(rest) => (-1, rest),
            None => (1, trimmed.strip_prefix('+').unwrap_or(trimmed)),
        };
        let magnitude: Millis = rest.parse().map_err(serde::de::Error::custom)?;
        Ok(Offset(sign * magnitude.0 as i64))
    }
}

/// One fault, at a fixed time (`at`) or as a template of the random mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    pub kind: FaultKind,
    /// When, for the fixed timeline (not allowed in `[random]`).
    #[serde(default)]
    pub at: Option<Millis>,
    /// `worker-<n>`, or a server's name (`master-0`, `replica-1`); default: random.
    /// kill-session: a server, or on ZooKeeper the worker cut off.
    #[serde(default)]
    pub target: Option<String>,
    /// How long it lasts (a kill: until the restart); default per kind, from the TTL.
    #[serde(default)]
    pub duration: Option<Span>,
    /// Clock faults: how far to move the clock (`"+3s"`, `"-5m"`).
    #[serde(default)]
    pub offset: Option<Offset>,
    /// kill-server: restart with the data it had (AOF on), instead of empty.
    #[serde(default)]
    pub persist: bool,
    /// Servers hit at once (kill-server, pause-server, partition, clock-jump, kill-session);
    /// default 1.
    #[serde(default)]
    pub count: Option<usize>,
    /// partition, latency: the servers the worker is cut off from (default: `count` at
    /// random).
    #[serde(default)]
    pub servers: Option<Vec<String>>,
    /// crash-point: the step (`setnx-expire:after-setnx`); default: one of the
    /// algorithm's at random.
    #[serde(default)]
    pub point: Option<String>,
    /// latency: the delay per byte.
    #[serde(default)]
    pub latency: Option<Millis>,
    /// partition, latency: which links.
    #[serde(default)]
    pub link: Link,
}

impl FaultSpec {
    pub fn new(kind: FaultKind) -> FaultSpec {
        FaultSpec {
            kind,
            at: None,
            target: None,
            duration: None,
            offset: None,
            persist: false,
            count: None,
            servers: None,
            point: None,
            latency: None,
            link: Link::Clients,
        }
    }

    fn lasting(mut self, min_ms: u64, max_ms: u64) -> FaultSpec {
        self.duration = Some(Span {
            min: Millis(min_ms),
            max: Millis(max_ms.max(min_ms)),
        });
        self
    }
}

/// Faults drawn at random.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomMix {
    /// The first fault's time.
    #[serde(default = "default_start")]
    pub start: Millis,
    /// The time from one fault's start to the next.
    pub every: Span,
    /// The templates, one picked uniformly each time.
    pub faults: Vec<FaultSpec>,
}

fn default_start() -> Millis {
    Millis(1000)
}

/// A fault schedule.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Schedule {
    /// The preset's name, or the file's.
    pub name: String,
    #[serde(rename = "fault")]
    pub faults: Vec<FaultSpec>,
    pub random: Option<RandomMix>,
}

/// A schedule that cannot be used, with its place.
pub type ScheduleError = FileError;

/// The presets `--nemesis NAME` knows.
pub use crate::presets::{Nemesis, Preset, PRESETS};

/// What presets are built from.
#[derive(Debug, Clone)]
pub struct Workload {
    pub ttl_ms: u64,
    pub topology: Topology,
}

impl Schedule {
    /// Reads a schedule file; errors name the file, the line and the field.
    pub fn from_file(path: &Path) -> Result<Schedule, ScheduleError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            FileError::whole(&path.display().to_string(), format!("cannot read: {e}"))
        })?;
        Self::from_toml(&text, &path.display().to_string())
    }

    pub fn from_toml(text: &str, name: &str) -> Result<Schedule, ScheduleError> {
        let mut schedule: Schedule = tomlfile::parse(text, name)?;
        if schedule.name.is_empty() {
            schedule.name = Path::new(name)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
        }
        schedule
            .validate()
            .map_err(|e| FileError::whole(name, e.to_string()))?;
        Ok(schedule)
    }

    /// Checks what the types cannot say.
    pub fn validate(&self) -> Result<(), InvalidSchedule> {
        for (i, fault) in self.faults.iter().enumerate() {
            let (number, kind) = (i + 1, fault.kind.name());
            if fault.at.is_none() {
                return Err(InvalidSchedule::MissingAt { number, kind });
            }
            check_fault(fault).map_err(|rule| InvalidSchedule::Fault { number, kind, rule })?;
        }
        if let Some(random) = &self.random {
            if random.faults.is_empty() {
                return Err(InvalidSchedule::EmptyMix);
            }
            if random.every.min.0 == 0 {
                return Err(InvalidSchedule::ZeroEvery);
            }
            for (index, fault) in random.faults.iter().enumerate() {
                let kind = fault.kind.name();
                if fault.at.is_some() {
                    return Err(InvalidSchedule::AtInMix { index, kind });
                }
                check_fault(fault).map_err(|rule| InvalidSchedule::MixFault {
                    index,
                    kind,
                    rule,
                })?;
            }
        }
        Ok(())
    }

    /// Every kind of fault the schedule can inject.
    pub fn kinds(&self) -> Vec<FaultKind> {
        let mut kinds: Vec<FaultKind> = self
            .faults
            .iter()
            .chain(self.random.iter().flat_map(|r| &r.faults))
            .map(|f| f.kind)
            .collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }

    /// Whether a server must keep its data over a restart (AOF on from the start).
    pub fn needs_persistence(&self) -> bool {
        self.faults
            .iter()
            .chain(self.random.iter().flat_map(|r| &r.faults))
            .any(|f| f.persist)
    }

    pub fn is_empty(&self) -> bool {
        self.faults.is_empty() && self.random.is_none()
    }

    /// The kinds of fault in the schedule that cannot act on a run of `algorithm` on
    /// `topology`, each with why (see [`cannot_act`]).
    pub fn not_applicable(
        &self,
        algorithm: &Algorithm,
        topology: Topology,
    ) -> Vec<(FaultKind, String)> {
        self.kinds()
            .into_iter()
            .filter_map(|k| cannot_act(k, algorithm, topology).map(|why| (k, why)))
            .collect()
    }

    /// Why no fault of the schedule can act on such a run, when that is so (a schedule with
    /// no faults at all is no such case).
    pub fn cannot_act_at_all(&self, algorithm: &Algorithm, topology: Topology) -> Option<String> {
        let kinds = self.kinds();
        let not = self.not_applicable(algorithm, topology);
        (!kinds.is_empty() && not.len() == kinds.len()).then(|| {
            not.iter()
                .map(|(k, why)| format!("{}: {why}", k.name()))
                .collect::<Vec<_>>()
                .join("; ")
        })
    }

    /// The topology a run of this schedule needs instead of `topology`, the workload's, when
    /// the workload did not choose one: a schedule that fails over needs replicas, so a
    /// single server becomes a primary with two (`replicated`), as the audit runs its
    /// `failover` cells. None: `topology` will do (RedLock's independent masters stay as
    /// they are: a failover cannot act on them).
    pub fn topology_for(&self, topology: Topology) -> Option<Topology> {
        crate::cluster::service(topology)
            .failover_moves_to
            .filter(|_| self.kinds().contains(&FaultKind::Failover))
    }

    /// The schedule of `preset` for this workload.
    pub fn preset(preset: Preset, workload: &Workload) -> Schedule {
        let ttl = workload.ttl_ms.max(1);
        let independent = workload.topology == Topology::Independent;
        let mix = |every: (u64, u64), faults: Vec<FaultSpec>| RandomMix {
            start: Millis(1000),
            every: Span {
                min: Millis(every.0),
                max: Millis(every.1.max(every.0)),
            },
            faults,
        };
        // A pause that outlasts the lease, with room for someone else to take the lock.
        let outlast = (ttl * 3 / 2 + 200, ttl * 3 + 500);
        let random = match preset {
            Preset::None => None,
            Preset::KillClients => Some(mix(
                (1500, 3000),
                vec![FaultSpec::new(FaultKind::KillClient).lasting(200, 800)],
            )),
            Preset::PauseClients => Some(mix(
                (outlast.1 + 500, outlast.1 + 1500),
                vec![FaultSpec::new(FaultKind::PauseClient).lasting(outlast.0, outlast.1)],
            )),
            Preset::KillServers => {
                return Schedule {
                    name: preset.name().into(),
                    faults: Vec::new(),
                    random: Some(if independent {
                        // RedLock loses a lock when a holder's majority shrinks below
                        // quorum: two masters down at once leave whoever locks meanwhile
                        // with a bare quorum, and the next pair restarting empty soon after
                        // (usually one of those three) lets someone else gather a quorum.
                        let mut pair = FaultSpec::new(FaultKind::KillServer).lasting(100, 300);
                        pair.count = Some(2);
                        mix((400, 800), vec![pair])
                    } else {
                        // A database or an etcd member is restarted on its data folder
                        // (crash recovery from its WAL): its data outlives the process.
                        let mut kill = FaultSpec::new(FaultKind::KillServer).lasting(300, 1000);
                        kill.persist = crate::cluster::service(workload.topology).restarts_on_data;
                        mix((2000, 4000), vec![kill])
                    }),
                };
            }
            Preset::KillSessions => {
                let mut end = FaultSpec::new(FaultKind::KillSession);
                let every = match crate::cluster::service(workload.topology).sessions {
                    // A session expires only after its timeout (the ttl): the worker is cut
                    // off past it, as a pause is, with room for another to take the lock.
                    crate::cluster::SessionEnd::CutOff => {
                        end = end.lasting(outlast.0, outlast.1);
                        (outlast.1 + 500, outlast.1 + 1500)
                    }
                    // An instant. About one to two TTLs apart: holds last a fraction of
                    // the TTL, so most kills find clients holding, and they hit several
                    // times a run.
                    crate::cluster::SessionEnd::Ask(_) => {
                        end = end.lasting(0, 0);
                        (ttl + 500, 2 * ttl + 1000)
                    }
                };
                Some(mix(every, vec![end]))
            }
            Preset::PauseServers => Some(mix(
                (outlast.1 + 500, outlast.1 + 1500),
                vec![FaultSpec::new(FaultKind::PauseServer).lasting(outlast.0, outlast.1)],
            )),
            Preset::Failover => Some(mix(
                (4000, 6000),
                vec![FaultSpec::new(FaultKind::Failover).lasting(1000, 2000)],
            )),
            Preset::ClockJump => {
                let offset = Some(Offset((2 * ttl) as i64 + 1000));
                if independent {
                    // RedLock: a jump on one master of a holder's bare quorum frees the
                    // lock. As with kill-servers, pairs of masters in quick succession: a
                    // jump on two of a holder's five leaves it a bare quorum it does not
                    // know of, and the next pair (usually one of those three) lets another
                    // client gather a quorum while it holds.
                    let mut pair = FaultSpec::new(FaultKind::ClockJump).lasting(100, 300);
                    pair.offset = offset;
                    pair.count = Some(2);
                    Some(mix((400, 800), vec![pair]))
                } else {
                    let mut jump = FaultSpec::new(FaultKind::ClockJump).lasting(1000, 2000);
                    jump.offset = offset;
                    Some(mix((2500, 4000), vec![jump]))
                }
            }
            Preset::ClockSkew => {
                let mut skew = FaultSpec::new(FaultKind::ClockSkew).lasting(1500, 3000);
                skew.offset = Some(Offset((2 * ttl) as i64 + 1000));
                Some(mix((3000, 4500), vec![skew]))
            }
            Preset::Partition => {
                let mut cut = FaultSpec::new(FaultKind::Partition).lasting(outlast.0, outlast.1);
                if independent {
                    cut.count = Some(2);
                }
                let mut faults = vec![cut];
                if crate::cluster::service(workload.topology).elects_leader {
                    // As often, the leader of the moment cut off from the other members.
                    let mut isolate =
                        FaultSpec::new(FaultKind::Partition).lasting(outlast.0, outlast.1);
                    isolate.link = Link::Replication;
                    faults.push(isolate);
                }
                Some(mix((outlast.1 + 500, outlast.1 + 1500), faults))
            }
            // Every half second or so: of an algorithm's steps only some leave a lock
            // behind (setnx-expire: one of three), so the arming must be frequent for one
            // of those to come within seconds.
            Preset::CrashPoints => Some(mix(
                (500, 1000),
                vec![FaultSpec::new(FaultKind::CrashPoint).lasting(500, 500)],
            )),
            Preset::Mix => {
                let mut faults: Vec<FaultSpec> = Vec::new();
                for preset in Preset::ALL {
                    let joins = match preset {
                        // kill-sessions came after the mix's expectations were measured: it
                        // has its own column.
                        Preset::None | Preset::Mix | Preset::KillSessions => false,
                        Preset::Failover => has_replicas(workload.topology),
                        Preset::KillClients
                        | Preset::PauseClients
                        | Preset::KillServers
                        | Preset::PauseServers
                        | Preset::ClockJump
                        | Preset::ClockSkew
                        | Preset::Partition
                        | Preset::CrashPoints => true,
                    };
                    if joins {
                        let s = Schedule::preset(preset, workload);
                        faults.extend(s.random.into_iter().flat_map(|r| r.faults));
                    }
                }
                Some(mix((1000, 2500), faults))
            }
        };
        Schedule {
            name: preset.name().into(),
            faults: Vec::new(),
            random,
        }
    }

    /// A preset's schedule, or a schedule file's.
    pub fn resolve(nemesis: &Nemesis, workload: &Workload) -> Result<Schedule, ScheduleError> {
        match nemesis {
            Nemesis::Preset(preset) => Ok(Schedule::preset(*preset, workload)),
            Nemesis::File(path) => match crate::presets::unknown_nemesis(path) {
                None => Schedule::from_file(Path::new(path)),
                Some(why) => Err(FileError::whole(path, why)),
            },
        }
    }
}

/// Why a fault of `kind` cannot act on a run of `algorithm` on `topology` (None: it can).
/// A schedule may still name such a fault; the run says so before it starts, leaves it out
/// of what the nemesis does, and marks it in `nemesis.json`, and the audit shows a cell
/// whose every fault is like that as not applicable ("n/a"), never as a pass.
pub fn cannot_act(kind: FaultKind, algorithm: &Algorithm, topology: Topology) -> Option<String> {
    match kind {
        FaultKind::Failover => crate::cluster::service(topology)
            .failover
            .map(str::to_string),
        FaultKind::Partition | FaultKind::Latency
            if topology == Topology::Cluster
                && algorithm.own_cluster_client =>
        {
            Some(
                "an adapter's cluster client learns the nodes' real addresses from the cluster's slot map and goes around lockaudit's per-worker proxies"
                    .to_string(),
            )
        }
        FaultKind::ClockSkew => algorithm.ignores_client_clock(),
        FaultKind::ClockJump => crate::cluster::service(topology)
            .clock_jump
            .map(str::to_string),
        _ => None,
    }
}

/// Whether the topology can fail over: replicas to promote, or a service that replaces
/// its leader itself (etcd's failover kills the leader, and the others elect a new one).
pub fn has_replicas(topology: Topology) -> bool {
    crate::cluster::service(topology).failover.is_none()
}

/// A schedule that breaks a rule its types cannot say; the fault at fault is named by its
/// place (`fault 2`, `random.faults[0]`) and kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSchedule {
    #[error("fault {number} ({kind}): field `at` is missing: a fixed fault needs a time")]
    MissingAt { number: usize, kind: &'static str },
    /// A `[[fault]]`, numbered from 1.
    #[error("fault {number} ({kind}): {rule}")]
    Fault {
        number: usize,
        kind: &'static str,
        rule: FaultRule,
    },
    #[error("random: field `faults` is empty")]
    EmptyMix,
    #[error("random: field `every` must be longer than 0ms")]
    ZeroEvery,
    #[error(
        "random.faults[{index}] ({kind}): field `at` belongs to [[fault]], not to the random mix"
    )]
    AtInMix { index: usize, kind: &'static str },
    /// A fault of the random mix, indexed from 0.
    #[error("random.faults[{index}] ({kind}): {rule}")]
    MixFault {
        index: usize,
        kind: &'static str,
        rule: FaultRule,
    },
}

/// A fault whose fields do not go together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultRule {
    /// A field the fault's kind does not take (`offset` on a kill).
    #[error("field `{field}` is only for {kinds}")]
    FieldNotFor {
        field: &'static str,
        /// The kinds that take it, in words.
        kinds: &'static str,
    },
    #[error("a fault on the replication link takes no `target` or `servers`: it cuts the replicas of the primary of the moment (etcd: the leader of the moment from the other members)")]
    ReplicationTargets,
    #[error("field `count` must be at least 1")]
    ZeroCount,
    /// A worker named where a server is wanted, or the other way round.
    #[error("field `target`: \"{target}\" is not a {wanted}")]
    WrongTarget {
        target: String,
        /// `worker (worker-<n>)` or `server (master-<n>, replica-<n>)`.
        wanted: &'static str,
    },
}

fn check_fault(fault: &FaultSpec) -> Result<(), FaultRule> {
    let kind = fault.kind;
    let not_for = |field, kinds| Err(FaultRule::FieldNotFor { field, kinds });
    if fault.offset.is_some() && !matches!(kind, FaultKind::ClockJump | FaultKind::ClockSkew) {
        return not_for("offset", "clock-jump and clock-skew");
    }
    if fault.point.is_some() && kind != FaultKind::CrashPoint {
        return not_for("point", "crash-point");
    }
    if fault.latency.is_some() && kind != FaultKind::Latency {
        return not_for("latency", "latency");
    }
    if fault.servers.is_some() && !matches!(kind, FaultKind::Partition | FaultKind::Latency) {
        return not_for("servers", "partition and latency");
    }
    if fault.link == Link::Replication && (fault.target.is_some() || fault.servers.is_some()) {
        return Err(FaultRule::ReplicationTargets);
    }
    if fault.persist && kind != FaultKind::KillServer {
        return not_for("persist", "kill-server");
    }
    if fault.count == Some(0) {
        return Err(FaultRule::ZeroCount);
    }
    if let Some(target) = &fault.target {
        let worker = target.starts_with("worker-");
        // kill-session names a server, or on ZooKeeper the worker to cut off: the plan
        // checks which against the run.
        if kind != FaultKind::KillSession && kind.targets_workers() != worker {
            return Err(FaultRule::WrongTarget {
                target: target.clone(),
                wanted: if kind.targets_workers() {
                    "worker (worker-<n>)"
                } else {
                    "server (master-<n>, replica-<n>)"
                },
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload() -> Workload {
        Workload {
            ttl_ms: 1000,
            topology: Topology::Single,
        }
    }

    #[test]
    fn every_preset_exists_and_validates() {
        for preset in Preset::ALL {
            let s = Schedule::preset(preset, &workload());
            s.validate().unwrap_or_else(|e| panic!("{preset}: {e:?}"));
            assert_eq!(s.name, preset.name());
            assert_eq!(s.is_empty(), preset == Preset::None, "{preset}");
        }
        assert!(Preset::named("chaos").is_none());
    }

    #[test]
    fn faults_that_cannot_act_are_named_with_why() {
        let on = |name: &str, algorithm: &str, topology: Topology| {
            let w = Workload {
                ttl_ms: 1000,
                topology,
            };
            let algorithm = crate::locks::algorithm(algorithm).unwrap();
            Schedule::preset(Preset::named(name).unwrap(), &w)
                .cannot_act_at_all(algorithm, topology)
        };
        let why = on("failover", "redlock", Topology::Independent).unwrap();
        assert!(why.contains("no replicas"), "{why}");
        assert!(on("failover", "set-nx-px", Topology::Single).is_some());
        assert!(on("failover", "set-nx-px", Topology::Replicated).is_none());
        for algorithm in [
            "set-nx-px",
            "reentrant",
            "redlock",
            "setnx-del",
            "setnx-expire",
            "lua",
        ] {
            let why = on("clock-skew", algorithm, Topology::Single).expect(algorithm);
            assert!(why.starts_with("clock-skew: "), "{why}");
        }
        assert!(on("clock-skew", "setnx-getset", Topology::Single).is_none());
        assert!(on("clock-skew", "lua-getset", Topology::Single).is_none());
        // An adapter runs under a faked wall clock.
        assert!(on("clock-skew", "external", Topology::Single).is_none());
        // Nothing to act is not "cannot act"; a mix with some faults that act is runnable,
        // and names the ones that cannot.
        assert!(on("none", "set-nx-px", Topology::Single).is_none());
        assert!(on("mix", "set-nx-px", Topology::Single).is_none());
        let w = workload();
        let mix = Schedule::preset(Preset::Mix, &w);
        let not = mix.not_applicable(crate::locks::DEFAULT_ALGORITHM, Topology::Single);
        assert_eq!(not.len(), 1, "{not:?}");
        assert_eq!(not[0].0, FaultKind::ClockSkew);
    }

    #[test]
    fn the_partition_preset_on_etcd_and_zookeeper_also_isolates_the_leader() {
        let links = |topology| {
            let w = Workload {
                ttl_ms: 2000,
                topology,
            };
            let s = Schedule::preset(Preset::Partition, &w);
            s.validate().unwrap();
            let faults = s.random.unwrap().faults;
            faults.iter().map(|f| f.link).collect::<Vec<_>>()
        };
        assert_eq!(links(Topology::Etcd), [Link::Clients, Link::Replication]);
        assert_eq!(
            links(Topology::Zookeeper),
            [Link::Clients, Link::Replication]
        );
        assert_eq!(links(Topology::Single), [Link::Clients]);
    }

    #[test]
    fn a_failover_asks_for_replicas_where_there_are_none() {
        let failover = Schedule::preset(Preset::Failover, &workload());
        assert_eq!(
            failover.topology_for(Topology::Single),
            Some(Topology::Replicated)
        );
        assert_eq!(failover.topology_for(Topology::Replicated), None);
        assert_eq!(failover.topology_for(Topology::Sentinel), None);
        assert_eq!(failover.topology_for(Topology::Independent), None);
        let pause = Schedule::preset(Preset::PauseClients, &workload());
        assert_eq!(pause.topology_for(Topology::Single), None);
    }

    #[test]
    fn kill_sessions_ends_them_at_an_instant_or_by_a_cut_past_the_session() {
        let faults = |topology| {
            let w = Workload {
                ttl_ms: 2000,
                topology,
            };
            let s = Schedule::preset(Preset::KillSessions, &w);
            s.validate().unwrap();
            let random = s.random.unwrap();
            (random.every, random.faults)
        };
        for topology in [Topology::Single, Topology::Postgres, Topology::Etcd] {
            let (every, faults) = faults(topology);
            assert_eq!(faults.len(), 1);
            assert_eq!(faults[0].kind, FaultKind::KillSession);
            assert_eq!(faults[0].duration.unwrap().max.0, 0, "{topology:?}");
            // Several times a run, each after the holders had time to take locks again.
            assert!(every.min.0 >= 2000 && every.max.0 <= 6000, "{every:?}");
        }
        // ZooKeeper's sessions end by expiry only: cut off past the session timeout.
        let (_, faults) = faults(Topology::Zookeeper);
        assert!(faults[0].duration.unwrap().min.0 > 2000);
        // Not in the mix, whose expectations were measured without it.
        let mix = Schedule::preset(Preset::Mix, &workload());
        assert!(!mix.kinds().contains(&FaultKind::KillSession));
        assert!(mix.kinds().contains(&FaultKind::KillClient));
        // A fault that can act on every service.
        for topology in [Topology::Single, Topology::Postgres, Topology::Zookeeper] {
            assert_eq!(
                cannot_act(
                    FaultKind::KillSession,
                    crate::locks::DEFAULT_ALGORITHM,
                    topology
                ),
                None
            );
        }
    }

    #[test]
    fn a_kill_session_names_a_server_or_a_worker() {
        let s = Schedule::from_toml(
            "[[fault]]\nat = \"2s\"\nkind = \"kill-session\"\ntarget = \"master-0\"\n\n[[fault]]\nat = \"4s\"\nkind = \"kill-session\"\ntarget = \"worker-1\"\nduration = \"5s\"\n",
            "n.toml",
        )
        .unwrap();
        assert_eq!(s.kinds(), vec![FaultKind::KillSession]);
        let e = Schedule::from_toml(
            "[[fault]]\nat = \"2s\"\nkind = \"kill-session\"\noffset = \"1s\"\n",
            "n.toml",
        )
        .unwrap_err();
        assert!(e.to_string().contains("field `offset`"), "{e}");
    }

    #[test]
    fn a_broken_rule_names_the_fault_by_its_place_and_kind() {
        let mut s = Schedule::from_toml(
            "[[fault]]\nat = \"1s\"\nkind = \"kill-server\"\n\n[[fault]]\nat = \"2s\"\nkind = \"pause-client\"\n",
            "n.toml",
        )
        .unwrap();
        s.faults[1].persist = true;
        let e = s.validate().unwrap_err();
        assert_eq!(
            e,
            InvalidSchedule::Fault {
                number: 2,
                kind: "pause-client",
                rule: FaultRule::FieldNotFor {
                    field: "persist",
                    kinds: "kill-server"
                }
            }
        );
        assert_eq!(
            e.to_string(),
            "fault 2 (pause-client): field `persist` is only for kill-server"
        );
    }

    #[test]
    fn pauses_outlast_the_lease() {
        let s = Schedule::preset(Preset::PauseClients, &workload());
        let pause = &s.random.unwrap().faults[0];
        assert!(pause.duration.unwrap().min.0 > 1000);
    }

    #[test]
    fn reads_a_file_with_a_timeline_and_a_mix() {
        let s = Schedule::from_toml(
            r#"
[[fault]]
at = "3s"
kind = "clock-jump"
target = "master-0"
offset = "-5m"
duration = "2s"

[random]
every = { min = "2s", max = "4s" }
faults = [ { kind = "kill-client", duration = "500ms" } ]
"#,
            "nemesis/mine.toml",
        )
        .unwrap();
        assert_eq!(s.name, "mine");
        assert_eq!(s.faults[0].offset, Some(Offset(-300_000)));
        assert_eq!(s.faults[0].at, Some(Millis(3000)));
        assert_eq!(s.kinds(), vec![FaultKind::KillClient, FaultKind::ClockJump]);
    }

    #[test]
    fn errors_name_the_line_and_the_field() {
        let e = Schedule::from_toml("[[fault]]\nat = \"1s\"\nkind = \"meteor\"\n", "n.toml")
            .unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.to_string().contains("meteor"), "{e}");
        let e = Schedule::from_toml(
            "[[fault]]\nat = \"1s\"\nkind = \"pause-client\"\ndurration = \"1s\"\n",
            "n.toml",
        )
        .unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        let e = Schedule::from_toml("[[fault]]\nkind = \"pause-client\"\n", "n.toml").unwrap_err();
        assert!(e.to_string().contains("`at`"), "{e}");
        let e = Schedule::from_toml(
            "[[fault]]\nat = \"1s\"\nkind = \"pause-client\"\ntarget = \"master-0\"\n",
            "n.toml",
        )
        .unwrap_err();
        assert!(e.to_string().contains("field `target`"), "{e}");
        let e = Schedule::from_toml("[[fault]]\nat = \"1s\"\nkind = \"kill-servr\"\n", "n.toml")
            .unwrap_err();
        assert!(
            e.to_string().contains("(did you mean \"kill-server\"?)"),
            "{e}"
        );
        let e = Schedule::from_toml("[[fault]]\nat = \"1s\"\nkind = \"pause-redsi\"\n", "n.toml")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "n.toml:3: field `kind`: unknown value `pause-redsi` (did you mean \"pause-server\"?)"
        );
    }

    #[test]
    fn old_kind_names_read_as_the_new_ones() {
        let s = Schedule::from_toml(
            "[[fault]]\nat = \"1s\"\nkind = \"kill-redis\"\npersist = true\n\n[random]\nevery = \"2s\"\nfaults = [ { kind = \"pause-redis\" } ]\n",
            "nemesis/old.toml",
        )
        .unwrap();
        assert_eq!(
            s.kinds(),
            vec![FaultKind::KillServer, FaultKind::PauseServer]
        );
        // What is written (nemesis.json) says the new names.
        let json = serde_json::to_string(&s).unwrap();
        assert!(
            json.contains("\"kill-server\"") && !json.contains("redis"),
            "{json}"
        );
    }

    #[test]
    fn the_kinds_names_are_their_serde_names() {
        for (kind, name) in FaultKind::ALL.into_iter().zip(KIND_NAMES) {
            assert_eq!(kind.name(), name);
            assert_eq!(serde_json::to_value(kind).unwrap(), name);
        }
        assert_eq!(
            Schedule::resolve(&Nemesis::named("kill-redis"), &workload())
                .unwrap()
                .name,
            "kill-servers"
        );
    }
}
