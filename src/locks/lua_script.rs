//! `lua`: a lock written by the user as three Lua scripts (acquire, release, optional renew),
//! plus three more for a shared mode (read_acquire, read_release, optional read_renew), which
//! lockaudit runs on the lock's server with `EVALSHA` (loading them with `SCRIPT LOAD`
//! at connect, and again after a restart emptied the script cache).
//!
//! A workload names the files (`algorithm = "lua"`, `scripts = { acquire = "…", release =
//! "…", renew = "…" }`, paths relative to the workload file); their texts are read when the
//! workload is read and travel to the workers inside the spec (`LockOptions::scripts`), so a
//! worker needs no file access. `examples/lua/` expresses `set-nx-px`, `reentrant` and
//! `rw-lock` this way.
//!
//! # Modes
//!
//! A read-write lock has a second set of scripts for its shared mode, as Redisson's read lock
//! has its own: `read_acquire`, `read_release`, `read_renew`, with the same convention and
//! replies. A shared acquire (`Mode::Shared`, a reader of a workload with `read_share`) runs
//! `read_acquire`; the release and renewals of that hold run `read_release` and `read_renew`
//! (the client remembers each hold's mode). Without the read scripts `shared()` is false and
//! a shared acquire fails without asking the server. `fair()` is what the workload declares
//! (`LockOptions::fair`): an acquire script cannot block, so it only marks the history.
//!
//! # The calling convention (every script)
//!
//! | | |
//! |---|---|
//! | `KEYS[1]` | the lock key (`lock:0`, `lock:1`, …) |
//! | `ARGV[1]` | the owner: the client's id (`LockOptions::client_id`), unique per logical client incarnation (a process of the history), the same in all its calls |
//! | `ARGV[2]` | the ttl in ms (the workload's `ttl`), as a decimal string |
//! | `ARGV[3]` | the hold's value: a fresh random UUID for an acquire by a client that does not hold the key (by its own books); the same value again for a nested acquire and for the renew and release of that hold; a fresh one (matching nothing) for a release or renew by a client that holds nothing |
//!
//! A client holds a key by its books from an acquire that came back `ok` (or `info`) until a
//! release that came back `ok` as many times as it acquired, or one that came back `fail`.
//!
//! # What the scripts return
//!
//! | script | reply | means | recorded |
//! |---|---|---|---|
//! | acquire | `1` or status `OK` | taken, lease = ttl | `ok` |
//! | acquire | `{1, token, lease_ms}` | taken; `token` an integer ≥ 0 (`-1` or `false`: none), `lease_ms` an integer ≥ 0 (`-1`: until released; `false` or absent: the ttl) | `ok` |
//! | acquire | `0`, `false` / nil, or a table whose first element is `0` (the rest ignored, e.g. the holder's `PTTL`) | not taken; retried per the workload's `retry` | `fail` after the last try |
//! | release | `1` or `OK` | released (one level of a nested hold counts) | `ok` |
//! | release | `0` or `false` / nil | the lock is not ours | `fail` |
//! | renew | `1` or `OK` | extended by the ttl | `ok` |
//! | renew | `{1, lease_ms}` | extended; `lease_ms` as for acquire | `ok` |
//! | renew | `0`, `false` / nil, or `{0, …}` | the lock is not ours | `fail` |
//!
//! Anything else (another number, another string, a longer table) is outside the convention:
//! the script ran and may have changed the lock, but its answer says nothing, so the operation
//! is `info` (unknown) with the reply quoted in the error. Integers only: Lua numbers are
//! truncated to integers on the way out. Leases count from the moment the successful call was
//! sent (lower bounds, as for the built-ins).
//!
//! # Errors
//!
//! Connection trouble is classified as for every algorithm (`conn.rs`): nothing sent, `fail`;
//! sent and unanswered, `info`. An error reply is `info` too unless Redis gave it before the
//! script began (`LOADING`, `BUSY`, `NOAUTH`, `NOPERM`, `MASTERDOWN`, `NOSCRIPT`, a compile
//! error) or refused its first write (`READONLY` on a replica, `OOM`): a script that fails half way (a runtime error, an error from `redis.call`, a
//! `redis.error_reply` it returns) is not rolled back by Redis; the writes it made before the
//! error stay and are replicated. So an acquire script that answered with an error may have
//! taken the lock. (Release and renew are `info` on any error, as for every algorithm.) A
//! script that does not compile is a connect error.
//!
//! # Watchdog, nesting, fencing, crash points
//!
//! `renews()` is true when the workload gives a renew script and `watchdog = true` (then the
//! worker renews every ttl/3). A nested acquire (`nested = true`) runs the acquire script
//! again with the same `ARGV[3]`: the script decides (set-nx-px's `SET NX` refuses, so the
//! nested acquire is a `fail`; Redisson's hash increments the hold count, an `ok` that the
//! checker nests, released by its own `ok` release, as the built-in `reentrant` does). A token
//! the script returns is recorded and checked (`token-order`, `duplicate-token`); with
//! `--fenced` the `INCR` token of the fencing wrapper replaces it. Crash points:
//! `lua:after-acquire` (after an acquire that took the lock) and `lua:before-release`.
//! The client talks to the primary (`nodes[0]`, or the one Sentinel names), whatever the
//! topology.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::{RedisError, Script, Value};
use serde::{Deserialize, Serialize};

