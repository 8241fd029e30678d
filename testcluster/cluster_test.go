package testcluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/store"
)

// engineRows reads the committed rows of [start, end) straight from a
// node's engine (not through any tablet), at the latest timestamp.
func engineRows(t *testing.T, n *ClusterNode, start, end string) map[string]string {
	t.Helper()
	res, err := mvcc.Scan(n.Engine, []byte(start), []byte(end), hlc.MaxTimestamp, mvcc.ScanOptions{ReadOptions: mvcc.ReadOptions{Inconsistent: true}})
	if err != nil {
		t.Fatalf("node %d: scan engine: %v", n.ID, err)
	}
	out := map[string]string{}
	for _, kv := range res.Rows {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out
}

// waitReplicated waits until node n's engine holds exactly want in
// [start, end).
func waitReplicated(t *testing.T, n *ClusterNode, start, end string, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := engineRows(t, n, start, end)
		if equalMaps(got, want) {
			return
		}
		if time.Now().After(deadline) {
			for _, m := range n.c.Nodes {
				if m.Running() {
					if r := m.Raft.Replica(1); r != nil {
						t.Logf("node %d: %+v applied %d", m.ID, r.Status(), r.Applied())
					}
				}
			}
			select {
			case err := <-n.runDone:
				t.Logf("node %d run: %v", n.ID, err)
			default:
			}
			t.Fatalf("node %d holds %d rows of %d (e.g. %v)", n.ID, len(got), len(want), firstDiff(got, want))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func firstDiff(got, want map[string]string) string {
	for k, v := range want {
		if got[k] != v {
			return fmt.Sprintf("%q = %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			return fmt.Sprintf("unexpected %q", k)
		}
	}
	return "none"
}

// putRetry writes through db; an ambiguous answer (the leader died with
// the write in flight) is retried, which is fine for an idempotent put.
func putRetry(t *testing.T, db *kv.DB, k, v string) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		err := db.Put(context.Background(), []byte(k), []byte(v))
		if err == nil {
			return
		}
		var amb *kvpb.AmbiguousResultError
		if !errors.As(err, &amb) || attempt > 5 {
			t.Fatalf("put %s: %v", k, err)
		}
	}
}

// TestClusterReplication writes through node 1 of three (or five), checks every
// node's engine, stops the leaseholder, keeps writing through the
// survivors under a new leaseholder, and restarts the stopped node, which
// catches up from the log.
func TestClusterReplication(t *testing.T) {
	for _, nodes := range []int{3, 5} {
		t.Run(fmt.Sprintf("nodes=%d", nodes), func(t *testing.T) { testClusterReplication(t, nodes) })
	}
}

func testClusterReplication(t *testing.T, nodes int) {
	c := StartCluster(t, ClusterOptions{Nodes: nodes})
	leader := c.WaitLeader(1, 10*time.Second)
	t.Logf("tablet 1 leaseholder: node %d", leader)

	want := map[string]string{}
	for i := range 20 {
		k, v := fmt.Sprintf("\x03k%02d", i), fmt.Sprintf("v%d", i)
		putRetry(t, c.Nodes[0].DB, k, v)
		want[k] = v
	}
	for _, n := range c.Nodes {
		waitReplicated(t, n, "\x03", "\x04", want)
	}

	// Stop the leaseholder: another node takes over and writes go on,
	// through a gateway that is not the stopped node.
	old := c.Nodes[leader-1]
	if err := old.Stop(); err != nil {
		t.Fatal(err)
	}
	next := c.WaitLeader(1, 20*time.Second)
	if next == leader {
		t.Fatalf("stopped node %d still leads", leader)
	}
	t.Logf("after stopping node %d, node %d leads", leader, next)
	gateway := c.Nodes[int(leader)%nodes] // a running node
	for i := 20; i < 40; i++ {
		k, v := fmt.Sprintf("\x03k%02d", i), fmt.Sprintf("v%d", i)
		putRetry(t, gateway.DB, k, v)
		want[k] = v
	}
	// Every acknowledged write is readable through every running node.
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		rows, err := n.DB.Scan(context.Background(), []byte("\x03"), []byte("\x04"), 0)
		if err != nil {
			t.Fatalf("scan through node %d: %v", n.ID, err)
		}
		if len(rows) != len(want) {
			t.Fatalf("scan through node %d: %d rows, want %d", n.ID, len(rows), len(want))
		}
	}

	// The stopped node comes back and catches up by log.
	if err := old.Restart(); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		waitReplicated(t, n, "\x03", "\x04", want)
	}
	// And serves as a gateway again.
	putRetry(t, old.DB, "\x03z", "after restart")
	want["\x03z"] = "after restart"
	for _, n := range c.Nodes {
		waitReplicated(t, n, "\x03", "\x04", want)
	}
}

