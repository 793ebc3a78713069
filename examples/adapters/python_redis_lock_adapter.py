#!/usr/bin/env python3
"""A lockaudit adapter (docs/src/reference/protocol.md, version 1.2) over python-redis-lock's
`redis_lock.Lock`, used the way an application uses it.

Install: `pip install python-redis-lock==4.0.1` (pulls in redis-py; tested with redis 8.1.0).

The library: one Redis server; the lock is the key `lock:<name>` set with `SET NX [EX]` to a
random id; release and extend are Lua scripts that compare the id first. Expiry and the
acquire timeout are whole seconds (the library calls int() on both).

Two modes, chosen by `adapter_options.mode`:

* `no-expiry` (the default, the library's default): `Lock(r, key)` with `expire=None`. The
  key never expires; acquire answers `"lease_ms": null`. A holder that dies leaves the lock
  taken for ever (the library documents `reset()` / `reset_all()` as the way out).
* `auto-renewal`: `Lock(r, key, expire=ttl s, auto_renewal=True)`. After a successful
  acquire the library starts a daemon thread that calls `extend()` every expire*2/3 s. The
  adapter observes that thread through a subclass whose `extend()` reports, when called from
  a thread other than the request loop:
    - success   -> notice `{"type":"renewed","key":K,"lease_ms":L}`
    - NotAcquired (the script found the key gone or someone else's)
                -> notice `{"type":"lost","key":K,"error":...}`; the exception is re-raised, so
                   the library's thread dies exactly as it would in an application.
    - any other error (connection lost, timeout) -> stderr only: the library's thread dies
      silently and the lock will expire, while the library still believes it holds it.
      Nothing is said on stdout because the library itself does not know the lock is lost.
  `L` is expire*1000 minus the time the extend call took (measured from before it was sent),
  since lockaudit counts a notice's lease from the moment it reads the line: the key was
  re-armed on the server no earlier than the moment the call was sent.
  No notice is written for a key once its release has begun (the hold ends at the release).

Requests:

  acquire: wait_ms == 0  -> lock.acquire(blocking=False)
           wait_ms >= 1s -> lock.acquire(blocking=True, timeout=wait_ms // 1000)
           (0 < wait_ms < 1s tries once: the library cannot wait less than a second)
           True -> ok, token null, lease_ms null (no-expiry) or expire*1000 (auto-renewal)
           False -> fail
  release: lock.release() -> ok; NotAcquired -> fail (a key this client does not hold is
           released through a Lock with a fresh id, so the library's script says no)
  renew:   lock.extend(expire) -> ok with lease_ms; NotAcquired -> fail.
           In no-expiry mode the script answers NotExpirable for a key we still own: that is
           `ok` with `lease_ms: null` (the lock is ours and never expires).

info vs fail: `fail` only when the library got a definite answer from Redis (SET NX refused,
the compare script said "not ours"). Any redis-py ConnectionError / TimeoutError (or OSError)
after the request may have gone out is `info`: the command may still take effect (a paused
server runs it when it resumes). For `fail` to mean "certainly not acquired", redis-py's own
retries are turned off by default (redis-py 8 retries a timed-out command up to 10 times, and
a retried `SET NX` whose first try landed comes back "not acquired" for a lock the client in
fact holds); `adapter_options.retries` sets another count, `-1` keeps redis-py's default.

Options (`adapter_options` in the workload): mode ("no-expiry" | "auto-renewal"),
socket_timeout (seconds, default 1.0), retries (default 0), sentinel_password.
Topologies: single and replicated use nodes[0] (the primary), sentinel asks the Sentinels for
the master, independent uses nodes[0] only (the library is a single-server lock).
"""

import json
import math
import sys
import threading
import time

try:
    import redis
    import redis_lock
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError
    from redis.retry import Retry
except ImportError as e:  # lockaudit shows the tail of stderr
    print(f"python_redis_lock_adapter: cannot import ({e}); "
          "pip install python-redis-lock==4.0.1", file=sys.stderr)
    sys.exit(1)

# stdout is shared by the request loop and the library's renewal threads: one line at a time.
_stdout_lock = threading.Lock()


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def send(obj):
    line = json.dumps(obj) + "\n"
    with _stdout_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def reply(req_id, kind, **fields):
    out = {"in_reply_to": req_id, "type": kind}
    out.update(fields)
    send(out)


