package ddl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/jobs"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// The online move of a table in or out of its database's colocation
// tablet (ALTER TABLE t SET (colocated = ...) in a statement of its own),
// run as a job (package jobs) in transactions of its own while other
// sessions keep reading and writing the table:
//
//  1. start: a transaction allocates the target's groups and storage
//     (catalog.TableMove), its tablets are split, and another transaction
//     writes the descriptor with the move. From
//     its commit on, every writer maintains the target as well as the
//     table (sql/exec, catalog.MoveWrite): writers validate at commit the
//     descriptor they wrote through (kv/txn_validate.go), so a writer
//     either commits below this write, and its row is in the old storage
//     the copy reads, or it resolved the new version and writes both.
//  2. copy: the rows are read from the old storage a page at a time, each
//     page in a serializable transaction that writes the page's rows whole
//     into the target (catalog.MoveWrite). A writer that changes a row of
//     the page concurrently writes the same target keys, so the two
//     serialize: either the page read the writer's row, or the writer's
//     later write replaces what the page wrote (a page whose read a
//     writer invalidated restarts, smaller). Progress is the share of the
//     old storage's keys copied (counted once before the copy).
//     Writing the pages as committed versions below their read
//     timestamp (kv.Txn.RunBulk, as CREATE INDEX's backfill does) was
//     tried and dropped: it can put a committed version under a writer's
//     intent, which MVCC invariant 2 forbids, and with it the load test
//     saw a unique violation no row explained once in 40 runs (none in 30
//     runs of this design; the cause was not pinned down).
//  3. switch: one transaction replaces the descriptor's location by the
//     target's (catalog.Table.MoveTarget) and drops the move; writers
//     that resolved the move version commit below it, so the target holds
//     every write; readers switch with the descriptor.
//  4. free: after MoveClearDelay (statements that resolved the old version
//     before the switch finish reading), the old storage's exact spans
//     (rowenc.TableLayout.StorageSpans) are removed by range deletions
//     (kvpb.ClearRangeRequest).
//
// A failure or a cancellation before the switch commits rolls the move
// back: the move is dropped from the descriptor, the target's storage is
// cleared, and the job ends failed or canceled; the table never left its
// old storage. A node that dies mid-move leaves the move in the descriptor
// (writers go on writing both places, which is correct) and its job
// running with a heartbeat that stops: once it is older than
// jobs.OrphanAfter, the next ALTER TABLE ... SET (colocated = ...) of the
// table rolls it back the same way before doing what it asks; until then
// other schema changes of the table are refused (catalog.ErrMoving).

// MoveJobType is the job type of a table move.
const MoveJobType = "MOVE TABLE"

// movePage is how many KVs of the old storage one copy transaction reads.
const movePage = 500

// MoveClearDelay is how long a move waits after switching the table over
// before it frees the old storage. A variable so that tests can shorten
// it.
var MoveClearDelay = 2 * time.Second

// moveTestingHooks let tests stop a move between pages, or make its job
// vanish as if its node had died (errJobDied).
var moveTestingHooks struct {
	afterPage func(jobID int64, page int) error
}

// errJobDied, returned by a testing hook, makes the move stop where it is,
// writing nothing more, as a node that dies would.
var errJobDied = errors.New("ddl: testing: the job's node died")

// movePayload is a move job's jobs.Record.Payload.
type movePayload struct {
	TableID catalog.ID `json:"table_id"`
}

// onlineMoveOK says whether this ALTER TABLE may move its table as a job:
// a statement of its own (ddl.Context.AutoCommit), with one subcommand
// whose options are only the colocation ones, on a node with a KV client.
// Otherwise the move is a rewrite in the statement's transaction, which a
// ROLLBACK undoes.
func (e *executor) onlineMoveOK() bool {
	return e.x.AutoCommit && e.x.DB != nil && e.singleAlter
}

