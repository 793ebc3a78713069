//! What a run is, decided in one place (Jepsen's test map): the workload as it will run,
//! the fault schedule, the servers, the run folder and how the run is watched. `lockaudit
//! run` builds one from its flags, every audit cell builds one from the audit's options,
//! both through [`RunPlan::build`] / [`RunPlan::from_workload`], and the controller
//! ([`super::run`]) carries out nothing but a plan.
//!
//! The plan is plain serde data: what is decided here can be shown, stored and compared.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::nemesis::schedule::Workload;
use crate::nemesis::{FaultKind, Preset, Schedule};
use crate::presets::Nemesis;
use crate::report::AnomalyKind;
use crate::tomlfile::FileError;
use crate::topology::hosts::NodeEntry;
use crate::topology::Topology;
use crate::units::{Millis, Span};
use crate::workload::inventory::Inventory;
use crate::workload::WorkloadSpec;

use super::{new_run_dir, redis_url_endpoints, RunOptions, Servers, StopWhen};

/// Why a run cannot be planned. Every message is the command line's: it names the file,
/// line and field, or the flags that clash.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A workload, hosts or schedule file that cannot be read or is refused (its message
    /// names the file, the line and the field).
    #[error(transparent)]
    File(#[from] FileError),
    /// The workload, as the overrides left it, is refused.
    #[error("workload: {0}")]
    Workload(String),
    #[error("--redis and nodes (--node): either a Redis already running or hosts to start it on, not both")]
    RedisAndNodes,
    #[error("--redis: {algorithm} runs on the {service} lockaudit starts itself, not on a Redis")]
    RedisForAnotherService {
        algorithm: String,
        service: &'static str,
    },
    #[error("--redis with topology cluster: lockaudit audits only a Redis Cluster it starts itself (drop --redis)")]
    RedisCluster,
    /// `--redis URL` does not name a Redis lockaudit can use.
    #[error(transparent)]
    RedisUrl(#[from] super::RedisUrlError),
    /// A rerun's original folder lacks the copy of its schedule file.
    #[error("{}: its schedule file {file} was not kept ({} is missing)", dir.display(), copy.display())]
    ScheduleNotKept {
        dir: PathBuf,
        file: String,
        copy: PathBuf,
    },
}

/// One run, every decision made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunPlan {
    /// The workload as it runs (its file or built-in text, with every override applied):
    /// what `workload.toml` holds.
    pub spec: WorkloadSpec,
    /// The fault schedule, resolved for this workload (`none`: no faults).
    pub schedule: Schedule,
    /// Where the lock's servers come from.
    pub servers: Servers,
    /// The run folder.
    pub dir: PathBuf,
    /// When the run may end early, whether it is checked while it goes on, the bounds.
    pub options: RunOptions,
    /// What the plan decided that nobody asked for, to be told before the run starts
    /// ("the nemesis failover fails the primary over: ...").
    pub notes: Vec<String>,
    /// Whether `spec.seed` was drawn for this run (neither `--seed` nor the workload file
    /// named one), so that the run says it: it is the one way to replay the run.
    #[serde(default)]
    pub seed_drawn: bool,
    /// The schedule's kinds of fault that cannot act on this run, with why: left out of
    /// what the nemesis does, said before the run starts and marked in `nemesis.json`.
    #[serde(default)]
    pub not_applicable: Vec<(FaultKind, String)>,
    /// Why no fault of the schedule can act on this run, if none can: the run would prove
    /// nothing about them (an audit's cell is then not run: "n/a").
    #[serde(default)]
    pub nothing_acts: Option<String>,
    /// Why the schedule's faults cannot all happen within the time limit, if they cannot.
    #[serde(default)]
    pub misfit: Option<String>,
}

/// What an audit cell asks of its run beyond what `run` asks: when it stops, and how long
/// a run expected valid must go on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellRule {
    /// The kinds the cell must find (none: the cell expects a valid run).
    pub must: Vec<AnomalyKind>,
    /// An overlap must begin inside the earlier holder's lease.
    pub inside_lease: bool,
    /// Stop as soon as everything `must` names is proven (`audit --no-early-stop`: never).
    pub early_stop: bool,
    /// The least a cell expected valid runs: long enough for the first fault, at least.
    pub valid_time_limit: Millis,
}

/// Where a run's workload comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum WorkloadSource {
    /// A workload file (`workloads/*.toml`, your own Lua scripts or adapter).
    File(PathBuf),
    /// An algorithm's built-in workload (`workloads/<algorithm>.toml`, compiled in).
    Builtin(&'static crate::locks::Algorithm),
}

