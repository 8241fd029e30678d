package exec

import (
	"context"
	"fmt"
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
		// Copied: a batch may hold its results in itself, and the next
		// batch may be the same one, reset.
		r.results = append([]kv.Result(nil), b.Results...)
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
// allocations before), the row read. Not made per statement: the KV
// request, the batch's own since the twentieth session (12 before);
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
	const want = 11
	if n := testing.AllocsPerRun(100, func() { run() }); n > want {
		t.Errorf("%v allocations per point read, want at most %d", n, want)
	} else {
		t.Logf("%v allocations", n)
	}
}

// TestReadPointAllocs counts what the kept point read without a runner
// (PointCache.ReadPoint, the session's fast path) allocates, its KV read
// aside (replayReader): the KV request and the values the fetcher
// decodes, and no more. Start's path, which it replaces for a kept plan's Execute, makes
// its runner, operator and Rows besides (TestImplicitPointAllocs: 12).
// It returns what Start returns.
func TestReadPointAllocs(t *testing.T) {
	e := newEnv(t)
	tbl := e.createTable(tableSpec{name: "rp", cols: []string{"k int8", "v int8", "w text"}, pk: []string{"k"}},
		[]types.Datum{types.DInt(1), types.DInt(10), types.DString("ten")},
		[]types.Datum{types.DInt(2), types.DNull, types.DString("twenty")})
	s := e.scan(tbl, nil, "k", "v", "w")
	s.Spans = []plan.Span{{Start: ints(1), End: ints(1), EndInclusive: true}}
	s.Spans[0].End = s.Spans[0].Start
	root := &plan.Project{Input: s, Exprs: []sem.Expr{ref(s.Cols[1]), &sem.Param{Index: 1, T: types.Int8}, ref(s.Cols[2])},
		Cols: []plan.Column{e.col("v", types.Int8), e.col("p", types.Int8), e.col("w", types.Text)}}
	p := &plan.Plan{Root: root, ReadOnly: true}
	params := []types.Datum{types.DInt(7)}
	pc := &PointCache{}
	ctx := context.Background()
	if pc.Ready() {
		t.Fatal("ready before Start kept the shape")
	}
	x := &Context{Implicit: &replayReader{db: e.db}, Eval: &sem.EvalContext{Params: params}, Point: pc, WorkMem: 4 << 20}
	rs, err := Start(ctx, x, p)
	if err != nil {
		t.Fatal(err)
	}
	want, err := rs.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want = append([]types.Datum(nil), want...)
	rs.Close()
	if !pc.Ready() {
		t.Fatal("Start kept no shape")
	}
	var pr PointRead
	for _, tc := range []struct {
		key  int64
		want string
	}{{1, "[10 7 ten]"}, {2, "[NULL 7 twenty]"}, {3, "[]"}, {1, "[10 7 ten]"}, {3, "[]"}, {2, "[NULL 7 twenty]"}} {
		// One PointRead for all: its fetcher and row buffers serve each
		// read in turn.
		row, ok, err := pc.ReadPoint(ctx, implicitDB{e.db}, ints(tc.key), params, &pr)
		if !ok || err != nil {
			t.Fatalf("key %d: ok %v, %v", tc.key, ok, err)
		}
		if got := fmt.Sprint(datumStrings(row)); got != tc.want {
			t.Errorf("key %d: %s, want %s", tc.key, got, tc.want)
		}
		if tc.key == 1 && fmt.Sprint(datumStrings(row)) != fmt.Sprint(datumStrings(want)) {
			t.Errorf("key 1: %v, Start read %v", datumStrings(row), datumStrings(want))
		}
	}
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	rd := &replayReader{db: e.db}
	key := ints(1)
	read := testing.AllocsPerRun(100, func() {
		if row, ok, err := pc.ReadPoint(ctx, rd, key, params, &pr); !ok || err != nil || len(row) != 3 {
			t.Fatalf("%v %v %v", row, ok, err)
		}
	})
	x.Implicit = rd
	start := testing.AllocsPerRun(100, func() {
		rs, err := Start(ctx, x, p)
		if err != nil {
			t.Fatal(err)
		}
		if row, err := rs.Next(ctx); err != nil || len(row) != 3 {
			t.Fatalf("%v %v", row, err)
		}
		rs.Close()
	})
	// What is left: the fetcher's decoding (a text value's box); the
	// fetcher, its row buffers and its merger's are the PointRead's,
	// kept from read to read (7 allocations when each read copied the
	// fetcher afresh), and the KV request is the batch's own (3 when
	// kv.Batch.Scan allocated it, before the twentieth session).
	const most = 2
	if read > most || start-read < 5 {
		t.Errorf("%v allocations per kept point read, want at most %d and 5 fewer than Start's %v", read, most, start)
	} else {
		t.Logf("%v allocations, Start %v", read, start)
	}
}

// implicitDB reads every batch from the DB.
type implicitDB struct{ db *kv.DB }

func (r implicitDB) ReadImplicit(ctx context.Context, b *kv.Batch) error {
	return r.db.RunImplicitRead(ctx, b)
}

func datumStrings(row []types.Datum) []string {
	out := make([]string, len(row))
	for i, d := range row {
		out[i] = d.String()
	}
	return out
}
