package ddl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// DefaultSplitTablets is how many tablets a table that opts out of its
// colocated database's group is split into when it does not say SPLIT INTO
// n TABLETS. YugabyteDB's default depends on the number of nodes and
// cores; Cairn runs on one node here, and 4 keeps a small table cheap
// while still spreading a large one once the cluster (issue #4) moves
// tablets apart (docs/colocation.md).
const DefaultSplitTablets = 4

// colocationValue parses the value of a colocated/colocation option, which
// YugabyteDB accepts as a boolean: anything else is 22023.
func colocationValue(d *pg_query.DefElem) (bool, error) {
	switch strings.ToLower(defString(d)) {
	case "true", "on", "1", "yes", "t", "y":
		return true, nil
	case "false", "off", "0", "no", "f", "n":
		return false, nil
	}
	return false, pgerror.New(pgerrcode.InvalidParameterValue,
		"invalid value for boolean option %q: %s", d.Defname, defString(d))
}

// tableColocation takes CREATE TABLE's Cairn colocation options out of
// opts (colocated/colocation and cairn_split_tablets, the dialect's
// spelling of SPLIT INTO n TABLETS), applies them to t and returns the
// options left for checkStorageParams. In a colocated database a table is
// colocated unless it says colocated = false; then it gets a group of its
// own, hash partitioned on its first primary-key column and split into
// InitialTablets tablets. Outside a colocated database colocated = false
// is a no-op (as in YugabyteDB) and colocated = true is 22023.
func (e *executor) tableColocation(t *catalog.Table, opts []*pg_query.Node) ([]*pg_query.Node, error) {
	colocated := e.x.Database.Colocated
	split := 0
	var rest []*pg_query.Node
	for _, o := range opts {
		d := o.GetDefElem()
		if d == nil || d.Defnamespace != "" {
			rest = append(rest, o)
			continue
		}
		switch d.Defname {
		case "colocated", "colocation":
			v, err := colocationValue(d)
			if err != nil {
				return nil, err
			}
			if v && !e.x.Database.Colocated {
				return nil, pgerror.New(pgerrcode.InvalidParameterValue,
					"cannot set colocated = true on table %q: database %q is not colocated", t.Name, e.x.Database.Name)
			}
			colocated = v
		case "cairn_split_tablets":
			n, err := defInt64(d)
			if err != nil {
				return nil, err
			}
			if n < 1 || n > rowenc.NumBuckets {
				return nil, pgerror.New(pgerrcode.InvalidParameterValue,
					"number of tablets %d out of range: it must be between 1 and %d", n, rowenc.NumBuckets)
			}
			split = int(n)
		default:
			rest = append(rest, o)
		}
	}
	if colocated && split != 0 {
		return nil, pgerror.New(pgerrcode.InvalidParameterValue,
			"cannot split colocated table %q into tablets: it shares its database's tablet", t.Name).
			WithHint("Create it WITH (colocated = false) to give it tablets of its own.")
	}
	if colocated {
		t.Colocated = true
		return rest, nil
	}
	if e.x.Database.Colocated || split != 0 {
		// An opted-out table of a colocated database, or a table of an
		// ordinary one that asks for tablets: hash partitioned so its
		// rows spread over the tablets it is split into.
		if split == 0 {
			split = DefaultSplitTablets
		}
		t.Partitioning = catalog.Partitioning{Kind: catalog.PartitionHash, HashColumns: 1, InitialTablets: split}
	}
	return rest, nil
}

