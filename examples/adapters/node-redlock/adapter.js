#!/usr/bin/env node
// A lockaudit adapter (docs/src/reference/protocol.md, version 1.2) for node-redlock: the npm package
// `redlock` 5.0.0-beta.2 over `ioredis`, used the way an application uses it.
//
// Install once, in this folder:   npm ci
// Run through a workload:         lockaudit run examples/adapters/node-redlock/node-redlock.toml
//
// Two modes, chosen by the workload's `adapter_options = { mode = "..." }`:
//
// mode = "plain" (the default): the application calls the library step by step.
//   acquire -> redlock.acquire([key], ttl_ms, { retryCount, retryDelay, retryJitter })
//              retryCount is 0 when wait_ms is 0 (one attempt); otherwise as many retries as
//              fit in wait_ms at the worst-case delay (retryDelay + retryJitter).
//              Reply `ok` with `valid_ms` = lock.expiration - Date.now(): what the library
//              itself believes is left of the lock when the reply is written.
//   renew   -> lock.extend(ttl_ms), reply `ok` with the new lock's `valid_ms`.
//   release -> lock.release().
//
// mode = "using": the lock is held inside redlock.using(), which extends it by itself.
//   acquire -> redlock.using([key], ttl_ms, settings, routine). The routine replies `ok`
//              (with `valid_ms`) as soon as it starts, then waits on a promise that the
//              `release` request resolves. While it waits, using() extends the lock
//              automaticExtensionThreshold ms before the library's expiration; after each
//              extension the adapter writes the notice
//                {"type":"renewed","key":K,"lease_ms":lock.expiration - Date.now()}
//              and when using() gives up (its AbortSignal fires: the extension failed and
//              the lock expired by the library's clock)
//                {"type":"lost","key":K,"error":"<signal.error's name>: <its message>"}
//   release -> resolve the routine; using() then waits for an extension in flight and
//              calls lock.release() itself; the reply follows using()'s outcome.
//   renew   -> `error`: using() owns the lock's renewals (a manual extend would hand the
//              library's internal Lock a zero expiration and make using() abort).
//
// How the automatic extensions are observed. using() keeps its current Lock in a closure
// variable and extends it with `lock = await lock.extend(duration)`; Lock.extend calls
// `this.redlock.extend(this, duration)`. The adapter shadows `acquire` and `extend` on its
// own Redlock instance with thin wrappers that call the library's methods unchanged and
// only look at their results: the acquire wrapper learns the Lock that using() starts with,
// the extend wrapper sees each replacement Lock the moment the library has it (before
// using() itself resumes) and writes the `renewed` notice. Nothing is polled, and the
// library's timing is untouched.
//
// Topologies: `single` and `replicated` lock on nodes[0] (the primary) alone: a Redlock of
// one master, quorum 1. `independent` passes every node to Redlock as a master (the real
// Redlock, quorum N/2+1). `sentinel` is not supported: init answers `error`.
//
// info versus fail. The library answers a failed operation with one ExecutionError whose
// `attempts` hold, per attempt, every server's vote; the adapter waits for all the votes
// (each is bounded by ioredis's commandTimeout) and sorts each server's answer:
//   for                 the script ran and did its work there;
//   ResourceLockedError the script ran and refused (the key is someone else's, or gone);
//   not sent            ioredis refused to write the command (no connection and no offline
//                       queue: "Stream isn't writeable ..."), or Redis answered an error
//                       (ReplyError: LOADING, READONLY, ...): the script never ran;
//   unknown             the command went out and no answer came back (commandTimeout,
//                       connection lost under it, MaxRetriesPerRequestError): it may have
//                       run, now or later.
//   acquire: `fail` when fewer than a quorum of servers can hold our value (the ones that
//            voted for in any attempt, plus the unknown ones): even without the library's
//            clean-up release we cannot hold the lock. Otherwise `info`.
//   release, renew: `fail` when a quorum of servers answered ResourceLockedError, i.e. the
//            library saw for itself that the lock is no longer ours on a majority; also a
//            renew of a lock the library already deems expired ("Cannot extend an
//            already-expired lock": nothing is sent). Otherwise `info`.
//   Anything else thrown by the library is `info`, except argument errors (`error`).
// ioredis is set so that faults turn into errors quickly: short connect and command
// timeouts, no offline queue, no retry or resend of commands across a reconnect.
//
// What the library does, read from its source (dist/cjs/index.js), that an audit shows:
// - Validity is wall-clock arithmetic: acquire() and extend() take `start = Date.now()` and
//   set expiration = start + ttl - (round(driftFactor * ttl) + 2). A clock step during the
//   call moves the validity by the step (a step back: more than the ttl; a step forward:
//   already spent). extend() first refuses a lock whose expiration < Date.now(), so a
//   forward step makes using() drop a lock that still has its whole validity.
// - acquire() takes `start` once, before the first attempt, and returns whatever attempt
//   reaches a quorum without checking that validity is left (Redlock's algorithm says to
//   give up and unlock then); its retries meet their own keys from earlier partial attempts
//   (the acquire script refuses any existing key), and only a final failure cleans up.
// - using() retries a failed extension at once, without delay, until its expiration passes;
//   while the masters refuse at once (down, no offline queue) that is a hot loop of
//   rejected promises that keeps node's event loop from reading stdin until the lock expires.
//
// The library issues no fencing tokens (token null) and is not reentrant. Everything on
// stdout is one JSON object per line, written with one write() each (process.stdout is
// synchronous for pipes on Linux, so a line is never interleaved or split). Diagnostics go
// to stderr, which lockaudit keeps as the client's log.

