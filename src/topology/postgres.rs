//! How a client reaches the PostgreSQL server: its role, database and connection settings.

use std::time::Duration;

/// The role clients log in as (a superuser: it creates its own tables).
pub const PG_USER: &str = "lockaudit";

/// The database clients use: the one `initdb` makes.
pub const PG_DATABASE: &str = "postgres";

/// Connection settings for a client of the server at `host:port` (the readiness probe,
/// the locks): role, password, database, a connect timeout.
pub fn client_config(host: &str, port: u16, password: &str) -> tokio_postgres::Config {
    let mut config = tokio_postgres::Config::new();
    config
        .host(host)
        .port(port)
        .user(PG_USER)
        .password(password)
        .dbname(PG_DATABASE)
        .application_name("lockaudit")
        .connect_timeout(Duration::from_secs(1));
    config
}
