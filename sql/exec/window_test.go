package exec

import (
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// TestWindowStageGroups: functions with the same PARTITION BY and ORDER BY
// share one sorted stage (wherever they stand in the select list), the
// stage of the first function runs last (its order is the output's),
// and keys differing in a column, a direction or a volatile call do not
// share.
func TestWindowStageGroups(t *testing.T) {
	col := func(id sem.ColumnID) sem.Expr { return &sem.ColRef{ID: id, T: types.Int8, Name: "g"} }
	random, err := builtins.ResolveFunc("random", nil)
	if err != nil {
		t.Fatal(err)
	}
	rnd := &sem.FuncCall{Fn: random}
	type w struct {
		part []sem.Expr
		ord  []plan.SortExpr
	}
	byG := w{ord: []plan.SortExpr{{Expr: col(1), Desc: true}}}
	byOtherG := w{ord: []plan.SortExpr{{Expr: col(2), Desc: true}}} // same name, another column
	byGAsc := w{ord: []plan.SortExpr{{Expr: col(1)}}}
	partG := w{part: []sem.Expr{col(1)}, ord: []plan.SortExpr{{Expr: col(1), Desc: true}}}
	byRandom := w{ord: []plan.SortExpr{{Expr: rnd}}}
	cases := []struct {
		ws   []w
		want string
	}{
		{[]w{byG, byG}, "[[1 0]]"},
		{[]w{byG, byGAsc, byG}, "[[1] [2 0]]"},
		{[]w{byGAsc, byG, byGAsc, byG}, "[[3 1] [2 0]]"},
		{[]w{byG, byOtherG, partG}, "[[2] [1] [0]]"},
		{[]w{byRandom, byRandom}, "[[1] [0]]"},
	}
	for _, c := range cases {
		o := &windowOp{}
		for _, x := range c.ws {
			o.specs = append(o.specs, &windowSpec{f: &plan.WindowFunc{PartitionBy: x.part, OrderBy: x.ord}})
		}
		if got := fmt.Sprint(o.stageGroups()); got != c.want {
			t.Errorf("%d functions: stages %s, want %s", len(c.ws), got, c.want)
		}
	}
}
