package kv

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/keys"
)

// TestBufferedRowReadAllocs: a read of a row the transaction rewrote
// whole (pgbench -N's SELECT after its UPDATE), answered from the buffer
// alone, plans its one request on the stack: 4 objects (the scan's
// buffered keys, covers' step past the row key, the results and the
// merged rows), 5 with the plans made apart.
func TestBufferedRowReadAllocs(t *testing.T) {
	ctx := context.Background()
	e, _ := newWatchedEnv(t)
	e.mustPut("r5", "old")
	txn := e.db.NewTxn(ctx, "rewrite", Snapshot)
	txn.EnableWriteBuffering()
	row := []byte("r5")
	w := &Batch{}
	w.DelRange(keys.Next(row), keys.PrefixEnd(row))
	w.Put(row, []byte("new"))
	mustOK(t, txn.Run(ctx, w))
	b := &Batch{}
	b.Scan(row, keys.PrefixEnd(row), 0)
	read := func() {
		handled, err := txn.readThroughBuffer(ctx, b)
		if err != nil || !handled {
			t.Fatalf("readThroughBuffer: handled %t, %v", handled, err)
		}
	}
	read()
	if rows := b.Results[0].Rows; len(rows) != 1 || string(rows[0].Value) != "new" {
		t.Fatalf("the read gave %v, want the buffered row", rows)
	}
	if n := testing.AllocsPerRun(100, read); n > 4 && !raceEnabled {
		t.Errorf("a buffered row's read allocated %.0f objects, want at most 4", n)
	}
	mustOK(t, txn.Rollback(ctx))
}

// TestLockingReadAllocs: an UPDATE's locking read of one row (a new
// transaction's first) holds its lock request's slice and the lock's id
// slice on the stack: the transaction, its read and its rollback
// allocate 81 objects, 83 with both slices made apart.
func TestLockingReadAllocs(t *testing.T) {
	ctx := context.Background()
	e, _ := newWatchedEnv(t)
	e.mustPut("r5", "old")
	row := []byte("r5")
	end := keys.PrefixEnd(row)
	read := func() {
		txn := e.db.NewTxn(ctx, "update", Snapshot)
		txn.EnableWriteBuffering()
		b := &Batch{}
		b.Scan(row, end, 0)
		b.LockOnRead(row, end)
		mustOK(t, txn.Run(ctx, b))
		if len(b.Results[0].Rows) != 1 {
			t.Fatalf("the locking read gave %v, want the row", b.Results[0].Rows)
		}
		mustOK(t, txn.Rollback(ctx))
	}
	read()
	const want = 81
	if n := testing.AllocsPerRun(50, read); n > want && !raceEnabled {
		t.Errorf("a transaction's locking read and rollback allocated %.0f objects, want at most %d", n, want)
	}
}
