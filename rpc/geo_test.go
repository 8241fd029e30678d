package rpc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/raftnode"
)

func TestParseLatencyMap(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // String() of the map, or the error's text
		err  bool
	}{
		{in: "", want: ""},
		{in: "us-west:us-east=60ms,us-east:eu=86ms,eu:us-west=145ms", want: "eu:us-east=86ms,eu:us-west=145ms,us-east:us-west=60ms"},
		{in: " a:b=1s ", want: "a:b=1s"},
		{in: "a:b", want: "want REGION:REGION=DURATION", err: true},
		{in: "a=1ms", want: "want REGION:REGION=DURATION", err: true},
		{in: ":b=1ms", want: "want REGION:REGION=DURATION", err: true},
		{in: "a:a=1ms", want: "no latency to itself", err: true},
		{in: "a:b=fast", want: "invalid duration", err: true},
		{in: "a:b=-1ms", want: "negative", err: true},
		{in: "a:b=1ms,b:a=2ms", want: "given twice", err: true},
	} {
		m, err := ParseLatencyMap(tc.in)
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseLatencyMap(%q) = %v, %v; want an error containing %q", tc.in, m, err, tc.want)
			}
			continue
		}
		if err != nil || m.String() != tc.want {
			t.Errorf("ParseLatencyMap(%q) = %q, %v; want %q", tc.in, m.String(), err, tc.want)
		}
	}
	m, _ := ParseLatencyMap("us-west:eu=145ms")
	if m.RTT("eu", "us-west") != 145*time.Millisecond || m.RTT("eu", "eu") != 0 || m.RTT("eu", "mars") != 0 {
		t.Errorf("RTT lookups wrong: %v", m)
	}
	if got := Region("zone=a, region=eu ,rack=3"); got != "eu" {
		t.Errorf("Region = %q", got)
	}
}

// TestGeographyDelays: two nodes in regions 145 ms apart learn each
// other's locality on connect, and a KV batch between them takes at least
// the round trip, a raft message at least half of it. (Only lower bounds:
// the machine is shared, so no assertion bounds a time from above.)
func TestGeographyDelays(t *testing.T) {
	lat, err := ParseLatencyMap("us-west:eu=145ms")
	if err != nil {
		t.Fatal(err)
	}
	west := NewGeography(1, "region=us-west", lat)
	eu := NewGeography(2, "region=eu,zone=b", lat)
	c := &collector{}
	srv := Serve(listen(t, "127.0.0.1:0"), c.handle, nil, WithKV(openStore(t)), WithGeography(eu))
	defer srv.Stop()
	addr := srv.Addr().String()
	tr := NewTransport(TransportConfig{Resolve: func(uint64) (string, error) { return addr, nil }, Geo: west})
	defer tr.Close()

	kvs := NewKVSender(tr, 2)
	defer kvs.Close()
	get := batch(kvpb.Header{}, &kvpb.GetRequest{Key: bs("a")})
	// The first call connects and exchanges localities.
	if _, err := kvs.Send(context.Background(), get); err != nil {
		t.Fatal(err)
	}
	if l, ok := west.Locality(2); !ok || l != "region=eu,zone=b" {
		t.Errorf("node 1 knows node 2 as %q, %v", l, ok)
	}
	if l, ok := eu.Locality(1); !ok || l != "region=us-west" {
		t.Errorf("node 2 knows node 1 as %q, %v", l, ok)
	}
	if d := west.OneWay(2); d != 72500*time.Microsecond {
		t.Errorf("one-way delay to node 2 = %v, want 72.5ms", d)
	}
	for range 3 {
		start := time.Now()
		if _, err := kvs.Send(context.Background(), get); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 145*time.Millisecond {
			t.Errorf("a KV batch from us-west to eu answered after %v, less than the 145ms round trip", d)
		}
	}
	// A cancelled context during the delay returns at once, unsent.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := kvs.Send(ctx, get); err != context.DeadlineExceeded {
		t.Errorf("a batch whose deadline ends in the delay: %v", err)
	}

	sent := time.Now()
	tr.Send([]raftnode.Envelope{{TabletID: 3, Msg: msg(2, 1)}})
	waitFor(t, "the raft message", func() bool { return c.count() == 1 })
	if d := c.when[0].Sub(sent); d < 72*time.Millisecond {
		t.Errorf("a raft message from us-west to eu arrived after %v, less than half the round trip", d)
	}
}

// TestGeographySameRegion: nodes of one region inject nothing, and a
// server without a geography answers the hello as a node of no region.
func TestGeographySameRegion(t *testing.T) {
	lat, _ := ParseLatencyMap("us-west:eu=145ms")
	a := NewGeography(1, "region=eu", lat)
	b := NewGeography(2, "region=eu", lat)
	b.learn(1, "region=eu")
	a.learn(2, "region=eu")
	if d := a.OneWay(2); d != 0 {
		t.Errorf("same region: delay %v", d)
	}
	srv := Serve(listen(t, "127.0.0.1:0"), func(raftnode.Envelope) {}, nil, WithKV(openStore(t)))
	defer srv.Stop()
	addr := srv.Addr().String()
	tr := NewTransport(TransportConfig{Resolve: func(uint64) (string, error) { return addr, nil }, Geo: a})
	defer tr.Close()
	kvs := NewKVSender(tr, 3)
	defer kvs.Close()
	if _, err := kvs.Send(context.Background(), batch(kvpb.Header{}, &kvpb.GetRequest{Key: bs("a")})); err != nil {
		t.Fatal(err)
	}
	if l, ok := a.Locality(3); !ok || l != "" {
		t.Errorf("a node without geography is known as %q, %v", l, ok)
	}
}

// TestDelayedStreamNotHeldBack: under a steady stream of messages to a
// delayed peer, a batch leaves once its first message is due; it does not
// wait for the later messages' delays until it is full (which held the
// messages of a 72 ms link back for seconds and broke elections). The
// check is causal: the first message arrives before the 400th is sent.
func TestDelayedStreamNotHeldBack(t *testing.T) {
	c := &collector{}
	srv := Serve(listen(t, "127.0.0.1:0"), c.handle, nil)
	defer srv.Stop()
	addr := srv.Addr().String()
	tr := NewTransport(TransportConfig{
		Resolve: func(uint64) (string, error) { return addr, nil },
		Delay:   func(uint64) time.Duration { return 80 * time.Millisecond },
	})
	defer tr.Close()
	const n = 500
	arrivedBefore := -1
	for i := range n {
		tr.Send([]raftnode.Envelope{{TabletID: 1, Msg: msg(2, uint64(i))}})
		if arrivedBefore < 0 && c.count() > 0 {
			arrivedBefore = i
		}
		time.Sleep(5 * time.Millisecond)
	}
	waitFor(t, "every message", func() bool { return c.count() == n })
	if arrivedBefore < 0 || arrivedBefore >= 400 {
		t.Errorf("the first message arrived only after message %d was sent (-1: after all %d)", arrivedBefore, n)
	}
	for i, e := range c.got {
		if e.Msg.GetIndex() != uint64(i) {
			t.Fatalf("message %d arrived as %d", i, e.Msg.GetIndex())
		}
	}
}
