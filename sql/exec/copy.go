package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/pgwire/copyfmt"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/opt"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// COPY FROM STDIN and COPY TO STDOUT. The session announces the format
// (CopyFormat), hands CopyFrom the client's data stream or CopyTo a
// function sending one CopyData message, and reports "COPY n". Rows are
// split and joined by pgwire/copyfmt; this file turns fields into datums
// with the columns' input functions and back with their output functions.
// COPY FROM inserts through the same path as INSERT (inserter: defaults,
// generated columns, NOT NULL, CHECK, unique and foreign keys, batches of
// batchSize rows); into a table created in the same transaction it loads
// in bulk (bulk.go). Files and programs (COPY ... FROM 'file') are refused:
// the server's filesystem is not the client's business.

// copyOptions are a COPY statement's options, checked as PostgreSQL 15's
// ProcessCopyOptions checks them.
type copyOptions struct {
	fmt           copyfmt.Options
	headerMatch   bool
	forceQuote    []string
	forceQuoteAll bool
	forceNotNull  []string
	forceNull     []string
	from          bool
}

func syntaxErr(format string, args ...any) error {
	return pgerror.New(pgerrcode.SyntaxError, format, args...)
}

func defString(d *pg_query.DefElem) (string, bool) {
	if d.Arg == nil {
		return "", false
	}
	switch a := d.Arg.Node.(type) {
	case *pg_query.Node_String_:
		return a.String_.Sval, true
	case *pg_query.Node_Integer:
		return strconv.Itoa(int(a.Integer.Ival)), true
	case *pg_query.Node_Float:
		return a.Float.Fval, true
	case *pg_query.Node_Boolean:
		if a.Boolean.Boolval {
			return "true", true
		}
		return "false", true
	}
	return "", false
}

// defBool is defGetBoolean: no argument is true.
func defBool(d *pg_query.DefElem) (bool, error) {
	if d.Arg == nil {
		return true, nil
	}
	if b, ok := d.Arg.Node.(*pg_query.Node_Boolean); ok {
		return b.Boolean.Boolval, nil
	}
	if i, ok := d.Arg.Node.(*pg_query.Node_Integer); ok {
		switch i.Integer.Ival {
		case 0:
			return false, nil
		case 1:
			return true, nil
		}
	}
	if s, ok := defString(d); ok {
		switch strings.ToLower(s) {
		case "true", "on", "yes", "t", "y", "1":
			return true, nil
		case "false", "off", "no", "f", "n", "0":
			return false, nil
		}
	}
	return false, syntaxErr("%s requires a Boolean value", d.Defname)
}

func defColumnList(d *pg_query.DefElem) ([]string, bool, error) {
	if d.Arg != nil {
		switch a := d.Arg.Node.(type) {
		case *pg_query.Node_AStar:
			return nil, true, nil
		case *pg_query.Node_List:
			var names []string
			for _, n := range a.List.Items {
				s, ok := n.Node.(*pg_query.Node_String_)
				if !ok {
					break
				}
				names = append(names, s.String_.Sval)
			}
			if len(names) == len(a.List.Items) {
				return names, false, nil
			}
		}
	}
	return nil, false, pgerror.New(pgerrcode.InvalidParameterValue, "argument to option %q must be a list of column names", d.Defname)
}

