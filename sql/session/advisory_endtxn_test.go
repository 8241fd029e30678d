package session

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/sql/builtins"
)

// TestAdvisoryEndTxnNoScan: a transaction that took no transaction-level
// advisory lock ends without taking the node's lock table and passing
// over its keys (every transaction's end did, a prepared SELECT's
// included); one that took some releases them at its end, and only
// them, as before.
func TestAdvisoryEndTxnNoScan(t *testing.T) {
	ctx := context.Background()
	m := NewAdvisoryLocks()
	a, b := m.holder(), m.holder()
	k1, k2 := builtins.AdvisoryKey{Key: 1}, builtins.AdvisoryKey{Key: 2}
	take := func(h *advisoryHolder, k builtins.AdvisoryKey, xact bool) bool {
		ok, err := h.Lock(ctx, k, false, xact, false)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for _, step := range []struct {
		name   string
		do     func()
		scans  int  // m.scans after the step
		bTakes bool // b may then take k1 and k2 (tried and given back)
	}{
		{"no locks", func() { a.endTxn() }, 0, true},
		{"a session lock", func() { take(a, k1, false); a.endTxn() }, 0, false},
		{"an xact lock", func() { take(a, k2, true) }, 0, false},
		{"its end", func() { a.endTxn() }, 1, false}, // k1 (session) stays
		{"the next end", func() { a.endTxn() }, 1, false},
		{"unlock all", func() { a.UnlockAll() }, 2, true},
		{"ends after", func() { a.endTxn(); a.endTxn() }, 2, true},
	} {
		step.do()
		if m.scans != step.scans {
			t.Errorf("%s: %d scans of the table, want %d", step.name, m.scans, step.scans)
		}
		before := m.scans
		got := take(b, k1, true) && take(b, k2, true)
		b.endTxn()
		m.scans = before
		if got != step.bTakes {
			t.Errorf("%s: b takes k1 and k2: %v, want %v", step.name, got, step.bTakes)
		}
	}
}
