package ddl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/jobs"
	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// Online CREATE INDEX (F1's online schema change, as CockroachDB runs it):
// a CREATE INDEX that is a transaction of its own runs as a job, in
// transactions of its own, while other sessions keep reading and writing
// the table. The new index moves through five states, each a descriptor
// version committed by a step transaction (catalog.Writer.UpdateStep):
//
//  1. delete_only: writers delete the entries of rows they delete or
//     update, and add none.
//  2. write_only: writers maintain every entry; readers ignore the index.
//  3. backfilling: as write_only, while the backfill writes the entry of
//     every row as of the backfill timestamp (backfillOnline).
//  4. validating: as write_only, while the build counts the index's
//     entries against the table's rows at a later timestamp.
//  5. public: readers (the planner) use it.
//
// Two-version invariant. Writers validate at commit the writer key of the
// version they wrote through (catalog.WriterKey): a step writes only its
// own version's, so a writer of the version just before still commits,
// and a writer two versions behind fails (a retryable error). Between
// steps the job drains: it waits until no transaction that started
// before the step committed is still open anywhere in the cluster
// (kv.DB.DrainTimestamp, published by every node like the protected
// timestamp), so in practice no writer ever meets that failure. The wait
// is bounded (DrainTimeout over the whole job); past it the job goes on
// and a writer left behind gets 40001, which is always safe. Adjacent
// versions are compatible: absent/delete_only (nobody adds entries),
// delete_only/write_only (a writer of either removes the entries of rows
// it changes, so none dangles), write_only/backfilling/validating (all
// maintain every entry), validating/public (every writer maintains it).
//
// Why the backfill is exact. Its reads are at T_b, after the backfilling
// step committed, so every writer that commits above T_b wrote through a
// version that maintains the index (write_only or later; a delete_only
// writer still open would fail its commit). Rows committed at or below T_b
// are in the backfill's snapshot (an intent below T_b is pushed above it
// by the read, or resolved). The backfill writes each entry as a
// committed version at exactly T_b, in SSTs that every replica of the
// target tablet ingests (kv.DB.AddSSTable): a writer's later
// change of the row writes above T_b and shadows it; an entry a writer
// already wrote above T_b shadows the backfill's. A unique violation a
// writer's entry hid (its key shadowing an older row's) shows as fewer
// entries than rows at validation, and fails the build with 23505 naming
// the key.
//
// Failure and cancellation (the statement cancelled, CANCEL JOB, a
// duplicate): one step transaction removes the index from the descriptor
// (safe from any non-public state: nobody reads it), and after a drain its
// storage is cleared; the job ends failed or canceled. A node that dies
// mid-build leaves the index in a non-public state and its job running
// with a stale heartbeat; ResumeOrphanedIndexBuilds (run by every node)
// claims the job once it is older than jobs.OrphanAfter and goes on from
// that state.

// IndexJobType is the job type of an online index build.
const IndexJobType = "CREATE INDEX"

// DrainTimeout bounds how long an online index build waits, over all its
// steps, for older transactions to end (see above). A variable so that
// tests can shorten it.
var DrainTimeout = 30 * time.Second

// indexTestingHooks let tests stop a build at a state, or make its job
// vanish as if its node had died (errJobDied).
var indexTestingHooks struct {
	// atState runs after each step has committed and drained.
	atState func(jobID int64, state catalog.IndexState) error
	// afterPage runs after each backfill page.
	afterPage func(jobID int64, rows int64) error
	// beforeIngest runs before each SST of the backfill is sent, with
	// its span.
	beforeIngest func(jobID int64, start, end []byte) error
	// remoteRead runs as a node's BackfillProcessor starts reading a
	// piece for another node's build; its error fails the fragment.
	remoteRead func(piece kvpb.Span) error
	// remoteSent runs after a node's BackfillProcessor sent a batch of
	// a piece; its error fails the fragment.
	remoteSent func(piece kvpb.Span) error
}

