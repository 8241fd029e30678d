package raftnode

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/storage/simfs"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestStalledLeaderServesNoLease: a leader whose scheduler is held in a
// round's sync (a disk that stopped answering) reports no lease once an
// election timeout has passed on its clock without a tick or a round
// (servableLease), so requests go to the replicas electing the next
// leader instead of waiting on it; before that it keeps the lease, and
// once the sync ends and the scheduler ticks again it serves under the
// same term. A group whose only voter it is keeps its lease throughout:
// no other replica could take the requests. The node's clock is the
// test's, so the election timeout is counted exactly, not timed.
func TestStalledLeaderServesNoLease(t *testing.T) {
	const tablet, lone = 1, 2
	const election = 10 // the election timeout, in the test clock's units
	peers := []uint64{1, 2, 3}
	var clock atomic.Int64
	nodes := map[uint64]*Node{}
	wires := map[uint64]*wireLog{}
	gate := newSyncGate()
	for _, id := range peers {
		opts := simfs.Options{}
		if id == 1 {
			opts = simfs.Options{Profile: simfs.Profile{SyncLatency: 1}, Sleep: gate.sleep}
		}
		eng, err := storage.Open("", storage.Options{FS: simfs.New(vfs.NewMem(), opts)})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		w := &wireLog{}
		n := NewNode(Config{NodeID: id}, eng, w)
		n.now = clock.Load
		n.setTiming(election)
		if _, err := n.AddReplica(tablet, peers, nopSM{}); err != nil {
			t.Fatal(err)
		}
		nodes[id], wires[id] = n, w
	}
	// Before the engines close: a failed check must not leave node 1's
	// round blocked in its sync.
	defer gate.open()
	if _, err := nodes[1].AddReplica(lone, []uint64{1}, nopSM{}); err != nil {
		t.Fatal(err)
	}
	clock.Store(100) // past the replicas' first election timeout
	deliver := func() {
		for _, id := range peers {
			for _, e := range wires[id].take() {
				if err := nodes[e.Msg.GetTo()].Step(e); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, tab := range []uint64{tablet, lone} {
		if err := nodes[1].Campaign(tab); err != nil {
			t.Fatal(err)
		}
	}
	leases := func() (uint64, uint64) {
		a, _ := nodes[1].Replica(tablet).Lease()
		b, _ := nodes[1].Replica(lone).Lease()
		return a, b
	}
	for i := 0; ; i++ {
		if a, b := leases(); a != 0 && b != 0 {
			break
		}
		if i == 100 {
			t.Fatalf("node 1 holds no leases after %d rounds", i)
		}
		for _, id := range peers {
			if _, err := nodes[id].ProcessReady(); err != nil {
				t.Fatal(err)
			}
		}
		deliver()
	}
	term, _ := leases()
	// Replica takes the node's lock, which the held round will hold.
	r, l := nodes[1].Replica(tablet), nodes[1].Replica(lone)
	nodes[1].Tick() // the scheduler last ran now (100)

	// The round that syncs the next proposal is held on the disk.
	if err := nodes[1].Propose(tablet, []byte("x")); err != nil {
		t.Fatal(err)
	}
	round, release := holdRound(t, nodes[1], gate)
	defer release()

	// An election timeout after the last tick: still the leaseholder.
	clock.Store(100 + election)
	if got, leader := r.Lease(); got != term || leader != 1 || nodes[1].Stalled() {
		t.Fatalf("an election timeout into the stall: lease %d, leader %d, stalled %v; want lease %d, leader 1, not stalled", got, leader, nodes[1].Stalled(), term)
	}
	// A proposal that must wait for the lock the held round holds: it
	// waits while the scheduler is not stalled.
	nodes[1].running.Store(true) // as under Run: the stall watcher runs
	wctx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	go nodes[1].watchStall(wctx, time.Millisecond)
	proposed := make(chan error, 1)
	go func() { proposed <- nodes[1].ProposeAt(nil, tablet, term, []byte("y")) }()

	// Past it: no lease, and no hint that names itself.
	clock.Store(100 + election + 1)
	if !nodes[1].Stalled() {
		t.Fatal("the scheduler held past an election timeout is not reported stalled")
	}
	if got, leader := r.Lease(); got != 0 || leader != 0 {
		t.Fatalf("stalled leader: Lease() = %d, %d; want 0, 0", got, leader)
	}
	if got, ok := r.ReadLease(); got != 0 || ok {
		t.Fatalf("stalled leader: ReadLease() = %d, %v; want 0, false", got, ok)
	}
	if got, ok := r.ReadConfirmed(0); got != 0 || ok {
		t.Fatalf("stalled leader: ReadConfirmed(0) = %d, %v; want 0, false", got, ok)
	}
	if got, leader := l.Lease(); got == 0 || leader != 1 {
		t.Fatalf("stalled sole voter: Lease() = %d, %d; want its lease, leader 1", got, leader)
	}
	if got, ok := l.ReadLease(); got == 0 || !ok {
		t.Fatalf("stalled sole voter: ReadLease() = %d, %v; want its lease", got, ok)
	}

	// The waiting proposal gives up, unproposed, once the watcher finds
	// the scheduler stalled (before, it waited for the disk).
	select {
	case err := <-proposed:
		if !errors.Is(err, ErrNotLeader) {
			t.Fatalf("proposal waiting on a stalled scheduler: %v, want ErrNotLeader", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a proposal waiting for the node's lock was still waiting 30 s after the scheduler was found stalled")
	}
	if n := nodes[1].Stats().SchedulerStalls.Load(); n != 1 {
		t.Fatalf("the stall counted %d times in SchedulerStalls, want 1", n)
	}
	if n := nodes[1].Stats().StallRefusals.Load(); n != 1 {
		t.Fatalf("StallRefusals = %d after one proposal gave up, want 1", n)
	}

	// The disk answers again: the round ends, the scheduler ticks, and
	// the replica, still leader, serves under its term.
	gate.open()
	if err := <-round; err != nil {
		t.Fatal(err)
	}
	nodes[1].Tick()
	if got, leader := r.Lease(); got != term || leader != 1 || nodes[1].Stalled() {
		t.Fatalf("after the stall: lease %d, leader %d, stalled %v; want lease %d, leader 1", got, leader, nodes[1].Stalled(), term)
	}
	// And proposes again (the watcher reopens its signal within ticks;
	// a proposal that finds the lock free takes it at once anyway).
	if err := nodes[1].ProposeAt(nil, tablet, term, []byte("z")); err != nil {
		t.Fatalf("proposing after the stall: %v", err)
	}
}

// TestStalledSoleVoterProposes: a proposal to a group whose only voter
// is this replica waits for a round held in its sync past an election
// timeout, and is proposed once the round ends, instead of giving up as
// a shared group's does (proposeWaiting). A sole voter keeps its lease
// through the stall (servableLease), so a refusal only sent the request
// back to it: on a cluster of one whose syncs outlasted an election
// timeout every write that found a round under way was refused until
// its gateway gave up ("no leaseholder found for tablet N within 10s").
// The node's clock is the test's, and the stall is the one the watcher
// reports, so nothing here is timed.
func TestStalledSoleVoterProposes(t *testing.T) {
	for _, cancel := range []bool{false, true} {
		t.Run(map[bool]string{false: "waits", true: "cancelled"}[cancel], func(t *testing.T) {
			const lone = 1
			const election = 10
			var clock atomic.Int64
			gate := newSyncGate()
			sm := &countSM{}
			eng := gatedEngine(t, gate)
			defer eng.Close()
			n := NewNode(Config{NodeID: 1}, eng, &wireLog{})
			n.now = clock.Load
			n.setTiming(election)
			r, err := n.AddReplica(lone, []uint64{1}, sm)
			if err != nil {
				t.Fatal(err)
			}
			defer gate.open()
			clock.Store(100)
			term := leadAlone(t, n, lone, r)
			n.Tick() // the scheduler last ran now (100)

			// The round that syncs the next proposal is held on the disk.
			if err := n.ProposeAt(nil, lone, term, []byte("x")); err != nil {
				t.Fatal(err)
			}
			// On a failure, the round ends before the engine closes.
			round, release := holdRound(t, n, gate)
			defer release()

			// Past an election timeout: the watcher finds the scheduler stalled.
			n.running.Store(true) // as under Run: the stall watcher runs
			wctx, stopWatch := context.WithCancel(context.Background())
			defer stopWatch()
			clock.Store(100 + election + 1)
			go n.watchStall(wctx, time.Millisecond)
			select {
			case <-n.stallSignal():
			case <-time.After(30 * time.Second):
				t.Fatal("the watcher did not find the scheduler stalled within 30 s")
			}
			if got, ok := r.ReadLease(); got != term || !ok {
				t.Fatalf("stalled sole voter: ReadLease() = %d, %v; want %d, true", got, ok, term)
			}

			// A proposal that must wait for the held round's lock waits for it
			// (counted in SoleStallWaits as it starts to); the old code refused
			// it at once, unproposed, while the round still held the lock.
			proposed := make(chan error, 1)
			stop := make(chan struct{})
			var done <-chan struct{}
			if cancel {
				done = stop
			}
			go func() { proposed <- n.ProposeAt(done, lone, term, []byte("y")) }()
			for n.Stats().SoleStallWaits.Load() == 0 {
				select {
				case err := <-proposed:
					t.Fatalf("a sole voter's proposal answered %v while the round held the lock; want it to wait", err)
				case err := <-round:
					t.Fatalf("the round ended (%v) with its sync held", err)
				default:
					runtime.Gosched()
				}
			}
			if got := n.Stats().StallRefusals.Load(); got != 0 {
				t.Fatalf("StallRefusals = %d for a sole voter's proposal, want 0", got)
			}
			if cancel {
				// Its proposer gives up (a cancel, statement_timeout) while the
				// round still holds the lock: the wait ends, unproposed.
				close(stop)
				select {
				case err := <-proposed:
					if !errors.Is(err, ErrProposerGone) {
						t.Fatalf("a cancelled proposal answered %v; want ErrProposerGone", err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("a cancelled proposal still waited 30 s later, the round holding the lock")
				}
			}
			gate.open()
			if err := <-round; err != nil {
				t.Fatal(err)
			}
			if !cancel {
				select {
				case err := <-proposed:
					if err != nil {
						t.Fatalf("a sole voter's proposal during a stalled round: %v, want it proposed once the round ended", err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("a sole voter's proposal was still waiting 30 s after the round ended")
				}
			}
			// The next rounds apply what was proposed: "y" only if it was.
			gate.armed.Store(false)
			for i := 0; i < 3; i++ {
				if _, err := n.ProcessReady(); err != nil {
					t.Fatal(err)
				}
			}
			if got := slices.Contains(sm.applied, "y"); got == cancel {
				t.Fatalf("applied %q: a proposal whose proposer gave up (%t) must not be, any other must", sm.applied, cancel)
			}
			if !slices.Contains(sm.applied, "x") {
				t.Fatalf("applied %q: want the stalled round's own entry x", sm.applied)
			}
		})
	}
}
