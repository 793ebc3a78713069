//! Clocks the nemesis can move: a library preloaded into the program, reading its offset
//! from a file that [`FakeClock::set`] rewrites. A redis-server runs under libfaketime
//! ([`Libfaketime`]); an external adapter under lockaudit's own `wallclock.c`
//! ([`Preload::WallClock`]), which moves only the wall clock and leaves sleeps alone.
//!
//! What was measured (libfaketime 0.9.10, Redis 7.0.15, Debian 12):
//!
//! - libfaketime alone deadlocks redis-server at start (jemalloc holds its lock and calls
//!   `clock_gettime`; libfaketime's `dlsym` calls `malloc`). Preloading glibc after it makes
//!   glibc's malloc replace jemalloc, and the server starts. INFO's allocator figures are then
//!   off; nothing else is.
//! - The file holds an offset relative to the real clock: `+20`, `-300`, `+1.5`, `-0.250`
//!   (seconds, fractions honoured to the millisecond), or with a unit `+20s`, `-5m`, `+2h`,
//!   `+1d`. There is NO millisecond unit: `+1500ms` reads as 1500 *minutes*. So offsets are
//!   written as decimal seconds with three decimals, which is exact for whole milliseconds.
//! - `FAKETIME_NO_CACHE=1` makes every time call read the file, so a new offset applies from
//!   the server's next time call (measured: `TIME` showed it within 0.5 ms of the rename).
//!   The price: about twice the server CPU per SET (26–28 µs against 10–13 µs with
//!   `redis-benchmark -t set -c 50`), about 0.6× the SET throughput on a loaded 2-core
//!   machine. With `FAKETIME_CACHE_DURATION=1` (whole seconds only) the cost vanished, but a
//!   new offset took 0.9–1.6 s to show: too late for a nemesis that jumps and then acts.
//! - `FAKETIME_DONT_FAKE_MONOTONIC=1`: only the wall clock moves, as in a real clock step
//!   (NTP, `settimeofday`), which leaves `CLOCK_MONOTONIC` alone. libfaketime's default also
//!   moves the monotonic clock, and Redis 7 runs its timers on it: after a jump back of
//!   300 s, `serverCron` (active expiry, replication acks and pings, reconnects) stopped
//!   for 300 s.
//! - Redis 7 key expiry follows the faked wall clock: after `+20` a `PX 10000` key is gone
//!   at once; after `-300` TTLs last 300 s longer.

//! - libfaketime 0.9.10 also rewrites `clock_nanosleep`, and with
//!   `FAKETIME_DONT_FAKE_MONOTONIC=1` it turns an absolute deadline on `CLOCK_MONOTONIC`
//!   (`TIMER_ABSTIME`) into a negative time: the kernel answers `EINVAL` (libfaketime issue
//!   #426; `strace` shows `tv_sec=-1795932532`). Python 3.11's `time.sleep` makes exactly
//!   that call, so every sleep of a Python adapter raised `OSError: [Errno 22]`, and kazoo's
//!   connection thread died of it. Redis never makes the call. So adapters run under
//!   `wallclock.c` instead: it overrides `clock_gettime` (the `CLOCK_REALTIME` clocks),
//!   `gettimeofday`, `time` and `timespec_get`, nothing else, and reads the same file on
//!   every call (2.7 µs a `time.time()` in Python, against 4.1 µs under libfaketime and
//!   0.1 µs bare, measured on a loaded 2-core machine). A wait until a wall-clock deadline
//!   (a `CLOCK_REALTIME` condition variable or `clock_nanosleep`) still ends on the real
//!   clock; Python and Node time their waits on the monotonic clock.
//!
//! A clock is a description (its preload, its offset file, the offset last set) and, here,
//! its file on this machine: a worker's adapters' clock, a local server's. A server's on a
//! host has its file written there by `cluster` ([`FakeClock::set_with`]).

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// Why a fake clock could not be set up or moved.
#[derive(Debug, thiserror::Error)]
pub enum FakeClockError {
    /// A shared library the spec needs (libfaketime for fake clocks) is not installed.
    #[error(
        "{library} not found {location}: fake clocks need it; install it with \
         `apt-get install {package}` (or set LOCKAUDIT_LIBFAKETIME to its path)"
    )]
    MissingLibrary {
        /// `libfaketime`.
        library: String,
        /// The Debian package that ships it.
        package: String,
        /// `in <the folders searched>`, or `at /the/path/given (from LOCKAUDIT_LIBFAKETIME)`.
        location: String,
    },

    /// The offset file or the preloaded library could not be written.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl FakeClockError {
    fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        FakeClockError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

