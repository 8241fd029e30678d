package pgcatalog

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// Citus's metadata relations (issue 17; docs/distributed.md), with the
// columns Citus documents, over the current database's distributed
// tables (catalog.Partitioning.Distributed). A distributed table is a
// colocation group of its own, whose ID is its table group's; its
// shards are the bucket ranges it was split into (rowenc's 65,536
// buckets, where Citus hashes into int32 ranges), shard IDs the table's
// OID times 100,000 plus the shard's index. citus_shards names a shard's
// node by its leaseholder's node ID (nodename 'n<id>', nodeport 0): Cairn
// moves shards' leases between nodes, and the catalog does not know the
// nodes' addresses. A reference table (create_reference_table) is one
// shard of its whole key range, with partmethod 'n', replication model
// 't' and no distribution column, as Citus shows one; tables colocated
// with each other (colocate_with) share a colocation ID
// (catalog.ColocationOf).

// OIDs of the Citus relations, after cairn_catalog's.
const (
	oidPgDistPartition  = 15010
	oidPgDistShard      = 15011
	oidPgDistColocation = 15012
	oidCitusTables      = 15013
	oidCitusShards      = 15014
)

func init() {
	define("pg_catalog", "pg_dist_partition", oidPgDistPartition, false,
		`logicalrelid:regclass partmethod:"char" partkey:text colocationid:integer repmodel:"char" autoconverted:boolean`, genDistPartition)
	define("pg_catalog", "pg_dist_shard", oidPgDistShard, false,
		`logicalrelid:regclass shardid:bigint shardstorage:"char" shardminvalue:text shardmaxvalue:text`, genDistShard)
	define("pg_catalog", "pg_dist_colocation", oidPgDistColocation, false,
		`colocationid:integer shardcount:integer replicationfactor:integer distributioncolumntype:oid distributioncolumncollation:oid`, genDistColocation)
	define("pg_catalog", "citus_tables", oidCitusTables, true,
		`table_name:regclass citus_table_type:text distribution_column:name colocation_id:integer table_size:text shard_count:integer table_owner:name access_method:name`, genCitusTables)
	define("pg_catalog", "citus_shards", oidCitusShards, true,
		`table_name:regclass shardid:bigint shard_name:text citus_table_type:text colocation_id:integer nodename:text nodeport:integer shard_size:bigint`, genCitusShards)
}

// genCitusShards lists every shard (citusShards) in citus_shards'
// columns.
func genCitusShards(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	shards, err := citusShards(ctx, s, s.env.Tablets)
	if err != nil {
		return nil, fmt.Errorf("citus_shards: %w", err)
	}
	out := make([][]types.Datum, len(shards))
	for i, sh := range shards {
		var node any
		if sh.node != 0 {
			node = builtins.NodeName(sh.node)
		}
		out[i] = t.row("table_name", regclass(sh.rel.oid()), "shardid", sh.id, "shard_name", fmt.Sprintf("%s_%d", sh.table.Name, sh.id),
			"citus_table_type", sh.kind, "colocation_id", int64(catalog.ColocationOf(sh.table)), "nodename", node, "nodeport", int64(0), "shard_size", sh.size)
	}
	return out, nil
}

// citusShard is one shard of a distributed or reference table as the
// Citus views and citus_shard_sizes() show it.
type citusShard struct {
	rel   rel
	table *catalog.Table
	id    int64  // the table's OID times 100,000 plus the shard's index
	kind  string // distributed or reference
	node  int32  // the leaseholder of the tablet holding its first key; 0: unknown
	size  int64  // the live bytes of the tablets within its span
}

// citusShards lists every shard of the database's distributed and
// reference tables with the node leading the tablet that holds its first
// bucket and the bytes of the tablets within its bucket range
// (shardTablets): from the node's tablet directory for the shards whose
// tablets this node holds replicas of, from their leaseholders for the
// others. Without a directory, no node and no bytes.
func citusShards(ctx context.Context, s *snapshot, dir plan.TabletDirectory) ([]citusShard, error) {
	var tablets []plan.TabletState
	if dir != nil {
		var err error
		if tablets, err = dir.Tablets(ctx); err != nil {
			return nil, err
		}
	}
	var out []citusShard
	for _, r := range s.citusTables() {
		d := r.desc.(*catalog.Table)
		kind := "distributed"
		var spans []kvpb.Span
		if d.Partitioning.Reference {
			kind = "reference"
			l, err := d.Layout()
			if err != nil {
				return nil, err
			}
			spans = l.TableSpans()[:1]
		} else {
			for _, rg := range shardRanges(d.Partitioning.InitialTablets) {
				spans = append(spans, rowenc.BucketSpan(d.GroupID, uint16(rg[0]), uint16(rg[1])))
			}
		}
		for i, sp := range spans {
			sh := citusShard{rel: r, table: d, id: int64(r.oid())*100000 + int64(i), kind: kind}
			ts, err := shardTablets(ctx, dir, tablets, sp)
			if err != nil {
				return nil, err
			}
			for _, tb := range ts {
				sh.size += tb.LiveBytes
				if sh.node == 0 && tb.Leader != 0 && bytes.Compare(tb.StartKey, sp.Key) <= 0 {
					sh.node = tb.Leader
				}
			}
			out = append(out, sh)
		}
	}
	return out, nil
}

