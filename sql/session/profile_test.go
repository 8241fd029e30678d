package session

import (
	"math"
	"testing"
	"time"
)

// TestProfileCostsAndBatches: a session plans with its storage.profile's
// costs, adds the node's network round trip to them, and batches index
// and lookup joins as the profile says unless sql.testing.lookup_batch
// overrides it; a count reads in order only on a disk that seeks.
func TestProfileCostsAndBatches(t *testing.T) {
	for _, c := range []struct {
		profile, override string
		rtt               time.Duration
		batch             int
		roundTrip         float64
	}{
		// The round trip to the node's own tablets: 100 µs at 1 µs a unit
		// (every profile's).
		{"ssd", "0", 0, 1000, 100},
		{"hdd", "0", 0, 10000, 100},
		{"object-store", "0", 0, 10000, 100},
		{"hdd", "250", 0, 250, 100},
		// 10 ms more.
		{"ssd", "0", 10 * time.Millisecond, 1000, 10100},
		{"hdd", "0", 10 * time.Millisecond, 10000, 10100},
		{"object-store", "0", 10 * time.Millisecond, 10000, 10100},
	} {
		b := &Backend{}
		if c.rtt > 0 {
			b.cfg.NetworkRTT = func() time.Duration { return c.rtt }
		}
		s := &Session{b: b, vars: map[string]string{"storage.profile": c.profile, "sql.testing.lookup_batch": c.override}}
		costs := s.costs()
		if costs.Name != c.profile || math.Abs(costs.RoundTrip-c.roundTrip) > 1e-9 || s.lookupBatch() != c.batch {
			t.Errorf("%+v: costs %s with round trip %v, batches of %d", c, costs.Name, costs.RoundTrip, s.lookupBatch())
		}
		if got := s.readInOrder(); got != (c.profile == "hdd") {
			t.Errorf("%+v: reads in order %t", c, got)
		}
	}
}
