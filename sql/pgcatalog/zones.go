package pgcatalog

import (
	"context"
	"fmt"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/zone"
)

// oidZones is cairn_catalog.zones' pg_class OID.
const oidZones = 15002

func init() {
	define("cairn_catalog", "zones", oidZones, true,
		`target:text database_name:name schema_name:name table_name:name table_oid:oid num_replicas:integer lease_preferences:text raw_config_sql:text`,
		genZones)
}

// genZones lists the placement settings (ALTER ... CONFIGURE ZONE) in
// effect for every database (table_name NULL) and table: target says
// where they come from, as CockroachDB's SHOW ZONE CONFIGURATION does
// (TABLE t, DATABASE d, or RANGE default: the cluster's
// --replication-factor and --lease-preferences, which NULL columns also
// mean). A colocated table's settings are its database's. SHOW ZONE
// CONFIGURATION is rewritten into a query of this view (sql/parser).
func genZones(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	row := func(target string, db, sc, tbl any, oid any, cfg *zone.Config, stmt string) []types.Datum {
		var n, prefs, raw any
		if cfg != nil {
			if cfg.NumReplicas != 0 {
				n = int64(cfg.NumReplicas)
			}
			if cfg.PrefsSet {
				prefs = cfg.PrefsString()
			}
			raw = stmt + " CONFIGURE ZONE USING " + cfg.SQL()
		}
		return t.row("target", target, "database_name", db, "schema_name", sc, "table_name", tbl, "table_oid", oid,
			"num_replicas", n, "lease_preferences", prefs, "raw_config_sql", raw)
	}
	r := s.env.Catalog
	var out [][]types.Datum
	for _, db := range s.dbs {
		dbTarget := "RANGE default"
		if db.Zone != nil {
			dbTarget = "DATABASE " + db.Name
		}
		out = append(out, row(dbTarget, db.Name, nil, nil, nil, db.Zone, "ALTER DATABASE "+db.Name))
		schemas, err := r.Schemas(ctx, db.ID)
		if err != nil {
			return nil, fmt.Errorf("cairn_catalog.zones: schemas of %s: %w", db.Name, err)
		}
		for _, sc := range schemas {
			if sc.Virtual {
				continue
			}
			rels, err := r.Relations(ctx, db.ID, sc.ID)
			if err != nil {
				return nil, fmt.Errorf("cairn_catalog.zones: relations of %s.%s: %w", db.Name, sc.Name, err)
			}
			for _, d := range rels {
				tbl, ok := d.(*catalog.Table)
				if !ok {
					continue
				}
				oid := types.DOid(uint32(tbl.ID))
				if tbl.Zone == nil {
					out = append(out, row(dbTarget, db.Name, sc.Name, tbl.Name, oid, db.Zone, "ALTER DATABASE "+db.Name))
					continue
				}
				eff := *tbl.Zone
				if db.Zone != nil {
					eff = eff.Merge(*db.Zone)
				}
				out = append(out, row("TABLE "+sc.Name+"."+tbl.Name, db.Name, sc.Name, tbl.Name, oid, &eff, "ALTER TABLE "+sc.Name+"."+tbl.Name))
			}
		}
	}
	return out, nil
}
