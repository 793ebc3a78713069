//! One MariaDB server that lockaudit owns, for the MariaDB lock (`mariadb-get-lock`).
//!
//! Started as PostgreSQL is (`postgres.rs`): `mariadb-install-db` into a private data
//! folder, then Debian's `mariadbd` in the foreground as a child of the controller, bound to
//! 127.0.0.1 on a free port, user `lockaudit` with a generated password, InnoDB flushing its
//! log at every commit, so that a SIGKILL and a restart on the same folder is a real crash
//! recovery. Ready once an authenticated connection reports our data folder (which tells
//! our server from a stranger on the port). mariadbd is one process (threads, no children):
//! a pause or kill reaches all of it.
//!
//! The data folder and the server's Unix socket (mariadbd always opens one; nobody is
//! meant to use it) are in a private folder of their own (`scratch`:
//! `$TMPDIR/lockaudit-mariadb-XXXXXX`, 0700), removed at the end of the run, on an error and
//! on Ctrl-C; the log, which lockaudit opens and hands to the server as its stdout and
//! stderr, is in the run folder (`<run>/mariadb/master-0.log`). As root: mariadbd refuses to
//! run as root, so `mariadb-install-db` and `mariadbd` run as the `mysql` system user
//! (Debian's package creates it; `nobody` otherwise), switched to in the child before exec;
//! the private folder is that user's, in a temporary folder it can reach, and the run folder
//! is never opened to it.
//!
//! The lock user is made at bootstrap by the SQL file `mariadb-install-db --extra-file`
//! runs (0600, that user's, removed once it ran): the password is in no argument. Every
//! other account (`root`, passwordless on 127.0.0.1 as Debian's bootstrap makes it) is
//! removed there, so the port lets in the lock user only, with its password, from any
//! address (the server binds loopback here, the host's address on a host).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use super::error::ClusterError;
use super::instance::{start_on_port, Instance, OneProcess};
use super::machine::{Launch, Local, Machine, Prepare, TAIL_LINES};
use super::ports::{self, PortChoice};
use super::scratch::ScratchDir;
use super::{binaries, generate_password, private_folders, start_storage};
use super::{Cluster, ClusterSpec, Topology};
pub use crate::topology::mariadb::{client_opts, MARIADB_DATABASE, MARIADB_USER};

/// The environment variable naming the `mariadbd` program (`mariadb-install-db` is looked
/// for beside it, then on PATH; it bootstraps with the server of its own installation).
pub const MARIADBD_ENV: &str = "LOCKAUDIT_MARIADBD";

/// Where Debian installs the server (not on a normal user's PATH) and its bootstrap script.
const DEBIAN_MARIADBD: &str = "/usr/sbin/mariadbd";
const DEBIAN_INSTALL_DB: &str = "/usr/bin/mariadb-install-db";

/// How long `mariadb-install-db` may take (measured: about 2 s here).
const INSTALL_TIMEOUT: Duration = Duration::from_secs(120);

/// How long the readiness probe and `end_client_sessions` wait for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// The programs: `mariadbd` and `mariadb-install-db`.
#[derive(Debug, Clone)]
pub struct Programs {
    pub mariadbd: PathBuf,
    pub install_db: PathBuf,
}

impl Programs {
    /// `$LOCKAUDIT_MARIADBD`, else `mariadbd` on PATH, else Debian's `/usr/sbin/mariadbd`;
    /// `mariadb-install-db` beside it, on PATH or Debian's. Missing: which package has them.
    pub fn find() -> Result<Programs, ClusterError> {
        let given = std::env::var_os(MARIADBD_ENV).map(PathBuf::from);
        let missing = |program: &str, location: String| ClusterError::MissingService {
            program: program.into(),
            package: "mariadb-server".into(),
            location,
            env: MARIADBD_ENV.into(),
        };
        let mariadbd = match &given {
            Some(path) => executable(path).then(|| path.clone()).ok_or_else(|| {
                missing(
                    "mariadbd",
                    format!("at {} (from ${MARIADBD_ENV})", path.display()),
                )
            })?,
            None => on_path("mariadbd")
                .or_else(|| executable(Path::new(DEBIAN_MARIADBD)).then(|| DEBIAN_MARIADBD.into()))
                .ok_or_else(|| missing("mariadbd", format!("on PATH or at {DEBIAN_MARIADBD}")))?,
        };
        let beside = mariadbd.with_file_name("mariadb-install-db");
        let install_db = [beside.clone()]
            .into_iter()
            .find(|p| executable(p))
            .or_else(|| on_path("mariadb-install-db"))
            .or_else(|| executable(Path::new(DEBIAN_INSTALL_DB)).then(|| DEBIAN_INSTALL_DB.into()))
            .ok_or_else(|| {
                missing(
                    "mariadb-install-db",
                    format!(
                        "beside {}, on PATH or at {DEBIAN_INSTALL_DB}",
                        mariadbd.display()
                    ),
                )
            })?;
        Ok(Programs {
            mariadbd,
            install_db,
        })
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|candidate| executable(candidate))
}

