//! A Redis replica made to follow a primary, and promoted, by hand: what the nemesis's
//! manual failover of the replicated topology asks of the servers (the proxies standing for
//! the primary's address are the nemesis's own, see `nemesis::network`). The servers are
//! named by address, so this works as well on servers lockaudit did not start.

use std::net::SocketAddr;
use std::time::Duration;

use redis::aio::MultiplexedConnection;

/// How long a replica may take to be in sync with its new primary.
const SYNC_TIMEOUT: Duration = Duration::from_secs(15);

/// Why a replica could not be re-pointed, promoted or seen in sync; each names the server.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error("{name}: {error}")]
    Connect {
        name: String,
        error: redis::RedisError,
    },
    #[error("{name}: no answer in 2 s")]
    NoAnswer { name: String },
    /// A command it refused or did not answer: `REPLICAOF`, `REPLICAOF NO ONE`, `INFO`.
    #[error("{name}: {command}: {error}")]
    Command {
        name: String,
        command: &'static str,
        error: redis::RedisError,
    },
    #[error("{name} did not sync with the primary in {secs} s")]
    NotInSync { name: String, secs: u64 },
}

/// A Redis server at `addr`, as the nemesis reaches it.
#[derive(Debug, Clone)]
pub struct Replica {
    /// Its node name, for messages.
    pub name: String,
    pub addr: SocketAddr,
    pub password: Option<String>,
}

impl Replica {
    async fn connection(&self) -> Result<MultiplexedConnection, ReplicaError> {
        let (ip, port) = (self.addr.ip(), self.addr.port());
        let url = match &self.password {
            Some(pw) => format!("redis://:{pw}@{ip}:{port}/"),
            None => format!("redis://{ip}:{port}/"),
        };
        let connect = |error| ReplicaError::Connect {
            name: self.name.clone(),
            error,
        };
        let client = redis::Client::open(url).map_err(connect)?;
        tokio::time::timeout(
            Duration::from_secs(2),
            client.get_multiplexed_async_connection(),
        )
        .await
        .map_err(|_| ReplicaError::NoAnswer {
            name: self.name.clone(),
        })?
        .map_err(connect)
    }

    fn refused(&self, command: &'static str) -> impl Fn(redis::RedisError) -> ReplicaError + '_ {
        move |error| ReplicaError::Command {
            name: self.name.clone(),
            command,
            error,
        }
    }

    /// `REPLICAOF primary`: from now on it follows the server at that address (a proxy's,
    /// when the nemesis is to cut the link).
    pub async fn follow(&self, primary: SocketAddr) -> Result<(), ReplicaError> {
        let mut c = self.connection().await?;
        redis::cmd("REPLICAOF")
            .arg(primary.ip().to_string())
            .arg(primary.port())
            .query_async::<()>(&mut c)
            .await
            .map_err(self.refused("REPLICAOF"))
    }

    /// `REPLICAOF NO ONE`: it becomes a primary with what it has.
    pub async fn promote(&self) -> Result<(), ReplicaError> {
        let mut c = self.connection().await?;
        redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .query_async::<()>(&mut c)
            .await
            .map_err(self.refused("REPLICAOF NO ONE"))
    }

    /// Waits until its link to its primary is up (`master_link_status:up`).
    pub async fn wait_in_sync(&self) -> Result<(), ReplicaError> {
        let mut c = self.connection().await?;
        let until = tokio::time::Instant::now() + SYNC_TIMEOUT;
        loop {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query_async(&mut c)
                .await
                .map_err(self.refused("INFO"))?;
            if info.contains("master_link_status:up") {
                return Ok(());
            }
            if tokio::time::Instant::now() > until {
                return Err(ReplicaError::NotInSync {
                    name: self.name.clone(),
                    secs: SYNC_TIMEOUT.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
