package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/cairn-db/cairn/clusterversion"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/raftnode"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/tablet"
)

// Config configures a store and the replicas it opens. Zero fields take
// the tablet package's defaults.
type Config struct {
	// Observe: see tablet.Config.
	Observe *tablet.Observers
	// Version: see tablet.Config.
	Version *clusterversion.Handle
	// TxnLivenessThreshold: see tablet.Config.
	TxnLivenessThreshold time.Duration
	// MaxValueSize: see tablet.Config.
	MaxValueSize int
	// PushPollInterval: see tablet.Config.
	PushPollInterval time.Duration
	// TSCacheMaxEntries: see tablet.Config.
	TSCacheMaxEntries int
	// RowCacheBytes bounds the row caches of the store's replicas
	// together (tablet.RowCache): 0 is tablet.DefaultRowCacheBytes, a
	// negative size turns the row cache off.
	RowCacheBytes int64
	// Sender carries pushes, queries and intent resolution between tablets.
	// Nil means the store itself, which is right for a single node.
	Sender kvpb.Sender
	// VerifyLockTable: see tablet.Config (tests set it).
	VerifyLockTable bool
	// Raft, when set, makes every tablet a raft group on Raft.Node
	// (raft.go); nil keeps the unreplicated path of a single node.
	Raft *RaftConfig
	// Load, when set, counts the batches each tablet serves by gateway
	// node (load.go), for the lease balancer to follow; nil counts
	// nothing.
	Load *RequestLoad

	// The split queue (splitqueue.go; it runs only under RunSplitQueue).
	// SplitSize is the data size past which a tablet splits (0:
	// DefaultSplitSize, negative: never by size); SplitQPS the batches per
	// second past which it splits by load (0: DefaultSplitQPS, negative:
	// never by load); SplitInterval how often the queue looks (0: 1s).
	SplitSize     int64
	SplitQPS      float64
	SplitInterval time.Duration
	// SplitByLoadUseful, when set, is asked before a split by load: false
	// skips it (splitqueue.go, "by load"). The server's says whether the
	// cluster has another node to take one half's lease. Nil: always.
	SplitByLoadUseful func() bool
	// SplitHeldByLoad, when set, is asked too, per tablet: true skips a
	// split by load because the tablet's requests hold its lease on this
	// node (RequestLoad.HeldBy; the server's, on a node without a region:
	// one gateway sends most of them, and the tablet is alone in its
	// lease domain), where both halves' leases would stay. Nil: never.
	SplitHeldByLoad func(tablet uint64) bool
	// SplitUnit names the span around a key that a split must not divide
	// (ok false: split at any row boundary). Nil keeps the system span
	// [keys.Min, keys.TableDataMin) whole; a node serving SQL passes
	// rowenc.SplitUnit, which also keeps shared (colocated) groups whole.
	SplitUnit func(key []byte) (unit kvpb.Span, ok bool)

	// The GC queue (gcqueue.go; it runs only under RunGCQueue, and
	// GCPass). GCInterval is how often it looks (0: 1s); GCTTL gives the
	// GC TTL of the tablet starting at a key (nil or 0: DefaultGCTTL);
	// GCProtected the oldest timestamp any reader still needs (empty:
	// none; it lowers the threshold); GCFraction the share of a tablet's
	// bytes that must be garbage before it is collected (0:
	// DefaultGCFraction).
	GCInterval  time.Duration
	GCTTL       func(startKey []byte) time.Duration
	GCProtected func(ctx context.Context) (hlc.Timestamp, error)
	GCFraction  float64
	// GCRepacker, when set, lets GC repack rows (mvcc invariant 10): the
	// tablets' GC requests use it and the queue's plans count what it
	// would fold.
	GCRepacker mvcc.Repacker
	// GCTxnCleanupAge is how old an intent's transaction, or a final
	// record, must be before the GC queue's transaction cleanup
	// (txncleanup.go) looks at it (0: DefaultGCTxnCleanupAge).
	GCTxnCleanupAge time.Duration
}

