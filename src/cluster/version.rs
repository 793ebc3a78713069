//! What version each server of a run says it is, asked over the wire once the servers
//! serve (their binaries may be on other hosts, or not lockaudit's at all with `--redis`):
//! Redis's `INFO server`, PostgreSQL's `SHOW server_version`, etcd's status, ZooKeeper's
//! `srvr`, MariaDB's `SELECT VERSION()`. A run records them in run.json: a finding is a finding about those versions.

use std::time::Duration;

pub use crate::topology::ServerVersion;

use super::{Endpoints, Node};

/// How long one server may take to say its version.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// The protocol a server speaks, as its service's row says (`Service::speaks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaks {
    Redis,
    Postgres,
    Etcd,
    Zookeeper,
    Mariadb,
}

/// Every server of `endpoints`, lock servers first, then sentinels and the storage server,
/// with its version; asked side by side.
pub async fn server_versions(endpoints: &Endpoints) -> Vec<ServerVersion> {
    let lock = super::service(endpoints.topology).speaks;
    let servers = endpoints
        .nodes
        .iter()
        .map(|n| (n, lock))
        .chain(endpoints.sentinels.iter().map(|n| (n, Speaks::Redis)))
        .chain(std::iter::once((&endpoints.storage, Speaks::Redis)));
    let password = endpoints.password.as_deref();
    let asks = servers.map(|(node, speaks)| async move {
        let asked = tokio::time::timeout(ASK_TIMEOUT, ask(node, speaks, password)).await;
        let (version, error) = match asked {
            Ok(Ok(version)) => (Some(version), None),
            Ok(Err(why)) => (None, Some(why)),
            Err(_) => (None, Some(format!("no answer within {ASK_TIMEOUT:?}"))),
        };
        ServerVersion {
            name: node.name.clone(),
            version,
            error,
        }
    });
    futures_util::future::join_all(asks).await
}

/// The version, or why not in words: what run.json's `error` says, whichever client library
/// failed (so a String, not a type of its own).
async fn ask(node: &Node, speaks: Speaks, password: Option<&str>) -> Result<String, String> {
    match speaks {
        Speaks::Redis => {
            let mut conn = super::probe::connect_to(&node.host, node.port, password)
                .await
                .map_err(|e| e.to_string())?;
            let info = super::probe::info(&mut conn, "server")
                .await
                .map_err(|e| e.to_string())?;
            info.get("redis_version")
                .map(|v| format!("redis {v}"))
                .ok_or_else(|| "INFO server has no redis_version".to_string())
        }
        Speaks::Postgres => {
            let config =
                super::postgres::client_config(&node.host, node.port, password.unwrap_or(""));
            let (client, connection) = config
                .connect(tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            let driver = tokio::spawn(connection);
            let row = client.query_one("SHOW server_version", &[]).await;
            drop(client);
            let _ = driver.await;
            let version: String = row.and_then(|r| r.try_get(0)).map_err(|e| e.to_string())?;
            Ok(format!("postgres {version}"))
        }
        Speaks::Etcd => {
            let url = format!("http://{}:{}", node.host, node.port);
            let mut client = super::etcd::connect(&[url], password, ASK_TIMEOUT)
                .await
                .map_err(|e| e.to_string())?;
            let status = client.status().await.map_err(|e| e.to_string())?;
            Ok(format!("etcd {}", status.version()))
        }
        Speaks::Zookeeper => {
            let reply = super::zookeeper::srvr_at(&node.host, node.port)
                .await
                .map_err(|e| e.to_string())?;
            zookeeper_version(&reply)
        }
        Speaks::Mariadb => {
            super::mariadb::version(&node.host, node.port, password.unwrap_or("")).await
        }
    }
}

/// `srvr`'s first line, `Zookeeper version: 3.8.4-..., built on ...`, as `zookeeper 3.8.4-...`.
fn zookeeper_version(reply: &str) -> Result<String, String> {
    reply
        .lines()
        .find_map(|l| l.strip_prefix("Zookeeper version:"))
        .map(|v| {
            let v = v.split(", built on").next().unwrap_or(v).trim();
            format!("zookeeper {v}")
        })
        .ok_or_else(|| reply.trim().chars().take(120).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zookeeper_says_its_version_in_srvr() {
        let reply = "Zookeeper version: 3.8.4-9316c2a7a97e1666d8f4593f34dd6fc36ecc436c, built on 2024-02-12 22:16 UTC\nLatency min/avg/max: 0/0.0/0\nMode: follower\n";
        assert_eq!(
            zookeeper_version(reply).unwrap(),
            "zookeeper 3.8.4-9316c2a7a97e1666d8f4593f34dd6fc36ecc436c"
        );
        assert!(
            zookeeper_version("srvr is not executed because it is not in the whitelist.")
                .unwrap_err()
                .contains("whitelist")
        );
    }
}
