package raftnode

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestWaitingProposalsJoinTheNextRound: proposals that find the node's
// lock held by a round (in its sync) under Run are handed to the
// scheduler, which puts them into raft before that round releases the
// lock, so the next round takes every one of them. They used to wait
// for the lock each, and take it one after another once the round
// ended, while the scheduler's next round competed for it: whichever
// lost waited out that round's whole sync as well
// (RoundStats.ProposalsLate; under pgbench's simple-update with 16
// clients a quarter of the proposals). The held round's end is
// observed under its lock (roundEnd), so the count does not depend on
// the order the goroutines run in.
func TestWaitingProposalsJoinTheNextRound(t *testing.T) {
	const lone, waiting = 1, 8
	gate := newSyncGate()
	sm := &countSM{}
	eng := gatedEngine(t, gate)
	defer eng.Close()
	n := NewNode(Config{NodeID: 1}, eng, &wireLog{})
	r, err := n.AddReplica(lone, []uint64{1}, sm)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.open()
	term := leadAlone(t, n, lone, r)

	// The round that syncs "x" is held on the disk, holding the lock.
	if err := n.ProposeAt(nil, lone, term, []byte("x")); err != nil {
		t.Fatal(err)
	}
	var atEnd []int64 // Proposals at the end of each round, under its lock
	n.roundEnd = func() { atEnd = append(atEnd, n.stats.Proposals.Load()) }
	before := n.stats.Proposals.Load()
	round, release := holdRound(t, n, gate)
	defer release()

	// Proposals while the round holds the lock, as under Run.
	n.running.Store(true)
	proposed := make(chan error, waiting)
	var want []string
	for i := range waiting {
		data := fmt.Sprintf("w%d", i)
		want = append(want, data)
		go func() { proposed <- n.ProposeAt(nil, lone, term, []byte(data)) }()
	}
	for deadline := time.Now().Add(30 * time.Second); n.Stats().QueuedProposals.Load() < waiting; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d proposals handed to the scheduler after 30 s", n.Stats().QueuedProposals.Load(), waiting)
		}
		time.Sleep(time.Millisecond)
	}
	if got := n.stats.Proposals.Load(); got != before {
		t.Fatalf("%d proposals let into raft while the round held the lock, want none before its end", got-before)
	}
	gate.armed.Store(false)
	gate.open()
	if err := <-round; err != nil {
		t.Fatal(err)
	}
	if len(atEnd) != 1 || atEnd[0] != before+waiting {
		t.Fatalf("proposals in raft at the held round's end (under its lock): %v, want [%d] (all %d that waited)", atEnd, before+waiting, waiting)
	}
	for range waiting {
		select {
		case err := <-proposed:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a handed-over proposal was not answered 30 s after the round ended")
		}
	}
	// One more round takes them all.
	if _, err := n.ProcessReady(); err != nil {
		t.Fatal(err)
	}
	got := slices.Clone(sm.observed)
	slices.Sort(got)
	wantAll := append([]string{"x"}, want...)
	slices.Sort(wantAll)
	if !slices.Equal(got, wantAll) {
		t.Fatalf("observed after the next round %q, want %q", got, wantAll)
	}
	if late := n.Stats().ProposalsLate.Load(); late != 0 {
		t.Fatalf("ProposalsLate = %d, want 0", late)
	}
}

// refusals records what Refuse was called with (a ProposeHanded's
// Refuser).
type refusals struct {
	mu   sync.Mutex
	errs []error
}

func (r *refusals) Refuse(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

func (r *refusals) got() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs)
}

