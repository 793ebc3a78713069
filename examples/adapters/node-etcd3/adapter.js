#!/usr/bin/env node
// A lockaudit adapter (docs/src/reference/protocol.md, version 1.4) for the npm package `etcd3`
// 1.1.2 (microsoft/etcd3, over @grpc/grpc-js and cockatiel), its `Lock` used the way an
// application uses it, on lockaudit's etcd topology (`init` names the three members; the
// run's password is root's).
//
// Install once:    npm ci --prefix examples/adapters/node-etcd3
// Run:             lockaudit adapter-test examples/adapters/node-etcd3/node-etcd3.toml
//
// What the library does (node_modules/etcd3/lib/lock.js, lease.js, connection-pool.js, 1.1.2):
//   lock.acquire(): a new Lease of `ttl` whole seconds (LeaseGrant), then one transaction: if
//                   the key's create revision is 0, put it (empty value) on that lease. If the
//                   key exists, it revokes its lease and rejects with EtcdLockFailedError at
//                   once: there is no waiting acquire ("rejecting if it's unable to").
//   lock.release(): revokes the lease, which deletes the key. A lease already gone ("requested
//                   lease not found") is swallowed: release() resolves as if it had released.
//   The lease keeps itself alive from its grant on (autoKeepAlive): one LeaseKeepAlive stream,
//   a keep-alive every ttl/3, the Go client's rhythm. Its events: `keepaliveSucceeded` with
//   each answer, `lost` when an answer says TTL 0 (expired or revoked), and `lost` when the
//   stream is re-opened more than 2 x ttl after the last answer (checked on Date.now()). A
//   stream that errs, or stays silent for ttl (a debounce timer), is closed and opened again
//   100 ms later, on a member picked at random (withConnection's shuffle): a silent member is
//   not marked failed, so the new stream may land on it again.
//   Unary calls go through cockatiel: a global retry (3 attempts, each on the next member of
//   a shuffle) of errors it deems recoverable (deadline, unavailable, cancelled, internal,
//   unknown), and per member a circuit breaker that opens for 5 s after 3 failures in a row.
//   "etcdserver: invalid auth token" (a restarted member forgot it) re-authenticates and
//   repeats the call.
//   No fencing token: acquire() keeps only `res.succeeded` of its transaction and resolves with
//   the Lock itself; the key's create revision (the put's revision) is thrown away.
//
// acquire -> client.lock(key).ttl(ceil(ttl_ms / 1000)).acquire(), once whatever wait_ms says
//            (the library has no waiting acquire; the workload keeps `wait` 0):
//            ok with valid_ms = ttl - the time since the lease was last granted or renewed
//            - margin (the lease keeps itself alive while the transaction runs): no earlier
//            than the acquire's start, the grant's answer less one call deadline, and the
//            sending of the last answered keep-alive; none left: lease_ms 0;
//            EtcdLockFailedError: fail; the lease never granted (its promise holds an error):
//            fail, nothing was written; any other error, from the transaction: info (it may
//            have been applied). After an error the adapter calls lock.release() as the
//            library's own lock.do() does, else the lease would be kept alive for ever and
//            hold the key if the transaction did apply.
// release -> lock.release(): ok; an error (the revoke got no answer): info.
// renew   -> error: the library keeps the lease alive by itself (its keep-alives are notices).
// Notices (the Lock's lease, `lock.lease`: private in the typings, the one handle on the
// lock's life an application has short of writing its own lock on client.lease(ttl)):
//   keepaliveSucceeded -> {"type":"renewed","key":K,"lease_ms":L}, once per answer (every
//                         ttl/3) while the lock is held: L = TTL*1000 - the time since that
//                         keep-alive went out (`keepaliveFired`) - margin (default 50 ms), so
//                         that the lease counted from lockaudit's read stays a lower bound
//                         even for an answer the adapter reads late (after a pause).
//   lost               -> {"type":"lost","key":K,"error":"<its error>"}, once per hold.
//   keepaliveFailed    -> logged (stderr) only: the library retries.
// Auth: Etcd3({ auth: { username: "root", password } }) with the run's password from `init`.
// Every unary call gets a deadline (option timeout_ms, default 1000, as the library's options
// document it): without one a call to a paused member waits for ever. Streams get none.
// Options: timeout_ms, notice_margin_ms, hosts ("all", the default: every member, as an
// application configures it; or a member's index, to give the client that member alone).
//
// What running it showed (etcd 3.4.23, 2026-11-29; docs/src/guide/ready-adapters.md):
// - a keep-alive stream on a paused member stays there (reopened on a random member after
//   ttl of silence, the same one again 1 time in 3): the lease runs out under a holder that is
//   never told, or told after the next holder has the key (nemesis/etcd-member-pause.toml);
// - after a client pause the `lost` comes 100 ms after the resume at the earliest, after the
//   holder's write; release() of the lost lease resolves;
// - acquire() resolves after a slow transaction without looking at its lease (answered
//   lease 0 when no keep-alive was answered since the grant);
// - the 2 x ttl check's `lost` carries "Lease We lost connection to etcd and our lease has
//   expired. is expired or revoked" (a message where the lease ID goes).
//
// The library issues no fencing token (init answers fencing false) and is not reentrant.

