//! The one table of lock algorithms: each algorithm is one [`Algorithm`] entry of
//! [`TABLE`], which says everything the rest of lockaudit knows about it by name (the
//! service it runs on, its crash points, its client's constructor, what kind of lock it
//! is, its built-in workload). Adding an algorithm is its own module (the `LockClient`,
//! its `STEPS`), a `mod` line in `locks/mod.rs`, its workload in `workloads/`, and one entry
//! here; `ALGORITHMS`, the CLI's help and completions, the audit, the workload checks and
//! the nemesis all read this table.
//!
//! The two pseudo-algorithms, `lua` (`SCRIPTED`) and `external` (`EXTERNAL`), are entries
//! of [`PSEUDO`]: known to `connect` and described the same way, but not built-ins (they
//! have no workload of their own to audit, so they are not in `ALGORITHMS`).

use crate::topology::{Endpoints, Topology};

use super::conn::Conn;
use super::{
    etcd_lease, etcd_lock, etcd_txn, external, fair_lock, lua_getset, lua_script, mariadb_get_lock,
    pg, pg_advisory, pg_lock_column, pg_row, pg_version, primary, redlock, redlock_masters,
    reentrant, rw_lock, set_nx_px, setnx_del, setnx_expire, setnx_getset, watch_multi, zk_lock,
    LockClient, LockError, LockOptions,
};

/// Everything lockaudit knows about one algorithm by its name.
#[derive(Debug, Clone, Copy)]
pub struct Algorithm {
    /// The name `connect`, the CLI and workloads use.
    pub name: &'static str,
    /// The topology of the lock service it needs when that is not Redis (PostgreSQL,
    /// etcd); None for a Redis algorithm, which runs on any Redis topology.
    pub service: Option<Topology>,
    /// The topology it runs on when the workload names none.
    pub topology: Topology,
    /// Every named step its client announces through `LockOptions::on_step`: the crash
    /// points the nemesis picks from, each `<name>:<step>`.
    pub steps: &'static [&'static str],
    /// How `connect` builds its client.
    pub(crate) connect: Connect,
    /// The guarded counter lives with the lock (pg-row: the locked row itself, read and
    /// updated inside the lock's transaction): the client loop and the run's final reads
    /// use its client's `read_counter` and `write_counter` instead of the storage server
    /// (unless fenced: `counter_with_lock`).
    pub keeps_counter: bool,
    /// It takes no lock at all (optimistic concurrency: pg-version, watch-multi): the client
    /// loop only reads the counter and writes it conditionally (`read_counter`,
    /// `write_counter`), and retries a write refused for a conflict; `acquire` and `release`
    /// are never called.
    pub optimistic: bool,
    /// Whether it has a shared (read) mode, which a workload's `read_share` needs.
    pub shared_mode: Declared,
    /// Whether it promises first-come-first-served order (a workload's `fair`).
    pub fair: Declared,
    /// Its acquire waits for the lock for a given time (a workload's `wait`).
    pub waits: bool,
    /// Its lock is reentrant (the adapter's `init_ok` says so).
    pub reentrant: bool,
    /// Fenced, it takes its tokens from its own service (etcd's create revisions) rather
    /// than from the storage server's `INCR`.
    pub own_tokens: bool,
    /// Whether its clients read the client's wall clock (what the clock-skew fault moves).
    pub client_clock: ClientClock,
    /// Why it cannot run on a Redis Cluster, for a Redis algorithm that cannot (the
    /// algorithms of another service cannot either: they run on their own).
    pub not_on_cluster: Option<&'static str>,
    /// On a Redis Cluster, its client learns the nodes' real addresses from the slot map
    /// and goes around lockaudit's per-worker proxies (no partition or latency reaches it).
    pub own_cluster_client: bool,
    /// Its built-in workload, `workloads/<name>.toml` compiled in (None: a pseudo-algorithm,
    /// which needs a workload file of its own).
    pub workload: Option<&'static str>,
    /// Whether its locks belong to the client's database session and end with it, so that
    /// a workload chooses (`reconnect`) between a client that notices a lost session and
    /// one that opens a new one silently, as a connection pool does.
    pub session_locks: bool,
}