// IndexProgress is an index build job's payload: what it builds and where
// it stands, as pg_stat_progress_create_index shows it.
type IndexProgress struct {
	TableID  catalog.ID      `json:"table_id"`
	IndexID  catalog.IndexID `json:"index_id"`
	Database catalog.ID      `json:"database_id"`
	// Phase is PostgreSQL's phase name for the step the build is in.
	Phase       string `json:"phase"`
	TuplesTotal int64  `json:"tuples_total"`
	TuplesDone  int64  `json:"tuples_done"`
	Concurrent  bool   `json:"concurrent"`
	// PID is the backend process id of the session that started it.
	PID int32 `json:"pid,omitempty"`
}

// PostgreSQL's phases of CREATE INDEX CONCURRENTLY, for each state.
var indexPhases = map[catalog.IndexState]string{
	catalog.IndexDeleteOnly:  "waiting for writers before build",
	catalog.IndexWriteOnly:   "waiting for writers before build",
	catalog.IndexBackfilling: "building index: scanning table",
	catalog.IndexValidating:  "index validation: scanning index",
	catalog.IndexPublic:      "waiting for readers before marking dead",
}

// onlineIndexOK says whether this CREATE INDEX may run as a job: a
// statement of its own on a node with a KV client. Not an inline INDEX of
// CREATE TABLE (a derived statement): its table exists only in the
// statement's transaction, which the job cannot see, and being empty it
// has nothing to backfill online.
func (e *executor) onlineIndexOK() bool {
	return e.x.AutoCommit && e.x.DB != nil && !e.stmt.Derived
}

// indexBuild is one online build's state, held by the job's code.
type indexBuild struct {
	e        *executor
	job      *jobs.Job
	tableID  catalog.ID
	indexID  catalog.IndexID
	progress IndexProgress
	// drainDeadline ends the waits for older transactions (DrainTimeout).
	drainDeadline time.Time
	// cancel ends the job's context (CANCEL JOB).
	cancel context.CancelCauseFunc
	// steps times the build's parts for its closing log line.
	steps stepTimer
}

// stepTimer records how long each part of a build took, in order, for
// the log line a build ends with: where a build's wall time goes (its
// waits besides its CPU) shows there without a profiler.
type stepTimer struct {
	start, last time.Time
	parts       []string
}

// mark ends the part named name, begun at the previous mark.
func (s *stepTimer) mark(name string) {
	now := time.Now()
	if s.start.IsZero() {
		s.start = now
	}
	if !s.last.IsZero() {
		s.parts = append(s.parts, fmt.Sprintf("%s=%s", name, now.Sub(s.last).Round(time.Millisecond)))
	}
	s.last = now
}

// note adds what a part did to the log line.
func (s *stepTimer) note(what string) { s.parts = append(s.parts, what) }

func (s *stepTimer) String() string { return strings.Join(s.parts, " ") }

// logStepsAfter is how long a build takes before its steps are logged at
// the info level (at debug below it: tests build many small indexes).
const logStepsAfter = time.Second

// log writes the build's steps.
func (s *stepTimer) log(job int64, table catalog.ID, index catalog.IndexID) {
	level := slog.LevelDebug
	if time.Since(s.start) >= logStepsAfter {
		level = slog.LevelInfo
	}
	slog.Log(context.Background(), level, "cairn: index build done", "job", job, "table", table, "index", index,
		"took", time.Since(s.start).Round(time.Millisecond), "steps", s.String())
}