// TestHandedProposalsWaitForNoLock: a ProposeHanded that finds a round
// holding the node's lock under Run returns at once, its proposal handed
// to the scheduler, instead of waiting, as ProposeAt does, to be woken
// and told that it was proposed (58% of simple-update's commits were
// woken so, each only to wait again for its apply). The scheduler
// proposes it in the held round's hold of the lock; one it can not make
// (a stale term) is refused through Refuse, once, and never proposed;
// one withdrawn before is neither proposed nor refused.
func TestHandedProposalsWaitForNoLock(t *testing.T) {
	const lone = 1
	gate := newSyncGate()
	sm := &countSM{}
	eng := gatedEngine(t, gate)
	defer eng.Close()
	n := NewNode(Config{NodeID: 1}, eng, &wireLog{})
	r, err := n.AddReplica(lone, []uint64{1}, sm)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.open()
	term := leadAlone(t, n, lone, r)
	if err := n.ProposeAt(nil, lone, term, []byte("x")); err != nil {
		t.Fatal(err)
	}
	var atEnd []int64
	n.roundEnd = func() { atEnd = append(atEnd, n.stats.Proposals.Load()) }
	before := n.stats.Proposals.Load()
	round, release := holdRound(t, n, gate)
	defer release()
	n.running.Store(true)

	type handed struct {
		h   *Handoff
		err error
	}
	propose := func(term uint64, data string, ref Refuser) *Handoff {
		t.Helper()
		c := make(chan handed, 1)
		go func() {
			h, err := n.ProposeHanded(nil, lone, term, []byte(data), ref)
			c <- handed{h, err}
		}()
		select {
		case got := <-c:
			if got.err != nil || got.h == nil {
				t.Fatalf("ProposeHanded(%q) during a held round = (%v, %v), want a hand-off", data, got.h, got.err)
			}
			return got.h
		case <-time.After(30 * time.Second):
			t.Fatalf("ProposeHanded(%q) still waits 30 s into a round held in its sync: it waits for the lock", data)
		}
		return nil
	}
	var good, stale, gone refusals
	propose(term, "h0", &good)
	propose(term, "h1", &good)
	propose(term+7, "stale", &stale)
	w := propose(term, "withdrawn", &gone)
	if !w.Withdraw() {
		t.Fatal("Withdraw of a proposal the scheduler has not taken = false")
	}
	if got := n.stats.Proposals.Load(); got != before {
		t.Fatalf("%d proposals in raft while the round held the lock, want none", got-before)
	}
	gate.armed.Store(false)
	gate.open()
	if err := <-round; err != nil {
		t.Fatal(err)
	}
	if len(atEnd) != 1 || atEnd[0] != before+2 {
		t.Fatalf("proposals in raft at the held round's end: %v, want [%d]", atEnd, before+2)
	}
	if errs := stale.got(); len(errs) != 1 || !errors.Is(errs[0], ErrNotLeader) {
		t.Fatalf("the stale-term proposal's refusals: %v, want one ErrNotLeader", errs)
	}
	if errs := append(good.got(), gone.got()...); len(errs) != 0 {
		t.Fatalf("refusals of proposals made or withdrawn: %v", errs)
	}
	if w.Withdraw() {
		t.Fatal("a second Withdraw reported true")
	}
	if _, err := n.ProcessReady(); err != nil {
		t.Fatal(err)
	}
	got := slices.Clone(sm.observed)
	slices.Sort(got)
	if want := []string{"h0", "h1", "x"}; !slices.Equal(got, want) {
		t.Fatalf("observed %q, want %q", got, want)
	}
}

// TestHandedProposalsRefusedOnStall: when the stall watcher finds the
// scheduler stalled, the handed-over proposals of groups with another
// voter are refused (ErrNotLeader, invariant 9: their gateways look for
// the next leaseholder), as a ProposeAt waiting for the lock gives up;
// those of a sole voter's group wait.
func TestHandedProposalsRefusedOnStall(t *testing.T) {
	n := NewNode(Config{NodeID: 1}, nil, nil)
	n.running.Store(true)
	var shared, sole refusals
	qs := &queuedProposal{tabletID: 1, refuse: &shared}
	ql := &queuedProposal{tabletID: 2, refuse: &sole, sole: true}
	for _, q := range []*queuedProposal{qs, ql} {
		if !n.enqueueProposal(q) {
			t.Fatal("enqueueProposal refused under Run")
		}
	}
	n.refuseHandedStalled()
	if errs := shared.got(); len(errs) != 1 || !errors.Is(errs[0], ErrNotLeader) {
		t.Fatalf("the shared group's proposal's refusals: %v, want one ErrNotLeader", errs)
	}
	if errs := sole.got(); len(errs) != 0 {
		t.Fatalf("the sole voter's proposal was refused: %v", errs)
	}
	if (*Handoff)(qs).Withdraw() || !(*Handoff)(ql).Withdraw() {
		t.Fatal("after the stall: the refused proposal could be withdrawn, or the waiting one could not")
	}
	n.refuseHandedStalled()
	if errs := shared.got(); len(errs) != 1 {
		t.Fatalf("refused %d times, want once", len(errs))
	}
}
