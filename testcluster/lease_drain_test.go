package testcluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/rpc"
)

var (
	transferChurnDuration = flag.Duration("transfer-churn-duration", 5*time.Second, "how long TestLeaseTransferChurnNoAmbiguity moves leases under writes (at least; until 12 transfers, at most 3×)")
	transferChurnBatch    = flag.Int("transfer-churn-batch", 64, "puts of 16 KiB in each batch of TestLeaseTransferChurnNoAmbiguity")
	transferChurnSeed     = flag.Bool("transfer-churn-seed", false, "TestLeaseTransferChurnNoAmbiguity at the seed's round trips and cairn start's tick and maximum offset (slower)")
)

// errorKinds counts a workload's failed writes by kind.
type errorKinds struct {
	mu     sync.Mutex
	counts map[string]int
	sample map[string]string
}

func (e *errorKinds) add(err error) {
	kind := "other"
	var amb *kvpb.AmbiguousResultError
	var nle *kvpb.NotLeaseholderError
	switch {
	case errors.As(err, &amb):
		kind = "ambiguous"
	case errors.As(err, &nle):
		kind = "not-leaseholder"
	case strings.Contains(err.Error(), "no leaseholder found"):
		kind = "no-leaseholder"
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.counts == nil {
		e.counts, e.sample = map[string]int{}, map[string]string{}
	}
	e.counts[kind]++
	if _, ok := e.sample[kind]; !ok {
		e.sample[kind] = err.Error()
	}
}

func (e *errorKinds) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var kinds []string
	for k := range e.counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "%s: %d (e.g. %s); ", k, e.counts[k], e.sample[k])
	}
	return b.String()
}

