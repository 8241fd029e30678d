package opt

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// Fixtures: tables built by hand as the catalog stores them.
//
//	t (a int8 PRIMARY KEY, b int8, c text, d int4)
//	  t_b (b); t_c UNIQUE (c); t_bd (b DESC, d) STORING (c);
//	  t_d_part (d) WHERE b > 0; t_wo (d) write-only
//	u (x int8 PRIMARY KEY, y int8, z text)  u_y (y)
//	h (k int8, j int8, v int8, PRIMARY KEY ((k) HASH, j))
//	s (id int8 PRIMARY KEY, ts int8, shard int4 hidden = mod(ts, 8))
//	  s_ts (shard, ts) USING HASH WITH BUCKET_COUNT = 8
func fixtures() map[string]*catalog.Table {
	asc := []rowenc.Order{rowenc.Asc}
	pk := func(name string, cols ...rowenc.ColumnID) catalog.Index {
		o := make([]rowenc.Order, len(cols))
		return catalog.Index{ID: catalog.PrimaryIndexID, Name: name, Unique: true, KeyColumnIDs: cols,
			KeyDirections: o, Kind: catalog.IndexBTree, State: catalog.IndexPublic}
	}
	sec := func(id catalog.IndexID, name string, cols []rowenc.ColumnID, orders []rowenc.Order) catalog.Index {
		return catalog.Index{ID: id, Name: name, KeyColumnIDs: cols, KeyDirections: orders,
			Kind: catalog.IndexBTree, State: catalog.IndexPublic}
	}
	tb := &catalog.Table{ID: 100, Name: "t", Columns: []catalog.Column{
		{ID: 1, Name: "a", Type: types.Int8}, {ID: 2, Name: "b", Type: types.Int8, Nullable: true},
		{ID: 3, Name: "c", Type: types.Text, Nullable: true}, {ID: 4, Name: "d", Type: types.Int4, Nullable: true},
	}, PrimaryIndex: pk("t_pkey", 1), GroupID: 100}
	tb.Indexes = []catalog.Index{
		sec(2, "t_b", []rowenc.ColumnID{2}, asc),
		sec(3, "t_c", []rowenc.ColumnID{3}, asc),
		sec(4, "t_bd", []rowenc.ColumnID{2, 4}, []rowenc.Order{rowenc.Desc, rowenc.Asc}),
		sec(5, "t_d_part", []rowenc.ColumnID{4}, asc),
		sec(6, "t_wo", []rowenc.ColumnID{4}, asc),
	}
	tb.Indexes[1].Unique = true
	tb.Indexes[2].StoreColumnIDs = []rowenc.ColumnID{3}
	tb.Indexes[3].Predicate = "b > 0"
	tb.Indexes[4].State = catalog.IndexWriteOnly

	u := &catalog.Table{ID: 101, Name: "u", Columns: []catalog.Column{
		{ID: 1, Name: "x", Type: types.Int8}, {ID: 2, Name: "y", Type: types.Int8, Nullable: true},
		{ID: 3, Name: "z", Type: types.Text, Nullable: true},
	}, PrimaryIndex: pk("u_pkey", 1), GroupID: 101}
	u.Indexes = []catalog.Index{sec(2, "u_y", []rowenc.ColumnID{2}, asc)}

	h := &catalog.Table{ID: 102, Name: "h", Columns: []catalog.Column{
		{ID: 1, Name: "k", Type: types.Int8}, {ID: 2, Name: "j", Type: types.Int8}, {ID: 3, Name: "v", Type: types.Int8, Nullable: true},
	}, PrimaryIndex: pk("h_pkey", 1, 2), GroupID: 102,
		Partitioning: catalog.Partitioning{Kind: catalog.PartitionHash, HashColumns: 1},
		RowFormat:    catalog.RowFormat{Packed: true, SchemaVersion: 1}}

	s := &catalog.Table{ID: 103, Name: "s", Columns: []catalog.Column{
		{ID: 1, Name: "id", Type: types.Int8}, {ID: 2, Name: "ts", Type: types.Int8, Nullable: true},
		{ID: 3, Name: "shard", Type: types.Int4, Hidden: true, ComputedExpr: "mod(ts, 8)::int4"},
	}, PrimaryIndex: pk("s_pkey", 1), GroupID: 103}
	s.Indexes = []catalog.Index{sec(2, "s_ts", []rowenc.ColumnID{3, 2}, []rowenc.Order{rowenc.Asc, rowenc.Asc})}
	s.Indexes[0].HashSharding = &catalog.HashSharding{Buckets: 8, ShardColumnID: 3}
	return map[string]*catalog.Table{"t": tb, "u": u, "h": h, "s": s}
}

