#!/usr/bin/env python3
"""A lockaudit adapter (docs/src/reference/protocol.md, version 1.4) over kazoo's lock (PyPI kazoo==2.11.0,
`kazoo.recipe.lock.Lock`), used the way an application uses it, on lockaudit's ZooKeeper
topology (`init` names the three servers).

What the library does (kazoo/recipe/lock.py, 2.11.0):
  acquire(timeout): make sure the lock folder exists, create an ephemeral sequential node
                    `<folder>/<uuid4 hex>__lock__<10-digit sequence>` (the uuid finds the node
                    again if the create's reply was lost, Curator's trick), list the
                    contenders (names matching `__lock__` + 10 digits, plus any
                    `extra_lock_patterns`: `-lock-` makes it contend with Curator's nodes),
                    watch the next lower one with `exists`, wait; a timeout raises LockTimeout
                    and deletes the node. Retries ConnectionLoss and SessionExpired until the
                    deadline.
  release():        delete the node; a node already gone (NoNodeError: the session expired
                    and took it) is ignored, and release() returns True all the same.
  No fencing token, no renewal: the lock lives as long as the session, which the client
  keeps alive with pings. kazoo's own documentation asks the user to watch the connection
  state with add_listener(): SUSPENDED (the connection is lost; the session may live on),
  LOST (the session expired: the lock is certainly gone), CONNECTED (back, on the same
  session after SUSPENDED, or on a new one after LOST).

This adapter is that listener: LOST becomes a `lost` notice for every key held, and CONNECTED
after SUSPENDED on the same session a `renewed` notice with the session timeout (the server
restarted the session's timeout when the client came back); SUSPENDED alone says nothing
certain and is only logged.

acquire: Lock(<root>/<key>, identifier).acquire(timeout=wait_ms / 1000)
         -> ok with lease_ms = the time from the request to an `exists` of the lock's node,
            sent after the grant, plus the session timeout the servers grant: the one asked
            for (the workload's ttl) within their bounds (kazoo does not keep the negotiated
            one; lockaudit's servers grant 0.4-4 s, options `session_bounds_ms` for others).
            The servers keep the session a timeout past that request; a node gone by then
            (the session expired) is a `fail`.
release: lock.release()   (True: ok, as the library answers, even after a LOST)
A request that got no answer (connection lost, timed out) is `info`; one that certainly did
nothing (LockTimeout, NoNodeError) is `fail`.
Credentials: lockaudit's ensemble is the run's alone (its root znode's ACL is the run's digest
user's); `init` carries the run's password in each node, and the client authenticates as
digest user `lockaudit` (option `user`) and creates its znodes for that user alone
(`default_acl=CREATOR_ALL_ACL`), as a careful application does. Without a password in
`init` it connects unauthenticated, with kazoo's default (open) ACL.
Needs `pip install kazoo==2.11.0`.
"""

import json
import sys
import threading
import time

try:
    import kazoo
    from kazoo.client import KazooClient, KazooState
    from kazoo.exceptions import (
        ConnectionLoss,
        KazooException,
        LockTimeout,
        NoNodeError,
        SessionExpiredError,
    )
    from kazoo.security import CREATOR_ALL_ACL
    from kazoo.handlers.threading import KazooTimeoutError
except ImportError as e:  # reported on stderr; lockaudit shows the tail
    print(f"kazoo_adapter: cannot import kazoo ({e}); pip install kazoo==2.11.0", file=sys.stderr)
    sys.exit(1)

# Each key's lock folder (kazoo's own layout inside it).
ROOT = "/lockaudit/kazoo"

# A notice's lease is counted from when lockaudit reads the line, a little after the server
# restarted the session's timeout: this much shorter keeps it a lower bound.
NOTICE_MARGIN_MS = 50

_out = threading.Lock()


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def write(message):
    # Replies (main thread) and notices (kazoo's event thread) share stdout, a line at a time.
    with _out:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def reply(req_id, kind, **fields):
    write({"in_reply_to": req_id, "type": kind, **fields})


def unsupported(req):
    """Why this acquire asks for something kazoo's Lock cannot give, or None."""
    if req.get("mode", "exclusive") != "exclusive":
        return f"mode {req['mode']!r} is not supported: use kazoo's ReadLock/WriteLock"
    return None


