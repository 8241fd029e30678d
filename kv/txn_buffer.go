package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

// The write buffer: a transaction's writes held in the coordinator until
// commit, so that a transaction whose writes all land on one tablet (a
// colocated database's tables, or any single-row autocommit write)
// commits them in one phase — [writes..., EndTxn] in one batch, no
// intents, no record (txn_commit.go) — instead of writing an intent per
// statement and committing in two.
//
// Off unless the caller turns it on (EnableWriteBuffering; the SQL
// session does, under cairn_buffered_writes). With it on:
//
//   - Put, CPut and Del are recorded per key with the sequence number of
//     their batch (one per writing batch, as for sent writes), so a
//     savepoint rollback (IgnoredSeqNums) hides them exactly as it hides
//     intents. Nothing is sent.
//   - Get, Scan and ReverseScan read KV and lay the buffer over the result:
//     the newest buffered write of a key that is not ignored wins, a
//     buffered delete hides the key. A limited scan asks KV for as many
//     more rows as there are buffered keys in its span (each can hide at
//     most one), so the limit and the resume span stay exact. A Get of a
//     key the buffer decides, and a Scan of a span whose every key it
//     decides (writeBuffer.covers: a row rewritten whole), are answered
//     from the buffer alone: nothing is sent, and nothing joins the read
//     spans (the answer is the transaction's own writes, which no other
//     transaction's commit changes).
//   - A CPut is evaluated when it is buffered: against the buffer if the
//     key has a live buffered write, else against a transactional read of
//     the key. A failed condition is the *kvpb.ConditionFailedError the
//     tablet would have returned, at the same statement. A CPut of a
//     generated key (Batch.CPutGenerated) without a live buffered write
//     is not read: its condition (no value) is assumed at the statement
//     and sent with the write, so the tablet checks it then, and it takes
//     no unreplicated lock; the statement makes no round trip for it.
//   - What a buffered write depended on is checked when it is sent: every
//     buffered key remembers the read timestamp of the statement that
//     first wrote it ("since"). Before the writes leave the buffer (at
//     commit, or at a flush) the coordinator proves with a RefreshRequest
//     that no other transaction committed a version of the key between
//     since and the current read timestamp, and adds the keys to the read
//     spans, so a committed version above that (WriteTooOld, or a refused
//     one-phase commit) fails the refresh instead of being written over.
//     Together: no version of a buffered key committed after the
//     statement that wrote it read, exactly what an intent written at the
//     statement guaranteed, and so also that every buffered CPut's
//     condition still holds. A failure is a retryable error (40001 at
//     COMMIT), never a silent overwrite.
//   - A DeleteRange is buffered as a range deletion: it hides the stored
//     keys of its span and the buffered writes older than it. At commit the
//     live ones go as DeleteRanges (around the keys written by point
//     writes) before the point writes, except those of a span the
//     statement read empty under its lock (Batch.DelRangeSeenEmpty),
//     which would delete nothing. Its Result.Keys are not known.
//   - An UPDATE's row Lock, sent in a batch with its writes, is buffered
//     and sent first in the committing batch (bufferedLock).
//   - A read with Batch.LockOnRead takes the unreplicated lock of its
//     span in the read's own batch (runLockingRead; an UPDATE's read of
//     its one row), and the writes inside that span then take none.
//   - Anything else flushes the buffer and turns buffering off for the
//     rest of the transaction: a Lock on its own (SELECT FOR UPDATE: its
//     lock must be in the tablet now), a batch that mixes reads and writes,
//     a buffer over maxBufferBytes or maxBufferKeys, a schema change
//     (ReadAtWriteTimestamp, DisableWriteBuffering). A flush replays the
//     buffered batches in order at their own sequence numbers, so intent
//     histories, and savepoints taken before the flush, stay right; the
//     transaction then goes on the usual two-phase way.
//
// What buffering changes for other transactions: a buffered write holds no
// intent, but its statement takes an unreplicated lock on each key it
// buffers (lockSpansLocked; tablet/locktable.go), so a concurrent writer
// of the same row waits at its statement as it would on an intent, and
// the one-phase commit releases the locks. They are best effort (a lease
// change or split may lose them); the check before sending still fails
// whichever commits second of two racing writers then (docs/
// architecture.md, "Write buffering").

// Buffer limits: past either, the buffer is flushed as intents.
const (
	maxBufferBytes = 4 << 20
	maxBufferKeys  = 8192
)

// bufferedWrite is one buffered write of a key.
type bufferedWrite struct {
	seq int32
	// ord orders every buffered write and range deletion, also within one
	// batch (whose entries share seq): the newest live one decides a key.
	ord       int
	value     []byte
	tombstone bool
	// cond is set for a CPut whose condition was evaluated against the
	// stored value (no earlier live buffered write or range deletion of
	// the key decided it): its expectation, re-sent with the commit. A
	// CPut evaluated against the buffer has none: its condition is about
	// the transaction's own writes, which the commit replaces, and
	// re-sending it against the stored value would fail (a row deleted
	// by a DeleteRange and inserted again expects no value where the
	// stored row still is).
	cond *bufferedCond
}

type bufferedCond struct {
	expected     []byte
	expectExists bool
}

// bufferedKey is a key's buffered writes, oldest first.
type bufferedKey struct {
	key []byte
	// since is the lowest read timestamp any of its writes was buffered
	// at: the check before sending starts there.
	since hlc.Timestamp
	hist  []bufferedWrite
	// keyInline and histInline hold a short key and the first write:
	// the key's copy and the history's first growth were two of the
	// three objects of every buffered key (TestBufferAllocs). A
	// bufferedKey is never copied, so nothing else aliases them.
	keyInline  [bufferedKeyInline]byte
	histInline [1]bufferedWrite
}

// bufferedKeyInline is the longest key a bufferedKey holds in itself (a
// table row's key of a few integer columns).
const bufferedKeyInline = 24

// live returns the newest write of k not rolled back.
func (k *bufferedKey) live(ignored []kvpb.SeqRange) (*bufferedWrite, bool) {
	for i := len(k.hist) - 1; i >= 0; i-- {
		if !kvpb.SeqIgnored(ignored, k.hist[i].seq) {
			return &k.hist[i], true
		}
	}
	return nil, false
}

// bufferedOp is one buffered request, in the order buffered, for replay.
type bufferedOp struct {
	seq int32
	req kvpb.Request
}

// bufferedLock is a row lock an UPDATE asked for with its writes, taken
// at commit: in the one-phase batch, a LockRequest evaluated outside the
// transaction checks for other transactions' locks and for versions
// above the commit timestamp and writes no lock record; sent as intents,
// it is taken as usual.
type bufferedLock struct {
	span  kvpb.Span
	since hlc.Timestamp
}