// Store is one node's set of tablets over one engine. It implements
// kvpb.Sender and is safe for concurrent use.
type Store struct {
	eng   *storage.Engine
	clock *hlc.Clock
	cfg   Config

	// closer counts the trailing closer's work (CloserStats).
	closer closerCounters

	// Splits are not serialized store-wide: a split holds latches over
	// its whole tablet (tablet.Replica.Split), so splits of one tablet
	// queue there and splits of different tablets (the buckets of a new
	// hash-sharded index, split in parallel by sql/ddl) run at once;
	// tablet IDs come from idMu's counter, or the replicated one.
	// idMu serializes the tablet ID counter's read-modify-writes.
	idMu sync.Mutex
	// idBlock is the block of replicated tablet IDs this store reserved
	// and has not used yet ([next, end); raft.go).
	idBlock struct {
		mu        sync.Mutex
		next, end kvpb.TabletID
	}
	// descMu guards lastDescs, the replica descriptors last recorded in
	// the store (member.go, PersistDescriptors).
	descMu    sync.Mutex
	lastDescs []byte
	// placed records when each bucket lease was placed at its index's
	// creation (spread.go), for the lease balancer's hold (PlacedAt).
	placed placedLeases

	// stop is cancelled by Close, cancelling every request in flight;
	// inflight counts them so Close can wait before replicas close.
	stop   context.Context
	cancel context.CancelFunc
	// inflight is the count of requests in flight (begin, end) with
	// closedBit set once Close has begun: one atomic add per begin and
	// per end, where the store's RWMutex (read-locked around a
	// WaitGroup's Add) and the WaitGroup's Done were four on two shared
	// cache lines per request (invariant 7). The end that takes the
	// count to zero after Close began closes drained, once.
	inflight  atomic.Int64
	drained   chan struct{}
	drainOnce sync.Once
	// routes is a copy of mu.replicas, replaced whole (under mu) each
	// time the map changes, so that routing a batch (Replica,
	// replicaForKey) reads it without the store's lock (invariant 8).
	routes atomic.Pointer[map[kvpb.TabletID]*tablet.Replica]
	// reads is the timestamp cache's table of non-transactional row
	// reads that the store's replicas share (tablet.ReadTable).
	reads *tablet.ReadTable
	// rows is the budget of the replicas' row caches (nil: off).
	rows *tablet.RowCache
	// bgCtx is the context of every request sent with
	// context.Background() (see stopCtx), built once so that routing such
	// a request allocates nothing (invariant 7).
	bgCtx context.Context

	// splits counts the split queue's splits (SplitQueueStats).
	splits splitStats
	// gc is the GC queue's state and counters (gcqueue.go).
	gc struct {
		q     gcQueue
		stats gcStats
	}

	mu struct {
		sync.RWMutex
		closed   bool
		replicas map[kvpb.TabletID]*tablet.Replica
		raftErr  error
	}
}

var _ kvpb.Sender = (*Store)(nil)

// nextTabletIDKey is the store-local counter of tablet IDs (invariant 3).
var nextTabletIDKey = keys.StoreLocal("next-tablet-id")

// firstTabletID is the ID of the tablet a bootstrap creates.
const firstTabletID kvpb.TabletID = 1

// Open opens the store over eng: on an empty engine it bootstraps one
// tablet over [keys.Min, keys.Max); otherwise it opens every tablet the
// directory lists. The caller keeps ownership of eng and closes it after
// Close.
func Open(ctx context.Context, eng *storage.Engine, clock *hlc.Clock, cfg Config) (*Store, error) {
	s := &Store{eng: eng, clock: clock, cfg: cfg, reads: tablet.NewReadTable(tablet.DefaultReadTableSlots)}
	if rc := cfg.RowCacheBytes; rc == 0 {
		s.rows = tablet.NewRowCache(tablet.DefaultRowCacheBytes)
	} else {
		s.rows = tablet.NewRowCache(rc)
	}
	s.stop, s.cancel = context.WithCancel(context.Background())
	s.drained = make(chan struct{})
	s.bgCtx = stopCtx{Context: context.Background(), stop: s.stop}
	s.mu.replicas = make(map[kvpb.TabletID]*tablet.Replica)
	s.gc.q.tablets = make(map[kvpb.TabletID]*gcTabletState)
	if cfg.Raft != nil {
		// Before anything reads the directory or a replica's raft
		// state: a streamed snapshot a crash interrupted after its
		// ingest is finished here (raftnode/snapshot.go).
		if err := raftnode.RecoverSnapshots(eng); err != nil {
			return nil, fmt.Errorf("store: open: %w", err)
		}
	}
	descs, err := tablet.ReadDirectory(eng)
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	member := cfg.Raft != nil && cfg.Raft.Membership
	if member {
		if descs, err = s.memberTablets(descs); err != nil {
			return nil, err
		}
	} else {
		if len(descs) == 0 {
			d, err := s.bootstrap()
			if err != nil {
				return nil, err
			}
			descs = []kvpb.TabletDescriptor{d}
		}
		if err := checkTiling(descs); err != nil {
			return nil, err
		}
	}
	for _, d := range descs {
		r, err := tablet.New(eng, clock, d, s.tabletConfig())
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("store: open tablet %s: %w", &d, err)
		}
		if s.cfg.Raft != nil {
			peers := s.cfg.Raft.Peers
			if member && (d.TabletID != firstTabletID || d.Generation != 0) {
				// Only the bootstrap tablet starts from the configured
				// peers; every other tablet of a member came with its
				// raft state (memberTablets).
				peers = nil
			}
			// A tablet this node learned of through a snapshot of
			// another waits for its own group's snapshot, whatever
			// its engine holds in its span.
			if wait, err := tablet.AwaitsSnapshot(eng, d.TabletID); err != nil {
				s.Close()
				return nil, fmt.Errorf("store: open tablet %s: %w", &d, err)
			} else if wait {
				peers = nil
			}
			if err := s.joinGroup(r, peers, false); err != nil {
				s.Close()
				return nil, err
			}
		}
		s.mu.replicas[d.TabletID] = r
	}
	s.mu.Lock()
	s.publishRoutesLocked()
	s.mu.Unlock()
	return s, nil
}

