package kv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
)

// fakeNode answers a batch with the next of its scripted replies (the last
// one repeats) and records that it was asked.
type fakeNode struct {
	id      uint64
	mu      sync.Mutex
	replies []error // nil: success
	calls   int
	log     *[]string
}

func (n *fakeNode) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	i := min(n.calls, len(n.replies)-1)
	n.calls++
	*n.log = append(*n.log, fmt.Sprint(n.id))
	if err := n.replies[i]; err != nil {
		return nil, err
	}
	return &kvpb.BatchResponse{Responses: []kvpb.Response{&kvpb.PutResponse{}}}, nil
}

func TestLeaseholderSender(t *testing.T) {
	nle := func(from, leader uint64) error {
		return &kvpb.NotLeaseholderError{TabletID: 7, Replica: from, Leader: leader}
	}
	unreachable := fmt.Errorf("rpc: node unreachable: %w", &kvpb.TabletNotFoundError{TabletID: 7})
	amb := &kvpb.AmbiguousResultError{Cause: errors.New("connection lost")}
	cf := &kvpb.ConditionFailedError{Key: []byte("k")}
	for _, tc := range []struct {
		name    string
		replies map[uint64][]error
		// want is the order nodes were asked; wantErr a substring of the
		// error (empty: success); leader the cached leaseholder after.
		want    string
		wantErr string
		leader  uint64
	}{
		{name: "local leaseholder", replies: map[uint64][]error{1: {nil}}, want: "1", leader: 1},
		{name: "follow the hint", replies: map[uint64][]error{1: {nle(1, 3)}, 3: {nil}}, want: "1 3", leader: 3},
		{name: "no hint: try the other replicas",
			replies: map[uint64][]error{1: {nle(1, 0)}, 2: {nle(2, 0)}, 3: {nil}}, want: "1 2 3", leader: 3},
		{name: "unreachable hinted node: try the rest",
			replies: map[uint64][]error{1: {nle(1, 2)}, 2: {unreachable}, 3: {nil}}, want: "1 2 3", leader: 3},
		{name: "election under way: back off and go round again",
			replies: map[uint64][]error{1: {nle(1, 0), nil}, 2: {nle(2, 0)}, 3: {nle(3, 0)}}, want: "1 2 3 1", leader: 1},
		{name: "ambiguous is final", replies: map[uint64][]error{1: {amb}}, want: "1", wantErr: "ambiguous"},
		{name: "an answer is final", replies: map[uint64][]error{1: {nle(1, 2)}, 2: {cf}}, want: "1 2", wantErr: "condition failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			replicaLists := 0
			nodes := map[uint64]*fakeNode{}
			for id := uint64(1); id <= 3; id++ {
				r := tc.replies[id]
				if r == nil {
					r = []error{errors.New("not asked")}
				}
				nodes[id] = &fakeNode{id: id, replies: r, log: &log}
			}
			s := NewLeaseholderSender(LeaseholderConfig{
				LocalNode: 1,
				Node:      func(id uint64) kvpb.Sender { return nodes[id] },
				Replicas: func(kvpb.TabletID) []uint64 {
					replicaLists++
					return []uint64{1, 2, 3}
				},
				AllNodes: func() []uint64 { return []uint64{1, 2, 3} },
				Timeout:  5 * time.Second,
			})
			ba := &kvpb.BatchRequest{Header: kvpb.Header{TabletID: 7}}
			ba.Add(&kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
			_, err := s.Send(context.Background(), ba)
			if got := strings.Join(log, " "); got != tc.want {
				t.Errorf("nodes asked: %q, want %q", got, tc.want)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if tc.wantErr == "" {
				if got := s.Leaseholder(7); got != tc.leader {
					t.Errorf("cached leaseholder %d, want %d", got, tc.leader)
				}
				// The next batch goes straight to it, without listing the
				// tablet's replicas (only a refusal needs them).
				log = log[:0]
				lists := replicaLists
				if _, err := s.Send(context.Background(), ba); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(log, []string{fmt.Sprint(tc.leader)}) {
					t.Errorf("second batch asked %v, want only node %d", log, tc.leader)
				}
				if replicaLists != lists {
					t.Errorf("a batch its cached leaseholder answered listed the replicas %d times", replicaLists-lists)
				}
			}
		})
	}
}

// A batch whose tablet has no reachable replica within the timeout gets
// the routing error back, so the DistSender can evict and look again.
func TestLeaseholderSenderGivesUp(t *testing.T) {
	var log []string
	unreachable := fmt.Errorf("rpc: node unreachable: %w", &kvpb.TabletNotFoundError{TabletID: 7})
	n := &fakeNode{id: 2, replies: []error{unreachable}, log: &log}
	s := NewLeaseholderSender(LeaseholderConfig{
		LocalNode: 1,
		Node:      func(uint64) kvpb.Sender { return n },
		Replicas:  func(kvpb.TabletID) []uint64 { return []uint64{2} },
		AllNodes:  func() []uint64 { return []uint64{2} },
		Timeout:   50 * time.Millisecond,
	})
	ba := &kvpb.BatchRequest{Header: kvpb.Header{TabletID: 7}}
	ba.Add(&kvpb.GetRequest{Key: []byte("k")})
	_, err := s.Send(context.Background(), ba)
	var nf *kvpb.TabletNotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("err = %v, want a TabletNotFoundError", err)
	}
}