// jobTxn runs fn in a serializable transaction of the job's own, with an
// executor whose catalog Writer writes through the node's cache.
func (e *executor) jobTxn(ctx context.Context, fn func(je *executor) error) error {
	var txns []*kv.Txn
	err := e.x.DB.BackgroundTxn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		txns = append(txns, txn)
		x := *e.x
		x.Txn, x.Writer = txn, e.x.Writer.InTxn(txn)
		return fn(&executor{x: &x, stmt: e.stmt, ctx: ctx})
	})
	for _, t := range txns {
		e.x.Writer.EndDDL(t)
	}
	return err
}

// movePlan decides, in a job transaction je over table t as it is now,
// the move a job makes (JobID set): nil when there is nothing to do (the
// table is already as asked).
type movePlan func(je *executor, t *catalog.Table, jobID int64) (*catalog.TableMove, error)

// moveOnline moves table id to where probe says (Colocated, Partitioning)
// as a job, and returns when the job has ended: nil if it succeeded.
func (e *executor) moveOnline(ctx context.Context, cur *catalog.Table, probe *catalog.Table) error {
	return e.runTableJob(ctx, cur, MoveJobType, func(je *executor, t *catalog.Table, jobID int64) (*catalog.TableMove, error) {
		if movedTo(t, probe) {
			// Moved there by another session since the statement read
			// the table: nothing to do.
			return nil, nil
		}
		return je.moveTarget(je.ctx, t, probe, jobID)
	})
}

// moveRekeyed is moveOnline of a table whose primary key changes with
// the move: the hidden rowid key of a table created without a primary
// key becomes (distribution column, rowid) when it is distributed, and
// rowid alone again when it is undistributed (alterDistribution). The
// move is a rewrite (catalog.TableMove.Target) whose target is where
// moveTarget places the table, with key as its primary key: rows keep
// their columns (rowid among them), so writers and the copy convert
// them by column ID, and no two rows collide on the new key that did not
// on rowid, unique by itself. The new key's columns are NOT NULL in the
// target; a row with a NULL there, copied or written during the move,
// fails with 23502 (catalog.RowConv) and the move is rolled back.
func (e *executor) moveRekeyed(ctx context.Context, cur *catalog.Table, probe *catalog.Table, key []rowenc.ColumnID) error {
	return e.runTableJob(ctx, cur, MoveJobType, func(je *executor, t *catalog.Table, jobID int64) (*catalog.TableMove, error) {
		if movedTo(t, probe) && slices.Equal(t.PrimaryIndex.KeyColumnIDs, key) {
			return nil, nil
		}
		if _, ok := t.RowIDKey(); !ok {
			return nil, pgerror.New(pgerrcode.SerializationFailure, "the primary key of %q changed while the job started", t.Name)
		}
		m, err := je.moveTarget(je.ctx, t, probe, jobID)
		if err != nil {
			return nil, err
		}
		moved := cloneTable(t)
		moved.Move = m
		at, err := moved.MoveTarget()
		if err != nil {
			return nil, err
		}
		nt := cloneTable(at)
		nt.PrimaryIndex.KeyColumnIDs = slices.Clone(key)
		nt.PrimaryIndex.KeyDirections = make([]rowenc.Order, len(key))
		for _, id := range key {
			nt.ColumnByID(id).Nullable = false
		}
		return &catalog.TableMove{JobID: jobID, Target: nt}, nil
	})
}

// movedTo says whether t is where probe says a move takes it: colocated
// or not, and (for a distributed table or one made ordinary again,
// ddl.alterDistribution) partitioned as probe is.
func movedTo(t, probe *catalog.Table) bool {
	if t.Colocated != probe.Colocated {
		return false
	}
	return t.Colocated || !(probe.Partitioning.Distributed || t.Partitioning.Distributed) || t.Partitioning == probe.Partitioning
}

