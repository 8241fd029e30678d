package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-db/cairn/rpc"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/tablet"
)

// TestNewReplicaByStreamedSnapshot: a table whose tablet image is larger
// than the RPC message limit (lowered from 64 MiB to 1 MiB for the test)
// gets replicas on two nodes that join: each is added empty and filled
// by a snapshot streamed as an SST and ingested (no raft message can
// carry the image), and once the first node is stopped the two serve
// every row.
func TestNewReplicaByStreamedSnapshot(t *testing.T) {
	const limit = 1 << 20
	old := rpc.MaxBatchSize
	rpc.MaxBatchSize = limit
	t.Cleanup(func() { rpc.MaxBatchSize = old })
	c := newMemberCluster(t, 60*time.Second)
	n1 := c.start(nil, "region=a")
	execSQL(t, n1, "CREATE TABLE t (k INT PRIMARY KEY, v TEXT)")
	// 400 rows of 8,000 bytes: 3.2 MB, in statements (and so raft
	// entries and KV answers) well under the limit.
	const rows, per = 400, 50
	for lo := 1; lo <= rows; lo += per {
		execSQL(t, n1, fmt.Sprintf("INSERT INTO t SELECT g, repeat('x', 8000) FROM generate_series(%d, %d) AS g", lo, lo+per-1))
	}
	c.waitPlacement("one voter", 10*time.Second, sameNodes(1))
	if size := largestImage(t, n1); size <= limit {
		t.Fatalf("largest tablet image %d bytes, want more than the message limit %d", size, limit)
	}
	join := []string{c.addrs[1]}
	n2 := c.start(join, "region=b")
	n3 := c.start(join, "region=c")
	c.waitPlacement("three voters", 60*time.Second, sameNodes(1, 2, 3))
	for _, s := range []*Server{n2, n3} {
		if s.repl.raft.SnapshotsIngested.Load() == 0 {
			t.Fatalf("node %d got its replicas without ingesting a streamed snapshot", s.repl.id)
		}
	}
	c.stop(1)
	// Point reads (each answer far under the limit): with node 1 gone
	// every row is served by the replicas that came by stream.
	for _, s := range []*Server{n2, n3} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		conn := connect(t, s)
		for k := 1; k <= rows; k++ {
			var n int
			if err := conn.QueryRow(ctx, "SELECT length(v) FROM t WHERE k = $1", k).Scan(&n); err != nil || n != 8000 {
				t.Fatalf("row %d through node %d: length %d, %v", k, s.repl.id, n, err)
			}
		}
		conn.Close(ctx)
		cancel()
	}
}

// largestImage is the size in bytes (keys and values) of the largest
// tablet image on s's engine.
func largestImage(t *testing.T, s *Server) int {
	t.Helper()
	largest := 0
	for _, d := range s.store.Tablets() {
		size := 0
		for _, sp := range tablet.ReplicatedSpans(d) {
			it, err := s.eng.NewIter(storage.IterOptions{LowerBound: sp.Key, UpperBound: sp.EndKey})
			if err != nil {
				t.Fatal(err)
			}
			for ok := it.First(); ok; ok = it.Next() {
				v, err := it.UnsafeValue()
				if err != nil {
					it.Close()
					t.Fatal(err)
				}
				size += len(it.UnsafeKey().Encode(nil)) + len(v)
			}
			it.Close()
		}
		largest = max(largest, size)
	}
	return largest
}
