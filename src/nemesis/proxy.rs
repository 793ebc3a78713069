//! A TCP proxy on 127.0.0.1 that the nemesis owns, placed between a lock client (or a
//! replica) and a Redis node. `tc netem` is unavailable on this machine, so added latency has
//! to come from forwarding in user space; cutting one client's link this way needs neither
//! root nor network namespaces; and [`Proxy::retarget`] moves every client to a new primary
//! at once, like a virtual IP after a manual failover.

use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{sleep_until, Instant};
use tracing::Instrument;

use super::source_ports::SourcePorts;

/// Read size per chunk: large enough that plain forwarding is a few syscalls per request.
const CHUNK: usize = 16 * 1024;
/// Bytes one direction may hold in its queue (latency) before it stops reading: TCP
/// back-pressure then slows the sender instead of the proxy buffering without bound.
const MAX_QUEUED: usize = 1024 * 1024;
/// Spare chunk buffers kept per direction, so steady forwarding does not allocate.
const SPARE_BUFFERS: usize = 4;
/// How long the other direction may still deliver (e.g. the reply to QUIT) after one side
/// closed, on top of the current latency.
const LINGER: Duration = Duration::from_secs(1);
/// Give up on an upstream that neither accepts nor refuses (a node behind a DROP rule).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Errors starting a proxy. Forwarding errors are not errors of the proxy: they end one
/// connection, as they would on a real link.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("proxy {name}: cannot listen on {addr}: {source}")]
    Bind {
        name: String,
        addr: SocketAddr,
        source: io::Error,
    },
}

/// What the proxy is told to do; every connection watches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct State {
    upstream: SocketAddr,
    /// No byte moves in either direction; what arrives waits in the kernel's buffers.
    cut: bool,
    latency: Duration,
    /// Bumped by retarget/reset: connections accepted under an older generation close.
    generation: u64,
    stopping: bool,
}

/// Counters shared with the connection tasks.
#[derive(Debug, Default)]
struct Counters {
    accepted: AtomicU64,
    active: AtomicU64,
    /// Client to upstream.
    bytes_up: AtomicU64,
    /// Upstream to client.
    bytes_down: AtomicU64,
}

/// A snapshot of a proxy's counters and state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyStats {
    /// Connections accepted since start.
    pub accepted: u64,
    /// Connections open now.
    pub active: u64,
    /// Bytes delivered from clients to the upstream.
    pub bytes_up: u64,
    /// Bytes delivered from the upstream to clients.
    pub bytes_down: u64,
    pub cut: bool,
    pub latency: Duration,
    pub upstream: SocketAddr,
}

/// A running proxy. Clones share it; it stops on [`Proxy::stop`] or when the last clone
/// is dropped, closing its listener and every connection.
#[derive(Debug, Clone)]
pub struct Proxy {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    name: String,
    addr: SocketAddr,
    /// The only sender: when it drops, every task's `changed()` fails and the task ends.
    state: watch::Sender<State>,
    counters: Arc<Counters>,
    accept: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Aborting the accept task drops its JoinSet, which aborts the connections.
        if let Some(task) = self.accept.lock().unwrap_or_else(|e| e.into_inner()).take() {
            task.abort();
        }
    }
}

