package kv

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// Commit-time validation of the keys a transaction's writes depend on,
// at every isolation level (docs/architecture.md, "Bulk loads").
//
// READ COMMITTED and REPEATABLE READ commit a pushed write timestamp
// without refreshing their reads (txn_refresh.go). For most reads that is
// what the level allows, but not for the schema a write was shaped by: a
// row written through a table descriptor that a schema change replaced
// before the row committed can miss an index the change built, or land
// in storage it abandoned. So the SQL layer names, for every table a
// statement writes, the descriptor's stamp key and the timestamp it
// resolved the descriptor at (ValidateAtCommit), and Commit checks, just
// before it sends the committing request and again whenever it retries
// that at a higher timestamp, that the key has no version above that
// timestamp and no other transaction's intent at all (a strict
// kvpb.RefreshRequest). The check leaves the key in the tablet's
// timestamp cache at the commit timestamp, so a schema change that writes
// the key later writes, and commits, above every row validated this way;
// a schema change that reads the table at or above its own descriptor
// write (ReadAtWriteTimestamp) then reads all of them. A failed check is a
// retryable error: the transaction (or, for an implicit one, the session)
// runs again and resolves the new descriptor.
//
// Versions above the commit timestamp and intents at any timestamp fail
// the check too: a schema change that committed above us after reading
// the table below our commit would otherwise pass unnoticed. That fails a
// writer that races a schema change's commit, which is the conservative
// side.

// validation is one registered key: the oldest timestamp any of its
// registrations resolved it at, and the lowest write sequence among them
// (a rollback to a savepoint taken before all of them forgets it).
type validation struct {
	key   []byte
	since hlc.Timestamp
	seq   int32
}

// validationInline is how many registrations a Txn holds without
// allocating (Txn.mu.validateInline; a pgbench -N block registers two:
// the UPDATE's table and the INSERT's); past validationIndexed, a map
// finds a key (a block writing many tables).
const (
	validationInline  = 2
	validationIndexed = 8
)

// ValidateAtCommit registers key (a single key) as one the transaction's
// writes depend on, as it was at since: Commit fails with a retryable
// error if another transaction wrote it above since, or holds an intent
// on it. Registering a key again keeps the older timestamp. A restart
// forgets every registration; a rollback to a savepoint forgets those
// made after it. The Txn keeps key (the commit's checks send it): the
// caller must not modify it afterwards. The registrations are a list,
// not a map, so that a block's few cost no allocation but their keys'
// (the map, its string keys and the checks' copies of them were five
// objects per pgbench -N block: TestValidationAllocs).
func (t *Txn) ValidateAtCommit(key []byte, since hlc.Timestamp) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.validatedAt = hlc.Timestamp{}
	// The registering statement's writes get the next sequence number.
	seq := t.mu.proto.Sequence + 1
	if i := t.validationLocked(key); i >= 0 {
		v := &t.mu.validate[i]
		v.since = minTimestamp(v.since, since)
		v.seq = min(v.seq, seq)
		return
	}
	if t.mu.validate == nil {
		t.mu.validate = t.mu.validateInline[:0]
	}
	t.mu.validate = append(t.mu.validate, validation{key: key, since: since, seq: seq})
	if t.mu.validateIdx != nil || len(t.mu.validate) > validationIndexed {
		t.indexValidationsLocked()
	}
}

// validationLocked returns the position of key's registration in
// t.mu.validate, or -1.
func (t *Txn) validationLocked(key []byte) int {
	if t.mu.validateIdx != nil {
		if i, ok := t.mu.validateIdx[string(key)]; ok {
			return i
		}
		return -1
	}
	for i := range t.mu.validate {
		if bytes.Equal(t.mu.validate[i].key, key) {
			return i
		}
	}
	return -1
}

// indexValidationsLocked makes t.mu.validateIdx again from t.mu.validate
// (nil when they are few).
func (t *Txn) indexValidationsLocked() {
	if len(t.mu.validate) <= validationIndexed {
		t.mu.validateIdx = nil
		return
	}
	t.mu.validateIdx = make(map[string]int, len(t.mu.validate))
	for i, v := range t.mu.validate {
		t.mu.validateIdx[string(v.key)] = i
	}
}

