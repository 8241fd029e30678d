package ddl

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/types"
)

// Context is what a DDL statement needs of the session.
type Context struct {
	Txn      *kv.Txn
	Writer   *catalog.Writer
	Database *catalog.Database
	User     string
	// SearchPath decides the schema of unqualified names created.
	SearchPath []string
	Types      *types.Context
	// Catalog resolves names as the binder does.
	Catalog plan.Catalog
	// Describe binds a query (a view's SELECT) and returns its columns.
	Describe func(ctx context.Context, sql string) ([]plan.Column, error)
	// CheckFunctionBodies is the check_function_bodies setting: CREATE
	// FUNCTION binds the body (off: only parses it, as pg_dump's restore
	// needs when a function reads a table created later).
	CheckFunctionBodies bool
	// Notice sends a NOTICE to the client (code is a SQLSTATE).
	Notice          func(code, msg string)
	PackedRows      bool
	PackedSizeLimit int
	// DB is used for the non-transactional parts of sequence DDL (ALTER
	// SEQUENCE RESTART, TRUNCATE ... RESTART IDENTITY write the value key
	// outside the transaction, as PostgreSQL's sequence values are never
	// rolled back). nil: those statements fail with 0A000.
	DB *kv.DB
	// AutoCommit says the statement is a transaction of its own (no
	// BEGIN block, not one of several statements of one Query message):
	// a schema change may then run as a job, in transactions of its own
	// that other sessions see commit one by one (colocation_job.go).
	// False keeps every change in Txn, which a ROLLBACK undoes.
	AutoCommit bool
	// InBlock says the statement runs in a BEGIN block (CREATE INDEX
	// CONCURRENTLY is refused there, 25001, as in PostgreSQL).
	InBlock bool
	// HashBuckets returns the bucket count of USING HASH without one
	// (the cluster setting
	// sql.defaults.default_hash_sharded_index_bucket_count), read only
	// when a statement needs it; nil, or a value that is not a count in
	// [2, 2048]: DefaultHashBuckets.
	HashBuckets func(ctx context.Context) (string, error)
	// DrainTimestamp is the cluster-wide lower bound of the read
	// timestamps of open transactions that may write rows (kv.DB.
	// DrainTimestamp over every node), which an online index build waits
	// to pass each step's commit (index_job.go); nil: this node's DB's.
	DrainTimestamp func(ctx context.Context) (hlc.Timestamp, error)
	// Memory and TempStorage are the node's SQL memory budget and
	// temporary storage, which an index build's sort reserves in and
	// spills to (index_backfill.go); nil: its own budget, no spilling.
	Memory      *mon.Budget
	TempStorage *rowcontainer.TempStorage
	// BackendPID is the session's process id, shown by
	// pg_stat_progress_create_index for its index builds.
	BackendPID int32
	// TempSchema returns the session's schema of temporary tables
	// (CREATE TEMP TABLE, pg_temp.t), creating it in the statement's
	// transaction on first use; nil: temporary objects are refused
	// (0A000).
	TempSchema func(ctx context.Context, w *catalog.Writer) (*catalog.Schema, error)
	// OnCommit records a temporary table's ON COMMIT DROP or DELETE ROWS,
	// which the session carries out at the end of each transaction that
	// commits; nil: refused like TempSchema.
	OnCommit func(table catalog.ID, action OnCommitAction)
}

// OnCommitAction is what happens to a temporary table when a transaction
// commits (CREATE TEMP TABLE ... ON COMMIT).
type OnCommitAction int

const (
	// OnCommitDrop drops the table at the end of the transaction that
	// created it.
	OnCommitDrop OnCommitAction = iota + 1
	// OnCommitDeleteRows empties it at the end of every transaction.
	OnCommitDeleteRows
)

