package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

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
//     most one), so the limit and the resume span stay exact.
//   - A CPut is evaluated when it is buffered: against the buffer if the
//     key has a live buffered write, else against a transactional read of
//     the key. A failed condition is the *kvpb.ConditionFailedError the
//     tablet would have returned, at the same statement.
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
//   - Anything else flushes the buffer and turns buffering off for the
//     rest of the transaction: DeleteRange, Lock (SELECT FOR UPDATE: its
//     lock must be in the tablet), a batch that mixes reads and writes,
//     a buffer over maxBufferBytes or maxBufferKeys, a schema change
//     (ReadAtWriteTimestamp, DisableWriteBuffering). A flush replays the
//     buffered batches in order at their own sequence numbers, so intent
//     histories, and savepoints taken before the flush, stay right; the
//     transaction then goes on the usual two-phase way.
//
// What buffering changes for other transactions: a buffered write holds no
// intent, so a concurrent writer of the same row does not block on it;
// whichever commits second fails its check and restarts (docs/
// architecture.md, "Transactions", says why that is the trade taken).

// Buffer limits: past either, the buffer is flushed as intents.
const (
	maxBufferBytes = 4 << 20
	maxBufferKeys  = 8192
)

// bufferedWrite is one buffered write of a key.
type bufferedWrite struct {
	seq       int32
	value     []byte
	tombstone bool
	// cond is set for a CPut: its expectation, re-sent with the commit.
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
}

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

// writeBuffer holds a transaction's buffered writes.
type writeBuffer struct {
	keys  []*bufferedKey // sorted by key
	locks []bufferedLock
	ops   []bufferedOp
	bytes int
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
		k := &bufferedKey{key: append([]byte(nil), key...), since: since}
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

func (wb *writeBuffer) empty() bool { return wb == nil || (len(wb.keys) == 0 && len(wb.locks) == 0) }

// over reports whether the buffer is past its limits.
func (wb *writeBuffer) over() bool {
	return wb.bytes > maxBufferBytes || len(wb.keys)+len(wb.locks) > maxBufferKeys
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
		t.mu.buf = &writeBuffer{}
	}
}