fn executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

pub use super::machine::RunAs;

/// Everything needed to start (and restart) one MariaDB server.
#[derive(Debug, Clone)]
pub struct MariadbConfig {
    pub name: String,
    pub programs: Programs,
    /// The data folder (absolute), in the server's private folder (`ScratchDir`).
    pub dir: PathBuf,
    /// In the run folder, opened by lockaudit: the server need not reach it.
    pub log: PathBuf,
    pub password: String,
    pub run_as: Option<RunAs>,
    /// Where it runs.
    pub machine: Arc<dyn Machine>,
}

impl MariadbConfig {
    /// The private folder that holds the data folder, the socket and the bootstrap file.
    fn root(&self) -> &Path {
        self.dir.parent().unwrap_or(Path::new("/"))
    }

    /// The settings the bootstrap and the server share. Temporary tables in the private
    /// folder, not in /tmp: they are the server's alone, and two servers bootstrapping side
    /// by side (an audit's cells) were seen to trip over each other's there ("Error on
    /// delete of '/tmp/#sql-temptable-...'"). A small redo log and buffer pool: the
    /// defaults (a 96 MB log file written out at bootstrap) cost disk and start time, and a
    /// run's few rows need neither.
    fn shared_settings(&self) -> [String; 3] {
        [
            format!("--tmpdir={}", self.root().display()),
            "--innodb-log-file-size=8M".into(),
            "--innodb-buffer-pool-size=32M".into(),
        ]
    }

    /// The foreground server. `--no-defaults`: Debian's /etc/mysql files are not ours.
    /// `innodb-flush-log-at-trx-commit=1` is spelled out although it is the default: a
    /// commit acknowledged before its log is flushed would make the crash tests
    /// meaningless. The password is in no argument (it is in the grant tables).
    fn launch(&self, port: u16) -> Launch {
        let mut launch = Launch::new(&self.name, &self.programs.mariadbd, &self.log)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.dir.display()))
            .arg(format!(
                "--socket={}",
                self.root().join("mariadbd.sock").display()
            ))
            .arg(format!(
                "--pid-file={}",
                self.root().join("mariadbd.pid").display()
            ))
            .args(self.shared_settings())
            .arg(format!("--port={port}"))
            .args([
                &format!("--bind-address={}", self.machine.addr()),
                "--skip-name-resolve",
                "--innodb-flush-log-at-trx-commit=1",
                "--max-connections=200",
                "--skip-log-bin",
            ]);
        launch.run_as = self.run_as.clone();
        launch
    }

    /// The SQL `mariadb-install-db` runs after its own: the lock user with the password
    /// (hashed by the server: in bootstrap mode there are no grant tables for `CREATE
    /// USER`, so the row is written as the bootstrap writes root's), no other account,
    /// the clients' database.
    fn bootstrap_sql(&self) -> String {
        let password = self.password.replace('\\', "\\\\").replace('\'', "\\'");
        format!(
            "DELETE FROM mysql.global_priv;\n\
             DELETE FROM mysql.proxies_priv;\n\
             INSERT INTO mysql.global_priv VALUES ('%', '{MARIADB_USER}', \
             JSON_OBJECT('access', 18446744073709551615, 'plugin', 'mysql_native_password', \
             'authentication_string', PASSWORD('{password}')));\n\
             CREATE DATABASE {MARIADB_DATABASE};\n"
        )
    }

    /// Runs `mariadb-install-db` into a fresh data folder, with the bootstrap SQL (the
    /// password in it) in a private file that only the run's user reads, removed after.
    async fn install(&self) -> Result<(), ClusterError> {
        let root = self.root().to_path_buf();
        let sql = root.join(format!("{}.bootstrap.sql", self.name));
        self.machine
            .write_private(&sql, self.bootstrap_sql().as_bytes())?;
        if let Some(user) = &self.run_as {
            self.machine.hand_over(&root, user)?;
            self.machine.hand_over(&sql, user)?;
        }
        let mut launch = Launch::new(
            &format!("{} install-db", self.name),
            &self.programs.install_db,
            &self.log,
        )
        .arg("--no-defaults")
        .arg(format!("--datadir={}", self.dir.display()))
        .args(["--skip-test-db", "--skip-name-resolve"])
        .args(self.shared_settings())
        .arg(format!("--extra-file={}", sql.display()));
        launch.run_as = self.run_as.clone();
        launch.prepare.push(Prepare::Empty(self.dir.clone()));
        let cursor = super::logs::LogCursor::at_end(&self.log);
        let result = self.machine.run(&launch, INSTALL_TIMEOUT).await;
        let _ = self.machine.remove_file(&sql);
        result.map_err(|e| {
            let reason = e.to_string();
            self.machine
                .start_error(&self.name, 0, reason, &self.log, cursor.tail(TAIL_LINES))
        })
    }

    async fn spawn(&self, port: u16) -> Result<Instance, ClusterError> {
        Instance::launch(self.machine.clone(), port, &self.dir, &self.launch(port)).await
    }
}