use super::conn::{Conn, OpError};
use super::{ms_between, random_id, Acquired, LockClient, LockError, LockOptions, Mode, Outcome};

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &["lua:after-acquire", "lua:before-release"];

/// The scripts' texts, as a workload hands them to its clients.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LuaScripts {
    pub acquire: String,
    pub release: String,
    /// Without it the lock cannot be renewed (`renews()` is false).
    #[serde(default)]
    pub renew: Option<String>,
    /// The shared mode's scripts: both or neither (`shared()` is true with both).
    #[serde(default)]
    pub read_acquire: Option<String>,
    #[serde(default)]
    pub read_release: Option<String>,
    /// Renews a shared hold; without it a shared hold is not renewed.
    #[serde(default)]
    pub read_renew: Option<String>,
}

impl LuaScripts {
    /// Every script given, by its field name.
    fn named(&self) -> Vec<(&'static str, &str)> {
        let optional = [
            ("renew", &self.renew),
            ("read_acquire", &self.read_acquire),
            ("read_release", &self.read_release),
            ("read_renew", &self.read_renew),
        ];
        let mut all = vec![
            ("acquire", self.acquire.as_str()),
            ("release", self.release.as_str()),
        ];
        all.extend(
            optional
                .into_iter()
                .filter_map(|(name, text)| text.as_deref().map(|t| (name, t))),
        );
        all
    }
}

/// How long a granted lease lasts, by the script's word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lease {
    /// The ttl passed as `ARGV[2]`.
    Ttl,
    /// This many ms.
    Ms(i64),
    /// Until released.
    Forever,
}

/// A granted acquire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) token: Option<i64>,
    pub(crate) lease: Lease,
}

/// Renders a reply for an error message.
fn show(v: &Value) -> String {
    match v {
        Value::Nil => "nil".into(),
        Value::Int(i) => i.to_string(),
        Value::Okay => "OK".into(),
        Value::SimpleString(s) => format!("{s:?}"),
        Value::BulkString(b) => format!("{:?}", String::from_utf8_lossy(b)),
        Value::Array(items) => format!(
            "{{{}}}",
            items.iter().map(show).collect::<Vec<_>>().join(", ")
        ),
        other => format!("{other:?}"),
    }
}

/// The status `OK`, however it came (`redis.status_reply`, `SET`'s reply, or the string).
fn is_ok(v: &Value) -> bool {
    match v {
        Value::Okay => true,
        Value::SimpleString(s) => s == "OK",
        Value::BulkString(b) => b == b"OK",
        _ => false,
    }
}