// bufferedRange is a buffered DeleteRange: it deletes every key in span
// whose newest live buffered write is older (by ord) and every stored key
// the buffer does not override.
type bufferedRange struct {
	span  kvpb.Span
	seq   int32
	ord   int
	since hlc.Timestamp
	// seenEmpty: Batch.DelRangeSeenEmpty's. It decides reads and is
	// checked like any other, but the commit sends no DeleteRange for it.
	seenEmpty bool
}

// writeBuffer holds a transaction's buffered writes.
type writeBuffer struct {
	keys  []*bufferedKey // sorted by key
	locks []bufferedLock
	// ranges are sorted by start key; rangeMaxEnd[i] is the largest end
	// key of ranges[:i+1], so a lookup walks back only over ranges that
	// can reach the key (a DELETE buffers one per row).
	ranges      []bufferedRange
	rangeMaxEnd [][]byte
	ops         []bufferedOp
	bytes       int
	nextOrd     int
	// opsInline and keysInline hold a small transaction's first ops and
	// keys (a pgbench -N block: four ops, three keys): growing the slices
	// from nil took five objects per transaction.
	opsInline  [6]bufferedOp
	keysInline [4]*bufferedKey
}

// newWriteBuffer returns an empty buffer whose first ops and keys need
// no allocation.
func newWriteBuffer() *writeBuffer {
	wb := &writeBuffer{}
	wb.ops = wb.opsInline[:0]
	wb.keys = wb.keysInline[:0]
	return wb
}

// resolve returns what the buffer says key holds: known is false when no
// live buffered write or range deletion covers it (KV decides); else
// tombstone says it is deleted, or value is its value.
func (wb *writeBuffer) resolve(key []byte, ignored []kvpb.SeqRange) (value []byte, tombstone, known bool) {
	var w *bufferedWrite
	if k := wb.get(key); k != nil {
		w, _ = k.live(ignored)
	}
	rord := -1
	hi := wb.rangesFrom(key)
	for i := hi - 1; i >= 0 && bytes.Compare(wb.rangeMaxEnd[i], key) > 0; i-- {
		r := &wb.ranges[i]
		if r.ord > rord && !kvpb.SeqIgnored(ignored, r.seq) && spanHas(r.span, key) {
			rord = r.ord
		}
	}
	switch {
	case w != nil && w.ord > rord:
		return w.value, w.tombstone, true
	case rord >= 0:
		return nil, true, true
	}
	return nil, false, false
}

// rangesFrom returns the index of the first range deletion that starts
// after key: those before it are the ones that can hold key. (A search
// for keys.Next(key) allocated that key at every look-up.)
func (wb *writeBuffer) rangesFrom(key []byte) int {
	return sort.Search(len(wb.ranges), func(i int) bool { return bytes.Compare(wb.ranges[i].span.Key, key) > 0 })
}

// covers reports whether the buffer decides every key of [start, end):
// each lies in a live range deletion or has a live buffered write, so no
// stored key of the span shows through (resolve knows them all) and a
// read of the span needs nothing from KV. A row rewritten whole (a Put of
// its row key and a DeleteRange of the rest of its span: sql/rowenc's
// RowWriter.WholeRow) is such a span.
func (wb *writeBuffer) covers(start, end []byte, ignored []kvpb.SeqRange) bool {
	cur := start
	for bytes.Compare(cur, end) < 0 {
		if k := wb.get(cur); k != nil {
			if _, ok := k.live(ignored); ok {
				cur = keys.Next(cur)
				continue
			}
		}
		// The live range deletions holding cur: jump past the furthest.
		var to []byte
		hi := wb.rangesFrom(cur)
		for i := hi - 1; i >= 0 && bytes.Compare(wb.rangeMaxEnd[i], cur) > 0; i-- {
			r := &wb.ranges[i]
			if !kvpb.SeqIgnored(ignored, r.seq) && spanHas(r.span, cur) && bytes.Compare(r.span.EndKey, to) > 0 {
				to = r.span.EndKey
			}
		}
		if to == nil {
			return false
		}
		cur = to
	}
	return true
}

// rangeIn reports whether a live range deletion overlaps [start, end).
func (wb *writeBuffer) rangeIn(start, end []byte, ignored []kvpb.SeqRange) bool {
	hi, _ := slices.BinarySearchFunc(wb.ranges, end, func(r bufferedRange, k []byte) int { return bytes.Compare(r.span.Key, k) })
	for i := hi - 1; i >= 0 && bytes.Compare(wb.rangeMaxEnd[i], start) > 0; i-- {
		r := &wb.ranges[i]
		if !kvpb.SeqIgnored(ignored, r.seq) && bytes.Compare(start, r.span.EndKey) < 0 {
			return true
		}
	}
	return false
}

// addRange records a range deletion.
func (wb *writeBuffer) addRange(r bufferedRange) {
	i, _ := slices.BinarySearchFunc(wb.ranges, r.span.Key, func(r bufferedRange, k []byte) int { return bytes.Compare(r.span.Key, k) })
	for i < len(wb.ranges) && bytes.Equal(wb.ranges[i].span.Key, r.span.Key) {
		i++
	}
	wb.ranges = slices.Insert(wb.ranges, i, r)
	wb.rangeMaxEnd = slices.Insert(wb.rangeMaxEnd, i, nil)
	for j := i; j < len(wb.ranges); j++ {
		end := wb.ranges[j].span.EndKey
		if j > 0 && bytes.Compare(wb.rangeMaxEnd[j-1], end) > 0 {
			end = wb.rangeMaxEnd[j-1]
		}
		wb.rangeMaxEnd[j] = end
	}
	wb.bytes += len(r.span.Key) + len(r.span.EndKey) + 16
}

func spanHas(s kvpb.Span, key []byte) bool {
	return bytes.Compare(s.Key, key) <= 0 && bytes.Compare(key, s.EndKey) < 0
}

func (wb *writeBuffer) find(key []byte) (int, bool) {
	return slices.BinarySearchFunc(wb.keys, key, func(k *bufferedKey, key []byte) int { return bytes.Compare(k.key, key) })
}

func (wb *writeBuffer) get(key []byte) *bufferedKey {
	if i, ok := wb.find(key); ok {
		return wb.keys[i]
	}
	return nil
}

// add records w at key.
func (wb *writeBuffer) add(key []byte, w bufferedWrite, since hlc.Timestamp) {
	i, ok := wb.find(key)
	if !ok {
		k := &bufferedKey{since: since}
		if len(key) <= len(k.keyInline) {
			k.key = append(k.keyInline[:0:len(key)], key...)
		} else {
			k.key = append([]byte(nil), key...)
		}
		k.hist = k.histInline[:0]
		wb.keys = slices.Insert(wb.keys, i, k)
		wb.bytes += len(key)
	}
	k := wb.keys[i]
	k.since = minTimestamp(k.since, since)
	k.hist = append(k.hist, w)
	wb.bytes += len(w.value) + 16
}

