//! `external`: a lock client in another program (an *adapter*), driven over the stdio
//! protocol of docs/src/reference/protocol.md (version 1.4): JSON requests on its stdin, one JSON reply
//! line per request on its stdout, free text on stderr (appended to
//! `<run>/adapter-<process>.log`).
//!
//! Besides replies, the adapter may write *notices* at any time (1.1): the library renewed
//! the lock by itself (`renewed`) or found it lost (`lost`). A task reads the adapter's
//! stdout all the time, so that a notice is timed when it arrives, even while no request
//! is pending; it passes replies to the pending request and notices, stamped with the
//! moment they were read, to [`LockClient::notices`], for the client loop to record.
//!
//! One adapter process per lock client, that is per client incarnation (a process of the
//! history): `connect` starts it (argv from the workload's `adapter`, never through a shell;
//! the run folder as its working directory; `PR_SET_PDEATHSIG = SIGKILL`, so it dies with
//! its worker; in the worker's process group, so pauses and kills aimed at the worker hit it
//! too), sends `init` and waits for `init_ok` within the operation timeout, or
//! `INIT_PATIENCE` (10 s) if that is longer: an interpreter's start is no operation. Dropping the
//! client SIGKILLs the adapter (tokio reaps it).
//!
//! Any protocol failure (a reply that does not parse, a reply to another id, a line longer
//! than `MAX_LINE`, end of output, no reply within the operation timeout) makes the pending
//! operation `info`, its error quoting the adapter's last stderr lines; the client loop then
//! retires the process and connects a fresh adapter. An `error` reply (the adapter could not
//! even try) is `info` too, and a worker then stops: it logs the message and exits (status
//! 3) shortly after, so that the `info` reaches the history first.
//!
//! Under a run that skews client clocks, the adapter starts with lockaudit's wall-clock
//! library preloaded (`fake_clock`) and reads its wall clock (not its monotonic clock,
//! nor its sleeps) through the worker's offset file (`LockOptions::adapter_clock`): a
//! library that times its lock by the time of day is skewed as it would be in an
//! application.
//!
//! Modes and fairness (1.2): a workload with `read_share` sends `mode` (`shared` /
//! `exclusive`) on every acquire, release and renew (`LockOptions::modes`); one with
//! `fair = true` sends `fair: true` on every acquire. Neither is sent otherwise, so a 1.1
//! adapter sees nothing new; one that gets a field it cannot honour answers `error`, which
//! stops the run (above), rather than take a lock of another kind.
//!
//! Crash points: `external:after-acquire` (after an acquire that came back `ok`) and
//! `external:before-release`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;

use std::collections::HashMap;

use super::{Acquired, LockClient, LockError, LockOptions, Mode, Notice, NoticeKind, Outcome};
use crate::fake_clock::FakeClock;
use crate::topology::Endpoints;

/// The named steps (crash points).
pub(crate) const STEPS: &[&str] = &["external:after-acquire", "external:before-release"];

/// The longest reply line read (longer: a protocol failure).
pub const MAX_LINE: usize = 1 << 20;

/// How many of the adapter's last stderr lines an error quotes.
const TAIL_LINES: usize = 5;

/// The least time `init` may take: starting an interpreter and importing a client library
/// takes seconds on a busy machine, and no operation waits on it (nothing is recorded).
pub const INIT_PATIENCE: Duration = Duration::from_secs(10);

/// The exit status of a worker whose adapter answered `error`.
pub const EXIT_ADAPTER_ERROR: i32 = 3;

/// How a worker's stderr (its log) says why it stops after an `error` reply; the message
/// (naming the adapter and quoting its error) follows on the same line.
pub const GIVE_UP_PREFIX: &str = "lockaudit worker: the adapter cannot go on, stopping: ";

/// What an adapter said about itself in `init_ok`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub name: String,
    pub fencing: bool,
    pub reentrant: bool,
}

/// How messages name an adapter: its command line, shortened (`python3 ./adapter.py`).
fn command_line(argv: &[String]) -> String {
    let line = argv.join(" ");
    if line.chars().count() <= 120 {
        return line;
    }
    let short: String = line.chars().take(117).collect();
    format!("{short}...")
}

/// The non-empty lines of a stderr log without the frames of a stack trace (indented lines,
/// Python's `Traceback` header), so that its last lines hold the error itself: Python
/// prints it after the frames, Node before them.
fn without_stack_frames(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| !l.starts_with([' ', '\t']))
        .filter(|l| !l.starts_with("Traceback (most recent call last)"))
        .collect()
}

/// One reply, checked for `in_reply_to` and `type`.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub ty: String,
    pub body: Map<String, Value>,
}

impl Reply {
    fn error_text(&self) -> String {
        match self.body.get("error") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => self.ty.clone(),
        }
    }
}

