package builtins

import (
	"github.com/cairn-db/cairn/sql/types"
)

// yb_table_properties(regclass), YugabyteDB's view of where a table's rows
// live (docs/colocation.md). The catalog answers it through the session's
// resolver when that implements TablePropertiesInfo (sql/pgcatalog's does).

// TableProperties is one row of yb_table_properties.
type TableProperties struct {
	NumTablets        int64
	NumHashKeyColumns int64
	IsColocated       bool
	// TablegroupOID and ColocationID are NULL (0) for a table that is not
	// colocated.
	TablegroupOID uint32
	ColocationID  uint32
}

// TablePropertiesInfo is implemented by a CatalogInfo that knows tables'
// layouts. ok is false for an OID that is no table.
type TablePropertiesInfo interface {
	TableProperties(relOID uint32) (p TableProperties, ok bool, err error)
}

func init() {
	cols := []Column{
		{"num_tablets", types.Int8}, {"num_hash_key_columns", types.Int8}, {"is_colocated", types.Bool},
		{"tablegroup_oid", types.Oid}, {"colocation_id", types.Oid},
	}
	oidOrNull := func(o uint32) types.Datum {
		if o == 0 {
			return types.DNull
		}
		return types.DOid(o)
	}
	registerFn("yb_table_properties", Overload{Args: []*types.T{types.RegClass}, Class: Generator, Strict: true,
		Return: Fixed(types.Int8), Volatility: Stable,
		Columns: func([]*types.T) []Column { return cols },
		SRF: func(ctx EvalContext, a []types.Datum) (RowIter, error) {
			ti, _ := catalogInfo(ctx).(TablePropertiesInfo)
			if ti == nil {
				return &sliceIter{}, nil
			}
			p, ok, err := ti.TableProperties(oidArg(a[0]))
			if err != nil || !ok {
				return &sliceIter{}, err
			}
			return &sliceIter{rows: [][]types.Datum{{types.DInt(p.NumTablets), types.DInt(p.NumHashKeyColumns),
				types.DBool(p.IsColocated), oidOrNull(p.TablegroupOID), oidOrNull(p.ColocationID)}}}, nil
		}})
}
