//! The hosts a run's servers may run on, as a workload's `nodes`, a hosts file or
//! `--node` name them: `ssh://` URLs, each with settings of that host's own. Plain data:
//! `cluster` connects to them (`cluster::ssh`), the workload and its files only read and
//! check them.

use std::fmt;
use std::path::PathBuf;

/// An `ssh://` URL that names no host lockaudit can use, and why. Bad input: its message
/// is a cluster spec's (`invalid cluster: ...`), as the CLI shows it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cluster: host `{url}`: {reason}")]
pub struct BadHost {
    pub url: String,
    pub reason: &'static str,
}

/// `ssh://[user@]host[:port]`: where a node runs, and the settings of that host's own.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SshTarget {
    pub user: Option<String>,
    /// A name or an IPv4 address (what the workers connect to as well).
    pub host: String,
    pub port: Option<u16>,
    /// The private key for this host (instead of the run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_key: Option<PathBuf>,
    /// The redis-server program on this host (instead of the run's, or PATH's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_server: Option<String>,
    /// The etcd program on this host (instead of PATH's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<String>,
    /// The java program on this host, for ZooKeeper (instead of PATH's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub java: Option<String>,
    /// ZooKeeper's jar on this host (instead of Debian's `/usr/share/java/zookeeper.jar`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zookeeper_jar: Option<String>,
}

/// One entry of a workload's `nodes`: a URL, or a table with the URL and settings of that
/// host's own (`{ url = "ssh://root@n2", ssh_key = "keys/n2", redis_server = "/opt/redis/bin/redis-server",
/// etcd = "/opt/etcd/etcd", java = "/opt/jdk/bin/java", zookeeper_jar = "/opt/zk/zookeeper.jar" }`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEntry {
    pub url: String,
    pub ssh_key: Option<PathBuf>,
    pub redis_server: Option<String>,
    pub etcd: Option<String>,
    pub java: Option<String>,
    pub zookeeper_jar: Option<String>,
}

/// The table form of a [`NodeEntry`], read with serde's own messages for unknown or
/// mistyped fields.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeTable {
    url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ssh_key: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    redis_server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    etcd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    java: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    zookeeper_jar: Option<String>,
}

impl From<String> for NodeEntry {
    fn from(url: String) -> NodeEntry {
        NodeEntry {
            url,
            ssh_key: None,
            redis_server: None,
            etcd: None,
            java: None,
            zookeeper_jar: None,
        }
    }
}

impl From<&str> for NodeEntry {
    fn from(url: &str) -> NodeEntry {
        NodeEntry::from(url.to_string())
    }
}

impl NodeEntry {
    /// The target it names, with its settings.
    pub fn target(&self) -> Result<SshTarget, BadHost> {
        let mut target = SshTarget::parse(&self.url)?;
        target.ssh_key = self.ssh_key.clone();
        target.redis_server = self.redis_server.clone();
        target.etcd = self.etcd.clone();
        target.java = self.java.clone();
        target.zookeeper_jar = self.zookeeper_jar.clone();
        Ok(target)
    }
}

impl serde::Serialize for NodeEntry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let table = NodeTable {
            url: self.url.clone(),
            ssh_key: self.ssh_key.clone(),
            redis_server: self.redis_server.clone(),
            etcd: self.etcd.clone(),
            java: self.java.clone(),
            zookeeper_jar: self.zookeeper_jar.clone(),
        };
        if NodeEntry::from(self.url.clone()) == *self {
            return s.serialize_str(&table.url);
        }
        table.serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for NodeEntry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entry;
        impl<'de> serde::de::Visitor<'de> for Entry {
            type Value = NodeEntry;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "an ssh:// URL, or a table with `url` and optionally `ssh_key`, `redis_server`, `etcd`, `java`, `zookeeper_jar`",
                )
            }
            fn visit_str<E: serde::de::Error>(self, url: &str) -> Result<NodeEntry, E> {
                Ok(NodeEntry::from(url))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<NodeEntry, A::Error> {
                let t: NodeTable = serde::Deserialize::deserialize(
                    serde::de::value::MapAccessDeserializer::new(map),
                )?;
                Ok(NodeEntry {
                    url: t.url,
                    ssh_key: t.ssh_key,
                    redis_server: t.redis_server,
                    etcd: t.etcd,
                    java: t.java,
                    zookeeper_jar: t.zookeeper_jar,
                })
            }
        }
        d.deserialize_any(Entry)
    }
}

impl SshTarget {
    /// Parses `ssh://[user@]host[:port]`. The user and host must be plain names, so that
    /// none can pass for an ssh option (`-oProxyCommand=...`).
    pub fn parse(url: &str) -> Result<SshTarget, BadHost> {
        let bad = |reason| BadHost {
            url: url.to_string(),
            reason,
        };
        let rest = url
            .strip_prefix("ssh://")
            .ok_or_else(|| bad("expected ssh://[user@]host[:port]"))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (user, hostport) = match rest.split_once('@') {
            Some((user, hostport)) => (Some(user.to_string()), hostport),
            None => (None, rest),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((host, port)) => (
                host,
                Some(
                    port.parse::<u16>()
                        .ok()
                        .filter(|p| *p > 0)
                        .ok_or_else(|| bad("the port must be 1..65535"))?,
                ),
            ),
            None => (hostport, None),
        };
        let plain = |s: &str| {
            !s.is_empty()
                && !s.starts_with('-')
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        };
        if !plain(host) {
            return Err(bad("the host must be a name or an IPv4 address"));
        }
        if let Some(user) = &user {
            if !plain(user) {
                return Err(bad("the user must be a plain name"));
            }
        }
        Ok(SshTarget {
            user,
            host: host.to_string(),
            port,
            ssh_key: None,
            redis_server: None,
            etcd: None,
            java: None,
            zookeeper_jar: None,
        })
    }

    /// `user@host` or `host`, as ssh takes it.
    pub fn destination(&self) -> String {
        match &self.user {
            Some(user) => format!("{user}@{}", self.host),
            None => self.host.clone(),
        }
    }
}

impl fmt::Display for SshTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ssh://{}", self.destination())?;
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
    }
}

/// For messages and tests: parses `ssh://` URLs, naming the one that is wrong.
pub fn parse_targets(nodes: &[NodeEntry]) -> Result<Vec<SshTarget>, BadHost> {
    nodes.iter().map(NodeEntry::target).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_print_back() {
        let t = SshTarget::parse("ssh://root@10.77.0.2").unwrap();
        assert_eq!(t.user.as_deref(), Some("root"));
        assert_eq!(t.host, "10.77.0.2");
        assert_eq!(t.port, None);
        assert_eq!(t.to_string(), "ssh://root@10.77.0.2");
        let t = SshTarget::parse("ssh://db-3.example:2222/").unwrap();
        assert_eq!(
            (t.user, t.host.as_str(), t.port),
            (None, "db-3.example", Some(2222))
        );
    }
    #[test]
    fn targets_that_could_be_options_or_shell_are_refused() {
        for bad in [
            "10.77.0.2",
            "ssh://",
            "ssh://-oProxyCommand=id",
            "ssh://root@-x",
            "ssh://-x@host",
            "ssh://host:0",
            "ssh://host:99999",
            "ssh://a b",
            "ssh://h;id",
            "ssh://$(id)@h",
        ] {
            let err = SshTarget::parse(bad).unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
    }
}
