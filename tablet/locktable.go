package tablet

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// lockTable is the in-memory view of the intents on a tablet's keys, and the
// queue of requests waiting for each of them to go away.
//
// It is a view of what mvcc stores in the lock keyspace: it is rebuilt from
// mvcc.ScanIntents when the replica opens, updated by Apply as proposals
// write and resolve intents, and divided by Split along with the keys. It is
// exact in one direction (invariant 11): every intent the engine holds in
// the replica's span is in the table, as seen by anyone holding a latch on
// its key, because every intent is written by a proposal whose LocksAcquired
// lists it and Apply adds those right after committing, under the writer's
// latches. Reads rely on that to skip the lock keyspace (noneIn). The table
// may briefly hold more than the engine: a resolution commits before Apply
// releases the lock, and a lock the table holds that storage no longer has
// is harmless: a waiter on it pushes the holder, and once the holder is
// finished the resolution removes it. Evaluation still adds an intent it
// met but the table did not know (invariant 6), which only matters if
// invariant 11 were broken.
//
// Waiters do not poll: each lock has a channel that is closed when the lock
// is released or changes hands, and every waiter selects on it.
type lockTable struct {
	mu    sync.Mutex
	locks map[string]*lockState
	// peak is the most locks the map has held since it was made. A Go map
	// never gives back the buckets it grew, and ranging over it (noneIn)
	// costs its capacity, not its length: after a transaction with a
	// million intents resolved, every span read of the tablet that found
	// a few other locks walked a million empty slots (two thirds of the
	// CPU of a CREATE INDEX after a COPY). shrinkLocked rebuilds the map
	// once it is much emptier than its peak.
	peak int
	// unrepl indexes the unreplicated locks among locks (see
	// lockState.unrepl), so that the conflict check of a write and the
	// release of a transaction's locks walk them alone, not the whole
	// table. An entry whose state is no longer locks[key] is stale (reset
	// clears locks alone) and is dropped when met.
	unrepl map[string]*lockState
	// observeHold, when set, is told how long an unreplicated lock that
	// another request waited for was held, at its release (the node's
	// cairn_lock_contended_hold_seconds): under tpcb-like every
	// transaction queues on one branch row, so that hold bounds the
	// workload. It is called with mu held.
	observeHold func(time.Duration)
}

// minShrinkPeak is the peak below which the map is never rebuilt.
const minShrinkPeak = 4096

// shrinkLocked rebuilds the map at its current size when it holds less
// than a quarter of its peak.
func (t *lockTable) shrinkLocked() {
	if t.peak < minShrinkPeak || len(t.locks)*4 >= t.peak {
		return
	}
	m := make(map[string]*lockState, len(t.locks))
	for k, l := range t.locks {
		m[k] = l
	}
	t.locks, t.peak = m, len(m)
}

type lockState struct {
	holder kvpb.TxnMeta
	// unrepl marks an unreplicated lock: taken by a buffered write's
	// statement (kvpb.LockRequest.Unreplicated) on the leaseholder only,
	// with nothing in storage or in the raft log. Other transactions'
	// writes and locks wait on it as on an intent; reads ignore it (noneIn
	// does not count it: it holds no value). It is released by the
	// holder's EndTxn on this tablet, by resolution of its key, or by an
	// explicit release, and it is lost on reset and split (best effort:
	// the commit-time check still catches a race it no longer prevents).
	unrepl bool
	// released is closed when the lock is released (the state is then
	// removed from the map) or moves up to a pushed timestamp (the next
	// waiter makes a fresh one); either way its waiters re-evaluate. It is
	// made by the first waiter (enqueue), not with the lock: a transaction
	// writing a million rows holds a million locks that almost never have
	// a waiter, and a channel each was a third of their memory and of what
	// the garbage collector had to scan during a 1M-row COPY.
	released chan struct{}
	// waiters are the transactions (uuid.Nil for non-transactional
	// requests) queued on the lock, in arrival order, for introspection.
	waiters []uuid.UUID
	// taken is when an unreplicated lock was acquired (zero for an
	// intent: a transaction writing many rows takes a lock per row, and
	// they are not timed), and contended whether a request ever waited
	// for it; both feed lockTable.observeHold.
	taken     time.Time
	contended bool
}

func newLockTable() *lockTable {
	return &lockTable{locks: make(map[string]*lockState), unrepl: make(map[string]*lockState)}
}

// acquire records that txn holds the intent on key. If another transaction
// held it (which evaluation never allows; it only happens when the table
// missed a release), the old waiters are woken so they re-evaluate.
func (t *lockTable) acquire(key []byte, txn kvpb.TxnMeta) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.acquireLocked(key, txn)
}

func (t *lockTable) acquireLocked(key []byte, txn kvpb.TxnMeta) *lockState {
	if l, ok := t.locks[string(key)]; ok {
		if l.holder.ID == txn.ID {
			l.holder = txn
			if l.unrepl {
				// Now an intent: replicated from here on.
				l.unrepl = false
				delete(t.unrepl, string(key))
			}
			return l
		}
		l.wake()
		delete(t.unrepl, string(key))
	}
	l := &lockState{holder: txn}
	t.locks[string(key)] = l
	t.peak = max(t.peak, len(t.locks))
	return l
}