// builder makes plan nodes by hand, numbering columns 1, 2, ... in the
// order scans are made, and building predicates from SQL text over the
// columns made so far (named "col" or "table.col").
type builder struct {
	t      *testing.T
	tables map[string]*catalog.Table
	next   sem.ColumnID
	names  map[string]plan.Column
}

func newBuilder(t *testing.T) *builder {
	return &builder{t: t, tables: fixtures(), next: 1, names: map[string]plan.Column{}}
}

// scan reads the named columns (all when none) of a table.
func (b *builder) scan(table string, cols ...string) *plan.Scan {
	tbl := b.tables[table]
	s := &plan.Scan{Table: tbl}
	if len(cols) == 0 {
		for _, c := range tbl.Columns {
			cols = append(cols, c.Name)
		}
	}
	for _, name := range cols {
		c := tbl.ColumnByName(name)
		if c == nil {
			b.t.Fatalf("no column %s.%s", table, name)
		}
		pc := plan.Column{ID: b.next, Name: name, T: c.Type, Table: tbl.ID, TableCol: c.ID}
		b.next++
		s.Cols = append(s.Cols, pc)
		s.TableCols = append(s.TableCols, c.ID)
		b.names[name] = pc
		b.names[table+"."+name] = pc
	}
	return s
}

func (b *builder) col(name string) plan.Column {
	c, ok := b.names[name]
	if !ok {
		b.t.Fatalf("no column %s", name)
	}
	return c
}

func (b *builder) Resolve(fields []string) (sem.ColumnID, *types.T, string, error) {
	c, ok := b.names[strings.Join(fields, ".")]
	if !ok {
		return 0, nil, "", sem.ErrUndefinedColumn(fields...)
	}
	return c.ID, c.T, strings.Join(fields, "."), nil
}

// expr builds SQL text over the columns made so far; $1 is an int8.
func (b *builder) expr(text string) sem.Expr {
	stmts, err := parser.Parse("SELECT " + text)
	if err != nil {
		b.t.Fatal(err)
	}
	node := stmts[0].AST.GetStmt().GetSelectStmt().GetTargetList()[0].GetResTarget().GetVal()
	e, err := sem.Build(sem.BuildContext{Scope: b, Params: sem.NewParamTypes(types.Int8)}, node, nil)
	if err != nil {
		b.t.Fatalf("%s: %v", text, err)
	}
	return sem.NormalizeBool(e)
}

func (b *builder) filter(in plan.Node, pred string) *plan.Filter {
	return &plan.Filter{Input: in, Pred: b.expr(pred)}
}

func (b *builder) join(kind plan.JoinKind, l, r plan.Node, on string) *plan.Join {
	j := &plan.Join{Kind: kind, Left: l, Right: r}
	if on != "" {
		j.On = b.expr(on)
	}
	return j
}

// project passes the named columns through.
func (b *builder) project(in plan.Node, cols ...string) *plan.Project {
	p := &plan.Project{Input: in}
	for _, name := range cols {
		c := b.col(name)
		p.Exprs = append(p.Exprs, &sem.ColRef{ID: c.ID, T: c.T, Name: name})
		p.Cols = append(p.Cols, c)
	}
	return p
}

// computed adds a computed output column named name.
func (b *builder) computed(p *plan.Project, name, text string) *plan.Project {
	e := b.expr(text)
	c := plan.Column{ID: b.next, Name: name, T: e.Type()}
	b.next++
	b.names[name] = c
	p.Exprs = append(p.Exprs, e)
	p.Cols = append(p.Cols, c)
	return p
}

// sort orders by "col [desc] [nulls first]" keys.
func (b *builder) sort(in plan.Node, keys ...string) *plan.Sort {
	return &plan.Sort{Input: in, Order: b.order(keys...)}
}