// splitTable splits the keyspace for a new table's group: nothing for a
// colocated table (its database's group is a tablet already) or a range
// partitioned one, else the group's bounds and the bucket boundaries of
// its InitialTablets tablets.
func (e *executor) splitTable(ctx context.Context, t *catalog.Table) error {
	if t.Colocated || t.Partitioning.Kind != catalog.PartitionHash || t.Partitioning.InitialTablets == 0 {
		return nil
	}
	g := rowenc.GroupSpan(t.GroupID)
	keys := [][]byte{g.Key}
	n := t.Partitioning.InitialTablets
	for i := 1; i < n; i++ {
		keys = append(keys, rowenc.BucketSpan(t.GroupID, uint16(i*rowenc.NumBuckets/n), 0).Key)
	}
	keys = append(keys, g.EndKey)
	if err := e.splitAt(ctx, keys); err != nil {
		return err
	}
	if t.Partitioning.Distributed && t.Partitioning.ColocationID == t.GroupID {
		// Joining a colocation group's existing tablets: their leases
		// stay where they are (where rebalance_table_shards put them).
		return nil
	}
	e.spreadLeases(ctx, keys[:len(keys)-1], int(t.ID))
	return nil
}

// splitDatabaseGroup makes a colocated database's group one tablet of its
// own by splitting at the group span's bounds.
func (e *executor) splitDatabaseGroup(ctx context.Context, db *catalog.Database) error {
	g := rowenc.GroupSpan(db.ColocationGroupID)
	return e.splitAt(ctx, [][]byte{g.Key, g.EndKey})
}

// splitAt splits the tablets holding each key at it. Splits are not
// transactional: if the DDL's transaction rolls back, the empty tablets
// stay, which costs nothing but a tablet boundary. A key that is already a
// boundary is skipped.
func (e *executor) splitAt(ctx context.Context, splitKeys [][]byte) error {
	if e.x.DB == nil {
		return notSupported("splitting tablets needs the node's kv.DB")
	}
	keys := slices.Clone(splitKeys)
	slices.SortFunc(keys, bytes.Compare)
	keys = slices.CompactFunc(keys, bytes.Equal)
	sem := make(chan struct{}, maxParallelSplits)
	var (
		mu       sync.Mutex
		firstErr error
	)
	split := func(k []byte) {
		sem <- struct{}{}
		defer func() { <-sem }()
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.SplitRequest{SplitKey: k})
		if _, err := e.x.DB.Send(ctx, ba); err != nil {
			if _, ok := errors.AsType[*kvpb.InvalidArgumentError](err); ok {
				return // already a tablet boundary
			}
			mu.Lock()
			if firstErr == nil {
				firstErr = pgerror.Wrapf(err, pgerrcode.InternalError, "split tablets at %x", k)
			}
			mu.Unlock()
		}
	}
	// Bisect: split at the middle key, then split each half's keys in
	// parallel. After the middle split the halves' keys lie in different
	// tablets, so the concurrent splits never queue on one tablet's
	// latches, and a 2,048-bucket index takes log2(2048) rounds of
	// parallel splits instead of 2,048 splits in a row (issue 16).
	var bisect func(ks [][]byte)
	bisect = func(ks [][]byte) {
		if len(ks) == 0 {
			return
		}
		mid := len(ks) / 2
		split(ks[mid])
		var wg sync.WaitGroup
		wg.Go(func() { bisect(ks[:mid]) })
		bisect(ks[mid+1:])
		wg.Wait()
	}
	bisect(keys)
	return firstErr
}

// maxParallelSplits bounds the splits one DDL statement has in flight.
const maxParallelSplits = 32