"use strict";

const readline = require("readline");

let Redis, Redlock, ExecutionError, ResourceLockedError, ReplyError, versions;
try {
  Redis = require("ioredis");
  ReplyError = Redis.ReplyError;
  const redlockModule = require("redlock");
  Redlock = redlockModule.default;
  ExecutionError = redlockModule.ExecutionError;
  ResourceLockedError = redlockModule.ResourceLockedError;
  // redlock's package.json is not exported: read it from the folder of its entry point.
  const path = require("path");
  const fs = require("fs");
  const manifest = (name) => {
    let dir = path.dirname(require.resolve(name));
    while (!fs.existsSync(path.join(dir, "package.json")) || path.basename(dir) !== name) {
      const up = path.dirname(dir);
      if (up === dir) return { version: "?" };
      dir = up;
    }
    return JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
  };
  versions = {
    redlock: manifest("redlock").version.replace(/^v/, ""),
    ioredis: manifest("ioredis").version,
  };
} catch (e) {
  process.stderr.write(
    `node-redlock adapter: cannot load redlock/ioredis (${e.message}); run \`npm ci\` in ${__dirname}\n`
  );
  process.exit(1);
}

function log(...parts) {
  process.stderr.write(`${new Date().toISOString()} ${parts.join(" ")}\n`);
}

// One JSON line, one write.
function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

function reply(id, type, fields = {}) {
  emit({ in_reply_to: id, type, ...fields });
}

// What the library believes is left of a lock, as the protocol wants it: `valid_ms` (>= 0)
// for a reply. A lock the library hands out already expired by its own clock (possible: see
// `acquire` below) is answered with `lease_ms: 0`, "no validity at all", since the protocol
// has no negative validity.
function validity(lock) {
  const left = lock.expiration - Date.now();
  return left >= 0 ? { valid_ms: left } : { lease_ms: 0 };
}

class BadRequest extends Error {}

// ---------------------------------------------------------------------------------------
// Settings (from init's `options`, the workload's adapter_options)

