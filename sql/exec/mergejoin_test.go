package exec

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/plan"
	"github.com/jackc/pgerrcode"
)

// TestMergeJoin runs merge joins over sorted inputs with repeated keys on
// both sides and NULL keys (last, as an ascending index holds them), and
// checks each kind against the hash join of the same inputs, which emits
// in the left side's order too (mergeJoinOp's invariant 1).
func TestMergeJoin(t *testing.T) {
	e := newEnv(t)
	l := func() *plan.Values {
		return e.vals("a, x", "1, 'l1'", "2, 'l2'", "2, 'l2b'", "4, 'l4'", "5, 'l5'", "NULL::int8, 'lnull'")
	}
	r := func() *plan.Values {
		return e.vals("b, y", "0, 'r0'", "2, 'r2'", "2, 'r2b'", "3, 'r3'", "5, 'r5'", "6, 'r6'", "NULL::int8, 'rnull'")
	}
	for _, tc := range []struct {
		name string
		kind plan.JoinKind
		on   string
		want string
	}{
		{"inner", plan.InnerJoin, "a = b", lines("2 l2 2 r2", "2 l2 2 r2b", "2 l2b 2 r2", "2 l2b 2 r2b", "5 l5 5 r5")},
		{"left", plan.LeftJoin, "a = b", lines("1 l1 NULL NULL", "2 l2 2 r2", "2 l2 2 r2b", "2 l2b 2 r2", "2 l2b 2 r2b", "4 l4 NULL NULL", "5 l5 5 r5", "NULL lnull NULL NULL")},
		{"semi", plan.SemiJoin, "a = b", lines("2 l2", "2 l2b", "5 l5")},
		{"anti", plan.AntiJoin, "a = b", lines("1 l1", "4 l4", "NULL lnull")},
		{"left residual", plan.LeftJoin, "a = b AND y <> 'r2'", lines("1 l1 NULL NULL", "2 l2 2 r2b", "2 l2b 2 r2b", "4 l4 NULL NULL", "5 l5 5 r5", "NULL lnull NULL NULL")},
		{"anti residual", plan.AntiJoin, "a = b AND y <> 'r5'", lines("1 l1", "4 l4", "5 l5", "NULL lnull")},
	} {
		for _, merge := range []bool{true, false} {
			lv, rv := l(), r()
			j := &plan.Join{Kind: tc.kind, Left: lv, Right: rv, On: e.expr(tc.on, append(lv.Cols, rv.Cols...)...),
				LeftEq: ids(lv.Cols[0]), RightEq: ids(rv.Cols[0]), Merge: merge}
			e.check(tc.name+map[bool]string{true: "/merge", false: "/hash"}[merge], j, tc.want)
		}
	}

	// A side whose keys go down is an internal error, not a wrong answer
	// (invariant 3).
	lv := e.vals("a", "2", "1")
	rv := e.vals("b", "1", "2")
	e.checkErr("left out of order", &plan.Join{Kind: plan.InnerJoin, Left: lv, Right: rv, On: e.expr("a = b", lv.Cols[0], rv.Cols[0]),
		LeftEq: ids(lv.Cols[0]), RightEq: ids(rv.Cols[0]), Merge: true}, pgerrcode.InternalError)
	lv = e.vals("a", "1", "3")
	rv = e.vals("b", "2", "1", "3")
	e.checkErr("right out of order", &plan.Join{Kind: plan.InnerJoin, Left: lv, Right: rv, On: e.expr("a = b", lv.Cols[0], rv.Cols[0]),
		LeftEq: ids(lv.Cols[0]), RightEq: ids(rv.Cols[0]), Merge: true}, pgerrcode.InternalError)
	// Full and right joins are not merge joins (sql/opt never plans them).
	lv, rv = e.vals("a", "1"), e.vals("b", "1")
	e.checkErr("full", &plan.Join{Kind: plan.FullJoin, Left: lv, Right: rv, On: e.expr("a = b", lv.Cols[0], rv.Cols[0]),
		LeftEq: ids(lv.Cols[0]), RightEq: ids(rv.Cols[0]), Merge: true}, pgerrcode.InternalError)
}

// TestMergeJoinRandom checks merge joins of random sorted inputs, with
// two key columns and many repeats, against hash joins of the same rows.
func TestMergeJoinRandom(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(19, 2026))
	sorted := func(n int) []string {
		var rows []string
		k1, k2 := 0, 0
		for i := range n {
			if rng.IntN(3) == 0 {
				k2 += rng.IntN(3)
			}
			if rng.IntN(5) == 0 {
				k1, k2 = k1+1+rng.IntN(2), 0
			}
			rows = append(rows, fmt.Sprintf("%d, %d, %d", k1, k2, i))
		}
		return rows
	}
	for round := range 20 {
		ls, rs := sorted(1+rng.IntN(40)), sorted(1+rng.IntN(40))
		for _, kind := range []plan.JoinKind{plan.InnerJoin, plan.LeftJoin, plan.SemiJoin, plan.AntiJoin} {
			var outs [2]string
			for i, merge := range []bool{true, false} {
				lv := e.vals("a1, a2, ai", ls...)
				rv := e.vals("b1, b2, bi", rs...)
				j := &plan.Join{Kind: kind, Left: lv, Right: rv,
					On:     e.expr("a1 = b1 AND a2 = b2 AND (ai + bi) % 3 <> 0", append(lv.Cols, rv.Cols...)...),
					LeftEq: ids(lv.Cols[0], lv.Cols[1]), RightEq: ids(rv.Cols[0], rv.Cols[1]), Merge: merge}
				outs[i] = e.mustRun(j)
			}
			if outs[0] != outs[1] {
				t.Fatalf("round %d kind %d: merge join\n%s\nhash join\n%s\nleft %s\nright %s", round, kind, outs[0], outs[1],
					strings.Join(ls, "; "), strings.Join(rs, "; "))
			}
		}
	}
}
