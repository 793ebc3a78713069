#!/usr/bin/env python3
"""A lockaudit adapter (docs/src/reference/protocol.md, version 1.2) over redis-py's own lock,
`redis.lock.Lock`, used the way an application uses it.

acquire: Lock(r, key, timeout=ttl s, blocking=wait_ms > 0, blocking_timeout=wait s).acquire()
release: lock.release()   (LockNotOwnedError / LockError: fail)
renew:   lock.extend(ttl s, replace_ttl=True)   (LockNotOwnedError: fail)
Connection trouble and timeouts after the request went out are `info`; redis-py's Lock
issues no fencing tokens (token null). Needs `pip install redis`.
"""

import json
import sys

try:
    import redis
    from redis.exceptions import (
        ConnectionError as RedisConnectionError,
        LockError,
        LockNotOwnedError,
        TimeoutError as RedisTimeoutError,
    )
except ImportError as e:  # reported on stderr; lockaudit shows the tail
    print(f"redis_py_lock: cannot import redis-py ({e}); pip install redis", file=sys.stderr)
    sys.exit(1)


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def reply(req_id, kind, **fields):
    out = {"in_reply_to": req_id, "type": kind}
    out.update(fields)
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


def connect(init, options):
    socket_timeout = float(options.get("socket_timeout", 1.0))
    if init.get("topology") == "sentinel":
        from redis.sentinel import Sentinel

        sentinels = [(s["host"], s["port"]) for s in init["sentinels"]]
        password = init["nodes"][0].get("password") if init.get("nodes") else None
        # lockaudit's sentinels share the data nodes' password (options can say otherwise).
        sentinel_password = options.get("sentinel_password", password)
        sentinel = Sentinel(
            sentinels,
            socket_timeout=socket_timeout,
            sentinel_kwargs={"password": sentinel_password, "socket_timeout": socket_timeout},
        )
        return sentinel.master_for(
            init["master_name"], password=password, socket_timeout=socket_timeout
        )
    if init.get("topology") == "cluster":
        # protocol 1.3: a Redis Cluster; redis-py's cluster client routes by slot and
        # follows MOVED / ASK after a failover.
        from redis.cluster import ClusterNode, RedisCluster

        nodes = init["nodes"]
        return RedisCluster(
            startup_nodes=[ClusterNode(n["host"], n["port"]) for n in nodes],
            password=nodes[0].get("password"),
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_timeout,
        )
    node = init["nodes"][0]
    return redis.Redis(
        host=node["host"],
        port=node["port"],
        password=node.get("password"),
        socket_timeout=socket_timeout,
        socket_connect_timeout=socket_timeout,
    )



def unsupported(req, library):
    """Why this acquire asks for something the library cannot give (protocol 1.2: `mode`
    "shared", `fair` true), or None. Such a request gets `error`: taking an exclusive or an
    unfair lock instead would make the audit judge the wrong lock."""
    if req.get("mode", "exclusive") != "exclusive":
        return f"mode {req['mode']!r} is not supported: {library} has no shared mode"
    if req.get("fair", False) is not False:
        return f"fair {req['fair']!r} is not supported: {library} does not grant in arrival order"
    return None


def main():
    r = None
    held = {}  # key -> Lock
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        rid = req.get("id")
        kind = req.get("type")
        try:
            if kind == "init":
                r = connect(req, req.get("options") or {})
                reply(rid, "init_ok", name=f"redis-py {redis.__version__} redis.lock.Lock",
                      fencing=False, reentrant=False)
            elif kind == "acquire":
                why = unsupported(req, "redis-py's Lock")
                if why:
                    reply(rid, "error", error=why)
                    continue
                key = req["key"]
                ttl_s = req["ttl_ms"] / 1000.0
                wait_ms = req.get("wait_ms", 0)
                lock = r.lock(
                    key,
                    timeout=ttl_s,
                    blocking=wait_ms > 0,
                    blocking_timeout=(wait_ms / 1000.0) if wait_ms > 0 else None,
                    thread_local=False,
                )
                if lock.acquire():
                    held[key] = lock
                    reply(rid, "ok", token=None, lease_ms=req["ttl_ms"])
                else:
                    reply(rid, "fail", error="not acquired")
            elif kind == "release":
                lock = held.pop(req["key"], None)
                if lock is None:
                    reply(rid, "fail", error="not held by this client")
                    continue
                try:
                    lock.release()
                    reply(rid, "ok")
                except LockNotOwnedError as e:
                    reply(rid, "fail", error=f"LockNotOwnedError: {e}")
                except LockError as e:
                    reply(rid, "fail", error=f"LockError: {e}")
            elif kind == "renew":
                lock = held.get(req["key"])
                if lock is None:
                    reply(rid, "fail", error="not held by this client")
                    continue
                try:
                    lock.extend(req["ttl_ms"] / 1000.0, replace_ttl=True)
                    reply(rid, "ok", lease_ms=req["ttl_ms"])
                except LockNotOwnedError as e:
                    held.pop(req["key"], None)
                    reply(rid, "fail", error=f"LockNotOwnedError: {e}")
                except LockError as e:
                    reply(rid, "fail", error=f"LockError: {e}")
            else:
                reply(rid, "error", error=f"unsupported request type {kind!r}")
        except (RedisConnectionError, RedisTimeoutError, OSError) as e:
            log(f"{kind} {req.get('key')}: {type(e).__name__}: {e}")
            reply(rid, "info", error=f"{type(e).__name__}: {e}")
        except (KeyError, TypeError, ValueError) as e:
            reply(rid, "error", error=f"bad request: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
