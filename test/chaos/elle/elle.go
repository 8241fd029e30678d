// Package elle checks list-append histories for isolation anomalies, in
// the style of Elle (Kingsbury and Alvaro, "Elle: Inferring Isolation
// Anomalies from Experimental Observations", VLDB 2020).
//
// A history is transactions of micro-operations on keys whose values are
// lists: append v to k, or read k's whole list. Because every appended
// value is unique per key and a list shows the order of every append it
// holds, reads reveal each key's version order, and from it three kinds
// of dependency between committed transactions (Adya):
//
//	ww  T1 appended a version of k that T2's append came right after
//	wr  T2 read k's list ending in T1's append
//	rw  T1 read k's list, and T2 appended the version right after it
//
// The checker owns only that inference; the chaos workload
// (test/chaos/listappend.go) records the histories.
//
// Invariants (what Check guarantees of its answer):
//
//  1. Element anomalies are reported without any graph: a read holding
//     a value twice (duplicate), a value no transaction appended
//     (garbage), a failed transaction's append (G1a, aborted read), or a
//     list that is not the last state some transaction left but an
//     intermediate one (G1b); two reads of a key neither of which is a
//     prefix of the other (incompatible-order); an acknowledged append
//     missing from the final read of its key (lost); a read after the
//     transaction's own append that does not end with it (internal).
//  2. Cycles are searched only among transactions that committed: those
//     acknowledged, and those of unknown outcome whose appends some read
//     observed (an unobserved unknown one may never have happened).
//  3. Each cycle is classified by its edges, the weakest first: only ww
//     (G0); ww and wr (G1c); exactly one rw (G-single); more (G2-item).
//     A strongly connected component reports the weakest class any of its
//     cycles has, so a G-single is never hidden behind a G2-item.
//  4. Forbidden(level) keeps what the level promises never to show:
//     Serializable forbids every anomaly; SnapshotIsolation (Cairn's
//     REPEATABLE READ) allows G2-item only.
package elle

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Status is what the client knows of a transaction.
type Status int

const (
	OK      Status = iota // acknowledged
	Fail                  // refused: never committed
	Unknown               // outcome lost
)

// Mop is one micro-operation: an append of Value to Key, or a read of Key
// that returned List (nil: the read's answer was not received).
type Mop struct {
	Append bool
	Key    string
	Value  int
	List   []int
}

// Txn is one transaction of the history.
type Txn struct {
	ID     int
	Status Status
	Mops   []Mop
}

// Anomaly kinds.
const (
	G0                = "G0"
	G1a               = "G1a"
	G1b               = "G1b"
	G1c               = "G1c"
	GSingle           = "G-single"
	G2Item            = "G2-item"
	Duplicate         = "duplicate"
	Garbage           = "garbage"
	Lost              = "lost"
	Internal          = "internal"
	IncompatibleOrder = "incompatible-order"
)

// Level is an isolation level a history is judged against.
type Level int

const (
	Serializable Level = iota
	SnapshotIsolation
)

// Result maps each anomaly kind found to explanations.
type Result map[string][]string

