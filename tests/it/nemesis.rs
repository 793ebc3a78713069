//! The nemesis against real redis-server and real `lockaudit worker` processes: every fault
//! it injects really happens, and every heal really heals.
//!
//! Most tests drive the executor (or the network of proxies) at library level with a fixed
//! plan, and observe the fault's effect while it lasts: a worker's or a server's state in
//! `/proc/<pid>/stat`, a PING that gets no answer, a server's `TIME`, a lock value written
//! by a skewed client, a replication link that no longer copies. Observers wait for the
//! nemesis event (a fault is journaled once injected) and poll with deadlines; the only
//! fixed waits are a fault's own duration. The last tests run the real binary end to end:
//! Ctrl-C in the middle of a fault, and a short random mix of faults.

use crate::common;
use crate::common::{eventually, signal};

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use lockaudit::clock::{wall_ms, RunClock};
use lockaudit::cluster::SENTINEL_FAILOVER_MS;
use lockaudit::cluster::{self, ClusterSpec, Endpoints, Topology};
use lockaudit::fleet::{Fleet, WORKER_EXE_ENV};
use lockaudit::history::RecordedLine;
use lockaudit::nemesis::executor::{execute, Targets};
use lockaudit::nemesis::journal::Journal;
use lockaudit::nemesis::network::Network;
use lockaudit::nemesis::schedule::Link;
use lockaudit::nemesis::{FaultKind, PlannedFault};
use lockaudit::run::recorder::{record, Counts};
use lockaudit::units::Millis;
use lockaudit::workload::worker::WorkerConfig;
use lockaudit::workload::WorkloadSpec;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

// ---------------------------------------------------------------------------------------
// Time, processes, connections
// ---------------------------------------------------------------------------------------