#[async_trait::async_trait]
impl OneProcess for MariadbConfig {
    fn node_name(&self) -> &str {
        &self.name
    }

    async fn spawn(&self, port: u16) -> Result<Instance, ClusterError> {
        MariadbConfig::spawn(self, port).await
    }

    fn data_dir(&self) -> &Path {
        &self.dir
    }

    async fn serves_folder(&self, host: &str, port: u16) -> Result<String, String> {
        probe(host, port, &self.password).await
    }
}

/// A started MariaDB server and how to start it again.
#[derive(Debug)]
pub struct MariadbServer {
    pub config: MariadbConfig,
    pub instance: Instance,
    /// The private folder, removed when the server is dropped: after `instance`, whose
    /// drop kills the server if it still runs.
    _scratch: Option<ScratchDir>,
}

impl MariadbServer {
    /// `mariadb-install-db`, then starts it on `choice` (another free port if that one was
    /// taken) and waits until it answers. `config.dir` is in `scratch`, which goes with the
    /// server (or with the error).
    pub async fn start(
        config: MariadbConfig,
        choice: PortChoice,
        scratch: Option<ScratchDir>,
    ) -> Result<MariadbServer, ClusterError> {
        config.install().await?;
        let instance = start_on_port(&config, choice).await?;
        Ok(MariadbServer {
            config,
            instance,
            _scratch: scratch,
        })
    }

    /// Starts it again on its port. With `keep_data` on the same data folder: a crash
    /// recovery from InnoDB's log, so every committed transaction is back (GET_LOCK's locks
    /// are in memory only: none is). Without, on a fresh bootstrap (the disk lost).
    pub async fn restart(&mut self, keep_data: bool) -> Result<(), ClusterError> {
        if self.instance.pid().is_some() {
            self.instance.kill();
        }
        if !keep_data {
            self.config.install().await?;
        }
        let port = PortChoice::Fixed(self.instance.port());
        self.instance = start_on_port(&self.config, port).await?;
        Ok(())
    }
}

/// One connection within `CONNECT_TIMEOUT`, or why not.
async fn connect(host: &str, port: u16, password: &str) -> Result<mysql_async::Conn, String> {
    let opts = client_opts(host, port, password);
    match tokio::time::timeout(CONNECT_TIMEOUT, mysql_async::Conn::new(opts)).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no connection within {CONNECT_TIMEOUT:?}")),
    }
}

/// One connection: the server's data folder, or why not.
async fn probe(host: &str, port: u16, password: &str) -> Result<String, String> {
    let mut conn = connect(host, port, password).await?;
    let dir = conn
        .query_first::<String, _>("SELECT @@datadir")
        .await
        .map_err(|e| e.to_string());
    let _ = conn.disconnect().await;
    dir?.ok_or_else(|| "SELECT @@datadir returned no row".to_string())
}

/// The server's version (`SELECT VERSION()`), for run.json.
pub(super) async fn version(host: &str, port: u16, password: &str) -> Result<String, String> {
    let mut conn = connect(host, port, password).await?;
    let version = conn
        .query_first::<String, _>("SELECT VERSION()")
        .await
        .map_err(|e| e.to_string());
    let _ = conn.disconnect().await;
    Ok(format!(
        "mariadb {}",
        version?.ok_or("SELECT VERSION() returned no row")?
    ))
}

/// `kill-session` on the lock's server `node` (its `SessionEnd` in the services' table).
pub(super) async fn end_client_sessions(
    endpoints: &super::Endpoints,
    node: &super::Node,
) -> Result<usize, super::SessionsError> {
    let password = endpoints.password.as_deref().unwrap_or_default();
    end_sessions(&node.name, &node.host, node.port, password).await
}

/// Ends every client session of the lock user on the server at `host:port` but the one
/// this opens (`KILL CONNECTION`): the sessions' GET_LOCK locks go with them, while the
/// clients still believe they hold them. Returns how many it ended; a session that ended by
/// itself between the list and its kill is not counted. Errors name the server `host:port`.
pub async fn end_sessions_at(
    host: &str,
    port: u16,
    password: &str,
) -> Result<usize, super::SessionsError> {
    end_sessions(&format!("{host}:{port}"), host, port, password).await
}

