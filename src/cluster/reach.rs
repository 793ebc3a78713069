//! Reaching servers lockaudit did not start (`run --redis URL`): before any worker starts,
//! each one must accept a connection, take the password and answer `PING` within a short
//! time, or the run stops at once naming the address and what went wrong. Without this a
//! run against a closed port or a wrong password recorded nothing and came out "valid".

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ErrorKind, IntoConnectionInfo, RedisError};

use super::Node;

/// Why a server could not be used, in words a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreachable {
    #[error("{address}: connection refused (is a server listening there?)")]
    Refused { address: String },
    #[error("{address}: no answer within {ms} ms (timed out: a stopped server, or not Redis?)")]
    TimedOut { address: String, ms: u128 },
    #[error("{address}: the server refused the password (wrong password, or one it needs was not given): {detail}")]
    WrongPassword { address: String, detail: String },
    #[error("{address}: not a Redis server (its answer to PING is not Redis's: {detail})")]
    NotRedis { address: String, detail: String },
    #[error("{address}: {detail}")]
    Other { address: String, detail: String },
}

/// `host:port`.
pub fn address(node: &Node) -> String {
    format!("{}:{}", node.host, node.port)
}

/// An error's text on one line (redis-rs's parse errors span several).
fn one_line(e: &RedisError) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn is_auth_error(e: &RedisError) -> bool {
    if e.kind() == ErrorKind::AuthenticationFailed {
        return true;
    }
    let text = e.to_string();
    [
        "WRONGPASS",
        "NOAUTH",
        "invalid password",
        "invalid username-password",
    ]
    .iter()
    .any(|m| text.contains(m))
}

/// Sorts a connection or `PING` error into the cases a person can act on.
fn classify(address: &str, timeout: Duration, e: &RedisError) -> Unreachable {
    let address = address.to_string();
    if is_auth_error(e) {
        return Unreachable::WrongPassword {
            address,
            detail: one_line(e),
        };
    }
    if e.is_connection_refusal() {
        return Unreachable::Refused { address };
    }
    if e.is_timeout() {
        return Unreachable::TimedOut {
            address,
            ms: timeout.as_millis(),
        };
    }
    if e.kind() == ErrorKind::Parse || e.is_connection_dropped() || e.is_unrecoverable_error() {
        return Unreachable::NotRedis {
            address,
            detail: one_line(e),
        };
    }
    Unreachable::Other {
        address,
        detail: one_line(e),
    }
}

/// Connects to `node` (authenticating with `password` when given) and checks that it
/// answers `PING` with `PONG`, all within `timeout`. Returns the connection.
pub async fn connect_and_ping(
    node: &Node,
    password: Option<&str>,
    timeout: Duration,
) -> Result<MultiplexedConnection, Unreachable> {
    let address = address(node);
    let attempt = async {
        let mut settings = redis::RedisConnectionInfo::default().set_skip_set_lib_name();
        if let Some(password) = password {
            settings = settings.set_password(password);
        }
        let info = ConnectionAddr::Tcp(node.host.clone(), node.port)
            .into_connection_info()?
            .set_redis_settings(settings);
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout));
        let mut conn = redis::Client::open(info)?
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let pong: redis::Value = redis::cmd("PING").query_async(&mut conn).await?;
        Ok::<_, RedisError>((conn, pong))
    };
    match tokio::time::timeout(timeout, attempt).await {
        Err(_) => Err(Unreachable::TimedOut {
            address,
            ms: timeout.as_millis(),
        }),
        Ok(Err(e)) => Err(classify(&address, timeout, &e)),
        Ok(Ok((conn, pong))) => match pong {
            redis::Value::SimpleString(s) if s == "PONG" => Ok(conn),
            other => Err(Unreachable::NotRedis {
                address,
                detail: format!("PING answered {other:?}"),
            }),
        },
    }
}

/// Asks the sentinel at `node` (reached and `PING`ed first) for the address of the primary
/// it monitors as `master`. The sentinel gets `password` first and, if it refuses it, none
/// (sentinels may or may not share the data nodes' password).
pub async fn sentinel_primary(
    node: &Node,
    master: &str,
    password: Option<&str>,
    timeout: Duration,
) -> Result<(String, u16), Unreachable> {
    let mut conn = match connect_and_ping(node, password, timeout).await {
        Ok(conn) => conn,
        Err(first @ Unreachable::WrongPassword { .. }) if password.is_some() => {
            connect_and_ping(node, None, timeout)
                .await
                .map_err(|_| first)?
        }
        Err(e) => return Err(e),
    };
    let address = address(node);
    let mut ask = redis::cmd("SENTINEL");
    ask.arg("get-master-addr-by-name").arg(master);
    let asked = ask.query_async::<Option<(String, u16)>>(&mut conn);
    match tokio::time::timeout(timeout, asked).await {
        Err(_) => Err(Unreachable::TimedOut {
            address,
            ms: timeout.as_millis(),
        }),
        Ok(Err(e)) => Err(Unreachable::Other {
            address,
            detail: format!(
                "not a sentinel, or it refused SENTINEL get-master-addr-by-name: {}",
                one_line(&e)
            ),
        }),
        Ok(Ok(None)) => Err(Unreachable::Other {
            address,
            detail: format!("the sentinel knows no master \"{master}\""),
        }),
        Ok(Ok(Some(primary))) => Ok(primary),
    }
}
