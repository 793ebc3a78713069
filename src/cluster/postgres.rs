//! One PostgreSQL server that lockaudit owns, for the database locks (`pg-*`).
//!
//! Started like the Redis servers: `initdb` into a data folder, then `postgres` in the
//! foreground as a child of the controller, on a free port of 127.0.0.1 only (no Unix
//! socket), role `lockaudit` with a generated password checked by SCRAM, `fsync` and
//! `synchronous_commit` on, so that a SIGKILL and a restart on the same folder is a real
//! crash recovery from the WAL. Ready once an authenticated connection reports our data
//! folder (which tells our server from a stranger on the port). A pause or kill reaches the
//! postmaster and its backends (`registry::signal`).
//!
//! The data folder is not in the run folder but in a private folder of its own
//! (`scratch`: `$TMPDIR/lockaudit-postgres-XXXXXX/master-0`, 0700), removed at the end of
//! the run, on an error and on Ctrl-C; the log, which lockaudit opens and hands to the
//! server as its stdout and stderr, is in the run folder (`<run>/postgres/master-0.log`).
//! As root: postgres refuses to run as root, so `initdb` and `postgres` run as the
//! `postgres` system user (Debian's package creates it; `nobody` otherwise), switched to in
//! the child before exec. That user must reach its data folder, and the run folder may be
//! where it cannot pass (anywhere in root's home, 0700): so the private folder is that
//! user's, in a temporary folder it can reach, and the run folder is never opened to it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::ClusterError;
use super::instance::{start_on_port, Instance, OneProcess};
use super::machine::{Launch, Local, Machine, Prepare, TAIL_LINES};
use super::ports::{self, PortChoice};
use super::scratch::ScratchDir;
use super::{binaries, generate_password, private_folders, start_storage};
use super::{Cluster, ClusterSpec, Topology};
pub use crate::topology::postgres::{client_config, PG_DATABASE, PG_USER};

/// Who may connect: the run's role with its password, over TCP from anywhere (the server
/// listens on loopback here, on the host's address there).
const HBA: &str =
    "host all lockaudit 0.0.0.0/0 scram-sha-256\nhost all lockaudit ::/0 scram-sha-256\n";

/// How long `initdb` may take (measured: about 1 s here).
const INITDB_TIMEOUT: Duration = Duration::from_secs(120);

pub use super::machine::RunAs;

/// Everything needed to start (and restart) one PostgreSQL server.
#[derive(Debug, Clone)]
pub struct PgConfig {
    pub name: String,
    /// The folder with `postgres` and `initdb`.
    pub bin_dir: PathBuf,
    /// The data folder (absolute), in the server's private folder (`ScratchDir`).
    pub dir: PathBuf,
    /// In the run folder, opened by lockaudit: the server need not reach it.
    pub log: PathBuf,
    pub password: String,
    pub run_as: Option<RunAs>,
    /// Where it runs: this machine, or a host.
    pub machine: Arc<dyn Machine>,
}

impl PgConfig {
    /// The foreground postmaster. Settings on the command line, so that the data folder
    /// stays what `initdb` made. `fsync` and `synchronous_commit` are spelled out although
    /// they are the defaults: a commit acknowledged before its WAL is flushed would make
    /// the crash tests meaningless. The password is in no argument (it is in the cluster).
    fn launch(&self, port: u16) -> Launch {
        let mut launch = Launch::new(&self.name, self.bin_dir.join("postgres"), &self.log)
            .arg("-D")
            .arg(&self.dir)
            .arg("-p")
            .arg(port.to_string());
        for setting in [
            &format!("listen_addresses={}", self.machine.addr()),
            "unix_socket_directories=",
            "fsync=on",
            "synchronous_commit=on",
            "max_connections=200",
            "shared_buffers=32MB",
            "logging_collector=off",
            "log_line_prefix=%m [%p] ",
        ] {
            launch = launch.arg("-c").arg(setting);
        }
        launch.tree = true;
        launch.run_as = self.run_as.clone();
        launch
    }