// inSpan returns the buffered keys in [start, end), in key order.
func (wb *writeBuffer) inSpan(start, end []byte) []*bufferedKey {
	lo, _ := wb.find(start)
	hi, _ := wb.find(end)
	return wb.keys[lo:hi]
}

// overlaps reports whether the buffer holds anything a read of sp (a
// point when EndKey is nil) would have to lay over what KV returns.
func (wb *writeBuffer) overlaps(sp kvpb.Span, ignored []kvpb.SeqRange) bool {
	if sp.EndKey == nil {
		_, _, known := wb.resolve(sp.Key, ignored)
		return known
	}
	return len(wb.inSpan(sp.Key, sp.EndKey)) > 0 || wb.rangeIn(sp.Key, sp.EndKey, ignored)
}

func (wb *writeBuffer) empty() bool {
	return wb == nil || (len(wb.keys) == 0 && len(wb.locks) == 0 && len(wb.ranges) == 0)
}

// over reports whether the buffer is past its limits.
func (wb *writeBuffer) over() bool {
	return wb.bytes > maxBufferBytes || len(wb.keys)+len(wb.locks)+len(wb.ranges) > maxBufferKeys
}

// EnableWriteBuffering turns the write buffer on for the transaction (see
// above). It must be called before the transaction writes; later it does
// nothing.
func (t *Txn) EnableWriteBuffering() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.wrote || t.mu.state != txnPending {
		return
	}
	t.mu.bufWanted = true
	if t.mu.buf == nil {
		t.mu.buf = newWriteBuffer()
	}
}

// EnableWriteBufferingWithoutLocks is EnableWriteBuffering for a
// transaction that takes no unreplicated locks for its buffered writes:
// one the caller commits right after its statements and reruns whole on a
// retryable error (an implicit transaction). A lock there would only hold
// off a concurrent writer for the instant before the commit, at the price
// of a round trip per writing statement and a heartbeat; without it a lost
// race is a 40001 at commit, which the caller's rerun absorbs.
func (t *Txn) EnableWriteBufferingWithoutLocks() {
	t.EnableWriteBuffering()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.bufWanted {
		t.mu.noMemLocks = true
	}
}

// DisableWriteBuffering sends what the buffer holds as intents and turns
// buffering off for the rest of the transaction: for statements (schema
// changes) whose writes other transactions must meet as locks.
func (t *Txn) DisableWriteBuffering(ctx context.Context) error {
	return t.flushBuffer(ctx)
}

// BufferServesReads reports whether the transaction's later statements
// read through its write buffer: buffering is on, and the transaction is
// not one committed right after its statements
// (EnableWriteBufferingWithoutLocks). A read of a span the buffer decides
// whole (writeBuffer.covers) is then answered without KV, so a writer that
// can make its write decide a row's span whole at a small cost (sql/exec's
// UPDATE of a packed row) saves a later read of the row its round trip.
func (t *Txn) BufferServesReads() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.buf != nil && !t.mu.noMemLocks
}

// BufferedWrites returns how many keys the buffer holds writes for.
func (t *Txn) BufferedWrites() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.buf == nil {
		return 0
	}
	return len(t.mu.buf.keys)
}

// runBuffered runs b against the buffer if it can: handled false means b
// must go the usual way (the buffer was flushed if it had to be).
func (t *Txn) runBuffered(ctx context.Context, b *Batch) (handled bool, err error) {
	reads, writes := 0, 0
	for _, r := range b.reqs {
		switch req := r.(type) {
		case *kvpb.GetRequest, *kvpb.ScanRequest:
			reads++
		case *kvpb.PutRequest, *kvpb.DeleteRequest, *kvpb.DeleteRangeRequest:
			writes++
		case *kvpb.ConditionalPutRequest:
			writes++
		case *kvpb.LockRequest:
			// An UPDATE's row lock, sent with its writes, is checked at
			// commit (see above). A lock asked for on its own (SELECT FOR
			// UPDATE) or one that must not wait is taken now.
			if req.SkipLocked || b.WaitPolicy != kvpb.WaitBlock || len(b.reqs) == 1 {
				return false, t.flushBuffer(ctx)
			}
			writes++
		default:
			// Anything else: its effect must be in the tablets.
			return false, t.flushBuffer(ctx)
		}
	}
	if reads > 0 && writes > 0 {
		return false, t.flushBuffer(ctx)
	}
	if writes > 0 {
		return true, t.bufferWrites(ctx, b)
	}
	return t.readThroughBuffer(ctx, b)
}

// bufferWrites evaluates b's writes (all Put, CPut, Del) and buffers them
// as one writing batch.
func (t *Txn) bufferWrites(ctx context.Context, b *Batch) error {
	t.mu.Lock()
	if err := t.usableLocked(); err != nil {
		t.mu.Unlock()
		return err
	}
	// The CPuts whose key has no live buffered write read it from KV.
	var need [][]byte
	for _, r := range b.reqs {
		if cp, ok := r.(*kvpb.ConditionalPutRequest); ok && !b.isGenerated(r) {
			if _, _, known := t.mu.buf.resolve(cp.Key, t.mu.proto.IgnoredSeqNums); !known {
				need = append(need, cp.Key)
			}
		}
	}
	locks, ids, needRecord := t.lockSpansLocked(b)
	t.mu.Unlock()
	if needRecord {
		if err := t.beatNow(ctx); err != nil {
			return err
		}
	}
	stored := map[string][]byte{}
	if len(need) > 0 || len(locks) > 0 {
		// One round trip: the CPuts' reads and the statement's
		// unreplicated locks go together (split per tablet, in parallel).
		reqs := make([]kvpb.Request, 0, len(need)+len(locks))
		for _, k := range need {
			reqs = append(reqs, &kvpb.GetRequest{Key: k})
		}
		reqs = append(reqs, locks...)
		br, err := t.send(ctx, reqs, sendOpts{wait: b.WaitPolicy, unreplicated: len(locks) > 0})
		if err != nil {
			return err
		}
		for i, k := range need {
			if gr, ok := br.Responses[i].(*kvpb.GetResponse); ok && gr.Value != nil {
				stored[string(k)] = gr.Value
			}
		}
		if len(ids) > 0 {
			t.mu.Lock()
			t.noteMemLockedLocked(ids)
			t.mu.Unlock()
		}
	}

	t.mu.Lock()
	over, err := t.bufferWritesLocked(b, stored)
	t.mu.Unlock()
	if err != nil || !over {
		return err
	}
	return t.flushBuffer(ctx)
}

