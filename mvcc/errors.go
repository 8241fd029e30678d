package mvcc

import (
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// Errors of this package. Conflicts and bad requests are reported with the
// kvpb error types (the tablet passes them up unchanged); the sentinels
// below are for stored data that cannot be right.
var (
	// ErrCorrupt: a stored value, lock record or transaction record does
	// not decode. It is never retryable.
	ErrCorrupt = errors.New("mvcc: corrupt record")
	// ErrInvariant: stored state contradicts a package invariant (e.g. a
	// commit below its own intent). The batch must be discarded.
	ErrInvariant = errors.New("mvcc: invariant violated")
)

func invalidArg(format string, args ...any) error {
	return &kvpb.InvalidArgumentError{Msg: fmt.Sprintf(format, args...)}
}

func staleEpoch(key []byte, stored, incoming int32) error {
	return &kvpb.TransactionRetryError{
		Reason: kvpb.RetrySerializable,
		Detail: fmt.Sprintf("intent on %q is at epoch %d, request at older epoch %d", key, stored, incoming),
	}
}

func writeTooOld(key []byte, ts, actual hlc.Timestamp) error {
	return &kvpb.WriteTooOldError{Key: append([]byte(nil), key...), Timestamp: ts, ActualTimestamp: actual}
}
