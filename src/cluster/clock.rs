//! Server clocks the nemesis can move: libfaketime preloaded into a redis-server, reading
//! its offset from a file that [`FakeClock::set`] rewrites.
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

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use super::error::ClusterError;

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

/// The `LD_PRELOAD` value for a fake-clocked process: libfaketime, then glibc.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Preload {
    pub libfaketime: PathBuf,
    pub libc: PathBuf,
}

impl Preload {
    /// Finds libfaketime (`$LOCKAUDIT_LIBFAKETIME`, else the Debian locations) and glibc.
    pub fn find() -> Result<Preload, ClusterError> {
        Preload::find_in(std::env::var_os(LIBFAKETIME_ENV).map(PathBuf::from))
    }

    fn find_in(given: Option<PathBuf>) -> Result<Preload, ClusterError> {
        let libfaketime = match given {
            Some(path) if path.is_file() => path,
            Some(path) => {
                return Err(ClusterError::MissingLibrary {
                    library: "libfaketime".into(),
                    package: "faketime".into(),
                    location: format!("at {} (from {LIBFAKETIME_ENV})", path.display()),
                })
            }
            None => LIBFAKETIME_PATHS
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())
                .ok_or_else(|| ClusterError::MissingLibrary {
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
        Ok(Preload { libfaketime, libc })
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

/// One server's fake clock: the preload, its offset file and the offset last written.
/// Clones share the offset (a restarted server keeps its clock).
#[derive(Debug, Clone)]
pub struct FakeClock {
    preload: Preload,
    file: PathBuf,
    offset_ms: Arc<AtomicI64>,
}

impl FakeClock {
    /// A clock at offset 0, writing its file (which a previous run may have left moved).
    pub fn create(preload: Preload, file: PathBuf) -> Result<FakeClock, ClusterError> {
        let clock = FakeClock {
            preload,
            file,
            offset_ms: Arc::new(AtomicI64::new(0)),
        };
        clock.set(0)?;
        Ok(clock)
    }

    /// The environment that makes the server read its time through libfaketime.
    pub fn apply(&self, cmd: &mut Command) {
        cmd.envs(self.env());
    }

    /// The environment variables that make a program read its wall clock through this
    /// clock (an external lock client's adapter, started by a worker).
    pub fn env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        vec![
            ("LD_PRELOAD", self.preload.value().into()),
            (
                "FAKETIME_TIMESTAMP_FILE",
                self.file.clone().into_os_string(),
            ),
            ("FAKETIME_NO_CACHE", "1".into()),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
        ]
    }

    pub fn preload(&self) -> &Preload {
        &self.preload
    }

    /// The offset last set, in milliseconds.
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::SeqCst)
    }

    /// Rewrites the file with `offset_ms`: a temporary file renamed over it, so the server
    /// never reads a half-written one.
    pub fn set(&self, offset_ms: i64) -> Result<(), ClusterError> {
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let n = WRITES.fetch_add(1, Ordering::Relaxed);
        let mut tmp = self.file.clone().into_os_string();
        tmp.push(format!(".{}.{n}.tmp", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let text = format!("{}\n", format_offset(offset_ms));
        std::fs::write(&tmp, text).map_err(|e| ClusterError::io("write", &tmp, e))?;
        if let Err(e) = std::fs::rename(&tmp, &self.file) {
            let _ = std::fs::remove_file(&tmp);
            return Err(ClusterError::io("replace", &self.file, e));
        }
        self.offset_ms.store(offset_ms, Ordering::SeqCst);
        Ok(())
    }
}

/// Whether the process has libfaketime mapped: ld.so only warns (on the server's stderr,
/// which goes to its log) and runs the program unfaked when a preload cannot be loaded.
pub fn is_loaded(pid: u32, preload: &Preload) -> bool {
    let Some(name) = preload.libfaketime.file_name() else {
        return false;
    };
    let name = name.to_string_lossy();
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map(|maps| maps.lines().any(|line| line.ends_with(name.as_ref())))
        .unwrap_or(false)
}

/// Decimal seconds with three decimals and a sign: `+20.000`, `-0.250`. libfaketime reads
/// the number with `atof`; it has no millisecond unit.
pub(super) fn format_offset(offset_ms: i64) -> String {
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
        let err = Preload::find_in(Some("/nonexistent/libfaketime.so.1".into())).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("apt-get install faketime"), "{text}");
        assert!(text.contains("/nonexistent/libfaketime.so.1"), "{text}");
        assert!(text.contains(LIBFAKETIME_ENV), "{text}");
        assert_eq!(err.exit_code(), 3);
    }

    #[test]
    fn setting_replaces_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let preload = Preload {
            libfaketime: "/x/libfaketime.so.1".into(),
            libc: "/x/libc.so.6".into(),
        };
        let clock = FakeClock::create(preload, dir.path().join("n.faketime")).unwrap();
        assert_eq!(std::fs::read_to_string(&clock.file).unwrap(), "+0.000\n");
        clock.set(-1_500).unwrap();
        assert_eq!(std::fs::read_to_string(&clock.file).unwrap(), "-1.500\n");
        assert_eq!(clock.clone().offset_ms(), -1_500, "clones share the offset");
        let files = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(files, 1, "no temporary file left behind");
    }
}
