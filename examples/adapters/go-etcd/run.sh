#!/bin/sh
# The workload's adapter command: the built adapter, or a message naming the build.
bin="$(dirname "$0")/bin/go-etcd-adapter"
if [ ! -x "$bin" ]; then
    echo "go-etcd adapter is not built: run examples/adapters/go-etcd/build.sh (needs golang-go and golang-etcd-server-dev)" >&2
    exit 1
fi
exec "$bin" "$@"
