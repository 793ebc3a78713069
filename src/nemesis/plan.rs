//! From a schedule to the concrete faults of one run: every random choice (times, targets,
//! durations, crash points) made up front from the seed, so the same seed gives the same
//! plan. The plan is written to the run folder as `nemesis.json`.

use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::cluster::Topology;
use crate::units::Span;

use super::schedule::{FaultKind, FaultSpec, Link, Schedule};

/// What there is to fault in this run.
#[derive(Debug, Clone)]
pub struct Stage {
    /// Worker processes, `worker-0` ...
    pub workers: usize,
    /// The lock servers' names (`master-0`, `replica-1`, ...).
    pub servers: Vec<String>,
    pub ttl_ms: u64,
    /// The algorithm's crash points (`Algorithm::steps`, plus the fencing step).
    pub crash_points: Vec<String>,
    pub time_limit_ms: u64,
    pub seed: u64,
    pub topology: Topology,
}

/// One fault of the run, fully decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedFault {
    /// Run time of its start, ms.
    pub at_ms: u64,
    pub kind: FaultKind,
    /// Workers or servers it acts on (empty for a failover: the primary of the moment).
    pub targets: Vec<String>,
    /// How long until it is healed (a kill: until the restart), ms.
    pub duration_ms: u64,
    /// Clock faults: ms.
    #[serde(default)]
    pub offset_ms: i64,
    #[serde(default)]
    pub persist: bool,
    #[serde(default)]
    pub point: Option<String>,
    #[serde(default)]
    pub latency_ms: u64,
    #[serde(default)]
    pub link: Link,
    /// Why this fault cannot act on the run (`schedule::cannot_act`): the nemesis leaves it
    /// out, and `nemesis.json` says so here. Absent for a fault that acts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_applicable: Option<String>,
}

impl PlannedFault {
    pub fn end_ms(&self) -> u64 {
        self.at_ms + self.duration_ms
    }
}

/// The default length of a fault of `kind` when the schedule gives none.
fn default_duration(kind: FaultKind, ttl_ms: u64) -> Span {
    use crate::units::Millis;
    let (min, max) = match kind {
        FaultKind::KillClient => (300, 800),
        FaultKind::KillServer => (300, 1000),
        FaultKind::CrashPoint => (1000, 1000),
        FaultKind::Failover => (1000, 1000),
        _ => (ttl_ms * 3 / 2 + 200, ttl_ms * 3 + 500),
    };
    Span {
        min: Millis(min),
        max: Millis(max),
    }
}

/// How much of a schedule can happen within a run's time limit: each fault counted from
/// its start to its heal at the latest (its longest duration). A fault still open at the
/// time limit is healed then, cut short; one that would start after it never happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fit {
    /// The name the schedule goes by (the preset, or the file as given).
    pub name: String,
    pub time_limit_ms: u64,
    /// The fixed timeline's faults (`[[fault]]`), and how many of them fit.
    pub fixed: usize,
    pub fixed_fitting: usize,
    /// The random mix, if any: when its first fault begins and the longest a fault of it
    /// lasts. A mix repeats for the whole run, its last fault cut short by the time limit
    /// as a matter of course: it fits when its first fault can happen whole.
    pub mix: Option<(u64, u64)>,
    /// The time limit the whole schedule needs: the latest heal of a fixed fault, and of
    /// the mix's first fault.
    pub needs_ms: u64,
}

impl Fit {
    /// Whether the random mix's first fault fits (None: no mix).
    pub fn mix_fits(&self) -> Option<bool> {
        self.mix
            .map(|(start, longest)| start + longest <= self.time_limit_ms)
    }

    pub fn fits(&self) -> bool {
        self.fixed_fitting == self.fixed && self.mix_fits() != Some(false)
    }

