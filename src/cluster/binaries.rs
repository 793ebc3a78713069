//! Finding redis-server and redis-sentinel (the path given by a flag, else PATH), and
//! PostgreSQL's `postgres` and `initdb` (a folder given, else PATH, else Debian's
//! `/usr/lib/postgresql/<version>/bin`, newest first), etcd and ZooKeeper (here, and on a
//! host over SSH).

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::error::ClusterError;
use super::ssh::Ssh;
use crate::shell::quote;

/// How to run a sentinel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SentinelBinary {
    /// `redis-sentinel CONFIG`.
    Sentinel(PathBuf),
    /// `redis-server CONFIG --sentinel`: the same program in sentinel mode, used when no
    /// `redis-sentinel` is installed (Debian ships it in a separate package).
    ServerInSentinelMode(PathBuf),
}

impl SentinelBinary {
    pub fn program(&self) -> &Path {
        match self {
            SentinelBinary::Sentinel(path) | SentinelBinary::ServerInSentinelMode(path) => path,
        }
    }
}

/// redis-server: `given` if set (a path, or a bare name looked up on PATH), else PATH.
pub fn redis_server(given: Option<&Path>) -> Result<PathBuf, ClusterError> {
    find("redis-server", "redis-server", given)
}

/// redis-sentinel: `given` if set; else `redis-sentinel` on PATH; else `server` in sentinel
/// mode.
pub fn redis_sentinel(given: Option<&Path>, server: &Path) -> Result<SentinelBinary, ClusterError> {
    if given.is_none() {
        if let Some(found) = on_path(Path::new("redis-sentinel"), std::env::var_os("PATH")) {
            return Ok(SentinelBinary::Sentinel(found));
        }
        return Ok(SentinelBinary::ServerInSentinelMode(server.to_path_buf()));
    }
    find("redis-sentinel", "redis-sentinel", given).map(SentinelBinary::Sentinel)
}

/// The environment variable naming the etcd program.
pub const ETCD_ENV: &str = "LOCKAUDIT_ETCD";

/// etcd (Debian's `etcd-server`): `$LOCKAUDIT_ETCD` if set, else PATH.
pub fn etcd() -> Result<PathBuf, ClusterError> {
    let given = std::env::var_os(ETCD_ENV).map(PathBuf::from);
    find("etcd", "etcd-server", given.as_deref()).map_err(|_| ClusterError::MissingService {
        program: "etcd".into(),
        package: "etcd-server".into(),
        location: match &given {
            Some(path) => format!("at {} (from ${ETCD_ENV})", path.display()),
            None => "on PATH".into(),
        },
        env: ETCD_ENV.into(),
    })
}

/// The environment variable naming ZooKeeper's jar (Debian's: `/usr/share/java/zookeeper.jar`,
/// whose manifest names the jars it needs).
pub const ZOOKEEPER_ENV: &str = "LOCKAUDIT_ZOOKEEPER_JAR";

/// Where Debian's `zookeeper` (through `libzookeeper-java`) puts the server's jar.
const DEBIAN_ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";

/// slf4j's simple logger, looked for beside ZooKeeper's jar.
const SIMPLE_LOGGER: &str = "slf4j-simple.jar";

/// How to run a ZooKeeper server: `java -cp <jar>[:<logger>] QuorumPeerMain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZooKeeperProgram {
    pub java: PathBuf,
    pub jar: PathBuf,
    /// slf4j's simple logger beside the jar, when installed (Debian's `libslf4j-java`, which
    /// ZooKeeper depends on): without a logger the server logs nothing.
    pub logger: Option<PathBuf>,
}

impl ZooKeeperProgram {
    pub fn classpath(&self) -> OsString {
        let mut path = self.jar.clone().into_os_string();
        if let Some(logger) = &self.logger {
            path.push(":");
            path.push(logger);
        }
        path
    }
}

/// ZooKeeper (Debian's `zookeeper`): its jar from `$LOCKAUDIT_ZOOKEEPER_JAR`, else Debian's
/// place; `java` on PATH.
pub fn zookeeper() -> Result<ZooKeeperProgram, ClusterError> {
    let given = std::env::var_os(ZOOKEEPER_ENV).map(PathBuf::from);
    let jar = given
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEBIAN_ZOOKEEPER_JAR));
    if !jar.is_file() {
        return Err(ClusterError::MissingService {
            program: "zookeeper.jar".into(),
            package: "zookeeper".into(),
            location: match &given {
                Some(path) => format!("at {} (from ${ZOOKEEPER_ENV})", path.display()),
                None => format!("at {DEBIAN_ZOOKEEPER_JAR}"),
            },
            env: ZOOKEEPER_ENV.into(),
        });
    }
    // Java comes with the package (default-jre).
    let java = find("java", "zookeeper", None)?;
    let logger = jar
        .parent()
        .map(|dir| dir.join(SIMPLE_LOGGER))
        .filter(|p| p.is_file());
    Ok(ZooKeeperProgram { java, jar, logger })
}

