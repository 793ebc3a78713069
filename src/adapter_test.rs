//! `lockaudit adapter-test -- ARGV…`: checks an external lock client (an adapter,
//! docs/src/reference/protocol.md) against a fresh single redis-server before it is audited: the
//! handshake, the shapes of its replies, that a held lock refuses a second client, that a
//! release of a lock not held fails, that a shared acquire (protocol 1.2) is either refused
//! with `error` or shared with a second client, and that an unknown request gets an `error`
//! reply.
//!
//! Then the notices (protocol 1.1): the first client holds a lock past its lease; if the
//! library renews by itself (`renewed` notices come), a second client must still be refused
//! the key, and the key is then deleted on the servers behind the library's back, after which
//! a `lost` notice must come within a bound (or the output says the library never noticed:
//! a finding about the library, not a failure of the adapter). Last, every line either
//! client wrote without `in_reply_to` is judged as a notice: its type, its key (one the
//! client holds or held), its lease, its error.
//!
//! Two adapter processes play two clients; both run in the current directory (so relative
//! paths in the argv work) with their stderr in a temporary folder, quoted on failure.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use crate::cluster::{self, ClusterError, ClusterSpec};
use crate::locks::external::{shown_line, Adapter, Line, Reply};
use crate::topology::{Endpoints, Topology};

/// One line of the checklist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    /// None: skipped (an optional feature the adapter declines).
    pub passed: Option<bool>,
    pub detail: String,
}

impl Check {
    /// `✓ name`, `✗ name: detail`, `– name: detail`.
    pub fn line(&self) -> String {
        let mark = match self.passed {
            Some(true) => "✓",
            Some(false) => "✗",
            None => "–",
        };
        if self.detail.is_empty() {
            format!("{mark} {}", self.name)
        } else {
            format!("{mark} {}: {}", self.name, self.detail)
        }
    }
}

/// The checklist's verdict: every check passed or was skipped.
pub fn passed(checks: &[Check]) -> bool {
    checks.iter().all(|c| c.passed != Some(false))
}

/// How long each request may take (init included: an interpreter may start slowly).
const PATIENCE: Duration = Duration::from_secs(10);

const KEY: &str = "adapter-test:lock";
const TTL_MS: u64 = 5000;

/// The key held past its lease, then taken away on the servers.
const NOTICE_KEY: &str = "adapter-test:notices";
/// The ttl of that hold when the workload gives none: a library that keeps whole seconds
/// (python-redis-lock) cannot do with less.
const NOTICE_TTL_MS: u64 = 1000;
/// How long past its lease the lock is held before a library is judged not to renew: at
/// least this, or half the lease.
const PAST_LEASE: Duration = Duration::from_millis(500);
/// How long after its key was deleted a renewing library may take to say `lost`: its lease
/// (it must renew within it) and this.
const LOST_SLACK: Duration = Duration::from_millis(1000);

/// Where and how the adapter is tried: the servers to start and the `options` of its
/// `init` (a workload file's `topology`, `masters` and `adapter_options`).
#[derive(Debug, Clone)]
pub struct Setup {
    pub topology: Topology,
    pub masters: usize,
    pub options: Value,
    pub redis_server: Option<PathBuf>,
    pub redis_sentinel: Option<PathBuf>,
    /// The ttl of the lock held past its lease (the workload's `ttl`; None: 1 s).
    pub ttl_ms: Option<u64>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            topology: Topology::Single,
            masters: 1,
            options: json!({}),
            redis_server: None,
            redis_sentinel: None,
            ttl_ms: None,
        }
    }
}

/// Why the checklist could not be run (its checks are the adapter's verdict, not an error).
/// Neither carries a `source`: the message says the cause once.
#[derive(Debug, thiserror::Error)]
pub enum AdapterTestError {
    #[error("cannot create {}: {error}", path.display())]
    CreateDir {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("cannot start the servers: {0}")]
    Servers(ClusterError),
}