    /// What a run that the schedule does not fit should be told before it starts (None:
    /// it fits): "nemesis/x.toml: 1 of 3 faults fit in 10 s; the schedule needs 15 s (use
    /// --time-limit 15s or more)".
    pub fn warning(&self) -> Option<String> {
        if self.fits() {
            return None;
        }
        let limit = seconds(self.time_limit_ms);
        let mut what = String::new();
        if self.fixed > 0 {
            what = format!(
                "{} of {} {} fit in {limit}",
                self.fixed_fitting,
                self.fixed,
                if self.fixed == 1 { "fault" } else { "faults" }
            );
        }
        if let (Some(false), Some((start, longest))) = (self.mix_fits(), self.mix) {
            let when = format!(
                "they begin at {} and last up to {}",
                seconds(start),
                seconds(longest)
            );
            what = if self.fixed > 0 {
                format!("{what}, and none of its random faults ({when})")
            } else {
                format!("none of its faults fits in {limit} ({when})")
            };
        }
        Some(format!(
            "{}: {what}; the schedule needs {} (use --time-limit {}s or more)",
            self.name,
            seconds(self.needs_ms),
            self.needs_ms.div_ceil(1000)
        ))
    }
}

/// Milliseconds as a person reads a run's length: `10 s`, `4.5 s`.
fn seconds(ms: u64) -> String {
    format!("{} s", ms as f64 / 1000.0)
}

/// How much of `schedule` fits in `time_limit_ms` on a run with this TTL and topology
/// (which give the faults' default durations); `name` is how the warning names it.
pub fn fit(
    schedule: &Schedule,
    name: &str,
    ttl_ms: u64,
    topology: Topology,
    time_limit_ms: u64,
) -> Fit {
    let longest = |spec: &FaultSpec| {
        let mut ms = spec
            .duration
            .unwrap_or_else(|| default_duration(spec.kind, ttl_ms))
            .max
            .0;
        if spec.kind == FaultKind::Failover {
            ms = ms.max(crate::cluster::service(topology).failover_min_ms);
        }
        ms
    };
    let heals: Vec<u64> = schedule
        .faults
        .iter()
        .map(|f| f.at.map_or(0, |at| at.0) + longest(f))
        .collect();
    let mix = schedule
        .random
        .as_ref()
        .map(|r| (r.start.0, r.faults.iter().map(longest).max().unwrap_or(0)));
    let mix_heals = mix.map(|(start, longest)| start + longest);
    Fit {
        name: name.to_string(),
        time_limit_ms,
        fixed: heals.len(),
        fixed_fitting: heals.iter().filter(|&&h| h <= time_limit_ms).count(),
        mix,
        needs_ms: heals.iter().chain(&mix_heals).copied().max().unwrap_or(0),
    }
}

/// Why a schedule cannot be planned on this run: it names what the run does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("the random mix has no faults")]
    EmptyMix,
    #[error("{fault}: this run has no servers to fault")]
    NoServers { fault: &'static str },
    /// A `target` or `servers` entry that is no worker or server of this run.
    #[error(
        "{fault}: no {role} \"{name}\" in this run (workers: worker-0..worker-{last_worker}; servers: {servers})"
    )]
    UnknownTarget {
        fault: &'static str,
        /// `worker` or `server`.
        role: &'static str,
        name: String,
        last_worker: usize,
        /// The run's servers, comma-separated.
        servers: String,
    },
    /// `kill-session` on a service whose sessions end by expiry names a server.
    #[error(
        "kill-session: on {service} sessions end by expiry, so its target is the worker to cut off (worker-<n>), not \"{target}\""
    )]
    SessionTargetNotWorker {
        service: &'static str,
        target: String,
    },
    /// `kill-session` on a service that ends sessions names a worker.
    #[error(
        "kill-session: its target is a server whose clients' sessions end (servers: {servers}), not a worker"
    )]
    SessionTargetNotServer { servers: String },
    #[error("crash-point: \"{point}\" is no step of this algorithm (steps: {steps})")]
    UnknownStep { point: String, steps: String },
    #[error("crash-point: the algorithm names no steps")]
    NoSteps,
}

