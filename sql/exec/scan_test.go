package exec

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

func seq(lo, hi int, f func(i int) string) string {
	var rows []string
	for i := lo; i <= hi; i++ {
		rows = append(rows, f(i))
	}
	return lines(rows...)
}

func TestScan(t *testing.T) {
	e := newEnv(t)
	var rows [][]types.Datum
	for i := int64(1); i <= 10; i++ {
		rows = append(rows, []types.Datum{types.DInt(i), types.DInt(100 - i%3), types.DString(fmt.Sprint("s", i))})
	}
	for _, packed := range []bool{true, false} {
		name := fmt.Sprintf("t%v", packed)
		tbl := e.createTable(tableSpec{name: name, cols: []string{"k int8", "v int8", "s text"}, pk: []string{"k"}, indexes: [][]string{{"v", "+s"}}, packed: packed}, rows...)
		all := func(lo, hi int) string { return seq(lo, hi, func(i int) string { return fmt.Sprintf("%d s%d", i, i) }) }
		rev := func(hi, lo int) string {
			var out []string
			for i := hi; i >= lo; i-- {
				out = append(out, fmt.Sprintf("%d s%d", i, i))
			}
			return lines(out...)
		}
		sc := func(mod func(s *plan.Scan)) string {
			s := e.scan(tbl, nil, "k", "s")
			mod(s)
			return e.mustRun(s)
		}
		for _, tc := range []struct {
			name string
			mod  func(s *plan.Scan)
			want string
		}{
			{"full", func(s *plan.Scan) {}, all(1, 10)},
			{"closed", func(s *plan.Scan) { s.Spans = []plan.Span{{Start: ints(3), End: ints(5), EndInclusive: true}} }, all(3, 5)},
			{"open", func(s *plan.Scan) {
				s.Spans = []plan.Span{{Start: ints(3), End: ints(5), StartExclusive: true}}
			}, all(4, 4)},
			{"unbounded", func(s *plan.Scan) { s.Spans = []plan.Span{{Start: ints(8)}, {}}[:1] }, all(8, 10)},
			{"points", func(s *plan.Scan) {
				s.Spans = []plan.Span{{Start: ints(2), End: ints(2), EndInclusive: true}, {Start: ints(7), End: ints(7), EndInclusive: true}, {Start: ints(70), End: ints(70), EndInclusive: true}}
			}, lines("2 s2", "7 s7")},
			{"reverse", func(s *plan.Scan) { s.Reverse, s.Ordered = true, true }, rev(10, 1)},
			{"reverse span", func(s *plan.Scan) {
				s.Reverse = true
				s.Spans = []plan.Span{{Start: ints(2), End: ints(3), EndInclusive: true}, {Start: ints(6), End: ints(8)}}
			}, lines("7 s7", "6 s6", "3 s3", "2 s2")},
			{"limit", func(s *plan.Scan) { s.HardLimit = 2 }, all(1, 2)},
			{"reverse limit", func(s *plan.Scan) { s.HardLimit = 1; s.Reverse = true }, all(10, 10)},
			{"filter limit", func(s *plan.Scan) {
				s.Filter = e.expr("k % 3 = 0", s.Cols...)
				s.HardLimit = 2
			}, lines("3 s3", "6 s6")},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				if got := sc(tc.mod); got != tc.want {
					t.Errorf("got\n%swant\n%s", got, tc.want)
				}
			})
		}
		t.Run(name+"/secondary", func(t *testing.T) {
			s := e.scan(tbl, &tbl.Indexes[0], "v", "k", "s")
			s.Spans = []plan.Span{{Start: ints(99), End: ints(100), EndInclusive: true}}
			want := lines("99 1 s1", "99 4 s4", "99 7 s7", "99 10 s10", "100 3 s3", "100 6 s6", "100 9 s9")
			if got := e.mustRun(s); got != want {
				t.Errorf("got\n%swant\n%s", got, want)
			}
		})
	}
}

