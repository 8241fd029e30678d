package raftnode

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// gateSM is a state machine whose Apply of a large entry (at least
// bigEntry bytes) says it started and then waits to be released; it
// records what it applied and observed, and says when its lease came and
// when an entry was observed.
type gateSM struct {
	tablet  uint64
	in      chan struct{} // one send per large entry's Apply
	release chan struct{} // closed to let large applies finish

	mu        sync.Mutex
	applied   []string
	observed  []string
	leased    chan struct{}
	leaseOnce sync.Once
}

const bigEntry = 4096

func newGateSM(tablet uint64) *gateSM {
	return &gateSM{tablet: tablet, in: make(chan struct{}, 4), release: make(chan struct{}), leased: make(chan struct{})}
}

func (g *gateSM) Apply(b *storage.Batch, e *pb.Entry) error {
	if len(e.GetData()) >= bigEntry {
		g.in <- struct{}{}
		<-g.release
	}
	g.mu.Lock()
	g.applied = append(g.applied, string(e.GetData()[:1]))
	g.mu.Unlock()
	return b.Put(storage.MVCCKey{Key: append([]byte("gate/"), byte(g.tablet), byte(e.GetIndex()))}, e.GetData())
}

func (g *gateSM) Applied(entries []*pb.Entry, _ bool) {
	g.mu.Lock()
	for _, e := range entries {
		if len(e.GetData()) > 0 {
			g.observed = append(g.observed, string(e.GetData()[:1]))
		}
	}
	g.mu.Unlock()
}

func (g *gateSM) LeaseAcquired(uint64, bool) { g.leaseOnce.Do(func() { close(g.leased) }) }

func (g *gateSM) Snapshot() ([]byte, error)                        { return nil, nil }
func (g *gateSM) ApplySnapshot(*storage.Batch, *pb.Snapshot) error { return nil }

func (g *gateSM) seen() (applied, observed []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.applied), slices.Clone(g.observed)
}

// hangGuard bounds a wait for a condition that a broken node never
// meets, so the test fails instead of hanging; it is no timing
// assertion (a working node meets the conditions in milliseconds).
const hangGuard = 30 * time.Second

// await waits until cond holds, failing the test with what after
// hangGuard.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// runNode starts n's scheduler; the returned stop (idempotent) ends it
// and waits for it and its workers.
func runNode(t *testing.T, n *Node) (stop func()) { return runNodeTick(t, n, 5*time.Millisecond) }

// runNodeTick is runNode with ticks of the given length.
func runNodeTick(t *testing.T, n *Node, tick time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx, tick) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}