// release drops the lock on key if txn holds it, waking its waiters.
func (t *lockTable) release(key []byte, txn uuid.UUID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.releaseLocked(string(key), txn)
	t.shrinkLocked()
}

func (t *lockTable) releaseLocked(key string, txn uuid.UUID) {
	if l, ok := t.locks[key]; ok && l.holder.ID == txn {
		t.dropLocked(key, l)
	}
}

// dropLocked removes the lock l on key, released by its holder, and wakes
// its waiters; a contended unreplicated lock's hold is observed.
func (t *lockTable) dropLocked(key string, l *lockState) {
	l.wake()
	delete(t.locks, key)
	delete(t.unrepl, key)
	if l.contended && !l.taken.IsZero() && t.observeHold != nil {
		t.observeHold(time.Since(l.taken))
	}
}

// acquireUnreplicated records txn's unreplicated lock on key. The caller
// evaluated it under key's latch and found no other transaction's lock;
// a lock txn already holds there (an intent, or an unreplicated one)
// stays as it is.
func (t *lockTable) acquireUnreplicated(key []byte, txn kvpb.TxnMeta) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.locks[string(key)]; ok {
		if l.holder.ID == txn.ID {
			return
		}
		l.wake()
	}
	l := &lockState{holder: txn, unrepl: true}
	if t.observeHold != nil {
		l.taken = time.Now()
	}
	// One string for both maps: each conversion at an insert copies.
	k := string(key)
	t.locks[k] = l
	t.unrepl[k] = l
	t.peak = max(t.peak, len(t.locks))
}

// unreplConflict returns another transaction's unreplicated lock in the
// span [start, end) (end nil: the key start), if there is one. self's own
// locks are no conflict.
func (t *lockTable) unreplConflict(start, end []byte, self uuid.UUID) (kvpb.Intent, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.unrepl) == 0 {
		return kvpb.Intent{}, false
	}
	if end == nil {
		l, ok := t.unrepl[string(start)]
		if ok && t.locks[string(start)] == l && l.holder.ID != self {
			return kvpb.Intent{Key: []byte(string(start)), Txn: l.holder}, true
		}
		return kvpb.Intent{}, false
	}
	for k, l := range t.unrepl {
		if t.locks[k] != l {
			delete(t.unrepl, k)
			continue
		}
		if l.holder.ID != self && k >= string(start) && k < string(end) {
			return kvpb.Intent{Key: []byte(k), Txn: l.holder}, true
		}
	}
	return kvpb.Intent{}, false
}

// unreplicatedIn returns the unreplicated locks in [start, end) (end empty:
// to the end of the table), in key order.
func (t *lockTable) unreplicatedIn(start, end []byte) []kvpb.Intent {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []kvpb.Intent
	for k, l := range t.unrepl {
		if t.locks[k] != l {
			delete(t.unrepl, k)
			continue
		}
		if k >= string(start) && (len(end) == 0 || k < string(end)) {
			out = append(out, kvpb.Intent{Key: []byte(k), Txn: l.holder})
		}
	}
	slices.SortFunc(out, func(a, b kvpb.Intent) int { return bytes.Compare(a.Key, b.Key) })
	return out
}

// releaseUnreplicated drops txn's unreplicated locks in span (nil: all of
// them), waking their waiters. Intents are left alone.
func (t *lockTable) releaseUnreplicated(txn uuid.UUID, span *kvpb.Span) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, l := range t.unrepl {
		if t.locks[k] != l {
			delete(t.unrepl, k)
			continue
		}
		if l.holder.ID != txn {
			continue
		}
		if span != nil && !(k >= string(span.Key) && k < string(spanEnd(*span))) {
			continue
		}
		t.dropLocked(k, l)
	}
	t.shrinkLocked()
}

// wake closes the waiters' channel, if any waiter made one; the next
// waiter makes a new one.
func (l *lockState) wake() {
	if l.released != nil {
		close(l.released)
		l.released = nil
	}
}

// releaseAll drops every lock each release's transaction holds in its span,
// in O(locks·log spans) rather than a pass over the table per span: a
// transaction that wrote many keys (CREATE INDEX, COPY) ends with up to
// MaxLockSpans spans, points and condensed ranges, and a table holding as
// many locks, so a pass over the table per span was quadratic (most of the
// CPU time of a 100k-row CREATE INDEX). Points are looked up directly; the
// ranges of each transaction are sorted and merged, and one pass over the
// table finds the locks inside them by binary search.
func (t *lockTable) releaseAll(rels []LockRelease) {
	if len(rels) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.shrinkLocked()
	var ranges map[uuid.UUID][]kvpb.Span
	for _, rel := range rels {
		if len(rel.Span.EndKey) == 0 {
			t.releaseLocked(string(rel.Span.Key), rel.Txn)
			continue
		}
		if ranges == nil {
			ranges = make(map[uuid.UUID][]kvpb.Span)
		}
		ranges[rel.Txn] = append(ranges[rel.Txn], rel.Span)
	}
	if len(ranges) == 0 || len(t.locks) == 0 {
		return
	}
	for txn, spans := range ranges {
		ranges[txn] = mergeRanges(spans)
	}
	for k, l := range t.locks {
		spans, ok := ranges[l.holder.ID]
		if !ok {
			continue
		}
		// The last span starting at or before k is the only one that can
		// contain it: the spans are merged, so disjoint and sorted.
		i, _ := slices.BinarySearchFunc(spans, k, func(s kvpb.Span, k string) int {
			if string(s.Key) <= k {
				return -1
			}
			return 1
		})
		if i > 0 && k < string(spans[i-1].EndKey) {
			t.dropLocked(k, l)
		}
	}
}

