//! The Redis topologies lockaudit starts on this machine: single, replicated, sentinel,
//! independent masters and a Redis Cluster (on hosts, see `hosts`), each server and sentinel
//! a node behind [`ServiceNode`], and the guarded resource's `storage` server beside them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crate::fake_clock::{FakeClock, Preload};

use super::error::ClusterError;
use super::machine::{Local, LOOPBACK};
use super::ports::PortChoice;
use super::sentinel::{self, SentinelSetup};
use super::server::{self, Server, ServerConfig};
use super::service::ServiceNode;
use super::{binaries, generate_password, ports, private_folders, sharded};
use super::{Cluster, ClusterSpec};
use super::{Topology, CLUSTER_NODE_TIMEOUT_MS};

/// Replicas per primary in `Replicated` and `Sentinel`.
pub(super) const REPLICAS: usize = 2;

/// Sentinels in `Sentinel` (quorum 2).
pub(super) const SENTINELS: usize = 3;

/// A Redis topology's servers and the storage node, ready once every server
/// answers an authenticated INFO, every replica is in sync, and every sentinel knows the
/// master, its replicas and the other sentinels.
///
/// Data folders are `<dir>/redis/<name>/` (emptied first), logs `<dir>/redis/<name>.log`,
/// fake clocks' offset files `<dir>/redis/<name>.faketime` (outside the data folder, so that
/// an emptied node keeps its clock). On any error every process started so far is killed
/// before returning.
pub(super) async fn start(spec: &ClusterSpec) -> Result<Cluster, ClusterError> {
    let begun = Instant::now();
    let lock_nodes = lock_node_count(spec)?;
    let sentinel_count = if spec.topology == Topology::Sentinel {
        SENTINELS
    } else {
        0
    };
    let server_binary = binaries::redis_server(spec.redis_server.as_deref())?;
    let sentinel_binary = if sentinel_count > 0 {
        Some(binaries::redis_sentinel(
            spec.redis_sentinel.as_deref(),
            &server_binary,
        )?)
    } else {
        None
    };

    // Absolute, because Redis chdirs into its data folder before opening its log.
    let [root] = private_folders(&spec.dir, ["redis"])?;
    let cluster_mode = spec.topology == Topology::Cluster;
    let bus_ports = if cluster_mode { lock_nodes } else { 0 };
    let mut servers = Servers {
        spec,
        root,
        password: generate_password(),
        binary: server_binary,
        preload: if spec.fake_clocks {
            Some(Preload::libfaketime()?)
        } else {
            None
        },
        ports: ports::plan(lock_nodes + 1 + sentinel_count + bus_ports, spec.base_port)?
            .into_iter(),
    };

    // Primaries first: a replica started before its primary listens retries only once a
    // second. Storage starts alongside them.
    // A cluster's nodes all start at once: its replicas are made replicas by the cluster.
    let primaries = match spec.topology {
        Topology::Independent | Topology::Cluster => lock_nodes,
        _ => 1,
    };
    let (mut nodes, storage, replica_ports) =
        servers.start_primaries(primaries, lock_nodes).await?;
    if cluster_mode {
        servers.form_cluster(&nodes).await?;
    }
    if lock_nodes > primaries {
        nodes.extend(
            servers
                .start_replicas(&nodes, primaries, replica_ports)
                .await?,
        );
    }
    let sentinels = match sentinel_binary {
        Some(binary) => {
            let setup = SentinelSetup {
                placements: vec![(Arc::new(Local), binary)],
                root: servers.root.clone(),
                password: servers.password.clone(),
                primary: (
                    LOOPBACK.to_string(),
                    nodes.first().map(|s| s.instance.port()).unwrap_or(0),
                ),
                replicas: lock_nodes - primaries,
            };
            let mut choices = Vec::with_capacity(sentinel_count);
            for _ in 0..sentinel_count {
                choices.push(servers.next_port()?);
            }
            sentinel::start_sentinels(&setup, choices).await?
        }
        None => Vec::new(),
    };

    tracing::info!(
        topology = ?spec.topology,
        fake_clocks = spec.fake_clocks,
        servers = nodes.len() + 1,
        sentinels = sentinels.len(),
        elapsed = ?begun.elapsed(),
        "cluster ready"
    );
    let nodes = nodes
        .into_iter()
        .map(|s| Box::new(s) as Box<dyn ServiceNode>)
        .chain(
            sentinels
                .into_iter()
                .map(|s| Box::new(s) as Box<dyn ServiceNode>),
        )
        .collect();
    Ok(Cluster::local(
        spec.topology,
        servers.root,
        servers.password,
        nodes,
        storage,
    ))
}

/// How many lock servers (masters and replicas) `spec`'s Redis topology has.
fn lock_node_count(spec: &ClusterSpec) -> Result<usize, ClusterError> {
    Ok(match spec.topology {
        Topology::Postgres | Topology::Etcd | Topology::Zookeeper | Topology::Mariadb => {
            return Err(ClusterError::InvalidSpec(format!(
                "{:?} is not a Redis topology",
                spec.topology
            )))
        }
        Topology::Cluster if spec.shards == 0 => {
            return Err(ClusterError::InvalidSpec(
                "a Redis Cluster needs at least one master".into(),
            ))
        }
        Topology::Cluster => 2 * spec.shards,
        Topology::Single => 1,
        Topology::Replicated | Topology::Sentinel => 1 + REPLICAS,
        Topology::Independent if spec.masters == 0 => {
            return Err(ClusterError::InvalidSpec(
                "an independent topology needs at least one master".into(),
            ))
        }
        Topology::Independent => spec.masters,
    })
}

