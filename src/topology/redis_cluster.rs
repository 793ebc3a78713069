//! How a client reads a Redis Cluster's map: `CLUSTER NODES`, each node's name and port.

use std::time::Duration;

/// One line of `CLUSTER NODES`: a node's id, data port, role and master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLine {
    pub id: String,
    pub port: u16,
    pub master: bool,
    /// A replica's master id.
    pub master_id: Option<String>,
    /// The announced hostname (`ip:port@cport,hostname`): lockaudit's node name.
    pub name: Option<String>,
}

/// Parses `CLUSTER NODES`: `<id> <ip:port@cport> <flags> <master|-> ...`.
pub fn parse_nodes(text: &str) -> Vec<NodeLine> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split(' ');
            let id = f.next()?.to_string();
            let addr = f.next()?;
            let port = addr.split('@').next()?.rsplit(':').next()?.parse().ok()?;
            let name = addr
                .split_once(',')
                .map(|(_, h)| h.to_string())
                .filter(|h| !h.is_empty());
            let flags = f.next()?;
            let master_id = f.next().filter(|m| *m != "-").map(str::to_string);
            Some(NodeLine {
                id,
                port,
                master: flags.split(',').any(|x| x == "master"),
                master_id,
                name,
            })
        })
        .collect()
}

/// Every node's name (its announced hostname) and real data port, as the node at
/// `host:port` (a proxy in front of one, maybe) lists them; None if it does not answer
/// within `limit`.
pub async fn named_ports(
    host: &str,
    port: u16,
    password: Option<&str>,
    limit: Duration,
) -> Option<Vec<(String, u16)>> {
    let ask = async {
        let mut settings = redis::RedisConnectionInfo::default().set_skip_set_lib_name();
        if let Some(pw) = password {
            settings = settings.set_password(pw);
        }
        let info = redis::IntoConnectionInfo::into_connection_info(redis::ConnectionAddr::Tcp(
            host.to_string(),
            port,
        ))
        .ok()?
        .set_redis_settings(settings);
        let mut conn = redis::Client::open(info)
            .ok()?
            .get_multiplexed_async_connection()
            .await
            .ok()?;
        let text: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async(&mut conn)
            .await
            .ok()?;
        Some(
            parse_nodes(&text)
                .into_iter()
                .filter_map(|l| Some((l.name?, l.port)))
                .collect(),
        )
    };
    tokio::time::timeout(limit, ask).await.ok().flatten()
}
