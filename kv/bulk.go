package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/storage"
)

// Bulk writes: committed values a transaction writes into storage that
// only it can reach until it commits (kvpb.BulkPutRequest says what the
// caller guarantees). They are not the transaction's writes: no intent,
// no lock span, nothing to resolve at commit, and a rollback does not
// remove them (they stay as unreachable garbage). What makes them the
// transaction's is their timestamp, just below its read timestamp: its
// own reads see them, and every write it makes later lands above them.

// BulkPut adds a kvpb.BulkPutRequest of value at key. Only Txn.RunBulk
// accepts it.
func (b *Batch) BulkPut(key, value []byte, mustNotExist bool) {
	// The requests come from chunks, not one allocation each: a bulk
	// load adds one per row and index entry, 10,000 rows a batch. The
	// chunks are never reused, so a request stays valid as long as
	// anything holds it.
	if len(b.bulkPuts) == cap(b.bulkPuts) {
		b.bulkPuts = make([]kvpb.BulkPutRequest, 0, min(max(2*cap(b.bulkPuts), 16), bulkPutChunk))
	}
	b.bulkPuts = append(b.bulkPuts, kvpb.BulkPutRequest{Key: key, Value: value, MustNotExist: mustNotExist})
	b.reqs = append(b.reqs, &b.bulkPuts[len(b.bulkPuts)-1])
}

// bulkPutChunk is the largest chunk of requests BulkPut allocates at once.
const bulkPutChunk = 1024

// RunBulk sends b, which must hold only BulkPuts, outside the transaction
// at a timestamp just below its read timestamp. It fails if the
// transaction cannot be used (finished, aborted, awaiting a retry). A
// failure may leave some of b written: the caller must then not make the
// storage reachable (fail the statement, and so the transaction).
func (t *Txn) RunBulk(ctx context.Context, b *Batch) error {
	if len(b.reqs) == 0 {
		b.Results = nil
		return nil
	}
	for _, r := range b.reqs {
		if r.Method() != kvpb.MethodBulkPut {
			return fmt.Errorf("kv: RunBulk of a %s", r.Method())
		}
	}
	t.mu.Lock()
	if err := t.usableLocked(); err != nil {
		t.mu.Unlock()
		return err
	}
	ts := t.mu.proto.ReadTimestamp.Prev()
	t.mu.Unlock()
	ba := &kvpb.BatchRequest{Requests: b.reqs}
	ba.Timestamp = ts
	br, err := t.db.ds.Send(ctx, ba)
	if err != nil {
		return err
	}
	t.bulkWritten()
	return b.fill(br)
}

// bulkWritten moves the transaction's commit timestamp to at least the
// clock's reading once a bulk write has been answered (applied on its
// tablets' leaseholders). The bulk values lie below the read timestamp,
// under any trailing closed timestamp a leaseholder published before
// they applied (docs/architecture.md, "AS OF SYSTEM TIME": a closing
// does not refuse them), and the storage they fill becomes readable with
// this transaction's commit: committing above the clock here puts that
// commit above every such closing, so a follower that serves a read at
// or above the commit closed past it after the bulk values applied, and
// holds them. Under SERIALIZABLE the commit then refreshes the
// transaction's reads up to there, as after any push.
func (t *Txn) bulkWritten() {
	now := t.db.clock.Now()
	t.mu.Lock()
	t.mu.proto.WriteTimestamp = t.mu.proto.WriteTimestamp.Forward(now)
	t.mu.Unlock()
}

// RunBulkAt sends b, which must hold only BulkPuts, outside any
// transaction at exactly ts: an online index build writes the entries it
// read at its backfill timestamp there, below the writes that concurrent
// writers make to the same index (they maintain it from the write-only
// state on, so anything they wrote shadows what the backfill read). The
// caller keeps a transaction reading at ts open meanwhile, so ts stays
// above the GC threshold.
func (db *DB) RunBulkAt(ctx context.Context, b *Batch, ts hlc.Timestamp) error {
	if len(b.reqs) == 0 {
		b.Results = nil
		return nil
	}
	for _, r := range b.reqs {
		if r.Method() != kvpb.MethodBulkPut {
			return fmt.Errorf("kv: RunBulkAt of a %s", r.Method())
		}
	}
	ba := &kvpb.BatchRequest{Requests: b.reqs}
	ba.Timestamp = ts
	br, err := db.ds.Send(ctx, ba)
	if err != nil {
		return err
	}
	return b.fill(br)
}