/// One entry is one algorithm: two are equal when their names are.
impl PartialEq for Algorithm {
    fn eq(&self, other: &Algorithm) -> bool {
        self.name == other.name
    }
}

impl Eq for Algorithm {}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Written as its name, as a workload file names it.
impl serde::Serialize for Algorithm {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name)
    }
}

/// Read from its name: the entry itself, or the unknown name refused with the nearest one.
impl<'de> serde::Deserialize<'de> for &'static Algorithm {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        named(&name).map_err(serde::de::Error::custom)
    }
}

/// The entry of `name` (a built-in, `SCRIPTED` or `EXTERNAL`), or why there is none: the
/// nearest name when one is near, else the list. `--algorithm` and a workload's
/// `algorithm` share it.
pub fn named(name: &str) -> Result<&'static Algorithm, String> {
    algorithm(name).ok_or_else(|| {
        let known: Vec<&str> = known().map(|a| a.name).collect();
        crate::suggest::unknown("algorithm", name, &known)
    })
}

impl Algorithm {
    /// The workload's own Lua scripts (`SCRIPTED`).
    pub fn is_scripted(&self) -> bool {
        self.name == SCRIPTED
    }

    /// An external program, the workload's adapter (`EXTERNAL`).
    pub fn is_external(&self) -> bool {
        self.name == EXTERNAL
    }

    /// Where the run's counters are, given `--fenced`: with the lock (true) or on the
    /// storage server. Fenced, a lock writes the fenced counter on storage, so pg-row's row
    /// stays unused; an optimistic algorithm has no token to fence with and keeps its
    /// counter.
    pub fn counter_with_lock(&self, fenced: bool) -> bool {
        self.keeps_counter && (!fenced || self.optimistic)
    }

    /// Whether `lock`, one of its clients, takes shared acquires: as the entry declares,
    /// or, where the entry leaves it to the workload or the adapter, as the client says.
    pub fn takes_shared(&self, lock: &dyn LockClient) -> bool {
        self.shared_mode.holds(|| lock.shared())
    }

    /// Whether `lock`, one of its clients, promises first-come-first-served order, as
    /// `takes_shared` decides a shared mode.
    pub fn is_fair(&self, lock: &dyn LockClient) -> bool {
        self.fair.holds(|| lock.fair())
    }

    /// Whether it can run on a Redis Cluster, and why not.
    pub fn on_cluster(&self) -> Result<(), NotOnCluster> {
        if let Some(why) = self.not_on_cluster {
            return Err(NotOnCluster::Declared(why));
        }
        match self.service {
            Some(service) => Err(NotOnCluster::OtherService {
                algorithm: self.name,
                service,
            }),
            None => Ok(()),
        }
    }

    /// Why the clock-skew fault cannot act on its clients, or None when they read the
    /// client's wall clock (`ClientClock::Reads`).
    pub fn ignores_client_clock(&self) -> Option<String> {
        match self.client_clock {
            ClientClock::Reads => None,
            ClientClock::NotPassed(why) => Some(why.to_string()),
            ClientClock::Never => Some(format!(
                "{} never reads the client's wall clock (only {} do)",
                self.name,
                and_list(&builtins_where(|a| a.client_clock == ClientClock::Reads))
            )),
        }
    }
}

/// Whether an algorithm has a property a workload may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declared {
    /// Never.
    No,
    /// Always, whatever the workload says.
    Yes,
    /// As the workload declares it (`lua`, `external`).
    ByWorkload,
}

/// Whether an algorithm's clients read the client's wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientClock {
    /// They do (`LockOptions::client_now_ms`: expiry timestamps, a queue's timeouts; an
    /// external adapter, started under a faked wall clock).
    Reads,
    /// They time leases on the servers or with a monotonic clock.
    Never,
    /// They are passed none, for this reason.
    NotPassed(&'static str),
}

/// A client as `connect` returns it.
type Client = Box<dyn LockClient>;

