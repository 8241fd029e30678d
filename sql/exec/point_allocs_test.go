package exec

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// replayReader is an ImplicitReader that reads once from the DB and then
// answers every batch with that first answer, so that a test counts the
// executor's allocations and not the KV read's.
type replayReader struct {
	db      *kv.DB
	results []kv.Result
}

func (r *replayReader) ReadImplicit(ctx context.Context, b *kv.Batch) error {
	if r.results == nil {
		if err := r.db.RunImplicitRead(ctx, b); err != nil {
			return err
		}
		r.results = b.Results
	}
	b.Results = r.results
	return nil
}

// TestImplicitPointAllocs counts what an implicit point SELECT of a kept
// plan (a PointCache; pgbench's SELECT abalance ... WHERE aid = $1)
// allocates in the executor, from Start to its row and Close, its KV read
// aside: the runner (and, since the sixteenth session, the Rows inside
// it), the point operator (its fetcher, merger and KV batch inside it,
// and since the sixteenth session the span's keys, the row's projection
// to the plan's columns and the last level of projections: 15
// allocations before), the row read, the KV request. Not made per statement:
// the runner's memory accounting and temporary files' scope, until an
// operator asks for them.
func TestImplicitPointAllocs(t *testing.T) {
	e := newEnv(t)
	tbl := e.createTable(tableSpec{name: "pa", cols: []string{"k int8", "v int8"}, pk: []string{"k"}},
		[]types.Datum{types.DInt(1), types.DInt(10)})
	s := e.scan(tbl, nil, "k", "v")
	s.Spans = []plan.Span{{Start: ints(1), End: ints(1), EndInclusive: true}}
	s.Spans[0].End = s.Spans[0].Start // a kept plan's point span shares its values
	root := &plan.Project{Input: s, Exprs: []sem.Expr{ref(s.Cols[1])}, Cols: []plan.Column{e.col("v", types.Int8)}}
	p := &plan.Plan{Root: root, ReadOnly: true}
	x := &Context{Implicit: &replayReader{db: e.db}, Eval: &sem.EvalContext{}, Point: &PointCache{}, WorkMem: 4 << 20}
	ctx := context.Background()
	run := func() string {
		rs, err := Start(ctx, x, p)
		if err != nil {
			t.Fatal(err)
		}
		row, err := rs.Next(ctx)
		if err != nil || len(row) != 1 {
			t.Fatalf("row %v, %v", row, err)
		}
		got := row[0].String()
		rs.Close()
		return got
	}
	if got := run(); got != "10" {
		t.Fatalf("read %s, want 10", got)
	}
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	const want = 12
	if n := testing.AllocsPerRun(100, func() { run() }); n > want {
		t.Errorf("%v allocations per point read, want at most %d", n, want)
	} else {
		t.Logf("%v allocations", n)
	}
}