var _ builtins.ShardSizeInfo = (*Resolver)(nil)

// ShardSizes implements builtins.ShardSizeInfo (citus_shard_sizes()):
// every shard's bytes as citus_shards shows them.
func (res *Resolver) ShardSizes() ([]builtins.ShardSize, error) {
	s, err := res.load()
	if err != nil {
		return nil, err
	}
	shards, err := citusShards(res.ctx, s, res.tablets)
	if err != nil {
		return nil, fmt.Errorf("citus_shard_sizes: %w", err)
	}
	out := make([]builtins.ShardSize, len(shards))
	for i, sh := range shards {
		out[i] = builtins.ShardSize{ShardID: sh.id, Size: sh.size}
	}
	return out, nil
}

// shardTablets returns the tablets overlapping a shard's span sp: those
// of local (the node's own replicas, in key order, their sizes cached by
// the directory) when they cover sp whole, else, when the directory can
// ask the cluster (clusterTablets), the tablets of sp as their
// leaseholders describe them, one round trip and a count of the
// tablet's bytes on its leaseholder each. A node of a cluster with more
// nodes than replicas holds no replica of some shards; without this
// their node and size would be unknown here. A directory that cannot
// ask leaves the local ones.
func shardTablets(ctx context.Context, dir plan.TabletDirectory, local []plan.TabletState, sp kvpb.Span) ([]plan.TabletState, error) {
	var out []plan.TabletState
	next := sp.Key // the first key of sp no tablet of out holds yet
	covered := false
	for _, tb := range local {
		if bytes.Compare(tb.StartKey, sp.EndKey) >= 0 || (len(tb.EndKey) != 0 && bytes.Compare(sp.Key, tb.EndKey) >= 0) {
			continue
		}
		out = append(out, tb)
		if bytes.Compare(tb.StartKey, next) <= 0 && !covered {
			if len(tb.EndKey) == 0 || bytes.Compare(tb.EndKey, sp.EndKey) >= 0 {
				covered = true
			} else if bytes.Compare(tb.EndKey, next) > 0 {
				next = tb.EndKey
			}
		}
	}
	if covered {
		return out, nil
	}
	ct, ok := dir.(clusterTablets)
	if !ok {
		return out, nil
	}
	return ct.TabletsIn(ctx, sp)
}

// citusTables lists the current database's distributed and reference
// tables.
func (s *snapshot) citusTables() []rel {
	var out []rel
	for _, r := range s.tables() {
		if t := r.desc.(*catalog.Table); t.Partitioning.Distributed || t.Partitioning.Reference {
			out = append(out, r)
		}
	}
	return out
}

// distColumn is a distributed table's distribution column: the
// primary-key column its rows are hashed on (ddl.alterDistribution).
func distColumn(t *catalog.Table) *catalog.Column {
	ids := t.HashColumnIDs()
	if len(ids) != 1 {
		return nil
	}
	return t.ColumnByID(ids[0])
}

// attnum is c's position among t's columns, from 1 (pg_attribute's).
func attnum(t *catalog.Table, c *catalog.Column) int {
	for i := range t.Columns {
		if t.Columns[i].ID == c.ID {
			return i + 1
		}
	}
	return 0
}

func regclass(oid uint32) types.Datum { return types.DOid(oid) }

func genDistPartition(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, r := range s.citusTables() {
		d := r.desc.(*catalog.Table)
		if d.Partitioning.Reference {
			out = append(out, t.row("logicalrelid", regclass(r.oid()), "partmethod", "n", "partkey", nil,
				"colocationid", int64(catalog.ColocationOf(d)), "repmodel", "t", "autoconverted", false))
			continue
		}
		c := distColumn(d)
		if c == nil {
			continue
		}
		n := attnum(d, c)
		// partkey as Citus stores it: the column's Var node.
		key := fmt.Sprintf("{VAR :varno 1 :varattno %d :vartype %d :vartypmod %d :varcollid %d :varnullingrels (b) :varlevelsup 0 :varnosyn 1 :varattnosyn %d :location -1}",
			n, c.Type.Oid, c.Type.Typmod(), collationOf(c.Type), n)
		out = append(out, t.row("logicalrelid", regclass(r.oid()), "partmethod", "h", "partkey", key,
			"colocationid", int64(catalog.ColocationOf(d)), "repmodel", "s", "autoconverted", false))
	}
	return out, nil
}

