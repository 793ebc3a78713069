#!/usr/bin/env python3
"""A lockaudit adapter (docs/src/reference/protocol.md, version 1.4) over python-etcd3's lock (PyPI
etcd3==0.12.0, `etcd3.Lock`), used the way an application uses it, on lockaudit's etcd
topology (`init` names the etcd members; the run's password is root's).

What the library does (etcd3/locks.py, 0.12.0):
  acquire(timeout): grant a fresh lease of `ttl` whole seconds, then one transaction:
                    if create_revision(/locks/<name>) == 0, put /locks/<name> = a uuid1 of
                    this Lock object, attached to the lease; else get it. On failure it drops
                    the lease (never revoked: it lingers until its ttl) and, while `timeout`
                    lasts, watches the key once and tries again with another fresh lease.
  release():        transaction: if value(/locks/<name>) == our uuid, delete it. Returns
                    whether it did. The lease is not revoked.
  refresh():        one LeaseKeepAlive on the lease; returns etcd's answers as they are. A
                    lease that already expired answers TTL 0, and refresh() does not raise:
                    the caller has to look.
  No fencing token: the transaction's revision is thrown away (the code's own TODO says
  "save the created revision so we can check it later"). No renewal of its own either: the
  lock lives `ttl` seconds unless the user calls refresh().

acquire: client.lock(key, ttl=ceil(ttl_ms / 1000)).acquire(timeout=wait_ms / 1000)
         -> ok with lease_ms = the TTL etcd granted (lock.lease.ttl, whole seconds: etcd
            raises a shorter one to its minimum, 2 s with lockaudit's timing)
release: lock.release()   (False: fail)
renew:   lock.refresh()   (ok with the TTL etcd answered; TTL 0, the lease is gone: fail)
What else reading and running it showed (etcd 3.4, grpcio 1.85, tenacity 9):
  - with auth on a plaintext channel every call fails UNAUTHENTICATED unless the call
    credentials are dropped (see Connection.get: a known issue, worked around as users do);
  - it authenticates once, in the constructor, and never again: a member restarted since
    has forgotten the token (etcd keeps simple tokens in memory) and refuses every later
    call of that client ("invalid auth token");
  - acquire() of a TAKEN lock raises TypeError instead of returning False or waiting: its
    wait callback has tenacity's old signature, and today's tenacity calls it after every
    failed try, even with timeout 0. The transaction has then found the key taken and
    nothing is held: the adapter answers `fail`. A user's `with client.lock(...)` meets
    the same TypeError under contention; no acquire ever waits.

A request that got no answer (connection lost, timed out) is `info`; one etcd refused
outright (bad auth token, permission denied) is `fail`. One client talks to ONE member
(python-etcd3 0.12.0 takes a single host and port and does not fail over): client k uses
member k mod 3, unless options say `member = i`.
Option `type_error`: "fail" (the default) answers the TypeError of a taken lock `fail`, as
above, so that runs can go on; "error" answers it `error`, quoting it, as the library's own
crash: lockaudit then stops the run (exit 3) and its message names the TypeError
(examples/bugs/python-etcd3-typeerror.toml).
Needs `pip install etcd3==0.12.0`.
"""

import json
import math
import os
import sys
import time

# etcd3 0.12.0's generated protobuf modules predate protoc 3.19: with protobuf >= 4 their
# import fails ("Descriptors cannot be created directly") unless protobuf uses its pure-Python
# implementation. Set before the import, and only if the environment says nothing.
os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

try:
    import grpc
    import etcd3
    from etcd3 import exceptions as etcd_exceptions
except ImportError as e:  # reported on stderr; lockaudit shows the tail
    print(
        f"python_etcd3_adapter: cannot import etcd3 ({e}); pip install etcd3==0.12.0",
        file=sys.stderr,
    )
    sys.exit(1)

# gRPC codes with which etcd refuses a request before doing anything: the outcome is known.
REFUSED = {
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.INVALID_ARGUMENT,
}


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def reply(req_id, kind, **fields):
    out = {"in_reply_to": req_id, "type": kind}
    out.update(fields)
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


def unsupported(req):
    """Why this acquire asks for something python-etcd3's Lock cannot give (protocol 1.2), or
    None: answered with `error`, never with an exclusive or unfair lock instead."""
    if req.get("mode", "exclusive") != "exclusive":
        return f"mode {req['mode']!r} is not supported: python-etcd3's Lock has no shared mode"
    if req.get("fair", False) is not False:
        return f"fair {req['fair']!r} is not supported: python-etcd3's Lock does not queue waiters"
    return None


