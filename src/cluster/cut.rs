//! A link cut with iptables on a host (Jepsen's way): between two servers on hosts, on the
//! host of the server that loses it; or between one worker of the control node and a
//! server, on the server's host, by the worker's source ports (`nemesis::source_ports`). The
//! rules live as long as an SSH session that added them: the heal closes its stdin and the
//! host's shell deletes them; if lockaudit dies instead, its ssh client dies with it, the
//! session's stdin closes all the same, and the host is not left partitioned.

use std::io::{BufRead, BufReader};
use std::ops::RangeInclusive;
use std::process::ChildStdin;
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use super::error::ClusterError;
use super::process::ChildGuard;
use super::ssh::Ssh;
use crate::shell::quote;

/// How long adding or deleting the rules may take.
const RULE_TIMEOUT: Duration = Duration::from_secs(10);

/// A link cut and not yet healed.
#[derive(Debug)]
pub struct Cut {
    guard: ChildGuard,
    stdin: Option<ChildStdin>,
    /// The session's stdout lines (`cut`, `healed`). In a mutex only so that a `Cut` is
    /// `Sync` (audit cells run as tasks on any thread); it is only ever read through `&mut`.
    lines: Mutex<mpsc::Receiver<String>>,
}

/// The iptables arguments after `-I` / `-D`: TCP to `addr` on any of `ports` out, and its
/// replies in, tagged with the run's comment so that a rule can always be told for ours.
/// Several ports (a ZooKeeper server's quorum and election ports) go in one rule each way
/// through the `multiport` match, so that a cut is still two rules added and deleted.
pub fn link_rules(tag: &str, addr: &str, ports: &[u16]) -> [String; 2] {
    let tag = quote(tag);
    let addr = quote(addr);
    let (to, from) = match ports {
        [port] => (format!("--dport {port}"), format!("--sport {port}")),
        _ => {
            let list: Vec<String> = ports.iter().map(u16::to_string).collect();
            let list = list.join(",");
            (
                format!("-m multiport --dports {list}"),
                format!("-m multiport --sports {list}"),
            )
        }
    };
    [
        format!("OUTPUT -p tcp -d {addr} {to} -m comment --comment {tag} -j DROP"),
        format!("INPUT -p tcp -s {addr} {from} -m comment --comment {tag} -j DROP"),
    ]
}

/// On a server's host: TCP from `client` with a source port in `ports` to the server's
/// `addr:port` in, and the server's packets back to those ports out.
pub fn client_rules(
    tag: &str,
    client: &str,
    ports: &RangeInclusive<u16>,
    addr: &str,
    port: u16,
) -> [String; 2] {
    let tag = quote(tag);
    let (client, addr) = (quote(client), quote(addr));
    let range = format!("{}:{}", ports.start(), ports.end());
    [
        format!(
            "INPUT -p tcp -s {client} --sport {range} -d {addr} --dport {port} \
             -m comment --comment {tag} -j DROP"
        ),
        format!(
            "OUTPUT -p tcp -s {addr} --sport {port} -d {client} --dport {range} \
             -m comment --comment {tag} -j DROP"
        ),
    ]
}

/// The session: add both rules, say `cut`, wait for stdin to close, delete them, say `healed`.
fn script([first, second]: &[String; 2]) -> String {
    format!(
        "iptables -w -I {first} && iptables -w -I {second} || exit 1; echo cut; \
         cat >/dev/null; iptables -w -D {first}; iptables -w -D {second}; echo healed"
    )
}

impl Cut {
    /// Adds `rules` (from [`link_rules`] or [`client_rules`]) on the host of `ssh`, until
    /// the heal; `what` names the link in messages (`the link to 10.0.0.2:7400`).
    pub fn start(ssh: &Ssh, what: &str, rules: &[String; 2]) -> Result<Cut, ClusterError> {
        let action = format!("cut {what}");
        let mut guard = ssh.spawn(&action, &script(rules))?;
        let stdin = guard.take_stdin();
        let stdout = guard
            .take_stdout()
            .ok_or_else(|| ssh.error(&action, "no pipe from ssh"))?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut cut = Cut {
            guard,
            stdin,
            lines: Mutex::new(lines),
        };
        match receiver(&mut cut.lines).recv_timeout(RULE_TIMEOUT) {
            Ok(line) if line == "cut" => Ok(cut),
            _ => Err(ssh.error(
                &action,
                "iptables did not add the rules (is it installed, and may the user run it?)",
            )),
        }
    }

    /// Deletes the rules and waits until the host says so. False if it did not in time (the
    /// session is closed all the same, which deletes them when the host gets to it).
    pub fn heal(mut self) -> bool {
        drop(self.stdin.take());
        let deadline = Instant::now() + RULE_TIMEOUT;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match receiver(&mut self.lines).recv_timeout(left) {
                Ok(line) if line == "healed" => return true,
                Ok(_) => continue,
                Err(_) => break,
            }
        }
        false
    }
}

fn receiver(lines: &mut Mutex<mpsc::Receiver<String>>) -> &mut mpsc::Receiver<String> {
    lines.get_mut().unwrap_or_else(|p| p.into_inner())
}

impl Drop for Cut {
    fn drop(&mut self) {
        drop(self.stdin.take());
        self.guard.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_drop_the_link_both_ways_under_the_runs_tag() {
        let [out, inp] = link_rules("lockaudit-run-x", "10.77.0.2", &[7400]);
        assert_eq!(
            out,
            "OUTPUT -p tcp -d 10.77.0.2 --dport 7400 -m comment --comment lockaudit-run-x -j DROP"
        );
        assert_eq!(
            inp,
            "INPUT -p tcp -s 10.77.0.2 --sport 7400 -m comment --comment lockaudit-run-x -j DROP"
        );
        let s = script(&link_rules("t", "10.77.0.2", &[7400]));
        assert!(
            s.contains("echo cut; cat >/dev/null; iptables -w -D OUTPUT"),
            "{s}"
        );
    }

    #[test]
    fn a_link_of_several_ports_is_one_rule_each_way() {
        let [out, inp] = link_rules("t", "10.77.0.2", &[7403, 7406]);
        assert_eq!(
            out,
            "OUTPUT -p tcp -d 10.77.0.2 -m multiport --dports 7403,7406 -m comment --comment t -j DROP"
        );
        assert_eq!(
            inp,
            "INPUT -p tcp -s 10.77.0.2 -m multiport --sports 7403,7406 -m comment --comment t -j DROP"
        );
    }

    #[test]
    fn client_rules_drop_one_workers_ports_both_ways() {
        let [inp, out] = client_rules(
            "lockaudit-run-x",
            "10.77.0.1",
            &(11000..=11999),
            "10.77.0.2",
            7400,
        );
        assert_eq!(
            inp,
            "INPUT -p tcp -s 10.77.0.1 --sport 11000:11999 -d 10.77.0.2 --dport 7400 \
             -m comment --comment lockaudit-run-x -j DROP"
        );
        assert_eq!(
            out,
            "OUTPUT -p tcp -s 10.77.0.2 --sport 7400 -d 10.77.0.1 --dport 11000:11999 \
             -m comment --comment lockaudit-run-x -j DROP"
        );
    }
}
