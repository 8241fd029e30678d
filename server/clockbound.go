package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/storage"
)

// clockBoundKey holds the wall time, in nanoseconds, below which every
// timestamp this node's clock has handed out lies (hlc invariant 4).
var clockBoundKey = keys.StoreLocal("clock-bound")

// clockBoundInterval is how far ahead of the clock each persisted bound
// lies, so the clock saves (one synced write, in the background, once half
// the headroom is used: hlc invariant 5) about twice per interval of wall
// time; a disk whose saves take more than a quarter of this adds up to
// three intervals more (hlc invariant 5). After a restart the clock
// starts at the bound: at most this far ahead of the physical clock
// (four times this after slow saves) when the restart was quick and the
// clock did not go back. A cluster member serves only while its clock
// leads its physical clock by at most the maximum offset (clockmon), so
// a quick restart waits out at most interval − 500 ms before serving
// (3.5 s after slow saves). An unreplicated node (no Join) has no
// maximum offset and no peers: it serves at once, its clock up to that
// far ahead of the physical one.
const clockBoundInterval = time.Second

// engineClockBound is hlc.UpperBoundStore on the node's engine: the bound
// is a store-local key, written with a synced batch so that it is
// durable before the clock hands out wall times up to it.
type engineClockBound struct{ eng *storage.Engine }

var _ hlc.UpperBoundStore = engineClockBound{}

// Load returns the persisted bound, 0 on a store that has none.
func (b engineClockBound) Load() (int64, error) {
	v, ok, err := b.eng.Get(storage.MVCCKey{Key: clockBoundKey})
	if err != nil || !ok {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("the store's clock bound is %d bytes, not 8", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// Save persists wallNanos with a synced write.
func (b engineClockBound) Save(wallNanos int64) error {
	batch := b.eng.NewWriteOnlyBatch()
	defer batch.Close()
	if err := batch.Put(storage.MVCCKey{Key: clockBoundKey}, binary.BigEndian.AppendUint64(nil, uint64(wallNanos))); err != nil {
		return err
	}
	return batch.Commit()
}

// restoreClockBound attaches the store's bound to the clock, first
// waiting, when the physical clock is more than the maximum offset behind
// the bound, until it is not. The clock then starts above every
// timestamp an earlier incarnation handed out. The wait is what
// CockroachDB does too: a cluster member whose hybrid clock leads its
// physical clock by more than the maximum offset may not serve
// (clockmon), and jumping ahead would also put its timestamps beyond
// what its peers accept. A clock that went back by a minute while the
// node was down so delays its start by about a minute, logged; SIGTERM
// (ctx) ends the wait.
func restoreClockBound(ctx context.Context, clock *hlc.Clock, store engineClockBound, log *slog.Logger) error {
	bound, err := store.Load()
	if err != nil {
		return fmt.Errorf("reading the clock's upper bound: %w", err)
	}
	if lead := time.Duration(bound - clock.PhysicalNow()); clock.MaxOffset() > 0 && lead > clock.MaxOffset() {
		wait := lead - clock.MaxOffset()
		log.Warn("cairn: the clock is behind timestamps this node handed out before it restarted; waiting until it catches up before serving",
			"behind", lead, "wait", wait)
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the clock to pass its persisted upper bound: %w", ctx.Err())
		}
	}
	if err := clock.EnsureUpperBound(store, clockBoundInterval); err != nil {
		return fmt.Errorf("restoring the clock's upper bound: %w", err)
	}
	return nil
}
