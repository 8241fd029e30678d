package plan

import (
	"context"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/sequence"
	"github.com/cairn-db/cairn/sql/types"
)

// sequenceRelation is a sequence read as a relation (SELECT last_value,
// is_called FROM s, which pg_dump issues for every sequence it dumps): one
// row of PostgreSQL's columns, read in the statement's transaction.
type sequenceRelation struct {
	seq    *catalog.Sequence
	schema string
}

var sequenceColumns = []VirtualColumn{
	{Name: "last_value", T: types.Int8}, {Name: "log_cnt", T: types.Int8}, {Name: "is_called", T: types.Bool},
}

func (r *sequenceRelation) Schema() string           { return r.schema }
func (r *sequenceRelation) Name() string             { return r.seq.Name }
func (r *sequenceRelation) OID() uint32              { return uint32(r.seq.ID) }
func (r *sequenceRelation) Columns() []VirtualColumn { return sequenceColumns }

// Rows reads the sequence's position. log_cnt, the values PostgreSQL has
// WAL-logged ahead, is always 0: Cairn logs every increment.
func (r *sequenceRelation) Rows(ctx context.Context, env *VirtualEnv) ([][]types.Datum, error) {
	last, called, err := sequence.State(ctx, env.Txn, r.seq)
	if err != nil {
		return nil, err
	}
	return [][]types.Datum{{types.DInt(last), types.DInt(0), types.DBool(called)}}, nil
}
