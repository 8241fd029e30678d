package testcluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
)

// TestClusterScanReadsNextTabletAhead: a limited scan through node 1 over
// three tablets, A, then B and C whose leases are on nodes 2 and 3, asks
// node 3 for C while node 2 still reads B (kv's dist_sender_prefetch.go:
// from the walk's second tablet on). Node 2 holds its answer back until
// node 3 has been asked: a walk that asked one tablet after the other
// would wait until the test gives up. The rows come back exact and in
// order. A statement cancelled while node 2 reads cancels node 3's read
// too.
func TestClusterScanReadsNextTabletAhead(t *testing.T) {
	type gateState struct {
		tabB, tabC kvpb.TabletID
		// cAsked is closed when node 3 is asked for tablet C.
		cAsked chan struct{}
		once   sync.Once
		// cancelStatement, when set, is called by node 2 once tablet C
		// has been asked; cEnded is closed when node 3's read of C
		// ends with its context cancelled.
		cancelStatement context.CancelFunc
		cEnded          chan struct{}
	}
	var gate atomic.Pointer[gateState]
	filter := func(ctx context.Context, node uint64, ba *kvpb.BatchRequest) error {
		g := gate.Load()
		if g == nil || len(ba.Requests) == 0 {
			return nil
		}
		if _, ok := ba.Requests[0].(*kvpb.ScanRequest); !ok {
			return nil
		}
		switch {
		case node == 3 && ba.TabletID == g.tabC:
			g.once.Do(func() { close(g.cAsked) })
			if g.cancelStatement != nil {
				<-ctx.Done()
				close(g.cEnded)
				return ctx.Err()
			}
		case node == 2 && ba.TabletID == g.tabB:
			select {
			case <-g.cAsked:
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(30 * time.Second):
				return fmt.Errorf("tablet %d was not asked while tablet %d read", g.tabC, g.tabB)
			}
			if g.cancelStatement != nil {
				g.cancelStatement()
				<-ctx.Done()
				return ctx.Err()
			}
		}
		return nil
	}
	c := StartCluster(t, ClusterOptions{KVFilter: filter})
	c.WaitLeader(1, 10*time.Second)
	ctx := context.Background()
	splitAt(t, c, c.WaitLeader(1, 10*time.Second), "bcd")

	const perTablet = 300
	key := func(p byte, i int) []byte { return fmt.Appendf(nil, "\x03%c%04d", p, i) }
	var want []string
	for _, p := range []byte("abc") {
		for lo := 0; lo < perTablet; lo += 100 {
			ba := &kvpb.BatchRequest{}
			for i := lo; i < lo+100; i++ {
				ba.Add(&kvpb.PutRequest{Key: key(p, i), Value: fmt.Appendf(nil, "v%c%d", p, i)})
				want = append(want, fmt.Sprintf("%s=v%c%d", key(p, i), p, i))
			}
			if _, err := c.Nodes[0].DB.Send(ctx, ba); err != nil {
				t.Fatal(err)
			}
		}
	}
	n1 := c.Nodes[0]
	descB, err := n1.DB.TabletCache().Lookup(ctx, []byte("\x03b"), false)
	if err != nil {
		t.Fatal(err)
	}
	descC, err := n1.DB.TabletCache().Lookup(ctx, []byte("\x03c"), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		tablet kvpb.TabletID
		to     uint64
	}{{descB.TabletID, 2}, {descC.TabletID, 3}} {
		deadline := time.Now().Add(20 * time.Second)
		for c.Leader(m.tablet) != m.to {
			if time.Now().After(deadline) {
				t.Fatalf("tablet %d's lease never moved to node %d (now %d)", m.tablet, m.to, c.Leader(m.tablet))
			}
			if from := c.Leader(m.tablet); from != 0 {
				_ = c.Nodes[from-1].Raft.TransferLeader(uint64(m.tablet), m.to)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Node 1 learns where the leases are by using them.
	for _, w := range []struct {
		k  []byte
		lh uint64 // 0: any
	}{{key('a', 0), 0}, {key('b', 0), 2}, {key('c', 0), 3}} {
		k := w.k
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, _, err := n1.DB.Get(ctx, k); err != nil {
				t.Fatal(err)
			}
			d, _ := n1.DB.TabletCache().Lookup(ctx, k, false)
			if lh := n1.Leaseholders.Leaseholder(d.TabletID); lh != 0 && (w.lh == 0 || lh == w.lh) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node 1 never learnt the leaseholder of %q", k)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	scan := func(ctx context.Context) ([]kvpb.KeyValue, error) {
		return n1.DB.Scan(ctx, []byte("\x03a"), []byte("\x03d"), 10_000)
	}
	t.Run("overlaps", func(t *testing.T) {
		gate.Store(&gateState{tabB: descB.TabletID, tabC: descC.TabletID, cAsked: make(chan struct{})})
		defer gate.Store(nil)
		sent0, used0 := n1.DB.ScanPrefetches()
		rows, err := scan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(want) {
			t.Fatalf("%d rows, want %d", len(rows), len(want))
		}
		for i, kv := range rows {
			if got := fmt.Sprintf("%s=%s", kv.Key, kv.Value); got != want[i] {
				t.Fatalf("row %d: %s, want %s", i, got, want[i])
			}
		}
		if sent, used := n1.DB.ScanPrefetches(); sent-sent0 != 1 || used-used0 != 1 {
			t.Errorf("prefetches sent %d, used %d; want 1 and 1", sent-sent0, used-used0)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		g := &gateState{tabB: descB.TabletID, tabC: descC.TabletID, cAsked: make(chan struct{}), cancelStatement: cancel, cEnded: make(chan struct{})}
		gate.Store(g)
		defer gate.Store(nil)
		if _, err := scan(sctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled scan: %v", err)
		}
		select {
		case <-g.cEnded:
		case <-time.After(30 * time.Second):
			t.Fatal("node 3's read of the next tablet was not cancelled with the statement")
		}
	})
}