/// How `connect` builds an algorithm's client: what it connects to, then the algorithm's
/// own constructor on that connection. [`Connect::client`], beside this table, is the one
/// match over them.
#[derive(Clone, Copy)]
pub(crate) enum Connect {
    /// One connection to the Redis primary (`primary`).
    Redis(fn(Conn, LockOptions) -> Client),
    /// RedLock's masters: every node of an independent topology, else the one primary.
    Masters(fn(Vec<Conn>, LockOptions) -> Result<Client, LockError>),
    /// A session on the PostgreSQL server, the schema made sure of (and the endpoints, to
    /// open the next one).
    Postgres(fn(pg::Session, LockOptions, &Endpoints) -> Client),
    /// A client of every etcd member.
    Etcd(fn(etcd_client::Client, LockOptions) -> Client),
    /// A session on the ZooKeeper ensemble (and the endpoints, to open the next one).
    Zookeeper(fn(zookeeper_client::Client, LockOptions, &Endpoints) -> Client),
    /// A session on the MariaDB server (and how to open the next one).
    Mariadb(fn(mariadb_get_lock::Session, LockOptions) -> Client),
    /// `lua`: the workload's scripts, loaded on the primary.
    Scripted,
    /// `external`: the workload's adapter, started and initialised.
    External,
}

impl std::fmt::Debug for Connect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Connect::Redis(_) => "Redis",
            Connect::Masters(_) => "Masters",
            Connect::Postgres(_) => "Postgres",
            Connect::Etcd(_) => "Etcd",
            Connect::Zookeeper(_) => "Zookeeper",
            Connect::Mariadb(_) => "Mariadb",
            Connect::Scripted => "Scripted",
            Connect::External => "External",
        })
    }
}

impl Connect {
    /// A client on `endpoints` (without fencing: `connect` adds that).
    pub(crate) async fn client(
        self,
        endpoints: &Endpoints,
        options: &LockOptions,
    ) -> Result<Box<dyn LockClient>, LockError> {
        let client: Box<dyn LockClient> = match self {
            Connect::Redis(new) => new(primary(endpoints, options).await?, options.clone()),
            Connect::Masters(new) => {
                new(redlock_masters(endpoints, options).await?, options.clone())?
            }
            Connect::Postgres(new) => new(
                pg::session(endpoints, options).await?,
                options.clone(),
                endpoints,
            ),
            Connect::Etcd(new) => new(
                etcd_lease::connect(endpoints, options).await?,
                options.clone(),
            ),
            Connect::Zookeeper(new) => new(
                zk_lock::connect(endpoints, options).await?,
                options.clone(),
                endpoints,
            ),
            Connect::Mariadb(new) => new(
                mariadb_get_lock::session(endpoints, options).await?,
                options.clone(),
            ),
            Connect::Scripted => {
                let scripts = options.scripts.clone().ok_or_else(|| {
                    LockError::Scripts(
                        "algorithm \"lua\" without scripts (LockOptions::scripts)".into(),
                    )
                })?;
                let conn = primary(endpoints, options).await?;
                Box::new(lua_script::LuaScript::connect(conn, options.clone(), &scripts).await?)
            }
            Connect::External => {
                Box::new(external::External::connect(endpoints, options.clone()).await?)
            }
        };
        Ok(client)
    }
}

/// A Redis algorithm's entry with every property at its most common value: each entry
/// below says only what differs.
const REDIS: Algorithm = Algorithm {
    name: "",
    service: None,
    topology: Topology::Single,
    steps: &[],
    connect: Connect::Scripted,
    keeps_counter: false,
    optimistic: false,
    shared_mode: Declared::No,
    fair: Declared::No,
    waits: false,
    reentrant: false,
    own_tokens: false,
    client_clock: ClientClock::Never,
    not_on_cluster: None,
    own_cluster_client: false,
    session_locks: false,
    workload: None,
};

/// A PostgreSQL algorithm's entry, likewise.
const POSTGRES: Algorithm = Algorithm {
    service: Some(Topology::Postgres),
    topology: Topology::Postgres,
    ..REDIS
};

