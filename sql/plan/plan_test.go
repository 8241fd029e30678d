package plan_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/opt"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// fakeCatalog is an in-memory plan.Catalog over hand-built descriptors
// shaped as CREATE TABLE would make them.
type fakeCatalog struct {
	rels map[string]plan.Relation // "schema.name"
}

func (c *fakeCatalog) LookupRelation(_ context.Context, schema, name string) (plan.Relation, error) {
	if schema == "" {
		for _, s := range []string{"pg_catalog", "public"} {
			if r, ok := c.rels[s+"."+name]; ok {
				return r, nil
			}
		}
		return plan.Relation{}, pgerror.New(pgerrcode.UndefinedTable, "relation %q does not exist", name)
	}
	if schema != "public" && schema != "pg_catalog" {
		return plan.Relation{}, pgerror.New(pgerrcode.InvalidSchemaName, "schema %q does not exist", schema)
	}
	if r, ok := c.rels[schema+"."+name]; ok {
		return r, nil
	}
	return plan.Relation{}, pgerror.New(pgerrcode.UndefinedTable, "relation %q does not exist", schema+"."+name)
}

func (c *fakeCatalog) TableByID(_ context.Context, id catalog.ID) (*catalog.Table, error) {
	for _, r := range c.rels {
		if r.Table != nil && r.Table.ID == id {
			return r.Table, nil
		}
	}
	return nil, fmt.Errorf("no table %d", id)
}

type vtable struct {
	name string
	cols []plan.VirtualColumn
}

func (v *vtable) Schema() string                                                  { return "pg_catalog" }
func (v *vtable) Name() string                                                    { return v.name }
func (v *vtable) OID() uint32                                                     { return 1259 }
func (v *vtable) Columns() []plan.VirtualColumn                                   { return v.cols }
func (v *vtable) Rows(context.Context, *plan.VirtualEnv) ([][]types.Datum, error) { return nil, nil }

func pk(name string, cols ...rowenc.ColumnID) catalog.Index {
	dirs := make([]rowenc.Order, len(cols))
	return catalog.Index{ID: catalog.PrimaryIndexID, Name: name, Unique: true, KeyColumnIDs: cols, KeyDirections: dirs}
}

