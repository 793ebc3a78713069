//! Servers lockaudit did not start (`run --redis URL`): the URL read into endpoints, and the
//! preflight that reaches, authenticates and pings each of them before any worker starts.

use std::time::Duration;

use crate::cluster::reach::Unreachable;
use crate::cluster::{self, Endpoints, Node};

/// The endpoints of servers lockaudit did not start: `redis://[:password@]host:port`, or
/// `sentinel://[:password@]host:port[,host:port...]/<master name>` for a Sentinel-watched
/// primary (found through the sentinels when the run starts).
pub fn existing_endpoints(url: &str) -> Result<Endpoints, String> {
    if let Some(rest) = url.strip_prefix("sentinel://") {
        return sentinel_endpoints(url, rest);
    }
    let info: redis::ConnectionInfo = url
        .parse()
        .map_err(|e| format!("--redis {url}: not a Redis URL: {e}"))?;
    let (host, port) = match info.addr() {
        redis::ConnectionAddr::Tcp(host, port) => (host.clone(), *port),
        other => {
            return Err(format!(
                "--redis {url}: only tcp addresses are supported, not {other:?}"
            ))
        }
    };
    let password = info.redis_settings().password().map(str::to_string);
    let node = Node {
        name: "master-0".into(),
        host,
        port,
        pid: None,
    };
    Ok(Endpoints {
        topology: cluster::Topology::Single,
        nodes: vec![node.clone()],
        sentinels: Vec::new(),
        master_name: None,
        storage: Node {
            name: "storage".into(),
            ..node
        },
        password,
        control_addr: None,
    })
}

fn sentinel_endpoints(url: &str, rest: &str) -> Result<Endpoints, String> {
    let bad = |why: &str| {
        format!("--redis {url}: {why} (expected sentinel://[:password@]host:port[,host:port]/master-name)")
    };
    let (authority, master) = rest.split_once('/').ok_or_else(|| bad("no master name"))?;
    if master.is_empty() {
        return Err(bad("no master name"));
    }
    let (password, hosts) = match authority.rsplit_once('@') {
        Some((credentials, hosts)) => (
            Some(credentials.trim_start_matches(':').to_string()).filter(|p| !p.is_empty()),
            hosts,
        ),
        None => (None, authority),
    };
    let mut sentinels = Vec::new();
    for (i, address) in hosts.split(',').enumerate() {
        let (host, port) = address
            .rsplit_once(':')
            .ok_or_else(|| bad(&format!("\"{address}\" has no port")))?;
        let port = port
            .parse()
            .map_err(|_| bad(&format!("\"{port}\" is not a port")))?;
        sentinels.push(Node {
            name: format!("sentinel-{i}"),
            host: host.to_string(),
            port,
            pid: None,
        });
    }
    Ok(Endpoints {
        topology: cluster::Topology::Sentinel,
        nodes: Vec::new(),
        sentinels,
        master_name: Some(master.to_string()),
        // Filled in from the sentinels when the run starts: see `find_primary`.
        storage: Node {
            name: "storage".into(),
            host: String::new(),
            port: 0,
            pid: None,
        },
        password,
        control_addr: None,
    })
}

/// Why the servers lockaudit did not start cannot be used: which one, and why (the
/// message quotes the cause, so it is not also the `source()`).
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error("--redis: no server given")]
    NoServer,
    #[error("--redis: no sentinel given")]
    NoSentinel,
    #[error("--redis: cannot use {0}")]
    Server(Unreachable),
    #[error("--redis: cannot use the sentinel {0}")]
    Sentinel(Unreachable),
    #[error("--redis: cannot use the primary \"{master}\" the sentinels name: {error}")]
    Primary { master: String, error: Unreachable },
}

/// How long each server lockaudit did not start gets to accept a connection, take the
/// password and answer `PING` (servers are checked together: a bad `--redis` fails within a
/// second, naming the address and the error).
pub const PREFLIGHT_TIMEOUT: Duration = Duration::from_millis(400);

/// Checks servers lockaudit did not start before any worker does: the one server of a
/// `redis://` URL, or every sentinel of a `sentinel://` URL and the primary they name (which
/// then goes into `endpoints`: it also holds the guarded resource). Each must be reached,
/// authenticated and answer `PING` within `timeout`; the error says which did not, and why.
pub async fn preflight(endpoints: &mut Endpoints, timeout: Duration) -> Result<(), PreflightError> {
    use crate::cluster::reach;
    let password = endpoints.password.clone();
    if endpoints.topology != cluster::Topology::Sentinel {
        let node = endpoints.nodes.first().ok_or(PreflightError::NoServer)?;
        reach::connect_and_ping(node, password.as_deref(), timeout)
            .await
            .map_err(PreflightError::Server)?;
        return Ok(());
    }
    let master = endpoints.master_name.clone().unwrap_or_default();
    let answers = futures_util::future::join_all(
        endpoints
            .sentinels
            .iter()
            .map(|s| reach::sentinel_primary(s, &master, password.as_deref(), timeout)),
    )
    .await;
    let mut primary = None;
    for (sentinel, answer) in endpoints.sentinels.iter().zip(answers) {
        let named = answer.map_err(PreflightError::Sentinel)?;
        match &primary {
            None => primary = Some(named),
            Some(first) if *first != named => tracing::warn!(
                "the sentinels disagree on the primary \"{master}\": {}:{} names {}:{}, using {}:{}",
                sentinel.host, sentinel.port, named.0, named.1, first.0, first.1
            ),
            Some(_) => {}
        }
    }
    let (host, port) = primary.ok_or(PreflightError::NoSentinel)?;
    let primary = Node {
        name: "master-0".into(),
        host,
        port,
        pid: None,
    };
    reach::connect_and_ping(&primary, password.as_deref(), timeout)
        .await
        .map_err(|error| PreflightError::Primary { master, error })?;
    endpoints.storage = Node {
        name: "storage".into(),
        ..primary.clone()
    };
    endpoints.nodes = vec![primary];
    Ok(())
}
