package kvpb

import (
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
)

// The errors a tablet returns, grouped by who handles them. All are pointer
// types; match them with errors.As (invariant 3).
//
// Routing (the kv client's router evicts its cache and retries):
//   TabletKeyMismatchError, TabletNotFoundError
// Conflicts the transaction coordinator retries by moving its timestamp or
// restarting (IsRetryable):
//   WriteTooOldError, ReadWithinUncertaintyIntervalError,
//   TransactionRetryError, TransactionAbortedError
// Conflicts with another transaction's lock (the tablet waits and pushes;
// they surface only with WaitError or when the push fails):
//   WriteIntentError, TransactionPushError
// Final answers to the caller:
//   ConditionFailedError, TransactionStatusError, InvalidArgumentError,
//   AmbiguousResultError, BatchTimestampBeforeGCError

// TabletKeyMismatchError: the batch's keys are not (all) in the tablet it
// was sent to. Tablet is the tablet's current descriptor, if it exists.
type TabletKeyMismatchError struct {
	Key    []byte            `wire:"1"`
	Tablet *TabletDescriptor `wire:"2"`
}

func (e *TabletKeyMismatchError) Error() string {
	return fmt.Sprintf("key %q is outside tablet %s", e.Key, e.Tablet)
}

// TabletNotFoundError: the addressed tablet does not exist here.
type TabletNotFoundError struct {
	TabletID TabletID `wire:"1"`
}

func (e *TabletNotFoundError) Error() string {
	return fmt.Sprintf("tablet %d not found", e.TabletID)
}

// WriteTooOldError: a write met a committed version at or above its
// timestamp. The write was not done; ActualTimestamp is the lowest timestamp
// at which it could be.
type WriteTooOldError struct {
	Key             []byte        `wire:"1"`
	Timestamp       hlc.Timestamp `wire:"2"`
	ActualTimestamp hlc.Timestamp `wire:"3"`
}

func (e *WriteTooOldError) Error() string {
	return fmt.Sprintf("write at %s too old for key %q; existing version requires %s", e.Timestamp, e.Key, e.ActualTimestamp)
}

// ReadWithinUncertaintyIntervalError: a read at ReadTimestamp met a value at
// ExistingTimestamp within the uncertainty window; the reader must move its
// read timestamp above ExistingTimestamp.
type ReadWithinUncertaintyIntervalError struct {
	Key               []byte        `wire:"1"`
	ReadTimestamp     hlc.Timestamp `wire:"2"`
	ExistingTimestamp hlc.Timestamp `wire:"3"`
	UncertaintyLimit  hlc.Timestamp `wire:"4"`
}

func (e *ReadWithinUncertaintyIntervalError) Error() string {
	return fmt.Sprintf("read at %s met value of %q at %s within uncertainty limit %s", e.ReadTimestamp, e.Key, e.ExistingTimestamp, e.UncertaintyLimit)
}

// RetryReason says why a transaction must retry.
type RetryReason int8

const (
	// RetrySerializable: the write timestamp moved and reads cannot be
	// refreshed to it.
	RetrySerializable RetryReason = iota
	// RetryWriteTooOld: a write was pushed above a committed version.
	RetryWriteTooOld
	// RetryAsyncWriteFailure: an intent the transaction relied on is gone.
	RetryAsyncWriteFailure
	// RetryClockPinned: the gateway's clock handed the transaction a
	// timestamp while it was held at its persisted upper bound (behind
	// real time), so no batch may read there; the save that held it has
	// since ended, and a fresh timestamp is not held back
	// (clockmon.Guard).
	RetryClockPinned
)

func (r RetryReason) String() string {
	switch r {
	case RetrySerializable:
		return "RETRY_SERIALIZABLE"
	case RetryWriteTooOld:
		return "RETRY_WRITE_TOO_OLD"
	case RetryAsyncWriteFailure:
		return "RETRY_ASYNC_WRITE_FAILURE"
	case RetryClockPinned:
		return "RETRY_CLOCK_PINNED"
	}
	return "RETRY_UNKNOWN"
}

// TransactionRetryError: the transaction must restart at a new epoch.
type TransactionRetryError struct {
	Reason RetryReason `wire:"1"`
	Detail string      `wire:"2"`
}

func (e *TransactionRetryError) Error() string {
	return fmt.Sprintf("restart transaction: %s: %s", e.Reason, e.Detail)
}

// AbortReason says why a transaction was aborted.
type AbortReason int8

const (
	// AbortPushed: another transaction aborted it (priority or abandonment).
	AbortPushed AbortReason = iota
	// AbortDeadlock: it was chosen as the victim of a deadlock.
	AbortDeadlock
	// AbortExpired: its record expired without heartbeats.
	AbortExpired
	// AbortClient: the client rolled it back.
	AbortClient
	// AbortTimestampCache: its record was created after the timestamp
	// cache shows it was already finalised (a replay).
	AbortTimestampCache
)