impl Proxy {
    /// Listens on a free port of 127.0.0.1 and forwards every connection to `upstream`.
    pub async fn start(name: &str, upstream: SocketAddr) -> Result<Proxy, ProxyError> {
        Proxy::start_at(name, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), upstream).await
    }

    /// As [`Proxy::start`], its connections to `upstream` leaving from a port of `source`:
    /// one worker's way to a server on another host, which that host can cut by port.
    pub async fn start_from(
        name: &str,
        upstream: SocketAddr,
        source: SourcePorts,
    ) -> Result<Proxy, ProxyError> {
        let listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        Proxy::listen(name, listen, upstream, Some(Arc::new(source))).await
    }

    /// Listens on `listen` (a fixed port) and forwards every connection to `upstream`.
    pub async fn start_at(
        name: &str,
        listen: SocketAddr,
        upstream: SocketAddr,
    ) -> Result<Proxy, ProxyError> {
        Proxy::listen(name, listen, upstream, None).await
    }

    async fn listen(
        name: &str,
        listen: SocketAddr,
        upstream: SocketAddr,
        source: Option<Arc<SourcePorts>>,
    ) -> Result<Proxy, ProxyError> {
        let bind_error = |source| ProxyError::Bind {
            name: name.to_owned(),
            addr: listen,
            source,
        };
        let listener = TcpListener::bind(listen).await.map_err(bind_error)?;
        let addr = listener.local_addr().map_err(bind_error)?;
        let (state, rx) = watch::channel(State {
            upstream,
            cut: false,
            latency: Duration::ZERO,
            generation: 0,
            stopping: false,
        });
        let counters = Arc::new(Counters::default());
        let task = tokio::spawn(accept_loop(
            name.to_owned(),
            listener,
            rx,
            Arc::clone(&counters),
            source,
        ));
        tracing::debug!(proxy = name, %addr, %upstream, "proxy listening");
        Ok(Proxy {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                addr,
                state,
                counters,
                accept: Mutex::new(Some(task)),
            }),
        })
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn port(&self) -> u16 {
        self.inner.addr.port()
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    /// Where new connections go.
    pub fn upstream(&self) -> SocketAddr {
        self.inner.state.borrow().upstream
    }

    /// Partitions every connection, current and new: nothing is forwarded either way, and
    /// new connections are accepted but not connected upstream. Bytes sent meanwhile wait
    /// and arrive in order after [`Proxy::heal`], as TCP retransmission delivers them
    /// after a short partition. For a long partition, where TCP would give up, call
    /// [`Proxy::reset_connections`] before healing: the held bytes die with the connections.
    pub fn cut(&self) {
        self.update(|s| s.cut = true);
    }

    /// Ends the cut and the latency: plain forwarding, held bytes delivered at once.
    pub fn heal(&self) {
        self.update(|s| {
            s.cut = false;
            s.latency = Duration::ZERO;
        });
    }

    /// Delivers every chunk `delay` after it was read, per direction, on every connection.
    /// Chunks already queued follow the new delay (zero flushes them).
    pub fn set_latency(&self, delay: Duration) {
        self.update(|s| s.latency = delay);
    }

    /// Closes every current connection (with a reset, both sides) and sends new ones to
    /// `upstream`: a virtual IP moving to the new primary.
    pub fn retarget(&self, upstream: SocketAddr) {
        self.update(|s| {
            s.upstream = upstream;
            s.generation += 1;
        });
    }

    /// Closes every current connection (with a reset, both sides); new ones are forwarded.
    pub fn reset_connections(&self) {
        self.update(|s| s.generation += 1);
    }

    pub fn stats(&self) -> ProxyStats {
        let state = *self.inner.state.borrow();
        let c = &self.inner.counters;
        ProxyStats {
            accepted: c.accepted.load(Ordering::Relaxed),
            active: c.active.load(Ordering::Relaxed),
            bytes_up: c.bytes_up.load(Ordering::Relaxed),
            bytes_down: c.bytes_down.load(Ordering::Relaxed),
            cut: state.cut,
            latency: state.latency,
            upstream: state.upstream,
        }
    }

    /// Stops listening and closes every connection; returns once the port is closed and
    /// every connection task has ended. Other clones see a stopped proxy.
    pub async fn stop(self) {
        self.update(|s| s.stopping = true);
        let task = self
            .inner
            .accept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(task) = task {
            if let Err(err) = task.await {
                tracing::debug!(proxy = self.inner.name, %err, "accept task ended abnormally");
            }
        }
    }

    fn update(&self, change: impl FnOnce(&mut State)) {
        self.inner.state.send_if_modified(|s| {
            let before = *s;
            change(s);
            *s != before
        });
        tracing::debug!(proxy = self.inner.name, state = ?*self.inner.state.borrow(), "proxy state");
    }
}

