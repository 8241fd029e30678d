package opt

import (
	"testing"
	"time"

	"github.com/cairn-db/cairn/sql/plan"
)

// Lookup joins (lookup.go): the choice depends on the left side's size
// and on the storage profile.
func TestLookupJoins(t *testing.T) {
	hdd, obj := HDDCosts, ObjectStoreCosts
	// big: tables without statistics of a million rows of 100 bytes (100
	// MB, more than the 64 MiB block cache), 500 rows per value of a
	// non-unique key, so that rangeLeft looks up 5,000 keys.
	big := func(c Costs) Costs {
		c.TableRows, c.RowBytes, c.EqRows = 1e6, 100, 500
		return c
	}
	bigSSD, bigHDD, bigObj := big(DefaultCosts), big(HDDCosts), big(ObjectStoreCosts)
	// fifty: 5,000 rows per value, so rangeLeft looks up 50,000 keys.
	fifty := func(c Costs) Costs {
		c = big(c)
		c.EqRows = 5000
		return c
	}
	fiftySSD := fifty(DefaultCosts)
	// dense: 10,000 rows per value, so rangeLeft looks up 100,000 keys.
	dense := func(c Costs) Costs {
		c = big(c)
		c.EqRows = 10000
		return c
	}
	denseHDD, denseObj := dense(HDDCosts), dense(ObjectStoreCosts)
	denseHDDNoMerge := denseHDD
	denseHDDNoMerge.MergeJoinOff = true
	denseHDDNoHash := denseHDDNoMerge
	denseHDDNoHash.HashJoinOff = true
	// twenty: 2,000 rows per value, 20,000 keys: two HDD batches.
	twentyHDD := big(HDDCosts)
	twentyHDD.EqRows = 2000
	bigSSDNoLoop := bigSSD
	bigSSDNoLoop.NestLoopOff = true
	// tenLeft: about 10 rows of t (b = 5 on a non-unique index) joined to
	// u on its primary key.
	tenLeft := func(kind plan.JoinKind) func(b *builder) plan.Node {
		return func(b *builder) plan.Node {
			l := b.filter(b.scan("t", "a", "b"), "b = 5")
			return b.join(kind, l, b.scan("u"), "t.a = u.x")
		}
	}
	// rangeLeft: about 100 rows of t (ten values of a non-unique index).
	rangeLeft := func(b *builder) plan.Node {
		l := b.filter(b.scan("t", "a", "b"), "b IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)")
		return b.join(plan.InnerJoin, l, b.scan("u"), "t.b = u.x")
	}
	runCases(t, []optCase{{
		name:  "small left side: lookups into the primary key",
		build: tenLeft(plan.InnerJoin),
		want: `
		lookup-join inner u@u_pkey keys=(#1) cols=(x#3,y#4,z#5) on=(t.a = u.x)
		  scan t@t_b cols=(a#1,b#2) spans=[/5 - /5]`,
	}, {
		name:  "left, semi and anti joins too",
		build: tenLeft(plan.AntiJoin),
		want: `
		lookup-join anti u@u_pkey keys=(#1) cols=(x#3) on=(t.a = u.x)
		  scan t@t_b cols=(a#1,b#2) spans=[/5 - /5]`,
	}, {
		name: "the right side's filter joins the residual condition",
		build: func(b *builder) plan.Node {
			l := b.filter(b.scan("t", "a", "b"), "b = 5")
			return b.join(plan.LeftJoin, l, b.scan("u"), "t.a = u.x AND u.z LIKE 'q%'")
		},
		want: `
		lookup-join left u@u_pkey keys=(#1) cols=(x#3,y#4,z#5) on=((t.a = u.x) AND (u.z ~~ 'q%'::text))
		  scan t@t_b cols=(a#1,b#2) spans=[/5 - /5]`,
	}, {
		name: "a covering secondary index",
		build: func(b *builder) plan.Node {
			l := b.filter(b.scan("t", "a", "b"), "b = 5")
			return b.join(plan.InnerJoin, l, b.scan("u", "x", "y"), "t.a = u.y")
		},
		want: `
		lookup-join inner u@u_y keys=(#1) cols=(x#3,y#4) on=(t.a = u.y)
		  scan t@t_b cols=(a#1,b#2) spans=[/5 - /5]`,
	}, {
		name: "a non-covering secondary index is not used",
		build: func(b *builder) plan.Node {
			l := b.filter(b.scan("t", "a", "b"), "b = 5")
			return b.join(plan.InnerJoin, l, b.scan("u"), "t.a = u.y")
		},
		want: `
		join inner on=(t.a = u.y) eq=(#1)=(#4)
		  scan t@t_b cols=(a#1,b#2) spans=[/5 - /5]
		  scan u@u_pkey cols=(x#3,y#4,z#5)`,
	}, {
		name: "inner join with the small side on the right: swapped, columns put back in order",
		build: func(b *builder) plan.Node {
			r := b.filter(b.scan("t", "a", "b"), "b = 5")
			return b.join(plan.InnerJoin, b.scan("u"), r, "t.a = u.x")
		},
		want: `
		project x, y, z, a, b
		  lookup-join inner u@u_pkey keys=(#1) cols=(x#3,y#4,z#5) on=(t.a = u.x)
		    scan t@t_b cols=(a#1,b#2) spans=[/5 - /5]`,
	}, {
		name: "right join: swapped into a left lookup join",
		build: func(b *builder) plan.Node {
			r := b.filter(b.scan("t", "a", "b"), "b = 5")
			return b.join(plan.RightJoin, b.scan("u"), r, "t.a = u.x AND u.z = 'k'")
		},
		want: `
		project x, y, z, a, b
		  lookup-join left u@u_pkey keys=(#1) cols=(x#3,y#4,z#5) on=((t.a = u.x) AND (u.z = 'k'::text))
		    scan t@t_b cols=(a#1,b#2) spans=[/5 - /5]`,
	}, {
		name: "left join: never swapped",
		build: func(b *builder) plan.Node {
			r := b.filter(b.scan("t", "a", "b"), "b = 5")
			return b.join(plan.LeftJoin, b.scan("u"), r, "t.a = u.x")
		},
		want: `
		merge-join left on=(t.a = u.x) eq=(#3)=(#1)
		  scan u@u_pkey cols=(x#3,y#4,z#5) ordered
		  scan t@t_b cols=(a#1,b#2) spans=[/5 - /5] ordered`,
	}, {
		name: "unfiltered left side: both read whole, in key order: a merge join",
		build: func(b *builder) plan.Node {
			return b.join(plan.InnerJoin, b.scan("t", "a", "b"), b.scan("u"), "t.a = u.x")
		},
		want: `
		merge-join inner on=(t.a = u.x) eq=(#1)=(#3)
		  scan t@t_pkey cols=(a#1,b#2) ordered
		  scan u@u_pkey cols=(x#3,y#4,z#5) ordered`,
	}, {
		name: "full joins never",
		build: func(b *builder) plan.Node {
			l := b.filter(b.scan("t", "a", "b"), "b = 5")
			return b.join(plan.FullJoin, l, b.scan("u"), "t.a = u.x")
		},
		want: `
		join full on=(t.a = u.x) eq=(#1)=(#3)
		  scan t@t_b cols=(a#1,b#2) spans=[/5 - /5]
		  scan u@u_pkey cols=(x#3,y#4,z#5)`,
	}, {
		name:  "SSD: a hundred lookups beat a full read",
		build: rangeLeft,
		want: `
		lookup-join inner u@u_pkey keys=(#2) cols=(x#3,y#4,z#5) on=(t.b = u.x)
		  scan t@t_b cols=(a#1,b#2) spans=[/1 - /1] [/2 - /2] [/3 - /3] [/4 - /4] [/5 - /5] [/6 - /6] [/7 - /7] [/8 - /8] [/9 - /9] [/10 - /10]`,
	}, {
		name:  "HDD: a hundred sorted lookups into a small table read it once in order, as a full read would",
		costs: &hdd,
		build: rangeLeft,
		want: `
		lookup-join inner u@u_pkey keys=(#2) cols=(x#3,y#4,z#5) on=(t.b = u.x)
		  scan t@t_b cols=(a#1,b#2) spans=[/1 - /1] [/2 - /2] [/3 - /3] [/4 - /4] [/5 - /5] [/6 - /6] [/7 - /7] [/8 - /8] [/9 - /9] [/10 - /10]`,
	}, {
		name:  "object store: the small table is one chunk, fetched once either way",
		costs: &obj,
		build: rangeLeft,
		want: `
		lookup-join inner u@u_pkey keys=(#2) cols=(x#3,y#4,z#5) on=(t.b = u.x)
		  scan t@t_b cols=(a#1,b#2) spans=[/1 - /1] [/2 - /2] [/3 - /3] [/4 - /4] [/5 - /5] [/6 - /6] [/7 - /7] [/8 - /8] [/9 - /9] [/10 - /10]`,
	}, {
		name:  "a 100 MB table, 5,000 keys: on SSD five batches of sorted reads cost less than reading it whole",
		costs: &bigSSD,
		build: rangeLeft,
		want: `
		lookup-join inner u@u_pkey keys=(#2) cols=(x#3,y#4,z#5) on=(t.b = u.x)
		  scan t@t_b cols=(a#1,b#2) spans=[/1 - /1] [/2 - /2] [/3 - /3] [/4 - /4] [/5 - /5] [/6 - /6] [/7 - /7] [/8 - /8] [/9 - /9] [/10 - /10]`,
	}, {
		name:  "the same on an HDD: one batch of 5,000 keys, a block each, passing under the head between them",
		costs: &bigHDD,
		build: rangeLeft,
		want: `
		lookup-join inner u@u_pkey keys=(#2) cols=(x#3,y#4,z#5) on=(t.b = u.x)
		  scan t@t_b cols=(a#1,b#2) spans=[/1 - /1] [/2 - /2] [/3 - /3] [/4 - /4] [/5 - /5] [/6 - /6] [/7 - /7] [/8 - /8] [/9 - /9] [/10 - /10]`,
	}, {
		name:  "the same on an object store: one batch fetches every chunk once, as the full read does, without its rows' CPU",
		costs: &bigObj,
		build: rangeLeft,
		want: `
		lookup-join inner u@u_pkey keys=(#2) cols=(x#3,y#4,z#5) on=(t.b = u.x)
		  scan t@t_b cols=(a#1,b#2) spans=[/1 - /1] [/2 - /2] [/3 - /3] [/4 - /4] [/5 - /5] [/6 - /6] [/7 - /7] [/8 - /8] [/9 - /9] [/10 - /10]`,
	}, {
		name:  "50,000 keys on SSD: fifty batches, each reading a block per key, cost more than reading it whole",
		costs: &fiftySSD,
		build: rangeLeft,
		want: `
		merge-join inner on=(t.b = u.x) eq=(#2)=(#3)
		  scan t@t_b cols=(a#1,b#2) spans=[/1 - /1] [/2 - /2] [/3 - /3] [/4 - /4] [/5 - /5] [/6 - /6] [/7 - /7] [/8 - /8] [/9 - /9] [/10 - /10] ordered
		  scan u@u_pkey cols=(x#3,y#4,z#5) ordered`,
	}, {
		name:  "100,000 keys on an HDD: ten passes cost more than one read in order (merge join)",
		costs: &denseHDD,
		build: rangeLeft,
		want: `
		merge-join inner on=(t.b = u.x) eq=(#2)=(#3)
		  scan t@t_b cols=(a#1,b#2) spans=[/1 - /1] [/2 - /2] [/3 - /3] [/4 - /4] [/5 - /5] [/6 - /6] [/7 - /7] [/8 - /8] [/9 - /9] [/10 - /10] ordered
		  scan u@u_pkey cols=(x#3,y#4,z#5) ordered`,
	}, {
		name:  "the same on an object store: each of ten batches fetches every chunk again (merge join)",
		costs: &denseObj,
		build: rangeLeft,
		want: `
		merge-join inner on=(t.b = u.x) eq=(#2)=(#3)
		  scan t@t_b cols=(a#1,b#2) spans=[/1 - /1] [/2 - /2] [/3 - /3] [/4 - /4] [/5 - /5] [/6 - /6] [/7 - /7] [/8 - /8] [/9 - /9] [/10 - /10] ordered
		  scan u@u_pkey cols=(x#3,y#4,z#5) ordered`,
	}, {
		name:  "HDD with enable_mergejoin off: a hash join",
		costs: &denseHDDNoMerge,
		build: rangeLeft,
		want: `
		join inner on=(t.b = u.x) eq=(#2)=(#3)
		  scan t@t_b cols=(a#1,b#2) spans=[/1 - /1] [/2 - /2] [/3 - /3] [/4 - /4] [/5 - /5] [/6 - /6] [/7 - /7] [/8 - /8] [/9 - /9] [/10 - /10]
		  scan u@u_pkey cols=(x#3,y#4,z#5)`,
	}, {
		name:  "with enable_hashjoin off as well: the lookup join",
		costs: &denseHDDNoHash,
		build: rangeLeft,
		want: `
		lookup-join inner u@u_pkey keys=(#2) cols=(x#3,y#4,z#5) on=(t.b = u.x)
		  scan t@t_b cols=(a#1,b#2) spans=[/1 - /1] [/2 - /2] [/3 - /3] [/4 - /4] [/5 - /5] [/6 - /6] [/7 - /7] [/8 - /8] [/9 - /9] [/10 - /10]`,
	}, {
		name:  "20,000 keys on an HDD: two passes cost more than one read in order (merge join)",
		costs: &twentyHDD,
		build: rangeLeft,
		want: `
		merge-join inner on=(t.b = u.x) eq=(#2)=(#3)
		  scan t@t_b cols=(a#1,b#2) spans=[/1 - /1] [/2 - /2] [/3 - /3] [/4 - /4] [/5 - /5] [/6 - /6] [/7 - /7] [/8 - /8] [/9 - /9] [/10 - /10] ordered
		  scan u@u_pkey cols=(x#3,y#4,z#5) ordered`,
	}, {
		name:  "SSD with enable_nestloop off: no lookup join",
		costs: &bigSSDNoLoop,
		build: rangeLeft,
		want: `
		merge-join inner on=(t.b = u.x) eq=(#2)=(#3)
		  scan t@t_b cols=(a#1,b#2) spans=[/1 - /1] [/2 - /2] [/3 - /3] [/4 - /4] [/5 - /5] [/6 - /6] [/7 - /7] [/8 - /8] [/9 - /9] [/10 - /10] ordered
		  scan u@u_pkey cols=(x#3,y#4,z#5) ordered`,
	}, {
		name:  "object store: ten lookups still win",
		costs: &obj,
		build: tenLeft(plan.InnerJoin),
		want: `
		lookup-join inner u@u_pkey keys=(#1) cols=(x#3,y#4,z#5) on=(t.a = u.x)
		  scan t@t_b cols=(a#1,b#2) spans=[/5 - /5]`,
	}})
}