/// Decides every fault of `schedule` on `stage`, in order of start. Faults whose start is
/// not before the time limit are dropped; the executor heals the others by then.
pub fn plan(schedule: &Schedule, stage: &Stage) -> Result<Vec<PlannedFault>, PlanError> {
    let mut rng = StdRng::seed_from_u64(stage.seed ^ 0x6E65_6D65_7369_7321);
    let mut deck = Vec::new();
    let mut faults = Vec::new();
    for spec in &schedule.faults {
        let at = spec.at.map(|m| m.0).unwrap_or(0);
        if at < stage.time_limit_ms {
            faults.push(decide(spec, at, stage, &mut rng, &mut deck)?);
        }
    }
    if let Some(random) = &schedule.random {
        let mut at = random.start.0;
        while at < stage.time_limit_ms {
            let spec = random.faults.choose(&mut rng).ok_or(PlanError::EmptyMix)?;
            faults.push(decide(spec, at, stage, &mut rng, &mut deck)?);
            at += draw(&mut rng, random.every).max(1);
        }
    }
    faults.sort_by_key(|f| f.at_ms);
    Ok(faults)
}

fn draw(rng: &mut StdRng, span: Span) -> u64 {
    rng.random_range(span.min.0..=span.max.0.max(span.min.0))
}

/// `deck`: the crash points still to come in this round (see `crash_point`).
fn decide(
    spec: &FaultSpec,
    at_ms: u64,
    stage: &Stage,
    rng: &mut StdRng,
    deck: &mut Vec<String>,
) -> Result<PlannedFault, PlanError> {
    let kind = spec.kind;
    let duration = spec
        .duration
        .unwrap_or_else(|| default_duration(kind, stage.ttl_ms));
    let targets = Picker { spec, stage }.targets(rng)?;
    let point = crash_point(spec, stage, rng, deck)?;
    let mut duration_ms = draw(rng, duration);
    if kind == FaultKind::Failover {
        duration_ms = duration_ms.max(crate::cluster::service(stage.topology).failover_min_ms);
    }
    Ok(PlannedFault {
        at_ms,
        kind,
        targets,
        duration_ms,
        offset_ms: spec.offset.map(|o| o.0).unwrap_or(match kind {
            FaultKind::ClockJump | FaultKind::ClockSkew => 2 * stage.ttl_ms as i64 + 1000,
            _ => 0,
        }),
        persist: spec.persist,
        point,
        latency_ms: spec.latency.map(|l| l.0).unwrap_or(match kind {
            FaultKind::Latency => stage.ttl_ms / 2,
            _ => 0,
        }),
        link: spec.link,
        not_applicable: None,
    })
}

/// Chooses a fault's targets among the stage's workers and servers.
struct Picker<'a> {
    spec: &'a FaultSpec,
    stage: &'a Stage,
}

