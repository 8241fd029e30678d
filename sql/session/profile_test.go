package session

import (
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
		{"ssd", "0", 0, 1000, 20},
		{"hdd", "0", 0, 10000, 20},
		{"object-store", "0", 0, 10000, 20},
		{"hdd", "250", 0, 250, 20},
		// 10 ms at 5 µs a unit (every profile's).
		{"ssd", "0", 10 * time.Millisecond, 1000, 20 + 2000},
		{"hdd", "0", 10 * time.Millisecond, 10000, 20 + 2000},
		{"object-store", "0", 10 * time.Millisecond, 10000, 20 + 2000},
	} {
		b := &Backend{}
		if c.rtt > 0 {
			b.cfg.NetworkRTT = func() time.Duration { return c.rtt }
		}
		s := &Session{b: b, vars: map[string]string{"storage.profile": c.profile, "sql.testing.lookup_batch": c.override}}
		costs := s.costs()
		if costs.Name != c.profile || costs.RoundTrip != c.roundTrip || s.lookupBatch() != c.batch {
			t.Errorf("%+v: costs %s with round trip %v, batches of %d", c, costs.Name, costs.RoundTrip, s.lookupBatch())
		}
		if got := s.readInOrder(); got != (c.profile == "hdd") {
			t.Errorf("%+v: reads in order %t", c, got)
		}
	}
}
