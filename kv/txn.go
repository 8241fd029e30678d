package kv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// IsolationLevel is what a transaction guarantees about what it reads.
type IsolationLevel int8

const (
	// ReadCommitted (the PostgreSQL default): every statement reads a fresh
	// snapshot, taken when Step is called. Writes never lose updates: a
	// write that meets a newer committed version moves the transaction
	// forward only if the statement's reads still hold there, and restarts
	// it otherwise.
	ReadCommitted IsolationLevel = iota
	// Snapshot (REPEATABLE READ): all reads see one snapshot taken at the
	// start; of two concurrent transactions writing the same key, the first
	// to commit wins and the other restarts. The commit timestamp may be
	// above the snapshot (see txn_refresh.go for why that is still SI).
	Snapshot
	// Serializable: Snapshot plus the rule that the transaction commits at
	// the timestamp it read at; if its write timestamp was pushed, every
	// span it read is refreshed (proven unchanged) up to the new timestamp,
	// or it restarts.
	Serializable
)

func (l IsolationLevel) String() string {
	switch l {
	case ReadCommitted:
		return "READ COMMITTED"
	case Snapshot:
		return "REPEATABLE READ"
	case Serializable:
		return "SERIALIZABLE"
	}
	return fmt.Sprintf("IsolationLevel(%d)", int8(l))
}

// txnState is where a Txn is in its life.
type txnState int8

const (
	txnPending txnState = iota
	txnCommitted
	txnRolledBack
)

// Txn is a transaction's coordinator. Its methods must be called from one
// goroutine at a time; the coordinator's own heartbeat runs alongside.
//
// A retryable error (kvpb.IsRetryable) leaves the Txn refusing every
// operation with that error (invariant 6) until PrepareForRetry moves it to
// a new epoch, or, when the error is a TransactionAbortedError, until the
// caller gives up on it and starts a new Txn. DB.Txn does all of this.
type Txn struct {
	db  *DB
	iso IsolationLevel
	// ctx is the context the Txn was created with; its heartbeat stops when
	// it ends, so an abandoned coordinator lets its record expire
	// (invariant 5).
	ctx context.Context
	// snapshot: a read-only view at a timestamp someone else chose
	// (NewSnapshotTxn); it never moves its read timestamp.
	snapshot bool
	// hb is the heartbeat mu.hb points to once the Txn writes.
	hb heartbeat

	mu struct {
		sync.Mutex
		proto kvpb.Transaction
		// obs is the first backing of proto.ObservedTimestamps: the
		// gateway's reading and one leaseholder's (txn_observed.go).
		obs   [2]kvpb.ObservedTimestamp
		state txnState
		// retryErr is the retryable error operations are refused with.
		retryErr error
		// aborted: the transaction is known aborted; only a new Txn helps.
		aborted bool
		// wrote: some write was (or may have been) sent, so intents or a
		// record may exist.
		wrote     bool
		lockSpans spanSet
		readSpans spanSet
		onePC     bool
		commitTS  hlc.Timestamp
		hb        *heartbeat
		// created are the MarkNew keys of this attempt and the sequence
		// each was marked at (bulk.go).
		created map[string]int32
		// afterCommit runs once the transaction committed (bulk.go).
		afterCommit []afterCommitFn
		// drainExempt: left out of DB.DrainTimestamp (protected.go).
		drainExempt bool
		// onFinish runs once the transaction ended either way (bulk.go).
		onFinish []func(context.Context)
		// validate are the keys the writes depend on, checked at commit,
		// in the order registered (txn_validate.go); the first ones in
		// validateInline, found through validateIdx when many.
		validate       []validation
		validateInline [validationInline]validation
		validateIdx    map[string]int
		// validatedAt is the write timestamp all of validate was last
		// checked at (empty: not since the last registration).
		validatedAt hlc.Timestamp
		// buf holds the writes not yet sent (txn_buffer.go); nil when
		// buffering is off or was turned off by a flush.
		buf *writeBuffer
		// bufWanted: EnableWriteBuffering was called (a restart that
		// sent nothing buffers again).
		bufWanted bool
		// bufLost: a flush failed and the buffer is gone (loseBuffer).
		bufLost bool
		// memLocked are the spans (Key+"\x00"+EndKey) the transaction
		// holds unreplicated locks on (txn_buffer.go); their spans are in
		// lockSpans, so the EndTxn or rollback that ends the transaction
		// releases them.
		memLocked map[string]struct{}
		// readLocked are the spans of the locks locking reads took
		// (Batch.LockOnRead), sorted by start key: each stands for the
		// transaction's writes inside it, which take no lock of their
		// own.
		readLocked []kvpb.Span
		// memLockSent: some unreplicated lock was (or may have been)
		// sent, so the transaction's end must release them.
		memLockSent bool
		// commitSent: a committing EndTxn was (or may have been) sent, so
		// the record may be committed whatever the answer said; Rollback
		// then removes intents only once its abort is confirmed
		// (txn_commit.go).
		commitSent bool
		// noMemLocks: EnableWriteBufferingWithoutLocks.
		noMemLocks bool
	}
}

