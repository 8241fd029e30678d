package ddl

import (
	"context"
	"errors"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/plan"
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
	// Notice sends a NOTICE to the client (code is a SQLSTATE).
	Notice func(code, msg string)
	PackedRows      bool
	PackedSizeLimit int
}

// PLACEHOLDER body: replaced by the DDL executor.

// Exec runs one DDL statement and returns its command tag.
func Exec(ctx context.Context, x *Context, stmt *parser.Statement) (string, error) {
	return "", errors.New("ddl: not built yet")
}
