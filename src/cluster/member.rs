//! A server of a service that elects its leader among its servers (an etcd member, a
//! ZooKeeper server), run on an SSH host by `remote` as a Redis server is: what it runs
//! with where a Redis server has its config, how its data folder is readied, and how
//! lockaudit tells that it serves.

use std::path::Path;
use std::time::Duration;

use super::error::ClusterError;
use super::machine::Prepare;
use super::{etcd, zookeeper};

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
    /// What readies its data folder `dir`, inside the run's folder `run`, before a start
    /// (emptied first unless `keep_data`). etcd makes its data folder itself, and a
    /// restart must find it as it was; a member given files there gets the folder made and
    /// the files written at every start.
    pub fn prepare(&self, run: &Path, dir: &Path, keep_data: bool) -> Vec<Prepare> {
        let mut steps = Vec::new();
        if !keep_data {
            steps.push(Prepare::Empty(dir.to_path_buf()));
        }
        if self.data_files.is_empty() {
            steps.push(Prepare::Make(run.to_path_buf()));
        } else {
            steps.push(Prepare::Make(dir.to_path_buf()));
            for (name, text) in &self.data_files {
                steps.push(Prepare::Write(dir.join(name), text.clone()));
            }
        }
        steps
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
        let (run, dir) = (Path::new("/tmp/r"), Path::new("/tmp/r/etcd-0"));
        assert_eq!(
            etcd.prepare(run, dir, false),
            [Prepare::Empty(dir.into()), Prepare::Make(run.into())]
        );
        assert_eq!(etcd.prepare(run, dir, true), [Prepare::Make(run.into())]);
        assert!(etcd.empty_restart("etcd-0").is_err());
    }

    #[test]
    fn a_zookeeper_server_finds_its_myid_at_every_start() {
        let zk = member(Service::ZooKeeper, vec![("myid".into(), "2\n".into())]);
        let (run, dir) = (Path::new("/tmp/r"), Path::new("/tmp/r/zk-1"));
        let myid = Prepare::Write(dir.join("myid"), "2\n".into());
        assert_eq!(
            zk.prepare(run, dir, true),
            [Prepare::Make(dir.into()), myid.clone()]
        );
        assert_eq!(
            zk.prepare(run, dir, false),
            [Prepare::Empty(dir.into()), Prepare::Make(dir.into()), myid]
        );
        assert!(zk.empty_restart("zk-1").is_ok());
    }
}
