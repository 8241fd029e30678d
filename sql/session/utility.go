package session

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/exec"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

var explainColumns = []plan.Column{{Name: "QUERY PLAN", T: types.Text}}

// explain runs EXPLAIN [ANALYZE] [(options)] over a plannable statement.
func (s *Session) explain(x *stmtState, st *parser.Statement, n *pg_query.ExplainStmt, w pgwire.ResultWriter, b *bound) error {
	analyze, costs, verbose := false, false, false
	summary := true // with ANALYZE, as in PostgreSQL; SUMMARY OFF drops it
	for _, o := range n.Options {
		de := o.GetDefElem()
		if de == nil {
			continue
		}
		v := "on"
		if de.Arg != nil {
			v, _ = constText(de.Arg)
		}
		switch de.Defname {
		case "analyze":
			on, err := checkBool(s, v)
			if err != nil {
				return pgerror.New(pgerrcode.SyntaxError, "analyze requires a Boolean value")
			}
			analyze = on == "on"
		case "format":
			if !strings.EqualFold(v, "text") {
				return notSupported("EXPLAIN (FORMAT %s) is not supported", strings.ToUpper(v))
			}
		case "costs":
			// Cairn prints the plan as PostgreSQL's COSTS OFF does; an
			// explicit COSTS ON adds the optimizer's row estimates.
			on, err := checkBool(s, v)
			if err != nil {
				return pgerror.New(pgerrcode.SyntaxError, "costs requires a Boolean value")
			}
			costs = on == "on"
		case "summary":
			on, err := checkBool(s, v)
			if err != nil {
				return pgerror.New(pgerrcode.SyntaxError, "summary requires a Boolean value")
			}
			summary = on == "on"
		case "verbose":
			// Cairn's VERBOSE adds, under each join the optimizer chose a
			// method for, that method's cost and the best rejected one's.
			on, err := checkBool(s, v)
			if err != nil {
				return pgerror.New(pgerrcode.SyntaxError, "verbose requires a Boolean value")
			}
			verbose = on == "on"
		case "settings", "buffers", "wal", "timing", "generic_plan":
			// Accepted; the text format prints what plan.Explain prints.
		default:
			return pgerror.New(pgerrcode.SyntaxError, "unrecognized EXPLAIN option %q", de.Defname)
		}
	}
	inner := *st
	inner.AST = &pg_query.RawStmt{Stmt: n.Query}
	if !isPlannable(&inner) {
		return notSupported("EXPLAIN of this statement is not supported")
	}
	if b == nil {
		b = &bound{}
	}
	var lines []string
	if analyze {
		stats := &exec.Stats{}
		start := time.Now()
		c, err := s.startPlan(x, &inner, b.paramTypes, b.params, stats)
		if err != nil {
			return err
		}
		defer c.close()
		planned := time.Now()
		if _, err := c.drain(x.ctx, discardWriter{}, 0); err != nil {
			return err
		}
		done := time.Now()
		lines = plan.Explain(c.p, stats.Annotate)
		if !s.block && s.txn != nil {
			// An implicit transaction commits right after the statement:
			// say how, as far as the coordinator can tell beforehand.
			l, err := commitLine(x.ctx, s.txn)
			if err != nil {
				return err
			}
			if l != "" {
				lines = append(lines, l)
			}
		}
		if summary {
			// PostgreSQL's summary lines, which tools read. Planning Time
			// covers building, optimizing and starting the plan (Cairn's
			// executor starts as it is planned); Execution Time the rest.
			ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d.Nanoseconds())/1e6, 'f', 3, 64) }
			lines = append(lines, "Planning Time: "+ms(planned.Sub(start))+" ms", "Execution Time: "+ms(done.Sub(planned))+" ms")
		}
	} else {
		txn, err := x.txn()
		if err != nil {
			return err
		}
		pt := sem.NewParamTypes(b.paramTypes...)
		p, err := plan.Build(x.ctx, s.planEnv(txn, pt, x.types()), &inner)
		if err != nil {
			return err
		}
		substituteParams(p, b.params, x.types())
		// The annotation of each node: estimated costs (and, VERBOSE, the
		// join choices) unless COSTS OFF, then where it would run.
		var base func(plan.Node) string
		switch {
		case verbose:
			est, choices, err := s.optimizeExplained(x.ctx, p)
			if err != nil {
				return err
			}
			if !costs {
				est = nil
			}
			base = verboseAnnotation(est, choices)
		case !costs:
			if err := s.optimize(x.ctx, p); err != nil {
				return err
			}
		default:
			est, err := s.optimizeEstimated(x.ctx, p)
			if err != nil {
				return err
			}
			base = estimateAnnotation(est)
		}
		// Which subtrees would run as distributed fragments, and where
		// (nil when none would).
		dist := exec.DistributionAnnotator(x.ctx, s.execContext(x, txn, b.params), p)
		annotate := base
		if dist != nil {
			annotate = func(n plan.Node) string {
				d := dist(n)
				if base == nil {
					return d
				}
				a := base(n)
				if d != "" {
					a += "\n" + d
				}
				return a
			}
		}
		lines = plan.Explain(p, annotate)
	}
	if err := w.BeginRows(describeColumns(explainColumns, nil)); err != nil {
		return err
	}
	for _, l := range lines {
		if err := w.WriteRow([][]byte{[]byte(l)}); err != nil {
			return err
		}
	}
	return w.Complete("EXPLAIN")
}

