package raftnode

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/storage/simfs"
	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// syncGate holds a node's syncs while armed: the round that syncs blocks
// in its commit until the test releases it, and the test learns when a
// sync began.
type syncGate struct {
	armed   atomic.Bool
	began   chan struct{}
	release chan struct{}
	once    sync.Once
}

// open disarms the gate and lets every held sync go on.
func (g *syncGate) open() {
	g.armed.Store(false)
	g.once.Do(func() { close(g.release) })
}

func newSyncGate() *syncGate {
	return &syncGate{began: make(chan struct{}, 16), release: make(chan struct{})}
}

// sleep is the simulated disk's wait for a sync (simfs.Options.Sleep).
func (g *syncGate) sleep(time.Duration) {
	if !g.armed.Load() {
		return
	}
	g.began <- struct{}{}
	<-g.release
}

// holdRound arms g, runs a round of n (ProcessReady) on a goroutine of
// its own and returns once that round is held in its sync; round gets the
// round's error after g opens. release opens g and waits for the round's
// goroutine: the test defers it, so that a test that fails with the round
// held still ends the round before its engine closes.
func holdRound(t *testing.T, n *Node, g *syncGate) (round <-chan error, release func()) {
	t.Helper()
	g.armed.Store(true)
	c, done := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(done)
		_, err := n.ProcessReady()
		c <- err
	}()
	release = func() { g.open(); <-done }
	select {
	case <-g.began:
	case err := <-c:
		t.Fatalf("the round ended (%v) without syncing", err)
	case <-time.After(30 * time.Second):
		release()
		t.Fatal("the round did not reach its sync")
	}
	return c, release
}

// gatedEngine opens an in-memory engine whose syncs g holds while it is
// armed; the test closes it.
func gatedEngine(t *testing.T, g *syncGate) *storage.Engine {
	t.Helper()
	eng, err := storage.Open("", storage.Options{FS: simfs.New(vfs.NewMem(), simfs.Options{Profile: simfs.Profile{SyncLatency: 1}, Sleep: g.sleep})})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// leadAlone makes n's replica r of tablet, whose only voter n is, campaign,
// and drives rounds until it holds its lease; it returns the lease's term.
func leadAlone(t *testing.T, n *Node, tablet uint64, r *Replica) uint64 {
	t.Helper()
	if err := n.Campaign(tablet); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if term, _ := r.Lease(); term != 0 {
			return term
		}
		if i == 100 {
			t.Fatalf("the sole voter holds no lease after %d rounds", i)
		}
		if _, err := n.ProcessReady(); err != nil {
			t.Fatal(err)
		}
	}
}

// wireLog is a transport that keeps everything sent, for the test to read
// and deliver.
type wireLog struct {
	mu   sync.Mutex
	sent []Envelope
}

func (w *wireLog) Send(envs []Envelope) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent = append(w.sent, envs...)
}

// take removes and returns what was sent so far.
func (w *wireLog) take() []Envelope {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.sent
	w.sent = nil
	return out
}

// find returns the sent messages (without removing them) that match.
func (w *wireLog) find(match func(*pb.Message) bool) []*pb.Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*pb.Message
	for _, e := range w.sent {
		if match(e.Msg) {
			out = append(out, e.Msg)
		}
	}
	return out
}

