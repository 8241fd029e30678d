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
