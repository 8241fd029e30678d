package kv_test

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/testcluster"
)

// BenchmarkLockingRead is the KV half of a kept point UPDATE's read
// (issue 22, exec.PointCache.UpdatePoint): a transaction with buffered
// writes scans one row's span with its unreplicated lock
// (Batch.LockOnRead: kv.Txn.runLockingRead), then rolls back, which
// releases the lock, outside the timer (its allocations are not counted;
// its CPU is, in cpu-ns/op). Set it beside BenchmarkPointRead's rows=1:
//
//	go test ./kv -run '^$' -bench LockingRead -benchmem -cpuprofile /tmp/lr.prof
func BenchmarkLockingRead(b *testing.B) {
	n := testcluster.StartNode(b, testcluster.Options{Raft: true, MaxOffset: 500 * time.Millisecond})
	const rows = 100_000
	loadRows(b, n.DB, rows)
	ctx := context.Background()
	b.ReportAllocs()
	cpu := processCPU()
	i := 0
	for b.Loop() {
		id := (i * 7919) % rows
		i++
		k := rowKey(id)
		txn := n.DB.NewTxn(ctx, "sql txn", kv.Serializable)
		txn.EnableWriteBuffering()
		bt := &kv.Batch{}
		bt.Scan(k, keys.PrefixEnd(k), 256)
		bt.LockOnRead(k, keys.PrefixEnd(k))
		if err := txn.Run(ctx, bt); err != nil {
			b.Fatal(err)
		}
		if got := len(bt.Results[0].Rows); got != 1 {
			b.Fatalf("row %d: read %d rows, want 1", id, got)
		}
		// The rollback (which releases the lock) is not the read's.
		b.StopTimer()
		if err := txn.Rollback(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}
