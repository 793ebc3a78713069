//! How a client reaches the MariaDB server: its user, database and connection settings.

/// The user clients log in as (every privilege: it creates its own tables).
pub const MARIADB_USER: &str = "lockaudit";

/// The database clients use, made at bootstrap.
pub const MARIADB_DATABASE: &str = "lockaudit";

/// Connection settings for a client of the server at `host:port` (the readiness probe, the
/// lock's sessions): user, password, database, over TCP only. mysql_async would otherwise
/// move a connection to 127.0.0.1 onto the server's Unix socket (`prefer_socket`), around
/// the nemesis's per-worker proxies.
pub fn client_opts(host: &str, port: u16, password: &str) -> mysql_async::Opts {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname(host)
        .tcp_port(port)
        .user(Some(MARIADB_USER))
        .pass(Some(password))
        .db_name(Some(MARIADB_DATABASE))
        .prefer_socket(false)
        .into()
}
