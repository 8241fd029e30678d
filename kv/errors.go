package kv

import (
	"errors"
	"fmt"
)

// Errors a Txn returns for misuse, grouped by when they happen. Conflicts and
// retries are kvpb's typed errors (kvpb.IsRetryable classifies them); these
// are the client's own.
var (
	// ErrTxnFinished: an operation on a transaction that has committed or
	// rolled back.
	ErrTxnFinished = errors.New("kv: transaction already finished")
	// ErrTxnAborted: PrepareForRetry on a transaction that was aborted; the
	// work must be retried in a new transaction.
	ErrTxnAborted = errors.New("kv: transaction aborted; start a new one")
	// ErrMixedScanDirections: a batch holds limited scans in both
	// directions, which cannot be walked tablet by tablet in one order.
	ErrMixedScanDirections = errors.New("kv: batch mixes limited forward and reverse scans")
	// ErrRoutingRetriesExhausted: the tablet directory kept disagreeing with
	// the tablets.
	ErrRoutingRetriesExhausted = errors.New("kv: routing retries exhausted")
	// ErrDBClosed: the DB was closed.
	ErrDBClosed = errors.New("kv: db closed")
)

// RetriesExhaustedError is returned by DB.Txn when the closure kept failing
// with retryable errors. It unwraps to the last error, so kvpb.IsRetryable
// still holds and the SQL layer maps it to SQLSTATE 40001.
type RetriesExhaustedError struct {
	Attempts int
	Last     error
}

func (e *RetriesExhaustedError) Error() string {
	return fmt.Sprintf("kv: transaction gave up after %d attempts: %v", e.Attempts, e.Last)
}

func (e *RetriesExhaustedError) Unwrap() error { return e.Last }
