package store

import (
	"slices"
	"sync"
	"time"
)

// Request load by gateway (issue #22, "leases follow the workload"): the
// store counts the batches each of its tablets served by the node that
// sent them (kvpb.Header.GatewayNode), per window, keeping the windows
// of the last minute (loadSpanWindows), and the LeaseBalancer moves a
// lease toward the region its requests come from (leases.go,
// loadRegion). A node forgets a tablet's counts when its lease leaves
// (Forget, store invariant 6). CockroachDB's
// load-based lease rebalancing does the same with per-locality request
// counts on the leaseholder.
//
// Only batches a replica served are counted (a refusal names the
// leaseholder and is counted there), so a tablet's counts are the
// leaseholder's view; a lease that just arrived starts from nothing.
// Only clients' batches name a gateway (kv.WithClientRequests), so the
// node's own work draws no lease. A statement's distributed fragments
// name their client's gateway, not the node they read on
// (kv.WithClientGateway, sql/distsql invariant 8), so a table read only
// through fragments draws its leases as one read by the gateway does.
//
// A tablet that goes idle keeps the counts of its last window with
// requests for loadMemoryWindows windows (10 minutes by default), so its
// lease stays where its clients were rather than going back to the
// balance by count the moment the load stops: a psql shell pausing for
// half a minute found the catalog's lease moved to eu and its next
// statements crossing the ocean again until its requests drew the lease
// back. CockroachDB keeps per-locality request counts for about as long.
// Recording is a map lookup and a short per-tablet lock. A node without a
// region records too: its gateway is a locality of its own (leases.go,
// locality), so a busy tablet's lease follows the one gateway its
// requests come through.

// DefaultLoadWindow is how long a window of request counts lasts; the
// balancer looks at the current window and the one before, so a tablet's
// load is its last one to two windows (or, idle, its last window with
// requests: loadMemoryWindows).
const DefaultLoadWindow = 10 * time.Second

// loadMemoryWindows is for how many windows an idle tablet's last
// window with requests stands for its load.
const loadMemoryWindows = 60

// loadSpanWindows is how many windows, the current one included, a
// region's share of a tablet's requests may be judged over
// (RequestLoad.Counts): the last one or two while they hold enough
// requests, all of them (a minute by default) while they do not. A slow
// client's requests then draw its lease within a minute whatever its
// rate, where over the last one or two windows alone they never reached
// the minimum (bench/README.md, "Issue 22, eleventh session": at load 18
// the seed's read queries sent the colocated tablet a few batches a
// window, under loadMinRequests, and its lease stayed where the balance
// by count had put it).
const loadSpanWindows = 6

// RequestLoad counts requests per tablet and gateway node. Safe for
// concurrent use; the zero value is not usable (NewRequestLoad).
type RequestLoad struct {
	window  time.Duration
	tablets sync.Map // tablet ID → *tabletLoad

	mu    sync.Mutex
	start time.Time // of the current window
}

// GatewayCount is one gateway's requests to a tablet.
type GatewayCount struct {
	Node uint64
	N    int
}

type tabletLoad struct {
	mu        sync.Mutex
	cur, prev []GatewayCount // a few gateways: a linear search
	// older are the windows before prev, newest first, up to
	// loadSpanWindows-2 of them (Counts).
	older [][]GatewayCount
	// last is the last window with requests, retired at lastAt: the
	// tablet's load while cur and prev are empty.
	last   []GatewayCount
	lastAt time.Time
}

// NewRequestLoad returns an empty tracker whose windows last window (0:
// DefaultLoadWindow).
func NewRequestLoad(window time.Duration) *RequestLoad {
	if window <= 0 {
		window = DefaultLoadWindow
	}
	return &RequestLoad{window: window, start: time.Now()}
}

// Record counts one batch tablet served for gateway (0: unknown, not
// counted).
func (l *RequestLoad) Record(tablet, gateway uint64) {
	if l == nil || gateway == 0 {
		return
	}
	v, ok := l.tablets.Load(tablet)
	if !ok {
		v, _ = l.tablets.LoadOrStore(tablet, &tabletLoad{})
	}
	t := v.(*tabletLoad)
	t.mu.Lock()
	t.cur = addCount(t.cur, gateway, 1)
	t.mu.Unlock()
}

// HeldBy reports whether tablet's recent requests (Recent) hold its lease
// on node as a locality of its own: at least loadMinNodeRequests of them,
// more than half through node as gateway. It is the LeaseBalancer's rule
// for keeping a lease (loadRegion) on a node without a region, so the
// split queue asks it before a split by load whose halves would both
// stay on node.
func (l *RequestLoad) HeldBy(tablet, node uint64) bool {
	total, mine := 0, 0
	for _, c := range l.Recent(tablet) {
		total += c.N
		if c.Node == node {
			mine += c.N
		}
	}
	return total >= loadMinNodeRequests && 2*mine > total
}

func addCount(cs []GatewayCount, node uint64, n int) []GatewayCount {
	for i := range cs {
		if cs[i].Node == node {
			cs[i].N += n
			return cs
		}
	}
	return append(cs, GatewayCount{Node: node, N: n})
}