/// What went wrong with a request, a reply or a notice (docs/src/reference/protocol.md),
/// before the adapter's name and the tail of its stderr are added ([`AdapterError::Failed`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProtocolError {
    #[error("no reply within {0} ms")]
    Timeout(u128),
    #[error("not an object: {0}")]
    NotAnObject(Value),
    /// Writing the request failed, in the pipe's words.
    #[error("cannot write the request (exited?): {0}")]
    Write(String),
    #[error("exited ({0}) without replying")]
    Exited(std::process::ExitStatus),
    #[error("closed its stdout without replying")]
    Closed,
    /// Reading its stdout failed, in the pipe's words.
    #[error("cannot read its reply: {0}")]
    Read(String),
    #[error("a reply line longer than {0} bytes")]
    TooLong(usize),
    #[error("a `{ty}` notice without a string `key`: {shown:?}")]
    NoticeWithoutKey { ty: String, shown: String },
    #[error("a `renewed` notice whose {field}: {shown:?}")]
    BadRenewed { field: FieldError, shown: String },
    /// `shown`: the line as [`shown_line`] quotes it.
    #[error("a reply that is not JSON ({reason}): {shown}")]
    NotJson { reason: String, shown: String },
    #[error("a reply that is not a JSON object: {shown}")]
    NotObject { shown: String },
    #[error("a reply with in_reply_to {got} to request {id}: {shown}")]
    WrongId { got: Value, id: u64, shown: String },
    #[error("a reply without a string `type`: {shown}")]
    NoType { shown: String },
    #[error("answered init with {ty:?}: {error}")]
    InitRefused { ty: String, error: String },
    /// An `error` reply, which stops the run.
    #[error("error reply: {0}")]
    ErrorReply(String),
    #[error("a reply of unknown type {0:?}")]
    UnknownType(String),
    #[error(transparent)]
    Field(FieldError),
}

/// A field of an `ok` reply or a `renewed` notice that the protocol does not allow.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FieldError {
    /// `lease_ms` or `valid_ms`.
    #[error("`{field}` {value} is not an integer ≥ 0")]
    NotNonNegative { field: &'static str, value: Value },
    #[error("`token` {0} is not an integer or null")]
    Token(Value),
}

/// Why an adapter could not be started, or can go on no more. Once a request failed, every
/// later one fails with the same error (`Clone`, so the reasons from the system are kept
/// as their words).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdapterError {
    #[error("algorithm \"external\" without an adapter (LockOptions::adapter)")]
    NoAdapter,
    #[error("the adapter's argv is empty")]
    EmptyArgv,
    #[error("cannot open the adapter log {}: {reason}", path.display())]
    Log { path: PathBuf, reason: String },
    #[error("cannot start the adapter: program {program:?} not found (argv {argv:?})")]
    NotFound { program: String, argv: Vec<String> },
    #[error("cannot start the adapter {argv:?}: {reason}")]
    Spawn { argv: Vec<String>, reason: String },
    /// Its `stdin` or `stdout` was not piped.
    #[error("the adapter has no {0}")]
    NoPipe(&'static str),
    /// A request that failed, the adapter named by its command line (the script, not only
    /// the interpreter), with the last lines of its stderr (empty: none).
    #[error("adapter {program}: {failure}{}", stderr_said(tail))]
    Failed {
        program: String,
        /// Boxed: a reply's fields make it large, and every `Result` would carry that.
        failure: Box<ProtocolError>,
        tail: String,
    },
}

fn stderr_said(tail: &str) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!("; its stderr: {tail}")
    }
}

/// What the stdout reader passes on for the pending request: a line that is not a notice
/// (checked against the request by `parse_reply`), or why reading failed. The channel
/// closes at the end of the adapter's output.
type ReplyLine = Result<Vec<u8>, ProtocolError>;

/// A line the adapter wrote, as read (without its `\n`), and when: what
/// [`Adapter::spawn_tapped`] passes on, so that `adapter-test` can judge the notices by the
/// very lines the adapter wrote.
#[derive(Debug, Clone)]
pub struct Line {
    pub at: std::time::Instant,
    pub raw: Vec<u8>,
}

/// A running adapter process and its pipes. Dropping it SIGKILLs the process (and so ends
/// its stdout reader).
pub struct Adapter {
    child: Child,
    stdin: ChildStdin,
    replies: mpsc::UnboundedReceiver<ReplyLine>,
    notices: mpsc::UnboundedReceiver<Notice>,
    next_id: u64,
    log: Option<PathBuf>,
    program: String,
    /// Set by the first protocol failure: nothing more is sent.
    broken: Option<AdapterError>,
}

impl Adapter {
    /// Starts `argv` in `cwd` (None: the current directory), stderr appended to `log`
    /// (None: discarded), its wall clock read through `clock` if given. The error says
    /// clearly when the program is missing.
    pub fn spawn(
        argv: &[String],
        cwd: Option<&Path>,
        log: Option<&Path>,
        clock: Option<&FakeClock>,
    ) -> Result<Adapter, AdapterError> {
        Adapter::start(argv, cwd, log, clock, None)
    }

