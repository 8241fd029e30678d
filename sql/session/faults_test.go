package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-db/cairn/clockmon"
	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/storage"
	"github.com/jackc/pgerrcode"
)

// TestFaultSQLStates: faults below SQL reach the client with their
// SQLSTATE, and the KV error stays reachable through them.
func TestFaultSQLStates(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"ambiguous commit", fmt.Errorf("kv: commit: %w", &kvpb.AmbiguousResultError{Cause: errors.New("connection reset")}), pgerrcode.StatementCompletionUnknown},
		{"disk full", fmt.Errorf("storage: commit: %w", fmt.Errorf("%w: %w", storage.ErrEngineFailed, syscall.ENOSPC)), pgerrcode.DiskFull},
		{"disk broken", fmt.Errorf("storage: commit: %w", fmt.Errorf("%w: %w", storage.ErrEngineFailed, syscall.EIO)), pgerrcode.IOError},
		{"fenced gateway", fmt.Errorf("refusing to act as a gateway: %w", clockmon.ErrClockOffset), pgerrcode.SystemError},
		{"gateway whose clock is not yet checked", fmt.Errorf("refusing to act as a gateway: %w", clockmon.ErrUnverified), pgerrcode.SystemError},
		{"gateway whose clock is pinned at its bound", fmt.Errorf("refusing to act as a gateway: %w", hlc.ErrPinned), pgerrcode.IOError},
		{"read below the GC threshold", fmt.Errorf("kv: scan: %w", &kvpb.BatchTimestampBeforeGCError{Msg: "Scan"}), pgerrcode.SnapshotTooOld},
		{"retryable still 40001", &kvpb.TransactionRetryError{}, pgerrcode.SerializationFailure},
		{"pinned clock whose save ended: a restart", fmt.Errorf("refusing to act as a gateway: %w", &kvpb.TransactionRetryError{Reason: kvpb.RetryClockPinned}), pgerrcode.SerializationFailure},
		{"anything else", errors.New("boom"), pgerrcode.InternalError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sqlError(context.Background(), tc.err)
			if c := pgerror.Code(got); c != tc.want {
				t.Fatalf("SQLSTATE %s (%v), want %s", c, got, tc.want)
			}
			if !errors.Is(got, tc.err) && tc.want != pgerrcode.InternalError && tc.want != pgerrcode.SerializationFailure {
				t.Fatalf("the cause is no longer reachable through %v", got)
			}
			// A fenced gateway's message says which fence: a clock not
			// yet checked is not said to disagree.
			disagrees := strings.Contains(got.Error(), "clock disagrees")
			switch {
			case errors.Is(tc.err, clockmon.ErrUnverified) && (disagrees || !strings.Contains(got.Error(), "not yet checked")):
				t.Fatalf("a clock not yet checked: %q", got)
			case errors.Is(tc.err, clockmon.ErrClockOffset) && !disagrees:
				t.Fatalf("a clock judged off: %q", got)
			}
			// A restart for a pinned clock says so, not that transactions
			// conflicted.
			var rty *kvpb.TransactionRetryError
			if errors.As(tc.err, &rty) && rty.Reason == kvpb.RetryClockPinned && !strings.Contains(got.Error(), "clock was held back") {
				t.Fatalf("a restart for a pinned clock: %q", got)
			}
		})
	}
}
