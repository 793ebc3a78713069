#!/bin/sh
# Builds the go-etcd adapter into bin/ (git-ignored) from Debian's packaged sources:
# golang-go (1.19) and golang-etcd-server-dev (etcd 3.4.23 under /usr/share/gocode), in
# GOPATH mode, offline. Idempotent: `go build` rebuilds only what changed.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
gopath=${LOCKAUDIT_GOPATH:-/usr/share/gocode}
if ! command -v go >/dev/null 2>&1; then
    echo "go-etcd: no go compiler: apt-get install golang-go golang-etcd-server-dev" >&2
    exit 1
fi
if [ ! -d "$gopath/src/go.etcd.io/etcd/clientv3/concurrency" ]; then
    echo "go-etcd: etcd's Go client is not under $gopath: apt-get install golang-etcd-server-dev" >&2
    exit 1
fi
mkdir -p "$here/bin"
cd "$here"
GO111MODULE=off GOPATH="$gopath" GOCACHE="$here/bin/.cache" \
    go build -o "$here/bin/go-etcd-adapter" main.go