// lockSpansLocked lists the unreplicated locks b's writes need (one per
// written key, row lock and range deletion, except those the transaction
// already holds or a locking read's span covers) and prepares for sending them: their spans join the lock
// spans first (so whatever ends the transaction releases them even if the
// send fails midway), the anchor is fixed if it was not, and the heartbeat
// starts, since a pusher that meets the locks judges the transaction by
// its record, or without one by its start. needRecord is as for
// prepareWritesLocked. t.mu is held.
func (t *Txn) lockSpansLocked(b *Batch) (locks []kvpb.Request, ids []string, needRecord bool) {
	if t.db.opts.NoUnreplicatedLocks || t.mu.noMemLocks {
		return nil, nil, false
	}
	var sps []kvpb.Span
	for _, r := range b.reqs {
		if b.isGenerated(r) {
			// A generated key: no other transaction writes it, and the
			// condition sent with it catches one that did.
			continue
		}
		var sp kvpb.Span
		switch req := r.(type) {
		case *kvpb.PutRequest, *kvpb.ConditionalPutRequest, *kvpb.DeleteRequest:
			sp = kvpb.Span{Key: req.Span().Key}
		case *kvpb.LockRequest:
			sp = kvpb.Span{Key: req.Key, EndKey: req.EndKey}
		case *kvpb.DeleteRangeRequest:
			sp = kvpb.Span{Key: req.Key, EndKey: req.EndKey}
		default:
			continue
		}
		if !t.readLockedCoversLocked(sp) {
			sps = append(sps, sp)
		}
	}
	return t.newMemLocksLocked(sps, nil, nil)
}

// readLockedCoversLocked reports whether sp (a point when EndKey is nil)
// lies inside a span a locking read locked (Batch.LockOnRead), which
// stands for the transaction's writes there. t.mu is held.
func (t *Txn) readLockedCoversLocked(sp kvpb.Span) bool {
	rl := t.mu.readLocked
	i, _ := slices.BinarySearchFunc(rl, sp.Key, func(s kvpb.Span, k []byte) int {
		if bytes.Compare(s.Key, k) <= 0 {
			return -1
		}
		return 1
	})
	if i == 0 {
		return false
	}
	s := rl[i-1]
	if sp.EndKey == nil {
		return bytes.Compare(sp.Key, s.EndKey) < 0
	}
	return bytes.Compare(sp.EndKey, s.EndKey) <= 0
}

// addReadLockedLocked records a span a locking read locked, keeping the
// list sorted by start key. t.mu is held.
func (t *Txn) addReadLockedLocked(sp kvpb.Span) {
	i, _ := slices.BinarySearchFunc(t.mu.readLocked, sp.Key, func(s kvpb.Span, k []byte) int { return bytes.Compare(s.Key, k) })
	t.mu.readLocked = slices.Insert(t.mu.readLocked, i, sp)
}

// newMemLocksLocked appends to locks the unreplicated LockRequests for
// the spans among sps the transaction does not hold yet, and to ids
// their ids (to note once taken), and returns them with needRecord, as
// lockSpansLocked. t.mu is held.
func (t *Txn) newMemLocksLocked(sps []kvpb.Span, locks []kvpb.Request, ids []string) (_ []kvpb.Request, _ []string, needRecord bool) {
	for _, sp := range sps {
		id := string(sp.Key) + "\x00" + string(sp.EndKey)
		if _, ok := t.mu.memLocked[id]; ok || slices.Contains(ids, id) {
			continue
		}
		ids = append(ids, id)
		t.mu.lockSpans.add(sp)
		locks = append(locks, &kvpb.LockRequest{Key: sp.Key, EndKey: sp.EndKey, Unreplicated: true})
	}
	if len(locks) == 0 {
		return nil, nil, false
	}
	t.mu.memLockSent = true
	if t.mu.proto.Key == nil {
		t.mu.proto.Key = append([]byte(nil), locks[0].Span().Key...)
	}
	if t.mu.hb == nil {
		t.mu.hb = t.startHeartbeat()
		age := time.Duration(t.db.clock.Now().WallTime - t.mu.proto.MinTimestamp.WallTime)
		needRecord = age >= t.db.opts.HeartbeatInterval
	}
	return locks, ids, needRecord
}

// noteMemLockedLocked records the locks of ids (newMemLocksLocked) as
// held. t.mu is held.
func (t *Txn) noteMemLockedLocked(ids []string) {
	if t.mu.memLocked == nil {
		t.mu.memLocked = make(map[string]struct{}, len(ids))
	}
	for _, id := range ids {
		t.mu.memLocked[id] = struct{}{}
	}
}

// runLockingRead runs a batch of reads with locks to take on the read
// (Batch.LockOnRead): the transaction's unreplicated locks on those spans
// go first in the batch, so a concurrent writer's lock makes the read wait
// as the later write would have, and the read happens under the lock. It
// is an UPDATE's read of the row it changes (CockroachDB's implicit
// SELECT FOR UPDATE): the lock its buffered write needs is then taken
// here, and the write is buffered without a round trip. handled false:
// run b as an ordinary read (the transaction takes no unreplicated locks,
// b holds anything but reads, or the buffer holds writes b reads, whose
// locks are held already).
func (t *Txn) runLockingRead(ctx context.Context, b *Batch) (handled bool, err error) {
	t.mu.Lock()
	if t.mu.buf == nil || t.db.opts.NoUnreplicatedLocks || t.mu.noMemLocks || b.WaitPolicy != kvpb.WaitBlock {
		t.mu.Unlock()
		return false, nil
	}
	if err := t.usableLocked(); err != nil {
		t.mu.Unlock()
		return false, err
	}
	ignored := t.mu.proto.IgnoredSeqNums
	for _, r := range b.reqs {
		var sp kvpb.Span
		switch req := r.(type) {
		case *kvpb.GetRequest:
			sp = kvpb.Span{Key: req.Key}
		case *kvpb.ScanRequest:
			sp = kvpb.Span{Key: req.Key, EndKey: req.EndKey}
		default:
			t.mu.Unlock()
			return false, nil
		}
		if t.mu.buf.overlaps(sp, ignored) {
			t.mu.Unlock()
			return false, nil
		}
	}
	// An UPDATE's read locks one row's span: its lock and id are held
	// on the stack.
	var locksBuf [1]kvpb.Request
	var idsBuf [1]string
	locks, ids, needRecord := t.newMemLocksLocked(b.lockOnRead, locksBuf[:0], idsBuf[:0])
	if len(locks) > 0 {
		// The batch reads what it locks; recorded as read before it is
		// sent, so that a WriteTooOld the lock meets (a version newer
		// than the snapshot) is refreshed as it was when the lock
		// followed the read: it fails if the locked row changed since
		// the snapshot (40001 under REPEATABLE READ and SERIALIZABLE,
		// a statement retry under READ COMMITTED), never letting the
		// statement move past a change it did not read.
		for _, sp := range b.lockOnRead {
			t.mu.readSpans.add(sp)
		}
	}
	t.mu.Unlock()
	if len(locks) == 0 {
		return false, nil
	}
	if needRecord {
		if err := t.beatNow(ctx); err != nil {
			return true, err
		}
	}
	reqs := make([]kvpb.Request, 0, len(locks)+len(b.reqs))
	reqs = append(append(reqs, locks...), b.reqs...)
	br, err := t.send(ctx, reqs, sendOpts{wait: b.WaitPolicy, unreplicated: true})
	if err != nil {
		return true, err
	}
	t.mu.Lock()
	t.noteMemLockedLocked(ids)
	for _, l := range locks {
		t.addReadLockedLocked(l.Span())
	}
	t.mu.Unlock()
	rest := *br
	rest.Responses = br.Responses[len(locks):]
	return true, b.fill(&rest)
}