// gatewaySender records the gateway each batch it receives names.
type gatewaySender struct{ got []uint64 }

func (g *gatewaySender) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	g.got = append(g.got, ba.GatewayNode)
	return &kvpb.BatchResponse{Responses: []kvpb.Response{&kvpb.GetResponse{}}}, nil
}

// TestLeaseholderSenderNamesClientGateway: only a client's batches
// (WithClientRequests) name this node as their gateway, so that only they
// draw leases (store/load.go); the node's own work names none, and a
// batch that already names a gateway keeps it.
func TestLeaseholderSenderNamesClientGateway(t *testing.T) {
	client := WithClientRequests(context.Background())
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		gateway uint64 // the batch's own
		want    uint64
	}{
		{"client", client, 0, 1},
		{"the node's own work", context.Background(), 0, 0},
		{"named already", client, 3, 3},
		{"named already, not a client's", context.Background(), 3, 3},
		{"a fragment for node 2's client", WithClientGateway(context.Background(), 2), 0, 2},
		{"a fragment for node 2's client, named already", WithClientGateway(context.Background(), 2), 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &gatewaySender{}
			s := NewLeaseholderSender(LeaseholderConfig{
				LocalNode: 1,
				Node:      func(uint64) kvpb.Sender { return g },
				Replicas:  func(kvpb.TabletID) []uint64 { return []uint64{1} },
				AllNodes:  func() []uint64 { return []uint64{1} },
			})
			ba := &kvpb.BatchRequest{Header: kvpb.Header{TabletID: 7, GatewayNode: tc.gateway}}
			ba.Add(&kvpb.GetRequest{Key: []byte("k")})
			if _, err := s.Send(tc.ctx, ba); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(g.got, []uint64{tc.want}) {
				t.Fatalf("gateways received %v, want [%d]", g.got, tc.want)
			}
		})
	}
}

// TestLeaseholderCache: the leaseholder cache remembers the last node set
// for a tablet and forgets it on 0; a lookup allocates nothing (every
// batch makes one) and races with updates safely (go test -race).
func TestLeaseholderCache(t *testing.T) {
	s := NewLeaseholderSender(LeaseholderConfig{LocalNode: 1})
	const tablet = kvpb.TabletID(4711) // above the runtime's boxed small integers
	for _, tc := range []struct {
		name string
		set  uint64 // the node set before the lookup (0: forget)
		want uint64
	}{
		{"learned", 3, 3},
		{"moved", 2, 2},
		{"the same again", 2, 2},
		{"forgotten", 0, 0},
		{"learned again", 5, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.setLeader(tablet, tc.set)
			if got := s.Leaseholder(tablet); got != tc.want {
				t.Fatalf("Leaseholder = %d, want %d", got, tc.want)
			}
			if got := s.Leaseholder(tablet + 1); got != 0 {
				t.Fatalf("Leaseholder of another tablet = %d, want 0", got)
			}
		})
	}
	if !raceEnabled {
		if n := testing.AllocsPerRun(100, func() { _ = s.Leaseholder(tablet) }); n != 0 {
			t.Errorf("a lookup allocates %.1f objects, want 0", n)
		}
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				if w%2 == 0 {
					s.setLeader(tablet, uint64(i%3))
				} else if got := s.Leaseholder(tablet); got > 2 && got != 5 {
					t.Errorf("Leaseholder = %d, never set", got)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkLeaseholderLookup: the cache lookup every batch makes, from
// as many goroutines as GOMAXPROCS (the gateway's SQL connections).
func BenchmarkLeaseholderLookup(b *testing.B) {
	s := NewLeaseholderSender(LeaseholderConfig{LocalNode: 1})
	for id := range kvpb.TabletID(64) {
		s.setLeader(id+1, 1)
	}
	b.RunParallel(func(pb *testing.PB) {
		id := kvpb.TabletID(1)
		for pb.Next() {
			_ = s.Leaseholder(id)
			id = id%64 + 1
		}
	})
}
