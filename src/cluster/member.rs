//! A server of a service that elects its leader among its servers (an etcd member, a
//! ZooKeeper server), run on an SSH host by `remote` as a Redis server is: what it runs
//! with where a Redis server has its config, how its data folder is readied, and how
//! lockaudit tells that it serves.

use std::time::Duration;

use super::error::ClusterError;
use super::{etcd, zookeeper};
use crate::shell::quote;

/// The service a member belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Etcd,
    ZooKeeper,
}

/// A member on a host (`remote::RemoteConfig::member`).
#[derive(Debug, Clone)]
pub struct OnHost {
    pub service: Service,
    /// Its arguments after the program: etcd's flags, or the JVM's and the config's path.
    pub args: Vec<String>,
    /// Where the other members reach it: the ports a cut between members drops (etcd's
    /// peer port; ZooKeeper's quorum and election ports).
    pub peer_ports: Vec<u16>,
    /// Its config file's text, uploaded as a Redis server's config is (ZooKeeper's, which
    /// holds no secret); None: it runs on its flags alone (etcd).
    pub config: Option<String>,
    /// Files its data folder holds at every start, by name: ZooKeeper's `myid`.
    pub data_files: Vec<(String, String)>,
}

impl OnHost {
    /// The shell that readies its data folder `dir`, inside the run's folder `run`, before
    /// a start (emptied first unless `keep_data`), ending the script if it fails. etcd makes
    /// its data folder itself, and a restart must find it as it was; a member given files
    /// there gets the folder made and the files written at every start.
    pub fn prepare(&self, run: &str, dir: &str, keep_data: bool) -> String {
        let (run, dir) = (quote(run), quote(dir));
        let mut steps = Vec::new();
        if !keep_data {
            steps.push(format!("rm -rf {dir}"));
        }
        if self.data_files.is_empty() {
            steps.push(format!("mkdir -p {run}"));
        } else {
            steps.push(format!("mkdir -p {dir}"));
            for (name, text) in &self.data_files {
                steps.push(format!(
                    "printf '%s' {} > {dir}/{}",
                    quote(text),
                    quote(name)
                ));
            }
        }
        format!("{} || exit 1; ", steps.join(" && "))
    }

    /// Ok once the member at `host:port` serves: an etcd member knows a leader and serves a
    /// linearizable read (as the run's user with `password`, once authentication is on); a
    /// ZooKeeper server serves as leader or follower. Else what it said.
    pub async fn serves(
        &self,
        host: &str,
        port: u16,
        password: Option<&str>,
    ) -> Result<(), String> {
        match self.service {
            Service::Etcd => etcd::probe(&format!("http://{host}:{port}"), password).await,
            Service::ZooKeeper => zookeeper::mode_at(host, port).await.map(|_| ()),
        }
    }

    /// How long a start may take until it serves: a ZooKeeper server as long as locally
    /// (three JVMs starting on loaded hosts), an etcd member `otherwise`.
    pub fn ready_timeout(&self, otherwise: Duration) -> Duration {
        match self.service {
            Service::Etcd => otherwise,
            Service::ZooKeeper => zookeeper::READY_TIMEOUT,
        }
    }

    /// Err where the member cannot come back with an empty data folder (etcd's).
    pub fn empty_restart(&self, name: &str) -> Result<(), ClusterError> {
        match self.service {
            Service::Etcd => Err(etcd::no_empty_restart(name)),
            Service::ZooKeeper => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(service: Service, data_files: Vec<(String, String)>) -> OnHost {
        OnHost {
            service,
            args: Vec::new(),
            peer_ports: vec![7403],
            config: None,
            data_files,
        }
    }

    #[test]
    fn an_etcd_member_makes_its_own_data_folder() {
        let etcd = member(Service::Etcd, Vec::new());
        assert_eq!(
            etcd.prepare("/tmp/r un", "/tmp/r un/etcd-0", false),
            "rm -rf '/tmp/r un/etcd-0' && mkdir -p '/tmp/r un' || exit 1; "
        );
        assert_eq!(
            etcd.prepare("/tmp/r", "/tmp/r/etcd-0", true),
            "mkdir -p /tmp/r || exit 1; "
        );
        assert!(etcd.empty_restart("etcd-0").is_err());
    }

    #[test]
    fn a_zookeeper_server_finds_its_myid_at_every_start() {
        let zk = member(Service::ZooKeeper, vec![("myid".into(), "2\n".into())]);
        let kept = zk.prepare("/tmp/r", "/tmp/r/zk-1", true);
        assert_eq!(
            kept,
            "mkdir -p /tmp/r/zk-1 && printf '%s' '2\n' > /tmp/r/zk-1/myid || exit 1; "
        );
        let emptied = zk.prepare("/tmp/r", "/tmp/r/zk-1", false);
        assert!(
            emptied.starts_with("rm -rf /tmp/r/zk-1 && mkdir -p"),
            "{emptied}"
        );
        assert!(zk.empty_restart("zk-1").is_ok());
    }
}
