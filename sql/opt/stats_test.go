package opt

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/stats"
	"github.com/cairn-db/cairn/sql/types"
)

// TestStatsPlans runs testdata/stats: the same plans optimized without and
// with table statistics (made up by the file), over the fixtures of
// helpers_test.go.
//
//	stats table=t rows=N
//	col distinct=D [nulls=F] [mcv=v:f,v:f] [hist=v,v,...]
//	----
//
// declares a table's statistics (replacing earlier ones);
//
//	plan [stats]
//	scan t [cols...]          pushes a scan
//	filter <predicate>        wraps the top node
//	join inner|left|semi <on> pops right then left, pushes their join
//	group <cols...>           wraps the top node in a GroupBy
//	----
//
// optimizes the plan (with the declared statistics when "stats" is
// given) and prints it.
func TestStatsPlans(t *testing.T) {
	declared := map[string]*stats.Table{}
	fix := fixtures()
	datadriven.RunTest(t, "testdata/stats", func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "stats":
			var name string
			var rows int
			d.ScanArgs(t, "table", &name)
			d.ScanArgs(t, "rows", &rows)
			tbl := fix[name]
			ts := &stats.Table{TableID: tbl.ID, RowCount: float64(rows)}
			for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
				if line == "" {
					continue
				}
				ts.Columns = append(ts.Columns, parseColStats(t, tbl, line))
			}
			declared[name] = ts
			return "ok\n"
		case "plan":
			b := newBuilder(t)
			var stack []plan.Node
			pop := func() plan.Node {
				n := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				return n
			}
			for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
				verb, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
				switch verb {
				case "scan":
					f := strings.Fields(rest)
					stack = append(stack, b.scan(f[0], f[1:]...))
				case "filter":
					stack = append(stack, b.filter(pop(), rest))
				case "join":
					kindName, on, _ := strings.Cut(rest, " ")
					kind := map[string]plan.JoinKind{"inner": plan.InnerJoin, "left": plan.LeftJoin, "semi": plan.SemiJoin}[kindName]
					r, l := pop(), pop()
					stack = append(stack, b.join(kind, l, r, on))
				case "group":
					stack = append(stack, b.groupBy(pop(), strings.Fields(rest)...))
				default:
					t.Fatalf("unknown plan verb %q", verb)
				}
			}
			p := &plan.Plan{Root: stack[0]}
			var src Statistics
			if d.HasArg("stats") {
				src = func(tbl *catalog.Table) *stats.Table {
					for name, ts := range declared {
						if fix[name].ID == tbl.ID {
							return ts
						}
					}
					return nil
				}
			}
			if err := OptimizeStats(context.Background(), p, DefaultCosts, src, DefaultJoinLimits); err != nil {
				return "error: " + err.Error() + "\n"
			}
			return format(p.Root)
		}
		t.Fatalf("unknown command %s", d.Cmd)
		return ""
	})
}

// parseColStats reads "col distinct=D [nulls=F] [mcv=v:f,...] [hist=v,...]".
func parseColStats(t *testing.T, tbl *catalog.Table, line string) *stats.Column {
	f := strings.Fields(line)
	col := tbl.ColumnByName(f[0])
	if col == nil {
		t.Fatalf("no column %s", f[0])
	}
	cs := &stats.Column{ID: col.ID, Type: col.Type}
	parse := func(s string) types.Datum {
		dd, err := types.ParseDatum(&types.Context{}, col.Type, s)
		if err != nil {
			t.Fatal(err)
		}
		return dd
	}
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "distinct":
			cs.Distinct = num(v)
		case "nulls":
			cs.NullFrac = num(v)
		case "mcv":
			for _, e := range strings.Split(v, ",") {
				val, freq, _ := strings.Cut(e, ":")
				cs.MCV = append(cs.MCV, parse(val))
				cs.MCVFreq = append(cs.MCVFreq, num(freq))
			}
		case "hist":
			for _, e := range strings.Split(v, ",") {
				cs.Histogram = append(cs.Histogram, parse(e))
			}
		default:
			t.Fatalf("unknown column statistic %q", k)
		}
	}
	return cs
}