// bufferWritesLocked buffers b's writes given the stored values of the
// CPut keys without a live buffered write; over reports that the buffer
// is now past its limits.
func (t *Txn) bufferWritesLocked(b *Batch, stored map[string][]byte) (over bool, _ error) {
	if err := t.usableLocked(); err != nil {
		return false, err
	}
	if t.mu.buf == nil {
		return false, errors.New("kv: write buffer gone while buffering")
	}
	ignored := t.mu.proto.IgnoredSeqNums
	// current is the key's value as this batch's earlier writes (newest
	// first in pending) left it.
	var ws func(int) *bufferedWrite
	var pending []int
	// fromStored says the answer is the stored value, not the buffer's.
	current := func(key []byte) (value []byte, exists, fromStored bool) {
		for j := len(pending) - 1; j >= 0; j-- {
			switch req := b.reqs[pending[j]].(type) {
			case *kvpb.DeleteRangeRequest:
				if spanHas(kvpb.Span{Key: req.Key, EndKey: req.EndKey}, key) {
					return nil, false, false
				}
			default:
				if bytes.Equal(req.Span().Key, key) {
					w := ws(pending[j])
					return w.value, !w.tombstone, false
				}
			}
		}
		if v, tomb, known := t.mu.buf.resolve(key, ignored); known {
			return v, !tomb, false
		}
		v, ok := stored[string(key)]
		return v, ok, true
	}
	seq := t.mu.proto.Sequence + 1
	written := make([]bufferedWrite, len(b.reqs))
	ws = func(i int) *bufferedWrite { return &written[i] }
	for i, r := range b.reqs {
		ord := t.mu.buf.nextOrd + i
		switch req := r.(type) {
		case *kvpb.LockRequest:
			continue
		case *kvpb.DeleteRangeRequest:
			if bytes.Compare(req.Key, req.EndKey) >= 0 {
				return false, fmt.Errorf("kv: DeleteRange of an empty span [%q, %q)", req.Key, req.EndKey)
			}
		case *kvpb.PutRequest:
			written[i] = bufferedWrite{seq: seq, ord: ord, value: req.Value}
		case *kvpb.DeleteRequest:
			written[i] = bufferedWrite{seq: seq, ord: ord, tombstone: true}
		case *kvpb.ConditionalPutRequest:
			actual, exists, fromStored := current(req.Key)
			if exists != req.ExpectExists || (exists && !bytes.Equal(actual, req.Expected)) {
				// Nothing of the batch is buffered: as a failed batch
				// whose writes a savepoint rollback undoes.
				return false, &kvpb.ConditionFailedError{Key: append([]byte(nil), req.Key...), ActualValue: actual}
			}
			written[i] = bufferedWrite{seq: seq, ord: ord, value: req.Value}
			if fromStored {
				written[i].cond = &bufferedCond{expected: req.Expected, expectExists: req.ExpectExists}
			}
		}
		pending = append(pending, i)
	}
	t.mu.proto.Sequence = seq
	since := t.mu.proto.ReadTimestamp
	for i, r := range b.reqs {
		t.mu.buf.ops = append(t.mu.buf.ops, bufferedOp{seq: seq, req: r})
		switch req := r.(type) {
		case *kvpb.LockRequest:
			t.mu.buf.locks = append(t.mu.buf.locks, bufferedLock{span: kvpb.Span{Key: req.Key, EndKey: req.EndKey}, since: since})
		case *kvpb.DeleteRangeRequest:
			sp := kvpb.Span{Key: append([]byte(nil), req.Key...), EndKey: append([]byte(nil), req.EndKey...)}
			t.mu.buf.addRange(bufferedRange{span: sp, seq: seq, ord: t.mu.buf.nextOrd + i, since: since, seenEmpty: b.isSeenEmpty(req)})
		default:
			t.mu.buf.add(r.Span().Key, written[i], since)
		}
	}
	t.mu.buf.nextOrd += len(b.reqs)
	b.Results = b.newResults(len(b.reqs))
	return t.mu.buf.over(), nil
}

