package stats

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/testcluster"
)

// An automatic collection's read transaction writes nothing, so it is
// left out of kv.DB.DrainTimestamp: an online CREATE INDEX right after a
// large load does not wait between its steps for the collection the load
// started. An ordinary open transaction, beside it, still holds the
// drain (the check can fail).
func TestRefreshHoldsNoDrain(t *testing.T) {
	ctx := context.Background()
	node := testcluster.StartNode(t, testcluster.Options{})
	inside := make(chan hlc.Timestamp, 1)
	release := make(chan struct{})
	refreshTestingHook = func(txn *kv.Txn) {
		select {
		case inside <- txn.ReadTimestamp():
		default: // a retry: the test has what it needs
		}
		<-release
	}
	defer func() { refreshTestingHook = nil }()
	r := NewRefresher(node.DB, NewCache(node.DB), nil, nil)
	r.Delay = 0
	tbl := &catalog.Table{ID: 61, Name: "r", Columns: []catalog.Column{{ID: 1, Name: "a", Type: types.Int8}}}
	r.NotifyMutations(tbl, 10*StaleRows)
	ts := <-inside

	other := node.DB.NewTxn(ctx, "writer", kv.Serializable)
	if p := node.DB.DrainTimestamp(); other.ReadTimestamp().Less(p) {
		t.Errorf("drain timestamp %v above an open writer's read timestamp %v", p, other.ReadTimestamp())
	}
	if err := other.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if p := node.DB.DrainTimestamp(); !ts.Less(p) {
		t.Errorf("drain timestamp %v held at or below the open collection's read timestamp %v", p, ts)
	}
	close(release)
	r.Stop()
}

// A stale table waits Delay for its collection (invariant 4), and the
// changes reported meanwhile join it: two loads in quick succession make
// one wait and one collection, which takes both loads' changes off the
// count.
func TestRefreshWaitsAndCoalesces(t *testing.T) {
	node := testcluster.StartNode(t, testcluster.Options{})
	collected := make(chan struct{}, 4)
	refreshTestingHook = func(*kv.Txn) { collected <- struct{}{} }
	defer func() { refreshTestingHook = nil }()
	r := NewRefresher(node.DB, NewCache(node.DB), nil, nil)
	fire := make(chan time.Time)
	waiting := make(chan time.Duration, 4)
	r.after = func(d time.Duration) (<-chan time.Time, func()) {
		waiting <- d
		return fire, func() {}
	}
	tbl := &catalog.Table{ID: 62, Name: "w", Columns: []catalog.Column{{ID: 1, Name: "a", Type: types.Int8}}}
	r.NotifyMutations(tbl, 2*StaleRows)
	select {
	case d := <-waiting:
		if d != DefaultDelay {
			t.Fatalf("the collection waits %v, want DefaultDelay (%v)", d, DefaultDelay)
		}
	case <-collected:
		t.Fatal("the collection started without waiting")
	}
	r.NotifyMutations(tbl, 3*StaleRows)
	select {
	case <-collected:
		t.Fatal("a collection started before its wait ended")
	case d := <-waiting:
		t.Fatalf("a second wait (%v) for a table already waiting", d)
	default:
	}
	fire <- time.Now()
	<-collected
	r.mu.Lock()
	left := r.changed[tbl.ID]
	r.mu.Unlock()
	if left != 0 {
		t.Errorf("%d changes left on the count after the collection, want 0 (both loads collected at once)", left)
	}
	r.Stop()
	if len(waiting) != 0 {
		t.Errorf("%d more waits after the collection, want none", len(waiting))
	}
}

// An ANALYZE of the whole table that committed takes the changes it read
// past off the count: the collection a load started then finds the table
// fresh when its wait ends and reads nothing. Changes reported after the
// ANALYZE started stay on the count, and a table changed enough since is
// still collected.
func TestAnalyzedTakesChangesOff(t *testing.T) {
	node := testcluster.StartNode(t, testcluster.Options{})
	collected := make(chan catalog.ID, 4)
	var hookTable catalog.ID
	refreshTestingHook = func(*kv.Txn) { collected <- hookTable }
	defer func() { refreshTestingHook = nil }()
	r := NewRefresher(node.DB, NewCache(node.DB), nil, nil)
	fire := make(chan time.Time)
	r.after = func(time.Duration) (<-chan time.Time, func()) { return fire, func() {} }
	for _, tc := range []struct {
		name      string
		id        catalog.ID
		analyze   bool  // an ANALYZE reads the table after the load
		after     int64 // changes reported after the ANALYZE started
		collected bool
		left      int64 // changes on the count once the wait ended
	}{
		{"load alone", 63, false, 0, true, 0},
		{"load then ANALYZE", 64, true, 0, false, 0},
		{"load, ANALYZE, a few changes", 65, true, 7, false, 7},
		{"load, ANALYZE, a second load", 66, true, 10 * StaleRows, true, 0},
	} {
		hookTable = tc.id
		tbl := &catalog.Table{ID: tc.id, Name: "a", Columns: []catalog.Column{{ID: 1, Name: "a", Type: types.Int8}}}
		r.NotifyMutations(tbl, 10*StaleRows) // the load: a wait starts
		if tc.analyze {
			n := r.Changed(tc.id)
			if n != 10*StaleRows {
				t.Fatalf("%s: Changed %d, want the load's %d", tc.name, n, 10*StaleRows)
			}
			r.NotifyMutations(tbl, tc.after) // commits during the ANALYZE
			r.Analyzed(tc.id, n)             // its commit
		}
		fire <- time.Now() // the wait ends
		// The refresher's goroutine is done with the table once it no
		// longer runs for it.
		for {
			r.mu.Lock()
			running := r.running[tc.id]
			r.mu.Unlock()
			if !running {
				break
			}
			time.Sleep(time.Millisecond)
		}
		got := false
		select {
		case <-collected:
			got = true
		default:
		}
		if got != tc.collected {
			t.Errorf("%s: collected %v, want %v", tc.name, got, tc.collected)
		}
		if left := r.Changed(tc.id); left != tc.left {
			t.Errorf("%s: %d changes left on the count, want %d", tc.name, left, tc.left)
		}
	}
	r.Stop()
}