    /// As [`Adapter::spawn`], and every line the adapter writes (replies and notices alike)
    /// is passed on to the receiver as well.
    pub fn spawn_tapped(
        argv: &[String],
        cwd: Option<&Path>,
        log: Option<&Path>,
    ) -> Result<(Adapter, mpsc::UnboundedReceiver<Line>), AdapterError> {
        let (tap, lines) = mpsc::unbounded_channel();
        Adapter::start(argv, cwd, log, None, Some(tap)).map(|adapter| (adapter, lines))
    }

    fn start(
        argv: &[String],
        cwd: Option<&Path>,
        log: Option<&Path>,
        clock: Option<&FakeClock>,
        tap: Option<mpsc::UnboundedSender<Line>>,
    ) -> Result<Adapter, AdapterError> {
        let (program, args) = argv.split_first().ok_or(AdapterError::EmptyArgv)?;
        let stderr = match log {
            Some(path) => Stdio::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| AdapterError::Log {
                        path: path.to_path_buf(),
                        reason: e.to_string(),
                    })?,
            ),
            None => Stdio::null(),
        };
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true);
        if let Some(dir) = cwd {
            command.current_dir(dir);
        }
        if let Some(clock) = clock {
            command.envs(clock.env());
        }
        // SAFETY: the closure only calls prctl(2), which is async-signal-safe.
        unsafe {
            command.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                    .map_err(std::io::Error::from)
            });
        }
        let mut child = command.spawn().map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                AdapterError::NotFound {
                    program: program.clone(),
                    argv: argv.to_vec(),
                }
            } else {
                AdapterError::Spawn {
                    argv: argv.to_vec(),
                    reason: e.to_string(),
                }
            }
        })?;
        let stdin = child.stdin.take().ok_or(AdapterError::NoPipe("stdin"))?;
        let stdout = child.stdout.take().ok_or(AdapterError::NoPipe("stdout"))?;
        let (reply_tx, replies) = mpsc::unbounded_channel();
        let (notice_tx, notices) = mpsc::unbounded_channel();
        let program = command_line(argv);
        tokio::spawn(read_stdout(
            BufReader::new(stdout),
            reply_tx,
            notice_tx,
            tap,
            program.clone(),
            log.map(Path::to_path_buf),
        ));
        Ok(Adapter {
            child,
            stdin,
            replies,
            notices,
            next_id: 0,
            log: log.map(Path::to_path_buf),
            program,
            broken: None,
        })
    }

    /// The OS process id (None once reaped).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The last lines of the adapter's stderr log, joined with ` | ` ("" if none).
    pub fn stderr_tail(&self) -> String {
        let Some(path) = &self.log else {
            return String::new();
        };
        let Ok(bytes) = std::fs::read(path) else {
            return String::new();
        };
        // Only the end of a long log.
        let start = bytes.len().saturating_sub(8192);
        let text = String::from_utf8_lossy(&bytes[start..]);
        let lines = without_stack_frames(&text);
        let from = lines.len().saturating_sub(TAIL_LINES);
        lines[from..]
            .iter()
            .map(|l| l.chars().take(300).collect::<String>())
            .collect::<Vec<_>>()
            .join(" | ")
    }

    /// `failure` with the stderr tail, naming the adapter by its command line.
    pub fn failed(&self, failure: ProtocolError) -> AdapterError {
        AdapterError::Failed {
            program: self.program.clone(),
            failure: Box::new(failure),
            tail: self.stderr_tail(),
        }
    }

    /// `failure` with the stderr tail, which every later request fails with too.
    fn break_with(&mut self, failure: ProtocolError) -> AdapterError {
        let why = self.failed(failure);
        self.broken = Some(why.clone());
        why
    }

    /// Sends `request` (an object without `id`; the id is added) and reads its reply within
    /// `timeout`. Any failure marks the adapter broken and returns why (stderr tail
    /// included).
    pub async fn request(
        &mut self,
        request: Value,
        timeout: Duration,
    ) -> Result<Reply, AdapterError> {
        if let Some(why) = &self.broken {
            return Err(why.clone());
        }
        let result = match tokio::time::timeout(timeout, self.exchange(request)).await {
            Ok(result) => result,
            Err(_) => Err(ProtocolError::Timeout(timeout.as_millis())),
        };
        result.map_err(|failure| self.break_with(failure))
    }

    async fn exchange(&mut self, request: Value) -> Result<Reply, ProtocolError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut object = match request {
            Value::Object(o) => o,
            other => return Err(ProtocolError::NotAnObject(other)),
        };
        object.insert("id".into(), json!(id));
        let mut line = Value::Object(object).to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .await
            .map_err(|e| ProtocolError::Write(e.to_string()))?;
        self.stdin
            .flush()
            .await
            .map_err(|e| ProtocolError::Write(e.to_string()))?;
        let raw = match self.replies.recv().await {
            Some(Ok(raw)) => raw,
            Some(Err(e)) => return Err(e),
            None => {
                // Give the exit status a moment to be there, for the message.
                let status =
                    tokio::time::timeout(Duration::from_millis(100), self.child.wait()).await;
                return Err(match status {
                    Ok(Ok(s)) => ProtocolError::Exited(s),
                    _ => ProtocolError::Closed,
                });
            }
        };
        parse_reply(&raw, id)
    }

    /// The next notice, waiting for one (None once the adapter's output ended).
    pub async fn next_notice(&mut self) -> Option<Notice> {
        self.notices.recv().await
    }

    /// A notice already read, if any.
    pub fn try_notice(&mut self) -> Option<Notice> {
        self.notices.try_recv().ok()
    }

    /// Sends `init` and waits for `init_ok`.
    pub async fn init(
        &mut self,
        client: u64,
        endpoints: &Endpoints,
        options: Value,
        timeout: Duration,
    ) -> Result<Hello, AdapterError> {
        let request = init_request(client, endpoints, options);
        let reply = self.request(request, timeout).await?;
        if reply.ty != "init_ok" {
            let error = reply.error_text();
            return Err(self.break_with(ProtocolError::InitRefused {
                ty: reply.ty,
                error,
            }));
        }
        Ok(Hello {
            name: reply
                .body
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            fencing: reply.body.get("fencing").and_then(Value::as_bool) == Some(true),
            reentrant: reply.body.get("reentrant").and_then(Value::as_bool) == Some(true),
        })
    }
}