// TestLeaseTransferChurnNoAmbiguity moves tablet 1's lease to the next
// node about every 100 ms (at least 12 times) while every gateway writes: single puts, batches
// of 1 MiB (one large raft entry each, slow to replicate and apply) and
// transactions of two keys. Round trips are the seed's scaled down 5×. A
// planned transfer drains the leaseholder's proposals first (raftnode's
// TransferLeader, tablet.DrainLease), so no write may come back
// ambiguous (40003 at the SQL boundary) or fail, and every acknowledged
// write must be on every node at the end.
func TestLeaseTransferChurnNoAmbiguity(t *testing.T) {
	latency, opts := "us-west:us-east=12ms,us-east:eu=17ms,eu:us-west=29ms", ClusterOptions{}
	if *transferChurnSeed {
		latency, opts = "us-west:us-east=60ms,us-east:eu=86ms,eu:us-west=145ms", ClusterOptions{Tick: 50 * time.Millisecond, MaxOffset: 500 * time.Millisecond}
	}
	lat, err := rpc.ParseLatencyMap(latency)
	if err != nil {
		t.Fatal(err)
	}
	opts.Geo = &GeoOptions{
		Localities: []string{"region=us-west", "region=us-east", "region=eu"},
		Latency:    lat,
	}
	c := StartCluster(t, opts)
	c.WaitLeader(1, 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var mu sync.Mutex
	acked := map[string]string{}
	ack := func(kvs map[string]string) {
		mu.Lock()
		defer mu.Unlock()
		for k, v := range kvs {
			acked[k] = v
		}
	}
	var errs errorKinds
	var ops atomic.Int64
	big := strings.Repeat("x", 16<<10)
	batch := *transferChurnBatch
	if raceEnabled {
		// 1 MiB entries under the race detector outlast every drain's
		// 1 s timeout, and each transfer is refused.
		batch = min(batch, 4)
	}
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		// Single puts.
		for w := range 2 {
			wg.Go(func() {
				for i := 0; ctx.Err() == nil; i++ {
					k, v := fmt.Sprintf("\x03p%d-%d-%06d", n.ID, w, i), fmt.Sprintf("v%d", i)
					if err := n.DB.Put(ctx, []byte(k), []byte(v)); err != nil {
						if ctx.Err() == nil {
							errs.add(err)
						}
						continue
					}
					ack(map[string]string{k: v})
					ops.Add(1)
				}
			})
		}
		// Batches of 64 × 16 KiB: one 1 MiB raft entry each.
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				b := &kv.Batch{}
				kvs := map[string]string{}
				for j := range batch {
					k := fmt.Sprintf("\x03b%d-%05d-%02d", n.ID, i, j)
					v := fmt.Sprintf("%d-%s", i, big)
					b.Put([]byte(k), []byte(v))
					kvs[k] = v
				}
				if err := n.DB.Run(ctx, b); err != nil {
					if ctx.Err() == nil {
						errs.add(err)
					}
					continue
				}
				ack(kvs)
				ops.Add(1)
			}
		})
		// Transactions of two keys.
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				k1, k2, v := fmt.Sprintf("\x03t%d-%06d-a", n.ID, i), fmt.Sprintf("\x03t%d-%06d-b", n.ID, i), fmt.Sprintf("v%d", i)
				err := n.DB.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
					if err := txn.Put(ctx, []byte(k1), []byte(v)); err != nil {
						return err
					}
					return txn.Put(ctx, []byte(k2), []byte(v))
				})
				if err != nil {
					if ctx.Err() == nil {
						errs.add(err)
					}
					continue
				}
				ack(map[string]string{k1: v, k2: v})
				ops.Add(1)
			}
		})
	}

	transfers, refused := 0, 0
	// At least the duration and 12 transfers (a loaded machine makes
	// each slower), at most three times the duration.
	began := time.Now()
	for since := time.Duration(0); since < 3**transferChurnDuration && (since < *transferChurnDuration || transfers < 12); since = time.Since(began) {
		time.Sleep(100 * time.Millisecond)
		from := c.Leader(1)
		if from == 0 {
			continue
		}
		start := ops.Load()
		if err := c.Nodes[from-1].Raft.TransferLeader(1, from%3+1); err != nil {
			refused++
			continue
		}
		transfers++
		// Writes under each lease: the next transfer waits for the new
		// leaseholder to serve some (it first waits out the maximum
		// clock offset).
		for wait := time.Now().Add(5 * time.Second); ops.Load() < start+3 && time.Now().Before(wait); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	cancel()
	wg.Wait()
	t.Logf("%d transfers (%d refused); %d writes acknowledged (%d keys); errors: %s", transfers, refused, ops.Load(), len(acked), errs.String())
	if transfers < 8 {
		t.Errorf("only %d transfers", transfers)
	}
	if ops.Load() == 0 {
		t.Fatal("no write was acknowledged")
	}
	if s := errs.String(); s != "" {
		t.Errorf("writes failed under planned lease transfers: %s", s)
	}
	for _, n := range c.Nodes {
		deadline := time.Now().Add(20 * time.Second)
		for {
			got := engineRows(t, n, "\x03", "\x04")
			missing := ""
			for k, v := range acked {
				if got[k] != v {
					missing = fmt.Sprintf("%q (has %d bytes)", k, len(got[k]))
					break
				}
			}
			if missing == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d lost acknowledged write %s", n.ID, missing)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestPlannedTransferSlowLog: a write is in flight on the leaseholder
// (appended, its appends to the followers held back 2.5 s, heartbeats
// not) when its lease is moved. Before transfers drained, the leaseholder
// gave the lease up at once and, 2 s later, having learned nothing,
// answered the write AmbiguousResultError, though it applied moments
// after. Now the transfer waits for the write (raftnode.DrainTimeout),
// is refused when it does not apply in time (the lease stays), and the
// write is acknowledged; a later transfer goes through.
func TestPlannedTransferSlowLog(t *testing.T) {
	c := StartCluster(t, ClusterOptions{})
	l := c.WaitLeader(1, 10*time.Second)
	putRetry(t, c.Nodes[l-1].DB, "\x03warm", "x")
	c.DelayEntries(1, 2500*time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- c.Nodes[l-1].DB.Put(context.Background(), []byte("\x03slow"), []byte("v")) }()
	time.Sleep(200 * time.Millisecond) // proposed, its appends held back
	to := l%3 + 1
	start := time.Now()
	terr := c.Nodes[l-1].Raft.TransferLeader(1, to)
	t.Logf("transfer with the write in flight after %v: %v", time.Since(start).Round(time.Millisecond), terr)
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the write never returned")
	}
	c.DelayEntries(1, 0)
	if err != nil {
		t.Errorf("write in flight during a planned transfer: %v", err)
	}
	for _, n := range c.Nodes {
		deadline := time.Now().Add(10 * time.Second)
		for engineRows(t, n, "\x03slow", "\x03slow\x00")["\x03slow"] != "v" {
			if time.Now().After(deadline) {
				t.Fatalf("node %d: the write is not there", n.ID)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.Leader(1) != to {
		if time.Now().After(deadline) {
			t.Fatalf("leader %d, want %d after the write applied", c.Leader(1), to)
		}
		if from := c.Leader(1); from != 0 && from != to {
			_ = c.Nodes[from-1].Raft.TransferLeader(1, to)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCutOffProposerAmbiguous: the one case left for an ambiguous answer.
// A write is proposed on the leaseholder (its appends held back, so it is
// not committed), then the leaseholder is cut off from the others: it
// loses the lease and learns nothing more, so the write's outcome is
// unknown to it and, after unknownAfter (5 s), it says so (AmbiguousResultError)
// rather than wait forever or call it failed.
func TestCutOffProposerAmbiguous(t *testing.T) {
	c := StartCluster(t, ClusterOptions{})
	l := c.WaitLeader(1, 10*time.Second)
	old := c.Nodes[l-1]
	putRetry(t, old.DB, "\x03warm", "x")
	c.DelayEntries(1, 10*time.Second)
	done := make(chan error, 1)
	go func() {
		put := &kvpb.BatchRequest{Header: kvpb.Header{TabletID: 1}}
		put.Add(&kvpb.PutRequest{Key: []byte("\x03cut"), Value: []byte("v")})
		_, err := old.Store.Send(context.Background(), put)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // proposed, its appends held back
	c.Partition(l)
	start := time.Now()
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the cut-off proposer never answered")
	}
	c.Heal()
	c.DelayEntries(1, 0)
	var amb *kvpb.AmbiguousResultError
	if !errors.As(err, &amb) {
		t.Fatalf("cut-off proposer answered %v, want an AmbiguousResultError", err)
	}
	t.Logf("ambiguous %v after the cut: %v", time.Since(start).Round(10*time.Millisecond), err)
}