async fn end_sessions(
    node: &str,
    host: &str,
    port: u16,
    password: &str,
) -> Result<usize, super::SessionsError> {
    let mut conn =
        connect(host, port, password)
            .await
            .map_err(|reason| super::SessionsError::Connect {
                node: node.to_string(),
                reason,
            })?;
    let refused = |request: String, e: mysql_async::Error| super::SessionsError::Refused {
        node: node.to_string(),
        request,
        reason: e.to_string(),
    };
    let ended = async {
        let ids: Vec<u64> = conn
            .exec(
                "SELECT ID FROM information_schema.PROCESSLIST \
                 WHERE USER = ? AND ID <> CONNECTION_ID()",
                (MARIADB_USER,),
            )
            .await
            .map_err(|e| refused("PROCESSLIST".into(), e))?;
        let mut ended = 0;
        for id in ids {
            match conn.query_drop(format!("KILL CONNECTION {id}")).await {
                Ok(()) => ended += 1,
                // ER_NO_SUCH_THREAD: it ended meanwhile.
                Err(mysql_async::Error::Server(e)) if e.code == 1094 => {}
                Err(e) => return Err(refused(format!("KILL CONNECTION {id}"), e)),
            }
        }
        Ok(ended)
    }
    .await;
    let _ = conn.disconnect().await;
    ended
}

#[async_trait::async_trait]
impl super::service::ServiceNode for MariadbServer {
    fn instance(&self) -> &Instance {
        &self.instance
    }

    fn instance_mut(&mut self) -> &mut Instance {
        &mut self.instance
    }

    async fn restart(&mut self, keep_data: bool) -> Result<(), ClusterError> {
        MariadbServer::restart(self, keep_data).await
    }
}

/// `Topology::Mariadb`: the Redis storage server and one MariaDB server, `master-0` (data
/// in `$TMPDIR/lockaudit-mariadb-XXXXXX/master-0`, log `<dir>/mariadb/master-0.log`),
/// sharing the generated password.
pub(super) async fn start(spec: &ClusterSpec) -> Result<Cluster, ClusterError> {
    let begun = Instant::now();
    let programs = Programs::find()?;
    let server_binary = binaries::redis_server(spec.redis_server.as_deref())?;
    let run_as = RunAs::for_program("mariadbd", &["mysql", "nobody"])?;
    let [root, db_root] = private_folders(&spec.dir, ["redis", "mariadb"])?;
    let password = generate_password();
    let mut ports = ports::plan(2, spec.base_port)?.into_iter();
    let (Some(db_port), Some(storage_port)) = (ports.next(), ports.next()) else {
        return Err(ClusterError::InvalidSpec("port plan too short".into()));
    };
    let scratch = ScratchDir::create("mariadb", |base| match &run_as {
        Some(user) => user.reaches(base),
        None => Ok(()),
    })?;
    let storage = start_storage(&root, server_binary, &password, storage_port).await?;
    let config = MariadbConfig {
        name: "master-0".into(),
        programs,
        dir: scratch.path().join("master-0"),
        log: db_root.join("master-0.log"),
        password: password.clone(),
        run_as,
        machine: Arc::new(Local),
    };
    // Storage is killed by its guard if this fails.
    let database = MariadbServer::start(config, db_port, Some(scratch)).await?;
    tracing::info!(elapsed = ?begun.elapsed(), "mariadb ready");
    Ok(Cluster::local(
        Topology::Mariadb,
        root,
        password,
        vec![Box::new(database)],
        storage,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bootstrap_escapes_the_password_and_leaves_one_account() {
        let config = MariadbConfig {
            name: "master-0".into(),
            programs: Programs {
                mariadbd: "/x/mariadbd".into(),
                install_db: "/x/mariadb-install-db".into(),
            },
            dir: "/tmp/x/master-0".into(),
            log: "/tmp/x.log".into(),
            password: "a'b\\c".into(),
            run_as: None,
            machine: Arc::new(Local),
        };
        let sql = config.bootstrap_sql();
        assert!(sql.contains("PASSWORD('a\\'b\\\\c')"), "{sql}");
        assert!(sql.starts_with("DELETE FROM mysql.global_priv;"), "{sql}");
        let args: Vec<String> = config
            .launch(3306)
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(args.iter().all(|a| !a.contains("a'b")), "{args:?}");
        assert!(args.contains(&"--bind-address=127.0.0.1".to_string()));
        assert!(sql.contains("VALUES ('%', 'lockaudit'"), "{sql}");
    }
}
