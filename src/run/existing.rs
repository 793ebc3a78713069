//! Servers lockaudit did not start (`run --redis URL`): the URL read into endpoints, and the
//! preflight that reaches, authenticates and pings each of them before any worker starts.

use std::time::Duration;

use crate::cluster::reach::Unreachable;
use crate::cluster::{self, Endpoints, Node};

/// Why a `--redis` URL names no servers lockaudit can use.
#[derive(Debug, thiserror::Error)]
pub enum RedisUrlError {
    #[error("--redis {url}: not a Redis URL: {error}")]
    NotRedis {
        url: String,
        error: redis::RedisError,
    },
    #[error("--redis {url}: only tcp addresses are supported, not {address:?}")]
    NotTcp {
        url: String,
        address: redis::ConnectionAddr,
    },
    #[error(
        "--redis {url}: {problem} (expected sentinel://[:password@]host:port[,host:port]/master-name)"
    )]
    Sentinel {
        url: String,
        problem: SentinelUrlProblem,
    },
}

/// What a `sentinel://` URL lacks.
#[derive(Debug, thiserror::Error)]
pub enum SentinelUrlProblem {
    #[error("no master name")]
    NoMasterName,
    #[error("\"{0}\" has no port")]
    NoPort(String),
    #[error("\"{0}\" is not a port")]
    NotAPort(String),
}

/// The endpoints of servers lockaudit did not start: `redis://[:password@]host:port`, or
/// `sentinel://[:password@]host:port[,host:port...]/<master name>` for a Sentinel-watched
/// primary (found through the sentinels when the run starts).
pub fn redis_url_endpoints(url: &str) -> Result<Endpoints, RedisUrlError> {
    if let Some(rest) = url.strip_prefix("sentinel://") {
        return sentinel_endpoints(rest).map_err(|problem| RedisUrlError::Sentinel {
            url: url.to_string(),
            problem,
        });
    }
    let info: redis::ConnectionInfo = url.parse().map_err(|error| RedisUrlError::NotRedis {
        url: url.to_string(),
        error,
    })?;
    let (host, port) = match info.addr() {
        redis::ConnectionAddr::Tcp(host, port) => (host.clone(), *port),
        other => {
            return Err(RedisUrlError::NotTcp {
                url: url.to_string(),
                address: other.clone(),
            })
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

fn sentinel_endpoints(rest: &str) -> Result<Endpoints, SentinelUrlProblem> {
    let (authority, master) = rest
        .split_once('/')
        .ok_or(SentinelUrlProblem::NoMasterName)?;
    if master.is_empty() {
        return Err(SentinelUrlProblem::NoMasterName);
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
            .ok_or_else(|| SentinelUrlProblem::NoPort(address.to_string()))?;
        let port = port
            .parse()
            .map_err(|_| SentinelUrlProblem::NotAPort(port.to_string()))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redis_url_that_names_no_usable_server_says_why_and_what_was_expected() {
        let why = |url: &str| redis_url_endpoints(url).unwrap_err().to_string();
        assert!(why("http://x").starts_with("--redis http://x: not a Redis URL: "));
        assert!(why("redis+unix:///tmp/r.sock").starts_with(
            "--redis redis+unix:///tmp/r.sock: only tcp addresses are supported, not Unix("
        ));
        let expected = "(expected sentinel://[:password@]host:port[,host:port]/master-name)";
        assert_eq!(
            why("sentinel://h:1"),
            format!("--redis sentinel://h:1: no master name {expected}")
        );
        assert_eq!(
            why("sentinel://h:1,h/m"),
            format!("--redis sentinel://h:1,h/m: \"h\" has no port {expected}")
        );
        assert_eq!(
            why("sentinel://h:x/m"),
            format!("--redis sentinel://h:x/m: \"x\" is not a port {expected}")
        );
        let endpoints = redis_url_endpoints("sentinel://:pw@a:1,b:2/m").unwrap();
        assert_eq!(endpoints.sentinels.len(), 2);
        assert_eq!(endpoints.password.as_deref(), Some("pw"));
    }
}
