//! Helpers shared by the integration tests that run `lockaudit` and read its run folder.

pub mod netns;
pub mod redis_locks;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use lockaudit::cluster;
use lockaudit::history::Event;
use lockaudit::synth;
use serde_json::Value;

/// The run folder's `report.json`.
pub fn report(out: &Path) -> Value {
    let text = std::fs::read_to_string(out.join("report.json")).expect("report.json");
    serde_json::from_str(&text).expect("report.json is JSON")
}

/// The anomaly kinds a report lists, sorted, each once.
pub fn kinds(report: &Value) -> Vec<String> {
    let mut kinds: Vec<String> = report["anomalies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["kind"].as_str().map(str::to_string))
        .collect();
    kinds.sort();
    kinds.dedup();
    kinds
}

/// The `value.ttl_ms` of every acquire invoke in the run's history (None where it has none).
pub fn acquire_ttls(out: &Path) -> Vec<Option<i64>> {
    let text = std::fs::read_to_string(out.join("history.jsonl")).expect("history.jsonl");
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["f"] == "acquire" && e["type"] == "invoke")
        .map(|e| e["value"]["ttl_ms"].as_i64())
        .collect()
}

/// Asserts that `output` exited with `code`, showing its stdout and stderr if not; returns
/// its stdout.
pub fn assert_exit(output: &Output, code: i32) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(
        output.status.code(),
        Some(code),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The Python packages the ready adapters of examples/adapters/ need, as pip installs them
/// (`.ci/run` does).
pub const PIP_INSTALL: &str =
    "python3 -m pip install redis==8.1.0 python-redis-lock==4.0.1 pottery==3.0.1 etcd3==0.12.0";

/// Fails the test, saying what to install, unless python3 can import every one of
/// `modules`: a test of a lock library must not pass without it.
pub fn require_python(modules: &[&str]) {
    let script = modules
        .iter()
        .map(|m| format!("import {m}"))
        .collect::<Vec<_>>()
        .join("; ");
    let ok = std::process::Command::new("python3")
        .args(["-c", &script])
        // etcd3 0.12.0's generated protobuf modules import only with protobuf's pure-Python
        // implementation (as examples/adapters/python_etcd3_adapter.py sets it).
        .env("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "this test needs python3 with the modules {modules:?}: install them with `{PIP_INSTALL}` (bash .ci/run does)"
    );
}

/// Fails the test, saying what to install, unless node and node-redlock's packages are
/// there (examples/adapters/node-redlock/node_modules).
pub fn require_node_redlock() {
    require_node_package("node-redlock", "redlock", "node-redlock");
}

/// Fails the test, saying what to install, unless node and the npm `etcd3` package of
/// examples/adapters/node-etcd3 are there (its node_modules).
pub fn require_node_etcd3() {
    require_node_package("node-etcd3", "etcd3", "the npm etcd3 client");
}

/// Fails the test unless Node.js runs and examples/adapters/<adapter>/node_modules has
/// `package`, saying the `npm ci` that installs `what`.
fn require_node_package(adapter: &str, package: &str, what: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let modules = root
        .join(format!(
            "examples/adapters/{adapter}/node_modules/{package}"
        ))
        .is_dir();
    assert!(
        node && modules,
        "this test needs Node.js and {what}: install them with `npm ci --prefix examples/adapters/{adapter}` (bash .ci/run does)"
    );
}

/// Fails the test, saying how to build it, unless the go-etcd adapter is built and no older
/// than its source (examples/adapters/go-etcd/bin/go-etcd-adapter, from main.go).
pub fn require_go_etcd() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/adapters/go-etcd");
    let modified = |name: &str| {
        std::fs::metadata(dir.join(name))
            .and_then(|m| m.modified())
            .ok()
    };
    let built = modified("bin/go-etcd-adapter");
    assert!(
        built.is_some() && built >= modified("main.go"),
        "this test needs the go-etcd adapter {}: build it with `examples/adapters/go-etcd/build.sh` (needs `apt-get install golang-go golang-etcd-server-dev`; bash .ci/run does both)",
        if built.is_some() { "rebuilt (main.go is newer)" } else { "built" }
    );
}