func TestScanPagingAndIndexJoin(t *testing.T) {
	e := newEnv(t)
	const n = 3000
	var rows [][]types.Datum
	for i := int64(0); i < n; i++ {
		rows = append(rows, []types.Datum{types.DInt(i), types.DInt(i % 7), types.DString(fmt.Sprint("x", i))})
	}
	tbl := e.createTable(tableSpec{name: "big", cols: []string{"k int8", "v int8", "s text"}, pk: []string{"k"}, indexes: [][]string{{"v"}}}, rows...)

	t.Run("paging", func(t *testing.T) {
		st := &Stats{}
		s := e.scan(tbl, nil, "k")
		s.Reverse = true
		out, err := e.run(&plan.Plan{Root: s}, st)
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Fields(out)
		if len(got) != n || got[0] != "2999" || got[n-1] != "0" {
			t.Fatalf("got %d rows, first %s", len(got), got[0])
		}
		// Unpacked rows are 3 KVs each: pages of 256, 512, ... 8192 keys.
		ns := st.Node(s)
		if ns.KVBatches < 3 || ns.KVBatches > 8 {
			t.Errorf("kv batches = %d, want a few growing pages", ns.KVBatches)
		}
		if !strings.Contains(st.Annotate(s), " rows=3000 ") {
			t.Errorf("annotate: %s", st.Annotate(s))
		}
	})
	t.Run("limit reads one page", func(t *testing.T) {
		st := &Stats{}
		s := e.scan(tbl, nil, "k")
		s.HardLimit = 1
		if out, err := e.run(&plan.Plan{Root: s}, st); err != nil || out != "0\n" {
			t.Fatalf("%q %v", out, err)
		}
		if b := st.Node(s).KVBatches; b != 1 {
			t.Errorf("batches = %d", b)
		}
	})
	t.Run("index join", func(t *testing.T) {
		st := &Stats{}
		ix := e.scan(tbl, &tbl.Indexes[0], "v", "k")
		ix.Spans = []plan.Span{{Start: ints(3), End: ints(3), EndInclusive: true}}
		pk := e.scan(tbl, nil, "k", "s")
		j := &plan.IndexJoin{Input: ix, Table: tbl, KeyCols: []sem.ColumnID{ix.Cols[1].ID}, Cols: pk.Cols, TableCols: pk.TableCols}
		j.Filter = e.expr("k < 1000", pk.Cols...)
		out, err := e.run(&plan.Plan{Root: j}, st)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := 3; i < 1000; i += 7 {
			want = append(want, fmt.Sprintf("%d x%d", i, i))
		}
		if out != lines(want...) {
			t.Errorf("got %s", out)
		}
		ns := st.Node(j)
		// 429 input rows: one batch of 429 lookups.
		if ns.KVBatches != 1 || ns.KVRequests != n/7+1 {
			t.Errorf("index join kv: %s", st.Annotate(j))
		}
	})
}