// Exec runs one DDL statement inside x.Txn and returns its command tag as
// PostgreSQL prints it.
func Exec(ctx context.Context, x *Context, stmt *parser.Statement) (string, error) {
	if stmt == nil || stmt.AST == nil || stmt.AST.Stmt == nil {
		return "", fmt.Errorf("ddl: empty statement")
	}
	e := &executor{x: x, stmt: stmt, ctx: ctx}
	switch n := stmt.AST.Stmt.Node.(type) {
	case *pg_query.Node_CreateStmt:
		return "CREATE TABLE", e.createTable(ctx, n.CreateStmt)
	case *pg_query.Node_IndexStmt:
		return "CREATE INDEX", e.createIndex(ctx, n.IndexStmt)
	case *pg_query.Node_DropStmt:
		return e.drop(ctx, n.DropStmt)
	case *pg_query.Node_CreatedbStmt:
		return "CREATE DATABASE", e.createDatabase(ctx, n.CreatedbStmt)
	case *pg_query.Node_AlterDatabaseStmt:
		return e.alterDatabase(ctx, n.AlterDatabaseStmt)
	case *pg_query.Node_DropdbStmt:
		return "DROP DATABASE", e.dropDatabase(ctx, n.DropdbStmt)
	case *pg_query.Node_CreateSchemaStmt:
		return "CREATE SCHEMA", e.createSchema(ctx, n.CreateSchemaStmt)
	case *pg_query.Node_CreateSeqStmt:
		return "CREATE SEQUENCE", e.createSequence(ctx, n.CreateSeqStmt)
	case *pg_query.Node_CreateExtensionStmt:
		return "CREATE EXTENSION", e.createExtension(ctx, n.CreateExtensionStmt)
	case *pg_query.Node_CreateEnumStmt:
		return "CREATE TYPE", e.createEnum(ctx, n.CreateEnumStmt)
	case *pg_query.Node_AlterEnumStmt:
		return "ALTER TYPE", e.alterEnum(ctx, n.AlterEnumStmt)
	case *pg_query.Node_CreateDomainStmt:
		return "CREATE DOMAIN", e.createDomain(ctx, n.CreateDomainStmt)
	case *pg_query.Node_CreateFunctionStmt:
		return e.createFunction(ctx, n.CreateFunctionStmt)
	case *pg_query.Node_AlterSeqStmt:
		return "ALTER SEQUENCE", e.alterSequence(ctx, n.AlterSeqStmt)
	case *pg_query.Node_ViewStmt:
		return "CREATE VIEW", e.createView(ctx, n.ViewStmt)
	case *pg_query.Node_TruncateStmt:
		return "TRUNCATE TABLE", e.truncate(ctx, n.TruncateStmt)
	case *pg_query.Node_AlterTableStmt:
		return e.alterTable(ctx, n.AlterTableStmt)
	case *pg_query.Node_RenameStmt:
		return e.rename(ctx, n.RenameStmt)
	case *pg_query.Node_CommentStmt:
		return "COMMENT", e.comment(ctx, n.CommentStmt)
	case *pg_query.Node_CreateRoleStmt:
		return e.createRole(ctx, n.CreateRoleStmt)
	case *pg_query.Node_AlterRoleStmt:
		return e.alterRole(ctx, n.AlterRoleStmt)
	case *pg_query.Node_DropRoleStmt:
		return e.dropRole(ctx, n.DropRoleStmt)
	case *pg_query.Node_GrantStmt:
		return e.grantPrivileges(ctx, n.GrantStmt)
	case *pg_query.Node_GrantRoleStmt:
		return e.grantRole(ctx, n.GrantRoleStmt)
	case *pg_query.Node_DropOwnedStmt:
		return e.dropOwned(ctx, n.DropOwnedStmt)
	case *pg_query.Node_ReassignOwnedStmt:
		return e.reassignOwned(ctx, n.ReassignOwnedStmt)
	case *pg_query.Node_AlterOwnerStmt:
		return e.alterOwner(ctx, n.AlterOwnerStmt)
	case *pg_query.Node_AlterDefaultPrivilegesStmt:
		return "ALTER DEFAULT PRIVILEGES", notSupported("ALTER DEFAULT PRIVILEGES is not supported yet")
	case *pg_query.Node_ConstraintsSetStmt:
		// Every constraint is checked at the end of its statement (see
		// Context and doc.go): IMMEDIATE is what already happens, and
		// DEFERRED cannot be honoured, which the NOTICE says.
		if n.ConstraintsSetStmt.Deferred {
			e.notice("00000", "SET CONSTRAINTS ... DEFERRED has no effect: Cairn checks constraints at the end of each statement")
		}
		return "SET CONSTRAINTS", nil
	case *pg_query.Node_LockStmt:
		// Every Cairn transaction is checked for conflicts by the KV
		// layer (first committer wins, serializable refresh), so a table
		// lock adds no guarantee the statements inside the transaction do
		// not already have; tools (pg_dump, migrations) issue LOCK TABLE
		// only to protect what they read and write. The tables must exist.
		for _, r := range n.LockStmt.Relations {
			if _, err := e.lookupTable(ctx, r.GetRangeVar()); err != nil {
				return "", err
			}
		}
		return "LOCK TABLE", nil
	}
	if _, ok := stmt.AST.Stmt.Node.(*pg_query.Node_CreateTableAsStmt); ok {
		return "", notSupported("CREATE TABLE AS and SELECT INTO are not supported yet")
	}
	return "", pgerror.New(pgerrcode.FeatureNotSupported, "statement %s is not supported yet", stmtName(stmt.AST.Stmt))
}