/// The `init` request (without its id) for `client` on `endpoints`.
pub fn init_request(client: u64, endpoints: &Endpoints, options: Value) -> Value {
    let password = endpoints.password.clone();
    let nodes: Vec<Value> = endpoints
        .nodes
        .iter()
        .map(|n| json!({ "host": n.host, "port": n.port, "password": password }))
        .collect();
    let sentinels: Vec<Value> = endpoints
        .sentinels
        .iter()
        .map(|n| json!({ "host": n.host, "port": n.port }))
        .collect();
    let topology = serde_json::to_value(endpoints.topology).unwrap_or(Value::Null);
    json!({
        "type": "init",
        "client": client,
        "topology": topology,
        "nodes": nodes,
        "sentinels": sentinels,
        "master_name": endpoints.master_name,
        "options": if options.is_null() { json!({}) } else { options },
    })
}

/// One line (without its `\n`) of at most `max` bytes; None at end of output. A longer line
/// is an error.
async fn read_line_bounded(
    reader: &mut BufReader<ChildStdout>,
    max: usize,
) -> Result<Option<Vec<u8>>, ProtocolError> {
    let mut line = Vec::new();
    loop {
        let buf = reader
            .fill_buf()
            .await
            .map_err(|e| ProtocolError::Read(e.to_string()))?;
        if buf.is_empty() {
            return Ok(None);
        }
        match memchr::memchr(b'\n', buf) {
            Some(i) => {
                line.extend_from_slice(&buf[..i]);
                reader.consume(i + 1);
                if line.len() > max {
                    return Err(ProtocolError::TooLong(max));
                }
                return Ok(Some(line));
            }
            None => {
                let n = buf.len();
                line.extend_from_slice(buf);
                reader.consume(n);
                if line.len() > max {
                    return Err(ProtocolError::TooLong(max));
                }
            }
        }
    }
}

/// The adapter's stdout until its end: notices go to `notices`, stamped with the moment
/// they were read; everything else (replies, and lines that are neither) goes to
/// `replies`, as does a notice that does not parse (a protocol failure for the request
/// pending then, or the next one). Every line also goes to `tap`, if given. Stops after a
/// read error, or when nobody listens.
async fn read_stdout(
    mut stdout: BufReader<ChildStdout>,
    replies: mpsc::UnboundedSender<ReplyLine>,
    notices: mpsc::UnboundedSender<Notice>,
    tap: Option<mpsc::UnboundedSender<Line>>,
    program: String,
    log: Option<PathBuf>,
) {
    loop {
        let raw = match read_line_bounded(&mut stdout, MAX_LINE).await {
            Ok(Some(raw)) => raw,
            Ok(None) => return,
            Err(e) => {
                let _ = replies.send(Err(e));
                return;
            }
        };
        let at = std::time::Instant::now();
        if let Some(tap) = &tap {
            let _ = tap.send(Line {
                at,
                raw: raw.clone(),
            });
        }
        let sent = match notice_of(&raw) {
            None => replies.send(Ok(raw)).is_ok(),
            Some(Ok((kind, warning))) => {
                if let Some(warning) = warning {
                    warn_in_log(&program, log.as_deref(), &warning);
                }
                notices.send(Notice { at, kind }).is_ok()
            }
            Some(Err(e)) => replies.send(Err(e)).is_ok(),
        };
        if !sent {
            return;
        }
    }
}

