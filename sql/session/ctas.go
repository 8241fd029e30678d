package session

import (
	"fmt"
	"strings"

	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/ddl"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
)

// createTableAs runs CREATE TABLE ... AS and SELECT ... INTO as
// PostgreSQL does: the query's columns (names, types and typmods) define
// a new table, which the query's rows then fill, all in the statement's
// transaction. It is the composition of two statements Cairn already
// has: a CREATE TABLE built from the bound query's columns (through
// ddl.Exec, so every check and NOTICE of CREATE TABLE applies) and an
// INSERT ... SELECT of the same query (through the planner, so the rows
// are written as any insert writes them).
//
// The tag is "SELECT n", as PostgreSQL reports it, or "CREATE TABLE AS"
// when no rows are written (WITH NO DATA, or IF NOT EXISTS finding the
// table).
func (s *Session) createTableAs(x *stmtState, st *parser.Statement, n *pg_query.CreateTableAsStmt, w pgwire.ResultWriter) error {
	if n.Objtype == pg_query.ObjectType_OBJECT_MATVIEW {
		return pgerror.New(pgerrcode.FeatureNotSupported, "materialized views are not supported yet")
	}
	into := n.Into
	if into == nil || into.Rel == nil || n.Query == nil {
		return pgerror.New(pgerrcode.SyntaxError, "CREATE TABLE AS without a target or a query")
	}
	if s.txnReadOnly {
		return readOnlyError("CREATE TABLE AS")
	}
	if into.AccessMethod != "" {
		return pgerror.New(pgerrcode.FeatureNotSupported, "access method %q is not supported", into.AccessMethod)
	}
	txn, err := x.txn()
	if err != nil {
		return err
	}
	// CREATE TABLE AS is a schema change: its writes go out as intents.
	if err := txn.DisableWriteBuffering(x.ctx); err != nil {
		return err
	}
	q := &parser.Statement{AST: &pg_query.RawStmt{Stmt: n.Query}, SQL: st.SQL, Original: st.Original}
	p, err := plan.Build(x.ctx, s.planEnv(txn, sem.NewParamTypes(), x.types()), q)
	if err != nil {
		return err
	}
	if p.Columns == nil {
		return pgerror.New(pgerrcode.FeatureNotSupported, "CREATE TABLE AS needs a query that returns rows")
	}
	names := make([]string, len(p.Columns))
	for i, c := range p.Columns {
		names[i] = c.Name
	}
	if len(into.ColNames) > len(names) {
		return pgerror.New(pgerrcode.SyntaxError, "too many column names were specified")
	}
	for i, cn := range into.ColNames {
		names[i] = cn.GetString_().GetSval()
	}
	var defs []string
	for i, c := range p.Columns {
		t := c.T
		if t.Family == types.UnknownFamily {
			// PostgreSQL 10+ resolves an untyped literal column to text.
			t = types.Text
		}
		defs = append(defs, builtins.QuoteIdent(names[i])+" "+t.Name())
	}
	stmts, err := parser.Parse("CREATE TABLE t (" + strings.Join(defs, ", ") + ")")
	if err != nil {
		return fmt.Errorf("create table as: column definitions: %w", err)
	}
	create := stmts[0].AST.Stmt.GetCreateStmt()
	create.Relation = into.Rel
	create.Options = into.Options
	create.IfNotExists = n.IfNotExists
	create.Oncommit = into.OnCommit
	createStmt := &parser.Statement{AST: &pg_query.RawStmt{Stmt: stmts[0].AST.Stmt}, SQL: st.SQL, Original: st.Original}
	skipped := false
	if _, err := ddl.Exec(x.ctx, s.ddlContext(x, txn, w, &skipped), createStmt); err != nil {
		return err
	}
	if skipped || into.SkipData {
		return w.Complete("CREATE TABLE AS")
	}
	cols := make([]*pg_query.Node, len(names))
	for i, name := range names {
		cols[i] = pg_query.MakeResTargetNodeWithName(name, -1)
	}
	ins := &pg_query.Node{Node: &pg_query.Node_InsertStmt{InsertStmt: &pg_query.InsertStmt{
		Relation:   into.Rel,
		Cols:       cols,
		SelectStmt: n.Query,
		Override:   pg_query.OverridingKind_OVERRIDING_NOT_SET,
	}}}
	c, err := s.startPlan(x, &parser.Statement{AST: &pg_query.RawStmt{Stmt: ins}, SQL: st.SQL, Original: st.Original}, nil, nil, nil)
	if err != nil {
		return err
	}
	defer c.close()
	for {
		row, err := c.rows.Next(x.ctx)
		if err != nil {
			return err
		}
		if row == nil {
			break
		}
	}
	return w.Complete(rowsTag("SELECT", c.rows.RowsAffected()))
}

// selectIntoAsCTAS turns SELECT ... INTO t into the CREATE TABLE AS it
// means (PostgreSQL's parse analysis does the same).
func selectIntoAsCTAS(sel *pg_query.SelectStmt) *pg_query.CreateTableAsStmt {
	into := sel.IntoClause
	q := proto.Clone(sel).(*pg_query.SelectStmt)
	q.IntoClause = nil
	return &pg_query.CreateTableAsStmt{
		Query:   &pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: q}},
		Into:    into,
		Objtype: pg_query.ObjectType_OBJECT_TABLE,
	}
}