func stmtName(n *pg_query.Node) string {
	s := fmt.Sprintf("%T", n.Node)
	return strings.TrimPrefix(s, "*pg_query.Node_")
}

// executor runs one statement.
type executor struct {
	x    *Context
	stmt *parser.Statement
	// ctx is the statement's context, for the regclass resolver of the
	// expressions DDL builds.
	ctx context.Context
	// auth answers the statement's privilege checks (privileges.go),
	// read on first use.
	auth *catalog.Authorizer
	// singleAlter: the statement is an ALTER TABLE of one subcommand,
	// which may run as a job (onlineMoveOK); movedOnline: it did.
	singleAlter, movedOnline bool
}

// types returns the type context expressions are built with: the
// session's, with a regclass resolver over this transaction's catalog
// when the session gave none (nextval('s'::regclass) defaults must
// resolve, including sequences created earlier in the transaction).
func (e *executor) types() *types.Context {
	if e.x.Types != nil && e.x.Types.Reg != nil {
		return e.x.Types
	}
	tc := &types.Context{Reg: &regResolver{e: e, ctx: e.ctx}}
	if e.x.Types != nil {
		tc.Location = e.x.Types.Location
	}
	return tc
}

func (e *executor) notice(code, msg string) {
	if e.x.Notice != nil {
		e.x.Notice(code, msg)
	}
}

func notSupported(format string, args ...any) error {
	return pgerror.New(pgerrcode.FeatureNotSupported, format, args...)
}

// creationSchema returns the schema a new relation named by rv goes to:
// its explicit schema, or the first schema of the search path that exists
// (PostgreSQL's namespace search for creation).
func (e *executor) creationSchema(ctx context.Context, rv *pg_query.RangeVar) (*catalog.Schema, error) {
	if rv.Catalogname != "" && rv.Catalogname != e.x.Database.Name {
		return nil, notSupported("cross-database references are not implemented: %s.%s.%s", rv.Catalogname, rv.Schemaname, rv.Relname)
	}
	if rv.Relpersistence == "t" || rv.Schemaname == "pg_temp" {
		if rv.Schemaname != "" && rv.Schemaname != "pg_temp" {
			return nil, pgerror.New(pgerrcode.InvalidTableDefinition, "cannot create temporary relation in non-temporary schema")
		}
		if e.x.TempSchema == nil || e.x.OnCommit == nil {
			return nil, notSupported("temporary tables are not supported here")
		}
		return e.x.TempSchema(ctx, e.x.Writer)
	}
	if rv.Schemaname != "" {
		s, err := e.x.Writer.Schema(ctx, e.x.Database.ID, rv.Schemaname)
		if err != nil {
			return nil, err
		}
		if s.Virtual {
			return nil, pgerror.New(pgerrcode.InsufficientPrivilege, "permission denied to create %q.%q", s.Name, rv.Relname).
				WithDetail("System catalog modifications are currently disallowed.")
		}
		return s, e.checkPrivilege(ctx, s, catalog.PrivCreate)
	}
	for _, name := range e.searchPath() {
		s, err := e.x.Writer.Schema(ctx, e.x.Database.ID, name)
		if pgerror.Code(err) == pgerrcode.InvalidSchemaName {
			continue
		}
		if err != nil {
			return nil, err
		}
		if s.Virtual {
			continue
		}
		return s, e.checkPrivilege(ctx, s, catalog.PrivCreate)
	}
	return nil, pgerror.New(pgerrcode.InvalidSchemaName, "no schema has been selected to create in")
}

