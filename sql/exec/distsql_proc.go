package exec

// The SQL a distributed fragment runs (issue 17): what the gateway puts
// in distsql.Spec.Proc and how a node runs it over its span.
//
// A fragment's processing is a little plan in a fixed shape, carried as
// JSON with its expressions as SQL text (docs/architecture.md,
// "Distributed execution"):
//
//	scan of the span (the table's descriptor, one index, the columns
//	  read, named _c1.._cn; Filter and HardLimit as plan.Scan's), or
//	  (Inverted) an index join of the rows an inverted scan of a local
//	  GIN index finds in the span's blocks, Filter its recheck
//	→ Exprs over _c1.._cn (none: the scan's columns)
//	→ either a partial GROUP BY (Group: positions among the outputs,
//	  Aggs: the parts of builtins.PartialOf), or a sort (Order) and/or
//	  a limit (Limit) of the outputs
//
// The remote builds plan nodes from it and runs them with this package's
// own operators, so a fragment filters, projects, aggregates and sorts as
// a local statement would: with work_mem, spilling and the node's memory
// budget. It reads through a snapshot transaction at the gateway's
// timestamp (kv.NewSnapshotTxn; distsql invariant 2).
//
// The gateway only ships an expression whose text builds back to the
// same expression (shipExpr checks it by building it as the remote will),
// and only expressions that mean the same on any node: immutable
// functions and operators, no parameters, subqueries or session-dependent
// casts (shippable).

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/distsql"
	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// fragProc is a fragment's processing (distsql.Spec.Proc).
type fragProc struct {
	Table     json.RawMessage   `json:"table"` // catalog.Encode of the table
	Index     catalog.IndexID   `json:"index"`
	Cols      []rowenc.ColumnID `json:"cols"`
	Filter    string            `json:"filter,omitempty"`
	HardLimit int64             `json:"hard_limit,omitempty"`
	Exprs     []string          `json:"exprs,omitempty"`
	Group     []int             `json:"group,omitempty"`
	Aggs      []fragAgg         `json:"aggs,omitempty"`
	Grouped   bool              `json:"grouped,omitempty"` // aggregate (Aggs may be empty: SELECT DISTINCT-like GROUP BY)
	Streamed  bool              `json:"streamed,omitempty"`
	Order     []fragOrder       `json:"order,omitempty"`
	Limit     int64             `json:"limit,omitempty"`
	// WorkMem is the gateway session\'s work_mem: a fragment\'s operators
	// spill past it as the statement\'s would locally.
	WorkMem int64 `json:"work_mem,omitempty"`
	// Join, when set, makes the fragment a join (distsql_join.go): the
	// scan above is one of its inputs (none for a repartition consumer).
	Join *fragJoin `json:"join,omitempty"`
	// Partition, when set, keeps only the rows of one hash partition
	// (a repartitioned join's producer).
	Partition *fragPartition `json:"partition,omitempty"`
	// Inverted, when set, makes the scan above an index join (on the
	// primary index, Index) of the rows an inverted scan of a local GIN
	// index finds in the fragment's span: Filter is the join's.
	Inverted *fragInverted `json:"inverted,omitempty"`
}

// fragInverted is the inverted scan under a fragment's index join
// (distInvertedChain): the GIN index, the token groups (plan.InvertedScan),
// the primary-key columns it yields (in key order) and the buckets a
// predicate fixed (nil: all).
type fragInverted struct {
	Index   catalog.IndexID   `json:"index"`
	Groups  [][][]byte        `json:"groups"`
	KeyCols []rowenc.ColumnID `json:"key_cols"`
	Buckets []uint16          `json:"buckets,omitempty"`
}

// invertedKeyColID numbers the columns of a fragment's inverted scan
// (its primary-key columns), clear of the scan columns (1..n) and of
// the outputs and aggregates numbered after them.
const invertedKeyColID = 1 << 30

// fragAgg is one partial aggregate: the function Name over the outputs
// at Args (none and Star for count(*)).
type fragAgg struct {
	Name string `json:"name"`
	Star bool   `json:"star,omitempty"`
	Args []int  `json:"args,omitempty"`
}

// fragOrder is one sort key over the outputs.
type fragOrder struct {
	Pos        int  `json:"pos"`
	Desc       bool `json:"desc,omitempty"`
	NullsFirst bool `json:"nulls_first,omitempty"`
}