// NewTxn starts a transaction. ctx bounds its heartbeat: cancelling it
// abandons the transaction (see invariant 5).
func (db *DB) NewTxn(ctx context.Context, name string, iso IsolationLevel) *Txn {
	return db.newTxn(ctx, name, iso, 0)
}

// newTxn starts a transaction whose priority is at least minPriority, so a
// retry after an abort does not keep losing the same contests.
func (db *DB) newTxn(ctx context.Context, name string, iso IsolationLevel, minPriority int32) *Txn {
	// Registered (protected.go) at the clock reading it reads at.
	return db.active.register(db.clock, func(now hlc.Timestamp) *Txn {
		return db.buildTxn(ctx, name, iso, minPriority, now)
	})
}

func (db *DB) buildTxn(ctx context.Context, name string, iso IsolationLevel, minPriority int32, now hlc.Timestamp) *Txn {
	t := &Txn{db: db, iso: iso, ctx: ctx}
	prio := max(rand.Int32N(1<<31-2)+1, minPriority)
	t.mu.proto = kvpb.Transaction{
		TxnMeta: kvpb.TxnMeta{
			ID:             uuid.New(),
			WriteTimestamp: now,
			MinTimestamp:   now,
			Priority:       prio,
		},
		Name:                   name,
		Status:                 kvpb.Pending,
		ReadTimestamp:          now,
		GlobalUncertaintyLimit: db.uncertaintyLimit(now),
	}
	t.mu.proto.ObservedTimestamps = t.mu.obs[:0]
	t.observeGatewayLocked(now)
	t.mu.lockSpans.max = db.opts.MaxLockSpans
	t.mu.readSpans.max = db.opts.MaxReadSpans
	return t
}

// NewSnapshotTxn returns a read-only transaction that reads at exactly
// ts with the global uncertainty limit limit: a distributed fragment
// reading at its gateway's snapshot (sql/distsql invariant 2). It never
// refreshes in place: a value in its uncertainty window fails the read
// with a retryable error instead of moving ts, so every read sees the
// gateway's snapshot or fails. It carries no observed timestamps. It
// must not write; it needs no commit (nothing to release) and is not
// registered with the GC protection, which its gateway's own
// transaction provides while the statement runs.
func (db *DB) NewSnapshotTxn(ctx context.Context, name string, ts, limit hlc.Timestamp) *Txn {
	t := &Txn{db: db, iso: Serializable, ctx: ctx, snapshot: true}
	t.mu.proto = kvpb.Transaction{
		TxnMeta:                kvpb.TxnMeta{ID: uuid.New(), WriteTimestamp: ts, MinTimestamp: ts, Priority: rand.Int32N(1<<31-2) + 1},
		Name:                   name,
		Status:                 kvpb.Pending,
		ReadTimestamp:          ts,
		GlobalUncertaintyLimit: limit,
	}
	t.mu.lockSpans.max = db.opts.MaxLockSpans
	t.mu.readSpans.max = db.opts.MaxReadSpans
	return t
}

// NewAsOfTxn returns a read-only transaction that reads at exactly ts
// with no uncertainty window: SQL's AS OF SYSTEM TIME, a historical read,
// for which no later-written value can have happened before it. Like a
// snapshot transaction it never moves ts and refuses writes
// (ErrReadOnlyTxn). Unlike one it is registered with the GC protection
// from its start to its commit or rollback (ts is below the clock, so a
// ProtectedTimestamp taken after the registration is at or below ts; one
// taken before may already have let GC pass ts, and then its reads fail
// with BatchTimestampBeforeGCError, never answer wrongly), and it is left
// out of DrainTimestamp, since it writes nothing through any descriptor.
func (db *DB) NewAsOfTxn(ctx context.Context, name string, ts hlc.Timestamp) *Txn {
	return db.active.register(db.clock, func(hlc.Timestamp) *Txn {
		t := db.NewSnapshotTxn(ctx, name, ts, ts)
		t.mu.drainExempt = true
		return t
	})
}

