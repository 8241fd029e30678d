package pgcatalog

import (
	"context"
	"math"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/stats"
	"github.com/cairn-db/cairn/sql/types"
)

// Table statistics (sql/stats) as PostgreSQL shows them: pg_stats,
// pg_class.reltuples and relpages, pg_stat_user_tables.n_live_tup.

// pageSize is PostgreSQL's block size, which relpages counts in.
const pageSize = 8192

// tableStats reads the statistics of every table of the snapshot's
// transaction, decoded with their descriptors (nil when none are stored
// or there is no transaction to read them in).
func tableStats(ctx context.Context, s *snapshot) map[catalog.ID]*stats.Table {
	if s.env == nil || s.env.Txn == nil {
		return nil
	}
	raw, err := stats.LoadAll(ctx, s.env.Txn)
	if err != nil || len(raw) == 0 {
		return nil
	}
	out := map[catalog.ID]*stats.Table{}
	for _, r := range s.tables() {
		t := r.desc.(*catalog.Table)
		if b, ok := raw[t.ID]; ok {
			if ts, err := stats.Decode(b, t); err == nil && ts != nil {
				out[t.ID] = ts
			}
		}
	}
	return out
}

// classStats are pg_class's reltuples and relpages for ts (-1 and 0, as
// PostgreSQL shows a table never analyzed, when ts is nil).
func classStats(ts *stats.Table) []any {
	if ts == nil {
		return nil
	}
	pages := int64(math.Ceil(float64(ts.Bytes) / pageSize))
	return []any{"reltuples", types.DFloat(float32(ts.RowCount)), "relpages", pages}
}

func real4(f float64) types.Datum { return types.DFloat(float32(f)) }

// genStats generates pg_stats: one row per analyzed visible column.
func genStats(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	all := tableStats(ctx, s)
	var out [][]types.Datum
	for _, r := range s.tables() {
		d := r.desc.(*catalog.Table)
		ts := all[d.ID]
		if ts == nil {
			continue
		}
		for _, c := range visibleColumns(d) {
			cs := ts.Column(c.ID)
			if cs == nil {
				continue
			}
			row := []any{"schemaname", r.schema.Name, "tablename", d.Name, "attname", c.Name,
				"inherited", false, "null_frac", real4(cs.NullFrac), "avg_width", cs.AvgWidth,
				"n_distinct", real4(nDistinct(cs, ts.RowCount)), "correlation", nil}
			if len(cs.MCV) > 0 || len(cs.Histogram) > 0 {
				row = append(row, "correlation", real4(cs.Correlation))
			}
			if len(cs.MCV) > 0 {
				freqs := types.NewArray(types.Float4)
				for _, f := range cs.MCVFreq {
					freqs.Elems = append(freqs.Elems, real4(f))
				}
				row = append(row, "most_common_vals", arrayText(c.Type, cs.MCV), "most_common_freqs", freqs)
			}
			if len(cs.Histogram) > 0 {
				row = append(row, "histogram_bounds", arrayText(c.Type, cs.Histogram))
			}
			out = append(out, t.row(row...))
		}
	}
	return out, nil
}

// nDistinct is pg_stats.n_distinct: the count itself, or, when it seems
// to grow with the table (more than a tenth of the rows, PostgreSQL's
// rule), minus its ratio to the row count (-1: unique).
func nDistinct(cs *stats.Column, rows float64) float64 {
	if rows <= 0 {
		return 0
	}
	nonNull := rows * (1 - cs.NullFrac)
	if cs.Distinct > 0.1*rows {
		if cs.Distinct >= nonNull*0.99 {
			return -(1 - cs.NullFrac)
		}
		return -cs.Distinct / rows
	}
	return math.Round(cs.Distinct)
}

// arrayText prints values of type typ as an array literal (anyarray
// columns are text in Cairn's pg_catalog).
func arrayText(typ *types.T, ds []types.Datum) types.Datum {
	at, err := types.MakeArray(typ)
	if err != nil {
		return types.DNull
	}
	return types.DString(types.Format(nil, at, types.NewArray(typ, ds...)))
}

// userTableStats are pg_stat_user_tables's figures from ts (none: zero and
// NULL, as for a table never analyzed).
func userTableStats(ts *stats.Table) []any {
	if ts == nil {
		return nil
	}
	return []any{"n_live_tup", int64(ts.RowCount), "last_analyze", types.DTimestampTZ(ts.CollectedAt.UnixMicro()), "analyze_count", 1}
}
