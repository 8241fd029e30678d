package plan

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// Explain renders p as PostgreSQL's EXPLAIN (COSTS OFF) prints a plan: one
// line per node ("->  " before every node but the root) and its details
// indented under it; annotate, when non-nil, returns extra text for a node
// (EXPLAIN ANALYZE figures): a first line that starts with "(" goes on
// the node's own line, as PostgreSQL prints "(actual time=...)", and the
// other lines are printed as detail lines after the node's.
// Nodes with no Postgres counterpart use Cairn's own names (Index Join,
// Lookup Join); projections are not shown, as in Postgres.
func Explain(p *Plan, annotate func(Node) string) []string {
	if p == nil || p.Root == nil {
		return nil
	}
	e := &explainer{annotate: annotate, names: map[sem.ColumnID]string{}}
	e.collectNames(p.Root)
	for _, sq := range p.Subqueries {
		e.collectNames(sq.Root)
	}
	for _, c := range p.CTEs {
		e.collectNames(c)
	}
	locked := false
	walkPlan(p.Root, func(n Node) {
		if sc, ok := n.(*Scan); ok && sc.Lock != LockNone {
			locked = true
		}
	})
	if locked {
		// Postgres locks the rows in a LockRows node above the plan.
		e.line(0, "LockRows")
		e.node(p.Root, 2, false)
	} else {
		e.node(p.Root, 0, true)
	}
	for i, c := range p.CTEs {
		e.line(2, fmt.Sprintf("CTE %s", e.cteName(i)))
		e.node(c, 4, false)
	}
	for _, sq := range p.Subqueries {
		if len(sq.Outer) > 0 {
			e.line(2, fmt.Sprintf("SubPlan %d", sq.ID))
		} else {
			e.line(2, fmt.Sprintf("InitPlan %d (returns $%d)", sq.ID, sq.ID-1))
		}
		e.node(sq.Root, 4, false)
	}
	return e.out
}

type explainer struct {
	out      []string
	annotate func(Node) string
	names    map[sem.ColumnID]string
	cteNames map[int]string
	// computed are the names of computed columns ("(k + 1)"); refNames
	// how the statement's expressions print plain columns ("t.a").
	computed map[sem.ColumnID]string
	refNames map[sem.ColumnID]string
}

func (e *explainer) cteName(id int) string {
	if n, ok := e.cteNames[id]; ok && n != "" {
		return n
	}
	return fmt.Sprintf("cte%d", id+1)
}

// collectNames remembers how each column prints (for sort and group keys,
// which hold IDs) and the CTEs' names.
func (e *explainer) collectNames(n Node) {
	if e.cteNames == nil {
		e.cteNames = map[int]string{}
		e.computed = map[sem.ColumnID]string{}
		e.refNames = map[sem.ColumnID]string{}
	}
	walkPlan(n, func(x Node) {
		for _, ex := range nodeExprs(x) {
			sem.Walk(ex, func(y sem.Expr) bool {
				if cr, ok := y.(*sem.ColRef); ok {
					if _, seen := e.refNames[cr.ID]; !seen {
						e.refNames[cr.ID] = cr.Name
					}
				}
				return true
			})
		}
	})
	walkPlanPost(n, func(x Node) {
		switch v := x.(type) {
		case *Project:
			for i, c := range v.Cols {
				if _, ok := e.names[c.ID]; ok {
					continue
				}
				if cr, ok := v.Exprs[i].(*sem.ColRef); ok {
					if n, ok := e.computed[cr.ID]; ok {
						e.computed[c.ID] = n
					}
					if n, ok := e.names[cr.ID]; ok {
						e.names[c.ID] = n
					} else {
						e.names[c.ID] = cr.Name
					}
				} else {
					// Postgres parenthesizes a computed sort or group key.
					e.names[c.ID] = "(" + v.Exprs[i].String() + ")"
					e.computed[c.ID] = e.names[c.ID]
				}
			}
		case *GroupBy:
			for _, c := range v.Cols[len(v.GroupCols):] {
				e.names[c.ID] = "(" + c.Name + ")"
				e.computed[c.ID] = e.names[c.ID]
			}
		case *Window:
			for _, c := range v.Cols[len(v.Input.Columns()):] {
				e.names[c.ID] = "(" + c.Name + ")"
				e.computed[c.ID] = e.names[c.ID]
			}
		case *CTEScan:
			e.cteNames[v.ID] = v.Name
		case *ProjectSet:
			for _, f := range v.Funcs {
				if len(f.Cols) == 1 {
					e.computed[f.Cols[0].ID] = "(" + f.Call.String() + ")"
				}
			}
		}
		for _, c := range x.Columns() {
			if _, ok := e.names[c.ID]; !ok {
				e.names[c.ID] = quoteIdentIfNeeded(c.Name)
			}
		}
	})
}