// bootstrap writes the first tablet's descriptor and the ID counter in one
// synced batch.
func (s *Store) bootstrap() (kvpb.TabletDescriptor, error) {
	d := kvpb.TabletDescriptor{TabletID: firstTabletID, StartKey: keys.Min, EndKey: keys.Max}
	b := s.eng.NewWriteOnlyBatch()
	defer b.Close()
	if err := tablet.WriteDescriptor(b, d); err != nil {
		return d, fmt.Errorf("store: bootstrap: %w", err)
	}
	if err := b.Put(storage.MVCCKey{Key: nextTabletIDKey}, binary.BigEndian.AppendUint64(nil, uint64(firstTabletID)+1)); err != nil {
		return d, fmt.Errorf("store: bootstrap: %w", err)
	}
	if err := b.Commit(); err != nil {
		return d, fmt.Errorf("store: bootstrap: %w", err)
	}
	return d, nil
}

// checkTiling verifies invariant 2 over descriptors in key order.
func checkTiling(descs []kvpb.TabletDescriptor) error {
	prev := keys.Min
	for _, d := range descs {
		if !bytes.Equal(d.StartKey, prev) {
			return fmt.Errorf("%w: %s starts at %q, want %q", ErrBadDirectory, &d, d.StartKey, prev)
		}
		prev = d.EndKey
	}
	if !bytes.Equal(prev, keys.Max) {
		return fmt.Errorf("%w: last tablet ends at %q", ErrBadDirectory, prev)
	}
	return nil
}

// RowCache is the budget the store's replicas' row caches share (nil:
// the row cache is off).
func (s *Store) RowCache() *tablet.RowCache { return s.rows }

func (s *Store) tabletConfig() tablet.Config {
	sender := s.cfg.Sender
	if sender == nil {
		sender = s
	}
	return tablet.Config{
		TxnLivenessThreshold: s.cfg.TxnLivenessThreshold,
		MaxValueSize:         s.cfg.MaxValueSize,
		PushPollInterval:     s.cfg.PushPollInterval,
		TSCacheMaxEntries:    s.cfg.TSCacheMaxEntries,
		Reads:                s.reads,
		RowCache:             s.rows,
		Sender:               sender,
		Lookup:               s.LookupTablet,
		VerifyLockTable:      s.cfg.VerifyLockTable,
		OnSplit:              s.onSplit,
		OnSplitBySnapshot:    s.onSplitBySnapshot,
		Repacker:             s.evalRepacker(),
		Observe:              s.cfg.Observe,
		Version:              s.cfg.Version,
	}
}

// Close refuses new requests, cancels those in flight (waiting ones return
// their context's error) and waits for them, then closes every replica
// (stopping background resolution). It does not close the engine, which is
// safe to close once Close returns.
func (s *Store) Close() {
	if s.cfg.Raft != nil && s.cfg.Raft.Membership {
		// Best effort: the membership loop records them every second.
		_ = s.PersistDescriptors()
	}
	s.mu.Lock()
	s.mu.closed = true
	reps := make([]*tablet.Replica, 0, len(s.mu.replicas))
	for _, r := range s.mu.replicas {
		reps = append(reps, r)
	}
	s.mu.Unlock()
	if s.inflight.Or(closedBit)&^closedBit == 0 {
		// Nothing in flight: a begin from now on sees the bit and
		// leaves at once, so nothing will be.
		s.drainOnce.Do(func() { close(s.drained) })
	}
	s.cancel()
	<-s.drained
	for _, r := range reps {
		r.Close()
	}
}