// shardRanges are the bucket ranges of a table split into n tablets, as
// ddl splits them (rowenc.NumBuckets buckets in even runs).
func shardRanges(n int) [][2]int {
	if n < 1 {
		n = 1
	}
	out := make([][2]int, n)
	for i := range n {
		out[i] = [2]int{i * rowenc.NumBuckets / n, (i+1)*rowenc.NumBuckets/n - 1}
	}
	return out
}

func genDistShard(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, r := range s.citusTables() {
		d := r.desc.(*catalog.Table)
		if d.Partitioning.Reference {
			out = append(out, t.row("logicalrelid", regclass(r.oid()), "shardid", int64(r.oid())*100000,
				"shardstorage", "t", "shardminvalue", nil, "shardmaxvalue", nil))
			continue
		}
		for i, rg := range shardRanges(d.Partitioning.InitialTablets) {
			out = append(out, t.row("logicalrelid", regclass(r.oid()), "shardid", int64(r.oid())*100000+int64(i),
				"shardstorage", "t", "shardminvalue", fmt.Sprint(rg[0]), "shardmaxvalue", fmt.Sprint(rg[1])))
		}
	}
	return out, nil
}

// genDistColocation lists each colocation group once: the distributed
// tables sharing a colocation ID, and each reference table (shard count
// 1, replication factor -1 and no column type, as Citus shows the
// reference tables' group).
func genDistColocation(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	seen := map[uint64]bool{}
	for _, r := range s.citusTables() {
		d := r.desc.(*catalog.Table)
		id := catalog.ColocationOf(d)
		if seen[id] {
			continue
		}
		if d.Partitioning.Reference {
			seen[id] = true
			out = append(out, t.row("colocationid", int64(id), "shardcount", int64(1),
				"replicationfactor", int64(-1), "distributioncolumntype", types.DOid(0), "distributioncolumncollation", types.DOid(0)))
			continue
		}
		c := distColumn(d)
		if c == nil {
			continue
		}
		seen[id] = true
		out = append(out, t.row("colocationid", int64(id), "shardcount", int64(d.Partitioning.InitialTablets),
			"replicationfactor", int64(1), "distributioncolumntype", types.DOid(c.Type.Oid), "distributioncolumncollation", types.DOid(collationOf(c.Type))))
	}
	return out, nil
}

// genCitusTables lists the distributed and reference tables in
// citus_tables' columns. table_size is the sum of the table's shard sizes
// as citus_shards counts them (citusShards: the live bytes of each
// shard's tablets, which the tables colocated with it share), printed as
// Citus prints it, with pg_size_pretty; NULL where no shard's size is
// known (no tablet directory).
func genCitusTables(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	shards, err := citusShards(ctx, s, s.env.Tablets)
	if err != nil {
		return nil, fmt.Errorf("citus_tables: %w", err)
	}
	sizes := map[uint32]int64{}
	for _, sh := range shards {
		if s.env.Tablets != nil {
			sizes[sh.rel.oid()] += sh.size
		}
	}
	size := func(r rel) any {
		if n, ok := sizes[r.oid()]; ok {
			return builtins.SizePretty(n)
		}
		return nil
	}
	var out [][]types.Datum
	for _, r := range s.citusTables() {
		d := r.desc.(*catalog.Table)
		if d.Partitioning.Reference {
			out = append(out, t.row("table_name", regclass(r.oid()), "citus_table_type", "reference", "distribution_column", "<none>",
				"colocation_id", int64(catalog.ColocationOf(d)), "table_size", size(r), "shard_count", int64(1),
				"table_owner", owner(d.Owner), "access_method", "heap"))
			continue
		}
		c := distColumn(d)
		if c == nil {
			continue
		}
		out = append(out, t.row("table_name", regclass(r.oid()), "citus_table_type", "distributed", "distribution_column", c.Name,
			"colocation_id", int64(catalog.ColocationOf(d)), "table_size", size(r), "shard_count", int64(d.Partitioning.InitialTablets),
			"table_owner", owner(d.Owner), "access_method", "heap"))
	}
	return out, nil
}