// runTableJob runs the move plan decides (a colocation move, or a
// rewrite: rekey.go) of table cur as a job of type jobType, and returns
// when the job has ended: nil if it succeeded.
func (e *executor) runTableJob(ctx context.Context, cur *catalog.Table, jobType string, plan movePlan) error {
	desc := e.stmt.Original
	if desc == "" {
		desc = e.stmt.SQL
	}
	payload, err := json.Marshal(movePayload{TableID: cur.ID})
	if err != nil {
		return err
	}
	job, err := jobs.Create(ctx, e.x.DB, jobs.Record{Type: jobType, Description: desc, User: e.x.User, Payload: payload})
	if err != nil {
		return err
	}
	// The heartbeat and the roll-back outlive a cancelled statement.
	bg := context.WithoutCancel(ctx)
	stop := job.KeepAlive(bg)
	defer stop()
	moving, err := e.runMove(ctx, job, cur.ID, cur.Name, plan)
	if errors.Is(err, errJobDied) {
		return err
	}
	if err != nil {
		switched, rbErr := e.rollBackMove(bg, cur.ID, job.ID(), moving)
		if rbErr == nil && switched {
			// The switch committed although its commit reported an
			// error: the move is done but for freeing the old storage.
			e.finishMove(bg, moving)
			_ = job.Finish(bg, jobs.StatusSucceeded, nil)
			return nil
		}
		status := jobs.StatusFailed
		if ctx.Err() != nil {
			status = jobs.StatusCanceled
		}
		cause := err
		if rbErr != nil {
			cause = fmt.Errorf("%w (rolling back: %v)", err, rbErr)
		}
		_ = job.Finish(bg, status, cause)
		return err
	}
	// The table has moved whatever happens to the record: a record left
	// running only shows as such (no descriptor names its job any more).
	_ = job.Finish(bg, jobs.StatusSucceeded, nil)
	return nil
}

// startAttempts bounds how often step 1 plans again because the table
// changed between planning and publishing the move.
const startAttempts = 5