func parseCopyOptions(stmt *pg_query.CopyStmt) (*copyOptions, error) {
	o := &copyOptions{from: stmt.IsFrom}
	seen := map[string]bool{}
	var delim, null, quote, escape *string
	formatSet := false
	for _, n := range stmt.Options {
		d := n.GetDefElem()
		if d == nil {
			continue
		}
		name := d.Defname
		if seen[name] {
			return nil, syntaxErr("conflicting or redundant options")
		}
		seen[name] = true
		switch name {
		case "format":
			s, _ := defString(d)
			switch s {
			case "text":
				o.fmt.Format = copyfmt.Text
			case "csv":
				o.fmt.Format = copyfmt.CSV
			case "binary":
				o.fmt.Format = copyfmt.Binary
			default:
				return nil, pgerror.New(pgerrcode.InvalidParameterValue, "COPY format %q not recognized", s)
			}
			formatSet = true
		case "freeze":
			// An optimization hint with nothing left to do: a table created
			// in the transaction, the case FREEZE is for, is bulk-loaded
			// anyway (bulk.go).
			if _, err := defBool(d); err != nil {
				return nil, err
			}
		case "delimiter", "null", "quote", "escape":
			s, ok := defString(d)
			if !ok {
				return nil, syntaxErr("%s requires a parameter", name)
			}
			switch name {
			case "delimiter":
				delim = &s
			case "null":
				null = &s
			case "quote":
				quote = &s
			case "escape":
				escape = &s
			}
		case "header":
			if s, ok := defString(d); ok && strings.EqualFold(s, "match") {
				if !stmt.IsFrom {
					return nil, pgerror.New(pgerrcode.FeatureNotSupported, "cannot use %q with HEADER in COPY TO", s)
				}
				o.fmt.Header, o.headerMatch = true, true
				break
			}
			b, err := defBool(d)
			if err != nil {
				return nil, syntaxErr("header requires a Boolean value or \"match\"")
			}
			o.fmt.Header = b
		case "force_quote":
			cols, all, err := defColumnList(d)
			if err != nil {
				return nil, err
			}
			o.forceQuote, o.forceQuoteAll = cols, all
		case "force_not_null", "force_null":
			cols, all, err := defColumnList(d)
			if err != nil || all {
				return nil, pgerror.New(pgerrcode.InvalidParameterValue, "argument to option %q must be a list of column names", name)
			}
			if name == "force_not_null" {
				o.forceNotNull = cols
			} else {
				o.forceNull = cols
			}
		case "encoding":
			s, _ := defString(d)
			switch strings.ToLower(strings.ReplaceAll(s, "-", "")) {
			case "utf8", "unicode", "sqlascii":
			default:
				return nil, pgerror.New(pgerrcode.FeatureNotSupported, "COPY encoding %q is not supported (only UTF8)", s)
			}
		default:
			return nil, syntaxErr("option %q not recognized", name)
		}
	}
	_ = formatSet
	binary, csv := o.fmt.Format == copyfmt.Binary, o.fmt.Format == copyfmt.CSV
	if binary && delim != nil {
		return nil, syntaxErr("cannot specify DELIMITER in BINARY mode")
	}
	if binary && null != nil {
		return nil, syntaxErr("cannot specify NULL in BINARY mode")
	}
	if binary && o.fmt.Header {
		return nil, syntaxErr("cannot specify HEADER in BINARY mode")
	}
	if delim != nil {
		if len(*delim) != 1 {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "COPY delimiter must be a single one-byte character")
		}
		o.fmt.Delimiter = (*delim)[0]
	}
	if null != nil {
		o.fmt.Null, o.fmt.NullSet = *null, true
	}
	if quote != nil {
		if !csv {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "COPY quote available only in CSV mode")
		}
		if len(*quote) != 1 {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "COPY quote must be a single one-byte character")
		}
		o.fmt.Quote = (*quote)[0]
	}
	if escape != nil {
		if !csv {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "COPY escape available only in CSV mode")
		}
		if len(*escape) != 1 {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "COPY escape must be a single one-byte character")
		}
		o.fmt.Escape = (*escape)[0]
	}
	if o.forceQuote != nil || o.forceQuoteAll {
		if !csv {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "COPY force quote available only in CSV mode")
		}
		if stmt.IsFrom {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "COPY force quote only available using COPY TO")
		}
	}
	if o.forceNotNull != nil {
		if !csv {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "COPY force not null available only in CSV mode")
		}
		if !stmt.IsFrom {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "COPY force not null only available using COPY FROM")
		}
	}
	if o.forceNull != nil {
		if !csv {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "COPY force null available only in CSV mode")
		}
		if !stmt.IsFrom {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "COPY force null only available using COPY FROM")
		}
	}
	if err := o.fmt.Validate(); err != nil {
		return nil, err
	}
	// The defaults copyfmt applies, made explicit for FORCE NOT NULL and
	// FORCE NULL, which compare fields with the NULL string.
	if !o.fmt.NullSet {
		if csv {
			o.fmt.Null = ""
		} else {
			o.fmt.Null = `\N`
		}
	}
	return o, nil
}

