package catalog

import (
	"errors"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
)

// Errors, grouped by when they happen. User-facing ones carry their
// SQLSTATE here, in one place; the rest are internal (XX000).

// Reading.
var (
	// ErrBadDescriptor wraps every failure to decode or validate stored
	// catalog bytes: they were not written by this package's encoder.
	ErrBadDescriptor = errors.New("catalog: invalid descriptor")
	// ErrNotBootstrapped: the catalog keys are missing (Bootstrap has not
	// run).
	ErrNotBootstrapped = errors.New("catalog: cluster catalog not bootstrapped")
)

// Writing.
var (
	// ErrAlreadyBootstrapped: Bootstrap on a cluster that has a catalog.
	ErrAlreadyBootstrapped = errors.New("catalog: cluster catalog already bootstrapped")
	// ErrVersionMismatch: Update of a descriptor whose stored version is
	// not the one the caller read (a stale copy).
	ErrVersionMismatch = errors.New("catalog: descriptor changed since it was read")
)

func undefinedDatabase(name string) error {
	return pgerror.New(pgerrcode.InvalidCatalogName, "database %q does not exist", name)
}

func undefinedSchema(name string) error {
	return pgerror.New(pgerrcode.InvalidSchemaName, "schema %q does not exist", name)
}

func undefinedRelation(name string) error {
	return pgerror.New(pgerrcode.UndefinedTable, "relation %q does not exist", name)
}

func undefinedObject(what string) error {
	return pgerror.New(pgerrcode.UndefinedObject, "%s does not exist", what)
}

func undefinedRole(name string) error {
	return pgerror.New(pgerrcode.UndefinedObject, "role %q does not exist", name)
}

func wrongObjectType(name, want string) error {
	return pgerror.New(pgerrcode.WrongObjectType, "%q is not a %s", name, want)
}

// duplicate returns the error for creating or renaming to a name that is
// taken in d's namespace.
func duplicate(d Descriptor, name string) error {
	switch d.DescKind() {
	case KindDatabase:
		return pgerror.New(pgerrcode.DuplicateDatabase, "database %q already exists", name)
	case KindSchema:
		return pgerror.New(pgerrcode.DuplicateSchema, "schema %q already exists", name)
	case KindFunction:
		return pgerror.New(pgerrcode.DuplicateFunction, "function %q already exists with same argument types", d.DescName())
	}
	return pgerror.New(pgerrcode.DuplicateTable, "relation %q already exists", name)
}

func duplicateRole(name string) error {
	return pgerror.New(pgerrcode.DuplicateObject, "role %q already exists", name)
}

func reservedSchema(name string) error {
	return pgerror.New(pgerrcode.ReservedName, "unacceptable schema name %q", name).
		WithDetail("The prefix \"pg_\" is reserved for system schemas.")
}