// runMove is steps 1 to 4 of the move (see above). It returns the move
// version of the descriptor once step 1 committed (nil if plan found
// nothing to do).
func (e *executor) runMove(ctx context.Context, job *jobs.Job, id catalog.ID, name string, plan movePlan) (*catalog.Table, error) {
	// 1. start. The target is planned and its tablets split before the
	// move is published, so that writers never write into tablets being
	// split under them; the move is published only over the descriptor
	// version it was planned from (a rewrite's target is that version
	// rewritten).
	var moving *catalog.Table
	for attempt := 1; ; attempt++ {
		var move *catalog.TableMove
		var target *catalog.Table
		var version uint64
		err := e.jobTxn(ctx, func(je *executor) error {
			move, target = nil, nil
			t, err := je.x.Writer.TableByID(ctx, id)
			if err != nil {
				return err
			}
			if t.Move != nil {
				return catalog.ErrMoving(t)
			}
			if move, err = plan(je, t, job.ID()); err != nil || move == nil {
				return err
			}
			version = t.Version
			nt := cloneTable(t)
			nt.Move = move
			target, err = nt.MoveTarget()
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("starting the change of table %q: %w", name, err)
		}
		if move == nil {
			return nil, nil
		}
		if err := e.splitTarget(ctx, target); err != nil {
			return nil, err
		}
		changed := false
		err = e.jobTxn(ctx, func(je *executor) error {
			moving, changed = nil, false
			t, err := je.x.Writer.TableByID(ctx, id)
			if err != nil {
				return err
			}
			if t.Move != nil {
				return catalog.ErrMoving(t)
			}
			if t.Version != version {
				changed = true
				return nil
			}
			nt := cloneTable(t)
			nt.Move = move
			if err := je.x.Writer.Update(ctx, nt); err != nil {
				return err
			}
			moving = nt
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("starting the change of table %q: %w", name, err)
		}
		if !changed {
			break
		}
		if attempt == startAttempts {
			return nil, pgerror.New(pgerrcode.SerializationFailure, "table %q kept changing while the job started", name)
		}
	}
	// 2. copy.
	if err := e.copyForMove(ctx, job, moving); err != nil {
		return moving, err
	}
	// 3. switch.
	err := e.jobTxn(ctx, func(je *executor) error {
		t, err := je.x.Writer.TableByID(ctx, id)
		if err != nil {
			return err
		}
		if t.Move == nil || t.Move.JobID != job.ID() {
			return fmt.Errorf("ddl: table %q lost the move of job %d", t.Name, job.ID())
		}
		nt, err := t.MoveTarget()
		if err != nil {
			return err
		}
		if err := je.x.Writer.Update(ctx, nt); err != nil {
			return err
		}
		if t.Move.Target != nil && t.Move.Target.GroupID == t.GroupID {
			// A rewrite in place stays in its groups (a rewrite that
			// also moves, moveRekeyed, does not).
			return nil
		}
		// The zone settings follow the table to its new group.
		return je.refreshTableZone(ctx, id, true)
	})
	if err != nil {
		return moving, fmt.Errorf("switching table %q over: %w", name, err)
	}
	// 4. free. The move is done: what follows cannot fail it.
	bg := context.WithoutCancel(ctx)
	_ = job.Progress(bg, 0.95)
	e.finishMove(bg, moving)
	return moving, nil
}

// splitTarget splits the tablets a move's target needs before it takes
// writes: a hash-partitioned table's group, and a tablet per bucket of
// each hash-sharded index.
func (e *executor) splitTarget(ctx context.Context, target *catalog.Table) error {
	if err := e.splitTable(ctx, target); err != nil {
		return err
	}
	for _, idx := range append([]*catalog.Index{&target.PrimaryIndex}, indexPtrs(target.Indexes)...) {
		if err := e.splitShards(ctx, target, idx.ID); err != nil {
			return err
		}
	}
	return nil
}

// moveTarget allocates where t goes (probe's Colocated and Partitioning):
// the database's colocation group with local indexes, or a group of its
// own and one per secondary index; fresh storage for every index.
func (e *executor) moveTarget(ctx context.Context, t, probe *catalog.Table, jobID int64) (*catalog.TableMove, error) {
	m := &catalog.TableMove{JobID: jobID, Colocated: probe.Colocated}
	sids, err := catalog.AllocateStorageIDs(ctx, e.x.DB, 1+len(t.Indexes))
	if err != nil {
		return nil, err
	}
	m.Indexes = append(m.Indexes, catalog.MovedIndex{ID: t.PrimaryIndex.ID, StorageID: sids[0]})
	if probe.Colocated {
		m.GroupID = e.x.Database.ColocationGroupID
		m.Partitioning = catalog.Partitioning{Kind: catalog.PartitionSingle}
		for i, idx := range t.Indexes {
			m.Indexes = append(m.Indexes, catalog.MovedIndex{ID: idx.ID, Placement: catalog.IndexLocal, StorageID: sids[1+i]})
		}
		return m, nil
	}
	if probe.Partitioning.Distributed && probe.Partitioning.ColocationID != 0 {
		// A Citus colocation group is a table group (DESIGN §5): the
		// table joins the hash-partitioned group of the tables it is
		// colocated with (ColocationOf: the first one's group, split
		// into the same shard count), so rows with equal distribution
		// values are in one bucket of one group, hence one tablet, and a
		// transaction writing them commits in one phase. Its fresh
		// storage IDs keep its rows apart from whatever it left there.
		m.GroupID, m.Partitioning = probe.Partitioning.ColocationID, probe.Partitioning
		return m, e.distributedIndexes(ctx, t, m, sids)
	}
	g, err := e.x.Writer.AllocateID(ctx)
	if err != nil {
		return nil, err
	}
	if probe.Partitioning.Kind == catalog.PartitionRange {
		// A range-partitioned table is the group named by its own ID
		// (undistribute_table); its fresh storage IDs keep the rows
		// apart from anything the group held before.
		g = t.ID
	}
	m.GroupID, m.Partitioning = uint64(g), probe.Partitioning
	if probe.Partitioning.Distributed {
		return m, e.distributedIndexes(ctx, t, m, sids)
	}
	for i, idx := range t.Indexes {
		ig, err := e.x.Writer.AllocateID(ctx)
		if err != nil {
			return nil, err
		}
		m.Indexes = append(m.Indexes, catalog.MovedIndex{ID: idx.ID, Placement: catalog.IndexGlobal, GroupID: uint64(ig), StorageID: sids[1+i]})
	}
	return m, nil
}

// distributedIndexes places t's secondary indexes for m, a move to a
// distributed table's group, with the fresh storage IDs sids[1:]. A
// distributed table's indexes live beside its rows, bucket by bucket
// (catalog.Partitioning.Distributed), except unique ones: a key must be
// unique across all buckets, which an index of its own (global) enforces
// in one place, whatever the distribution column (Citus refuses such
// constraints). A GIN index is local, its entries grouped in blocks of
// buckets, the target's shards (ginBlocks, docs/distributed.md "Local
// GIN indexes"); one that was global before the move becomes local.
func (e *executor) distributedIndexes(ctx context.Context, t *catalog.Table, m *catalog.TableMove, sids []uint32) error {
	probe := &catalog.Table{Partitioning: m.Partitioning}
	for i, idx := range t.Indexes {
		if idx.Unique {
			ig, err := e.x.Writer.AllocateID(ctx)
			if err != nil {
				return err
			}
			m.Indexes = append(m.Indexes, catalog.MovedIndex{ID: idx.ID, Placement: catalog.IndexGlobal, GroupID: uint64(ig), StorageID: sids[1+i]})
			continue
		}
		m.Indexes = append(m.Indexes, catalog.MovedIndex{ID: idx.ID, Placement: catalog.IndexLocal, StorageID: sids[1+i], Blocks: ginBlocks(probe, idx.Kind)})
	}
	return nil
}

// copyForMove copies every row of moving's current storage into its
// move's target, a page per transaction, reporting progress.
func (e *executor) copyForMove(ctx context.Context, job *jobs.Job, moving *catalog.Table) error {
	oldL, err := moving.Layout()
	if err != nil {
		return err
	}
	target, err := moving.MoveTarget()
	if err != nil {
		return err
	}
	tl, err := target.Layout()
	if err != nil {
		return err
	}
	w, err := e.rowWriter(target, tl)
	if err != nil {
		return err
	}
	conv := func(r []types.Datum) ([]types.Datum, error) { return r, nil }
	if moving.Move.Target != nil {
		if conv, err = e.rowConv(moving, target); err != nil {
			return err
		}
	}
	span := oldL.IndexSpan(&oldL.Primary)
	total, err := e.countKeys(ctx, span)
	if err != nil {
		return err
	}
	done := 0
	start := span.Key
	limit := int64(movePage)
	for page := 1; ; page++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		var next []byte
		var read int
		attempt := 0
		err := e.x.DB.BackgroundTxn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
			// A page that had to restart is read again smaller.
			if attempt++; attempt > 1 {
				limit = max(limit/2, 16)
			}
			kvs, err := txn.Scan(ctx, start, span.EndKey, limit)
			if err != nil {
				return err
			}
			f, err := rowenc.NewRowFetcher(oldL, &oldL.Primary, nil)
			if err != nil {
				return err
			}
			var rows [][]types.Datum
			emit := func(row []types.Datum) error { rows = append(rows, row); return nil }
			if err := f.Add(kvs, emit); err != nil {
				return err
			}
			next = nil
			if int64(len(kvs)) < limit {
				if err := f.Finish(emit); err != nil {
					return err
				}
			} else if len(rows) > 0 {
				// The last row may go on past the page: it is read again
				// from its start by the next page.
				k, err := oldL.PrimaryKey(nil, rows[len(rows)-1])
				if err != nil {
					return err
				}
				next = keys.PrefixEnd(k)
			} else {
				next = start // one row larger than the page: read more
			}
			b := &kv.Batch{}
			for _, r := range rows {
				nr, err := conv(r)
				if err != nil {
					return err
				}
				if err := catalog.MoveWrite(w, b, nr, nr); err != nil {
					return err
				}
			}
			read = len(kvs)
			if b.Len() == 0 {
				return nil
			}
			return txn.Run(ctx, b)
		})
		if err != nil {
			return fmt.Errorf("copying table %q: %w", moving.Name, err)
		}
		if next == nil {
			return nil
		}
		if string(next) == string(start) {
			limit *= 2
			continue
		}
		start, limit = next, movePage
		done += read
		if total > 0 {
			if err := job.Progress(ctx, 0.9*min(float64(done)/float64(total), 1)); err != nil {
				return err
			}
		}
		if h := moveTestingHooks.afterPage; h != nil {
			if err := h(job.ID(), page); err != nil {
				return err
			}
		}
	}
}

