#!/usr/bin/env python3
"""A lockaudit adapter (docs/src/reference/protocol.md, version 1.2) over pottery's `Redlock`, the Redlock
algorithm (redis.io/topics/distlock) as pottery implements it, used the way an application
uses it.

Install: `pip install pottery==3.0.1` (pulls in redis-py and mmh3; tested with redis 8.1.0).

The library: `Redlock(key=K, masters={clients}, auto_release_time=ttl s)` writes
`SET redlock:K <uuid4> NX PX ttl` on every master in parallel and returns True as soon as a
majority (N//2 + 1) said yes while the validity ttl - drift - elapsed is still positive
(drift = 1% of ttl + 2 ms). Otherwise it releases what it took and returns False. Errors of
single masters are logged, not raised (raise_on_redis_errors=False, the default).

Mapping:

  acquire: a fresh Redlock per acquire (acquiring the same object again would replace its
           uuid and orphan the old hold).
           wait_ms == 0 -> redlock.acquire(blocking=False)
           wait_ms > 0  -> redlock.acquire(blocking=True, timeout=wait_ms / 1000)
           True -> ok, token null, `valid_ms` = redlock.locked() * 1000, read right after
           False -> fail, or info (see below)
  release: redlock.release() -> ok; ReleaseUnlockedLock -> fail (a key this client does not
           hold is released through a fresh Redlock, whose uuid matches nothing)
  renew:   redlock.auto_release_time = ttl_ms / 1000; redlock.extend() -> ok with `valid_ms`
           from locked(); ExtendUnlockedLock -> fail.
           TooManyExtensions (pottery allows num_extensions = 3 extensions per acquire by
           default; `adapter_options.num_extensions` changes it) extends nothing but does not
           mean the lock is lost: the reply is `ok` with the validity still left (locked()),
           so the lease stays where it was; `fail` only if locked() finds the lock gone.
  notices: none. pottery renews nothing by itself and never finds out on its own that a
           lock was lost.

Why `valid_ms` and not `lease_ms`: pottery's acquire computes the Redlock validity
(ttl - drift - elapsed) but throws it away; its public answer to "how long do I still hold
this lock" is `locked()`, which asks every master for the key's PTTL (only if the value is
our uuid) and returns the smallest PTTL of a majority minus the drift and minus the time the
question took, in seconds. That is exactly protocol 1.1's `valid_ms`: the validity the
library reports as remaining when the reply is written; lockaudit adds the time since the
request. It is also more faithful than a fixed `lease_ms = ttl`: it follows each server's
own expiry (a master whose clock jumped, a master that restarted empty and lost the key),
and a lock that ran out while the client was paused between the quorum and the reply comes
back with `valid_ms: 0`, which is what the library would tell the application.
If locked() cannot reach a majority because of Redis errors, the acquire's own promise is
sent instead: `lease_ms` = ttl - drift, counted from the request (the SETs went out after
it, with PX = ttl).

info vs fail: pottery swallows the errors of single masters, so the adapter listens to the
`pottery` logger (which logs each swallowed RedisError) during each call. An acquire that
returned False after any Redis error is `info`: a SET whose reply was lost may have landed
(a paused master runs it when it resumes) and pottery's clean-up release may have failed
too. A release or extend refused with Redis errors among the masters is `info` likewise;
refused with every master answering, `fail`. redis-py's own retries are off by default
(redis-py 8 retries a timed-out command up to 10 times; a retried `SET NX` whose first try
landed answers "not set"); `adapter_options.retries` sets another count, `-1` keeps
redis-py's default.

Options (`adapter_options`): socket_timeout (seconds, default 1.0), retries (default 0),
num_extensions (default: pottery's, 3), sentinel_password.
Topologies: independent uses every node as a master (Redlock's deployment); single and
replicated use nodes[0] (the primary) as the only master; sentinel asks the Sentinels.
"""

import json
import logging
import math
import sys
from importlib import metadata

try:
    import redis
    from pottery import Redlock
    from pottery.exceptions import (
        ExtendUnlockedLock,
        ReleaseUnlockedLock,
        TooManyExtensions,
    )
    from redis.backoff import NoBackoff
    from redis.exceptions import RedisError
    from redis.retry import Retry
except ImportError as e:  # lockaudit shows the tail of stderr
    print(f"pottery_redlock_adapter: cannot import ({e}); pip install pottery==3.0.1",
          file=sys.stderr)
    sys.exit(1)


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def reply(req_id, kind, **fields):
    out = {"in_reply_to": req_id, "type": kind}
    out.update(fields)
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


class SwallowedErrors(logging.Handler):
    """Collects the RedisErrors pottery catches and logs (logger.exception) instead of
    raising. Cleared before each library call; read after it."""

    def __init__(self):
        super().__init__(level=logging.ERROR)
        self.seen = []

    def emit(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, RedisError):
            self.seen.append(exc)
            log(f"pottery swallowed {type(exc).__name__}: {exc}")


def drift_s(ttl_s):
    # Redlock's clock drift allowance, as pottery computes it.
    return ttl_s * Redlock._CLOCK_DRIFT_FACTOR + 0.002