// TestClusterCatchUpBySnapshot stops a follower, writes until the
// others have compacted their logs past it, and restarts it: it catches
// up from a snapshot of the tablet, then from the log again.
func TestClusterCatchUpBySnapshot(t *testing.T) {
	c := StartCluster(t, ClusterOptions{LogKeep: 10})
	leader := c.WaitLeader(1, 10*time.Second)
	lagging := c.Nodes[leader%3]
	gateway := c.Nodes[leader-1]
	want := map[string]string{}
	put := func(i int) {
		k, v := fmt.Sprintf("\x03s%03d", i), fmt.Sprintf("v%d", i)
		putRetry(t, gateway.DB, k, v)
		want[k] = v
	}
	for i := range 5 {
		put(i)
	}
	waitReplicated(t, lagging, "\x03", "\x04", want)
	if err := lagging.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := 5; i < 100; i++ {
		put(i)
	}
	sent := gateway.Raft.SnapshotsSent.Load()
	if err := lagging.Restart(); err != nil {
		t.Fatal(err)
	}
	waitReplicated(t, lagging, "\x03", "\x04", want)
	if got := lagging.Raft.SnapshotsApplied.Load(); got == 0 {
		t.Fatalf("node %d caught up without a snapshot (its peers kept %d entries)", lagging.ID, 10)
	}
	if gateway.Raft.SnapshotsSent.Load() == sent {
		t.Fatalf("the leaseholder sent no snapshot")
	}
	// After the snapshot it follows the log again.
	for i := 100; i < 110; i++ {
		put(i)
	}
	waitReplicated(t, lagging, "\x03", "\x04", want)
	// And it serves as a gateway.
	rows, err := lagging.DB.Scan(context.Background(), []byte("\x03"), []byte("\x04"), 0)
	if err != nil || len(rows) != len(want) {
		t.Fatalf("scan through node %d: %d rows, err %v; want %d", lagging.ID, len(rows), err, len(want))
	}
}

