//! Short-lived client connections used to check that a server is up and what it reports.

use std::collections::HashMap;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, IntoConnectionInfo, RedisResult};

/// How long one connection attempt or reply may take while probing. Loopback answers in
/// well under a millisecond; a refused connection fails at once. The bound only matters
/// for a server that accepts but never answers (stopped, or someone else's).
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// A connection to `host`:`port` (here, or a server on another host), authenticated with
/// `password` when given.
pub async fn connect_to(
    host: &str,
    port: u16,
    password: Option<&str>,
) -> RedisResult<MultiplexedConnection> {
    let mut settings = redis::RedisConnectionInfo::default().set_skip_set_lib_name();
    if let Some(password) = password {
        settings = settings.set_password(password);
    }
    let info = ConnectionAddr::Tcp(host.to_string(), port)
        .into_connection_info()?
        .set_redis_settings(settings);
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(PROBE_TIMEOUT))
        .set_response_timeout(Some(PROBE_TIMEOUT));
    redis::Client::open(info)?
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// `INFO section` as a map of its `key:value` lines.
pub async fn info(
    conn: &mut MultiplexedConnection,
    section: &str,
) -> RedisResult<HashMap<String, String>> {
    let text: String = redis::cmd("INFO").arg(section).query_async(conn).await?;
    Ok(parse_info(&text))
}

/// Parses INFO's text: `key:value` lines; `#` headers and blank lines are skipped.
pub fn parse_info(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// The pid the server on this connection reports (tells our server from a stranger that
/// grabbed the port first).
pub async fn server_pid(conn: &mut MultiplexedConnection) -> RedisResult<Option<u32>> {
    let server = info(conn, "server").await?;
    Ok(server.get("process_id").and_then(|pid| pid.parse().ok()))
}

/// `PING`: fails with LOADING while a restarted server reads its AOF.
pub async fn ping(conn: &mut MultiplexedConnection) -> RedisResult<()> {
    let _: String = redis::cmd("PING").query_async(conn).await?;
    Ok(())
}

/// `SENTINEL MASTER name` as a field map.
pub async fn sentinel_master(
    conn: &mut MultiplexedConnection,
    name: &str,
) -> RedisResult<HashMap<String, String>> {
    redis::cmd("SENTINEL")
        .arg("MASTER")
        .arg(name)
        .query_async(conn)
        .await
}

/// `SENTINEL REPLICAS name`, one field map per replica.
pub async fn sentinel_replicas(
    conn: &mut MultiplexedConnection,
    name: &str,
) -> RedisResult<Vec<HashMap<String, String>>> {
    redis::cmd("SENTINEL")
        .arg("REPLICAS")
        .arg(name)
        .query_async(conn)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_info_lines() {
        let map = parse_info("# Replication\r\nrole:slave\r\nmaster_link_status:up\r\n\r\n");
        assert_eq!(map.get("role").map(String::as_str), Some("slave"));
        assert_eq!(
            map.get("master_link_status").map(String::as_str),
            Some("up")
        );
        assert_eq!(map.len(), 2);
    }
}
