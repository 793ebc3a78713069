//! What `/proc` says of processes: a process's children, whether a pid is alive, and which
//! process opened a loopback connection.
//!
//! Needed for postgres, whose every backend makes itself a session leader (`setsid` in
//! `InitPostmasterChild`), so that its process group holds the postmaster alone: a pause
//! or kill must reach its children by pid. And for etcd's peer links (`peer_links`), whose
//! proxy must tell which member dialled it, when every member dials from 127.0.0.1.

/// State letter and parent pid of `pid`, from `/proc/<pid>/stat` (None once it is gone).
fn state_and_parent(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's closing parenthesis (a command may hold spaces): state, ppid, ...
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((state, parent))
}

/// Whether `pid` runs or sleeps (or is stopped): not gone, not a zombie.
pub fn is_live(pid: u32) -> bool {
    state_and_parent(pid).is_some_and(|(state, _)| state != 'Z')
}

/// The live children of `parent`.
pub fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            state_and_parent(pid).is_some_and(|(state, ppid)| ppid == parent && state != 'Z')
        })
        .collect()
}

/// `pid` (if live) and its live children: a postmaster and its backends.
pub fn process_tree(pid: u32) -> Vec<u32> {
    let mut tree: Vec<u32> = is_live(pid).then_some(pid).into_iter().collect();
    tree.extend(children_of(pid));
    tree
}

/// The inode of the TCP socket whose local port is `local` and remote port `remote`
/// (`/proc/net/tcp`, then `tcp6`), if it exists now.
fn socket_inode(local: u16, remote: u16) -> Option<u64> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .find_map(|table| {
            let text = std::fs::read_to_string(table).ok()?;
            text.lines().skip(1).find_map(|line| {
                // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
                let fields: Vec<&str> = line.split_whitespace().collect();
                let port =
                    |field: Option<&&str>| u16::from_str_radix(field?.rsplit_once(':')?.1, 16).ok();
                (port(fields.get(1)) == Some(local) && port(fields.get(2)) == Some(remote))
                    .then(|| fields.get(9)?.parse().ok())
                    .flatten()
                    .filter(|&inode| inode != 0)
            })
        })
}

/// Which of `pids` holds the connection from local port `local` to `remote` on this
/// machine: the process whose file descriptors include that socket. None if none does (it
/// closed meanwhile, or another process holds it).
pub fn connection_owner(pids: &[u32], local: u16, remote: u16) -> Option<u32> {
    let socket = format!("socket:[{}]", socket_inode(local, remote)?);
    pids.iter().copied().find(|pid| {
        std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
            fds.filter_map(Result::ok)
                .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == &*socket))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_child_and_sees_it_die() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let me = std::process::id();
        assert!(children_of(me).contains(&child.id()));
        assert!(is_live(child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!is_live(child.id()));
    }

    #[test]
    fn finds_which_process_opened_a_connection() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap().port();
        let mine = std::net::TcpStream::connect(("127.0.0.1", server)).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        let me = std::process::id();
        assert_eq!(peer.port(), mine.local_addr().unwrap().port());
        // Another pid first: only the holder of the socket is named.
        assert_eq!(connection_owner(&[1, me], peer.port(), server), Some(me));
        assert_eq!(connection_owner(&[1], peer.port(), server), None);
        drop((mine, accepted));
    }
}
