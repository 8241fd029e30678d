package tablet

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/storage"
	"github.com/google/uuid"
)

// Split divides the replica at splitKey. Under write latches over the whole
// tablet (its keys and its transaction records) one synced batch writes the
// two new directory entries: the left keeps its ID with [StartKey,
// splitKey) and generation+1, the right gets rightID with [splitKey,
// EndKey) and generation+1. No data moves (keys invariant 2: locks and
// records follow their keys). Then the in-memory state is divided: locks at
// or after splitKey, and a copy of the timestamp cache, go to the new right
// replica, which register receives before any latch is released, so no
// request can find the new descriptor in the directory but no replica.
//
// Requests that raced with the split re-check their keys after acquiring
// latches and get *kvpb.TabletKeyMismatchError; waiters on moved locks and
// records are woken to do the same.
func (r *Replica) Split(ctx context.Context, splitKey []byte, rightID kvpb.TabletID, register func(*Replica)) (left, right kvpb.TabletDescriptor, err error) {
	desc := r.Desc()
	if bytes.Compare(splitKey, desc.StartKey) <= 0 || bytes.Compare(splitKey, desc.EndKey) >= 0 {
		if !desc.ContainsKey(splitKey) {
			return left, right, keyMismatch(splitKey, desc)
		}
		return left, right, invalidArg("split key %q is not strictly inside %s", splitKey, &desc)
	}
	recLo, recHi := keys.TxnRecordSpan(desc.StartKey, desc.EndKey)
	g, err := r.latches.acquire(ctx, []latchSpan{
		{span: kvpb.Span{Key: desc.StartKey, EndKey: desc.EndKey}, write: true},
		{span: kvpb.Span{Key: recLo, EndKey: recHi}, write: true},
	})
	if err != nil {
		return left, right, err
	}
	defer r.latches.release(g)
	if cur := r.Desc(); cur.Generation != desc.Generation {
		// Split again while we waited; the caller looks up afresh.
		return left, right, keyMismatch(splitKey, cur)
	}
	term, done, err := r.leaseTerm(ctx)
	if err != nil {
		return left, right, err
	}
	defer done()
	prop, err := r.evaluateSplit(desc, splitKey, rightID)
	if err != nil {
		return left, right, err
	}
	if r.raft.group != nil {
		// Every replica divides itself when it applies the entry (raft.go),
		// this one included, with Config.OnSplit as register.
		if err := r.commit(ctx, term, prop); err != nil {
			return left, right, err
		}
		return prop.Split.Left, prop.Split.Right, nil
	}
	if err := r.Apply(prop); err != nil {
		return left, right, err
	}
	r.applySplit(prop.Split, register)
	return prop.Split.Left, prop.Split.Right, nil
}

// evaluateSplit builds the split's proposal: the two directory entries.
func (r *Replica) evaluateSplit(desc kvpb.TabletDescriptor, splitKey []byte, rightID kvpb.TabletID) (*Proposal, error) {
	left := kvpb.TabletDescriptor{
		TabletID:   desc.TabletID,
		StartKey:   desc.StartKey,
		EndKey:     append([]byte(nil), splitKey...),
		Generation: desc.Generation + 1,
	}
	right := kvpb.TabletDescriptor{
		TabletID:   rightID,
		StartKey:   append([]byte(nil), splitKey...),
		EndKey:     desc.EndKey,
		Generation: desc.Generation + 1,
	}
	if rightID == 0 || rightID == desc.TabletID {
		return nil, invalidArg("split of %s: bad right tablet id %d", &desc, rightID)
	}
	b := r.eng.NewWriteOnlyBatch()
	defer b.Close()
	for _, d := range []kvpb.TabletDescriptor{left, right} {
		if err := WriteDescriptor(b, d); err != nil {
			return nil, fmt.Errorf("tablet: split %s: %w", &desc, err)
		}
	}
	// The left records the right it split off, in its replicated state:
	// a replica that missed the split and learns of it through a
	// snapshot of the left finds the right there (raft.go, ApplySnapshot).
	if err := b.Put(storage.MVCCKey{Key: splitRecordKey(desc.TabletID, rightID)}, EncodeDescriptor(nil, right)); err != nil {
		return nil, fmt.Errorf("tablet: split %s: %w", &desc, err)
	}
	// The right side inherits the replicated state it shares with the
	// left: the GC threshold and the closed timestamp (closedts.go).
	if th := r.gcThreshold(); !th.IsEmpty() {
		if err := r.writeGCThreshold(b, rightID, th); err != nil {
			return nil, fmt.Errorf("tablet: split %s: %w", &desc, err)
		}
	}
	if c := r.closedProposed(); !c.IsEmpty() {
		if err := b.Put(storage.MVCCKey{Key: closedTSKey(rightID)}, encodeStateTS(c, r.versionedState())); err != nil {
			return nil, fmt.Errorf("tablet: split %s: %w", &desc, err)
		}
	}
	// The right side's lease, wherever it starts, builds its lock table
	// from storage: its unreplicated locks go there with the split, or a
	// second writer of a locked row would pass while its holder runs.
	moved, err := r.replicateUnreplicated(b, splitKey, desc.EndKey)
	if err != nil {
		return nil, fmt.Errorf("tablet: split %s: %w", &desc, err)
	}
	return &Proposal{
		Repr:          append([]byte(nil), b.Repr()...),
		Split:         &SplitTrigger{Left: left, Right: right},
		LocksAcquired: moved,
	}, nil
}

