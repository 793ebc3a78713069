//! `lockaudit adapter-test -- ARGV…`: checks an external lock client (an adapter,
//! docs/src/reference/protocol.md) against a fresh single redis-server before it is audited: the
//! handshake, the shapes of its replies, that a held lock refuses a second client, that a
//! release of a lock not held fails, that a shared acquire (protocol 1.2) is either refused
//! with `error` or shared with a second client, and that an unknown request gets an `error`
//! reply.
//!
//! Two adapter processes play two clients; both run in the current directory (so relative
//! paths in the argv work) with their stderr in a temporary folder, quoted on failure.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::external::{Adapter, Reply};
use crate::cluster::{self, ClusterSpec, Endpoints, Topology};

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

/// Where and how the adapter is tried: the servers to start and the `options` of its
/// `init` (a workload file's `topology`, `masters` and `adapter_options`).
#[derive(Debug, Clone)]
pub struct Setup {
    pub topology: Topology,
    pub masters: usize,
    pub options: Value,
    pub redis_server: Option<PathBuf>,
    pub redis_sentinel: Option<PathBuf>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            topology: Topology::Single,
            masters: 1,
            options: json!({}),
            redis_server: None,
            redis_sentinel: None,
        }
    }
}

/// Starts the servers of `setup` (the binaries default from PATH) in a temporary folder,
/// runs the checks against `argv`, stops the servers.
pub async fn run(argv: &[String], setup: &Setup) -> anyhow::Result<Vec<Check>> {
    let dir = std::env::temp_dir().join(format!(
        "lockaudit-adapter-test-{}-{:x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let mut spec = ClusterSpec::new(setup.topology, &dir);
    spec.masters = setup.masters;
    spec.redis_server = setup.redis_server.clone();
    spec.redis_sentinel = setup.redis_sentinel.clone();
    let checks = match cluster::start(&spec).await {
        Ok(cluster) => {
            let endpoints = cluster.endpoints();
            let checks = check_adapter(argv, &endpoints, &dir, &setup.options).await;
            cluster.shutdown().await;
            Ok(checks)
        }
        Err(e) => Err(anyhow::anyhow!("cannot start the servers: {e}")),
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
    let reply = adapter.request(request, PATIENCE).await?;
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

fn start(argv: &[String], dir: &Path, name: &str) -> Result<Adapter, String> {
    let log = dir.join(format!("adapter-{name}.log"));
    Adapter::spawn(argv, None, Some(&log), None)
}

/// The checks, in order; a client whose adapter broke fails its later checks.
pub async fn check_adapter(
    argv: &[String],
    endpoints: &Endpoints,
    dir: &Path,
    options: &Value,
) -> Vec<Check> {
    let mut list = Checklist(Vec::new());
    let init = |client: u64| super::external::init_request(client, endpoints, options.clone());

    let mut a = match start(argv, dir, "a") {
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

    let acquire = json!({ "type": "acquire", "key": KEY, "ttl_ms": TTL_MS, "wait_ms": 0 });
    let took = expect(&mut a, acquire.clone(), "ok")
        .await
        .and_then(|r| ok_shape(&r, true));
    list.add("acquire of a free key → ok with token, lease_ms", took);

    let mut b = start(argv, dir, "b");
    let second = match b.as_mut() {
        Ok(b) => match expect(b, init(1), "init_ok").await {
            Ok(_) => expect(b, acquire.clone(), "fail")
                .await
                .map(|r| format!("{}", r.body.get("error").unwrap_or(&Value::Null))),
            Err(e) => Err(format!("the second client's init: {e}")),
        },
        Err(e) => Err(e.clone()),
    };
    list.add("a second client's acquire of the held key → fail", second);

    // Not only the adapter's own bookkeeping: the lock must refuse another client's release.
    let release = json!({ "type": "release", "key": KEY });
    let foreign = match b.as_mut() {
        Ok(b) => expect(b, release.clone(), "fail")
            .await
            .map(|r| format!("{}", r.body.get("error").unwrap_or(&Value::Null))),
        Err(e) => Err(e.clone()),
    };
    list.add(
        "a second client's release of the key the first holds → fail",
        foreign,
    );
    let still = match b.as_mut() {
        Ok(b) => expect(b, acquire.clone(), "fail")
            .await
            .map(|_| "the first client still holds it".to_string()),
        Err(e) => Err(e.clone()),
    };
    list.add(
        "after that release, the second client's acquire → still fail",
        still,
    );

    let renew = json!({ "type": "renew", "key": KEY, "ttl_ms": TTL_MS });
    match a.request(renew, PATIENCE).await {
        Ok(r) if r.ty == "ok" => {
            list.add(
                "renew of the held key → ok with lease_ms",
                ok_shape(&r, false),
            );
        }
        Ok(r) if r.ty == "error" => list.skip(
            "renew",
            format!(
                "not supported ({})",
                r.body.get("error").unwrap_or(&Value::Null)
            ),
        ),
        Ok(r) => {
            list.add(
                "renew of the held key → ok with lease_ms",
                Err(format!("got {}", Value::Object(r.body))),
            );
        }
        Err(e) => {
            list.add("renew of the held key → ok with lease_ms", Err(e));
        }
    }

    let released = expect(&mut a, release.clone(), "ok")
        .await
        .map(|_| String::new());
    list.add("release of the held key → ok", released);

    let again = expect(&mut a, release.clone(), "fail")
        .await
        .map(|r| format!("{}", r.body.get("error").unwrap_or(&Value::Null)));
    list.add("release of a key not held → fail", again);

    let retaken = match b.as_mut() {
        Ok(b) => match expect(b, acquire.clone(), "ok").await {
            Ok(r) => match ok_shape(&r, true) {
                Ok(shape) => expect(b, release.clone(), "ok").await.map(|_| shape),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        },
        Err(e) => Err(e.clone()),
    };
    list.add(
        "after the release, the second client acquires and releases → ok",
        retaken,
    );

    let shared = match b.as_mut() {
        Ok(b) => shared_mode(&mut a, b).await,
        Err(e) => Err(e.clone()),
    };
    list.add(
        "a shared acquire (mode \"shared\") → error, or shared by a second client",
        shared,
    );

    let unknown = json!({ "type": "frobnicate", "key": KEY });
    let refused = expect(&mut a, unknown, "error")
        .await
        .map(|r| format!("{}", r.body.get("error").unwrap_or(&Value::Null)));
    list.add("an unknown request → error", refused);

    // Both adapters are SIGKILLed as they drop.
    list.0
}

/// A shared acquire by `a`: `error` passes (the adapter has no shared mode and says so); `ok`
/// passes if `b`'s shared acquire of the same key is `ok` too while `a` holds it (both are
/// released). Anything else fails: an adapter must not take another kind of lock than asked.
async fn shared_mode(a: &mut Adapter, b: &mut Adapter) -> Result<String, String> {
    let acquire =
        json!({ "type": "acquire", "key": KEY, "ttl_ms": TTL_MS, "wait_ms": 0, "mode": "shared" });
    let release = json!({ "type": "release", "key": KEY, "mode": "shared" });
    let first = a.request(acquire.clone(), PATIENCE).await?;
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