func (b *builder) order(keys ...string) []plan.Ordering {
	var out []plan.Ordering
	for _, k := range keys {
		f := strings.Fields(k)
		o := plan.Ordering{Col: b.col(f[0]).ID}
		rest := strings.Join(f[1:], " ")
		o.Desc = strings.HasPrefix(rest, "desc")
		// Postgres's defaults: NULLS LAST for ASC, NULLS FIRST for DESC.
		o.NullsFirst = o.Desc
		if strings.HasSuffix(rest, "nulls first") {
			o.NullsFirst = true
		} else if strings.HasSuffix(rest, "nulls last") {
			o.NullsFirst = false
		}
		out = append(out, o)
	}
	return out
}

func (b *builder) limit(in plan.Node, limit, offset string) *plan.Limit {
	l := &plan.Limit{Input: in}
	if limit != "" {
		l.Limit = b.expr(limit)
	}
	if offset != "" {
		l.Offset = b.expr(offset)
	}
	return l
}

func (b *builder) groupBy(in plan.Node, cols ...string) *plan.GroupBy {
	g := &plan.GroupBy{Input: in}
	for _, name := range cols {
		c := b.col(name)
		g.GroupCols = append(g.GroupCols, c.ID)
		g.Cols = append(g.Cols, c)
	}
	return g
}

// optimize runs Optimize over one tree and prints the result.
func optimize(t *testing.T, n plan.Node, costs Costs) string {
	t.Helper()
	p := &plan.Plan{Root: n}
	if err := OptimizeWith(context.Background(), p, costs); err != nil {
		t.Fatal(err)
	}
	return format(p.Root)
}

// format prints a plan compactly, one node a line, children indented:
//
//	scan t@t_b cols=(a,b) spans=[/1 - /1] buckets=(3) filter=(c = 'x') ordered reverse limit=5
//
// A span prints its bounds as /v/v..., "[" or "(" for an inclusive or
// exclusive start, "]" or ")" for the end, and "" for an unbounded side.
func format(n plan.Node) string {
	var sb strings.Builder
	var rec func(n plan.Node, depth int)
	rec = func(n plan.Node, depth int) {
		sb.WriteString(strings.Repeat("  ", depth))
		sb.WriteString(describe(n))
		sb.WriteString("\n")
		for _, c := range children(n) {
			rec(*c, depth+1)
		}
	}
	rec(n, 0)
	return sb.String()
}

func colNames(cols []plan.Column) string {
	var s []string
	for _, c := range cols {
		s = append(s, fmt.Sprintf("%s#%d", c.Name, c.ID))
	}
	return "(" + strings.Join(s, ",") + ")"
}

func ids(ids []sem.ColumnID) string {
	var s []string
	for _, id := range ids {
		s = append(s, fmt.Sprintf("#%d", id))
	}
	return "(" + strings.Join(s, ",") + ")"
}

func ords(os []plan.Ordering) string {
	var s []string
	for _, o := range os {
		x := fmt.Sprintf("#%d", o.Col)
		if o.Desc {
			x += " desc"
		}
		if o.NullsFirst != o.Desc {
			if o.NullsFirst {
				x += " nulls first"
			} else {
				x += " nulls last"
			}
		}
		s = append(s, x)
	}
	return "(" + strings.Join(s, ",") + ")"
}

func spanString(sp plan.Span) string {
	key := func(ds []types.Datum) string {
		var sb strings.Builder
		for _, d := range ds {
			sb.WriteString("/" + d.String())
		}
		return sb.String()
	}
	open, close := "[", "]"
	if sp.StartExclusive {
		open = "("
	}
	if !sp.EndInclusive {
		close = ")"
	}
	return open + key(sp.Start) + " - " + key(sp.End) + close
}