// Tablets returns the descriptors of the store's tablets in key order.
func (s *Store) Tablets() []kvpb.TabletDescriptor {
	s.mu.RLock()
	out := make([]kvpb.TabletDescriptor, 0, len(s.mu.replicas))
	for _, r := range s.mu.replicas {
		if d := r.Desc(); !placeholder(d) {
			out = append(out, d)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b kvpb.TabletDescriptor) int { return bytes.Compare(a.StartKey, b.StartKey) })
	return out
}

// Replica returns the replica of tablet id, or nil.
func (s *Store) Replica(id kvpb.TabletID) *tablet.Replica {
	if m := s.routes.Load(); m != nil {
		return (*m)[id]
	}
	// Open has not published the map yet.
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.replicas[id]
}

// replicaForKey returns the replica whose current span holds key, or nil.
// A linear scan: a store holds few enough tablets for now that an ordered
// index is not worth its upkeep on splits.
//
// A split registers its right-hand replica (publishing a new copy of the
// map) before it shrinks the left one's descriptor, but a scan of an
// older copy can meet the shrunk left without the right: a copy that
// answers nil is asked again once a newer one was published, and nil is
// the answer only from a copy that was still the newest after its scan.
func (s *Store) replicaForKey(key []byte) *tablet.Replica {
	m := s.routes.Load()
	if m == nil {
		// Open has not published the map yet.
		s.mu.RLock()
		defer s.mu.RUnlock()
		m = &s.mu.replicas
		return findReplica(*m, key)
	}
	for {
		if r := findReplica(*m, key); r != nil {
			return r
		}
		next := s.routes.Load()
		if next == m {
			return nil
		}
		m = next
	}
}

func findReplica(m map[kvpb.TabletID]*tablet.Replica, key []byte) *tablet.Replica {
	for _, r := range m {
		if d := r.Desc(); d.ContainsKey(key) {
			return r
		}
	}
	return nil
}

// publishRoutesLocked publishes a copy of mu.replicas for routing
// (invariant 8); every change to the map calls it under mu. A copy per
// registration or removal (splits, replicas joining or leaving) costs
// O(tablets), once; routing reads it per batch.
func (s *Store) publishRoutesLocked() {
	m := maps.Clone(s.mu.replicas)
	s.routes.Store(&m)
}

func (s *Store) register(r *tablet.Replica) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.replicas[r.Desc().TabletID] = r
	s.publishRoutesLocked()
}

// LookupTablet returns the descriptor of the tablet holding key, or with
// reverse the tablet holding the keys just before key (StartKey < key <=
// EndKey). It reads the directory through the engine (invariant 1).
func (s *Store) LookupTablet(ctx context.Context, key []byte, reverse bool) (kvpb.TabletDescriptor, error) {
	inRange := keys.IsAddressable(key)
	if reverse {
		inRange = bytes.Compare(key, keys.Min) > 0 && bytes.Compare(key, keys.Max) <= 0
	}
	if !inRange {
		return kvpb.TabletDescriptor{}, &kvpb.InvalidArgumentError{Msg: fmt.Sprintf("key %q is outside the addressable keyspace", key)}
	}
	d, found, err := tablet.LookupDirectory(s.eng, key, reverse)
	if err != nil {
		return d, fmt.Errorf("store: look up %q: %w", key, err)
	}
	if !found {
		return d, fmt.Errorf("store: look up %q: %w", key, ErrNoTablet)
	}
	return d, nil
}

// routeTries bounds re-routing of a key-routed batch that raced splits:
// each retry follows a split that really happened, so this only guards
// against a key moved by one split after another.
const routeTries = 16

// Send routes ba to its tablet: the one named by ba.TabletID, or with a
// zero TabletID the one holding the first request's key. A SplitRequest
// must be alone in its batch and is handled by Split.
func (s *Store) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	ctx, rc, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer s.end(rc)
	return s.send(ctx, ba)
}

