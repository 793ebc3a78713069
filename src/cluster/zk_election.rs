//! ZooKeeper's election hello, as lockaudit's peer proxies (`peer_links`) read it.
//!
//! A server that opens an election connection first says who it is: a protocol version (a
//! negative long since 3.5), its id, then its own election address(es) as a
//! length-prefixed string (`host:port`, several joined by `|`). The server dialled keeps
//! the connection only if the dialler's id is the higher; otherwise it closes it and calls
//! back the address the dialler named (3.8's `QuorumCnxManager.handleConnection`), and the
//! dialler, knowing that, hangs up right after its hello. That address is the dialler's own
//! listener, so the call back would go around the proxies and a cut would miss it: the
//! proxy names the dialler's proxy instead. The id says who dials when the dialler hung up
//! before the proxy could look it up.

use std::collections::BTreeMap;
use std::io;

use async_trait::async_trait;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::peer_links::{Greeting, Hello};

/// Longer than any address list a server of ours sends: a hello that claims more is no
/// hello (3.8 itself refuses more than 4 KB).
const MAX_ADDRESS_BYTES: i32 = 4096;

/// Each server by id (its `myid`): its name and its election proxy's port, the address it
/// is called back on.
#[derive(Debug, Clone)]
pub struct ElectionHello {
    servers: BTreeMap<i64, (String, u16)>,
}

impl ElectionHello {
    pub fn new(servers: BTreeMap<i64, (String, u16)>) -> Self {
        ElectionHello { servers }
    }
}

#[async_trait]
impl Hello for ElectionHello {
    async fn read(&self, dialler: &mut TcpStream) -> io::Result<Greeting> {
        let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
        let version = dialler.read_i64().await?;
        if version >= 0 {
            // Before 3.5 the id came alone; our 3.8 servers never send that.
            return Err(invalid(format!(
                "a hello of the old protocol (id {version})"
            )));
        }
        let id = dialler.read_i64().await?;
        let length = dialler.read_i32().await?;
        if !(0..=MAX_ADDRESS_BYTES).contains(&length) {
            return Err(invalid(format!("an address list of {length} bytes")));
        }
        let mut named = vec![0; length as usize];
        dialler.read_exact(&mut named).await?;
        let (name, port) = self
            .servers
            .get(&id)
            .ok_or_else(|| invalid(format!("no server has id {id}")))?;
        let address = format!("127.0.0.1:{port}");
        let mut words = Vec::with_capacity(20 + address.len());
        words.extend(version.to_be_bytes());
        words.extend(id.to_be_bytes());
        words.extend((address.len() as i32).to_be_bytes());
        words.extend(address.as_bytes());
        Ok(Greeting {
            from: name.clone(),
            words,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    /// A connected pair of streams: (the side we write, the side the relay reads).
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let near = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (far, _) = listener.accept().await.unwrap();
        (near, far)
    }

    fn hello(version: i64, id: i64, address: &str) -> Vec<u8> {
        let mut bytes = version.to_be_bytes().to_vec();
        bytes.extend(id.to_be_bytes());
        bytes.extend((address.len() as i32).to_be_bytes());
        bytes.extend(address.as_bytes());
        bytes
    }

    async fn read(said: &[u8]) -> io::Result<Greeting> {
        let servers = BTreeMap::from([(1, ("zk-0".to_string(), 4000))]);
        let (mut dialler, mut far) = pair().await;
        dialler.write_all(said).await.unwrap();
        // The dialler may hang up right after its hello: it is still read whole.
        drop(dialler);
        ElectionHello::new(servers).read(&mut far).await
    }

    #[tokio::test]
    async fn the_hello_names_the_dialler_and_its_proxy_s_address() {
        let greeting = read(&hello(-65534, 1, "127.0.0.1:3001|127.0.0.1:3002"))
            .await
            .unwrap();
        assert_eq!(greeting.from, "zk-0");
        assert_eq!(greeting.words, hello(-65534, 1, "127.0.0.1:4000"));
    }

    #[tokio::test]
    async fn a_hello_of_another_protocol_or_server_is_refused() {
        assert!(read(&7i64.to_be_bytes()).await.is_err());
        let mut huge = hello(-65534, 1, "");
        huge[16..20].copy_from_slice(&1_000_000i32.to_be_bytes());
        assert!(read(&huge).await.is_err());
        assert!(read(&hello(-65534, 9, "127.0.0.1:3001")).await.is_err());
        assert!(read(&hello(-65534, 1, "127.0.0.1")[..22]).await.is_err());
    }
}