/// Starts the servers of `setup` (the binaries default from PATH) in a temporary folder,
/// runs the checks against `argv`, stops the servers.
pub async fn run(argv: &[String], setup: &Setup) -> Result<Vec<Check>, AdapterTestError> {
    let dir = std::env::temp_dir().join(format!(
        "lockaudit-adapter-test-{}-{:x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).map_err(|error| AdapterTestError::CreateDir {
        path: dir.clone(),
        error,
    })?;
    let mut spec = ClusterSpec::new(setup.topology, &dir);
    spec.masters = setup.masters;
    spec.redis_server = setup.redis_server.clone();
    spec.redis_sentinel = setup.redis_sentinel.clone();
    let checks = match cluster::start(&spec).await {
        Ok(cluster) => {
            let endpoints = cluster.endpoints();
            let ttl_ms = setup.ttl_ms.unwrap_or(NOTICE_TTL_MS);
            let checks = check_adapter(argv, &endpoints, &dir, &setup.options, ttl_ms).await;
            cluster.shutdown().await;
            Ok(checks)
        }
        Err(e) => Err(AdapterTestError::Servers(e)),
    };
    let _ = std::fs::remove_dir_all(&dir);
    checks
}

struct Checklist(Vec<Check>);

impl Checklist {
    fn add(&mut self, name: &str, result: Result<String, String>) -> bool {
        let (passed, detail) = match result {
            Ok(detail) => (Some(true), detail),
            Err(detail) => (Some(false), detail),
        };
        self.0.push(Check {
            name: name.into(),
            passed,
            detail,
        });
        passed == Some(true)
    }

    fn skip(&mut self, name: &str, why: String) {
        self.0.push(Check {
            name: name.into(),
            passed: None,
            detail: why,
        });
    }
}

/// Sends `request`, expects a reply of type `want`.
async fn expect(adapter: &mut Adapter, request: Value, want: &str) -> Result<Reply, String> {
    let reply = adapter
        .request(request, PATIENCE)
        .await
        .map_err(|e| e.to_string())?;
    if reply.ty == want {
        Ok(reply)
    } else {
        Err(format!(
            "expected {want:?}, got {}",
            Value::Object(reply.body.clone())
        ))
    }
}

/// A member of a reply as a person reads it: missing, or its JSON text.
fn shown(value: Option<&Value>) -> String {
    match value {
        None => "missing".to_string(),
        Some(v) => format!("{v}"),
    }
}

fn is_bool(reply: &Reply, field: &str) -> Result<(), String> {
    match reply.body.get(field) {
        Some(Value::Bool(_)) => Ok(()),
        other => Err(format!(
            "`{field}` is {}: it must be true or false",
            shown(other)
        )),
    }
}

/// Checks `token` (null or an integer) and the lease of an ok: `lease_ms` (an integer ≥ 0,
/// or null for a lock that never expires) or, from protocol 1.1, `valid_ms`.
fn ok_shape(reply: &Reply, token: bool) -> Result<String, String> {
    let mut detail = Vec::new();
    if token {
        match reply.body.get("token") {
            Some(Value::Null) => detail.push("token null".to_string()),
            Some(v) if v.as_i64().is_some() => detail.push(format!("token {v}")),
            other => {
                return Err(format!(
                    "`token` is {}: it must be an integer, or null if the library issues none",
                    shown(other)
                ))
            }
        }
    }
    match (reply.body.get("lease_ms"), reply.body.get("valid_ms")) {
        (Some(Value::Null), _) => detail.push("lease_ms null (never expires)".to_string()),
        (Some(v), _) if v.as_i64().is_some_and(|n| n >= 0) => detail.push(format!("lease_ms {v}")),
        (None, Some(v)) if v.as_i64().is_some_and(|n| n >= 0) => {
            detail.push(format!("valid_ms {v}"))
        }
        (lease, valid) => {
            let what = match (lease, valid) {
                (None, Some(v)) => format!("`valid_ms` is {v}"),
                (lease, _) => format!("`lease_ms` is {}", shown(lease)),
            };
            return Err(format!(
                "{what}: send `lease_ms`, the milliseconds of validity promised from the request (null if the lock never expires), or `valid_ms`, what is left when you answer"
            ));
        }
    }
    Ok(detail.join(", "))
}

fn start(argv: &[String], dir: &Path, name: &str) -> Result<(Adapter, Watch), String> {
    let log = dir.join(format!("adapter-{name}.log"));
    let (adapter, tap) =
        Adapter::spawn_tapped(argv, None, Some(&log)).map_err(|e| e.to_string())?;
    let watch = Watch {
        tap,
        lines: Vec::new(),
        took: Vec::new(),
    };
    Ok((adapter, watch))
}