/// Whether a line is a notice (a JSON object with no `in_reply_to` and `type` `renewed` or
/// `lost`): None if not; the notice (with a warning about its lease, if any), or why it
/// cannot be one, if so.
fn notice_of(raw: &[u8]) -> Option<Result<(NoticeKind, Option<String>), ProtocolError>> {
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(raw) else {
        return None;
    };
    if body.contains_key("in_reply_to") {
        return None;
    }
    let ty = body.get("type").and_then(Value::as_str)?.to_string();
    if ty != "renewed" && ty != "lost" {
        return None;
    }
    let shown: String = String::from_utf8_lossy(raw).chars().take(200).collect();
    let Some(key) = body.get("key").and_then(Value::as_str).map(str::to_string) else {
        return Some(Err(ProtocolError::NoticeWithoutKey { ty, shown }));
    };
    let notice = Reply { ty, body };
    if notice.ty == "lost" {
        let lost = NoticeKind::Lost {
            key,
            error: notice.error_text(),
        };
        return Some(Ok((lost, None)));
    }
    // The lease runs from the moment the line is read: nothing to add to `valid_ms`.
    Some(
        lease_checked(&notice, Duration::ZERO)
            .map(|(lease_ms, warning)| (NoticeKind::Renewed { key, lease_ms }, warning))
            .map_err(|field| ProtocolError::BadRenewed { field, shown }),
    )
}

/// A line as the adapter wrote it, shortened, in quotes: for a message about it.
pub(crate) fn shown_line(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let short: String = text.chars().take(200).collect();
    if short.len() < text.len() {
        format!("{short:?}…")
    } else {
        format!("{short:?}")
    }
}

/// Checks a reply line: a JSON object answering `id`, with a string `type`.
fn parse_reply(raw: &[u8], id: u64) -> Result<Reply, ProtocolError> {
    let shown = || shown_line(raw);
    let value: Value = serde_json::from_slice(raw).map_err(|e| ProtocolError::NotJson {
        reason: e.to_string(),
        shown: shown(),
    })?;
    let Value::Object(body) = value else {
        return Err(ProtocolError::NotObject { shown: shown() });
    };
    match body.get("in_reply_to").and_then(Value::as_u64) {
        Some(n) if n == id => {}
        _ => {
            return Err(ProtocolError::WrongId {
                got: body.get("in_reply_to").cloned().unwrap_or(Value::Null),
                id,
                shown: shown(),
            })
        }
    }
    let Some(ty) = body.get("type").and_then(Value::as_str).map(str::to_string) else {
        return Err(ProtocolError::NoType { shown: shown() });
    };
    Ok(Reply { ty, body })
}

/// A lease from an `ok` reply, counted from the request: `lease_ms` (absent or null: none
/// promised; an integer ≥ 0), or (protocol 1.1) `valid_ms`, the validity the library reports
/// as left when it answered, to which the time the request took (`elapsed`) is added. A
/// warning comes with a lease too large for a signed 64-bit integer: such a lease is the
/// library's answer all the same (docs/src/reference/protocol.md), recorded as `i64::MAX` for the checker
/// to judge.
fn lease_checked(
    reply: &Reply,
    elapsed: Duration,
) -> Result<(Option<i64>, Option<String>), FieldError> {
    if reply.body.get("lease_ms").is_none() {
        if let Some(v) = reply.body.get("valid_ms") {
            let valid =
                v.as_i64()
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| FieldError::NotNonNegative {
                        field: "valid_ms",
                        value: v.clone(),
                    })?;
            // Whole milliseconds, rounded up: the lock was valid at least that long after
            // the request.
            let took = elapsed.as_micros().div_ceil(1000);
            let took = i64::try_from(took).unwrap_or(i64::MAX);
            return Ok((Some(valid.saturating_add(took)), None));
        }
    }
    let Some(v) = reply.body.get("lease_ms") else {
        return Ok((None, None));
    };
    if v.is_null() {
        return Ok((None, None));
    }
    if let Some(n) = v.as_i64() {
        return if n >= 0 {
            Ok((Some(n), None))
        } else {
            Err(FieldError::NotNonNegative {
                field: "lease_ms",
                value: v.clone(),
            })
        };
    }
    // Beyond i64: a u64, or (past u64) a float with no fraction, as serde_json reads it.
    let huge = v.is_u64()
        || v.as_f64()
            .is_some_and(|f| f >= i64::MAX as f64 && f.fract() == 0.0);
    if huge {
        let warning = format!(
            "`lease_ms` {v} is too large for a signed 64-bit integer: recorded as {}",
            i64::MAX
        );
        return Ok((Some(i64::MAX), Some(warning)));
    }
    Err(FieldError::NotNonNegative {
        field: "lease_ms",
        value: v.clone(),
    })
}

/// A token from an `ok` reply: null / absent, or an integer.
fn token_of(reply: &Reply) -> Result<Option<i64>, FieldError> {
    match reply.body.get("token") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| FieldError::Token(v.clone())),
    }
}

/// A reply or notice lockaudit accepts but must warn about: logged, and appended to the
/// adapter's own log (`log`) so that it sits next to what the adapter said.
fn warn_in_log(program: &str, log: Option<&Path>, what: &str) {
    tracing::warn!("adapter {program}: {what}");
    if let Some(path) = log {
        use std::io::Write as _;
        if let Ok(mut log) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
        {
            let _ = writeln!(log, "lockaudit: warning: {what}");
        }
    }
}

/// A reply other than `ok`.
enum NotOk {
    Fail(String),
    Info(String),
}

