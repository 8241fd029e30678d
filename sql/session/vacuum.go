package session

import (
	"context"
	"fmt"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/pgwire"
)

// VACUUM (issue #14). PostgreSQL's VACUUM removes dead row versions; in
// Cairn old versions are MVCC versions, which the store's GC queue removes
// in the background once they are older than the GC TTL (gc.ttlseconds)
// and no open transaction reads below them. VACUUM runs that collection
// now, on its tables' spans (every table's without a list): the same GC
// requests at the same threshold (now − TTL, lowered to the protected
// timestamp), so it removes nothing the queue would not remove, only
// sooner. VACUUM VERBOSE reports, per table, what it removed, as INFO
// messages like PostgreSQL's. FULL, FREEZE and the other options change
// nothing more: there is no heap to compact or freeze.

// GC is what VACUUM asks of the node (server/gc.go implements it).
type GC interface {
	// Collect runs a GC pass over spans now, each at the current threshold
	// of the tablets holding it, and reports what it removed.
	Collect(ctx context.Context, spans []kvpb.Span) (GCResult, error)
}

// GCResult is what a GC pass removed: old versions and their bytes.
type GCResult struct {
	Versions, Bytes int64
}

// vacuumTarget is one relation VACUUM collects (spans nil: skip).
type vacuumTarget struct {
	name  string
	spans []kvpb.Span
}

// collectGarbage runs the GC pass of VACUUM over targets (none: every
// table's data) and, with VERBOSE, reports it.
func (s *Session) collectGarbage(ctx context.Context, targets []vacuumTarget, all, verbose bool, w pgwire.ResultWriter) error {
	gc := s.b.cfg.GC
	if gc == nil {
		return nil
	}
	if all {
		targets = []vacuumTarget{{name: "all tables", spans: []kvpb.Span{{Key: keys.TableDataMin, EndKey: keys.Max}}}}
	}
	for _, t := range targets {
		if len(t.spans) == 0 {
			continue
		}
		if verbose {
			s.notice(w, "INFO", "00000", fmt.Sprintf("vacuuming %s", t.name))
		}
		res, err := gc.Collect(ctx, t.spans)
		if err != nil {
			return fmt.Errorf("vacuuming %s: %w", t.name, err)
		}
		if verbose {
			s.notice(w, "INFO", "00000", fmt.Sprintf("finished vacuuming %s: removed %d old row versions (%d bytes)", t.name, res.Versions, res.Bytes))
		}
	}
	return nil
}