// commitLine is EXPLAIN ANALYZE's last line for a statement that wrote in
// an implicit transaction: the commit it leads to (kv.Txn.CommitPlan).
func commitLine(ctx context.Context, txn *kv.Txn) (string, error) {
	buffered, sent, onePhase, err := txn.CommitPlan(ctx)
	switch {
	case err != nil:
		return "", err
	case sent:
		return "Commit: two phases (writes sent as intents)", nil
	case buffered == 0:
		return "", nil
	case onePhase:
		return fmt.Sprintf("Commit: one phase (%d buffered writes on one tablet)", buffered), nil
	}
	return fmt.Sprintf("Commit: two phases (%d buffered writes on several tablets)", buffered), nil
}

// discardWriter swallows the rows of EXPLAIN ANALYZE.
type discardWriter struct{ pgwire.ResultWriter }

func (discardWriter) BeginRows([]pgwire.Column) error { return nil }
func (discardWriter) WriteRow([][]byte) error         { return nil }
func (discardWriter) Complete(string) error           { return nil }

// copy runs COPY ... FROM STDIN / TO STDOUT through the executor's COPY
// support: the format is announced first (CopyInResponse /
// CopyOutResponse), then the rows stream in the statement's transaction.
func (s *Session) copy(x *stmtState, n *pg_query.CopyStmt, w pgwire.ResultWriter) error {
	if n.Filename != "" || n.IsProgram {
		return notSupported("COPY to or from a file or program is not supported; use COPY ... FROM STDIN or TO STDOUT (psql's \\copy)")
	}
	if n.IsFrom && s.txnReadOnly {
		return readOnlyError("COPY FROM")
	}
	txn, err := x.txn()
	if err != nil {
		return err
	}
	env := s.planEnv(txn, sem.NewParamTypes(), x.types())
	if err := s.checkCopy(x.ctx, txn, env, n); err != nil {
		return err
	}
	binary, ncols, err := exec.CopyFormat(x.ctx, env, n)
	if err != nil {
		return err
	}
	f := pgwire.CopyFormat{Binary: binary, Columns: make([]int16, ncols)}
	if binary {
		for i := range f.Columns {
			f.Columns[i] = 1
		}
	}
	ec := s.execContext(x, txn, nil)
	var count int64
	if n.IsFrom {
		in, err := w.CopyIn(x.ctx, f)
		if err != nil {
			return err
		}
		if count, err = exec.CopyFrom(x.ctx, ec, env, n, in.Reader()); err != nil {
			return err
		}
		s.noteCopy(x, env, n, count)
	} else {
		out, err := w.CopyOut(f)
		if err != nil {
			return err
		}
		count, err = exec.CopyTo(x.ctx, ec, env, n, func(row []byte) error {
			_, err := out.Write(row)
			return err
		})
		if err != nil {
			return err
		}
		if err := out.Done(); err != nil {
			return err
		}
	}
	return w.Complete(rowsTag("COPY", count))
}

// sqlPrepared is a statement of SQL-level PREPARE.
type sqlPrepared struct {
	stmt       parser.Statement
	paramTypes []*types.T
}

// sqlPrepare runs PREPARE name [(types)] AS statement.
func (s *Session) sqlPrepare(x *stmtState, st *parser.Statement, n *pg_query.PrepareStmt, w pgwire.ResultWriter) error {
	if _, ok := s.prepared[n.Name]; ok {
		return pgerror.New(pgerrcode.DuplicatePreparedStatement, "prepared statement %q already exists", n.Name)
	}
	declared := make([]*types.T, len(n.Argtypes))
	for i, a := range n.Argtypes {
		t, err := sem.TypeFromAST(x.types(), a.GetTypeName())
		if err != nil {
			return err
		}
		declared[i] = t
	}
	inner := *st
	inner.AST = &pg_query.RawStmt{Stmt: n.Query}
	if !isPlannable(&inner) {
		return pgerror.New(pgerrcode.SyntaxError, "syntax error: PREPARE takes SELECT, VALUES, INSERT, UPDATE or DELETE")
	}
	txn, err := x.txn()
	if err != nil {
		return err
	}
	pt := sem.NewParamTypes(declared...)
	if _, err := plan.Build(x.ctx, s.planEnv(txn, pt, x.types()), &inner); err != nil {
		return err
	}
	pts, err := pt.Types()
	if err != nil {
		return err
	}
	s.prepared[n.Name] = &sqlPrepared{stmt: inner, paramTypes: pts}
	return w.Complete("PREPARE")
}

