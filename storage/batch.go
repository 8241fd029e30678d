package storage

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
)

// Batch is an atomic group of writes. Not safe for concurrent use.
type Batch struct {
	b         *pebble.Batch
	e         *Engine
	writeOnly bool
	// reuse (NewReusingBatch): iterators closed through the batch wait in
	// free for the next NewIter; all holds every one it built, which
	// Close, Commit and CommitNoSync close.
	reuse     bool
	free, all []*Iterator
}

// Put implements Writer.
func (b *Batch) Put(key MVCCKey, value []byte) error {
	if err := checkWriteKey(key); err != nil {
		return fmt.Errorf("storage: put: %w", err)
	}
	// Encoded straight into the batch's representation: an encoded key
	// allocated per put was a tenth of a bulk load's tablet CPU.
	op := b.b.SetDeferred(key.EncodedLen(), len(value))
	if enc := key.Encode(op.Key[:0]); len(enc) != len(op.Key) {
		return fmt.Errorf("storage: put: key encoded to %d bytes, not %d", len(enc), len(op.Key))
	}
	copy(op.Value, value)
	return op.Finish()
}

// Delete implements Writer. The key is encoded straight into the batch's
// representation, as Put's: a raft log truncation deletes a thousand
// entries in one batch (raftnode's LogStore.Compact).
func (b *Batch) Delete(key MVCCKey) error {
	op := b.b.DeleteDeferred(key.EncodedLen())
	if enc := key.Encode(op.Key[:0]); len(enc) != len(op.Key) {
		return fmt.Errorf("storage: delete: key encoded to %d bytes, not %d", len(enc), len(op.Key))
	}
	return op.Finish()
}

// ClearRange implements Writer.
func (b *Batch) ClearRange(start, end []byte) error {
	return b.b.DeleteRange(MVCCKey{Key: start}.Encode(nil), MVCCKey{Key: end}.Encode(nil), nil)
}

// Get implements Reader. It panics on a write-only batch.
func (b *Batch) Get(key MVCCKey) ([]byte, bool, error) {
	b.mustRead()
	return get(b.e, b.b, key)
}

// NewIter implements Reader. It panics on a write-only batch.
func (b *Batch) NewIter(opts IterOptions) (*Iterator, error) {
	b.mustRead()
	if !b.reuse || opts.Scan && !opts.Prefix && b.e.ra != nil {
		return newIter(b.e, b.b, opts)
	}
	if n := len(b.free); n > 0 {
		if err := b.e.failure(); err != nil {
			return nil, fmt.Errorf("storage: new iterator: %w", err)
		}
		it := b.free[n-1]
		b.free = b.free[:n-1]
		// Pebble copies the bounds (processBounds): the buffer holding the
		// last ones may take the next.
		buf := it.bounds[:0]
		it.popts.LowerBound, it.popts.UpperBound = nil, nil
		if opts.LowerBound != nil {
			buf = MVCCKey{Key: opts.LowerBound}.Encode(buf)
			it.popts.LowerBound = buf
		}
		if opts.UpperBound != nil {
			lo := len(buf)
			buf = MVCCKey{Key: opts.UpperBound}.Encode(buf)
			it.popts.UpperBound = buf[lo:]
		}
		it.bounds = buf
		it.it.SetOptions(&it.popts)
		it.prefix, it.err, it.key = opts.Prefix, nil, MVCCKey{}
		return it, nil
	}
	it, err := newIter(b.e, b.b, opts)
	if err != nil {
		return nil, err
	}
	it.batch = b
	b.all = append(b.all, it)
	return it, nil
}

// closeIters closes every iterator a reusing batch built (they must have
// been closed through it).
func (b *Batch) closeIters() {
	for _, it := range b.all {
		_ = it.it.Close()
	}
	b.all, b.free = nil, nil
}

func (b *Batch) mustRead() {
	if b.writeOnly {
		panic("storage: read from a write-only batch")
	}
}

// Empty reports whether the batch holds no writes.
func (b *Batch) Empty() bool { return b.b.Empty() }

// Count is the number of writes in the batch.
func (b *Batch) Count() uint32 { return b.b.Count() }

// Len is the size of the batch's encoding in bytes.
func (b *Batch) Len() int { return b.b.Len() }