impl WorkloadSource {
    /// The workload, read and checked (a file's errors name its line and field).
    pub fn load(&self) -> Result<WorkloadSpec, FileError> {
        Ok(match self {
            WorkloadSource::File(path) => WorkloadSpec::from_file(path)?,
            WorkloadSource::Builtin(algorithm) => crate::workload::builtin::workload_of(algorithm)?,
        })
    }

    /// Whether the workload names its seed (`seed = 7`): a run folder's workload.toml
    /// always does, the built-in workloads do not. A file that cannot be read names none
    /// (`load` says why it cannot be read).
    pub fn names_seed(&self) -> bool {
        let text = match self {
            WorkloadSource::File(path) => std::fs::read_to_string(path).ok(),
            WorkloadSource::Builtin(algorithm) => algorithm.workload.map(str::to_string),
        };
        text.and_then(|t| t.parse::<toml::Table>().ok())
            .is_some_and(|table| table.contains_key("seed"))
    }
}

/// A seed for a run that was given none: from the OS's random source, small enough to type.
pub fn fresh_seed() -> u64 {
    u64::from(rand::random::<u32>())
}

/// What flags change of a workload; None (false): the workload's own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Overrides {
    pub algorithm: Option<&'static crate::locks::Algorithm>,
    pub clients: Option<usize>,
    pub workers: Option<usize>,
    pub keys: Option<usize>,
    pub ttl: Option<Millis>,
    /// A fixed hold time.
    pub hold: Option<Millis>,
    pub time_limit: Option<Millis>,
    pub seed: Option<u64>,
    /// A preset or a schedule file.
    pub nemesis: Option<Nemesis>,
    pub topology: Option<Topology>,
    /// Fencing tokens (true adds them; false keeps the workload's choice).
    pub fenced: bool,
    /// Renewal every ttl/3 (as `fenced`).
    pub watchdog: bool,
}

impl Overrides {
    /// Applies every override given to `spec` (the workers never outnumber the clients).
    pub fn apply(self, spec: &mut WorkloadSpec) {
        if let Some(v) = self.algorithm {
            spec.algorithm = v;
        }
        if let Some(v) = self.clients {
            spec.clients = v;
        }
        if let Some(v) = self.workers {
            spec.workers = v;
        }
        spec.workers = spec.workers.min(spec.clients);
        if let Some(v) = self.keys {
            spec.keys = v;
        }
        if let Some(v) = self.ttl {
            spec.ttl = v;
        }
        if let Some(v) = self.hold {
            spec.hold = Span { min: v, max: v };
        }
        if let Some(v) = self.time_limit {
            spec.time_limit = v;
        }
        if let Some(v) = self.seed {
            spec.seed = v;
        }
        if let Some(v) = self.nemesis {
            spec.nemesis = Some(v);
        }
        if let Some(v) = self.topology {
            spec.topology = Some(v);
        }
        spec.fenced |= self.fenced;
        spec.watchdog |= self.watchdog;
    }
}

/// Where the lock's servers run when not on this machine: flags, and a hosts file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hosts {
    /// `--node` URLs (they replace the hosts file's, and the workload's `nodes`).
    pub nodes: Vec<NodeEntry>,
    /// `--hosts`: a hosts file, read when the plan is built.
    pub file: Option<PathBuf>,
    pub ssh_key: Option<PathBuf>,
    pub remote_dir: Option<PathBuf>,
    /// Trust a host whose SSH key is in no known_hosts yet (`--accept-new-host-keys`, or
    /// the hosts file's `accept_new_host_keys`).
    #[serde(default)]
    pub accept_new_host_keys: bool,
}

impl Hosts {
    /// The hosts file read and merged with the flags (the flags win): the hosts (empty:
    /// none given), their key and their folder.
    pub fn resolve(self) -> Result<Hosts, FileError> {
        let file = match &self.file {
            Some(path) => Inventory::from_file(path)?,
            None => Default::default(),
        };
        let nodes = if self.nodes.is_empty() {
            file.nodes
        } else {
            self.nodes
        };
        Ok(Hosts {
            nodes,
            file: None,
            ssh_key: self.ssh_key.or(file.ssh_key),
            remote_dir: self.remote_dir.or(file.remote_dir),
            accept_new_host_keys: self.accept_new_host_keys || file.accept_new_host_keys,
        })
    }

