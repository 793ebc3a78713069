//! `lockaudit-adapter`: an external lock client (docs/src/reference/protocol.md, version 1.3) over
//! lockaudit's own built-in algorithms, to test the protocol's plumbing and to measure what
//! the stdio hop costs. `options` of `init`: `algorithm` (one of the built-ins, default
//! `set-nx-px`), and optionally `fenced`, `watchdog`, `retry_backoff_ms` (the wait between
//! tries while `wait_ms` lasts, default 10), `op_timeout_ms` (default 1000).
//!
//! The lock client is made at the first request that needs one, with that request's
//! `ttl_ms` and `wait_ms` (again if they change while nothing is held). A client that cannot
//! connect sent nothing: the acquire is `fail`.
//!
//! Modes and fairness (1.2): `mode` passes through to the built-in (`shared` to rw-lock, the
//! one with a shared mode; any other answers `error` rather than take an exclusive lock);
//! `fair: true` is honoured by fair-lock and answered with `error` by the others, which
//! promise no order.

use std::collections::BTreeSet;

use lockaudit::cluster::{Endpoints, Node, Topology};
use lockaudit::locks::{self, Acquired, LockClient, LockOptions, Mode, Outcome};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

struct State {
    algorithm: &'static locks::Algorithm,
    endpoints: Endpoints,
    options: LockOptions,
    /// The client and the (ttl_ms, wait_ms) it was made for.
    client: Option<((u64, u64), Box<dyn LockClient>)>,
    held: BTreeSet<String>,
}

fn node(v: &Value, name: String) -> Node {
    Node {
        name,
        host: v["host"].as_str().unwrap_or("127.0.0.1").to_string(),
        port: v["port"]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(6379),
        pid: None,
    }
}

fn init(req: &Value) -> Result<State, String> {
    let options = &req["options"];
    let name = options["algorithm"].as_str().unwrap_or("set-nx-px");
    let Some(algorithm) = locks::TABLE.iter().find(|a| a.name == name) else {
        return Err(format!(
            "options.algorithm {name:?} is not a built-in ({})",
            locks::ALGORITHMS.join(", ")
        ));
    };
    // The protocol speaks acquire and release; an optimistic algorithm has neither.
    if algorithm.optimistic {
        return Err(format!(
            "options.algorithm {name:?} takes no lock (optimistic): there is nothing to adapt"
        ));
    }
    let topology: Topology =
        serde_json::from_value(req["topology"].clone()).map_err(|e| format!("topology: {e}"))?;
    let nodes: Vec<Node> = req["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, n)| node(n, format!("node-{i}")))
        .collect();
    let sentinels: Vec<Node> = req["sentinels"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, n)| node(n, format!("sentinel-{i}")))
        .collect();
    let password = req["nodes"][0]["password"].as_str().map(str::to_string);
    let storage = nodes
        .first()
        .cloned()
        .ok_or_else(|| "no nodes".to_string())?;
    let endpoints = Endpoints {
        topology,
        nodes,
        sentinels,
        master_name: req["master_name"].as_str().map(str::to_string),
        storage,
        password,
        control_addr: None,
    };
    let lock_options = LockOptions {
        fenced: options["fenced"].as_bool().unwrap_or(false),
        watchdog: options["watchdog"].as_bool().unwrap_or(false),
        retry_backoff_ms: options["retry_backoff_ms"].as_u64().unwrap_or(10).max(1),
        op_timeout_ms: options["op_timeout_ms"].as_u64().unwrap_or(1000),
        client_id: format!("adapter-{}", req["client"]),
        ..LockOptions::default()
    };
    Ok(State {
        algorithm,
        endpoints,
        options: lock_options,
        client: None,
        held: BTreeSet::new(),
    })
}

impl State {
    /// The client for these parameters; None if it cannot connect.
    async fn client(
        &mut self,
        ttl_ms: u64,
        wait_ms: u64,
    ) -> Result<&mut Box<dyn LockClient>, String> {
        let wanted = (ttl_ms, wait_ms);
        let stale = match &self.client {
            None => true,
            Some((made, _)) => *made != wanted && self.held.is_empty(),
        };
        if stale {
            let options = LockOptions {
                ttl_ms,
                retry_attempts: u32::try_from(wait_ms / self.options.retry_backoff_ms)
                    .unwrap_or(u32::MAX),
                ..self.options.clone()
            };
            let client = locks::connect(self.algorithm.name, &self.endpoints, &options)
                .await
                .map_err(|e| format!("cannot connect: {e}"))?;
            self.client = Some((wanted, client));
        }
        Ok(&mut self.client.as_mut().expect("just made").1)
    }
}

