//! Each worker's connections to servers on other hosts leave this machine from a range of
//! source ports of its own. All workers share this machine's address, so the range is what
//! lets a host's iptables tell one worker's packets from another's: a client partition on a
//! host drops the worker's range (`cluster::cut`), and the other workers still get through.
//!
//! The ranges lie below the kernel's ephemeral ports (`ip_local_port_range`), so no other
//! connection of lockaudit (the nemesis's own, a probe) can take a port of a worker's range
//! and be cut with it.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::net::{TcpSocket, TcpStream};

/// The first port of the first worker's range: above the well-known and most servers' ports.
const FIRST: u16 = 10_000;
/// The most ports one worker gets. A connection closed by the proxy holds its port for a
/// minute (TIME_WAIT) towards that server: 1000 ports allow 16 new connections a second to
/// each server for ever.
const PER_WORKER: u16 = 1000;
/// The fewest that are still worth it.
const MIN_PER_WORKER: u16 = 16;

/// The first ephemeral port of this machine (the kernel's default, 32768, if unreadable).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// `workers` that do not fit below the ephemeral ports, [`MIN_PER_WORKER`] ports each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{workers} workers need {MIN_PER_WORKER} source ports each between {FIRST} and \
     the first ephemeral port {ephemeral} (net.ipv4.ip_local_port_range) for \
     client partitions on hosts"
)]
pub struct TooManyWorkers {
    pub workers: usize,
    /// The first ephemeral port of this machine.
    pub ephemeral: u16,
}

/// One range per worker, between [`FIRST`] and the ephemeral ports; an error naming the
/// numbers when `workers` do not fit.
pub fn ranges(workers: usize) -> Result<Vec<RangeInclusive<u16>>, TooManyWorkers> {
    plan(workers, ephemeral_start())
}

fn plan(workers: usize, ephemeral: u16) -> Result<Vec<RangeInclusive<u16>>, TooManyWorkers> {
    let room = usize::from(ephemeral.saturating_sub(FIRST));
    let each = (room / workers.max(1)).min(usize::from(PER_WORKER));
    if each < usize::from(MIN_PER_WORKER) {
        return Err(TooManyWorkers { workers, ephemeral });
    }
    Ok((0..workers)
        .map(|w| {
            // `each * workers <= room`, so every bound fits below `ephemeral`.
            let start = usize::from(FIRST) + w * each;
            start as u16..=(start + each - 1) as u16
        })
        .collect())
}

/// Connections from one range, each from the next free port of it.
#[derive(Debug)]
pub struct SourcePorts {
    range: RangeInclusive<u16>,
    /// Where the next search starts: ports just used are likely still in TIME_WAIT.
    next: AtomicU32,
}

impl SourcePorts {
    pub fn new(range: RangeInclusive<u16>) -> SourcePorts {
        SourcePorts {
            range,
            next: AtomicU32::new(0),
        }
    }

    pub fn range(&self) -> RangeInclusive<u16> {
        self.range.clone()
    }

    /// Connects to `upstream` from a port of the range: tries each port once, from where
    /// the last search left off, skipping those in use (bound here, or their connection to
    /// this upstream in TIME_WAIT).
    pub async fn connect(&self, upstream: SocketAddr) -> io::Result<TcpStream> {
        let (first, last) = (u32::from(*self.range.start()), u32::from(*self.range.end()));
        let len = last - first + 1;
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..len {
            let port = (first + (start + i) % len) as u16;
            let (socket, any) = if upstream.is_ipv6() {
                (TcpSocket::new_v6()?, IpAddr::V6(Ipv6Addr::UNSPECIFIED))
            } else {
                (TcpSocket::new_v4()?, IpAddr::V4(Ipv4Addr::UNSPECIFIED))
            };
            // Another upstream may use the port meanwhile: a connection is its four-tuple.
            socket.set_reuseaddr(true)?;
            if let Err(e) = socket.bind(SocketAddr::new(any, port)) {
                if e.kind() == io::ErrorKind::AddrInUse {
                    continue;
                }
                return Err(e);
            }
            match socket.connect(upstream).await {
                Ok(stream) => {
                    self.next
                        .store(start.wrapping_add(i + 1), Ordering::Relaxed);
                    return Ok(stream);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::AddrInUse | io::ErrorKind::AddrNotAvailable
                    ) =>
                {
                    continue
                }
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "every source port of {}-{} is in use towards {upstream}",
                first, last
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_disjoint_and_below_the_ephemeral_ports() {
        let r = plan(3, 32_768).unwrap();
        assert_eq!(r, vec![10_000..=10_999, 11_000..=11_999, 12_000..=12_999]);
        let r = plan(100, 32_768).unwrap();
        assert_eq!(r[0], 10_000..=10_226);
        assert!(*r[99].end() < 32_768);
        let err = plan(4, 10_040).unwrap_err();
        assert_eq!(
            err,
            TooManyWorkers {
                workers: 4,
                ephemeral: 10_040
            }
        );
        assert!(err.to_string().contains("ip_local_port_range"), "{err}");
    }

    #[tokio::test]
    async fn connections_leave_from_the_range_and_skip_ports_in_use() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = listener.local_addr().unwrap();
        // A pair of ports, the first taken and the second free a moment ago (the machine's
        // other connections may take any port: a pair whose second is in use is skipped).
        let (_taken, port) = (0..100)
            .find_map(|_| {
                let taken = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
                let port = taken.local_addr().unwrap().port();
                let next = port.checked_add(1)?;
                std::net::TcpListener::bind(("0.0.0.0", next)).ok()?;
                Some((taken, port))
            })
            .expect("a taken port whose next one is free");
        let ports = SourcePorts::new(port..=port + 1);
        let a = ports.connect(upstream).await;
        // The taken port is skipped: the connection comes from the next one.
        match a {
            Ok(stream) => assert_eq!(stream.local_addr().unwrap().port(), port + 1),
            Err(e) => panic!("{e}"),
        }
    }
}