// readThroughBuffer runs a read-only batch, laying the buffer over KV's
// answers. handled false: no buffered key is in any span read, so the
// batch goes the usual way untouched.
func (t *Txn) readThroughBuffer(ctx context.Context, b *Batch) (bool, error) {
	t.mu.Lock()
	if t.mu.buf.empty() {
		t.mu.Unlock()
		return false, nil
	}
	if err := t.usableLocked(); err != nil {
		t.mu.Unlock()
		return true, err
	}
	ignored := t.mu.proto.IgnoredSeqNums
	type plan struct {
		local    bool           // answered from the buffer alone
		value    []byte         // its answer
		found    bool           //
		over     []*bufferedKey // a scan's buffered keys
		hasRange bool           // a live range deletion overlaps the scan
		sent     int            // index into the KV batch, or -1
	}
	// A batch of one read (pgbench -N's SELECT in its block) plans on
	// the stack.
	var planBuf [1]plan
	plans := planBuf[:0]
	if len(b.reqs) <= len(planBuf) {
		plans = planBuf[:len(b.reqs)]
	} else {
		plans = make([]plan, len(b.reqs))
	}
	var kvReqs []kvpb.Request
	overlaps := false
	for i, r := range b.reqs {
		p := &plans[i]
		p.sent = -1
		switch req := r.(type) {
		case *kvpb.GetRequest:
			if v, tomb, known := t.mu.buf.resolve(req.Key, ignored); known {
				p.local, p.value, p.found = true, v, !tomb
				overlaps = true
				continue
			}
			p.sent = len(kvReqs)
			kvReqs = append(kvReqs, req)
		case *kvpb.ScanRequest:
			for _, k := range t.mu.buf.inSpan(req.Key, req.EndKey) {
				if _, ok := k.live(ignored); ok {
					p.over = append(p.over, k)
				}
			}
			p.hasRange = t.mu.buf.rangeIn(req.Key, req.EndKey, ignored)
			if len(p.over) == 0 && !p.hasRange {
				p.sent = len(kvReqs)
				kvReqs = append(kvReqs, req)
				continue
			}
			overlaps = true
			if t.mu.buf.covers(req.Key, req.EndKey, ignored) {
				// The buffer decides every key of the span (a row the
				// transaction rewrote whole): KV's rows would all be
				// hidden or overridden.
				p.local = true
				continue
			}
			p.sent = len(kvReqs)
			sr := *req
			// A count at the tablets cannot see the buffered keys: KV
			// returns the span's rows, and the count is taken after
			// merging (below).
			sr.CountTags = nil
			switch {
			case sr.MaxKeys > 0 && p.hasRange:
				// A range deletion can hide any number of the rows KV
				// returns: read the whole span and limit after merging.
				sr.MaxKeys = 0
			case sr.MaxKeys > 0:
				// Each buffered key can hide at most one row KV returns.
				sr.MaxKeys += int64(len(p.over))
			}
			kvReqs = append(kvReqs, &sr)
		}
	}
	t.mu.Unlock()
	if !overlaps {
		return false, nil
	}
	var br *kvpb.BatchResponse
	if len(kvReqs) > 0 {
		var err error
		if br, err = t.send(ctx, kvReqs, sendOpts{wait: b.WaitPolicy}); err != nil {
			return true, err
		}
	}
	t.mu.Lock()
	ignored = t.mu.proto.IgnoredSeqNums
	// Buffered values read as the transaction's own intents do, at its
	// write timestamp: at or above every committed version it can see,
	// so a row's buffered column entries override a stored packed row
	// (sql/rowenc's RowMerger goes by timestamps).
	ownTS := t.mu.proto.WriteTimestamp
	wb := t.mu.buf
	t.mu.Unlock()
	if wb == nil {
		return true, errors.New("kv: write buffer gone while reading through it")
	}
	resolve := func(key []byte) ([]byte, bool, bool) { return wb.resolve(key, ignored) }
	b.Results = make([]Result, len(b.reqs))
	for i, r := range b.reqs {
		p, res := &plans[i], &b.Results[i]
		switch req := r.(type) {
		case *kvpb.GetRequest:
			if p.local {
				if p.found {
					res.Found = true
					res.Rows = []kvpb.KeyValue{{Key: req.Key, Value: p.value, Timestamp: ownTS}}
				}
				continue
			}
			if gr, ok := br.Responses[p.sent].(*kvpb.GetResponse); ok && gr.Value != nil {
				res.Found = true
				res.Rows = []kvpb.KeyValue{{Key: req.Key, Value: gr.Value, Timestamp: gr.Timestamp}}
			}
		case *kvpb.ScanRequest:
			var rows []kvpb.KeyValue
			var resume *kvpb.Span
			var count int64
			if !p.local {
				sr, ok := br.Responses[p.sent].(*kvpb.ScanResponse)
				if !ok {
					return true, fmt.Errorf("kv: unexpected %s response to a scan", br.Responses[p.sent].Method())
				}
				rows, resume, count = sr.Rows, sr.ResumeSpan, sr.Count
			}
			res.Rows, res.ResumeSpan = mergeScan(req, rows, resume, p.over, resolve, ownTS)
			if len(req.CountTags) > 0 {
				res.Count = kvpb.CountOf(&kvpb.ScanResponse{Rows: res.Rows, Count: count}, req.CountTags)
				res.Rows = nil
			}
		}
	}
	return true, nil
}

// mergeScan lays the buffered keys over (both in the span of req, in key
// order) over the rows KV returned for req (in req's order), applying
// req's limit. Buffered rows carry ownTS.
func mergeScan(req *kvpb.ScanRequest, rows []kvpb.KeyValue, resume *kvpb.Span, over []*bufferedKey, resolve func([]byte) ([]byte, bool, bool), ownTS hlc.Timestamp) ([]kvpb.KeyValue, *kvpb.Span) {
	// Buffered keys past where KV stopped are left for the resumed scan.
	if resume != nil {
		over = slices.DeleteFunc(slices.Clone(over), func(k *bufferedKey) bool {
			if req.Reverse {
				return bytes.Compare(k.key, resume.EndKey) < 0
			}
			return bytes.Compare(k.key, resume.Key) >= 0
		})
	}
	if req.Reverse {
		over = slices.Clone(over)
		slices.Reverse(over)
	}
	// before reports whether a comes before b in the scan's order.
	before := func(a, b []byte) bool {
		if req.Reverse {
			return bytes.Compare(a, b) > 0
		}
		return bytes.Compare(a, b) < 0
	}
	out := make([]kvpb.KeyValue, 0, len(rows)+len(over))
	emit := func(key []byte) {
		if v, tomb, known := resolve(key); known && !tomb {
			out = append(out, kvpb.KeyValue{Key: key, Value: v, Timestamp: ownTS})
		}
	}
	i, j := 0, 0
	for i < len(rows) || j < len(over) {
		switch {
		case j == len(over) || (i < len(rows) && before(rows[i].Key, over[j].key)):
			// A stored row the buffer has no write for: a range deletion
			// may still hide it.
			if _, _, known := resolve(rows[i].Key); !known {
				out = append(out, rows[i])
			}
			i++
		case i == len(rows) || before(over[j].key, rows[i].Key):
			emit(over[j].key)
			j++
		default: // the same key: the buffer wins
			emit(over[j].key)
			i++
			j++
		}
	}
	if req.MaxKeys > 0 && int64(len(out)) > req.MaxKeys {
		out = out[:req.MaxKeys]
		last := out[len(out)-1].Key
		if req.Reverse {
			return out, &kvpb.Span{Key: req.Key, EndKey: last}
		}
		return out, &kvpb.Span{Key: keys.Next(last), EndKey: req.EndKey}
	}
	return out, resume
}

// flushBuffer sends the buffered writes as intents, each buffered batch
// at its own sequence number, and turns buffering off.
func (t *Txn) flushBuffer(ctx context.Context) error {
	t.mu.Lock()
	wb := t.mu.buf
	t.mu.buf = nil
	t.mu.Unlock()
	if wb.empty() {
		return nil
	}
	if err := t.checkBuffered(ctx, wb); err != nil {
		return t.loseBuffer(err)
	}
	t.mu.Lock()
	ignored := t.mu.proto.IgnoredSeqNums
	t.mu.Unlock()
	for i := 0; i < len(wb.ops); {
		j := i
		var reqs []kvpb.Request
		for ; j < len(wb.ops) && wb.ops[j].seq == wb.ops[i].seq; j++ {
			reqs = append(reqs, wb.ops[j].req)
		}
		seq := wb.ops[i].seq
		i = j
		if kvpb.SeqIgnored(ignored, seq) {
			continue
		}
		if _, err := t.send(ctx, reqs, sendOpts{seq: seq}); err != nil {
			// The rest of the buffer is gone: whatever the error, the
			// transaction must not go on (and commit without it).
			return t.loseBuffer(t.bufferedSendErr(err))
		}
	}
	return nil
}