// AddSSTable ingests data, an SST of committed versions at exactly ts of
// keys in [start, end) (kvpb.AddSSTableRequest says what the caller
// guarantees), outside any transaction. The span should lie within one
// tablet; when it does not (the tablet split after the caller cut it),
// each tablet gets its part of the SST. It returns how many versions were
// ingested. The caller keeps ts above the GC threshold meanwhile (a
// transaction reading at ts, as for RunBulkAt).
func (db *DB) AddSSTable(ctx context.Context, start, end, data []byte, ts hlc.Timestamp) (int64, error) {
	if ts.IsEmpty() {
		return 0, fmt.Errorf("kv: AddSSTable without a timestamp")
	}
	ba := &kvpb.BatchRequest{Requests: []kvpb.Request{&kvpb.AddSSTableRequest{Key: start, EndKey: end, Data: data}}}
	ba.Timestamp = ts
	br, err := db.ds.Send(ctx, ba)
	if err != nil {
		return 0, err
	}
	if len(br.Responses) != 1 {
		return 0, fmt.Errorf("kv: AddSSTable answered with %d responses", len(br.Responses))
	}
	resp, ok := br.Responses[0].(*kvpb.AddSSTableResponse)
	if !ok {
		return 0, fmt.Errorf("kv: AddSSTable answered with a %s", br.Responses[0].Method())
	}
	return resp.Versions, nil
}

// DB returns the database the transaction runs on, for the few writes that
// must happen outside it (kvpb.IncrementRequest: sequences, storage IDs).
func (t *Txn) DB() *DB { return t.db }

// MarkNew records that this transaction attempt created the object named
// key (a table, say) with the writes it has made so far, so no other
// transaction can see it before this one commits. A restart
// (PrepareForRetry) forgets every mark, and a rollback to a savepoint
// taken before the mark forgets it (the writes that created the object
// are undone, and what they allocated may be handed out again).
func (t *Txn) MarkNew(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.created == nil {
		t.mu.created = map[string]int32{}
	}
	if _, ok := t.mu.created[key]; !ok {
		t.mu.created[key] = t.mu.proto.Sequence
	}
}

// IsNew reports whether MarkNew(key) holds in this attempt.
func (t *Txn) IsNew(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.mu.created[key]
	return ok
}

// forgetMarksAfterLocked drops the marks made after sequence seq.
func (t *Txn) forgetMarksAfterLocked(seq int32) {
	for k, s := range t.mu.created {
		if s > seq {
			delete(t.mu.created, k)
		}
	}
}

// BulkWrites turns a row writer's writes of new rows (sql/rowenc.Writes)
// into BulkPuts on Batch: a conditional put expecting no value becomes a
// BulkPut that must not find one. Anything else (a delete, a put over an
// expected value) has no place in a bulk load: it is refused by setting
// *Err, which the caller checks after each row.
type BulkWrites struct {
	Batch *Batch
	Err   *error
}

// Put adds a BulkPut of value at key.
func (w BulkWrites) Put(key, value []byte) { w.Batch.BulkPut(key, value, false) }

// CPut adds a BulkPut that must not find a value at key; a put expecting
// one is refused.
func (w BulkWrites) CPut(key, value, expected []byte, expectExists bool) {
	if expectExists || expected != nil {
		w.fail("conditional put over a value")
		return
	}
	w.Batch.BulkPut(key, value, true)
}

// Del is refused.
func (w BulkWrites) Del(key []byte) { w.fail("delete") }

// DelRange is refused.
func (w BulkWrites) DelRange(start, end []byte) { w.fail("range delete") }

func (w BulkWrites) fail(what string) {
	if *w.Err == nil {
		*w.Err = fmt.Errorf("kv: a bulk load cannot %s", what)
	}
}

// ClearRange removes every committed version in [start, end) outright,
// outside any transaction (kvpb.ClearRangeRequest says what the caller
// guarantees). The span may cover several tablets; each clears its part.
func (db *DB) ClearRange(ctx context.Context, start, end []byte) error {
	b := &Batch{}
	b.reqs = append(b.reqs, &kvpb.ClearRangeRequest{Key: start, EndKey: end})
	return db.Run(ctx, b)
}

// clearRangesBatch is how many ClearRange requests ClearRanges sends in
// one batch: a table of a shared hash group is freed as one span per
// bucket (65,536), which one batch would make one proposal per tablet of
// tens of thousands of range deletions.
const clearRangesBatch = 1024