/// An etcd algorithm's entry, likewise: fenced by the key's create revision.
const ETCD: Algorithm = Algorithm {
    service: Some(Topology::Etcd),
    topology: Topology::Etcd,
    own_tokens: true,
    ..REDIS
};

/// The built-in algorithms, in the order the CLI, the audit and the help list them.
pub const TABLE: &[Algorithm] = &[
    Algorithm {
        name: "setnx-del",
        steps: setnx_del::STEPS,
        connect: Connect::Redis(|c, o| Box::new(setnx_del::SetnxDel::new(c, o))),
        workload: Some(include_str!("../../workloads/setnx-del.toml")),
        ..REDIS
    },
    Algorithm {
        name: "setnx-expire",
        steps: setnx_expire::STEPS,
        connect: Connect::Redis(|c, o| Box::new(setnx_expire::SetnxExpire::new(c, o))),
        workload: Some(include_str!("../../workloads/setnx-expire.toml")),
        ..REDIS
    },
    Algorithm {
        name: "setnx-getset",
        steps: setnx_getset::STEPS,
        connect: Connect::Redis(|c, o| Box::new(setnx_getset::SetnxGetset::new(c, o))),
        client_clock: ClientClock::Reads,
        workload: Some(include_str!("../../workloads/setnx-getset.toml")),
        ..REDIS
    },
    Algorithm {
        name: "lua-getset",
        steps: lua_getset::STEPS,
        connect: Connect::Redis(|c, o| Box::new(lua_getset::LuaGetset::new(c, o))),
        client_clock: ClientClock::Reads,
        workload: Some(include_str!("../../workloads/lua-getset.toml")),
        ..REDIS
    },
    Algorithm {
        name: "set-nx-px",
        steps: set_nx_px::STEPS,
        connect: Connect::Redis(|c, o| Box::new(set_nx_px::SetNxPx::new(c, o))),
        workload: Some(include_str!("../../workloads/set-nx-px.toml")),
        ..REDIS
    },
    Algorithm {
        name: "reentrant",
        steps: reentrant::STEPS,
        connect: Connect::Redis(|c, o| Box::new(reentrant::Reentrant::new(c, o))),
        reentrant: true,
        workload: Some(include_str!("../../workloads/reentrant.toml")),
        ..REDIS
    },
    Algorithm {
        name: "rw-lock",
        steps: rw_lock::STEPS,
        connect: Connect::Redis(|c, o| Box::new(rw_lock::RwLock::new(c, o))),
        shared_mode: Declared::Yes,
        workload: Some(include_str!("../../workloads/rw-lock.toml")),
        ..REDIS
    },
    Algorithm {
        name: "fair-lock",
        steps: fair_lock::STEPS,
        connect: Connect::Redis(|c, o| Box::new(fair_lock::FairLock::new(c, o))),
        fair: Declared::Yes,
        waits: true,
        // Its waiting queue's timeouts are the client's `System.currentTimeMillis()`.
        client_clock: ClientClock::Reads,
        workload: Some(include_str!("../../workloads/fair-lock.toml")),
        ..REDIS
    },
    Algorithm {
        name: "redlock",
        topology: Topology::Independent,
        steps: redlock::STEPS,
        connect: Connect::Masters(|m, o| Ok(Box::new(redlock::Redlock::new(m, o)?))),
        // RedLock's safety argument needs masters that fail independently.
        not_on_cluster: Some("RedLock over the masters of one Redis Cluster is not RedLock: a key lives on one master only, and the masters are not independent (they fail over under one cluster configuration); run redlock on the independent topology"),
        workload: Some(include_str!("../../workloads/redlock.toml")),
        ..REDIS
    },
    Algorithm {
        name: "pg-advisory",
        steps: pg_advisory::STEPS,
        connect: Connect::Postgres(|s, o, e| Box::new(pg_advisory::PgAdvisory::new(s, o, e))),
        shared_mode: Declared::Yes,
        session_locks: true,
        workload: Some(include_str!("../../workloads/pg-advisory.toml")),
        ..POSTGRES
    },
    Algorithm {
        name: "pg-row",
        steps: pg_row::STEPS,
        connect: Connect::Postgres(|s, o, _| Box::new(pg_row::PgRow::new(s.client, o))),
        keeps_counter: true,
        shared_mode: Declared::Yes,
        workload: Some(include_str!("../../workloads/pg-row.toml")),
        ..POSTGRES
    },
    Algorithm {
        name: "pg-lock-column",
        steps: pg_lock_column::STEPS,
        connect: Connect::Postgres(|s, o, _| Box::new(pg_lock_column::PgLockColumn::new(s.client, o))),
        workload: Some(include_str!("../../workloads/pg-lock-column.toml")),
        ..POSTGRES
    },
    Algorithm {
        name: "pg-version",
        steps: pg_version::STEPS,
        connect: Connect::Postgres(|s, o, _| Box::new(pg_version::PgVersion::new(s.client, o))),
        keeps_counter: true,
        optimistic: true,
        workload: Some(include_str!("../../workloads/pg-version.toml")),
        ..POSTGRES
    },
    Algorithm {
        name: "watch-multi",
        steps: watch_multi::STEPS,
        connect: Connect::Redis(|c, o| Box::new(watch_multi::WatchMulti::new(c, o))),
        keeps_counter: true,
        optimistic: true,
        not_on_cluster: Some("watch-multi's transaction spans the lock key and its counter key, which hash to different slots (CROSSSLOT)"),
        workload: Some(include_str!("../../workloads/watch-multi.toml")),
        ..REDIS
    },
    Algorithm {
        name: "etcd-lock",
        steps: etcd_lock::STEPS,
        connect: Connect::Etcd(|c, o| Box::new(etcd_lock::EtcdLock::new(c, o))),
        workload: Some(include_str!("../../workloads/etcd-lock.toml")),
        ..ETCD
    },
    Algorithm {
        name: "etcd-txn",
        steps: etcd_txn::STEPS,
        connect: Connect::Etcd(|c, o| Box::new(etcd_txn::EtcdTxn::new(c, o))),
        workload: Some(include_str!("../../workloads/etcd-txn.toml")),
        ..ETCD
    },
    Algorithm {
        name: "zk-lock",
        service: Some(Topology::Zookeeper),
        topology: Topology::Zookeeper,
        steps: zk_lock::STEPS,
        connect: Connect::Zookeeper(|c, o, e| Box::new(zk_lock::ZkLock::new(c, o, e))),
        // Fenced by the lock node's czxid.
        own_tokens: true,
        workload: Some(include_str!("../../workloads/zk-lock.toml")),
        ..REDIS
    },
    Algorithm {
        name: "mariadb-get-lock",
        service: Some(Topology::Mariadb),
        topology: Topology::Mariadb,
        steps: mariadb_get_lock::STEPS,
        connect: Connect::Mariadb(|s, o| Box::new(mariadb_get_lock::MariadbGetLock::new(s, o))),
        // GET_LOCK(name, wait_s) waits for the lock.
        waits: true,
        // Fenced by its row in lockaudit_fence, incremented by each holder.
        own_tokens: true,
        session_locks: true,
        workload: Some(include_str!("../../workloads/mariadb-get-lock.toml")),
        ..REDIS
    },
];