/// `0`, nil (Lua `false`), or a RESP3 false.
fn is_no(v: &Value) -> bool {
    matches!(v, Value::Nil | Value::Int(0) | Value::Boolean(false))
}

/// `1` (Lua `true` arrives as 1 too).
fn is_yes(v: &Value) -> bool {
    matches!(v, Value::Int(1) | Value::Boolean(true)) || is_ok(v)
}

/// A lease element of a table reply: absent or nil, the ttl; -1, forever; n ≥ 0, n ms.
fn lease_of(v: Option<&Value>) -> Option<Lease> {
    match v {
        None | Some(Value::Nil) => Some(Lease::Ttl),
        Some(Value::Int(-1)) => Some(Lease::Forever),
        Some(Value::Int(n)) if *n >= 0 => Some(Lease::Ms(*n)),
        Some(_) => None,
    }
}

/// A token element: absent, nil or -1, none; n ≥ 0, n.
fn token_of(v: Option<&Value>) -> Option<Option<i64>> {
    match v {
        None | Some(Value::Nil) | Some(Value::Int(-1)) => Some(None),
        Some(Value::Int(n)) if *n >= 0 => Some(Some(*n)),
        Some(_) => None,
    }
}

/// A script's reply outside the convention: the history's `info` quotes it, and what the
/// convention would have taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {script} script returned {reply}, which the convention does not know ({convention})")]
pub(crate) struct Unconventional {
    /// `acquire`, `release`, `renew`.
    script: &'static str,
    /// The reply as `show` writes it.
    reply: String,
    convention: &'static str,
}

impl Unconventional {
    fn of(script: &'static str, reply: &Value, convention: &'static str) -> Self {
        Unconventional {
            script,
            reply: show(reply),
            convention,
        }
    }
}

/// Reads an acquire script's reply: `Ok(Some)` taken, `Ok(None)` not taken, `Err` outside
/// the convention (the message quotes the reply).
pub(crate) fn decode_acquire(v: &Value) -> Result<Option<Grant>, Unconventional> {
    let outside = || {
        Unconventional::of(
            "acquire",
            v,
            "1 / OK / {1, token, lease_ms}: taken; 0 / nil / {0, ...}: not taken",
        )
    };
    if is_no(v) {
        return Ok(None);
    }
    if is_yes(v) {
        return Ok(Some(Grant {
            token: None,
            lease: Lease::Ttl,
        }));
    }
    let Value::Array(items) = v else {
        return Err(outside());
    };
    match items.first() {
        Some(Value::Int(0)) => Ok(None),
        Some(Value::Int(1)) if items.len() <= 3 => {
            let token = token_of(items.get(1)).ok_or_else(outside)?;
            let lease = lease_of(items.get(2)).ok_or_else(outside)?;
            Ok(Some(Grant { token, lease }))
        }
        _ => Err(outside()),
    }
}

/// Reads a release script's reply: `Ok(true)` released, `Ok(false)` not ours.
pub(crate) fn decode_release(v: &Value) -> Result<bool, Unconventional> {
    if is_no(v) {
        Ok(false)
    } else if is_yes(v) {
        Ok(true)
    } else {
        Err(Unconventional::of(
            "release",
            v,
            "1 / OK: released; 0 / nil: not ours",
        ))
    }
}

/// Reads a renew script's reply: `Ok(Some)` renewed, `Ok(None)` not ours.
pub(crate) fn decode_renew(v: &Value) -> Result<Option<Lease>, Unconventional> {
    let outside = || {
        Unconventional::of(
            "renew",
            v,
            "1 / OK / {1, lease_ms}: renewed; 0 / nil / {0, ...}: not ours",
        )
    };
    if is_no(v) {
        return Ok(None);
    }
    if is_yes(v) {
        return Ok(Some(Lease::Ttl));
    }
    let Value::Array(items) = v else {
        return Err(outside());
    };
    match items.first() {
        Some(Value::Int(0)) => Ok(None),
        Some(Value::Int(1)) if items.len() <= 2 => {
            lease_of(items.get(1)).map(Some).ok_or_else(outside)
        }
        _ => Err(outside()),
    }
}

