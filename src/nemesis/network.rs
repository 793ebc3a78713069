//! The links the nemesis can cut, slow down and move: TCP proxies on loopback that
//! lockaudit owns (`proxy.rs`), one per (worker, lock server) between clients and servers,
//! and one per server on the replication link.
//!
//! Why proxies rather than network namespaces: `tc netem` does not work on the machines we
//! run on, so latency needs a proxy anyway; proxies cut one worker off from some servers
//! while the others still reach them without root-only namespace plumbing; and a manual
//! failover is then just what a virtual IP does: the clients' address of "the primary"
//! moves to the promoted replica. Sentinel's own failover needs none of this.
//!
//! The replicated topology's clients reach the primary through one address, `master-0`'s
//! proxy, whichever server is primary now.
//!
//! With the servers on other hosts, partitions are the hosts' own: the replication link is
//! cut with iptables on the replicas' hosts, and a worker is cut off from a server with
//! iptables on the server's host, by the source ports its proxies connect from
//! (`source_ports`); the proxies then only forward, add latency and move on a failover.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::time::Duration;

use serde_json::{json, Map};

use crate::cluster::{service, Cluster, Endpoints, Node, Replica, ReplicaError, Topology};

use super::journal::Journal;
use super::plan::PlannedFault;
use super::proxy::{Proxy, ProxyError};
use super::schedule::{FaultKind, Link};
use super::source_ports::{self, SourcePorts};
use super::workers::Workers;

type OpenKey = (u64, FaultKind);

/// The proxies of one run.
pub struct Network {
    topology: Topology,
    password: Option<String>,
    /// Each server's real address, by name.
    servers: BTreeMap<String, SocketAddr>,
    /// `front[w][server]`: worker w's way to that server (for the replicated topology,
    /// `master-0` is the address of whichever server is primary).
    front: Vec<BTreeMap<String, Proxy>>,
    /// Per server, its replication link to the primary (when it is a replica).
    replication: BTreeMap<String, Proxy>,
    /// The primary now (replicated topology).
    primary: Option<String>,
    /// The servers run on other hosts: the replicas follow the primary directly, and the
    /// replication link is cut with iptables there (`Cluster::cut_links`), not by proxies.
    on_hosts: bool,
    /// Each worker's source ports towards servers on hosts (empty for local servers).
    source_ports: Vec<RangeInclusive<u16>>,
    /// Links cut on the hosts: per fault begun, its targets and its (replica, primary) or
    /// (worker, server) pairs.
    cuts: Vec<(OpenKey, Vec<String>, Vec<CutLink>)>,
    /// Faults begun and not yet healed: (the fault's start and kind, targets, proxies).
    open: Vec<(OpenKey, Vec<String>, Vec<Proxy>)>,
}

/// A link cut on the hosts: (the server or worker that lost it, the server it led to).
type CutLink = (String, String);

