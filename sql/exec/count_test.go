package exec

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// TestCountPushdown: count(*) (or count(1), or of a primary-key column)
// over a primary-index scan without a filter is counted at the tablets
// (count.go): the KV layer returns no key, for packed and unpacked rows,
// a whole table or spans of it, and several counts, in pages of 97 rows
// resumed where each stopped; a count with a
// filter, of NULL, of a nullable column, or over a secondary index reads
// rows as before and agrees.
func TestCountPushdown(t *testing.T) {
	e := newEnv(t)
	const n = 1000
	var rows [][]types.Datum
	for i := int64(0); i < n; i++ {
		rows = append(rows, []types.Datum{types.DInt(i), types.DInt(i % 7), types.DString(fmt.Sprint("x", i))})
	}
	spec := tableSpec{cols: []string{"k int8", "v int8", "s text"}, pk: []string{"k"}, indexes: [][]string{{"v"}}}
	packed, unpacked := spec, spec
	packed.name, packed.packed = "packed", true
	unpacked.name = "unpacked"
	for _, ts := range []tableSpec{packed, unpacked} {
		tbl := e.createTable(ts, rows...)
		t.Run(ts.name, func(t *testing.T) {
			for _, c := range []struct {
				name   string
				scan   func() *plan.Scan
				aggs   []string
				want   string
				pushed bool
			}{
				{"whole table", func() *plan.Scan { return e.scan(tbl, nil) }, []string{"count(*)"}, "1000", true},
				{"two counts", func() *plan.Scan { return e.scan(tbl, nil) }, []string{"count(*)", "count(*)"}, "1000 1000", true},
				{"spans", func() *plan.Scan {
					s := e.scan(tbl, nil)
					s.Spans = []plan.Span{{Start: ints(10), End: ints(19), EndInclusive: true}, {Start: ints(500), StartExclusive: true}}
					return s
				}, []string{"count(*)"}, "509", true},
				{"filter", func() *plan.Scan {
					s := e.scan(tbl, nil, "v")
					s.Filter = e.expr("v = 3", s.Cols...)
					return s
				}, []string{"count(*)"}, "143", false},
				{"constant and key column", func() *plan.Scan { return e.scan(tbl, nil, "k") }, []string{"count(1)", "count(k)", "count(*)"}, "1000 1000 1000", true},
				{"NULL", func() *plan.Scan { return e.scan(tbl, nil) }, []string{"count(NULL::int8)"}, "0", false},
				{"column", func() *plan.Scan { return e.scan(tbl, nil, "v") }, []string{"count(v)"}, "1000", false},
				{"secondary index", func() *plan.Scan { return e.scan(tbl, &tbl.Indexes[0], "v") }, []string{"count(*)"}, "1000", false},
			} {
				t.Run(c.name, func(t *testing.T) {
					defer func(p int64) { countPage = p }(countPage)
					countPage = 97 // several pages, resumed
					s := c.scan()
					g := &plan.GroupBy{Input: s}
					for _, a := range c.aggs {
						g.Aggs = append(g.Aggs, e.agg(a, s.Cols...))
						g.Cols = append(g.Cols, e.col("count", types.Int8))
					}
					st := &Stats{}
					out, err := e.run(&plan.Plan{Root: g}, st)
					if err != nil {
						t.Fatal(err)
					}
					if out != c.want+"\n" {
						t.Fatalf("got %q, want %s", out, c.want)
					}
					pushed := st.Node(s) == nil && st.Node(g).KVRequests > 1 && st.Node(g).KVKeys == 0
					if pushed != c.pushed {
						t.Fatalf("counted at the tablets: %v, want %v (aggregate %+v, scan %+v)", pushed, c.pushed, st.Node(g), st.Node(s))
					}
				})
			}
		})
	}
}