/// The checks, in order; a client whose adapter broke fails its later checks.
pub async fn check_adapter(
    argv: &[String],
    endpoints: &Endpoints,
    dir: &Path,
    options: &Value,
    notice_ttl_ms: u64,
) -> Vec<Check> {
    let mut list = Checklist(Vec::new());
    let init =
        |client: u64| crate::locks::external::init_request(client, endpoints, options.clone());

    let (mut a, mut a_watch) = match start(argv, dir, "a") {
        Ok(a) => a,
        Err(e) => {
            list.add("starts", Err(e));
            return list.0;
        }
    };
    let hello = expect(&mut a, init(0), "init_ok").await.and_then(|r| {
        let name = r
            .body
            .get("name")
            .and_then(Value::as_str)
            .ok_or("`name` is not a string")?
            .to_string();
        is_bool(&r, "fencing")?;
        is_bool(&r, "reentrant")?;
        Ok(format!(
            "{name:?}, fencing {}, reentrant {}",
            r.body["fencing"], r.body["reentrant"]
        ))
    });
    if !list.add("init → init_ok with name, fencing, reentrant", hello) {
        return list.0;
    }

    // The second client starts and says hello before the first acquires: its start (a
    // Python interpreter, a JVM) must not use up the first's lease on a busy machine.
    let (b, b_watch) = match start(argv, dir, "b") {
        Ok((mut b, watch)) => match expect(&mut b, init(1), "init_ok").await {
            Ok(_) => (Ok(b), Some(watch)),
            Err(e) => (Err(format!("the second client's init: {e}")), Some(watch)),
        },
        Err(e) => (Err(e), None),
    };

    let sent = Instant::now();
    let took = expect(&mut a, acquire(), "ok")
        .await
        .and_then(|r| ok_shape(&r, true));
    if took.is_ok() {
        a_watch.took(KEY, sent);
    }
    list.add("acquire of a free key → ok with token, lease_ms", took);

    let mut clients = Clients {
        a,
        a_watch,
        b,
        b_watch,
    };
    clients.second_is_refused(&mut list).await;
    clients.renew(&mut list).await;
    clients.release_twice(&mut list).await;
    clients.second_retakes(&mut list).await;
    let shared = match clients.b.as_mut() {
        Ok(b) => shared_mode(&mut clients.a, b).await,
        Err(e) => Err(e.clone()),
    };
    list.add(
        "a shared acquire (mode \"shared\") → error, or shared by a second client",
        shared,
    );
    match clients.b.as_mut() {
        Ok(b) => {
            let mut notices = Notices {
                a: &mut clients.a,
                a_watch: &mut clients.a_watch,
                b,
                endpoints,
                ttl_ms: notice_ttl_ms,
            };
            notices.exercise(&mut list).await;
        }
        Err(e) => {
            list.add(RENEWAL, Err(e.clone()));
        }
    }
    let unknown = json!({ "type": "frobnicate", "key": KEY });
    let refused = expect(&mut clients.a, unknown, "error")
        .await
        .map(|r| format!("{}", r.body.get("error").unwrap_or(&Value::Null)));
    list.add("an unknown request → error", refused);
    clients.judge_notices(&mut list);

    // Both adapters are SIGKILLed as they drop.
    list.0
}

/// An acquire of the checklist's key that does not wait.
fn acquire() -> Value {
    json!({ "type": "acquire", "key": KEY, "ttl_ms": TTL_MS, "wait_ms": 0 })
}

/// A release of the checklist's key.
fn release() -> Value {
    json!({ "type": "release", "key": KEY })
}

/// The `error` of a reply, as shown in a check's detail.
fn error_of(reply: &Reply) -> String {
    format!("{}", reply.body.get("error").unwrap_or(&Value::Null))
}

/// The two clients of the checklist and what each wrote: the first, whose adapter started
/// and said hello, and the second, or why its adapter did not start.
struct Clients {
    a: Adapter,
    a_watch: Watch,
    b: Result<Adapter, String>,
    b_watch: Option<Watch>,
}

impl Clients {
    /// While the first client holds the key, the second is refused it, cannot release it,
    /// and is still refused it after trying.
    async fn second_is_refused(&mut self, list: &mut Checklist) {
        let second = match self.b.as_mut() {
            Ok(b) => expect(b, acquire(), "fail").await.map(|r| error_of(&r)),
            Err(e) => Err(e.clone()),
        };
        list.add("a second client's acquire of the held key → fail", second);

        // Not only the adapter's own bookkeeping: the lock must refuse another client's
        // release.
        let foreign = match self.b.as_mut() {
            Ok(b) => expect(b, release(), "fail").await.map(|r| error_of(&r)),
            Err(e) => Err(e.clone()),
        };
        list.add(
            "a second client's release of the key the first holds → fail",
            foreign,
        );
        let still = match self.b.as_mut() {
            Ok(b) => expect(b, acquire(), "fail")
                .await
                .map(|_| "the first client still holds it".to_string()),
            Err(e) => Err(e.clone()),
        };
        list.add(
            "after that release, the second client's acquire → still fail",
            still,
        );
    }

