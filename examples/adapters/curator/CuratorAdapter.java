/*
 * A lockaudit adapter (docs/src/reference/protocol.md, version 1.4) over Apache Curator 5.4.0's
 * lock recipes (Debian's libcurator-recipes-java), used the way an application uses them, on
 * lockaudit's ZooKeeper topology (`init` names the three servers). Build: build.sh; run: run.sh.
 *
 * What the library does (curator-recipes 5.4.0, locks/InterProcessMutex.java, LockInternals.java,
 * StandardLockInternalsDriver.java):
 *   acquire(time, unit): a thread that already owns the mutex only counts up (reentrant per
 *       thread, nothing sent to ZooKeeper). Otherwise create, with protection, an ephemeral
 *       sequential node `<path>/_c_<uuid>-lock-<seq>` (parents as containers; the uuid finds the
 *       node again if the create's reply was lost, and a node found from an older session is
 *       deleted, not adopted), list the children, hold if ours sorts first, else getData-watch
 *       the one before ours and wait; the wait is timed with System.currentTimeMillis(), the
 *       wall clock. Give up: delete our node (guaranteed: retried in the background) and
 *       return false. An exception (retries exhausted) deletes the node quietly and is thrown.
 *   release(): count down; at zero, delete the node (guaranteed); a node already gone
 *       (NoNode: the session expired and took it) is ignored: release() returns normally.
 *   InterProcessReadWriteLock: the same with `__READ__` / `__WRIT__` nodes; a reader holds
 *       when no writer sorts before it.
 *   No renewal and no token: the lock lives as long as the session, which ZooKeeper's client
 *   keeps alive with pings. Curator's documentation (its "Error handling" page and tech note
 *   14) asks every lock user to register a ConnectionStateListener and, on SUSPENDED, to
 *   assume it no longer holds the lock until it knows better: SUSPENDED means the connection
 *   broke and the session may expire meanwhile (another client may then hold the lock);
 *   LOST means the session expired (Curator also declares it itself once a session's timeout
 *   has passed while SUSPENDED); RECONNECTED means connected again, on the same session if no
 *   LOST came between. Its own recipes follow the StandardConnectionStateErrorPolicy, which
 *   treats SUSPENDED and LOST alike as errors.
 *
 * This adapter is that listener, and it follows that policy:
 *   SUSPENDED -> a `lost` notice for every key held (the protocol's `lost` obliges the client
 *       to make no further write in that hold, which is what Curator asks of a holder on
 *       SUSPENDED; waiting for LOST would let a holder cut off from the servers write after
 *       its session expired, CURATOR-206's double holder).
 *   LOST -> a `lost` notice for every key held that had none since its last grant or renewal.
 *   RECONNECTED after SUSPENDED with no LOST between, on the session the hold was granted in:
 *       a `renewed` notice (the node is still ours; the servers restarted the session's
 *       timeout when the client came back), lease = the negotiated session timeout less a
 *       margin. Only an application that ignored `lost` (write_after_lost) uses it.
 *
 * init:    one CuratorFramework per client, started at once (the JVM loads the client before
 *          the run's clock starts): the session timeout asked is option `session_ms` (default
 *          2000, the workload's ttl), connection timeout option `connection_ms` (1000),
 *          ExponentialBackoffRetry(50 ms, 3). Credentials: digest `lockaudit:<password>`
 *          (`init` carries the run's password in every node; option `user`), every znode
 *          created with CREATOR_ALL_ACL (the session's user alone), as lockaudit's servers
 *          expect (the root is the run's user's). Replies init_ok, reentrant true, fencing true.
 * acquire: no `mode` -> InterProcessMutex(/lockaudit/curator/<key>).acquire(wait_ms, ms);
 *          `mode` shared / exclusive -> InterProcessReadWriteLock(/lockaudit/curator-rw/<key>)
 *          readLock() / writeLock() (another folder: the two recipes' nodes do not sort
 *          together); `fair` is accepted: Curator's locks grant in the order the servers
 *          created the contenders' nodes.
 *          Granted -> ok, lease_ms = the time from the request to the checkExists below
 *          being sent, plus min(ttl_ms, the negotiated session timeout): the session outlives
 *          that request by at least a timeout (a long wait or retries before it promise
 *          nothing more).
 *          token = the lock node's czxid: the recipe exposes the node's path
 *          (getLockPath(), protected; read here by reflection) but not its Stat, so it costs
 *          one more request (checkExists) after the grant. Holders follow the sequence, which
 *          is creation order, so each holder's czxid is higher than the last one's. A node gone
 *          by then (its session expired between grant and read) -> release, fail.
 *          A nested acquire (the client holds the key: the same thread, the same object)
 *          is Curator's count, local: ok with the same token and lease_ms = what was left of
 *          the lease the hold already had when the request came (the count sends nothing,
 *          so it extends nothing).
 *          false (not granted within wait_ms; 0: one try) -> fail.
 * release: release() -> ok (also after a LOST: Curator ignores a node already gone);
 *          IllegalMonitorStateException -> fail.
 * A request that threw after its retries (ConnectionLoss, SessionExpired, an interrupted
 * wait) is `info`: its node may exist until Curator's background delete or the session's end.
 * `fencing: true` means the token above; with --fenced, the guarded resource checks it.
 *
 * What running it showed (docs/src/guide/ready-adapters.md has the figures): a paused holder
 * writes after its session expired and the next holder took the lock, before its SUSPENDED
 * reaches this listener (the JVM notices the silence only once it runs again); a killed
 * server's clients are told `lost` at once, inside their leases (lost-lock: the policy, not
 * a lock that failed); acquire(1 s) can return after 2-3 s when the connection breaks while
 * it waits (its time bounds the wait, not the retries: the lease above counts from the
 * request that proves the grant, not from the call's start, which once made such grants
 * read as bad leases); Curator ends a session itself after a session
 * timeout SUSPENDED during an election, CURATOR-604's window, never caught with a waiter in it.
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.logging.ConsoleHandler;
import java.util.logging.Formatter;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.api.ACLProvider;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.utils.CloseableUtils;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.Stat;

public final class CuratorAdapter {
    static final String MUTEX_ROOT = "/lockaudit/curator";
    static final String RW_ROOT = "/lockaudit/curator-rw";
    // A notice's lease counts from when lockaudit reads the line, a little after the server
    // restarted the session's timeout: this much shorter keeps it a lower bound.
    static final long NOTICE_MARGIN_MS = 50;

    static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    static final Method GET_LOCK_PATH;

    static {
        try {
            GET_LOCK_PATH = InterProcessMutex.class.getDeclaredMethod("getLockPath");
            GET_LOCK_PATH.setAccessible(true);
        } catch (NoSuchMethodException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** One hold of a key: Curator's lock object, and what the adapter knows of it. */
    static final class Hold {
        final InterProcessMutex lock;
        final boolean rw;
        final long token;
        final long sessionId;
        volatile long leaseStartNanos;
        volatile long leaseMs;
        volatile boolean lostSent;
        int count = 1;

        Hold(InterProcessMutex lock, boolean rw, long token, long sessionId, long start, long leaseMs) {
            this.lock = lock;
            this.rw = rw;
            this.token = token;
            this.sessionId = sessionId;
            this.leaseStartNanos = start;
            this.leaseMs = leaseMs;
        }
    }

    final Map<String, Hold> held = new ConcurrentHashMap<>();
    // The lock objects, one per key and kind, kept for the client's life: a Curator mutex is
    // reentrant per object and thread.
    final Map<String, InterProcessMutex> mutexes = new ConcurrentHashMap<>();
    final Map<String, InterProcessReadWriteLock> rwLocks = new ConcurrentHashMap<>();
    CuratorFramework client;
    long sessionMs;
    // Set by SUSPENDED, cleared by RECONNECTED; LOST marks the session gone.
    volatile boolean suspended;
    volatile boolean lostSinceSuspended;

    static void log(String s) {
        System.err.println("curator-adapter: " + s);
        System.err.flush();
    }

    static void write(Map<String, Object> message) {
        String line = Json.write(message);
        synchronized (OUT) {
            OUT.print(line);
            OUT.print('\n');
            OUT.flush();
        }
    }

    static void reply(Object id, String type, Object... fields) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("in_reply_to", id);
        m.put("type", type);
        for (int i = 0; i + 1 < fields.length; i += 2) {
            m.put((String) fields[i], fields[i + 1]);
        }
        write(m);
    }

    static void notice(String type, String key, Object... fields) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("type", type);
        m.put("key", key);
        for (int i = 0; i + 1 < fields.length; i += 2) {
            m.put((String) fields[i], fields[i + 1]);
        }
        write(m);
    }

    long sessionId() {
        try {
            return client.getZookeeperClient().getZooKeeper().getSessionId();
        } catch (Exception e) {
            return 0;
        }
    }

    long negotiatedMs() {
        int n = client.getZookeeperClient().getLastNegotiatedSessionTimeoutMs();
        return n > 0 ? n : sessionMs;
    }

    /** Curator's ConnectionStateListener (its event thread; must not block for long). */
    void stateChanged(ConnectionState state) {
        log("connection state " + state + " at " + System.nanoTime() / 1_000_000 + " ms, session 0x"
                + Long.toHexString(sessionId()));
        switch (state) {
            case SUSPENDED:
                suspended = true;
                lostSinceSuspended = false;
                sendLost("Curator: connection SUSPENDED (the session may expire: a holder must assume the lock lost)");
                break;
            case LOST:
                lostSinceSuspended = true;
                sendLost("Curator: session LOST");
                break;
            case RECONNECTED:
                boolean sameSession = suspended && !lostSinceSuspended;
                suspended = false;
                long now = sessionId();
                for (Map.Entry<String, Hold> e : held.entrySet()) {
                    Hold h = e.getValue();
                    if (sameSession && h.sessionId == now) {
                        long lease = Math.max(0, negotiatedMs() - NOTICE_MARGIN_MS);
                        h.leaseStartNanos = System.nanoTime();
                        h.leaseMs = lease;
                        h.lostSent = false;
                        notice("renewed", e.getKey(), "lease_ms", lease);
                    }
                }
                break;
            default:
                break;
        }
    }

    void sendLost(String why) {
        for (Map.Entry<String, Hold> e : held.entrySet()) {
            Hold h = e.getValue();
            if (!h.lostSent) {
                h.lostSent = true;
                notice("lost", e.getKey(), "error", why);
            }
        }
    }

    void init(Map<String, Object> req) throws Exception {
        if (!"zookeeper".equals(req.get("topology"))) {
            throw new IllegalArgumentException("Curator needs the zookeeper topology, not " + Json.write(req.get("topology")));
        }
        @SuppressWarnings("unchecked")
        List<Object> nodes = (List<Object>) req.getOrDefault("nodes", List.of());
        if (nodes.isEmpty()) {
            throw new IllegalArgumentException("init names no ZooKeeper server");
        }
        @SuppressWarnings("unchecked")
        Map<String, Object> options = req.get("options") instanceof Map ? (Map<String, Object>) req.get("options") : Map.of();
        StringBuilder hosts = new StringBuilder();
        String password = null;
        for (Object o : nodes) {
            @SuppressWarnings("unchecked")
            Map<String, Object> n = (Map<String, Object>) o;
            if (hosts.length() > 0) {
                hosts.append(',');
            }
            hosts.append(n.get("host")).append(':').append(((Number) n.get("port")).longValue());
            if (n.get("password") instanceof String) {
                password = (String) n.get("password");
            }
        }
        sessionMs = ((Number) options.getOrDefault("session_ms", 2000)).longValue();
        int connectionMs = ((Number) options.getOrDefault("connection_ms", 1000)).intValue();
        String user = (String) options.getOrDefault("user", "lockaudit");
        CuratorFrameworkFactory.Builder b = CuratorFrameworkFactory.builder()
                .connectString(hosts.toString())
                .sessionTimeoutMs((int) sessionMs)
                .connectionTimeoutMs(connectionMs)
                .retryPolicy(new ExponentialBackoffRetry(50, 3));
        if (password != null) {
            b.authorization("digest", (user + ":" + password).getBytes(StandardCharsets.UTF_8))
                    .aclProvider(new ACLProvider() {
                        @Override
                        public List<ACL> getDefaultAcl() {
                            return ZooDefs.Ids.CREATOR_ALL_ACL;
                        }

                        @Override
                        public List<ACL> getAclForPath(String path) {
                            return ZooDefs.Ids.CREATOR_ALL_ACL;
                        }
                    });
        }
        client = b.build();
        client.getConnectionStateListenable().addListener((c, state) -> stateChanged(state));
        client.start();
        // Connected before the run starts, where the servers serve; not an error otherwise
        // (a client started during a fault connects later, as Curator's would).
        boolean connected = client.blockUntilConnected(connectionMs, TimeUnit.MILLISECONDS);
        log("started on " + hosts + " (session " + sessionMs + " ms asked, " + negotiatedMs() + " ms granted, connected "
                + connected + ")");
        reply(req.get("id"), "init_ok", "name", "Apache Curator 5.4.0 InterProcessMutex / InterProcessReadWriteLock",
                "fencing", true, "reentrant", true);
    }

    InterProcessMutex lockFor(String key, Object mode) {
        if (mode == null) {
            return mutexes.computeIfAbsent(key, k -> new InterProcessMutex(client, MUTEX_ROOT + "/" + k));
        }
        InterProcessReadWriteLock rw = rwLocks.computeIfAbsent(key,
                k -> new InterProcessReadWriteLock(client, RW_ROOT + "/" + k));
        return "shared".equals(mode) ? rw.readLock() : rw.writeLock();
    }

    void acquire(Map<String, Object> req) throws Exception {
        Object id = req.get("id");
        // lockaudit counts lease_ms from its request, which came before this: a lease
        // counted from here is a lower bound of one counted from there.
        long start = System.nanoTime();
        String key = (String) req.get("key");
        Object mode = req.get("mode");
        if (key == null) {
            throw new IllegalArgumentException("acquire without a key");
        }
        if (mode != null && !"shared".equals(mode) && !"exclusive".equals(mode)) {
            reply(id, "error", "error", "unknown mode " + Json.write(mode));
            return;
        }
        long ttl = ((Number) req.getOrDefault("ttl_ms", sessionMs)).longValue();
        long waitMs = ((Number) req.getOrDefault("wait_ms", 0)).longValue();
        Hold h = held.get(key);
        InterProcessMutex lock = lockFor(key, mode);
        if (h != null) {
            if (h.lock != lock) {
                reply(id, "error", "error", "key " + key + " is held in another mode: Curator's upgrade/downgrade is not what lockaudit asks");
                return;
            }
            // Curator's reentrant count: nothing is sent, so the lease stays the hold's.
            if (!lock.acquire(waitMs, TimeUnit.MILLISECONDS)) {
                reply(id, "fail", "error", "not acquired");
                return;
            }
            h.count++;
            long left = h.leaseMs - ceilMs(start - h.leaseStartNanos);
            reply(id, "ok", "token", h.token, "lease_ms", Math.max(0, left));
            return;
        }
        if (!lock.acquire(waitMs, TimeUnit.MILLISECONDS)) {
            reply(id, "fail", "error", "not acquired within " + waitMs + " ms");
            return;
        }
        long session = sessionId();
        String path = (String) GET_LOCK_PATH.invoke(lock);
        // The servers restart the session's timeout with every request they answer: the
        // session outlives this one by a timeout, counted from before it was sent. A wait
        // (or retries) of any length before it promise nothing more.
        long proof = System.nanoTime();
        Stat stat = client.checkExists().forPath(path);
        if (stat == null) {
            lock.release();
            reply(id, "fail", "error", "granted, but the lock node " + path + " was gone before its czxid was read (session expired)");
            return;
        }
        if (stat.getEphemeralOwner() != session) {
            // CURATOR-604: granted on a node of a session Curator has replaced, which the
            // servers delete once they expire it. The application cannot tell; the log does.
            log("granted " + key + " on " + path + " of session 0x" + Long.toHexString(stat.getEphemeralOwner())
                + ", while the client's session is 0x" + Long.toHexString(session));
        }
        long lease = Math.min(ttl, negotiatedMs());
        held.put(key, new Hold(lock, mode != null, stat.getCzxid(), session, proof, lease));
        // From the request (not valid_ms, which lockaudit counts from when it reads the
        // reply: a pause between this write and that read would lengthen the lease it
        // records by the pause).
        reply(id, "ok", "token", stat.getCzxid(), "lease_ms", (proof - start) / 1_000_000 + lease);
    }

    /// Whole milliseconds, rounded up.
    static long ceilMs(long nanos) {
        return (nanos + 999_999) / 1_000_000;
    }

    void release(Map<String, Object> req) throws Exception {
        Object id = req.get("id");
        String key = (String) req.get("key");
        Hold h = held.get(key);
        if (h == null) {
            reply(id, "fail", "error", "not held by this client");
            return;
        }
        if (h.count == 1) {
            // Out of the books first: the listener sends no notice for a hold being released.
            held.remove(key);
        }
        h.count--;
        try {
            h.lock.release();
        } catch (IllegalMonitorStateException e) {
            reply(id, "fail", "error", "IllegalMonitorStateException: " + e.getMessage());
            return;
        }
        reply(id, "ok");
    }

    void serve() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            Object id = null;
            String type = null;
            try {
                @SuppressWarnings("unchecked")
                Map<String, Object> req = (Map<String, Object>) Json.parse(line);
                id = req.get("id");
                type = (String) req.get("type");
                if ("init".equals(type)) {
                    init(req);
                } else if (client == null) {
                    reply(id, "error", "error", "no init before " + Json.write(type));
                } else if ("acquire".equals(type)) {
                    acquire(req);
                } else if ("release".equals(type)) {
                    release(req);
                } else {
                    reply(id, "error", "error", "unsupported request type " + Json.write(type));
                }
            } catch (KeeperException.NoNodeException e) {
                log(type + ": " + e);
                reply(id, "fail", "error", e.toString());
            } catch (KeeperException | InterruptedException e) {
                log(type + ": " + e);
                reply(id, "info", "error", e.toString());
            } catch (IllegalArgumentException | ClassCastException | NullPointerException e) {
                reply(id, "error", "error", "bad request: " + e);
            } catch (Exception e) {
                // Curator wraps some failures (e.g. a reflective call's cause): unknown outcome.
                Throwable cause = e instanceof java.lang.reflect.InvocationTargetException ? e.getCause() : e;
                log(type + ": " + cause);
                reply(id, "info", "error", String.valueOf(cause));
            }
        }
        if (client != null) {
            CloseableUtils.closeQuietly(client);
        }
    }

    /** Loads the classes a run uses, for build.sh's class-data-sharing archive. */
    static void warmUp() throws Exception {
        Json.parse("{\"id\":0,\"type\":\"init\",\"nodes\":[{\"host\":\"127.0.0.1\",\"port\":1,\"password\":\"p\"}],\"options\":{},\"x\":[true,false,null,-1.5e3]}");
        CuratorAdapter a = new CuratorAdapter();
        a.sessionMs = 2000;
        a.client = CuratorFrameworkFactory.builder().connectString("127.0.0.1:1").sessionTimeoutMs(2000)
                .connectionTimeoutMs(200).retryPolicy(new ExponentialBackoffRetry(10, 0))
                .authorization("digest", "u:p".getBytes(StandardCharsets.UTF_8)).build();
        a.client.getConnectionStateListenable().addListener((c, state) -> a.stateChanged(state));
        a.client.start();
        InterProcessLock m = a.lockFor("k", null);
        a.lockFor("k", "shared");
        a.lockFor("k", "exclusive");
        try {
            m.acquire(0, TimeUnit.MILLISECONDS);
        } catch (Exception expected) {
            // no server: ConnectionLoss
        }
        reply(1, "ok", "token", 1L, "lease_ms", 2000L, "x", new ArrayList<>(List.of("a\"\n")));
        CloseableUtils.closeQuietly(a.client);
    }

    /**
     * Curator's and ZooKeeper's log (slf4j over java.util.logging) on stderr, warnings and up,
     * one line each: a logged exception by its message, not its stack, which lockaudit would
     * take for an adapter that crashed (the library logs, and retries, a lost connection's
     * errors; an uncaught one still prints its whole trace).
     */
    static void quietLogs() {
        Logger root = Logger.getLogger("");
        for (java.util.logging.Handler h : root.getHandlers()) {
            root.removeHandler(h);
        }
        ConsoleHandler h = new ConsoleHandler();
        h.setLevel(Level.WARNING);
        h.setFormatter(new Formatter() {
            @Override
            public String format(LogRecord r) {
                Throwable t = r.getThrown();
                return String.format("%tT.%<tL %s %s - %s%s%n", r.getMillis(), r.getLevel(), r.getLoggerName(),
                        formatMessage(r), t == null ? "" : " (" + t + ")");
            }
        });
        root.addHandler(h);
        root.setLevel(Level.WARNING);
    }

    public static void main(String[] args) throws Exception {
        quietLogs();
        if (args.length == 1 && args[0].equals("--warm-up")) {
            warmUp();
            return;
        }
        new CuratorAdapter().serve();
        System.exit(0);
    }

    /** Just enough JSON for the protocol: objects, arrays, strings, numbers, literals. */
    static final class Json {
        private final String s;
        private int i;

        private Json(String s) {
            this.s = s;
        }

        static Object parse(String text) {
            Json p = new Json(text);
            Object v = p.value();
            p.space();
            if (p.i != text.length()) {
                throw new IllegalArgumentException("trailing text in JSON at " + p.i);
            }
            return v;
        }

        private void space() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
        }

        private char peek() {
            space();
            if (i >= s.length()) {
                throw new IllegalArgumentException("JSON ends early");
            }
            return s.charAt(i);
        }

        private void expect(char c) {
            if (peek() != c) {
                throw new IllegalArgumentException("JSON: expected '" + c + "' at " + i);
            }
            i++;
        }

        private Object value() {
            char c = peek();
            if (c == '{') {
                Map<String, Object> m = new LinkedHashMap<>();
                i++;
                if (peek() == '}') {
                    i++;
                    return m;
                }
                while (true) {
                    String k = string();
                    expect(':');
                    m.put(k, value());
                    if (peek() == ',') {
                        i++;
                        continue;
                    }
                    expect('}');
                    return m;
                }
            }
            if (c == '[') {
                List<Object> l = new ArrayList<>();
                i++;
                if (peek() == ']') {
                    i++;
                    return l;
                }
                while (true) {
                    l.add(value());
                    if (peek() == ',') {
                        i++;
                        continue;
                    }
                    expect(']');
                    return l;
                }
            }
            if (c == '"') {
                return string();
            }
            for (String lit : new String[] {"true", "false", "null"}) {
                if (s.startsWith(lit, i)) {
                    i += lit.length();
                    return lit.equals("null") ? null : Boolean.valueOf(lit);
                }
            }
            int j = i;
            while (j < s.length() && "+-0123456789.eE".indexOf(s.charAt(j)) >= 0) {
                j++;
            }
            if (j == i) {
                throw new IllegalArgumentException("JSON: unexpected '" + c + "' at " + i);
            }
            String num = s.substring(i, j);
            i = j;
            if (num.matches("-?\\d+")) {
                try {
                    return Long.parseLong(num);
                } catch (NumberFormatException big) {
                    return Double.parseDouble(num);
                }
            }
            return Double.parseDouble(num);
        }

        private String string() {
            expect('"');
            StringBuilder b = new StringBuilder();
            while (true) {
                if (i >= s.length()) {
                    throw new IllegalArgumentException("JSON: unterminated string");
                }
                char c = s.charAt(i++);
                if (c == '"') {
                    return b.toString();
                }
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n': b.append('\n'); break;
                    case 't': b.append('\t'); break;
                    case 'r': b.append('\r'); break;
                    case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    case 'u': b.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
                    default: b.append(e);
                }
            }
        }

        static String write(Object v) {
            StringBuilder b = new StringBuilder();
            write(b, v);
            return b.toString();
        }

        private static void write(StringBuilder b, Object v) {
            if (v == null) {
                b.append("null");
            } else if (v instanceof String) {
                b.append('"');
                for (char c : ((String) v).toCharArray()) {
                    if (c == '"' || c == '\\') {
                        b.append('\\').append(c);
                    } else if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
                b.append('"');
            } else if (v instanceof Map) {
                b.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                    if (!first) {
                        b.append(',');
                    }
                    first = false;
                    write(b, String.valueOf(e.getKey()));
                    b.append(':');
                    write(b, e.getValue());
                }
                b.append('}');
            } else if (v instanceof List) {
                b.append('[');
                boolean first = true;
                for (Object o : (List<?>) v) {
                    if (!first) {
                        b.append(',');
                    }
                    first = false;
                    write(b, o);
                }
                b.append(']');
            } else {
                b.append(v);
            }
        }
    }
}