// fragColName is how expressions name the scan's i-th column (0-based).
func fragColName(i int) string { return "_c" + strconv.Itoa(i+1) }

// fragScope resolves _c1.._cn for sem.Build.
type fragScope []plan.Column

func (s fragScope) Resolve(fields []string) (sem.ColumnID, *types.T, string, error) {
	if len(fields) == 1 && strings.HasPrefix(fields[0], "_c") {
		if i, err := strconv.Atoi(fields[0][2:]); err == nil && i >= 1 && i <= len(s) {
			c := s[i-1]
			return c.ID, c.T, c.Name, nil
		}
	}
	return 0, nil, "", sem.ErrUndefinedColumn(fields...)
}

// buildFragExpr builds one shipped expression over cols, as both the
// gateway (checking) and the remote (running) do.
func buildFragExpr(text string, cols []plan.Column, want *types.T) (sem.Expr, error) {
	res, err := pg_query.Parse("SELECT " + text)
	if err != nil {
		return nil, fmt.Errorf("exec: fragment expression %q: %w", text, err)
	}
	stmts := res.GetStmts()
	if len(stmts) != 1 || stmts[0].Stmt.GetSelectStmt() == nil || len(stmts[0].Stmt.GetSelectStmt().TargetList) != 1 {
		return nil, pgerror.New(pgerrcode.ProtocolViolation, "exec: fragment expression %q is not one expression", text)
	}
	node := stmts[0].Stmt.GetSelectStmt().TargetList[0].GetResTarget().Val
	return sem.Build(sem.BuildContext{Scope: fragScope(cols), Clause: "distributed fragment"}, node, want)
}

// scanCols are the plan columns of a fragment's scan: IDs 1..n, named as
// fragColName.
func scanCols(t *catalog.Table, ids []rowenc.ColumnID) ([]plan.Column, error) {
	cols := make([]plan.Column, len(ids))
	for i, id := range ids {
		c := t.ColumnByID(id)
		if c == nil {
			return nil, pgerror.New(pgerrcode.InternalError, "exec: table %q has no column %d", t.Name, id)
		}
		cols[i] = plan.Column{ID: sem.ColumnID(i + 1), Name: fragColName(i), T: c.Type}
	}
	return cols, nil
}

// FragmentProcessor runs the SQL of the fragments other gateways send
// this node (distsql.Processor). Safe for concurrent use.
type FragmentProcessor struct {
	DB *kv.DB
	// Memory, WorkMem and TempStorage are the node's, as for local
	// statements (exec.Context).
	Memory      *mon.Budget
	WorkMem     int64
	TempStorage *rowcontainer.TempStorage
	// Runner is the node's distributed execution: a repartitioned
	// join's consumer starts its producers' flows through its gateway
	// (nil: this node refuses such fragments).
	Runner *distsql.Runner
}

var _ distsql.Processor = (*FragmentProcessor)(nil)

// Run implements distsql.Processor.
func (p *FragmentProcessor) Run(ctx context.Context, spec distsql.Spec, emit func(rows [][]byte) error) error {
	var fp fragProc
	if err := json.Unmarshal(spec.Proc, &fp); err != nil {
		return pgerror.New(pgerrcode.ProtocolViolation, "exec: corrupt distributed fragment: %v", err)
	}
	workMem := fp.WorkMem
	if workMem <= 0 {
		workMem = p.WorkMem
	}
	txn := p.DB.NewSnapshotTxn(ctx, "distsql fragment", spec.Snapshot.ReadTimestamp, spec.Snapshot.UncertaintyLimit)
	x := &Context{Txn: txn, Eval: &sem.EvalContext{}, Memory: p.Memory, WorkMem: workMem, TempStorage: p.TempStorage}
	r := newRunner(ctx, x, &plan.Plan{Tag: "SELECT", ReadOnly: true})
	defer r.release()
	r.fragSpan = &spec.Span
	var o op
	var err error
	if fp.Join != nil {
		o, err = p.runJoin(ctx, r, &fp, spec)
	} else {
		var root plan.Node
		if root, err = fp.plan(); err == nil {
			r.p.Root = root
			o, err = r.build(root)
		}
	}
	if err != nil {
		return err
	}
	defer o.Close()
	keep, err := fp.Partition.filter(fp.width())
	if err != nil {
		return err
	}
	var batch [][]byte
	for k := 0; ; k++ {
		row, err := nextChecked(ctx, o, k)
		if err != nil {
			return err
		}
		if row == nil {
			break
		}
		if keep != nil && !keep(row) {
			continue
		}
		b, err := rowcontainer.EncodeRow(nil, row)
		if err != nil {
			return pgerror.Wrapf(err, pgerrcode.FeatureNotSupported, "exec: distributed fragment: %v", err)
		}
		batch = append(batch, b)
		if len(batch) >= spec.BatchRows {
			if err := emit(batch); err != nil {
				return err
			}
			batch = nil
		}
	}
	if len(batch) > 0 {
		return emit(batch)
	}
	return nil
}