/// What a Redis topology's servers share as they start: the spec, their folder, the
/// password, the binary, the fake clocks' preload and the ports still to hand out.
struct Servers<'a> {
    spec: &'a ClusterSpec,
    root: PathBuf,
    password: String,
    binary: PathBuf,
    preload: Option<Preload>,
    ports: std::vec::IntoIter<PortChoice>,
}

impl Servers<'_> {
    fn next_port(&mut self) -> Result<PortChoice, ClusterError> {
        self.ports
            .next()
            .ok_or_else(|| ClusterError::InvalidSpec("port plan too short".into()))
    }

    /// The config of server `name`. `lock_node`: a master or replica (fake clock), not
    /// storage; `bus_port`: cluster mode.
    fn config(
        &self,
        name: String,
        replica_of: Option<(String, u16)>,
        lock_node: bool,
        bus_port: Option<u16>,
    ) -> Result<ServerConfig, ClusterError> {
        let root = &self.root;
        let fake_clock = match &self.preload {
            Some(preload) if lock_node => Some(FakeClock::create(
                preload.clone(),
                root.join(format!("{name}.faketime")),
            )?),
            _ => None,
        };
        let config = ServerConfig {
            dir: root.join(&name),
            log: root.join(format!("{name}.log")),
            binary: self.binary.clone(),
            password: self.password.clone(),
            persistence: self.spec.persistence,
            replica_of,
            fake_clock,
            machine: Arc::new(Local),
            cluster: bus_port.map(|bus_port| server::ClusterMode {
                bus_port,
                config_file: root.join(format!("{name}.nodes.conf")),
                node_timeout_ms: CLUSTER_NODE_TIMEOUT_MS,
            }),
            name,
        };
        if let Some(cluster) = &config.cluster {
            // A new cluster: a config left by an earlier run in this folder would rejoin it.
            let _ = std::fs::remove_file(&cluster.config_file);
        }
        Ok(config)
    }

    /// The first `primaries` lock servers (a cluster's nodes each with its bus port) and the
    /// storage server, started together; the ports kept for the replicas still to start.
    async fn start_primaries(
        &mut self,
        primaries: usize,
        lock_nodes: usize,
    ) -> Result<(Vec<Server>, Server, Vec<PortChoice>), ClusterError> {
        let cluster_mode = self.spec.topology == Topology::Cluster;
        let mut first = Vec::with_capacity(primaries + 1);
        for i in 0..primaries {
            let name = if cluster_mode && i >= self.spec.shards {
                format!("replica-{i}")
            } else {
                format!("master-{i}")
            };
            let port = self.next_port()?;
            let bus_port = if cluster_mode {
                Some(self.next_port()?.port())
            } else {
                None
            };
            first.push((self.config(name, None, true, bus_port)?, port));
        }
        let mut replica_ports = Vec::new();
        for _ in primaries..lock_nodes {
            replica_ports.push(self.next_port()?);
        }
        first.push((
            self.config("storage".into(), None, false, None)?,
            self.next_port()?,
        ));
        let mut nodes = server::start_all(first, true, server::Start::First).await?;
        let storage = nodes
            .pop()
            .ok_or_else(|| ClusterError::InvalidSpec("the storage node did not start".into()))?;
        Ok((nodes, storage, replica_ports))
    }

    /// A Redis Cluster formed of `nodes`: slots split over the masters, a replica each.
    async fn form_cluster(&self, nodes: &[Server]) -> Result<(), ClusterError> {
        let mut members = Vec::new();
        for server in nodes {
            if let Some(cluster) = &server.config.cluster {
                members.push(sharded::Member {
                    name: server.config.name.clone(),
                    host: "127.0.0.1".into(),
                    port: server.instance.port(),
                    bus_port: cluster.bus_port,
                });
            }
        }
        sharded::form(&members, self.spec.shards, &self.password).await
    }

    /// The replicas of the first of `nodes`, numbered after the `primaries`, on `ports`.
    async fn start_replicas(
        &self,
        nodes: &[Server],
        primaries: usize,
        ports: Vec<PortChoice>,
    ) -> Result<Vec<Server>, ClusterError> {
        let primary_port = nodes
            .first()
            .map(|s| s.instance.port())
            .ok_or_else(|| ClusterError::InvalidSpec("no primary started".into()))?;
        let mut replicas = Vec::with_capacity(ports.len());
        for (i, port) in ports.into_iter().enumerate() {
            let name = format!("replica-{}", primaries + i);
            let primary = (LOOPBACK.to_string(), primary_port);
            replicas.push((self.config(name, Some(primary), true, None)?, port));
        }
        server::start_all(replicas, true, server::Start::First).await
    }
}

/// `kill-session` on lock server `node`: `CLIENT KILL TYPE normal SKIPME yes`, which closes
/// every ordinary client connection but this one (not a replica's link, not a primary's
/// link to its replicas). Returns how many it closed. Never the storage server: the nemesis
/// names lock servers only.
pub(super) async fn end_client_sessions(
    endpoints: &super::Endpoints,
    node: &super::Node,
) -> Result<usize, super::SessionsError> {
    let mut conn = super::probe::connect_to(&node.host, node.port, endpoints.password.as_deref())
        .await
        .map_err(|e| super::SessionsError::Connect {
            node: node.name.clone(),
            reason: e.to_string(),
        })?;
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"][..])
        .query_async(&mut conn)
        .await
        .map_err(|e| super::SessionsError::Refused {
            node: node.name.clone(),
            request: "CLIENT KILL".into(),
            reason: e.to_string(),
        })?;
    Ok(usize::try_from(killed).unwrap_or(0))
}