"use strict";

const readline = require("readline");

let Etcd3, EtcdLockFailedError, version;
try {
  const etcd3 = require("etcd3");
  Etcd3 = etcd3.Etcd3;
  EtcdLockFailedError = etcd3.EtcdLockFailedError;
  version = require("etcd3/package.json").version;
} catch (e) {
  process.stderr.write(
    `node-etcd3 adapter: cannot load etcd3 (${e.message}); run \`npm ci --prefix ${__dirname}\`\n`
  );
  process.exit(1);
}

function log(...parts) {
  process.stderr.write(`${new Date().toISOString()} ${parts.join(" ")}\n`);
}

// One JSON line, one write (process.stdout is synchronous for pipes on Linux).
function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

function reply(id, type, fields = {}) {
  emit({ in_reply_to: id, type, ...fields });
}

class BadRequest extends Error {}

let client = null;
let settings = { timeoutMs: 1000, marginMs: 50 };

function number(options, name, fallback) {
  const v = options[name];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
    throw new BadRequest(`option ${name} must be a number >= 0, got ${JSON.stringify(v)}`);
  }
  return v;
}

async function init(req) {
  const options = req.options || {};
  settings = {
    timeoutMs: number(options, "timeout_ms", 1000),
    marginMs: number(options, "notice_margin_ms", 50),
  };
  if (settings.timeoutMs < 1) throw new BadRequest("option timeout_ms must be at least 1");
  const nodes = req.nodes || [];
  if (req.topology !== "etcd") {
    throw new BadRequest(`the etcd3 client needs the etcd topology, not ${JSON.stringify(req.topology)}`);
  }
  if (nodes.length === 0) throw new BadRequest("init without nodes");
  let members = nodes;
  const which = options.hosts === undefined ? "all" : options.hosts;
  if (which !== "all") {
    if (!Number.isInteger(which) || which < 0 || which >= nodes.length) {
      throw new BadRequest(`option hosts must be "all" or a member's index below ${nodes.length}, got ${JSON.stringify(which)}`);
    }
    members = [nodes[which]];
  }
  const password = nodes[0].password;
  client = new Etcd3({
    hosts: members.map((n) => `${n.host}:${n.port}`),
    auth: password ? { username: options.user || "root", password } : undefined,
    // The deadline the library's own documentation shows, for calls that are not streams.
    defaultCallOptions: (context) =>
      context.isStream ? {} : { deadline: Date.now() + settings.timeoutMs },
  });
  // Authenticate and reach a member before the first lock request, as an application does at
  // its start: on a busy machine the first Authenticate (bcrypt) can outlast one deadline.
  // A cluster still unreachable after that is left to the first request.
  const deadline = Date.now() + 5000;
  for (;;) {
    try {
      await client.get("lockaudit-node-etcd3-ping").string();
      break;
    } catch (e) {
      if (Date.now() >= deadline) {
        log(`not connected at start (${describe(e)}): the first request tries again`);
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  log(`client over ${members.map((n) => `${n.host}:${n.port}`).join(", ")}`);
  return {
    name: `etcd3 ${version} (npm) Lock, ${members.length} member${members.length === 1 ? "" : "s"}`,
    fencing: false,
    reentrant: false,
  };
}

function describe(e) {
  // The library's errors keep Error's `name`; their class says what they are.
  const name = e && e.constructor && e.constructor.name !== "Error" ? e.constructor.name : (e && e.name) || "Error";
  const message = e && e.message ? e.message.replace(/^\w*Error: /, "") : String(e);
  return `${name}: ${message}`.split("\n")[0];
}

// ---------------------------------------------------------------------------------------
// Holds: key -> { lock, announced, ended, lostError }

const held = new Map();

// Subscribes to the lock's lease before acquire() so that no event is missed; notices go
// out only between the `ok` and the release (a notice must name a key the client holds).
function watch(key, lock, hold) {
  const lease = lock.lease;
  // When each keep-alive of the current stream went out (monotonic ms), oldest first. etcd's
  // leader renewed the lease after the request went out, so its lease runs at least TTL from
  // then: an answer read late (the adapter was paused with it in its socket) is announced
  // with what is left of that, not with a fresh TTL. Answers come in order, so the oldest
  // unanswered request is no later than the one answered. A new stream starts a new list
  // (an answer on the old one then finds none: announced with lease 0).
  const fired = [];
  lease.on("keepaliveEstablished", () => {
    fired.length = 0;
  });
  lease.on("keepaliveFired", () => {
    fired.push(performance.now());
  });
  lease.on("keepaliveSucceeded", (res) => {
    const sent = fired.shift();
    const ttlMs = Number(res.TTL) * 1000;
    if (sent !== undefined && sent > hold.renewedAt) {
      hold.renewedAt = sent;
      hold.ttlMs = ttlMs;
    }
    if (!hold.announced || hold.ended || hold.lostError) return;
    const left = sent === undefined ? 0 : ttlMs - (performance.now() - sent) - settings.marginMs;
    emit({ type: "renewed", key, lease_ms: Math.max(0, Math.floor(left)) });
  });
  lease.on("keepaliveFailed", (e) => {
    if (hold.announced && !hold.ended) log(`${key}: keep-alive failed: ${describe(e)} (the library retries)`);
  });
  lease.on("lost", (e) => {
    if (hold.lostError) return;
    hold.lostError = describe(e);
    if (hold.announced && !hold.ended) {
      log(`${key}: lost: ${hold.lostError}`);
      emit({ type: "lost", key, error: hold.lostError });
    }
  });
}

async function acquire(id, key, ttlMs) {
  if (held.has(key)) {
    return reply(id, "fail", { error: "already held by this client (not reentrant)" });
  }
  const ttl = Math.max(1, Math.ceil(ttlMs / 1000));
  const lock = client.lock(key).ttl(ttl);
  // renewedAt: no later than etcd last granted or renewed the lease (monotonic ms): first the
  // acquire's start (the grant went out after it), then each answered keep-alive's sending.
  const hold = { lock, announced: false, ended: false, lostError: null, renewedAt: performance.now(), ttlMs: ttl * 1000 };
  // acquire() creates the lease synchronously, then waits on its grant.
  const acquiring = lock.acquire();
  watch(key, lock, hold);
  // The grant that succeeded went out at most one deadline before its answer came (each
  // attempt has its own): etcd granted the lease no earlier, a later bound than the start
  // when the grant waited (on a paused member, or for a leader).
  lock.lease.leaseID.then((leaseId) => {
    if (!(leaseId instanceof Error)) {
      hold.renewedAt = Math.max(hold.renewedAt, performance.now() - settings.timeoutMs);
    }
  });
  try {
    await acquiring;
  } catch (e) {
    hold.ended = true;
    const granted = !((await lock.lease.leaseID) instanceof Error);
    // As lock.do() does: release after a failed acquire (revoke; it stops the keep-alive).
    if (!(e instanceof EtcdLockFailedError)) {
      await lock.release().catch((r) => log(`acquire ${key}: the release after the error failed: ${describe(r)}`));
    }
    const type = e instanceof EtcdLockFailedError || !granted ? "fail" : "info";
    if (!(e instanceof EtcdLockFailedError)) log(`acquire ${key}: ${type}: ${describe(e)}`);
    return reply(id, type, { error: describe(e) });
  }
  held.set(key, hold);
  // The lease keeps itself alive from its grant on, while the transaction runs: what is left
  // of it is counted from its last renewal, not from the request (a slow acquire, its calls
  // retried on another member, still holds a live lease). None left: lease 0.
  const left = Math.floor(hold.ttlMs - (performance.now() - hold.renewedAt) - settings.marginMs);
  reply(id, "ok", left > 0 ? { token: null, valid_ms: left } : { token: null, lease_ms: 0 });
  hold.announced = true;
  if (hold.lostError) {
    log(`${key}: lost before the ok was written: ${hold.lostError}`);
    emit({ type: "lost", key, error: hold.lostError });
  }
}

async function release(id, key) {
  const hold = held.get(key);
  if (!hold) return reply(id, "fail", { error: "not held by this client" });
  held.delete(key);
  hold.ended = true;
  try {
    await hold.lock.release();
  } catch (e) {
    log(`release ${key}: info: ${describe(e)}`);
    return reply(id, "info", { error: describe(e) });
  }
  if (hold.lostError) log(`release ${key}: resolved although the lease was lost (${hold.lostError})`);
  reply(id, "ok");
}

async function handle(req) {
  const id = req.id;
  const type = req.type;
  try {
    if (type === "init") return reply(id, "init_ok", await init(req));
    if (client === null) throw new BadRequest("the first request must be init");
    if (typeof req.key !== "string") throw new BadRequest("key must be a string");
    if (type === "acquire") {
      // Protocol 1.2: etcd3's Lock is neither shared nor fair; an exclusive, unfair lock in
      // its place would be judged as the wrong lock.
      if (req.mode !== undefined && req.mode !== "exclusive") {
        throw new BadRequest(`mode ${JSON.stringify(req.mode)} is not supported: etcd3's Lock has no shared mode`);
      }
      if (req.fair !== undefined && req.fair !== false) {
        throw new BadRequest(`fair ${JSON.stringify(req.fair)} is not supported: etcd3's Lock does not queue waiters`);
      }
      if (!Number.isInteger(req.ttl_ms) || req.ttl_ms < 0) throw new BadRequest("ttl_ms must be an integer >= 0");
      return await acquire(id, req.key, req.ttl_ms);
    }
    if (type === "release") return await release(id, req.key);
    if (type === "renew") {
      throw new BadRequest("renew is not supported: etcd3's lease keeps itself alive (its keep-alives are notices)");
    }
    throw new BadRequest(`unsupported request type ${JSON.stringify(type)}`);
  } catch (e) {
    if (e instanceof BadRequest) return reply(id, "error", { error: e.message });
    log(`${type} ${req.key}: unexpected: ${e.stack || e}`);
    return reply(id, "info", { error: describe(e) });
  }
}

// One request at a time, in order (notices are written whenever the library acts).
let queue = Promise.resolve();
const input = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
input.on("line", (line) => {
  if (!line.trim()) return;
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    log(`unparsable request: ${line}`);
    return;
  }
  queue = queue.then(() => handle(req));
});
input.on("close", () => {
  queue.then(() => process.exit(0));
});
