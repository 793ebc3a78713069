// A lockaudit adapter (docs/src/reference/protocol.md, version 1.4) over etcd's own Go
// client 3.4.23, `go.etcd.io/etcd/clientv3/concurrency`: a Session and a Mutex, used the
// way a Go service uses them, on lockaudit's etcd topology (`init` names the three members;
// the run's password is root's).
//
// What the library does (clientv3/concurrency, 3.4.23):
//
//	NewSession(c, WithTTL(s)): grants a lease of s seconds and keeps it alive for as long
//	          as the session lives: clientv3's lessor sends a keep-alive TTL/3 after each
//	          answer (on a 500 ms tick), and closes Done() when etcd answers TTL 0 or when no
//	          answer came for TTL since the last one (checked once a second). A closed
//	          Done() is final: the session is dead and its lease cannot be used again.
//	Mutex.Lock(ctx): one transaction puts <prefix>/<lease id in hex> on the session's
//	          lease if that key was never created, and reads the prefix's oldest key. If
//	          that is ours, the lock is held; else waitDeletes watches every older key
//	          until it is deleted, then Lock returns nil. It never looks at its own key
//	          again: a key whose lease expired while Lock waited (a paused process) is gone,
//	          and Lock still returns nil once the older keys are gone (etcd 3.5 added that
//	          look; 3.4 has none). A ctx that ends during the wait makes Lock delete its key
//	          (Unlock) and return the ctx's error. 3.4 has no TryLock.
//	Mutex.Unlock(ctx): deletes the key. No check that it is still ours: deleting a key
//	          that is gone succeeds.
//	Mutex.Header(): the header of the answer that granted the lock: of the transaction
//	          (uncontended), or of waitDeletes' last read.
//
// acquire: NewMutex(session, key).Lock(ctx), ctx ending after wait_ms (wait_ms 0: after
//
//	`try_ms`, default 250, since 3.4 cannot try once; a new session's grant has its own
//	`grant_ms`, default 1000, before that) -> ok with token = Header().Revision
//	and lease_ms = from the request to the lessor's own deadline for the session's
//	lease (its last keep-alive answer + TTL, or the grant; now if Done() closed). A
//	context that ended while waiting with the key deleted again (Key() is "\x00" after
//	Unlock) is `fail`; etcd refusing (lease not found, auth, permission) is `fail`;
//	anything else (a transaction whose answer was lost) is `info`.
//
// release: Unlock(ctx) -> ok (it cannot fail but for lack of an answer: `info`).
// renew:   `error`: the session renews by itself; there is nothing to call.
// notices: every keep-alive answer while a key is held, or its release is unanswered, is
//
//	`renewed` (lease_ms = the TTL etcd answered; one a second at ttl 2 s); Done() closing
//	while a key is held is `lost`.
//
// Sessions: one per client, made at its first acquire and kept across its holds, as a
// long-lived service keeps one; once its Done() closes, the next acquire makes a new one
// (a dead session cannot be revived: its lease is gone) and the old one is Close()d.
// Fencing: Header().Revision strictly grows from one holder to the next: a waiter's
// header is read after the previous holder's key was deleted, which came after that
// holder's own header. init_ok says fencing true, so `--fenced` writes with it.
// Auth: clientv3.Config{Username: "root", Password}; the client authenticates when it
// dials and again whenever a member answers "invalid auth token" (a restarted member).
// Clock: Go reads the wall clock through the vDSO, never libc, so lockaudit's LD_PRELOAD
// wall clock does not move this program's time.Now() (see the workload's clock-skew);
// the library times leases on the monotonic clock anyway.
//
// What running it showed (etcd 3.4.23, 2026-11-29; docs/src/guide/ready-adapters.md):
//   - a waiter whose session lease ran out while it waited (a paused process, or etcd
//     too starved to answer keep-alives for a TTL) gets nil from Lock once the older keys
//     are gone, while a later waiter holds the lock: two holders inside a live lease
//     (etcd-io/etcd#11456, fixed after 3.4), and two holders with one token;
//   - a paused holder writes on resuming, tens of milliseconds before Done() closes;
//   - an Unlock without an answer leaves the key on a lease the session keeps renewing;
//   - Lock's clean-up after its wait ended has no deadline (client.Ctx()): on a paused
//     member it holds the queue until the member answers.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
	"go.etcd.io/etcd/etcdserver/api/v3rpc/rpctypes"
	"go.etcd.io/etcd/version"
	"google.golang.org/grpc/grpclog"
)

