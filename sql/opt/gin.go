package opt

import (
	"math"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// GIN indexes (issue #18): a conjunct `col op constant` whose operator
// the index's operator class supports becomes token lookups
// (plan.InvertedScan) under an IndexJoin that checks every conjunct again
// on the rows it looks up (the recheck: tokens over-approximate).
//
//	jsonb_ops       @>  ?  ?|  ?&   (and constant <@ col)
//	jsonb_path_ops  @>              (and constant <@ col)
//	array_ops       @>  &&          (and constant <@ col, constant && col)

// ginTokenSel is the share of a table's rows one token is guessed to
// match when statistics give the row count (GIN tokens are often
// common: a key most documents have).
const ginTokenSel = 0.01

// invertedAccess plans reading s through the GIN index idx, or reports
// false when no conjunct can use it.
//
// A local GIN index of a distributed table (catalog.Index.Blocks) is read
// as one span per token and block; when equalities fix the distribution
// column (cons), only the blocks of the buckets they hash to
// (plan.Scan.Buckets).
func (o *optimizer) invertedAccess(s *plan.Scan, idx *catalog.Index, conj []sem.Expr, implied map[int]bool, cons map[rowenc.ColumnID]constraint) (access, bool) {
	if idx.Placement != catalog.IndexGlobal && s.Table.Partitioning.Kind == catalog.PartitionHash && idx.Blocks == 0 {
		// A local GIN index without blocks would need a read per bucket
		// and token; Cairn never makes one (ddl placeIndex), so this is
		// only a safeguard.
		return access{}, false
	}
	col := idx.KeyColumnIDs[0]
	var groups [][][]byte
	var conds []sem.Expr
	for _, c := range conj {
		g, ok := invertedGroups(s, col, idx.Opclass, c)
		if !ok {
			continue
		}
		groups = append(groups, g...)
		conds = append(conds, c)
	}
	if len(groups) == 0 {
		return access{}, false
	}
	orig := *s
	var residual []sem.Expr
	for i, e := range conj {
		if !implied[i] {
			residual = append(residual, e)
		}
	}
	scan := &plan.Scan{Table: s.Table, Index: idx, Inverted: &plan.InvertedScan{Groups: groups, Cond: and(conds)}}
	if idx.Blocks > 0 {
		scan.Buckets = buckets(s.Table, idx, cons)
	}
	var keyCols []sem.ColumnID
	have := map[rowenc.ColumnID]sem.ColumnID{}
	for i, c := range s.Cols {
		have[s.TableCols[i]] = c.ID
	}
	for _, pk := range s.Table.PrimaryIndex.KeyColumnIDs {
		id, ok := have[pk]
		kc := s.Table.ColumnByID(pk)
		hidden := !ok
		if !ok {
			id = o.newID()
		}
		scan.Cols = append(scan.Cols, plan.Column{ID: id, Name: kc.Name, T: kc.Type, Hidden: hidden, Table: s.Table.ID, TableCol: pk})
		scan.TableCols = append(scan.TableCols, pk)
		keyCols = append(keyCols, id)
	}
	// Estimates: each token matches about as many entries as one value
	// of a non-unique key (ginTokenSel of the rows when statistics say
	// how many there are); the rows found are those of one group.
	c := o.costs
	tokens := 0
	for _, g := range groups {
		tokens += len(g)
	}
	tableRows, perToken := c.TableRows, c.EqRows
	if ts := o.tableStats(s.Table); ts != nil {
		tableRows = math.Max(ts.RowCount, 1)
		perToken = math.Max(1, tableRows*ginTokenSel)
	}
	entries := min(perToken*float64(tokens), tableRows)
	rows := min(perToken, tableRows)
	o.rows[scan] = entries
	a := access{
		node: &plan.IndexJoin{Input: scan, Table: s.Table, KeyCols: keyCols, Cols: s.Cols, TableCols: s.TableCols,
			Filter: and(residual), Lock: s.Lock, LockWait: s.LockWait},
		scan: scan, orig: &orig, rows: rows,
	}
	size := o.tableSize(s.Table)
	a.cost = c.scanCost(entries, size) + c.lookupCost(rows, size)
	if c.IndexScanOff {
		a.cost += disableCost
	}
	return a, true
}

// invertedGroups returns the token groups conjunct e asks of a GIN index
// on table column col with operator class opclass, or false when the
// index cannot answer it (another column or operator, a non-constant
// operand, or a constant that every row matches, such as `@> '{}'`).
func invertedGroups(s *plan.Scan, col rowenc.ColumnID, opclass string, e sem.Expr) ([][][]byte, bool) {
	b, ok := e.(*sem.BinOp)
	if !ok {
		return nil, false
	}
	op := b.Op
	ref, k := b.Left, b.Right
	if _, isConst := b.Left.(*sem.Const); isConst {
		// constant <@ col is col @> constant; && commutes.
		switch op {
		case "<@":
			op = "@>"
		case "&&":
		default:
			return nil, false
		}
		ref, k = b.Right, b.Left
	}
	r, ok := ref.(*sem.ColRef)
	if !ok || !readsTableCol(s, r.ID, col) {
		return nil, false
	}
	kc, ok := k.(*sem.Const)
	if !ok || types.IsNull(kc.Datum) {
		return nil, false
	}
	each := func(toks [][]byte) [][][]byte {
		out := make([][][]byte, len(toks))
		for i, t := range toks {
			out[i] = [][]byte{t}
		}
		return out
	}
	keys := func() ([][]byte, bool) {
		a, ok := kc.Datum.(*types.DArray)
		if !ok {
			return nil, false
		}
		var out [][]byte
		for _, x := range a.Elems {
			if s, ok := x.(types.DString); ok {
				out = append(out, rowenc.JSONKeyToken(string(s)))
			}
		}
		return out, len(out) > 0
	}
	switch {
	case op == "@>" && (opclass == rowenc.JSONBOps || opclass == rowenc.JSONBPathOps):
		if _, ok := kc.Datum.(*types.DJSON); !ok {
			return nil, false
		}
		toks, err := rowenc.InvertedTokens(opclass, kc.Datum)
		if err != nil || len(toks) == 0 {
			return nil, false
		}
		return each(toks), true
	case op == "?" && opclass == rowenc.JSONBOps:
		s, ok := kc.Datum.(types.DString)
		if !ok {
			return nil, false
		}
		return [][][]byte{{rowenc.JSONKeyToken(string(s))}}, true
	case op == "?&" && opclass == rowenc.JSONBOps:
		toks, ok := keys()
		if !ok {
			return nil, false
		}
		return each(toks), true
	case op == "?|" && opclass == rowenc.JSONBOps:
		toks, ok := keys()
		if !ok {
			return nil, false
		}
		return [][][]byte{toks}, true
	case (op == "@>" || op == "&&") && opclass == rowenc.ArrayOps:
		if _, ok := kc.Datum.(*types.DArray); !ok {
			return nil, false
		}
		toks, err := rowenc.InvertedTokens(opclass, kc.Datum)
		if err != nil || len(toks) == 0 {
			return nil, false
		}
		if op == "&&" {
			return [][][]byte{toks}, true
		}
		return each(toks), true
	}
	return nil, false
}

// readsTableCol reports whether scan column id reads table column col.
func readsTableCol(s *plan.Scan, id sem.ColumnID, col rowenc.ColumnID) bool {
	for i, c := range s.Cols {
		if c.ID == id {
			return s.TableCols[i] == col
		}
	}
	return false
}
