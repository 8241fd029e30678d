package kv

import (
	"fmt"

	"github.com/cairn-db/cairn/kvpb"
)

// Batch collects operations to send in one round: every tablet involved
// gets its part in parallel. Add operations, pass it to Txn.Run or DB.Run,
// then read Results (one per operation, in the order added). A Batch is not
// safe for concurrent use and must not be reused after Run.
type Batch struct {
	reqs    []kvpb.Request
	Results []Result
	// WaitPolicy is what the batch does on meeting another transaction's
	// lock: wait for it (the default) or fail at once with a
	// *kvpb.WriteIntentError (kvpb.WaitError: SELECT ... NOWAIT). Only
	// Txn.Run honours it.
	WaitPolicy kvpb.WaitPolicy
	// lockOnRead are the spans LockOnRead asked for.
	lockOnRead []kvpb.Span
	// generated are the CPuts CPutGenerated added.
	generated map[*kvpb.ConditionalPutRequest]struct{}
	// seenEmpty are the DeleteRanges DelRangeSeenEmpty added (the first
	// in seenEmptySlot: an UPDATE adds one).
	seenEmpty     []*kvpb.DeleteRangeRequest
	seenEmptySlot [1]*kvpb.DeleteRangeRequest
	// bulkPuts is where BulkPut takes its requests from, a chunk at a
	// time (bulk.go).
	bulkPuts []kvpb.BulkPutRequest
	// A batch of one operation (a point read) keeps its request and its
	// result here instead of allocating a slice for each (add, fill),
	// and RunImplicitRead sends implicit, not a BatchRequest of its own.
	reqSlot    [1]kvpb.Request
	resultSlot [1]Result
	implicit   kvpb.BatchRequest
	// scanSlot is the request of a batch whose first operation is a
	// Scan (a point read's): Scan fills it instead of allocating one.
	scanSlot kvpb.ScanRequest
}

// add appends req to the batch's operations.
func (b *Batch) add(req kvpb.Request) {
	if b.reqs == nil {
		b.reqs = b.reqSlot[:0]
	}
	b.reqs = append(b.reqs, req)
}

// newResults returns n zero Results for b.Results.
func (b *Batch) newResults(n int) []Result {
	if n == 1 {
		b.resultSlot[0] = Result{}
		return b.resultSlot[:]
	}
	return make([]Result, n)
}

// Result is the answer to one operation of a Batch.
type Result struct {
	// Rows holds the row read by Get (when Found) or the rows of a scan.
	Rows []kvpb.KeyValue
	// Found: Get found a value; Del deleted one.
	Found bool
	// Keys lists the keys DelRange deleted; nil for a DelRange the write
	// buffer holds (txn_buffer.go), whose keys are known only at commit
	// (Txn.DelRange, which returns them, flushes the buffer first).
	Keys [][]byte
	// ResumeSpan is what a limited scan left unread, or nil.
	ResumeSpan *kvpb.Span
	// Skipped: a Lock with skipLocked found the row locked by another
	// transaction and took no lock.
	Skipped bool
	// Count is what a Count counted (Rows is then empty), and DiskBytes
	// what it read from outside the tablets' block caches
	// (kvpb.ScanResponse.DiskBytes).
	Count, DiskBytes int64
}

// Get reads key.
func (b *Batch) Get(key []byte) { b.add(&kvpb.GetRequest{Key: key}) }

// Inc adds by to the int64 counter at key (missing: 0) outside any
// transaction (kvpb.IncrementRequest); Results[i].Rows[0].Value holds the
// new value (kvpb.DecodeIncrementValue). Only DB.Run accepts it.
func (b *Batch) Inc(key []byte, by int64) {
	b.add(&kvpb.IncrementRequest{Key: key, Increment: by})
}

// Put writes value at key.
func (b *Batch) Put(key, value []byte) {
	b.add(&kvpb.PutRequest{Key: key, Value: value})
}