// copyTarget is what a COPY reads or writes: a table's columns, or a
// query's.
type copyTarget struct {
	table *catalog.Table
	// pos are the table positions of the copied columns.
	pos []int
	// query is COPY (query) TO's bound plan.
	query *plan.Plan
	names []string
	typs  []*types.T
}

func (c *copyTarget) width() int { return len(c.typs) }

// resolveCopy resolves the statement's relation and column list, or binds
// its query.
func resolveCopy(ctx context.Context, env *plan.Env, stmt *pg_query.CopyStmt) (*copyTarget, error) {
	if stmt.Filename != "" || stmt.IsProgram {
		return nil, pgerror.New(pgerrcode.FeatureNotSupported, "COPY to or from a file or program is not supported").
			WithHint("Use COPY ... FROM STDIN or TO STDOUT (psql's \\copy).")
	}
	if stmt.Query != nil {
		if stmt.IsFrom {
			return nil, syntaxErr("COPY FROM does not accept a query")
		}
		// The binder takes a parsed statement: print the query back to SQL
		// (in the parse tree format of this pg_query build) and parse it.
		ver, err := pg_query.Parse("SELECT")
		if err != nil {
			return nil, pgerror.Wrapf(err, pgerrcode.InternalError, "COPY query")
		}
		sql, err := pg_query.Deparse(&pg_query.ParseResult{Version: ver.Version, Stmts: []*pg_query.RawStmt{{Stmt: stmt.Query}}})
		if err != nil {
			return nil, pgerror.Wrapf(err, pgerrcode.InternalError, "COPY query")
		}
		stmts, err := parser.Parse(sql)
		if err != nil {
			return nil, err
		}
		if len(stmts) != 1 {
			return nil, syntaxErr("COPY query must be one statement")
		}
		p, err := plan.Build(ctx, env, &stmts[0])
		if err != nil {
			return nil, err
		}
		if err := opt.Optimize(ctx, p); err != nil {
			return nil, err
		}
		if p.Columns == nil {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "COPY query must have a RETURNING clause")
		}
		t := &copyTarget{query: p}
		for _, c := range p.Columns {
			t.names = append(t.names, c.Name)
			t.typs = append(t.typs, c.T)
		}
		return t, nil
	}
	if stmt.Relation == nil {
		return nil, syntaxErr("COPY needs a table or a query")
	}
	rel, err := env.Catalog.LookupRelation(ctx, stmt.Relation.Schemaname, stmt.Relation.Relname)
	if err != nil {
		return nil, err
	}
	dir := "from"
	if stmt.IsFrom {
		dir = "to"
	}
	switch {
	case rel.View != nil:
		e := pgerror.New(pgerrcode.WrongObjectType, "cannot copy %s view %q", dir, rel.View.Name)
		if stmt.IsFrom {
			return nil, e.WithHint("To enable copying to a view, provide an INSTEAD OF INSERT trigger.")
		}
		return nil, e.WithHint("Try the COPY (SELECT ...) TO variant.")
	case rel.Sequence != nil:
		return nil, pgerror.New(pgerrcode.WrongObjectType, "cannot copy %s sequence %q", dir, rel.Sequence.Name)
	case rel.Virtual != nil:
		if stmt.IsFrom {
			return nil, pgerror.New(pgerrcode.InsufficientPrivilege, "permission denied: %q is a system catalog", rel.Virtual.Name())
		}
		return virtualCopy(rel.Virtual, stmt)
	case rel.Table == nil:
		return nil, pgerror.New(pgerrcode.UndefinedTable, "relation %q does not exist", stmt.Relation.Relname)
	}
	tb := rel.Table
	t := &copyTarget{table: tb}
	add := func(i int) {
		t.pos = append(t.pos, i)
		t.names = append(t.names, tb.Columns[i].Name)
		t.typs = append(t.typs, tb.Columns[i].Type)
	}
	if len(stmt.Attlist) == 0 {
		for i, c := range tb.Columns {
			// PostgreSQL 15 leaves generated columns out of COPY.
			if c.Hidden || c.ComputedExpr != "" {
				continue
			}
			add(i)
		}
		return t, nil
	}
	seen := map[int]bool{}
	for _, n := range stmt.Attlist {
		name := n.GetString_().GetSval()
		if rt := n.GetResTarget(); rt != nil {
			name = rt.Name
		}
		i := -1
		for j, c := range tb.Columns {
			if c.Name == name {
				i = j
				break
			}
		}
		if i < 0 {
			return nil, pgerror.New(pgerrcode.UndefinedColumn, "column %q of relation %q does not exist", name, tb.Name)
		}
		if tb.Columns[i].ComputedExpr != "" {
			return nil, pgerror.New(pgerrcode.InvalidColumnReference, "column %q is a generated column", name).
				WithDetail("Generated columns cannot be used in COPY.")
		}
		if seen[i] {
			return nil, pgerror.New(pgerrcode.DuplicateColumn, "column %q specified more than once", name)
		}
		seen[i] = true
		add(i)
	}
	return t, nil
}

