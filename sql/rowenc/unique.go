package rowenc

import (
	"errors"
	"strings"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// ConvertWriteError turns the error of running a RowWriter's batch into
// what a Postgres client expects: a failed uniqueness condition on one of
// t's indexes becomes SQLSTATE 23505 with Postgres's message and detail,
//
//	duplicate key value violates unique constraint "t_pkey"
//	DETAIL: Key (a, b)=(1, x) already exists.
//
// Other errors come back unchanged. The detail's values are decoded from
// the key, so they print in canonical form (1.0 as 1 for numeric: keys
// keep Compare-equality, not representation).
func (t *TableLayout) ConvertWriteError(err error) error {
	cf, ok := errors.AsType[*kvpb.ConditionFailedError](err)
	if !ok {
		return err
	}
	p, rest, derr := DecodeKeyPrefix(cf.Key)
	if derr != nil || p.Table != t.ID {
		return err
	}
	idx := t.IndexByKeyID(p.Index)
	if idx == nil {
		return err
	}
	row := make([]types.Datum, len(t.Columns))
	if _, derr := decodeColumns(rest, t, row, idx.keyPos, idx.KeyOrders); derr != nil {
		return err
	}
	var names, vals strings.Builder
	for i, pos := range idx.keyPos {
		if idx.Sharded && i == 0 {
			continue
		}
		if i > 0 && !(idx.Sharded && i == 1) {
			names.WriteString(", ")
			vals.WriteString(", ")
		}
		names.WriteString(t.Columns[pos].Name)
		vals.WriteString(types.Format(nil, t.Columns[pos].Type, row[pos]))
	}
	return pgerror.Wrapf(nil, pgerrcode.UniqueViolation,
		"duplicate key value violates unique constraint %q", idx.Name).
		WithDetail("Key (%s)=(%s) already exists.", names.String(), vals.String()).
		WithTable("", t.Name).WithConstraint(idx.Name)
}