// ClearRanges is ClearRange of each span, in batches of clearRangesBatch
// requests (each cut per tablet and sent in parallel). A batch that
// fails is sent again, up to clearRangesAttempts times in all with a
// growing pause: clearing is idempotent, and one refused sub-batch (a
// routing retry run out, a lease moving) among the 64 batches of a table
// in a shared group (7.5 to 10 s of clearing on a loaded machine) used
// to leave every span after it as it was, with the callers, which cannot
// fail for it, dropping the error. It stops at a batch that still fails,
// or one refused as invalid (kvpb.InvalidArgumentError: not table data),
// leaving the spans after it as they were.
func (db *DB) ClearRanges(ctx context.Context, spans []kvpb.Span) error {
	for len(spans) > 0 {
		n := min(len(spans), clearRangesBatch)
		var err error
		for attempt := range clearRangesAttempts {
			b := &Batch{}
			for _, sp := range spans[:n] {
				b.reqs = append(b.reqs, &kvpb.ClearRangeRequest{Key: sp.Key, EndKey: sp.EndKey})
			}
			if err = db.Run(ctx, b); err == nil {
				break
			}
			if _, invalid := errors.AsType[*kvpb.InvalidArgumentError](err); invalid || ctx.Err() != nil || attempt == clearRangesAttempts-1 {
				return err
			}
			db.clearRetries.Add(1)
			t := time.NewTimer(clearRangesPause << attempt)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
		spans = spans[n:]
	}
	return nil
}

// clearRangesAttempts and clearRangesPause bound ClearRanges' retries of
// one batch: 10, 20, 40 ... ms apart, about 5 s over the attempts, as
// long as a lease move or an election under load.
const (
	clearRangesAttempts = 10
	clearRangesPause    = 10 * time.Millisecond
)

// ClearRetries is how many times ClearRanges sent a batch again after
// it failed.
func (db *DB) ClearRetries() int64 { return db.clearRetries.Load() }

// afterCommitFn is an AfterCommit function and the write sequence it was
// registered at.
type afterCommitFn struct {
	seq int32
	fn  func(context.Context)
}

// AfterCommit registers fn to run once the transaction has committed,
// before Commit returns: work that must not happen unless the commit did,
// such as freeing the storage a committed TRUNCATE replaced. fn gets a
// context that outlives the caller's cancellation; it cannot fail the
// commit, so it must tolerate being cut short (what it leaves undone stays
// as garbage). A restart forgets every registration, and a rollback to a
// savepoint forgets those made after it, with the writes they belong to.
func (t *Txn) AfterCommit(fn func(ctx context.Context)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.afterCommit = append(t.mu.afterCommit, afterCommitFn{seq: t.mu.proto.Sequence, fn: fn})
}

// OnFinish registers fn to run once the transaction has ended, committed
// or rolled back (a rollback to a savepoint does not end it, and keeps
// the registration), on a background goroutine of the DB with its own
// deadline: how a bulk load settles the fresh storage it wrote, whose
// fate is known only then (sql/bulkclean). A transaction
// that ends with its process never runs it; the caller must keep a
// durable record for that case.
func (t *Txn) OnFinish(fn func(ctx context.Context)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.state != txnPending {
		return
	}
	t.mu.onFinish = append(t.mu.onFinish, fn)
}

// TxnOpen reports whether a transaction of db with id is open (begun,
// not yet committed or rolled back).
func (db *DB) TxnOpen(id uuid.UUID) bool {
	db.active.mu.Lock()
	open := make([]*Txn, 0, len(db.active.txns))
	for t := range db.active.txns {
		open = append(open, t)
	}
	db.active.mu.Unlock()
	// Outside the registry's lock, as ProtectedTimestamp reads them.
	for _, t := range open {
		if t.ID() == id {
			return true
		}
	}
	return false
}

// forgetAfterCommitAfterLocked drops the registrations made after write
// sequence seq.
func (t *Txn) forgetAfterCommitAfterLocked(seq int32) {
	t.mu.afterCommit = slices.DeleteFunc(t.mu.afterCommit, func(a afterCommitFn) bool { return a.seq > seq })
}

// afterCommitTimeout bounds the AfterCommit work of one commit.
const afterCommitTimeout = time.Minute

func (t *Txn) runAfterCommit(ctx context.Context) {
	t.mu.Lock()
	fns := t.mu.afterCommit
	t.mu.afterCommit = nil
	t.mu.Unlock()
	if len(fns) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), afterCommitTimeout)
	defer cancel()
	for _, a := range fns {
		a.fn(ctx)
	}
}

