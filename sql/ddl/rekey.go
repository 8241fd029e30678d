package ddl

import (
	"context"
	"slices"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
)

// Online key changes (issue 16): ALTER INDEX ... SET (bucket_count = n)
// and ALTER PRIMARY KEY USING COLUMNS (the same columns) [USING HASH ...],
// in a statement of their own, run as a job while other sessions keep
// reading and writing the table. They change how an index's keys are
// hashed, never which rows it holds or which rows collide on a unique key,
// so the job is the colocation move's (colocation_job.go) with a rewrite
// as its target (catalog.TableMove.Target): the table's next descriptor,
// every index in fresh storage and split into its buckets first, which
// writers maintain beside the table (converting each row to the target's
// columns: the new shard column computed, the old one left out) while the
// job copies the rows that were there, then switches the descriptor over
// and frees the old storage. Progress, failure, cancellation and a job
// whose node died behave as for a move (docs/colocation.md, "Online, as a
// job").
//
// Inside a transaction block, in a statement with several subcommands, or
// for an ALTER PRIMARY KEY to other columns (whose uniqueness the old
// table does not check, and whose NOT NULL must be checked on every row),
// the change stays a rewrite in the statement's transaction (alterpk.go).

// RekeyJobType is the job type of an online key change (CockroachDB's
// name for its schema change jobs).
const RekeyJobType = "SCHEMA CHANGE"

// onlineRekeyOK says whether a key change of cur may run as a job: as for
// a move (onlineMoveOK), on a table whose storage is its indexes' own
// spans (not a hash-partitioned group the move would clear whole, nor a
// colocation group; neither can hold a hash-sharded index anyway).
func (e *executor) onlineRekeyOK(cur *catalog.Table) bool {
	return e.onlineMoveOK() && !cur.Colocated && cur.Partitioning.Kind != catalog.PartitionHash
}

// rekeyOnline runs the rewrite build makes of the table (from the version
// the job reads; nil: nothing to do) as a job, and returns when it has
// ended.
func (e *executor) rekeyOnline(ctx context.Context, cur *catalog.Table, build func(*catalog.Table) (*catalog.Table, error)) error {
	if cur.Move != nil {
		// A move or rewrite under way, or left by a node that died.
		if err := e.recoverOrphanedMove(ctx, cur); err != nil {
			return err
		}
	}
	if err := indexesPublic(cur); err != nil {
		return err
	}
	return e.runTableJob(ctx, cur, RekeyJobType, func(je *executor, t *catalog.Table, jobID int64) (*catalog.TableMove, error) {
		if err := indexesPublic(t); err != nil {
			return nil, err
		}
		nt, err := build(t)
		if err != nil || nt == nil {
			return nil, err
		}
		nt.Move = nil
		if err := catalog.MoveToFreshStorage(je.ctx, je.x.DB, nt); err != nil {
			return nil, err
		}
		return &catalog.TableMove{JobID: jobID, Target: nt}, nil
	})
}

// rehashPrimaryKey is cur with its primary key on the same columns ids
// hashed into buckets buckets (0: not hashed) and named name; nil when
// that is the key cur has.
func (e *executor) rehashPrimaryKey(cur *catalog.Table, name string, ids []rowenc.ColumnID, buckets int32) (*catalog.Table, error) {
	if !slices.Equal(cur.PrimaryIndex.UserKeyColumnIDs(), ids) {
		return nil, pgerror.New(pgerrcode.SerializationFailure, "the primary key of %q changed while ALTER PRIMARY KEY started", cur.Name)
	}
	t := cloneTable(cur)
	t.PrimaryIndex = catalog.Index{ID: catalog.PrimaryIndexID, Name: name, Unique: true, Kind: catalog.IndexBTree, State: catalog.IndexPublic,
		KeyColumnIDs: slices.Clone(ids), KeyDirections: make([]rowenc.Order, len(ids))}
	if buckets > 0 {
		if _, _, err := e.shardIndex(t, &t.PrimaryIndex, buckets); err != nil {
			return nil, err
		}
	}
	old, pk := &cur.PrimaryIndex, &t.PrimaryIndex
	if old.Name == pk.Name && slices.Equal(old.KeyColumnIDs, pk.KeyColumnIDs) && slices.Equal(old.KeyDirections, pk.KeyDirections) &&
		(old.HashSharding == nil) == (pk.HashSharding == nil) && (old.HashSharding == nil || *old.HashSharding == *pk.HashSharding) {
		return nil, nil
	}
	pk.StorageID, pk.Placement, pk.GroupID = old.StorageID, old.Placement, old.GroupID
	dropUnusedShardColumns(t)
	return t, nil
}

// indexesPublic refuses a key change of a table with an index still being
// built by its job (index_job.go): the rewrite would copy the index
// mid-build into the target, and the build's later steps, refused while
// the table is being rewritten, would leave it there half made.
func indexesPublic(t *catalog.Table) error {
	for _, idx := range t.Indexes {
		if idx.State != catalog.IndexPublic {
			return pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "index %q of table %q is being built", idx.Name, t.Name).
				WithHint("Wait for its CREATE INDEX job to finish (SHOW JOBS), then change the key.")
		}
	}
	return nil
}