func (r AbortReason) String() string {
	switch r {
	case AbortPushed:
		return "ABORT_REASON_PUSHED"
	case AbortDeadlock:
		return "ABORT_REASON_DEADLOCK"
	case AbortExpired:
		return "ABORT_REASON_EXPIRED"
	case AbortClient:
		return "ABORT_REASON_CLIENT"
	case AbortTimestampCache:
		return "ABORT_REASON_TIMESTAMP_CACHE"
	}
	return "ABORT_REASON_UNKNOWN"
}

// TransactionAbortedError: the transaction is aborted; a new one may retry
// the work.
type TransactionAbortedError struct {
	Reason AbortReason `wire:"1"`
}

func (e *TransactionAbortedError) Error() string {
	return fmt.Sprintf("transaction aborted: %s", e.Reason)
}

// WriteIntentError: the request met other transactions' intents and did not
// wait (WaitError), could not push them, or waited longer than the batch's
// Header.LockTimeout for one of them (LockTimeout set).
type WriteIntentError struct {
	Intents     []Intent `wire:"1"`
	LockTimeout bool     `wire:"2"`
}

func (e *WriteIntentError) Error() string {
	if e.LockTimeout && len(e.Intents) > 0 {
		return fmt.Sprintf("lock timeout waiting for %q held by txn %s", e.Intents[0].Key, e.Intents[0].Txn.Short())
	}
	if len(e.Intents) == 1 {
		return fmt.Sprintf("conflicting intent on %q of txn %s", e.Intents[0].Key, e.Intents[0].Txn.Short())
	}
	return fmt.Sprintf("conflicting intents on %d keys", len(e.Intents))
}

// TransactionPushError: a push did not succeed; the pushee is alive and
// wins on priority.
type TransactionPushError struct {
	Pushee Transaction `wire:"1"`
}

func (e *TransactionPushError) Error() string {
	return fmt.Sprintf("failed to push %s", e.Pushee.String())
}

// ConditionFailedError: a ConditionalPut's expectation did not hold.
type ConditionFailedError struct {
	Key         []byte `wire:"1"`
	ActualValue []byte `wire:"2"` // nil if the key has no visible value
}

func (e *ConditionFailedError) Error() string {
	if e.ActualValue == nil {
		return fmt.Sprintf("condition failed on %q: no value", e.Key)
	}
	return fmt.Sprintf("condition failed on %q: found %q", e.Key, e.ActualValue)
}

// TransactionStatusError: the request is invalid for the transaction's
// state (e.g. committing an already committed transaction).
type TransactionStatusError struct {
	Txn    TxnMeta   `wire:"1"`
	Status TxnStatus `wire:"2"`
	Msg    string    `wire:"3"`
}

func (e *TransactionStatusError) Error() string {
	return fmt.Sprintf("txn %s is %s: %s", e.Txn.Short(), e.Status, e.Msg)
}

// InvalidArgumentError: the request is malformed (empty key, value over the
// size limit, timestamp beyond the clock offset, key outside the keyspace).
// Nothing was written.
type InvalidArgumentError struct {
	Msg string `wire:"1"`
}

func (e *InvalidArgumentError) Error() string { return "invalid argument: " + e.Msg }

// BatchTimestampBeforeGCError: the request reads (or refreshes) at a
// timestamp below the tablet's GC threshold, where versions it would see
// may have been garbage collected. Nothing was read; the SQL layer maps it
// to 72000 snapshot_too_old.
type BatchTimestampBeforeGCError struct {
	Timestamp hlc.Timestamp `wire:"1"`
	Threshold hlc.Timestamp `wire:"2"`
	Msg       string        `wire:"3"`
}

func (e *BatchTimestampBeforeGCError) Error() string {
	return fmt.Sprintf("batch timestamp %s must not be below the GC threshold %s: %s", e.Timestamp, e.Threshold, e.Msg)
}

// AmbiguousResultError: the outcome of a commit cannot be known (the
// connection to its tablet was lost after the request was sent).
type AmbiguousResultError struct {
	Cause error `wire:"1"`
}

func (e *AmbiguousResultError) Error() string {
	return fmt.Sprintf("result is ambiguous: %v", e.Cause)
}

func (e *AmbiguousResultError) Unwrap() error { return e.Cause }

// IsRetryable reports whether err asks the transaction to retry (at a
// higher timestamp or as a new attempt), as opposed to a final answer.
func IsRetryable(err error) bool {
	var (
		wto *WriteTooOldError
		unc *ReadWithinUncertaintyIntervalError
		rty *TransactionRetryError
		abt *TransactionAbortedError
	)
	return errors.As(err, &wto) || errors.As(err, &unc) || errors.As(err, &rty) || errors.As(err, &abt)
}
