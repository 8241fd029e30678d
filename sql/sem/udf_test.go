package sem

import (
	"testing"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// TestMatchUserFunc: the overload a call picks, as PostgreSQL picks it in
// the common cases: exact types first, implicit casts next, an untyped
// literal preferring a string parameter, defaults and named arguments
// filling parameters, and a tie refused with 42725.
func TestMatchUserFunc(t *testing.T) {
	def := &pg_query.Node{Node: &pg_query.Node_AConst{AConst: &pg_query.A_Const{
		Val: &pg_query.A_Const_Ival{Ival: &pg_query.Integer{Ival: 1}}}}}
	fInt := &UserFunc{Name: "f", Params: []UserParam{{Name: "a", Type: types.Int4}, {Name: "b", Type: types.Int4, Default: def}}}
	fText := &UserFunc{Name: "f", Params: []UserParam{{Name: "a", Type: types.Text}, {Name: "b", Type: types.Text}}}
	fBig := &UserFunc{Name: "f", Params: []UserParam{{Name: "a", Type: types.Int8}, {Name: "b", Type: types.Int8}}}
	cands := []*UserFunc{fInt, fText, fBig}
	for _, tc := range []struct {
		name  string
		args  []*types.T
		names []string
		want  *UserFunc
		slots []int
		code  string
	}{
		{name: "exact int", args: []*types.T{types.Int4, types.Int4}, names: []string{"", ""}, want: fInt, slots: []int{0, 1}},
		{name: "exact bigint", args: []*types.T{types.Int8, types.Int8}, names: []string{"", ""}, want: fBig, slots: []int{0, 1}},
		{name: "int2 casts up, int4 nearest", args: []*types.T{types.Int2, types.Int4}, names: []string{"", ""}, want: fInt, slots: []int{0, 1}},
		{name: "default fills b", args: []*types.T{types.Int4}, names: []string{""}, want: fInt, slots: []int{0, -1}},
		{name: "named out of order", args: []*types.T{types.Text, types.Text}, names: []string{"b", "a"}, want: fText, slots: []int{1, 0}},
		{name: "unknown literals prefer text", args: []*types.T{types.Unknown, types.Unknown}, names: []string{"", ""}, want: fText, slots: []int{0, 1}},
		{name: "no match", args: []*types.T{types.Bool}, names: []string{""}},
		{name: "unknown name", args: []*types.T{types.Int4}, names: []string{"zz"}},
		{name: "too many", args: []*types.T{types.Int4, types.Int4, types.Int4}, names: []string{"", "", ""}},
		{name: "tie", args: []*types.T{types.Int2, types.Int2}, names: []string{"", ""}, code: pgerrcode.AmbiguousFunction},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, slots, err := matchUserFunc(cands, "f", tc.args, tc.names)
			if tc.code != "" {
				if pgerror.Code(err) != tc.code {
					t.Fatalf("err %v, want %s", err, tc.code)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v (%v), want %v", got, err, tc.want)
			}
			for i := range tc.slots {
				if slots[i] != tc.slots[i] {
					t.Fatalf("slots %v, want %v", slots, tc.slots)
				}
			}
		})
	}
}

// TestSubstituteParams: $n, a parameter's name and fname.name are
// replaced, inside subqueries too; other names and the body itself are
// left alone.
func TestSubstituteParams(t *testing.T) {
	parse := func(sql string) *pg_query.Node {
		tree, err := pg_query.Parse(sql)
		if err != nil {
			t.Fatal(err)
		}
		return tree.Stmts[0].Stmt
	}
	deparse := func(n *pg_query.Node) string {
		tree, _ := pg_query.Parse("SELECT")
		s, err := pg_query.Deparse(&pg_query.ParseResult{Version: tree.Version, Stmts: []*pg_query.RawStmt{{Stmt: n}}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	params := []UserParam{{Name: "x", Type: types.Int4}, {Type: types.Text}}
	args := []*pg_query.Node{
		parse("SELECT 10").GetSelectStmt().TargetList[0].GetResTarget().Val,
		parse("SELECT 'a'").GetSelectStmt().TargetList[0].GetResTarget().Val,
	}
	for _, tc := range []struct{ body, want string }{
		{"SELECT x + $1", "SELECT 10 + 10"},
		{"SELECT f.x, $2", "SELECT 10, 'a'"},
		{"SELECT y FROM t WHERE t.x = x AND EXISTS (SELECT 1 FROM u WHERE u.k = $2)",
			"SELECT y FROM t WHERE t.x = 10 AND EXISTS (SELECT 1 FROM u WHERE u.k = 'a')"},
		{"SELECT g.x FROM g", "SELECT g.x FROM g"},
	} {
		body := parse(tc.body)
		before := deparse(body)
		got := deparse(SubstituteParams(body, "f", params, args))
		if got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.body, got, tc.want)
		}
		if deparse(body) != before {
			t.Errorf("%s: the body itself was changed", tc.body)
		}
	}
}
