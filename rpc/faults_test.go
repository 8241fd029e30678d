package rpc

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/raftnode"
)

// TestFaults: while a peer is cut, raft messages to it are dropped at the
// sender and those from it at the receiver, KV batches to it fail as
// certainly not sent, and clock pings fail; healing restores the link.
// Each check synchronises on a marker message sent after healing: the
// stream keeps order, so whatever was not delivered before it never will.
func TestFaults(t *testing.T) {
	c := &collector{}
	var recv Faults
	srv := Serve(listen(t, "127.0.0.1:0"), c.handle, nil, WithFaults(&recv))
	defer srv.Stop()
	addr := srv.Addr().String()
	var send Faults
	tr := NewTransport(TransportConfig{Resolve: func(uint64) (string, error) { return addr, nil }, Faults: &send})
	defer tr.Close()
	from := func(f, to, index uint64) raftnode.Envelope {
		m := msg(to, index)
		m.From = &f
		return raftnode.Envelope{TabletID: 1, Msg: m}
	}

	tests := []struct {
		name string
		cut  func(on bool)
		// dropped: all 50 were dropped (before healing).
		dropped func() bool
	}{
		{"sender side", func(on bool) {
			if on {
				send.SetCut([]uint64{2})
			} else {
				send.SetCut(nil)
			}
		}, func() bool { return tr.Dropped.Load() == 50 }},
		{"receiver side", func(on bool) {
			if on {
				recv.SetCut([]uint64{1})
			} else {
				recv.SetCut(nil)
			}
		}, func() bool { return recv.DroppedOnArrival() == 50 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := c.count()
			tc.cut(true)
			for i := range 50 {
				tr.Send([]raftnode.Envelope{from(1, 2, uint64(i))})
			}
			waitFor(t, "the drops", tc.dropped)
			tc.cut(false)
			tr.Send([]raftnode.Envelope{from(1, 2, 1000)})
			waitFor(t, "the marker after healing", func() bool { return c.count() > before })
			c.mu.Lock()
			got := c.got[before:]
			c.mu.Unlock()
			if len(got) != 1 || got[0].Msg.GetIndex() != 1000 {
				t.Fatalf("delivered %d messages across the cut (first index %d), want only the marker", len(got), got[0].Msg.GetIndex())
			}
		})
	}

	send.SetCut([]uint64{2})
	if got := send.Cut(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("Cut() = %v", got)
	}
	ks := NewKVSender(tr, 2)
	defer ks.Close()
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
	_, err := ks.Send(context.Background(), ba)
	var notFound *kvpb.TabletNotFoundError
	if err == nil || !strings.Contains(err.Error(), ErrCut.Error()) || !errors.As(err, &notFound) {
		t.Errorf("KV batch to a cut peer: %v, want ErrCut as a routing error (not sent)", err)
	}
	p := NewClockPinger(func(uint64) (string, error) { return addr, nil })
	p.Faults = &send
	defer p.Close()
	if _, err := p.Ping(context.Background(), 2); !errors.Is(err, ErrCut) {
		t.Errorf("clock ping to a cut peer: %v, want ErrCut", err)
	}
	var none *Faults
	if none.IsCut(2) || none.Cut() != nil {
		t.Error("a nil Faults cuts something")
	}
}