// virtualCopy is COPY of a system catalog TO STDOUT: a plan reading the
// virtual table's rows.
func virtualCopy(vt plan.VirtualTable, stmt *pg_query.CopyStmt) (*copyTarget, error) {
	vcols := vt.Columns()
	var idx []int
	if len(stmt.Attlist) == 0 {
		for i := range vcols {
			idx = append(idx, i)
		}
	} else {
		seen := map[int]bool{}
		for _, n := range stmt.Attlist {
			name := n.GetString_().GetSval()
			if rt := n.GetResTarget(); rt != nil {
				name = rt.Name
			}
			i := slices.IndexFunc(vcols, func(c plan.VirtualColumn) bool { return c.Name == name })
			if i < 0 {
				return nil, pgerror.New(pgerrcode.UndefinedColumn, "column %q of relation %q does not exist", name, vt.Name())
			}
			if seen[i] {
				return nil, pgerror.New(pgerrcode.DuplicateColumn, "column %q specified more than once", name)
			}
			seen[i] = true
			idx = append(idx, i)
		}
	}
	scan := &plan.VirtualScan{Table: vt, ColIdx: idx}
	t := &copyTarget{}
	for j, i := range idx {
		scan.Cols = append(scan.Cols, plan.Column{ID: sem.ColumnID(j + 1), Name: vcols[i].Name, T: vcols[i].T})
		t.names = append(t.names, vcols[i].Name)
		t.typs = append(t.typs, vcols[i].T)
	}
	t.query = &plan.Plan{Root: scan, Columns: scan.Cols, Tag: "SELECT", ReadOnly: true}
	return t, nil
}

// CopyFormat checks a COPY statement's options and target and reports what
// the session announces in CopyInResponse / CopyOutResponse: whether the
// format is binary and how many columns each row has. Its errors are the
// statement's (they must reach the client before the COPY starts).
func CopyFormat(ctx context.Context, env *plan.Env, stmt *pg_query.CopyStmt) (binary bool, ncols int, err error) {
	o, err := parseCopyOptions(stmt)
	if err != nil {
		return false, 0, err
	}
	t, err := resolveCopy(ctx, env, stmt)
	if err != nil {
		return false, 0, err
	}
	return o.fmt.Format == copyfmt.Binary, t.width(), nil
}

// copyLineError adds "COPY t, line n[, column c: "v"]" to a row's error
// as its CONTEXT, as PostgreSQL reports it. Errors without a SQLSTATE (KV
// errors that drive retries) pass unchanged.
func copyLineError(err error, table string, line int, col, val string) error {
	if _, ok := errors.AsType[*pgerror.Error](err); !ok {
		return err
	}
	pe := pgerror.Flatten(err)
	where := fmt.Sprintf("COPY %s, line %d", table, line)
	if col != "" {
		if len(val) > 100 {
			val = clip(val, 100) + "..."
		}
		where += fmt.Sprintf(", column %s: %q", col, val)
	}
	if pe.Where != "" {
		where = pe.Where + "\n" + where
	}
	return pe.WithWhere("%s", where)
}

