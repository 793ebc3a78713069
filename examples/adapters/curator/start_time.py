#!/usr/bin/env python3
"""How long the Curator adapter takes to start: from exec to its init_ok, for 1 and for 6
JVMs started together, with run.sh's flags and with a bare `java` (no flags, no
class-data-sharing archive). No server is needed: init names a closed port and waits 1 ms
for it. Usage: python3 examples/adapters/curator/start_time.py [rounds] (after build.sh)."""

import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLASSPATH = open(os.path.join(HERE, "classpath.sh")).read().split('CURATOR_CLASSPATH="')[1].split('"')[0]
CLASSPATH = CLASSPATH.replace("$j", "/usr/share/java")
ARGVS = {
    "run.sh": ["sh", os.path.join(HERE, "run.sh")],
    "bare java": ["java", "-cp", os.path.join(HERE, "build/curator-adapter.jar") + ":" + CLASSPATH, "CuratorAdapter"],
}
INIT = json.dumps({"id": 0, "type": "init", "client": 0, "topology": "zookeeper",
                   "nodes": [{"host": "127.0.0.1", "port": 1, "password": "p"}],
                   "options": {"connection_ms": 1}}) + "\n"


def once(argv, n):
    """Seconds until the last of n adapters started together answered init_ok."""
    start = time.monotonic()
    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) for _ in range(n)]
    for p in procs:
        p.stdin.write(INIT)
        p.stdin.flush()
    last = 0.0
    for p in procs:
        line = p.stdout.readline()
        if '"init_ok"' not in line:
            sys.exit(f"start_time.py: no init_ok from {argv}: {line!r} (built? sh {HERE}/build.sh)")
        last = time.monotonic() - start
    for p in procs:
        p.stdin.close()
        p.wait()
    return last


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    for name, argv in ARGVS.items():
        for n in (1, 6):
            xs = [once(argv, n) * 1000 for _ in range(rounds)]
            print(f"{name}, {n} at once: median {statistics.median(xs):.0f} ms "
                  f"({min(xs):.0f}-{max(xs):.0f}, {rounds} rounds; load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
