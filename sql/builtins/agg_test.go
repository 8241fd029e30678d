package builtins

import (
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/types"
)

// Expected values in this file come from PostgreSQL 15.18, e.g.
//
//	SELECT sum(x), avg(x), stddev(x) FROM (VALUES (1),(2),(3),(4),(NULL::int)) v(x)

// parseCol parses a column of Postgres text values ("NULL" is NULL).
func parseCol(t *testing.T, typ *types.T, vals string) []types.Datum {
	t.Helper()
	if vals == "" {
		return nil
	}
	var out []types.Datum
	for _, v := range strings.Split(vals, ",") {
		if v == "NULL" {
			out = append(out, types.DNull)
			continue
		}
		d, err := types.ParseDatum(nil, typ, v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// runAgg resolves name for args of type typ (plus extra constant args),
// feeds rows and formats the result.
func runAgg(t *testing.T, name string, typ *types.T, rows []types.Datum, extra ...types.Datum) string {
	t.Helper()
	argTypes := []*types.T{typ}
	for range extra {
		argTypes = append(argTypes, typ)
	}
	if name == "count(*)" {
		name, argTypes = "count", nil
	}
	r, err := ResolveFunc(name, argTypes)
	if err != nil {
		t.Fatal(err)
	}
	if r.Overload.Class != AggregateClass {
		t.Fatalf("%s is not an aggregate", r.Overload.Signature())
	}
	acc := r.Overload.NewAggregate(r.ArgTypes)
	ctx := testCtx()
	for _, row := range rows {
		args := append([]types.Datum{row}, extra...)
		if argTypes == nil {
			args = nil
		}
		if err := acc.Add(ctx, args); err != nil {
			return "ERROR: " + err.Error()
		}
	}
	d, err := acc.Result()
	if err != nil {
		return "ERROR: " + err.Error()
	}
	return types.Format(nil, r.Return, d)
}

func TestAggregates(t *testing.T) {
	ints := "1,2,3,4,NULL"
	floats := "1,2,3,4.5"
	nums := "1.5,2.25,NULL,3.125"
	for _, tc := range []struct {
		fn   string
		typ  *types.T
		vals string
		want string
	}{
		{"sum", types.Int4, ints, "10"},
		{"avg", types.Int4, ints, "2.5000000000000000"},
		{"stddev", types.Int4, ints, "1.2909944487358056"},
		{"variance", types.Int4, ints, "1.6666666666666667"},
		{"var_pop", types.Int4, ints, "1.2500000000000000"},
		{"stddev_pop", types.Int4, ints, "1.1180339887498948"},
		{"count(*)", types.Int4, ints, "5"},
		{"count", types.Int4, ints, "4"},
		{"min", types.Int4, ints, "1"},
		{"max", types.Int4, ints, "4"},
		{"bit_and", types.Int4, ints, "0"},
		{"bit_or", types.Int4, ints, "7"},
		{"sum", types.Float8, floats, "10.5"},
		{"avg", types.Float8, floats, "2.625"},
		{"stddev", types.Float8, floats, "1.4930394055974097"},
		{"variance", types.Float8, floats, "2.2291666666666665"},
		{"stddev_pop", types.Float8, floats, "1.2930100540985752"},
		{"sum", types.Float4, "0.1,0.2", "0.3"},
		{"sum", types.Numeric, nums, "6.875"},
		{"avg", types.Numeric, nums, "2.2916666666666667"},
		{"variance", types.Numeric, nums, "0.66145833333333333333"},
		{"stddev", types.Numeric, nums, "0.81330088733096395985"},
		{"variance", types.Int4, "1,1", "0"},
		{"variance", types.Int4, "7", "NULL"},
		{"sum", types.Int8, "9223372036854775807,1", "9223372036854775808"},
		{"avg", types.Int8, "9223372036854775807,1", "4611686018427387904"},
		{"sum", types.Int8, "9223372036854775807,1,-2", "9223372036854775806"},
		{"sum", types.Int8, "-9223372036854775808,-1,5", "-9223372036854775804"},
		{"sum", types.Int8, "-9223372036854775808,9223372036854775807", "-1"},
		{"avg", types.Int8, "-9223372036854775808,-9223372036854775808", "-9223372036854775808"},
		{"sum", types.Int2, "", "NULL"},
		{"count(*)", types.Int4, "", "0"},
		{"array_agg", types.Int4, "", "NULL"},
		{"array_agg", types.Text, "b,NULL,a,ccc", "{b,NULL,a,ccc}"},
		{"jsonb_agg", types.Text, "b,NULL,a,ccc", `["b", null, "a", "ccc"]`},
		{"min", types.Text, "b,NULL,a,ccc", "a"},
		{"max", types.Text, "b,NULL,a,ccc", "ccc"},
		{"bool_and", types.Bool, "t,f,NULL", "f"},
		{"bool_or", types.Bool, "t,f,NULL", "t"},
		{"every", types.Bool, "t,f,NULL", "f"},
		{"sum", types.Interval, "1 day,2 days 1 hour", "3 days 01:00:00"},
		{"avg", types.Interval, "1 day,2 days 1 hour", "1 day 12:30:00"},
	} {
		t.Run(tc.fn+"/"+tc.typ.Name(), func(t *testing.T) {
			if got := runAgg(t, tc.fn, tc.typ, parseCol(t, tc.typ, tc.vals)); got != tc.want {
				t.Errorf("%s(%s) over {%s} = %s, want %s", tc.fn, tc.typ.Name(), tc.vals, got, tc.want)
			}
		})
	}
}

func TestStringAggAndObjectAgg(t *testing.T) {
	rows := parseCol(t, types.Text, "b,NULL,a,ccc")
	if got := runAgg(t, "string_agg", types.Text, rows, types.DString(",")); got != "b,a,ccc" {
		t.Errorf("string_agg = %s", got)
	}
	r, err := ResolveFunc("jsonb_object_agg", []*types.T{types.Text, types.Int4})
	if err != nil {
		t.Fatal(err)
	}
	acc := r.Overload.NewAggregate(r.ArgTypes)
	for _, k := range []string{"b", "a", "ccc"} {
		if err := acc.Add(testCtx(), []types.Datum{types.DString(k), types.DInt(len(k))}); err != nil {
			t.Fatal(err)
		}
	}
	d, _ := acc.Result()
	if got := d.String(); got != `{"a": 1, "b": 1, "ccc": 3}` {
		t.Errorf("jsonb_object_agg = %s", got)
	}
	// Postgres: ERROR: field name must not be null.
	if err := acc.Add(testCtx(), []types.Datum{types.DNull, types.DInt(1)}); err == nil || err.Error() != "field name must not be null" {
		t.Errorf("NULL key: %v", err)
	}
}

// TestMergeMatchesSequential checks invariant 5's partial aggregation:
// splitting the input across two accumulators and merging gives what one
// accumulator over all rows gives.
func TestMergeMatchesSequential(t *testing.T) {
	// The second set's sums leave int64 and come back (decSumAgg's
	// int64 sum and its move to numeric, in Add and in Merge).
	for _, rows := range [][]types.Datum{
		parseCol(t, types.Int8, "5,NULL,-3,12,7,0,NULL,9"),
		parseCol(t, types.Int8, "9223372036854775807,5,NULL,-9223372036854775808,-9223372036854775808,9,9223372036854775807"),
		parseCol(t, types.Int8, "9223372036854775807,NULL,5"),
		parseCol(t, types.Int8, "-9223372036854775808,-1"),
	} {
		mergeMatchesSequential(t, rows)
	}
}

func mergeMatchesSequential(t *testing.T, rows []types.Datum) {
	for _, name := range []string{"count", "sum", "avg", "min", "max", "bit_and", "bit_or"} {
		r, err := ResolveFunc(name, []*types.T{types.Int8})
		if err != nil {
			t.Fatal(err)
		}
		for split := 0; split <= len(rows); split++ {
			whole, a, b := r.Overload.NewAggregate(r.ArgTypes), r.Overload.NewAggregate(r.ArgTypes), r.Overload.NewAggregate(r.ArgTypes)
			for i, row := range rows {
				_ = whole.Add(nil, []types.Datum{row})
				if i < split {
					_ = a.Add(nil, []types.Datum{row})
				} else {
					_ = b.Add(nil, []types.Datum{row})
				}
			}
			m, ok := a.(Merger)
			if !ok {
				t.Fatalf("%s does not merge", name)
			}
			if err := m.Merge(b); err != nil {
				t.Fatal(err)
			}
			want, _ := whole.Result()
			got, _ := a.Result()
			if types.Compare(want, got) != 0 {
				t.Errorf("%s split at %d: merged %s, sequential %s", name, split, got, want)
			}
		}
	}
}

// TestPartialMatchesSequential checks two-phase aggregation
// (agg_partial.go): the input cut into up to three fragments, each
// fragment's Parts computed, their results fed to Final, gives exactly
// (same text, so the same numeric scale) what one accumulator over every
// row gives, for every split and every aggregate PartialOf splits.
func TestPartialMatchesSequential(t *testing.T) {
	cases := []struct {
		name string
		typ  *types.T
		vals string
	}{
		{"count", types.Int4, "5,NULL,-3,12,7,0,NULL,9"},
		{"sum", types.Int4, "5,NULL,-3,12,7,0,NULL,9"},
		{"sum", types.Int2, "5,NULL,-3,12"},
		{"sum", types.Int8, "5,NULL,-3,12,7,0,NULL,9"},
		{"sum", types.Numeric, "1.50,NULL,-3.125,12,7.0"},
		{"avg", types.Int4, "5,NULL,-3,12,7,0,NULL,9"},
		{"avg", types.Int8, "5,NULL,-3,12,7,1,NULL,9"},
		{"avg", types.Numeric, "1.50,NULL,-3.125,12,7.0"},
		{"min", types.Text, "b,NULL,a,c"},
		{"max", types.Int8, "5,NULL,-3,12"},
		{"bool_and", types.Bool, "true,NULL,false,true"},
		{"bool_or", types.Bool, "false,NULL,false,true"},
		{"every", types.Bool, "true,NULL,true"},
		{"bit_and", types.Int4, "7,NULL,5,13"},
		{"bit_or", types.Int8, "1,NULL,4,16"},
	}
	for _, c := range cases {
		rows := parseCol(t, c.typ, c.vals)
		r, err := ResolveFunc(c.name, []*types.T{c.typ})
		if err != nil {
			t.Fatal(err)
		}
		p, ok := PartialOf(c.name, false, r)
		if !ok {
			t.Fatalf("%s(%s) does not split", c.name, c.typ.Name())
		}
		whole := r.Overload.NewAggregate(r.ArgTypes)
		for _, row := range rows {
			if err := whole.Add(nil, []types.Datum{row}); err != nil {
				t.Fatal(err)
			}
		}
		want, _ := whole.Result()
		for s1 := 0; s1 <= len(rows); s1++ {
			for s2 := s1; s2 <= len(rows); s2++ {
				final := p.Final.Overload.NewAggregate(p.Final.ArgTypes)
				for _, frag := range [][]types.Datum{rows[:s1], rows[s1:s2], rows[s2:]} {
					var state []types.Datum
					for _, part := range p.Parts {
						pr, err := ResolveFunc(part.Name, []*types.T{c.typ})
						if err != nil {
							t.Fatal(err)
						}
						acc := pr.Overload.NewAggregate(pr.ArgTypes)
						for _, row := range frag {
							_ = acc.Add(nil, []types.Datum{row})
						}
						d, _ := acc.Result()
						state = append(state, d)
					}
					if err := final.Add(nil, state); err != nil {
						t.Fatal(err)
					}
				}
				got, err := final.Result()
				if err != nil {
					t.Fatal(err)
				}
				if types.IsNull(want) != types.IsNull(got) || (!types.IsNull(want) && want.String() != got.String()) || p.Final.Return != r.Return {
					t.Errorf("%s(%s) split at %d,%d: two-phase %s, sequential %s", c.name, c.typ.Name(), s1, s2, got, want)
				}
			}
		}
	}
	// Float sums depend on their order: not split.
	r, _ := ResolveFunc("sum", []*types.T{types.Float8})
	if _, ok := PartialOf("sum", false, r); ok {
		t.Error("sum(float8) splits")
	}
	// count(*) over no rows in any fragment is 0, not NULL.
	r, _ = ResolveFunc("count", nil)
	p, ok := PartialOf("count", true, r)
	if !ok || len(p.Parts) != 1 || !p.Parts[0].Star {
		t.Fatalf("count(*): %+v %v", p, ok)
	}
	final := p.Final.Overload.NewAggregate(p.Final.ArgTypes)
	_ = final.Add(nil, []types.Datum{types.DInt(0)})
	if d, _ := final.Result(); d.String() != "0" {
		t.Errorf("count(*) of empty fragments = %s", d)
	}
}