    /// Gives `spec` these hosts (resolved: see `resolve`), as `purpose` has it.
    pub fn apply(self, spec: &mut WorkloadSpec, purpose: Purpose) {
        match purpose {
            Purpose::Run => {
                if !self.nodes.is_empty() {
                    spec.nodes = self.nodes;
                }
                if let Some(v) = self.ssh_key {
                    spec.ssh_key = Some(v);
                }
                if let Some(v) = self.remote_dir {
                    spec.remote_dir = Some(v);
                }
                spec.accept_new_host_keys |= self.accept_new_host_keys;
            }
            Purpose::AuditCell => {
                if !self.nodes.is_empty() {
                    spec.nodes = self.nodes;
                    spec.ssh_key = self.ssh_key;
                    spec.remote_dir = self.remote_dir;
                    spec.accept_new_host_keys = self.accept_new_host_keys;
                }
            }
        }
    }
}

/// Who builds the plan: the few rules in which `run` and an audit cell differ, kept here
/// side by side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Purpose {
    /// `lockaudit run`: the workload is checked again once the flags are applied ("workload:
    /// ..."); each host setting given replaces the workload's own; a schedule that fails
    /// over gets replicas only when neither the workload nor a flag chose a topology
    /// (`Schedule::topology_for`), and the run says so.
    Run,
    /// An audit cell: the workload is not checked again (a topology that cannot run on the
    /// hosts is the audit's to mark not applicable); given hosts replace the workload's
    /// whole SSH setup (key and folder too); the `failover` preset gets a primary with two
    /// replicas whatever the workload chose, but RedLock's independent masters and the one
    /// PostgreSQL server stay as they are (not applicable).
    AuditCell,
}

/// Everything a plan is built from, besides the workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub purpose: Purpose,
    pub overrides: Overrides,
    pub hosts: Hosts,
    /// `--redis URL`: a Redis already running (None: lockaudit starts the servers).
    pub redis: Option<String>,
    pub redis_server: Option<PathBuf>,
    pub redis_sentinel: Option<PathBuf>,
    /// The run folder (None: a new one under `root`).
    pub out: Option<PathBuf>,
    /// Where a new run folder is made when `out` names none.
    pub root: PathBuf,
    pub options: RunOptions,
    /// An audit cell's rule (None for `run` and `rerun`).
    pub cell: Option<CellRule>,
}

impl Request {
    pub fn new(purpose: Purpose) -> Request {
        Request {
            purpose,
            overrides: Overrides::default(),
            hosts: Hosts::default(),
            redis: None,
            redis_server: None,
            redis_sentinel: None,
            out: None,
            root: PathBuf::from("results"),
            options: RunOptions::default(),
            cell: None,
        }
    }
}

impl RunPlan {
    /// The plan of a run of the workload `source`, as `request` asks.
    ///
    /// `run` without `--seed`, of a workload that names no seed, gets a fresh one
    /// ([`fresh_seed`]; `seed_drawn`): runs differ unless asked not to, and each records
    /// its seed. An audit cell keeps the audit's seed.
    pub fn build(source: &WorkloadSource, mut request: Request) -> Result<RunPlan, PlanError> {
        let spec = source.load()?;
        let draw = request.purpose == Purpose::Run
            && request.overrides.seed.is_none()
            && !source.names_seed();
        if draw {
            request.overrides.seed = Some(fresh_seed());
        }
        let mut plan = RunPlan::from_workload(spec, request)?;
        plan.seed_drawn = draw;
        Ok(plan)
    }

