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
