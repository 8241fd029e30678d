package testcluster

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/store"
)

// TestClusterSplitsUnderWriteLoad: three nodes run their split queues
// with a small split size (and the default load threshold) while writers
// on every node keep writing and a reader scans through every node. The
// data tablet splits by size several times, writes go on through the
// splits (routing follows them), every scan returns each key at most once,
// in order, and every write acknowledged before it began; every
// acknowledged write is readable afterwards through every node, and every
// node ends with the same tablets, each holding the same rows. The split
// queues keep running to the end.
func TestClusterSplitsUnderWriteLoad(t *testing.T) {
	c := StartCluster(t, ClusterOptions{
		SplitQueue: true,
		Store:      store.Config{SplitSize: 32 << 10, SplitInterval: 100 * time.Millisecond},
	})
	c.WaitLeader(1, 10*time.Second)
	ctx := context.Background()
	// Sizes are of flushed data (store.Engine.EstimateDiskUsage): flush
	// the small memtables of this test often, as a larger load would.
	stopFlush := make(chan struct{})
	var flushWG sync.WaitGroup
	flushWG.Add(1)
	go func() {
		defer flushWG.Done()
		for {
			select {
			case <-stopFlush:
				return
			case <-time.After(100 * time.Millisecond):
			}
			for _, n := range c.Nodes {
				_ = n.Engine.Flush()
			}
		}
	}()
	defer func() { close(stopFlush); flushWG.Wait() }()

	const writers, perWriter = 6, 150
	var (
		mu     sync.Mutex
		acked  = map[string]string{}
		failed atomic.Int64
		wg     sync.WaitGroup
	)
	// The reader: scans of the whole span racing the splits. A write
	// acknowledged before a scan is stamped began is below its timestamp
	// (one physical clock in-process), so it must be there; others may be.
	stopScans := make(chan struct{})
	var scanWG sync.WaitGroup
	var scans, scanErrs atomic.Int64
	scanWG.Go(func() {
		rng := rand.New(rand.NewPCG(99, 1))
		for {
			select {
			case <-stopScans:
				return
			default:
			}
			mu.Lock()
			before := make(map[string]bool, len(acked))
			for k := range acked {
				before[k] = true
			}
			mu.Unlock()
			n := c.Nodes[rng.IntN(len(c.Nodes))]
			reverse := rng.IntN(2) == 0
			b := &kv.Batch{}
			if reverse {
				b.ReverseScan([]byte("\x03w"), []byte("\x03x"), 0)
			} else {
				b.Scan([]byte("\x03w"), []byte("\x03x"), 0)
			}
			scans.Add(1)
			if err := n.DB.Run(ctx, b); err != nil {
				scanErrs.Add(1)
				continue
			}
			rows := b.Results[0].Rows
			outOfOrder := false
			for i, r := range rows {
				if i > 0 && !outOfOrder && (bytes.Compare(rows[i-1].Key, r.Key) >= 0) != reverse {
					// Twice, or out of order; reported once a scan.
					t.Errorf("scan through node %d (reverse %t): row %d %q after %q", n.ID, reverse, i, r.Key, rows[i-1].Key)
					outOfOrder = true
				}
				delete(before, string(r.Key))
			}
			for k := range before {
				t.Errorf("scan through node %d (reverse %t) of %d rows misses %q, acknowledged before it", n.ID, reverse, len(rows), k)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db := c.Nodes[w%len(c.Nodes)].DB
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range perWriter {
				// Spread over the keyspace so splits land among the
				// writes; random values, as sizes are of compressed files.
				k := fmt.Sprintf("\x03w%03d%02d", i, w)
				b := make([]byte, 256)
				for j := range b {
					b[j] = byte(rng.IntN(256))
				}
				v := hex.EncodeToString(b)
				// A write that fails is retried with the same value (so an
				// ambiguous one that did apply is no different): a split
				// may delay writes but must not refuse them for long.
				var err error
				for attempt := 0; attempt < 20; attempt++ {
					if err = db.Put(ctx, []byte(k), []byte(v)); err == nil {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				if err != nil {
					failed.Add(1)
					t.Errorf("put %q: %v", k, err)
					return
				}
				mu.Lock()
				acked[k] = v
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stopScans)
	scanWG.Wait()
	if scans.Load()-scanErrs.Load() < 2 {
		t.Errorf("%d scans raced the splits, %d of them failed", scans.Load(), scanErrs.Load())
	}
	var splits int64
	for _, n := range c.Nodes {
		splits += n.Store.SplitQueueStats().BySize
	}
	// The last writes may take a pass to be split for.
	deadline := time.Now().Add(20 * time.Second)
	for splits < 3 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		splits = 0
		for _, n := range c.Nodes {
			splits += n.Store.SplitQueueStats().BySize
		}
	}
	if splits < 3 {
		t.Fatalf("%d splits by size, want at least 3; tablets %v", splits, c.Nodes[0].Store.Tablets())
	}
	if failed.Load() > 0 {
		t.FailNow()
	}
	t.Logf("%d splits by size, %d writes acknowledged, %d scans (%d failed)", splits, len(acked), scans.Load(), scanErrs.Load())

	// Every node ends with the same tablets (the splits applied on every
	// replica), and every acknowledged write is in each node's engine.
	// The split queues keep running (the writes are over, so they soon
	// find nothing to split): wait until every node shows the same
	// tablets twice 500ms apart.
	var want []kvpb.TabletDescriptor
	prev := ""
	deadline = time.Now().Add(60 * time.Second)
	for {
		want = c.Nodes[0].Store.Tablets()
		same := true
		for _, n := range c.Nodes[1:] {
			same = same && fmt.Sprint(n.Store.Tablets()) == fmt.Sprint(want)
		}
		if same && prev == fmt.Sprint(want) {
			break
		}
		if same {
			prev = fmt.Sprint(want)
		}
		time.Sleep(500 * time.Millisecond)
		if time.Now().After(deadline) {
			for _, n := range c.Nodes {
				t.Logf("node %d: tablets %v", n.ID, n.Store.Tablets())
			}
			t.Fatal("the nodes' tablets differ after 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(want) < 4 {
		t.Fatalf("node 1 has %d tablets after %d splits: %v", len(want), splits, want)
	}
	for _, n := range c.Nodes {
		waitTablets(t, n, want)
		waitReplicated(t, n, "\x03w", "\x03x", acked)
	}
	for _, n := range c.Nodes {
		rows, err := n.DB.Scan(ctx, []byte("\x03w"), []byte("\x03x"), 0)
		if err != nil || len(rows) != len(acked) {
			t.Fatalf("scan through node %d: %d rows, %v; want %d", n.ID, len(rows), err, len(acked))
		}
		for _, r := range rows {
			if acked[string(r.Key)] != string(r.Value) {
				t.Fatalf("node %d reads %q = %.20q…, want %.20q…", n.ID, r.Key, r.Value, acked[string(r.Key)])
			}
		}
	}
}
