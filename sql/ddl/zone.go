package ddl

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/zone"
)

// Placement and GC settings (CockroachDB's zone configurations;
// docs/architecture.md "Placement: zones"). The dialect rewriter turns
//
//	ALTER DATABASE d CONFIGURE ZONE USING num_replicas = 5, lease_preferences = '[[+region=eu]]', gc.ttlseconds = 600
//	ALTER TABLE t CONFIGURE ZONE USING ... | CONFIGURE ZONE DISCARD
//
// into options named zoneOptPrefix+name (ALTER DATABASE d WITH ...,
// ALTER TABLE t SET (...)), which are also the storage-parameter spelling.
// The settings go into the descriptor (only the fields given change, as in
// CockroachDB), and the effective settings of every table group they
// reach are written as zone records (package zone) in the same
// transaction, for the replicate queue and the lease balancer. A group
// with settings is split off into tablets of its own, since those queues
// work per tablet.

// zoneOptPrefix starts the options the rewriter makes of a USING list.
const zoneOptPrefix = "cairn_zone_"

// zoneOptions takes the zone options out of opts, applies them to cur
// (nil: none) and returns the new settings (nil: none), the other
// options, and whether there were any.
func zoneOptions(cur *zone.Config, opts []*pg_query.Node) (*zone.Config, []*pg_query.Node, bool, error) {
	var rest []*pg_query.Node
	var cfg zone.Config
	if cur != nil {
		cfg = *cur
	}
	seen := map[string]bool{}
	any, discard := false, false
	for _, o := range opts {
		d := o.GetDefElem()
		if d == nil || d.Defnamespace != "" || !strings.HasPrefix(d.Defname, zoneOptPrefix) {
			rest = append(rest, o)
			continue
		}
		any = true
		name := strings.TrimPrefix(d.Defname, zoneOptPrefix)
		if seen[name] {
			return nil, nil, true, pgerror.New(pgerrcode.SyntaxError, "zone option %q given more than once", name)
		}
		seen[name] = true
		switch name {
		case "discard":
			discard = true
		case "num_replicas":
			n, err := defInt64(d)
			if err != nil {
				return nil, nil, true, pgerror.New(pgerrcode.InvalidParameterValue, "num_replicas must be an integer, not %q", defString(d))
			}
			if n < 1 || n > zone.MaxReplicas {
				return nil, nil, true, pgerror.New(pgerrcode.InvalidParameterValue, "num_replicas must be between 1 and %d, not %d", zone.MaxReplicas, n)
			}
			cfg.NumReplicas = int(n)
		case "gc.ttlseconds":
			n, err := defInt64(d)
			if err != nil {
				return nil, nil, true, pgerror.New(pgerrcode.InvalidParameterValue, "gc.ttlseconds must be an integer, not %q", defString(d))
			}
			if n < 1 || n > zone.MaxGCTTLSeconds {
				return nil, nil, true, pgerror.New(pgerrcode.InvalidParameterValue, "gc.ttlseconds must be between 1 and %d, not %d", zone.MaxGCTTLSeconds, n)
			}
			cfg.GCTTLSeconds = n
		case "lease_preferences":
			regions, err := zone.ParseLeasePreferences(defString(d))
			if err != nil {
				return nil, nil, true, pgerror.New(pgerrcode.InvalidParameterValue, "%s", err.Error())
			}
			cfg.LeasePreferences, cfg.PrefsSet = regions, true
		default:
			return nil, nil, true, pgerror.New(pgerrcode.InvalidParameterValue,
				"unknown zone option %q", name).WithHint("Supported: num_replicas, lease_preferences, gc.ttlseconds.")
		}
	}
	if discard {
		if len(seen) > 1 {
			return nil, nil, true, pgerror.New(pgerrcode.SyntaxError, "CONFIGURE ZONE DISCARD takes no other option")
		}
		return nil, rest, true, nil
	}
	if !any || cfg.IsZero() {
		return nil, rest, any, nil
	}
	return &cfg, rest, true, nil
}