impl Picker<'_> {
    fn targets(&self, rng: &mut StdRng) -> Result<Vec<String>, PlanError> {
        let (spec, stage) = (self.spec, self.stage);
        Ok(match spec.kind {
            // The primary of the moment.
            FaultKind::Failover => Vec::new(),
            // The replication link: the replicas of the primary of the moment.
            FaultKind::Partition | FaultKind::Latency if spec.link == Link::Replication => {
                Vec::new()
            }
            // A link between clients and servers: one worker, some servers.
            FaultKind::Partition | FaultKind::Latency => {
                let mut targets = vec![self.worker(rng)?];
                match &spec.servers {
                    Some(servers) => {
                        for s in servers {
                            self.check(s, false)?;
                        }
                        targets.extend(servers.iter().cloned());
                    }
                    None => targets.extend(self.servers(rng)?),
                }
                targets
            }
            // A session that ends only by expiry: one worker cut off from every server.
            FaultKind::KillSession
                if matches!(
                    crate::cluster::service(stage.topology).sessions,
                    crate::cluster::SessionEnd::CutOff
                ) =>
            {
                let cut = match &spec.target {
                    Some(t) if !t.starts_with("worker-") => {
                        return Err(PlanError::SessionTargetNotWorker {
                            service: stage.topology.service_name(),
                            target: t.clone(),
                        })
                    }
                    _ => self.worker(rng)?,
                };
                let mut targets = vec![cut];
                targets.extend(stage.servers.iter().cloned());
                targets
            }
            FaultKind::KillSession
                if spec
                    .target
                    .as_deref()
                    .is_some_and(|t| t.starts_with("worker-")) =>
            {
                return Err(PlanError::SessionTargetNotServer {
                    servers: stage.servers.join(", "),
                })
            }
            kind if kind.targets_workers() => vec![self.worker(rng)?],
            _ => match &spec.target {
                Some(t) => {
                    self.check(t, false)?;
                    vec![t.clone()]
                }
                None => self.servers(rng)?,
            },
        })
    }

    /// `count` servers (1 unless said), drawn.
    fn servers(&self, rng: &mut StdRng) -> Result<Vec<String>, PlanError> {
        let servers = &self.stage.servers;
        if servers.is_empty() {
            return Err(PlanError::NoServers {
                fault: self.spec.kind.name(),
            });
        }
        let count = self.spec.count.unwrap_or(1);
        let mut picked: Vec<String> = servers
            .choose_multiple(rng, count.min(servers.len()))
            .cloned()
            .collect();
        picked.sort();
        Ok(picked)
    }

    /// The worker named by `target`, or one drawn.
    fn worker(&self, rng: &mut StdRng) -> Result<String, PlanError> {
        match &self.spec.target {
            Some(t) => self.check(t, true).map(|()| t.clone()),
            None => Ok(format!(
                "worker-{}",
                rng.random_range(0..self.stage.workers.max(1))
            )),
        }
    }

    /// Whether `name` is a worker (or a server) of this run.
    fn check(&self, name: &String, worker: bool) -> Result<(), PlanError> {
        let stage = self.stage;
        let known = if worker {
            (0..stage.workers).any(|w| format!("worker-{w}") == *name)
        } else {
            stage.servers.contains(name)
        };
        if known {
            return Ok(());
        }
        Err(PlanError::UnknownTarget {
            fault: self.spec.kind.name(),
            role: if worker { "worker" } else { "server" },
            name: name.clone(),
            last_worker: stage.workers.saturating_sub(1),
            servers: stage.servers.join(", "),
        })
    }
}

