//! How a client reaches the ZooKeeper servers: the run's digest user, the sessions they
//! grant, the connect string.

/// The digest user the run's clients authenticate as, with the run's password.
pub const USER: &str = "lockaudit";

/// The servers' tick, the unit of every ZooKeeper timeout.
pub const TICK_MS: u64 = 200;

/// The shortest and longest session the servers grant (ZooKeeper's defaults: 2 and 20
/// ticks). A client asking for less or more gets the bound.
pub const MIN_SESSION_MS: u64 = 2 * TICK_MS;
pub const MAX_SESSION_MS: u64 = 20 * TICK_MS;

/// What a client adds as `digest` auth to be the run's user: `user:password`.
pub fn digest(password: &str) -> String {
    format!("{USER}:{password}")
}

/// The connect string of `servers` (`127.0.0.1:p0,127.0.0.1:p1,...`), as clients take it.
pub fn connect_string<'a>(hosts_ports: impl IntoIterator<Item = (&'a str, u16)>) -> String {
    hosts_ports
        .into_iter()
        .map(|(host, port)| format!("{host}:{port}"))
        .collect::<Vec<_>>()
        .join(",")
}
