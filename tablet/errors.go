package tablet

import (
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/kvpb"
)

// Errors the tablet returns to callers are the kvpb types (invariant 3 of
// kvpb). The helpers below build them in one place so every refusal of bad
// input reads the same.

// ErrClosed is returned by a replica that has been closed.
var ErrClosed = errors.New("tablet: replica closed")

// errNot1PC is internal: the batch looked like a one-phase commit but must
// take the ordinary path (e.g. it meets its own earlier intent).
var errNot1PC = errors.New("tablet: not a one-phase commit")

// ErrLockTableInexact is returned by a read when Config.VerifyLockTable is
// set and the lock table claimed no lock in a span where the engine holds
// one: invariant 11 is broken (a bug, never a user error).
var ErrLockTableInexact = errors.New("tablet: lock table missed an intent")

func invalidArg(format string, args ...any) error {
	return &kvpb.InvalidArgumentError{Msg: fmt.Sprintf(format, args...)}
}

func keyMismatch(key []byte, desc kvpb.TabletDescriptor) error {
	return &kvpb.TabletKeyMismatchError{Key: append([]byte(nil), key...), Tablet: &desc}
}