/// A crash point's step: the one named, or the next of `deck`.
fn crash_point(
    spec: &FaultSpec,
    stage: &Stage,
    rng: &mut StdRng,
    deck: &mut Vec<String>,
) -> Result<Option<String>, PlanError> {
    Ok(match (spec.kind, &spec.point) {
        (FaultKind::CrashPoint, Some(point)) => {
            if !stage.crash_points.contains(point) {
                return Err(PlanError::UnknownStep {
                    point: point.clone(),
                    steps: stage.crash_points.join(", "),
                });
            }
            Some(point.clone())
        }
        // Every step once per round, in a random order (drawn without replacement): the
        // step that shows the algorithm's flaw comes within its first few crash points,
        // never left out by chance for a whole run.
        (FaultKind::CrashPoint, None) => {
            if deck.is_empty() {
                if stage.crash_points.is_empty() {
                    return Err(PlanError::NoSteps);
                }
                deck.extend(stage.crash_points.iter().cloned());
                deck.shuffle(rng);
            }
            deck.pop()
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::schedule::Workload;
    use crate::presets::Preset;

    fn stage(seed: u64) -> Stage {
        Stage {
            workers: 2,
            servers: vec!["master-0".into()],
            ttl_ms: 1000,
            crash_points: vec!["setnx-expire:after-setnx".into()],
            time_limit_ms: 30_000,
            seed,
            topology: Topology::Single,
        }
    }

    fn workload() -> Workload {
        Workload {
            ttl_ms: 1000,
            topology: Topology::Single,
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_plan_and_another_seed_another() {
        let s = Schedule::preset(Preset::Mix, &workload());
        let a = plan(&s, &stage(7)).unwrap();
        let b = plan(&s, &stage(7)).unwrap();
        let c = plan(&s, &stage(8)).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.len() > 5, "{}", a.len());
        assert!(a.iter().all(|f| f.at_ms < 30_000));
        assert!(a.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
    }

    #[test]
    fn targets_are_checked_against_the_run() {
        let s = Schedule::from_toml(
            "[[fault]]\nat = \"1s\"\nkind = \"pause-client\"\ntarget = \"worker-9\"\n",
            "n.toml",
        )
        .unwrap();
        let e = plan(&s, &stage(1)).unwrap_err();
        assert!(
            matches!(&e, PlanError::UnknownTarget { role: "worker", name, .. } if name == "worker-9"),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "pause-client: no worker \"worker-9\" in this run (workers: worker-0..worker-1; servers: master-0)"
        );
    }

    #[test]
    fn every_step_is_armed_once_in_each_round_of_crash_points() {
        let s = Schedule::preset(Preset::CrashPoints, &workload());
        let steps: Vec<String> = ["a:1", "a:2", "a:3"].map(String::from).to_vec();
        for seed in 0..20 {
            let stage = Stage {
                crash_points: steps.clone(),
                ..stage(seed)
            };
            let p = plan(&s, &stage).unwrap();
            assert!(p.len() >= 6, "{}", p.len());
            for round in p.chunks(3).filter(|r| r.len() == 3) {
                let mut armed: Vec<&str> =
                    round.iter().filter_map(|f| f.point.as_deref()).collect();
                armed.sort();
                assert_eq!(armed, ["a:1", "a:2", "a:3"], "seed {seed}");
            }
        }
    }

    #[test]
    fn crash_points_come_from_the_algorithm() {
        let s = Schedule::preset(Preset::CrashPoints, &workload());
        let p = plan(&s, &stage(3)).unwrap();
        assert!(p
            .iter()
            .all(|f| f.point.as_deref() == Some("setnx-expire:after-setnx")));
        let s = Schedule::from_toml(
            "[[fault]]\nat = \"1s\"\nkind = \"crash-point\"\npoint = \"x:y\"\n",
            "n.toml",
        )
        .unwrap();
        assert_eq!(
            plan(&s, &stage(1)).unwrap_err(),
            PlanError::UnknownStep {
                point: "x:y".into(),
                steps: "setnx-expire:after-setnx".into()
            }
        );
    }

    #[test]
    fn the_schedule_files_in_nemesis_read_and_plan() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut seen = 0;
        let files = ["nemesis", "examples/bugs/schedules"]
            .iter()
            .flat_map(|dir| std::fs::read_dir(root.join(dir)).expect("the folder exists"))
            .map(|entry| entry.expect("entry").path());
        for path in files {
            if path.extension().and_then(|e| e.to_str()) != Some("toml") {
                continue;
            }
            let schedule = Schedule::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
            // The servers of the topology its targets name: etcd's or ZooKeeper's three,
            // else five Redis masters.
            let named = |prefix: &str| {
                schedule.faults.iter().any(|f| {
                    f.target
                        .iter()
                        .chain(f.servers.iter().flatten())
                        .any(|t| t.starts_with(prefix))
                })
            };
            let servers = if named("etcd-") {
                (0..3).map(|i| format!("etcd-{i}")).collect()
            } else if named("zk-") {
                (0..3).map(|i| format!("zk-{i}")).collect()
            } else {
                (0..5).map(|i| format!("master-{i}")).collect()
            };
            let stage = Stage {
                workers: 2,
                servers,
                time_limit_ms: 30_000,
                ..stage(1)
            };
            let planned =
                plan(&schedule, &stage).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(!planned.is_empty(), "{}", path.display());
            seen += 1;
        }
        assert!(seen >= 10, "{seen} schedule files");
    }

    fn schedule_file(name: &str) -> Schedule {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("nemesis")
            .join(name);
        Schedule::from_file(&path).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_fixed_timeline_that_does_not_fit_says_how_much_does_and_what_it_needs() {
        // Faults at 1 s (a partition for 12 s), 3 s, 6 s, 9 s (kills of 200 ms).
        let s = schedule_file("redlock-restart.toml");
        let name = "nemesis/redlock-restart.toml";
        let fit10 = fit(&s, name, 2000, Topology::Independent, 10_000);
        assert_eq!((fit10.fixed, fit10.fixed_fitting), (4, 3));
        assert_eq!(fit10.needs_ms, 13_000);
        assert_eq!(
            fit10.warning().as_deref(),
            Some("nemesis/redlock-restart.toml: 3 of 4 faults fit in 10 s; the schedule needs 13 s (use --time-limit 13s or more)")
        );
        let fit5 = fit(&s, name, 2000, Topology::Independent, 5_000);
        assert_eq!(fit5.fixed_fitting, 1);
        assert!(fit5.warning().unwrap().contains("1 of 4 faults fit in 5 s"));
        assert!(fit(&s, name, 2000, Topology::Independent, 13_000).fits());
        assert_eq!(
            fit(&s, name, 2000, Topology::Independent, 13_000).warning(),
            None
        );

        // The count agrees with the plan: the faults that begin and heal within the limit.
        let stage = Stage {
            servers: (0..5).map(|i| format!("master-{i}")).collect(),
            time_limit_ms: 10_000,
            ..stage(1)
        };
        let planned = plan(&s, &stage).unwrap();
        let whole = planned.iter().filter(|f| f.end_ms() <= 10_000).count();
        assert_eq!(whole, fit10.fixed_fitting);
    }

    #[test]
    fn a_fault_counts_to_its_longest_heal_and_its_default_duration() {
        let s = Schedule::from_toml(
            "[[fault]]\nat = \"2s\"\nkind = \"pause-client\"\nduration = { min = \"1s\", max = \"3s\" }\n\n[[fault]]\nat = \"1s\"\nkind = \"failover\"\n",
            "n.toml",
        )
        .unwrap();
        // The pause heals at 5 s at the latest; the failover's default lasts 1 s, but a
        // Sentinel election 5 s.
        assert_eq!(
            fit(&s, "n", 1000, Topology::Replicated, 30_000).needs_ms,
            5000
        );
        assert_eq!(
            fit(&s, "n", 1000, Topology::Sentinel, 30_000).needs_ms,
            6000
        );
        let f = fit(&s, "n", 1000, Topology::Replicated, 4_999);
        assert_eq!((f.fixed, f.fixed_fitting), (2, 1));
        assert!(fit(&s, "n", 1000, Topology::Replicated, 5_000).fits());
        // A fault starting after the limit never happens: it does not fit either.
        let late = Schedule::from_toml(
            "[[fault]]\nat = \"20s\"\nkind = \"kill-client\"\n",
            "n.toml",
        )
        .unwrap();
        let f = fit(&late, "n", 1000, Topology::Single, 10_000);
        assert_eq!((f.fixed, f.fixed_fitting, f.needs_ms), (1, 0, 20_800));
    }

    #[test]
    fn a_random_mix_fits_when_its_first_fault_can_happen_whole() {
        // pause-clients, TTL 1 s: from 1 s, pauses of up to 3.5 s, one after another for the
        // whole run (the last one cut short by the time limit: that is no misfit).
        let s = Schedule::preset(Preset::PauseClients, &workload());
        assert!(fit(&s, "pause-clients", 1000, Topology::Single, 10_000).fits());
        assert!(fit(&s, "pause-clients", 1000, Topology::Single, 4_500).fits());
        let f = fit(&s, "pause-clients", 1000, Topology::Single, 3_000);
        assert_eq!(f.needs_ms, 4_500);
        assert_eq!(
            f.warning().as_deref(),
            Some("pause-clients: none of its faults fits in 3 s (they begin at 1 s and last up to 3.5 s); the schedule needs 4.5 s (use --time-limit 5s or more)")
        );
        assert!(fit(
            &Schedule::preset(Preset::None, &workload()),
            "none",
            1000,
            Topology::Single,
            1
        )
        .fits());
        // Fixed faults and a mix: both are said.
        let both = Schedule::from_toml(
            "[[fault]]\nat = \"8s\"\nkind = \"kill-client\"\nduration = \"4s\"\n\n[random]\nstart = \"7s\"\nevery = \"1s\"\nfaults = [ { kind = \"kill-server\", duration = \"5s\" } ]\n",
            "both.toml",
        )
        .unwrap();
        let w = fit(&both, "both.toml", 1000, Topology::Single, 10_000)
            .warning()
            .unwrap();
        assert_eq!(w, "both.toml: 0 of 1 fault fit in 10 s, and none of its random faults (they begin at 7 s and last up to 5 s); the schedule needs 12 s (use --time-limit 12s or more)");
    }

    #[test]
    fn every_preset_fits_every_builtin_workload_in_an_audit_cell() {
        for algorithm in crate::locks::ALGORITHMS {
            let spec = crate::workload::builtin::workload(algorithm).unwrap();
            let w = Workload {
                ttl_ms: spec.ttl.0,
                topology: spec.topology(),
            };
            for preset in Preset::ALL {
                let name = preset.name();
                let s = Schedule::preset(preset, &w);
                let f = fit(&s, name, spec.ttl.0, spec.topology(), 20_000);
                assert!(f.fits(), "{algorithm} × {name}: {:?}", f.warning());
                // The first fault comes early: a flaw can show within seconds.
                if let Some((start, _)) = f.mix {
                    assert!(
                        start <= 1000,
                        "{algorithm} × {name}: first fault at {start} ms"
                    );
                }
            }
        }
    }

    #[test]
    fn a_kill_session_acts_on_a_server_or_cuts_a_worker_off_from_all() {
        let s = Schedule::preset(
            Preset::KillSessions,
            &Workload {
                ttl_ms: 1000,
                topology: Topology::Postgres,
            },
        );
        let pg = Stage {
            topology: Topology::Postgres,
            ..stage(1)
        };
        let p = plan(&s, &pg).unwrap();
        assert!(p.len() >= 5, "{}", p.len());
        assert!(p
            .iter()
            .all(|f| f.targets == ["master-0"] && f.duration_ms == 0));
        let zk = Stage {
            topology: Topology::Zookeeper,
            servers: (0..3).map(|i| format!("zk-{i}")).collect(),
            ttl_ms: 2000,
            ..stage(1)
        };
        let s = Schedule::preset(
            Preset::KillSessions,
            &Workload {
                ttl_ms: 2000,
                topology: Topology::Zookeeper,
            },
        );
        let p = plan(&s, &zk).unwrap();
        assert!(!p.is_empty());
        for f in &p {
            assert!(f.targets[0].starts_with("worker-"), "{:?}", f.targets);
            assert_eq!(f.targets[1..], ["zk-0", "zk-1", "zk-2"]);
            assert!(f.duration_ms > 2000);
        }
        // A worker where sessions end on the server's word, a server where they expire:
        // each refused, naming what it takes.
        let at_worker = Schedule::from_toml(
            "[[fault]]\nat = \"1s\"\nkind = \"kill-session\"\ntarget = \"worker-0\"\n",
            "n.toml",
        )
        .unwrap();
        let e = plan(&at_worker, &pg).unwrap_err();
        assert!(matches!(e, PlanError::SessionTargetNotServer { .. }), "{e}");
        assert!(e.to_string().contains("not a worker"), "{e}");
        let at_server = Schedule::from_toml(
            "[[fault]]\nat = \"1s\"\nkind = \"kill-session\"\ntarget = \"zk-1\"\n",
            "n.toml",
        )
        .unwrap();
        let e = plan(&at_server, &zk).unwrap_err();
        assert!(matches!(e, PlanError::SessionTargetNotWorker { .. }), "{e}");
        assert!(e.to_string().contains("worker-<n>"), "{e}");
    }

    #[test]
    fn a_partition_names_its_worker_then_its_servers() {
        let s = Schedule::from_toml(
            "[[fault]]\nat = \"1s\"\nkind = \"partition\"\ntarget = \"worker-1\"\nservers = [\"master-0\"]\n",
            "n.toml",
        )
        .unwrap();
        let p = plan(&s, &stage(1)).unwrap();
        assert_eq!(p[0].targets, vec!["worker-1", "master-0"]);
        let s = Schedule::preset(Preset::Partition, &workload());
        let p = plan(&s, &stage(1)).unwrap();
        assert!(p
            .iter()
            .all(|f| f.targets.len() == 2 && f.targets[0].starts_with("worker-")));
    }
}