impl NotOk {
    fn outcome(self) -> Outcome {
        match self {
            NotOk::Fail(why) => Outcome::Fail(why),
            NotOk::Info(why) => Outcome::Info(why),
        }
    }
}

/// The lock client over an adapter.
pub struct External {
    adapter: Adapter,
    options: LockOptions,
    pub hello: Hello,
    /// The mode of each key's last granted acquire: the `mode` of its renewals (a client
    /// holds a key in one mode at a time; a nested acquire repeats it).
    held: HashMap<String, Mode>,
}

/// A mode as requests spell it.
fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Exclusive => "exclusive",
        Mode::Shared => "shared",
    }
}

impl External {
    /// Starts the adapter and completes its `init` within the operation timeout.
    pub async fn connect(
        endpoints: &Endpoints,
        options: LockOptions,
    ) -> Result<External, LockError> {
        let argv = options
            .adapter
            .clone()
            .ok_or(LockError::Adapter(AdapterError::NoAdapter))?;
        let log = options
            .run_dir
            .as_ref()
            .map(|dir| dir.join(format!("adapter-{}.log", options.process)));
        let mut adapter = Adapter::spawn(
            &argv,
            options.run_dir.as_deref(),
            log.as_deref(),
            options.adapter_clock.as_ref(),
        )
        .map_err(LockError::Adapter)?;
        let hello = adapter
            .init(
                options.process,
                endpoints,
                options.adapter_options.clone().unwrap_or(Value::Null),
                options.op_timeout().max(INIT_PATIENCE),
            )
            .await
            .map_err(LockError::Adapter)?;
        tracing::debug!("adapter for process {}: {hello:?}", options.process);
        Ok(External {
            adapter,
            options,
            hello,
            held: HashMap::new(),
        })
    }

    /// Adds `mode` to a request when the workload takes shared holds (only then: a 1.1
    /// adapter must see no new field).
    fn with_mode(&self, mut request: Value, mode: Mode) -> Value {
        if self.options.modes {
            request["mode"] = json!(mode_name(mode));
        }
        request
    }

    /// A little less than the operation timeout, so that our own limit (whose error quotes
    /// the adapter's stderr) fires before the client loop's.
    fn timeout(&self) -> Duration {
        let full = self.options.op_timeout();
        full.saturating_sub((full / 10).min(Duration::from_millis(50)))
            .max(Duration::from_millis(1))
    }

    /// Sends a request; the reply, or the `info` error text (what the history records).
    async fn call(&mut self, request: Value) -> Result<Reply, String> {
        let timeout = self.timeout();
        let reply = self
            .adapter
            .request(request, timeout)
            .await
            .map_err(|e| e.to_string())?;
        if reply.ty == "error" {
            let error = self
                .adapter
                .failed(ProtocolError::ErrorReply(reply.error_text()));
            let message = error.to_string();
            self.fatal(error);
            return Err(message);
        }
        Ok(reply)
    }

    /// An `error` reply: docs/src/reference/protocol.md stops the run. In a worker (a run folder is known) the
    /// worker logs the message and exits shortly, after the `info` is recorded; elsewhere
    /// the caller gets the `info`.
    fn fatal(&mut self, error: AdapterError) {
        let message = error.to_string();
        self.adapter.broken = Some(error);
        tracing::error!("stopping: {message}");
        if self.options.run_dir.is_some() {
            eprintln!("{GIVE_UP_PREFIX}{message}");
            tokio::spawn(async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                std::process::exit(EXIT_ADAPTER_ERROR);
            });
        }
    }

    /// `ok` → Ok(reply), `fail` → Err(Fail), `info` or anything else → Err(Info).
    fn classify(&mut self, reply: Reply) -> Result<Reply, NotOk> {
        match reply.ty.as_str() {
            "ok" => Ok(reply),
            "fail" => Err(NotOk::Fail(reply.error_text())),
            "info" => Err(NotOk::Info(reply.error_text())),
            other => {
                let why = self
                    .adapter
                    .break_with(ProtocolError::UnknownType(other.to_string()));
                Err(NotOk::Info(why.to_string()))
            }
        }
    }

    /// A reply lockaudit accepts but must warn about (`warn_in_log`).
    fn warn(&self, what: &str) {
        warn_in_log(&self.adapter.program, self.adapter.log.as_deref(), what);
    }

    /// The `info` text of a reply whose fields break the protocol; the adapter is broken.
    fn protocol_failure(&mut self, field: FieldError) -> String {
        self.adapter
            .break_with(ProtocolError::Field(field))
            .to_string()
    }
}

#[async_trait]
impl LockClient for External {
    fn ttl_ms(&self) -> Option<i64> {
        // The `ttl_ms` of the acquire request.
        Some(self.options.ttl())
    }

    fn shared(&self) -> bool {
        self.options.modes
    }

