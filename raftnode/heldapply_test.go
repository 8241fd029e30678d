package raftnode

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// loopNet delivers envelopes between in-process nodes in order per
// destination, each on its own goroutine so that Send never blocks.
type loopNet struct {
	mu    sync.Mutex
	nodes map[uint64]*Node
	queue map[uint64]chan Envelope
	done  chan struct{}
	wg    sync.WaitGroup
}

func newLoopNet() *loopNet {
	return &loopNet{nodes: map[uint64]*Node{}, queue: map[uint64]chan Envelope{}, done: make(chan struct{})}
}

func (l *loopNet) add(n *Node) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := make(chan Envelope, 4096)
	l.nodes[n.cfg.NodeID], l.queue[n.cfg.NodeID] = n, q
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			select {
			case env := <-q:
				_ = n.Step(env)
			case <-l.done:
				return
			}
		}
	}()
}

func (l *loopNet) stop() { close(l.done); l.wg.Wait() }

type loopTransport struct{ l *loopNet }

func (t loopTransport) Send(envs []Envelope) {
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	for _, e := range envs {
		if q := t.l.queue[e.Msg.GetTo()]; q != nil {
			select {
			case q <- e:
			default: // a full queue drops, as a lossy network would
			}
		}
	}
}

// status is the term and leader n's replica of tablet knows.
func status(n *Node, tablet uint64) (term, lead uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := n.replicas[tablet].rn.Status()
	return st.HardState.GetTerm(), st.Lead
}

// TestHeldApplyKeepsLeadership (doc.go, invariant 8): while a large
// apply holds a group's Ready on every replica of three (each replica
// applies the same entry, so each is held, as a bulk COPY's batch holds
// them), for many election timeouts, the group keeps its leader and term:
// the held groups still exchange heartbeats. Before, the leader's
// heartbeats waited in its unread Ready, the followers' election timers
// ran out, and the group elected anew once the applies ended, so every
// long bulk apply cost the tablet its leader and lease.
func TestHeldApplyKeepsLeadership(t *testing.T) {
	// Elections after 10-20 ticks of 20 ms: a goroutine of a loaded
	// machine stalled that long would make any group elect anew.
	const tablet, tick, held = 1, 20 * time.Millisecond, 150
	net := newLoopNet()
	var nodes []*Node
	var gates []*gateSM
	var stops []func()
	for id := uint64(1); id <= 3; id++ {
		eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		n := NewNode(Config{NodeID: id, ApplyOffloadBytes: bigEntry}, eng, loopTransport{net})
		net.add(n)
		g := newGateSM(tablet)
		if _, err := n.AddReplica(tablet, []uint64{1, 2, 3}, g); err != nil {
			t.Fatal(err)
		}
		nodes, gates = append(nodes, n), append(gates, g)
	}
	defer net.stop()
	for _, n := range nodes {
		stops = append(stops, runNodeTick(t, n, tick))
	}
	defer func() {
		for _, s := range stops {
			s()
		}
	}()
	var releaseOnce sync.Once
	release := func() {
		releaseOnce.Do(func() {
			for _, g := range gates {
				close(g.release)
			}
		})
	}
	defer release()
	var leader uint64
	await(t, "every node knows the same leader", func() bool {
		_, l := status(nodes[0], tablet)
		for _, n := range nodes[1:] {
			if _, ln := status(n, tablet); ln != l {
				return false
			}
		}
		leader = l
		return l != 0
	})
	ln := nodes[leader-1]
	term0, _ := status(ln, tablet)
	// Every follower must have acknowledged the term's first entry before
	// the large one is proposed: a follower the leader still probes gets
	// its next append only from the leader's next Ready, and the leader's
	// Ready is held as soon as the other two commit and apply the entry,
	// so that follower would never begin the apply this test holds (it
	// catches up once the apply ends, as it should).
	await(t, "every follower acknowledged the leader's log", func() bool {
		p, ok := ln.Progress(tablet)
		if !ok || p.Commit == 0 {
			return false
		}
		for _, id := range []uint64{1, 2, 3} {
			if p.Match[id] < p.Commit {
				return false
			}
		}
		return true
	})

	if err := ln.Propose(tablet, bytes.Repeat([]byte("B"), bigEntry)); err != nil {
		t.Fatal(err)
	}
	for i, g := range gates {
		select {
		case <-g.in:
		case <-time.After(hangGuard):
			t.Fatalf("node %d never began the large apply", i+1)
		}
	}
	// Every replica's apply is held. Wait out 7 of the longest election
	// timeouts, counted in the leader's own ticks so that a slow machine
	// waits longer rather than less.
	ln.mu.Lock()
	from := ln.ticks
	ln.mu.Unlock()
	await(t, "the leader's ticks with every apply held", func() bool {
		ln.mu.Lock()
		defer ln.mu.Unlock()
		return ln.ticks >= from+held
	})
	for i, n := range nodes {
		if term, lead := status(n, tablet); term != term0 || lead != leader {
			t.Errorf("node %d: term %d, leader %d while the applies were held; before: term %d, leader %d", i+1, term, lead, term0, leader)
		}
	}
	for i, n := range nodes {
		if n.Stats().HeldHeartbeats.Load() == 0 {
			t.Errorf("node %d sent no heartbeat or answer for its held group", i+1)
		}
	}
	release()
	for _, g := range gates {
		await(t, "the large entry observed on every node", func() bool {
			_, obs := g.seen()
			return len(obs) == 1
		})
	}
	if term, lead := status(ln, tablet); term != term0 || lead != leader {
		t.Errorf("after the applies: term %d, leader %d; before: term %d, leader %d", term, lead, term0, leader)
	}
}