func testCatalog(t *testing.T) *fakeCatalog {
	vc3, _ := types.MakeVarChar(3)
	tables := []*catalog.Table{
		// CREATE TABLE kv (k int8 PRIMARY KEY, v text DEFAULT 'dflt', n int4)
		{ID: 100, Name: "kv", Columns: []catalog.Column{
			{ID: 1, Name: "k", Type: types.Int8},
			{ID: 2, Name: "v", Type: types.Text, Nullable: true, DefaultExpr: "'dflt'::text"},
			{ID: 3, Name: "n", Type: types.Int4, Nullable: true},
		}, PrimaryIndex: pk("kv_pkey", 1), NextColumnID: 4, NextIndexID: 2},
		// CREATE TABLE t (a int4 PRIMARY KEY, b int4 UNIQUE CHECK (b > 0),
		//   c text, d varchar(3))
		{ID: 101, Name: "t", Columns: []catalog.Column{
			{ID: 1, Name: "a", Type: types.Int4},
			{ID: 2, Name: "b", Type: types.Int4, Nullable: true},
			{ID: 3, Name: "c", Type: types.Text, Nullable: true},
			{ID: 4, Name: "d", Type: vc3, Nullable: true},
		}, PrimaryIndex: pk("t_pkey", 1), Indexes: []catalog.Index{
			{ID: 2, Name: "t_b_key", Unique: true, KeyColumnIDs: []rowenc.ColumnID{2}, KeyDirections: []rowenc.Order{rowenc.Asc}, State: catalog.IndexPublic},
		}, Checks: []catalog.Check{{Name: "t_b_check", Expr: "b > 0"}},
			Uniques: []catalog.UniqueConstraint{{Name: "t_b_key", IndexID: 2}}, NextColumnID: 5, NextIndexID: 3},
		// CREATE TABLE u (x int4, y text): no primary key, hidden rowid.
		{ID: 102, Name: "u", Columns: []catalog.Column{
			{ID: 1, Name: "x", Type: types.Int4, Nullable: true},
			{ID: 2, Name: "y", Type: types.Text, Nullable: true},
			{ID: 3, Name: "rowid", Type: types.Int8, Hidden: true, DefaultExpr: "unique_rowid()"},
		}, PrimaryIndex: pk("u_pkey", 3), NextColumnID: 4, NextIndexID: 2},
		// CREATE TABLE g (a int4 PRIMARY KEY, b int4 GENERATED ALWAYS AS (a * 2) STORED)
		{ID: 103, Name: "g", Columns: []catalog.Column{
			{ID: 1, Name: "a", Type: types.Int4},
			{ID: 2, Name: "b", Type: types.Int4, Nullable: true, ComputedExpr: "a * 2", Stored: true},
		}, PrimaryIndex: pk("g_pkey", 1), NextColumnID: 3, NextIndexID: 2},
	}
	c := &fakeCatalog{rels: map[string]plan.Relation{}}
	for _, tb := range tables {
		tb.DatabaseID, tb.SchemaID = catalog.PostgresDatabaseID, catalog.PublicSchemaID
		tb.RowFormat = catalog.RowFormat{Packed: true, SchemaVersion: 1}
		tb.GroupID = uint64(tb.ID)
		tb.Partitioning = catalog.Partitioning{Kind: catalog.PartitionRange}
		tb.PrimaryIndex.KeyDirections = make([]rowenc.Order, len(tb.PrimaryIndex.KeyColumnIDs))
		tb.PrimaryIndex.State = catalog.IndexPublic
		tb.PrimaryIndex.Kind = catalog.IndexBTree
		for i := range tb.Indexes {
			tb.Indexes[i].Kind = catalog.IndexBTree
			tb.Indexes[i].Placement = catalog.IndexLocal
		}
		if err := tb.Validate(); err != nil {
			t.Fatalf("fixture %s: %v", tb.Name, err)
		}
		c.rels["public."+tb.Name] = plan.Relation{Table: tb}
	}
	c.rels["public.kvpos"] = plan.Relation{View: &catalog.View{ID: 200, Name: "kvpos",
		Query:   "SELECT k, v FROM kv WHERE n > 0",
		Columns: []catalog.ViewColumn{{Name: "k", Type: types.Int8}, {Name: "v", Type: types.Text}}}}
	c.rels["public.kvagg"] = plan.Relation{View: &catalog.View{ID: 201, Name: "kvagg",
		Query:   "SELECT v, count(*) FROM kv GROUP BY v",
		Columns: []catalog.ViewColumn{{Name: "v", Type: types.Text}, {Name: "count", Type: types.Int8}}}}
	c.rels["public.kvexpr"] = plan.Relation{View: &catalog.View{ID: 202, Name: "kvexpr",
		Query:   "SELECT k AS key, v || 'x' AS vx FROM kv",
		Columns: []catalog.ViewColumn{{Name: "key", Type: types.Int8}, {Name: "vx", Type: types.Text}}}}
	c.rels["public.kvchk"] = plan.Relation{View: &catalog.View{ID: 203, Name: "kvchk",
		Query: "SELECT * FROM kvpos WHERE k < 10", CheckOption: "cascaded",
		Columns: []catalog.ViewColumn{{Name: "k", Type: types.Int8}, {Name: "v", Type: types.Text}}}}
	c.rels["public.kvtwice"] = plan.Relation{View: &catalog.View{ID: 204, Name: "kvtwice",
		Query:   "SELECT k AS a, k AS b FROM kv",
		Columns: []catalog.ViewColumn{{Name: "a", Type: types.Int8}, {Name: "b", Type: types.Int8}}}}
	c.rels["public.kvsub"] = plan.Relation{View: &catalog.View{ID: 205, Name: "kvsub",
		Query: "SELECT k, v FROM kv WHERE EXISTS (SELECT 1 FROM t WHERE t.a = kv.n)", CheckOption: "local",
		Columns: []catalog.ViewColumn{{Name: "k", Type: types.Int8}, {Name: "v", Type: types.Text}}}}
	c.rels["pg_catalog.pg_class"] = plan.Relation{Virtual: &vtable{name: "pg_class", cols: []plan.VirtualColumn{
		{Name: "oid", T: types.Oid}, {Name: "relname", T: types.Text}}}}
	return c
}

