package opt

import (
	"strconv"
	"testing"

	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/types"
)

// Spans, buckets and index selection (spans.go, scan.go).
func TestSpansAndIndexes(t *testing.T) {
	f := func(table, pred string, cols ...string) func(b *builder) plan.Node {
		return func(b *builder) plan.Node { return b.filter(b.scan(table, cols...), pred) }
	}
	runCases(t, []optCase{
		{name: "point and residual", build: f("t", "a = 1 AND b > 2"), want: `
		scan t@t_pkey cols=(a#1,b#2,c#3,d#4) spans=[/1 - /1] filter=(b > 2)`},
		{name: "IN list sorted, deduplicated, NULL dropped", build: f("t", "a IN (3, 1, 2, 1, NULL) AND c = 'q'"), want: `
		scan t@t_pkey cols=(a#1,b#2,c#3,d#4) spans=[/1 - /1] [/2 - /2] [/3 - /3] filter=(c = 'q'::text)`},
		{name: "range intersected", build: f("t", "a > 5 AND a <= 10 AND a >= 6"), want: `
		scan t@t_pkey cols=(a#1,b#2,c#3,d#4) spans=[/6 - /10]`},
		{name: "BETWEEN", build: f("t", "a BETWEEN 2 AND 4"), want: `
		scan t@t_pkey cols=(a#1,b#2,c#3,d#4) spans=[/2 - /4]`},
		{name: "IN intersected with a range", build: f("t", "a IN (1, 5, 9) AND a > 4"), want: `
		scan t@t_pkey cols=(a#1,b#2,c#3,d#4) spans=[/5 - /5] [/9 - /9]`},
		{name: "contradiction reads nothing", build: f("t", "a > 5 AND a < 3"), want: `
		values (a#1,b#2,c#3,d#4) rows=0`},
		{name: "WHERE false", build: f("t", "false"), want: `
		values (a#1,b#2,c#3,d#4) rows=0`},
		{name: "comparison with NULL is never true", build: f("t", "a = NULL::int8"), want: `
		values (a#1,b#2,c#3,d#4) rows=0`},
		{name: "constant on the left", build: f("t", "10 > a"), want: `
		scan t@t_pkey cols=(a#1,b#2,c#3,d#4) spans=[ - /10)`},
		{name: "params are not constants", build: f("t", "a = $1"), want: `
		scan t@t_pkey cols=(a#1,b#2,c#3,d#4) filter=(a = $1)`},
		{name: "OR is not a span", build: f("t", "a = 1 OR a = 2"), want: `
		scan t@t_pkey cols=(a#1,b#2,c#3,d#4) filter=((a = 1) OR (a = 2))`},
		{name: "= ANY (constant array) is an IN list", build: f("t", "a = ANY ('{4, 2, NULL}'::int8[])"), want: `
		scan t@t_pkey cols=(a#1,b#2,c#3,d#4) spans=[/2 - /2] [/4 - /4]`},
		{name: "= ALL is not", build: f("t", "a = ALL ('{4}'::int8[])"), want: `
		scan t@t_pkey cols=(a#1,b#2,c#3,d#4) filter=(a = ALL ('{4}'::bigint[]))`},
		{name: "NOT IN is not a span", build: f("t", "a NOT IN (1, 2)"), want: `
		scan t@t_pkey cols=(a#1,b#2,c#3,d#4) filter=(a <> ALL ('{1,2}'::bigint[]))`},
		{name: "cast column is not a span", build: f("t", "a = 1.5"), want: `
		scan t@t_pkey cols=(a#1,b#2,c#3,d#4) filter=((a)::numeric = 1.5)`},
		{name: "int constant out of the column's range", build: f("t", "d = 5000000000"), want: `
		scan t@t_pkey cols=(a#1,b#2,c#3,d#4) filter=(d = '5000000000'::bigint)`},
		{name: "covering secondary index", build: f("t", "b = 7", "a", "b"), want: `
		scan t@t_b cols=(a#1,b#2) spans=[/7 - /7]`},
		{name: "a locking read looks the rows up even through a covering index", build: func(b *builder) plan.Node {
			s := b.scan("t", "a", "b")
			s.Lock = plan.LockForUpdate
			return b.filter(s, "b = 7")
		}, want: `
		index-join t keys=(#1) cols=(a#1,b#2) lock=4
		  scan t@t_b cols=(a#1,b#2) spans=[/7 - /7]`},
		{name: "storing index covers all columns", build: f("t", "b = 7"), want: `
		scan t@t_bd cols=(a#1,b#2,c#3,d#4) spans=[/7 - /7]`},
		{name: "unique index with an index join", build: f("t", "c = 'z' AND d > 1 AND a < 100"), want: `
		index-join t keys=(#1) cols=(a#1,b#2,c#3,d#4) filter=(d > 1)
		  scan t@t_c cols=(a#1,c#3) spans=[/z - /z] filter=(a < 100)`},
		{name: "index join adds missing primary key columns", build: f("t", "c = 'z'", "c", "d"), want: `
		index-join t keys=(#4) cols=(c#1,d#2)
		  scan t@t_c cols=(c#1,a#4) spans=[/z - /z]`},
		{name: "descending key column: range bounds flip, NULLs first are skipped", build: f("t", "b > 3 AND d = 4"), want: `
		scan t@t_bd cols=(a#1,b#2,c#3,d#4) spans=(/NULL - /3) filter=(d = 4)`},
		{name: "descending key column: upper bound", build: f("t", "b <= 3"), want: `
		scan t@t_bd cols=(a#1,b#2,c#3,d#4) spans=[/3 - )`},
		{name: "descending then ascending prefix", build: f("t", "b IN (1, 2) AND d < 0"), want: `
		scan t@t_bd cols=(a#1,b#2,c#3,d#4) spans=[/2 - /2/0) [/1 - /1/0)`},
		{name: "IS NULL on a unique index is not one row", build: f("t", "c IS NULL AND b = 1", "a", "b", "c"), want: `
		scan t@t_bd cols=(a#1,b#2,c#3) spans=[/1 - /1] filter=(c IS NULL)`},
		{name: "IS NULL", build: f("t", "b IS NULL"), want: `
		scan t@t_bd cols=(a#1,b#2,c#3,d#4) spans=[/NULL - /NULL]`},
		{name: "ascending NULLS LAST: a lower bound stops before NULL", build: f("t", "b > 3", "a", "b"), want: `
		scan t@t_b cols=(a#1,b#2) spans=(/3 - /NULL)`},
		{name: "IS NOT NULL", build: f("t", "b IS NOT NULL", "a", "b"), want: `
		scan t@t_b cols=(a#1,b#2) spans=[ - /NULL)`},
		{name: "partial index used when the filter implies its predicate", build: f("t", "d = 4 AND b > 0 AND c LIKE 'x%'", "a", "b", "c", "d"), want: `
		index-join t keys=(#1) cols=(a#1,b#2,c#3,d#4) filter=(c ~~ 'x%'::text)
		  scan t@t_d_part cols=(a#1,d#4) spans=[/4 - /4]`},
		{name: "partial index not used otherwise; write-only index never", build: f("t", "d = 4"), want: `
		scan t@t_pkey cols=(a#1,b#2,c#3,d#4) filter=(d = 4)`},
		{name: "bucketed table: equality on the hash column fixes the bucket", build: f("h", "k = 1 AND j > 2"), want: `
		scan h@h_pkey cols=(k#1,j#2,v#3) spans=(/1/2 - /1] buckets=[` + bucketOf(t, 1) + `]`},
		{name: "bucketed table: no equality, every bucket", build: f("h", "k > 1"), want: `
		scan h@h_pkey cols=(k#1,j#2,v#3) spans=(/1 - )`},
		{name: "hash-sharded index: the shard comes from the computed expression", build: f("s", "ts = 13"), want: `
		scan s@s_ts cols=(id#1,ts#2,shard#3) spans=[/5/13 - /5/13]`},
		{name: "hash-sharded index: a range cannot fix the shard", build: f("s", "ts > 13"), want: `
		scan s@s_pkey cols=(id#1,ts#2,shard#3) filter=(ts > 13)`},
	})
}

// bucketOf computes h's bucket for k independently of the optimizer: the
// layout's Bucket on a full row.
func bucketOf(t *testing.T, k int64) string {
	l, err := fixtures()["h"].Layout()
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Bucket([]types.Datum{types.DInt(k), types.DInt(0), types.DNull})
	if err != nil {
		t.Fatal(err)
	}
	return itoa(int(b))
}

func itoa(i int) string { return strconv.Itoa(i) }