// createIndexOnline builds idx (complete but for its ID, placement and
// storage) on table tableID as a job, and returns when the job has ended:
// nil once the index is public.
func (e *executor) createIndexOnline(ctx context.Context, tableID catalog.ID, idx catalog.Index, concurrent bool) error {
	// The statement's transaction stays open around the job but writes
	// nothing: it must not hold the job's own drains up.
	e.x.Txn.ExemptFromDrain()
	desc := e.stmt.Original
	if desc == "" {
		desc = e.stmt.SQL
	}
	b := &indexBuild{e: e, tableID: tableID, drainDeadline: time.Now().Add(DrainTimeout)}
	b.steps.mark("")
	b.progress = IndexProgress{TableID: tableID, Phase: "initializing", Concurrent: concurrent, PID: e.x.BackendPID}
	if e.x.Database != nil {
		b.progress.Database = e.x.Database.ID
	}
	payload, err := json.Marshal(b.progress)
	if err != nil {
		return err
	}
	job, err := jobs.Create(ctx, e.x.DB, jobs.Record{Type: IndexJobType, Description: desc, User: e.x.User, Payload: payload})
	if err != nil {
		return err
	}
	b.job = job
	b.steps.mark("job")
	// While this process runs the job it is alive, whatever its heartbeat
	// says (a stalled disk can delay heartbeats past jobs.OrphanAfter):
	// this node's orphan check leaves it alone.
	liveIndexJobs.Store(job.ID(), struct{}{})
	defer liveIndexJobs.Delete(job.ID())
	bg := context.WithoutCancel(ctx)
	stop := job.KeepAlive(bg)
	defer stop()
	// CANCEL JOB: the job's context ends when its cancel key appears.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	b.cancel = cancel
	go b.watchCancel(ctx, cancel)

	err = b.run(ctx, idx)
	if errors.Is(err, errJobDied) {
		return err
	}
	if err == nil {
		_ = job.Finish(bg, jobs.StatusSucceeded, nil)
		b.steps.mark("finish")
		b.steps.log(job.ID(), tableID, b.indexID)
		return nil
	}
	status := jobs.StatusFailed
	if ctx.Err() != nil {
		status = jobs.StatusCanceled
		if errors.Is(context.Cause(ctx), errJobCanceled) {
			err = pgerror.New(pgerrcode.QueryCanceled, "canceling statement due to user request").
				WithDetail("Job %d was canceled.", job.ID())
		}
	}
	cause := err
	if b.indexID != 0 {
		if rbErr := rollBackIndex(bg, e.x.DB, e.x.Writer, e.stmt, tableID, b.indexID, job.ID(), b.drain); rbErr != nil {
			cause = fmt.Errorf("%w (rolling back: %v)", err, rbErr)
		}
	}
	_ = job.Finish(bg, status, cause)
	return err
}

var errJobCanceled = errors.New("ddl: job canceled")

// liveIndexJobs are the index builds this process is running.
var liveIndexJobs sync.Map // int64 → struct{}

// watchCancel ends the job's context when CANCEL JOB asks it to stop.
func (b *indexBuild) watchCancel(ctx context.Context, cancel context.CancelCauseFunc) {
	t := time.NewTicker(jobs.HeartbeatEvery / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ok, err := b.job.CancelRequested(ctx); err == nil && ok {
				cancel(errJobCanceled)
				return
			}
		}
	}
}

// run is the build: the five steps, the backfill and the validation.
func (b *indexBuild) run(ctx context.Context, idx catalog.Index) error {
	e := b.e
	// 1. delete_only: place the index and give it fresh storage (the
	// backfill writes committed versions into it), in the job's first
	// transaction.
	var added *catalog.Table
	ts, err := b.step(ctx, func(je *executor, t *catalog.Table) error {
		if t.IndexByName(idx.Name) != nil {
			return pgerror.New(pgerrcode.DuplicateTable, "relation %q already exists", idx.Name)
		}
		ix := idx
		ix.ID = t.NextIndexID
		ix.State = catalog.IndexDeleteOnly
		ix.JobID = b.job.ID()
		if err := je.placeIndex(ctx, t, &ix); err != nil {
			return err
		}
		ix.State = catalog.IndexDeleteOnly
		sid, err := catalog.AllocateStorageID(ctx, je.x.DB)
		if err != nil {
			return err
		}
		ix.StorageID = sid
		t.NextIndexID++
		t.Indexes = append(t.Indexes, ix)
		b.indexID = ix.ID
		added = t
		return je.refreshBlocksZone(ctx, t, &ix)
	})
	if err != nil {
		b.indexID = 0 // nothing committed
		return err
	}
	b.progress.IndexID = b.indexID
	b.steps.mark("delete_only")
	if err := e.splitShards(ctx, added, b.indexID); err != nil {
		return err
	}
	b.steps.mark("split")
	if err := b.settle(ctx, ts, catalog.IndexDeleteOnly); err != nil {
		return err
	}
	return b.from(ctx, catalog.IndexDeleteOnly)
}

