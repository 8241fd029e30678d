package builtins

import "github.com/cairn-db/cairn/sql/types"

// citus_shard_sizes(), Citus's list of every shard's bytes across the
// cluster (docs/distributed.md): the catalog answers it through the
// session's resolver when that implements ShardSizeInfo (sql/pgcatalog's
// does, as its citus_shards view counts them), else it lists nothing.

// ShardSize is one shard's live bytes.
type ShardSize struct {
	ShardID int64
	Size    int64
}

// ShardSizeInfo is implemented by a CatalogInfo that can list the shards
// of the database's distributed and reference tables with their bytes.
type ShardSizeInfo interface {
	ShardSizes() ([]ShardSize, error)
}

func init() {
	// shard_id is bigint where Citus 12 declares int: Cairn's shard IDs
	// (a table's OID times 100,000 plus the shard's index) are
	// citus_shards' bigint shardid, which may not fit an int.
	cols := []Column{{"shard_id", types.Int8}, {"size", types.Int8}}
	registerFn("citus_shard_sizes", Overload{Class: Generator, Return: Fixed(types.Int8), Volatility: Volatile,
		Columns: func([]*types.T) []Column { return cols },
		SRF: func(ctx EvalContext, _ []types.Datum) (RowIter, error) {
			si, _ := catalogInfo(ctx).(ShardSizeInfo)
			if si == nil {
				return &sliceIter{}, nil
			}
			sizes, err := si.ShardSizes()
			if err != nil {
				return nil, err
			}
			rows := make([][]types.Datum, len(sizes))
			for i, s := range sizes {
				rows[i] = []types.Datum{types.DInt(s.ShardID), types.DInt(s.Size)}
			}
			return &sliceIter{rows: rows}, nil
		}})
}
