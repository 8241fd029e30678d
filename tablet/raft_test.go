package tablet

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	pb "go.etcd.io/raft/v3/raftpb"
)

// scriptedGroup is a raft group the test drives by hand: it holds the
// lease of term (0: none, leader the hint), and hands every proposal to
// the test on proposed instead of replicating it.
type scriptedGroup struct {
	mu           sync.Mutex
	term, leader uint64
	proposed     chan []byte
	// waiting, when set, makes Propose wait as raftnode's does for a
	// round held in its sync: it is closed once Propose waits, and
	// Propose gives up, unproposed, when its done closes.
	waiting chan struct{}
}

func (g *scriptedGroup) Lease() (uint64, uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.term, g.leader
}

func (g *scriptedGroup) ReadLease() (uint64, bool) {
	t, _ := g.Lease()
	return t, t != 0
}

// The scripted lease is never short of a quorum: confirmed as soon as held.
func (g *scriptedGroup) ReadMark() int64 { return 0 }
func (g *scriptedGroup) ReadConfirmed(int64) (uint64, bool) {
	return g.ReadLease()
}

func (g *scriptedGroup) NodeID() uint64 { return 1 }

func (g *scriptedGroup) Propose(done <-chan struct{}, term uint64, data []byte) error {
	if t, _ := g.Lease(); t != term {
		return errors.New("not the leaseholder")
	}
	g.mu.Lock()
	waiting := g.waiting
	g.waiting = nil
	g.mu.Unlock()
	if waiting != nil {
		close(waiting)
		<-done
		return errors.New("gave up waiting for the round")
	}
	g.proposed <- data
	return nil
}

// TestRaftSeam drives the replica's proposal path by hand: what the log
// commits at the proposal's term is applied and answered; an entry
// committed at another term is skipped (nothing written) and its proposer
// told to retry elsewhere; a proposal overtaken by a later term's entry is
// told the same; a proposer whose context ends gets an ambiguous result
// at once while its latches stay held until the proposal applies, and
// one that gives up before its proposal is made gets its context's end;
// a replica without the lease refuses before evaluating, naming the
// leader.
func TestRaftSeam(t *testing.T) {
	h := newHarness(t, Config{})
	g := &scriptedGroup{term: 5, leader: 1, proposed: make(chan []byte, 1)}
	h.r.SetRaft(g)
	sm := h.r.StateMachine()
	ctx := context.Background()
	index := uint64(10)
	// commit applies entries as the raft node does: batches first, in one
	// engine batch, then the in-memory effects.
	commit := func(entries ...*pb.Entry) {
		t.Helper()
		b := h.eng.NewBatch()
		defer b.Close()
		for _, e := range entries {
			if len(e.GetData()) > 0 {
				if err := sm.Apply(b, e); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		sm.Applied(entries, false)
	}
	entry := func(term uint64, data []byte) *pb.Entry {
		index++
		i := index
		return &pb.Entry{Term: &term, Index: &i, Data: data}
	}
	put := func(ctx context.Context, k string) <-chan error {
		done := make(chan error, 1)
		go func() {
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.PutRequest{Key: []byte(k), Value: []byte("v")})
			_, err := h.r.Send(ctx, ba)
			done <- err
		}()
		return done
	}
	get := func(k string) bool {
		t.Helper()
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.GetRequest{Key: []byte(k)})
		br, err := h.r.Send(ctx, ba)
		if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		return br.Responses[0].(*kvpb.GetResponse).Value != nil
	}
	notLeaseholder := func(err error) *kvpb.NotLeaseholderError {
		t.Helper()
		var nle *kvpb.NotLeaseholderError
		if !errors.As(err, &nle) {
			t.Fatalf("err = %v, want a NotLeaseholderError", err)
		}
		return nle
	}

	// Committed at its term: applied, answered.
	done := put(ctx, "a")
	commit(entry(5, <-g.proposed))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !get("a") {
		t.Fatal("a was not written")
	}

	// Committed at another term than it was evaluated under: skipped.
	done = put(ctx, "b")
	commit(entry(6, <-g.proposed))
	notLeaseholder(<-done)
	if get("b") {
		t.Fatal("b was written by an entry committed at the wrong term")
	}

	// Overtaken: an entry of a later term is applied while the proposal
	// waits, so raft can no longer commit it at its term.
	done = put(ctx, "c")
	<-g.proposed
	commit(entry(7, nil))
	notLeaseholder(<-done)
	if get("c") {
		t.Fatal("c was written though its proposal never committed")
	}

	// The proposer gives up: the outcome is unknown, at once. But the
	// proposal may still apply, so its latches stay held until it does:
	// a second write of d must not evaluate before the first applied
	// (issue 13: it read the old value, proposed after the first, and
	// overwrote it).
	cctx, cancel := context.WithCancel(ctx)
	done = put(cctx, "d")
	first := <-g.proposed
	cancel()
	var amb *kvpb.AmbiguousResultError
	if err := <-done; !errors.As(err, &amb) {
		t.Fatalf("err = %v, want an AmbiguousResultError", err)
	}
	if n := h.r.latches.numHeld(); n != 1 {
		t.Fatalf("%d latch guards held after the proposer gave up, want the abandoned proposal's", n)
	}
	second := put(ctx, "d")
	commit(entry(5, first))
	commit(entry(5, <-g.proposed))
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if !get("d") {
		t.Fatal("d was not written")
	}

	// The proposer gives up before its proposal is made (it waited for a
	// round held in its sync, raftnode.ErrProposerGone): nothing was
	// proposed, so the answer is its context's end, not an unknown
	// outcome, and no latch stays held.
	waiting := make(chan struct{})
	g.mu.Lock()
	g.waiting = waiting
	g.mu.Unlock()
	cctx, cancel = context.WithCancel(ctx)
	done = put(cctx, "f")
	<-waiting
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || errors.As(err, &amb) {
		t.Fatalf("err = %v, want context.Canceled and no AmbiguousResultError", err)
	}
	if n := h.r.latches.numHeld(); n != 0 {
		t.Fatalf("%d latch guards held after a proposer gave up unproposed, want 0", n)
	}
	if get("f") {
		t.Fatal("f was written though nothing was proposed")
	}

	// No lease: refused at once, nothing proposed, the leader named.
	g.mu.Lock()
	g.term, g.leader = 0, 3
	g.mu.Unlock()
	select {
	case err := <-put(ctx, "e"):
		if nle := notLeaseholder(err); nle.Leader != 3 || nle.Replica != 1 {
			t.Fatalf("refusal %+v, want leader 3 named by replica 1", nle)
		}
	case <-g.proposed:
		t.Fatal("a replica without the lease proposed")
	case <-time.After(30 * time.Second):
		t.Fatal("no answer")
	}
}

