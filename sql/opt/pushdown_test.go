package opt

import (
	"testing"

	"github.com/cairn-db/cairn/sql/plan"
)

// Predicate pushdown (pushdown.go). Scans read columns the tables have no
// index on (u.z, t.c with LIKE) where the test is about where a
// predicate lands rather than spans.
func TestPushdown(t *testing.T) {
	runCases(t, []optCase{{
		name: "through project and sort into the scan",
		build: func(b *builder) plan.Node {
			s := b.scan("u")
			return b.filter(b.sort(b.project(s, "x", "z"), "z"), "z LIKE 'a%'")
		},
		want: `
		sort (#3)
		  project x, z
		    scan u@u_pkey cols=(x#1,z#3) filter=(z ~~ 'a%'::text)`,
	}, {
		name: "not through a computed project column",
		build: func(b *builder) plan.Node {
			p := b.computed(b.project(b.scan("u"), "x"), "w", "y + 1")
			return b.filter(p, "w > 3 AND x <> 2")
		},
		want: `
		filter (w > 3)
		  project x, (y + 1)
		    scan u@u_pkey cols=(x#1,y#2) filter=(x <> 2)`,
	}, {
		name: "cross join: WHERE equalities become join keys, one-sided conjuncts go down",
		build: func(b *builder) plan.Node {
			j := b.join(plan.InnerJoin, b.scan("u"), b.scan("t", "a", "c"), "")
			return b.filter(j, "u.x = t.a AND u.z = 'q' AND t.c LIKE 'p%' AND u.y < length(t.c)")
		},
		want: `
		merge-join inner on=((u.x = t.a) AND (u.y < length(t.c))) eq=(#1)=(#4)
		  scan u@u_pkey cols=(x#1,y#2,z#3) filter=(u.z = 'q'::text) ordered
		  scan t@t_pkey cols=(a#4,c#5) filter=(t.c ~~ 'p%'::text) ordered`,
	}, {
		name: "inner join ON conjuncts move into the sides; equalities stay in On as keys",
		build: func(b *builder) plan.Node {
			return b.join(plan.InnerJoin, b.scan("u"), b.scan("t", "a", "c"), "t.a = u.x AND t.c LIKE 'p%' AND u.z LIKE 'z%'")
		},
		want: `
		merge-join inner on=(t.a = u.x) eq=(#1)=(#4)
		  scan u@u_pkey cols=(x#1,y#2,z#3) filter=(u.z ~~ 'z%'::text) ordered
		  scan t@t_pkey cols=(a#4,c#5) filter=(t.c ~~ 'p%'::text) ordered`,
	}, {
		name: "left join: WHERE on the left goes down, on the right stays; ON right-only goes right, ON left-only stays",
		build: func(b *builder) plan.Node {
			j := b.join(plan.LeftJoin, b.scan("u"), b.scan("t", "a", "c"), "u.x = t.a AND u.z LIKE 'l%' AND t.c LIKE 'r%'")
			return b.filter(j, "u.y > 1 AND t.c IS NULL")
		},
		want: `
		filter (t.c IS NULL)
		  merge-join left on=((u.x = t.a) AND (u.z ~~ 'l%'::text)) eq=(#1)=(#4)
		    scan u@u_pkey cols=(x#1,y#2,z#3) filter=(u.y > 1) ordered
		    scan t@t_pkey cols=(a#4,c#5) filter=(t.c ~~ 'r%'::text) ordered`,
	}, {
		name: "right join mirrors left",
		build: func(b *builder) plan.Node {
			j := b.join(plan.RightJoin, b.scan("u"), b.scan("t", "a", "c"), "u.x = t.a AND u.z LIKE 'l%' AND t.c LIKE 'r%'")
			return b.filter(j, "u.y > 1 AND t.c LIKE 'w%'")
		},
		want: `
		filter (u.y > 1)
		  join right on=((u.x = t.a) AND (t.c ~~ 'r%'::text)) eq=(#1)=(#4)
		    scan u@u_pkey cols=(x#1,y#2,z#3) filter=(u.z ~~ 'l%'::text)
		    scan t@t_pkey cols=(a#4,c#5) filter=(t.c ~~ 'w%'::text)`,
	}, {
		name: "full join: nothing moves",
		build: func(b *builder) plan.Node {
			j := b.join(plan.FullJoin, b.scan("u"), b.scan("t", "a", "c"), "u.x = t.a AND u.z LIKE 'l%' AND t.c LIKE 'r%'")
			return b.filter(j, "u.y > 1")
		},
		want: `
		filter (u.y > 1)
		  join full on=((u.x = t.a) AND (u.z ~~ 'l%'::text) AND (t.c ~~ 'r%'::text)) eq=(#1)=(#4)
		    scan u@u_pkey cols=(x#1,y#2,z#3)
		    scan t@t_pkey cols=(a#4,c#5)`,
	}, {
		name: "anti join: only right-only ON conjuncts move",
		build: func(b *builder) plan.Node {
			return b.join(plan.AntiJoin, b.scan("u"), b.scan("t", "a", "c"), "u.x = t.a AND u.z LIKE 'l%' AND t.c LIKE 'r%'")
		},
		want: `
		merge-join anti on=((u.x = t.a) AND (u.z ~~ 'l%'::text)) eq=(#1)=(#4)
		  scan u@u_pkey cols=(x#1,y#2,z#3) ordered
		  scan t@t_pkey cols=(a#4,c#5) filter=(t.c ~~ 'r%'::text) ordered`,
	}, {
		name: "semi join: left-only ON conjuncts filter the left side",
		build: func(b *builder) plan.Node {
			return b.join(plan.SemiJoin, b.scan("u"), b.scan("t", "a", "c"), "u.x = t.a AND u.z LIKE 'l%'")
		},
		want: `
		merge-join semi on=(u.x = t.a) eq=(#1)=(#4)
		  scan u@u_pkey cols=(x#1,y#2,z#3) filter=(u.z ~~ 'l%'::text) ordered
		  scan t@t_pkey cols=(a#4) ordered`,
	}, {
		name: "volatile predicates stay put",
		build: func(b *builder) plan.Node {
			return b.filter(b.sort(b.scan("u"), "z"), "random() < 0.5 AND z LIKE 'v%'")
		},
		want: `
		filter (random() < '0.5'::double precision)
		  sort (#3)
		    scan u@u_pkey cols=(x#1,y#2,z#3) filter=(z ~~ 'v%'::text)`,
	}, {
		name: "join keys need columns of one type family",
		build: func(b *builder) plan.Node {
			return b.join(plan.InnerJoin, b.scan("u", "x", "z"), b.scan("t", "a", "d"), "u.x = t.d AND u.z = t.d::text AND u.x::numeric = t.a::numeric")
		},
		want: `
		join inner on=((u.x = t.d) AND (u.z = (t.d)::text) AND ((u.x)::numeric = (t.a)::numeric)) eq=(#1)=(#4)
		  scan u@u_pkey cols=(x#1,z#2)
		  scan t@t_pkey cols=(a#3,d#4)`,
	}, {
		name: "group by: only group-column predicates go below",
		build: func(b *builder) plan.Node {
			g := b.groupBy(b.scan("u"), "z")
			return b.filter(g, "z LIKE 'g%'")
		},
		want: `
		group-by (#3)
		  scan u@u_pkey cols=(z#3) filter=(z ~~ 'g%'::text)`,
	}, {
		name: "UNION ALL: into both sides, renamed",
		build: func(b *builder) plan.Node {
			l, r := b.scan("u", "x", "z"), b.scan("t", "a", "c")
			so := &plan.SetOp{Kind: plan.Union, All: true, Left: l, Right: r,
				Cols: []plan.Column{{ID: 5, Name: "k", T: l.Cols[0].T}, {ID: 6, Name: "s", T: l.Cols[1].T}}}
			b.next = 7
			b.names["k"], b.names["s"] = so.Cols[0], so.Cols[1]
			return b.filter(so, "k = 3 AND s LIKE 'p%' AND random() < 0.5")
		},
		want: `
		filter (random() < '0.5'::double precision)
		  *plan.SetOp
		    scan u@u_pkey cols=(x#1,z#2) spans=[/3 - /3] filter=(z ~~ 'p%'::text)
		    scan t@t_pkey cols=(a#3,c#4) spans=[/3 - /3] filter=(c ~~ 'p%'::text)`,
	}, {
		name: "UNION (distinct): nothing goes below",
		build: func(b *builder) plan.Node {
			l, r := b.scan("u", "x", "z"), b.scan("t", "a", "c")
			so := &plan.SetOp{Kind: plan.Union, Left: l, Right: r,
				Cols: []plan.Column{{ID: 5, Name: "k", T: l.Cols[0].T}, {ID: 6, Name: "s", T: l.Cols[1].T}}}
			b.next = 7
			b.names["k"], b.names["s"] = so.Cols[0], so.Cols[1]
			return b.filter(so, "k = 3")
		},
		want: `
		filter (k = 3)
		  *plan.SetOp
		    scan u@u_pkey cols=(x#1,z#2)
		    scan t@t_pkey cols=(a#3,c#4)`,
	}, {
		name: "limit: nothing goes below",
		build: func(b *builder) plan.Node {
			return b.filter(b.limit(b.scan("u"), "5", ""), "z LIKE 'g%'")
		},
		want: `
		filter (z ~~ 'g%'::text)
		  limit 5
		    scan u@u_pkey cols=(x#1,y#2,z#3) limit=5`,
	}})
}
