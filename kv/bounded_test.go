package kv

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// TestNegotiateBoundedStaleness: the negotiated timestamp is the oldest
// of what each tablet of the spans serves (Options.Servable), forwarded
// to the bound; Satisfied says whether the bound needed no forwarding.
// Tablets [,b) [b,d) [d,) serve the present, 5 s back and 2 s back.
func TestNegotiateBoundedStaleness(t *testing.T) {
	ctx := context.Background()
	lag := map[kvpb.TabletID]time.Duration{}
	e := newTestEnv(t, envOptions{splits: []string{"b", "d"}, manualClock: true, db: Options{
		Servable: func(id kvpb.TabletID, now hlc.Timestamp) hlc.Timestamp {
			return hlc.Timestamp{WallTime: now.WallTime - lag[id].Nanoseconds()}
		},
	}})
	for key, l := range map[string]time.Duration{"a": 0, "c": 5 * time.Second, "e": 2 * time.Second} {
		d, err := e.db.TabletCache().Lookup(ctx, []byte(key), false)
		if err != nil {
			t.Fatal(err)
		}
		lag[d.TabletID] = l
	}
	now := e.clock.Now().WallTime // the manual clock stands still
	at := func(back time.Duration) hlc.Timestamp { return hlc.Timestamp{WallTime: now - back.Nanoseconds()} }
	span := func(k, end string) kvpb.Span { return kvpb.Span{Key: []byte(k), EndKey: []byte(end)} }
	for _, tc := range []struct {
		name      string
		spans     []kvpb.Span
		bound     time.Duration // back from now
		ts        time.Duration // back from now
		satisfied bool
	}{
		{"leaseholder's tablet: the present", []kvpb.Span{span("a", "az")}, 10 * time.Second, 0, true},
		{"all tablets: the most lagging", []kvpb.Span{span("a", "z")}, 10 * time.Second, 5 * time.Second, true},
		{"spans skipping the lagging tablet", []kvpb.Span{span("a", "b"), span("e", "f")}, 10 * time.Second, 2 * time.Second, true},
		{"a span ending at a boundary stays left of it", []kvpb.Span{span("b", "d")}, 10 * time.Second, 5 * time.Second, true},
		{"a bound newer than a tablet serves: the bound", []kvpb.Span{span("a", "z")}, time.Second, time.Second, false},
		{"no spans: the present", nil, time.Second, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := e.db.NegotiateBoundedStaleness(ctx, tc.spans, at(tc.bound))
			if err != nil {
				t.Fatal(err)
			}
			// The clock's logical counter moves at each reading: compare
			// wall times.
			if b.Timestamp.WallTime != at(tc.ts).WallTime || b.Satisfied() != tc.satisfied {
				t.Fatalf("negotiated %s (satisfied %t, resolved %s), want %s back from now %d (satisfied %t)",
					b.Timestamp, b.Satisfied(), b.Resolved, tc.ts, now, tc.satisfied)
			}
		})
	}
}