// alterColocation is ALTER TABLE t SET (colocated = v [, cairn_split_tablets
// = n]): it moves t out of its database's colocation tablet into a
// hash-partitioned group of its own (split into n tablets, default
// DefaultSplitTablets), or back into the colocation tablet, and returns the
// options left for checkStorageParams. The same option values are valid as
// in CREATE TABLE: colocated = true in a database that is not colocated is
// 22023, colocated = false there (or on a table already where it asks to
// be) changes nothing.
//
// In a statement of its own (Context.AutoCommit) the move runs online as a
// job (colocation_job.go) and the statement returns when it has ended.
// Inside a transaction block it stays in the statement's transaction,
// which is what follows: like ALTER COLUMN TYPE it writes the rows under
// the new layout into fresh storage (rewrite) and updates the descriptor,
// then deletes the old row and index entries (transactionally: the
// colocation group they leave is shared with other tables), so a ROLLBACK
// or a failure leaves the table where it was and concurrent transactions
// see either layout whole. The new group's tablet splits are made first,
// outside the transaction (empty tablets stay if it rolls back).
func (e *executor) alterColocation(ctx context.Context, cur *catalog.Table, opts []*pg_query.Node) ([]*pg_query.Node, error) {
	asked := false
	split := false
	var distribute *pg_query.DefElem
	for _, d := range defElems(opts) {
		switch d.Defname {
		case "colocated", "colocation":
			asked = asked || d.Defnamespace == ""
		case "cairn_split_tablets":
			split = split || d.Defnamespace == ""
		case "cairn_distribution_column":
			if d.Defnamespace == "" {
				distribute = d
			}
		}
	}
	if distribute != nil {
		return e.alterDistribution(ctx, cur, opts, distribute)
	}
	if !asked && !split {
		return opts, nil
	}
	if !asked {
		// Only a tablet count: judged against where the table is now,
		// not where a new table of the database would go.
		opts = append([]*pg_query.Node{{Node: &pg_query.Node_DefElem{DefElem: &pg_query.DefElem{
			Defname: "colocated", Arg: pg_query.MakeStrNode(strconv.FormatBool(cur.Colocated))}}}}, opts...)
	}
	probe := &catalog.Table{Name: cur.Name}
	rest, err := e.tableColocation(probe, opts)
	if err != nil {
		return nil, err
	}
	// The other options are checked before anything moves.
	if err := checkStorageParams(rest, false); err != nil {
		return nil, err
	}
	if cur.Move != nil {
		// A move under way (or left by a node that died).
		if !e.onlineMoveOK() {
			return nil, catalog.ErrMoving(cur)
		}
		if err := e.recoverOrphanedMove(ctx, cur); err != nil {
			return nil, err
		}
	}
	if probe.Colocated == cur.Colocated {
		if split && (cur.Colocated || probe.Partitioning != cur.Partitioning) {
			return nil, notSupported("changing the number of tablets of table %q is not supported yet", cur.Name)
		}
		return rest, nil
	}
	if e.onlineMoveOK() {
		e.movedOnline = true
		return rest, e.moveOnline(ctx, cur, probe)
	}
	t := cloneTable(cur)
	t.Colocated = probe.Colocated
	if t.Colocated {
		t.GroupID = e.x.Database.ColocationGroupID
		t.Partitioning = catalog.Partitioning{Kind: catalog.PartitionSingle}
		for i := range t.Indexes {
			t.Indexes[i].Placement, t.Indexes[i].GroupID, t.Indexes[i].Blocks = catalog.IndexLocal, 0, 0
		}
	} else {
		// A group of its own, and its secondary indexes too (global), as
		// CREATE TABLE ... WITH (colocated = false) makes them.
		g, err := e.x.Writer.AllocateID(ctx)
		if err != nil {
			return nil, err
		}
		t.GroupID = uint64(g)
		t.Partitioning = probe.Partitioning
		for i := range t.Indexes {
			ig, err := e.x.Writer.AllocateID(ctx)
			if err != nil {
				return nil, err
			}
			t.Indexes[i].Placement, t.Indexes[i].GroupID, t.Indexes[i].Blocks = catalog.IndexGlobal, uint64(ig), 0
		}
		if err := e.splitTable(ctx, t); err != nil {
			return nil, err
		}
	}
	if err := e.rewrite(ctx, cur, t, func(r []types.Datum) ([]types.Datum, error) { return r, nil }); err != nil {
		return nil, err
	}
	// The old keys sit in another group, which (the colocation group)
	// other tables share: they are deleted, not left as garbage there.
	oldL, err := cur.Layout()
	if err != nil {
		return nil, err
	}
	if err := e.clearData(ctx, oldL); err != nil {
		return nil, err
	}
	return rest, nil
}

// DefaultShardCount is citus.shard_count's default, as in Citus.
const DefaultShardCount = 32