    /// Runs `initdb` into a fresh data folder: role `lockaudit` with the password, SCRAM
    /// for every connection. `--no-sync` only skips flushing the new files once: what the
    /// tests crash is the process, whose writes the page cache keeps; the server itself
    /// runs with fsync on.
    async fn initdb(&self) -> Result<(), ClusterError> {
        let root = self.dir.parent().unwrap_or(Path::new("/"));
        let pwfile = root.join(format!("{}.password", self.name));
        // Its folder made private if need be (the scratch folder is already).
        self.machine
            .write_private(&pwfile, self.password.as_bytes())?;
        if let Some(user) = &self.run_as {
            self.machine.hand_over(root, user)?;
            self.machine.hand_over(&pwfile, user)?;
        }
        let mut pw_arg = OsString::from("--pwfile=");
        pw_arg.push(&pwfile);
        let mut launch = Launch::new(
            &format!("{} initdb", self.name),
            self.bin_dir.join("initdb"),
            &self.log,
        )
        .arg("-D")
        .arg(&self.dir)
        .args(["-U", PG_USER, "--auth=scram-sha-256", "-E", "UTF8"])
        .args(["--locale=C", "--no-sync", "--no-instructions"])
        .arg(pw_arg);
        launch.run_as = self.run_as.clone();
        launch.prepare.push(Prepare::Empty(self.dir.clone()));
        let cursor = super::logs::LogCursor::at_end(&self.log);
        let result = self.machine.run(&launch, INITDB_TIMEOUT).await;
        let _ = self.machine.remove_file(&pwfile);
        result.map_err(|e| {
            let reason = e.to_string();
            self.machine
                .start_error(&self.name, 0, reason, &self.log, cursor.tail(TAIL_LINES))
        })?;
        // initdb's admits clients from loopback only; on a host they come from the control
        // node. The role's password (SCRAM) from anywhere, no other role, nothing else.
        let hba = self.dir.join("pg_hba.conf");
        self.machine.write_private(&hba, HBA.as_bytes())?;
        if let Some(user) = &self.run_as {
            self.machine.hand_over(&hba, user)?;
        }
        Ok(())
    }

    async fn spawn(&self, port: u16) -> Result<Instance, ClusterError> {
        Instance::launch(self.machine.clone(), port, &self.dir, &self.launch(port)).await
    }
}

#[async_trait::async_trait]
impl OneProcess for PgConfig {
    fn node_name(&self) -> &str {
        &self.name
    }

    async fn spawn(&self, port: u16) -> Result<Instance, ClusterError> {
        PgConfig::spawn(self, port).await
    }

    fn data_dir(&self) -> &Path {
        &self.dir
    }

    async fn serves_folder(&self, host: &str, port: u16) -> Result<String, String> {
        probe(host, port, &self.password).await
    }

    fn kill(&self, instance: &mut Instance) {
        kill_tree(instance);
    }
}

/// A started PostgreSQL server and how to start it again.
#[derive(Debug)]
pub struct PgServer {
    pub config: PgConfig,
    pub instance: Instance,
    /// The folder of the data, removed when the server is dropped: after `instance`, whose
    /// drop kills the server if it still runs. (On a host it goes with the run's folder.)
    _scratch: Option<ScratchDir>,
}

impl PgServer {
    /// `initdb`, then starts it on `choice` (another free port if that one was taken) and
    /// waits until it answers.
    /// `config.dir` is in `scratch`, which goes with the server (or with the error).
    pub async fn start(
        config: PgConfig,
        choice: PortChoice,
        scratch: Option<ScratchDir>,
    ) -> Result<PgServer, ClusterError> {
        config.initdb().await?;
        let instance = start_on_port(&config, choice).await?;
        Ok(PgServer {
            config,
            instance,
            _scratch: scratch,
        })
    }

    /// SIGKILL of the postmaster and its backends, reaped (see [`kill_tree`]).
    pub fn kill(&mut self) -> Option<super::Exit> {
        kill_tree(&mut self.instance)
    }

    /// Starts it again on its port. With `keep_data` on the same data folder: a crash
    /// recovery that replays the WAL, so every committed transaction is back. Without, on
    /// a fresh `initdb` (the disk lost). Waits until it answers.
    pub async fn restart(&mut self, keep_data: bool) -> Result<(), ClusterError> {
        if self.instance.pid().is_some() {
            self.kill();
        }
        if !keep_data {
            self.config.initdb().await?;
        }
        let port = PortChoice::Fixed(self.instance.port());
        self.instance = start_on_port(&self.config, port).await?;
        Ok(())
    }
}

/// One connection: the server's data folder, or why not.
async fn probe(host: &str, port: u16, password: &str) -> Result<String, String> {
    let config = client_config(host, port, password);
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(connection);
    let row = client
        .query_one("SHOW data_directory", &[])
        .await
        .map_err(|e| e.to_string());
    drop(client);
    let _ = driver.await;
    row?.try_get::<_, String>(0).map_err(|e| e.to_string())
}