// begin registers an operation in flight: its context is cancelled by
// Close, which waits for end(rc). rc is nil for context.Background(),
// whose requests share bgCtx; any other caller's context is wrapped in
// a reqCtx without being asked for its Done channel, which a
// cancellable context makes on the first call (invariant 7).
func (s *Store) begin(ctx context.Context) (context.Context, *reqCtx, error) {
	// Counted before the check: a Close that set the bit after this add
	// waits for this request; one that set it before is seen here.
	if s.inflight.Add(1)&closedBit != 0 {
		s.leave()
		return nil, nil, ErrClosed
	}
	if ctx == context.Background() {
		return s.bgCtx, nil, nil
	}
	rc := &reqCtx{Context: ctx, stop: s.stop}
	return rc, rc, nil
}

// end ends an operation begin registered.
func (s *Store) end(rc *reqCtx) {
	if rc != nil {
		rc.release()
	}
	s.leave()
}

// closedBit marks inflight once Close has begun; the bits below it count
// the requests in flight.
const closedBit = int64(1) << 62

// leave uncounts a request; the last one out after Close began lets
// Close go on.
func (s *Store) leave() {
	if s.inflight.Add(-1) == closedBit {
		s.drainOnce.Do(func() { close(s.drained) })
	}
}

func (s *Store) send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	if len(ba.Requests) == 0 {
		return nil, &kvpb.InvalidArgumentError{Msg: "empty batch"}
	}
	for _, req := range ba.Requests {
		if sp, ok := req.(*kvpb.SplitRequest); ok {
			if len(ba.Requests) != 1 {
				return nil, &kvpb.InvalidArgumentError{Msg: "a Split must be alone in its batch"}
			}
			left, right, err := s.split(ctx, sp.SplitKey)
			if err != nil {
				return nil, err
			}
			return &kvpb.BatchResponse{Responses: []kvpb.Response{&kvpb.SplitResponse{Left: left, Right: right}}, Now: s.clock.Now()}, nil
		}
	}
	if sl, ok := ba.Requests[0].(*kvpb.SpreadLeaseRequest); ok {
		if len(ba.Requests) != 1 {
			return nil, &kvpb.InvalidArgumentError{Msg: "a SpreadLease must be alone in its batch"}
		}
		resp, err := s.spreadLease(ctx, sl)
		if err != nil {
			return nil, err
		}
		return &kvpb.BatchResponse{Responses: []kvpb.Response{resp}, Now: s.clock.Now()}, nil
	}
	if pl, ok := ba.Requests[0].(*kvpb.PlacementRequest); ok {
		if len(ba.Requests) != 1 {
			return nil, &kvpb.InvalidArgumentError{Msg: "a Placement must be alone in its batch"}
		}
		resp, err := s.placement(ctx, pl)
		if err != nil {
			return nil, err
		}
		return &kvpb.BatchResponse{Responses: []kvpb.Response{resp}, Now: s.clock.Now()}, nil
	}
	if ba.TabletID != 0 {
		r := s.Replica(ba.TabletID)
		if r == nil {
			return nil, &kvpb.TabletNotFoundError{TabletID: ba.TabletID}
		}
		br, err := r.Send(ctx, ba)
		if err == nil {
			s.cfg.Load.Record(uint64(ba.TabletID), ba.GatewayNode)
		}
		return br, err
	}
	key := ba.Requests[0].Span().Key
	if !keys.IsAddressable(key) {
		return nil, &kvpb.InvalidArgumentError{Msg: fmt.Sprintf("key %q is outside the addressable keyspace", key)}
	}
	var err error
	for range routeTries {
		r := s.replicaForKey(key)
		if r == nil {
			// Between a split's registration and the left side shrinking
			// two replicas claim the key, never none; none means the
			// directory is broken.
			return nil, fmt.Errorf("store: route %q: %w", key, ErrNoTablet)
		}
		routed := r.Desc()
		var br *kvpb.BatchResponse
		br, err = r.Send(ctx, ba)
		var mismatch *kvpb.TabletKeyMismatchError
		if err == nil {
			s.cfg.Load.Record(uint64(routed.TabletID), ba.GatewayNode)
		}
		if err == nil || !errors.As(err, &mismatch) || !movedOn(r, routed, key) {
			return br, err
		}
		// The tablet split under us: route again.
	}
	return nil, err
}

