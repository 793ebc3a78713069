//! The test bed of namespace hosts (tests/common/netns.rs, the same as
//! scripts/netns-hosts.sh): real sshd in each, reached with the test's key. Needs root and
//! network namespaces: skipped (SKIPPED printed) where `ip netns add` is not permitted.

mod common;

use std::process::Command;

use common::netns::TestBed;

#[test]
fn each_namespace_host_answers_ssh_on_its_own_address_and_is_removed_afterwards() {
    let Some(bed) = TestBed::new("test bed", 3) else {
        return;
    };
    let known_hosts = bed.key.with_file_name("known_hosts");
    for (i, host) in bed.hosts.iter().enumerate() {
        let out = Command::new("ssh")
            .args([
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=accept-new",
            ])
            .arg("-o")
            .arg(format!("UserKnownHostsFile={}", known_hosts.display()))
            .arg("-i")
            .arg(&bed.key)
            .arg(format!("root@{}", host.addr))
            .arg("ip -4 -o addr show eth0")
            .output()
            .expect("ssh");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "host {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains(&format!("inet {}/24", host.addr)),
            "{stdout}"
        );
        assert!(bed.leftovers(i).is_empty(), "{:?}", bed.leftovers(i));
    }
    let names: Vec<String> = bed.hosts.iter().map(|h| h.ns.clone()).collect();
    drop(bed);
    let list = String::from_utf8_lossy(
        &Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    for ns in names {
        assert!(
            !list.split_whitespace().any(|w| w == ns),
            "{ns} left in {list}"
        );
    }
}