// from takes the build on from state cur, whose step has committed and
// drained: the remaining steps, the backfill and the validation. A build
// resumed on another node (ResumeOrphanedIndexBuilds) starts here too.
func (b *indexBuild) from(ctx context.Context, cur catalog.IndexState) error {
	// 2. write_only, 3. backfilling.
	next := map[catalog.IndexState]catalog.IndexState{
		catalog.IndexDeleteOnly: catalog.IndexWriteOnly,
		catalog.IndexWriteOnly:  catalog.IndexBackfilling,
	}
	for cur == catalog.IndexDeleteOnly || cur == catalog.IndexWriteOnly {
		st := next[cur]
		ts, err := b.setState(ctx, st)
		if err != nil {
			return err
		}
		b.steps.mark(string(st))
		if err := b.settle(ctx, ts, st); err != nil {
			return err
		}
		cur = st
	}
	if cur == catalog.IndexBackfilling {
		t, err := b.table(ctx)
		if err != nil {
			return err
		}
		if err := b.backfill(ctx, t); err != nil {
			return err
		}
		// 4. validating.
		ts, err := b.setState(ctx, catalog.IndexValidating)
		if err != nil {
			return err
		}
		b.steps.mark(string(catalog.IndexValidating))
		if err := b.settle(ctx, ts, catalog.IndexValidating); err != nil {
			return err
		}
		cur = catalog.IndexValidating
	}
	if cur != catalog.IndexValidating {
		return fmt.Errorf("ddl: index build cannot go on from state %q", cur)
	}
	t, err := b.table(ctx)
	if err != nil {
		return err
	}
	if err := b.validate(ctx, t); err != nil {
		return err
	}
	b.steps.mark("validate")
	// 5. public.
	if _, err := b.setState(ctx, catalog.IndexPublic); err != nil {
		return err
	}
	b.steps.mark(string(catalog.IndexPublic))
	b.report(ctx, catalog.IndexPublic)
	b.steps.mark("report")
	return nil
}

// settle reports the state, waits for older transactions, then runs the
// testing hook.
func (b *indexBuild) settle(ctx context.Context, ts hlc.Timestamp, st catalog.IndexState) error {
	b.report(ctx, st)
	b.steps.mark("report")
	if err := b.drain(ctx, ts); err != nil {
		return err
	}
	b.steps.mark("drain")
	if h := indexTestingHooks.atState; h != nil {
		if err := h(b.job.ID(), st); err != nil {
			return err
		}
	}
	return nil
}

// report writes the job's payload for st.
func (b *indexBuild) report(ctx context.Context, st catalog.IndexState) {
	b.progress.Phase = indexPhases[st]
	b.writeProgress(ctx)
}

func (b *indexBuild) writeProgress(ctx context.Context) {
	frac := 0.0
	switch b.progress.Phase {
	case indexPhases[catalog.IndexWriteOnly]:
		frac = 0.05
	case indexPhases[catalog.IndexBackfilling]:
		frac = 0.1
		if b.progress.TuplesTotal > 0 {
			frac += 0.8 * float64(b.progress.TuplesDone) / float64(b.progress.TuplesTotal)
		}
	case indexPhases[catalog.IndexValidating]:
		frac = 0.9
	case indexPhases[catalog.IndexPublic]:
		frac = 0.99
	}
	payload, err := json.Marshal(b.progress)
	if err != nil {
		return
	}
	// A failed write is retried with the next report; the heartbeat
	// keeps the job alive meanwhile.
	_ = b.job.SetPayload(ctx, payload, frac)
}

