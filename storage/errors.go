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

// Errors from a failed engine.
var (
	// ErrEngineFailed is returned by every write once Pebble has reported a
	// fatal error, typically a WAL write or sync failing on a full or broken
	// disk. The write that hit it was not acknowledged; the engine must be
	// closed and the node restarted on a healthy disk.
	ErrEngineFailed = errors.New("storage: engine failed")
)