// SortedStream is the part of a bulk load whose keys arrive in strictly
// increasing order from one batch to the next (a table's primary index
// when COPY's input is in primary-key order), loaded into fresh storage
// that no other writer reaches (kvpb.BulkPutRequest's guarantee): no key
// of it can exist already and no other batch of the load holds one, so
// its uniqueness checks cannot fail, and its keys go into SSTs that the
// tablets ingest (AddSSTable) instead of BulkPuts through their
// memtables. The caller must call Take in the order the load builds its
// batches. Once a batch's keys do not continue the order the stream is
// broken: that batch and every later one go as BulkPuts, whose checks
// then find any duplicate of a key already ingested, provided the runs
// in flight and the stream's last SST (Flush) were ingested first
// (Broken).
//
// The stream fills one SST across batches and seals it only at its
// target tablet's end, at SortedSSTBytes, or when the bulk timestamp
// moves: a load of sorted input is then a few large SSTs, not one per
// batch (a 1M-row load was 100 SSTs of 10,000 rows, which an hdd paid
// for in seeks on every later scan of the table).
type SortedStream struct {
	// In selects the keys of the stream.
	In     func(key []byte) bool
	last   []byte
	broken bool
	// The SST being filled: its entries' timestamp and the end key of
	// the tablet it is for (nil: the last tablet).
	pending    *storage.SSTBuilder
	pendingTS  hlc.Timestamp
	pendingEnd []byte
	// SSTs counts the SSTs the stream's runs were ingested as.
	SSTs atomic.Int64
}

// Broken reports whether the stream's order broke: every batch from
// then on goes as BulkPuts. Its caller must let the runs still in flight
// finish, and ingest the stream's last SST (Flush), before it sends a
// BulkPut of the stream's keys, so that the BulkPut's uniqueness check
// meets any key they hold.
func (s *SortedStream) Broken() bool { return s.broken }

// SortedRun is what Take moved out of one batch: the SSTs the stream
// sealed meanwhile (none while the current one fills), to be ingested
// with the rest of the batch.
type SortedRun struct {
	stream *SortedStream
	ssts   []sealedSST
}

type sealedSST struct {
	start, end, data []byte
	ts               hlc.Timestamp
}

// SortedSSTBytes is the most entry bytes (keys and values, before
// compression) one SST of a sorted stream holds: as large as the tablet's
// limit on an SST travelling inline in a raft entry (32 MiB) allows with
// room for the SST's own blocks, index and filter. A variable so that
// tests can cut small SSTs.
var SortedSSTBytes int64 = 24 << 20

