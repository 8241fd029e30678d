package tablet

import (
	"context"
	"fmt"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
)

// A replica that falls too far behind its group's log, or is new, is
// brought up to date with a snapshot: every engine key of the tablet's
// replicated state, written as one SST that replaces those spans when the
// receiver ingests it (DESIGN §7). Ingesting skips the WAL and the
// memtable, so a snapshot of a large tablet costs a file link, not a
// rewrite, on the receiver.

// ReplicatedSpans are the engine spans that hold desc's replicated state,
// in engine order: its replicated per-tablet keys, the records of
// transactions anchored in its span, the locks on its keys, and its data.
// The tablet-local keys (raft log and hard state) are not among them: a
// snapshot never carries them.
func ReplicatedSpans(desc kvpb.TabletDescriptor) []kvpb.Span {
	rp := keys.TabletReplicatedPrefix(uint64(desc.TabletID))
	tlo, thi := keys.TxnRecordSpan(desc.StartKey, desc.EndKey)
	llo, lhi := keys.LockSpan(desc.StartKey, desc.EndKey)
	return []kvpb.Span{
		{Key: rp, EndKey: keys.PrefixEnd(rp)},
		{Key: tlo, EndKey: thi},
		{Key: llo, EndKey: lhi},
		{Key: desc.StartKey, EndKey: desc.EndKey},
	}
}

// Iterable is what a snapshot is read from: an engine snapshot (a
// consistent view, so the image is of one moment).
type Iterable interface {
	NewIter(opts storage.IterOptions) (*storage.Iterator, error)
}

// WriteSnapshot writes desc's replicated state as read from r into w: for
// each span a range deletion (so ingesting replaces whatever the receiver
// held there) followed by every version of every key. It returns the
// number of keys written. The caller finishes w.
func WriteSnapshot(r Iterable, desc kvpb.TabletDescriptor, w *storage.SSTWriter) (int, error) {
	n := 0
	for _, sp := range ReplicatedSpans(desc) {
		if err := w.ClearRange(sp.Key, sp.EndKey); err != nil {
			return n, fmt.Errorf("tablet %d snapshot: %w", desc.TabletID, err)
		}
		it, err := r.NewIter(storage.IterOptions{LowerBound: sp.Key, UpperBound: sp.EndKey})
		if err != nil {
			return n, err
		}
		for ok := it.First(); ok; ok = it.Next() {
			v, err := it.UnsafeValue()
			if err != nil {
				it.Close()
				return n, err
			}
			if err := w.Put(it.UnsafeKey(), v); err != nil {
				it.Close()
				return n, fmt.Errorf("tablet %d snapshot: %w", desc.TabletID, err)
			}
			n++
		}
		err = it.Err()
		it.Close()
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// IngestSnapshot replaces the receiver's copy of a tablet's replicated
// state with the SST at path (made by WriteSnapshot, on eng's filesystem).
// A replica's streamed snapshot is ingested by raftnode itself, between
// an intent and the raft state (raftnode/snapshot.go), while the replica,
// a follower, serves nothing; it rebuilds its lock table from the engine
// once the raft state is written.
func IngestSnapshot(ctx context.Context, eng *storage.Engine, path string) error {
	if err := eng.Ingest(ctx, []string{path}); err != nil {
		return fmt.Errorf("ingesting snapshot %s: %w", path, err)
	}
	return nil
}