class Connection:
    """One etcd3 client to one member, made at init (the constructor authenticates), or on
    first use if the member did not answer by then: a member that is down at init (a
    restarted adapter during a member kill) must not stop the run; the request that finds
    it down fails (nothing was sent)."""

    def __init__(self, init, options):
        nodes = init.get("nodes") or []
        if init.get("topology") != "etcd" or not nodes:
            raise ValueError(
                f"python-etcd3 needs the etcd topology, not {init.get('topology')!r}"
            )
        index = int(options.get("member", init.get("client", 0))) % len(nodes)
        self.node = nodes[index]
        self.user = options.get("user", "root")
        self.password = self.node.get("password")
        self.timeout = float(options.get("timeout", 1.0))
        self.type_error = options.get("type_error", "fail")
        if self.type_error not in ("fail", "error"):
            raise ValueError(f"option type_error must be \"fail\" or \"error\", not {self.type_error!r}")
        self.client = None

    def connect_at_start(self, patience):
        """Makes the client before any lock request, as an application does at its start:
        tries for up to `patience` seconds, because on a busy machine a member can take
        longer than one call's timeout to answer the first Authenticate (every first
        acquire of a run once failed so, and counted against the lock). A member still
        down by then is left to the first request, as before."""
        deadline = time.monotonic() + patience
        while True:
            try:
                return self.get()
            except (etcd_exceptions.Etcd3Exception, grpc.RpcError) as e:
                if time.monotonic() >= deadline:
                    log(f"not connected at start ({describe(e)}): the first request tries again")
                    return None
                time.sleep(0.1)

    def get(self):
        if self.client is None:
            self.client = etcd3.client(
                host=self.node["host"],
                port=self.node["port"],
                user=self.user if self.password is not None else None,
                password=self.password,
                timeout=self.timeout,
            )
            # python-etcd3 0.12.0 sends its auth token twice: as call credentials and as
            # metadata. gRPC >= 1.45 refuses call credentials on a plaintext channel
            # ("Established channel does not have a sufficient security level to transfer
            # call credential", kragniz/python-etcd3#1876, #2713), so with auth and no TLS
            # every call fails UNAUTHENTICATED. The workaround its users apply: drop the call
            # credentials; the metadata still carries the token. The lock is untouched.
            self.client.call_credentials = None
            self.client.watcher._credentials = None
            log(f"connected to {self.node['host']}:{self.node['port']} as {self.user}")
        return self.client


def tenacity_version():
    try:
        from importlib.metadata import version

        return version("tenacity")
    except Exception:  # noqa: BLE001 (only for a message)
        return "?"


def describe(e):
    """One line for an error: a gRPC error by its code and etcd's message."""
    if isinstance(e, grpc.RpcError) and hasattr(e, "code"):
        return f"gRPC {e.code().name}: {e.details()}"
    return f"{type(e).__name__}: {e}".splitlines()[0]


def outcome(e):
    """`fail` when etcd certainly refused the request, else `info` (the outcome is unknown)."""
    code = e.code() if isinstance(e, grpc.RpcError) and hasattr(e, "code") else None
    return "fail" if code in REFUSED else "info"


def main():
    conn = None
    held = {}  # key -> etcd3.Lock
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        rid = req.get("id")
        kind = req.get("type")
        try:
            if kind == "init":
                conn = Connection(req, req.get("options") or {})
                # Within lockaudit's init timeout (10 s here, interpreter start included).
                conn.connect_at_start(patience=5.0)
                reply(
                    rid,
                    "init_ok",
                    name=f"python-etcd3 {etcd3.__version__} etcd3.Lock",
                    fencing=False,
                    reentrant=False,
                )
            elif kind == "acquire":
                why = unsupported(req)
                if why:
                    reply(rid, "error", error=why)
                    continue
                key = req["key"]
                # The library's ttl is whole seconds (LeaseGrantRequest.TTL is an integer).
                ttl_s = max(1, math.ceil(req["ttl_ms"] / 1000))
                try:
                    client = conn.get()
                except (etcd_exceptions.Etcd3Exception, grpc.RpcError) as e:
                    # The constructor's Authenticate failed: no lock request went out.
                    reply(rid, "fail", error=f"cannot connect: {describe(e)}")
                    continue
                lock = client.lock(key, ttl=ttl_s)
                try:
                    took = lock.acquire(timeout=req.get("wait_ms", 0) / 1000.0)
                except TypeError as e:
                    if "delay_since_first_attempt" not in str(e):
                        raise
                    # The transaction found the key taken (the only way to its wait callback,
                    # which has tenacity's pre-8 signature and raises under today's tenacity,
                    # which calls it even with timeout 0): not acquired, nothing held.
                    log(f"acquire {key}: taken; the library raised TypeError: {e}")
                    if conn.type_error == "error":
                        reply(rid, "error", error=f"the library crashed: acquire(timeout="
                              f"{req.get('wait_ms', 0) / 1000.0}) of a taken lock raised "
                              f"TypeError: {e} (tenacity {tenacity_version()})")
                        continue
                    reply(rid, "fail", error=f"taken (the library raised TypeError under "
                          f"tenacity {tenacity_version()})")
                    continue
                if took:
                    held[key] = lock
                    reply(rid, "ok", token=None, lease_ms=int(lock.lease.ttl) * 1000)
                else:
                    reply(rid, "fail", error="not acquired")
            elif kind == "release":
                lock = held.pop(req["key"], None)
                if lock is None:
                    reply(rid, "fail", error="not held by this client")
                    continue
                if lock.release():
                    reply(rid, "ok")
                else:
                    reply(rid, "fail", error="release found the key not ours")
            elif kind == "renew":
                lock = held.get(req["key"])
                if lock is None:
                    reply(rid, "fail", error="not held by this client")
                    continue
                answers = lock.refresh()
                ttl = answers[0].TTL if answers else 0
                if ttl > 0:
                    reply(rid, "ok", lease_ms=int(ttl) * 1000)
                else:
                    held.pop(req["key"], None)
                    reply(rid, "fail", error=f"the lease is gone (keep-alive answered TTL {ttl})")
            else:
                reply(rid, "error", error=f"unsupported request type {kind!r}")
        except (etcd_exceptions.Etcd3Exception, grpc.RpcError) as e:
            text = describe(e)
            log(f"{kind} {req.get('key')}: {text}")
            reply(rid, outcome(e), error=text)
        except (KeyError, TypeError, ValueError) as e:
            reply(rid, "error", error=f"bad request: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