    /// The first client renews the key it holds, or says it cannot (skipped).
    async fn renew(&mut self, list: &mut Checklist) {
        const NAME: &str = "renew of the held key → ok with lease_ms";
        let renew = json!({ "type": "renew", "key": KEY, "ttl_ms": TTL_MS });
        match self.a.request(renew, PATIENCE).await {
            Ok(r) if r.ty == "ok" => {
                list.add(NAME, ok_shape(&r, false));
            }
            Ok(r) if r.ty == "error" => {
                list.skip("renew", format!("not supported ({})", error_of(&r)));
            }
            Ok(r) => {
                list.add(NAME, Err(format!("got {}", Value::Object(r.body))));
            }
            Err(e) => {
                list.add(NAME, Err(e.to_string()));
            }
        }
    }

    /// The first client releases the key, then is refused a release of it again.
    async fn release_twice(&mut self, list: &mut Checklist) {
        let released = expect(&mut self.a, release(), "ok")
            .await
            .map(|_| String::new());
        list.add("release of the held key → ok", released);
        let again = expect(&mut self.a, release(), "fail")
            .await
            .map(|r| error_of(&r));
        list.add("release of a key not held → fail", again);
    }

    /// The second client takes the key now free and releases it.
    async fn second_retakes(&mut self, list: &mut Checklist) {
        let sent = Instant::now();
        let retaken = match self.b.as_mut() {
            Ok(b) => match expect(b, acquire(), "ok").await {
                Ok(r) => match ok_shape(&r, true) {
                    Ok(shape) => expect(b, release(), "ok").await.map(|_| shape),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            },
            Err(e) => Err(e.clone()),
        };
        // Took it, whatever the shape of the reply: its notices may name the key.
        if let (Ok(_), Some(watch)) = (&retaken, self.b_watch.as_mut()) {
            watch.took(KEY, sent);
        }
        list.add(
            "after the release, the second client acquires and releases → ok",
            retaken,
        );
    }

    /// Every line either client wrote until now without `in_reply_to`, judged as a notice;
    /// a notice written later is not waited for.
    fn judge_notices(&mut self, list: &mut Checklist) {
        let mut form = Vec::new();
        let mut counts = Vec::new();
        for (who, watch) in [
            ("first", Some(&mut self.a_watch)),
            ("second", self.b_watch.as_mut()),
        ] {
            let Some(watch) = watch else { continue };
            watch.drain();
            let (problems, count) = watch.judge(who);
            form.extend(problems);
            counts.push(format!("{who} client {count}"));
        }
        let form = if form.is_empty() {
            Ok(counts.join("; "))
        } else {
            Err(form.join("; "))
        };
        list.add(
            "every notice (a line without in_reply_to) → renewed or lost, for a key the client holds or held, with lease_ms an integer ≥ 0 or null, error a string",
            form,
        );
    }
}

/// A shared acquire by `a`: `error` passes (the adapter has no shared mode and says so); `ok`
/// passes if `b`'s shared acquire of the same key is `ok` too while `a` holds it (both are
/// released). Anything else fails: an adapter must not take another kind of lock than asked.
async fn shared_mode(a: &mut Adapter, b: &mut Adapter) -> Result<String, String> {
    let acquire =
        json!({ "type": "acquire", "key": KEY, "ttl_ms": TTL_MS, "wait_ms": 0, "mode": "shared" });
    let release = json!({ "type": "release", "key": KEY, "mode": "shared" });
    let first = a
        .request(acquire.clone(), PATIENCE)
        .await
        .map_err(|e| e.to_string())?;
    match first.ty.as_str() {
        "error" => {
            return Ok(format!(
                "answers error (no shared mode): {}",
                first.body.get("error").unwrap_or(&Value::Null)
            ))
        }
        "ok" => {}
        _ => {
            return Err(format!(
                "expected \"ok\" (a shared lock) or \"error\" (no shared mode), got {}",
                Value::Object(first.body)
            ))
        }
    }
    let second = expect(b, acquire, "ok").await.map_err(|e| {
        format!("the first client's shared acquire was ok, but a second client's shared acquire of the same key was not: {e}")
    })?;
    ok_shape(&second, true)?;
    expect(b, release.clone(), "ok").await?;
    expect(a, release, "ok").await?;
    Ok("behaves as a shared lock: two clients held the key together".into())
}

/// The lines one client wrote (every one, from its adapter's stdout) and the keys it took.
struct Watch {
    tap: mpsc::UnboundedReceiver<Line>,
    lines: Vec<Line>,
    /// Each key the client acquired, and when the acquire was sent: a notice about it read
    /// before then names a key the client did not hold yet.
    took: Vec<(String, Instant)>,
}

impl Watch {
    fn took(&mut self, key: &str, sent: Instant) {
        self.took.push((key.to_string(), sent));
    }