func describe(n plan.Node) string {
	var parts []string
	add := func(f string, args ...any) { parts = append(parts, fmt.Sprintf(f, args...)) }
	switch v := n.(type) {
	case *plan.Scan:
		idx := v.Table.PrimaryIndex.Name
		if v.Index != nil {
			idx = v.Index.Name
		}
		add("scan %s@%s cols=%s", v.Table.Name, idx, colNames(v.Cols))
		if v.Spans != nil {
			var ss []string
			for _, sp := range v.Spans {
				ss = append(ss, spanString(sp))
			}
			add("spans=%s", strings.Join(ss, " "))
		}
		if v.Buckets != nil {
			add("buckets=%v", v.Buckets)
		}
		if v.Filter != nil {
			add("filter=%s", v.Filter)
		}
		if v.Ordered {
			add("ordered")
		}
		if v.Reverse {
			add("reverse")
		}
		if v.HardLimit > 0 {
			add("limit=%d", v.HardLimit)
		}
		if v.Lock != plan.LockNone {
			add("lock=%d", v.Lock)
		}
	case *plan.IndexJoin:
		add("index-join %s keys=%s cols=%s", v.Table.Name, ids(v.KeyCols), colNames(v.Cols))
		if v.Filter != nil {
			add("filter=%s", v.Filter)
		}
		if v.Lock != plan.LockNone {
			add("lock=%d", v.Lock)
		}
	case *plan.LookupJoin:
		idx := v.Table.PrimaryIndex.Name
		if v.Index != nil {
			idx = v.Index.Name
		}
		add("lookup-join %s %s@%s keys=%s cols=%s", kindName(v.Kind), v.Table.Name, idx, ids(v.KeyCols), colNames(v.Cols))
		if v.On != nil {
			add("on=%s", v.On)
		}
	case *plan.VirtualScan:
		add("virtual-scan %s", colNames(v.Cols))
		if v.Filter != nil {
			add("filter=%s", v.Filter)
		}
	case *plan.Values:
		add("values %s rows=%d", colNames(v.Cols), len(v.Rows))
	case *plan.Filter:
		add("filter %s", v.Pred)
	case *plan.Project:
		var es []string
		for _, e := range v.Exprs {
			es = append(es, e.String())
		}
		add("project %s", strings.Join(es, ", "))
	case *plan.Join:
		if v.Merge {
			add("merge-join %s", kindName(v.Kind))
		} else {
			add("join %s", kindName(v.Kind))
		}
		if v.On != nil {
			add("on=%s", v.On)
		}
		if len(v.LeftEq) > 0 {
			add("eq=%s=%s", ids(v.LeftEq), ids(v.RightEq))
		}
	case *plan.GroupBy:
		add("group-by %s", ids(v.GroupCols))
		if v.Ordered {
			add("ordered")
		}
	case *plan.Sort:
		add("sort %s", ords(v.Order))
	case *plan.Limit:
		add("limit")
		if v.Limit != nil {
			add("%s", v.Limit)
		}
		if v.Offset != nil {
			add("offset %s", v.Offset)
		}
	case *plan.Distinct:
		add("distinct %s", ids(v.On))
	default:
		add("%T", n)
	}
	return strings.Join(parts, " ")
}

func kindName(k plan.JoinKind) string {
	return [...]string{"inner", "left", "right", "full", "semi", "anti"}[k]
}

type optCase struct {
	name  string
	build func(b *builder) plan.Node
	costs *Costs
	want  string
}

func runCases(t *testing.T, cases []optCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			costs := DefaultCosts
			if tc.costs != nil {
				costs = *tc.costs
			}
			p := &plan.Plan{Root: tc.build(b)}
			if err := OptimizeWith(context.Background(), p, costs); err != nil {
				t.Fatal(err)
			}
			got := format(p.Root)
			want := strings.TrimLeft(tc.want, "\n")
			want = dedent(want)
			if got != want {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
			// Optimize is idempotent: its output optimizes to itself.
			if err := OptimizeWith(context.Background(), p, costs); err != nil {
				t.Fatal(err)
			}
			if again := format(p.Root); again != got {
				t.Errorf("optimized again:\n%s\nfirst:\n%s", again, got)
			}
		})
	}
}

// dedent removes the common tab indentation of a raw-string expectation.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	var out []string
	for _, l := range lines {
		out = append(out, strings.TrimPrefix(strings.TrimRight(l, " \t"), "\t\t"))
	}
	res := strings.Join(out, "\n")
	return strings.TrimRight(res, "\n\t ") + "\n"
}