// Repr is the batch's encoding, for replication (see Engine.ApplyBatchRepr).
// It aliases the batch's memory.
func (b *Batch) Repr() []byte { return b.b.Repr() }

// ApplyRepr adds the writes of a batch encoded by Repr (a replicated
// write arriving from the raft log) to b, so they commit with b's own.
func (b *Batch) ApplyRepr(repr []byte) error {
	src := b.e.db.NewBatch()
	defer src.Close()
	if err := src.SetRepr(append([]byte(nil), repr...)); err != nil {
		return fmt.Errorf("storage: bad batch repr: %w", err)
	}
	if err := b.b.Apply(src, nil); err != nil {
		return fmt.Errorf("storage: apply batch repr: %w", err)
	}
	return nil
}

// Commit makes the batch's writes visible and, unless the engine was opened
// with NoSync, durable (invariant 2).
//
// If the disk fails under the commit (the WAL cannot be written or synced),
// Commit returns an error wrapping ErrEngineFailed and the disk's error: the
// write is not acknowledged, and the engine refuses all later writes.
func (b *Batch) Commit() (err error) {
	b.closeIters()
	if err := b.e.failure(); err != nil {
		return fmt.Errorf("storage: commit: %w", err)
	}
	defer b.e.catchFatal(&err, "commit")
	b.e.iters.beginWrite()
	defer b.e.iters.endWrite()
	if err := b.b.Commit(b.e.wo); err != nil {
		return fmt.Errorf("storage: commit: %w", err)
	}
	return nil
}

// CommitNoSync makes the batch's writes visible without waiting for them
// to be durable: for writes that can be rebuilt after a crash (a raft
// node's applied state, re-applied from its synced log).
func (b *Batch) CommitNoSync() (err error) {
	b.closeIters()
	if err := b.e.failure(); err != nil {
		return fmt.Errorf("storage: commit: %w", err)
	}
	defer b.e.catchFatal(&err, "commit")
	b.e.iters.beginWrite()
	defer b.e.iters.endWrite()
	if err := b.b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("storage: commit: %w", err)
	}
	return nil
}

// CommitStats are Pebble's timings of the batch's last commit: its waits
// for write stalls (too many memtables, too many L0 files) and for its
// publication after the batches committed before it (and its WAL sync).
func (b *Batch) CommitStats() pebble.BatchCommitStats { return b.b.CommitStats() }

// Close releases the batch; uncommitted writes are dropped.
func (b *Batch) Close() {
	b.closeIters()
	_ = b.b.Close()
}

// Snapshot is a consistent read-only view.
type Snapshot struct {
	s *pebble.Snapshot
	e *Engine
}

// Get implements Reader.
func (s *Snapshot) Get(key MVCCKey) ([]byte, bool, error) { return get(s.e, s.s, key) }

// NewIter implements Reader.
func (s *Snapshot) NewIter(opts IterOptions) (*Iterator, error) { return newIter(s.e, s.s, opts) }

// Close releases the snapshot.
func (s *Snapshot) Close() { _ = s.s.Close() }

// VisitReprKeys calls fn with the user key of every point write (put or
// delete, of any version) in a batch encoded by Repr, in the batch's order;
// the key aliases repr. It reports ranged when the batch also holds a write
// that covers a span rather than a key (a range deletion, a range key),
// whose keys it cannot name. A repr that does not decode is an error.
func VisitReprKeys(repr []byte, fn func(key []byte)) (ranged bool, err error) {
	if len(repr) == 0 {
		return false, nil
	}
	r := batchrepr.Read(repr)
	for {
		kind, ukey, _, ok, err := r.Next()
		if err != nil {
			return ranged, fmt.Errorf("storage: bad batch repr: %w", err)
		}
		if !ok {
			return ranged, nil
		}
		switch kind {
		case pebble.InternalKeyKindSet, pebble.InternalKeyKindDelete, pebble.InternalKeyKindSingleDelete,
			pebble.InternalKeyKindMerge, pebble.InternalKeyKindDeleteSized, pebble.InternalKeyKindSetWithDelete:
			k, err := DecodeMVCCKey(ukey)
			if err != nil {
				return ranged, fmt.Errorf("storage: batch repr key: %w", err)
			}
			fn(k.Key)
		case pebble.InternalKeyKindLogData:
		default:
			ranged = true
		}
	}
}
