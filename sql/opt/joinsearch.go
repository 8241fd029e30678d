package opt

import (
	"context"
	"errors"
	"math"
	"math/bits"
	"sort"
)

// This file is the join search proper, free of plan nodes: a joinGraph of
// relations (row estimates) and predicates (the relations each reads and
// its selectivity) goes in, a joinTree over the relations comes out.
// joinorder.go turns plans into graphs and trees back into plans.
//
// Two searches, chosen as PostgreSQL chooses between its standard join
// search and GEQO (joinorder.go):
//
//   - searchDP: dynamic programming over the connected subsets of the
//     relations (System R's left-deep search), exact under the cost model;
//     its work grows with the number of connected subsets, so it is kept
//     for problems below geqo_threshold, and abandons a problem whose table
//     of partial plans would pass maxDPStates (errDPBudget).
//   - searchGreedy: greedy operator ordering (GOO, Fegaras 1998): join the
//     two connected parts whose join is estimated smallest, until one part
//     is left. At most n-1 rounds of at most one candidate per predicate,
//     so a 64-relation problem costs a few thousand candidates.
//
// Both join parts that share no predicate only when no two remaining parts
// share one (a disconnected graph): a plan never has a cross product where
// a predicate connects the relations.
//
// The cost of a tree is the sum of the estimated rows of its joins (C_out,
// as in the original order search); a join's rows are the product of its
// relations' rows and of the selectivities of the predicates it completes,
// so every tree over the same relations ends with the same row count.

// joinGraph is one join search problem.
type joinGraph struct {
	rows  []float64 // estimated rows of each relation
	preds []graphPred
	// considered counts the candidate joins the search costed: the
	// measure (not time) by which tests show the search is bounded.
	considered int
}

// graphPred is a predicate over two or more relations of a joinGraph.
type graphPred struct {
	rels []int // ascending, at least two
	sel  float64
}

// joinTree is a join order: a relation (left == nil) or a join of two
// trees.
type joinTree struct {
	rel         int
	left, right *joinTree
}

func (t *joinTree) isLeaf() bool { return t.left == nil }

// rels appends the relations of t, left to right.
func (t *joinTree) rels(out []int) []int {
	if t.isLeaf() {
		return append(out, t.rel)
	}
	return t.right.rels(t.left.rels(out))
}

// equal reports whether t and u are the same tree.
func (t *joinTree) equal(u *joinTree) bool {
	if t.isLeaf() || u.isLeaf() {
		return t.isLeaf() && u.isLeaf() && t.rel == u.rel
	}
	return t.left.equal(u.left) && t.right.equal(u.right)
}

// errDPBudget stops a dynamic-programming search that would hold more
// than maxDPStates partial plans; the caller plans the problem greedily.
var errDPBudget = errors.New("opt: join search past its state budget")

// maxDPStates bounds the memory and time of one dynamic-programming join
// search (a star of 17 relations has 65,552 connected subsets).
const maxDPStates = 1 << 16

// checkEvery is how many candidates a search costs between checks of its
// statement's context.
const checkEvery = 256

// tick counts one candidate and checks ctx every checkEvery of them.
func (g *joinGraph) tick(ctx context.Context) error {
	g.considered++
	if g.considered%checkEvery == 0 {
		return ctx.Err()
	}
	return nil
}

// cost is t's C_out: the sum of the estimated rows of its joins but the
// last (whose rows every order shares), where a join's rows are its
// sides' rows times the selectivities of the predicates it completes
// (any number of relations).
func (g *joinGraph) cost(t *joinTree) float64 {
	in := make([]bool, len(g.rows))
	c, rows := g.costOf(t, in)
	if t.isLeaf() {
		return c
	}
	return c - rows
}

// crossings counts the joins of t whose sides no predicate connects.
func (g *joinGraph) crossings(t *joinTree) int {
	n, _ := g.crossingsOf(t)
	return n
}

