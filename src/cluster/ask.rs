//! Asking a deployment that is running: a node's URL, the primary the sentinels name.

use std::time::Duration;

pub use crate::topology::node_url;

use super::Endpoints;

/// The primary's address as the sentinels name it now, asking each in turn (with the data
/// nodes' password, then without: sentinels may or may not share it), each within `timeout`.
pub async fn ask_sentinels(
    endpoints: &Endpoints,
    timeout: Duration,
) -> Result<(String, u16), String> {
    let master = endpoints.master_name.clone().unwrap_or_default();
    let mut last_error = String::from("no sentinel given");
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
            match tokio::time::timeout(timeout, asked).await {
                Ok(Ok(Some(address))) => return Ok(address),
                Ok(Ok(None)) => {
                    last_error = format!(
                        "{}:{} knows no master \"{master}\"",
                        sentinel.host, sentinel.port
                    )
                }
                Ok(Err(e)) => last_error = format!("{}:{}: {e}", sentinel.host, sentinel.port),
                Err(_) => {
                    last_error = format!(
                        "{}:{}: no answer in {}",
                        sentinel.host,
                        sentinel.port,
                        crate::units::fmt_span(crate::units::nanos(timeout))
                    )
                }
            }
        }
    }
    Err(format!(
        "cannot find the primary \"{master}\" through the sentinels: {last_error}"
    ))
}