// width is how many outputs fp's chain has.
func (fp *fragProc) width() int {
	if fp.Exprs != nil {
		return len(fp.Exprs)
	}
	return len(fp.Cols)
}

// filter returns whether a row of width outputs belongs to pt's
// partition (nil: pt is nil, every row does). A row with a NULL key
// belongs to none: it matches nothing in an inner join.
func (pt *fragPartition) filter(width int) (func([]types.Datum) bool, error) {
	if pt == nil {
		return nil, nil
	}
	if pt.N <= 0 || pt.P < 0 || pt.P >= pt.N {
		return nil, pgerror.New(pgerrcode.ProtocolViolation, "exec: partition %d of %d", pt.P, pt.N)
	}
	for _, c := range pt.Cols {
		if c < 0 || c >= width {
			return nil, pgerror.New(pgerrcode.ProtocolViolation, "exec: partition key %d of %d outputs", c, width)
		}
	}
	var buf []byte
	return func(row []types.Datum) bool {
		if hasNull(row, pt.Cols) {
			return false
		}
		var err error
		if buf, err = hashKey(buf[:0], row, pt.Cols); err != nil {
			return false
		}
		return partitionOf(buf, pt.N) == pt.P
	}, nil
}

// plan builds the plan fp describes.
func (fp *fragProc) plan() (plan.Node, error) {
	top, _, err := fp.chainPlan()
	if err != nil {
		return nil, err
	}
	return fp.above(top)
}

// chainPlan builds fp's scan and the filter and outputs over it.
func (fp *fragProc) chainPlan() (plan.Node, *plan.Scan, error) {
	d, err := catalog.Decode(fp.Table)
	if err != nil {
		return nil, nil, pgerror.Wrapf(err, pgerrcode.ProtocolViolation, "exec: distributed fragment's table: %v", err)
	}
	t, ok := d.(*catalog.Table)
	if !ok {
		return nil, nil, pgerror.New(pgerrcode.ProtocolViolation, "exec: distributed fragment reads a %T, not a table", d)
	}
	if fp.Inverted != nil {
		return fp.invertedPlan(t)
	}
	scan := &plan.Scan{Table: t, TableCols: fp.Cols, HardLimit: fp.HardLimit, Ordered: true}
	if fp.Index != 0 && fp.Index != t.PrimaryIndex.ID {
		if scan.Index = t.IndexByID(fp.Index); scan.Index == nil {
			return nil, nil, pgerror.New(pgerrcode.ProtocolViolation, "exec: table %q has no index %d", t.Name, fp.Index)
		}
	}
	if scan.Cols, err = scanCols(t, fp.Cols); err != nil {
		return nil, nil, err
	}
	if fp.Filter != "" {
		if scan.Filter, err = buildFragExpr(fp.Filter, scan.Cols, types.Bool); err != nil {
			return nil, nil, err
		}
	}
	top, err := fp.project(scan, scan.Cols)
	return top, scan, err
}