// Forbidden returns the kinds found that level promises never to show,
// sorted.
func (r Result) Forbidden(level Level) []string {
	var out []string
	for k := range r {
		if level == SnapshotIsolation && k == G2Item {
			continue
		}
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (r Result) add(kind, format string, args ...any) {
	if len(r[kind]) < 20 {
		r[kind] = append(r[kind], fmt.Sprintf(format, args...))
	}
}

// edge kinds, as bits so that a pair of transactions can carry several.
const (
	ww = 1 << iota
	wr
	rw
)

type writer struct {
	txn *Txn
	// last: the transaction's last append to the key (an earlier one is
	// an intermediate state).
	last bool
}

// Check checks h; final holds each key's list read after the run (keys
// absent: no final read).
func Check(h []Txn, final map[string][]int) Result {
	res := Result{}
	// Who appended what.
	writers := map[string]map[int]writer{}
	for i := range h {
		t := &h[i]
		lastOf := map[string]int{}
		for _, m := range t.Mops {
			if m.Append {
				lastOf[m.Key] = m.Value
			}
		}
		for _, m := range t.Mops {
			if !m.Append {
				continue
			}
			if writers[m.Key] == nil {
				writers[m.Key] = map[int]writer{}
			}
			if w, dup := writers[m.Key][m.Value]; dup {
				res.add(Garbage, "T%d and T%d both append %d to %s (the workload must not)", w.txn.ID, t.ID, m.Value, m.Key)
			}
			writers[m.Key][m.Value] = writer{txn: t, last: lastOf[m.Key] == m.Value}
		}
	}
	// Element anomalies, and the version order: the longest list read by
	// a transaction that committed, which every other must prefix.
	order := map[string][]int{}
	observed := map[*Txn]bool{}
	checkList := func(who string, t *Txn, k string, l []int) {
		seen := map[int]bool{}
		for _, v := range l {
			if seen[v] {
				res.add(Duplicate, "%s read %s = %v: %d twice", who, k, l, v)
			}
			seen[v] = true
			w, ok := writers[k][v]
			switch {
			case !ok:
				res.add(Garbage, "%s read %s = %v: nobody appended %d", who, k, l, v)
			case w.txn.Status == Fail:
				res.add(G1a, "%s read %s = %v: %d was appended by T%d, which failed", who, k, l, v, w.txn.ID)
			case w.txn != t:
				observed[w.txn] = true
			}
		}
		if len(l) > 0 {
			if w, ok := writers[k][l[len(l)-1]]; ok && !w.last && w.txn != t {
				res.add(G1b, "%s read %s = %v, ending in T%d's intermediate append %d", who, k, l, w.txn.ID, l[len(l)-1])
			}
		}
		o := order[k]
		n := min(len(o), len(l))
		if !slices.Equal(o[:n], l[:n]) {
			res.add(IncompatibleOrder, "%s read %s = %v, not a prefix of nor prefixed by %v", who, k, l, o)
			return
		}
		if len(l) > len(o) {
			order[k] = slices.Clone(l)
		}
	}
	for i := range h {
		t := &h[i]
		if t.Status == Fail {
			continue
		}
		own := map[string][]int{}
		for _, m := range t.Mops {
			if m.Append {
				own[m.Key] = append(own[m.Key], m.Value)
				continue
			}
			if m.List == nil {
				continue
			}
			if a := own[m.Key]; len(a) > 0 && (len(m.List) < len(a) || !slices.Equal(m.List[len(m.List)-len(a):], a)) {
				res.add(Internal, "T%d read %s = %v after appending %v", t.ID, m.Key, m.List, a)
			}
			checkList(fmt.Sprintf("T%d", t.ID), t, m.Key, m.List)
		}
	}
	keys := make([]string, 0, len(final))
	for k := range final {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		checkList("the final read", nil, k, final[k])
		in := map[int]bool{}
		for _, v := range final[k] {
			in[v] = true
		}
		for v, w := range writers[k] {
			if w.txn.Status == OK && !in[v] {
				res.add(Lost, "T%d's acknowledged append of %d to %s is not in the final read %v", w.txn.ID, v, k, final[k])
			}
		}
	}
	committed := func(t *Txn) bool { return t.Status == OK || t.Status == Unknown && observed[t] }

	// The graph.
	g := map[*Txn]map[*Txn]int{}
	link := func(a, b *Txn, kind int) {
		if a == b || !committed(a) || !committed(b) {
			return
		}
		if g[a] == nil {
			g[a] = map[*Txn]int{}
		}
		g[a][b] |= kind
	}
	for k, o := range order {
		for i := 1; i < len(o); i++ {
			a, b := writers[k][o[i-1]], writers[k][o[i]]
			if a.txn != nil && b.txn != nil {
				link(a.txn, b.txn, ww)
			}
		}
	}
	for i := range h {
		t := &h[i]
		if !committed(t) {
			continue
		}
		for _, m := range t.Mops {
			if m.Append || m.List == nil {
				continue
			}
			// What the transaction saw of others: its own appends off the
			// end.
			l := m.List
			for len(l) > 0 {
				if w, ok := writers[m.Key][l[len(l)-1]]; ok && w.txn == t {
					l = l[:len(l)-1]
					continue
				}
				break
			}
			if len(l) > 0 {
				if w, ok := writers[m.Key][l[len(l)-1]]; ok {
					link(w.txn, t, wr)
				}
			}
			if o := order[m.Key]; len(l) < len(o) {
				// Reading a transaction's intermediate version (G1b, already
				// reported) is not also an anti-dependency on it.
				if w, ok := writers[m.Key][o[len(l)]]; ok && (len(l) == 0 || writers[m.Key][l[len(l)-1]].txn != w.txn) {
					link(t, w.txn, rw)
				}
			}
		}
	}
	cycles(g, res)
	return res
}

// cycles finds the strongly connected components of g and reports the
// weakest class of cycle in each (invariant 3).
func cycles(g map[*Txn]map[*Txn]int, res Result) {
	for _, scc := range sccs(g, ww|wr|rw) {
		in := map[*Txn]bool{}
		for _, t := range scc {
			in[t] = true
		}
		sub := func(mask int) map[*Txn]map[*Txn]int {
			out := map[*Txn]map[*Txn]int{}
			for a := range in {
				for b, k := range g[a] {
					if in[b] && k&mask != 0 {
						if out[a] == nil {
							out[a] = map[*Txn]int{}
						}
						out[a][b] = k & mask
					}
				}
			}
			return out
		}
		if c := sccs(sub(ww), ww); len(c) > 0 {
			res.add(G0, "%s", describe(c[0], g))
			continue
		}
		if c := sccs(sub(ww|wr), ww|wr); len(c) > 0 {
			res.add(G1c, "%s", describe(c[0], g))
			continue
		}
		// G-single: an rw edge a->b closed by a path of ww/wr edges b~>a.
		nonRW := sub(ww | wr)
		found := false
		for a := range in {
			for b, k := range g[a] {
				if !in[b] || k&rw == 0 {
					continue
				}
				if p := path(nonRW, b, a); p != nil {
					res.add(GSingle, "%s", describeCycle(append([]*Txn{a}, p...), g))
					found = true
					break
				}
			}
			if found {
				break
			}
		}
		if !found {
			res.add(G2Item, "%s", describe(scc, g))
		}
	}
}

// sccs returns g's strongly connected components of more than one
// transaction (Tarjan), over the edges in mask, each sorted by ID.
func sccs(g map[*Txn]map[*Txn]int, mask int) [][]*Txn {
	index := map[*Txn]int{}
	low := map[*Txn]int{}
	onStack := map[*Txn]bool{}
	var stack []*Txn
	var out [][]*Txn
	next := 0
	var nodes []*Txn
	for a := range g {
		nodes = append(nodes, a)
	}
	slices.SortFunc(nodes, func(x, y *Txn) int { return x.ID - y.ID })
	var visit func(v *Txn)
	visit = func(v *Txn) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for w, k := range g[v] {
			if k&mask == 0 {
				continue
			}
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var c []*Txn
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				c = append(c, w)
				if w == v {
					break
				}
			}
			if len(c) > 1 {
				slices.SortFunc(c, func(x, y *Txn) int { return x.ID - y.ID })
				out = append(out, c)
			}
		}
	}
	for _, v := range nodes {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	return out
}

// path returns a shortest path from a to b in g (a first, b last), nil
// if none.
func path(g map[*Txn]map[*Txn]int, a, b *Txn) []*Txn {
	prev := map[*Txn]*Txn{a: nil}
	q := []*Txn{a}
	for len(q) > 0 {
		v := q[0]
		q = q[1:]
		if v == b {
			var p []*Txn
			for ; v != nil; v = prev[v] {
				p = append(p, v)
			}
			slices.Reverse(p)
			return p
		}
		succ := make([]*Txn, 0, len(g[v]))
		for w := range g[v] {
			succ = append(succ, w)
		}
		slices.SortFunc(succ, func(x, y *Txn) int { return x.ID - y.ID })
		for _, w := range succ {
			if _, seen := prev[w]; !seen {
				prev[w] = v
				q = append(q, w)
			}
		}
	}
	return nil
}

// describe names a component by one of its cycles through its first
// transaction.
func describe(scc []*Txn, g map[*Txn]map[*Txn]int) string {
	in := map[*Txn]bool{}
	for _, t := range scc {
		in[t] = true
	}
	sub := map[*Txn]map[*Txn]int{}
	for a := range in {
		for b, k := range g[a] {
			if in[b] {
				if sub[a] == nil {
					sub[a] = map[*Txn]int{}
				}
				sub[a][b] = k
			}
		}
	}
	a := scc[0]
	for b := range sub[a] {
		if p := path(sub, b, a); p != nil {
			return describeCycle(append([]*Txn{a}, p...), g)
		}
	}
	return fmt.Sprintf("component of %d transactions", len(scc))
}

// describeCycle writes a cycle (first transaction repeated last) as
// "T1 -ww-> T2 -rw-> T1".
func describeCycle(c []*Txn, g map[*Txn]map[*Txn]int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "T%d", c[0].ID)
	for i := 1; i < len(c); i++ {
		k := g[c[i-1]][c[i]]
		var names []string
		for _, n := range []struct {
			bit  int
			name string
		}{{ww, "ww"}, {wr, "wr"}, {rw, "rw"}} {
			if k&n.bit != 0 {
				names = append(names, n.name)
			}
		}
		fmt.Fprintf(&b, " -%s-> T%d", strings.Join(names, ","), c[i].ID)
	}
	return b.String()
}