// TestCountSplit: the rest of a count span is cut into pieces about as
// wide in key space as the page that stopped it, which partition the rest
// exactly (consecutive, the first from its start, the last to its end);
// no cut point falls outside it or repeats.
func TestCountSplit(t *testing.T) {
	k := func(prefix string, v uint64) []byte {
		return binary.BigEndian.AppendUint64([]byte(prefix), v)
	}
	for _, c := range []struct {
		name       string
		start      []byte
		rest       kvpb.Span
		n          int
		wantPieces int
	}{
		{"even", k("/t/", 0), kvpb.Span{Key: k("/t/", 100), EndKey: []byte("/t0")}, 4, 4},
		{"end near", k("/t/", 0), kvpb.Span{Key: k("/t/", 100), EndKey: k("/t/", 250)}, 4, 2},
		{"end at a cut", k("/t/", 0), kvpb.Span{Key: k("/t/", 100), EndKey: k("/t/", 200)}, 4, 1},
		{"start a prefix of the resume key", []byte("/t/"), kvpb.Span{Key: []byte("/t/\x01"), EndKey: []byte("/t0")}, 3, 3},
		{"no width", []byte("/t/a"), kvpb.Span{Key: []byte("/t/a\x00"), EndKey: []byte("/t0")}, 4, 1},
		{"near the largest word", k("/t/", math.MaxUint64-30), kvpb.Span{Key: k("/t/", math.MaxUint64-20), EndKey: []byte("/t0")}, 4, 3},
		{"one piece wanted", k("/t/", 0), kvpb.Span{Key: k("/t/", 100), EndKey: []byte("/t0")}, 1, 1},
		{"unbounded", k("/t/", 0), kvpb.Span{Key: k("/t/", 100)}, 3, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := countSplit(c.start, c.rest, c.n)
			if len(got) != c.wantPieces {
				t.Fatalf("%d pieces %v, want %d", len(got), got, c.wantPieces)
			}
			if !bytes.Equal(got[0].Key, c.rest.Key) || !bytes.Equal(got[len(got)-1].EndKey, c.rest.EndKey) {
				t.Fatalf("pieces %v do not cover %v", got, c.rest)
			}
			for i := 1; i < len(got); i++ {
				if !bytes.Equal(got[i-1].EndKey, got[i].Key) || bytes.Compare(got[i].Key, got[i-1].Key) <= 0 {
					t.Fatalf("pieces %v are not consecutive at %d", got, i)
				}
			}
		})
	}
}

// TestCountInOrderOnSeekingDisk: on a disk that seeks
// (Context.ReadInOrder, the hdd profile) a count whose page read blocks
// from outside the block cache (kv.Result.DiskBytes) reads the rest of
// its span front to back, one page per round trip; otherwise, and while
// its pages come from memory (the memtable here, or the cache once a
// count read the table), the rest of a span is cut into pieces that one
// round trip counts concurrently. All count exactly.
func TestCountInOrderOnSeekingDisk(t *testing.T) {
	e := newEnv(t)
	var rows [][]types.Datum
	for i := int64(0); i < 1000; i++ {
		rows = append(rows, []types.Datum{types.DInt(i), types.DInt(i % 7)})
	}
	tbl := e.createTable(tableSpec{name: "c", cols: []string{"k int8", "v int8"}, pk: []string{"k"}, packed: true}, rows...)
	defer func(p int64) { countPage = p }(countPage)
	countPage = 97
	count := func(t *testing.T, readInOrder bool) *NodeStats {
		s := e.scan(tbl, nil)
		g := &plan.GroupBy{Input: s, Aggs: []plan.Aggregate{e.agg("count(*)", s.Cols...)}, Cols: []plan.Column{e.col("count", types.Int8)}}
		st := &Stats{}
		var got types.Datum
		e.txn(func(ctx context.Context, txn *kv.Txn) error {
			rs, err := Start(ctx, &Context{Txn: txn, Eval: &sem.EvalContext{}, Stats: st, ReadInOrder: readInOrder}, &plan.Plan{Root: g})
			if err != nil {
				return err
			}
			defer rs.Close()
			row, err := rs.Next(ctx)
			if err != nil || row == nil {
				return fmt.Errorf("count: %v, %v", row, err)
			}
			got = row[0]
			return nil
		})
		if got.String() != "1000" {
			t.Fatalf("count(*) = %s", got)
		}
		return st.Node(g)
	}
	for _, c := range []struct {
		name        string
		readInOrder bool
		flush       bool // the rows go to an SST whose blocks no read has cached yet
		// cached: the count reads files a count just read. A compaction
		// the flush started may end at any time and replace them with
		// files no read has cached, so the case counts twice and tries
		// again when a compaction ended, or was running, around the two.
		cached  bool
		inOrder bool
	}{
		{name: "ssd", inOrder: false},
		{name: "hdd, from the memtable", readInOrder: true, inOrder: false},
		{name: "hdd, from the disk", readInOrder: true, flush: true, inOrder: true},
		{name: "hdd, from the cache", readInOrder: true, cached: true, inOrder: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.flush {
				if err := e.node.Engine.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			ns := count(t, c.readInOrder)
			for try := 0; c.cached; try++ {
				if try == 100 {
					t.Fatal("the engine's compactions never left two counts alone")
				}
				before := e.node.Engine.Metrics().Compact.Count
				count(t, c.readInOrder)
				ns = count(t, c.readInOrder)
				if m := e.node.Engine.Metrics().Compact; m.Count == before && m.NumInProgress == 0 {
					break
				}
			}
			if c.inOrder != (ns.KVRequests == ns.KVBatches) || ns.KVBatches < 2 {
				t.Fatalf("%d requests in %d round trips: want one each (a page) exactly when in order (%t)", ns.KVRequests, ns.KVBatches, c.inOrder)
			}
		})
	}
}