/// The algorithm whose acquire, release and renew are the workload's own Lua scripts
/// (`LockOptions::scripts`). Not in `ALGORITHMS`: it has no workload of its own to audit.
pub const SCRIPTED: &str = "lua";

/// The algorithm run by an external program, the workload's `adapter`, speaking the stdio
/// protocol of docs/src/reference/protocol.md (`external.rs`). Not in `ALGORITHMS` either.
pub const EXTERNAL: &str = "external";

/// The pseudo-algorithms: known to `connect`, not built-ins.
pub const PSEUDO: &[Algorithm] = &[
    Algorithm {
        name: SCRIPTED,
        steps: lua_script::STEPS,
        connect: Connect::Scripted,
        shared_mode: Declared::ByWorkload,
        fair: Declared::ByWorkload,
        client_clock: ClientClock::NotPassed(
            "a Lua-script lock is passed no client time (its scripts see only the server's clock)",
        ),
        ..REDIS
    },
    Algorithm {
        name: EXTERNAL,
        steps: external::STEPS,
        connect: Connect::External,
        shared_mode: Declared::ByWorkload,
        fair: Declared::ByWorkload,
        waits: true,
        // Started under a faked wall clock.
        client_clock: ClientClock::Reads,
        own_cluster_client: true,
        ..REDIS
    },
];