// alterDistribution makes cur a Citus-style distributed table, or an
// ordinary one again (docs/distributed.md): ALTER TABLE t SET
// (cairn_distribution_column = 'col' [, cairn_split_tablets = n]) is what
// create_distributed_table(t, col, shard_count => n) runs (sql/session,
// citus.go), and an empty cairn_distribution_column what undistribute_table
// runs. A distributed table is hash partitioned on its distribution
// column into n tablets with its secondary indexes local (beside their
// rows, in the same tablets; unique ones global), moved there as ALTER TABLE ... SET
// (colocated = ...) moves a table: online as a job when the statement
// is a transaction of its own, while reads and writes go on.
//
// The distribution column must be a primary-key column (42P16
// otherwise): rows are hashed on it (catalog.Partitioning.HashColumn when
// it is not the key's first), so a row's primary key fixes its shard. A
// table without a primary key (its key the hidden rowid,
// catalog.Table.RowIDKey) is the exception: its key becomes (column,
// rowid) with the move, and rowid alone again when it is undistributed
// (moveRekeyed).
//
// cairn_citus_create = true (create_distributed_table and its
// _concurrently form) refuses a table that is already distributed or a
// reference table (42P16), as Citus does.
//
// cairn_reference = true (create_reference_table) marks an ordinary
// table a reference table, in its descriptor only: it stays where it is.
// cairn_colocate_with = 'default' | 'none' | '<table>' is Citus's
// colocate_with: a named table (which must be distributed, on a column
// of the same type) lends its shard count and colocation ID; 'default'
// joins the colocation group of an existing distributed table with the
// same shard count and column type, as Citus's default does; 'none' and
// no option make a group of its own.
func (e *executor) alterDistribution(ctx context.Context, cur *catalog.Table, opts []*pg_query.Node, d *pg_query.DefElem) ([]*pg_query.Node, error) {
	col := defString(d)
	shards := 0
	reference, create := false, false
	colocateWith, cascade := "", ""
	var rest []*pg_query.Node
	for _, o := range opts {
		od := o.GetDefElem()
		switch {
		case od == nil || od.Defnamespace != "":
			rest = append(rest, o)
		case od.Defname == "cairn_reference":
			reference = defString(od) == "true"
		case od.Defname == "cairn_citus_create":
			create = defString(od) == "true"
		case od.Defname == "cairn_colocate_with":
			colocateWith = defString(od)
		case od.Defname == "cairn_cascade_colocated":
			cascade = defString(od)
		case od.Defname == "cairn_distribution_column":
		case od.Defname == "cairn_split_tablets":
			n, err := defInt64(od)
			if err != nil {
				return nil, err
			}
			if n < 1 || n > 64000 {
				return nil, pgerror.New(pgerrcode.InvalidParameterValue, "shard_count must be between 1 and 64000, not %d", n)
			}
			shards = int(n)
		default:
			rest = append(rest, o)
		}
	}
	if err := checkStorageParams(rest, false); err != nil {
		return nil, err
	}
	if cur.Colocated {
		return nil, pgerror.New(pgerrcode.FeatureNotSupported, "cannot distribute table %q: it is in its colocated database's tablet", cur.Name).
			WithHint("Move it out first: ALTER TABLE %s SET (colocated = false).", cur.Name)
	}
	if create && (cur.Partitioning.Distributed || cur.Partitioning.Reference) {
		// create_distributed_table(_concurrently) of a table that is
		// already one, as Citus answers; alter_distributed_table changes
		// one.
		return nil, pgerror.New(pgerrcode.InvalidTableDefinition, "table %q is already distributed", cur.Name)
	}
	if reference || (col == "" && shards == 0 && cur.Partitioning.Reference) {
		// create_reference_table, or undistribute_table of a reference
		// table: the descriptor's mark only.
		if reference && (cur.Partitioning.Distributed || cur.Partitioning.Reference) {
			return nil, pgerror.New(pgerrcode.InvalidTableDefinition, "table %q is already distributed", cur.Name)
		}
		if reference && cur.Partitioning.Kind == catalog.PartitionHash {
			return nil, notSupported("cannot make hash-partitioned table %q a reference table", cur.Name)
		}
		t := cloneTable(cur)
		t.Partitioning.Reference = reference
		if err := e.x.Writer.Update(ctx, t); err != nil {
			return nil, err
		}
		// A reference table's zone asks for global reads: every replica
		// serves present-time reads (zone.Config.GlobalReads,
		// tablet/closedts.go); undistribute_table drops that.
		return rest, e.refreshTableZone(ctx, t.ID, true)
	}
	colocation := uint64(0)
	if col == "" && (shards != 0 || (colocateWith != "" && colocateWith != "none" && colocateWith != "default")) {
		// alter_distributed_table without a column: the table's own.
		if !cur.Partitioning.Distributed || len(cur.HashColumnIDs()) != 1 {
			return nil, pgerror.New(pgerrcode.InvalidTableDefinition, "table %q is not distributed", cur.Name)
		}
		col = cur.ColumnByID(cur.HashColumnIDs()[0]).Name
	}
	if colocateWith != "" && colocateWith != "none" && col != "" {
		c := cur.ColumnByName(col)
		if c == nil {
			return nil, pgerror.New(pgerrcode.UndefinedColumn, "column \"%s\" of relation \"%s\" does not exist", col, cur.Name)
		}
		var err error
		if colocation, shards, err = e.colocationWith(ctx, cur, c, colocateWith, shards); err != nil {
			return nil, err
		}
	}
	probe := &catalog.Table{Name: cur.Name}
	var rekey []rowenc.ColumnID // the new primary key, when the move changes it
	if col == "" && shards != 0 {
		// A new shard count for a distributed table
		// (alter_distributed_table(t, shard_count => n)): its column.
		if !cur.Partitioning.Distributed || len(cur.HashColumnIDs()) != 1 {
			return nil, pgerror.New(pgerrcode.InvalidTableDefinition, "table %q is not distributed", cur.Name)
		}
		col = cur.ColumnByID(cur.HashColumnIDs()[0]).Name
	}
	if col != "" {
		c := cur.ColumnByName(col)
		if c == nil {
			return nil, pgerror.New(pgerrcode.UndefinedColumn, "column \"%s\" of relation \"%s\" does not exist", col, cur.Name)
		}
		pos := slices.Index(cur.PrimaryIndex.KeyColumnIDs, c.ID)
		if rowid, ok := cur.RowIDKey(); ok && c.ID != rowid && !c.Hidden {
			// A table without a primary key: its hidden rowid key
			// becomes (column, rowid), as Citus and CockroachDB users
			// expect such a table to distribute, so that a row's key
			// still fixes its shard (moveRekeyed).
			if key := []rowenc.ColumnID{c.ID, rowid}; !slices.Equal(cur.PrimaryIndex.KeyColumnIDs, key) {
				rekey = key
			}
			pos = 0
		}
		if pos < 0 || c.Hidden {
			// Citus's own rule: a unique constraint (the primary key
			// included) must contain the distribution column. Cairn's
			// other unique indexes are global and need not. A hidden
			// column (rowid, a hash-sharded index's shard column) is
			// none a user distributes by.
			return nil, pgerror.New(pgerrcode.InvalidTableDefinition, "cannot distribute table %q by column %q: the distribution column must be a column of the primary key", cur.Name, col).
				WithDetail("Rows are hashed into shards by a primary-key column, so that a row's key fixes its shard.")
		}
		if shards == 0 {
			// No count given: a distributed table keeps its own
			// (alter_distributed_table(t, distribution_column => c), as
			// Citus keeps it), a new one takes the default.
			shards = DefaultShardCount
			if cur.Partitioning.Distributed && cur.Partitioning.InitialTablets > 0 {
				shards = cur.Partitioning.InitialTablets
			}
		}
		probe.Partitioning = catalog.Partitioning{Kind: catalog.PartitionHash, HashColumns: 1, InitialTablets: shards, Distributed: true, ColocationID: colocation}
		if pos > 0 {
			// Hashed on a column after the key's first: the bucket is
			// still a function of the primary key (rowenc.HashColumn).
			probe.Partitioning.HashColumn = c.ID
		}
	} else {
		// Undistributed: range partitioned, as CREATE TABLE makes an
		// ordinary table (catalog.Writer).
		probe.Partitioning = catalog.Partitioning{Kind: catalog.PartitionRange}
		if !cur.Partitioning.Distributed {
			return nil, pgerror.New(pgerrcode.InvalidTableDefinition, "table %q is not distributed", cur.Name)
		}
		if rowid, ok := cur.RowIDKey(); ok && len(cur.PrimaryIndex.KeyColumnIDs) > 1 {
			// Its key was rewritten to (column, rowid) when it was
			// distributed: rowid alone again.
			rekey = []rowenc.ColumnID{rowid}
		}
	}
	if cur.Move != nil {
		if !e.onlineMoveOK() {
			return nil, catalog.ErrMoving(cur)
		}
		if err := e.recoverOrphanedMove(ctx, cur); err != nil {
			return nil, err
		}
	}
	if probe.Partitioning == cur.Partitioning && rekey == nil {
		return rest, nil
	}
	if !e.onlineMoveOK() {
		return nil, pgerror.New(pgerrcode.FeatureNotSupported, "distributing or undistributing table %q inside a transaction block is not supported", cur.Name).
			WithHint("Run it as a statement of its own: it moves the table online, as a job.")
	}
	// The tables colocated with cur, read before it moves: they follow it
	// (cascade_to_colocated => true), or a new shard count without the
	// argument is refused when there are any, as in Citus.
	var followers []*catalog.Table
	if cascade != "" && cur.Partitioning.Distributed {
		var err error
		if followers, err = e.colocatedWith(ctx, cur); err != nil {
			return nil, err
		}
		if cascade != "true" && len(followers) > 0 && probe.Partitioning.InitialTablets != cur.Partitioning.InitialTablets {
			return nil, pgerror.New(pgerrcode.InvalidParameterValue, "cascade_to_colocated parameter is necessary").
				WithDetail("this table is colocated with some other tables").
				WithHint("cascade_to_colocated := false will break the current colocation, cascade_to_colocated := true will change the shard count of colocated tables too.")
		}
	}
	e.movedOnline = true
	move := e.moveOnline
	if rekey != nil {
		move = func(ctx context.Context, cur, probe *catalog.Table) error {
			return e.moveRekeyed(ctx, cur, probe, rekey)
		}
	}
	if err := move(ctx, cur, probe); err != nil {
		return nil, err
	}
	if cascade != "true" {
		return rest, nil
	}
	return rest, e.cascadeColocated(ctx, cur, followers)
}

