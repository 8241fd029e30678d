package clockmon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// Guard wraps a gateway's sender (what its kv.DB sends each tablet's
// sub-batch through) so that every batch is refused while m fences the
// node: its timestamps come from a clock that disagrees with the
// cluster's. It also refuses a batch that reads at a timestamp this
// node's clock handed out while it was pinned at its persisted upper
// bound (hlc invariant 6: the disk did not take the next bound in time,
// so the timestamp lies behind real time, as a slow clock's would), as
// a restart once the save has ended (pinned). A refused batch was never
// sent.
func Guard(s kvpb.Sender, m *Monitor) kvpb.Sender { return guard{s: s, m: m} }

type guard struct {
	s kvpb.Sender
	m *Monitor
}

func (g guard) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	if err := g.m.Fenced(); err != nil {
		if err = g.wait(ctx, err); err != nil {
			return nil, fmt.Errorf("refusing to act as a gateway: %w", err)
		}
	}
	if err := g.m.cfg.Clock.CheckPinned(readTimestamp(ba)); err != nil {
		return nil, g.pinned(ctx, err)
	}
	return g.s.Send(ctx, ba)
}

// pinnedWait bounds how long a batch refused for a pinned timestamp
// waits for the clock's save in flight: a synced write of a few bytes,
// which a loaded disk can take most of a second over. A variable for
// tests.
var pinnedWait = 2 * time.Second

// pinned is the error for a batch refused because its read timestamp was
// handed out while the clock was pinned (err, from CheckPinned). The
// timestamp is unusable, but the node is not: the pin only means that
// one save of the clock's bound was slow. So the batch waits, within its
// context, up to pinnedWait for that save; once it has ended a fresh
// reading of the clock lies past every pinned one, and the refusal is a
// retryable error (kvpb.RetryClockPinned): a transaction restarts at a
// new timestamp, which the session does without the client seeing it for
// an implicit transaction or a READ COMMITTED statement, and reports as
// 40001 otherwise, as for any restart. A save that does not end in time
// is a stalled disk: the refusal stays ErrPinned, which the client sees
// as 58030 io_error and can take to another node.
func (g guard) pinned(ctx context.Context, err error) error {
	wctx, cancel := context.WithTimeout(ctx, pinnedWait)
	defer cancel()
	if g.m.cfg.Clock.WaitSaved(wctx) {
		return fmt.Errorf("refusing to act as a gateway: %w",
			&kvpb.TransactionRetryError{Reason: kvpb.RetryClockPinned, Detail: err.Error()})
	}
	return fmt.Errorf("refusing to act as a gateway: %w", err)
}

// readTimestamp is the timestamp the gateway chose for ba's reads: its
// transaction's read timestamp, else the batch's own (empty when the
// leaseholder picks it: never a pinned one of this node's). A transaction
// without an uncertainty window (its limit is its read timestamp: AS OF
// SYSTEM TIME, kv.DB.NewAsOfTxn) reads at a time its user chose, in the
// past, and claims nothing about writes acknowledged since; it is read
// where it asks, and readTimestamp returns the empty timestamp for it.
func readTimestamp(ba *kvpb.BatchRequest) hlc.Timestamp {
	if ba.Txn != nil {
		if ba.Txn.GlobalUncertaintyLimit == ba.Txn.ReadTimestamp {
			return hlc.Timestamp{}
		}
		return ba.Txn.ReadTimestamp
	}
	return ba.Timestamp
}

// guardWait bounds how long a batch waits for a node's first verdict on
// its clock (a node starting before its peers: as long as a batch looks
// for a leaseholder). A variable for tests.
var guardWait = 10 * time.Second

// wait waits while the node's clock is unverified, and returns the fence
// that remains (nil: serve).
func (g guard) wait(ctx context.Context, err error) error {
	deadline := time.Now().Add(guardWait)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for errors.Is(err, ErrUnverified) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return err
		case <-t.C:
		}
		err = g.m.Fenced()
	}
	return err
}