// CPut writes value at key if its current value equals expected
// (expectExists) or it has none (!expectExists).
func (b *Batch) CPut(key, value, expected []byte, expectExists bool) {
	b.add(&kvpb.ConditionalPutRequest{Key: key, Value: value, Expected: expected, ExpectExists: expectExists})
}

// CPutGenerated writes value at key, which must have no value: a CPut
// expecting none, for a key the caller generated to be new (the
// unique_rowid() key of a table without a primary key). Sent as it is
// (an unbuffered transaction, DB.Run) it is that CPut. A buffering
// transaction (txn_buffer.go) neither reads nor locks the key at the
// statement: the condition travels with the write and the tablet checks
// it when the write is sent (the commit, or a flush), where a failure is
// the retryable error of any buffered condition that no longer holds.
// Exact either way; what it saves is the statement's round trip for a
// check that only a clash with a key the user chose could fail.
func (b *Batch) CPutGenerated(key, value []byte) {
	req := &kvpb.ConditionalPutRequest{Key: key, Value: value}
	b.add(req)
	if b.generated == nil {
		b.generated = map[*kvpb.ConditionalPutRequest]struct{}{}
	}
	b.generated[req] = struct{}{}
}

// isGenerated reports whether r was added by CPutGenerated.
func (b *Batch) isGenerated(r kvpb.Request) bool {
	cp, ok := r.(*kvpb.ConditionalPutRequest)
	if !ok || b.generated == nil {
		return false
	}
	_, ok = b.generated[cp]
	return ok
}

// Del deletes key.
func (b *Batch) Del(key []byte) { b.add(&kvpb.DeleteRequest{Key: key}) }

// DelRange deletes every key in [start, end).
func (b *Batch) DelRange(start, end []byte) {
	b.add(&kvpb.DeleteRangeRequest{Key: start, EndKey: end})
}

// DelRangeSeenEmpty deletes every key in [start, end), a span the
// caller read in this transaction, at this statement, under a lock that
// keeps every other writer out of it (Batch.LockOnRead's), and found
// holding no key: a SQL row's column entries when its read found the row
// key alone (sql/rowenc's RowWriter.WholeRow). Sent as it is (an
// unbuffered transaction) it is that DeleteRange. A buffering
// transaction buffers it as a range deletion that decides reads of the
// span and is checked before the commit like any other (no version of
// the span committed since the statement read), but the commit sends no
// DeleteRange for it: the span held nothing when read, the lock and the
// check keep another transaction's key out of it until the commit, and
// the transaction's own later writes in it are point writes the commit
// sends anyway, so the deletion would delete nothing. What it saves is
// the tablet's DeleteRange (an iterator and a scan of the span) in the
// commit's batch.
func (b *Batch) DelRangeSeenEmpty(start, end []byte) {
	req := &kvpb.DeleteRangeRequest{Key: start, EndKey: end}
	b.add(req)
	if b.seenEmpty == nil {
		b.seenEmpty = b.seenEmptySlot[:0]
	}
	b.seenEmpty = append(b.seenEmpty, req)
}

// isSeenEmpty reports whether r was added by DelRangeSeenEmpty.
func (b *Batch) isSeenEmpty(r *kvpb.DeleteRangeRequest) bool {
	for _, q := range b.seenEmpty {
		if q == r {
			return true
		}
	}
	return false
}

// Scan reads up to maxRows (0: all) rows of [start, end) in key order.
func (b *Batch) Scan(start, end []byte, maxRows int64) {
	if len(b.reqs) == 0 {
		b.scanSlot = kvpb.ScanRequest{Key: start, EndKey: end, MaxKeys: maxRows}
		b.add(&b.scanSlot)
		return
	}
	b.add(&kvpb.ScanRequest{Key: start, EndKey: end, MaxKeys: maxRows})
}