// searchPath is the session's search path with "$user" replaced by the
// user's name (PostgreSQL skips it when no such schema exists).
func (e *executor) searchPath() []string {
	path := e.x.SearchPath
	if len(path) == 0 {
		path = []string{"$user", "public"}
	}
	out := make([]string, 0, len(path))
	for _, s := range path {
		if s == "$user" {
			s = e.x.User
		}
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// lookupRelation resolves an existing relation: its schema if given, else
// the search path. It returns the descriptor and its schema.
func (e *executor) lookupRelation(ctx context.Context, rv *pg_query.RangeVar) (catalog.Descriptor, *catalog.Schema, error) {
	if rv == nil {
		return nil, nil, fmt.Errorf("ddl: missing relation name")
	}
	if rv.Catalogname != "" && rv.Catalogname != e.x.Database.Name {
		return nil, nil, notSupported("cross-database references are not implemented: %s.%s.%s", rv.Catalogname, rv.Schemaname, rv.Relname)
	}
	schemas := []string{rv.Schemaname}
	if rv.Schemaname == "" {
		schemas = e.searchPath()
	} else if rv.Schemaname == "pg_temp" {
		schemas = []string{tempOf(e.x.SearchPath)}
	}
	for _, name := range schemas {
		s, err := e.x.Writer.Schema(ctx, e.x.Database.ID, name)
		if pgerror.Code(err) == pgerrcode.InvalidSchemaName && rv.Schemaname == "" {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if s.Virtual {
			if rv.Schemaname != "" {
				return nil, nil, pgerror.New(pgerrcode.InsufficientPrivilege, "permission denied: %q is a system catalog", rv.Relname)
			}
			continue
		}
		d, err := e.x.Writer.Relation(ctx, e.x.Database.ID, s.ID, rv.Relname)
		if pgerror.Code(err) == pgerrcode.UndefinedTable {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		return d, s, nil
	}
	return nil, nil, pgerror.New(pgerrcode.UndefinedTable, "relation %q does not exist", qualified(rv))
}

func qualified(rv *pg_query.RangeVar) string {
	if rv.Schemaname != "" {
		return rv.Schemaname + "." + rv.Relname
	}
	return rv.Relname
}

// lookupTable resolves rv to a table (42809 when it is a view or sequence).
func (e *executor) lookupTable(ctx context.Context, rv *pg_query.RangeVar) (*catalog.Table, error) {
	d, _, err := e.lookupRelation(ctx, rv)
	if err != nil {
		return nil, err
	}
	t, ok := d.(*catalog.Table)
	if !ok {
		return nil, pgerror.New(pgerrcode.WrongObjectType, "%q is not a table", rv.Relname)
	}
	return t, nil
}

// mutableTable returns a copy of rv's table that the caller may change and
// store with Writer.Update.
func (e *executor) mutableTable(ctx context.Context, rv *pg_query.RangeVar) (*catalog.Table, error) {
	t, err := e.lookupTable(ctx, rv)
	if err != nil {
		return nil, err
	}
	return cloneTable(t), nil
}

// schemaName returns the name of schema id (for messages and qualified
// names in stored expressions).
func (e *executor) schemaName(ctx context.Context, id catalog.ID) string {
	d, err := e.x.Writer.ByID(ctx, id)
	if err != nil {
		return ""
	}
	return d.DescName()
}

// defName returns a DefElem's name and argument.
func defElems(nodes []*pg_query.Node) []*pg_query.DefElem {
	out := make([]*pg_query.DefElem, 0, len(nodes))
	for _, n := range nodes {
		if d := n.GetDefElem(); d != nil {
			out = append(out, d)
		}
	}
	return out
}

// strVal returns the string of a String node, "" otherwise.
func strVal(n *pg_query.Node) string {
	if n == nil {
		return ""
	}
	if s := n.GetString_(); s != nil {
		return s.Sval
	}
	return ""
}

// nameList joins a list of String nodes with dots.
func nameList(nodes []*pg_query.Node) []string {
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, strVal(n))
	}
	return out
}

// tempOf is the session's temporary schema as its search path lists it
// first ("" when it has none): PostgreSQL's pg_temp alias.
func tempOf(path []string) string {
	if len(path) > 0 && strings.HasPrefix(path[0], "pg_temp_") {
		return path[0]
	}
	return ""
}