func (e *explainer) colName(id sem.ColumnID) string {
	if n, ok := e.computed[id]; ok {
		return n
	}
	if n, ok := e.refNames[id]; ok {
		return n
	}
	if n, ok := e.names[id]; ok {
		return n
	}
	return fmt.Sprintf("@%d", id)
}

func (e *explainer) line(indent int, s string) {
	e.out = append(e.out, strings.Repeat(" ", indent)+s)
}

// node prints n at indent: root nodes start at column indent, others with
// "->  "; details go 2 (root) or 6 columns in.
func (e *explainer) node(n Node, indent int, root bool) {
	// Projections, Max1Row and one-row inputs are invisible in Postgres's
	// EXPLAIN: print what they wrap.
	switch v := n.(type) {
	case *Project:
		if vv, ok := v.Input.(*Values); ok && isOneRow(vv) {
			break
		}
		e.node(v.Input, indent, root)
		return
	case *Max1Row:
		e.node(v.Input, indent, root)
		return
	}
	title, details, children := e.describe(n)
	var notes []string
	if e.annotate != nil && !isSynthetic(n) {
		a := e.annotate(n)
		if f, ok := n.(*Filter); ok {
			// The filter is printed as part of the node below it: that
			// node's figures, when the filter has none of its own, and
			// its detail lines (a distributed aggregate's fragments)
			// after the filter's.
			inner := e.annotate(f.Input)
			if a == "" {
				a = inner
			} else if i := strings.IndexByte(inner, '\n'); i >= 0 && strings.HasPrefix(inner, "(") {
				a += inner[i:]
			}
		}
		if a != "" {
			notes = strings.Split(strings.TrimRight(a, "\n"), "\n")
			if strings.HasPrefix(notes[0], "(") {
				// PostgreSQL prints the actual figures on the node's line.
				title += " " + notes[0]
				notes = notes[1:]
			}
		}
	}
	detailIndent := indent + 2
	if !root {
		e.line(indent, "->  "+title)
		detailIndent = indent + 6
	} else {
		e.line(indent, title)
	}
	for _, d := range details {
		e.line(detailIndent, d)
	}
	for _, l := range notes {
		e.line(detailIndent, l)
	}
	childIndent := detailIndent
	for _, c := range children {
		e.node(c, childIndent, false)
	}
}

// topKText is how many rows a top-k sort keeps: the sum when both are
// constants, else the expressions ($1 + $2).
func topKText(limit, offset sem.Expr) string {
	l, lok := limit.(*sem.Const)
	if offset == nil {
		return limit.String()
	}
	o, ook := offset.(*sem.Const)
	if lok && ook {
		li, lok := l.Datum.(types.DInt)
		oi, ook := o.Datum.(types.DInt)
		if lok && ook && li >= 0 && oi >= 0 && li <= math.MaxInt64-oi {
			return strconv.FormatInt(int64(li+oi), 10)
		}
	}
	return limit.String() + " + " + offset.String()
}

func isOneRow(v *Values) bool { return len(v.Rows) == 1 && len(v.Cols) == 0 }

func exprText(x sem.Expr) string {
	s := x.String()
	if strings.HasPrefix(s, "(") && strings.HasSuffix(s, ")") {
		return s
	}
	return "(" + s + ")"
}