// hasZoneOptions reports whether opts hold a zone option.
func hasZoneOptions(opts []*pg_query.Node) bool {
	for _, d := range defElems(opts) {
		if d.Defnamespace == "" && strings.HasPrefix(d.Defname, zoneOptPrefix) {
			return true
		}
	}
	return false
}

// alterDatabase is ALTER DATABASE d WITH ...: only the zone options (the
// rewriter's form of CONFIGURE ZONE) are supported.
func (e *executor) alterDatabase(ctx context.Context, n *pg_query.AlterDatabaseStmt) (string, error) {
	if !hasZoneOptions(n.Options) {
		return "ALTER DATABASE", notSupported("ALTER DATABASE with these options is not supported yet")
	}
	db, err := e.x.Writer.Database(ctx, n.Dbname)
	if err != nil {
		return "ALTER DATABASE", err
	}
	if err := e.checkOwner(ctx, db); err != nil {
		return "ALTER DATABASE", err
	}
	cfg, rest, _, err := zoneOptions(db.Zone, n.Options)
	if err != nil {
		return "ALTER DATABASE", err
	}
	if len(rest) > 0 {
		return "ALTER DATABASE", notSupported("ALTER DATABASE cannot mix CONFIGURE ZONE with other options")
	}
	c := *db
	c.Zone = cfg
	if err := e.x.Writer.Update(ctx, &c); err != nil {
		return "ALTER DATABASE", err
	}
	tables, err := e.databaseTables(ctx, c.ID)
	if err != nil {
		return "ALTER DATABASE", err
	}
	return "ALTER DATABASE", e.writeZones(ctx, &c, tables...)
}

// alterTableZone applies the zone options of ALTER TABLE t SET (...) to t
// and returns the other options.
func (e *executor) alterTableZone(ctx context.Context, cur *catalog.Table, opts []*pg_query.Node) ([]*pg_query.Node, error) {
	if !hasZoneOptions(opts) {
		return opts, nil
	}
	if cur.Colocated {
		return nil, pgerror.New(pgerrcode.FeatureNotSupported,
			"cannot configure the zone of colocated table %q: it shares its database's tablet", cur.Name).
			WithHint("Configure the database's zone (ALTER DATABASE ... CONFIGURE ZONE), or move the table out with ALTER TABLE ... SET (colocated = false).")
	}
	cfg, rest, _, err := zoneOptions(cur.Zone, opts)
	if err != nil {
		return nil, err
	}
	t := cloneTable(cur)
	t.Zone = cfg
	if err := e.x.Writer.Update(ctx, t); err != nil {
		return nil, err
	}
	return rest, nil
}

// refreshTableZone rewrites the zone records of table id's groups (after
// its zone or its group changed); unless force, only when the table or
// its database has settings.
func (e *executor) refreshTableZone(ctx context.Context, id catalog.ID, force bool) error {
	t, err := e.x.Writer.TableByID(ctx, id)
	if err != nil {
		return err
	}
	d, err := e.x.Writer.ByID(ctx, t.DatabaseID)
	if err != nil {
		return err
	}
	db, ok := d.(*catalog.Database)
	if !ok {
		return fmt.Errorf("table %q: database %d is a %T", t.Name, t.DatabaseID, d)
	}
	if !force && db.Zone == nil && t.Zone == nil {
		return nil
	}
	return e.writeZones(ctx, db, t)
}

// groupBlocks is the block count of distributed table t's group
// (zone.Config.BucketBlocks): that of the local GIN indexes of t or of a
// table colocated with it (they share the shard count, hence the
// blocks), else 0. Every table of the group writes the group's record
// (the last one written wins), so each asks about all of them.
func (e *executor) groupBlocks(ctx context.Context, t *catalog.Table) (int, error) {
	if n := tableBlocks(t); n > 0 {
		return n, nil
	}
	tables, err := e.databaseTables(ctx, t.DatabaseID)
	if err != nil {
		return 0, err
	}
	for _, o := range tables {
		if o.ID != t.ID && o.GroupID == t.GroupID {
			if n := tableBlocks(o); n > 0 {
				return n, nil
			}
		}
	}
	return 0, nil
}