// loseBuffer fails the transaction after a flush that could not send
// the buffer: its writes are gone, so neither it nor a statement retry
// (RetryStatement refuses) may go on; only a restart, which discards
// every write anyway, does.
func (t *Txn) loseBuffer(err error) error {
	t.mu.Lock()
	t.mu.bufLost = true
	t.mu.Unlock()
	return t.setRetryable(err)
}

// bufferedSendErr turns a failed condition met while sending buffered
// writes into a retryable error: the condition held when the CPut was
// buffered, so another transaction changed the key since (checkBuffered
// should have seen it; this is the tablet's own word for the same).
func (t *Txn) bufferedSendErr(err error) error {
	var cf *kvpb.ConditionFailedError
	if errors.As(err, &cf) {
		return t.setRetryable(&kvpb.TransactionRetryError{Reason: kvpb.RetryWriteTooOld, Detail: "a buffered write's condition no longer holds: " + cf.Error()})
	}
	return err
}

// checkBuffered proves, before wb's writes are sent, that no other
// transaction committed a version of a buffered key after the statement
// that buffered it read (see above), and adds the keys to the read spans
// so that every later move of the transaction's timestamps checks them
// too.
func (t *Txn) checkBuffered(ctx context.Context, wb *writeBuffer) error {
	txn, reqs := t.bufferChecks(wb, true, nil)
	if len(reqs) == 0 {
		return nil
	}
	ba := &kvpb.BatchRequest{Requests: reqs}
	ba.Txn = txn
	if _, err := t.db.ds.Send(ctx, ba); err != nil {
		return t.bufferCheckErr(err, len(reqs), txn.ReadTimestamp)
	}
	return nil
}

// bufferChecks adds wb's keys to the read spans, appends to reqs the
// RefreshRequests checkBuffered sends (one per key, range deletion or
// lock buffered at a snapshot older than the current one) and returns
// them with the
// transaction as they were built for (nil unless withTxn: a one-phase
// commit sends them with its own, and the copy was two objects).
func (t *Txn) bufferChecks(wb *writeBuffer, withTxn bool, reqs []kvpb.Request) (*kvpb.Transaction, []kvpb.Request) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var txn *kvpb.Transaction
	if withTxn {
		txn = t.mu.proto.Clone()
	}
	readTS := t.mu.proto.ReadTimestamp
	for _, k := range wb.keys {
		t.mu.readSpans.add(kvpb.Span{Key: k.key})
		if k.since.Less(readTS) && !wb.lockChecks(k) {
			reqs = append(reqs, &kvpb.RefreshRequest{Key: k.key, From: k.since})
		}
	}
	for _, r := range wb.ranges {
		t.mu.readSpans.add(r.span)
		if r.since.Less(readTS) && !wb.lockChecksSpan(r.span, r.since) {
			reqs = append(reqs, &kvpb.RefreshRequest{Key: r.span.Key, EndKey: r.span.EndKey, From: r.since})
		}
	}
	for _, l := range wb.locks {
		t.mu.readSpans.add(l.span)
		if l.since.Less(readTS) {
			reqs = append(reqs, &kvpb.RefreshRequest{Key: l.span.Key, EndKey: l.span.EndKey, From: l.since})
		}
	}
	return txn, reqs
}

// maxLocksCovering bounds the buffered locks lockChecks looks through per
// key: an UPDATE of a few rows in a block has a lock per row; a larger
// statement keeps its keys' own checks rather than a walk per key.
const maxLocksCovering = 32

// lockChecks reports whether the check of one of wb's buffered locks
// covers k's own: a lock whose span holds k, checked from at or before
// k's since. That check (a refresh of the span, from its since to the
// read timestamp) fails on any version of k that k's own (a refresh of k
// from a later or equal since) would fail on, so an UPDATE's row is
// checked once at commit, not twice (its lock's span and its key).
func (wb *writeBuffer) lockChecks(k *bufferedKey) bool {
	if len(wb.locks) > maxLocksCovering {
		return false
	}
	for _, l := range wb.locks {
		if l.since.LessEq(k.since) && spanHolds(l.span, k.key) {
			return true
		}
	}
	return false
}

// lockChecksSpan is lockChecks for a buffered range deletion of sp
// buffered at since: a lock whose span holds all of sp, checked from at
// or before since (an UPDATE's row lock and the range deletion of the
// row's column entries its whole-row rewrite buffers: one check of the
// row's span at commit, not two).
func (wb *writeBuffer) lockChecksSpan(sp kvpb.Span, since hlc.Timestamp) bool {
	if len(wb.locks) > maxLocksCovering {
		return false
	}
	for _, l := range wb.locks {
		if l.since.LessEq(since) && len(l.span.EndKey) > 0 &&
			bytes.Compare(l.span.Key, sp.Key) <= 0 && bytes.Compare(sp.EndKey, l.span.EndKey) <= 0 {
			return true
		}
	}
	return false
}

// spanHolds reports whether s holds key (an EndKey empty: s is its Key).
func spanHolds(s kvpb.Span, key []byte) bool {
	if len(s.EndKey) == 0 {
		return bytes.Equal(s.Key, key)
	}
	return bytes.Compare(s.Key, key) <= 0 && bytes.Compare(key, s.EndKey) < 0
}

// bufferCheckErr is checkBuffered's error for a failed batch of n checks
// up to readTS: retryable, and recorded as the transaction's, when the
// tablets' error is.
func (t *Txn) bufferCheckErr(err error, n int, readTS hlc.Timestamp) error {
	err = fmt.Errorf("kv: checking %d buffered writes from their statements' snapshots to %s: %w", n, readTS, err)
	if !kvpb.IsRetryable(err) {
		return err
	}
	return t.setRetryable(err)
}

// takeBufferForCommit empties the buffer into the writes a commit sends:
// the row locks, then the live range deletions, then per key the state
// the buffer resolves it to (a CPut keeps the condition of the key's
// oldest live write if that one was evaluated against the stored value;
// see bufferedWrite.cond). It returns the buffer too: the writes must not
// be sent before checkBuffered, or the checks the one-phase batch carries
// (tryOnePhase), proved their keys unchanged.
func (t *Txn) takeBufferForCommit() ([]kvpb.Request, *writeBuffer) {
	t.mu.Lock()
	wb := t.mu.buf
	t.mu.buf = nil
	ignored := t.mu.proto.IgnoredSeqNums
	t.mu.Unlock()
	if wb.empty() {
		return nil, nil
	}
	writes := wb.commitWrites(ignored)
	if len(writes) == 0 {
		return nil, nil
	}
	return writes, wb
}

