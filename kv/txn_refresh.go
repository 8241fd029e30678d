package kv

import (
	"context"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// Read refresh: moving a transaction's read timestamp forward without a
// restart (invariant 4).
//
// A transaction reads at ReadTimestamp and writes at WriteTimestamp, which
// tablets may push higher (a read already served above it, a committed
// version in the way). If nothing was committed in the spans it read between
// the two timestamps, its reads would have returned the same values at the
// higher one, so it may act as if it had read there: a RefreshRequest per
// read span asks each tablet exactly that, and records the spans in its
// timestamp cache at the new timestamp so no later write can invalidate them.
//
// Where each level refreshes:
//
//   - WriteTooOld (a write met a committed version above our snapshot) and
//     read uncertainty, at every level: refresh to the version's timestamp
//     and retry the request; if the refresh fails the transaction restarts.
//     This is first-committer-wins: a transaction whose write loses to a
//     concurrent commit keeps going only if it read nothing that commit (or
//     any other) changed, in which case it is indistinguishable from one
//     that started after it.
//   - A pushed write timestamp at commit: Serializable refreshes (and
//     restarts on failure), so it commits at the timestamp it read at.
//     Snapshot and ReadCommitted commit at the pushed timestamp without a
//     refresh. That is still snapshot isolation: every read came from one
//     snapshot (ReadTimestamp), and no other transaction can have committed
//     a write to a key we wrote between our snapshot and our commit, since a
//     committed version above the snapshot makes our write fail with
//     WriteTooOld (handled above) and our intent blocks any later writer
//     until we finish. Write skew stays possible, as SI allows.

// refresh moves the transaction's read (and write) timestamp up to target if
// every span it read is unchanged up to there. It returns the tablets'
// error (a retryable *kvpb.TransactionRetryError when a span changed)
// otherwise, leaving the timestamps alone.
func (t *Txn) refresh(ctx context.Context, target hlc.Timestamp) error {
	t.mu.Lock()
	from := t.mu.proto.ReadTimestamp
	if target.LessEq(from) {
		t.mu.proto.WriteTimestamp = t.mu.proto.WriteTimestamp.Forward(target)
		t.mu.Unlock()
		return nil
	}
	spans := append([]kvpb.Span(nil), t.mu.readSpans.list()...)
	txn := t.mu.proto.Clone()
	t.mu.Unlock()

	if len(spans) > 0 {
		txn.ReadTimestamp = target
		txn.WriteTimestamp = txn.WriteTimestamp.Forward(target)
		ba := &kvpb.BatchRequest{}
		ba.Txn = txn
		for _, s := range spans {
			ba.Add(&kvpb.RefreshRequest{Key: s.Key, EndKey: s.EndKey, From: from})
		}
		if _, err := t.db.ds.Send(ctx, ba); err != nil {
			return fmt.Errorf("kv: refreshing %d read spans from %s to %s: %w", len(spans), from, target, err)
		}
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.proto.ReadTimestamp = t.mu.proto.ReadTimestamp.Forward(target)
	t.mu.proto.WriteTimestamp = t.mu.proto.WriteTimestamp.Forward(target)
	return nil
}