impl From<crate::private::ReplaceError> for FakeClockError {
    fn from(e: crate::private::ReplaceError) -> Self {
        FakeClockError::io(e.action, e.path, e.source)
    }
}

/// Environment variable that, when set, is the path of `libfaketime.so.1` to use instead of
/// the Debian locations (for another build of the library, and for tests).
pub const LIBFAKETIME_ENV: &str = "LOCKAUDIT_LIBFAKETIME";

/// Where Debian's `faketime` package puts the library (the multiarch folders first).
const LIBFAKETIME_PATHS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/i386-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
];

/// Where glibc may be, when it is not next to the library's folder.
const LIBC_PATHS: &[&str] = &[
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/lib/aarch64-linux-gnu/libc.so.6",
    "/lib/i386-linux-gnu/libc.so.6",
    "/lib64/libc.so.6",
];

/// libfaketime then glibc: the `LD_PRELOAD` of a fake-clocked server.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Libfaketime {
    pub libfaketime: PathBuf,
    pub libc: PathBuf,
}

impl Libfaketime {
    /// Finds libfaketime (`$LOCKAUDIT_LIBFAKETIME`, else the Debian locations) and glibc.
    pub fn find() -> Result<Libfaketime, FakeClockError> {
        Libfaketime::find_in(std::env::var_os(LIBFAKETIME_ENV).map(PathBuf::from))
    }

    pub(crate) fn find_in(given: Option<PathBuf>) -> Result<Libfaketime, FakeClockError> {
        let libfaketime = match given {
            Some(path) if path.is_file() => path,
            Some(path) => {
                return Err(FakeClockError::MissingLibrary {
                    library: "libfaketime".into(),
                    package: "faketime".into(),
                    location: format!("at {} (from {LIBFAKETIME_ENV})", path.display()),
                })
            }
            None => LIBFAKETIME_PATHS
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())
                .ok_or_else(|| FakeClockError::MissingLibrary {
                    library: "libfaketime".into(),
                    package: "faketime".into(),
                    location: format!("in {}", LIBFAKETIME_PATHS.join(", ")),
                })?,
        };
        // `<libdir>/faketime/libfaketime.so.1` → `<libdir>/libc.so.6`; else a known folder;
        // else the bare name, which ld.so looks up in its default folders.
        let beside = libfaketime
            .parent()
            .and_then(Path::parent)
            .map(|dir| dir.join("libc.so.6"));
        let libc = beside
            .into_iter()
            .chain(LIBC_PATHS.iter().map(PathBuf::from))
            .find(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("libc.so.6"));
        Ok(Libfaketime { libfaketime, libc })
    }

    fn value(&self) -> String {
        format!("{} {}", self.libfaketime.display(), self.libc.display())
    }

    /// The library's file name (`libfaketime.so.1`), as it shows in `/proc/<pid>/maps`.
    pub fn file_name(&self) -> String {
        self.libfaketime
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// The environment of a process whose clock reads `file` (as [`FakeClock::env`]), for a
    /// command line on another host.
    pub fn env_for(&self, file: &str) -> Vec<(&'static str, String)> {
        vec![
            ("LD_PRELOAD", self.value()),
            ("FAKETIME_TIMESTAMP_FILE", file.to_string()),
            ("FAKETIME_NO_CACHE", "1".into()),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
        ]
    }
}

/// What a [`FakeClock`] preloads into the program whose wall clock it moves.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preload {
    /// A server's: libfaketime (the notes above).
    Libfaketime(Libfaketime),
    /// An external adapter's: `wallclock.c`, which the binary carries and
    /// [`Preload::find`] writes to the user's cache folder.
    WallClock { library: PathBuf },
}

/// The wall-clock library, built from `wallclock.c` by build.rs.
const WALL_CLOCK_LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/wallclock.so"));

/// The variable naming the offset file `wallclock.c` reads.
const WALL_CLOCK_FILE_ENV: &str = "LOCKAUDIT_WALL_CLOCK_FILE";