// Take moves the BulkPuts of b that the stream selects out of b, sorted,
// into the stream's SST when they continue its order: distinct, and above
// every key taken before. Otherwise (or once the stream is broken) it
// takes nothing and returns nil. The run is to be written with the rest
// of b by t.RunBulkSorted; the versions are at t's bulk timestamp (just
// below its read timestamp), as RunBulk's.
func (s *SortedStream) Take(ctx context.Context, t *Txn, b *Batch) (*SortedRun, error) {
	if s.broken {
		return nil, nil
	}
	// The common case, input in key order, is found in one pass over the
	// requests, with no sort and no list of the keys (built by appends,
	// that list was a twentieth of a sorted COPY's CPU: its copies and
	// their clearing): the batch then continues the stream if its first
	// key does.
	var first, prev []byte
	ascending := true
	for _, r := range b.reqs {
		if bp, ok := r.(*kvpb.BulkPutRequest); ok && s.In(bp.Key) {
			if first == nil {
				first = bp.Key
			} else if ascending && bytes.Compare(prev, bp.Key) >= 0 {
				ascending = false
			}
			prev = bp.Key
		}
	}
	if first == nil {
		return nil, nil
	}
	var kvs [][2][]byte
	if ascending {
		if s.last != nil && bytes.Compare(first, s.last) <= 0 {
			s.broken = true
			return nil, nil
		}
	} else {
		kvs = make([][2][]byte, 0, len(b.reqs))
		for _, r := range b.reqs {
			if bp, ok := r.(*kvpb.BulkPutRequest); ok && s.In(bp.Key) {
				kvs = append(kvs, [2][]byte{bp.Key, bp.Value})
			}
		}
		if s.last != nil && slices.ContainsFunc(kvs, func(e [2][]byte) bool { return bytes.Compare(e[0], s.last) <= 0 }) {
			// Not above what was taken: broken, without sorting the
			// batch to find out. A load whose input is not in key
			// order (a distributed table's rows, in hash order) used
			// to sort its second batch whole for this, up to 800,000
			// keys with a GIN index (the stream's span is the whole
			// group there).
			s.broken = true
			return nil, nil
		}
		slices.SortFunc(kvs, func(a, b [2][]byte) int { return bytes.Compare(a[0], b[0]) })
		for i := 1; i < len(kvs); i++ {
			if bytes.Compare(kvs[i-1][0], kvs[i][0]) >= 0 {
				// A key twice in the batch.
				s.broken = true
				return nil, nil
			}
		}
	}
	t.mu.Lock()
	err := t.usableLocked()
	ts := t.mu.proto.ReadTimestamp.Prev()
	t.mu.Unlock()
	if err != nil {
		return nil, err
	}
	run := &SortedRun{stream: s}
	put := func(key, value []byte) error {
		if s.pending != nil && (s.pending.DataBytes() >= SortedSSTBytes || s.pendingTS != ts ||
			(len(s.pendingEnd) > 0 && bytes.Compare(key, s.pendingEnd) >= 0)) {
			if err := s.seal(run); err != nil {
				return err
			}
		}
		if s.pending == nil {
			d, err := t.db.cache.Lookup(ctx, key, false)
			if err != nil {
				return fmt.Errorf("kv: looking up the tablet of %q: %w", key, err)
			}
			s.pending, s.pendingTS, s.pendingEnd = storage.NewSSTBuilder(), ts, d.EndKey
		}
		s.last = key
		return mvcc.PutSSTVersion(s.pending, key, ts, value)
	}
	if ascending {
		for _, r := range b.reqs {
			if bp, ok := r.(*kvpb.BulkPutRequest); ok && s.In(bp.Key) {
				if err := put(bp.Key, bp.Value); err != nil {
					return nil, err
				}
			}
		}
	} else {
		for _, e := range kvs {
			if err := put(e[0], e[1]); err != nil {
				return nil, err
			}
		}
	}
	b.reqs = slices.DeleteFunc(b.reqs, func(r kvpb.Request) bool {
		bp, ok := r.(*kvpb.BulkPutRequest)
		return ok && s.In(bp.Key)
	})
	return run, nil
}

// Flush seals the SST being filled into a run of its own (nil: none), to
// be ingested by RunBulkSorted with an empty batch. The load calls it
// before anything reads what it wrote (the statement's end, a check) and
// when the stream breaks.
func (s *SortedStream) Flush() (*SortedRun, error) {
	if s.pending == nil {
		return nil, nil
	}
	run := &SortedRun{stream: s}
	if err := s.seal(run); err != nil {
		return nil, err
	}
	return run, nil
}

// seal finishes the SST being filled and adds it to run.
func (s *SortedStream) seal(run *SortedRun) error {
	sb := s.pending
	s.pending, s.pendingEnd = nil, nil
	first, last := sb.Bounds()
	start, end := append([]byte(nil), first...), keys.Next(last)
	data, err := sb.Finish()
	if err != nil {
		return err
	}
	run.ssts = append(run.ssts, sealedSST{start: start, end: end, data: data, ts: s.pendingTS})
	return nil
}

// RunBulkSorted is RunBulk of b and the ingestion of run's SSTs (run nil:
// none), each at the timestamp its entries carry. Like RunBulk it may be
// called concurrently, and a failure may leave part of it written. With
// a run, b.Results is left nil: a BulkPut answers nothing, and a
// Result per request of a 10,000-row batch was about a tenth of the
// bytes a sorted COPY allocated per row.
func (t *Txn) RunBulkSorted(ctx context.Context, b *Batch, run *SortedRun) error {
	if run == nil {
		return t.RunBulk(ctx, b)
	}
	t.mu.Lock()
	if err := t.usableLocked(); err != nil {
		t.mu.Unlock()
		return err
	}
	t.mu.Unlock()
	for _, sst := range run.ssts {
		// A split the routing cache had not heard of when the SST was
		// cut is handled by the DistSender, which cuts it again.
		if _, err := t.db.AddSSTable(ctx, sst.start, sst.end, sst.data, sst.ts); err != nil {
			return err
		}
		run.stream.SSTs.Add(1)
	}
	t.bulkWritten()
	if err := t.RunBulk(ctx, b); err != nil {
		return err
	}
	b.Results = nil
	return nil
}
