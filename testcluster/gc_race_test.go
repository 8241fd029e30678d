package testcluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/store"
)

// TestClusterGCRaces runs every node's GC queue with a short TTL while
// writers keep rewriting and deleting a few keys, and splits, lease
// transfers and a follower cut off until it needs a snapshot race with
// it. Readers read the whole span at a timestamp a little in the past and
// remember the answer; every later read at that timestamp, during the
// races and after them, must return exactly the same rows or be refused
// as below the GC threshold (mvcc invariant 7: GC changes no read at or
// above its threshold, whichever replica serves it). At the end every
// replica of every tablet holds the same engine image, so no replica kept
// (and could later serve) a version another one collected.
func TestClusterGCRaces(t *testing.T) {
	const ttl = 400 * time.Millisecond
	c := StartCluster(t, ClusterOptions{LogKeep: 20, Store: store.Config{
		GCTTL:      func([]byte) time.Duration { return ttl },
		GCInterval: 20 * time.Millisecond,
		GCFraction: 0.01,
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.WaitLeader(1, 10*time.Second)
	start, end := []byte("\x03g"), []byte("\x03h")
	key := func(i int) []byte { return fmt.Appendf(nil, "\x03g%02d", i) }

	readAt := func(n *ClusterNode, ts hlc.Timestamp) (map[string]string, error) {
		ba := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: ts}}
		ba.Add(&kvpb.ScanRequest{Key: start, EndKey: end})
		br, err := n.DB.Send(ctx, ba)
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, kv := range br.Responses[0].(*kvpb.ScanResponse).Rows {
			out[string(kv.Key)] = string(kv.Value)
		}
		return out, nil
	}
	type snapshot struct {
		ts   hlc.Timestamp
		rows map[string]string
	}
	var (
		mu        sync.Mutex
		snaps     []snapshot
		refused   atomic.Int64
		rechecked atomic.Int64
	)
	// recheck reads snapshot s again through n: the same rows, or refused.
	recheck := func(n *ClusterNode, s snapshot) {
		got, err := readAt(n, s.ts)
		var bgc *kvpb.BatchTimestampBeforeGCError
		switch {
		case errors.As(err, &bgc):
			refused.Add(1)
		case err != nil:
			// Ambiguity and lease moves are not this test's subject.
			return
		case fmt.Sprint(got) != fmt.Sprint(s.rows):
			t.Errorf("read at %s through node %d changed:\nnow  %v\nthen %v", s.ts, n.ID, got, s.rows)
		default:
			rechecked.Add(1)
		}
	}

	var wg sync.WaitGroup
	var gcRemoved atomic.Int64
	// The GC queues (on every node: each collects what it leads).
	for _, n := range c.Nodes {
		wg.Go(func() {
			for ctx.Err() == nil {
				gcRemoved.Add(n.Store.GCPass(ctx, false))
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	// Writers: new versions and deletions of 16 keys.
	for w := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 14))
			for i := 0; ctx.Err() == nil; i++ {
				n := c.Nodes[rng.IntN(len(c.Nodes))]
				k := key(rng.IntN(16))
				var err error
				if rng.IntN(8) == 0 {
					err = n.DB.Delete(ctx, k)
				} else {
					err = n.DB.Put(ctx, k, fmt.Appendf(nil, "w%d-%d", w, i))
				}
				_ = err // failures (ambiguous, moved) leave the history as it is
			}
		})
	}
	// Readers: a snapshot 100 ms in the past (past the maximum offset, so
	// every write at or below it is acknowledged), re-read later.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(3, 14))
		for ctx.Err() == nil {
			n := c.Nodes[rng.IntN(len(c.Nodes))]
			ts := n.Clock.Now()
			ts = hlc.Timestamp{WallTime: ts.WallTime - int64(100*time.Millisecond)}
			if rows, err := readAt(n, ts); err == nil {
				mu.Lock()
				snaps = append(snaps, snapshot{ts: ts, rows: rows})
				s := snaps[rng.IntN(len(snaps))]
				mu.Unlock()
				recheck(c.Nodes[rng.IntN(len(c.Nodes))], s)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	// The races: splits, lease transfers, and a follower cut off from
	// tablet 1 long enough to need a snapshot.
	rng := rand.New(rand.NewPCG(9, 14))
	var splits, transfers int
	for round := range 12 {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.SplitRequest{SplitKey: key(1 + rng.IntN(15))})
		if _, err := c.Nodes[rng.IntN(len(c.Nodes))].DB.Send(ctx, ba); err == nil {
			splits++
		}
		tablets := c.Nodes[0].Store.Tablets()
		d := tablets[rng.IntN(len(tablets))]
		if from := c.Leader(d.TabletID); from != 0 {
			if err := c.Nodes[from-1].Raft.TransferLeader(uint64(d.TabletID), from%3+1); err == nil {
				transfers++
			}
		}
		if round%4 == 0 {
			leader := c.WaitLeader(1, 10*time.Second)
			cut := leader%3 + 1
			c.BlockTablet(1, cut)
			time.Sleep(300 * time.Millisecond)
			c.UnblockTablet(1, cut)
		}
		time.Sleep(150 * time.Millisecond)
	}
	cancel()
	wg.Wait()

	// After the races: every snapshot again, through every node.
	ctx = context.Background()
	for _, s := range snaps {
		for _, n := range c.Nodes {
			got, err := readAt(n, s.ts)
			var bgc *kvpb.BatchTimestampBeforeGCError
			if errors.As(err, &bgc) {
				continue
			}
			if err != nil {
				t.Fatalf("read at %s through node %d: %v", s.ts, n.ID, err)
			}
			if fmt.Sprint(got) != fmt.Sprint(s.rows) {
				t.Fatalf("read at %s through node %d changed after the races:\nnow  %v\nthen %v", s.ts, n.ID, got, s.rows)
			}
			rechecked.Add(1)
		}
	}
	// Every replica collected the same versions.
	for _, d := range c.Nodes[0].Store.Tablets() {
		deadline := time.Now().Add(20 * time.Second)
		for {
			img := engineImage(t, c.Nodes[0], d)
			same := true
			for _, n := range c.Nodes[1:] {
				if fmt.Sprint(engineImage(t, n, d)) != fmt.Sprint(img) {
					same = false
				}
			}
			if same {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("tablet %s: replicas' engine images differ after GC", &d)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("%d snapshots, %d re-reads equal, %d refused below the threshold; %d versions collected; %d splits, %d transfers",
		len(snaps), rechecked.Load(), refused.Load(), gcRemoved.Load(), splits, transfers)
	if gcRemoved.Load() == 0 || refused.Load() == 0 || rechecked.Load() == 0 {
		t.Fatalf("the races exercised nothing: %d collected, %d refused, %d re-read", gcRemoved.Load(), refused.Load(), rechecked.Load())
	}
}