/// Milliseconds of run time as the nanoseconds of `RunClock` and event times.
fn ms(n: u64) -> i64 {
    n as i64 * 1_000_000
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Waits until the run clock reads `run_ms` (a fault's own duration: real time).
async fn sleep_until_run(clock: RunClock, run_ms: u64) {
    let left = ms(run_ms) - clock.now();
    if left > 0 {
        tokio::time::sleep(Duration::from_nanos(left as u64)).await;
    }
}

/// The state letter and start time (clock ticks since boot) of a live or zombie process.
fn proc_stat(pid: u32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

/// A process as (pid, start time), so that a reused pid is not mistaken for it.
fn identity(pid: u32) -> (u32, u64) {
    (pid, proc_stat(pid).expect("a running process").1)
}

/// The process's state letter, None once it is gone (or its pid went to another process).
fn state_of(id: (u32, u64)) -> Option<char> {
    match proc_stat(id.0) {
        Some((state, start)) if start == id.1 => Some(state),
        _ => None,
    }
}

/// Stopped by SIGSTOP (`T`) or, under a tracer, `t`.
fn stopped(state: Option<char>) -> bool {
    matches!(state, Some('T' | 't'))
}

/// Alive and not stopped.
fn running(state: Option<char>) -> bool {
    matches!(state, Some(s) if !matches!(s, 'T' | 't' | 'Z' | 'X'))
}

/// A redis-rs connection with generous timeouts (the tests share two cores).
async fn connect(url: &str) -> MultiplexedConnection {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(secs(5)))
        .set_response_timeout(Some(secs(5)));
    redis::Client::open(url)
        .expect("a valid url")
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"))
}

async fn connect_node(endpoints: &Endpoints, name: &str) -> MultiplexedConnection {
    let node = endpoints.node(name).expect("a node of the cluster");
    connect(&endpoints.url(node)).await
}

/// A URL for the cluster's password at a loopback port (a server or a proxy).
fn url_at(endpoints: &Endpoints, port: u16) -> String {
    format!(
        "redis://:{}@127.0.0.1:{port}/",
        endpoints.password.as_deref().unwrap_or_default()
    )
}

async fn info_replication(conn: &mut MultiplexedConnection) -> String {
    redis::cmd("INFO")
        .arg("replication")
        .query_async(conn)
        .await
        .expect("INFO replication")
}

/// What a raw connection got within a time limit.
#[derive(Debug, PartialEq, Eq)]
enum Reply {
    Line(String),
    Silent,
    Closed,
}

/// A hand-written RESP connection: it sends one command and reads one line, so a PING held
/// by a cut link or a stopped server is seen exactly: no answer now, the answer later.
struct Raw {
    stream: BufReader<TcpStream>,
}

impl Raw {
    async fn open(port: u16) -> Raw {
        let stream = tokio::time::timeout(secs(5), TcpStream::connect(("127.0.0.1", port)))
            .await
            .expect("connect within 5 s")
            .unwrap_or_else(|e| panic!("connect to port {port}: {e}"));
        Raw {
            stream: BufReader::new(stream),
        }
    }

    /// Opened and authenticated.
    async fn authed(port: u16, endpoints: &Endpoints) -> Raw {
        let mut raw = Raw::open(port).await;
        raw.send(&["AUTH", endpoints.password.as_deref().unwrap_or_default()])
            .await;
        assert_eq!(raw.reply(secs(5)).await, Reply::Line("+OK".into()), "AUTH");
        raw
    }

    async fn send(&mut self, args: &[&str]) {
        let mut text = format!("*{}\r\n", args.len());
        for arg in args {
            text.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        self.stream
            .get_mut()
            .write_all(text.as_bytes())
            .await
            .expect("send a command");
    }

    async fn reply(&mut self, within: Duration) -> Reply {
        let mut line = String::new();
        match tokio::time::timeout(within, self.stream.read_line(&mut line)).await {
            Err(_) => Reply::Silent,
            Ok(Ok(n)) if n > 0 => Reply::Line(line.trim_end().to_string()),
            Ok(_) => Reply::Closed,
        }
    }

    async fn ping(&mut self, within: Duration) -> Reply {
        self.send(&["PING"]).await;
        self.reply(within).await
    }
}

fn pong() -> Reply {
    Reply::Line("+PONG".into())
}

// ---------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------

/// Every event of a test run, in the order the recorder got them, as JSON values, live;
/// the same lines also go to the real recorder, whose `history.jsonl` is read back (and
/// so validated) at the end.
struct Recording {
    events: Arc<Mutex<Vec<Value>>>,
    sender: mpsc::UnboundedSender<RecordedLine>,
    tee: tokio::task::JoinHandle<()>,
    recorder: tokio::task::JoinHandle<io::Result<Counts>>,
    path: PathBuf,
}

impl Recording {
    fn start(dir: &Path) -> Recording {
        let path = dir.join("history.jsonl");
        let (sender, mut lines) = mpsc::unbounded_channel::<RecordedLine>();
        let (to_recorder, recorded) = mpsc::unbounded_channel::<RecordedLine>();
        let (counts, _) = watch::channel(Counts::default());
        let recorder = tokio::spawn({
            let path = path.clone();
            async move { record(&path, recorded, counts).await }
        });
        let events = Arc::new(Mutex::new(Vec::new()));
        let tee = tokio::spawn({
            let events = events.clone();
            async move {
                while let Some(line) = lines.recv().await {
                    let event: Value = serde_json::from_str(line.text()).expect("an event line");
                    events.lock().unwrap().push(event);
                    let _ = to_recorder.send(line);
                }
            }
        });
        Recording {
            events,
            sender,
            tee,
            recorder,
            path,
        }
    }

    fn sender(&self) -> mpsc::UnboundedSender<RecordedLine> {
        self.sender.clone()
    }

    /// Polls the events until `find` finds something; panics after `within`.
    async fn wait_for<T>(
        &self,
        within: Duration,
        what: &str,
        mut find: impl FnMut(&[Value]) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + within;
        loop {
            if let Some(found) = find(&self.events.lock().unwrap()) {
                return found;
            }
            assert!(Instant::now() < deadline, "not within {within:?}: {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn snapshot(&self) -> Vec<Value> {
        self.events.lock().unwrap().clone()
    }

    /// Once every other sender (journal, fleet) is gone: the events, after checking that
    /// the recorded history reads back and validates (no process reused, ...).
    async fn finish(self) -> Vec<Value> {
        drop(self.sender);
        tokio::time::timeout(secs(20), self.tee)
            .await
            .expect("every event sender dropped")
            .unwrap();
        tokio::time::timeout(secs(20), self.recorder)
            .await
            .expect("the recorder ends")
            .unwrap()
            .expect("the recorder writes");
        if let Err(e) = lockaudit::history::read_file(&self.path) {
            panic!("the recorded history does not validate: {e}");
        }
        Arc::try_unwrap(self.events)
            .map(|m| m.into_inner().unwrap())
            .unwrap_or_else(|arc| arc.lock().unwrap().clone())
    }
}

fn is_nemesis(event: &Value, f: &str) -> bool {
    event["process"] == "nemesis" && event["f"] == f
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

fn targets(event: &Value) -> Vec<String> {
    strings(&event["value"]["targets"])
}

fn listed(event: &Value) -> Vec<u64> {
    event["value"]["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .collect()
}

fn time(event: &Value) -> i64 {
    event["time"].as_i64().expect("an event time")
}

fn client(event: &Value) -> Option<u64> {
    event["process"].as_u64()
}

fn is_completion(event: &Value) -> bool {
    matches!(event["type"].as_str(), Some("ok" | "fail" | "info"))
}

/// The first nemesis event `f` (after position `from`) that `also` accepts, with its position.
fn find_nemesis(
    events: &[Value],
    from: usize,
    f: &str,
    also: impl Fn(&Value) -> bool,
) -> Option<(usize, Value)> {
    events
        .iter()
        .enumerate()
        .skip(from)
        .find(|(_, e)| is_nemesis(e, f) && also(e))
        .map(|(i, e)| (i, e.clone()))
}

fn any(_: &Value) -> bool {
    true
}

// ---------------------------------------------------------------------------------------
// Workers and faults
// ---------------------------------------------------------------------------------------

/// Fleets spawn `lockaudit worker` from the test binary: point them at the real binary.
fn use_lockaudit_as_worker() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| std::env::set_var(WORKER_EXE_ENV, env!("CARGO_BIN_EXE_lockaudit")));
}

/// 4 clients over `workers` processes on one key, 1 s TTL.
fn workload(algorithm: &str, workers: usize, time_limit_ms: u64) -> WorkloadSpec {
    WorkloadSpec {
        algorithm: lockaudit::locks::algorithm(algorithm).expect("a known algorithm"),
        clients: 4,
        workers,
        keys: 1,
        time_limit: Millis(time_limit_ms),
        ..WorkloadSpec::default()
    }
}

/// Which worker runs a client process (slots are dealt out as `drive` does).
fn worker_of(spec: &WorkloadSpec, process: u64) -> usize {
    (process % spec.clients as u64) as usize % spec.workers
}

/// Starts the workers as `drive` does, worker w talking to `endpoints[w]`.
async fn start_fleet(
    dir: &Path,
    spec: &WorkloadSpec,
    endpoints: &[Endpoints],
    clock: RunClock,
    events: mpsc::UnboundedSender<RecordedLine>,
) -> (Fleet, mpsc::UnboundedReceiver<usize>) {
    use_lockaudit_as_worker();
    let total = spec.clients as u64;
    let configs = (0..spec.workers)
        .map(|w| WorkerConfig {
            worker: w,
            slots: (0..total)
                .filter(|s| (*s as usize) % spec.workers == w)
                .collect(),
            total_slots: total,
            spec: spec.clone(),
            endpoints: endpoints[w].clone(),
            base_ns: clock.base_ns,
            deadline_ns: ms(spec.time_limit.0),
            first_generation: 0,
            adapter_clock: None,
            await_go: false,
        })
        .collect();
    Fleet::start(dir, configs, events)
        .await
        .expect("start the workers")
}

/// A fleet with no worker, for faults on servers only.
async fn no_workers(
    dir: &Path,
    events: mpsc::UnboundedSender<RecordedLine>,
) -> (Fleet, mpsc::UnboundedReceiver<usize>) {
    Fleet::start(dir, Vec::new(), events)
        .await
        .expect("an empty fleet")
}

fn fault(kind: FaultKind, at_ms: u64, targets: &[&str], duration_ms: u64) -> PlannedFault {
    PlannedFault {
        at_ms,
        kind,
        targets: targets.iter().map(|t| t.to_string()).collect(),
        duration_ms,
        offset_ms: 0,
        persist: false,
        point: None,
        latency_ms: 0,
        link: Link::Clients,
        not_applicable: None,
    }
}

/// Waits for the workers to end at their deadline.
async fn finish_fleet(mut fleet: Fleet) {
    let deaths = fleet.finish(secs(15)).await;
    assert!(
        deaths.is_empty(),
        "workers died or hung at the end: {deaths:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Client faults
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn pause_client_stops_the_worker_until_it_is_resumed() {
    let dir = common::RunDir::new();
    let mut cluster = cluster::start(&ClusterSpec::new(Topology::Single, dir.path()))
        .await
        .unwrap();
    let endpoints = cluster.endpoints();
    let spec = workload("set-nx-px", 2, 2400);
    let rec = Recording::start(dir.path());
    let clock = RunClock::start();
    let (mut fleet, mut exits) = start_fleet(
        dir.path(),
        &spec,
        &[endpoints.clone(), endpoints.clone()],
        clock,
        rec.sender(),
    )
    .await;
    let worker = identity(fleet.pid(0).unwrap());
    let plan = [fault(FaultKind::PauseClient, 600, &["worker-0"], 1000)];
    let journal = Journal::new(rec.sender(), clock);

    let observe = async {
        rec.wait_for(secs(5), "the pause", |e| find_nemesis(e, 0, "pause", any))
            .await;
        // Stopped, and stays stopped for the whole pause.
        eventually(
            Duration::from_millis(500),
            "worker-0 stopped",
            move || async move { stopped(state_of(worker)) },
        )
        .await;
        let mut samples = 0;
        while clock.now() < ms(1500) {
            assert!(
                stopped(state_of(worker)),
                "worker-0 not stopped at {} ms: {:?}",
                clock.now() / 1_000_000,
                state_of(worker)
            );
            samples += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(samples >= 5, "only {samples} samples of the pause");
        let (_, resume) = rec
            .wait_for(secs(5), "the resume", |e| find_nemesis(e, 0, "resume", any))
            .await;
        eventually(secs(2), "worker-0 running again", move || async move {
            running(state_of(worker))
        })
        .await;
        rec.wait_for(secs(5), "worker-0 completes after the resume", |events| {
            events
                .iter()
                .find(|e| {
                    client(e).is_some_and(|p| worker_of(&spec, p) == 0)
                        && is_completion(e)
                        && time(e) > time(&resume)
                })
                .cloned()
        })
        .await;
    };
    let mut on = Targets {
        workers: &mut fleet,
        endpoints: &endpoints,
        cluster: Some(&mut cluster),
        network: None,
    };
    tokio::join!(execute(&plan, &mut on, &journal, &mut exits, 1700), observe);
    drop(journal);
    finish_fleet(fleet).await;
    let events = rec.finish().await;
    cluster.shutdown().await;

    let (_, pause) = find_nemesis(&events, 0, "pause", any).unwrap();
    let (_, resume) = find_nemesis(&events, 0, "resume", any).unwrap();
    for event in [&pause, &resume] {
        assert_eq!(targets(event), ["worker-0"], "{event}");
        let processes = listed(event);
        assert!(!processes.is_empty(), "no processes listed: {event}");
        assert!(
            processes.iter().all(|&p| worker_of(&spec, p) == 0),
            "{event}"
        );
    }
    // While stopped, worker-0 recorded nothing; worker-1 went on.
    let window = (time(&pause) + ms(20), time(&resume) - ms(20));
    let spec = &spec;
    let inside = |w: usize| {
        events
            .iter()
            .filter(move |e| client(e).is_some_and(|p| worker_of(spec, p) == w))
            .filter(move |e| (window.0..window.1).contains(&time(e)))
    };
    let frozen: Vec<&Value> = inside(0).collect();
    assert!(
        frozen.is_empty(),
        "worker-0 recorded events while stopped: {frozen:?}"
    );
    assert!(
        inside(1).any(is_completion),
        "worker-1 completed nothing during the pause"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_client_kills_the_worker_and_restarts_it_with_fresh_processes() {
    let dir = common::RunDir::new();
    let mut cluster = cluster::start(&ClusterSpec::new(Topology::Single, dir.path()))
        .await
        .unwrap();
    let endpoints = cluster.endpoints();
    let spec = workload("set-nx-px", 2, 2000);
    let rec = Recording::start(dir.path());
    let clock = RunClock::start();
    let (mut fleet, mut exits) = start_fleet(
        dir.path(),
        &spec,
        &[endpoints.clone(), endpoints.clone()],
        clock,
        rec.sender(),
    )
    .await;
    let old_pid = fleet.pid(0).unwrap();
    let worker = identity(old_pid);
    // The lock server paused first: when the worker dies, each of its clients has an
    // operation under way (a client's operations otherwise last well under a millisecond).
    let plan = [
        fault(FaultKind::PauseServer, 500, &["master-0"], 800),
        fault(FaultKind::KillClient, 800, &["worker-0"], 400),
    ];
    let journal = Journal::new(rec.sender(), clock);

    let observe = async {
        rec.wait_for(secs(5), "the kill", |e| find_nemesis(e, 0, "kill", any))
            .await;
        // Killed and reaped by the time the kill is recorded: no process, no zombie.
        assert_eq!(
            state_of(worker),
            None,
            "worker-0 (pid {old_pid}) still exists after its kill"
        );
        let (_, restart) = rec
            .wait_for(secs(5), "the restart", |e| {
                find_nemesis(e, 0, "restart", any)
            })
            .await;
        rec.wait_for(secs(5), "worker-0 records after the restart", |events| {
            events
                .iter()
                .find(|e| {
                    client(e).is_some_and(|p| worker_of(&spec, p) == 0) && time(e) > time(&restart)
                })
                .cloned()
        })
        .await;
    };
    let mut on = Targets {
        workers: &mut fleet,
        endpoints: &endpoints,
        cluster: Some(&mut cluster),
        network: None,
    };
    tokio::join!(execute(&plan, &mut on, &journal, &mut exits, 1600), observe);
    let new_pid = fleet.pid(0).expect("worker-0 restarted");
    assert_ne!(new_pid, old_pid);
    assert!(running(proc_stat(new_pid).map(|s| s.0)), "{new_pid}");
    drop(journal);
    finish_fleet(fleet).await;
    let events = rec.finish().await;
    cluster.shutdown().await;

    let (k, kill) = find_nemesis(&events, 0, "kill", any).unwrap();
    assert_eq!(targets(&kill), ["worker-0"]);
    let killed = listed(&kill);
    assert!(!killed.is_empty(), "the kill lists no process: {kill}");
    assert!(killed.iter().all(|&p| worker_of(&spec, p) == 0), "{kill}");

    // What worker-0 had under way when it died, by its own events.
    let mut pending: BTreeMap<u64, (String, String)> = BTreeMap::new();
    for e in &events[..k] {
        let Some(p) = client(e).filter(|&p| worker_of(&spec, p) == 0) else {
            continue;
        };
        if e["type"] == "invoke" {
            let op = (
                e["f"].as_str().unwrap().into(),
                e["key"].as_str().unwrap().into(),
            );
            pending.insert(p, op);
        } else {
            pending.remove(&p);
        }
    }
    assert_eq!(
        pending.keys().copied().collect::<Vec<u64>>(),
        killed,
        "worker-0's operations under way, and the processes its kill lists"
    );
    for (p, (f, key)) in &pending {
        let info = events[k..].iter().any(|e| {
            client(e) == Some(*p)
                && e["type"] == "info"
                && e["f"] == f.as_str()
                && e["key"] == key.as_str()
                && e["error"] == "killed"
        });
        assert!(info, "no info \"killed\" for process {p}'s {f} of {key}");
    }

    // The restarted worker's processes are new numbers.
    let (r, _) = find_nemesis(&events, k, "restart", any).unwrap();
    let used: BTreeSet<u64> = events[..r].iter().filter_map(client).collect();
    let fresh: BTreeSet<u64> = events[r..]
        .iter()
        .filter_map(client)
        .filter(|&p| worker_of(&spec, p) == 0)
        .collect();
    assert!(!fresh.is_empty(), "no event from the restarted worker-0");
    assert!(
        fresh.is_disjoint(&used),
        "the restarted worker reused {:?}",
        fresh.intersection(&used).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn clock_skew_moves_the_worker_clients_clock_and_back() {
    const OFFSET: i64 = 20_000;
    let dir = common::RunDir::new();
    let mut cluster = cluster::start(&ClusterSpec::new(Topology::Single, dir.path()))
        .await
        .unwrap();
    let endpoints = cluster.endpoints();
    // One worker: every lock value is written by a client of the skewed worker.
    let spec = workload("setnx-getset", 1, 3200);
    let rec = Recording::start(dir.path());
    let clock = RunClock::start();
    let (mut fleet, mut exits) = start_fleet(
        dir.path(),
        &spec,
        std::slice::from_ref(&endpoints),
        clock,
        rec.sender(),
    )
    .await;
    let mut skew = fault(FaultKind::ClockSkew, 800, &["worker-0"], 1200);
    skew.offset_ms = OFFSET;
    let plan = [skew];
    let journal = Journal::new(rec.sender(), clock);
    let conn = connect_node(&endpoints, "master-0").await;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Phase {
        Before,
        During,
        After,
    }
    // setnx-getset stores the client-clock time the lock expires: now + ttl + 1 (ms).
    let observe = async {
        let mut conn = conn.clone();
        let mut samples: Vec<(Phase, i64, i64)> = Vec::new();
        while clock.now() < ms(2900) {
            let events = rec.snapshot();
            let skewed = find_nemesis(&events, 0, "clock", |e| e["value"]["offset_ms"] == OFFSET);
            let healed = skewed.as_ref().and_then(|(i, _)| {
                find_nemesis(&events, *i, "clock", |e| e["value"]["offset_ms"] == 0)
            });
            let phase = match (&skewed, &healed) {
                (None, _) if clock.now() < ms(700) => Some(Phase::Before),
                (Some(_), None) => Some(Phase::During),
                (Some(_), Some((_, heal))) if clock.now() > time(heal) + ms(300) => {
                    Some(Phase::After)
                }
                _ => None,
            };
            let value: Option<i64> = conn.get("lock:0").await.unwrap();
            let ahead = value.map(|v| v - wall_ms());
            if let (Some(phase), Some(ahead)) = (phase, ahead) {
                samples.push((phase, clock.now(), ahead));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        samples
    };
    let mut on = Targets {
        workers: &mut fleet,
        endpoints: &endpoints,
        cluster: Some(&mut cluster),
        network: None,
    };
    let (_, samples) = tokio::join!(execute(&plan, &mut on, &journal, &mut exits, 2100), observe);
    drop(journal);
    finish_fleet(fleet).await;
    let events = rec.finish().await;
    cluster.shutdown().await;

    let normal = |ahead: i64| (-500..=2_000).contains(&ahead);
    let skewed = |ahead: i64| (OFFSET - 5_000..=OFFSET + 2_000).contains(&ahead);
    let of = |phase: Phase| -> Vec<i64> {
        samples
            .iter()
            .filter(|s| s.0 == phase)
            .map(|s| s.2)
            .collect()
    };
    let (before, during, after) = (of(Phase::Before), of(Phase::During), of(Phase::After));
    assert!(!before.is_empty(), "no lock value seen before the skew");
    assert!(
        before.iter().all(|&a| normal(a)),
        "before the skew, values ahead of the wall clock by {before:?} ms"
    );
    assert!(
        during.iter().any(|&a| skewed(a)),
        "no value {OFFSET} ms ahead during the skew: {during:?}"
    );
    assert!(!after.is_empty(), "no lock value seen after the heal");
    assert!(
        after.iter().all(|&a| normal(a)),
        "after the heal, values ahead of the wall clock by {after:?} ms"
    );

    let clocks: Vec<&Value> = events.iter().filter(|e| is_nemesis(e, "clock")).collect();
    assert_eq!(clocks.len(), 2, "{clocks:?}");
    assert_eq!(clocks[0]["value"]["offset_ms"], OFFSET);
    assert_eq!(clocks[1]["value"]["offset_ms"], 0);
    for event in clocks {
        assert_eq!(targets(event), ["worker-0"]);
        assert!(!listed(event).is_empty(), "{event}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn crash_point_kills_the_worker_between_setnx_and_expire() {
    const POINT: &str = "setnx-expire:after-setnx";
    let dir = common::RunDir::new();
    let mut cluster = cluster::start(&ClusterSpec::new(Topology::Single, dir.path()))
        .await
        .unwrap();
    let endpoints = cluster.endpoints();
    let mut spec = workload("setnx-expire", 2, 2400);
    spec.keys = 2;
    let rec = Recording::start(dir.path());
    let clock = RunClock::start();
    let (mut fleet, mut exits) = start_fleet(
        dir.path(),
        &spec,
        &[endpoints.clone(), endpoints.clone()],
        clock,
        rec.sender(),
    )
    .await;
    let old_pid = fleet.pid(0).unwrap();
    let worker = identity(old_pid);
    let mut crash = fault(FaultKind::CrashPoint, 500, &["worker-0"], 1000);
    crash.point = Some(POINT.into());
    let plan = [crash];
    let journal = Journal::new(rec.sender(), clock);
    let conn = connect_node(&endpoints, "master-0").await;

    let observe = async {
        let (k, _) = rec
            .wait_for(secs(5), "the crash", |e| find_nemesis(e, 0, "kill", any))
            .await;
        assert_eq!(
            state_of(worker),
            None,
            "worker-0 still exists after its crash"
        );
        // The acquires the worker died in; one of them did its SETNX and no EXPIRE.
        let keys: Vec<String> = rec
            .wait_for(secs(5), "the killed acquires", |events| {
                let keys: Vec<String> = events[k..]
                    .iter()
                    .filter(|e| e["f"] == "acquire" && e["error"] == "killed")
                    .filter_map(|e| e["key"].as_str().map(str::to_string))
                    .collect();
                (!keys.is_empty()).then_some(keys)
            })
            .await;
        let (_, restart) = rec
            .wait_for(secs(5), "the restart", |e| {
                find_nemesis(e, k, "restart", any)
            })
            .await;
        rec.wait_for(secs(5), "worker-0 records after the restart", |events| {
            events
                .iter()
                .find(|e| {
                    client(e).is_some_and(|p| worker_of(&spec, p) == 0) && time(e) > time(&restart)
                })
                .cloned()
        })
        .await;
        keys
    };
    let mut on = Targets {
        workers: &mut fleet,
        endpoints: &endpoints,
        cluster: Some(&mut cluster),
        network: None,
    };
    let (_, killed_keys) =
        tokio::join!(execute(&plan, &mut on, &journal, &mut exits, 1600), observe);
    assert!(fleet.pid(0).is_some_and(|p| p != old_pid), "not restarted");
    // Once every client has ended its last cycle (none is between its own SETNX and EXPIRE,
    // when a key it holds has no expiry for an instant), and well past the 1 s TTL: the lock
    // the crashed client took is still there and never expires.
    drop(journal);
    finish_fleet(fleet).await;
    let mut conn = conn.clone();
    let mut stuck = Vec::new();
    for key in killed_keys {
        if conn.ttl::<_, i64>(&key).await.unwrap() == -1 {
            let value: Option<String> = conn.get(&key).await.unwrap();
            assert_eq!(value.as_deref(), Some("1"), "{key}");
            stuck.push(key);
        }
    }
    assert!(!stuck.is_empty(), "no lock key left without expiry");
    let events = rec.finish().await;
    cluster.shutdown().await;

    let (_, kill) = find_nemesis(&events, 0, "kill", any).unwrap();
    assert_eq!(targets(&kill), ["worker-0"]);
    assert_eq!(kill["value"]["crash_point"], POINT, "{kill}");
    let killed = listed(&kill);
    assert!(
        !killed.is_empty() && killed.iter().all(|&p| worker_of(&spec, p) == 0),
        "{kill}"
    );
}

// ---------------------------------------------------------------------------------------
// Server faults
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn pause_server_stops_the_server_until_it_is_resumed() {
    let dir = common::RunDir::new();
    let mut cluster = cluster::start(&ClusterSpec::new(Topology::Single, dir.path()))
        .await
        .unwrap();
    let endpoints = cluster.endpoints();
    let server = identity(cluster.pid("master-0").unwrap());
    let port = endpoints.nodes[0].port;
    let rec = Recording::start(dir.path());
    let clock = RunClock::start();
    let (mut fleet, mut exits) = no_workers(dir.path(), rec.sender()).await;
    let plan = [fault(FaultKind::PauseServer, 300, &["master-0"], 800)];
    let journal = Journal::new(rec.sender(), clock);
    let mut probe = Raw::authed(port, &endpoints).await;
    assert_eq!(probe.ping(secs(5)).await, pong());

    let observe = async {
        rec.wait_for(secs(5), "the pause", |e| find_nemesis(e, 0, "pause", any))
            .await;
        eventually(
            Duration::from_millis(500),
            "master-0 stopped",
            move || async move { stopped(state_of(server)) },
        )
        .await;
        assert_eq!(
            probe.ping(Duration::from_millis(300)).await,
            Reply::Silent,
            "a paused server answered"
        );
        while clock.now() < ms(1000) {
            assert!(stopped(state_of(server)), "{:?}", state_of(server));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        rec.wait_for(secs(5), "the resume", |e| find_nemesis(e, 0, "resume", any))
            .await;
        eventually(secs(2), "master-0 running again", move || async move {
            running(state_of(server))
        })
        .await;
        // The PING sent during the pause is answered now, and so is a new one.
        assert_eq!(probe.reply(secs(5)).await, pong(), "the held PING");
        assert_eq!(probe.ping(secs(5)).await, pong());
    };
    let mut on = Targets {
        workers: &mut fleet,
        endpoints: &endpoints,
        cluster: Some(&mut cluster),
        network: None,
    };
    tokio::join!(execute(&plan, &mut on, &journal, &mut exits, 1200), observe);
    drop((journal, fleet));
    let events = rec.finish().await;
    cluster.shutdown().await;
    let (p, pause) = find_nemesis(&events, 0, "pause", any).unwrap();
    let (_, resume) = find_nemesis(&events, p, "resume", any).unwrap();
    assert_eq!(targets(&pause), ["master-0"]);
    assert_eq!(targets(&resume), ["master-0"]);
}

/// kill-server: the port refuses connections until the restart; the key set before the kill
/// survives it only with persistence.
async fn kill_server(persist: bool) {
    let dir = common::RunDir::new();
    let mut spec = ClusterSpec::new(Topology::Single, dir.path());
    spec.persistence = persist;
    let mut cluster = cluster::start(&spec).await.unwrap();
    let endpoints = cluster.endpoints();
    let old_pid = cluster.pid("master-0").unwrap();
    let server = identity(old_pid);
    let port = endpoints.nodes[0].port;
    let mut conn = connect_node(&endpoints, "master-0").await;
    let () = conn.set("before-kill", "v").await.unwrap();
    let value: Option<String> = conn.get("before-kill").await.unwrap();
    assert_eq!(value.as_deref(), Some("v"));

    let rec = Recording::start(dir.path());
    let clock = RunClock::start();
    let (mut fleet, mut exits) = no_workers(dir.path(), rec.sender()).await;
    let mut kill = fault(FaultKind::KillServer, 300, &["master-0"], 800);
    kill.persist = persist;
    let plan = [kill];
    let journal = Journal::new(rec.sender(), clock);
    let observe = async {
        rec.wait_for(secs(5), "the kill", |e| find_nemesis(e, 0, "kill", any))
            .await;
        assert_eq!(state_of(server), None, "master-0 exists after its kill");
        let mut refused = 0;
        while clock.now() < ms(1000) {
            match TcpStream::connect(("127.0.0.1", port)).await {
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => refused += 1,
                other => panic!("port {port} of the killed master-0: {other:?}"),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(refused >= 5, "only {refused} connection attempts");
        let (_, restart) = rec
            .wait_for(secs(5), "the restart", |e| {
                find_nemesis(e, 0, "restart", any)
            })
            .await;
        assert_eq!(restart["value"]["persisted"], persist, "{restart}");
    };
    let mut on = Targets {
        workers: &mut fleet,
        endpoints: &endpoints,
        cluster: Some(&mut cluster),
        network: None,
    };
    tokio::join!(execute(&plan, &mut on, &journal, &mut exits, 1200), observe);
    let new_pid = cluster.pid("master-0").expect("master-0 restarted");
    assert_ne!(new_pid, old_pid);
    let mut conn = connect_node(&cluster.endpoints(), "master-0").await;
    let value: Option<String> = conn.get("before-kill").await.unwrap();
    if persist {
        assert_eq!(value.as_deref(), Some("v"), "lost despite persistence");
    } else {
        assert_eq!(value, None, "kept without persistence");
    }
    drop((journal, fleet));
    let events = rec.finish().await;
    cluster.shutdown().await;
    let (k, kill) = find_nemesis(&events, 0, "kill", any).unwrap();
    let (_, restart) = find_nemesis(&events, k, "restart", any).unwrap();
    assert_eq!(targets(&kill), ["master-0"]);
    assert_eq!(targets(&restart), ["master-0"]);
}

/// Runs `plan` (server faults only) on `cluster` to `deadline_ms`, and returns the history.
async fn execute_on_servers(
    dir: &Path,
    cluster: &mut cluster::Cluster,
    plan: &[PlannedFault],
    deadline_ms: u64,
) -> (Vec<Value>, usize) {
    let endpoints = cluster.endpoints();
    let rec = Recording::start(dir);
    let (mut fleet, mut exits) = no_workers(dir, rec.sender()).await;
    let journal = Journal::new(rec.sender(), RunClock::start());
    let mut on = Targets {
        workers: &mut fleet,
        endpoints: &endpoints,
        cluster: Some(cluster),
        network: None,
    };
    execute(plan, &mut on, &journal, &mut exits, deadline_ms).await;
    let acted = journal.faults_acted();
    drop((journal, fleet));
    (rec.finish().await, acted)
}

/// kill-session on Redis: `CLIENT KILL TYPE normal` closes every client connection of the
/// lock server but the nemesis's own, and none of the storage server's; the event names the
/// server and how many it closed.
#[tokio::test(flavor = "multi_thread")]
async fn kill_session_closes_the_lock_servers_connections_and_not_storage() {
    let dir = common::RunDir::new();
    let mut cluster = cluster::start(&ClusterSpec::new(Topology::Single, dir.path()))
        .await
        .unwrap();
    let endpoints = cluster.endpoints();
    let mut on_lock = Vec::new();
    for _ in 0..3 {
        let mut conn = Raw::authed(endpoints.nodes[0].port, &endpoints).await;
        assert_eq!(conn.ping(secs(5)).await, pong());
        on_lock.push(conn);
    }
    let mut on_storage = Raw::authed(endpoints.storage.port, &endpoints).await;
    assert_eq!(on_storage.ping(secs(5)).await, pong());
    let plan = [fault(FaultKind::KillSession, 100, &["master-0"], 0)];
    let (events, acted) = execute_on_servers(dir.path(), &mut cluster, &plan, 300).await;
    // The server closed them: each reads the end of its stream.
    for conn in &mut on_lock {
        assert_eq!(conn.reply(secs(5)).await, Reply::Closed);
    }
    assert_eq!(
        on_storage.ping(secs(5)).await,
        pong(),
        "storage lost its client"
    );
    cluster.shutdown().await;
    let (_, killed) = find_nemesis(&events, 0, "kill-session", any).expect("recorded");
    assert_eq!(targets(&killed), ["master-0"]);
    let ended = killed["value"]["sessions"].as_u64().unwrap();
    assert!(ended >= 3, "{killed}");
    assert_eq!(acted, 1);
}

/// kill-session on PostgreSQL: every client backend is terminated, its session locks freed
/// at once (another session takes the advisory lock the ended one held), and the event says
/// how many.
#[tokio::test(flavor = "multi_thread")]
async fn kill_session_terminates_postgres_sessions_and_frees_their_advisory_locks() {
    common::require_postgres();
    let dir = common::RunDir::new();
    let mut cluster = cluster::start(&ClusterSpec::new(Topology::Postgres, dir.path()))
        .await
        .unwrap();
    let endpoints = cluster.endpoints();
    let session = || async {
        let node = &endpoints.nodes[0];
        let password = endpoints.password.clone().unwrap();
        let config = cluster::pg_client_config(&node.host, node.port, &password);
        let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        client
    };
    let take = "SELECT pg_try_advisory_lock(42)";
    let holder = session().await;
    let other = session().await;
    assert!(holder.query_one(take, &[]).await.unwrap().get::<_, bool>(0));
    assert!(!other.query_one(take, &[]).await.unwrap().get::<_, bool>(0));
    let plan = [fault(FaultKind::KillSession, 100, &["master-0"], 0)];
    let (events, acted) = execute_on_servers(dir.path(), &mut cluster, &plan, 300).await;
    assert!(holder.query_one("SELECT 1", &[]).await.is_err());
    assert!(other.query_one("SELECT 1", &[]).await.is_err());
    let after = session().await;
    assert!(after.query_one(take, &[]).await.unwrap().get::<_, bool>(0));
    drop(after);
    cluster.shutdown().await;
    let (_, killed) = find_nemesis(&events, 0, "kill-session", any).expect("recorded");
    assert_eq!(targets(&killed), ["master-0"]);
    assert!(
        killed["value"]["sessions"].as_u64().unwrap() >= 2,
        "{killed}"
    );
    assert_eq!(acted, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_server_without_persistence_restarts_it_empty() {
    kill_server(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_server_with_persistence_restarts_it_with_its_data() {
    kill_server(true).await;
}

/// The range the server's clock minus the system clock lies in, from one `TIME`.
async fn server_ahead_ms(conn: &mut MultiplexedConnection) -> (i64, i64) {
    let before = wall_ms();
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    let after = wall_ms();
    let server = secs * 1000 + micros / 1000;
    (server - after, server - before)
}

async fn assert_ahead(conn: &mut MultiplexedConnection, expected_ms: i64, what: &str) {
    const SLACK_MS: i64 = 50;
    let (low, high) = server_ahead_ms(conn).await;
    assert!(
        low - SLACK_MS <= expected_ms && expected_ms <= high + SLACK_MS,
        "{what}: the server's clock is {low}..={high} ms from the system clock, expected {expected_ms}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn clock_jump_moves_the_server_clock_expires_leases_and_comes_back() {
    let dir = common::RunDir::new();
    let mut spec = ClusterSpec::new(Topology::Single, dir.path());
    spec.fake_clocks = true;
    let mut cluster = cluster::start(&spec).await.unwrap();
    let endpoints = cluster.endpoints();
    let conn = connect_node(&endpoints, "master-0").await;
    let mut setup = conn.clone();
    assert_ahead(&mut setup, 0, "at start").await;
    let () = redis::cmd("SET")
        .arg("lease")
        .arg("v")
        .arg("PX")
        .arg(5_000)
        .query_async(&mut setup)
        .await
        .unwrap();
    let pttl: i64 = setup.pttl("lease").await.unwrap();
    assert!(pttl > 4_000, "PTTL {pttl}");

    let rec = Recording::start(dir.path());
    let clock = RunClock::start();
    let (mut fleet, mut exits) = no_workers(dir.path(), rec.sender()).await;
    let mut jump = fault(FaultKind::ClockJump, 300, &["master-0"], 1000);
    jump.offset_ms = 10_000;
    let plan = [jump];
    let journal = Journal::new(rec.sender(), clock);
    let observe = async {
        let mut conn = conn.clone();
        let (j, _) = rec
            .wait_for(secs(5), "the jump", |e| {
                find_nemesis(e, 0, "clock", |e| e["value"]["offset_ms"] == 10_000)
            })
            .await;
        assert_ahead(&mut conn, 10_000, "during the jump").await;
        let value: Option<String> = conn.get("lease").await.unwrap();
        assert_eq!(value, None, "a lease with 5 s to live outlived a 10 s jump");
        rec.wait_for(secs(5), "the heal", |e| {
            find_nemesis(e, j, "clock", |e| e["value"]["offset_ms"] == 0)
        })
        .await;
        assert_ahead(&mut conn, 0, "healed").await;
    };
    let mut on = Targets {
        workers: &mut fleet,
        endpoints: &endpoints,
        cluster: Some(&mut cluster),
        network: None,
    };
    tokio::join!(execute(&plan, &mut on, &journal, &mut exits, 1400), observe);
    assert_eq!(cluster.clock_offset_ms("master-0"), Some(0));
    drop((journal, fleet));
    let events = rec.finish().await;
    cluster.shutdown().await;
    let clocks: Vec<&Value> = events.iter().filter(|e| is_nemesis(e, "clock")).collect();
    assert_eq!(clocks.len(), 2, "{clocks:?}");
    for event in clocks {
        assert_eq!(targets(event), ["master-0"]);
    }
}

// ---------------------------------------------------------------------------------------
// Network faults
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn partition_cuts_one_worker_off_and_heals() {
    let dir = common::RunDir::new();
    let cluster = cluster::start(&ClusterSpec::new(Topology::Single, dir.path()))
        .await
        .unwrap();
    let endpoints = cluster.endpoints();
    let (mut network, per_worker) = Network::start(&endpoints, 2, false).await.unwrap();
    let ports: Vec<u16> = per_worker.iter().map(|e| e.nodes[0].port).collect();
    assert!(
        ports.iter().all(|&p| p != endpoints.nodes[0].port),
        "{ports:?}"
    );
    let spec = workload("set-nx-px", 2, 3000);
    let rec = Recording::start(dir.path());
    let clock = RunClock::start();
    let (mut fleet, _exits) =
        start_fleet(dir.path(), &spec, &per_worker, clock, rec.sender()).await;
    let journal = Journal::new(rec.sender(), clock);
    let acquired = |w: usize, after: i64| {
        let spec = &spec;
        move |events: &[Value]| {
            events
                .iter()
                .find(|e| {
                    client(e).is_some_and(|p| worker_of(spec, p) == w)
                        && e["f"] == "acquire"
                        && e["type"] == "ok"
                        && time(e) > after
                })
                .cloned()
        }
    };
    for w in 0..2 {
        rec.wait_for(secs(5), "an acquire by each worker", acquired(w, 0))
            .await;
    }
    let mut before_cut = Raw::authed(ports[0], &endpoints).await;
    let mut other = Raw::authed(ports[1], &endpoints).await;
    assert_eq!(before_cut.ping(secs(5)).await, pong());

    let cut = fault(FaultKind::Partition, 0, &["worker-0", "master-0"], 1000);
    assert!(network.begin(&cut, &mut fleet, None, &journal).await);
    let cut_at = clock.now();
    // Worker-0's way in answers nothing: neither an open connection nor a new one.
    let quiet = Duration::from_millis(300);
    assert_eq!(before_cut.ping(quiet).await, Reply::Silent);
    let mut during_cut = Raw::open(ports[0]).await;
    during_cut
        .send(&["AUTH", endpoints.password.as_deref().unwrap()])
        .await;
    assert_eq!(during_cut.reply(quiet).await, Reply::Silent);
    // Worker-1's does.
    assert_eq!(other.ping(secs(5)).await, pong());
    assert_eq!(
        Raw::authed(ports[1], &endpoints).await.ping(secs(5)).await,
        pong()
    );

    sleep_until_run(clock, (cut_at / 1_000_000) as u64 + 1000).await;
    network.end(&cut, &mut fleet, None, &journal).await;
    let healed_at = clock.now();
    // What was held is delivered, and new connections go through.
    assert_eq!(before_cut.reply(secs(5)).await, pong(), "the held PING");
    assert_eq!(during_cut.reply(secs(5)).await, Reply::Line("+OK".into()));
    assert_eq!(
        Raw::authed(ports[0], &endpoints).await.ping(secs(5)).await,
        pong()
    );
    rec.wait_for(
        secs(5),
        "worker-0 acquires after the heal",
        acquired(0, healed_at),
    )
    .await;

    drop(journal);
    finish_fleet(fleet).await;
    network.stop().await;
    let events = rec.finish().await;
    cluster.shutdown().await;

    let (p, partition) = find_nemesis(&events, 0, "partition", any).unwrap();
    let (_, heal) = find_nemesis(&events, p, "heal", any).unwrap();
    for event in [&partition, &heal] {
        assert_eq!(targets(event), ["worker-0", "master-0"], "{event}");
        let processes = listed(event);
        assert!(
            !processes.is_empty() && processes.iter().all(|&p| worker_of(&spec, p) == 0),
            "{event}"
        );
    }
    assert_eq!(partition["value"]["link"], "clients");
    // Cut off, worker-0's lock operations completed nothing; worker-1's went on.
    let window = (time(&partition) + ms(200), time(&heal) - ms(20));
    let spec = &spec;
    let lock_ops_done = |w: usize| {
        events
            .iter()
            .filter(move |e| client(e).is_some_and(|p| worker_of(spec, p) == w))
            .filter(|e| matches!(e["f"].as_str(), Some("acquire" | "release" | "renew")))
            .filter(|e| is_completion(e) && (window.0..window.1).contains(&time(e)))
            .count()
    };
    assert_eq!(
        lock_ops_done(0),
        0,
        "worker-0 reached the server while cut off"
    );
    assert!(lock_ops_done(1) > 0, "worker-1 did nothing during the cut");
}

#[tokio::test(flavor = "multi_thread")]
async fn manual_failover_promotes_a_lagging_replica_and_moves_the_clients() {
    let dir = common::RunDir::new();
    let mut cluster = cluster::start(&ClusterSpec::new(Topology::Replicated, dir.path()))
        .await
        .unwrap();
    let endpoints = cluster.endpoints();
    let old_port = endpoints.nodes[0].port;
    let (mut network, per_worker) = Network::start(&endpoints, 1, true).await.unwrap();
    let rec = Recording::start(dir.path());
    let clock = RunClock::start();
    let (mut fleet, _exits) = no_workers(dir.path(), rec.sender()).await;
    let journal = Journal::new(rec.sender(), clock);
    let mut old = connect_node(&endpoints, "master-0").await;
    let mut new = connect_node(&endpoints, "replica-1").await;

    // Replication works through the proxies...
    let () = old.set("before", "1").await.unwrap();
    eventually(secs(5), "replica-1 copies a write", || {
        let mut new = new.clone();
        async move {
            let before: Option<String> = new.get("before").await.unwrap();
            before.is_some()
        }
    })
    .await;
    // ... until the failover freezes it: a write to the primary stays there.
    let failover = fault(FaultKind::Failover, 0, &[], 800);
    assert!(
        network
            .begin(&failover, &mut fleet, Some(&mut cluster), &journal)
            .await
    );
    let began_ms = (clock.now() / 1_000_000) as u64;
    let () = old.set("lag", "1").await.unwrap();
    while clock.now() < ms(began_ms + 800) {
        let lag: Option<String> = new.get("lag").await.unwrap();
        assert_eq!(lag, None, "replica-1 copied a write during the lag");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    network
        .end(&failover, &mut fleet, Some(&mut cluster), &journal)
        .await;

    let info = info_replication(&mut new).await;
    assert!(
        info.contains("role:master"),
        "replica-1 not promoted: {info}"
    );
    let lag: Option<String> = new.get("lag").await.unwrap();
    assert_eq!(
        lag, None,
        "the write made during the lag reached the new primary"
    );
    let before: Option<String> = new.get("before").await.unwrap();
    assert_eq!(before.as_deref(), Some("1"));
    // The old primary follows the new one, and loses the lagging write with the resync.
    eventually(secs(10), "master-0 replicates from replica-1", || {
        let (mut old, mut new) = (old.clone(), new.clone());
        async move {
            let mine = info_replication(&mut old).await;
            let theirs = info_replication(&mut new).await;
            mine.contains("role:slave")
                && mine.contains("master_link_status:up")
                && theirs.contains(&format!("port={old_port},state=online"))
        }
    })
    .await;
    eventually(secs(5), "master-0 drops the lagging write", || {
        let mut old = old.clone();
        async move {
            let lag: Option<String> = old.get("lag").await.unwrap();
            lag.is_none()
        }
    })
    .await;
    // The clients' address of the primary now leads to replica-1.
    let mut via_proxy = connect(&url_at(&endpoints, per_worker[0].nodes[0].port)).await;
    let () = via_proxy.set("via-proxy", "1").await.unwrap();
    let landed: Option<String> = new.get("via-proxy").await.unwrap();
    assert_eq!(landed.as_deref(), Some("1"));

    drop((journal, fleet));
    network.stop().await;
    let events = rec.finish().await;
    cluster.shutdown().await;
    let (p, partition) = find_nemesis(&events, 0, "partition", any).unwrap();
    assert_eq!(partition["value"]["link"], "replication");
    assert_eq!(targets(&partition), ["master-0", "replica-1", "replica-2"]);
    let (f, promoted) = find_nemesis(&events, p, "failover", any).unwrap();
    assert_eq!(targets(&promoted), ["replica-1"]);
    assert_eq!(promoted["value"]["from"], "master-0");
    let (_, heal) = find_nemesis(&events, f, "heal", any).unwrap();
    assert_eq!(targets(&heal), targets(&partition));
}

#[tokio::test(flavor = "multi_thread")]
async fn sentinel_failover_elects_another_primary_and_resumes_the_old_one() {
    let dir = common::RunDir::new();
    let mut cluster = cluster::start(&ClusterSpec::new(Topology::Sentinel, dir.path()))
        .await
        .unwrap();
    let endpoints = cluster.endpoints();
    let old_port = endpoints.nodes[0].port;
    let old = identity(cluster.pid("master-0").unwrap());
    let sentinel = connect_node(&endpoints, "sentinel-0").await;
    let primary_port = || {
        let mut sentinel = sentinel.clone();
        async move {
            let (_, port): (String, u16) = redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(cluster::MASTER_NAME)
                .query_async(&mut sentinel)
                .await
                .unwrap();
            port
        }
    };
    assert_eq!(primary_port().await, old_port);

    let rec = Recording::start(dir.path());
    let clock = RunClock::start();
    let (mut fleet, mut exits) = no_workers(dir.path(), rec.sender()).await;
    let plan = [fault(FaultKind::Failover, 200, &[], SENTINEL_FAILOVER_MS)];
    let journal = Journal::new(rec.sender(), clock);
    let observe = async {
        let (_, pause) = rec
            .wait_for(secs(5), "the primary's pause", |e| {
                find_nemesis(e, 0, "pause", any)
            })
            .await;
        assert_eq!(targets(&pause), ["master-0"]);
        eventually(
            Duration::from_millis(500),
            "master-0 stopped",
            move || async move { stopped(state_of(old)) },
        )
        .await;
    };
    let mut on = Targets {
        workers: &mut fleet,
        endpoints: &endpoints,
        cluster: Some(&mut cluster),
        network: None,
    };
    tokio::join!(
        execute(
            &plan,
            &mut on,
            &journal,
            &mut exits,
            200 + SENTINEL_FAILOVER_MS + 100
        ),
        observe
    );
    let now = primary_port().await;
    let replicas: Vec<u16> = endpoints.nodes[1..].iter().map(|n| n.port).collect();
    assert!(
        replicas.contains(&now),
        "the sentinels name port {now}, not a replica ({replicas:?})"
    );
    assert!(running(state_of(old)), "master-0 left {:?}", state_of(old));
    assert_eq!(
        Raw::authed(old_port, &endpoints).await.ping(secs(5)).await,
        pong()
    );
    drop(sentinel);
    drop((journal, fleet));
    let events = rec.finish().await;
    cluster.shutdown().await;
    let (p, _) = find_nemesis(&events, 0, "pause", any).unwrap();
    let (r, resume) = find_nemesis(&events, p, "resume", any).unwrap();
    assert_eq!(targets(&resume), ["master-0"]);
    let (_, failover) = find_nemesis(&events, r, "failover", any).unwrap();
    assert_eq!(failover["value"]["from"], "master-0");
    assert_eq!(failover["value"]["by"], "sentinel");
    let name = &endpoints.nodes.iter().find(|n| n.port == now).unwrap().name;
    assert_eq!(targets(&failover), [name.as_str()]);
}

// ---------------------------------------------------------------------------------------
// The real binary, end to end
// ---------------------------------------------------------------------------------------

fn lockaudit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockaudit"))
}

fn workload_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("workloads")
        .join(format!("{name}.toml"))
}

/// The run's events so far (a line being written is skipped).
fn history_of(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("history.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn zombie(pid: u32) -> bool {
    matches!(proc_stat(pid), Some(('Z', _)))
}

fn cmdline(pid: u32) -> String {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&bytes).replace('\0', " ")
}

/// Live processes whose command line names `dir` or whose working folder is inside it
/// (redis-server rewrites its command line but runs in its data folder).
fn processes_in(dir: &Path) -> Vec<(u32, String)> {
    let needle = dir.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() || zombie(pid) {
            continue;
        }
        let command = cmdline(pid);
        let inside = std::fs::read_link(entry.path().join("cwd"))
            .map(|cwd| cwd.starts_with(dir))
            .unwrap_or(false);
        if command.contains(&needle) || inside {
            found.push((pid, command));
        }
    }
    found
}

/// The server pids a run recorded in its `endpoints.json`.
fn server_pids(out: &Path) -> BTreeMap<String, u32> {
    let text = std::fs::read_to_string(out.join("endpoints.json")).unwrap_or_default();
    let endpoints: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let nodes = endpoints["nodes"].as_array().into_iter().flatten();
    let sentinels = endpoints["sentinels"].as_array().into_iter().flatten();
    nodes
        .chain(sentinels)
        .chain(std::iter::once(&endpoints["storage"]))
        .filter_map(|n| Some((n["name"].as_str()?.to_string(), n["pid"].as_u64()? as u32)))
        .collect()
}

/// Waits (up to 10 s) until nothing of the run is alive; returns what is left: processes
/// naming or inside its folder, its servers, and whatever `pgrep -f` finds.
fn leftovers(out: &Path, pids: &[u32]) -> Vec<String> {
    let deadline = Instant::now() + secs(10);
    loop {
        let mut left: Vec<String> = processes_in(out)
            .into_iter()
            .map(|(pid, cmd)| format!("{pid} {cmd}"))
            .collect();
        left.extend(
            pids.iter()
                .filter(|&&p| proc_stat(p).is_some() && !zombie(p))
                .map(|p| format!("{p} {:?} {}", proc_stat(*p), cmdline(*p))),
        );
        let pgrep = Command::new("pgrep")
            .arg("-f")
            .arg(out)
            .output()
            .expect("run pgrep");
        for pid in String::from_utf8_lossy(&pgrep.stdout).split_whitespace() {
            if let Ok(pid) = pid.parse::<u32>() {
                if !zombie(pid) {
                    left.push(format!("{pid} (pgrep) {}", cmdline(pid)));
                }
            }
        }
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn ctrl_c_in_the_middle_of_a_fault_leaves_nothing_running_or_stopped() {
    let dir = common::RunDir::new();
    let out = dir.path().join("interrupted");
    let schedule = dir.path().join("pauses.toml");
    std::fs::write(
        &schedule,
        r#"
[[fault]]
at = "1s"
kind = "pause-client"
target = "worker-0"
duration = "3s"

[[fault]]
at = "1s"
kind = "pause-server"
target = "master-0"
duration = "3s"
"#,
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("lockaudit.log")).unwrap();
    // Its own process group: the SIGINT goes to the controller alone, as the test of its
    // own cleanup (a terminal's Ctrl-C would also reach the workers).
    let mut child = lockaudit()
        .args(["run", "--seed", "1"])
        .arg(workload_file("set-nx-px"))
        .arg("--nemesis")
        .arg(&schedule)
        .args(["--time-limit", "20s", "--out"])
        .arg(&out)
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start lockaudit run");
    let deadline = Instant::now() + secs(20);
    let paused = |events: &[Value], target: &str| {
        events
            .iter()
            .any(|e| is_nemesis(e, "pause") && targets(e) == [target])
    };
    loop {
        let events = history_of(&out);
        if paused(&events, "worker-0") && paused(&events, "master-0") {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no pauses recorded in 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Both really are stopped.
    let servers = server_pids(&out);
    let master = servers["master-0"];
    assert!(stopped(proc_stat(master).map(|s| s.0)), "master-0 {master}");
    let workers: Vec<u32> = processes_in(&out)
        .into_iter()
        .filter(|(_, cmd)| cmd.contains(" worker "))
        .map(|(pid, _)| pid)
        .collect();
    assert_eq!(workers.len(), 2, "{workers:?}");
    let stopped_workers = workers
        .iter()
        .filter(|&&p| stopped(proc_stat(p).map(|s| s.0)))
        .count();
    assert_eq!(stopped_workers, 1, "{workers:?}");

    signal(child.id(), nix::sys::signal::Signal::SIGINT);
    let deadline = Instant::now() + secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the controller did not exit within 20 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130), "{status:?}");
    let mut pids: Vec<u32> = servers.values().copied().collect();
    pids.extend(&workers);
    let left = leftovers(&out, &pids);
    assert!(left.is_empty(), "left behind after Ctrl-C: {left:#?}");
}

#[test]
fn a_random_mix_heals_every_fault_it_injects() {
    let dir = common::RunDir::new();
    let out = dir.path().join("mix");
    // Seed 34 on the replicated topology: a clock jump, a server kill, a server pause, a
    // clock skew and a failover, the last two healed at the time limit.
    let output = lockaudit()
        .arg("run")
        .arg(workload_file("set-nx-px"))
        .args([
            "--nemesis",
            "mix",
            "--topology",
            "replicated",
            "--seed",
            "34",
        ])
        .args(["--time-limit", "6s", "--out"])
        .arg(&out)
        .output()
        .expect("run lockaudit");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{:?}: {text}",
        output.status
    );
    let plan: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("nemesis.json")).unwrap()).unwrap();
    let kinds: BTreeSet<&str> = plan
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["kind"].as_str())
        .collect();
    assert!(kinds.len() >= 4, "a thin mix: {kinds:?}");
    if let Err(e) = lockaudit::history::read_file(&out.join("history.jsonl")) {
        panic!("the history does not validate: {e}");
    }

    // Replay the nemesis events: everything stopped, down, cut or moved is put back.
    let mut stopped_ = BTreeSet::new();
    let mut down = BTreeSet::new();
    let mut cut: Vec<Vec<String>> = Vec::new();
    let mut clocks: BTreeMap<String, i64> = BTreeMap::new();
    let events = history_of(&out);
    let nemesis: Vec<&Value> = events
        .iter()
        .filter(|e| e["process"] == "nemesis")
        .collect();
    assert!(nemesis.len() >= 8, "{nemesis:#?}");
    for event in &nemesis {
        let names = targets(event);
        match event["f"].as_str().unwrap() {
            "pause" => stopped_.extend(names),
            "resume" => {
                for name in &names {
                    stopped_.remove(name);
                }
            }
            "kill" => {
                // A worker killed in the last second may stay dead: no client would start
                // a cycle past the time limit. A server always comes back.
                let late = time(event) >= ms(6000 - 1000);
                for name in names {
                    stopped_.remove(&name);
                    if !(late && name.starts_with("worker-")) {
                        down.insert(name);
                    }
                }
            }
            "restart" => {
                for name in &names {
                    down.remove(name);
                }
            }
            "partition" | "latency" => cut.push(names),
            "heal" => {
                let Some(at) = cut.iter().position(|c| *c == names) else {
                    panic!("a heal of nothing cut: {event}");
                };
                cut.remove(at);
            }
            "clock" => {
                let offset = event["value"]["offset_ms"].as_i64().unwrap();
                for name in names {
                    clocks.insert(name, offset);
                }
            }
            _ => {}
        }
    }
    assert!(stopped_.is_empty(), "never resumed: {stopped_:?}");
    assert!(down.is_empty(), "never restarted: {down:?}");
    assert!(cut.is_empty(), "never healed: {cut:?}");
    let moved: Vec<_> = clocks.iter().filter(|(_, &o)| o != 0).collect();
    assert!(moved.is_empty(), "clocks left moved: {moved:?}");
    assert!(!clocks.is_empty(), "no clock fault in the mix");

    let pids: Vec<u32> = server_pids(&out).into_values().collect();
    let left = leftovers(&out, &pids);
    assert!(left.is_empty(), "left behind: {left:#?}");
}
