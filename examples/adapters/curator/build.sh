#!/bin/sh
# Builds the Curator adapter (examples/adapters/curator/CuratorAdapter.java) against Debian's
# jars, with no network: `sh examples/adapters/curator/build.sh`. Needs a JDK (javac, 17 or
# later) and `apt-get install libcurator-recipes-java zookeeper` (curator-framework,
# curator-client, zookeeper and guava come with it). The output goes into build/ next to
# this script (git-ignored): the adapter's jar, and a class-data-sharing archive that makes
# each client's JVM start faster. Idempotent; quiet unless something fails.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out="$here/build"
. "$here/classpath.sh"
for jar in $(echo "$CURATOR_CLASSPATH" | tr ':' ' '); do
    if [ ! -f "$jar" ]; then
        echo "build.sh: $jar is missing: apt-get install libcurator-recipes-java zookeeper libslf4j-java" >&2
        exit 1
    fi
done
command -v javac >/dev/null || { echo "build.sh: javac not found: apt-get install openjdk-17-jdk-headless" >&2; exit 1; }
# run.sh starts nothing while build/ lacks the jar or the archive: a failed build leaves none.
rm -rf "$out"
mkdir -p "$out/classes"
trap 'rm -rf "$out"' EXIT
javac -nowarn -d "$out/classes" -cp "$CURATOR_CLASSPATH" "$here/CuratorAdapter.java"
# A jar, not the folder: class-data sharing archives only classes from jars, and records
# their paths (so the archive is made where run.sh will find the jar).
jar --create --file "$out/curator-adapter.jar" -C "$out/classes" .
rm -rf "$out/classes"
# The archive: the classes a run loads, recorded once by a warm-up (no server needed), with
# run.sh's flags (an archive is refused by a JVM whose collector or heap layout differ).
if ! java -XX:ArchiveClassesAtExit="$out/curator.jsa" $(sh "$here/run.sh" --jvm-flags) \
    -cp "$out/curator-adapter.jar:$CURATOR_CLASSPATH" CuratorAdapter --warm-up >/dev/null 2>"$out/warm-up.log"; then
    echo "build.sh: the warm-up failed:" >&2
    tail -20 "$out/warm-up.log" >&2
    exit 1
fi
rm -f "$out/warm-up.log"
trap - EXIT