func (e *explainer) describe(n Node) (title string, details []string, children []Node) {
	switch v := n.(type) {
	case *Scan:
		title = "Seq Scan on " + quoteIdentIfNeeded(v.Table.Name)
		if v.Inverted != nil && v.Index != nil {
			title = fmt.Sprintf("Inverted Index Scan using %s on %s", quoteIdentIfNeeded(v.Index.Name), quoteIdentIfNeeded(v.Table.Name))
			if v.Inverted.Cond != nil {
				details = append(details, "Index Cond: "+exprText(v.Inverted.Cond))
			}
			details = append(details, ginBlocks(v)...)
		} else if v.Index != nil && v.Index.ID != catalog.PrimaryIndexID || len(v.Spans) > 0 || v.Ordered || v.Reverse {
			idx := &v.Table.PrimaryIndex
			if v.Index != nil {
				idx = v.Index
			}
			kind := "Index Scan"
			if v.Reverse {
				kind += " Backward"
			}
			title = fmt.Sprintf("%s using %s on %s", kind, quoteIdentIfNeeded(idx.Name), quoteIdentIfNeeded(v.Table.Name))
			if c := spanCond(v.Table, idx, v.Spans); c != "" {
				details = append(details, "Index Cond: "+c)
			}
		}
		details = append(details, shardDetails(v)...)
		if v.Filter != nil {
			details = append(details, "Filter: "+exprText(v.Filter))
		}
		if v.HardLimit > 0 {
			details = append(details, fmt.Sprintf("Limit: %d", v.HardLimit))
		}
	case *IndexJoin:
		title = "Index Join on " + quoteIdentIfNeeded(v.Table.Name) + " (batched)"
		if v.Filter != nil {
			details = append(details, "Filter: "+exprText(v.Filter))
		}
		children = []Node{v.Input}
	case *LookupJoin:
		idx := &v.Table.PrimaryIndex
		if v.Index != nil {
			idx = v.Index
		}
		title = fmt.Sprintf("Lookup Join%s on %s using %s (batched)", joinKindWord(v.Kind), quoteIdentIfNeeded(v.Table.Name), quoteIdentIfNeeded(idx.Name))
		var conds []string
		for i, k := range v.KeyCols {
			if i < len(idx.KeyColumnIDs) {
				if c := v.Table.ColumnByID(idx.KeyColumnIDs[i]); c != nil {
					conds = append(conds, fmt.Sprintf("%s = %s", quoteIdentIfNeeded(c.Name), e.colName(k)))
				}
			}
		}
		if len(conds) > 0 {
			details = append(details, "Lookup Cond: ("+strings.Join(conds, " AND ")+")")
		}
		if rest := lookupResidual(v, idx); rest != nil {
			details = append(details, "Join Filter: "+exprText(rest))
		}
		children = []Node{v.Input}
	case *VirtualScan:
		title = "Virtual Scan on " + quoteIdentIfNeeded(v.Table.Name())
		if v.Filter != nil {
			details = append(details, "Filter: "+exprText(v.Filter))
		}
	case *Values:
		if len(v.Rows) == 1 {
			title = "Result"
		} else {
			title = `Values Scan on "*VALUES*"`
		}
	case *Project:
		title = "Result"
	case *Filter:
		// Postgres shows a filter on the node below it.
		t, d, c := e.describe(v.Input)
		if _, ok := v.Input.(*Project); ok {
			return "Result", []string{"Filter: " + exprText(v.Pred)}, []Node{v.Input}
		}
		return t, append(d, "Filter: "+exprText(v.Pred)), c
	case *Join:
		hash := len(v.LeftEq) > 0
		if hash && v.Merge {
			// PostgreSQL's form: both sides read in key order, no Hash
			// node.
			title = "Merge" + joinKindWord(v.Kind) + " Join"
			if v.Kind == InnerJoin {
				title = "Merge Join"
			}
			details = append(details, "Merge Cond: "+e.hashCond(v))
			if rest := residual(v.On, v.LeftEq, v.RightEq); rest != nil {
				details = append(details, "Join Filter: "+exprText(rest))
			}
			children = []Node{v.Left, v.Right}
		} else if hash {
			title = "Hash" + joinKindWord(v.Kind) + " Join"
			if v.Kind == InnerJoin {
				title = "Hash Join"
			}
			details = append(details, "Hash Cond: "+e.hashCond(v))
			if rest := residual(v.On, v.LeftEq, v.RightEq); rest != nil {
				details = append(details, "Join Filter: "+exprText(rest))
			}
			children = []Node{v.Left, &hashNode{v.Right}}
		} else {
			title = "Nested Loop" + joinKindWord(v.Kind)
			if v.Kind != InnerJoin {
				title += " Join"
			}
			if v.On != nil {
				details = append(details, "Join Filter: "+exprText(v.On))
			}
			children = []Node{v.Left, v.Right}
		}
	case *hashNode:
		title = "Hash"
		children = []Node{v.input}
	case *GroupBy:
		switch {
		case len(v.GroupCols) == 0:
			title = "Aggregate"
		case v.Ordered:
			title = "GroupAggregate"
		default:
			title = "HashAggregate"
		}
		if len(v.GroupCols) > 0 {
			var keys []string
			for _, id := range v.GroupCols {
				keys = append(keys, e.colName(id))
			}
			details = append(details, "Group Key: "+strings.Join(keys, ", "))
		}
		children = []Node{v.Input}
	case *Window:
		title = "WindowAgg"
		children = []Node{v.Input}
	case *Sort:
		title = "Sort"
		details = append(details, "Sort Key: "+e.orderText(v.Order))
		if v.Limit != nil {
			title = "Sort (top-k)"
			details = append(details, "Top-k: "+topKText(v.Limit, v.Offset))
		}
		children = []Node{v.Input}
	case *Limit:
		title = "Limit"
		children = []Node{v.Input}
	case *Distinct:
		title = "Unique"
		if len(v.On) == 0 {
			title = "HashAggregate"
			var keys []string
			for _, c := range v.Input.Columns() {
				if !c.Hidden {
					keys = append(keys, e.colName(c.ID))
				}
			}
			details = append(details, "Group Key: "+strings.Join(keys, ", "))
		}
		children = []Node{v.Input}
	case *SetOp:
		switch {
		case v.Kind == Union && v.All:
			title = "Append"
			children = []Node{v.Left, v.Right}
		case v.Kind == Union:
			title = "HashAggregate"
			var keys []string
			for _, c := range v.Cols {
				keys = append(keys, quoteIdentIfNeeded(c.Name))
			}
			details = append(details, "Group Key: "+strings.Join(keys, ", "))
			children = []Node{&appendNode{[]Node{v.Left, v.Right}}}
		default:
			word := "Intersect"
			if v.Kind == Except {
				word = "Except"
			}
			if v.All {
				word += " All"
			}
			title = "HashSetOp " + word
			children = []Node{&appendNode{[]Node{v.Left, v.Right}}}
		}
	case *appendNode:
		title = "Append"
		children = v.inputs
	case *RecursiveCTE:
		title = "Recursive Union"
		children = []Node{v.Init, v.Recursive}
	case *WorkTable:
		name := v.Name
		if name == "" {
			name = fmt.Sprintf("wt%d", v.ID)
		}
		title = "WorkTable Scan on " + quoteIdentIfNeeded(name)
	case *CTEScan:
		title = "CTE Scan on " + quoteIdentIfNeeded(e.cteName(v.ID))
	case *ProjectSet:
		if vv, ok := v.Input.(*Values); ok && isOneRow(vv) && len(v.Funcs) > 0 {
			var names []string
			for _, f := range v.Funcs {
				names = append(names, f.Call.Fn.Overload.Name())
			}
			title = "Function Scan on " + strings.Join(names, ", ")
			return title, nil, nil
		}
		title = "ProjectSet"
		children = []Node{v.Input}
	case *Max1Row:
		return e.describe(v.Input)
	case *Insert:
		title = "Insert on " + quoteIdentIfNeeded(v.Table.Name)
		if oc := v.OnConflict; oc != nil {
			if oc.DoNothing {
				details = append(details, "Conflict Resolution: NOTHING")
			} else {
				details = append(details, "Conflict Resolution: UPDATE")
			}
			if oc.Arbiter != nil {
				details = append(details, "Conflict Arbiter Indexes: "+quoteIdentIfNeeded(oc.Arbiter.Name))
			}
			if oc.Where != nil {
				details = append(details, "Conflict Filter: "+exprText(oc.Where))
			}
		}
		children = []Node{v.Input}
	case *Update:
		title = "Update on " + quoteIdentIfNeeded(v.Table.Name)
		children = []Node{v.Input}
	case *Delete:
		title = "Delete on " + quoteIdentIfNeeded(v.Table.Name)
		children = []Node{v.Input}
	default:
		title = fmt.Sprintf("%T", n)
	}
	return title, details, children
}