async fn accept_loop(
    name: String,
    listener: TcpListener,
    mut rx: watch::Receiver<State>,
    counters: Arc<Counters>,
    source: Option<Arc<SourcePorts>>,
) {
    // Owning the connection tasks here means ending this task (abort or stop) ends them.
    let mut connections = JoinSet::new();
    let mut next_id = 0u64;
    loop {
        if rx.borrow_and_update().stopping {
            break;
        }
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, peer)) => {
                    next_id += 1;
                    counters.accepted.fetch_add(1, Ordering::Relaxed);
                    let generation = rx.borrow().generation;
                    let span = tracing::debug_span!("proxy", proxy = %name, conn = next_id);
                    tracing::debug!(parent: &span, %peer, "accepted");
                    connections.spawn(
                        connection(
                            client,
                            generation,
                            rx.clone(),
                            Arc::clone(&counters),
                            source.clone(),
                        )
                        .instrument(span),
                    );
                }
                Err(err) => {
                    // E.g. out of file descriptors: do not spin on it.
                    tracing::debug!(proxy = name, %err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            changed = rx.changed() => if changed.is_err() { break },
        }
    }
    drop(listener);
    connections.shutdown().await;
    tracing::debug!(proxy = name, "proxy stopped");
}

/// Counts an open connection, also when its task is aborted.
struct Active(Arc<Counters>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Why a connection (or one direction of it) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The source closed and everything read was delivered.
    Eof,
    /// Reset, retarget or stop.
    Closed,
    /// A read or write failed.
    Failed,
}

/// Whether `state` says a connection of `generation` must close.
fn closing(state: &State, generation: u64) -> bool {
    state.stopping || state.generation != generation
}

async fn connection(
    mut client: TcpStream,
    generation: u64,
    mut rx: watch::Receiver<State>,
    counters: Arc<Counters>,
    source: Option<Arc<SourcePorts>>,
) {
    counters.active.fetch_add(1, Ordering::Relaxed);
    let _active = Active(Arc::clone(&counters));

    let Some(mut upstream) = connect_upstream(generation, &mut rx, source.as_deref()).await else {
        // A reset rather than a FIN: the client sees its connection fail, like a refused one.
        let _ = client.set_zero_linger();
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);

    let end = {
        let (mut client_rd, mut client_wr) = client.split();
        let (mut upstream_rd, mut upstream_wr) = upstream.split();
        let state = rx.clone();
        let mut rx_down = rx.clone();
        let up = pump(
            &mut client_rd,
            &mut upstream_wr,
            &mut rx,
            generation,
            &counters.bytes_up,
        );
        let down = pump(
            &mut upstream_rd,
            &mut client_wr,
            &mut rx_down,
            generation,
            &counters.bytes_down,
        );
        tokio::pin!(up, down);
        let (closed_by, first) = tokio::select! {
            end = &mut up => ("client", end),
            end = &mut down => ("upstream", end),
        };
        let end = if first == End::Eof {
            // Half-closed: let the other direction deliver what is in flight (the reply
            // to QUIT), then close it too.
            let linger = LINGER + state.borrow().latency;
            let rest = if closed_by == "client" {
                tokio::time::timeout(linger, &mut down).await
            } else {
                tokio::time::timeout(linger, &mut up).await
            };
            rest.unwrap_or(End::Eof)
        } else {
            first
        };
        tracing::debug!(closed_by, ?first, ?end, "connection ended");
        end
    };
    if end != End::Eof {
        // Reset both sides: the peers see the connection die, not an orderly close.
        let _ = client.set_zero_linger();
        let _ = upstream.set_zero_linger();
    }
}

