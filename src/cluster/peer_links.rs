//! The links between the members of a service on this machine (etcd's peer traffic,
//! ZooKeeper's quorum and election traffic), each direction cuttable on its own: a proxy in
//! front of every member's peer listener, its address the one the other members are given,
//! that knows which member opened each connection.
//!
//! Every member dials from 127.0.0.1, so the address says nothing; the member that owns the
//! dialling socket does, and `/proc` tells it exactly (`procfs::connection_owner`). Peer
//! connections are long-lived, so that lookup is once per connection.
//!
//! A cut of (A, B) is what iptables on A's host does to A's connections to B's peer port
//! (`cut::link_rules`): the connections A opened to B die (a reset, both sides) and new ones
//! are reset as soon as they are accepted, until the heal. A Raft partition between A and B
//! needs both directions, as each member dials the other.
//!
//! A service whose members name their own address in their first words (ZooKeeper's
//! election hello, which the member dialled calls back) gives its proxies a [`Hello`] that
//! rewrites it, so that the call back runs through a proxy too. The hello also says who
//! dials, which is how a connection is told whose it is when its dialler closed it before
//! `/proc` was read (a ZooKeeper server sends its hello to a higher id and hangs up, waiting
//! to be called back).
//!
//! Not `nemesis::proxy`: that one cuts every connection of one proxy at once and holds
//! their bytes; here one listener serves every other member and a cut picks its
//! connections by who dialled.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use super::error::ClusterError;
use super::procfs;

/// A cut link: (the member that dials, the member it dials).
type Pair = (String, String);

/// The links of one cluster: who runs as which pid, and which links are cut. Clones share it.
#[derive(Debug, Clone)]
pub struct PeerLinks {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// Each member's pid while it runs.
    pids: Mutex<BTreeMap<String, u32>>,
    /// The only sender: every connection watches it.
    cuts: watch::Sender<BTreeSet<Pair>>,
}

/// What a member says first on a connection it opens, read by the proxy before it
/// forwards anything.
#[async_trait]
pub trait Hello: std::fmt::Debug + Send + Sync {
    /// Reads the first words from `dialler`: who they say dials, and the words as the
    /// member dialled should hear them. An error resets the connection.
    async fn read(&self, dialler: &mut TcpStream) -> io::Result<Greeting>;
}

/// A dialler's first words, as [`Hello::read`] makes them out.
#[derive(Debug)]
pub struct Greeting {
    /// The member they say is dialling.
    pub from: String,
    /// What to send the member dialled before the rest.
    pub words: Vec<u8>,
}

/// One member's proxy; dropping it closes its listener and every connection through it.
#[derive(Debug)]
pub struct PeerProxy {
    #[cfg(test)]
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for PeerProxy {
    fn drop(&mut self) {
        // Its JoinSet of connections is dropped with it, which aborts them.
        self.task.abort();
    }
}

#[cfg(test)]
impl PeerProxy {
    /// The address the other members are given for this one.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Default for PeerLinks {
    fn default() -> Self {
        PeerLinks {
            shared: Arc::new(Shared {
                pids: Mutex::new(BTreeMap::new()),
                cuts: watch::channel(BTreeSet::new()).0,
            }),
        }
    }
}

impl PeerLinks {
    /// Listens on `port` of 127.0.0.1 (0: a free one) in front of `member`'s peer listener
    /// at `upstream`, relaying each dialler's first words through `hello` if given. Runs
    /// until dropped, across the member's restarts.
    pub async fn proxy(
        &self,
        member: &str,
        port: u16,
        upstream: SocketAddr,
        hello: Option<Arc<dyn Hello>>,
    ) -> io::Result<PeerProxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await?;
        #[cfg(test)]
        let addr = listener.local_addr()?;
        let task = tokio::spawn(accept_loop(
            listener,
            Upstream {
                member: member.to_string(),
                addr: upstream,
                hello,
            },
            self.clone(),
        ));
        tracing::debug!(member, %upstream, port, "peer proxy listening");
        Ok(PeerProxy {
            #[cfg(test)]
            addr,
            task,
        })
    }

    /// `member` runs as `pid` now (after each start): its connections are told by it.
    pub fn running(&self, member: &str, pid: u32) {
        self.pids().insert(member.to_string(), pid);
    }

    /// Whether `member` has been started.
    pub fn knows(&self, member: &str) -> bool {
        self.pids().contains_key(member)
    }

    /// Cuts the link from `from` to `to`: `from`'s connections to `to` are reset, now and
    /// until [`PeerLinks::heal`]. A `from` that is no member, or `to` itself, is an error.
    pub fn cut(&self, from: &str, to: &str) -> Result<(), ClusterError> {
        if !self.knows(from) || from == to {
            return Err(ClusterError::UnknownNode(from.to_string()));
        }
        self.shared.cuts.send_modify(|cuts| {
            cuts.insert((from.to_string(), to.to_string()));
        });
        Ok(())
    }

    /// Ends a cut; false if the link was not cut.
    pub fn heal(&self, from: &str, to: &str) -> bool {
        let mut healed = false;
        self.shared.cuts.send_if_modified(|cuts| {
            healed = cuts.remove(&(from.to_string(), to.to_string()));
            healed
        });
        healed
    }