// TestClusterPartitionedLeaseholder cuts the leaseholder off from the
// other two: they elect a new one and take a write, and the old one, which
// may not yet know it was replaced, must not answer a read with the value
// the write replaced. Healed, it catches up and nothing diverged. (With
// these tick settings CheckQuorum also deposes the old leader before the
// others finish electing, so this test alone does not show the read lease
// is needed; it shows the whole is safe.)
func TestClusterPartitionedLeaseholder(t *testing.T) {
	c := StartCluster(t, ClusterOptions{})
	ctx := context.Background()
	leader := c.WaitLeader(1, 10*time.Second)
	old := c.Nodes[leader-1]
	other := c.Nodes[leader%3]
	putRetry(t, old.DB, "\x03k", "before")
	waitReplicated(t, other, "\x03k", "\x03l", map[string]string{"\x03k": "before"})

	c.Partition(old.ID)
	// Write straight to the new leaseholder as soon as there is one, and
	// read at the old one at once: the window in which it may still
	// believe it leads.
	var next *ClusterNode
	for deadline := time.Now().Add(20 * time.Second); next == nil; {
		for _, n := range c.Nodes {
			if r := n.Raft.Replica(1); n != old && r != nil {
				if term, _ := r.Lease(); term != 0 {
					next = n
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no new leaseholder")
		}
		time.Sleep(time.Millisecond)
	}
	put := &kvpb.BatchRequest{Header: kvpb.Header{TabletID: 1}}
	put.Add(&kvpb.PutRequest{Key: []byte("\x03k"), Value: []byte("after")})
	if _, err := next.Store.Send(ctx, put); err != nil {
		t.Fatalf("write at the new leaseholder node %d: %v", next.ID, err)
	}

	get := &kvpb.BatchRequest{Header: kvpb.Header{TabletID: 1}}
	get.Add(&kvpb.GetRequest{Key: []byte("\x03k")})
	br, err := old.Store.Send(ctx, get)
	if err == nil {
		t.Fatalf("the cut-off node served a read: %q", br.Responses[0].(*kvpb.GetResponse).Value)
	}
	var nle *kvpb.NotLeaseholderError
	if !errors.As(err, &nle) {
		t.Fatalf("read at the cut-off node: %v, want a NotLeaseholderError", err)
	}

	c.Heal()
	want := map[string]string{"\x03k": "after"}
	for _, n := range c.Nodes {
		waitReplicated(t, n, "\x03", "\x04", want)
	}
	v, _, err := old.DB.Get(ctx, []byte("\x03k"))
	if err != nil || string(v) != "after" {
		t.Fatalf("read through the healed node: %q, %v", v, err)
	}
}

// TestClusterSplit splits the tablet through a gateway: every node
// applies the split from the log and starts the right side's group, which
// gets a leaseholder; writes on both sides replicate everywhere, and
// survive the loss of the right side's leaseholder.
func TestClusterSplit(t *testing.T) {
	c := StartCluster(t, ClusterOptions{})
	ctx := context.Background()
	c.WaitLeader(1, 10*time.Second)
	gateway := c.Nodes[2]
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.SplitRequest{SplitKey: []byte("\x03m")})
	br, err := gateway.DB.Send(ctx, ba)
	if err != nil {
		t.Fatal(err)
	}
	sr := br.Responses[0].(*kvpb.SplitResponse)
	right := sr.Right.TabletID
	for _, n := range c.Nodes {
		deadline := time.Now().Add(20 * time.Second)
		for len(n.Store.Tablets()) != 2 {
			if time.Now().After(deadline) {
				t.Fatalf("node %d has tablets %v after the split", n.ID, n.Store.Tablets())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	rl := c.WaitLeader(right, 10*time.Second)
	want := map[string]string{}
	for i := range 10 {
		for _, p := range []string{"\x03a", "\x03x"} {
			k, v := fmt.Sprintf("%s%02d", p, i), fmt.Sprintf("v%d", i)
			putRetry(t, gateway.DB, k, v)
			want[k] = v
		}
	}
	for _, n := range c.Nodes {
		waitReplicated(t, n, "\x03", "\x04", want)
	}
	if err := c.Nodes[rl-1].Stop(); err != nil {
		t.Fatal(err)
	}
	survivor := c.Nodes[rl%3]
	for i := 10; i < 20; i++ {
		k, v := fmt.Sprintf("\x03x%02d", i), fmt.Sprintf("v%d", i)
		putRetry(t, survivor.DB, k, v)
		want[k] = v
	}
	rows, err := survivor.DB.Scan(ctx, []byte("\x03"), []byte("\x04"), 0)
	if err != nil || len(rows) != len(want) {
		t.Fatalf("scan through node %d: %d rows, %v; want %d", survivor.ID, len(rows), err, len(want))
	}
	if err := c.Nodes[rl-1].Restart(); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		waitReplicated(t, n, "\x03", "\x04", want)
	}
}

// TestClusterConcurrentSplits splits two tablets at once through two
// gateways after a leaseholder change (so their leaseholders may be on
// different nodes): the tablet IDs come from one replicated counter, so
// every node ends with the same four tablets under four distinct IDs.
func TestClusterConcurrentSplits(t *testing.T) {
	c := StartCluster(t, ClusterOptions{})
	ctx := context.Background()
	// A split whose answer was lost (sent to the node just stopped, over
	// a connection not yet seen closed) is ambiguous; retried, it either
	// splits or finds the boundary already there.
	split := func(n *ClusterNode, key string) error {
		var err error
		for attempt := range 5 {
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.SplitRequest{SplitKey: []byte(key)})
			_, err = n.DB.Send(ctx, ba)
			var amb *kvpb.AmbiguousResultError
			var inv *kvpb.InvalidArgumentError
			switch {
			case err == nil:
				return nil
			case errors.As(err, &amb):
				continue
			case attempt > 0 && errors.As(err, &inv):
				return nil
			}
			return err
		}
		return err
	}
	l := c.WaitLeader(1, 10*time.Second)
	if err := split(c.Nodes[0], "\x03m"); err != nil {
		t.Fatal(err)
	}
	c.WaitLeader(2, 10*time.Second)
	if err := c.Nodes[l-1].Stop(); err != nil {
		t.Fatal(err)
	}
	a, b := c.Nodes[l%3], c.Nodes[(l+1)%3]
	var wg sync.WaitGroup
	var errA, errB error
	wg.Go(func() { errA = split(a, "\x03f") })
	wg.Go(func() { errB = split(b, "\x03t") })
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("splits: %v, %v", errA, errB)
	}
	if err := c.Nodes[l-1].Restart(); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		deadline := time.Now().Add(20 * time.Second)
		for {
			ds := n.Store.Tablets()
			ids := map[kvpb.TabletID]bool{}
			for _, d := range ds {
				ids[d.TabletID] = true
			}
			if len(ds) == 4 && len(ids) == 4 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d has tablets %v", n.ID, ds)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	want := fmt.Sprint(c.Nodes[0].Store.Tablets())
	for _, n := range c.Nodes[1:] {
		if got := fmt.Sprint(n.Store.Tablets()); got != want {
			t.Fatalf("node %d has %s, node 1 %s", n.ID, got, want)
		}
	}
}

// TestClusterBankUnderLeaderKill runs transfers between accounts through
// all three nodes while the leaseholder crashes (losing what it had not
// synced) and restarts. At the
// end the total is unchanged, every acknowledged transfer's marker is
// present (written in the same transaction), and the replicas agree.
func TestClusterBankUnderLeaderKill(t *testing.T) {
	c := StartCluster(t, ClusterOptions{})
	c.WaitLeader(1, 10*time.Second)
	const accounts, initial = 8, 100
	acct := func(i int) string { return fmt.Sprintf("\x03acct%02d", i) }
	ctx := context.Background()
	for i := range accounts {
		putRetry(t, c.Nodes[0].DB, acct(i), strconv.Itoa(initial))
	}

	var (
		mu       sync.Mutex
		acked    []string
		outcomes = map[string]int{}
		seq      atomic.Int64
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	for w := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for !stop.Load() {
				n := c.Nodes[w]
				if !n.Running() {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				from, to := rng.IntN(accounts), rng.IntN(accounts)
				if from == to {
					continue
				}
				id := fmt.Sprintf("\x03xfer%06d", seq.Add(1))
				err := transfer(ctx, n.DB, acct(from), acct(to), id, 1+rng.IntN(10))
				mu.Lock()
				switch {
				case err == nil:
					acked = append(acked, id)
					outcomes["ok"]++
				default:
					k := classify(err)
					if outcomes[k] == 0 {
						t.Logf("first %s outcome: %v", k, err)
					}
					outcomes[k]++
				}
				mu.Unlock()
			}
		})
	}

	// Let transfers run, stop the leaseholder, let them run on the
	// survivors, restart it, let them run again.
	waitAcked := func(n int) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			got := len(acked)
			mu.Unlock()
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("only %d transfers acknowledged, waiting for %d (outcomes %v)", got, n, outcomes)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitAcked(20)
	leader := c.WaitLeader(1, 10*time.Second)
	victim := c.Nodes[leader-1]
	// A crash, not a clean stop: what the victim had not synced is gone.
	if err := victim.Crash(uint64(time.Now().UnixNano())); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	base := len(acked)
	mu.Unlock()
	waitAcked(base + 20)
	if err := victim.Restart(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	base = len(acked)
	mu.Unlock()
	waitAcked(base + 20)
	stop.Store(true)
	wg.Wait()

	// Read through one node: total unchanged, every acknowledged transfer
	// present.
	db := c.Nodes[(leader)%3].DB
	total := 0
	for i := range accounts {
		v, _, err := db.Get(ctx, []byte(acct(i)))
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(string(v))
		if err != nil {
			t.Fatalf("%s = %q: %v", acct(i), v, err)
		}
		total += n
	}
	if total != accounts*initial {
		t.Fatalf("total = %d, want %d (outcomes %v)", total, accounts*initial, outcomes)
	}
	for _, id := range acked {
		if _, ok, err := db.Get(ctx, []byte(id)); err != nil || !ok {
			t.Fatalf("acknowledged transfer %q lost (found=%t, err=%v)", id, ok, err)
		}
	}
	t.Logf("transfers: %v; leaseholder node %d crashed and restarted", outcomes, leader)

	// The replicas converge on the same committed state.
	rows, err := db.Scan(ctx, []byte("\x03"), []byte("\x04"), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, r := range rows {
		want[string(r.Key)] = string(r.Value)
	}
	for _, n := range c.Nodes {
		waitReplicated(t, n, "\x03", "\x04", want)
	}
}

// transfer moves amount from one account to another and writes the
// transfer's marker, all in one serializable transaction.
func transfer(ctx context.Context, db *kv.DB, from, to, id string, amount int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		fv, _, err := txn.Get(ctx, []byte(from))
		if err != nil {
			return err
		}
		tv, _, err := txn.Get(ctx, []byte(to))
		if err != nil {
			return err
		}
		f, err := strconv.Atoi(string(fv))
		if err != nil {
			return err
		}
		tt, err := strconv.Atoi(string(tv))
		if err != nil {
			return err
		}
		b := &kv.Batch{}
		b.Put([]byte(from), []byte(strconv.Itoa(f-amount)))
		b.Put([]byte(to), []byte(strconv.Itoa(tt+amount)))
		b.Put([]byte(id), []byte("done"))
		return txn.CommitInBatch(ctx, b)
	})
}

func classify(err error) string {
	var amb *kvpb.AmbiguousResultError
	switch {
	case errors.As(err, &amb):
		return "ambiguous"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, store.ErrClosed):
		return "gateway down"
	}
	return "error"
}