// TestSlowApplyHoldsNoOtherGroup (doc.go, invariants 5 and 6): while one
// group's large apply is stopped inside its state machine, another
// group's proposal is made, committed, applied and observed, and the
// first group takes proposals; once released, the first group's entries
// are applied and observed in log order, its applied index stored with
// them. Before applies left the round, the stopped apply held the node's
// lock: the second proposal could not even enter raft.
func TestSlowApplyHoldsNoOtherGroup(t *testing.T) {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	n := NewNode(Config{NodeID: 1, ApplyOffloadBytes: bigEntry}, eng, nil)
	a, b := newGateSM(1), newGateSM(2)
	for _, g := range []*gateSM{a, b} {
		if _, err := n.AddReplica(g.tablet, []uint64{1}, g); err != nil {
			t.Fatal(err)
		}
		if err := n.Campaign(g.tablet); err != nil {
			t.Fatal(err)
		}
	}
	stop := runNode(t, n)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(a.release) }) }
	defer stop()
	defer release()
	for _, g := range []*gateSM{a, b} {
		select {
		case <-g.leased:
		case <-time.After(hangGuard):
			t.Fatalf("tablet %d never got its lease", g.tablet)
		}
	}

	if err := n.Propose(1, bytes.Repeat([]byte("B"), bigEntry)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.in:
	case <-time.After(hangGuard):
		t.Fatal("tablet 1's large entry was never applied")
	}
	// Tablet 1's apply is stopped. Tablet 2 commits and applies.
	proposed := make(chan error, 1)
	go func() { proposed <- n.Propose(2, []byte("s")) }()
	await(t, "tablet 2's proposal applied and observed while tablet 1's apply was stopped", func() bool {
		_, obs := b.seen()
		return slices.Equal(obs, []string{"s"})
	})
	if err := <-proposed; err != nil {
		t.Fatal(err)
	}
	// Tablet 1 takes a proposal meanwhile; it is applied after the
	// stopped one, in log order.
	if err := n.Propose(1, []byte("t")); err != nil {
		t.Fatal(err)
	}
	if app, obs := a.seen(); len(app) != 0 || len(obs) != 0 {
		t.Fatalf("tablet 1 applied %v and observed %v with its first apply stopped", app, obs)
	}
	stopped := n.Replica(1).Applied()
	release()
	await(t, "tablet 1's entries observed once released", func() bool {
		_, obs := a.seen()
		return slices.Equal(obs, []string{"B", "t"})
	})
	if app, _ := a.seen(); !slices.Equal(app, []string{"B", "t"}) {
		t.Fatalf("tablet 1 applied %v, want [B t]", app)
	}
	stop()
	got, err := readApplied(eng, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := n.Replica(1).Applied(); got != want || got < stopped+2 {
		t.Fatalf("tablet 1's stored applied index %d, replica's %d, %d before its two entries applied", got, want, stopped)
	}
	if st := n.Stats(); st.OffloadedApplies.Load() == 0 {
		t.Fatal("no apply was offloaded")
	}
}

// TestRemoveReplicaCancelsOffloadedApply (doc.go, invariant 7): a
// replica removed while its offloaded apply waits for a worker is never
// applied to, and RemoveReplica does not wait for that apply; its stored
// applied index stays deleted.
func TestRemoveReplicaCancelsOffloadedApply(t *testing.T) {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	// One worker: tablet 1's stopped apply holds it, so tablet 3's waits.
	n := NewNode(Config{NodeID: 1, ApplyOffloadBytes: bigEntry, ApplyWorkers: 1}, eng, nil)
	a, c := newGateSM(1), newGateSM(3)
	for _, g := range []*gateSM{a, c} {
		if _, err := n.AddReplica(g.tablet, []uint64{1}, g); err != nil {
			t.Fatal(err)
		}
		if err := n.Campaign(g.tablet); err != nil {
			t.Fatal(err)
		}
	}
	stop := runNode(t, n)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(a.release) }) }
	defer stop()
	defer release()
	for _, g := range []*gateSM{a, c} {
		select {
		case <-g.leased:
		case <-time.After(hangGuard):
			t.Fatalf("tablet %d never got its lease", g.tablet)
		}
	}
	if err := n.Propose(1, bytes.Repeat([]byte("B"), bigEntry)); err != nil {
		t.Fatal(err)
	}
	<-a.in
	if err := n.Propose(3, bytes.Repeat([]byte("C"), bigEntry)); err != nil {
		t.Fatal(err)
	}
	await(t, "tablet 3's apply handed to a worker", func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.replicas[3].applying != nil
	})
	if err := n.RemoveReplica(3); err != nil {
		t.Fatal(err)
	}
	release()
	await(t, "tablet 1's entry observed", func() bool {
		_, obs := a.seen()
		return len(obs) == 1
	})
	stop() // waits for the workers
	if app, obs := c.seen(); len(app) != 0 || len(obs) != 0 {
		t.Fatalf("removed tablet 3 applied %v and observed %v", app, obs)
	}
	if _, ok, err := eng.Get(n.appliedKey(3)); ok || err != nil {
		t.Fatalf("removed tablet 3's applied index is stored again (%v)", err)
	}
}