// hashNode and appendNode are the Hash and Append steps Postgres prints
// below a hash join and a set operation.
type hashNode struct{ input Node }
type appendNode struct{ inputs []Node }

// isSynthetic: a step only EXPLAIN shows; the executor has no figures
// for it.
func isSynthetic(n Node) bool {
	switch n.(type) {
	case *hashNode, *appendNode:
		return true
	}
	return false
}

func (h *hashNode) Columns() []Column   { return h.input.Columns() }
func (*hashNode) planNode()             {}
func (a *appendNode) Columns() []Column { return a.inputs[0].Columns() }
func (*appendNode) planNode()           {}

// lookupResidual is a lookup join's On without the key equalities the
// Lookup Cond line already shows.
func lookupResidual(v *LookupJoin, idx *catalog.Index) sem.Expr {
	if v.On == nil {
		return nil
	}
	keyOf := map[sem.ColumnID]rowenc.ColumnID{} // looked-up column -> table column
	for i, c := range v.Cols {
		if i < len(v.TableCols) {
			keyOf[c.ID] = v.TableCols[i]
		}
	}
	isKey := func(in, looked sem.ColumnID) bool {
		tc, ok := keyOf[looked]
		if !ok {
			return false
		}
		for i, k := range v.KeyCols {
			if k == in && i < len(idx.KeyColumnIDs) && idx.KeyColumnIDs[i] == tc {
				return true
			}
		}
		return false
	}
	conj := []sem.Expr{v.On}
	if a, ok := v.On.(*sem.And); ok {
		conj = a.Args
	}
	var rest []sem.Expr
	for _, c := range conj {
		if cmp, ok := c.(*sem.Cmp); ok && cmp.Op == sem.EQ {
			l, ok1 := cmp.Left.(*sem.ColRef)
			r, ok2 := cmp.Right.(*sem.ColRef)
			if ok1 && ok2 && (isKey(l.ID, r.ID) || isKey(r.ID, l.ID)) {
				continue
			}
		}
		rest = append(rest, c)
	}
	switch len(rest) {
	case 0:
		return nil
	case 1:
		return rest[0]
	}
	return &sem.And{Args: rest}
}

