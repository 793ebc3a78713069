#!/usr/bin/env bash
# A test bed of several "hosts" on this machine, for auditing a lock over SSH (docs/src/guide/remote-hosts.md): each host is a Linux network namespace with
# its own address on a private bridge and its own sshd, reachable with a key made here.
#
#   scripts/netns-hosts.sh up [N] [DIR]     N hosts (default 5), state and key in DIR
#   scripts/netns-hosts.sh down [DIR]       removes them (namespaces, veths, bridge, sshd)
#
# Needs root (ip netns, ip link), iproute2 and openssh-server. Addresses: the bridge
# `${PREFIX}br` holds ${SUBNET}.1/24 in the root namespace, host i (1..N) is ${SUBNET}.(i+1).
# Only this machine and the namespaces made here are ever a target. The namespaces share
# this machine's file system, so redis-server and faketime installed here are there too.
#
# Environment: PREFIX (default `la`; names: ${PREFIX}h1.. for namespaces and veths),
# SUBNET (default 10.77.0). Tests use their own prefixes and subnets (tests/it/common/netns.rs).
set -euo pipefail

PREFIX=${PREFIX:-la}
SUBNET=${SUBNET:-10.77.0}
bridge="${PREFIX}br"

die() { echo "netns-hosts: $*" >&2; exit 1; }

up() {
  local n=${1:-5} dir=${2:-/tmp/${PREFIX}-hosts}
  [ "$(id -u)" = 0 ] || die "needs root (ip netns add, ip link add)"
  command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || die "sshd not found: apt-get install -y openssh-server"
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "N must be 1..200, not '$n'"
  ip link show "$bridge" >/dev/null 2>&1 && die "$bridge exists: run '$0 down $dir' first"
  mkdir -p "$dir" && chmod 700 "$dir"
  dir=$(cd "$dir" && pwd)
  echo "$n" >"$dir/hosts"
  # sshd's privilege separation folder (on the shared file system).
  mkdir -p /run/sshd
  [ -f "$dir/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C lockaudit-control -f "$dir/id_ed25519"
  [ -f "$dir/host_key" ] || ssh-keygen -q -t ed25519 -N '' -C lockaudit-host -f "$dir/host_key"
  cp "$dir/id_ed25519.pub" "$dir/authorized_keys"
  # The hosts' key, for a known_hosts of the user's choosing (lockaudit trusts only known
  # hosts unless given --accept-new-host-keys).
  : >"$dir/known_hosts"
  # A bed half made is taken down again.
  trap 'echo "netns-hosts: failed, removing what was made" >&2; down "$dir"' ERR

  ip link add "$bridge" type bridge
  ip addr add "$SUBNET.1/24" dev "$bridge"
  ip link set "$bridge" up
  local i ns addr
  for i in $(seq 1 "$n"); do
    ns="${PREFIX}h$i" addr="$SUBNET.$((i + 1))"
    ip netns add "$ns"
    ip link add "${ns}" type veth peer name "${ns}p"
    ip link set "${ns}p" netns "$ns"
    ip link set "$ns" master "$bridge" up
    ip -n "$ns" link set "${ns}p" name eth0
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    cat >"$dir/$ns.sshd_config" <<EOF
ListenAddress $addr:22
HostKey $dir/host_key
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
MaxSessions 100
MaxStartups 100
EOF
    ip netns exec "$ns" /usr/sbin/sshd -D -e -f "$dir/$ns.sshd_config" >"$dir/$ns.sshd.log" 2>&1 &
    echo $! >"$dir/$ns.sshd.pid"
    echo "$addr $(cut -d' ' -f1,2 "$dir/host_key.pub")" >>"$dir/known_hosts"
    echo "$ns $addr"
  done
  echo "ssh -i $dir/id_ed25519 -o UserKnownHostsFile=$dir/known_hosts root@$SUBNET.2"
  echo "lockaudit run --ssh-key $dir/id_ed25519 --accept-new-host-keys --node ssh://root@$SUBNET.2 ..."
  echo "(or, instead of --accept-new-host-keys: cat $dir/known_hosts >> ~/.ssh/known_hosts)"
}

down() {
  local dir=${1:-/tmp/${PREFIX}-hosts} ns pid
  [ "$(id -u)" = 0 ] || die "needs root"
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${PREFIX}h[0-9]+$" || true); do
    # Anything still running on the host (sshd, a redis-server left over) ends with it.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$ns"
  done
  for pid in "$dir"/*.sshd.pid; do
    [ -f "$pid" ] && kill -KILL "$(cat "$pid")" 2>/dev/null || true
    rm -f "$pid"
  done
  ip link del "$bridge" 2>/dev/null || true
}

case "${1:-}" in
  up) shift; up "$@" ;;
  down) shift; down "$@" ;;
  *) die "usage: $0 up [N] [DIR] | down [DIR]" ;;
esac