/// The built-in algorithms' names, as `connect` and the CLI accept them (the audit runs
/// each), in `TABLE`'s order. `connect` also accepts `SCRIPTED` and `EXTERNAL`.
pub const ALGORITHMS: [&str; TABLE.len()] = {
    let mut names = [""; TABLE.len()];
    let mut i = 0;
    while i < TABLE.len() {
        names[i] = TABLE[i].name;
        i += 1;
    }
    names
};

/// The algorithm a workload runs when it names none.
pub const DEFAULT_ALGORITHM: &Algorithm = builtin("set-nx-px");

/// The built-in called `name`, found while compiling (a name not in the table does not
/// compile).
const fn builtin(name: &str) -> &'static Algorithm {
    let mut i = 0;
    while i < TABLE.len() {
        if same_name(TABLE[i].name, name) {
            return &TABLE[i];
        }
        i += 1;
    }
    panic!("no built-in algorithm has that name")
}

const fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The entry of `name`: a built-in, `SCRIPTED` or `EXTERNAL`.
pub fn algorithm(name: &str) -> Option<&'static Algorithm> {
    known().find(|a| a.name == name)
}

/// The built-ins' names for which `has` holds, in table order.
pub fn builtins_where(has: impl Fn(&Algorithm) -> bool) -> Vec<&'static str> {
    TABLE.iter().filter(|a| has(a)).map(|a| a.name).collect()
}

/// The known algorithms for error messages: the built-ins, then `lua` and `external`.
pub fn known_algorithms() -> String {
    known().map(|a| a.name).collect::<Vec<_>>().join(", ")
}

/// Every entry `connect` knows: the built-ins in table order, then `lua` and `external`.
fn known() -> impl Iterator<Item = &'static Algorithm> {
    TABLE.iter().chain(PSEUDO)
}

impl Declared {
    /// Whether the property holds: declared, or as `by_client` says where it is left to
    /// the workload or the adapter.
    fn holds(self, by_client: impl Fn() -> bool) -> bool {
        match self {
            Declared::Yes => true,
            Declared::No => false,
            Declared::ByWorkload => by_client(),
        }
    }
}

/// The built-ins with a shared (read) mode, which a workload's `read_share` needs.
pub fn shared_mode_builtins() -> Vec<&'static str> {
    builtins_where(|a| a.shared_mode == Declared::Yes)
}

/// Why an algorithm cannot run on a Redis Cluster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotOnCluster {
    /// Its table entry says why (`Algorithm::not_on_cluster`).
    #[error("{0}")]
    Declared(&'static str),
    /// It runs on a lock service other than Redis.
    #[error("{algorithm} runs on {}", service_name(*service))]
    OtherService {
        algorithm: &'static str,
        service: Topology,
    },
}

/// How messages name a service's topology: `PostgreSQL (topology "postgres")`.
pub fn service_name(topology: Topology) -> String {
    let service = topology.service_name();
    let name = serde_json::to_value(topology)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    format!("{service} (topology \"{name}\")")
}