/// SIGKILL of the postmaster and its backends (the registry stops the postmaster, kills
/// its children, then it), reaps the postmaster, and waits up to 5 s until none of its
/// children is left: a backend still attached to the shared memory would stop a restart
/// ("pre-existing shared memory block is still in use"). Zombies do not count: they hold
/// no memory, and whoever adopted them reaps them.
fn kill_tree(instance: &mut Instance) -> Option<super::Exit> {
    // On a host the backends are killed before their postmaster (`machine::OnHost`).
    let children = instance
        .pid()
        .filter(|_| instance.machine().is_local())
        .map(super::procfs::children_of)
        .unwrap_or_default();
    let exit = instance.kill();
    let deadline = Instant::now() + Duration::from_secs(5);
    while children.iter().any(|&c| super::procfs::is_live(c)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    exit
}

#[async_trait::async_trait]
impl super::service::ServiceNode for PgServer {
    fn instance(&self) -> &Instance {
        &self.instance
    }

    fn instance_mut(&mut self) -> &mut Instance {
        &mut self.instance
    }

    fn kill(&mut self) -> Option<super::Exit> {
        PgServer::kill(self)
    }

    async fn restart(&mut self, keep_data: bool) -> Result<(), ClusterError> {
        PgServer::restart(self, keep_data).await
    }
}

/// `Topology::Postgres`: the Redis storage server and one PostgreSQL server, `master-0`
/// (data in `$TMPDIR/lockaudit-postgres-XXXXXX/master-0`, log
/// `<dir>/postgres/master-0.log`), sharing the generated password.
pub(super) async fn start(spec: &ClusterSpec) -> Result<Cluster, ClusterError> {
    let begun = Instant::now();
    let bin_dir = binaries::postgres_bin_dir(spec.postgres_bin.as_deref())?;
    let server_binary = binaries::redis_server(spec.redis_server.as_deref())?;
    let run_as = RunAs::for_program("postgres", &["postgres", "nobody"])?;
    let [root, pg_root] = private_folders(&spec.dir, ["redis", "postgres"])?;
    let password = generate_password();
    let mut ports = ports::plan(2, spec.base_port)?.into_iter();
    let (Some(pg_port), Some(storage_port)) = (ports.next(), ports.next()) else {
        return Err(ClusterError::InvalidSpec("port plan too short".into()));
    };
    let scratch = ScratchDir::create("postgres", |base| match &run_as {
        Some(user) => user.reaches(base),
        None => Ok(()),
    })?;
    let storage = start_storage(&root, server_binary, &password, storage_port).await?;
    let config = PgConfig {
        name: "master-0".into(),
        bin_dir,
        dir: scratch.path().join("master-0"),
        log: pg_root.join("master-0.log"),
        password: password.clone(),
        run_as,
        machine: Arc::new(Local),
    };
    // Storage is killed by its guard if this fails.
    let database = PgServer::start(config, pg_port, Some(scratch)).await?;
    tracing::info!(elapsed = ?begun.elapsed(), "postgres ready");
    Ok(Cluster::local(
        Topology::Postgres,
        root,
        password,
        vec![Box::new(database)],
        storage,
    ))
}

/// `kill-session` on the server: `pg_terminate_backend` of every client backend but this
/// request's own, which ends their sessions and frees their session locks (advisory locks,
/// a transaction's row locks). All are signalled in one statement before any is waited
/// for: terminated and waited for one by one (PostgreSQL checks every 100 ms), the sessions
/// would end over most of a second, and a client whose session still lived could take a
/// lock the first ones freed before their holders had heard. Then each is waited for, up to
/// a second (PostgreSQL 14 and later), so that the fault is recorded once the locks are
/// free. Returns how many backends it signalled.
pub(super) async fn end_client_sessions(
    endpoints: &super::Endpoints,
    node: &super::Node,
) -> Result<usize, super::SessionsError> {
    let password = endpoints.password.as_deref().unwrap_or_default();
    let config = client_config(&node.host, node.port, password);
    let (client, connection) =
        config
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(|e| super::SessionsError::Connect {
                node: node.name.clone(),
                reason: e.to_string(),
            })?;
    let driver = tokio::spawn(connection);
    let ended = async {
        let row = client
            .query_one(
                // In the aggregate's FILTER, not the WHERE: the planner may order a
                // WHERE's conditions as it likes, and ours must be left out first.
                "SELECT coalesce(array_agg(pid) FILTER (WHERE pg_terminate_backend(pid)), '{}') \
                 FROM pg_stat_activity \
                 WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
                &[],
            )
            .await?;
        let pids: Vec<i32> = row.try_get(0)?;
        client
            .execute(
                "SELECT pg_terminate_backend(pid, 1000) FROM unnest($1::int[]) AS pid",
                &[&pids],
            )
            .await?;
        Ok::<_, tokio_postgres::Error>(pids.len())
    }
    .await
    .map_err(|e| super::SessionsError::Refused {
        node: node.name.clone(),
        request: "pg_terminate_backend".into(),
        reason: match e.as_db_error() {
            Some(db) => db.message().to_string(),
            None => e.to_string(),
        },
    });
    drop(client);
    let _ = driver.await;
    ended
}