/// How to run a ZooKeeper server on a host: `java -cp <classpath> QuorumPeerMain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZooKeeperOnHost {
    pub java: String,
    pub classpath: String,
}

/// The folder of PostgreSQL's `postgres` and `initdb` on the host of `ssh`: Debian's newest
/// `/usr/lib/postgresql/<version>/bin`, else the folder of `postgres` on its PATH. An error
/// names the host and the package to install.
pub fn postgres_on_host(ssh: &Ssh) -> Result<String, ClusterError> {
    let found = ssh.run(
        "look for PostgreSQL on",
        "for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do \
         [ -x \"$d/postgres\" ] && [ -x \"$d/initdb\" ] && echo \"$d\" && exit 0; done; \
         p=$(command -v postgres) && dirname \"$p\"; true",
    )?;
    match found.stdout.lines().next().map(str::trim) {
        Some(dir) if !dir.is_empty() => Ok(dir.to_string()),
        _ => Err(ssh.error(
            "run PostgreSQL",
            "no postgres and initdb there: install Debian's postgresql on the host (`apt-get install postgresql`)",
        )),
    }
}

/// MariaDB's `mariadbd` and `mariadb-install-db` on the host of `ssh` (on its PATH, else
/// where Debian puts them). An error names the host and the package to install.
pub fn mariadb_on_host(ssh: &Ssh) -> Result<(String, String), ClusterError> {
    let found = ssh.run(
        "look for MariaDB on",
        "for p in mariadbd mariadb-install-db; do command -v $p || { [ -x /usr/sbin/$p ] && echo /usr/sbin/$p; } || { [ -x /usr/bin/$p ] && echo /usr/bin/$p; } || echo -; done",
    )?;
    match found.stdout.split_whitespace().collect::<Vec<_>>()[..] {
        [server, install] if server != "-" && install != "-" => {
            Ok((server.to_string(), install.to_string()))
        }
        _ => Err(ssh.error(
            "run MariaDB",
            "no mariadbd and mariadb-install-db there: install Debian's mariadb-server on the host (`apt-get install mariadb-server`)",
        )),
    }
}

/// ZooKeeper on the host of `ssh`: the host's own `java` and `zookeeper_jar` settings, else
/// `java` on its PATH and Debian's jar, both checked there in one command. An error names
/// the host and what it lacks.
pub fn zookeeper_on_host(ssh: &Ssh) -> Result<ZooKeeperOnHost, ClusterError> {
    let target = ssh.target();
    let java = target.java.clone().unwrap_or_else(|| "java".into());
    let jar = target
        .zookeeper_jar
        .clone()
        .unwrap_or_else(|| DEBIAN_ZOOKEEPER_JAR.into());
    let out = ssh.run(
        "look for ZooKeeper on",
        &format!(
            "command -v {java} >/dev/null 2>&1 || echo java; [ -f {jar} ] && [ -r {jar} ] || echo jar",
            java = quote(&java),
            jar = quote(&jar)
        ),
    )?;
    let missing: Vec<&str> = out.stdout.split_whitespace().collect();
    let mut lacks = Vec::new();
    if missing.contains(&"java") {
        let said = match &target.java {
            Some(path) => format!("{path} (its `java` setting) is not a program there"),
            None => "no java on its PATH".into(),
        };
        lacks.push(format!(
            "{said}: install Debian's zookeeper on the host (`apt-get install zookeeper` \
             brings a Java runtime), or give its java as `java = \"/path/to/java\"` in the \
             host's entry of `nodes`"
        ));
    }
    if missing.contains(&"jar") {
        let said = match &target.zookeeper_jar {
            Some(path) => format!("no ZooKeeper jar at {path} (its `zookeeper_jar` setting)"),
            None => format!("no ZooKeeper jar at {DEBIAN_ZOOKEEPER_JAR}"),
        };
        lacks.push(format!(
            "{said}: install it on the host with `apt-get install zookeeper`, or give its \
             place as `zookeeper_jar = \"/path/to/zookeeper.jar\"` in the host's entry of \
             `nodes`"
        ));
    }
    if !lacks.is_empty() {
        return Err(ssh.error("start ZooKeeper", lacks.join("; ")));
    }
    Ok(ZooKeeperOnHost {
        java,
        classpath: classpath_on_host(&jar),
    })
}

/// The jar and the simple logger beside it: the JVM passes over a classpath entry that is
/// not there, so a host without the logger still runs the server (its log then empty).
fn classpath_on_host(jar: &str) -> String {
    match Path::new(jar).parent() {
        Some(dir) => format!("{jar}:{}", dir.join(SIMPLE_LOGGER).display()),
        None => jar.to_string(),
    }
}

/// The environment variable naming the folder that holds `postgres` and `initdb`.
pub const POSTGRES_BIN_ENV: &str = "LOCKAUDIT_POSTGRES_BIN";

/// Where Debian installs each PostgreSQL version's programs (`<root>/<version>/bin`).
const DEBIAN_POSTGRES_ROOT: &str = "/usr/lib/postgresql";