// movedOn reports whether a key-routed batch that r refused as outside
// its span should be routed again: r split after routed was read, or r
// no longer holds key at all. The second case is a split that landed
// between the directory lookup and the read of routed (so routed is
// already the shrunk descriptor and the generations match): the
// directory then leads elsewhere, and comparing generations alone
// returned the mismatch to the caller (seen as TestConcurrentSplits
// failing under load).
func movedOn(r *tablet.Replica, routed kvpb.TabletDescriptor, key []byte) bool {
	d := r.Desc()
	return d.Generation != routed.Generation || !d.ContainsKey(key)
}

// Split splits the tablet holding splitKey at splitKey (see tablet.Split).
// splitKey must be strictly inside that tablet.
func (s *Store) Split(ctx context.Context, splitKey []byte) (left, right kvpb.TabletDescriptor, err error) {
	ctx, rc, err := s.begin(ctx)
	if err != nil {
		return left, right, err
	}
	defer s.end(rc)
	return s.split(ctx, splitKey)
}

func (s *Store) split(ctx context.Context, splitKey []byte) (left, right kvpb.TabletDescriptor, err error) {
	if !keys.IsAddressable(splitKey) {
		return left, right, &kvpb.InvalidArgumentError{Msg: fmt.Sprintf("split key %q is outside the addressable keyspace", splitKey)}
	}
	// Each retry follows a split of the routed tablet that really
	// happened, and many splitters racing on one tablet (the buckets of a
	// new index) may each lose many times: no bound but the context.
	for ctx.Err() == nil {
		r := s.replicaForKey(splitKey)
		if r == nil && s.cfg.Raft != nil && s.cfg.Raft.Membership {
			// A member need not hold every tablet: the router tries the
			// tablet's other nodes.
			return left, right, &kvpb.TabletNotFoundError{}
		}
		if r == nil {
			return left, right, fmt.Errorf("store: split at %q: %w", splitKey, ErrNoTablet)
		}
		routed := r.Desc()
		left, right, err = s.splitReplica(ctx, r, splitKey)
		var mismatch *kvpb.TabletKeyMismatchError
		if err == nil || !errors.As(err, &mismatch) || !movedOn(r, routed, splitKey) {
			return left, right, err
		}
		// Another split of this tablet went first: route again.
	}
	return left, right, ctx.Err()
}

func (s *Store) splitReplica(ctx context.Context, r *tablet.Replica, splitKey []byte) (left, right kvpb.TabletDescriptor, err error) {
	if s.cfg.Raft != nil {
		// Only the leaseholder splits; others send the router on before
		// spending an ID.
		id := r.Desc().TabletID
		if rep := s.cfg.Raft.Node.Replica(uint64(id)); rep != nil {
			if term, leader := rep.Lease(); term == 0 && leader != rep.NodeID() {
				return left, right, &kvpb.NotLeaseholderError{TabletID: id, Replica: rep.NodeID(), Leader: leader}
			}
		}
	}
	if d := r.Desc(); bytes.Equal(d.StartKey, splitKey) {
		return left, right, &kvpb.InvalidArgumentError{Msg: fmt.Sprintf("split key %q is not strictly inside %s", splitKey, &d)}
	}
	var id kvpb.TabletID
	if s.cfg.Raft != nil {
		// Leaders on different nodes may split at once: the ID comes from
		// a replicated counter.
		id, err = s.allocateReplicatedTabletID(ctx)
	} else {
		id, err = s.allocateTabletID()
	}
	if err != nil {
		return left, right, err
	}
	return r.Split(ctx, splitKey, id, s.register)
}

// allocateTabletID persists the counter past the ID it returns, so a crash
// after this never reuses it (invariant 3).
func (s *Store) allocateTabletID() (kvpb.TabletID, error) {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	v, ok, err := s.eng.Get(storage.MVCCKey{Key: nextTabletIDKey})
	if err != nil {
		return 0, fmt.Errorf("store: read tablet id counter: %w", err)
	}
	if !ok || len(v) != 8 {
		return 0, fmt.Errorf("store: tablet id counter missing or malformed (%d bytes)", len(v))
	}
	id := binary.BigEndian.Uint64(v)
	b := s.eng.NewWriteOnlyBatch()
	defer b.Close()
	if err := b.Put(storage.MVCCKey{Key: nextTabletIDKey}, binary.BigEndian.AppendUint64(nil, id+1)); err != nil {
		return 0, fmt.Errorf("store: advance tablet id counter: %w", err)
	}
	if err := b.Commit(); err != nil {
		return 0, fmt.Errorf("store: advance tablet id counter: %w", err)
	}
	return kvpb.TabletID(id), nil
}
