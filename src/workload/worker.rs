//! `lockaudit worker`: one OS process running several logical clients, so that faults can
//! kill and pause clients as real processes.
//!
//! The controller writes a `WorkerConfig` as one JSON line on the worker's stdin and keeps
//! stdin open; the worker streams its events as JSON lines on stdout, flushed as they come.
//! When stdin closes (the controller ended or died) the worker stops at once.

use std::io::Write;

use serde::{Deserialize, Serialize};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

use crate::cluster::Endpoints;
use crate::history::Event;

use super::client::{Client, ClientPlan};
use super::clock::RunClock;
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
}

/// Runs the worker: reads its config from stdin, streams events to stdout until its clients
/// are done or stdin closes.
pub async fn run_worker() -> anyhow::Result<()> {
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let mut line = String::new();
    stdin.read_line(&mut line).await?;
    let config: WorkerConfig = serde_json::from_str(&line)
        .map_err(|e| anyhow::anyhow!("worker: bad config from the controller: {e}"))?;

    let (events, mut received) = mpsc::unbounded_channel::<Event>();
    let clock = RunClock {
        base_ns: config.base_ns,
    };
    let mut clients = tokio::task::JoinSet::new();
    for &slot in &config.slots {
        let plan = ClientPlan {
            slot,
            total_slots: config.total_slots,
            spec: config.spec.clone(),
            endpoints: config.endpoints.clone(),
            clock,
            deadline_ns: config.deadline_ns,
        };
        clients.spawn(Client::new(plan, events.clone()).run());
    }
    drop(events);

    // Stdin closing means the controller is gone: stop now, mid-operation if need be.
    let orphaned = async move {
        let mut rest = String::new();
        while stdin.read_line(&mut rest).await.is_ok_and(|n| n > 0) {
            rest.clear();
        }
    };
    let writer = async move {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        while let Some(event) = received.recv().await {
            write_event(&mut out, &event)?;
            while let Ok(event) = received.try_recv() {
                write_event(&mut out, &event)?;
            }
            out.flush()?;
        }
        Ok::<(), std::io::Error>(())
    };
    tokio::select! {
        result = writer => result?,
        () = orphaned => {
            clients.abort_all();
        }
    }
    Ok(())
}

fn write_event(out: &mut impl Write, event: &Event) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, event)?;
    out.write_all(b"\n")
}
