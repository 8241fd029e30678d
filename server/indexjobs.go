package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/sql/ddl"
)

// Online schema changes' drains (sql/ddl index_job.go): each node
// publishes, beside its protected timestamp, its kv.DB.DrainTimestamp
// (the lowest read timestamp of its open transactions that may write
// rows) as a record ptd/<node>; drainTimestamp is the minimum of this
// node's value and every record younger than ptsStale. A record is
// published after the value is computed, so a record published after a
// step committed bounds every transaction of its node that could still
// write through the version before; a silent node's record is ignored
// after a minute, which can at worst let a step go on while a writer of
// that node is left behind, and that writer then fails its commit
// (catalog.WriterKey), never writes wrongly.

var ptdPrefix = keys.System([]byte("ptd/"))

func ptdKey(node uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), ptdPrefix...), node)
}

// publishDrainTimestamp writes this node's drain record.
func (s *Server) publishDrainTimestamp(ctx context.Context) {
	p := s.db.DrainTimestamp()
	if err := s.db.Put(ctx, ptdKey(s.nodeID()), s.encodePTS(p, s.db.Clock().Now().WallTime)); err != nil && ctx.Err() == nil {
		s.log.Debug("cairn: publishing the drain timestamp", "err", err)
	}
}

// drainTimestamp is session.Config.DrainTimestamp.
func (s *Server) drainTimestamp(ctx context.Context) (hlc.Timestamp, error) {
	if s.db == nil {
		return hlc.Timestamp{}, fmt.Errorf("drain timestamp: the node is not serving yet")
	}
	p := s.db.DrainTimestamp()
	if s.repl == nil {
		return p, nil
	}
	// This node's own value is p, fresher than its record (which the GC
	// loop publishes, and which is not rewritten while that loop rolls an
	// orphaned build back and waits here).
	return s.clusterMin(ctx, "drain timestamp", ptdPrefix, p, ptdKey(s.nodeID()))
}

// orphanCheckEvery is how often a node looks for orphaned index builds.
const orphanCheckEvery = 5 * time.Second

// resumeOrphanedJobs takes over the index builds and shard rebalances
// whose node stopped (ddl.ResumeOrphanedIndexBuilds,
// session.Backend.ResumeOrphanedRebalances), at most every
// orphanCheckEvery; they go on in the background.
func (s *Server) resumeOrphanedJobs(ctx context.Context) {
	if s.backend == nil || time.Since(s.lastOrphanCheck) < orphanCheckEvery {
		return
	}
	s.lastOrphanCheck = time.Now()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	n, err := ddl.ResumeOrphanedIndexBuilds(ctx, ddl.ResumeContext{
		DB: s.db, Writer: s.backend.CatalogWriter(nil), DrainTimestamp: s.drainTimestamp,
		Memory: s.sqlMem, TempStorage: s.tempStorage, Jobs: &s.orphanJobs,
	})
	if err != nil && ctx.Err() == nil {
		s.log.Warn("cairn: resuming orphaned index builds", "err", err)
	}
	if n > 0 {
		s.log.Info("cairn: took over orphaned index builds", "jobs", n)
	}
	// Shard rebalances (citus_rebalance_start) whose node stopped go on
	// here too.
	if n, err := s.backend.ResumeOrphanedRebalances(ctx, &s.orphanJobs); err != nil && ctx.Err() == nil {
		s.log.Warn("cairn: resuming orphaned rebalances", "err", err)
	} else if n > 0 {
		s.log.Info("cairn: took over orphaned rebalances", "jobs", n)
	}
}

// BackfillPiecesServed is how many tablet pieces of other nodes' index
// backfills this node has read on their behalf (0 outside a cluster).
func (s *Server) BackfillPiecesServed() int64 {
	if s.repl == nil || s.repl.backfill == nil {
		return 0
	}
	return s.repl.backfill.Pieces.Load()
}