/// Whether an error reply certainly means the script changed nothing: the server refused the
/// call itself (loading, busy with another script, not authenticated, no permission, a stale
/// replica, an unknown script), could not compile it, or refused the script's first write
/// (`READONLY`: a replica accepts no write from a script, so there was none before; `OOM`:
/// Redis refuses a write for lack of memory only while the script has written nothing).
/// Any other error reply may come from a script that wrote before it failed.
pub(crate) fn refused_before_running(code: Option<&str>, detail: Option<&str>) -> bool {
    match code {
        Some(
            "LOADING" | "BUSY" | "NOAUTH" | "NOPERM" | "MASTERDOWN" | "NOSCRIPT" | "READONLY"
            | "OOM",
        ) => true,
        Some("ERR") => detail.is_some_and(|d| d.trim_start().starts_with("Error compiling script")),
        _ => false,
    }
}

/// `refused_before_running` for a redis-rs error.
pub(crate) fn error_refused_before_running(e: &RedisError) -> bool {
    refused_before_running(e.code(), e.detail())
}

/// One hold of a key by this client, by its books.
struct Hold {
    /// `ARGV[3]` for every call about this hold.
    value: String,
    /// Acquires that came back `ok` minus releases that came back `ok` (0: an `info` acquire
    /// that may have taken it).
    depth: u32,
    /// Which scripts renew it.
    mode: Mode,
}

/// The scripts of one mode.
struct ModeScripts {
    acquire: Script,
    release: Script,
    renew: Option<Script>,
}

pub(crate) struct LuaScript {
    conn: Conn,
    options: LockOptions,
    exclusive: ModeScripts,
    /// None: the lock has no shared mode.
    shared: Option<ModeScripts>,
    holds: HashMap<String, Hold>,
}

impl LuaScript {
    /// A client running `scripts`; loads them (`SCRIPT LOAD`) so that a script that does not
    /// compile is an error now, not an `info` on every call. A server that cannot be reached
    /// is not an error here (the scripts are loaded on first use).
    pub(crate) async fn connect(
        mut conn: Conn,
        options: LockOptions,
        scripts: &LuaScripts,
    ) -> Result<Self, LockError> {
        for (name, text) in scripts.named() {
            let mut load = redis::cmd("SCRIPT");
            load.arg("LOAD").arg(text);
            match conn.query::<String>(&load).await {
                Err(OpError::Definite(m)) if m.contains("Error compiling script") => {
                    return Err(LockError::Scripts(format!("the {name} script: {m}")));
                }
                Err(OpError::Definite(m)) if super::conn::is_auth_message(&m) => {
                    return Err(LockError::Auth(m));
                }
                _ => {}
            }
        }
        let shared = match (&scripts.read_acquire, &scripts.read_release) {
            (Some(acquire), Some(release)) => Some(ModeScripts {
                acquire: Script::new(acquire),
                release: Script::new(release),
                renew: scripts.read_renew.as_deref().map(Script::new),
            }),
            _ => None,
        };
        Ok(LuaScript {
            conn,
            options,
            exclusive: ModeScripts {
                acquire: Script::new(&scripts.acquire),
                release: Script::new(&scripts.release),
                renew: scripts.renew.as_deref().map(Script::new),
            },
            shared,
            holds: HashMap::new(),
        })
    }

    /// `ARGV[3]` for a call about `key`: the hold's value, or a fresh one.
    fn value(&self, key: &str) -> String {
        self.holds
            .get(key)
            .map(|h| h.value.clone())
            .unwrap_or_else(random_id)
    }