let mode = "plain";
let settings = {
  driftFactor: 0.01, // the library's default
  retryDelay: 100, // ms between acquire attempts while waiting
  retryJitter: 50, // +- ms
  automaticExtensionThreshold: 500, // using(): extend this long before the expiration
  connectTimeout: 500,
  commandTimeout: 500,
  reconnectDelay: 100,
};
let redlock = null;
let clients = [];
let quorum = 1;

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
  mode = options.mode === undefined ? "plain" : options.mode;
  if (mode !== "plain" && mode !== "using") {
    throw new BadRequest(`option mode must be "plain" or "using", got ${JSON.stringify(mode)}`);
  }
  settings = {
    driftFactor: number(options, "drift_factor", settings.driftFactor),
    retryDelay: number(options, "retry_delay_ms", settings.retryDelay),
    retryJitter: number(options, "retry_jitter_ms", settings.retryJitter),
    automaticExtensionThreshold: number(
      options,
      "extension_threshold_ms",
      settings.automaticExtensionThreshold
    ),
    connectTimeout: number(options, "connect_timeout_ms", settings.connectTimeout),
    commandTimeout: number(options, "command_timeout_ms", settings.commandTimeout),
    reconnectDelay: number(options, "reconnect_delay_ms", settings.reconnectDelay),
  };

  const topology = req.topology;
  const nodes = req.nodes || [];
  if (topology === "sentinel") {
    throw new BadRequest("sentinel topology not supported by this adapter");
  }
  if (!["single", "replicated", "independent"].includes(topology)) {
    throw new BadRequest(`unknown topology ${JSON.stringify(topology)}`);
  }
  if (nodes.length === 0) throw new BadRequest("init without nodes");
  const masters = topology === "independent" ? nodes : [nodes[0]];

  clients = masters.map((node, i) => {
    const client = new Redis({
      host: node.host,
      port: node.port,
      password: node.password || undefined,
      connectTimeout: settings.connectTimeout,
      commandTimeout: settings.commandTimeout,
      // No offline queue: a command issued while disconnected is refused at once, and
      // certainly never reaches the server.
      enableOfflineQueue: false,
      // On a lost connection, reject the commands in flight at once (their outcome is
      // unknown), and never send them again after reconnecting.
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      retryStrategy: () => settings.reconnectDelay, // keep reconnecting, quickly
      lazyConnect: false,
    });
    let lastError = "";
    client.on("error", (e) => {
      // ioredis repeats connection errors on every reconnect attempt; log changes only.
      if (e.message !== lastError) log(`master ${i} (${node.host}:${node.port}): ${e.message}`);
      lastError = e.message;
    });
    client.on("ready", () => {
      if (lastError) log(`master ${i} (${node.host}:${node.port}): ready again`);
      lastError = "";
    });
    return client;
  });
  quorum = Math.floor(clients.length / 2) + 1;

  // Without an offline queue, commands before the first connection would be refused: wait
  // (boundedly) for the masters. A master that is down now (a restarted adapter during
  // kill-servers) is no reason to refuse init: Redlock works with a quorum.
  await Promise.all(
    clients.map(
      (c) =>
        new Promise((resolve) => {
          if (c.status === "ready") return resolve();
          const t = setTimeout(resolve, 3000);
          c.once("ready", () => {
            clearTimeout(t);
            resolve();
          });
        })
    )
  );

  // The instance's own settings serve the calls that take none: lock.extend() and
  // lock.release() (also those inside using()) make one attempt each.
  redlock = new Redlock(clients, {
    driftFactor: settings.driftFactor,
    retryCount: 0,
    retryDelay: settings.retryDelay,
    retryJitter: settings.retryJitter,
    automaticExtensionThreshold: settings.automaticExtensionThreshold,
  });
  instrument(redlock);

  return {
    name: `node-redlock ${versions.redlock} (ioredis ${versions.ioredis}), ${mode}, ${clients.length} master${clients.length === 1 ? "" : "s"}`,
    fencing: false,
    reentrant: false,
  };
}

// ---------------------------------------------------------------------------------------
// Watching using(): see the header. `sessions` maps a key to its using() session.

const sessions = new Map(); // key -> { lock, release, done, lost }

function instrument(rl) {
  const acquire = Redlock.prototype.acquire;
  const extend = Redlock.prototype.extend;
  rl.acquire = async function (resources, duration, s) {
    const lock = await acquire.call(this, resources, duration, s);
    const session = sessions.get(resources[0]);
    if (session && session.starting) session.lock = lock;
    return lock;
  };
  rl.extend = async function (existing, duration, s) {
    const session = mode === "using" ? sessions.get(existing.resources[0]) : undefined;
    const ours = session !== undefined && session.lock === existing;
    let replacement;
    try {
      replacement = await extend.call(this, existing, duration, s);
    } catch (e) {
      // using() retries a failed extension at once, with no delay, until the library's
      // expiration passes: log the first failure of a lock and count the rest.
      if (ours && session.failures++ === 0) {
        log(`using ${existing.resources[0]}: extension failed: ${describe(e)} (using() retries at once while the lock has validity left)`);
      }
      throw e;
    }
    if (ours) {
      if (session.failures > 0) log(`using ${existing.resources[0]}: extended after ${session.failures} failed extensions`);
      session.failures = 0;
      session.lock = replacement;
      const left = Math.max(0, replacement.expiration - Date.now());
      emit({ type: "renewed", key: existing.resources[0], lease_ms: left });
    }
    return replacement;
  };
}

function describe(e) {
  if (e instanceof ExecutionError && e.message.startsWith("Cannot extend")) return e.message;
  return `${e.name}: ${e.message}`;
}

// ---------------------------------------------------------------------------------------
// Sorting a failed operation's votes (see the header)