func minTimestamp(a, b hlc.Timestamp) hlc.Timestamp {
	if b.Less(a) {
		return b
	}
	return a
}

// forgetValidationsAfterLocked drops the registrations made after write
// sequence seq (their statements' writes were rolled back).
func (t *Txn) forgetValidationsAfterLocked(seq int32) {
	kept := t.mu.validate[:0]
	for _, v := range t.mu.validate {
		if v.seq <= seq {
			kept = append(kept, v)
		}
	}
	clear(t.mu.validate[len(kept):])
	t.mu.validate = kept
	if t.mu.validateIdx != nil {
		t.indexValidationsLocked()
	}
}

// validateAtCommit checks the registered keys at the write timestamp the
// commit is about to be sent at (see above), unless they were already
// checked at that timestamp (validatedAt: the commit of buffered writes
// checks them alongside the buffer, checkBufferedAndValidate). A failure
// is recorded as the transaction's retryable error.
func (t *Txn) validateAtCommit(ctx context.Context) error {
	txn, reqs := t.validationChecks(true, nil)
	if len(reqs) == 0 {
		return nil
	}
	ba := &kvpb.BatchRequest{Requests: reqs}
	ba.Txn = txn
	if _, err := t.db.ds.Send(ctx, ba); err != nil {
		err = fmt.Errorf("kv: validating %d keys the writes depend on at %s: %w", len(ba.Requests), txn.WriteTimestamp, err)
		if !kvpb.IsRetryable(err) {
			return err
		}
		return t.setRetryable(err)
	}
	t.mu.Lock()
	if t.mu.proto.Epoch == txn.Epoch {
		t.mu.validatedAt = txn.WriteTimestamp
	}
	t.mu.Unlock()
	return nil
}

// validationChecks appends to reqs the strict RefreshRequests that
// validate the registered keys, and returns them with the transaction to send them with (its read
// timestamp moved up to its write timestamp, where the tablet leaves the
// keys in its timestamp cache); none when nothing is registered or the
// keys were validated at the current write timestamp already. A
// one-phase commit sends them in its own batch (tryOnePhase), where the
// tablet leaves the keys in its timestamp cache at the timestamp it
// commits at; it asks for no transaction (withTxn false: nil).
func (t *Txn) validationChecks(withTxn bool, reqs []kvpb.Request) (*kvpb.Transaction, []kvpb.Request) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.mu.validate) == 0 || (!t.mu.validatedAt.IsEmpty() && t.mu.validatedAt == t.mu.proto.WriteTimestamp) {
		return nil, reqs
	}
	var txn *kvpb.Transaction
	if withTxn {
		txn = t.mu.proto.Clone()
		txn.ReadTimestamp = txn.WriteTimestamp
	}
	reqs = slices.Grow(reqs, len(t.mu.validate))
	for _, v := range t.mu.validate {
		reqs = append(reqs, &kvpb.RefreshRequest{Key: v.key, From: v.since, Strict: true})
	}
	return txn, reqs
}

// ReadAtWriteTimestamp moves the transaction's read timestamp up to its
// write timestamp, refreshing what it read so far (txn_refresh.go), so
// that what it reads next is at or above every write it made. A schema
// change calls it after writing a descriptor and before reading the
// table's rows (see above). A failed refresh is a retryable error.
func (t *Txn) ReadAtWriteTimestamp(ctx context.Context) error {
	// A schema change's writes must be intents before it reads the table
	// at their timestamp.
	if err := t.flushBuffer(ctx); err != nil {
		return err
	}
	t.mu.Lock()
	if err := t.usableLocked(); err != nil {
		t.mu.Unlock()
		return err
	}
	target := t.mu.proto.WriteTimestamp
	t.mu.Unlock()
	if err := t.refresh(ctx, target); err != nil {
		if !kvpb.IsRetryable(err) {
			return err
		}
		return t.setRetryable(err)
	}
	return nil
}
