package clockmon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/kvpb"
)

// Guard wraps a gateway's sender (what its kv.DB sends each tablet's
// sub-batch through) so that every batch is refused while m fences the
// node: its timestamps come from a clock that disagrees with the
// cluster's. A refused batch was never sent.
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
	return g.s.Send(ctx, ba)
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
