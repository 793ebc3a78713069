#!/bin/sh
# Starts one Curator adapter (one JVM per client), as curator.toml's `adapter` does. The
# flags make a JVM start fast on a small, shared machine: the serial collector, a small
# heap, the client compiler only, and the class-data-sharing archive build.sh wrote. The
# JVM's own warnings go to stderr: stdout carries the protocol alone.
here=$(cd "$(dirname "$0")" && pwd)
flags="-XX:+UseSerialGC -Xms16m -Xmx96m -Xss512k -XX:TieredStopAtLevel=1 -Xlog:disable -Xlog:all=warning:stderr"
if [ "${1:-}" = "--jvm-flags" ]; then
    echo "$flags"
    exit 0
fi
if [ ! -f "$here/build/curator-adapter.jar" ] || [ ! -f "$here/build/curator.jsa" ]; then
    echo "curator adapter: not built: run \`sh examples/adapters/curator/build.sh\` (needs a JDK and libcurator-recipes-java)" >&2
    exit 1
fi
. "$here/classpath.sh"
# shellcheck disable=SC2086 # the flags are words
exec java $flags -XX:SharedArchiveFile="$here/build/curator.jsa" -Xshare:auto \
    -cp "$here/build/curator-adapter.jar:$CURATOR_CLASSPATH" CuratorAdapter "$@"