/// The events of the run's history.
fn history_events(out: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(out.join("history.jsonl")).expect("history.jsonl");
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// One hold of a key in shared mode, in run time (ns), as far as the history proves it
/// held: from when the acquire was surely taken to when the release surely had not begun.
#[derive(Debug, Clone)]
pub struct SharedHold {
    pub key: String,
    pub process: u64,
    /// The `ok` of its outer acquire.
    pub from: i64,
    /// The invoke of the release that ended it (its completion is later than the moment
    /// it took effect, and another worker may record its acquire in between).
    pub to: i64,
    /// Where the outer acquire's lease ends, counted from its invoke (`lease_ms`); i64::MAX
    /// for a lock held until released.
    pub lease_end: i64,
}

/// Every hold of a key in shared mode: from the `ok` of its outer acquire (invoked with
/// `mode: shared`) to the invoke of the release that ends it (nested holds counted). A hold
/// whose process retired before it was released is left out.
pub fn shared_holds(out: &Path) -> Vec<SharedHold> {
    use std::collections::HashMap;
    // Per (process, key): the pending acquire's (invoke time, shared?), and the open hold.
    let mut asked: HashMap<(u64, String), (i64, bool)> = HashMap::new();
    let mut open: HashMap<(u64, String), (u32, bool, SharedHold)> = HashMap::new();
    let mut release_invoked: HashMap<(u64, String), i64> = HashMap::new();
    let mut holds = Vec::new();
    for e in history_events(out) {
        let (Some(process), Some(key), Some(time)) =
            (e["process"].as_u64(), e["key"].as_str(), e["time"].as_i64())
        else {
            continue;
        };
        let at = (process, key.to_string());
        match (e["f"].as_str(), e["type"].as_str()) {
            (Some("acquire"), Some("invoke")) => {
                asked.insert(at, (time, e["value"]["mode"] == "shared"));
            }
            (Some("acquire"), Some("ok")) => {
                let (invoked, shared) = asked.get(&at).copied().unwrap_or((time, false));
                let lease_end = e["value"]["lease_ms"].as_i64().map_or(i64::MAX, |ms| {
                    invoked.saturating_add(ms.saturating_mul(1_000_000))
                });
                let hold = SharedHold {
                    key: key.to_string(),
                    process,
                    from: time,
                    to: i64::MAX,
                    lease_end,
                };
                open.entry(at).or_insert((0, shared, hold)).0 += 1;
            }
            (Some("release"), Some("invoke")) => {
                release_invoked.insert(at, time);
            }
            (Some("release"), Some("ok" | "fail")) => {
                if let Some(entry) = open.get_mut(&at) {
                    entry.0 -= 1;
                    if entry.0 == 0 {
                        let (_, shared, mut hold) = open.remove(&at).expect("open");
                        hold.to = release_invoked.get(&at).copied().unwrap_or(time);
                        if shared {
                            holds.push(hold);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    holds
}

/// How many pairs of shared holds of one key by two processes overlapped while the earlier
/// one's first lease still ran: readers that really shared the lock. An exclusive lock has
/// none (an overlap after a lease ran out proves nothing), so this is 0 if the shared mode
/// were dropped.
pub fn overlapping_shared_holds(out: &Path) -> usize {
    let holds = shared_holds(out);
    let mut pairs = 0;
    for (i, a) in holds.iter().enumerate() {
        for b in &holds[i + 1..] {
            let (first, second) = if a.from <= b.from { (a, b) } else { (b, a) };
            if a.key == b.key
                && a.process != b.process
                && second.from < first.to.min(first.lease_end)
            {
                pairs += 1;
            }
        }
    }
    pairs
}

/// The `value.fair` of every acquire invoke in the run's history (None where it has none).
pub fn acquire_fair_marks(out: &Path) -> Vec<Option<bool>> {
    history_events(out)
        .iter()
        .filter(|e| e["f"] == "acquire" && e["type"] == "invoke")
        .map(|e| e["value"]["fair"].as_bool())
        .collect()
}

/// Fails the test, saying what to install, unless PostgreSQL's `postgres` and `initdb` are
/// found where lockaudit looks for them (PATH, then /usr/lib/postgresql/<version>/bin).
pub fn require_postgres() {
    if let Err(e) = lockaudit::cluster::postgres_bin_dir(None) {
        panic!("this test needs PostgreSQL: apt-get install postgresql (bash .ci/run does): {e}");
    }
}

/// The folder of a test's run or audit: a temporary folder, removed when the test passes,
/// kept when it fails. If the test panics while this lives (a failed assertion), the
/// folder moves to `target/kept-runs/<test>-<time>/` and stderr says where, so that the
/// history, the report and the servers' logs of the failed run are there to read.
pub struct RunDir {
    dir: Option<tempfile::TempDir>,
}

impl RunDir {
    pub fn new() -> RunDir {
        RunDir {
            dir: Some(tempfile::tempdir().expect("a temporary folder")),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.as_ref().expect("the folder lives").path()
    }
}

impl Default for RunDir {
    fn default() -> RunDir {
        RunDir::new()
    }
}

impl AsRef<Path> for RunDir {
    fn as_ref(&self) -> &Path {
        self.path()
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        // A passing test's folder goes with its TempDir.
        if !std::thread::panicking() {
            return;
        }
        let Some(dir) = self.dir.take() else {
            return;
        };
        let left = dir.keep();
        match keep_run(&left) {
            Ok(kept) => eprintln!("the failed test's run folder is kept: {}", kept.display()),
            Err(e) => eprintln!(
                "the failed test's run folder is kept: {} (not moved to {}: {e})",
                left.display(),
                kept_runs().display()
            ),
        }
    }
}

/// Where the folders of failed tests go: `target/kept-runs`.
pub fn kept_runs() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target folder")
        .join("kept-runs")
}

/// Moves `from` to `kept_runs()/<test>-<time>` (the test's name is its thread's, as the test
/// harness names it): renamed, or copied and removed if it is on another file system.
fn keep_run(from: &Path) -> std::io::Result<PathBuf> {
    // A test's name is a Rust path: `module::test`.
    let test = std::thread::current()
        .name()
        .unwrap_or("test")
        .replace("::", "-");
    let time: String = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect();
    let root = kept_runs();
    std::fs::create_dir_all(&root)?;
    let mut to = root.join(format!("{test}-{time}"));
    let mut n = 1;
    while to.exists() {
        n += 1;
        to = root.join(format!("{test}-{time}-{n}"));
    }
    if std::fs::rename(from, &to).is_err() {
        copy_tree(from, &to)?;
        std::fs::remove_dir_all(from)?;
    }
    Ok(to)
}

/// Copies folders, files and symbolic links (not sockets: a server's socket is dead).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (kind, target) = (entry.file_type()?, to.join(entry.file_name()));
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// A loopback port that refuses connections for as long as the returned socket lives. The
/// socket is bound (without `SO_REUSEADDR`) but does not listen: nothing answers there, and
/// no server another test starts meanwhile can take the port, as it could take a port merely
/// bound and let go.
pub fn refusing_port() -> (tokio::net::TcpSocket, std::net::SocketAddr) {
    let socket = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
    socket
        .bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .expect("bind a loopback port");
    let addr = socket.local_addr().expect("the bound port");
    (socket, addr)
}

/// Fails the test, saying what to install, unless etcd is found where lockaudit looks for it
/// ($LOCKAUDIT_ETCD, then PATH).
pub fn require_etcd() {
    if let Err(e) = lockaudit::cluster::etcd_binary() {
        panic!("this test needs etcd: apt-get install etcd-server (bash .ci/run does): {e}");
    }
}

/// Fails the test, saying what to install, unless ZooKeeper's jar and Java are found where
/// lockaudit looks for them ($LOCKAUDIT_ZOOKEEPER_JAR, else Debian's place; java on PATH).
pub fn require_zookeeper() {
    if let Err(e) = lockaudit::cluster::zookeeper_program() {
        panic!("this test needs ZooKeeper: apt-get install zookeeper (bash .ci/run does): {e}");
    }
}

/// Fails the test, saying what to install, unless `mariadbd` and `mariadb-install-db` are
/// found where lockaudit looks for them ($LOCKAUDIT_MARIADBD, PATH, Debian's places).
pub fn require_mariadb() {
    if let Err(e) = lockaudit::cluster::MariadbPrograms::find() {
        panic!("this test needs MariaDB: apt-get install mariadb-server (bash .ci/run does): {e}");
    }
}

/// True as root; else prints a SKIPPED line naming `test` (the tests that switch to another
/// user need root: CI runs as root).
pub fn require_root(test: &str) -> bool {
    let root = nix::unistd::Uid::effective().is_root();
    if !root {
        println!("SKIPPED {test}: needs root, to try the run's files as another user");
    }
    root
}

/// As `user` (its own uid and gid, no other group): `cat` a file or `ls` a folder. Ok with
/// its stdout, or Err with its stderr (root only: see [`require_root`]).
pub fn as_user(user: &str, path: &Path) -> Result<String, String> {
    let account = nix::unistd::User::from_name(user)
        .expect("the user database")
        .unwrap_or_else(|| panic!("no user `{user}` on this machine"));
    let program = if path.is_dir() { "ls" } else { "cat" };
    let out = std::process::Command::new("setpriv")
        .arg(format!("--reuid={}", account.uid))
        .arg(format!("--regid={}", account.gid))
        .args(["--clear-groups", "--", program])
        .arg(path)
        .output()
        .expect("setpriv (util-linux)");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Asserts that `user` cannot read `path` (a file) or list it (a folder): permission denied.
pub fn assert_denied(user: &str, path: &Path) {
    match as_user(user, path) {
        Ok(text) => panic!("{user} could read {}: {text}", path.display()),
        Err(e) => assert!(
            e.contains("Permission denied"),
            "{user} reading {}: {e}",
            path.display()
        ),
    }
}

/// `path`'s permission bits.
pub fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// A linearizable read of `key` through the etcd member at `url` alone (an isolated member
/// has no leader to serve it: an error).
pub async fn etcd_read(url: &str, password: &str, key: &str) -> Result<Option<String>, String> {
    let mut client = lockaudit::cluster::etcd::connect(
        &[url.to_string()],
        Some(password),
        std::time::Duration::from_secs(2),
    )
    .await
    .map_err(|e| e.to_string())?;
    let got = client.get(key, None).await.map_err(|e| e.to_string())?;
    Ok(got
        .kvs()
        .first()
        .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()))
}

/// Every `href` of a page that leads to a file (not `#anchor`), as written.
pub fn hrefs(html: &str) -> Vec<String> {
    html.split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .filter(|url| !url.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// Asserts that every relative link of the page at `page` names a file that exists
/// (percent-decoded, from the page's folder); returns the links.
pub fn assert_links_resolve(page: &Path) -> Vec<String> {
    let html = std::fs::read_to_string(page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    let dir = page.parent().expect("a folder");
    let links = hrefs(&html);
    for link in &links {
        let path = percent_encoding::percent_decode_str(link)
            .decode_utf8()
            .expect("UTF-8");
        assert!(
            dir.join(path.as_ref()).is_file(),
            "{} links {link}, which does not exist",
            page.display()
        );
    }
    links
}

/// Fails the test, saying what to install and run, unless the Curator adapter
/// (examples/adapters/curator/) is built: a JDK, Debian's Curator and ZooKeeper jars, and
/// `build.sh`'s output.
pub fn require_curator() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/adapters/curator");
    let java = std::process::Command::new("java")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    let jars = Path::new("/usr/share/java/curator-recipes.jar").is_file()
        && Path::new("/usr/share/java/zookeeper.jar").is_file();
    let built = root.join("build/curator-adapter.jar").is_file()
        && root.join("build/curator.jsa").is_file();
    assert!(
        java && jars && built,
        "this test needs the Curator adapter built (java {java}, jars {jars}, built {built}): `apt-get install openjdk-17-jdk-headless libcurator-recipes-java zookeeper`, then `sh examples/adapters/curator/build.sh` (bash .ci/run does both)"
    );
}

/// The name libtest knows the test `name` of the module `module` (`module_path!()`) by, to
/// run that one test in a child copy of this binary (`--exact`): the path without the crate
/// (`run::helper`).
pub fn test_name(module: &str, name: &str) -> String {
    let path = module.split_once("::").map_or("", |(_, path)| path);
    format!("{path}::{name}")
}

/// The repository's root, where `lockaudit` finds workloads/, history/ and examples/.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn alive(pids: &[u32]) -> usize {
    pids.iter().filter(|&&p| cluster::is_live(p)).count()
}

/// Live processes whose command line mentions `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|&pid| cluster::is_live(pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .collect()
}

/// A folder for a run's `TMPDIR`, where its server keeps its data: others may pass through
/// it (as root PostgreSQL and MariaDB run as their own users), and the server's command
/// line names it, which tells its processes from other tests'.
pub fn data_base() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("a temporary folder");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod the temporary folder");
    dir
}

/// Polls `check` every 100 ms until it gives Some, or panics naming `what` at the deadline.
pub async fn until<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let end = Instant::now() + deadline;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < end, "not within {deadline:?}: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `check` every 10 ms until it holds; panics after `within`.
pub async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "not within {within:?}: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Sends `signal` to the process `pid`.
pub fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal).expect("signal");
}

/// `events` as a JSONL history.
pub fn jsonl(events: &[Event]) -> String {
    let mut bytes = Vec::new();
    synth::write_jsonl(events, &mut bytes).expect("writing to memory");
    String::from_utf8(bytes).expect("UTF-8")
}

/// A reference history of `history/` by its file name.
pub fn reference(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("history")
        .join(name)
}
