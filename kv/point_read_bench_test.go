package kv_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/testcluster"
)

// BenchmarkPointRead is the KV half of a point SELECT (issue 22): an
// implicit transaction that scans one row's span [k, PrefixEnd(k)) with
// the SQL scan's first page (256 keys), then commits (read-only: nothing
// is sent). It runs on a node wired as `cairn start` wires one: a store
// whose tablets are raft groups of one voter, a clock with a maximum
// offset, the DistSender in front. pgbench's accounts table at scale 1 is
// 100,000 rows of about 100 bytes; "memtable" reads them where pgbench -i
// leaves them on a plain start (a 64 MiB memtable), "flushed" from SSTs
// with bloom filters. scan10 reads ten consecutive rows (a short range
// scan). Profile it with
//
//	go test ./kv -run '^$' -bench PointRead -benchmem -cpuprofile /tmp/pr.prof
func BenchmarkPointRead(b *testing.B) {
	for _, flushed := range []bool{false, true} {
		name := "memtable"
		if flushed {
			name = "flushed"
		}
		b.Run(name, func(b *testing.B) {
			n := testcluster.StartNode(b, testcluster.Options{Raft: true, MaxOffset: 500 * time.Millisecond})
			const rows = 100_000
			loadRows(b, n.DB, rows)
			if flushed {
				if err := n.Engine.Flush(); err != nil {
					b.Fatal(err)
				}
			}
			for _, width := range []int{1, 10} {
				b.Run(fmt.Sprintf("rows=%d", width), func(b *testing.B) {
					pointReads(b, n, width, rows, false)
				})
				// The same read as an implicit transaction's only batch
				// sent alone (DB.RunImplicitRead): no transaction is
				// built and nothing commits.
				b.Run(fmt.Sprintf("rows=%d/light", width), func(b *testing.B) {
					pointReads(b, n, width, rows, true)
				})
			}
		})
	}
}

// pointReads reads width consecutive rows b.N times, each in an implicit
// transaction, or, with light, through DB.RunImplicitRead.
func pointReads(b *testing.B, n *testcluster.Node, width, rows int, light bool) {
	ctx := context.Background()

	b.ReportAllocs()
	cpu := processCPU()
	i := 0
	for b.Loop() {
		// A prime stride visits every row in turn without walking them
		// in key order.
		id := (i * 7919) % (rows - width)
		i++
		start := rowKey(id)
		end := keys.PrefixEnd(rowKey(id + width - 1))
		bt := &kv.Batch{}
		bt.Scan(start, end, 256)
		if light {
			if err := n.DB.RunImplicitRead(ctx, bt); err != nil {
				b.Fatal(err)
			}
		} else {
			txn := n.DB.NewTxn(ctx, "sql txn", kv.Serializable)
			txn.EnableWriteBufferingWithoutLocks()
			if err := txn.Run(ctx, bt); err != nil {
				b.Fatal(err)
			}
			if err := txn.Commit(ctx); err != nil {
				b.Fatal(err)
			}
		}
		if got := len(bt.Results[0].Rows); got != width {
			b.Fatalf("row %d: read %d rows, want %d", id, got, width)
		}
	}
	// On a shared machine the wall time per read moves with the load;
	// the CPU the process spent per read (raft's ticks included) moves
	// much less.
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// processCPU is the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rowKey is a primary-index key as rowenc lays one out for pgbench's
// accounts: a table prefix, the key column, the family (0).
func rowKey(id int) []byte {
	k := []byte("\x03t/accounts/")
	k = binary.BigEndian.AppendUint64(k, uint64(id))
	return append(k, 0)
}

// loadRows writes rows rows of 100 bytes in batches.
func loadRows(tb testing.TB, db *kv.DB, rows int) {
	tb.Helper()
	ctx := context.Background()
	value := make([]byte, 100)
	for i := 0; i < rows; i += 1000 {
		ba := &kvpb.BatchRequest{}
		for j := i; j < min(i+1000, rows); j++ {
			ba.Add(&kvpb.PutRequest{Key: rowKey(j), Value: value})
		}
		if _, err := db.Send(ctx, ba); err != nil {
			tb.Fatal(err)
		}
	}
}