// table reads the table's current descriptor.
func (b *indexBuild) table(ctx context.Context) (*catalog.Table, error) {
	var t *catalog.Table
	err := b.e.x.DB.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		var err error
		t, err = catalog.NewReader(txn, nil).TableByID(ctx, b.tableID)
		return err
	})
	return t, err
}

// step runs fn on a copy of the table's current descriptor in a
// transaction of its own and writes the result as one online step
// (catalog.Writer.UpdateStep). It returns the commit timestamp.
func (b *indexBuild) step(ctx context.Context, fn func(je *executor, t *catalog.Table) error) (hlc.Timestamp, error) {
	return stepTxn(ctx, b.e.x.DB, b.e.x.Writer, b.e.stmt, b.e.x, b.tableID, fn)
}

func stepTxn(ctx context.Context, db *kv.DB, w *catalog.Writer, stmt *parser.Statement, x *Context, tableID catalog.ID,
	fn func(je *executor, t *catalog.Table) error) (hlc.Timestamp, error) {
	var last *kv.Txn
	var txns []*kv.Txn
	err := db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		txns = append(txns, txn)
		last = txn
		nx := Context{}
		if x != nil {
			nx = *x
		}
		nx.Txn, nx.Writer, nx.DB = txn, w.InTxn(txn), db
		je := &executor{x: &nx, ctx: ctx, stmt: stmt}
		cur, err := nx.Writer.TableByID(ctx, tableID)
		if err != nil {
			return err
		}
		t := cloneTable(cur)
		if err := fn(je, t); err != nil {
			return err
		}
		return nx.Writer.UpdateStep(ctx, t)
	})
	for _, t := range txns {
		w.EndDDL(t)
	}
	if err != nil {
		return hlc.Timestamp{}, err
	}
	return last.CommitTimestamp(), nil
}

// setState moves the index to st in one step.
func (b *indexBuild) setState(ctx context.Context, st catalog.IndexState) (hlc.Timestamp, error) {
	return b.step(ctx, func(_ *executor, t *catalog.Table) error {
		ix := t.IndexByID(b.indexID)
		if ix == nil || ix.JobID != b.job.ID() {
			return fmt.Errorf("ddl: index %d of table %q vanished during its build", b.indexID, t.Name)
		}
		ix.State = st
		if st == catalog.IndexPublic {
			ix.JobID = 0
		}
		return nil
	})
}

// drain waits until no transaction that could have resolved a version
// older than the one committed at ts is open anywhere (see the file
// comment), or until the job's drain deadline.
func (b *indexBuild) drain(ctx context.Context, ts hlc.Timestamp) error {
	return drainAfter(ctx, b.e.x, ts, b.drainDeadline)
}