def connect(init, options):
    socket_timeout = float(options.get("socket_timeout", 1.0))
    retries = int(options.get("retries", 0))
    kwargs = {"socket_timeout": socket_timeout, "socket_connect_timeout": socket_timeout}
    if retries >= 0:
        kwargs["retry"] = Retry(NoBackoff(), retries)
    topology = init.get("topology")
    nodes = init.get("nodes") or []
    if topology == "sentinel":
        from redis.sentinel import Sentinel

        password = nodes[0].get("password") if nodes else None
        sentinel = Sentinel(
            [(s["host"], s["port"]) for s in init["sentinels"]],
            socket_timeout=socket_timeout,
            sentinel_kwargs={"password": options.get("sentinel_password", password),
                             "socket_timeout": socket_timeout},
        )
        return [sentinel.master_for(init["master_name"], password=password, **kwargs)]
    if topology != "independent":
        nodes = nodes[:1]  # replicas are not Redlock masters
    return [redis.Redis(host=n["host"], port=n["port"], password=n.get("password"), **kwargs)
            for n in nodes]



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
    errors = SwallowedErrors()
    logging.getLogger("pottery").addHandler(errors)
    masters = []
    num_extensions = Redlock._NUM_EXTENSIONS
    held = {}  # lockaudit key -> Redlock

    def validity_reply(rid, lock, ttl_s):
        """ok with what locked() reports as left; None if it could not tell (errors)."""
        errors.seen.clear()
        left = lock.locked()
        if left > 0 or not errors.seen:
            reply(rid, "ok", token=None, valid_ms=math.floor(left * 1000))
        else:
            lease = math.floor((ttl_s - drift_s(ttl_s)) * 1000)
            reply(rid, "ok", token=None, lease_ms=max(0, lease))

    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        rid = req.get("id")
        kind = req.get("type")
        try:
            if kind == "init":
                options = req.get("options") or {}
                num_extensions = int(options.get("num_extensions", num_extensions))
                masters = connect(req, options)
                reply(rid, "init_ok",
                      name=f"pottery {metadata.version('pottery')} Redlock "
                           f"({len(masters)} master{'s' if len(masters) != 1 else ''}), "
                           f"redis-py {redis.__version__}",
                      fencing=False, reentrant=False)
            elif kind == "acquire":
                why = unsupported(req, "pottery's Redlock")
                if why:
                    reply(rid, "error", error=why)
                    continue
                key = req["key"]
                ttl_s = int(req["ttl_ms"]) / 1000.0
                wait_ms = int(req.get("wait_ms", 0))
                lock = Redlock(key=key, masters=masters, auto_release_time=ttl_s,
                               num_extensions=num_extensions)
                errors.seen.clear()
                if wait_ms > 0:
                    ok = lock.acquire(blocking=True, timeout=wait_ms / 1000.0)
                else:
                    ok = lock.acquire(blocking=False)
                if ok:
                    held[key] = lock
                    validity_reply(rid, lock, ttl_s)
                elif errors.seen:
                    reply(rid, "info", error=f"not acquired, after {len(errors.seen)} Redis "
                          f"error(s): {type(errors.seen[-1]).__name__}: {errors.seen[-1]}")
                else:
                    reply(rid, "fail", error="not acquired (no majority)")
            elif kind == "release":
                key = req["key"]
                lock = held.pop(key, None)
                if lock is None:
                    lock = Redlock(key=key, masters=masters)  # a uuid that matches nothing
                try:
                    lock.release()
                    reply(rid, "ok")
                except ReleaseUnlockedLock as e:
                    if e.redis_errors:
                        reply(rid, "info", error=f"ReleaseUnlockedLock with Redis errors: "
                              f"{list(map(repr, e.redis_errors))}")
                    else:
                        reply(rid, "fail", error="ReleaseUnlockedLock")
            elif kind == "renew":
                key = req["key"]
                lock = held.get(key)
                if lock is None:
                    reply(rid, "fail", error="not held by this client")
                    continue
                ttl_s = int(req["ttl_ms"]) / 1000.0
                lock.auto_release_time = ttl_s
                try:
                    lock.extend()
                    validity_reply(rid, lock, ttl_s)
                except TooManyExtensions:
                    # Not extended, but still ours: report what is left of the lease.
                    errors.seen.clear()
                    left = lock.locked()
                    if left > 0:
                        reply(rid, "ok", token=None, valid_ms=math.floor(left * 1000),
                              note="TooManyExtensions: not extended")
                    elif errors.seen:
                        reply(rid, "info", error="TooManyExtensions, then Redis errors")
                    else:
                        held.pop(key, None)
                        reply(rid, "fail", error="TooManyExtensions, and the lock is gone")
                except ExtendUnlockedLock as e:
                    if e.redis_errors:
                        reply(rid, "info", error=f"ExtendUnlockedLock with Redis errors: "
                              f"{list(map(repr, e.redis_errors))}")
                    else:
                        held.pop(key, None)
                        reply(rid, "fail", error="ExtendUnlockedLock")
            else:
                reply(rid, "error", error=f"unsupported request type {kind!r}")
        except (RedisError, OSError) as e:
            log(f"{kind} {req.get('key')}: {type(e).__name__}: {e}")
            reply(rid, "info", error=f"{type(e).__name__}: {e}")
        except (KeyError, TypeError, ValueError) as e:
            reply(rid, "error", error=f"bad request: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