func build(t *testing.T, cat plan.Catalog, sql string, params ...*types.T) (*plan.Plan, error) {
	stmts, err := parser.Parse(sql)
	if err != nil {
		return nil, err
	}
	if len(stmts) != 1 {
		return nil, fmt.Errorf("want one statement, got %d", len(stmts))
	}
	env := &plan.Env{Catalog: cat, Types: &types.Context{}, Params: sem.NewParamTypes(params...)}
	return plan.Build(context.Background(), env, &stmts[0])
}

func formatErr(err error) string {
	e := pgerror.Flatten(err)
	s := fmt.Sprintf("ERROR %s: %s", e.Code, e.Message)
	if p := sem.ErrorPosition(err); p != 0 {
		s += fmt.Sprintf(" (at %d)", p)
	}
	return s + "\n"
}

func TestDataDriven(t *testing.T) {
	cat := withVirtual{testCatalog(t)}
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var params []*types.T
			for _, a := range d.CmdArgs {
				if a.Key == "params" {
					for _, v := range a.Vals {
						pt, err := types.LookupName(v)
						if err != nil {
							t.Fatalf("param type %q: %v", v, err)
						}
						params = append(params, pt)
					}
				}
			}
			p, err := build(t, cat, d.Input, params...)
			if err != nil {
				return formatErr(err)
			}
			var sb strings.Builder
			if d.Cmd == "opt" {
				// What EXPLAIN shows once the optimizer has chosen access
				// paths and join methods (Index Scan, Lookup Join, ...).
				if err := opt.Optimize(context.Background(), p); err != nil {
					return formatErr(err)
				}
				d.Cmd = "build"
			}
			switch d.Cmd {
			case "build":
				for _, l := range plan.Explain(p, nil) {
					sb.WriteString(l + "\n")
				}
				fallthrough
			case "columns":
				var cols []string
				for _, c := range p.Columns {
					cols = append(cols, c.Name+" "+c.T.Name())
				}
				fmt.Fprintf(&sb, "%s: [%s]", p.Tag, strings.Join(cols, ", "))
				if len(p.Params) > 0 {
					var ps []string
					for _, pt := range p.Params {
						ps = append(ps, pt.Name())
					}
					fmt.Fprintf(&sb, " params: [%s]", strings.Join(ps, ", "))
				}
				if !p.ReadOnly {
					sb.WriteString(" writes")
				}
				sb.WriteString("\n")
			case "tree":
				sb.WriteString(dumpTree(p))
			default:
				t.Fatalf("unknown command %s", d.Cmd)
			}
			return sb.String()
		})
	})
}

