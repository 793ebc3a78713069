//! A hosts file (`--hosts FILE`): the deployment's hosts apart from any workload, so that one
//! inventory serves `run` and every cell of an `audit`, as Jepsen's nodes file does.
//!
//! ```toml
//! ssh_key = "keys/audit"          # for every host without its own
//! remote_dir = "/var/tmp"
//! accept_new_host_keys = false    # true: trust a host whose key is in no known_hosts yet
//! nodes = [
//!   "ssh://root@10.0.0.11",
//!   { url = "ssh://admin@10.0.0.12:2222", ssh_key = "keys/n2", redis_server = "/opt/redis/bin/redis-server" },
//!   { url = "ssh://root@10.0.0.13", java = "/opt/jdk/bin/java", zookeeper_jar = "/opt/zk/zookeeper.jar" },
//! ]
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::tomlfile::{self, FileError};
use crate::topology::hosts::{parse_targets, BadHost, NodeEntry};

/// The hosts, and what their connections share.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inventory {
    pub nodes: Vec<NodeEntry>,
    #[serde(default)]
    pub ssh_key: Option<PathBuf>,
    #[serde(default)]
    pub remote_dir: Option<PathBuf>,
    /// Trust a host whose SSH key is in no known_hosts yet (default: refuse it).
    #[serde(default)]
    pub accept_new_host_keys: bool,
}

impl Inventory {
    /// Reads and checks a hosts file; errors name the file, the line and the field.
    pub fn from_file(path: &Path) -> Result<Inventory, FileError> {
        let inventory: Inventory = tomlfile::read(path)?;
        inventory.check(&path.display().to_string())?;
        Ok(inventory)
    }

    fn check(&self, name: &str) -> Result<(), FileError> {
        if self.nodes.is_empty() {
            return Err(FileError::whole(name, "field `nodes`: no host"));
        }
        check_nodes(&self.nodes, self.ssh_key.as_deref())
            .map_err(|e| FileError::whole(name, e.to_string()))
    }
}

/// Hosts that cannot be used, naming the field at fault.
#[derive(Debug, thiserror::Error)]
pub enum NodesError {
    /// An entry that names no host.
    #[error("field `nodes`: {0}")]
    Nodes(BadHost),
    #[error("field `ssh_key`: {} is not a file", .0.display())]
    KeyNotAFile(std::path::PathBuf),
}

/// The checks a hosts file and a workload's `nodes` share: every entry names a host, and
/// every key given (the run's, a host's own) is a file. Errors name the field.
pub fn check_nodes(nodes: &[NodeEntry], ssh_key: Option<&Path>) -> Result<(), NodesError> {
    parse_targets(nodes).map_err(NodesError::Nodes)?;
    let own = nodes.iter().flat_map(|n| n.ssh_key.as_deref());
    match ssh_key.into_iter().chain(own).find(|key| !key.is_file()) {
        Some(key) => Err(NodesError::KeyNotAFile(key.to_path_buf())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Inventory, FileError> {
        let inventory: Inventory = tomlfile::parse(text, "hosts.toml")?;
        inventory.check("hosts.toml")?;
        Ok(inventory)
    }

    #[test]
    fn hosts_are_urls_or_tables_with_settings_of_their_own() {
        let inventory = parse(
            "ssh_key = \"/etc/hostname\"\nnodes = [\n  \"ssh://root@10.77.0.2\",\n  \
             { url = \"ssh://db:2222\", ssh_key = \"/etc/hosts\", redis_server = \"/opt/redis-server\" },\n  \
             { url = \"ssh://zk\", java = \"/opt/jdk/bin/java\", zookeeper_jar = \"/opt/zk.jar\" },\n]\n",
        )
        .unwrap();
        let targets = parse_targets(&inventory.nodes).unwrap();
        assert_eq!(targets[0].host, "10.77.0.2");
        assert_eq!(targets[0].ssh_key, None);
        assert_eq!(targets[1].port, Some(2222));
        assert_eq!(targets[1].ssh_key, Some(PathBuf::from("/etc/hosts")));
        assert_eq!(
            targets[1].redis_server.as_deref(),
            Some("/opt/redis-server")
        );
        assert_eq!(targets[2].java.as_deref(), Some("/opt/jdk/bin/java"));
        assert_eq!(targets[2].zookeeper_jar.as_deref(), Some("/opt/zk.jar"));
        // A table with a host's own settings is written back as one, a bare URL as a URL.
        let text = serde_json::to_string(&inventory.nodes).unwrap();
        assert!(text.starts_with("[\"ssh://root@10.77.0.2\","), "{text}");
        assert!(text.contains("\"zookeeper_jar\":\"/opt/zk.jar\""), "{text}");
    }

    #[test]
    fn a_bad_hosts_file_names_its_line_and_field() {
        let err = parse("nodes = [\n  { url = \"ssh://n1\", redis = \"x\" },\n]\n").unwrap_err();
        assert_eq!(err.line, 2, "{err}");
        assert!(err.to_string().contains("redis"), "{err}");
        let err = parse("nodes = []\n").unwrap_err();
        assert!(err.to_string().contains("no host"), "{err}");
        let err = parse("nodes = [\"root@n1\"]\n").unwrap_err();
        assert!(err.to_string().contains("field `nodes`"), "{err}");
        assert!(err.to_string().contains("root@n1"), "{err}");
        let err =
            parse("nodes = [{ url = \"ssh://n1\", ssh_key = \"/nonexistent/k\" }]\n").unwrap_err();
        assert!(err.to_string().contains("/nonexistent/k"), "{err}");
        let err = parse("nodes = [\"ssh://n1\"]\nport = 3\n").unwrap_err();
        assert!(err.to_string().contains("port"), "{err}");
    }
}
