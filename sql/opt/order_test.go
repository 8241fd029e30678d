package opt

import (
	"testing"

	"github.com/cairn-db/cairn/sql/plan"
)

// Orderings, limits and streaming aggregation (order.go).
func TestOrderings(t *testing.T) {
	runCases(t, []optCase{{
		name:  "primary key order drops the sort",
		build: func(b *builder) plan.Node { return b.sort(b.scan("u"), "x") },
		want: `
		scan u@u_pkey cols=(x#1,y#2,z#3) ordered`,
	}, {
		name:  "reversed order reads backwards; NOT NULL columns ignore NULLS placement",
		build: func(b *builder) plan.Node { return b.sort(b.scan("u"), "x desc nulls last") },
		want: `
		scan u@u_pkey cols=(x#1,y#2,z#3) ordered reverse`,
	}, {
		name:  "order past the whole primary key is free",
		build: func(b *builder) plan.Node { return b.sort(b.scan("u"), "x", "z desc") },
		want: `
		scan u@u_pkey cols=(x#1,y#2,z#3) ordered`,
	}, {
		name:  "nullable column: NULLS placement must match",
		build: func(b *builder) plan.Node { return b.sort(b.scan("t", "a", "b"), "b desc nulls last") },
		want: `
		sort (#2 desc nulls last)
		  scan t@t_pkey cols=(a#1,b#2)`,
	}, {
		name: "secondary index order under a filter and a project",
		build: func(b *builder) plan.Node {
			return b.sort(b.project(b.filter(b.scan("t", "a", "b"), "b > 1"), "b"), "b")
		},
		want: `
		project b
		  scan t@t_b cols=(b#2) spans=(/1 - /NULL) ordered`,
	}, {
		name: "descending index read backwards gives ascending order",
		build: func(b *builder) plan.Node {
			return b.sort(b.filter(b.scan("t"), "b > 1"), "b", "d desc")
		},
		want: `
		scan t@t_bd cols=(a#1,b#2,c#3,d#4) spans=(/NULL - /1) ordered reverse`,
	}, {
		name: "a secondary index's order continues with the primary key",
		build: func(b *builder) plan.Node {
			return b.sort(b.filter(b.scan("t"), "b > 1"), "b desc", "d", "a", "c")
		},
		want: `
		scan t@t_bd cols=(a#1,b#2,c#3,d#4) spans=(/NULL - /1) ordered`,
	}, {
		name: "but not with another column",
		build: func(b *builder) plan.Node {
			return b.sort(b.filter(b.scan("t"), "b > 1"), "b desc", "d", "c")
		},
		want: `
		sort (#2 desc,#4,#3)
		  scan t@t_bd cols=(a#1,b#2,c#3,d#4) spans=(/NULL - /1)`,
	}, {
		name: "a column fixed by the spans is skipped",
		build: func(b *builder) plan.Node {
			return b.sort(b.filter(b.scan("t"), "b = 1"), "d")
		},
		want: `
		scan t@t_bd cols=(a#1,b#2,c#3,d#4) spans=[/1 - /1] ordered`,
	}, {
		name: "an IN list does not fix the column",
		build: func(b *builder) plan.Node {
			return b.sort(b.filter(b.scan("t"), "b IN (1, 2)"), "d")
		},
		want: `
		sort (#4)
		  scan t@t_bd cols=(a#1,b#2,c#3,d#4) spans=[/2 - /2] [/1 - /1]`,
	}, {
		name: "mixed directions the index does not have keep the sort",
		build: func(b *builder) plan.Node {
			return b.sort(b.filter(b.scan("t"), "b > 1"), "b", "d")
		},
		want: `
		sort (#2,#4)
		  scan t@t_bd cols=(a#1,b#2,c#3,d#4) spans=(/NULL - /1)`,
	}, {
		name:  "limit reaches the scan with its offset",
		build: func(b *builder) plan.Node { return b.limit(b.project(b.sort(b.scan("u"), "x"), "x"), "10", "5") },
		want: `
		limit 10 offset 5
		  project x
		    scan u@u_pkey cols=(x#1) ordered limit=15`,
	}, {
		name:  "limit with a parameter does not",
		build: func(b *builder) plan.Node { return b.limit(b.scan("u"), "$1", "") },
		want: `
		limit $1
		  scan u@u_pkey cols=(x#1,y#2,z#3)`,
	}, {
		name: "limit over a pinned filter does not",
		build: func(b *builder) plan.Node {
			return b.limit(b.filter(b.scan("u"), "random() < 0.5"), "3", "")
		},
		want: `
		limit 3
		  filter (random() < '0.5'::double precision)
		    scan u@u_pkey cols=(x#1,y#2,z#3)`,
	}, {
		name: "ORDER BY LIMIT picks a covering index for its order",
		build: func(b *builder) plan.Node {
			return b.limit(b.sort(b.scan("t", "a", "b"), "b"), "10", "")
		},
		want: `
		limit 10
		  scan t@t_b cols=(a#1,b#2) ordered limit=10`,
	}, {
		name: "ORDER BY LIMIT through an index join, which keeps its input's order",
		build: func(b *builder) plan.Node {
			return b.limit(b.sort(b.scan("t", "a", "c", "d"), "c"), "10", "")
		},
		want: `
		limit 10
		  index-join t keys=(#1) cols=(a#1,c#2,d#3)
		    scan t@t_c cols=(a#1,c#2) ordered limit=10`,
	}, {
		name: "a filtered index join keeps the sort",
		build: func(b *builder) plan.Node {
			return b.limit(b.sort(b.filter(b.scan("t", "a", "c", "d"), "d > 2"), "c"), "10", "")
		},
		want: `
		limit 10
		  sort (#2)
		    scan t@t_pkey cols=(a#1,c#2,d#3) filter=(d > 2)`,
	}, {
		name: "the index order reaches the sort through an index join",
		build: func(b *builder) plan.Node {
			return b.sort(b.filter(b.scan("t", "a", "c", "d"), "c IN ('a', 'b') AND d > 2"), "c desc")
		},
		want: `
		index-join t keys=(#1) cols=(a#1,c#2,d#3) filter=(d > 2)
		  scan t@t_c cols=(a#1,c#2) spans=[/a - /a] [/b - /b] ordered reverse`,
	}, {
		name: "sort over a streaming group by of the primary key and its other columns",
		build: func(b *builder) plan.Node {
			return b.sort(b.groupBy(b.scan("u"), "x", "y", "z"), "x desc")
		},
		want: `
		group-by (#1,#2,#3) ordered
		  scan u@u_pkey cols=(x#1,y#2,z#3) ordered reverse`,
	}, {
		name: "ORDER BY LIMIT keeps a selective access",
		build: func(b *builder) plan.Node {
			return b.limit(b.sort(b.filter(b.scan("t", "a", "b"), "a IN (4, 5)"), "b"), "10", "")
		},
		want: `
		limit 10
		  sort (#2)
		    scan t@t_pkey cols=(a#1,b#2) spans=[/4 - /4] [/5 - /5]`,
	}, {
		name: "ORDER BY LIMIT with a residual filter on the ordering index",
		build: func(b *builder) plan.Node {
			return b.limit(b.sort(b.filter(b.scan("t", "a", "b"), "a > 4"), "b"), "10", "")
		},
		want: `
		limit 10
		  scan t@t_b cols=(a#1,b#2) filter=(a > 4) ordered limit=10`,
	}, {
		name: "a unique key fixed by the spans orders everything",
		build: func(b *builder) plan.Node {
			return b.sort(b.filter(b.scan("t", "a", "b"), "a = 4"), "b")
		},
		want: `
		scan t@t_pkey cols=(a#1,b#2) spans=[/4 - /4] ordered`,
	}, {
		name:  "group by the primary key streams",
		build: func(b *builder) plan.Node { return b.groupBy(b.scan("u"), "x") },
		want: `
		group-by (#1) ordered
		  scan u@u_pkey cols=(x#1) ordered`,
	}, {
		name:  "group by a non-key column hashes",
		build: func(b *builder) plan.Node { return b.groupBy(b.scan("u"), "z") },
		want: `
		group-by (#3)
		  scan u@u_pkey cols=(z#3)`,
	}, {
		name:  "group by over a sort streams",
		build: func(b *builder) plan.Node { return b.groupBy(b.sort(b.scan("u"), "z", "y"), "y", "z") },
		want: `
		group-by (#2,#3) ordered
		  sort (#3,#2)
		    scan u@u_pkey cols=(y#2,z#3)`,
	}, {
		name:  "bucketed table: no ordered read just for grouping",
		build: func(b *builder) plan.Node { return b.groupBy(b.scan("h"), "k") },
		want: `
		group-by (#1)
		  scan h@h_pkey cols=(k#1)`,
	}})
}