/// `a, b and c`.
fn and_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_algorithms_follow_the_table() {
        let mut names: Vec<&str> = TABLE.iter().chain(PSEUDO).map(|a| a.name).collect();
        assert_eq!(ALGORITHMS.len(), TABLE.len());
        assert!(ALGORITHMS.iter().zip(TABLE).all(|(n, a)| *n == a.name));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TABLE.len() + PSEUDO.len());
        assert!(names.iter().all(|n| !n.is_empty()));
    }

    #[test]
    fn every_entry_is_consistent() {
        for a in TABLE.iter().chain(PSEUDO) {
            let name = a.name;
            if let Some(service) = a.service {
                assert_eq!(a.topology, service, "{name}");
                assert!(a.not_on_cluster.is_none(), "{name}");
            }
            assert!(!a.optimistic || a.keeps_counter, "{name}");
            assert!(
                !a.steps.is_empty()
                    && a.steps
                        .iter()
                        .all(|s| s.strip_prefix(name).is_some_and(|r| r.starts_with(':'))),
                "{name}: {:?}",
                a.steps
            );
            let pseudo = PSEUDO.iter().any(|p| p.name == name);
            assert_eq!(a.workload.is_none(), pseudo, "{name}");
            assert_eq!(
                matches!(a.connect, Connect::Scripted | Connect::External),
                pseudo,
                "{name}"
            );
        }
    }

    #[test]
    fn the_properties_by_name_are_the_ones_before_the_table() {
        assert_eq!(shared_mode_builtins(), ["rw-lock", "pg-advisory", "pg-row"]);
        assert_eq!(
            builtins_where(|a| a.keeps_counter),
            ["pg-row", "pg-version", "watch-multi"]
        );
        assert_eq!(
            builtins_where(|a| a.optimistic),
            ["pg-version", "watch-multi"]
        );
        assert_eq!(
            builtins_where(|a| a.own_tokens),
            ["etcd-lock", "etcd-txn", "zk-lock", "mariadb-get-lock"]
        );
        assert_eq!(
            builtins_where(|a| a.service == Some(Topology::Postgres)),
            ["pg-advisory", "pg-row", "pg-lock-column", "pg-version"]
        );
        let a = |name| algorithm(name).unwrap();
        assert!(TABLE
            .iter()
            .all(|a| (a.service == Some(Topology::Postgres)) == a.name.starts_with("pg-")));
        assert_eq!(a("redlock").topology, Topology::Independent);
        assert_eq!(a("pg-row").topology, Topology::Postgres);
        assert_eq!(a("etcd-txn").topology, Topology::Etcd);
        assert_eq!(a("set-nx-px").topology, Topology::Single);
        assert_eq!(a(SCRIPTED).topology, Topology::Single);
        assert!(a("pg-row").counter_with_lock(false) && !a("pg-row").counter_with_lock(true));
        assert!(a("watch-multi").counter_with_lock(true));
        assert!(a(SCRIPTED).shared_mode != Declared::Yes);
        assert!(a("set-nx-px").shared_mode != Declared::Yes);
        assert_eq!(
            a("set-nx-px").ignores_client_clock().unwrap(),
            "set-nx-px never reads the client's wall clock (only setnx-getset, lua-getset and fair-lock do)"
        );
        assert!(a(EXTERNAL).ignores_client_clock().is_none());
        assert!(a(SCRIPTED)
            .ignores_client_clock()
            .unwrap()
            .starts_with("a Lua-script lock is passed no client time"));
        assert!(a("set-nx-px").on_cluster().is_ok() && a(EXTERNAL).on_cluster().is_ok());
        assert_eq!(
            a("pg-row").on_cluster().unwrap_err().to_string(),
            "pg-row runs on PostgreSQL (topology \"postgres\")"
        );
        assert!(a("watch-multi")
            .on_cluster()
            .unwrap_err()
            .to_string()
            .contains("CROSSSLOT"));
        assert_eq!(DEFAULT_ALGORITHM.name, "set-nx-px");
        // Read from its name, written as it; an unknown name refused with the nearest.
        let read: &Algorithm = serde_json::from_str("\"redlock\"").unwrap();
        assert_eq!(read, a("redlock"));
        assert_eq!(serde_json::to_string(read).unwrap(), "\"redlock\"");
        let why = serde_json::from_str::<&Algorithm>("\"redlokc\"").unwrap_err();
        assert!(
            why.to_string().contains("did you mean \"redlock\""),
            "{why}"
        );
    }
}