    /// The plan of a run of `spec` (a workload already loaded, as the audit loads each
    /// once for its expectations), as `request` asks. The errors are the command line's:
    /// `workload: field ...`, a hosts file's line, the schedule file's line.
    pub fn from_workload(mut spec: WorkloadSpec, request: Request) -> Result<RunPlan, PlanError> {
        let Request {
            purpose,
            overrides,
            hosts,
            redis,
            redis_server,
            redis_sentinel,
            out,
            root,
            mut options,
            cell,
        } = request;
        overrides.apply(&mut spec);
        hosts.resolve()?.apply(&mut spec, purpose);
        if redis.is_some() && !spec.nodes.is_empty() {
            return Err(PlanError::RedisAndNodes);
        }
        if purpose == Purpose::Run {
            spec.validate().map_err(PlanError::Workload)?;
        }
        let mut notes = Vec::new();
        let nemesis = spec.nemesis_name().to_string();
        let schedule = match purpose {
            Purpose::Run => {
                let mut schedule = schedule_of(&spec)?;
                // A failover needs replicas: unless told where the lock lives, a
                // single-server algorithm runs on a primary with two, as in the audit.
                let chosen = spec.topology.is_some() || redis.is_some();
                if let Some(topology) = schedule.topology_for(spec.topology()).filter(|_| !chosen) {
                    notes.push(format!(
                        "the nemesis {nemesis} fails the primary over: the lock runs on a primary with two replicas (--topology replicated)"
                    ));
                    spec.topology = Some(topology);
                    schedule = schedule_of(&spec)?;
                }
                schedule
            }
            Purpose::AuditCell => {
                if spec.nemesis == Some(Nemesis::Preset(Preset::Failover)) {
                    if let Some(topology) =
                        crate::cluster::service(spec.topology()).failover_moves_to
                    {
                        spec.topology = Some(topology);
                    }
                }
                schedule_of(&spec)?
            }
        };
        // A lock of another service (PostgreSQL, MariaDB, etcd, ZooKeeper) would take the
        // Redis for its own server and fail to connect only after the clients' 30 s.
        if let Some(service) = spec.algorithm.service.filter(|_| redis.is_some()) {
            return Err(PlanError::RedisForAnotherService {
                algorithm: spec.algorithm.name.to_string(),
                service: service.service_name(),
            });
        }
        if redis.is_some() && spec.topology == Some(Topology::Cluster) {
            return Err(PlanError::RedisCluster);
        }
        let servers = match &redis {
            Some(url) => Servers::Existing(redis_url_endpoints(url)?),
            None => Servers::Owned {
                redis_server,
                redis_sentinel,
            },
        };
        let dir = out.unwrap_or_else(|| new_run_dir(&root, &spec));
        // Which faults can act here, on the topology the run will have.
        let topology = match &servers {
            Servers::Existing(endpoints) => endpoints.topology,
            Servers::Owned { .. } => spec.topology(),
        };
        let not_applicable = schedule.not_applicable(spec.algorithm, topology);
        let nothing_acts = schedule.cannot_act_at_all(spec.algorithm, topology);
        if let Some(cell) = cell {
            options.stop_when = cell_stop(&cell);
            if cell.must.is_empty() {
                // Long enough for the schedule's first fault to happen: a valid verdict
                // from a run the fault never reached would pass a cell that tested nothing.
                spec.time_limit = time_to_first_fault(&spec, &schedule, cell.valid_time_limit);
            }
        }
        let misfit = crate::nemesis::plan::fit(
            &schedule,
            spec.nemesis_name(),
            spec.ttl.0,
            topology,
            spec.time_limit.0,
        )
        .warning();
        Ok(RunPlan {
            spec,
            schedule,
            servers,
            dir,
            options,
            notes,
            seed_drawn: false,
            not_applicable,
            nothing_acts,
            misfit,
        })
    }

    /// Why faults of `kind` cannot act on this run; None if they can.
    pub fn cannot_act(&self, kind: FaultKind) -> Option<String> {
        (self.not_applicable.iter())
            .find(|(k, _)| *k == kind)
            .map(|(_, why)| why.clone())
    }

    /// The schedule's name as the run tells it: the `nemesis` the workload names, or none.
    pub fn nemesis_name(&self) -> &str {
        self.spec.nemesis_name()
    }
}

/// When an audit cell's run stops: once it has proven what the cell must find, unless the
/// audit asks for whole runs; a cell expected valid runs its whole time.
fn cell_stop(cell: &CellRule) -> StopWhen {
    if cell.must.is_empty() || !cell.early_stop {
        StopWhen::Never
    } else {
        StopWhen::Found {
            kinds: cell.must.clone(),
            inside_lease: cell.inside_lease,
        }
    }
}

/// `at_least`, or longer if the schedule's first fault can only happen later.
fn time_to_first_fault(spec: &WorkloadSpec, schedule: &Schedule, at_least: Millis) -> Millis {
    let topology = schedule
        .topology_for(spec.topology())
        .unwrap_or(spec.topology());
    let fit = crate::nemesis::plan::fit(
        schedule,
        spec.nemesis_name(),
        spec.ttl.0,
        topology,
        at_least.0,
    );
    let needed = if fit.fits() { 0 } else { fit.needs_ms };
    Millis(at_least.0.max(needed))
}