    /// The lines read until now.
    fn drain(&mut self) {
        while let Ok(line) = self.tap.try_recv() {
            self.lines.push(line);
        }
    }

    /// Reads lines until `deadline`, or until a notice of type `ty` about `key` comes
    /// (from the `from`-th line on): when it came, and the line.
    async fn wait_for(
        &mut self,
        from: usize,
        ty: Option<&str>,
        key: &str,
        deadline: Instant,
    ) -> Option<(Instant, String)> {
        let found = |lines: &[Line]| {
            lines.iter().skip(from).find_map(|line| {
                let body = unsolicited(&line.raw)?;
                let matches = ty.is_some_and(|ty| body.get("type") == Some(&json!(ty)))
                    && body.get("key") == Some(&json!(key));
                matches.then(|| (line.at, shown_line(&line.raw)))
            })
        };
        loop {
            self.drain();
            if let Some(hit) = found(&self.lines) {
                return Some(hit);
            }
            match tokio::time::timeout_at(deadline.into(), self.tap.recv()).await {
                Ok(Some(line)) => self.lines.push(line),
                // The deadline, or the end of the adapter's output.
                _ => return None,
            }
        }
    }

    /// The notices about `key` of type `ty` from the `from`-th line on.
    fn count(&self, from: usize, ty: &str, key: &str) -> usize {
        self.lines
            .iter()
            .skip(from)
            .filter_map(|line| unsolicited(&line.raw))
            .filter(|body| {
                body.get("type") == Some(&json!(ty)) && body.get("key") == Some(&json!(key))
            })
            .count()
    }

    /// The longest lease of the `renewed` notices about `key` from the `from`-th line on
    /// (zero if none has one).
    fn longest_lease(&self, from: usize, key: &str) -> Duration {
        self.lines
            .iter()
            .skip(from)
            .filter_map(|line| unsolicited(&line.raw))
            .filter(|body| {
                body.get("type") == Some(&json!("renewed")) && body.get("key") == Some(&json!(key))
            })
            .filter_map(|body| {
                ["lease_ms", "valid_ms"]
                    .iter()
                    .find_map(|field| body.get(*field).and_then(Value::as_u64))
            })
            .max()
            .map(Duration::from_millis)
            .unwrap_or_default()
    }