// Count counts the visible values of [start, end) whose first byte is
// one of tags, at the tablets, without returning them (kvpb.ScanRequest's
// CountTags); maxKeys (0: all) bounds the visible values examined, and
// ResumeSpan says what is left. Results[i].Count holds the count, the
// transaction's buffered writes included.
func (b *Batch) Count(start, end, tags []byte, maxKeys int64) {
	b.add(&kvpb.ScanRequest{Key: start, EndKey: end, MaxKeys: maxKeys, CountTags: tags})
}

// ReverseScan reads up to maxRows (0: all) rows of [start, end) in reverse
// key order.
func (b *Batch) ReverseScan(start, end []byte, maxRows int64) {
	b.add(&kvpb.ScanRequest{Key: start, EndKey: end, MaxKeys: maxRows, Reverse: true})
}

// Lock takes the transaction's exclusive row lock on key, standing for
// the span [key, end) (kvpb.LockRequest): it waits for (or, under
// WaitError, fails on) other transactions' locks and intents in the span,
// and fails with a retryable *kvpb.WriteTooOldError when the span changed
// after the transaction's snapshot. With skipLocked a conflict sets
// Results[i].Skipped instead. The lock is held until the transaction ends,
// savepoint rollbacks notwithstanding. Only Txn.Run accepts it.
func (b *Batch) Lock(key, end []byte, skipLocked bool) {
	b.add(&kvpb.LockRequest{Key: key, EndKey: end, SkipLocked: skipLocked})
}

// LockOnRead asks, for a batch of reads run by a transaction that
// buffers its writes with locks, that the transaction's unreplicated lock
// on the span [key, end) be taken in the same round trip as the reads,
// ahead of them (Txn.runLockingRead). The lock then stands for every
// later buffered write of the transaction inside the span, which takes no
// lock of its own and so needs no round trip. That is right when every
// writer of a key in the span also writes or locks key, where this lock
// sits in the tablet's lock table: a SQL row's span and row key (every
// INSERT, UPDATE and DELETE of a row writes or locks its row key). Without
// such a transaction the reads run as they are and nothing is locked.
func (b *Batch) LockOnRead(key, end []byte) {
	b.lockOnRead = append(b.lockOnRead, kvpb.Span{Key: key, EndKey: end})
}

// Len returns the number of operations added.
func (b *Batch) Len() int { return len(b.reqs) }

// fill sets Results from the batch's response.
func (b *Batch) fill(br *kvpb.BatchResponse) error {
	if len(br.Responses) < len(b.reqs) {
		return fmt.Errorf("kv: %d responses for %d operations", len(br.Responses), len(b.reqs))
	}
	b.Results = b.newResults(len(b.reqs))
	for i, req := range b.reqs {
		r := &b.Results[i]
		switch resp := br.Responses[i].(type) {
		case *kvpb.GetResponse:
			if resp.Value != nil {
				r.Found = true
				r.Rows = []kvpb.KeyValue{{Key: req.(*kvpb.GetRequest).Key, Value: resp.Value, Timestamp: resp.Timestamp}}
			}
		case *kvpb.ScanResponse:
			r.Rows, r.ResumeSpan = resp.Rows, resp.ResumeSpan
			if tags := req.(*kvpb.ScanRequest).CountTags; len(tags) > 0 {
				r.Count, r.Rows, r.DiskBytes = kvpb.CountOf(resp, tags), nil, resp.DiskBytes
			}
		case *kvpb.DeleteResponse:
			r.Found = resp.Found
		case *kvpb.DeleteRangeResponse:
			r.Keys = resp.Keys
		case *kvpb.IncrementResponse:
			r.Found = true
			r.Rows = []kvpb.KeyValue{{Key: req.(*kvpb.IncrementRequest).Key, Value: kvpb.EncodeIncrementValue(resp.NewValue)}}
		case *kvpb.LockResponse:
			r.Skipped = resp.Skipped
		case *kvpb.PutResponse, *kvpb.ConditionalPutResponse, *kvpb.BulkPutResponse, *kvpb.ClearRangeResponse:
		default:
			return fmt.Errorf("kv: unexpected %s response to %s", br.Responses[i].Method(), req.Method())
		}
	}
	return nil
}