// ErrReadOnlyTxn is the error of a write sent in a snapshot or AS OF
// SYSTEM TIME transaction (the session refuses those writes first, with
// SQLSTATE 25006).
var ErrReadOnlyTxn = errors.New("kv: write in a read-only (snapshot or AS OF SYSTEM TIME) transaction")

// uncertaintyLimit is the end of the uncertainty window of a read starting
// at ts: a value above ts but below this may have been written before the
// read began in real time, by a node whose clock is behind ours.
func (db *DB) uncertaintyLimit(ts hlc.Timestamp) hlc.Timestamp {
	off := db.clock.MaxOffset().Nanoseconds()
	if off == 0 {
		return ts
	}
	return hlc.Timestamp{WallTime: ts.WallTime + off, Logical: ts.Logical}
}

// ID returns the transaction's ID (stable across epochs).
func (t *Txn) ID() uuid.UUID {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.proto.ID
}

// Isolation returns the transaction's isolation level.
func (t *Txn) Isolation() IsolationLevel { return t.iso }

// ReadTimestamp returns where the transaction currently reads.
func (t *Txn) ReadTimestamp() hlc.Timestamp {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.proto.ReadTimestamp
}

// CommitTimestamp returns the timestamp the transaction committed at; zero
// before a successful Commit.
func (t *Txn) CommitTimestamp() hlc.Timestamp {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.commitTS
}

// OnePhaseCommitted reports whether Commit committed in one phase (all
// writes in the committing batch, on one tablet: no intents, no record).
func (t *Txn) OnePhaseCommitted() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.onePC
}

// CommitPhases returns how a committed transaction committed: 0 when it
// wrote nothing, 1 in one phase, 2 in two.
func (t *Txn) CommitPhases() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.mu.onePC:
		return 1
	case t.mu.wrote:
		return 2
	}
	return 0
}

// Epoch returns the transaction's epoch (bumped by each PrepareForRetry).
func (t *Txn) Epoch() int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.proto.Epoch
}

// Get reads key.
func (t *Txn) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	b := &Batch{}
	b.Get(key)
	if err := t.Run(ctx, b); err != nil {
		return nil, false, err
	}
	r := b.Results[0]
	if !r.Found {
		return nil, false, nil
	}
	return r.Rows[0].Value, true, nil
}

// RecordRead adds key to the transaction's read spans as though it had
// been read at the current read timestamp, without reading it: for a
// caller that knows the key's value there by other means (the SQL
// catalog's node-local generation, sql/catalog/generation.go) but whose
// transaction must still refresh it, and so restart, if a write to the key
// commits between its read and commit timestamps (invariant 4). The
// caller, not the tablet, answers for the value and for the timestamp
// cache: nothing is recorded there.
func (t *Txn) RecordRead(key []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.readSpans.add(kvpb.Span{Key: key})
}

// Put writes value at key.
func (t *Txn) Put(ctx context.Context, key, value []byte) error {
	b := &Batch{}
	b.Put(key, value)
	return t.Run(ctx, b)
}

// CPut writes value at key if the key's current value equals expected
// (expectExists) or it has none (!expectExists); otherwise it returns a
// *kvpb.ConditionFailedError.
func (t *Txn) CPut(ctx context.Context, key, value, expected []byte, expectExists bool) error {
	b := &Batch{}
	b.CPut(key, value, expected, expectExists)
	return t.Run(ctx, b)
}

// Delete deletes key.
func (t *Txn) Delete(ctx context.Context, key []byte) error {
	b := &Batch{}
	b.Del(key)
	return t.Run(ctx, b)
}

// DelRange deletes every key in [start, end) and returns the keys deleted.
func (t *Txn) DelRange(ctx context.Context, start, end []byte) ([][]byte, error) {
	// The keys deleted are only known where the deletion runs: not in the
	// write buffer.
	if err := t.flushBuffer(ctx); err != nil {
		return nil, err
	}
	b := &Batch{}
	b.DelRange(start, end)
	if err := t.Run(ctx, b); err != nil {
		return nil, err
	}
	return b.Results[0].Keys, nil
}

// Scan reads up to maxRows (0: all) rows of [start, end) in key order.
func (t *Txn) Scan(ctx context.Context, start, end []byte, maxRows int64) ([]kvpb.KeyValue, error) {
	b := &Batch{}
	b.Scan(start, end, maxRows)
	if err := t.Run(ctx, b); err != nil {
		return nil, err
	}
	return b.Results[0].Rows, nil
}

