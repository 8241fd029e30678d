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
// so the timestamp lies behind real time, as a slow clock's would). A
// refused batch was never sent.
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
		return nil, fmt.Errorf("refusing to act as a gateway: %w", err)
	}
	return g.s.Send(ctx, ba)
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
