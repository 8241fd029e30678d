package builtins

import (
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// The database object size functions (PostgreSQL 15's "Database Object
// Management Functions"): pg_relation_size, pg_table_size,
// pg_indexes_size, pg_total_relation_size, pg_database_size and
// pg_column_size. A
// relation's bytes are those of its own key span (its share of a tablet
// it shares with other tables), counted by the session's CatalogInfo when
// it implements SizeInfo (sql/pgcatalog's resolver on a node does); what
// a byte is there is documented in docs/sql.md, "Sizes". pg_size_pretty
// is in fn_admin.go.
//
// pg_column_size is PostgreSQL's for fixed-size types (their typlen: 2
// for int2, 8 for int8 and timestamps, 16 for uuid) and otherwise the
// bytes the value takes stored in a row (rowenc.ValueSize): a length
// varint and the bytes for text and bytea, as PostgreSQL's one-byte
// header makes it for a short value read from a table. An untyped literal
// is a C string, its length plus one, as PostgreSQL counts it.

// SizePart names what of a relation a size counts.
type SizePart int

const (
	// SizeMain is the relation's own entries: a table's rows (its primary
	// index) or an index's entries; 0 for a view or a sequence.
	SizeMain SizePart = iota
	// SizeIndexes is a table's secondary indexes together (0 for any
	// other relation).
	SizeIndexes
	// SizeTotal is SizeMain plus SizeIndexes.
	SizeTotal
)

// SizeInfo is implemented by a CatalogInfo that can count relations' and
// databases' bytes. ok is false for an OID (or database OID) that names
// nothing, which the functions answer with NULL as PostgreSQL does.
// DatabaseSizeByName fails with 3D000 for an unknown name.
type SizeInfo interface {
	RelationSize(relOID uint32, part SizePart) (bytes int64, ok bool, err error)
	DatabaseSize(dbOID uint32) (bytes int64, ok bool, err error)
	DatabaseSizeByName(name string) (int64, error)
}

// sizeInfo is the session's SizeInfo, or a 0A000 error where the session
// has none (no node behind it).
func sizeInfo(ctx EvalContext, fn string) (SizeInfo, error) {
	if si, ok := catalogInfo(ctx).(SizeInfo); ok {
		return si, nil
	}
	return nil, pgerror.New(pgerrcode.FeatureNotSupported, "%s is not available without a node's storage", fn)
}

// relSize is the Fn of a one-argument relation size function.
func relSize(fn string, part SizePart) Fn {
	return func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
		si, err := sizeInfo(ctx, fn)
		if err != nil {
			return nil, err
		}
		n, ok, err := si.RelationSize(oidArg(a[0]), part)
		if err != nil || !ok {
			return types.DNull, err
		}
		return types.DInt(n), nil
	}
}

func init() {
	rel := []*types.T{types.RegClass}
	reg := func(name string, args []*types.T, fn Fn) {
		registerFn(name, Overload{Args: args, Return: Fixed(types.Int8), Strict: true, Volatility: Volatile, Fn: fn})
	}
	reg("pg_relation_size", rel, relSize("pg_relation_size", SizeMain))
	// The forks other than main (free space map, visibility map, init
	// fork) do not exist in Cairn: they are empty, as they are for a
	// PostgreSQL relation that has none.
	reg("pg_relation_size", []*types.T{types.RegClass, types.Text}, func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
		switch fork := string(a[1].(types.DString)); fork {
		case "main":
			return relSize("pg_relation_size", SizeMain)(ctx, a[:1])
		case "fsm", "vm", "init":
			d, err := relSize("pg_relation_size", SizeMain)(ctx, a[:1])
			if err != nil || d == types.DNull {
				return d, err
			}
			return types.DInt(0), nil
		default:
			return nil, pgerror.New(pgerrcode.InvalidParameterValue, "invalid fork name").
				WithHint(`Valid fork names are "main", "fsm", "vm", and "init".`)
		}
	})
	registerFn("pg_column_size", Overload{Args: []*types.T{Any}, Return: Fixed(types.Int4), Strict: true, Volatility: Stable,
		Bind: func(at, call []*types.T) Fn {
			t := at[0]
			return func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				switch n := t.Size(); {
				case call[0].Family == types.UnknownFamily || n == -2:
					return types.DInt(len(a[0].String()) + 1), nil
				case n > 0:
					return types.DInt(n), nil
				}
				n, err := rowenc.ValueSize(t, a[0])
				if err != nil {
					return nil, errInternal("pg_column_size: %w", err)
				}
				return types.DInt(n), nil
			}
		}})
	reg("pg_table_size", rel, relSize("pg_table_size", SizeMain))
	reg("pg_indexes_size", rel, relSize("pg_indexes_size", SizeIndexes))
	reg("pg_total_relation_size", rel, relSize("pg_total_relation_size", SizeTotal))
	reg("pg_database_size", []*types.T{types.Name}, func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
		si, err := sizeInfo(ctx, "pg_database_size")
		if err != nil {
			return nil, err
		}
		n, err := si.DatabaseSizeByName(string(a[0].(types.DString)))
		if err != nil {
			return nil, err
		}
		return types.DInt(n), nil
	})
	reg("pg_database_size", []*types.T{types.Oid}, func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
		si, err := sizeInfo(ctx, "pg_database_size")
		if err != nil {
			return nil, err
		}
		n, ok, err := si.DatabaseSize(oidArg(a[0]))
		if err != nil || !ok {
			return types.DNull, err
		}
		return types.DInt(n), nil
	})
}