impl Preload {
    /// The preload for an external adapter's clock: [`Preload::WallClock`], which needs
    /// nothing installed (servers find theirs with [`Libfaketime::find`]). Writes the
    /// library to `$XDG_CACHE_HOME/lockaudit` (else `~/.cache/lockaudit`), once per build,
    /// and checks that ld.so can preload it from there.
    pub fn find() -> Result<Preload, FakeClockError> {
        let dir = std::env::var_os("XDG_CACHE_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir)
            .join("lockaudit");
        Preload::write_wall_clock_library(&dir)
    }

    /// Servers' libfaketime, found as [`Libfaketime::find`] does.
    pub fn libfaketime() -> Result<Preload, FakeClockError> {
        Libfaketime::find().map(Preload::Libfaketime)
    }

    /// Writes the library into `dir` as `wallclock-<hash of its bytes>.so`, unless there
    /// already: under a temporary name, then renamed, so that a running adapter keeps the
    /// copy it mapped and another lockaudit never loads a half-written one.
    fn write_wall_clock_library(dir: &Path) -> Result<Preload, FakeClockError> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        WALL_CLOCK_LIBRARY.hash(&mut hasher);
        let library = dir.join(format!("wallclock-{:016x}.so", hasher.finish()));
        let text = library.to_string_lossy();
        // ld.so splits LD_PRELOAD at spaces and colons, and has no way to escape them.
        if text.contains([' ', ':', '\t', '\n']) {
            return Err(FakeClockError::io(
                "preload",
                &library,
                std::io::Error::other(
                    "LD_PRELOAD cannot name a path with a space or a colon: \
                     set XDG_CACHE_HOME to a folder without them",
                ),
            ));
        }
        if std::fs::read(&library).ok().as_deref() != Some(WALL_CLOCK_LIBRARY) {
            std::fs::create_dir_all(dir).map_err(|e| FakeClockError::io("create", dir, e))?;
            let tmp = library.with_extension(format!("so.{}.tmp", std::process::id()));
            std::fs::write(&tmp, WALL_CLOCK_LIBRARY)
                .map_err(|e| FakeClockError::io("write", &tmp, e))?;
            if let Err(e) = std::fs::rename(&tmp, &library) {
                let _ = std::fs::remove_file(&tmp);
                return Err(FakeClockError::io("replace", &library, e));
            }
        }
        // ld.so only warns and runs the program unfaked when it cannot map a preload (a
        // folder on a `noexec` file system): try it on a shell first.
        let probe = Command::new("sh")
            .args(["-c", ":"])
            .env("LD_PRELOAD", &library)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .output();
        if let Ok(probe) = probe {
            let said = String::from_utf8_lossy(&probe.stderr);
            if let Some(line) = said.lines().find(|l| l.contains("LD_PRELOAD")) {
                return Err(FakeClockError::io(
                    "preload",
                    &library,
                    std::io::Error::other(format!("ld.so refused it: {line}")),
                ));
            }
        }
        Ok(Preload::WallClock { library })
    }
}

/// One program's fake clock (a server's, or a worker's adapters'): the preload, its offset
/// file and the offset last written. Clones share the offset (a restarted server keeps its
/// clock).
#[derive(Debug, Clone)]
pub struct FakeClock {
    preload: Preload,
    file: PathBuf,
    offset_ms: Arc<AtomicI64>,
}

impl FakeClock {
    /// A clock at offset 0, writing its file on this machine (which a previous run may have
    /// left moved).
    pub fn create(preload: Preload, file: PathBuf) -> Result<FakeClock, FakeClockError> {
        // Absolute: an adapter runs in its own folder.
        let file = std::path::absolute(&file).map_err(|e| FakeClockError::io("find", &file, e))?;
        let clock = FakeClock::unwritten(preload, file);
        clock.set(0)?;
        Ok(clock)
    }

    /// A clock reading `file` (an absolute path), its file not written yet: a server's on
    /// a host, whose file `cluster` writes there with [`FakeClock::set_with`].
    pub fn unwritten(preload: Preload, file: PathBuf) -> FakeClock {
        FakeClock {
            preload,
            file,
            offset_ms: Arc::new(AtomicI64::new(0)),
        }
    }

    /// The environment that makes the server read its time through libfaketime.
    pub fn apply(&self, cmd: &mut Command) {
        cmd.envs(self.env());
    }