// tableBlocks is the block count of t's local GIN indexes, 0 if none.
func tableBlocks(t *catalog.Table) int {
	for i := range t.Indexes {
		if ix := &t.Indexes[i]; ix.Placement == catalog.IndexLocal && ix.Blocks > 0 {
			return ix.Blocks
		}
	}
	return 0
}

// refreshBlocksZone rewrites the zone record of t's group when idx, just
// placed on t, is a local GIN index with blocks: from then on the split
// queue splits the group only between blocks (zone.Config.BucketBlocks).
func (e *executor) refreshBlocksZone(ctx context.Context, t *catalog.Table, idx *catalog.Index) error {
	if idx.Blocks == 0 {
		return nil
	}
	d, err := e.x.Writer.ByID(ctx, t.DatabaseID)
	if err != nil {
		return err
	}
	db, ok := d.(*catalog.Database)
	if !ok {
		return fmt.Errorf("table %q: database %d is a %T", t.Name, t.DatabaseID, d)
	}
	return e.writeZones(ctx, db, t)
}

// databaseTables lists the tables of database id.
func (e *executor) databaseTables(ctx context.Context, id catalog.ID) ([]*catalog.Table, error) {
	schemas, err := e.x.Writer.Schemas(ctx, id)
	if err != nil {
		return nil, err
	}
	var out []*catalog.Table
	for _, sc := range schemas {
		if sc.Virtual {
			continue
		}
		rels, err := e.x.Writer.Relations(ctx, id, sc.ID)
		if err != nil {
			return nil, err
		}
		for _, r := range rels {
			if t, ok := r.(*catalog.Table); ok {
				out = append(out, t)
			}
		}
	}
	return out, nil
}

// writeZones writes the zone records of db's colocation group (if it has
// one) and of the groups of tables (their own group and their global
// indexes'): the table's settings over the database's, none when neither
// sets anything. A group with settings is split into tablets of its own.
func (e *executor) writeZones(ctx context.Context, db *catalog.Database, tables ...*catalog.Table) error {
	var parent zone.Config
	if db.Zone != nil {
		parent = *db.Zone
	}
	var splits [][]byte
	put := func(g uint64, cfg zone.Config) error {
		k := zone.Key(rowenc.GroupPrefix(nil, g))
		if cfg.IsZero() {
			return e.x.Txn.Delete(ctx, k)
		}
		v, err := zone.Encode(cfg)
		if err != nil {
			return err
		}
		sp := rowenc.GroupSpan(g)
		splits = append(splits, sp.Key, sp.EndKey)
		return e.x.Txn.Put(ctx, k, v)
	}
	if db.Colocated && db.ColocationGroupID != 0 {
		if err := put(db.ColocationGroupID, parent); err != nil {
			return err
		}
	}
	for _, t := range tables {
		if t.Colocated {
			continue
		}
		own := zone.Config{}
		if t.Zone != nil {
			own = *t.Zone
		}
		eff := own.Merge(parent)
		eff.GlobalReads = t.Partitioning.Reference
		// A distributed table's group, which the tables colocated with it
		// share: its shards may split, between buckets. The group's record
		// is one for all of them: the last table written sets it.
		one := eff
		one.BucketSplits = t.Partitioning.Distributed && t.GroupID != uint64(t.ID)
		if one.BucketSplits {
			var err error
			if one.BucketBlocks, err = e.groupBlocks(ctx, t); err != nil {
				return err
			}
		}
		if err := put(t.GroupID, one); err != nil {
			return err
		}
		for i := range t.Indexes {
			if ix := &t.Indexes[i]; ix.Placement == catalog.IndexGlobal && ix.GroupID != 0 {
				if err := put(ix.GroupID, eff); err != nil {
					return err
				}
			}
		}
	}
	if len(splits) == 0 || e.x.DB == nil {
		return nil
	}
	return e.splitAt(ctx, splits)
}