// colocatedWith lists the other distributed tables of cur's colocation
// group in the current database.
func (e *executor) colocatedWith(ctx context.Context, cur *catalog.Table) ([]*catalog.Table, error) {
	group := catalog.ColocationOf(cur)
	schemas, err := e.x.Writer.Schemas(ctx, e.x.Database.ID)
	if err != nil {
		return nil, err
	}
	var out []*catalog.Table
	for _, s := range schemas {
		rels, err := e.x.Writer.Relations(ctx, e.x.Database.ID, s.ID)
		if err != nil {
			return nil, err
		}
		for _, d := range rels {
			if t, ok := d.(*catalog.Table); ok && t.ID != cur.ID && t.Partitioning.Distributed && catalog.ColocationOf(t) == group {
				out = append(out, t)
			}
		}
	}
	return out, nil
}

// cascadeColocated is alter_distributed_table's cascade_to_colocated =>
// true, once table lead has moved: each of followers (the tables
// colocated with it before) moves into lead's new colocation group, with
// its shard count and its own distribution column, one online job after
// the other, as Citus alters each with colocate_with => lead. A failure
// leaves the followers moved so far where they are (and the statement
// fails, naming the table); running it again moves the rest.
func (e *executor) cascadeColocated(ctx context.Context, lead *catalog.Table, followers []*catalog.Table) error {
	var now *catalog.Table
	if err := e.jobTxn(ctx, func(je *executor) error {
		var err error
		now, err = je.x.Writer.TableByID(ctx, lead.ID)
		return err
	}); err != nil {
		return err
	}
	for _, f := range followers {
		probe := &catalog.Table{Name: f.Name, Partitioning: catalog.Partitioning{Kind: catalog.PartitionHash, HashColumns: 1,
			HashColumn: f.Partitioning.HashColumn, InitialTablets: now.Partitioning.InitialTablets, Distributed: true,
			ColocationID: catalog.ColocationOf(now)}}
		if err := e.moveOnline(ctx, f, probe); err != nil {
			return fmt.Errorf("cascading to colocated table %q: %w", f.Name, err)
		}
	}
	return nil
}