    fn pids(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, u32>> {
        self.shared.pids.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The member that opened the connection from 127.0.0.1:`local` to our `listener` port.
    async fn dialled_by(&self, local: u16, listener: u16) -> Option<String> {
        let pids: Vec<(String, u32)> = self
            .pids()
            .iter()
            .map(|(name, pid)| (name.clone(), *pid))
            .collect();
        tokio::task::spawn_blocking(move || {
            let all: Vec<u32> = pids.iter().map(|(_, pid)| *pid).collect();
            let owner = procfs::connection_owner(&all, local, listener)?;
            pids.into_iter()
                .find(|(_, pid)| *pid == owner)
                .map(|(name, _)| name)
        })
        .await
        .ok()
        .flatten()
    }
}

/// The member a proxy stands in front of.
#[derive(Debug, Clone)]
struct Upstream {
    member: String,
    addr: SocketAddr,
    hello: Option<Arc<dyn Hello>>,
}

/// How long a dialler has to say its first words.
const HELLO_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

async fn accept_loop(listener: TcpListener, upstream: Upstream, links: PeerLinks) {
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    connections.spawn(forward(stream, peer, port, upstream.clone(), links.clone()));
                }
                Err(err) => {
                    // E.g. out of file descriptors: do not spin on it.
                    tracing::debug!(member = upstream.member, %err, "peer proxy: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Forwards one connection to `to`'s peer listener until either side closes or its link
/// is cut.
async fn forward(
    mut stream: TcpStream,
    peer: SocketAddr,
    port: u16,
    upstream: Upstream,
    links: PeerLinks,
) {
    let to = upstream.member;
    let dialled_by = links.dialled_by(peer.port(), port).await;
    let greeting = match &upstream.hello {
        Some(hello) => {
            let read = tokio::time::timeout(HELLO_TIMEOUT, hello.read(&mut stream)).await;
            match read.unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into())) {
                Ok(greeting) => Some(greeting),
                Err(err) => {
                    tracing::debug!(member = to, %peer, %err, "peer proxy: first words refused");
                    let _ = stream.set_zero_linger();
                    return;
                }
            }
        }
        None => None,
    };
    let Some(from) = dialled_by.or_else(|| greeting.as_ref().map(|g| g.from.clone())) else {
        // Not one of the members (or gone already): nothing to forward for.
        tracing::debug!(member = to, %peer, "peer proxy: connection from no member");
        let _ = stream.set_zero_linger();
        return;
    };
    let pair = (from, to);
    let mut cuts = links.shared.cuts.subscribe();
    if cuts.borrow_and_update().contains(&pair) {
        let _ = stream.set_zero_linger();
        return;
    }
    let Ok(mut member) = TcpStream::connect(upstream.addr).await else {
        // The member is down: the dialler sees the connection fail, as it would.
        let _ = stream.set_zero_linger();
        return;
    };
    let _ = stream.set_nodelay(true);
    let _ = member.set_nodelay(true);
    let said = greeting.map(|g| g.words).unwrap_or_default();
    tokio::select! {
        _ = relay(&said, &mut stream, &mut member) => {}
        _ = cuts.wait_for(|cuts| cuts.contains(&pair)) => {
            tracing::debug!(from = pair.0, to = pair.1, "peer proxy: connection cut");
            let _ = stream.set_zero_linger();
            let _ = member.set_zero_linger();
        }
    }
}

/// Sends the member the dialler's first words `said`, then relays both ways until either
/// side closes.
async fn relay(said: &[u8], stream: &mut TcpStream, member: &mut TcpStream) {
    use tokio::io::AsyncWriteExt;
    if member.write_all(said).await.is_ok() {
        let _ = tokio::io::copy_bidirectional(stream, member).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An echo server standing in for a member's peer listener.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    async fn round_trip(stream: &mut TcpStream) -> io::Result<()> {
        stream.write_all(b"ping").await?;
        let mut buf = [0u8; 4];
        stream.read_exact(&mut buf).await?;
        assert_eq!(&buf, b"ping");
        Ok(())
    }

    #[tokio::test]
    async fn a_cut_resets_the_dialler_s_connections_until_healed() {
        let links = PeerLinks::default();
        // This test process dials: it is member `a`.
        links.running("a", std::process::id());
        let proxy = links.proxy("b", 0, echo().await, None).await.unwrap();
        let mut open = TcpStream::connect(proxy.addr()).await.unwrap();
        round_trip(&mut open).await.unwrap();

        links.cut("a", "b").unwrap();
        assert!(
            round_trip(&mut open).await.is_err(),
            "the open connection dies"
        );
        let mut new = TcpStream::connect(proxy.addr()).await.unwrap();
        assert!(round_trip(&mut new).await.is_err(), "a new one is reset");

        // The other direction, (b, a), is another link: healing it changes nothing.
        assert!(!links.heal("b", "a"));
        assert!(links.heal("a", "b"));
        let mut healed = TcpStream::connect(proxy.addr()).await.unwrap();
        round_trip(&mut healed).await.unwrap();
    }

    #[tokio::test]
    async fn a_connection_from_no_member_is_refused() {
        let links = PeerLinks::default();
        links.running("a", 1);
        let proxy = links.proxy("b", 0, echo().await, None).await.unwrap();
        let mut stranger = TcpStream::connect(proxy.addr()).await.unwrap();
        assert!(round_trip(&mut stranger).await.is_err());
    }
}