    /// The scripts of `mode` (None: a shared mode the lock does not have).
    fn scripts(&self, mode: Mode) -> Option<&ModeScripts> {
        match mode {
            Mode::Exclusive => Some(&self.exclusive),
            Mode::Shared => self.shared.as_ref(),
        }
    }

    /// The mode `key` is held in by this client's books (exclusive if not held).
    fn held_mode(&self, key: &str) -> Mode {
        self.holds.get(key).map_or(Mode::Exclusive, |h| h.mode)
    }

    /// Runs the `which` script of `mode` with the convention's arguments.
    async fn call(
        &mut self,
        which: Which,
        mode: Mode,
        key: &str,
        value: &str,
    ) -> Result<Value, OpError> {
        // By field, not through `scripts()`, so that `conn` can be borrowed mutably below.
        let scripts = match mode {
            Mode::Exclusive => &self.exclusive,
            Mode::Shared => match &self.shared {
                Some(s) => s,
                None => return Err(OpError::Definite("no shared-mode scripts".into())),
            },
        };
        let script = match which {
            Which::Acquire => &scripts.acquire,
            Which::Release => &scripts.release,
            Which::Renew => match &scripts.renew {
                Some(s) => s,
                None => return Err(OpError::Definite("no renew script".into())),
            },
        };
        let mut invocation = script.key(key);
        invocation
            .arg(&self.options.client_id)
            .arg(self.options.ttl_ms)
            .arg(value);
        self.conn
            .eval_classified::<Value>(&invocation, error_refused_before_running)
            .await
    }

    /// The lease promised from `start`, for a call sent at `sent`.
    fn lease_ms(&self, lease: Lease, start: Instant, sent: Instant) -> Option<i64> {
        let base = ms_between(start, sent);
        match lease {
            Lease::Ttl => Some(base.saturating_add(self.options.ttl())),
            Lease::Ms(ms) => Some(base.saturating_add(ms)),
            Lease::Forever => None,
        }
    }
}

#[derive(Clone, Copy)]
enum Which {
    Acquire,
    Release,
    Renew,
}

#[async_trait]
impl LockClient for LuaScript {
    fn ttl_ms(&self) -> Option<i64> {
        // `ARGV[2]`.
        Some(self.options.ttl())
    }

    fn shared(&self) -> bool {
        self.shared.is_some()
    }

    fn fair(&self) -> bool {
        self.options.fair
    }

    async fn acquire(&mut self, key: &str) -> Acquired {
        self.acquire_mode(key, Mode::Exclusive).await
    }

    async fn release(&mut self, key: &str) -> Outcome {
        self.release_mode(key, Mode::Exclusive).await
    }

    async fn acquire_mode(&mut self, key: &str, mode: Mode) -> Acquired {
        if self.scripts(mode).is_none() {
            return Acquired::Fail("this lock has no shared mode (no scripts.read_acquire)".into());
        }
        let start = Instant::now();
        let value = self.value(key);
        for attempt in 0..=self.options.retry_attempts {
            if attempt > 0 {
                tokio::time::sleep(self.options.retry_delay(attempt - 1)).await;
            }
            let sent = Instant::now();
            let reply = self.call(Which::Acquire, mode, key, &value).await;
            let unsure = match reply {
                Ok(v) => match decode_acquire(&v) {
                    Ok(Some(grant)) => {
                        self.holds
                            .entry(key.to_string())
                            .or_insert(Hold {
                                value,
                                depth: 0,
                                mode,
                            })
                            .depth += 1;
                        self.options.step(STEPS[0]);
                        return Acquired::Ok {
                            token: grant.token,
                            lease_ms: self.lease_ms(grant.lease, start, sent),
                        };
                    }
                    Ok(None) => continue,
                    Err(m) => Acquired::Info(m.to_string()),
                },
                Err(e) => e.before_write(),
            };
            if matches!(unsure, Acquired::Info(_)) {
                // The script may have taken the lock: keep the value so a release could
                // undo it.
                self.holds.entry(key.to_string()).or_insert(Hold {
                    value,
                    depth: 0,
                    mode,
                });
            }
            return unsure;
        }
        Acquired::Fail("held by another client (the acquire script said no)".into())
    }

