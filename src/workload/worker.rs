//! `lockaudit worker`: one OS process running several logical clients, so that faults can
//! kill and pause clients as real processes.
//!
//! The controller writes a `WorkerConfig` as one JSON line on the worker's stdin and keeps
//! stdin open; the worker streams its events as JSON lines on stdout, flushed as they come.
//! Further stdin lines are `WorkerCommand`s from the nemesis (arm a crash point, skew the
//! clients' clocks). When stdin closes (the controller ended or died) the worker stops at
//! once.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::io::AsyncBufReadExt;

use crate::fake_clock::{FakeClock, FakeClockError, Preload};
use crate::topology::Endpoints;

use super::client::{Client, ClientPlan, ConnectFirstError};
use super::controls::{Controls, WorkerCommand};
use super::resource::Storage;
use super::sink::{EventSink, WorkerNote};
use super::spec::WorkloadSpec;

/// Everything a worker needs, from the controller.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerConfig {
    pub worker: usize,
    /// The client slots this worker runs.
    pub slots: Vec<u64>,
    pub total_slots: u64,
    pub spec: WorkloadSpec,
    pub endpoints: Endpoints,
    /// The controller's CLOCK_MONOTONIC at the run's start.
    pub base_ns: i64,
    /// Run time at which clients stop starting new cycles.
    pub deadline_ns: i64,
    /// The first generation of process numbers (process = slot + generation × total_slots):
    /// a restarted worker starts above every number its slots have used.
    #[serde(default)]
    pub first_generation: u64,
    /// The wall-clock preload to start external adapters under, when the run skews client clocks:
    /// the worker keeps the offset in `<run>/adapter-clock-<worker>.faketime`.
    #[serde(default)]
    pub adapter_clock: Option<Preload>,
    /// Connect every client first, say so (`WorkerNote::Ready`, or `NotReady` with why),
    /// and start the cycles at `WorkerCommand::Go`, whose `base_ns` replaces the one above:
    /// the run's clock, and its faults, start once every client of every worker is ready.
    /// A worker restarted during the run starts at once.
    #[serde(default)]
    pub await_go: bool,
}

/// How long a worker's clients may take to connect before the run cannot be carried out:
/// an adapter's `init` alone may take 10 s (`external::INIT_PATIENCE`), and a busy machine
/// starts eight Python adapters slowly.
pub const CONNECT_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Why a worker stopped before its clients were done.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// Its config could not be read from stdin, or its events not written to stdout.
    #[error(transparent)]
    Pipe(#[from] std::io::Error),
    #[error("worker: bad config from the controller: {0}")]
    Config(serde_json::Error),
    #[error("worker: cannot set up the adapters' clock: {0}")]
    Clock(FakeClockError),
}

/// Why the clients could not all start: what the worker tells the controller
/// (`WorkerNote::NotReady`).
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error(transparent)]
    Client(#[from] ConnectFirstError),
    #[error("a client's start failed: {0}")]
    Join(tokio::task::JoinError),
}

/// Runs the worker: reads its config from stdin, streams events to stdout until its clients
/// are done or stdin closes.
pub async fn run_worker() -> Result<(), WorkerError> {
    run_worker_in(None).await
}

/// `run_worker` for the run folder `run` (`lockaudit worker --run DIR`), where external lock
/// clients' adapters run and log.
pub async fn run_worker_in(run: Option<std::path::PathBuf>) -> Result<(), WorkerError> {
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let mut line = String::new();
    stdin.read_line(&mut line).await?;
    let config: WorkerConfig = serde_json::from_str(&line).map_err(WorkerError::Config)?;

    let sink = Arc::new(EventSink::default());
    let adapter_clock = match (&config.adapter_clock, &run) {
        (Some(preload), Some(dir)) => {
            let file = dir.join(format!("adapter-clock-{}.faketime", config.worker));
            Some(FakeClock::create(preload.clone(), file).map_err(WorkerError::Clock)?)
        }
        _ => None,
    };
    let controls = Arc::new(Controls::new(config.base_ns, adapter_clock));
    let storage = Storage::new(
        &config.endpoints.storage,
        config.endpoints.password.as_deref(),
        config.spec.fenced,
    );
    let mut clients = Vec::new();
    for &slot in &config.slots {
        let plan = ClientPlan {
            slot,
            total_slots: config.total_slots,
            first_generation: config.first_generation,
            spec: config.spec.clone(),
            endpoints: config.endpoints.clone(),
            deadline_ns: config.deadline_ns,
            controls: controls.clone(),
            run_dir: run.clone(),
            storage: storage.clone(),
        };
        clients.push(Client::new(plan, sink.clone()));
    }

    // Told when `Go` has started the run's clock (kept in `controls`).
    let (go, mut gone) = tokio::sync::watch::channel(false);
    // Commands until stdin closes; closing means the controller is gone: stop now,
    // mid-operation if need be.
    let commands = {
        let (controls, sink) = (controls.clone(), sink.clone());
        async move {
            let mut line = String::new();
            while stdin.read_line(&mut line).await.is_ok_and(|n| n > 0) {
                match serde_json::from_str::<WorkerCommand>(&line) {
                    Ok(WorkerCommand::Go { base_ns }) => {
                        controls.start_clock(base_ns);
                        let _ = go.send(true);
                    }
                    Ok(WorkerCommand::Stop) => {
                        if let Err(e) = sink.stop(controls.clock()) {
                            tracing::warn!("worker: cannot say it stopped: {e}");
                        }
                    }
                    Ok(command) => controls.apply(command),
                    Err(e) => tracing::warn!("worker: ignored a bad command ({e}): {line}"),
                }
                line.clear();
            }
        }
    };
    let writer = {
        let sink = sink.clone();
        async move {
            let mut spare = Vec::new();
            loop {
                sink.ready().await;
                spare = sink.write_out(spare)?;
            }
            #[allow(unreachable_code)]
            Ok::<(), std::io::Error>(())
        }
    };
    let work = {
        let sink = sink.clone();
        async move {
            if config.await_go {
                clients = match connect_all(clients).await {
                    Ok(clients) => clients,
                    Err(e) => {
                        let why = e.to_string();
                        let _ = sink.note(&WorkerNote::NotReady { why });
                        return;
                    }
                };
                let ready = WorkerNote::Ready {
                    clients: clients.len(),
                };
                if sink.note(&ready).is_err() {
                    return;
                }
                if gone.wait_for(|started| *started).await.is_err() {
                    return;
                }
            }
            let mut running = tokio::task::JoinSet::new();
            for client in clients {
                running.spawn(client.run());
            }
            while running.join_next().await.is_some() {}
        }
    };
    tokio::select! {
        result = writer => result?,
        () = commands => {}
        () = work => {}
    }
    sink.write_out(Vec::new())?;
    Ok(())
}

/// Connects every client at once, each within `CONNECT_LIMIT`; the first error if any
/// could not.
async fn connect_all(clients: Vec<Client>) -> Result<Vec<Client>, StartError> {
    let mut connecting = tokio::task::JoinSet::new();
    for (i, mut client) in clients.into_iter().enumerate() {
        connecting.spawn(async move {
            let connected = client.connect_first(CONNECT_LIMIT).await;
            (i, client, connected)
        });
    }
    let mut connected = Vec::new();
    while let Some(joined) = connecting.join_next().await {
        let (i, client, result) = joined.map_err(StartError::Join)?;
        // The first to fail says why; the others are dropped with the worker.
        result?;
        connected.push((i, client));
    }
    connected.sort_by_key(|(i, _)| *i);
    Ok(connected.into_iter().map(|(_, c)| c).collect())
}
