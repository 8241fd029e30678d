package storage

import "errors"

// Errors from encoding and decoding keys.
var (
	// ErrBadEngineKey is returned for bytes that are not an encoded MVCCKey.
	ErrBadEngineKey = errors.New("storage: malformed engine key")
)

// Errors from writing.
var (
	// ErrEmptyKey is returned when a write names an empty user key.
	ErrEmptyKey = errors.New("storage: empty key")
	// ErrNegativeTimestamp is returned when a write names a negative
	// timestamp, which the encoding cannot order correctly.
	ErrNegativeTimestamp = errors.New("storage: negative timestamp")
	// ErrOutOfOrder is returned by SSTWriter when keys or range deletions are
	// not added in strictly increasing engine-key order.
	ErrOutOfOrder = errors.New("storage: sst keys out of order")
	// ErrSSTFinished is returned by SSTWriter after Finish or Abort.
	ErrSSTFinished = errors.New("storage: sst writer already finished")
)
