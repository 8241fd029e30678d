package opt

import (
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
)

// The binder scans every column of a table. pruneScans drops from each
// Scan the columns nothing reads, so that more secondary indexes cover a
// query (no index join) and lookup joins can read covering indexes.
//
// "Nothing reads" is decided over the whole plan at once, not per path:
// a column is kept when any expression or column list of any tree names
// it, when it is an output of a tree's root, or when a node that consumes
// its input by position (SetOp, RecursiveCTE, Window, ProjectSet, Insert)
// sits above it. Coarse, but it needs no reasoning about scopes, outer
// references or lateral joins to be right.

// neededColumns returns every column ID the plan needs kept.
func neededColumns(p *plan.Plan) colSet {
	need := colSet{}
	add := func(ids ...sem.ColumnID) {
		for _, id := range ids {
			need[id] = struct{}{}
		}
	}
	addCols := func(cols []plan.Column) {
		for _, c := range cols {
			add(c.ID)
		}
	}
	visit := func(root plan.Node) {
		if root == nil {
			return
		}
		addCols(root.Columns())
		walk(root, func(n plan.Node) {
			for _, e := range exprsOf(n) {
				for id := range refs(e) {
					add(id)
				}
			}
			add(colIDsOf(n)...)
			switch n.(type) {
			case *plan.SetOp, *plan.RecursiveCTE, *plan.Window, *plan.ProjectSet, *plan.Insert:
				for _, c := range children(n) {
					addCols((*c).Columns())
				}
			}
		})
	}
	visit(p.Root)
	for _, sq := range p.Subqueries {
		visit(sq.Root)
		add(sq.Outer...)
	}
	for _, c := range p.CTEs {
		visit(c)
	}
	return need
}

// pruneScans removes unneeded columns from every Scan of n, keeping at
// least one (the first primary-key column when the scan reads it) so a
// scan still yields its rows.
func pruneScans(n plan.Node, need colSet) {
	walk(n, func(x plan.Node) {
		s, ok := x.(*plan.Scan)
		if !ok || s.Table == nil || len(s.Cols) == 0 {
			return
		}
		var cols []plan.Column
		var tcols []rowenc.ColumnID
		for i, c := range s.Cols {
			if need.has(c.ID) {
				cols = append(cols, c)
				tcols = append(tcols, s.TableCols[i])
			}
		}
		if len(cols) == 0 {
			keep := 0
			for i, tc := range s.TableCols {
				if len(s.Table.PrimaryIndex.KeyColumnIDs) > 0 && tc == s.Table.PrimaryIndex.KeyColumnIDs[0] {
					keep = i
					break
				}
			}
			cols, tcols = []plan.Column{s.Cols[keep]}, []rowenc.ColumnID{s.TableCols[keep]}
		}
		s.Cols, s.TableCols = cols, tcols
	})
}