/// The schedule the workload names (a preset, or a file), for its ttl and topology.
fn schedule_of(spec: &WorkloadSpec) -> Result<Schedule, FileError> {
    Schedule::resolve(
        spec.nemesis
            .as_ref()
            .unwrap_or(&Nemesis::Preset(Preset::None)),
        &Workload {
            ttl_ms: spec.ttl.0,
            topology: spec.topology(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::DEFAULT_ALGORITHM;

    #[test]
    fn flags_override_the_workload_and_the_plan_says_what_it_chose() {
        let mut request = Request::new(Purpose::Run);
        request.overrides.clients = Some(2);
        request.overrides.hold = Some(Millis(7));
        request.overrides.nemesis = Some(Nemesis::Preset(Preset::Failover));
        request.out = Some(PathBuf::from("out"));
        let plan = RunPlan::build(&WorkloadSource::Builtin(DEFAULT_ALGORITHM), request).unwrap();
        assert_eq!(plan.spec.clients, 2);
        assert!(plan.spec.workers <= 2);
        assert_eq!(plan.spec.hold.min, Millis(7));
        assert_eq!(plan.spec.topology, Some(Topology::Replicated));
        assert_eq!(plan.schedule.name, "failover");
        assert_eq!(plan.notes.len(), 1, "{:?}", plan.notes);
        assert_eq!(plan.dir, PathBuf::from("out"));
        // Plain data: it goes to JSON and back whole.
        let text = serde_json::to_string(&plan).unwrap();
        assert_eq!(serde_json::from_str::<RunPlan>(&text).unwrap(), plan);
    }

    #[test]
    fn an_audit_cell_s_hosts_replace_the_workloads() {
        let mut request = Request::new(Purpose::AuditCell);
        request.hosts.nodes = vec!["ssh://root@10.77.0.2".into()];
        request.out = Some(PathBuf::from("out"));
        let spec = crate::workload::builtin::workload("mariadb-get-lock").unwrap();
        let plan = RunPlan::from_workload(spec, request.clone()).unwrap();
        assert_eq!(plan.spec.nodes, request.hosts.nodes);
    }

    fn cell(algorithm: &str, nemesis: &str, must: &[AnomalyKind]) -> RunPlan {
        let mut request = Request::new(Purpose::AuditCell);
        request.overrides.nemesis = Some(Nemesis::named(nemesis));
        request.overrides.time_limit = Some(Millis(20_000));
        request.out = Some(PathBuf::from("out"));
        request.cell = Some(CellRule {
            must: must.to_vec(),
            inside_lease: true,
            early_stop: true,
            valid_time_limit: Millis(500),
        });
        let spec = crate::workload::builtin::workload(algorithm).unwrap();
        RunPlan::from_workload(spec, request).unwrap()
    }

    /// The plan decides how a cell's run stops, how long a valid one lasts, and whether any
    /// fault can act: the audit only reads it.
    #[test]
    fn an_audit_cell_s_stop_length_and_faults_are_decided_in_its_plan() {
        let must = cell("setnx-del", "kill-clients", &[AnomalyKind::Unavailable]);
        assert_eq!(
            must.options.stop_when,
            StopWhen::Found {
                kinds: vec![AnomalyKind::Unavailable],
                inside_lease: true
            }
        );
        assert_eq!(must.spec.time_limit, Millis(20_000));
        assert_eq!(must.nothing_acts, None);
        // Expected valid: never stopped early, and long enough for the first fault (at 1 s)
        // however short the valid time limit asked.
        let valid = cell("set-nx-px", "kill-clients", &[]);
        assert_eq!(valid.options.stop_when, StopWhen::Never);
        assert!(
            valid.spec.time_limit.0 > 1000,
            "{:?}",
            valid.spec.time_limit
        );
        assert_eq!(valid.misfit, None);
        // RedLock's masters have no replicas: a failover can never act.
        let redlock = cell("redlock", "failover", &[]);
        let why = redlock.nothing_acts.clone().expect("no fault acts");
        assert!(why.contains("no replicas"), "{why}");
        let failover = redlock
            .cannot_act(FaultKind::Failover)
            .expect("failover cannot act");
        assert_eq!(format!("failover: {failover}"), why);
    }

    #[test]
    fn a_rerun_s_folder_is_made_under_the_root_it_asks_for() {
        let mut request = Request::new(Purpose::Run);
        request.root = PathBuf::from("elsewhere");
        request.overrides.seed = Some(1);
        let plan = RunPlan::build(&WorkloadSource::Builtin(DEFAULT_ALGORITHM), request).unwrap();
        assert_eq!(plan.dir.parent(), Some(std::path::Path::new("elsewhere")));
    }
}
