package tablet

import (
	"testing"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// TestTxnTombstonesSplitOff: a split moves the tombstones of records
// anchored on its right side there and keeps the others on the left, so
// no tombstone is kept twice (each split copied every one before), and
// each side still refuses a record to the transactions whose records it
// deleted; both keep the low-water mark.
func TestTxnTombstonesSplitOff(t *testing.T) {
	left := newTxnTombstones(ts(5))
	a := kvpb.TxnMeta{ID: uuid.New(), Key: []byte("a"), WriteTimestamp: ts(10)}
	m := kvpb.TxnMeta{ID: uuid.New(), Key: []byte("m"), WriteTimestamp: ts(20)}
	k := kvpb.TxnMeta{ID: uuid.New(), Key: []byte("k"), WriteTimestamp: ts(30)}
	left.add(a, kvpb.Committed)
	left.add(m, kvpb.Aborted)
	left.add(k, kvpb.Committed)
	right := left.splitOff([]byte("k"))
	if len(left.marks) != 1 || len(right.marks) != 2 {
		t.Fatalf("after the split at k: %d tombstones left, %d right; want 1 and 2", len(left.marks), len(right.marks))
	}
	for _, tc := range []struct {
		side   *txnTombstones
		name   string
		txn    kvpb.TxnMeta
		status kvpb.TxnStatus
	}{
		{left, "left", a, kvpb.Committed},
		{right, "right", m, kvpb.Aborted},
		{right, "right", k, kvpb.Committed},
	} {
		if st, ok := tc.side.status(tc.txn.ID); !ok || st != tc.status {
			t.Errorf("%s: status of the txn anchored at %s = %v, %v; want %v", tc.name, tc.txn.Key, st, ok, tc.status)
		}
		if tc.side.canCreate(tc.txn.ID, tc.txn.WriteTimestamp) {
			t.Errorf("%s: may create the deleted record anchored at %s", tc.name, tc.txn.Key)
		}
	}
	if left.lowWater != ts(5) || right.lowWater != ts(5) {
		t.Errorf("low-water marks %v and %v, want %v on both", left.lowWater, right.lowWater, ts(5))
	}
	if !right.canCreate(uuid.New(), ts(6)) {
		t.Errorf("the right side refuses a new transaction above its low-water mark")
	}
}

// TestAbortReasonsSplitOff: a split hands the right side the abort
// reasons of the records anchored on it and keeps the rest; a reason
// without an anchor (a proposal from before anchors were recorded) stays
// left. Copying all of them to every right side kept 196 MB of a node's
// 306 MB heap in copies after bench/ddl's 10,000 tables (issue 16).
func TestAbortReasonsSplitOff(t *testing.T) {
	a, m, k, none := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	left := map[uuid.UUID]abortReason{
		a:    {kvpb.AbortPushed, []byte("a")},
		m:    {kvpb.AbortExpired, []byte("m")},
		k:    {kvpb.AbortDeadlock, []byte("k")},
		none: {kvpb.AbortTimestampCache, nil},
	}
	right := map[uuid.UUID]abortReason{}
	splitAbortReasons(left, right, []byte("k"))
	for _, tc := range []struct {
		side map[uuid.UUID]abortReason
		name string
		id   uuid.UUID
		want kvpb.AbortReason
	}{
		{left, "left", a, kvpb.AbortPushed},
		{left, "left", none, kvpb.AbortTimestampCache},
		{right, "right", m, kvpb.AbortExpired},
		{right, "right", k, kvpb.AbortDeadlock},
	} {
		if got, ok := tc.side[tc.id]; !ok || got.reason != tc.want {
			t.Errorf("%s: reason %v, %v; want %v", tc.name, got.reason, ok, tc.want)
		}
	}
	if len(left) != 2 || len(right) != 2 {
		t.Errorf("after the split at k: %d reasons left, %d right; want 2 and 2", len(left), len(right))
	}
}