class Session:
    """One KazooClient, started at the first acquire (the session timeout is the request's
    ttl), and the listener that turns its state changes into notices."""

    def __init__(self, init, options):
        nodes = init.get("nodes") or []
        if init.get("topology") != "zookeeper" or not nodes:
            raise ValueError(f"kazoo needs the zookeeper topology, not {init.get('topology')!r}")
        self.hosts = ",".join(f"{n['host']}:{n['port']}" for n in nodes)
        self.identifier = f"lockaudit-client-{init.get('client', 0)}"
        self.extra = tuple(options.get("extra_lock_patterns", ()))
        self.bounds = options.get("session_bounds_ms", [400, 4000])
        self.user = options.get("user", "lockaudit")
        self.password = nodes[0].get("password")
        self.client = None
        self.timeout_ms = None
        self.held = {}  # key -> Lock
        self.suspended = False

    def start(self, ttl_ms):
        if self.client is not None:
            return self.client
        low, high = self.bounds
        self.timeout_ms = min(max(ttl_ms, low), high)
        credentials = {}
        if self.password is not None:
            credentials = {
                "auth_data": [("digest", f"{self.user}:{self.password}")],
                "default_acl": CREATOR_ALL_ACL,
            }
        client = KazooClient(
            hosts=self.hosts,
            timeout=ttl_ms / 1000.0,
            # Reconnect for ever, quickly: a server kill must not end the client.
            connection_retry={"max_tries": -1, "delay": 0.05, "max_delay": 0.5},
            **credentials,
        )
        client.add_listener(self.listen)
        client.start(timeout=max(1.0, ttl_ms / 1000.0))
        self.client = client
        log(f"connected to {self.hosts}, session timeout {self.timeout_ms} ms")
        return client

    def listen(self, state):
        """kazoo's state listener (its event thread; must not block)."""
        log(f"session state {state} at {time.monotonic():.3f}")
        if state == KazooState.SUSPENDED:
            self.suspended = True
        elif state == KazooState.LOST:
            self.suspended = False
            for key in list(self.held):
                write({"type": "lost", "key": key, "error": "kazoo: session LOST"})
        elif state == KazooState.CONNECTED and self.suspended:
            self.suspended = False
            lease = max(0, self.timeout_ms - NOTICE_MARGIN_MS)
            for key in list(self.held):
                write({"type": "renewed", "key": key, "lease_ms": lease})
        return False  # stay registered


def main():
    session = None
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        rid = req.get("id")
        kind = req.get("type")
        try:
            if kind == "init":
                session = Session(req, req.get("options") or {})
                reply(
                    rid,
                    "init_ok",
                    name=f"kazoo {kazoo.__version__} Lock",
                    fencing=False,
                    reentrant=False,
                )
            elif kind == "acquire":
                why = unsupported(req)
                if why:
                    reply(rid, "error", error=why)
                    continue
                key = req["key"]
                # lockaudit counts lease_ms from its request, which came before this.
                began = time.monotonic()
                try:
                    client = session.start(int(req["ttl_ms"]))
                except KazooTimeoutError as e:
                    reply(rid, "fail", error=f"no session: {e}")
                    continue
                lock = client.Lock(f"{ROOT}/{key}", session.identifier, extra_lock_patterns=session.extra)
                wait_s = req.get("wait_ms", 0) / 1000.0
                try:
                    took = lock.acquire(blocking=wait_s > 0, timeout=wait_s or None)
                except LockTimeout as e:
                    reply(rid, "fail", error=f"LockTimeout: {e}")
                    continue
                if took:
                    # The servers keep a session a timeout past each request they answer:
                    # the lease counts from this one, sent after the grant, not from the
                    # call's start (acquire(timeout) can overrun its time when the
                    # connection breaks while it waits).
                    proof = time.monotonic()
                    try:
                        alive = client.exists(f"{lock.path}/{lock.node}") is not None
                    except KazooException:
                        alive = None
                    if alive is False:
                        try:
                            lock.release()
                        except KazooException:
                            pass
                        reply(rid, "fail", error="granted, but its node was gone (session expired)")
                        continue
                    session.held[key] = lock
                    if alive:
                        lease = int((proof - began) * 1000) + session.timeout_ms
                    else:
                        # Unproven (the check got no answer): the session from the start.
                        lease = session.timeout_ms
                    reply(rid, "ok", token=None, lease_ms=lease)
                else:
                    reply(rid, "fail", error="not acquired")
            elif kind == "release":
                lock = session.held.pop(req["key"], None)
                if lock is None:
                    reply(rid, "fail", error="not held by this client")
                    continue
                if lock.release():
                    reply(rid, "ok")
                else:
                    reply(rid, "fail", error="release: the lock was not held")
            else:
                reply(rid, "error", error=f"unsupported request type {kind!r}")
        except (NoNodeError, SessionExpiredError) as e:
            log(f"{kind} {req.get('key')}: {type(e).__name__}: {e}")
            reply(rid, "fail", error=f"{type(e).__name__}: {e}")
        except (ConnectionLoss, KazooTimeoutError, KazooException) as e:
            log(f"{kind} {req.get('key')}: {type(e).__name__}: {e}")
            reply(rid, "info", error=f"{type(e).__name__}: {e}")
        except (KeyError, TypeError, ValueError) as e:
            reply(rid, "error", error=f"bad request: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
