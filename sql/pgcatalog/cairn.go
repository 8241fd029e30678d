package pgcatalog

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// cairn_catalog holds Cairn's own introspection relations, which have no
// PostgreSQL counterpart. OIDs are picked below FirstUserID and above
// every OID PostgreSQL 15's initdb assigns.

// oidTablets is cairn_catalog.tablets' pg_class OID.
const oidTablets = 15001

func init() {
	define("cairn_catalog", "tablets", oidTablets, true,
		`database_name:name schema_name:name table_name:name index_name:name tablet_id:bigint start_key:text end_key:text replicas:integer[] leader:integer size_bytes:bigint live_bytes:bigint total_bytes:bigint colocated:boolean`,
		genTablets)
}

// genTablets lists, for every table of every database, the tablets
// holding its rows (index_name NULL) and those holding each of its
// secondary indexes: one row per relation and tablet, so the tables of a
// colocated database show the same tablet_id. A tablet holding no table
// (the system span's, an emptied one) has a row of its own with NULL
// names. Spans print as rowenc.PrettyKey does; replicas, leader and sizes
// are the tablet's own (a colocated table's own share is pg_table_size's),
// as the node's tablet directory (plan.VirtualEnv's Tablets) reports them,
// and the view is empty without one.
func genTablets(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	if s.env.Tablets == nil {
		return nil, nil
	}
	tablets, err := s.env.Tablets.Tablets(ctx)
	if err != nil {
		return nil, fmt.Errorf("cairn_catalog.tablets: %w", err)
	}
	sort.Slice(tablets, func(i, j int) bool { return bytes.Compare(tablets[i].StartKey, tablets[j].StartKey) < 0 })
	tabletRow := func(tb plan.TabletState, db, sc, tbl, idx any, colocated bool) []types.Datum {
		replicas := make([]int64, len(tb.Replicas))
		for i, r := range tb.Replicas {
			replicas[i] = int64(r)
		}
		var leader any
		if tb.Leader != 0 {
			leader = tb.Leader
		}
		return t.row("database_name", db, "schema_name", sc, "table_name", tbl, "index_name", idx,
			"tablet_id", int64(tb.ID), "start_key", rowenc.PrettyKey(tb.StartKey), "end_key", rowenc.PrettyKey(tb.EndKey),
			"replicas", replicas, "leader", leader, "size_bytes", int64(tb.SizeBytes),
			"live_bytes", tb.LiveBytes, "total_bytes", tb.TotalBytes, "colocated", colocated)
	}
	var out [][]types.Datum
	claimed := map[uint64]bool{}
	// overlapping calls f for each tablet sp reaches into.
	overlapping := func(sp kvpb.Span, f func(plan.TabletState)) {
		for _, tb := range tablets {
			if bytes.Compare(tb.StartKey, sp.EndKey) < 0 && bytes.Compare(sp.Key, tb.EndKey) < 0 {
				claimed[tb.ID] = true
				f(tb)
			}
		}
	}
	r := s.env.Catalog
	for _, db := range s.dbs {
		schemas, err := r.Schemas(ctx, db.ID)
		if err != nil {
			return nil, fmt.Errorf("cairn_catalog.tablets: schemas of %s: %w", db.Name, err)
		}
		for _, sc := range schemas {
			if sc.Virtual {
				continue
			}
			rels, err := r.Relations(ctx, db.ID, sc.ID)
			if err != nil {
				return nil, fmt.Errorf("cairn_catalog.tablets: relations of %s.%s: %w", db.Name, sc.Name, err)
			}
			for _, d := range rels {
				tbl, ok := d.(*catalog.Table)
				if !ok {
					continue
				}
				l, err := tbl.Layout()
				if err != nil {
					return nil, fmt.Errorf("cairn_catalog.tablets: table %s: %w", tbl.Name, err)
				}
				overlapping(l.IndexSpan(&l.Primary), func(tb plan.TabletState) {
					out = append(out, tabletRow(tb, db.Name, sc.Name, tbl.Name, nil, tbl.Colocated))
				})
				for i := range tbl.Indexes {
					ix := &tbl.Indexes[i]
					il := l.Index(uint32(ix.ID))
					if il == nil {
						continue
					}
					overlapping(l.IndexSpan(il), func(tb plan.TabletState) {
						out = append(out, tabletRow(tb, db.Name, sc.Name, tbl.Name, ix.Name, tbl.Colocated))
					})
				}
			}
		}
	}
	for _, tb := range tablets {
		if !claimed[tb.ID] {
			out = append(out, tabletRow(tb, nil, nil, nil, nil, false))
		}
	}
	return out, nil
}