/// The folder holding both `postgres` and `initdb`: `given`, else `$LOCKAUDIT_POSTGRES_BIN`,
/// else the folder of `postgres` on PATH (or of the file it links to: Debian puts neither
/// on PATH, other setups link one or both), else Debian's newest
/// `/usr/lib/postgresql/<version>/bin`.
pub fn postgres_bin_dir(given: Option<&Path>) -> Result<PathBuf, ClusterError> {
    let from_env = std::env::var_os(POSTGRES_BIN_ENV).map(PathBuf::from);
    if let Some(dir) = given.map(Path::to_path_buf).or(from_env.clone()) {
        let source = if given.is_some() {
            String::new()
        } else {
            format!(" (from {POSTGRES_BIN_ENV})")
        };
        return has_postgres(&dir).then_some(dir.clone()).ok_or_else(|| {
            ClusterError::MissingPostgres {
                location: format!("in {}{source}", dir.display()),
            }
        });
    }
    if let Some(found) = on_path(Path::new("postgres"), std::env::var_os("PATH")) {
        let linked = std::fs::canonicalize(&found).ok();
        for candidate in std::iter::once(found).chain(linked) {
            if let Some(dir) = candidate.parent().filter(|d| has_postgres(d)) {
                return Ok(dir.to_path_buf());
            }
        }
    }
    newest_debian_postgres(Path::new(DEBIAN_POSTGRES_ROOT)).ok_or_else(|| {
        ClusterError::MissingPostgres {
            location: format!("on PATH or in {DEBIAN_POSTGRES_ROOT}/<version>/bin"),
        }
    })
}

fn has_postgres(dir: &Path) -> bool {
    is_executable(&dir.join("postgres")) && is_executable(&dir.join("initdb"))
}

/// `<root>/<version>/bin` of the highest version (compared as numbers: 9.6 < 15) that has
/// both programs.
fn newest_debian_postgres(root: &Path) -> Option<PathBuf> {
    let version = |name: &str| -> Option<Vec<u32>> {
        name.split('.').map(|part| part.parse().ok()).collect()
    };
    std::fs::read_dir(root)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let bin = entry.path().join("bin");
            Some((version(&name)?, bin)).filter(|(_, bin)| has_postgres(bin))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, bin)| bin)
}

fn find(binary: &str, package: &str, given: Option<&Path>) -> Result<PathBuf, ClusterError> {
    let wanted = given.unwrap_or(Path::new(binary));
    let bare_name = wanted.components().count() == 1 && !wanted.is_absolute();
    let found = if bare_name {
        on_path(wanted, std::env::var_os("PATH"))
    } else {
        is_executable(wanted).then(|| wanted.to_path_buf())
    };
    found.ok_or_else(|| ClusterError::MissingBinary {
        binary: binary.to_string(),
        package: package.to_string(),
        location: if bare_name {
            if given.is_some() {
                format!("as `{}` on PATH", wanted.display())
            } else {
                "on PATH".to_string()
            }
        } else {
            format!("at {}", wanted.display())
        },
    })
}

fn on_path(name: &Path, path_var: Option<OsString>) -> Option<PathBuf> {
    let path_var = path_var?;
    std::env::split_paths(&path_var)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_path_names_the_package_and_the_flag() {
        let err = redis_server(Some(Path::new("/nonexistent/redis-server"))).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, ClusterError::MissingBinary { .. }));
        assert!(text.contains("apt-get install redis-server"), "{text}");
        assert!(text.contains("--redis-server PATH"), "{text}");
        assert!(text.contains("/nonexistent/redis-server"), "{text}");
    }

    #[test]
    fn the_newest_debian_postgres_wins_and_needs_both_programs() {
        let root = tempfile::tempdir().unwrap();
        let make = |version: &str, programs: &[&str]| {
            let bin = root.path().join(version).join("bin");
            std::fs::create_dir_all(&bin).unwrap();
            for p in programs {
                let exe = bin.join(p);
                std::fs::write(&exe, "#!/bin/sh\n").unwrap();
                std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
            bin
        };
        make("9.6", &["postgres", "initdb"]);
        let fifteen = make("15", &["postgres", "initdb"]);
        make("16", &["postgres"]);
        assert_eq!(newest_debian_postgres(root.path()), Some(fifteen));
        let err = postgres_bin_dir(Some(&root.path().join("16/bin"))).unwrap_err();
        assert!(
            err.to_string().contains("apt-get install postgresql"),
            "{err}"
        );
        assert_eq!(err.exit_code(), 3);
    }

    #[test]
    fn a_host_s_classpath_has_the_logger_beside_the_jar() {
        assert_eq!(
            classpath_on_host("/usr/share/java/zookeeper.jar"),
            "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
        );
    }

    #[test]
    fn bare_names_are_looked_up_on_the_given_path() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("fake-redis");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let found = on_path(Path::new("fake-redis"), Some(dir.path().as_os_str().into()));
        assert_eq!(found, Some(exe.clone()));
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(
            on_path(Path::new("fake-redis"), Some(dir.path().as_os_str().into())),
            None,
            "a file without the x bit is not a binary"
        );
    }
}