// nodeExprs are the scalar expressions a node holds.
func nodeExprs(n Node) []sem.Expr {
	var out []sem.Expr
	add := func(es ...sem.Expr) {
		for _, e := range es {
			if e != nil {
				out = append(out, e)
			}
		}
	}
	switch v := n.(type) {
	case *Scan:
		add(v.Filter)
	case *IndexJoin:
		add(v.Filter)
	case *LookupJoin:
		add(v.On)
	case *VirtualScan:
		add(v.Filter)
	case *Filter:
		add(v.Pred)
	case *Project:
		add(v.Exprs...)
	case *Join:
		add(v.On)
	}
	return out
}

func joinKindWord(k JoinKind) string {
	switch k {
	case LeftJoin:
		return " Left"
	case RightJoin:
		return " Right"
	case FullJoin:
		return " Full"
	case SemiJoin:
		return " Semi"
	case AntiJoin:
		return " Anti"
	}
	return ""
}

func (e *explainer) hashCond(j *Join) string {
	var parts []string
	conj := []sem.Expr{j.On}
	if a, ok := j.On.(*sem.And); ok {
		conj = a.Args
	}
	for _, c := range conj {
		if cmp, ok := c.(*sem.Cmp); ok && cmp.Op == sem.EQ {
			lc, ok1 := cmp.Left.(*sem.ColRef)
			rc, ok2 := cmp.Right.(*sem.ColRef)
			if ok1 && ok2 && isKeyPair(lc.ID, rc.ID, j.LeftEq, j.RightEq) {
				parts = append(parts, exprText(cmp))
			}
		}
	}
	if len(parts) == 0 {
		for i := range j.LeftEq {
			parts = append(parts, fmt.Sprintf("(%s = %s)", e.colName(j.LeftEq[i]), e.colName(j.RightEq[i])))
		}
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "(" + strings.Join(parts, " AND ") + ")"
}

// residual is On without the conjuncts LeftEq/RightEq already show.
func residual(on sem.Expr, l, r []sem.ColumnID) sem.Expr {
	conj := []sem.Expr{on}
	if a, ok := on.(*sem.And); ok {
		conj = a.Args
	}
	var rest []sem.Expr
	for _, c := range conj {
		if cmp, ok := c.(*sem.Cmp); ok && cmp.Op == sem.EQ {
			lc, ok1 := cmp.Left.(*sem.ColRef)
			rc, ok2 := cmp.Right.(*sem.ColRef)
			if ok1 && ok2 && isKeyPair(lc.ID, rc.ID, l, r) {
				continue
			}
		}
		rest = append(rest, c)
	}
	switch len(rest) {
	case 0:
		return nil
	case 1:
		return rest[0]
	}
	return &sem.And{Args: rest}
}

func isKeyPair(a, b sem.ColumnID, l, r []sem.ColumnID) bool {
	for i := range l {
		if l[i] == a && r[i] == b || l[i] == b && r[i] == a {
			return true
		}
	}
	return false
}

func (e *explainer) orderText(order []Ordering) string {
	var keys []string
	for _, o := range order {
		k := e.colName(o.Col)
		if o.Desc {
			k += " DESC"
			if !o.NullsFirst {
				k += " NULLS LAST"
			}
		} else if o.NullsFirst {
			k += " NULLS FIRST"
		}
		keys = append(keys, k)
	}
	return strings.Join(keys, ", ")
}

// partitionBuckets is the EXPLAIN line of a scan of a hash-partitioned
// table (a distributed table's shards) that equalities on its hash columns
// restrict to some of its buckets (Scan.Buckets): which ones, so a plan
// shows it reads only the shards holding them. A scan of every bucket has
// none.
func partitionBuckets(v *Scan) []string {
	if v.Buckets == nil || v.Table.Partitioning.Kind != catalog.PartitionHash {
		return nil
	}
	bs := make([]string, len(v.Buckets))
	for i, b := range v.Buckets {
		bs[i] = strconv.Itoa(int(b))
	}
	return []string{fmt.Sprintf("Buckets: %d of %d (%s)", len(bs), rowenc.NumBuckets, strings.Join(bs, ", "))}
}

// ginBlocks is the EXPLAIN line of an inverted scan of a local GIN index
// of a distributed table (catalog.Index.Blocks): how many of its blocks
// (one per shard when it was made) the scan reads, a span per token each.
func ginBlocks(v *Scan) []string {
	n := v.Index.Blocks
	if n == 0 {
		return nil
	}
	if v.Buckets == nil {
		return []string{fmt.Sprintf("Local Blocks: all %d (a span per token each)", n)}
	}
	seen := map[uint16]bool{}
	for _, b := range v.Buckets {
		seen[rowenc.BlockStart(b, n)] = true
	}
	return []string{fmt.Sprintf("Local Blocks: %d of %d", len(seen), n)}
}

// shardDetails are the EXPLAIN lines of a scan of a hash-sharded index:
// which buckets it reads, and how an ordered read merges them.
func shardDetails(v *Scan) []string {
	idx := &v.Table.PrimaryIndex
	if v.Index != nil {
		idx = v.Index
	}
	hs := idx.HashSharding
	if hs == nil {
		return partitionBuckets(v)
	}
	var buckets []string
	perBucket := len(v.Spans) > 0
	for _, sp := range v.Spans {
		if len(sp.Start) == 0 || len(sp.End) == 0 || types.Compare(sp.Start[0], sp.End[0]) != 0 {
			perBucket = false
			break
		}
		b := sp.Start[0].String()
		if len(buckets) == 0 || buckets[len(buckets)-1] != b {
			buckets = append(buckets, b)
		}
	}
	var out []string
	switch {
	case !perBucket:
		out = append(out, fmt.Sprintf("Buckets: all %d (one scan)", hs.Buckets))
	case len(buckets) == int(hs.Buckets):
		out = append(out, fmt.Sprintf("Buckets: all %d (a span each)", hs.Buckets))
	default:
		out = append(out, fmt.Sprintf("Buckets: %d of %d (%s)", len(buckets), hs.Buckets, strings.Join(buckets, ", ")))
	}
	if v.ShardMerge && v.Ordered {
		var cols []string
		for _, id := range idx.KeyColumnIDs[1:] {
			if c := v.Table.ColumnByID(id); c != nil {
				cols = append(cols, quoteIdentIfNeeded(c.Name))
			}
		}
		merge := fmt.Sprintf("Merge: %d bucket streams by (%s)", len(buckets), strings.Join(cols, ", "))
		if v.HardLimit > 0 {
			merge += fmt.Sprintf(", at most %d rows each", v.HardLimit)
		}
		out = append(out, merge)
	}
	return out
}

// spanCond prints index spans as Postgres prints an Index Cond. The
// spans of a hash-sharded index that repeat one condition in several
// buckets print once, after the buckets: (shard = ANY ('{0,1,2}')) AND ...
func spanCond(t0 *catalog.Table, idx *catalog.Index, spans []Span) string {
	if buckets, tail, ok := sameInEachBucket(spans); idx.HashSharding != nil && ok && len(buckets) > 1 {
		name := quoteIdentIfNeeded(t0.ColumnByID(idx.HashSharding.ShardColumnID).Name)
		in := fmt.Sprintf("(%s = ANY ('{%s}'))", name, strings.Join(buckets, ","))
		whole := true
		for _, t := range tail {
			whole = whole && len(t.Start) == 0 && len(t.End) == 0
		}
		if whole {
			return in
		}
		rest := spanCondFrom(t0, idx, tail, 1)
		return "(" + in + " AND " + rest + ")"
	}
	return spanCondFrom(t0, idx, spans, 0)
}

// sameInEachBucket reports whether spans are, bucket after bucket (the
// first key value), the same spans of the key columns after it; it
// returns the buckets and those spans.
func sameInEachBucket(spans []Span) (buckets []string, tail []Span, ok bool) {
	var first []Span
	var cur string
	for i, sp := range spans {
		if len(sp.Start) == 0 || len(sp.End) == 0 || types.Compare(sp.Start[0], sp.End[0]) != 0 {
			return nil, nil, false
		}
		b := sp.Start[0].String()
		if i == 0 || b != cur {
			buckets = append(buckets, b)
			cur = b
		}
		t := Span{Start: sp.Start[1:], End: sp.End[1:], StartExclusive: sp.StartExclusive, EndInclusive: sp.EndInclusive}
		if len(buckets) == 1 {
			first = append(first, t)
			continue
		}
		k := len(tail) % max(len(first), 1)
		if len(tail) >= len(first)*(len(buckets)-1) || !sameSpan(first[k], t) {
			return nil, nil, false
		}
		tail = append(tail, t)
	}
	if len(tail) != len(first)*(len(buckets)-1) {
		return nil, nil, false
	}
	return buckets, first, true
}

func sameSpan(a, b Span) bool {
	eq := func(x, y []types.Datum) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if types.Compare(x[i], y[i]) != 0 {
				return false
			}
		}
		return true
	}
	return a.StartExclusive == b.StartExclusive && a.EndInclusive == b.EndInclusive && eq(a.Start, b.Start) && eq(a.End, b.End)
}

