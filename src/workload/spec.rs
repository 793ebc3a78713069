//! Workload specs: what the clients do, as a TOML file (`workloads/*.toml`) that command-line
//! flags override. Every duration is a string such as `"250ms"` or `"30s"`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};

use super::expect::Expectation;
use crate::locks::{self, Algorithm, LuaScripts};
use crate::presets::{unknown_nemesis, Column, Nemesis, Preset};
use crate::tomlfile::{self, FileError};
use crate::topology::Topology;
use crate::units::{Millis, Span};

/// How a client keeps trying for a lock inside one acquire (the algorithm's own policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retry {
    /// Extra tries after the first (0: try once).
    pub attempts: u32,
    /// Wait between tries.
    pub backoff: Millis,
}

/// `algorithm = "lua"`: the workload's own lock scripts (`scripts = { acquire = "a.lua",
/// release = "r.lua", renew = "n.lua" }`, `renew` optional; a shared mode's `read_acquire`,
/// `read_release` and `read_renew` likewise), files relative to the workload file's folder. They are read when the workload is read, so the spec that goes to the
/// workers (and into the run folder's `workload.toml`) carries their texts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptFiles {
    pub acquire: ScriptFile,
    pub release: ScriptFile,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew: Option<ScriptFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_acquire: Option<ScriptFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_release: Option<ScriptFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_renew: Option<ScriptFile>,
}

/// One script: a path as the workload writes it, and once read, the path it was read from and
/// its text. From a string (the path) or a table `{ path, source }` (as lockaudit writes a
/// read spec back out: a script with its `source` is not read again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScriptFile {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl<'de> Deserialize<'de> for ScriptFile {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Table {
            path: String,
            source: Option<String>,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Path(String),
            Table(Table),
        }
        match Form::deserialize(d) {
            Ok(Form::Path(path)) => Ok(ScriptFile { path, source: None }),
            Ok(Form::Table(t)) => Ok(ScriptFile {
                path: t.path,
                source: t.source,
            }),
            Err(_) => Err(serde::de::Error::custom(
                "expected a path to a Lua file (\"acquire.lua\") or a table { path, source }",
            )),
        }
    }
}

impl ScriptFiles {
    /// The scripts by their field names.
    fn each_mut(&mut self) -> Vec<(&'static str, &mut ScriptFile)> {
        let optional = [
            ("renew", &mut self.renew),
            ("read_acquire", &mut self.read_acquire),
            ("read_release", &mut self.read_release),
            ("read_renew", &mut self.read_renew),
        ];
        let mut all = vec![
            ("acquire", &mut self.acquire),
            ("release", &mut self.release),
        ];
        all.extend(
            optional
                .into_iter()
                .filter_map(|(field, script)| script.as_mut().map(|s| (field, s))),
        );
        all
    }

    fn each(&self) -> Vec<(&'static str, &ScriptFile)> {
        let optional = [
            ("renew", &self.renew),
            ("read_acquire", &self.read_acquire),
            ("read_release", &self.read_release),
            ("read_renew", &self.read_renew),
        ];
        let mut all = vec![("acquire", &self.acquire), ("release", &self.release)];
        all.extend(
            optional
                .into_iter()
                .filter_map(|(field, script)| script.as_ref().map(|s| (field, s))),
        );
        all
    }
}