    /// What is wrong with the notices the `who` client wrote, each with its line, and how
    /// many of each type it wrote.
    fn judge(&self, who: &str) -> (Vec<String>, String) {
        let mut problems = Vec::new();
        let (mut renewed, mut lost) = (0, 0);
        for line in &self.lines {
            let Some(body) = unsolicited(&line.raw) else {
                continue;
            };
            match notice_problem(&body, line.at, &self.took) {
                Ok(true) => renewed += 1,
                Ok(false) => lost += 1,
                Err(why) => problems.push(format!(
                    "the {who} client wrote {}: {why}",
                    shown_line(&line.raw)
                )),
            }
        }
        let count = if renewed + lost == 0 {
            "sent none".to_string()
        } else {
            format!("sent {renewed} renewed, {lost} lost")
        };
        (problems, count)
    }
}

/// A line that is a JSON object without `in_reply_to`: a notice, or meant as one. Lines
/// that are not JSON objects are replies gone wrong, which the requests' checks report.
fn unsolicited(raw: &[u8]) -> Option<Map<String, Value>> {
    match serde_json::from_slice::<Value>(raw) {
        Ok(Value::Object(body)) if !body.contains_key("in_reply_to") => Some(body),
        _ => None,
    }
}

/// Judges one notice read at `at` from a client that took `took`: Ok(true) for a good
/// `renewed`, Ok(false) for a good `lost`, or what is wrong with it.
fn notice_problem(
    body: &Map<String, Value>,
    at: Instant,
    took: &[(String, Instant)],
) -> Result<bool, String> {
    let renewed = match body.get("type") {
        Some(Value::String(t)) if t == "renewed" => true,
        Some(Value::String(t)) if t == "lost" => false,
        other => {
            return Err(format!(
                "a line without in_reply_to is a notice, whose `type` is \"renewed\" or \"lost\", not {}",
                shown(other)
            ))
        }
    };
    let key = match body.get("key") {
        Some(Value::String(key)) => key,
        other => {
            return Err(format!(
                "`key` is {}: it must be the key (a string) of a lock the client holds or held",
                shown(other)
            ))
        }
    };
    if !took.iter().any(|(k, sent)| k == key && *sent <= at) {
        let keys: Vec<&str> = took
            .iter()
            .filter(|(_, sent)| *sent <= at)
            .map(|(k, _)| k.as_str())
            .collect();
        return Err(format!(
            "the client never held the key {key:?} before this notice (it had acquired {})",
            if keys.is_empty() {
                "nothing".to_string()
            } else {
                format!("{keys:?}")
            }
        ));
    }
    if renewed {
        for field in ["lease_ms", "valid_ms"] {
            match body.get(field) {
                None | Some(Value::Null) => {}
                Some(v) if v.as_i64().is_some_and(|n| n >= 0) || v.is_u64() => {}
                Some(v) => {
                    return Err(format!(
                        "`{field}` is {v}: the lease of a `renewed` notice is an integer ≥ 0 (milliseconds from when lockaudit reads the line), or null if the lock no longer expires"
                    ))
                }
            }
        }
    } else {
        match body.get("error") {
            Some(Value::String(_)) => {}
            other => {
                return Err(format!(
                    "`error` is {}: a `lost` notice says why in a string",
                    shown(other)
                ))
            }
        }
    }
    Ok(renewed)
}

/// The lease an `ok` promised, counted from the request (`elapsed` before the reply): None
/// for a lock that never expires.
fn lease_of(reply: &Reply, elapsed: Duration) -> Option<Duration> {
    let ms = match (reply.body.get("lease_ms"), reply.body.get("valid_ms")) {
        (Some(v), _) if !v.is_null() => v.as_u64()?,
        (None, Some(v)) => v.as_u64()? + elapsed.as_millis() as u64,
        _ => return None,
    };
    Some(Duration::from_millis(ms))
}

const RENEWAL: &str = "a lock held past its lease → renewed notices, and no other client takes it";
const LOSS: &str = "its key deleted on the servers behind the library's back → a lost notice";

/// The notices exercised: the first client holds [`NOTICE_KEY`] past its lease, the second
/// tries to take it, the key is deleted on the servers.
struct Notices<'a> {
    a: &'a mut Adapter,
    a_watch: &'a mut Watch,
    b: &'a mut Adapter,
    endpoints: &'a Endpoints,
    ttl_ms: u64,
}

