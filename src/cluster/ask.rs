//! Asking a deployment that is running: a node's URL, the primary the sentinels name.

use std::time::Duration;

pub use crate::topology::node_url;

use super::Endpoints;

/// No sentinel named the primary: its name, and what the last sentinel asked said.
#[derive(Debug, thiserror::Error)]
#[error("cannot find the primary \"{master}\" through the sentinels: {last}")]
pub struct NoPrimaryNamed {
    pub master: String,
    pub last: SentinelAnswer,
}

/// What a sentinel answered instead of the primary's address.
#[derive(Debug, thiserror::Error)]
pub enum SentinelAnswer {
    #[error("no sentinel given")]
    NoSentinel,
    #[error("{host}:{port} knows no master \"{master}\"")]
    UnknownMaster {
        host: String,
        port: u16,
        master: String,
    },
    #[error("{host}:{port}: {error}")]
    Failed {
        host: String,
        port: u16,
        error: redis::RedisError,
    },
    /// `within` as the units module writes a span (`1 s`).
    #[error("{host}:{port}: no answer in {within}")]
    NoAnswer {
        host: String,
        port: u16,
        within: String,
    },
}

/// The primary's address as the sentinels name it now, asking each in turn (with the data
/// nodes' password, then without: sentinels may or may not share it), each within `timeout`.
pub async fn ask_sentinels(
    endpoints: &Endpoints,
    timeout: Duration,
) -> Result<(String, u16), NoPrimaryNamed> {
    let master = endpoints.master_name.clone().unwrap_or_default();
    let mut last = SentinelAnswer::NoSentinel;
    for sentinel in &endpoints.sentinels {
        let mut passwords = vec![endpoints.password.as_deref()];
        if endpoints.password.is_some() {
            passwords.push(None);
        }
        for password in passwords {
            let url = node_url(sentinel, password);
            let asked = async {
                let client = redis::Client::open(url.as_str())?;
                let mut connection = client.get_multiplexed_async_connection().await?;
                redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(&master)
                    .query_async::<Option<(String, u16)>>(&mut connection)
                    .await
            };
            let (host, port) = (sentinel.host.clone(), sentinel.port);
            last = match tokio::time::timeout(timeout, asked).await {
                Ok(Ok(Some(address))) => return Ok(address),
                Ok(Ok(None)) => SentinelAnswer::UnknownMaster {
                    host,
                    port,
                    master: master.clone(),
                },
                Ok(Err(error)) => SentinelAnswer::Failed { host, port, error },
                Err(_) => SentinelAnswer::NoAnswer {
                    host,
                    port,
                    within: crate::units::fmt_span(crate::units::nanos(timeout)),
                },
            };
        }
    }
    Err(NoPrimaryNamed { master, last })
}