    async fn release_mode(&mut self, key: &str, mode: Mode) -> Outcome {
        self.options.step(STEPS[1]);
        if self.scripts(mode).is_none() {
            return Outcome::Fail("this lock has no shared mode (no scripts.read_release)".into());
        }
        let value = self.value(key);
        match self.call(Which::Release, mode, key, &value).await {
            Ok(v) => match decode_release(&v) {
                Ok(true) => {
                    if let Some(hold) = self.holds.get_mut(key) {
                        hold.depth = hold.depth.saturating_sub(1);
                        if hold.depth == 0 {
                            self.holds.remove(key);
                        }
                    }
                    Outcome::Ok { lease_ms: None }
                }
                Ok(false) => {
                    self.holds.remove(key);
                    Outcome::Fail("the release script found the lock not ours".into())
                }
                Err(m) => Outcome::Info(m.to_string()),
            },
            Err(e) => e.outcome(),
        }
    }

    async fn renew(&mut self, key: &str) -> Outcome {
        let mode = self.held_mode(key);
        if self.scripts(mode).is_none_or(|s| s.renew.is_none()) {
            // As the trait's default: nothing to renew with, the lease stays as it was.
            return Outcome::Ok { lease_ms: None };
        }
        let start = Instant::now();
        let value = self.value(key);
        let sent = Instant::now();
        match self.call(Which::Renew, mode, key, &value).await {
            Ok(v) => match decode_renew(&v) {
                Ok(Some(lease)) => Outcome::Ok {
                    lease_ms: self.lease_ms(lease, start, sent),
                },
                Ok(None) => Outcome::Fail("the renew script found the lock not ours".into()),
                Err(m) => Outcome::Info(m.to_string()),
            },
            Err(e) => e.outcome(),
        }
    }

    fn renews(&self) -> bool {
        self.exclusive.renew.is_some() && self.options.watchdog
    }