// invertedPlan is chainPlan for an index join over an inverted scan
// (fp.Inverted): the scan reads the GIN index's entries in the
// fragment's span only (invertedOp), the join looks up their rows.
func (fp *fragProc) invertedPlan(t *catalog.Table) (plan.Node, *plan.Scan, error) {
	inv := fp.Inverted
	gin := t.IndexByID(inv.Index)
	if gin == nil || len(inv.Groups) == 0 || len(inv.KeyCols) == 0 {
		return nil, nil, pgerror.New(pgerrcode.ProtocolViolation, "exec: table %q has no GIN index %d to scan", t.Name, inv.Index)
	}
	scan := &plan.Scan{Table: t, Index: gin, TableCols: inv.KeyCols, Buckets: inv.Buckets, Inverted: &plan.InvertedScan{Groups: inv.Groups}}
	keyCols, err := scanCols(t, inv.KeyCols)
	if err != nil {
		return nil, nil, err
	}
	ij := &plan.IndexJoin{Input: scan, Table: t, TableCols: fp.Cols}
	for i, c := range keyCols {
		c.ID = invertedKeyColID + sem.ColumnID(i)
		scan.Cols = append(scan.Cols, c)
		ij.KeyCols = append(ij.KeyCols, c.ID)
	}
	if ij.Cols, err = scanCols(t, fp.Cols); err != nil {
		return nil, nil, err
	}
	if fp.Filter != "" {
		if ij.Filter, err = buildFragExpr(fp.Filter, ij.Cols, types.Bool); err != nil {
			return nil, nil, err
		}
	}
	top, err := fp.project(ij, ij.Cols)
	return top, scan, err
}

// project puts fp's output expressions over cols, the rows of in.
func (fp *fragProc) project(in plan.Node, cols []plan.Column) (plan.Node, error) {
	top := in
	if fp.Exprs != nil {
		pr := &plan.Project{Input: in}
		for i, text := range fp.Exprs {
			e, err := buildFragExpr(text, cols, nil)
			if err != nil {
				return nil, err
			}
			pr.Exprs = append(pr.Exprs, e)
			pr.Cols = append(pr.Cols, plan.Column{ID: sem.ColumnID(len(cols) + 1 + i), Name: "_e" + strconv.Itoa(i+1), T: e.Type()})
		}
		top = pr
	}
	return top, nil
}

// above builds fp's aggregation, sort and limit over the chain's top.
func (fp *fragProc) above(top plan.Node) (plan.Node, error) {
	scanWidth := len(fp.Cols)
	cols := top.Columns()
	at := func(i int) (plan.Column, error) {
		if i < 0 || i >= len(cols) {
			return plan.Column{}, pgerror.New(pgerrcode.ProtocolViolation, "exec: distributed fragment refers to output %d of %d", i, len(cols))
		}
		return cols[i], nil
	}
	if fp.Grouped {
		gb := &plan.GroupBy{Input: top, Ordered: fp.Streamed}
		for _, g := range fp.Group {
			c, err := at(g)
			if err != nil {
				return nil, err
			}
			gb.GroupCols = append(gb.GroupCols, c.ID)
			gb.Cols = append(gb.Cols, c)
		}
		next := sem.ColumnID(scanWidth + len(cols) + 1)
		for _, a := range fp.Aggs {
			agg := plan.Aggregate{Name: a.Name, Star: a.Star}
			var argTypes []*types.T
			for _, p := range a.Args {
				c, err := at(p)
				if err != nil {
					return nil, err
				}
				agg.Args = append(agg.Args, &sem.ColRef{ID: c.ID, T: c.T, Name: c.Name})
				argTypes = append(argTypes, c.T)
			}
			fn, err := builtins.ResolveFunc(a.Name, argTypes)
			if err != nil {
				return nil, err
			}
			if fn.Overload.NewAggregate == nil {
				return nil, pgerror.New(pgerrcode.ProtocolViolation, "exec: %s is not an aggregate", a.Name)
			}
			agg.Fn = fn
			gb.Aggs = append(gb.Aggs, agg)
			gb.Cols = append(gb.Cols, plan.Column{ID: next, Name: a.Name, T: fn.Return})
			next++
		}
		return gb, nil
	}
	if len(fp.Order) > 0 {
		s := &plan.Sort{Input: top}
		for _, o := range fp.Order {
			c, err := at(o.Pos)
			if err != nil {
				return nil, err
			}
			s.Order = append(s.Order, plan.Ordering{Col: c.ID, Desc: o.Desc, NullsFirst: o.NullsFirst})
		}
		if fp.Limit > 0 {
			s.Limit = &sem.Const{Datum: types.DInt(fp.Limit), T: types.Int8}
		}
		top = s
	}
	if fp.Limit > 0 {
		top = &plan.Limit{Input: top, Limit: &sem.Const{Datum: types.DInt(fp.Limit), T: types.Int8}}
	}
	return top, nil
}