    /// The adapter's own tokens fence a `--fenced` run when it said it has them.
    fn own_tokens(&self) -> bool {
        self.hello.fencing
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
        if mode == Mode::Shared && !self.options.modes {
            return Acquired::Fail("this workload takes no shared holds (read_share)".into());
        }
        let mut request = json!({
            "type": "acquire",
            "key": key,
            "ttl_ms": self.options.ttl_ms,
            "wait_ms": self.options.wait_ms,
        });
        request = self.with_mode(request, mode);
        if self.options.fair {
            request["fair"] = json!(true);
        }
        let sent = std::time::Instant::now();
        let reply = match self.call(request).await {
            Ok(reply) => reply,
            Err(why) => return Acquired::Info(why),
        };
        let elapsed = sent.elapsed();
        let reply = match self.classify(reply) {
            Ok(reply) => reply,
            Err(NotOk::Fail(why)) => return Acquired::Fail(why),
            Err(NotOk::Info(why)) => return Acquired::Info(why),
        };
        match (token_of(&reply), lease_checked(&reply, elapsed)) {
            (Ok(token), Ok((lease_ms, warning))) => {
                if let Some(warning) = warning {
                    self.warn(&warning);
                }
                self.held.insert(key.to_string(), mode);
                self.options.step("external:after-acquire");
                Acquired::Ok { token, lease_ms }
            }
            (Err(e), _) | (_, Err(e)) => Acquired::Info(self.protocol_failure(e)),
        }
    }

    async fn release_mode(&mut self, key: &str, mode: Mode) -> Outcome {
        self.options.step("external:before-release");
        let request = self.with_mode(json!({ "type": "release", "key": key }), mode);
        match self.call(request).await {
            Ok(reply) => match self.classify(reply) {
                Ok(_) => Outcome::Ok { lease_ms: None },
                Err(not_ok) => not_ok.outcome(),
            },
            Err(why) => Outcome::Info(why),
        }
    }

    async fn renew(&mut self, key: &str) -> Outcome {
        let mode = self.held.get(key).copied().unwrap_or(Mode::Exclusive);
        let request = self.with_mode(
            json!({ "type": "renew", "key": key, "ttl_ms": self.options.ttl_ms }),
            mode,
        );
        let sent = std::time::Instant::now();
        match self.call(request).await {
            Ok(reply) => match self.classify(reply) {
                Ok(reply) => match lease_checked(&reply, sent.elapsed()) {
                    Ok((lease_ms, warning)) => {
                        if let Some(warning) = warning {
                            self.warn(&warning);
                        }
                        Outcome::Ok { lease_ms }
                    }
                    Err(e) => Outcome::Info(self.protocol_failure(e)),
                },
                Err(not_ok) => not_ok.outcome(),
            },
            Err(why) => Outcome::Info(why),
        }
    }

    fn renews(&self) -> bool {
        self.options.watchdog
    }

    fn renew_every(&self) -> Option<Duration> {
        self.options.watchdog_period()
    }

    async fn next_notice(&mut self) -> Option<Notice> {
        match self.adapter.next_notice().await {
            Some(notice) => Some(notice),
            // The output ended: no notice will come (the next request finds out why).
            None => std::future::pending().await,
        }
    }