    /// The environment variables that make a program read its wall clock through this
    /// clock (a server, or an external lock client's adapter started by a worker).
    pub fn env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        match &self.preload {
            Preload::Libfaketime(libfaketime) => vec![
                ("LD_PRELOAD", libfaketime.value().into()),
                (
                    "FAKETIME_TIMESTAMP_FILE",
                    self.file.clone().into_os_string(),
                ),
                ("FAKETIME_NO_CACHE", "1".into()),
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
            ],
            Preload::WallClock { library } => vec![
                ("LD_PRELOAD", library.clone().into_os_string()),
                (WALL_CLOCK_FILE_ENV, self.file.clone().into_os_string()),
            ],
        }
    }

    pub fn preload(&self) -> &Preload {
        &self.preload
    }

    /// The library it preloads, for messages.
    pub fn library(&self) -> PathBuf {
        match &self.preload {
            Preload::Libfaketime(libfaketime) => libfaketime.libfaketime.clone(),
            Preload::WallClock { library } => library.clone(),
        }
    }

    /// The offset last set, in milliseconds.
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::SeqCst)
    }

    /// Rewrites the file on this machine with `offset_ms`: a temporary file renamed over
    /// it, so the program never reads a half-written one.
    pub fn set(&self, offset_ms: i64) -> Result<(), FakeClockError> {
        self.set_with(offset_ms, |file, text| {
            crate::private::replace(file, text).map_err(FakeClockError::from)
        })
    }

    /// Rewrites the file with `offset_ms` through `write` (given the file and its new
    /// contents; it must replace the file whole), and keeps the offset once written.
    pub fn set_with<E>(
        &self,
        offset_ms: i64,
        write: impl FnOnce(&Path, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let text = format!("{}\n", format_offset(offset_ms));
        write(&self.file, text.as_bytes())?;
        self.offset_ms.store(offset_ms, Ordering::SeqCst);
        Ok(())
    }

    /// Whether a process whose `/proc/<pid>/maps` reads `maps` has the preload mapped:
    /// ld.so only warns (on the server's stderr, which goes to its log) and runs the
    /// program unfaked when a preload cannot be loaded.
    pub fn is_mapped(&self, maps: &[u8]) -> bool {
        let library = self.library();
        let Some(name) = library.file_name() else {
            return false;
        };
        let name = name.to_string_lossy();
        String::from_utf8_lossy(maps)
            .lines()
            .any(|line| line.ends_with(name.as_ref()))
    }
}

/// Decimal seconds with three decimals and a sign: `+20.000`, `-0.250`. libfaketime reads
/// the number with `atof`; it has no millisecond unit.
fn format_offset(offset_ms: i64) -> String {
    let sign = if offset_ms < 0 { '-' } else { '+' };
    let abs = offset_ms.unsigned_abs();
    format!("{sign}{}.{:03}", abs / 1000, abs % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_signed_decimal_seconds() {
        assert_eq!(format_offset(0), "+0.000");
        assert_eq!(format_offset(20_000), "+20.000");
        assert_eq!(format_offset(1_500), "+1.500");
        assert_eq!(format_offset(-250), "-0.250");
        assert_eq!(format_offset(-300_000), "-300.000");
        assert_eq!(format_offset(i64::MIN), "-9223372036854775.808");
    }

    #[test]
    fn a_missing_library_names_the_package() {
        let err = Libfaketime::find_in(Some("/nonexistent/libfaketime.so.1".into())).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("apt-get install faketime"), "{text}");
        assert!(text.contains("/nonexistent/libfaketime.so.1"), "{text}");
        assert!(text.contains(LIBFAKETIME_ENV), "{text}");
    }

    #[test]
    fn the_wall_clock_library_is_written_once_and_preloadable() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let Preload::WallClock { library } = Preload::write_wall_clock_library(&cache).unwrap()
        else {
            panic!("not the wall clock");
        };
        assert_eq!(std::fs::read(&library).unwrap(), WALL_CLOCK_LIBRARY);
        let again = Preload::write_wall_clock_library(&cache).unwrap();
        assert_eq!(again, Preload::WallClock { library });
        let files = std::fs::read_dir(&cache).unwrap().count();
        assert_eq!(files, 1, "no temporary file left behind");

        let spaced = dir.path().join("a b");
        let err = Preload::write_wall_clock_library(&spaced).unwrap_err();
        assert!(err.to_string().contains("XDG_CACHE_HOME"), "{err}");
    }

    #[test]
    fn setting_replaces_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let preload = Preload::Libfaketime(Libfaketime {
            libfaketime: "/x/libfaketime.so.1".into(),
            libc: "/x/libc.so.6".into(),
        });
        let clock = FakeClock::create(preload, dir.path().join("n.faketime")).unwrap();
        assert_eq!(std::fs::read_to_string(&clock.file).unwrap(), "+0.000\n");
        clock.set(-1_500).unwrap();
        assert_eq!(std::fs::read_to_string(&clock.file).unwrap(), "-1.500\n");
        assert_eq!(clock.clone().offset_ms(), -1_500, "clones share the offset");
        let files = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(files, 1, "no temporary file left behind");
    }
}