// ReverseScan reads up to maxRows (0: all) rows of [start, end) in reverse
// key order.
func (t *Txn) ReverseScan(ctx context.Context, start, end []byte, maxRows int64) ([]kvpb.KeyValue, error) {
	b := &Batch{}
	b.ReverseScan(start, end, maxRows)
	if err := t.Run(ctx, b); err != nil {
		return nil, err
	}
	return b.Results[0].Rows, nil
}

// Run sends every operation of b in one round (each tablet involved gets its
// part in parallel) and fills b.Results.
func (t *Txn) Run(ctx context.Context, b *Batch) error {
	if len(b.reqs) == 0 {
		b.Results = nil
		return nil
	}
	if len(b.lockOnRead) > 0 {
		if handled, err := t.runLockingRead(ctx, b); handled || err != nil {
			return err
		}
	}
	if t.buffering() {
		if handled, err := t.runBuffered(ctx, b); handled || err != nil {
			return err
		}
	}
	br, err := t.send(ctx, b.reqs, sendOpts{wait: b.WaitPolicy})
	if err != nil {
		return err
	}
	return b.fill(br)
}

// buffering reports whether writes are buffered (txn_buffer.go).
func (t *Txn) buffering() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.buf != nil
}

// Step marks a statement boundary. Under READ COMMITTED the next statement
// reads a fresh snapshot (now); the spans read by the previous statement are
// forgotten (invariant 4). Under the other levels it does nothing.
func (t *Txn) Step(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usableLocked(); err != nil {
		return err
	}
	if t.iso != ReadCommitted {
		return nil
	}
	ts := t.db.clock.Now().Forward(t.mu.proto.WriteTimestamp)
	t.mu.proto.ReadTimestamp = ts
	t.mu.proto.WriteTimestamp = ts
	t.mu.proto.GlobalUncertaintyLimit = t.db.uncertaintyLimit(ts)
	t.resetObservationsLocked()
	t.mu.readSpans.reset()
	return nil
}

// usableLocked returns why the Txn refuses operations, if it does.
func (t *Txn) usableLocked() error {
	switch {
	case t.mu.state != txnPending:
		return ErrTxnFinished
	case t.mu.retryErr != nil:
		return t.mu.retryErr
	}
	if hb := t.mu.hb; hb != nil {
		if err := hb.abortedErr(); err != nil {
			t.mu.aborted = true
			t.mu.retryErr = err
			return err
		}
	}
	return nil
}

// sendOpts adjust one send.
type sendOpts struct {
	// noHeartbeat: the batch commits in one phase, so no record will exist
	// to heartbeat.
	noHeartbeat bool
	// wait is the batch's policy on other transactions' locks.
	wait kvpb.WaitPolicy
	// seq, when set, is the sequence number the writes were given when
	// they were buffered (txn_buffer.go): the batch is sent at it rather
	// than at a new one.
	seq int32
	// unreplicated: the batch's only writes are unreplicated locks
	// (lockBuffered): nothing is written, so the transaction has still
	// sent nothing (wrote stays false) and may commit in one phase.
	unreplicated bool
}

// maxInPlaceRetries bounds how often one send retries after moving the
// transaction's timestamps (WriteTooOld, uncertainty) before restarting.
const maxInPlaceRetries = 5

// send runs reqs in the transaction. Write-too-old and uncertainty errors
// are handled in place when the transaction's reads can be refreshed to the
// new timestamp; other retryable errors put the Txn into the refusing state
// (invariant 6) and are returned.
func (t *Txn) send(ctx context.Context, reqs []kvpb.Request, opts sendOpts) (*kvpb.BatchResponse, error) {
	t.mu.Lock()
	if err := t.usableLocked(); err != nil {
		t.mu.Unlock()
		return nil, err
	}
	if t.snapshot {
		for _, r := range reqs {
			if r.Method().IsWrite() {
				t.mu.Unlock()
				return nil, ErrReadOnlyTxn
			}
		}
	}
	needRecord := false
	if hasTxnWrites(reqs) && !opts.unreplicated {
		needRecord = t.prepareWritesLocked(reqs, opts)
	}
	t.mu.Unlock()
	if needRecord {
		if err := t.beatNow(ctx); err != nil {
			return nil, err
		}
	}

	for attempt := 0; ; attempt++ {
		t.mu.Lock()
		ba := &kvpb.BatchRequest{Requests: reqs}
		ba.Txn = t.mu.proto.Clone()
		if opts.seq != 0 {
			ba.Txn.Sequence = opts.seq
		}
		ba.WaitPolicy = opts.wait
		t.mu.Unlock()

		br, err := t.db.ds.Send(ctx, ba)
		if err == nil {
			t.mu.Lock()
			err = t.absorbLocked(br, reqs)
			t.mu.Unlock()
			if err != nil {
				return nil, err
			}
			return br, nil
		}
		if !kvpb.IsRetryable(err) {
			return nil, err
		}
		target, ok := inPlaceTarget(err)
		if ok && !t.snapshot && attempt < maxInPlaceRetries {
			if rerr := t.refresh(ctx, target); rerr == nil {
				continue
			} else if !kvpb.IsRetryable(rerr) {
				return nil, rerr
			} else {
				err = fmt.Errorf("%w (refresh failed: %v)", err, rerr)
			}
		}
		return nil, t.setRetryable(err)
	}
}

