package server

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-db/cairn/hlc"
)

// pinnedRetryFor bounds how long a node's own start-up work retries a
// transaction refused because the clock was pinned at its persisted
// upper bound (hlc.ErrPinned). The refusal means only that one synced
// write of the bound (a few bytes) was slower than the clock's wait
// (hlc's nowSaveWait, 200 ms): on a loaded machine a start-up's first
// syncs can take that long. A disk that takes longer than this for the
// save has stalled, and the start fails with the error.
const pinnedRetryFor = 30 * time.Second

// retryPinned runs fn until it returns anything but an error wrapping
// hlc.ErrPinned, waiting before each retry for the clock's save in
// flight to end (hlc.Clock.WaitPersisted), so the retry's timestamp is
// read after the bound moved. A user's statement gets the error (58030,
// sql/session/faults.go) and chooses; the node's bootstrap has nobody
// to choose, and failing a start for one slow sync would make an
// operator restart a healthy node. fn must be safe to repeat (a whole
// transaction: the refusal came before anything was sent).
func retryPinned(ctx context.Context, clock *hlc.Clock, fn func() error) error {
	deadline := time.Now().Add(pinnedRetryFor)
	backoff := 10 * time.Millisecond
	for {
		err := fn()
		if err == nil || !errors.Is(err, hlc.ErrPinned) || time.Now().After(deadline) {
			return err
		}
		clock.WaitPersisted()
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		backoff = min(2*backoff, time.Second)
	}
}
