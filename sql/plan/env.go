package plan

import (
	"context"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// Env is what the binder needs of the session.
type Env struct {
	Catalog Catalog
	// Types is the session's type context (TimeZone, DateStyle).
	Types *types.Context
	// Params types $1..$n: the client's declared types, the rest inferred.
	Params *sem.ParamTypes
}

// Relation is what a name in FROM resolves to: exactly one field is set.
type Relation struct {
	Table    *catalog.Table
	View     *catalog.View
	Sequence *catalog.Sequence
	Virtual  VirtualTable
}

// Catalog resolves names for the binder, in the session's database and
// search path, as of the statement's transaction.
type Catalog interface {
	// LookupRelation resolves schema.name (schema "" searches pg_catalog,
	// then the search path). An unknown relation is 42P01, an unknown
	// schema 3F000.
	LookupRelation(ctx context.Context, schema, name string) (Relation, error)
	// TableByID returns a table descriptor (foreign-key targets).
	TableByID(ctx context.Context, id catalog.ID) (*catalog.Table, error)
}