/// Why the proxies could not be set up, or a manual failover not made.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error("{node}: bad address {host}:{port}: {error}")]
    BadAddress {
        node: String,
        host: String,
        port: u16,
        error: std::net::AddrParseError,
    },
    #[error(transparent)]
    SourcePorts(#[from] source_ports::TooManyWorkers),
    #[error(transparent)]
    Proxy(#[from] ProxyError),
    #[error(transparent)]
    Replica(#[from] ReplicaError),
    #[error("no primary")]
    NoPrimary,
    #[error("no replica to promote")]
    NoReplica,
}

fn address(node: &Node) -> Result<SocketAddr, NetworkError> {
    format!("{}:{}", node.host, node.port)
        .parse()
        .map_err(|error| NetworkError::BadAddress {
            node: node.name.clone(),
            host: node.host.clone(),
            port: node.port,
            error,
        })
}

impl Network {
    /// Starts the proxies: client-side ones for every worker, and replication ones when
    /// `replication` (the replicas are then re-pointed at the primary through them and
    /// this waits until they are in sync again). Returns each worker's endpoints.
    pub async fn start(
        endpoints: &Endpoints,
        workers: usize,
        replication: bool,
    ) -> Result<(Network, Vec<Endpoints>), NetworkError> {
        let mut servers = BTreeMap::new();
        for node in &endpoints.nodes {
            servers.insert(node.name.clone(), address(node)?);
        }
        let mut network = Network {
            topology: endpoints.topology,
            password: endpoints.password.clone(),
            servers,
            front: Vec::new(),
            replication: BTreeMap::new(),
            primary: endpoints.nodes.first().map(|n| n.name.clone()),
            on_hosts: endpoints.control_addr.is_some(),
            source_ports: Vec::new(),
            cuts: Vec::new(),
            open: Vec::new(),
        };
        if network.on_hosts {
            network.source_ports = source_ports::ranges(workers)?;
        }
        let mut per_worker = Vec::new();
        for w in 0..workers {
            let mut proxies = BTreeMap::new();
            let mut mine = endpoints.clone();
            if !service(endpoints.topology).clients_ask_watchers {
                for node in &mut mine.nodes {
                    let upstream = network.servers[&node.name];
                    let name = format!("worker-{w}>{}", node.name);
                    let proxy = match network.source_ports.get(w) {
                        Some(ports) => {
                            Proxy::start_from(&name, upstream, SourcePorts::new(ports.clone()))
                                .await
                        }
                        None => Proxy::start(&name, upstream).await,
                    }?;
                    node.host = "127.0.0.1".into();
                    node.port = proxy.port();
                    proxies.insert(node.name.clone(), proxy);
                }
            }
            network.front.push(proxies);
            per_worker.push(mine);
        }
        if replication && service(endpoints.topology).primary_by_hand && !network.on_hosts {
            let primary = network.primary.clone().unwrap_or_default();
            for name in network.servers.keys().cloned().collect::<Vec<_>>() {
                let proxy =
                    Proxy::start(&format!("{name}>primary"), network.servers[&primary]).await?;
                network.replication.insert(name.clone(), proxy);
                if name != primary {
                    network.replicate_through_proxy(&name).await?;
                }
            }
            for name in network.servers.keys() {
                if *name != primary {
                    network.replica(name).wait_in_sync().await?;
                }
            }
        }
        Ok((network, per_worker))
    }

    /// Server `name` as the manual failover reaches it.
    fn replica(&self, name: &str) -> Replica {
        Replica {
            name: name.to_string(),
            addr: self.servers[name],
            password: self.password.clone(),
        }
    }

    /// Makes the server follow the primary through its replication proxy, or on hosts the
    /// primary itself.
    async fn replicate_through_proxy(&self, name: &str) -> Result<(), NetworkError> {
        let primary = match self.replication.get(name) {
            Some(proxy) => SocketAddr::from(([127, 0, 0, 1], proxy.port())),
            None => {
                let primary = self.primary.as_deref().ok_or(NetworkError::NoPrimary)?;
                self.servers[primary]
            }
        };
        Ok(self.replica(name).follow(primary).await?)
    }

    /// The proxies a network fault acts on, and the names it records.
    fn links(&self, fault: &PlannedFault) -> (Vec<String>, Vec<Proxy>) {
        match fault.link {
            Link::Replication => {
                let primary = self.primary.clone().unwrap_or_default();
                let replicas: Vec<String> = self
                    .replication
                    .keys()
                    .filter(|n| **n != primary)
                    .cloned()
                    .collect();
                let proxies = replicas
                    .iter()
                    .map(|n| self.replication[n].clone())
                    .collect();
                let mut targets = vec![primary];
                targets.extend(replicas);
                (targets, proxies)
            }
            Link::Clients => {
                let Some(w) = fault
                    .targets
                    .first()
                    .and_then(|t| t.strip_prefix("worker-"))
                    .and_then(|n| n.parse::<usize>().ok())
                else {
                    return (Vec::new(), Vec::new());
                };
                let Some(front) = self.front.get(w) else {
                    return (Vec::new(), Vec::new());
                };
                let mut targets = vec![fault.targets[0].clone()];
                let mut proxies = Vec::new();
                if service(self.topology).primary_by_hand {
                    // The clients' only way in is the primary's address, whichever server
                    // the plan named: cut that, and name the primary of the moment.
                    if let (Some(p), Some(primary)) = (front.get("master-0"), &self.primary) {
                        targets.push(primary.clone());
                        proxies.push(p.clone());
                    }
                    return (targets, proxies);
                }
                for server in &fault.targets[1..] {
                    if let Some(p) = front.get(server) {
                        targets.push(server.clone());
                        proxies.push(p.clone());
                    }
                }
                (targets, proxies)
            }
        }
    }

    /// Begins a partition, a latency or a manual failover. False if there was nothing to
    /// act on.
    pub async fn begin(
        &mut self,
        fault: &PlannedFault,
        fleet: &mut impl Workers,
        cluster: Option<&mut Cluster>,
        journal: &Journal,
    ) -> bool {
        let replication_link = fault.kind == FaultKind::Failover
            || (fault.kind == FaultKind::Partition && fault.link == Link::Replication);
        if fault.kind == FaultKind::Partition
            && fault.link == Link::Replication
            && service(self.topology).elects_leader
        {
            return self.isolate_leader(fault, cluster, journal).await;
        }
        if self.on_hosts && replication_link {
            return self.cut_on_hosts(fault, cluster, journal);
        }
        if self.on_hosts && fault.kind == FaultKind::Partition && fault.link == Link::Clients {
            return self.cut_clients_on_hosts(fault, fleet, cluster, journal);
        }
        match fault.kind {
            FaultKind::Partition | FaultKind::Latency => {
                let (targets, proxies) = self.links(fault);
                if proxies.is_empty() {
                    tracing::warn!(
                        "{}: no link to act on ({:?} topology: clients reach servers through Sentinel, or no replicas)",
                        fault.kind.name(),
                        self.topology
                    );
                    return false;
                }
                let mut extra = Map::new();
                extra.insert("link".into(), json!(fault.link));
                let name = if fault.kind == FaultKind::Partition {
                    for p in &proxies {
                        p.cut();
                    }
                    "partition"
                } else {
                    for p in &proxies {
                        p.set_latency(Duration::from_millis(fault.latency_ms));
                    }
                    extra.insert("latency_ms".into(), json!(fault.latency_ms));
                    "latency"
                };
                let processes = worker_processes(fleet, &targets);
                journal.fault(name, &targets, &processes, extra);
                self.open
                    .push(((fault.at_ms, fault.kind), targets, proxies));
                true
            }
            FaultKind::Failover => {
                // Freeze the replication link: from now on the replicas lag.
                let mut lag = fault.clone();
                lag.link = Link::Replication;
                let (targets, proxies) = self.links(&lag);
                if proxies.is_empty() {
                    return false;
                }
                for p in &proxies {
                    p.cut();
                }
                let mut extra = Map::new();
                extra.insert("link".into(), json!(Link::Replication));
                journal.fault("partition", &targets, &[], extra);
                self.open
                    .push(((fault.at_ms, fault.kind), targets, proxies));
                true
            }
            _ => false,
        }
    }

    /// Servers on hosts: freezes the replication link with iptables on every replica's host
    /// (to the primary's address and port). False if nothing was cut.
    fn cut_on_hosts(
        &mut self,
        fault: &PlannedFault,
        cluster: Option<&mut Cluster>,
        journal: &Journal,
    ) -> bool {
        let (Some(cluster), Some(primary)) = (cluster, self.primary.clone()) else {
            return false;
        };
        let wanted: Vec<CutLink> = self
            .servers
            .keys()
            .filter(|n| **n != primary)
            .map(|replica| (replica.clone(), primary.clone()))
            .collect();
        let cut = cluster.cut_links(&wanted);
        let pairs = held(fault, wanted, cut);
        if pairs.is_empty() {
            return false;
        }
        let mut targets = vec![primary];
        targets.extend(pairs.iter().map(|(r, _)| r.clone()));
        let mut extra = Map::new();
        extra.insert("link".into(), json!(Link::Replication));
        journal.fault("partition", &targets, &[], extra);
        self.cuts.push(((fault.at_ms, fault.kind), targets, pairs));
        true
    }

    /// etcd and ZooKeeper, a partition between servers: the leader of the moment cut off
    /// from every other server both ways (Jepsen's partition-leader), through
    /// `Cluster::cut_links` (the servers' peer proxies, or iptables on their hosts). The targets: the leader, then
    /// the members it lost. False if nothing was cut.
    async fn isolate_leader(
        &mut self,
        fault: &PlannedFault,
        cluster: Option<&mut Cluster>,
        journal: &Journal,
    ) -> bool {
        let Some(cluster) = cluster else {
            return false;
        };
        // Just after a heal the member that was cut off forces an election with its higher
        // term (etcd 3.4 runs without pre-vote): wait for its outcome.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let leader = loop {
            if let Some(leader) = cluster.leader().await {
                break leader;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!("partition: no server named a leader to isolate within 5 s");
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let wanted: Vec<CutLink> = self
            .servers
            .keys()
            .filter(|m| **m != leader)
            .flat_map(|m| [(leader.clone(), m.clone()), (m.clone(), leader.clone())])
            .collect();
        let cut = cluster.cut_links(&wanted);
        let pairs = held(fault, wanted, cut);
        if pairs.is_empty() {
            return false;
        }
        let mut targets = vec![leader.clone()];
        for (from, to) in &pairs {
            let other = if *from == leader { to } else { from };
            if !targets.contains(other) {
                targets.push(other.clone());
            }
        }
        let mut extra = Map::new();
        extra.insert("link".into(), json!(Link::Replication));
        extra.insert("leader".into(), json!(true));
        journal.fault("partition", &targets, &[], extra);
        self.cuts.push(((fault.at_ms, fault.kind), targets, pairs));
        true
    }

    /// Servers on hosts: cuts the worker off from the servers with iptables on each one's
    /// host, by the worker's source ports. The same servers as its proxies would cut (for
    /// the replicated topology, the primary of the moment; a failover during the cut moves
    /// the worker to a server that is not cut, as a real client would reach the new one).
    /// False if nothing was cut.
    fn cut_clients_on_hosts(
        &mut self,
        fault: &PlannedFault,
        fleet: &impl Workers,
        cluster: Option<&mut Cluster>,
        journal: &Journal,
    ) -> bool {
        let (targets, _) = self.links(fault);
        let Some((worker, servers)) = targets.split_first().filter(|(_, s)| !s.is_empty()) else {
            tracing::warn!(
                "partition: no link to act on ({:?} topology: clients reach servers through \
                 Sentinel, or no server named)",
                self.topology
            );
            return false;
        };
        let (Some(cluster), Some(ports)) = (
            cluster,
            target_worker(worker).and_then(|w| self.source_ports.get(w)),
        ) else {
            return false;
        };
        let wanted: Vec<CutLink> = servers
            .iter()
            .map(|server| (worker.clone(), server.clone()))
            .collect();
        let cut = cluster.cut_client(worker, ports, servers);
        let pairs = held(fault, wanted, cut);
        if pairs.is_empty() {
            return false;
        }
        let mut targets = vec![worker.clone()];
        targets.extend(pairs.iter().map(|(_, s)| s.clone()));
        let mut extra = Map::new();
        extra.insert("link".into(), json!(Link::Clients));
        let processes = worker_processes(fleet, &targets);
        journal.fault("partition", &targets, &processes, extra);
        self.cuts.push(((fault.at_ms, fault.kind), targets, pairs));
        true
    }

    /// Heals what `begin` did; for a failover, first promotes a lagging replica and moves
    /// the clients to it. Returns the links it could not heal (the link, why): their cut is
    /// still in force, so no `heal` is recorded, and the run's end tries them again.
    pub async fn end(
        &mut self,
        fault: &PlannedFault,
        fleet: &mut impl Workers,
        cluster: Option<&mut Cluster>,
        journal: &Journal,
    ) -> Vec<(String, String)> {
        if fault.kind == FaultKind::Failover {
            if let Err(e) = self.promote(journal).await {
                tracing::warn!("failover: {e}");
            }
        }
        let key = (fault.at_ms, fault.kind);
        let mut unhealed = Vec::new();
        if let Some(i) = self.cuts.iter().position(|(k, _, _)| *k == key) {
            let (key, targets, pairs) = self.cuts.remove(i);
            unhealed = self.heal_cuts(key, targets, pairs, cluster, fleet, journal);
        }
        if let Some(i) = self.open.iter().position(|(k, _, _)| *k == key) {
            let (_, targets, proxies) = self.open.remove(i);
            for p in &proxies {
                p.heal();
            }
            let processes = worker_processes(fleet, &targets);
            journal.fault("heal", &targets, &processes, Map::new());
        }
        unhealed
    }

    /// Heals links cut on the hosts (or between etcd's members). All healed: records the
    /// `heal`. Else the links still cut stay in `cuts`, and each is returned with why.
    fn heal_cuts(
        &mut self,
        key: OpenKey,
        targets: Vec<String>,
        pairs: Vec<CutLink>,
        cluster: Option<&mut Cluster>,
        fleet: &impl Workers,
        journal: &Journal,
    ) -> Vec<(String, String)> {
        let healed = match cluster {
            Some(cluster) => cluster.heal_links(&pairs),
            None => vec![false; pairs.len()],
        };
        let (done, left): (Vec<_>, Vec<_>) = pairs.into_iter().zip(healed).partition(|p| p.1);
        if left.is_empty() {
            let processes = worker_processes(fleet, &targets);
            journal.fault("heal", &targets, &processes, Map::new());
            return Vec::new();
        }
        let unhealed = left
            .iter()
            .map(|((from, to), _)| {
                (
                    format!("the link from {from} to {to}"),
                    "its host did not confirm it open (or no cut was found there)".to_string(),
                )
            })
            .collect();
        let left: Vec<CutLink> = left.into_iter().map(|(pair, _)| pair).collect();
        tracing::debug!(healed = done.len(), still_cut = left.len(), "heal");
        self.cuts.push((key, targets, left));
        unhealed
    }

    /// Promotes the first replica: `REPLICAOF NO ONE` on it, every client address of the
    /// primary moved to it (their connections reset, as when a virtual IP moves), and the
    /// other servers made its replicas through their replication proxies.
    async fn promote(&mut self, journal: &Journal) -> Result<(), NetworkError> {
        let old = self.primary.clone().ok_or(NetworkError::NoPrimary)?;
        let new = self
            .servers
            .keys()
            .find(|n| **n != old)
            .cloned()
            .ok_or(NetworkError::NoReplica)?;
        self.replica(&new).promote().await?;
        let new_addr = self.servers[&new];
        for front in &self.front {
            if let Some(p) = front.get("master-0") {
                p.retarget(new_addr);
            }
        }
        let mut extra = Map::new();
        extra.insert("from".into(), json!(old));
        journal.fault("failover", std::slice::from_ref(&new), &[], extra);
        self.primary = Some(new.clone());
        for proxy in self.replication.values() {
            proxy.retarget(new_addr);
        }
        for name in self.servers.keys().filter(|n| **n != new) {
            if let Err(e) = self.replicate_through_proxy(name).await {
                tracing::warn!("failover: {e}");
            }
        }
        Ok(())
    }

    /// Heals every link still cut or slowed (the end of the run); returns the links it
    /// could not heal, with why (no `heal` is recorded for their fault).
    pub fn heal_all(
        &mut self,
        fleet: &impl Workers,
        journal: &Journal,
        mut cluster: Option<&mut Cluster>,
    ) -> Vec<(String, String)> {
        let mut unhealed = Vec::new();
        for (key, targets, pairs) in std::mem::take(&mut self.cuts) {
            unhealed.extend(self.heal_cuts(
                key,
                targets,
                pairs,
                cluster.as_deref_mut(),
                fleet,
                journal,
            ));
        }
        for (_, targets, proxies) in std::mem::take(&mut self.open) {
            for p in &proxies {
                p.heal();
            }
            journal.fault("heal", &targets, &[], Map::new());
        }
        unhealed
    }

    /// Stops every proxy.
    pub async fn stop(self) {
        for front in self.front {
            for (_, p) in front {
                p.stop().await;
            }
        }
        for (_, p) in self.replication {
            p.stop().await;
        }
    }
}

/// The pairs of `wanted` whose cut holds; the others' errors logged.
fn held(
    fault: &PlannedFault,
    wanted: Vec<CutLink>,
    cut: Vec<Result<(), crate::cluster::ClusterError>>,
) -> Vec<CutLink> {
    wanted
        .into_iter()
        .zip(cut)
        .filter_map(|(pair, result)| match result {
            Ok(()) => Some(pair),
            Err(e) => {
                tracing::warn!("{}: {e}", fault.kind.name());
                None
            }
        })
        .collect()
}

/// `worker-3` -> 3.
fn target_worker(target: &str) -> Option<usize> {
    target.strip_prefix("worker-")?.parse().ok()
}

/// The live processes of the workers among `targets`.
fn worker_processes(fleet: &impl Workers, targets: &[String]) -> Vec<u64> {
    targets
        .iter()
        .filter_map(|t| target_worker(t))
        .flat_map(|w| fleet.processes(w))
        .collect()
}