// inPlaceTarget returns the timestamp a transaction can move to in order to
// retry a request that failed with err, if err allows that.
func inPlaceTarget(err error) (hlc.Timestamp, bool) {
	var wto *kvpb.WriteTooOldError
	var unc *kvpb.ReadWithinUncertaintyIntervalError
	switch {
	case errors.As(err, &wto):
		return wto.ActualTimestamp, true
	case errors.As(err, &unc):
		return unc.ExistingTimestamp.Next(), true
	}
	return hlc.Timestamp{}, false
}

// setRetryable records a retryable error the Txn must refuse operations
// with until it is prepared for a retry.
func (t *Txn) setRetryable(err error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var aborted *kvpb.TransactionAbortedError
	if errors.As(err, &aborted) {
		t.mu.aborted = true
	}
	t.mu.retryErr = err
	return err
}

func hasTxnWrites(reqs []kvpb.Request) bool {
	for _, r := range reqs {
		if r.Method().IsTxnWrite() {
			return true
		}
	}
	return false
}

// prepareWritesLocked fixes the anchor and records the lock spans before the
// writes are sent (invariant 3), and starts the heartbeat. It reports
// whether the record must be created before the writes go out: a pusher
// that meets an intent without a record judges the transaction by its
// start, so a transaction that first writes long after starting would look
// abandoned until its first scheduled heartbeat.
func (t *Txn) prepareWritesLocked(reqs []kvpb.Request, opts sendOpts) (needRecord bool) {
	for _, r := range reqs {
		if !r.Method().IsTxnWrite() {
			continue
		}
		s := r.Span()
		if t.mu.proto.Key == nil {
			t.mu.proto.Key = append([]byte(nil), s.Key...)
		}
		t.mu.lockSpans.add(s)
	}
	// One sequence number per writing batch: replays are recognised by it,
	// and savepoints name writes by it (txn_savepoint.go). A buffered
	// batch got its number when it was buffered.
	if opts.seq == 0 {
		t.mu.proto.Sequence++
	}
	t.mu.wrote = true
	if !opts.noHeartbeat && t.mu.hb == nil {
		t.mu.hb = t.startHeartbeat()
		age := time.Duration(t.db.clock.Now().WallTime - t.mu.proto.MinTimestamp.WallTime)
		needRecord = age >= t.db.opts.HeartbeatInterval
	}
	return needRecord
}

// absorbLocked folds a successful response into the transaction: its write
// timestamp may have been pushed, and what it read joins the read spans.
func (t *Txn) absorbLocked(br *kvpb.BatchResponse, reqs []kvpb.Request) error {
	if br.Txn != nil {
		if br.Txn.Status == kvpb.Aborted {
			// A heartbeat or query found the record aborted.
			t.mu.aborted = true
			t.mu.retryErr = &kvpb.TransactionAbortedError{Reason: kvpb.AbortPushed}
			return t.mu.retryErr
		}
		t.mu.proto.WriteTimestamp = t.mu.proto.WriteTimestamp.Forward(br.Txn.WriteTimestamp)
		t.absorbObservationsLocked(br.Txn)
	}
	for i, r := range reqs {
		switch req := r.(type) {
		case *kvpb.GetRequest, *kvpb.ConditionalPutRequest, *kvpb.DeleteRangeRequest:
			t.mu.readSpans.add(r.Span())
		case *kvpb.ScanRequest:
			s := kvpb.Span{Key: req.Key, EndKey: req.EndKey}
			// Only what was read needs refreshing: trim off the resume span.
			if sr, ok := br.Responses[i].(*kvpb.ScanResponse); ok && sr.ResumeSpan != nil {
				if req.Reverse {
					s.Key = sr.ResumeSpan.EndKey
				} else {
					s.EndKey = sr.ResumeSpan.Key
				}
			}
			if len(s.EndKey) > 0 && string(s.Key) < string(s.EndKey) {
				t.mu.readSpans.add(s)
			}
		}
	}
	return nil
}