func TestScanBucketed(t *testing.T) {
	e := newEnv(t)
	var rows [][]types.Datum
	for i := int64(1); i <= 40; i++ {
		rows = append(rows, []types.Datum{types.DInt(i), types.DInt(i * 10)})
	}
	tbl := e.createTable(tableSpec{name: "h", cols: []string{"k int8", "v int8"}, pk: []string{"k"}, indexes: [][]string{{"v"}}, hash: 1, packed: true}, rows...)
	l, err := tbl.Layout()
	if err != nil {
		t.Fatal(err)
	}
	bucketOf := map[int64]uint16{}
	var buckets []uint16
	for _, r := range rows {
		b, err := l.Bucket(r)
		if err != nil {
			t.Fatal(err)
		}
		bucketOf[int64(r[0].(types.DInt))] = b
		if !slices.Contains(buckets, b) {
			buckets = append(buckets, b)
		}
	}
	if len(buckets) < 10 {
		t.Fatalf("only %d buckets", len(buckets))
	}
	inOrder := seq(1, 40, func(i int) string { return fmt.Sprint(i) })
	t.Run("unordered has every row", func(t *testing.T) {
		got := strings.Fields(e.mustRun(e.scan(tbl, nil, "k")))
		slices.SortFunc(got, func(a, b string) int { return cmp.Or(len(a)-len(b), strings.Compare(a, b)) })
		if strings.Join(got, "\n")+"\n" != inOrder {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("ordered all buckets", func(t *testing.T) {
		s := e.scan(tbl, nil, "k")
		s.Ordered = true
		if got := e.mustRun(s); got != inOrder {
			t.Errorf("got %s", got)
		}
	})
	t.Run("ordered spans all buckets", func(t *testing.T) {
		s := e.scan(tbl, nil, "k")
		s.Ordered, s.Reverse = true, true
		s.Spans = []plan.Span{{Start: ints(5), End: ints(8), EndInclusive: true}, {Start: ints(30), End: ints(32)}}
		if got, want := e.mustRun(s), lines("31", "30", "8", "7", "6", "5"); got != want {
			t.Errorf("got %s", got)
		}
	})
	t.Run("merge of listed buckets", func(t *testing.T) {
		s := e.scan(tbl, nil, "k")
		s.Ordered, s.Buckets = true, buckets
		if got := e.mustRun(s); got != inOrder {
			t.Errorf("got %s", got)
		}
		s = e.scan(tbl, nil, "k")
		s.Ordered, s.Reverse, s.Buckets = true, true, buckets
		got := strings.Fields(e.mustRun(s))
		if len(got) != 40 || got[0] != "40" || got[39] != "1" || !slices.IsSortedFunc(got, func(a, b string) int { return len(b) - len(a) }) {
			t.Errorf("reverse merge got %v", got)
		}
	})
	t.Run("one bucket point", func(t *testing.T) {
		s := e.scan(tbl, nil, "k", "v")
		s.Buckets = []uint16{bucketOf[17]}
		s.Spans = []plan.Span{{Start: ints(17), End: ints(17), EndInclusive: true}}
		if got := e.mustRun(s); got != "17 170\n" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("local secondary ordered", func(t *testing.T) {
		s := e.scan(tbl, &tbl.Indexes[0], "v", "k")
		s.Ordered = true
		s.Spans = []plan.Span{{Start: ints(95), End: ints(150)}}
		if got, want := e.mustRun(s), lines("100 10", "110 11", "120 12", "130 13", "140 14"); got != want {
			t.Errorf("got %s", got)
		}
	})
	t.Run("lookup join into bucketed primary", func(t *testing.T) {
		v := &plan.Values{Cols: []plan.Column{e.col("x", types.Int8)}}
		for _, x := range []int64{3, 99, 3, 40} {
			v.Rows = append(v.Rows, []sem.Expr{cint(x)})
		}
		pk := e.scan(tbl, nil, "k", "v")
		for _, kind := range []struct {
			k    plan.JoinKind
			want string
		}{
			{plan.InnerJoin, lines("3 3 30", "3 3 30", "40 40 400")},
			{plan.LeftJoin, lines("3 3 30", "99 NULL NULL", "3 3 30", "40 40 400")},
			{plan.SemiJoin, lines("3", "3", "40")},
			{plan.AntiJoin, lines("99")},
		} {
			st := &Stats{}
			j := &plan.LookupJoin{Kind: kind.k, Input: v, Table: tbl, KeyCols: []sem.ColumnID{v.Cols[0].ID}, Cols: pk.Cols, TableCols: pk.TableCols}
			got, err := e.run(&plan.Plan{Root: j}, st)
			if err != nil {
				t.Fatal(err)
			}
			if got != kind.want {
				t.Errorf("kind %d: got\n%s", kind.k, got)
			}
			if st.Node(j).KVBatches != 1 {
				t.Errorf("%s", st.Annotate(j))
			}
		}
	})
}

func TestLookupJoinSecondary(t *testing.T) {
	e := newEnv(t)
	var rows [][]types.Datum
	for i := int64(1); i <= 2500; i++ {
		rows = append(rows, ints(i, i%5, -i))
	}
	for _, global := range []bool{false, true} {
		name := "l" + fmt.Sprint(global)
		tbl := e.createTable(tableSpec{name: name, cols: []string{"k int8", "v int8", "w int8"}, pk: []string{"-k"}, indexes: [][]string{{"v", "+w"}}, global: global, packed: true}, rows...)
		t.Run(name, func(t *testing.T) {
			in := e.vals("x", "3", "NULL::int8", "9", "1")
			ix := e.scan(tbl, &tbl.Indexes[0], "v", "k", "w")
			j := &plan.LookupJoin{Kind: plan.InnerJoin, Input: in, Table: tbl, Index: &tbl.Indexes[0], KeyCols: ids(in.Cols[0]), Cols: ix.Cols, TableCols: ix.TableCols}
			j.On = e.expr("k < 12", ix.Cols...)
			// Index order within a key: v then the primary key (k DESC).
			want := lines("3 3 8 -8", "3 3 3 -3", "1 1 11 -11", "1 1 6 -6", "1 1 1 -1")
			e.check("inner", j, want)
			l := *j
			l.Kind = plan.LeftJoin
			e.check("left", &l, lines("3 3 8 -8", "3 3 3 -3", "NULL NULL NULL NULL", "9 NULL NULL NULL", "1 1 11 -11", "1 1 6 -6", "1 1 1 -1"))
		})
		t.Run(name+"/index join in batches", func(t *testing.T) {
			// Every row through the secondary index, then the primary:
			// 2500 lookups in batches of lookupBatch.
			ix := e.scan(tbl, &tbl.Indexes[0], "v", "k")
			pk := e.scan(tbl, nil, "k", "w")
			j := &plan.IndexJoin{Input: ix, Table: tbl, KeyCols: ids(ix.Cols[1]), Cols: pk.Cols, TableCols: pk.TableCols}
			st := &Stats{}
			out, err := e.run(&plan.Plan{Root: j}, st)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSpace(out), "\n")
			// Index order: v = 0 first (k = 2500, 2495, ... descending).
			if len(got) != 2500 || got[0] != "2500 -2500" || got[1] != "2495 -2495" {
				t.Fatalf("got %d rows: %v", len(got), got[:2])
			}
			if ns := st.Node(j); ns.KVBatches != 3 || ns.KVRequests != 2500 || ns.KVKeys < 2500 || ns.Tablets < 1 {
				t.Errorf("%s", st.Annotate(j))
			}
		})
	}
}

func TestScanDescKey(t *testing.T) {
	e := newEnv(t)
	tbl := e.createTable(tableSpec{name: "d", cols: []string{"a int8", "b int8"}, pk: []string{"a", "-b"}},
		ints(1, 1), ints(1, 2), ints(1, 3), ints(2, 1), ints(2, 5))
	s := e.scan(tbl, nil, "a", "b")
	s.Spans = []plan.Span{{Start: ints(1, 3), End: ints(2, 5), EndInclusive: true}}
	e.check("desc prefix", s, lines("1 3", "1 2", "1 1", "2 5"))
	s = e.scan(tbl, nil, "a", "b")
	s.Spans = []plan.Span{{Start: ints(1, 2), End: ints(2), StartExclusive: true}}
	s.Reverse = true
	e.check("desc reverse", s, lines("1 1"))
}

func TestAnnotate(t *testing.T) {
	e := newEnv(t)
	tbl := e.createTable(tableSpec{name: "a", cols: []string{"k int8"}, pk: []string{"k"}, packed: true}, ints(1), ints(2), ints(3))
	s := e.scan(tbl, nil, "k")
	f := &plan.Filter{Input: s, Pred: e.expr("k > 1", s.Cols...)}
	never := e.vals("x", "1")
	st := &Stats{}
	if _, err := e.run(&plan.Plan{Root: f}, st); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n    plan.Node
		want string
	}{
		{s, `^\(actual time=\d+\.\d{3}\.\.\d+\.\d{3} rows=3 loops=1\)\nKV: 1 request in 1 round trip to 1 tablet, read 3 keys \(\d+ bytes\)$`},
		{f, `^\(actual time=\d+\.\d{3}\.\.\d+\.\d{3} rows=2 loops=1\)$`},
		{never, `^\(never executed\)$`},
	} {
		if got := st.Annotate(tc.n); !regexp.MustCompile(tc.want).MatchString(got) {
			t.Errorf("got %q, want %s", got, tc.want)
		}
	}
}