function certainlyNotRun(error) {
  return (
    error instanceof ReplyError ||
    (error instanceof Error && error.message.startsWith("Stream isn't writeable"))
  );
}

// The stats of every attempt of an ExecutionError, once all votes are in.
async function votes(error) {
  return Promise.all((error.attempts || []).map((a) => Promise.resolve(a)));
}

function summary(stats) {
  return stats
    .map((s) => {
      const against = [...s.votesAgainst.values()].map((e) =>
        e instanceof ResourceLockedError ? "locked" : certainlyNotRun(e) ? "not sent" : `unknown (${e.message})`
      );
      return `for ${s.votesFor.size}/${s.membershipSize}${against.length ? ", " + against.join(", ") : ""}`;
    })
    .join("; ");
}

// acquire: fail if fewer than a quorum of servers may hold our value.
async function classifyAcquire(e) {
  if (!(e instanceof ExecutionError)) return ["info", `${e.name}: ${e.message}`];
  const stats = await votes(e);
  const maybeOurs = new Set();
  for (const s of stats) {
    for (const c of s.votesFor) maybeOurs.add(c);
    for (const [c, err] of s.votesAgainst) {
      if (!(err instanceof ResourceLockedError) && !certainlyNotRun(err)) maybeOurs.add(c);
    }
  }
  const detail = `${e.message} [${summary(stats)}]`;
  return [maybeOurs.size < quorum ? "fail" : "info", detail];
}

// release / renew: fail if a quorum of servers said the lock is not ours.
async function classifyHeld(e) {
  if (!(e instanceof ExecutionError)) return ["info", `${e.name}: ${e.message}`];
  if (e.message.startsWith("Cannot extend an already-expired lock")) return ["fail", e.message];
  const stats = await votes(e);
  const last = stats[stats.length - 1];
  let notOurs = 0;
  if (last) for (const err of last.votesAgainst.values()) if (err instanceof ResourceLockedError) notOurs++;
  return [notOurs >= quorum ? "fail" : "info", `${e.message} [${summary(stats)}]`];
}

function isArgumentError(e) {
  return (
    !(e instanceof ExecutionError) &&
    /must be an integer|automaticExtensionThreshold|must be at least/.test(e.message)
  );
}

// ---------------------------------------------------------------------------------------
// Requests

const held = new Map(); // plain mode: key -> Lock

function acquireSettings(waitMs) {
  const step = settings.retryDelay + settings.retryJitter;
  const retryCount = waitMs > 0 && step > 0 ? Math.floor(waitMs / step) : 0;
  return {
    retryCount,
    retryDelay: settings.retryDelay,
    retryJitter: settings.retryJitter,
    driftFactor: settings.driftFactor,
    automaticExtensionThreshold: settings.automaticExtensionThreshold,
  };
}

function intArg(req, name) {
  const v = req[name];
  if (!Number.isInteger(v) || v < 0) throw new BadRequest(`${name} must be an integer >= 0`);
  return v;
}

function keyArg(req) {
  if (typeof req.key !== "string") throw new BadRequest("key must be a string");
  return req.key;
}

async function acquirePlain(id, key, ttl, wait) {
  if (held.has(key)) {
    // Not reentrant: a second acquire would only meet our own key. Refuse it as the library
    // would (after waiting), without touching the held lock.
    return reply(id, "fail", { error: "already held by this client (not reentrant)" });
  }
  let lock;
  try {
    // Note: the library takes `start = Date.now()` once, before the first attempt, and
    // sets expiration = start + ttl - drift whichever attempt succeeds; it does not refuse
    // a lock whose validity is already spent.
    lock = await redlock.acquire([key], ttl, acquireSettings(wait));
  } catch (e) {
    if (isArgumentError(e)) throw new BadRequest(e.message);
    const [type, error] = await classifyAcquire(e);
    log(`acquire ${key}: ${type}: ${error}`);
    return reply(id, type, { error });
  }
  held.set(key, lock);
  reply(id, "ok", { token: null, ...validity(lock) });
}

