//! Loopback ports for the servers.
//!
//! A free port is found by binding 127.0.0.1:0 and letting go of it; the server binds it a
//! moment later. Something else may take it in between, so starting a server retries with
//! a fresh port when its log says "Address already in use" (see `server.rs`).

use std::io;
use std::net::{Ipv4Addr, TcpListener};

use super::error::ClusterError;

/// `n` distinct free ports. All are held at once while choosing, so they differ.
pub fn free_ports(n: usize) -> Result<Vec<u16>, ClusterError> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<io::Result<Vec<_>>>()
        .map_err(ClusterError::NoFreePort)?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|addr| addr.port()))
        .collect::<io::Result<Vec<_>>>()
        .map_err(ClusterError::NoFreePort)
}

/// One free port.
pub fn free_port() -> Result<u16, ClusterError> {
    let ports = free_ports(1)?;
    ports
        .first()
        .copied()
        .ok_or_else(|| ClusterError::NoFreePort(io::Error::other("no port returned")))
}

/// Where a node's port comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortChoice {
    /// Chosen by the kernel; on a collision another one is chosen.
    Free(u16),
    /// Asked for by the caller; a collision is an error naming it.
    Fixed(u16),
}

impl PortChoice {
    pub fn port(self) -> u16 {
        match self {
            PortChoice::Free(port) | PortChoice::Fixed(port) => port,
        }
    }
}

/// `n` ports: consecutive from `base` when given, else free ones.
pub fn plan(n: usize, base: Option<u16>) -> Result<Vec<PortChoice>, ClusterError> {
    match base {
        Some(base) => (0..n)
            .map(|i| {
                u16::try_from(i)
                    .ok()
                    .and_then(|i| base.checked_add(i))
                    .filter(|&port| port != 0)
                    .map(PortChoice::Fixed)
                    .ok_or_else(|| {
                        ClusterError::InvalidSpec(format!(
                            "{n} ports from base port {base} do not fit below 65536"
                        ))
                    })
            })
            .collect(),
        None => Ok(free_ports(n)?.into_iter().map(PortChoice::Free).collect()),
    }
}

/// Port `base` + `i` (node i's, from a base port), or an error past 65535.
pub fn nth(base: u16, i: usize) -> Result<u16, ClusterError> {
    u16::try_from(usize::from(base) + i).map_err(|_| {
        ClusterError::InvalidSpec(format!(
            "port {base} + {i} is past 65535: a lower --base-port"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct_and_bindable() {
        let ports = free_ports(8).unwrap();
        let mut sorted = ports.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 8);
        for port in ports {
            TcpListener::bind((Ipv4Addr::LOCALHOST, port)).unwrap();
        }
    }

    #[test]
    fn fixed_ports_are_consecutive_and_bounded() {
        assert_eq!(
            plan(3, Some(7000)).unwrap(),
            vec![
                PortChoice::Fixed(7000),
                PortChoice::Fixed(7001),
                PortChoice::Fixed(7002)
            ]
        );
        assert!(matches!(
            plan(3, Some(65534)),
            Err(ClusterError::InvalidSpec(_))
        ));
    }
}