/// Connects to the upstream once the link is not cut (a partitioned SYN gets no answer).
/// None when the connect fails or the connection is closed first.
async fn connect_upstream(
    generation: u64,
    rx: &mut watch::Receiver<State>,
    source: Option<&SourcePorts>,
) -> Option<TcpStream> {
    let upstream = loop {
        let state = *rx.borrow_and_update();
        if closing(&state, generation) {
            return None;
        }
        if !state.cut {
            break state.upstream;
        }
        rx.changed().await.ok()?;
    };
    let connect = tokio::time::timeout(CONNECT_TIMEOUT, async {
        match source {
            Some(ports) => ports.connect(upstream).await,
            None => TcpStream::connect(upstream).await,
        }
    });
    tokio::pin!(connect);
    loop {
        tokio::select! {
            connected = &mut connect => {
                return match connected {
                    Ok(Ok(stream)) => Some(stream),
                    Ok(Err(err)) => {
                        tracing::debug!(%upstream, %err, "upstream connect failed");
                        None
                    }
                    Err(_) => {
                        tracing::debug!(%upstream, "upstream connect timed out");
                        None
                    }
                };
            }
            changed = rx.changed() => {
                if changed.is_err() || closing(&rx.borrow_and_update(), generation) {
                    return None;
                }
            }
        }
    }
}

/// Bytes read at one time, waiting for their delivery time.
struct Chunk {
    read_at: Instant,
    data: Vec<u8>,
    /// How much of `data` is already written.
    written: usize,
}

/// Forwards one direction until the source closes (then shuts the destination's write
/// side), the connection is closed, or an error. One loop does reads, delayed writes and
/// state changes, so latency costs no task per chunk and a cut stops it between syscalls.
async fn pump<R, W>(
    src: &mut R,
    dst: &mut W,
    rx: &mut watch::Receiver<State>,
    generation: u64,
    delivered: &AtomicU64,
) -> End
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut queue: VecDeque<Chunk> = VecDeque::new();
    let mut queued = 0usize;
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let mut eof = false;
    loop {
        let state = *rx.borrow_and_update();
        if closing(&state, generation) {
            return End::Closed;
        }
        if eof && queue.is_empty() {
            if let Err(err) = dst.shutdown().await {
                tracing::debug!(%err, "shutdown after end of stream failed");
            }
            return End::Eof;
        }
        // While cut nothing is read: the bytes wait in the kernel, and the sender's TCP
        // slows down as a partitioned one would.
        let flowing = !state.cut;
        let can_read = flowing && !eof && queued < MAX_QUEUED;
        let due = queue.front().map(|c| c.read_at + state.latency);
        let now = Instant::now();
        let can_write = flowing && due.is_some_and(|at| at <= now);
        let wait = due.filter(|&at| flowing && at > now);
        let head: &[u8] = queue.front().map_or(&[], |c| &c.data[c.written..]);
        let mut buf = if can_read {
            spare.pop().unwrap_or_else(|| Vec::with_capacity(CHUNK))
        } else {
            Vec::new()
        };
        // Every operation below is cancel safe: a branch that loses did no I/O.
        tokio::select! {
            biased;
            changed = rx.changed() => {
                if changed.is_err() {
                    return End::Closed;
                }
            }
            written = dst.write(head), if can_write => match written {
                Ok(0) | Err(_) => {
                    tracing::debug!(result = ?written, "write failed");
                    return End::Failed;
                }
                Ok(n) => {
                    delivered.fetch_add(n as u64, Ordering::Relaxed);
                    let front = queue.front_mut().expect("a chunk was written");
                    front.written += n;
                    if front.written == front.data.len() {
                        let mut done = queue.pop_front().expect("the front chunk").data;
                        queued -= done.len();
                        if spare.len() < SPARE_BUFFERS {
                            done.clear();
                            spare.push(done);
                        }
                    }
                }
            },
            read = src.read_buf(&mut buf), if can_read => match read {
                Ok(0) => eof = true,
                Ok(n) => {
                    queued += n;
                    queue.push_back(Chunk { read_at: Instant::now(), data: buf, written: 0 });
                    continue;
                }
                Err(err) => {
                    tracing::debug!(%err, "read failed");
                    return End::Failed;
                }
            },
            _ = sleep_until(wait.unwrap_or(now)), if wait.is_some() => {}
        }
        if buf.capacity() > 0 && spare.len() < SPARE_BUFFERS {
            spare.push(buf);
        }
    }
}