/// A request's `mode`: absent or `exclusive`, or `shared`; anything else is an error text.
fn mode_of(req: &Value) -> Result<Mode, String> {
    match req.get("mode") {
        None | Some(Value::Null) => Ok(Mode::Exclusive),
        Some(v) if v == "exclusive" => Ok(Mode::Exclusive),
        Some(v) if v == "shared" => Ok(Mode::Shared),
        Some(other) => Err(format!(
            "unknown mode {other} (want \"shared\" or \"exclusive\")"
        )),
    }
}

fn outcome(o: Outcome) -> Value {
    match o {
        Outcome::Ok { lease_ms } => json!({ "type": "ok", "lease_ms": lease_ms }),
        Outcome::Fail(e) => json!({ "type": "fail", "error": e }),
        Outcome::Info(e) => json!({ "type": "info", "error": e }),
    }
}

async fn handle(state: &mut Option<State>, req: &Value) -> Value {
    let ty = req["type"].as_str().unwrap_or("");
    if ty == "init" {
        return match init(req) {
            Ok(s) => {
                let fencing = s.options.fenced;
                let reentrant = s.algorithm.reentrant;
                let name = format!("lockaudit built-in {}", s.algorithm);
                *state = Some(s);
                json!({ "type": "init_ok", "name": name, "fencing": fencing, "reentrant": reentrant })
            }
            Err(e) => json!({ "type": "error", "error": e }),
        };
    }
    let Some(s) = state.as_mut() else {
        return json!({ "type": "error", "error": "no init yet" });
    };
    let Some(key) = req["key"].as_str().map(str::to_string) else {
        return json!({ "type": "error", "error": format!("{ty:?} without a key") });
    };
    let ttl_ms = req["ttl_ms"].as_u64();
    let mode = match mode_of(req) {
        Ok(mode) => mode,
        Err(e) => return json!({ "type": "error", "error": e }),
    };
    match ty {
        "acquire" => {
            let Some(ttl_ms) = ttl_ms else {
                return json!({ "type": "error", "error": "acquire without ttl_ms" });
            };
            let wait_ms = req["wait_ms"].as_u64().unwrap_or(0);
            let algorithm = s.algorithm;
            let client = match s.client(ttl_ms, wait_ms).await {
                Ok(c) => c,
                Err(e) => return json!({ "type": "fail", "error": e }),
            };
            // Never a lock of another kind than asked for: the protocol's `error`.
            if mode == Mode::Shared && !algorithm.takes_shared(client.as_ref()) {
                return json!({ "type": "error", "error": format!("mode \"shared\": the built-in {algorithm} has no shared mode (rw-lock has)") });
            }
            if req["fair"] == json!(true) && !algorithm.is_fair(client.as_ref()) {
                return json!({ "type": "error", "error": format!("fair: the built-in {algorithm} is not fair (fair-lock is)") });
            }
            match client.acquire_mode(&key, mode).await {
                Acquired::Ok { token, lease_ms } => {
                    s.held.insert(key);
                    json!({ "type": "ok", "token": token, "lease_ms": lease_ms })
                }
                Acquired::Fail(e) => json!({ "type": "fail", "error": e }),
                Acquired::Info(e) => {
                    s.held.insert(key);
                    json!({ "type": "info", "error": e })
                }
            }
        }
        "release" | "renew" => {
            let Some((_, client)) = s.client.as_mut() else {
                return json!({ "type": "fail", "error": "nothing acquired by this client" });
            };
            if ty == "release" {
                let o = client.release_mode(&key, mode).await;
                s.held.remove(&key);
                outcome(o)
            } else if !client.renews() {
                json!({ "type": "error", "error": "renew: this algorithm does not renew (options.watchdog)" })
            } else {
                outcome(client.renew(&key).await)
            }
        }
        other => json!({ "type": "error", "error": format!("unsupported request type {other:?}") }),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::stdout();
    let mut state = None;
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        let req: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("lockaudit-adapter: a request that is not JSON ({e}): {line}");
                continue;
            }
        };
        let mut reply = handle(&mut state, &req).await;
        reply["in_reply_to"] = req["id"].clone();
        let mut text = reply.to_string();
        text.push('\n');
        out.write_all(text.as_bytes()).await?;
        out.flush().await?;
    }
    Ok(())
}
