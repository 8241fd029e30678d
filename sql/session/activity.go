package session

import (
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
)

// The node's session registry: every session of this node, for
// pg_stat_activity, pg_cancel_backend and pg_terminate_backend
// (signal.go). A session registers when it opens and leaves when it
// closes; its own goroutine updates its activity, and other sessions read
// it under the activity's mutex. Process ids are the BackendKeyData ids of
// this node's pgwire server, so the registry, like PostgreSQL's, knows the
// sessions of one server: a session on another node of the cluster is
// neither listed nor signalled here.

// registry maps process ids to the sessions of this node.
type registry struct {
	mu    sync.Mutex
	byPID map[uint32]*activity
}

func (r *registry) add(a *activity) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byPID == nil {
		r.byPID = make(map[uint32]*activity)
	}
	r.byPID[a.pid] = a
}

func (r *registry) remove(a *activity) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byPID[a.pid] == a {
		delete(r.byPID, a.pid)
	}
}

func (r *registry) get(pid uint32) *activity {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byPID[pid]
}

// snapshot returns every session's activity, by pid.
func (r *registry) snapshot() []plan.SessionActivity {
	r.mu.Lock()
	all := make([]*activity, 0, len(r.byPID))
	for _, a := range r.byPID {
		all = append(all, a)
	}
	r.mu.Unlock()
	out := make([]plan.SessionActivity, 0, len(all))
	for _, a := range all {
		out = append(out, a.read())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// activity is one session as others see it. The fields above mu never
// change after registration.
type activity struct {
	pid        uint32
	user       string
	super      bool
	dbID       catalog.ID
	dbName     string
	clientAddr net.Addr
	start      time.Time
	control    pgwire.ConnControl // nil for sessions without a connection (tests)

	// lockWaits counts the session's batches waiting for another
	// transaction's lock in a tablet of this node (kvpb.LockWaitObserver).
	lockWaits atomic.Int32

	mu          sync.Mutex
	appName     string
	state       string // active, idle, idle in transaction, idle in transaction (aborted)
	query       string
	xactStart   time.Time
	queryStart  time.Time
	stateChange time.Time
}

// LockWait implements kvpb.LockWaitObserver.
func (a *activity) LockWait(waiting bool) {
	if waiting {
		a.lockWaits.Add(1)
	} else {
		a.lockWaits.Add(-1)
	}
}

// begin records a statement starting: state active, its text, its start.
func (a *activity) begin(query string, now, xactStart time.Time) {
	a.mu.Lock()
	a.state, a.query, a.queryStart, a.stateChange, a.xactStart = "active", query, now, now, xactStart
	a.mu.Unlock()
}

// idle records the session waiting for the client in state.
func (a *activity) idle(state string, xactStart time.Time, appName string) {
	a.mu.Lock()
	if a.state != state {
		a.state, a.stateChange = state, time.Now()
	}
	a.xactStart, a.appName = xactStart, appName
	a.mu.Unlock()
}

func (a *activity) read() plan.SessionActivity {
	a.mu.Lock()
	defer a.mu.Unlock()
	sa := plan.SessionActivity{
		PID: int32(a.pid), DatabaseID: uint32(a.dbID), Database: a.dbName, User: a.user,
		ApplicationName: a.appName, BackendStart: a.start, XactStart: a.xactStart, QueryStart: a.queryStart,
		StateChange: a.stateChange, State: a.state, Query: a.query,
	}
	if tcp, ok := a.clientAddr.(*net.TCPAddr); ok {
		sa.ClientAddr, sa.ClientPort = tcp.IP.String(), int32(tcp.Port)
	}
	if a.state == "active" && a.lockWaits.Load() > 0 {
		sa.WaitEventType, sa.WaitEvent = "Lock", "transactionid"
	}
	return sa
}