func badCopyData(format string, args ...any) error {
	return pgerror.New(pgerrcode.BadCopyFileFormat, format, args...)
}

// CopyFrom runs COPY table [(cols)] FROM STDIN [WHERE ...] over src (the
// client's data) and returns the number of rows inserted. It reads src to
// its end whatever happens (data after the end marker, or after a row
// that failed, is discarded as PostgreSQL discards it), so the protocol
// is back at CopyDone when it returns; an error reading src (CopyFail) is
// returned as is.
func CopyFrom(ctx context.Context, x *Context, env *plan.Env, stmt *pg_query.CopyStmt, src io.Reader) (int64, error) {
	n, err := copyFrom(ctx, x, env, stmt, src)
	if _, derr := io.Copy(io.Discard, src); derr != nil && err == nil {
		err = derr
	}
	return n, err
}

func copyFrom(ctx context.Context, x *Context, env *plan.Env, stmt *pg_query.CopyStmt, src io.Reader) (int64, error) {
	if !stmt.IsFrom {
		return 0, pgerror.New(pgerrcode.InternalError, "exec: CopyFrom of COPY TO")
	}
	o, err := parseCopyOptions(stmt)
	if err != nil {
		return 0, err
	}
	t, err := resolveCopy(ctx, env, stmt)
	if err != nil {
		return 0, err
	}
	tb := t.table
	s := newDMLState(x, nil)
	// Bulk batches still being written end before the statement does,
	// whatever its outcome.
	defer s.waitBulk()
	s.copyLines = true
	if nt, err := bulkLoadTable(ctx, x, tb, true); err != nil {
		return 0, err
	} else if nt != nil {
		tb, s.bulk = nt, true
	}
	if env != nil && env.Types != nil {
		s.setTypesCtx(env.Types)
	}
	ti, err := s.table(tb)
	if err != nil {
		return 0, err
	}
	if err := ti.buildText(); err != nil {
		return 0, err
	}
	var count int64
	in := &inserter{s: s, count: &count}
	in.spec.ti = ti
	in.spec.computed = make([]rowFn, len(tb.Columns))
	for i, ev := range ti.computed {
		if ev != nil {
			ev := ev
			in.spec.computed[i] = func(row []types.Datum) (types.Datum, error) { return ev(s.ev, row) }
		}
	}
	for _, ck := range ti.checks {
		ck := ck
		in.spec.checks = append(in.spec.checks, planCheck{name: ck.name, eval: func(row []types.Datum) (types.Datum, error) {
			return ck.eval(s.ev, row)
		}})
	}
	var where sem.Evaluator
	if stmt.WhereClause != nil {
		e, err := sem.Build(sem.BuildContext{Scope: tableScope{tb}, Types: s.typesCtx(), Clause: "COPY FROM WHERE"}, stmt.WhereClause, types.Bool)
		if err != nil {
			return 0, err
		}
		// The WHERE sees the row before its generated columns are computed.
		generated := ""
		sem.Walk(e, func(x sem.Expr) bool {
			if c, ok := x.(*sem.ColRef); ok && generated == "" && tb.Columns[c.ID].ComputedExpr != "" {
				generated = tb.Columns[c.ID].Name
			}
			return generated == ""
		})
		if generated != "" {
			return 0, pgerror.New(pgerrcode.FeatureNotSupported, "generated columns are not supported in COPY FROM WHERE conditions").
				WithDetail("Column %q is a generated column.", generated)
		}
		if where, err = sem.Compile(e, nil); err != nil {
			return 0, err
		}
	}
	// Which copied columns FORCE NOT NULL / FORCE NULL name.
	forceNotNull, err := copyColumnFlags(t, tb, o.forceNotNull, "FORCE_NOT_NULL")
	if err != nil {
		return 0, err
	}
	forceNull, err := copyColumnFlags(t, tb, o.forceNull, "FORCE_NULL")
	if err != nil {
		return 0, err
	}
	given := make([]bool, len(tb.Columns))
	for _, p := range t.pos {
		given[p] = true
	}
	fo := o.fmt
	fo.Header = false // read here, to check HEADER MATCH
	rd := copyfmt.NewReader(src, fo)
	tctx := typesCtx(x)
	if env != nil && env.Types != nil {
		tctx = env.Types
	}
	binary := fo.Format == copyfmt.Binary
	domains, err := copyDomains(tb, given, tctx)
	if err != nil {
		return 0, err
	}
	parse := &copyParser{rd: rd, t: t, tb: tb, o: o, forceNotNull: forceNotNull, forceNull: forceNull,
		tctx: tctx, binary: binary, header: o.fmt.Header}
	batches, stop := parse.start(ctx)
	defer stop()
	for batch := range batches {
		for _, pr := range batch.rows {
			row, line := pr.row, pr.line
			if line%checkEvery == 0 {
				if err := ctx.Err(); err != nil {
					return 0, err
				}
			}
			for i := range row {
				if given[i] {
					continue
				}
				row[i] = types.DNull
				ev, err := ti.defaultEval(i)
				if err != nil {
					return 0, err
				}
				if ev != nil {
					if row[i], err = ev(s.ev, nil); err != nil {
						return 0, copyLineError(err, tb.Name, line, "", "")
					}
				} else if d := domains[i].def; d != nil {
					if row[i], err = d(s.ev, nil); err != nil {
						return 0, copyLineError(err, tb.Name, line, "", "")
					}
				}
			}
			for i, d := range domains {
				if d.check != nil {
					if _, err := d.check(s.ev, row); err != nil {
						if !given[i] {
							return 0, copyLineError(err, tb.Name, line, "", "")
						}
						return 0, copyDomainError(err, tb.Name, line, tb.Columns[i].Name, tctx, tb.Columns[i].Type, row[i])
					}
				}
			}
			if where != nil {
				d, err := where(s.ev, row)
				if err != nil {
					return 0, copyLineError(err, tb.Name, line, "", "")
				}
				if b, ok := d.(types.DBool); !ok || !bool(b) {
					continue
				}
			}
			// The row's own constraint errors name its line; a failed
			// uniqueness condition is found when the batch runs and names the
			// line of the row that failed (dmlState.flush).
			if err := in.spec.finish(s, row); err != nil {
				return 0, copyLineError(err, tb.Name, line, "", "")
			}
			s.curLine = line
			if err := in.insertFinished(ctx, row, nil); err != nil {
				return 0, err
			}
		}
		if batch.err != nil {
			return 0, batch.err
		}
	}
	if err := s.flush(ctx); err != nil {
		return 0, err
	}
	if err := s.finishFKs(ctx); err != nil {
		return 0, err
	}
	return count, nil
}