var (
	// Our own logger: the etcd packages reroute the standard one through capnslog.
	logger = log.New(os.Stderr, "go-etcd: ", log.Ldate|log.Lmicroseconds)
	logf   = logger.Printf
	outMu  sync.Mutex
	out    = bufio.NewWriter(os.Stdout)
)

// send writes one JSON line; replies and notices come from different goroutines.
func send(msg map[string]interface{}) {
	line, err := json.Marshal(msg)
	if err != nil {
		logger.Fatalf("cannot encode %v: %v", msg, err)
	}
	outMu.Lock()
	defer outMu.Unlock()
	out.Write(line)
	out.WriteByte('\n')
	out.Flush()
}

func reply(id interface{}, kind string, fields map[string]interface{}) {
	msg := map[string]interface{}{"in_reply_to": id, "type": kind}
	for k, v := range fields {
		msg[k] = v
	}
	send(msg)
}

// session is one concurrency.Session and what the adapter knows of its lease.
type session struct {
	s   *concurrency.Session
	ttl int

	mu       sync.Mutex
	deadline time.Time       // when the lessor closes Done() without another answer
	held     map[string]bool // keys held through this session
	dead     bool            // Done() closed
	stop     context.CancelFunc
}

type adapter struct {
	client *clientv3.Client
	opts   map[string]interface{}
	// cfgRetry: the client's config, kept for the first acquire if init could not dial.
	cfgRetry *clientv3.Config
	sess     *session
	held     map[string]*held
}

type held struct {
	m    *concurrency.Mutex
	sess *session
}

func number(opts map[string]interface{}, name string, dflt float64) float64 {
	if v, ok := opts[name].(float64); ok {
		return v
	}
	return dflt
}

func (a *adapter) init(req map[string]interface{}) error {
	if topo, _ := req["topology"].(string); topo != "etcd" {
		return fmt.Errorf("etcd's Go client needs the etcd topology, not %q", topo)
	}
	nodes, _ := req["nodes"].([]interface{})
	if len(nodes) == 0 {
		return errors.New("init names no etcd member")
	}
	var endpoints []string
	password := ""
	for _, n := range nodes {
		node, _ := n.(map[string]interface{})
		host, _ := node["host"].(string)
		port, _ := node["port"].(float64)
		endpoints = append(endpoints, fmt.Sprintf("%s:%d", host, int(port)))
		if p, ok := node["password"].(string); ok {
			password = p
		}
	}
	a.opts, _ = req["options"].(map[string]interface{})
	cfg := clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: time.Duration(number(a.opts, "dial_timeout_ms", 2000)) * time.Millisecond,
	}
	if password != "" {
		cfg.Username = "root"
		cfg.Password = password
	}
	// New dials and authenticates; with every member down it fails after DialTimeout,
	// and the next acquire tries again.
	a.cfgRetry = &cfg
	c, err := clientv3.New(cfg)
	if err != nil {
		logf("not connected at init (%v): the first acquire tries again", err)
		return nil
	}
	a.client = c
	logf("connected to %v as root", endpoints)
	return nil
}

// connected makes the client if init could not.
func (a *adapter) connected() error {
	if a.client != nil {
		return nil
	}
	c, err := clientv3.New(*a.cfgRetry)
	if err != nil {
		return err
	}
	a.client = c
	return nil
}