/// Everything a run's clients do. Field docs are the TOML keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkloadSpec {
    /// One of `locks::ALGORITHMS`, or `lua` (`locks::SCRIPTED`) with `scripts`, or
    /// `external` with `adapter`: its entry in the table, written as its name.
    pub algorithm: &'static Algorithm,
    /// `lua` only: the lock's acquire / release / renew scripts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scripts: Option<ScriptFiles>,
    /// `external` only: the adapter's argv (never through a shell). A relative element
    /// that contains a `/` and names an existing file next to the workload file is made
    /// absolute when the workload is read (adapters run in the run folder).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adapter: Option<Vec<String>>,
    /// `external` only: a free-form table, the `options` of the adapter's `init`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adapter_options: Option<toml::Table>,
    /// `external` and `fair-lock` only: how long an acquire may wait for the lock
    /// (`wait_ms`; default 0, try once). Shorter than `op_timeout`. For `fair-lock` it is
    /// also the thread wait time of its queue (as Redisson's `tryLock(waitTime, ...)`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait: Option<Millis>,
    /// `rw-lock`, `lua` (with read scripts) and `external` only: the share of acquires that
    /// are reads (`mode` `shared`), 0 to 1 (default 0: every acquire writes). A read holds
    /// the lock in shared mode and only reads the guarded counter; a write holds it
    /// exclusively and increments it.
    #[serde(skip_serializing_if = "is_zero")]
    pub read_share: f64,
    /// `lua` and `external` only: the lock promises first-come-first-served order, so every
    /// acquire is marked `fair` and the checker judges overtaking (`unfair`). `fair-lock` is
    /// fair by itself (`fair = false` is refused there); absent: false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fair: Option<bool>,
    /// Where the lock lives; the algorithm's natural topology if absent.
    pub topology: Option<Topology>,
    /// Masters for the `independent` topology.
    pub masters: usize,
    /// The hosts the lock's servers run on, `ssh://[user@]host[:port]`, reached over SSH
    /// (node i on host i mod hosts); empty: this machine. See
    /// docs/src/guide/remote-hosts.md.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<crate::topology::hosts::NodeEntry>,
    /// The private key for `nodes` (default: ssh's own keys and agent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssh_key: Option<PathBuf>,
    /// The folder on the hosts where a run keeps its servers' files (default `/tmp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_dir: Option<PathBuf>,
    /// Trust a host whose SSH key is in no known_hosts yet (default: refuse it).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub accept_new_host_keys: bool,
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
    /// After the lock's library says a held lock is lost (a `lost` notice), still write: an
    /// application that ignores the warning. By default the client leaves its critical
    /// section at the notice and makes no further write in that hold, as one that heeds
    /// its library does.
    pub write_after_lost: bool,
    /// The session locks only (`pg-advisory`, `mariadb-get-lock`): when the client's
    /// session is gone, it opens a new one and carries on without a word, as a connection
    /// pool does (its lock went with the old session). By default it notices: a `lost`
    /// notice for each lock it held, and its holder leaves the critical section.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reconnect: bool,
    /// An operation not answered within this is indeterminate (`info`).
    pub op_timeout: Millis,
    pub time_limit: Millis,
    pub seed: u64,
    /// The fault schedule: a preset's name or a `nemesis/*.toml` file (`--nemesis`).
    pub nemesis: Option<Nemesis>,
    /// Per nemesis preset (or the workload's own schedule file, by its name), the anomaly
    /// kinds `lockaudit audit` must and may find.
    pub expect: BTreeMap<Column, Expectation>,
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec {
            algorithm: locks::DEFAULT_ALGORITHM,
            scripts: None,
            adapter: None,
            adapter_options: None,
            wait: None,
            read_share: 0.0,
            fair: None,
            topology: None,
            masters: 5,
            nodes: Vec::new(),
            ssh_key: None,
            remote_dir: None,
            accept_new_host_keys: false,
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
            write_after_lost: false,
            reconnect: false,
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
    /// Reads a workload file (and its Lua scripts, relative to its folder); errors name the
    /// file, the line and the field.
    pub fn from_file(path: &Path) -> Result<WorkloadSpec, SpecError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| FileError::whole(&name, format!("cannot read: {e}")))?;
        Self::from_toml(&text, &name)
    }

    /// Parses a workload; `name` is its file's path (script paths are relative to its
    /// folder: the current directory for a bare file name).
    pub fn from_toml(text: &str, name: &str) -> Result<WorkloadSpec, SpecError> {
        // Before the parser: a misspelt field in an entry gets its "did you mean" here.
        super::expect::check_table(text, name)?;
        let mut spec: WorkloadSpec = tomlfile::parse(text, name)?;
        let base = Path::new(name).parent().unwrap_or(Path::new(""));
        spec.read_scripts(base)
            .map_err(|(message, path)| FileError {
                path: name.to_string(),
                line: line_mentioning(text, &path),
                message,
            })?;
        spec.resolve_adapter(base).map_err(|message| FileError {
            path: name.to_string(),
            line: line_starting(text, "adapter"),
            message,
        })?;
        spec.validate().map_err(|message| FileError {
            path: name.to_string(),
            line: line_of_field(text, &message),
            message,
        })?;
        spec.resolve_schedule(base);
        Ok(spec)
    }

    /// The `nemesis` it names, `none` if it names none.
    pub fn nemesis_name(&self) -> &str {
        self.nemesis
            .as_ref()
            .map_or(Preset::None.name(), Nemesis::name)
    }

    /// Makes a schedule file's relative path (`nemesis = "schedules/cut.toml"`) absolute
    /// against `base`, the workload's folder, as its scripts and adapter are: a workload and
    /// the schedule it was written for travel together, and read the same from any folder.
    fn resolve_schedule(&mut self, base: &Path) {
        let Some(Nemesis::File(path)) = self.nemesis.as_mut() else {
            return;
        };
        if Path::new(path).is_absolute() {
            return;
        }
        let base = if base.as_os_str().is_empty() {
            Path::new(".")
        } else {
            base
        };
        let full = base.join(path.as_str());
        *path = std::path::absolute(&full)
            .unwrap_or(full)
            .display()
            .to_string();
    }

    /// Makes the adapter's relative paths absolute (against `base`, the workload's folder)
    /// and checks that its program exists: a relative path with a `/` must name a file
    /// there, a bare name must be on PATH.
    fn resolve_adapter(&mut self, base: &Path) -> Result<(), String> {
        let Some(argv) = self.adapter.as_mut() else {
            return Ok(());
        };
        let Some(program) = argv.first().cloned() else {
            return Err("field `adapter`: an empty argv (want [\"program\", \"arg\", ...])".into());
        };
        // A bare file name's folder is "", which `absolute` refuses: it is the current one.
        let base = if base.as_os_str().is_empty() {
            Path::new(".")
        } else {
            base
        };
        let base = std::path::absolute(base).unwrap_or_else(|_| base.to_path_buf());
        for (i, arg) in argv.iter_mut().enumerate() {
            let path = Path::new(arg.as_str());
            if !arg.contains('/') || path.is_absolute() || arg.starts_with('-') {
                continue;
            }
            let full = base.join(path);
            if full.exists() {
                *arg = full.display().to_string();
            } else if i == 0 {
                return Err(format!(
                    "field `adapter`: the program {} does not exist",
                    full.display()
                ));
            }
        }
        if !program.contains('/') && !on_path(&program) {
            return Err(format!(
                "field `adapter`: the program {program:?} is not on PATH"
            ));
        }
        Ok(())
    }

    /// The lock clients' view of the adapter's `options` (JSON).
    pub fn adapter_options_json(&self) -> Option<serde_json::Value> {
        self.adapter_options
            .as_ref()
            .and_then(|t| serde_json::to_value(t).ok())
    }

    /// Reads every script not read yet, from its path relative to `base`. The error names
    /// the field; with it comes the path as written (to find its line).
    fn read_scripts(&mut self, base: &Path) -> Result<(), (String, String)> {
        let Some(scripts) = self.scripts.as_mut() else {
            return Ok(());
        };
        for (field, script) in scripts.each_mut() {
            if script.source.is_some() {
                continue;
            }
            let full: PathBuf = base.join(&script.path);
            let text = std::fs::read_to_string(&full).map_err(|e| {
                (
                    format!(
                        "field `scripts.{field}`: cannot read {}: {e}",
                        full.display()
                    ),
                    script.path.clone(),
                )
            })?;
            script.path = full.display().to_string();
            script.source = Some(text);
        }
        Ok(())
    }

    /// The scripts' texts for the lock clients (`LockOptions::scripts`), once read.
    pub fn lua_scripts(&self) -> Option<LuaScripts> {
        let scripts = self.scripts.as_ref()?;
        Some(LuaScripts {
            acquire: scripts.acquire.source.clone()?,
            release: scripts.release.source.clone()?,
            renew: source_of(&scripts.renew)?,
            read_acquire: source_of(&scripts.read_acquire)?,
            read_release: source_of(&scripts.read_release)?,
            read_renew: source_of(&scripts.read_renew)?,
        })
    }

    /// Checks what the types cannot say.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(why) = self
            .nemesis
            .as_ref()
            .and_then(|n| unknown_nemesis(n.name()))
        {
            return Err(format!("field `nemesis`: {why}"));
        }
        self.validate_scripts()?;
        self.validate_adapter()?;
        self.validate_read_share()?;
        self.validate_fair()?;
        self.validate_topology()?;
        self.validate_nodes()?;
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
        if self.algorithm.service == Some(Topology::Etcd)
            && self.ttl.0 < crate::topology::etcd::MIN_LEASE_MS
        {
            // etcd would raise the lease to its minimum: a grant longer than the ttl asked.
            return Err(format!(
                "field `ttl`: etcd grants no lease shorter than {} ms (1.5 election timeouts of the members lockaudit starts, in whole seconds); ask for at least that",
                crate::topology::etcd::MIN_LEASE_MS
            ));
        }
        if self.algorithm.service == Some(Topology::Zookeeper) {
            use crate::topology::zookeeper::{MAX_SESSION_MS, MIN_SESSION_MS};
            // The servers would grant their bound instead: a lease other than the ttl asked.
            if !(MIN_SESSION_MS..=MAX_SESSION_MS).contains(&self.ttl.0) {
                return Err(format!(
                    "field `ttl`: the ZooKeeper servers lockaudit starts grant sessions of {MIN_SESSION_MS}-{MAX_SESSION_MS} ms (2-20 ticks of 200 ms); ask for one in that range"
                ));
            }
        }
        Ok(())
    }

    /// `scripts` goes with `algorithm = "lua"` and the other way round; each read and not
    /// empty; `watchdog` needs a renew script.
    fn validate_scripts(&self) -> Result<(), String> {
        let lua = self.algorithm.is_scripted();
        let Some(scripts) = &self.scripts else {
            if lua {
                return Err(format!(
                    "field `scripts`: algorithm \"{}\" needs scripts = {{ acquire = \"...\", release = \"...\" }} (Lua files, relative to the workload file)",
                    locks::SCRIPTED
                ));
            }
            return Ok(());
        };
        if !lua {
            return Err(format!(
                "field `scripts`: only for algorithm = \"{}\" (this workload's algorithm is \"{}\")",
                locks::SCRIPTED,
                self.algorithm
            ));
        }
        for (field, script) in scripts.each() {
            match &script.source {
                None => {
                    return Err(format!(
                        "field `scripts.{field}`: {} was not read",
                        script.path
                    ))
                }
                Some(text) if text.trim().is_empty() => {
                    return Err(format!("field `scripts.{field}`: {} is empty", script.path))
                }
                Some(_) => {}
            }
        }
        if self.watchdog && scripts.renew.is_none() {
            return Err(
                "field `watchdog`: renewing needs a renew script (scripts.renew)".to_string(),
            );
        }
        // The shared mode comes whole: both its acquire and its release.
        match (&scripts.read_acquire, &scripts.read_release) {
            (Some(_), None) => {
                return Err("field `scripts.read_release`: scripts.read_acquire needs its release script (scripts.read_release)".into())
            }
            (None, Some(_)) => {
                return Err("field `scripts.read_acquire`: scripts.read_release needs its acquire script (scripts.read_acquire)".into())
            }
            (None, None) if scripts.read_renew.is_some() => {
                return Err("field `scripts.read_renew`: only with scripts.read_acquire and scripts.read_release".into())
            }
            _ => {}
        }
        if self.read_share > 0.0 && scripts.read_acquire.is_none() {
            return Err(format!(
                "field `scripts.read_acquire`: read_share = {} takes shared holds, which need the shared mode's own scripts (scripts.read_acquire and scripts.read_release)",
                self.read_share
            ));
        }
        if self.read_share > 0.0 && self.watchdog && scripts.read_renew.is_none() {
            return Err("field `scripts.read_renew`: with watchdog = true, shared holds are renewed too, which needs scripts.read_renew".into());
        }
        Ok(())
    }

    /// `adapter` goes with `algorithm = "external"` and the other way round;
    /// `adapter_options` and `wait` only with it; `wait` shorter than `op_timeout`.
    fn validate_adapter(&self) -> Result<(), String> {
        let external = self.algorithm.is_external();
        match &self.adapter {
            None if external => {
                return Err(format!(
                    "field `adapter`: algorithm \"{}\" needs adapter = [\"program\", \"arg\", ...] (the lock client's argv)",
                    locks::EXTERNAL
                ))
            }
            Some(_) if !external => {
                return Err(format!(
                    "field `adapter`: only for algorithm = \"{}\" (this workload's algorithm is \"{}\")",
                    locks::EXTERNAL, self.algorithm
                ))
            }
            Some(argv) if argv.first().is_none_or(|p| p.is_empty()) => {
                return Err("field `adapter`: an empty program".into())
            }
            _ => {}
        }
        if !external && self.adapter_options.is_some() {
            return Err(format!(
                "field `adapter_options`: only for algorithm = \"{}\"",
                locks::EXTERNAL
            ));
        }
        let waits = self.algorithm.waits;
        if !waits && self.wait.is_some() {
            return Err(format!(
                "field `wait`: only for algorithm = \"{}\" or {}",
                locks::EXTERNAL,
                quoted(&locks::builtins_where(|a| a.waits))
            ));
        }
        if self.reconnect && !self.algorithm.session_locks {
            return Err(format!(
                "field `reconnect`: only for the locks that belong to a session, {} (this workload's algorithm is \"{}\")",
                quoted(&locks::builtins_where(|a| a.session_locks)),
                self.algorithm
            ));
        }
        if let Some(wait) = self.wait {
            if wait.0 >= self.op_timeout.0 {
                return Err(format!(
                    "field `wait`: {} ms is not shorter than op_timeout ({} ms): every waiting acquire would time out",
                    wait.0, self.op_timeout.0
                ));
            }
        }
        Ok(())
    }

    /// `read_share` within 0..=1, and above 0 only for a lock that may have a shared mode:
    /// `rw-lock`, `lua` (its read scripts, checked with the scripts), `external` (the
    /// adapter answers `error` if it has none).
    fn validate_read_share(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.read_share) {
            return Err(format!(
                "field `read_share`: {} is not a share between 0 and 1",
                self.read_share
            ));
        }
        let may_share = self.algorithm.shared_mode != locks::Declared::No;
        if self.read_share > 0.0 && !may_share {
            return Err(format!(
                "field `read_share`: only for a lock with a shared mode ({}, or \"{}\" / \"{}\" that declare one; this workload's algorithm is \"{}\")",
                locks::shared_mode_builtins().join(", "),
                locks::SCRIPTED,
                locks::EXTERNAL,
                self.algorithm
            ));
        }
        Ok(())
    }

    /// `fair` only where it can be declared: `lua` and `external`; `fair-lock` is fair
    /// whatever the workload says, so it may only say so.
    fn validate_fair(&self) -> Result<(), String> {
        let Some(fair) = self.fair else {
            return Ok(());
        };
        match self.algorithm.fair {
            locks::Declared::ByWorkload => Ok(()),
            locks::Declared::Yes if fair => Ok(()),
            locks::Declared::Yes => Err(format!(
                "field `fair`: {} is always fair (Redisson's RFairLock queues its waiters); remove `fair = false`",
                self.algorithm
            )),
            locks::Declared::No => Err(format!(
                "field `fair`: only for algorithm = \"{}\" or \"{}\", which declare whether their lock is fair (\"{}\" is a built-in with a fixed order; {} the fair one)",
                locks::SCRIPTED,
                locks::EXTERNAL,
                self.algorithm,
                fair_builtins(),
            )),
        }
    }

    /// Whether the workload declares its lock fair (`fair = true`).
    pub fn is_fair(&self) -> bool {
        self.fair == Some(true)
    }

    /// A lock of another service than Redis runs on that service's topology, and that
    /// topology runs nothing else.
    fn validate_topology(&self) -> Result<(), String> {
        let service = self.algorithm.service;
        match self.topology {
            Some(t) if service.is_some_and(|s| s != t) => Err(format!(
                "field `topology`: {} runs on {}, not on {t:?}",
                self.algorithm,
                service.map(locks::service_name).unwrap_or_default()
            )),
            // An external adapter may wrap a library of a service that allows it (etcd: its
            // `init` names the members).
            Some(t)
                if service.is_none()
                    && t.own_locks_only()
                    && !(t.external_adapters() && self.algorithm.is_external()) =>
            {
                Err(format!(
                    "field `topology`: {} is for {}, not {}",
                    locks::service_name(t),
                    t.locks(),
                    self.algorithm
                ))
            }
            Some(Topology::Cluster) => match self.algorithm.on_cluster() {
                Err(why) => Err(format!("field `topology`: \"cluster\": {why}")),
                Ok(()) => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// Every `nodes` entry an `ssh://` URL, on a topology that can run on hosts.
    fn validate_nodes(&self) -> Result<(), String> {
        if self.nodes.is_empty() {
            if self.ssh_key.is_some() || self.remote_dir.is_some() || self.accept_new_host_keys {
                return Err(
                    "field `ssh_key` / `remote_dir` / `accept_new_host_keys`: only with `nodes`"
                        .into(),
                );
            }
            return Ok(());
        }
        super::inventory::check_nodes(&self.nodes, self.ssh_key.as_deref())
            .map_err(|e| e.to_string())
    }

    /// The topology the algorithm runs on unless the workload says otherwise.
    pub fn topology(&self) -> Topology {
        self.topology.unwrap_or(self.algorithm.topology)
    }
}

/// `"a" or "b"`: names as a message offers them.
fn quoted(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    quoted.join(" or ")
}

/// `fair-lock is`: the built-ins that are always fair, as a message names them.
fn fair_builtins() -> String {
    let names = locks::builtins_where(|a| a.fair == locks::Declared::Yes);
    match names.len() {
        1 => format!("{} is", names[0]),
        _ => format!("{} are", names.join(", ")),
    }
}

/// A script's text once read: `Some(None)` for a script not given, None for one not read.
fn source_of(script: &Option<ScriptFile>) -> Option<Option<String>> {
    match script {
        Some(s) => Some(Some(s.source.clone()?)),
        None => Some(None),
    }
}

fn is_zero(share: &f64) -> bool {
    *share == 0.0
}

/// Whether `program` is an executable file in one of PATH's folders.
fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(program))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// The 1-based line of `text` that starts with `field` (0 if none).
fn line_starting(text: &str, field: &str) -> usize {
    text.lines()
        .position(|line| {
            line.trim_start()
                .strip_prefix(field)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map_or(0, |n| n + 1)
}

/// The 1-based line of the top-level key an error names (`field `nemesis`: ...`), 0 if it
/// names none or the key is not written as `key = ...`.
fn line_of_field(text: &str, message: &str) -> usize {
    message
        .strip_prefix("field `")
        .and_then(|rest| rest.split(['`', '.']).next())
        .map_or(0, |field| line_starting(text, field))
}

/// The 1-based line of `text` that mentions `"needle"` (quoted), 0 if none.
fn line_mentioning(text: &str, needle: &str) -> usize {
    let quoted = [format!("\"{needle}\""), format!("'{needle}'")];
    text.lines()
        .position(|line| quoted.iter().any(|q| line.contains(q.as_str())))
        .map_or(0, |n| n + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_algorithm_or_nemesis_is_named_with_its_line_and_the_nearest_name() {
        let err = WorkloadSpec::from_toml("clients = 4\nalgorithm = \"set-nx-xp\"\n", "w.toml")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "w.toml:2: field `algorithm`: unknown algorithm \"set-nx-xp\" (did you mean \"set-nx-px\"?)"
        );
        let err = WorkloadSpec::from_toml(
            "algorithm = \"set-nx-px\"\nnemesis = \"pause-client\"\n",
            "w.toml",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "w.toml:2: field `nemesis`: unknown nemesis preset \"pause-client\" (did you mean \"pause-clients\"?), and no schedule file has that name"
        );
        // A schedule file is named by its path: not taken for a preset.
        let spec = WorkloadSpec::from_toml(
            "algorithm = \"set-nx-px\"\nnemesis = \"nemesis/mine.toml\"\n",
            "w.toml",
        )
        .unwrap();
        assert!(
            spec.nemesis.as_ref().is_some_and(|n| n.preset().is_none()
                && Path::new(n.name()).is_absolute()
                && n.name().ends_with("nemesis/mine.toml")),
            "{:?}",
            spec.nemesis
        );
        assert_eq!(
            spec.nemesis.as_ref().map(Nemesis::column),
            Some(Column::Schedule("mine".into()))
        );
    }

    #[test]
    fn a_schedule_file_is_found_beside_the_workload_wherever_it_is_read_from() {
        let spec = WorkloadSpec::from_toml(
            "algorithm = \"set-nx-px\"\nnemesis = \"schedules/cut.toml\"\n",
            "examples/bugs/w.toml",
        )
        .unwrap();
        let expected = std::path::absolute("examples/bugs/schedules/cut.toml").unwrap();
        assert_eq!(spec.nemesis.as_ref().map(Nemesis::name), expected.to_str());
        // A preset stays a preset.
        let spec = WorkloadSpec::from_toml(
            "algorithm = \"set-nx-px\"\nnemesis = \"pause-clients\"\n",
            "examples/bugs/w.toml",
        )
        .unwrap();
        assert_eq!(
            spec.nemesis,
            Some(Nemesis::Preset(crate::presets::Preset::PauseClients))
        );
        assert_eq!(
            spec.nemesis.as_ref().map(Nemesis::column),
            Some(Column::Preset(Preset::PauseClients))
        );
    }

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
    fn nodes_are_ssh_urls_on_a_topology_that_runs_on_hosts() {
        let ok = WorkloadSpec::from_toml(
            "algorithm = \"redlock\"\nnodes = [\"ssh://root@10.77.0.2\", \"ssh://db:2222\"]\n\
             ssh_key = \"/etc/hostname\"\n",
            "w.toml",
        )
        .unwrap();
        assert_eq!(ok.nodes.len(), 2);
        ok.validate().unwrap();
        let mut bad = ok.clone();
        bad.nodes = vec!["root@10.77.0.2".into()];
        let err = bad.validate().unwrap_err();
        assert!(
            err.contains("field `nodes`") && err.contains("root@10.77.0.2"),
            "{err}"
        );
        let mut bad = ok.clone();
        bad.ssh_key = Some("/nonexistent/key".into());
        let err = bad.validate().unwrap_err();
        assert!(
            err.contains("field `ssh_key`") && err.contains("/nonexistent/key"),
            "{err}"
        );
        let mut bad = ok;
        bad.nodes.clear();
        assert!(bad.validate().unwrap_err().contains("only with `nodes`"));
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

#[cfg(test)]
mod script_tests {
    use super::*;

    /// A folder with a workload naming scripts in a subfolder.
    fn lua_workload(extra: &str, renew: bool) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("lock")).unwrap();
        std::fs::write(dir.path().join("lock/acquire.lua"), "return 1\n").unwrap();
        std::fs::write(dir.path().join("lock/release.lua"), "return 1\n").unwrap();
        let mut text = String::from(
            "algorithm = \"lua\"\nscripts = { acquire = \"lock/acquire.lua\", release = \"lock/release.lua\"",
        );
        if renew {
            std::fs::write(dir.path().join("lock/renew.lua"), "return 0\n").unwrap();
            text.push_str(", renew = \"lock/renew.lua\"");
        }
        text.push_str(" }\n");
        text.push_str(extra);
        std::fs::write(dir.path().join("w.toml"), text).unwrap();
        dir
    }

    #[test]
    fn a_lua_workload_reads_its_scripts_relative_to_its_folder() {
        let dir = lua_workload("watchdog = true\n", true);
        let spec = WorkloadSpec::from_file(&dir.path().join("w.toml")).unwrap();
        let scripts = spec.lua_scripts().expect("read");
        assert_eq!(scripts.acquire, "return 1\n");
        assert_eq!(scripts.renew.as_deref(), Some("return 0\n"));
        assert_eq!(spec.topology(), Topology::Single);

        // To a worker as JSON: the texts go along.
        let json = serde_json::to_string(&spec).unwrap();
        let back: WorkloadSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(back.lua_scripts(), Some(scripts.clone()));

        // Into the run folder as TOML, read again from elsewhere once the files are gone.
        let toml_text = toml::to_string_pretty(&spec).unwrap();
        drop(dir);
        let elsewhere = tempfile::tempdir().unwrap();
        let copy = elsewhere.path().join("workload.toml");
        std::fs::write(&copy, &toml_text).unwrap();
        let again = WorkloadSpec::from_file(&copy).unwrap();
        assert_eq!(again.lua_scripts(), Some(scripts), "{toml_text}");
        assert_eq!(again, spec);
    }

    #[test]
    fn a_missing_script_names_the_file_the_line_and_the_field() {
        let dir = lua_workload("", false);
        std::fs::remove_file(dir.path().join("lock/release.lua")).unwrap();
        let path = dir.path().join("w.toml");
        let error = WorkloadSpec::from_file(&path).unwrap_err();
        let text = error.to_string();
        assert_eq!(error.path, path.display().to_string());
        assert_eq!(error.line, 2, "{text}");
        assert!(text.contains("field `scripts.release`"), "{text}");
        assert!(text.contains("lock/release.lua"), "{text}");
        assert!(!text.contains("scripts.acquire"), "{text}");
    }

    #[test]
    fn lua_and_scripts_go_together() {
        let error = WorkloadSpec::from_toml("algorithm = \"lua\"\n", "w.toml").unwrap_err();
        assert!(error.to_string().contains("field `scripts`"), "{error}");

        let dir = lua_workload("", false);
        let path = dir.path().join("w.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.display().to_string();
        let other = text.replace("algorithm = \"lua\"", "algorithm = \"set-nx-px\"");
        let error = WorkloadSpec::from_toml(&other, &name).unwrap_err();
        assert!(
            error.to_string().contains("field `scripts`: only for"),
            "{error}"
        );

        // A watchdog needs something to renew with.
        let error =
            WorkloadSpec::from_toml(&format!("{text}watchdog = true\n"), &name).unwrap_err();
        assert!(error.to_string().contains("field `watchdog`"), "{error}");

        std::fs::write(dir.path().join("lock/acquire.lua"), "  \n").unwrap();
        let error = WorkloadSpec::from_toml(&text, &name).unwrap_err();
        assert!(
            error.to_string().contains("field `scripts.acquire`"),
            "{error}"
        );
        assert!(error.to_string().contains("is empty"), "{error}");

        let error = WorkloadSpec::from_toml(
            "algorithm = \"lua\"\nscripts = { acquire = \"a.lua\", release = 3 }\n",
            "w.toml",
        )
        .unwrap_err();
        assert!(error.to_string().contains("field `scripts`"), "{error}");
        assert!(
            error.to_string().contains("a path to a Lua file"),
            "{error}"
        );
        assert_eq!(error.line, 2, "{error}");
    }

    #[test]
    fn the_known_algorithms_include_lua() {
        let error = WorkloadSpec::from_toml("algorithm = \"chubby\"\n", "w.toml").unwrap_err();
        assert!(error.to_string().contains(", lua, external)"), "{error}");
    }
}

#[cfg(test)]
mod mode_tests {
    use super::*;

    #[test]
    fn database_locks_run_on_postgres_and_only_they_do() {
        let spec = WorkloadSpec::from_toml("algorithm = \"pg-row\"\n", "w.toml").unwrap();
        assert_eq!(spec.topology(), Topology::Postgres);
        let error =
            WorkloadSpec::from_toml("algorithm = \"pg-row\"\ntopology = \"single\"\n", "w.toml")
                .unwrap_err();
        assert!(error.to_string().contains("field `topology`"), "{error}");
        let error = WorkloadSpec::from_toml(
            "algorithm = \"set-nx-px\"\ntopology = \"postgres\"\n",
            "w.toml",
        )
        .unwrap_err();
        assert!(error.to_string().contains("database locks"), "{error}");
    }

    #[test]
    fn etcd_runs_the_etcd_locks_and_an_external_adapter_not_the_redis_locks() {
        let spec = WorkloadSpec::from_toml(
            "algorithm = \"external\"\nadapter = [\"python3\", \"a.py\"]\ntopology = \"etcd\"\n",
            "w.toml",
        )
        .unwrap();
        assert_eq!(spec.topology(), Topology::Etcd);
        for algorithm in ["set-nx-px", "redlock", "reentrant"] {
            let text = format!("algorithm = \"{algorithm}\"\ntopology = \"etcd\"\n");
            let error = WorkloadSpec::from_toml(&text, "w.toml").unwrap_err();
            assert!(error.to_string().contains("field `topology`"), "{error}");
            assert!(error.to_string().contains("etcd locks"), "{error}");
        }
    }

    #[test]
    fn a_cluster_takes_single_key_locks_only() {
        let spec = WorkloadSpec::from_toml(
            "algorithm = \"reentrant\"\ntopology = \"cluster\"\n",
            "w.toml",
        )
        .unwrap();
        assert_eq!(spec.topology(), Topology::Cluster);
        for (algorithm, why) in [
            ("redlock", "not RedLock"),
            ("watch-multi", "CROSSSLOT"),
            ("pg-row", "PostgreSQL"),
            ("etcd-lock", "etcd"),
        ] {
            let text = format!("algorithm = \"{algorithm}\"\ntopology = \"cluster\"\n");
            let error = WorkloadSpec::from_toml(&text, "w.toml").unwrap_err();
            assert!(error.to_string().contains("field `topology`"), "{error}");
            assert!(error.to_string().contains(why), "{error}");
        }
    }

    #[test]
    fn an_etcd_lock_runs_on_etcd_and_asks_for_a_lease_etcd_grants() {
        let spec =
            WorkloadSpec::from_toml("algorithm = \"etcd-txn\"\nttl = \"2s\"\n", "w.toml").unwrap();
        assert_eq!(spec.topology(), Topology::Etcd);
        let error = WorkloadSpec::from_toml("algorithm = \"etcd-lock\"\nttl = \"1s\"\n", "w.toml")
            .unwrap_err();
        assert!(error.to_string().contains("field `ttl`"), "{error}");
        assert!(
            WorkloadSpec::from_toml("algorithm = \"etcd-lock\"\nttl = \"2s\"\n", "w.toml").is_ok()
        );
        let error =
            WorkloadSpec::from_toml("algorithm = \"set-nx-px\"\ntopology = \"etcd\"\n", "w.toml")
                .unwrap_err();
        assert!(error.to_string().contains("etcd locks"), "{error}");
    }

    #[test]
    fn read_share_is_a_share_and_only_for_a_lock_with_a_shared_mode() {
        let spec = WorkloadSpec::from_toml("algorithm = \"rw-lock\"\nread_share = 0.7\n", "w.toml")
            .unwrap();
        assert_eq!(spec.read_share, 0.7);
        let toml_text = toml::to_string_pretty(&spec).unwrap();
        assert_eq!(WorkloadSpec::from_toml(&toml_text, "w.toml").unwrap(), spec);
        for bad in ["1.5", "-0.1", "nan"] {
            let text = format!("algorithm = \"rw-lock\"\nread_share = {bad}\n");
            let error = WorkloadSpec::from_toml(&text, "w.toml").unwrap_err();
            assert!(error.to_string().contains("field `read_share`"), "{error}");
        }
        let error = WorkloadSpec::from_toml("read_share = 0.5\n", "w.toml").unwrap_err();
        assert!(error.to_string().contains("w.toml"), "{error}");
        assert!(
            error
                .to_string()
                .contains("only for a lock with a shared mode (rw-lock, "),
            "{error}"
        );
        assert!(
            error.to_string().contains("\"lua\" / \"external\""),
            "{error}"
        );
        // No `read_share` in a workload that never reads in shared mode.
        let plain = toml::to_string_pretty(&WorkloadSpec::default()).unwrap();
        assert!(!plain.contains("read_share"), "{plain}");
    }

    #[test]
    fn a_fair_lock_may_wait() {
        let spec =
            WorkloadSpec::from_toml("algorithm = \"fair-lock\"\nwait = \"500ms\"\n", "w.toml")
                .unwrap();
        assert_eq!(spec.wait, Some(Millis(500)));
        let error =
            WorkloadSpec::from_toml("algorithm = \"reentrant\"\nwait = \"5ms\"\n", "w.toml")
                .unwrap_err();
        assert!(error.to_string().contains("field `wait`"), "{error}");
    }
}

#[cfg(test)]
mod shared_and_fair_tests {
    use super::*;

    /// A Lua workload in a temporary folder with acquire and release scripts, the scripts
    /// named in `more` (`renew`, `read_acquire`, ...; all `return 1`) and `extra` lines.
    fn lua(more: &[&str], extra: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let mut scripts = String::from("acquire = \"a.lua\", release = \"a.lua\"");
        for field in more {
            scripts.push_str(&format!(", {field} = \"a.lua\""));
        }
        std::fs::write(dir.path().join("a.lua"), "return 1\n").unwrap();
        let path = dir.path().join("w.toml");
        let text = format!("algorithm = \"lua\"\nscripts = {{ {scripts} }}\n{extra}");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    fn refusal(more: &[&str], extra: &str) -> String {
        let (_dir, path) = lua(more, extra);
        let error = WorkloadSpec::from_file(&path).unwrap_err().to_string();
        assert!(error.contains(&path.display().to_string()), "{error}");
        error
    }

    #[test]
    fn a_lua_workload_shares_with_its_read_scripts() {
        let (_dir, path) = lua(
            &["renew", "read_acquire", "read_release", "read_renew"],
            "read_share = 0.3\nwatchdog = true\n",
        );
        let spec = WorkloadSpec::from_file(&path).unwrap();
        let scripts = spec.lua_scripts().unwrap();
        assert_eq!(scripts.read_acquire.as_deref(), Some("return 1\n"));
        assert_eq!(scripts.read_renew.as_deref(), Some("return 1\n"));
        // Into the run folder as TOML and back, texts and all.
        let toml_text = toml::to_string_pretty(&spec).unwrap();
        assert_eq!(
            WorkloadSpec::from_toml(&toml_text, "elsewhere/w.toml").unwrap(),
            spec
        );
    }

    #[test]
    fn read_share_on_lua_needs_the_read_scripts() {
        let error = refusal(&[], "read_share = 0.3\n");
        assert!(error.contains("field `scripts.read_acquire`"), "{error}");
        assert!(error.contains("read_share = 0.3"), "{error}");
        let error = refusal(&["read_acquire"], "");
        assert!(error.contains("field `scripts.read_release`"), "{error}");
        let error = refusal(&["read_release"], "");
        assert!(error.contains("field `scripts.read_acquire`"), "{error}");
        let error = refusal(&["read_renew"], "");
        assert!(error.contains("field `scripts.read_renew`"), "{error}");
    }

    #[test]
    fn a_lock_that_is_not_a_session_s_refuses_reconnect_naming_the_line() {
        let spec =
            WorkloadSpec::from_toml("algorithm = \"pg-advisory\"\nreconnect = true\n", "w.toml")
                .unwrap();
        assert!(spec.reconnect);
        assert!(!WorkloadSpec::default().reconnect);
        let e = WorkloadSpec::from_toml(
            "algorithm = \"pg-row\"\nkeys = 2\nreconnect = true\n",
            "w.toml",
        )
        .unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.to_string().contains("field `reconnect`"), "{e}");
        assert!(e.to_string().contains("pg-row"), "{e}");
    }

    #[test]
    fn a_watchdog_over_shared_holds_needs_read_renew() {
        let error = refusal(
            &["renew", "read_acquire", "read_release"],
            "read_share = 0.3\nwatchdog = true\n",
        );
        assert!(error.contains("field `scripts.read_renew`"), "{error}");
        assert!(error.contains("watchdog"), "{error}");
    }

    #[test]
    fn a_missing_read_script_names_its_field_and_file() {
        let (dir, path) = lua(&["read_acquire", "read_release"], "read_share = 0.3\n");
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("read_acquire = \"a.lua\"", "read_acquire = \"gone.lua\"");
        std::fs::write(&path, text).unwrap();
        let error = WorkloadSpec::from_file(&path).unwrap_err();
        assert_eq!(error.line, 2, "{error}");
        let error = error.to_string();
        assert!(error.contains("field `scripts.read_acquire`"), "{error}");
        assert!(error.contains("gone.lua"), "{error}");
        // And an empty one.
        std::fs::write(dir.path().join("gone.lua"), " \n").unwrap();
        let error = WorkloadSpec::from_file(&path).unwrap_err().to_string();
        assert!(error.contains("field `scripts.read_acquire`"), "{error}");
        assert!(error.contains("is empty"), "{error}");
    }

    #[test]
    fn an_external_workload_may_share_and_be_fair() {
        let text =
            "algorithm = \"external\"\nadapter = [\"true\"]\nread_share = 0.4\nfair = true\n";
        let spec = WorkloadSpec::from_toml(text, "w.toml").unwrap();
        assert_eq!(spec.read_share, 0.4);
        assert!(spec.is_fair());
        let toml_text = toml::to_string_pretty(&spec).unwrap();
        assert_eq!(WorkloadSpec::from_toml(&toml_text, "w.toml").unwrap(), spec);
        // Not said, not fair, and nothing written back.
        let plain =
            WorkloadSpec::from_toml("algorithm = \"external\"\nadapter = [\"true\"]\n", "w.toml")
                .unwrap();
        assert!(!plain.is_fair());
        assert!(!toml::to_string_pretty(&plain).unwrap().contains("fair"));
    }

    #[test]
    fn fair_is_only_for_lua_and_external_and_fair_lock_cannot_be_unfair() {
        let (_dir, path) = lua(&[], "fair = true\n");
        assert!(WorkloadSpec::from_file(&path).unwrap().is_fair());
        let error = WorkloadSpec::from_toml("algorithm = \"set-nx-px\"\nfair = true\n", "w.toml")
            .unwrap_err()
            .to_string();
        assert!(error.contains("w.toml"), "{error}");
        assert!(
            error.contains("field `fair`: only for algorithm = \"lua\" or \"external\""),
            "{error}"
        );
        let error = WorkloadSpec::from_toml("algorithm = \"fair-lock\"\nfair = false\n", "w.toml")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("field `fair`: fair-lock is always fair"),
            "{error}"
        );
        let spec =
            WorkloadSpec::from_toml("algorithm = \"fair-lock\"\nfair = true\n", "w.toml").unwrap();
        assert!(spec.is_fair());
    }

    #[test]
    fn reconnect_is_only_for_the_session_locks_and_mariadb_get_lock_runs_on_mariadb() {
        let spec = WorkloadSpec::from_toml(
            "algorithm = \"mariadb-get-lock\"\nreconnect = true\nwait = \"200ms\"\n",
            "w.toml",
        )
        .unwrap();
        assert!(spec.reconnect);
        assert_eq!(spec.topology(), Topology::Mariadb);
        let error =
            WorkloadSpec::from_toml("algorithm = \"set-nx-px\"\nreconnect = true\n", "w.toml")
                .unwrap_err()
                .to_string();
        assert!(
            error.contains("field `reconnect`: only for the locks that belong to a session, \"pg-advisory\" or \"mariadb-get-lock\" (this workload's algorithm is \"set-nx-px\")"),
            "{error}"
        );
        // Off, it is not written back.
        let plain =
            WorkloadSpec::from_toml("algorithm = \"mariadb-get-lock\"\n", "w.toml").unwrap();
        assert!(!toml::to_string_pretty(&plain)
            .unwrap()
            .contains("reconnect"));
    }
}

#[cfg(test)]
mod adapter_tests {
    use super::*;

    #[test]
    fn an_external_workload_resolves_its_adapter_next_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.py"), "print()\n").unwrap();
        let text = "algorithm = \"external\"\nadapter = [\"python3\", \"./a.py\", \"--flag\"]\nadapter_options = { x = 1, name = \"n\" }\nwait = \"100ms\"\n";
        std::fs::write(dir.path().join("w.toml"), text).unwrap();
        let spec = WorkloadSpec::from_file(&dir.path().join("w.toml")).unwrap();
        let argv = spec.adapter.clone().unwrap();
        assert_eq!(argv[0], "python3");
        assert!(Path::new(&argv[1]).is_absolute(), "{argv:?}");
        assert!(argv[1].ends_with("a.py"), "{argv:?}");
        assert_eq!(argv[2], "--flag");
        assert_eq!(
            spec.adapter_options_json(),
            Some(serde_json::json!({ "x": 1, "name": "n" }))
        );
        assert_eq!(spec.wait, Some(Millis(100)));
        // To a worker as JSON and into the run folder as TOML.
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(serde_json::from_str::<WorkloadSpec>(&json).unwrap(), spec);
        let toml_text = toml::to_string_pretty(&spec).unwrap();
        assert_eq!(
            WorkloadSpec::from_toml(&toml_text, "elsewhere/w.toml").unwrap(),
            spec
        );
    }

    #[test]
    fn external_and_adapter_go_together() {
        let error = WorkloadSpec::from_toml("algorithm = \"external\"\n", "w.toml").unwrap_err();
        assert!(error.to_string().contains("field `adapter`"), "{error}");
        let error = WorkloadSpec::from_toml("adapter = [\"true\"]\n", "w.toml").unwrap_err();
        assert!(error.to_string().contains("only for"), "{error}");
        let error = WorkloadSpec::from_toml("wait = \"1ms\"\n", "w.toml").unwrap_err();
        assert!(error.to_string().contains("field `wait`"), "{error}");
        let error = WorkloadSpec::from_toml(
            "algorithm = \"external\"\nadapter = [\"no-such-program-xyz\"]\n",
            "w.toml",
        )
        .unwrap_err();
        assert!(error.to_string().contains("not on PATH"), "{error}");
        assert_eq!(error.line, 2, "{error}");
        let error = WorkloadSpec::from_toml(
            "algorithm = \"external\"\nadapter = [\"./missing.py\"]\n",
            "w.toml",
        )
        .unwrap_err();
        assert!(error.to_string().contains("does not exist"), "{error}");
        let error = WorkloadSpec::from_toml("algorithm = \"external\"\nadapter = []\n", "w.toml")
            .unwrap_err();
        assert!(error.to_string().contains("empty argv"), "{error}");
        let error = WorkloadSpec::from_toml(
            "algorithm = \"external\"\nadapter = [\"true\"]\nwait = \"5s\"\nop_timeout = \"1s\"\n",
            "w.toml",
        )
        .unwrap_err();
        assert!(error.to_string().contains("not shorter"), "{error}");
    }
}