// colocationWith resolves colocate_with => with for cur distributed on
// column c: the colocation ID to take (0: a group of its own) and the
// shard count (shards, if the caller gave one). A named table must be
// distributed on a column of c's type, and a shard count given with it
// must be its own (Citus refuses the pair otherwise).
func (e *executor) colocationWith(ctx context.Context, cur *catalog.Table, c *catalog.Column, with string, shards int) (uint64, int, error) {
	distType := func(t *catalog.Table) *catalog.Column {
		if ids := t.HashColumnIDs(); t.Partitioning.Distributed && len(ids) == 1 {
			return t.ColumnByID(ids[0])
		}
		return nil
	}
	if with == "default" {
		want := shards
		if want == 0 {
			want = DefaultShardCount
		}
		schemas, err := e.x.Writer.Schemas(ctx, e.x.Database.ID)
		if err != nil {
			return 0, 0, err
		}
		for _, s := range schemas {
			rels, err := e.x.Writer.Relations(ctx, e.x.Database.ID, s.ID)
			if err != nil {
				return 0, 0, err
			}
			for _, d := range rels {
				t, ok := d.(*catalog.Table)
				if !ok || t.ID == cur.ID {
					continue
				}
				if dc := distType(t); dc != nil && dc.Type.Oid == c.Type.Oid && t.Partitioning.InitialTablets == want {
					return catalog.ColocationOf(t), shards, nil
				}
			}
		}
		return 0, shards, nil
	}
	res, err := pg_query.Parse("SELECT 1 FROM " + with)
	var rv *pg_query.RangeVar
	if err == nil && len(res.Stmts) == 1 {
		if sel := res.Stmts[0].Stmt.GetSelectStmt(); sel != nil && len(sel.FromClause) == 1 {
			rv = sel.FromClause[0].GetRangeVar()
		}
	}
	if rv == nil {
		return 0, 0, pgerror.New(pgerrcode.InvalidParameterValue, "colocate_with => %q is not a table name", with)
	}
	other, err := e.lookupTable(ctx, rv)
	if err != nil {
		return 0, 0, err
	}
	oc := distType(other)
	if oc == nil {
		return 0, 0, pgerror.New(pgerrcode.InvalidParameterValue, "cannot colocate table %q with table %q: it is not a distributed table", cur.Name, other.Name)
	}
	if oc.Type.Oid != c.Type.Oid {
		return 0, 0, pgerror.New(pgerrcode.InvalidParameterValue, "cannot colocate tables %s and %s", other.Name, cur.Name).
			WithDetail("Distribution column types don't match for %s and %s.", other.Name, cur.Name)
	}
	if shards != 0 && shards != other.Partitioning.InitialTablets {
		return 0, 0, pgerror.New(pgerrcode.InvalidParameterValue, "cannot colocate table %q with table %q of %d shards in %d shards", cur.Name, other.Name, other.Partitioning.InitialTablets, shards)
	}
	if other.ID == cur.ID {
		return catalog.ColocationOf(cur), other.Partitioning.InitialTablets, nil
	}
	return catalog.ColocationOf(other), other.Partitioning.InitialTablets, nil
}
