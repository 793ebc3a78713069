#!/usr/bin/env bash
# Sets lockaudit up on Debian 12 (or Ubuntu): the Debian packages of the servers it starts and
# faults, then `cargo install --path . --locked` (lockaudit and lockaudit-adapter into
# ~/.cargo/bin, or $CARGO_INSTALL_ROOT/bin). Needs Rust (rustup) and apt-get; runs apt-get as
# root, or through sudo for another user.
#
#   ./install.sh                    packages, then the binaries
#   ./install.sh --packages-only    only the packages (.ci/run, which builds by itself)
#   ./install.sh --with-test-tools  also what the tests need (.ci/run)
#   ./install.sh --build-tools      only what the build needs (protoc, mold): .ci/run starts
#                                   the build with these while the rest installs
#   ./install.sh --no-update        skip apt-get update (done by an earlier call)
#
# This is the one list of Debian packages: .ci/run and the CI example call this script.
set -euo pipefail
cd "$(dirname "$0")"

# What lockaudit starts and faults: Redis (servers, sentinels, redis-cli), PostgreSQL, MariaDB,
# etcd, ZooKeeper; libfaketime for clock faults. lockaudit starts its own servers on free
# ports and private sockets: a system service the packages may start is not used, and does
# not stand in their way.
servers=(redis-server redis-sentinel redis-tools faketime postgresql mariadb-server etcd-server zookeeper)
# What the build needs: protoc, which builds the etcd client; a C compiler and libc's
# headers, which build the adapters' wall-clock library (src/wallclock.c) and link
# Rust's binaries.
build_tools=(protobuf-compiler gcc libc6-dev)
# The tests' own: SSH hosts in network namespaces (sshd, iptables, ip), and mold, which links
# the test binaries in a fraction of ld's time.
test_tools=(openssh-server iptables iproute2)
# Go and etcd's own Go client (3.4.23, under /usr/share/gocode), which build the go-etcd
# adapter (examples/adapters/go-etcd/build.sh) offline.
test_tools+=(golang-go golang-etcd-server-dev)
test_build_tools=(mold)
# The Node adapters (examples/adapters/node-*): Debian's Node.js and npm, unless an npm is
# already there (NodeSource's nodejs brings its own npm and conflicts with Debian's).
command -v npm >/dev/null || test_tools+=(nodejs npm)
# The Curator adapter's JDK and Debian's Curator jars (examples/adapters/curator/build.sh).
test_java=(openjdk-17-jdk-headless libcurator-recipes-java libslf4j-java)

packages=("${servers[@]}" "${build_tools[@]}")
build=true
update=true
for arg in "$@"; do
  case "$arg" in
  --packages-only) build=false ;;
  --with-test-tools) packages+=("${test_tools[@]}" "${test_build_tools[@]}" "${test_java[@]}") ;;
  --build-tools)
    packages=("${build_tools[@]}" "${test_build_tools[@]}")
    build=false
    ;;
  --no-update) update=false ;;
  -h | --help)
    sed -n '2,14s/^# \{0,1\}//p' "$0"
    exit 0
    ;;
  *)
    echo "install.sh: unknown option '$arg' (see ./install.sh --help)" >&2
    exit 2
    ;;
  esac
done

if ! command -v apt-get >/dev/null; then
  echo "install.sh: apt-get not found: install these packages (or your system's equivalents) by hand: ${packages[*]}" >&2
  exit 1
fi
if [ "$(id -u)" = 0 ]; then
  as_root=()
elif command -v sudo >/dev/null; then
  as_root=(sudo)
else
  echo "install.sh: the packages need root: run it as root, or install sudo" >&2
  exit 1
fi
echo "install.sh: apt-get install ${packages[*]}"
if "$update"; then
  "${as_root[@]}" apt-get update -qq
fi
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null

if "$build"; then
  if ! command -v cargo >/dev/null; then
    echo "install.sh: cargo not found: install Rust with rustup, then run this again" >&2
    exit 1
  fi
  cargo install --path . --locked
  bin="${CARGO_INSTALL_ROOT:-${CARGO_HOME:-$HOME/.cargo}}/bin"
  case ":$PATH:" in
  *":$bin:"*) ;;
  *) echo "install.sh: add $bin to your PATH to run lockaudit" >&2 ;;
  esac
fi