// countKeys counts the keys of span as they are now: the copy's progress
// estimate.
func (e *executor) countKeys(ctx context.Context, span kvpb.Span) (int, error) {
	n := 0
	start := span.Key
	const page = 10000
	for {
		kvs, err := e.x.DB.Scan(ctx, start, span.EndKey, page)
		if err != nil {
			return 0, fmt.Errorf("counting the keys to move: %w", err)
		}
		n += len(kvs)
		if len(kvs) < page {
			return n, nil
		}
		start = keys.Next(kvs[len(kvs)-1].Key)
	}
}

// finishMove frees the storage a switched move left: moving is the move
// version of the descriptor, whose own location is the old one. It waits
// MoveClearDelay first. A clear that fails or is cut short leaves
// unreachable garbage (nothing names that storage any more), as DROP
// TABLE's does.
func (e *executor) finishMove(ctx context.Context, moving *catalog.Table) {
	oldL, err := moving.Layout()
	if err != nil {
		return
	}
	select {
	case <-time.After(MoveClearDelay):
	case <-ctx.Done():
		return
	}
	if err := e.x.DB.ClearRanges(ctx, oldL.StorageSpans()); err != nil {
		// The move is done; what is left is garbage under storage IDs no
		// descriptor names, and a reader of the group's raw keys (a test
		// counting them) sees it: say why.
		slog.Warn("cairn: freeing a moved table's old storage failed; its keys stay as unreachable garbage", "table", moving.ID, "err", err)
	}
}