// DisableWriteBuffering sends what the buffer holds as intents and turns
// buffering off for the rest of the transaction: for statements (schema
// changes) whose writes other transactions must meet as locks.
func (t *Txn) DisableWriteBuffering(ctx context.Context) error {
	return t.flushBuffer(ctx)
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
		case *kvpb.PutRequest, *kvpb.DeleteRequest:
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
			// DeleteRange, Lock, ...: their effect must be in the tablets.
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
		if cp, ok := r.(*kvpb.ConditionalPutRequest); ok {
			if k := t.mu.buf.get(cp.Key); k == nil {
				need = append(need, cp.Key)
			} else if _, live := k.live(t.mu.proto.IgnoredSeqNums); !live {
				need = append(need, cp.Key)
			}
		}
	}
	t.mu.Unlock()
	stored := map[string][]byte{}
	if len(need) > 0 {
		reqs := make([]kvpb.Request, len(need))
		for i, k := range need {
			reqs[i] = &kvpb.GetRequest{Key: k}
		}
		br, err := t.send(ctx, reqs, sendOpts{wait: b.WaitPolicy})
		if err != nil {
			return err
		}
		for i, k := range need {
			if gr, ok := br.Responses[i].(*kvpb.GetResponse); ok && gr.Value != nil {
				stored[string(k)] = gr.Value
			}
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
	// current is the key's value as this batch's earlier writes left it.
	pending := map[string]*bufferedWrite{}
	current := func(key []byte) ([]byte, bool) {
		if w, ok := pending[string(key)]; ok {
			return w.value, !w.tombstone
		}
		if k := t.mu.buf.get(key); k != nil {
			if w, ok := k.live(ignored); ok {
				return w.value, !w.tombstone
			}
		}
		v, ok := stored[string(key)]
		return v, ok
	}
	seq := t.mu.proto.Sequence + 1
	ws := make([]bufferedWrite, len(b.reqs))
	for i, r := range b.reqs {
		switch req := r.(type) {
		case *kvpb.LockRequest:
			continue
		case *kvpb.PutRequest:
			ws[i] = bufferedWrite{seq: seq, value: req.Value}
		case *kvpb.DeleteRequest:
			ws[i] = bufferedWrite{seq: seq, tombstone: true}
		case *kvpb.ConditionalPutRequest:
			actual, exists := current(req.Key)
			if exists != req.ExpectExists || (exists && !bytes.Equal(actual, req.Expected)) {
				// Nothing of the batch is buffered: as a failed batch
				// whose writes a savepoint rollback undoes.
				return false, &kvpb.ConditionFailedError{Key: append([]byte(nil), req.Key...), ActualValue: actual}
			}
			ws[i] = bufferedWrite{seq: seq, value: req.Value, cond: &bufferedCond{expected: req.Expected, expectExists: req.ExpectExists}}
		}
		pending[string(r.Span().Key)] = &ws[i]
	}
	t.mu.proto.Sequence = seq
	since := t.mu.proto.ReadTimestamp
	for i, r := range b.reqs {
		if lk, ok := r.(*kvpb.LockRequest); ok {
			t.mu.buf.locks = append(t.mu.buf.locks, bufferedLock{span: kvpb.Span{Key: lk.Key, EndKey: lk.EndKey}, since: since})
			t.mu.buf.ops = append(t.mu.buf.ops, bufferedOp{seq: seq, req: r})
			continue
		}
		t.mu.buf.add(r.Span().Key, ws[i], since)
		t.mu.buf.ops = append(t.mu.buf.ops, bufferedOp{seq: seq, req: r})
	}
	b.Results = make([]Result, len(b.reqs))
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
	ignored := t.mu.proto.IgnoredSeqNums
	type plan struct {
		local *bufferedWrite // Get answered from the buffer
		over  []*bufferedKey // a scan's buffered keys
		sent  int            // index into the KV batch, or -1
	}
	plans := make([]plan, len(b.reqs))
	var kvReqs []kvpb.Request
	overlaps := false
	for i, r := range b.reqs {
		p := &plans[i]
		p.sent = -1
		switch req := r.(type) {
		case *kvpb.GetRequest:
			if k := t.mu.buf.get(req.Key); k != nil {
				if w, ok := k.live(ignored); ok {
					p.local = w
					overlaps = true
					continue
				}
			}
			p.sent = len(kvReqs)
			kvReqs = append(kvReqs, req)
		case *kvpb.ScanRequest:
			for _, k := range t.mu.buf.inSpan(req.Key, req.EndKey) {
				if _, ok := k.live(ignored); ok {
					p.over = append(p.over, k)
				}
			}
			p.sent = len(kvReqs)
			if len(p.over) == 0 {
				kvReqs = append(kvReqs, req)
				continue
			}
			overlaps = true
			sr := *req
			if sr.MaxKeys > 0 {
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
	t.mu.Unlock()
	b.Results = make([]Result, len(b.reqs))
	for i, r := range b.reqs {
		p, res := &plans[i], &b.Results[i]
		switch req := r.(type) {
		case *kvpb.GetRequest:
			if p.local != nil {
				if !p.local.tombstone {
					res.Found = true
					res.Rows = []kvpb.KeyValue{{Key: req.Key, Value: p.local.value, Timestamp: ownTS}}
				}
				continue
			}
			if gr, ok := br.Responses[p.sent].(*kvpb.GetResponse); ok && gr.Value != nil {
				res.Found = true
				res.Rows = []kvpb.KeyValue{{Key: req.Key, Value: gr.Value, Timestamp: gr.Timestamp}}
			}
		case *kvpb.ScanRequest:
			sr, ok := br.Responses[p.sent].(*kvpb.ScanResponse)
			if !ok {
				return true, fmt.Errorf("kv: unexpected %s response to a scan", br.Responses[p.sent].Method())
			}
			res.Rows, res.ResumeSpan = mergeScan(req, sr.Rows, sr.ResumeSpan, p.over, ignored, ownTS)
		}
	}
	return true, nil
}

// mergeScan lays the buffered keys over (both in the span of req, in key
// order) over the rows KV returned for req (in req's order), applying
// req's limit. Buffered rows carry ownTS.
func mergeScan(req *kvpb.ScanRequest, rows []kvpb.KeyValue, resume *kvpb.Span, over []*bufferedKey, ignored []kvpb.SeqRange, ownTS hlc.Timestamp) ([]kvpb.KeyValue, *kvpb.Span) {
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
	emit := func(k *bufferedKey) {
		if w, ok := k.live(ignored); ok && !w.tombstone {
			out = append(out, kvpb.KeyValue{Key: k.key, Value: w.value, Timestamp: ownTS})
		}
	}
	i, j := 0, 0
	for i < len(rows) || j < len(over) {
		switch {
		case j == len(over) || (i < len(rows) && before(rows[i].Key, over[j].key)):
			out = append(out, rows[i])
			i++
		case i == len(rows) || before(over[j].key, rows[i].Key):
			emit(over[j])
			j++
		default: // the same key: the buffer wins
			emit(over[j])
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
	t.mu.Lock()
	txn := t.mu.proto.Clone()
	var reqs []kvpb.Request
	for _, k := range wb.keys {
		t.mu.readSpans.add(kvpb.Span{Key: k.key})
		if k.since.Less(txn.ReadTimestamp) {
			reqs = append(reqs, &kvpb.RefreshRequest{Key: k.key, From: k.since})
		}
	}
	for _, l := range wb.locks {
		t.mu.readSpans.add(l.span)
		if l.since.Less(txn.ReadTimestamp) {
			reqs = append(reqs, &kvpb.RefreshRequest{Key: l.span.Key, EndKey: l.span.EndKey, From: l.since})
		}
	}
	t.mu.Unlock()
	if len(reqs) == 0 {
		return nil
	}
	ba := &kvpb.BatchRequest{Requests: reqs}
	ba.Txn = txn
	if _, err := t.db.ds.Send(ctx, ba); err != nil {
		err = fmt.Errorf("kv: checking %d buffered writes from their statements' snapshots to %s: %w", len(reqs), txn.ReadTimestamp, err)
		if !kvpb.IsRetryable(err) {
			return err
		}
		return t.setRetryable(err)
	}
	return nil
}

// takeBufferForCommit empties the buffer into the writes a commit sends:
// per key its newest write not rolled back (a CPut keeps the condition of
// the key's oldest live write if that was one, which was evaluated
// against the stored value), in key order, after checking them.
func (t *Txn) takeBufferForCommit(ctx context.Context) ([]kvpb.Request, error) {
	t.mu.Lock()
	wb := t.mu.buf
	t.mu.buf = nil
	ignored := t.mu.proto.IgnoredSeqNums
	t.mu.Unlock()
	if wb.empty() {
		return nil, nil
	}
	// Locks first: evaluated outside the transaction, a lock after a write
	// of its span in the same batch would meet that write's version.
	// Like sent locks, they outlive a rollback to a savepoint.
	var writes []kvpb.Request
	seen := map[string]bool{}
	for _, l := range wb.locks {
		if id := string(l.span.Key) + "\x00" + string(l.span.EndKey); !seen[id] {
			seen[id] = true
			writes = append(writes, &kvpb.LockRequest{Key: l.span.Key, EndKey: l.span.EndKey})
		}
	}
	for _, k := range wb.keys {
		var first, last *bufferedWrite
		for i := range k.hist {
			if kvpb.SeqIgnored(ignored, k.hist[i].seq) {
				continue
			}
			if first == nil {
				first = &k.hist[i]
			}
			last = &k.hist[i]
		}
		switch {
		case last == nil:
		case last.tombstone:
			writes = append(writes, &kvpb.DeleteRequest{Key: k.key})
		case first.cond != nil:
			writes = append(writes, &kvpb.ConditionalPutRequest{Key: k.key, Value: last.value, Expected: first.cond.expected, ExpectExists: first.cond.expectExists})
		default:
			writes = append(writes, &kvpb.PutRequest{Key: k.key, Value: last.value})
		}
	}
	if len(writes) == 0 {
		return nil, nil
	}
	if err := t.checkBuffered(ctx, wb); err != nil {
		return nil, err
	}
	return writes, nil
}
