package raftnode

import (
	"fmt"
	"slices"
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
	gate.armed.Store(true)
	round, roundDone := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(roundDone)
		_, err := n.ProcessReady()
		round <- err
	}()
	defer func() { gate.open(); <-roundDone }()
	select {
	case <-gate.began:
	case err := <-round:
		t.Fatalf("the round ended (%v) without syncing", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the round did not reach its sync")
	}

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