// applyEverywhere applies data, as the log entry at term and index, on the
// replica of each harness, as each node's raft does with a committed
// entry.
func applyEverywhere(t *testing.T, data []byte, term, index uint64, hs ...*harness) {
	t.Helper()
	for _, h := range hs {
		m := h.r.StateMachine()
		b := h.eng.NewBatch()
		if err := m.Apply(b, &pb.Entry{Term: &term, Index: &index, Data: data}); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		b.Close()
		m.Applied([]*pb.Entry{{Term: &term, Index: &index, Data: data}}, false)
	}
}

// TestRaftReadAfterLeaseChange: a read the tablet stamps itself, arriving
// at a replica that has just taken up a lease other nodes may have held,
// must not be served at a timestamp below the lease's start: the previous
// leaseholder may have acknowledged writes up to the maximum offset ahead
// of this node's clock (found by reading the code after the linearizability
// test's stale reads; the stamp used to be taken before the wait).
func TestRaftReadAfterLeaseChange(t *testing.T) {
	h := newHarness(t, Config{})
	g := &scriptedGroup{term: 5, leader: 1, proposed: make(chan []byte, 1)}
	h.r.SetRaft(g)
	sm := h.r.StateMachine()
	ctx := context.Background()

	// The previous leaseholder's write, evaluated on another node whose
	// clock is 400ms ahead, reaches this replica through the log only.
	prev := newHarness(t, Config{})
	prev.manual.Advance(400 * time.Millisecond)
	pg := &scriptedGroup{term: 5, leader: 2, proposed: make(chan []byte, 1)}
	prev.r.SetRaft(pg)
	done := make(chan error, 1)
	go func() {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
		_, err := prev.r.Send(ctx, ba)
		done <- err
	}()
	applyEverywhere(t, <-pg.proposed, 5, 1, prev, h)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A new lease, which others may have held: it starts at clock + max
	// offset, and the replica serves nothing before its clock gets there.
	g.mu.Lock()
	g.term = 6
	g.mu.Unlock()
	sm.LeaseAcquired(6, false)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				h.manual.Advance(10 * time.Millisecond)
			}
		}
	}()
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.GetRequest{Key: []byte("k")})
	br, err := h.r.Send(ctx, ba)
	if err != nil {
		t.Fatal(err)
	}
	if br.Responses[0].(*kvpb.GetResponse).Value == nil {
		t.Fatal("a read after the lease change missed a write the previous leaseholder acknowledged")
	}
}

// handingGroup is a scriptedGroup that hands every proposal over
// (HandingRaft), as raftnode does when a round holds the node's lock: the
// test plays the scheduler, taking (proposing) or refusing it.
type handingGroup struct {
	scriptedGroup
	handed chan *handedProp
}

type handedProp struct {
	data   []byte
	refuse Refuser
	state  chan int // 0 queued, 1 taken, 2 withdrawn (one value, passed along)
}

func (h *handedProp) Withdraw() bool {
	s := <-h.state
	if s == 0 {
		h.state <- 2
		return true
	}
	h.state <- s
	return false
}