// splitRecordSuffix starts the replicated per-tablet keys that record
// the tablets split off a tablet, one per split: splitRecordKey.
const splitRecordSuffix = "splt"

// splitRecordKey is the record, in left's replicated state, of the right
// side a split of left created; its value is the right's descriptor as of
// the split.
func splitRecordKey(left, right kvpb.TabletID) []byte {
	return binary.BigEndian.AppendUint64(keys.TabletReplicated(uint64(left), splitRecordSuffix), uint64(right))
}

// splitAbortReasons moves the reasons of left whose records are anchored
// at or after key (the right side of a split there) to right.
func splitAbortReasons(left, right map[uuid.UUID]abortReason, key []byte) {
	for id, reason := range left {
		if bytes.Compare(reason.anchor, key) >= 0 {
			right[id] = reason
			delete(left, id)
		}
	}
}

// applySplit divides the in-memory state after the split batch committed.
// The caller holds latches over the whole pre-split tablet.
func (r *Replica) applySplit(t *SplitTrigger, register func(*Replica)) {
	r.valid.reset()
	key := t.Right.StartKey
	right := newReplica(r.eng, r.clock, t.Right, r.cfg, r.tscache.splitOff(key), r.locks.splitOff(key))
	right.tombs = r.tombs.splitOff(key)
	// The abort reasons of records anchored on the right move there. Each
	// split used to copy them all (up to maxAbortReasons) to its right
	// side, and every tablet split off one after another kept its copy:
	// 196 MB of a node's 306 MB of heap after bench/ddl's 10,000 tables
	// and a 2,048-bucket index (issue 16), as with the transaction
	// tombstones (txnTombstones.splitOff).
	r.mu.Lock()
	splitAbortReasons(r.mu.abortReasons, right.mu.abortReasons, key)
	right.setGCThresholdLocked(r.mu.gcThreshold)
	r.mu.Unlock()
	r.closed.mu.Lock()
	right.closed.ts, right.closed.trailing = r.closed.ts, r.closed.trailing
	r.closed.mu.Unlock()
	// Register the right replica before shrinking the left one, so a
	// router always finds some replica claiming every key; one that picks
	// the left in between fails its key check under latches and retries.
	if register != nil {
		register(right)
	}
	r.mu.Lock()
	r.setDescLocked(t.Left)
	r.mu.Unlock()
	// Pushes waiting on records that moved right re-evaluate and are told
	// to go there.
	r.txnWait.notifyAll()
}

// replicateUnreplicated writes a lock record for every unreplicated lock
// in [start, end) into b and returns them, for the proposal's
// LocksAcquired: applied, they are ordinary replicated locks, which a
// split carries to the right side and a new leaseholder finds in storage.
// The holder learns nothing of it: its commit meets its own lock there
// (no one-phase commit on that tablet, then) and its EndTxn resolves the
// lock with the rest of its lock spans. The caller holds latches over the
// span, or has drained the lease, so the table cannot change meanwhile.
func (r *Replica) replicateUnreplicated(b storage.Writer, start, end []byte) ([]kvpb.Intent, error) {
	locks := r.locks.unreplicatedIn(start, end)
	for _, in := range locks {
		if err := mvcc.ReplicateLock(b, in.Key, in.Txn); err != nil {
			return nil, err
		}
	}
	return locks, nil
}