// TestLookupJoinsRoundTrip: the network's round trips are part of the
// choice. A hundred lookups into a 100,000-row u in batches of five are
// twenty round trips: on a local SSD they beat reading u whole, but with
// 60 ms between the nodes (Costs.WithRoundTrip) the thirteen pages of
// the full read win.
func TestLookupJoinsRoundTrip(t *testing.T) {
	local := DefaultCosts
	local.TableRows, local.LookupBatch = 1e5, 5
	far := local.WithRoundTrip(60 * time.Millisecond)
	if want := local.RoundTrip + 60000; far.RoundTrip != want {
		t.Fatalf("60 ms at 1 µs a unit: RoundTrip %v, want %v", far.RoundTrip, want)
	}
	if same := local.WithRoundTrip(0); same != local {
		t.Fatalf("no round trip changed the costs: %+v", same)
	}
	rangeLeft := func(b *builder) plan.Node {
		l := b.filter(b.scan("t", "a", "b"), "b IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)")
		return b.join(plan.InnerJoin, l, b.scan("u"), "t.b = u.x")
	}
	runCases(t, []optCase{{
		name:  "one node: lookups",
		costs: &local,
		build: rangeLeft,
		want: `
		lookup-join inner u@u_pkey keys=(#2) cols=(x#3,y#4,z#5) on=(t.b = u.x)
		  scan t@t_b cols=(a#1,b#2) spans=[/1 - /1] [/2 - /2] [/3 - /3] [/4 - /4] [/5 - /5] [/6 - /6] [/7 - /7] [/8 - /8] [/9 - /9] [/10 - /10]`,
	}, {
		name:  "60 ms between nodes: merge join",
		costs: &far,
		build: rangeLeft,
		want: `
		merge-join inner on=(t.b = u.x) eq=(#2)=(#3)
		  scan t@t_b cols=(a#1,b#2) spans=[/1 - /1] [/2 - /2] [/3 - /3] [/4 - /4] [/5 - /5] [/6 - /6] [/7 - /7] [/8 - /8] [/9 - /9] [/10 - /10] ordered
		  scan u@u_pkey cols=(x#3,y#4,z#5) ordered`,
	}})
}