func drainAfter(ctx context.Context, x *Context, ts hlc.Timestamp, deadline time.Time) error {
	wait := time.Millisecond
	for {
		var p hlc.Timestamp
		if x.DrainTimestamp != nil {
			var err error
			if p, err = x.DrainTimestamp(ctx); err != nil {
				return fmt.Errorf("waiting for older transactions: %w", err)
			}
		} else {
			p = x.DB.DrainTimestamp()
		}
		if ts.Less(p) {
			return nil
		}
		if time.Now().After(deadline) {
			slog.Debug("cairn: index build: older transactions still open past the drain timeout; going on", "ts", ts)
			return nil
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
		wait = min(wait*2, 100*time.Millisecond)
	}
}

// backfillPageRows is how many rows one page of the backfill reads.
const backfillPageKVs = 2000

// validate checks a unique index: at a timestamp after the validating
// step, its entries must be as many as the rows it covers. Fewer means a
// writer's entry shadowed the backfill's entry of another row with the
// same key: a duplicate, reported as PostgreSQL's build reports one.
//
// The rows are counted first, decoding only what the predicate reads
// (the primary key alone without one); only when the counts differ does
// a second pass over the rows, at the same timestamp, encode each row's
// key and look for the duplicate. That pass kept a map of every key, and
// made every unique build pay for it (a map entry and an encoded key per
// row) where it is needed only by a build that fails.
func (b *indexBuild) validate(ctx context.Context, t *catalog.Table) error {
	ix := t.IndexByID(b.indexID)
	if !ix.Unique {
		return nil
	}
	layout, err := t.Layout()
	if err != nil {
		return err
	}
	il := layout.Index(uint32(b.indexID))
	var pred sem.Evaluator
	if ix.Predicate != "" {
		if pred, err = b.e.compileOverTable(t, ix.Predicate); err != nil {
			return err
		}
	}
	ectx := &sem.EvalContext{}
	// covered says whether row is one the index covers.
	covered := func(row []types.Datum) (bool, error) {
		if pred == nil {
			return true, nil
		}
		v, err := pred(ectx, row)
		if err != nil {
			return false, err
		}
		bv, ok := v.(types.DBool)
		return ok && bool(bv), nil
	}
	return b.e.x.DB.BackgroundTxn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		txn.ExemptFromDrain()
		// scan calls fn with every page of span's KVs, at the
		// transaction's timestamp.
		scan := func(span kvpb.Span, fn func([]kvpb.KeyValue) error) error {
			for start := span.Key; ; {
				kvs, err := txn.Scan(ctx, start, span.EndKey, backfillPageKVs)
				if err != nil {
					return fmt.Errorf("validating index %q: %w", il.Name, err)
				}
				if err := fn(kvs); err != nil {
					return err
				}
				if len(kvs) < backfillPageKVs {
					return nil
				}
				start = keys.Next(kvs[len(kvs)-1].Key)
			}
		}
		var entries int64
		if err := scan(layout.IndexSpan(il), func(kvs []kvpb.KeyValue) error {
			entries += int64(len(kvs))
			return nil
		}); err != nil {
			return err
		}
		// rows calls emit with every row of the table (of the columns
		// in needed: nil, all).
		rows := func(needed []rowenc.ColumnID, emit func([]types.Datum) error) error {
			f, err := rowenc.NewRowFetcher(layout, &layout.Primary, needed)
			if err != nil {
				return err
			}
			f.ReuseRows = true // emit keeps nothing of a row
			if err := scan(layout.IndexSpan(&layout.Primary), func(kvs []kvpb.KeyValue) error { return f.Add(kvs, emit) }); err != nil {
				return err
			}
			return f.Finish(emit)
		}
		var needed []rowenc.ColumnID // a predicate reads any column
		if pred == nil {
			needed = layout.Primary.KeyColumns
		}
		var n int64
		if err := rows(needed, func(row []types.Datum) error {
			ok, err := covered(row)
			if ok {
				n++
			}
			return err
		}); err != nil {
			return err
		}
		if entries == n {
			return nil
		}
		// The counts differ: find the duplicate, two rows with one key.
		seen := map[string]struct{}{}
		var dup []byte
		if err := rows(nil, func(row []types.Datum) error {
			if ok, err := covered(row); !ok || err != nil || dup != nil {
				return err
			}
			ent, err := layout.EncodeIndexEntry(il, row)
			if err != nil {
				return err
			}
			if _, ok := seen[string(ent.Key)]; ok {
				dup = bytes.Clone(ent.Key)
			}
			seen[string(ent.Key)] = struct{}{}
			return nil
		}); err != nil {
			return err
		}
		if dup != nil {
			return uniqueBuildError(layout.ConvertWriteError(&kvpb.ConditionFailedError{Key: dup}))
		}
		return fmt.Errorf("ddl: index %q has %d entries for %d rows", il.Name, entries, n)
	})
}