// spanCondFrom is spanCond of spans over the key columns from off on.
func spanCondFrom(t0 *catalog.Table, idx *catalog.Index, spans []Span, off int) string {
	if len(spans) == 0 {
		return ""
	}
	var alts []string
	for _, sp := range spans {
		var conds []string
		name := func(i int) string {
			i += off
			if i < len(idx.KeyColumnIDs) {
				if c := t0.ColumnByID(idx.KeyColumnIDs[i]); c != nil {
					if c.IsIndexExpr() {
						return indexExprText(c.ComputedExpr)
					}
					return quoteIdentIfNeeded(c.Name)
				}
			}
			return fmt.Sprintf("key%d", i+1)
		}
		lit := func(i int, d types.Datum) string {
			i += off
			t := types.Text
			if i < len(idx.KeyColumnIDs) {
				if c := t0.ColumnByID(idx.KeyColumnIDs[i]); c != nil {
					t = c.Type
				}
			}
			switch d.Family() {
			case types.IntFamily, types.FloatFamily, types.NumericFamily:
				// Postgres shows a number as its literal (the constant
				// is int4 or numeric, compared cross-type).
				return d.String()
			}
			return (&sem.Const{Datum: d, T: t}).String()
		}
		eq := 0
		for eq < len(sp.Start) && eq < len(sp.End) && types.Compare(sp.Start[eq], sp.End[eq]) == 0 &&
			(eq < len(sp.Start)-1 || sp.EndInclusive && !sp.StartExclusive) {
			if types.IsNull(sp.Start[eq]) {
				conds = append(conds, name(eq)+" IS NULL")
			} else {
				conds = append(conds, fmt.Sprintf("%s = %s", name(eq), lit(eq, sp.Start[eq])))
			}
			eq++
		}
		// NULLs sort after every value in an ascending key, so a span
		// bounded above by NULL (exclusive) is the span's way of leaving
		// NULLs out: Postgres prints that as IS NOT NULL, or not at all
		// when a lower bound already excludes them.
		hasStart := eq < len(sp.Start)
		if hasStart {
			op := ">="
			if sp.StartExclusive {
				op = ">"
			}
			if types.IsNull(sp.Start[eq]) && !sp.StartExclusive && eq >= len(sp.End) {
				conds = append(conds, name(eq)+" IS NULL")
			} else {
				conds = append(conds, fmt.Sprintf("%s %s %s", name(eq), op, lit(eq, sp.Start[eq])))
			}
		}
		if eq < len(sp.End) {
			op := "<"
			if sp.EndInclusive {
				op = "<="
			}
			switch {
			case types.IsNull(sp.End[eq]) && !sp.EndInclusive && hasStart:
			case types.IsNull(sp.End[eq]) && !sp.EndInclusive:
				conds = append(conds, name(eq)+" IS NOT NULL")
			default:
				conds = append(conds, fmt.Sprintf("%s %s %s", name(eq), op, lit(eq, sp.End[eq])))
			}
		}
		if len(conds) == 1 {
			alts = append(alts, "("+conds[0]+")")
		} else {
			for i := range conds {
				conds[i] = "(" + conds[i] + ")"
			}
			alts = append(alts, "("+strings.Join(conds, " AND ")+")")
		}
	}
	if len(alts) == 1 {
		return alts[0]
	}
	return "(" + strings.Join(alts, " OR ") + ")"
}