// mergeRanges sorts range spans (all with an EndKey) by start key and merges
// the overlapping or touching ones.
func mergeRanges(spans []kvpb.Span) []kvpb.Span {
	slices.SortFunc(spans, func(a, b kvpb.Span) int { return bytes.Compare(a.Key, b.Key) })
	out := spans[:1]
	for _, s := range spans[1:] {
		last := &out[len(out)-1]
		if bytes.Compare(s.Key, last.EndKey) <= 0 {
			if bytes.Compare(s.EndKey, last.EndKey) > 0 {
				last.EndKey = s.EndKey
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// wakeRange wakes the waiters of every lock txn holds in [start, end)
// without releasing the locks (they moved to a higher timestamp).
func (t *lockTable) wakeRange(start, end []byte, txn uuid.UUID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, l := range t.locks {
		if l.holder.ID == txn && bytes.Compare([]byte(k), start) >= 0 && bytes.Compare([]byte(k), end) < 0 {
			l.wake()
			l.waiters = nil
		}
	}
}

// enqueue registers a waiter (waiterTxn, uuid.Nil if none) on the intent
// and returns the channel closed when that lock is released. If the table
// did not know the intent it adds it first. The caller must hold latches
// covering the key, so the lock cannot be released between the evaluation
// that met it and this call.
func (t *lockTable) enqueue(in kvpb.Intent, waiterTxn uuid.UUID) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.locks[string(in.Key)]
	if !ok || l.holder.ID != in.Txn.ID {
		l = t.acquireLocked(in.Key, in.Txn)
	}
	l.waiters = append(l.waiters, waiterTxn)
	l.contended = true
	if l.released == nil {
		l.released = make(chan struct{})
	}
	return l.released
}

// dequeue removes one waiter entry of waiterTxn from the lock on key, if
// the lock is still there.
func (t *lockTable) dequeue(key []byte, waiterTxn uuid.UUID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.locks[string(key)]; ok {
		if i := slices.Index(l.waiters, waiterTxn); i >= 0 {
			l.waiters = slices.Delete(l.waiters, i, i+1)
		}
	}
}

// splitOff moves the locks at or after key into a new table, waking their
// waiters so they re-evaluate (and find the key now belongs to another
// tablet). The split replicated the unreplicated locks there first
// (replicateUnreplicated), so none is left to move; one that were would be
// dropped, as the right side's lease starts from what storage holds.
func (t *lockTable) splitOff(key []byte) *lockTable {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := newLockTable()
	r.observeHold = t.observeHold
	for k, l := range t.locks {
		if bytes.Compare([]byte(k), key) >= 0 {
			l.wake()
			delete(t.locks, k)
			if l.unrepl {
				delete(t.unrepl, k)
				continue
			}
			r.locks[k] = &lockState{holder: l.holder}
		}
	}
	r.peak = len(r.locks)
	t.shrinkLocked()
	return r
}

// maxLocksScanned bounds how many locks noneIn compares against a span
// before it gives up and answers false (the read then looks in the engine).
const maxLocksScanned = 64

// noneIn reports whether the table proves that the engine holds no intent in
// the span [start, end) (end nil: the key start). It relies on invariant 11:
// every intent in the engine within the replica's span is in the table, for
// any key the caller holds a latch on. A false answer proves nothing.
func (t *lockTable) noneIn(start, end []byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.locks) == 0 {
		return true
	}
	if end == nil {
		l, ok := t.locks[string(start)]
		return !ok || l.unrepl
	}
	if len(t.locks) > maxLocksScanned {
		return false
	}
	for k, l := range t.locks {
		if !l.unrepl && k >= string(start) && k < string(end) {
			return false
		}
	}
	return true
}

// keys returns the keys of the locks in the table, sorted (for tests that
// compare the table with the engine).
func (t *lockTable) keys() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.locks))
	for k := range t.locks {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// String lists the locks in key order with their holders and waiters, for
// tests.
func (t *lockTable) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.locks))
	for k := range t.locks {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		l := t.locks[k]
		kind := ""
		if l.unrepl {
			kind = " unreplicated"
		}
		fmt.Fprintf(&b, "%q holder=%s%s waiters=%d\n", k, l.holder.Short(), kind, len(l.waiters))
	}
	return b.String()
}

func (t *lockTable) numWaiters() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, l := range t.locks {
		n += len(l.waiters)
	}
	return n
}

func (t *lockTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.locks)
}