func (g *joinGraph) crossingsOf(t *joinTree) (int, []bool) {
	in := make([]bool, len(g.rows))
	if t.isLeaf() {
		in[t.rel] = true
		return 0, in
	}
	ln, l := g.crossingsOf(t.left)
	rn, r := g.crossingsOf(t.right)
	n := ln + rn + 1
	for _, p := range g.preds {
		all, anyL, anyR := true, false, false
		for _, x := range p.rels {
			anyL, anyR, all = anyL || l[x], anyR || r[x], all && (l[x] || r[x])
		}
		if all && anyL && anyR {
			n--
			break
		}
	}
	for i := range in {
		in[i] = l[i] || r[i]
	}
	return n, in
}

// costOf returns t's cost and rows, marking its relations in in.
func (g *joinGraph) costOf(t *joinTree, in []bool) (cost, rows float64) {
	if t.isLeaf() {
		in[t.rel] = true
		return 0, math.Max(g.rows[t.rel], 1)
	}
	left := make([]bool, len(in))
	lc, lr := g.costOf(t.left, left)
	rc, rr := g.costOf(t.right, in)
	rows = lr * rr
	for _, p := range g.preds {
		all, anyLeft, anyRight := true, false, false
		for _, r := range p.rels {
			anyLeft = anyLeft || left[r]
			anyRight = anyRight || in[r]
			all = all && (left[r] || in[r])
		}
		if all && anyLeft && anyRight {
			rows *= p.sel
		}
	}
	for r, ok := range left {
		in[r] = in[r] || ok
	}
	rows = math.Max(rows, 1)
	return lc + rc + rows, rows
}

func relMask(rels []int) uint64 {
	var m uint64
	for _, r := range rels {
		m |= 1 << r
	}
	return m
}

// dpEntry is the best left-deep plan found for one set of relations.
type dpEntry struct {
	cost, rows float64
	// last is the relation joined last; prev the set before it.
	last int
	prev uint64
}

// searchDP returns the cheapest left-deep join tree over g's relations
// (at most 64) whose every join shares a predicate with its left side,
// unless none of the remaining relations does.
func (g *joinGraph) searchDP(ctx context.Context) (*joinTree, error) {
	n := len(g.rows)
	if n > 64 {
		return nil, errDPBudget
	}
	// predsOf[r]: the predicates reading r, with their masks.
	type mp struct {
		mask uint64
		sel  float64
	}
	predsOf := make([][]mp, n)
	for _, p := range g.preds {
		m := relMask(p.rels)
		for _, r := range p.rels {
			predsOf[r] = append(predsOf[r], mp{m, p.sel})
		}
	}
	best := make(map[uint64]*dpEntry, 4*n)
	level := make([]uint64, 0, n)
	for r := 0; r < n; r++ {
		best[1<<r] = &dpEntry{rows: math.Max(g.rows[r], 1), last: r}
		level = append(level, 1<<r)
	}
	full := uint64(1)<<n - 1
	if n == 64 {
		full = math.MaxUint64
	}
	for size := 2; size <= n; size++ {
		var next []uint64
		for _, s := range level {
			e := best[s]
			// Which relations share a predicate with s, once added?
			var linked uint64
			for r := 0; r < n; r++ {
				if s&(1<<r) != 0 {
					continue
				}
				for _, p := range predsOf[r] {
					if with := s | 1<<r; p.mask&with == p.mask {
						linked |= 1 << r
						break
					}
				}
			}
			cands := linked
			if cands == 0 {
				cands = full &^ s // a disconnected graph: cross products
			}
			for c := cands; c != 0; c &= c - 1 {
				if err := g.tick(ctx); err != nil {
					return nil, err
				}
				r := bits.TrailingZeros64(c)
				with := s | 1<<r
				rows := e.rows * math.Max(g.rows[r], 1)
				for _, p := range predsOf[r] {
					if p.mask&with == p.mask {
						rows *= p.sel
					}
				}
				rows = math.Max(rows, 1)
				cost := e.cost + rows
				if old, ok := best[with]; ok {
					if cost < old.cost {
						*old = dpEntry{cost: cost, rows: rows, last: r, prev: s}
					}
					continue
				}
				if len(best) >= maxDPStates {
					return nil, errDPBudget
				}
				best[with] = &dpEntry{cost: cost, rows: rows, last: r, prev: s}
				next = append(next, with)
			}
		}
		sort.Slice(next, func(i, j int) bool { return next[i] < next[j] })
		level = next
	}
	var order []int
	for s := full; s != 0; {
		e := best[s]
		order = append(order, e.last)
		s = e.prev
	}
	t := &joinTree{rel: order[len(order)-1]}
	for i := len(order) - 2; i >= 0; i-- {
		t = &joinTree{left: t, right: &joinTree{rel: order[i]}}
	}
	return t, nil
}