// copyColumnFlags marks the copied columns named in a FORCE_* list.
func copyColumnFlags(t *copyTarget, tb *catalog.Table, names []string, option string) ([]bool, error) {
	flags := make([]bool, t.width())
	for _, n := range names {
		i := -1
		for j, c := range t.names {
			if c == n {
				i = j
			}
		}
		if i < 0 {
			if tb.ColumnByName(n) == nil {
				return nil, pgerror.New(pgerrcode.UndefinedColumn, "column %q of relation %q does not exist", n, tb.Name)
			}
			return nil, pgerror.New(pgerrcode.InvalidColumnReference, "%s column %q not referenced by COPY", option, n)
		}
		flags[i] = true
	}
	return flags, nil
}

// checkHeader is HEADER MATCH: the header line must name the copied
// columns in order.
func checkHeader(t *copyTarget, fields [][]byte, null string) error {
	if len(fields) != t.width() {
		return badCopyData("wrong number of fields in header line: got %d, expected %d", len(fields), t.width())
	}
	for i, f := range fields {
		if f == nil {
			return badCopyData("column name mismatch in header line field %d: got null value (\"%s\"), expected \"%s\"", i+1, null, t.names[i])
		}
		if string(f) != t.names[i] {
			return badCopyData("column name mismatch in header line field %d: got \"%s\", expected \"%s\"", i+1, f, t.names[i])
		}
	}
	return nil
}

