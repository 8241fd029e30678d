package server

import (
	"context"

	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/store"
)

// splitConfig adds the split queue's settings to a store's config: the
// thresholds from --tablet-split-size and --tablet-split-qps, and the SQL
// layer's rule for what a split must not divide (rowenc.SplitUnit: the
// system span and shared colocation groups stay whole).
func (s *Server) splitConfig(c store.Config) store.Config {
	c.SplitSize = s.cfg.TabletSplitSize
	c.SplitQPS = s.cfg.TabletSplitQPS
	c.SplitUnit = rowenc.SplitUnit
	return c
}

// startSplitQueue runs the store's split queue until ctx ends.
func (s *Server) startSplitQueue(ctx context.Context) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.store.RunSplitQueue(ctx)
	}()
}