impl Notices<'_> {
    async fn exercise(&mut self, list: &mut Checklist) {
        let acquire =
            json!({ "type": "acquire", "key": NOTICE_KEY, "ttl_ms": self.ttl_ms, "wait_ms": 0 });
        self.a_watch.drain();
        let from = self.a_watch.lines.len();
        let sent = Instant::now();
        let reply = match expect(self.a, acquire.clone(), "ok").await {
            Ok(reply) => reply,
            Err(e) => {
                list.add(RENEWAL, Err(format!("the acquire of {NOTICE_KEY:?}: {e}")));
                return;
            }
        };
        self.a_watch.took(NOTICE_KEY, sent);
        if let Err(e) = ok_shape(&reply, true) {
            list.add(RENEWAL, Err(format!("the acquire of {NOTICE_KEY:?}: {e}")));
            self.release().await;
            return;
        }
        let Some(lease) = lease_of(&reply, sent.elapsed()) else {
            list.skip(
                RENEWAL,
                "the lock never expires (lease_ms null): there is nothing to renew".into(),
            );
            list.skip(LOSS, "not tried: the lock never expires".into());
            self.release().await;
            return;
        };
        let held = lease + (lease / 2).max(PAST_LEASE);
        self.a_watch
            .wait_for(from, None, NOTICE_KEY, sent + held)
            .await;
        let renewals = self.a_watch.count(from, "renewed", NOTICE_KEY);
        if let Some((_, line)) = self
            .a_watch
            .wait_for(from, Some("lost"), NOTICE_KEY, Instant::now())
            .await
        {
            // Nothing was done to the lock: either the library failed to renew it in time
            // (a busy machine) or it is wrong; what a run would record either way.
            list.skip(
                RENEWAL,
                format!(
                    "the library reported the lock lost though nothing was done to it ({renewals} renewed before): {line}: a finding about the library (or a machine too busy for its renewals), not an adapter error"
                ),
            );
            list.skip(LOSS, "not tried: the lock was lost already".into());
            self.release().await;
            return;
        }
        if renewals == 0 {
            list.skip(
                RENEWAL,
                format!(
                    "no renewed notice while the lock was held {} ms, past its {} ms lease: the library does not renew by itself (a workload renews it with `watchdog = true`)",
                    held.as_millis(),
                    lease.as_millis()
                ),
            );
            list.skip(
                LOSS,
                "not tried: a library that does not renew has no occasion to find its key gone before its release".into(),
            );
            self.release().await;
            return;
        }
        let since = sent.elapsed();
        let refused = match self.b.request(acquire, PATIENCE).await {
            Ok(r) if r.ty == "fail" => Ok(format!(
                "{renewals} renewed in {} ms; {} ms after the acquire, past its {} ms lease, a second client's acquire → fail",
                held.as_millis(),
                since.as_millis(),
                lease.as_millis()
            )),
            Ok(r) if r.ty == "ok" => {
                let _ = self
                    .b
                    .request(json!({ "type": "release", "key": NOTICE_KEY }), PATIENCE)
                    .await;
                Err(format!(
                    "{renewals} renewed notices, yet a second client took the key {} ms after the acquire, past its {} ms lease: the renewals did not keep the lock",
                    since.as_millis(),
                    lease.as_millis()
                ))
            }
            Ok(r) => Err(format!(
                "the second client's acquire: expected \"fail\", got {}",
                Value::Object(r.body)
            )),
            Err(e) => Err(format!("the second client's acquire: {e}")),
        };
        if !list.add(RENEWAL, refused) {
            list.skip(LOSS, "not tried: the lock was not kept".into());
            self.release().await;
            return;
        }
        // The longest lease the library promised: it must renew, and so find the key gone,
        // within it.
        let lease = lease.max(self.a_watch.longest_lease(from, NOTICE_KEY));
        self.loss(list, lease).await;
        self.release().await;
    }

    /// Deletes the key on the servers and waits for the `lost` notice.
    async fn loss(&mut self, list: &mut Checklist, lease: Duration) {
        self.a_watch.drain();
        let from = self.a_watch.lines.len();
        let deleted_at = Instant::now();
        let deleted = match delete_behind(self.endpoints, NOTICE_KEY).await {
            Ok(deleted) => deleted,
            Err(e) => {
                list.skip(LOSS, format!("not tried: {e}"));
                return;
            }
        };
        if deleted.is_empty() {
            list.skip(
                LOSS,
                format!("not tried: no key on the servers has {NOTICE_KEY:?} in its name, so adapter-test cannot tell which to delete"),
            );
            return;
        }
        let bound = lease + LOST_SLACK;
        let lost = self
            .a_watch
            .wait_for(from, Some("lost"), NOTICE_KEY, deleted_at + bound)
            .await;
        let renewed = self.a_watch.count(from, "renewed", NOTICE_KEY);
        let after = if renewed == 0 {
            String::new()
        } else {
            format!(" ({renewed} renewed notices after the deletion: the library believed it renewed a key that was gone)")
        };
        match lost {
            Some((at, line)) => {
                list.add(
                    LOSS,
                    Ok(format!(
                        "deleted {}; {line} {} ms later{after}",
                        deleted.join(", "),
                        at.duration_since(deleted_at).as_millis()
                    )),
                );
            }
            None => list.skip(
                LOSS,
                format!(
                    "the library never noticed: no lost notice within {} ms of deleting {}{after}: a finding about the library, not an adapter error (in a run its holder would go on without the lock)",
                    bound.as_millis(),
                    deleted.join(", ")
                ),
            ),
        }
    }

    /// Ends the hold; whatever the library answers (it may have been told the lock is
    /// lost), the adapter must answer.
    async fn release(&mut self) {
        let _ = self
            .a
            .request(json!({ "type": "release", "key": NOTICE_KEY }), PATIENCE)
            .await;
    }
}