// CopyTo runs COPY table [(cols)] TO STDOUT or COPY (query) TO STDOUT,
// calling dst once per CopyData message (a header or trailer, or one row),
// and returns the number of rows sent.
func CopyTo(ctx context.Context, x *Context, env *plan.Env, stmt *pg_query.CopyStmt, dst func(row []byte) error) (int64, error) {
	if stmt.IsFrom {
		return 0, pgerror.New(pgerrcode.InternalError, "exec: CopyTo of COPY FROM")
	}
	o, err := parseCopyOptions(stmt)
	if err != nil {
		return 0, err
	}
	t, err := resolveCopy(ctx, env, stmt)
	if err != nil {
		return 0, err
	}
	quoteCol := make([]bool, t.width())
	for _, n := range o.forceQuote {
		i := indexOfString(t.names, n)
		if i < 0 {
			if t.table != nil && t.table.ColumnByName(n) == nil {
				return 0, pgerror.New(pgerrcode.UndefinedColumn, "column %q of relation %q does not exist", n, t.table.Name)
			}
			return 0, pgerror.New(pgerrcode.InvalidColumnReference, "FORCE_QUOTE column %q not referenced by COPY", n)
		}
		quoteCol[i] = true
	}
	if o.forceQuoteAll {
		for i := range quoteCol {
			quoteCol[i] = true
		}
	}
	tctx := typesCtx(x)
	if env != nil && env.Types != nil {
		tctx = env.Types
	}
	binary := o.fmt.Format == copyfmt.Binary
	w := &copyWriter{opts: o.fmt, quote: quoteCol, binary: binary, tctx: tctx, typs: t.typs, dst: dst}
	if binary {
		if err := dst(copyfmt.AppendBinaryHeader(nil)); err != nil {
			return 0, err
		}
	} else if o.fmt.Header {
		names := make([][]byte, len(t.names))
		for i, n := range t.names {
			names[i] = []byte(n)
		}
		if err := dst(copyfmt.AppendRow(nil, names, o.fmt)); err != nil {
			return 0, err
		}
	}
	if t.query != nil {
		rs, err := Start(ctx, x, t.query)
		if err != nil {
			return 0, err
		}
		defer rs.Close()
		for {
			row, err := rs.Next(ctx)
			if err != nil {
				return w.n, err
			}
			if row == nil {
				break
			}
			if err := w.write(row); err != nil {
				return w.n, err
			}
		}
	} else {
		s := newDMLState(x, nil)
		ti, err := s.table(t.table)
		if err != nil {
			return 0, err
		}
		vals := make([]types.Datum, t.width())
		if err := s.scanAll(ctx, ti, func(row []types.Datum) error {
			for i, p := range t.pos {
				vals[i] = row[p]
			}
			return w.write(vals)
		}); err != nil {
			return w.n, err
		}
	}
	if binary {
		if err := dst(copyfmt.AppendBinaryTrailer(nil)); err != nil {
			return w.n, err
		}
	}
	return w.n, nil
}

func indexOfString(xs []string, s string) int {
	for i, x := range xs {
		if x == s {
			return i
		}
	}
	return -1
}

// copyWriter formats rows for COPY TO.
type copyWriter struct {
	opts   copyfmt.Options
	quote  []bool
	binary bool
	tctx   *types.Context
	typs   []*types.T
	dst    func([]byte) error
	fields [][]byte
	buf    []byte
	n      int64
}

