package ddl

import (
	"context"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

func (e *executor) alterTable(ctx context.Context, n *pg_query.AlterTableStmt) (string, error) {
	return "ALTER TABLE", notSupported("ALTER TABLE is not supported yet")
}

func (e *executor) rename(ctx context.Context, n *pg_query.RenameStmt) (string, error) {
	return "ALTER TABLE", notSupported("ALTER ... RENAME is not supported yet")
}