class ObservedLock(redis_lock.Lock):
    """redis_lock.Lock whose renewals (extend() called by the library's own thread) are
    reported to lockaudit as notices. Calls from the request loop are left alone: their
    outcome goes into the reply."""

    def __init__(self, *args, audit_key, **kwargs):
        super().__init__(*args, **kwargs)
        self.audit_key = audit_key  # the key as lockaudit names it (the library adds "lock:")
        self.releasing = False      # set before release(): no notices after that

    def extend(self, expire=None):
        if threading.current_thread() is threading.main_thread():
            return super().extend(expire)
        started = time.monotonic()
        try:
            super().extend(expire)
        except redis_lock.NotAcquired as e:
            if not self.releasing:
                send({"type": "lost", "key": self.audit_key, "error": f"NotAcquired: {e}"})
            log(f"renewal thread: {self.audit_key}: NotAcquired: {e}")
            raise
        except Exception as e:
            log(f"renewal thread: {self.audit_key}: {type(e).__name__}: {e} "
                "(the library's renewal thread dies here; the key will expire)")
            raise
        took_ms = math.ceil((time.monotonic() - started) * 1000)
        lease_ms = max(0, int(self._expire) * 1000 - took_ms)
        if not self.releasing:
            send({"type": "renewed", "key": self.audit_key, "lease_ms": lease_ms})


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
        return sentinel.master_for(init["master_name"], password=password, **kwargs)
    if topology == "independent" and len(nodes) > 1:
        log("python-redis-lock is a single-server lock: using only the first of "
            f"{len(nodes)} masters")
    node = nodes[0]
    return redis.Redis(host=node["host"], port=node["port"], password=node.get("password"),
                       **kwargs)



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
    mode = "no-expiry"
    held = {}  # lockaudit key -> ObservedLock
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        rid = req.get("id")
        kind = req.get("type")
        try:
            if kind == "init":
                options = req.get("options") or {}
                mode = options.get("mode", "no-expiry")
                if mode not in ("no-expiry", "auto-renewal"):
                    reply(rid, "error", error=f"unknown mode {mode!r}: "
                          "use \"no-expiry\" or \"auto-renewal\"")
                    continue
                r = connect(req, options)
                reply(rid, "init_ok",
                      name=f"python-redis-lock {redis_lock.__version__} ({mode}), "
                           f"redis-py {redis.__version__}",
                      fencing=False, reentrant=False)
            elif kind == "acquire":
                why = unsupported(req, "python-redis-lock")
                if why:
                    reply(rid, "error", error=why)
                    continue
                key = req["key"]
                wait_ms = int(req.get("wait_ms", 0))
                if mode == "auto-renewal":
                    # The library keeps whole seconds (int(expire)); less than 1 s would
                    # mean "no expiry", which it refuses together with auto_renewal.
                    expire_s = max(1, int(req["ttl_ms"]) // 1000)
                    lock = ObservedLock(r, key, expire=expire_s, auto_renewal=True,
                                        audit_key=key)
                    lease_ms = expire_s * 1000
                else:
                    lock = ObservedLock(r, key, audit_key=key)
                    lease_ms = None
                if wait_ms >= 1000:
                    ok = lock.acquire(blocking=True, timeout=wait_ms // 1000)
                else:
                    ok = lock.acquire(blocking=False)
                if ok:
                    held[key] = lock
                    reply(rid, "ok", token=None, lease_ms=lease_ms)
                else:
                    reply(rid, "fail", error="not acquired (key taken)")
            elif kind == "release":
                key = req["key"]
                lock = held.pop(key, None)
                if lock is None:
                    # Nothing held here: let the library decide with a lock of a fresh id,
                    # as an application releasing a lock it does not own would.
                    lock = ObservedLock(r, key, audit_key=key)
                lock.releasing = True
                try:
                    lock.release()  # stops and joins the renewal thread first
                    reply(rid, "ok")
                except redis_lock.NotAcquired as e:
                    reply(rid, "fail", error=f"NotAcquired: {e}")
            elif kind == "renew":
                key = req["key"]
                lock = held.get(key)
                if lock is None:
                    reply(rid, "fail", error="not held by this client")
                    continue
                expire_s = max(1, int(req["ttl_ms"]) // 1000)
                try:
                    lock.extend(expire_s)
                    reply(rid, "ok", lease_ms=expire_s * 1000)
                except redis_lock.NotExpirable:
                    # Ours (the script compares the id first) and without expiry.
                    reply(rid, "ok", lease_ms=None)
                except redis_lock.NotAcquired as e:
                    held.pop(key, None)
                    reply(rid, "fail", error=f"NotAcquired: {e}")
            else:
                reply(rid, "error", error=f"unsupported request type {kind!r}")
        except (RedisConnectionError, RedisTimeoutError, OSError) as e:
            # The command may have reached the server and may still take effect.
            log(f"{kind} {req.get('key')}: {type(e).__name__}: {e}")
            reply(rid, "info", error=f"{type(e).__name__}: {e}")
        except (KeyError, TypeError, ValueError) as e:
            reply(rid, "error", error=f"bad request: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
