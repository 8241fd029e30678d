package session

import (
	"errors"
	"syscall"

	"github.com/cairn-db/cairn/clockmon"
	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/storage"
	"github.com/jackc/pgerrcode"
)

// faultError gives the SQLSTATE of a fault below the SQL layer, or nil
// for any other error. The KV error stays reachable (causeError) and is
// the detail.
//
//   - A write whose outcome cannot be known (kvpb.AmbiguousResultError:
//     the connection to its leaseholder was lost after sending, the
//     proposal was in flight when the lease was lost) is 40003
//     statement_completion_unknown, never a plain failure: the client
//     must check before retrying.
//   - A failed storage engine is 53100 disk_full when the disk reported
//     ENOSPC, else 58030 io_error; the node stops serving after it.
//   - A gateway fenced by its clock monitor (clockmon) is 58000
//     system_error: nothing was sent, and another node can serve the
//     statement. The message says whether its clock was judged off
//     (ErrClockOffset) or not yet checked (ErrUnverified).
//   - A gateway that refused to read at a timestamp its clock handed out
//     while pinned at its persisted upper bound (hlc.ErrPinned: its disk
//     did not take the bound's save in time, so the timestamp lies behind
//     real time) is 58030 io_error: nothing was sent, and another node,
//     or this one once its disk answers, can serve the statement.
//   - A read below a tablet's GC threshold (kvpb.BatchTimestampBeforeGCError:
//     a transaction whose snapshot GC was allowed to pass, which the
//     protected timestamps prevent unless its node's record went stale)
//     is 72000 snapshot_too_old,
//     PostgreSQL's code for a snapshot whose versions may have been
//     vacuumed (old_snapshot_threshold). Nothing was read; retrying at a
//     newer timestamp can succeed, the same snapshot never will.
func faultError(err error) error {
	var amb *kvpb.AmbiguousResultError
	var bgc *kvpb.BatchTimestampBeforeGCError
	switch {
	case errors.As(err, &bgc):
		return &causeError{pgerror.New(pgerrcode.SnapshotTooOld, "snapshot too old: timestamp %s is below the GC threshold %s", bgc.Timestamp, bgc.Threshold).
			WithDetail("%s", err.Error()).
			WithHint("Versions older than the GC threshold may have been garbage collected (gc.ttlseconds); read at a newer timestamp."), err}
	case errors.As(err, &amb):
		return &causeError{pgerror.New(pgerrcode.StatementCompletionUnknown, "result is ambiguous: the statement may or may not have taken effect").
			WithDetail("%s", err.Error()), err}
	case errors.Is(err, storage.ErrEngineFailed) && errors.Is(err, syscall.ENOSPC):
		return &causeError{pgerror.New(pgerrcode.DiskFull, "could not write to the store: no space left on device").
			WithDetail("%s", err.Error()).WithHint("The node stops; restart it once the disk has room."), err}
	case errors.Is(err, storage.ErrEngineFailed):
		return &causeError{pgerror.New(pgerrcode.IOError, "could not write to the store: the disk failed").
			WithDetail("%s", err.Error()).WithHint("The node stops; restart it on a healthy disk."), err}
	case errors.Is(err, hlc.ErrPinned):
		return &causeError{pgerror.New(pgerrcode.IOError, "this node's clock is held back: its disk did not save the clock's upper bound in time").
			WithDetail("%s", err.Error()).WithHint("Retry the transaction, or connect to another node; the node serves again once its disk answers."), err}
	case errors.Is(err, clockmon.ErrUnverified):
		return &causeError{pgerror.New(pgerrcode.SystemError, "this node has not yet checked its clock against the cluster's; it serves nothing until it has").
			WithDetail("%s", err.Error()).WithHint("Retry in a moment (a starting node measures its peers' clocks first), or connect to another node."), err}
	case errors.Is(err, clockmon.ErrClockOffset):
		return &causeError{pgerror.New(pgerrcode.SystemError, "this node's clock disagrees with the cluster's; it serves nothing until it agrees").
			WithDetail("%s", err.Error()).WithHint("Connect to another node, or fix this machine's time synchronization."), err}
	}
	return nil
}