/// Deletes, on every Redis server of `endpoints`, the keys whose name contains `key` (a
/// library names its key after the lock's, often with a prefix: `lock:<key>`,
/// `redlock:<key>`): the keys deleted, as `server:key`. A replica refuses the delete; the
/// primary's reaches it.
async fn delete_behind(endpoints: &Endpoints, key: &str) -> Result<Vec<String>, String> {
    match endpoints.topology {
        Topology::Single
        | Topology::Replicated
        | Topology::Sentinel
        | Topology::Independent
        | Topology::Cluster => {}
        other => {
            let name = serde_json::to_value(other)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            return Err(format!(
                "adapter-test deletes a lock behind the library's back on the Redis topologies only, not on {name}"
            ));
        }
    }
    let pattern = format!("*{}*", glob_escaped(key));
    let mut deleted = Vec::new();
    let mut refused = Vec::new();
    for node in &endpoints.nodes {
        let mut conn =
            cluster::probe::connect_to(&node.host, node.port, endpoints.password.as_deref())
                .await
                .map_err(|e| format!("cannot connect to {}: {e}", node.name))?;
        let names: Vec<String> = redis::cmd("KEYS")
            .arg(&pattern)
            .query_async(&mut conn)
            .await
            .map_err(|e| format!("KEYS on {}: {e}", node.name))?;
        for name in names {
            match redis::cmd("DEL")
                .arg(&name)
                .query_async::<i64>(&mut conn)
                .await
            {
                Ok(1) => deleted.push(format!("{}:{name}", node.name)),
                Ok(_) => {}
                Err(e) => refused.push(format!("{}:{name}: {e}", node.name)),
            }
        }
    }
    if deleted.is_empty() && !refused.is_empty() {
        return Err(format!("cannot delete {}", refused.join(", ")));
    }
    Ok(deleted)
}

/// `text` with the characters a Redis glob pattern gives a meaning to escaped.
fn glob_escaped(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(line: &str, took: &[(String, Instant)], at: Instant) -> Result<bool, String> {
        let body = unsolicited(line.as_bytes()).expect("a line without in_reply_to");
        notice_problem(&body, at, took)
    }

    #[test]
    fn a_notice_is_judged_by_its_type_key_lease_and_error() {
        let start = Instant::now();
        let took = vec![("k".to_string(), start)];
        let later = start + Duration::from_millis(5);
        assert_eq!(
            judged(
                r#"{"type":"renewed","key":"k","lease_ms":900}"#,
                &took,
                later
            ),
            Ok(true)
        );
        assert_eq!(
            judged(r#"{"type":"renewed","key":"k","valid_ms":0}"#, &took, later),
            Ok(true)
        );
        assert_eq!(
            judged(r#"{"type":"lost","key":"k","error":"gone"}"#, &took, later),
            Ok(false)
        );
        let why = |line| judged(line, &took, later).unwrap_err();
        assert!(why(r#"{"type":"renewd","key":"k"}"#).contains(r#"not "renewd""#));
        assert!(why(r#"{"key":"k"}"#).contains("not missing"));
        assert!(why(r#"{"type":"renewed","lease_ms":1}"#).contains("`key` is missing"));
        assert!(why(r#"{"type":"renewed","key":"k","lease_ms":-1}"#).contains("`lease_ms` is -1"));
        assert!(
            why(r#"{"type":"renewed","key":"k","lease_ms":"1s"}"#).contains("`lease_ms` is \"1s\"")
        );
        assert!(why(r#"{"type":"lost","key":"k"}"#).contains("`error` is missing"));
        assert!(why(r#"{"type":"lost","key":"k","error":7}"#).contains("`error` is 7"));
        assert!(why(r#"{"type":"lost","key":"other","error":"x"}"#)
            .contains(r#"never held the key "other""#));
        // A notice about a key read before the acquire of that key was sent.
        let early = judged(
            r#"{"type":"renewed","key":"k","lease_ms":1}"#,
            &[("k".to_string(), later)],
            start,
        );
        assert!(early.unwrap_err().contains("acquired nothing"));
    }

    #[test]
    fn replies_are_no_notices() {
        assert!(unsolicited(br#"{"in_reply_to":3,"type":"ok"}"#).is_none());
        assert!(unsolicited(b"not json").is_none());
        assert!(unsolicited(br#"{"type":"lost"}"#).is_some());
    }

    #[test]
    fn a_glob_pattern_matches_the_key_literally() {
        assert_eq!(glob_escaped("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
        assert_eq!(glob_escaped(NOTICE_KEY), NOTICE_KEY);
    }
}