// gooPart is one part of a greedy search: the relations joined so far.
type gooPart struct {
	tree *joinTree
	rows float64
	size int
}

// searchGreedy returns a join tree over g's relations (any number) made
// by greedy operator ordering: each round joins the two parts sharing a
// predicate whose join has the fewest estimated rows (ties: the pair met
// first), the part with more rows on the left (the executor builds the
// right side of a hash join), a lone relation on the right of a larger
// part. Parts share no predicate only in a disconnected graph; the two
// smallest are then crossed.
func (g *joinGraph) searchGreedy(ctx context.Context) (*joinTree, error) {
	n := len(g.rows)
	parts := make([]*gooPart, n)
	partOf := make([]int, n)
	for r := range parts {
		parts[r] = &gooPart{tree: &joinTree{rel: r}, rows: math.Max(g.rows[r], 1), size: 1}
		partOf[r] = r
	}
	live := n
	done := make([]bool, len(g.preds))
	for live > 1 {
		// The selectivity between each pair of parts that predicates
		// complete, the pairs in the order first met.
		type pair struct{ a, b int }
		sel := map[pair]float64{}
		var pairs []pair
		for i, p := range g.preds {
			if done[i] {
				continue
			}
			a, b := -1, -1
			ok := true
			for _, r := range p.rels {
				switch pr := partOf[r]; {
				case a == -1 || pr == a:
					a = pr
				case b == -1 || pr == b:
					b = pr
				default:
					ok = false // three parts: not yet
				}
			}
			if !ok || b == -1 {
				continue
			}
			if a > b {
				a, b = b, a
			}
			k := pair{a, b}
			if _, seen := sel[k]; !seen {
				sel[k] = 1
				pairs = append(pairs, k)
			}
			sel[k] *= p.sel
		}
		best, bestRows := pair{-1, -1}, math.Inf(1)
		for _, k := range pairs {
			if err := g.tick(ctx); err != nil {
				return nil, err
			}
			if rows := math.Max(parts[k.a].rows*parts[k.b].rows*sel[k], 1); rows < bestRows {
				best, bestRows = k, rows
			}
		}
		if best.a == -1 {
			// No predicate joins two parts: cross the two smallest.
			var ids []int
			for i, p := range parts {
				if p != nil {
					ids = append(ids, i)
				}
			}
			sort.SliceStable(ids, func(i, j int) bool { return parts[ids[i]].rows < parts[ids[j]].rows })
			best = pair{min(ids[0], ids[1]), max(ids[0], ids[1])}
			bestRows = math.Max(parts[best.a].rows*parts[best.b].rows, 1)
		}
		l, r := parts[best.a], parts[best.b]
		if r.size > 1 && l.size == 1 || (l.size > 1) == (r.size > 1) && r.rows > l.rows {
			l, r = r, l
		}
		parts[best.a] = &gooPart{tree: &joinTree{left: l.tree, right: r.tree}, rows: bestRows, size: l.size + r.size}
		parts[best.b] = nil
		for rel, p := range partOf {
			if p == best.b {
				partOf[rel] = best.a
			}
		}
		for i, p := range g.preds {
			if !done[i] && partOf[p.rels[0]] == best.a {
				all := true
				for _, rel := range p.rels {
					all = all && partOf[rel] == best.a
				}
				done[i] = all
			}
		}
		live--
	}
	for _, p := range parts {
		if p != nil {
			return p.tree, nil
		}
	}
	return nil, errors.New("opt: greedy join search over no relations")
}