// live is the client's session, made anew when there is none, its Done() closed, or the
// ttl asked changed.
func (a *adapter) live(ttl int, budget time.Duration) (*session, error) {
	if s := a.sess; s != nil {
		s.mu.Lock()
		ok := !s.dead && s.ttl == ttl
		s.mu.Unlock()
		if ok {
			return s, nil
		}
		a.sess = nil
		if len(s.heldKeys()) == 0 {
			// What an application's deferred Close does: revoke (in vain if it expired).
			go s.s.Close()
		}
	}
	// NewSession grants on the context it is given and keeps the lease alive on a child of
	// it, so the context must not end: the wait is bounded by cancelling it instead.
	sctx, cancel := context.WithCancel(context.Background())
	timer := time.AfterFunc(budget, cancel)
	granted := time.Now()
	cs, err := concurrency.NewSession(a.client, concurrency.WithTTL(ttl), concurrency.WithContext(sctx))
	if !timer.Stop() || err != nil {
		cancel()
		if err == nil {
			err = errors.New("the lease grant took longer than grant_ms")
			go cs.Close()
		}
		return nil, err
	}
	s := &session{s: cs, ttl: ttl, held: map[string]bool{}, stop: cancel}
	// The lessor counts the grant's TTL from when it answered; ours, from before we asked.
	s.deadline = granted.Add(time.Duration(ttl) * time.Second)
	// Our own channel on the session's lease: the lessor sends each keep-alive answer to
	// every channel of a lease, without a request of its own. Its answers are the library's
	// renewals.
	ka, err := a.client.KeepAlive(sctx, cs.Lease())
	if err != nil {
		logf("session %x: no keep-alive channel of our own (%v): no renewed notices", cs.Lease(), err)
	} else {
		go s.renewals(ka)
	}
	go s.watchDone()
	a.sess = s
	logf("session %x: ttl %d s", cs.Lease(), ttl)
	return s, nil
}

func (s *session) heldKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.held {
		keys = append(keys, k)
	}
	return keys
}

func (s *session) renewals(ka <-chan *clientv3.LeaseKeepAliveResponse) {
	for resp := range ka {
		now := time.Now()
		s.mu.Lock()
		s.deadline = now.Add(time.Duration(resp.TTL) * time.Second)
		keys := make([]string, 0, len(s.held))
		for k := range s.held {
			keys = append(keys, k)
		}
		s.mu.Unlock()
		for _, k := range keys {
			send(map[string]interface{}{"type": "renewed", "key": k, "lease_ms": resp.TTL * 1000})
		}
	}
}