// walkPlanPost visits every node below n, then n.
func walkPlanPost(n Node, f func(Node)) {
	if n == nil {
		return
	}
	for _, c := range planChildren(n) {
		walkPlanPost(c, f)
	}
	f(n)
}

// walkPlan visits n and every node below it (not subqueries').
func walkPlan(n Node, f func(Node)) {
	if n == nil {
		return
	}
	f(n)
	for _, c := range planChildren(n) {
		walkPlan(c, f)
	}
}

func planChildren(n Node) []Node {
	switch v := n.(type) {
	case *IndexJoin:
		return []Node{v.Input}
	case *LookupJoin:
		return []Node{v.Input}
	case *Filter:
		return []Node{v.Input}
	case *Project:
		return []Node{v.Input}
	case *Join:
		return []Node{v.Left, v.Right}
	case *GroupBy:
		return []Node{v.Input}
	case *Window:
		return []Node{v.Input}
	case *Sort:
		return []Node{v.Input}
	case *Limit:
		return []Node{v.Input}
	case *Distinct:
		return []Node{v.Input}
	case *SetOp:
		return []Node{v.Left, v.Right}
	case *RecursiveCTE:
		return []Node{v.Init, v.Recursive}
	case *ProjectSet:
		return []Node{v.Input}
	case *Max1Row:
		return []Node{v.Input}
	case *Insert:
		return []Node{v.Input}
	case *Update:
		return []Node{v.Input}
	case *Delete:
		return []Node{v.Input}
	}
	return nil
}

// indexExprText is how an index expression stands in an Index Cond, as
// PostgreSQL prints it: the expression, parenthesized unless it is one
// function call (its hidden column's name means nothing to the user).
func indexExprText(e string) string {
	if enclosed(e) {
		return e
	}
	i := 0
	for i < len(e) && (e[i] == '_' || e[i] == '.' || unicode.IsLetter(rune(e[i])) || unicode.IsDigit(rune(e[i]))) {
		i++
	}
	if i > 0 && enclosed(e[i:]) {
		return e
	}
	return "(" + e + ")"
}

// enclosed reports whether e is one parenthesized group: "(" whose
// matching ")" ends it (string literals aside, which index expressions
// print rarely enough that an extra pair of parentheses is the cost).
func enclosed(e string) bool {
	if !strings.HasPrefix(e, "(") || !strings.HasSuffix(e, ")") {
		return false
	}
	depth := 0
	for j := 0; j < len(e); j++ {
		switch e[j] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 && j != len(e)-1 {
				return false
			}
		}
	}
	return true
}
