package jobs

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cairn-db/cairn/testcluster"
)

// TestUnfinishedReadsFromTheFirstRunningJob counts the records an
// Unfinished reads: after its first list it reads from the oldest job
// that was running on, not every job ever made (List's cost, which grew
// with every CREATE INDEX), and it never loses a running job: one being
// created below a later record (the gap rule) and every running one are
// listed until they finish.
func TestUnfinishedReadsFromTheFirstRunningJob(t *testing.T) {
	ctx := context.Background()
	db := testcluster.StartNode(t, testcluster.Options{}).DB
	defer func(g, f time.Duration) { GapWait, FullEvery = g, f }(GapWait, FullEvery)
	GapWait, FullEvery = time.Hour, time.Hour

	create := func(n int, finish bool) []*Job {
		var js []*Job
		for range n {
			j, err := Create(ctx, db, Record{Type: "T"})
			if err != nil {
				t.Fatal(err)
			}
			if finish {
				if err := j.Finish(ctx, StatusSucceeded, nil); err != nil {
					t.Fatal(err)
				}
			}
			js = append(js, j)
		}
		return js
	}
	var u Unfinished
	list := func() (ids []int64, read int64) {
		t.Helper()
		before := u.read
		recs, err := u.List(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Status == StatusRunning {
				ids = append(ids, r.ID)
			}
		}
		return ids, u.read - before
	}

	create(40, true)
	running := create(1, false)[0]
	create(9, true)
	if ids, read := list(); !slices.Equal(ids, []int64{running.ID()}) || read != 50 {
		t.Fatalf("first list: running %v after reading %d records, want [%d] after 50", ids, read, running.ID())
	}
	if ids, read := list(); !slices.Equal(ids, []int64{running.ID()}) || read != 10 {
		t.Fatalf("second list: running %v after reading %d records, want [%d] after 10 (from the running job on)", ids, read, running.ID())
	}
	if err := running.Finish(ctx, StatusFailed, nil); err != nil {
		t.Fatal(err)
	}
	if ids, read := list(); len(ids) != 0 || read != 10 {
		t.Fatalf("after it finished: running %v after reading %d, want none after 10", ids, read)
	}
	if ids, read := list(); len(ids) != 0 || read != 0 {
		t.Fatalf("with every job finished: running %v after reading %d, want none after 0", ids, read)
	}

	// A job whose ID is taken but whose record is not yet written, with a
	// later job already finished: the mark must stay below it.
	gap, err := db.Inc(ctx, counterKey(), 1)
	if err != nil {
		t.Fatal(err)
	}
	create(1, true)
	if ids, read := list(); len(ids) != 0 || read != 1 {
		t.Fatalf("with a gap: running %v after reading %d, want none after 1", ids, read)
	}
	late := &Job{db: db, r: Record{ID: gap, Type: "T", Status: StatusRunning, Created: time.Now().UTC(), Modified: time.Now().UTC()}}
	if err := late.write(ctx); err != nil {
		t.Fatal(err)
	}
	if ids, _ := list(); !slices.Equal(ids, []int64{gap}) {
		t.Fatalf("the job created late (ID %d) is not listed: running %v", gap, ids)
	}
	if err := late.Finish(ctx, StatusSucceeded, nil); err != nil {
		t.Fatal(err)
	}

	// A gap older than GapWait is a create that failed: passed.
	if _, err := db.Inc(ctx, counterKey(), 1); err != nil {
		t.Fatal(err)
	}
	create(1, true)
	GapWait = 0
	list()
	if ids, read := list(); len(ids) != 0 || read != 0 {
		t.Fatalf("past an old gap: running %v after reading %d, want none after 0", ids, read)
	}

	// FullEvery: the list starts again from the first job (53 records:
	// 54 IDs, the last gap's never written).
	FullEvery = 0
	if _, read := list(); read != 53 {
		t.Fatalf("a full list read %d records, want all 53", read)
	}
}