// sqlExecute runs EXECUTE name [(args)].
func (s *Session) sqlExecute(x *stmtState, n *pg_query.ExecuteStmt, w pgwire.ResultWriter) error {
	p, ok := s.prepared[n.Name]
	if !ok {
		return pgerror.New(pgerrcode.InvalidSQLStatementName, "prepared statement %q does not exist", n.Name)
	}
	if len(n.Params) != len(p.paramTypes) {
		return pgerror.New(pgerrcode.SyntaxError, "wrong number of parameters for prepared statement %q", n.Name).
			WithDetail("Expected %d parameters but got %d.", len(p.paramTypes), len(n.Params))
	}
	ev := &sem.EvalContext{Fn: &evalCtx{x: x}}
	params := make([]types.Datum, len(n.Params))
	for i, a := range n.Params {
		e, err := sem.BuildAssign(sem.BuildContext{Types: x.types(), Clause: "EXECUTE parameter"}, a, p.paramTypes[i], "")
		if err != nil {
			return err
		}
		if params[i], err = sem.Eval(ev, e, nil); err != nil {
			return err
		}
	}
	c, err := s.startPlan(x, &p.stmt, p.paramTypes, params, nil)
	if err != nil {
		return err
	}
	defer c.close()
	if c.returnsRows() {
		if err := w.BeginRows(c.columns(nil)); err != nil {
			return err
		}
	}
	_, err = c.drain(x.ctx, w, 0)
	return err
}

// sqlDeallocate runs DEALLOCATE [PREPARE] name | ALL.
func (s *Session) sqlDeallocate(n *pg_query.DeallocateStmt, w pgwire.ResultWriter) error {
	if n.Isall || n.Name == "" {
		s.prepared = make(map[string]*sqlPrepared)
		return w.Complete("DEALLOCATE ALL")
	}
	if _, ok := s.prepared[n.Name]; !ok {
		return pgerror.New(pgerrcode.InvalidSQLStatementName, "prepared statement %q does not exist", n.Name)
	}
	delete(s.prepared, n.Name)
	return w.Complete("DEALLOCATE")
}

// vacuum runs VACUUM and ANALYZE. VACUUM checks what Postgres checks (the
// relations exist; VACUUM is not in a block) and runs a GC pass over its
// tables now (vacuum.go). ANALYZE (and VACUUM (ANALYZE)) collects table
// statistics (analyze.go).
func (s *Session) vacuum(x *stmtState, n *pg_query.VacuumStmt, w pgwire.ResultWriter) error {
	tag := "ANALYZE"
	if n.IsVacuumcmd {
		tag = "VACUUM"
		if s.block || s.multiImplicit {
			return pgerror.New(pgerrcode.ActiveSQLTransaction, "VACUUM cannot run inside a transaction block")
		}
	}
	var targets []vacuumTarget
	if len(n.Rels) > 0 {
		txn, err := x.txn()
		if err != nil {
			return err
		}
		cat := s.resolver(txn)
		for _, r := range n.Rels {
			rv := r.GetVacuumRelation().GetRelation()
			if rv == nil {
				continue
			}
			rel, err := cat.LookupRelation(x.ctx, rv.Schemaname, rv.Relname)
			if err != nil {
				return err
			}
			if rel.Table == nil {
				continue
			}
			l, err := rel.Table.SharedLayout()
			if err != nil {
				return err
			}
			targets = append(targets, vacuumTarget{name: fmt.Sprintf("%q", rel.Table.Name), id: rel.Table.ID, spans: l.TableSpans()})
		}
	}
	if n.IsVacuumcmd {
		if err := s.collectGarbage(x.ctx, targets, len(n.Rels) == 0, hasOption(n.Options, "verbose"), w); err != nil {
			return err
		}
	}
	if !n.IsVacuumcmd || vacuumAnalyzes(n) {
		if err := s.analyze(x, n, w); err != nil {
			return err
		}
	}
	return w.Complete(tag)
}