// TestAppendsLeaveBeforeTheSync pins invariant 3 (doc.go) on a group of
// three voters whose disks the test holds mid-sync: the leader's append
// of a new entry is on the wire while the leader's own sync of it has
// not finished (its followers sync in parallel, Raft thesis §10.2.1),
// and a follower's acknowledgement of that entry is not on the wire until
// its sync has finished.
func TestAppendsLeaveBeforeTheSync(t *testing.T) {
	const tablet = 1
	peers := []uint64{1, 2, 3}
	var clock atomic.Int64
	nodes := map[uint64]*Node{}
	gates := map[uint64]*syncGate{}
	wires := map[uint64]*wireLog{}
	for _, id := range peers {
		g := newSyncGate()
		fs := simfs.New(vfs.NewMem(), simfs.Options{Profile: simfs.Profile{SyncLatency: 1}, Sleep: g.sleep})
		eng, err := storage.Open("", storage.Options{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		w := &wireLog{}
		n := NewNode(Config{NodeID: id}, eng, w)
		n.now = clock.Load
		n.setTiming(10)
		if _, err := n.AddReplica(tablet, peers, nopSM{}); err != nil {
			t.Fatal(err)
		}
		nodes[id], gates[id], wires[id] = n, g, w
		// Before the engine closes (defers run last in, first out): a
		// failed check must not leave a round blocked in its sync.
		defer g.open()
	}
	// Past the replicas' first election timeout, so they grant votes.
	clock.Store(100)
	deliver := func() {
		for _, id := range peers {
			for _, e := range wires[id].take() {
				if err := nodes[e.Msg.GetTo()].Step(e); err != nil {
					t.Fatalf("node %d stepping %v: %v", e.Msg.GetTo(), e.Msg.GetType(), err)
				}
			}
		}
	}
	rounds := func() {
		for _, id := range peers {
			if _, err := nodes[id].ProcessReady(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := nodes[1].Campaign(tablet); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if term, _ := nodes[1].Replica(tablet).Lease(); term != 0 {
			break
		}
		if i == 100 {
			t.Fatalf("node 1 holds no lease after %d rounds: %+v", i, nodes[1].Replica(tablet).Status())
		}
		rounds()
		deliver()
	}
	// Settle: every message of the election delivered and answered.
	for range 5 {
		rounds()
		deliver()
	}

	// waitSync waits for node id's round to begin its sync, or fails.
	waitSync := func(id uint64, round <-chan error) {
		t.Helper()
		select {
		case <-gates[id].began:
		case err := <-round:
			t.Fatalf("node %d's round ended (%v) without syncing", id, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("node %d's round did not reach its sync", id)
		}
	}
	finish := func(id uint64, round <-chan error) {
		t.Helper()
		gates[id].open()
		if err := <-round; err != nil {
			t.Fatal(err)
		}
	}
	isAppendOf := func(data string) func(*pb.Message) bool {
		return func(m *pb.Message) bool {
			return m.GetType() == pb.MessageType_MsgApp && m.GetTo() == 2 &&
				slices.ContainsFunc(m.GetEntries(), func(e *pb.Entry) bool { return string(e.GetData()) == data })
		}
	}

	// The leader: its append to node 2 leaves while its own sync is held.
	if err := nodes[1].Propose(tablet, []byte("x")); err != nil {
		t.Fatal(err)
	}
	gates[1].armed.Store(true)
	round1 := make(chan error, 1)
	go func() { _, err := nodes[1].ProcessReady(); round1 <- err }()
	waitSync(1, round1)
	apps := wires[1].find(isAppendOf("x"))
	if len(apps) != 1 {
		t.Fatalf("while the leader's sync is held, %d appends of the entry to node 2 were sent, want 1 (sent: %v)", len(apps), wires[1].find(func(*pb.Message) bool { return true }))
	}
	finish(1, round1)

	// The follower: no acknowledgement while its sync is held, one after.
	app := apps[0]
	index := app.GetEntries()[len(app.GetEntries())-1].GetIndex()
	wires[1].take()
	if err := nodes[2].Step(Envelope{TabletID: tablet, Msg: app}); err != nil {
		t.Fatal(err)
	}
	acks := func(m *pb.Message) bool {
		return m.GetType() == pb.MessageType_MsgAppResp && !m.GetReject() && m.GetIndex() >= index
	}
	gates[2].armed.Store(true)
	round2 := make(chan error, 1)
	go func() { _, err := nodes[2].ProcessReady(); round2 <- err }()
	waitSync(2, round2)
	if got := wires[2].find(acks); len(got) != 0 {
		t.Fatalf("node 2 acknowledged index %d while its sync of it was held: %v", index, got)
	}
	finish(2, round2)
	if got := wires[2].find(acks); len(got) != 1 {
		t.Fatalf("node 2 sent %d acknowledgements of index %d after its sync, want 1", len(got), index)
	}
}