// Recent returns tablet's requests per gateway over the current window
// and the one before, or, if both are empty, over its last window with
// requests if that ended within loadMemoryWindows windows (a new slice).
func (l *RequestLoad) Recent(tablet uint64) []GatewayCount {
	// Counts with no floor never reaches past the window before.
	return l.Counts(tablet, 0)
}

// Forget drops tablet's counts: its lease left this node. They were
// this node's view as leaseholder; kept, they would judge the lease when
// it comes back by the requests that drew it away, and a lease drawn
// back and forth between two regions by alternating bursts moved on
// every return (TestLeaseEvenLoadNoPingPong). CockroachDB resets a
// replica's request statistics when its lease changes hands.
func (l *RequestLoad) Forget(tablet uint64) {
	if l != nil {
		l.tablets.Delete(tablet)
	}
}

// Counts returns tablet's requests per gateway over its newest windows
// (a new slice): the current one and the one before if they hold at
// least floor requests, else every window of the span (loadSpanWindows).
// If none of them holds a request, its last window with requests (as
// Recent).
func (l *RequestLoad) Counts(tablet uint64, floor int) []GatewayCount {
	if l == nil {
		return nil
	}
	v, ok := l.tablets.Load(tablet)
	if !ok {
		return nil
	}
	t := v.(*tabletLoad)
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]GatewayCount, 0, len(t.cur)+len(t.prev))
	out = append(out, t.prev...)
	for _, c := range t.cur {
		out = addCount(out, c.Node, c.N)
	}
	if sumCounts(out) < floor {
		// All of the span, not just enough windows to reach floor:
		// a share over few more requests than floor swings with the
		// order they came in (two regions taking turns three requests
		// at a time showed 6 of 10 from one, loadMoveShare).
		for _, w := range t.older {
			for _, c := range w {
				out = addCount(out, c.Node, c.N)
			}
		}
	}
	if len(out) == 0 {
		return append(out, t.last...)
	}
	return out
}

func sumCounts(cs []GatewayCount) int {
	n := 0
	for _, c := range cs {
		n += c.N
	}
	return n
}

// Rotate starts a new window if the current one is over at now: the
// current counts become the previous ones (and, if any, the last ones),
// and tablets with no request in either and none in the last
// loadMemoryWindows windows are forgotten. The balancer calls it every
// pass.
func (l *RequestLoad) Rotate(now time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	if now.Sub(l.start) < l.window {
		l.mu.Unlock()
		return
	}
	// Windows that passed without a call are empty ones: a window that
	// ended long ago is not "the one before".
	n := min(int(now.Sub(l.start)/l.window), loadSpanWindows)
	l.start = now
	l.mu.Unlock()
	l.tablets.Range(func(k, v any) bool {
		t := v.(*tabletLoad)
		t.mu.Lock()
		if len(t.cur) > 0 {
			t.last, t.lastAt = append(t.last[:0], t.cur...), now
		} else if len(t.prev) == 0 && now.Sub(t.lastAt) >= loadMemoryWindows*l.window {
			t.last = nil
		}
		// The span's windows, newest first, after the shift: n new
		// empty ones, then cur, prev and the older ones, the oldest
		// past the span dropped.
		ws := make([][]GatewayCount, n, n+2+len(t.older))
		ws = append(append(ws, t.cur, t.prev), t.older...)
		ws = ws[:min(len(ws), loadSpanWindows)]
		for len(ws) > 2 && len(ws[len(ws)-1]) == 0 {
			ws = ws[:len(ws)-1] // empty tail windows add nothing
		}
		t.cur, t.prev, t.older = ws[0], ws[1], ws[2:]
		if len(t.older) == 0 {
			t.older = nil
		}
		empty := len(t.cur) == 0 && len(t.prev) == 0 && len(t.older) == 0 && t.last == nil
		t.mu.Unlock()
		if empty {
			l.tablets.Delete(k)
		}
		return true
	})
}

// Split gives the right side of a split of left the left's counts,
// halved (rounded up), and halves the left's: a load split divides the
// requests at their median key, and CockroachDB divides its request
// statistics the same way. Without them the new right side had no load
// and the balance by count handed its lease to another region, under the
// very requests that split it, until they drew it back.
func (l *RequestLoad) Split(left, right uint64) {
	if l == nil {
		return
	}
	v, ok := l.tablets.Load(left)
	if !ok {
		return
	}
	t := v.(*tabletLoad)
	t.mu.Lock()
	halve(t.cur)
	halve(t.prev)
	halve(t.last)
	older := make([][]GatewayCount, len(t.older))
	for i, w := range t.older {
		halve(w)
		older[i] = slices.Clone(w)
	}
	r := &tabletLoad{cur: slices.Clone(t.cur), prev: slices.Clone(t.prev), older: older, last: slices.Clone(t.last), lastAt: t.lastAt}
	t.mu.Unlock()
	l.tablets.Store(right, r)
}

func halve(cs []GatewayCount) {
	for i := range cs {
		cs[i].N = (cs[i].N + 1) / 2
	}
}