func (s *session) watchDone() {
	<-s.s.Done()
	s.mu.Lock()
	s.dead = true
	keys := make([]string, 0, len(s.held))
	for k := range s.held {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	logf("session %x: Done() closed", s.s.Lease())
	for _, k := range keys {
		send(map[string]interface{}{"type": "lost", "key": k, "error": "the session's Done() closed: its lease expired or its keep-alives went unanswered for a TTL"})
	}
}

// refused: etcd answered, and said no; nothing was done.
func refused(err error) bool {
	switch rpctypes.Error(err) {
	case rpctypes.ErrLeaseNotFound, rpctypes.ErrPermissionDenied, rpctypes.ErrAuthFailed,
		rpctypes.ErrInvalidAuthToken, rpctypes.ErrUserEmpty, rpctypes.ErrAuthNotEnabled,
		rpctypes.ErrInvalidAuthMgmt, rpctypes.ErrAuthOldRevision:
		return true
	}
	return false
}

func unsupported(req map[string]interface{}) string {
	if mode, ok := req["mode"]; ok && mode != "exclusive" {
		return fmt.Sprintf("mode %v is not supported: etcd's concurrency.Mutex has no shared mode", mode)
	}
	if fair, ok := req["fair"]; ok && fair != false {
		return fmt.Sprintf("fair %v is not supported: lockaudit cannot ask etcd's Mutex for anything but its own order (it grants in create-revision order)", fair)
	}
	return ""
}

func (a *adapter) acquire(id interface{}, req map[string]interface{}) {
	if why := unsupported(req); why != "" {
		reply(id, "error", map[string]interface{}{"error": why})
		return
	}
	key, _ := req["key"].(string)
	ttlMs, ok := req["ttl_ms"].(float64)
	if key == "" || !ok {
		reply(id, "error", map[string]interface{}{"error": "bad request: acquire needs key and ttl_ms"})
		return
	}
	if a.held[key] != nil {
		reply(id, "error", map[string]interface{}{"error": "bad request: " + key + " is held by this client already (the Mutex is not reentrant)"})
		return
	}
	start := time.Now()
	wait := time.Duration(number(req, "wait_ms", 0)) * time.Millisecond
	if wait == 0 {
		wait = time.Duration(number(a.opts, "try_ms", 250)) * time.Millisecond
	}
	if err := a.connected(); err != nil {
		reply(id, "fail", map[string]interface{}{"error": "cannot connect: " + err.Error()})
		return
	}
	// etcd's lease TTL is whole seconds.
	ttl := int((int64(ttlMs) + 999) / 1000)
	if ttl < 1 {
		ttl = 1
	}
	s, err := a.live(ttl, time.Duration(number(a.opts, "grant_ms", 1000))*time.Millisecond)
	if err != nil {
		// No lock key was written: the grant's answer may be lost, but a lease without a
		// key holds nothing.
		reply(id, "fail", map[string]interface{}{"error": "no session: " + err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	m := concurrency.NewMutex(s.s, key)
	err = m.Lock(ctx)
	if err != nil {
		kind := "info"
		if m.Key() == "\x00" || refused(err) {
			// The wait ended and Lock deleted its key again, or etcd refused the put.
			kind = "fail"
		}
		logf("acquire %s: %v (%s)", key, err, kind)
		reply(id, kind, map[string]interface{}{"error": err.Error()})
		return
	}
	s.mu.Lock()
	s.held[key] = true
	dead := s.dead
	end := s.deadline
	s.mu.Unlock()
	if now := time.Now(); dead && end.After(now) {
		// The library's own verdict: a session whose Done() closed has no lease left.
		end = now
	}
	// The lease counted from the request: it ends at the lessor's deadline. One that ended
	// before Lock returned (a waiter whose session ran out) is said as such, a lease no
	// longer than the wait, rather than as valid_ms 0, which lockaudit would round up.
	lease := end.Sub(start)
	if lease < 0 {
		lease = 0
	}
	a.held[key] = &held{m: m, sess: s}
	reply(id, "ok", map[string]interface{}{"token": m.Header().Revision, "lease_ms": lease.Milliseconds()})
	if dead {
		// Done() closed before the key was ours to report: say so now.
		send(map[string]interface{}{"type": "lost", "key": key, "error": "the session's Done() had closed when Lock returned"})
	}
}

func (a *adapter) release(id interface{}, req map[string]interface{}) {
	key, _ := req["key"].(string)
	h := a.held[key]
	if h == nil {
		reply(id, "fail", map[string]interface{}{"error": "not held by this client"})
		return
	}
	delete(a.held, key)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(number(a.opts, "op_timeout_ms", 2000))*time.Millisecond)
	defer cancel()
	err := h.m.Unlock(ctx)
	if err == nil || refused(err) {
		h.sess.mu.Lock()
		delete(h.sess.held, key)
		h.sess.mu.Unlock()
	}
	// Until the delete is known to be done, the key may still be there on the session's
	// lease, which the library goes on renewing: its renewals are still reported (a release
	// without an answer would otherwise leave a key that lockaudit counts as expired).
	if err != nil {
		kind := "info"
		if refused(err) {
			kind = "fail"
		}
		reply(id, kind, map[string]interface{}{"error": err.Error()})
		return
	}
	reply(id, "ok", nil)
}

func main() {
	// gRPC's own chatter (reconnects) goes to stderr, the adapter's log, errors only.
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
	a := &adapter{held: map[string]*held{}}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for in.Scan() {
		line := in.Bytes()
		if len(line) == 0 {
			continue
		}
		var req map[string]interface{}
		if err := json.Unmarshal(line, &req); err != nil {
			reply(nil, "error", map[string]interface{}{"error": "bad request: " + err.Error()})
			continue
		}
		id := req["id"]
		switch req["type"] {
		case "init":
			if err := a.init(req); err != nil {
				reply(id, "error", map[string]interface{}{"error": err.Error()})
				continue
			}
			logf("wall clock at init: %s", time.Now().UTC().Format(time.RFC3339Nano))
			reply(id, "init_ok", map[string]interface{}{
				"name":      "etcd clientv3 " + version.Version + " concurrency.Mutex",
				"fencing":   true,
				"reentrant": false,
			})
		case "acquire":
			if a.cfgRetry == nil {
				reply(id, "error", map[string]interface{}{"error": "acquire before init"})
				continue
			}
			a.acquire(id, req)
		case "release":
			a.release(id, req)
		case "renew":
			reply(id, "error", map[string]interface{}{"error": "renew is not supported: the session keeps its lease alive by itself (its keep-alives are renewed notices)"})
		default:
			reply(id, "error", map[string]interface{}{"error": fmt.Sprintf("unsupported request type %v", req["type"])})
		}
	}
}