async function acquireUsing(id, key, ttl, wait) {
  if (sessions.has(key)) {
    return reply(id, "fail", { error: "already held by this client (not reentrant)" });
  }
  const session = { lock: null, starting: true, release: null, done: null, lost: false, failures: 0 };
  const released = new Promise((resolve) => (session.release = resolve));
  let started;
  const running = new Promise((resolve) => (started = resolve));
  sessions.set(key, session);
  session.done = redlock.using([key], ttl, acquireSettings(wait), async (signal) => {
    // Runs right after using() acquired the lock and queued its first extension.
    session.starting = false;
    signal.addEventListener("abort", () => {
      session.lost = true;
      if (session.failures > 1) log(`using ${key}: ${session.failures} failed extensions in a row`);
      const error = signal.error ? `${signal.error.name}: ${signal.error.message}` : "aborted";
      log(`using ${key}: lost: ${error}`);
      emit({ type: "lost", key, error });
    });
    started();
    await released;
  });
  // Whichever comes first: the routine started (the lock is ours), or using() failed
  // (the acquire failed; the routine never ran).
  const first = await Promise.race([
    running.then(() => ({ ok: true })),
    session.done.then(
      () => ({ ok: false, error: new Error("using() returned before its routine ran") }),
      (error) => ({ ok: false, error })
    ),
  ]);
  if (first.ok) {
    return reply(id, "ok", { token: null, ...validity(session.lock) });
  }
  sessions.delete(key);
  const e = first.error;
  if (isArgumentError(e)) throw new BadRequest(e.message);
  const [type, error] = await classifyAcquire(e);
  log(`acquire ${key}: ${type}: ${error}`);
  reply(id, type, { error });
}

async function releasePlain(id, key) {
  const lock = held.get(key);
  if (!lock) return reply(id, "fail", { error: "not held by this client" });
  held.delete(key);
  try {
    await lock.release();
  } catch (e) {
    const [type, error] = await classifyHeld(e);
    log(`release ${key}: ${type}: ${error}`);
    return reply(id, type, { error });
  }
  reply(id, "ok");
}

async function releaseUsing(id, key) {
  const session = sessions.get(key);
  if (!session) return reply(id, "fail", { error: "not held by this client" });
  session.release();
  try {
    await session.done; // using()'s finally: wait for an extension in flight, then release
  } catch (e) {
    sessions.delete(key);
    const [type, error] = await classifyHeld(e);
    log(`release ${key}: ${type}: ${error}${session.lost ? " (after using() reported the lock lost)" : ""}`);
    return reply(id, type, { error });
  }
  sessions.delete(key);
  reply(id, "ok");
}

async function renewPlain(id, key, ttl) {
  const lock = held.get(key);
  if (!lock) return reply(id, "fail", { error: "not held by this client" });
  let replacement;
  try {
    replacement = await lock.extend(ttl);
  } catch (e) {
    if (isArgumentError(e)) throw new BadRequest(e.message);
    const [type, error] = await classifyHeld(e);
    log(`renew ${key}: ${type}: ${error}`);
    return reply(id, type, { error });
  }
  held.set(key, replacement);
  reply(id, "ok", validity(replacement));
}

async function handle(req) {
  const id = req.id;
  const type = req.type;
  try {
    if (type === "init") {
      return reply(id, "init_ok", await init(req));
    }
    if (redlock === null) throw new BadRequest("the first request must be init");
    if (type === "acquire") {
      // Protocol 1.2: a shared or fair lock is asked for; Redlock is neither, and an
      // exclusive, unfair lock in its place would be judged as the wrong lock.
      if (req.mode !== undefined && req.mode !== "exclusive") {
        throw new BadRequest(`mode ${JSON.stringify(req.mode)} is not supported: node-redlock has no shared mode`);
      }
      if (req.fair !== undefined && req.fair !== false) {
        throw new BadRequest(`fair ${JSON.stringify(req.fair)} is not supported: node-redlock does not grant in arrival order`);
      }
      const key = keyArg(req);
      const ttl = intArg(req, "ttl_ms");
      const wait = req.wait_ms === undefined ? 0 : intArg(req, "wait_ms");
      return mode === "using" ? acquireUsing(id, key, ttl, wait) : acquirePlain(id, key, ttl, wait);
    }
    if (type === "release") {
      const key = keyArg(req);
      return mode === "using" ? releaseUsing(id, key) : releasePlain(id, key);
    }
    if (type === "renew") {
      const key = keyArg(req);
      const ttl = intArg(req, "ttl_ms");
      if (mode === "using") {
        throw new BadRequest("renew is not supported in mode using: redlock.using() extends the lock itself");
      }
      return renewPlain(id, key, ttl);
    }
    throw new BadRequest(`unsupported request type ${JSON.stringify(type)}`);
  } catch (e) {
    if (e instanceof BadRequest) return reply(id, "error", { error: e.message });
    log(`${type} ${req.key}: unexpected: ${e.stack || e}`);
    return reply(id, "info", { error: `${e.name}: ${e.message}` });
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
