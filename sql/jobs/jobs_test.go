package jobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/testcluster"
)

// TestJobLifecycle stores jobs, reports progress and ends them, and reads
// them back as a statement does (in a transaction) and outside one.
func TestJobLifecycle(t *testing.T) {
	ctx := context.Background()
	db := testcluster.StartNode(t, testcluster.Options{}).DB
	a, err := Create(ctx, db, Record{Type: "T", Description: "first", User: "alice", Payload: []byte(`{"table_id":7}`)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Create(ctx, db, Record{Type: "T", Description: "second", User: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if a.ID() <= 0 || b.ID() <= a.ID() {
		t.Fatalf("IDs %d then %d: want positive and increasing", a.ID(), b.ID())
	}
	for _, step := range []struct{ give, want float64 }{{0.25, 0.25}, {0.1, 0.25}, {0.5, 0.5}, {7, 1}} {
		if err := a.Progress(ctx, step.give); err != nil {
			t.Fatal(err)
		}
		r, ok, err := Get(ctx, db, a.ID())
		if err != nil || !ok {
			t.Fatalf("Get(%d): %v %v", a.ID(), ok, err)
		}
		if r.Fraction != step.want || r.Status != StatusRunning {
			t.Errorf("after Progress(%v): fraction %v status %s, want %v running", step.give, r.Fraction, r.Status, step.want)
		}
	}
	if err := a.Finish(ctx, StatusSucceeded, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(ctx, StatusFailed, errors.New("boom")); err != nil {
		t.Fatal(err)
	}
	var recs []Record
	if err := db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		var err error
		recs, err = List(ctx, txn)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("List: %d records, want 2", len(recs))
	}
	ra, rb := recs[0], recs[1]
	if ra.ID != a.ID() || ra.Description != "first" || ra.User != "alice" || ra.Status != StatusSucceeded || ra.Fraction != 1 ||
		string(ra.Payload) != `{"table_id":7}` || ra.Error != "" || ra.Finished.Before(ra.Started) || ra.Started.Before(ra.Created) {
		t.Errorf("first job: %+v", ra)
	}
	if rb.ID != b.ID() || rb.Status != StatusFailed || rb.Error != "boom" || rb.Finished.IsZero() {
		t.Errorf("second job: %+v", rb)
	}
	if _, ok, err := Get(ctx, db, b.ID()+100); ok || err != nil {
		t.Errorf("Get of a missing job: ok=%v err=%v", ok, err)
	}
}

// TestOrphaned: a running job whose record nobody wrote for OrphanAfter is
// orphaned; a heartbeat, or a final status, makes it not.
func TestOrphaned(t *testing.T) {
	ctx := context.Background()
	db := testcluster.StartNode(t, testcluster.Options{}).DB
	defer func(d, h time.Duration) { OrphanAfter, HeartbeatEvery = d, h }(OrphanAfter, HeartbeatEvery)
	OrphanAfter, HeartbeatEvery = 200*time.Millisecond, 20*time.Millisecond
	j, err := Create(ctx, db, Record{Type: "T"})
	if err != nil {
		t.Fatal(err)
	}
	get := func() Record {
		r, _, err := Get(ctx, db, j.ID())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if get().Orphaned(time.Now()) {
		t.Fatal("a fresh job is orphaned")
	}
	stop := j.KeepAlive(ctx)
	time.Sleep(3 * OrphanAfter)
	if r := get(); r.Orphaned(time.Now()) {
		t.Fatalf("a job with a heartbeat is orphaned: modified %v", r.Modified)
	}
	stop()
	time.Sleep(2 * OrphanAfter)
	if !get().Orphaned(time.Now()) {
		t.Fatal("a job without a heartbeat for twice OrphanAfter is not orphaned")
	}
	adopted, err := Adopt(ctx, db, j.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := adopted.Finish(ctx, StatusFailed, errors.New("node died")); err != nil {
		t.Fatal(err)
	}
	if r := get(); r.Orphaned(time.Now()) || r.Status != StatusFailed || r.Error != "node died" {
		t.Fatalf("after Finish: %+v", r)
	}
}