func (w *copyWriter) write(row []types.Datum) error {
	w.fields = w.fields[:0]
	w.buf = w.buf[:0]
	// Values go into one buffer; fields are sliced from it afterwards, so
	// appends that grow the buffer do not strand earlier fields.
	ends := make([]int, 0, len(row))
	nulls := make([]bool, len(row))
	for i, d := range row {
		if types.IsNull(d) {
			nulls[i] = true
			ends = append(ends, len(w.buf))
			continue
		}
		if w.binary {
			var err error
			if w.buf, err = types.EncodeBinary(w.buf, w.typs[i], d); err != nil {
				return err
			}
		} else {
			w.buf = types.AppendFormat(w.buf, w.tctx, w.typs[i], d)
		}
		ends = append(ends, len(w.buf))
	}
	start := 0
	for i, end := range ends {
		if nulls[i] {
			w.fields = append(w.fields, nil)
		} else {
			w.fields = append(w.fields, w.buf[start:end:end])
		}
		start = end
	}
	var out []byte
	switch {
	case w.binary:
		out = copyfmt.AppendBinaryTuple(nil, w.fields)
	case w.opts.Format == copyfmt.CSV && anyTrue(w.quote):
		out = w.appendForcedCSV(nil)
	default:
		out = copyfmt.AppendRow(nil, w.fields, w.opts)
	}
	w.n++
	return w.dst(out)
}

func anyTrue(bs []bool) bool {
	for _, b := range bs {
		if b {
			return true
		}
	}
	return false
}

// appendForcedCSV is a CSV row where the FORCE_QUOTE columns' non-NULL
// values are always quoted.
func (w *copyWriter) appendForcedCSV(dst []byte) []byte {
	delim, quote, escape := byte(','), byte('"'), byte(0)
	if w.opts.Delimiter != 0 {
		delim = w.opts.Delimiter
	}
	if w.opts.Quote != 0 {
		quote = w.opts.Quote
	}
	escape = quote
	if w.opts.Escape != 0 {
		escape = w.opts.Escape
	}
	for i, f := range w.fields {
		if i > 0 {
			dst = append(dst, delim)
		}
		if f == nil || !w.quote[i] {
			one := copyfmt.AppendRow(nil, [][]byte{f}, w.opts)
			dst = append(dst, one[:len(one)-1]...)
			continue
		}
		dst = append(dst, quote)
		for _, c := range f {
			if c == quote || c == escape {
				dst = append(dst, escape)
			}
			dst = append(dst, c)
		}
		dst = append(dst, quote)
	}
	return append(dst, '\n')
}

// copyDomain is what COPY FROM does for a column of a domain type: check
// the value against the domain (the binder does it for INSERT and
// UPDATE), and, for a column the COPY does not give and that has no
// default of its own, compute the domain's default.
type copyDomain struct {
	check, def sem.Evaluator
}

func copyDomains(tb *catalog.Table, given []bool, tctx *types.Context) ([]copyDomain, error) {
	out := make([]copyDomain, len(tb.Columns))
	for i := range tb.Columns {
		c := &tb.Columns[i]
		if c.Type.Domain == nil || c.ComputedExpr != "" {
			continue
		}
		e, err := sem.CoerceToAssignIn(tctx, &sem.ColRef{ID: sem.ColumnID(i), Name: c.Name, T: types.BaseType(c.Type)}, c.Type, c.Name)
		if err != nil {
			return nil, err
		}
		if out[i].check, err = sem.Compile(e, nil); err != nil {
			return nil, err
		}
		if !given[i] && c.DefaultExpr == "" && c.Identity == "" && c.Type.Domain.Default != "" {
			d, err := buildTextExpr(tb, c.Type.Domain.Default, types.BaseType(c.Type), -1, tctx)
			if err != nil {
				return nil, err
			}
			if out[i].def, err = sem.Compile(d, nil); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// copyDomainError is copyLineError for a copied value its domain refuses:
// PostgreSQL names the column and the input, "null input" for a NULL.
func copyDomainError(err error, table string, line int, col string, tctx *types.Context, t *types.T, d types.Datum) error {
	if !types.IsNull(d) {
		return copyLineError(err, table, line, col, types.Format(tctx, t, d))
	}
	if _, ok := errors.AsType[*pgerror.Error](err); !ok {
		return err
	}
	return pgerror.Flatten(err).WithWhere("COPY %s, line %d, column %s: null input", table, line, col)
}