// rollBackMove undoes the move of job jobID of table id if it has not
// switched yet: the move is dropped from the descriptor and the target's
// storage cleared. When the descriptor holds no move of the job, it
// reports switched if the table is at moving's target (the switch
// committed although its commit reported an error); moving nil: the move
// never started.
func (e *executor) rollBackMove(ctx context.Context, id catalog.ID, jobID int64, moving *catalog.Table) (switched bool, err error) {
	var target *rowenc.TableLayout
	err = e.jobTxn(ctx, func(je *executor) error {
		target, switched = nil, false
		t, err := je.x.Writer.TableByID(ctx, id)
		if err != nil {
			return err
		}
		if t.Move == nil || t.Move.JobID != jobID {
			// The target's storage IDs are the job's alone.
			if moving != nil && moving.Move != nil {
				mt, err := moving.MoveTarget()
				if err != nil {
					return err
				}
				switched = t.PrimaryIndex.StorageID == mt.PrimaryIndex.StorageID
			}
			return nil
		}
		if target, err = t.MoveLayout(); err != nil {
			return err
		}
		nt := cloneTable(t)
		nt.Move = nil
		return je.x.Writer.Update(ctx, nt)
	})
	if err != nil || target == nil {
		return switched, err
	}
	if err := e.x.DB.ClearRanges(ctx, target.StorageSpans()); err != nil {
		return false, fmt.Errorf("clearing the target of the move of table %d: %w", id, err)
	}
	return false, nil
}

// recoverOrphanedMove handles the move a table's descriptor still holds
// when another move of it is asked for: refused while its job runs; rolled
// back (its job ending failed) when the job's node stopped
// (jobs.Record.Orphaned).
func (e *executor) recoverOrphanedMove(ctx context.Context, t *catalog.Table) error {
	rec, ok, err := jobs.Get(ctx, e.x.DB, t.Move.JobID)
	if err != nil {
		return err
	}
	if ok && !rec.Orphaned(time.Now()) && rec.Status == jobs.StatusRunning {
		return catalog.ErrMoving(t)
	}
	if _, err := e.rollBackMove(ctx, t.ID, t.Move.JobID, nil); err != nil {
		return err
	}
	if ok && rec.Status == jobs.StatusRunning {
		j, err := jobs.Adopt(ctx, e.x.DB, rec.ID)
		if err != nil {
			return err
		}
		return j.Finish(ctx, jobs.StatusFailed, pgerror.New(pgerrcode.ObjectNotInPrerequisiteState,
			"the node running the job stopped; the move was rolled back by a later ALTER TABLE %s", t.Name))
	}
	return nil
}