// checkBufferedAndValidate runs checkBuffered and the commit's validation
// of the keys its writes depend on (validateAtCommit, txn_validate.go) at
// the same time: two round trips the commit made one after the other
// while holding its locks, which a contended row pays for in throughput.
// Neither writes, so neither can see the other. The validation is at the
// current write timestamp; if the commit goes out at another one, it
// validates again. A one-phase commit whose checks lie on its tablet
// sends them in its own batch instead (tryOnePhase).
func (t *Txn) checkBufferedAndValidate(ctx context.Context, wb *writeBuffer) error {
	t.mu.Lock()
	validate := len(t.mu.validate) > 0
	t.mu.Unlock()
	if !validate {
		return t.checkBuffered(ctx, wb)
	}
	done := make(chan error, 1)
	go func() { done <- t.validateAtCommit(ctx) }()
	err := t.checkBuffered(ctx, wb)
	if verr := <-done; err == nil {
		err = verr
	}
	return err
}

// mergeSpans returns the union of spans, sorted and disjoint.
func mergeSpans(spans []kvpb.Span) []kvpb.Span {
	slices.SortFunc(spans, func(a, b kvpb.Span) int { return bytes.Compare(a.Key, b.Key) })
	var out []kvpb.Span
	for _, s := range spans {
		if n := len(out); n > 0 && bytes.Compare(s.Key, out[n-1].EndKey) <= 0 {
			if bytes.Compare(s.EndKey, out[n-1].EndKey) > 0 {
				out[n-1].EndKey = s.EndKey
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// subtractKeys returns spans (sorted, disjoint) without the single keys
// (sorted).
func subtractKeys(spans []kvpb.Span, ks [][]byte) []kvpb.Span {
	var out []kvpb.Span
	for _, s := range spans {
		start := s.Key
		lo, _ := slices.BinarySearchFunc(ks, s.Key, bytes.Compare)
		for _, k := range ks[lo:] {
			if bytes.Compare(k, s.EndKey) >= 0 {
				break
			}
			if bytes.Compare(start, k) < 0 {
				out = append(out, kvpb.Span{Key: start, EndKey: k})
			}
			start = keys.Next(k)
		}
		if bytes.Compare(start, s.EndKey) < 0 {
			out = append(out, kvpb.Span{Key: start, EndKey: s.EndKey})
		}
	}
	return out
}

// commitWrites collapses the buffer into the writes a commit sends: the
// row locks, then the live range deletions, then per key the state the
// buffer resolves it to.
func (wb *writeBuffer) commitWrites(ignored []kvpb.SeqRange) []kvpb.Request {
	// Locks first: evaluated outside the transaction, a lock after a write
	// of its span in the same batch would meet that write's version.
	// Like sent locks, they outlive a rollback to a savepoint.
	// A few locks are told apart by comparing them (a map and a key per
	// lock were two objects per commit), many by a map.
	writes := make([]kvpb.Request, 0, len(wb.locks)+len(wb.ranges)+len(wb.keys))
	var seen map[string]bool
	if len(wb.locks) > 8 {
		seen = make(map[string]bool, len(wb.locks))
	}
	for i, l := range wb.locks {
		if seen != nil {
			id := string(l.span.Key) + "\x00" + string(l.span.EndKey)
			if seen[id] {
				continue
			}
			seen[id] = true
		} else if slices.ContainsFunc(wb.locks[:i], func(o bufferedLock) bool {
			return bytes.Equal(o.span.Key, l.span.Key) && bytes.Equal(o.span.EndKey, l.span.EndKey)
		}) {
			continue
		}
		writes = append(writes, &kvpb.LockRequest{Key: l.span.Key, EndKey: l.span.EndKey})
	}
	// Range deletions: the union of the live ones, around the keys written
	// below (a DeleteRange and a write of one key at one timestamp in one
	// batch would conflict). One of a span read empty
	// (Batch.DelRangeSeenEmpty) would delete nothing: not sent.
	var spans []kvpb.Span
	for _, r := range wb.ranges {
		if !r.seenEmpty && !kvpb.SeqIgnored(ignored, r.seq) {
			spans = append(spans, r.span)
		}
	}
	if len(spans) == 0 {
		// No range to cut around the keys (pgbench's blocks: a
		// whole-row rewrite's deletion was seen empty): the point
		// writes go straight into writes, without a slice of their own
		// and one of their keys (two objects per commit).
		return wb.appendPointWrites(writes, ignored, nil)
	}
	pointKeys := make([][]byte, 0, len(wb.keys))
	points := wb.appendPointWrites(make([]kvpb.Request, 0, len(wb.keys)), ignored, &pointKeys)
	for _, sp := range subtractKeys(mergeSpans(spans), pointKeys) {
		writes = append(writes, &kvpb.DeleteRangeRequest{Key: sp.Key, EndKey: sp.EndKey})
	}
	return append(writes, points...)
}

// appendPointWrites appends to writes, per buffered key, the write of the
// state the buffer resolves it to, and adds each such key to *keys when
// keys is not nil.
func (wb *writeBuffer) appendPointWrites(writes []kvpb.Request, ignored []kvpb.SeqRange, keys *[][]byte) []kvpb.Request {
	for _, k := range wb.keys {
		v, tomb, known := wb.resolve(k.key, ignored)
		if !known {
			continue
		}
		if keys != nil {
			*keys = append(*keys, k.key)
		}
		var first *bufferedWrite
		for i := range k.hist {
			if !kvpb.SeqIgnored(ignored, k.hist[i].seq) {
				first = &k.hist[i]
				break
			}
		}
		switch {
		case tomb:
			writes = append(writes, &kvpb.DeleteRequest{Key: k.key})
		case first != nil && first.cond != nil:
			writes = append(writes, &kvpb.ConditionalPutRequest{Key: k.key, Value: v, Expected: first.cond.expected, ExpectExists: first.cond.expectExists})
		default:
			writes = append(writes, &kvpb.PutRequest{Key: k.key, Value: v})
		}
	}
	return writes
}

// CommitPlan says how the transaction's commit would go if it committed
// now: buffered is how many writes (locks, range deletions and keys) the
// commit would send from the buffer, sent whether writes went out as
// intents already, onePhase that the buffered writes are all of them and
// lie on one tablet. The tablet can still refuse a one-phase commit (a
// timestamp push), and then the commit takes two phases. For EXPLAIN
// ANALYZE.
func (t *Txn) CommitPlan(ctx context.Context) (buffered int, sent, onePhase bool, err error) {
	t.mu.Lock()
	wrote := t.mu.wrote
	var writes []kvpb.Request
	if t.mu.buf != nil {
		writes = t.mu.buf.commitWrites(t.mu.proto.IgnoredSeqNums)
	}
	anchor := t.mu.proto.Key // the first unreplicated lock's, as tryOnePhase
	t.mu.Unlock()
	if len(writes) == 0 || wrote {
		return len(writes), wrote, false, nil
	}
	if anchor == nil {
		anchor = writes[0].Span().Key
	}
	reqs := append(writes, &kvpb.EndTxnRequest{Key: anchor, Commit: true})
	single, err := t.db.ds.SingleTablet(ctx, reqs)
	return len(writes), false, single, err
}