// rollBackIndex removes a non-public index built by job jobID from table
// tableID and, after a drain, clears its storage.
func rollBackIndex(ctx context.Context, db *kv.DB, w *catalog.Writer, stmt *parser.Statement, tableID catalog.ID, indexID catalog.IndexID, jobID int64,
	drain func(context.Context, hlc.Timestamp) error) error {
	var layout *rowenc.TableLayout
	removed := false
	ts, err := stepTxn(ctx, db, w, stmt, nil, tableID, func(_ *executor, t *catalog.Table) error {
		removed = false
		ix := t.IndexByID(indexID)
		if ix == nil || ix.JobID != jobID || ix.State == catalog.IndexPublic {
			return errNothingToRollBack
		}
		l, err := t.Layout()
		if err != nil {
			return err
		}
		layout = l
		for i := range t.Indexes {
			if t.Indexes[i].ID == indexID {
				t.Indexes = append(t.Indexes[:i], t.Indexes[i+1:]...)
				break
			}
		}
		removed = true
		return nil
	})
	if errors.Is(err, errNothingToRollBack) {
		return nil
	}
	if err != nil {
		return err
	}
	if !removed {
		return nil
	}
	// Writers of the version before may still write entries until they
	// end; clear after them (what a laggard writes later is unreachable:
	// the storage ID is never handed out again).
	if err := drain(ctx, ts); err != nil {
		return err
	}
	il := layout.Index(uint32(indexID))
	if il == nil || (il.Local && layout.HashColumns > 0) {
		return nil
	}
	span := layout.IndexSpan(il)
	return db.ClearRange(ctx, span.Key, span.EndKey)
}

var errNothingToRollBack = errors.New("ddl: nothing to roll back")

// ResumeContext is what a node hands ResumeOrphanedIndexBuilds: its KV
// client and catalog writer, the cluster's drain timestamp, and its SQL
// memory and temporary storage for the backfill's sort.
type ResumeContext struct {
	DB             *kv.DB
	Writer         *catalog.Writer
	DrainTimestamp func(context.Context) (hlc.Timestamp, error)
	Memory         *mon.Budget
	TempStorage    *rowcontainer.TempStorage
	// Jobs, when set, lists the jobs (reading only from the oldest that
	// may be running, jobs.Unfinished); nil reads every job.
	Jobs *jobs.Unfinished
}

// ResumeOrphanedIndexBuilds takes over the index builds whose jobs are
// orphaned (their node stopped, jobs.Record.Orphaned) and goes on with
// each from the state its index is in: it claims the job (jobs.Claim: of
// several nodes checking at once, one wins), keeps it alive, drains
// (transactions the dead coordinator's last step left behind end first),
// then runs the remaining steps in a goroutine of its own; a backfill cut
// short is run again from the start at a new timestamp (entries the dead
// one wrote are the same entries, or shadowed by later writers). A build
// that fails from there is rolled back as on its first node. It returns
// how many builds it took over. Every node runs it now and then
// (server).
//
// Resuming, not rolling back, is the choice CockroachDB makes for its
// schema-change jobs: a long build lost with its node would otherwise
// have to start over from a client that is gone.
func ResumeOrphanedIndexBuilds(ctx context.Context, rc ResumeContext) (int, error) {
	var recs []jobs.Record
	var err error
	if rc.Jobs != nil {
		recs, err = rc.Jobs.List(ctx, rc.DB)
	} else {
		recs, err = jobs.List(ctx, rc.DB)
	}
	if err != nil {
		return 0, err
	}
	n := 0
	now := time.Now()
	for _, r := range recs {
		if r.Type != IndexJobType || !r.Orphaned(now) {
			continue
		}
		if _, live := liveIndexJobs.Load(r.ID); live {
			continue
		}
		var p IndexProgress
		if err := json.Unmarshal(r.Payload, &p); err != nil {
			return n, fmt.Errorf("job %d: %w", r.ID, err)
		}
		job, ok, err := jobs.Claim(ctx, rc.DB, r.ID)
		if err != nil {
			return n, err
		}
		if !ok {
			continue // another node took it, or it came back
		}
		n++
		b, state, err := adoptBuild(ctx, rc, job, p)
		if err != nil || b == nil {
			// Nothing left to build (the index went public, or was never
			// placed, or was rolled back) or the table is gone.
			status, cause := jobs.StatusFailed, err
			if err == nil && state == catalog.IndexPublic {
				status = jobs.StatusSucceeded
			} else if err == nil {
				cause = errors.New("the node running the job stopped before the index was placed")
			}
			_ = job.Finish(ctx, status, cause)
			continue
		}
		liveIndexJobs.Store(job.ID(), struct{}{})
		go b.resume(state)
	}
	return n, nil
}

