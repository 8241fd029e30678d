package testcluster

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kv"
)

// Observed timestamps (docs/architecture.md, "Observed timestamps"): the
// tests assert outcomes and counters, never elapsed time.

// longCommitWaits sums the replicas' commit waits of at least a quarter of
// the maximum offset (tablet.Metrics.LongCommitWaits) on the running nodes.
func longCommitWaits(c *Cluster) (long, stamped int64) {
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		for _, d := range n.Store.Tablets() {
			if rep := n.Store.Replica(d.TabletID); rep != nil {
				long += rep.Metrics().LongCommitWaits.Load()
				stamped += rep.Metrics().ObservedTimestampsStamped.Load()
			}
		}
	}
	return long, stamped
}

func nodeByID(t *testing.T, c *Cluster, id uint64) *ClusterNode {
	t.Helper()
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	t.Fatalf("no node %d", id)
	return nil
}

// TestContentionNoLongCommitWaits: on a replicated cluster of one, a reader
// that meets a writer's intent pushes the writer only to its local
// uncertainty limit, which (the gateway being the leaseholder) is its read
// timestamp, not its global limit half a second ahead. The writer then
// commits at a timestamp the clock has reached, so its answer is not held
// by commit wait. Before observed timestamps the writer committed at the
// reader's global limit and commitWait held it for the maximum offset
// (LongCommitWaits ≥ 1 here). A tpcb-like loop on hot keys follows, with
// the same assertion.
func TestContentionNoLongCommitWaits(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Nodes: 1, MaxOffset: 500 * time.Millisecond})
	c.WaitLeader(1, 10*time.Second)
	db := c.Nodes[0].DB
	ctx := context.Background()
	key := []byte("contend/a")

	writer := db.NewTxn(ctx, "writer", kv.Serializable)
	if err := writer.Put(ctx, key, []byte("w")); err != nil {
		t.Fatal(err)
	}
	var readTS = writer.ReadTimestamp()
	var (
		found   bool
		readErr error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		readErr = db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
			readTS = txn.ReadTimestamp()
			_, found, readErr = txn.Get(ctx, key)
			return readErr
		})
	}()
	<-done
	if readErr != nil {
		t.Fatalf("reader: %v", readErr)
	}
	if found {
		t.Fatalf("the reader saw the writer's uncommitted value")
	}
	if err := writer.Commit(ctx); err != nil {
		t.Fatalf("writer commit: %v", err)
	}
	if !readTS.Less(writer.CommitTimestamp()) {
		t.Fatalf("writer committed at %s, not above the reader's %s: the reader did not push it", writer.CommitTimestamp(), readTS)
	}
	if long, _ := longCommitWaits(c); long != 0 {
		t.Fatalf("%d long commit waits after one push (writer committed at %s, reader read at %s)", long, writer.CommitTimestamp(), readTS)
	}

	// tpcb-like: read-modify-write of one of two hot counters.
	const workers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				k := []byte("contend/ctr" + strconv.Itoa((w+i)%2))
				err := db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
					v, _, err := txn.Get(ctx, k)
					if err != nil {
						return err
					}
					n, _ := strconv.Atoi(string(v))
					return txn.Put(ctx, k, []byte(strconv.Itoa(n+1)))
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := 0
	for i := range 2 {
		v, _, err := db.Get(ctx, []byte("contend/ctr"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(string(v))
		total += n
	}
	if total != workers*each {
		t.Fatalf("counters sum to %d, want %d", total, workers*each)
	}
	if long, _ := longCommitWaits(c); long != 0 {
		t.Fatalf("%d long commit waits under contention", long)
	}
}

// TestUncertaintyObservedTimestamps: a value written on the leaseholder
// before a transaction started on another node, at a timestamp above the
// transaction's (the leaseholder's clock is ahead), is still seen: the
// leaseholder's observation is above it, so the read restarts above it. A
// value written there after the transaction observed the leaseholder's
// clock, at a timestamp inside the global uncertainty window, is ignored:
// it cannot have been acknowledged before the transaction started.
func TestUncertaintyObservedTimestamps(t *testing.T) {
	const maxOffset = 2 * time.Second
	c := StartCluster(t, ClusterOptions{MaxOffset: maxOffset})
	lhID := c.WaitLeader(1, 10*time.Second)
	lh := nodeByID(t, c, lhID)
	var gw *ClusterNode
	for _, n := range c.Nodes {
		if n.ID != lhID {
			gw = n
			break
		}
	}
	ctx := context.Background()
	// The lease's start is behind us once a write went through.
	if err := lh.DB.Put(ctx, []byte("unc/warm"), []byte("w")); err != nil {
		t.Fatal(err)
	}
	// The leaseholder's clock runs ahead of the gateway's, within the
	// tolerance (half the maximum offset).
	lh.SetClockOffset(maxOffset / 2)
	if err := lh.DB.Put(ctx, []byte("unc/before"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	txn := gw.DB.NewTxn(ctx, "reader", kv.Serializable)
	defer func() { _ = txn.Rollback(ctx) }()
	r0 := txn.ReadTimestamp()
	v, found, err := txn.Get(ctx, []byte("unc/before"))
	if err != nil {
		t.Fatal(err)
	}
	if !found || string(v) != "v" {
		t.Fatalf("a value acknowledged before the transaction started was missed: got %q, %v", v, found)
	}
	r1 := txn.ReadTimestamp()
	if !r0.Less(r1) {
		t.Fatalf("read timestamp %s did not move past %s: the value was not in the uncertainty window, the test proves nothing", r1, r0)
	}

	// Written after the transaction observed the leaseholder.
	if err := lh.DB.Put(ctx, []byte("unc/after"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	after, _, err := lh.DB.Get(ctx, []byte("unc/after"))
	if err != nil || string(after) != "x" {
		t.Fatalf("read back: %q, %v", after, err)
	}
	v, found, err = txn.Get(ctx, []byte("unc/after"))
	if err != nil {
		t.Fatal(err)
	}
	if found {
		t.Fatalf("a value written after the observation was read (%q): the local limit did not apply", v)
	}
	if r2 := txn.ReadTimestamp(); r2 != r1 {
		t.Fatalf("read timestamp moved from %s to %s: an uncertainty restart on a value written after the observation", r1, r2)
	}
	if now := lh.Clock.Now(); now.WallTime > r0.WallTime+int64(maxOffset) {
		t.Fatalf("the leaseholder's clock %s passed the global limit of %s: too slow to tell local from global uncertainty", now, r0)
	}
	if _, stamped := longCommitWaits(c); stamped == 0 {
		t.Fatalf("no replica stamped an observed timestamp")
	}
}