    fn try_notice(&mut self) -> Option<Notice> {
        self.adapter.try_notice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_must_answer_the_request_and_parse() {
        let ok = parse_reply(
            br#"{"in_reply_to":4,"type":"ok","token":null,"lease_ms":10}"#,
            4,
        )
        .unwrap();
        assert_eq!(ok.ty, "ok");
        assert_eq!(lease_checked(&ok, Duration::ZERO), Ok((Some(10), None)));
        assert_eq!(token_of(&ok), Ok(None));
        let e = parse_reply(br#"{"in_reply_to":3,"type":"ok"}"#, 4).unwrap_err();
        assert!(matches!(e, ProtocolError::WrongId { id: 4, .. }), "{e}");
        assert!(e.to_string().contains("in_reply_to 3 to request 4"), "{e}");
        let e = parse_reply(b"hello", 4).unwrap_err();
        assert!(matches!(e, ProtocolError::NotJson { .. }), "{e}");
        assert!(e.to_string().contains("not JSON"), "{e}");
        let e = parse_reply(br#"[1]"#, 4).unwrap_err();
        assert_eq!(
            e.to_string(),
            "a reply that is not a JSON object: \"[1]\"",
            "{e}"
        );
        let e = parse_reply(br#"{"in_reply_to":4}"#, 4).unwrap_err();
        assert!(matches!(e, ProtocolError::NoType { .. }), "{e}");
        let bad = parse_reply(
            br#"{"in_reply_to":4,"type":"ok","token":"x","lease_ms":-1}"#,
            4,
        )
        .unwrap();
        assert_eq!(token_of(&bad), Err(FieldError::Token(json!("x"))));
        assert_eq!(
            lease_checked(&bad, Duration::ZERO).unwrap_err().to_string(),
            "`lease_ms` -1 is not an integer ≥ 0"
        );
    }

    #[test]
    fn a_lease_too_large_for_i64_is_the_largest_with_a_warning() {
        for text in [
            "18446744073709551615",
            "9223372036854775808",
            "1e30",
            "100000000000000000000000",
        ] {
            let line = format!(r#"{{"in_reply_to":1,"type":"ok","token":null,"lease_ms":{text}}}"#);
            let reply = parse_reply(line.as_bytes(), 1).unwrap();
            let (lease, warning) = lease_checked(&reply, Duration::ZERO).unwrap();
            assert_eq!(lease, Some(i64::MAX), "{text}");
            assert!(warning.unwrap().contains("too large"), "{text}");
        }
        let max = format!(r#"{{"in_reply_to":1,"type":"ok","lease_ms":{}}}"#, i64::MAX);
        let reply = parse_reply(max.as_bytes(), 1).unwrap();
        assert_eq!(
            lease_checked(&reply, Duration::ZERO).unwrap(),
            (Some(i64::MAX), None)
        );
        for bad in ["-18446744073709551615", "1.5", "-1e30", "\"x\""] {
            let line = format!(r#"{{"in_reply_to":1,"type":"ok","lease_ms":{bad}}}"#);
            let reply = parse_reply(line.as_bytes(), 1).unwrap();
            assert!(lease_checked(&reply, Duration::ZERO).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_stack_trace_is_shown_by_its_error_line() {
        let python = "Traceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n    main()\n  File \"a.py\", line 2, in main\n    raise ValueError(\"no redis\")\nValueError: no redis\n";
        assert_eq!(without_stack_frames(python), ["ValueError: no redis"]);
        let node = "/srv/adapter.js:10\n    throw new Error('boom');\n    ^\n\nError: boom\n    at Object.<anonymous> (/srv/adapter.js:10:11)\n    at Module._compile (node:internal/modules/cjs/loader:1256:14)\n\nNode.js v20.11.0\n";
        assert_eq!(
            without_stack_frames(node),
            ["/srv/adapter.js:10", "Error: boom", "Node.js v20.11.0"]
        );
        assert_eq!(
            command_line(&["node".into(), "./adapter.js".into()]),
            "node ./adapter.js"
        );
    }

    #[test]
    fn valid_ms_is_counted_from_the_request() {
        let reply = |body: &str| parse_reply(body.as_bytes(), 1).unwrap();
        // 1.1: 700 ms left when the library answered, 1.2 s after the request.
        let took = Duration::from_micros(1_200_100);
        let r = reply(r#"{"in_reply_to":1,"type":"ok","token":null,"valid_ms":700}"#);
        assert_eq!(lease_checked(&r, took), Ok((Some(1_901), None)));
        // lease_ms wins when both come; null is a lock that never expires.
        let r = reply(r#"{"in_reply_to":1,"type":"ok","lease_ms":300,"valid_ms":700}"#);
        assert_eq!(lease_checked(&r, took), Ok((Some(300), None)));
        let r = reply(r#"{"in_reply_to":1,"type":"ok","lease_ms":null}"#);
        assert_eq!(lease_checked(&r, took), Ok((None, None)));
        let r = reply(r#"{"in_reply_to":1,"type":"ok","valid_ms":-5}"#);
        assert!(matches!(
            lease_checked(&r, took),
            Err(FieldError::NotNonNegative {
                field: "valid_ms",
                ..
            })
        ));
    }

    #[test]
    fn notices_are_told_from_replies() {
        // A reply, or a line with another type, is no notice: it goes to the request.
        assert!(notice_of(br#"{"in_reply_to":1,"type":"renewed","key":"k"}"#).is_none());
        assert!(notice_of(br#"{"type":"ok"}"#).is_none());
        assert!(notice_of(b"not json").is_none());
        assert_eq!(
            notice_of(br#"{"type":"renewed","key":"lock:a","lease_ms":2000}"#),
            Some(Ok((
                NoticeKind::Renewed {
                    key: "lock:a".into(),
                    lease_ms: Some(2000)
                },
                None
            )))
        );
        // `valid_ms` counts from the same moment: nothing is added.
        assert_eq!(
            notice_of(br#"{"type":"renewed","key":"k","valid_ms":1500}"#),
            Some(Ok((
                NoticeKind::Renewed {
                    key: "k".into(),
                    lease_ms: Some(1500)
                },
                None
            )))
        );
        assert_eq!(
            notice_of(br#"{"type":"lost","key":"k","error":"expired"}"#),
            Some(Ok((
                NoticeKind::Lost {
                    key: "k".into(),
                    error: "expired".into()
                },
                None
            )))
        );
        let no_key = notice_of(br#"{"type":"lost"}"#).unwrap().unwrap_err();
        assert!(
            no_key.to_string().contains("without a string `key`"),
            "{no_key}"
        );
        let bad_lease = notice_of(br#"{"type":"renewed","key":"k","lease_ms":-5}"#)
            .unwrap()
            .unwrap_err();
        assert_eq!(
            bad_lease.to_string(),
            r#"a `renewed` notice whose `lease_ms` -5 is not an integer ≥ 0: "{\"type\":\"renewed\",\"key\":\"k\",\"lease_ms\":-5}""#
        );
    }
}