// adoptBuild finds the index job's build in its table's descriptor (the
// index whose JobID is the job's: the payload may predate the first step)
// and returns it ready to go on, with the state its index is in; nil
// when there is nothing to build (state public: the build had finished).
func adoptBuild(ctx context.Context, rc ResumeContext, job *jobs.Job, p IndexProgress) (*indexBuild, catalog.IndexState, error) {
	x := &Context{DB: rc.DB, Writer: rc.Writer, DrainTimestamp: rc.DrainTimestamp, Memory: rc.Memory, TempStorage: rc.TempStorage, AutoCommit: true}
	// The build outlives ctx (the caller's check): its executor has a
	// context of its own.
	e := &executor{x: x, ctx: context.Background()}
	b := &indexBuild{e: e, job: job, tableID: p.TableID, progress: p, drainDeadline: time.Now().Add(DrainTimeout)}
	t, err := b.table(ctx)
	if err != nil {
		return nil, "", err
	}
	for i := range t.Indexes {
		if ix := &t.Indexes[i]; ix.JobID == job.ID() {
			b.indexID = ix.ID
			b.progress.IndexID = ix.ID
			return b, ix.State, nil
		}
	}
	if p.IndexID != 0 {
		if ix := t.IndexByID(p.IndexID); ix != nil && ix.State == catalog.IndexPublic {
			return nil, catalog.IndexPublic, nil
		}
	}
	return nil, "", nil
}

// resume runs an adopted build from state cur to its end, in the
// background: the statement that started it is gone with its node.
func (b *indexBuild) resume(cur catalog.IndexState) {
	defer liveIndexJobs.Delete(b.job.ID())
	bg := context.Background()
	stop := b.job.KeepAlive(bg)
	defer stop()
	ctx, cancel := context.WithCancelCause(bg)
	defer cancel(nil)
	b.cancel = cancel
	go b.watchCancel(ctx, cancel)
	slog.Info("cairn: resuming an orphaned index build", "job", b.job.ID(), "table", b.tableID, "index", b.indexID, "state", cur)
	// Transactions the dead coordinator's last step left behind end
	// first, as after any step.
	err := b.settle(ctx, b.e.x.DB.Clock().Now(), cur)
	if err == nil {
		err = b.from(ctx, cur)
	}
	if errors.Is(err, errJobDied) {
		return
	}
	if err == nil {
		_ = b.job.Finish(bg, jobs.StatusSucceeded, nil)
		return
	}
	status := jobs.StatusFailed
	if ctx.Err() != nil {
		status = jobs.StatusCanceled
	}
	cause := err
	if rbErr := rollBackIndex(bg, b.e.x.DB, b.e.x.Writer, nil, b.tableID, b.indexID, b.job.ID(), b.drain); rbErr != nil {
		cause = fmt.Errorf("%w (rolling back: %v)", err, rbErr)
	}
	slog.Info("cairn: resumed index build failed", "job", b.job.ID(), "err", cause)
	_ = b.job.Finish(bg, status, cause)
}