// dumpTree prints the plan nodes with their column IDs, for checking the
// fields EXPLAIN does not show.
func dumpTree(p *plan.Plan) string {
	var sb strings.Builder
	var walk func(n plan.Node, depth int)
	cols := func(cs []plan.Column) string {
		var out []string
		for _, c := range cs {
			s := fmt.Sprintf("%s#%d", c.Name, c.ID)
			if c.Hidden {
				s += "(hidden)"
			}
			out = append(out, s)
		}
		return strings.Join(out, " ")
	}
	ids := func(xs []sem.ColumnID) string { return fmt.Sprint(xs) }
	walk = func(n plan.Node, depth int) {
		ind := strings.Repeat("  ", depth)
		switch v := n.(type) {
		case *plan.Scan:
			fmt.Fprintf(&sb, "%sscan %s lock=%d [%s]\n", ind, v.Table.Name, v.Lock, cols(v.Cols))
		case *plan.VirtualScan:
			fmt.Fprintf(&sb, "%svirtual %s [%s]\n", ind, v.Table.Name(), cols(v.Cols))
		case *plan.Values:
			fmt.Fprintf(&sb, "%svalues [%s]\n", ind, cols(v.Cols))
			for _, r := range v.Rows {
				var es []string
				for _, e := range r {
					es = append(es, e.String())
				}
				fmt.Fprintf(&sb, "%s  (%s)\n", ind, strings.Join(es, ", "))
			}
		case *plan.Filter:
			fmt.Fprintf(&sb, "%sfilter %s\n", ind, v.Pred)
			walk(v.Input, depth+1)
		case *plan.Project:
			var es []string
			for i, e := range v.Exprs {
				es = append(es, fmt.Sprintf("%s#%d=%s", v.Cols[i].Name, v.Cols[i].ID, e))
			}
			fmt.Fprintf(&sb, "%sproject %s\n", ind, strings.Join(es, ", "))
			walk(v.Input, depth+1)
		case *plan.Join:
			fmt.Fprintf(&sb, "%sjoin kind=%d lateral=%v on=%v eq=%s=%s\n", ind, v.Kind, v.Lateral, v.On, ids(v.LeftEq), ids(v.RightEq))
			walk(v.Left, depth+1)
			walk(v.Right, depth+1)
		case *plan.GroupBy:
			var as []string
			for _, a := range v.Aggs {
				s := a.Name + "("
				var args []string
				for _, x := range a.Args {
					args = append(args, x.String())
				}
				s += strings.Join(args, ", ")
				if len(a.OrderBy) > 0 {
					s += " ORDER BY " + a.OrderBy[0].Expr.String()
				}
				s += ")"
				if a.Distinct {
					s = "DISTINCT " + s
				}
				if a.Filter != nil {
					s += " FILTER " + a.Filter.String()
				}
				as = append(as, s)
			}
			fmt.Fprintf(&sb, "%sgroupby keys=%s aggs=[%s] -> [%s]\n", ind, ids(v.GroupCols), strings.Join(as, "; "), cols(v.Cols))
			walk(v.Input, depth+1)
		case *plan.Window:
			for _, f := range v.Funcs {
				var part, ord []string
				for _, e := range f.PartitionBy {
					part = append(part, e.String())
				}
				for _, o := range f.OrderBy {
					ord = append(ord, o.Expr.String())
				}
				fmt.Fprintf(&sb, "%swindow %s partition=%v order=%v frame=%+v\n", ind, f.Name, part, ord, f.Frame)
			}
			walk(v.Input, depth+1)
		case *plan.Sort:
			fmt.Fprintf(&sb, "%ssort %+v\n", ind, v.Order)
			walk(v.Input, depth+1)
		case *plan.Limit:
			fmt.Fprintf(&sb, "%slimit %v offset %v ties=%v\n", ind, v.Limit, v.Offset, v.WithTies)
			walk(v.Input, depth+1)
		case *plan.Distinct:
			fmt.Fprintf(&sb, "%sdistinct on=%v\n", ind, v.On)
			walk(v.Input, depth+1)
		case *plan.SetOp:
			fmt.Fprintf(&sb, "%ssetop kind=%d all=%v [%s]\n", ind, v.Kind, v.All, cols(v.Cols))
			walk(v.Left, depth+1)
			walk(v.Right, depth+1)
		case *plan.RecursiveCTE:
			fmt.Fprintf(&sb, "%srecursive id=%d all=%v [%s]\n", ind, v.ID, v.UnionAll, cols(v.Cols))
			walk(v.Init, depth+1)
			walk(v.Recursive, depth+1)
		case *plan.WorkTable:
			fmt.Fprintf(&sb, "%sworktable id=%d [%s]\n", ind, v.ID, cols(v.Cols))
		case *plan.CTEScan:
			fmt.Fprintf(&sb, "%sctescan id=%d [%s]\n", ind, v.ID, cols(v.Cols))
		case *plan.ProjectSet:
			for _, f := range v.Funcs {
				fmt.Fprintf(&sb, "%sprojectset %s [%s]\n", ind, f.Call, cols(f.Cols))
			}
			walk(v.Input, depth+1)
		case *plan.Max1Row:
			fmt.Fprintf(&sb, "%smax1row\n", ind)
			walk(v.Input, depth+1)
		case *plan.Insert:
			fmt.Fprintf(&sb, "%sinsert %s cols=%v tablecols=%s\n", ind, v.Table.Name, v.InsertCols, ids(v.TableCols))
			for i, e := range v.Defaults {
				if e != nil {
					fmt.Fprintf(&sb, "%s  default %d: %s\n", ind, i, e)
				}
			}
			for i, e := range v.Computed {
				if e != nil {
					fmt.Fprintf(&sb, "%s  computed %d: %s\n", ind, i, e)
				}
			}
			for _, c := range v.Checks {
				if c.View != "" {
					fmt.Fprintf(&sb, "%s  check option of view %s: %s\n", ind, c.View, c.Expr)
					continue
				}
				fmt.Fprintf(&sb, "%s  check %s: %s\n", ind, c.Name, c.Expr)
			}
			if oc := v.OnConflict; oc != nil {
				arb := "<any>"
				if oc.Arbiter != nil {
					arb = oc.Arbiter.Name
				}
				fmt.Fprintf(&sb, "%s  on conflict arbiter=%s nothing=%v existing=%s excluded=%s\n", ind, arb, oc.DoNothing, ids(oc.ExistingCols), ids(oc.ExcludedCols))
				for i, e := range oc.Set {
					fmt.Fprintf(&sb, "%s    set %d = %s\n", ind, oc.SetCols[i], e)
				}
				if oc.Where != nil {
					fmt.Fprintf(&sb, "%s    where %s\n", ind, oc.Where)
				}
			}
			returning(&sb, ind, v.Returning)
			walk(v.Input, depth+1)
		case *plan.Update:
			fmt.Fprintf(&sb, "%supdate %s fetch=%s set=%v new=%s tablecols=%s\n", ind, v.Table.Name, ids(v.FetchCols), v.SetCols, ids(v.NewCols), ids(v.TableCols))
			for i, e := range v.Computed {
				if e != nil {
					fmt.Fprintf(&sb, "%s  computed %d: %s\n", ind, i, e)
				}
			}
			for _, c := range v.Checks {
				if c.View != "" {
					fmt.Fprintf(&sb, "%s  check option of view %s: %s\n", ind, c.View, c.Expr)
					continue
				}
				fmt.Fprintf(&sb, "%s  check %s: %s\n", ind, c.Name, c.Expr)
			}
			returning(&sb, ind, v.Returning)
			walk(v.Input, depth+1)
		case *plan.Delete:
			fmt.Fprintf(&sb, "%sdelete %s fetch=%s\n", ind, v.Table.Name, ids(v.FetchCols))
			returning(&sb, ind, v.Returning)
			walk(v.Input, depth+1)
		default:
			fmt.Fprintf(&sb, "%s%T\n", ind, n)
		}
	}
	walk(p.Root, 0)
	for _, sq := range p.Subqueries {
		fmt.Fprintf(&sb, "subquery %d kind=%d outer=%v\n", sq.ID, sq.Kind, sq.Outer)
		walk(sq.Root, 1)
	}
	for i, c := range p.CTEs {
		fmt.Fprintf(&sb, "cte %d\n", i)
		walk(c, 1)
	}
	return sb.String()
}

func returning(sb *strings.Builder, ind string, r *plan.Returning) {
	if r == nil {
		return
	}
	var es []string
	for i, e := range r.Exprs {
		es = append(es, fmt.Sprintf("%s#%d=%s", r.Cols[i].Name, r.Cols[i].ID, e))
	}
	fmt.Fprintf(sb, "%s  returning %s\n", ind, strings.Join(es, ", "))
}
