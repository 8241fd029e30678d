package server

import (
	"context"
	"testing"
	"time"
)

// TestUnreplicatedClockStartsAboveBound: a node without peers (no Join,
// no maximum offset) restarted with its physical clock 10 s behind the
// timestamps it handed out starts its clock above them, without the
// replicated node's wait (server/clockbound.go). The replicated case, which waits, is
// cmd/cairn.TestClockBehindAfterRestart.
func TestUnreplicatedClockStartsAboveBound(t *testing.T) {
	dir := t.TempDir()
	s := start(t, Config{Insecure: true, StoreDir: dir})
	s.clock.SetPhysicalOffset(10 * time.Second)
	before := s.clock.Now()
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	s = start(t, Config{Insecure: true, StoreDir: dir})
	if after := s.clock.Now(); !before.Less(after) {
		t.Fatalf("after the restart the clock reads %v, not above %v handed out before it", after, before)
	}
}