// take is the scheduler taking the proposal: false if it was withdrawn.
func (h *handedProp) take() bool {
	s := <-h.state
	if s == 0 {
		h.state <- 1
		return true
	}
	h.state <- s
	return false
}

func (g *handingGroup) Propose(<-chan struct{}, uint64, []byte) error {
	return errors.New("Propose called on a group that hands proposals over")
}

func (g *handingGroup) ProposeHanded(_ <-chan struct{}, term uint64, data []byte, refuse Refuser) (Withdrawer, error) {
	if t, _ := g.Lease(); t != term {
		return nil, errors.New("not the leaseholder")
	}
	h := &handedProp{data: data, refuse: refuse, state: make(chan int, 1)}
	h.state <- 0
	g.handed <- h
	return h, nil
}

// TestRaftSeamHanded: a proposal handed to the raft scheduler
// (HandingRaft) is waited for on one channel: taken and applied, it is
// answered as a proposal made at once; refused by the scheduler, its
// proposer is told to look for the leaseholder, nothing written and no
// latch held; withdrawn when its proposer gives up before the scheduler
// took it, the answer is the context's end, not an unknown outcome; taken
// and then given up, the outcome is unknown and its latches stay held
// until it applies. The group's Propose fails, so a replica that did not
// hand its proposals over fails every case.
func TestRaftSeamHanded(t *testing.T) {
	h := newHarness(t, Config{})
	g := &handingGroup{scriptedGroup: scriptedGroup{term: 5, leader: 1}, handed: make(chan *handedProp, 1)}
	h.r.SetRaft(g)
	sm := h.r.StateMachine()
	ctx := context.Background()
	index := uint64(10)
	commit := func(data []byte) {
		t.Helper()
		index++
		term, i := uint64(5), index
		e := &pb.Entry{Term: &term, Index: &i, Data: data}
		b := h.eng.NewBatch()
		defer b.Close()
		if err := sm.Apply(b, e); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		sm.Applied([]*pb.Entry{e}, false)
	}
	put := func(ctx context.Context, k string) <-chan error {
		done := make(chan error, 1)
		go func() {
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.PutRequest{Key: []byte(k), Value: []byte("v")})
			_, err := h.r.Send(ctx, ba)
			done <- err
		}()
		return done
	}
	get := func(k string) bool {
		t.Helper()
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.GetRequest{Key: []byte(k)})
		br, err := h.r.Send(ctx, ba)
		if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		return br.Responses[0].(*kvpb.GetResponse).Value != nil
	}
	handed := func() *handedProp {
		t.Helper()
		select {
		case p := <-g.handed:
			return p
		case <-time.After(30 * time.Second):
			t.Fatal("no proposal handed over")
		}
		return nil
	}

	// Taken and applied.
	done := put(ctx, "a")
	p := handed()
	if !p.take() {
		t.Fatal("taken: withdrawn")
	}
	commit(p.data)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !get("a") {
		t.Fatal("a was not written")
	}

	// Refused by the scheduler: nothing proposed, the leader named.
	g.mu.Lock()
	g.leader = 3
	g.mu.Unlock()
	done = put(ctx, "b")
	p = handed()
	p.take()
	p.refuse.Refuse(errors.New("not the leader"))
	var nle *kvpb.NotLeaseholderError
	if err := <-done; !errors.As(err, &nle) || nle.Leader != 3 {
		t.Fatalf("err = %v, want a NotLeaseholderError naming 3", err)
	}
	if n := h.r.latches.numHeld(); n != 0 {
		t.Fatalf("%d latch guards held after a refusal", n)
	}
	if get("b") {
		t.Fatal("b was written though refused")
	}

	// Withdrawn: the proposer gave up before the scheduler took it.
	cctx, cancel := context.WithCancel(ctx)
	done = put(cctx, "c")
	p = handed()
	cancel()
	var amb *kvpb.AmbiguousResultError
	if err := <-done; !errors.Is(err, context.Canceled) || errors.As(err, &amb) {
		t.Fatalf("err = %v, want context.Canceled and no AmbiguousResultError", err)
	}
	if p.take() {
		t.Fatal("the scheduler took a withdrawn proposal")
	}
	if n := h.r.latches.numHeld(); n != 0 {
		t.Fatalf("%d latch guards held after a withdrawal", n)
	}

	// Taken, then given up: unknown, latches held until it applies.
	cctx, cancel = context.WithCancel(ctx)
	done = put(cctx, "d")
	p = handed()
	p.take()
	cancel()
	if err := <-done; !errors.As(err, &amb) {
		t.Fatalf("err = %v, want an AmbiguousResultError", err)
	}
	if n := h.r.latches.numHeld(); n != 1 {
		t.Fatalf("%d latch guards held after giving up a taken proposal, want 1", n)
	}
	commit(p.data)
	for deadline := time.Now().Add(30 * time.Second); h.r.latches.numHeld() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("latches still held 30 s after the abandoned proposal applied")
		}
	}
	if !get("d") {
		t.Fatal("d was not written")
	}
}