    fn renew_every(&self) -> Option<Duration> {
        if self.renews() {
            self.options.watchdog_period()
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn acquire_replies_decode_by_the_convention() {
        let taken = Some(Grant {
            token: None,
            lease: Lease::Ttl,
        });
        assert_eq!(decode_acquire(&Value::Int(1)), Ok(taken));
        assert_eq!(decode_acquire(&Value::Okay), Ok(taken));
        assert_eq!(decode_acquire(&bulk("OK")), Ok(taken));
        assert_eq!(decode_acquire(&Value::SimpleString("OK".into())), Ok(taken));
        assert_eq!(decode_acquire(&Value::Int(0)), Ok(None));
        assert_eq!(decode_acquire(&Value::Nil), Ok(None));
        // Redisson-style refusal with the holder's PTTL.
        assert_eq!(
            decode_acquire(&Value::Array(vec![Value::Int(0), Value::Int(4321)])),
            Ok(None)
        );
        assert_eq!(
            decode_acquire(&Value::Array(vec![
                Value::Int(1),
                Value::Int(7),
                Value::Int(250)
            ])),
            Ok(Some(Grant {
                token: Some(7),
                lease: Lease::Ms(250)
            }))
        );
        // `{1, false, -1}`: no token, held until released.
        assert_eq!(
            decode_acquire(&Value::Array(vec![
                Value::Int(1),
                Value::Nil,
                Value::Int(-1)
            ])),
            Ok(Some(Grant {
                token: None,
                lease: Lease::Forever
            }))
        );
        assert_eq!(
            decode_acquire(&Value::Array(vec![Value::Int(1), Value::Int(-1)])),
            Ok(taken)
        );
        assert_eq!(
            decode_acquire(&Value::Array(vec![Value::Int(1)])),
            Ok(taken)
        );
    }

    #[test]
    fn acquire_replies_outside_the_convention_are_errors_that_quote_them() {
        // Redisson's own script answers the holder's PTTL when busy: never "taken".
        let e = decode_acquire(&Value::Int(59_000)).unwrap_err();
        assert_eq!(e.script, "acquire");
        assert!(e.to_string().contains("59000"), "{e}");
        for v in [
            Value::Int(-1),
            bulk("yes"),
            Value::Array(vec![]),
            Value::Array(vec![Value::Int(2)]),
            Value::Array(vec![Value::Int(1), Value::Int(-5)]),
            Value::Array(vec![Value::Int(1), bulk("t")]),
            Value::Array(vec![Value::Int(1), Value::Nil, Value::Int(-2)]),
            Value::Array(vec![
                Value::Int(1),
                Value::Int(1),
                Value::Int(1),
                Value::Int(1),
            ]),
        ] {
            assert!(decode_acquire(&v).is_err(), "{v:?}");
        }
    }

    #[test]
    fn release_and_renew_replies_decode_by_the_convention() {
        assert_eq!(decode_release(&Value::Int(1)), Ok(true));
        assert_eq!(decode_release(&Value::Okay), Ok(true));
        assert_eq!(decode_release(&Value::Int(0)), Ok(false));
        assert_eq!(decode_release(&Value::Nil), Ok(false));
        let e = decode_release(&Value::Int(2)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the release script returned 2, which the convention does not know (1 / OK: released; 0 / nil: not ours)"
        );
        assert!(decode_release(&Value::Array(vec![Value::Int(1)])).is_err());

        assert_eq!(decode_renew(&Value::Int(1)), Ok(Some(Lease::Ttl)));
        assert_eq!(decode_renew(&Value::Okay), Ok(Some(Lease::Ttl)));
        assert_eq!(
            decode_renew(&Value::Array(vec![Value::Int(1), Value::Int(900)])),
            Ok(Some(Lease::Ms(900)))
        );
        assert_eq!(decode_renew(&Value::Int(0)), Ok(None));
        assert_eq!(decode_renew(&Value::Nil), Ok(None));
        assert_eq!(decode_renew(&Value::Array(vec![Value::Int(0)])), Ok(None));
        // A bare number is not a lease: 1 would be ambiguous.
        assert!(decode_renew(&Value::Int(900)).is_err());
        assert!(decode_renew(&Value::Array(vec![
            Value::Int(1),
            Value::Int(9),
            Value::Int(9)
        ]))
        .is_err());
    }

    #[test]
    fn only_errors_before_the_script_ran_are_definite() {
        assert!(refused_before_running(
            Some("LOADING"),
            Some("Redis is loading")
        ));
        assert!(refused_before_running(
            Some("BUSY"),
            Some("Redis is busy running a script")
        ));
        assert!(refused_before_running(Some("NOSCRIPT"), None));
        assert!(refused_before_running(
            Some("ERR"),
            Some("Error compiling script (new function): user_script:1: '=' expected")
        ));
        // Raised inside the script, possibly after a write (Redis keeps it: no rollback).
        assert!(!refused_before_running(
            Some("WRONGTYPE"),
            Some("Operation against a key holding the wrong kind of value script: 53946a…, on @user_script:1.")
        ));
        assert!(!refused_before_running(
            Some("ERR"),
            Some("user_script:1: Script attempted to access nonexistent global variable 'x'")
        ));
        // A replica refuses the first write: nothing was written.
        assert!(refused_before_running(
            Some("READONLY"),
            Some("You can't write against a read only replica. script: 22c4…")
        ));
        assert!(!refused_before_running(Some("MY"), Some("fault")));
        assert!(!refused_before_running(None, None));
    }
}
