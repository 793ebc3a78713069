//! How a client reaches the etcd members: the run's user, the shortest lease they grant,
//! a connection.

use std::time::Duration;

/// The shortest lease the members grant: etcd raises any shorter TTL to 1.5 election
/// timeouts (1 s here), in whole seconds.
pub const MIN_LEASE_MS: u64 = 2000;

/// The user the run's clients authenticate as.
pub const USER: &str = "root";

/// A client of the members at `endpoints` (`http://host:port`), as [`USER`] when given a
/// password, each request limited to `timeout`.
pub async fn connect(
    endpoints: &[String],
    password: Option<&str>,
    timeout: Duration,
) -> Result<etcd_client::Client, etcd_client::Error> {
    let mut options = etcd_client::ConnectOptions::new()
        .with_timeout(timeout)
        .with_connect_timeout(timeout)
        .with_auto_token_refresh(true);
    if let Some(password) = password {
        options = options.with_user(USER, password);
    }
    etcd_client::Client::connect(endpoints, Some(options)).await
}
