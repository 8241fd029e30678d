package server

// Garbage collection (issue #14; store/gcqueue.go does the work). The
// server gives the store's GC queue:
//
//   - the GC TTL of each tablet: its zone's gc.ttlseconds (a zone.Cache of
//     the zone records, refreshed before each pass), else --gc-ttl;
//   - the protected timestamp: the lowest read timestamp of an open
//     transaction on this node (kv.DB.ProtectedTimestamp) and, in a
//     replicated cluster, on every other node, each of which publishes its
//     own every pubInterval as a record under the system keys
//     (ptsKey(node)). A record is a lower bound for every transaction its
//     node had open when it wrote it and every one it starts later
//     (kv/protected.go), so a stale record is still safe; a record older
//     than ptsStale (a node gone) is ignored, which can at worst make a
//     transaction of a partitioned node fail with snapshot_too_old.
//
//   - (every bulkSweepInterval) the sweep of failed bulk loads'
//     leftovers (sql/bulkclean);
//   - the row repacker (rowenc.Repacker, mvcc invariant 10): the layouts
//     of every table, read from the descriptors (one scan that never
//     waits for or pushes a DDL holding one) at most every
//     repackRefreshInterval and only when the catalog generation changed
//     since (and before each VACUUM), each with the time
//     this node first saw its current row layout (schema version and
//     primary index), so GC repacks a row only under a schema every
//     reader at or above its threshold already uses;
//
// and runs the queue on every node (each collects the tablets it leads).

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/cairn-db/cairn/clusterversion"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/bulkclean"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/session"
	"github.com/cairn-db/cairn/store"
	"github.com/cairn-db/cairn/zone"
)

const (
	ptsPublishInterval    = time.Second
	ptsStale              = time.Minute
	repackRefreshInterval = 10 * time.Second
	// bulkSweepInterval is how often a node settles the records of bulk
	// loads whose transaction ended without settling them
	// (sql/bulkclean): those of a process that died, at the first round
	// after a restart.
	bulkSweepInterval = 10 * time.Second
)

// gcState is the server's part of GC.
type gcState struct {
	zones  zone.Cache
	repack rowenc.Repacker
	// bulkSwept counts the failed bulk loads the sweep cleared.
	bulkSwept atomic.Int64

	// mu guards the repacker's table refresh.
	mu sync.Mutex
	// tables are the descriptor versions the repacker was last given, and
	// when each was first seen; refreshed when refreshedAt is old.
	tables      map[catalog.ID]repackSeen
	refreshedAt time.Time
	// gen is the catalog generation (catalog.GenerationKey's value) read
	// before the descriptor scan that made tables; scans counts those
	// scans (tests).
	gen   []byte
	scans int
}

type repackSeen struct {
	layout string // repackLayout
	since  hlc.Timestamp
}

// repackLayout is what of a table a repacked row depends on: the row
// schema version (which changes with every ADD and DROP of a stored
// column) and where the primary index's keys are. Other descriptor
// changes (a zone, a grant, a rename) leave it, so they do not hold
// repacking back by another refresh.
func repackLayout(t *catalog.Table) string {
	return fmt.Sprintf("%d/%d/%d/%d/%d", t.RowFormat.SchemaVersion, t.GroupID, t.PrimaryIndex.ID, t.PrimaryIndex.StorageID, len(t.Columns)+len(t.DroppedColumns))
}

// ptsPrefix starts the per-node protected timestamp records.
var ptsPrefix = keys.System([]byte("pts/"))

func ptsKey(node uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), ptsPrefix...), node)
}

// encodePTS is a record: the protected timestamp and the wall time it was
// published at, 20 bytes (big endian), the form of cluster version 1.0;
// from clusterversion.VersionedState a format version byte first
// (clusterversion's format.go), once the version is active: a 1.0 node
// reads only the 20 bytes, and every node reads every node's record.
func (s *Server) encodePTS(p hlc.Timestamp, wall int64) []byte {
	b := make([]byte, 0, 1+ptsLen)
	if s.version.IsActive(clusterversion.VersionedState) {
		b = clusterversion.AppendFormat(b, ptsFormatV1)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(p.WallTime))
	b = binary.BigEndian.AppendUint32(b, uint32(p.Logical))
	return binary.BigEndian.AppendUint64(b, uint64(wall))
}

const (
	// ptsFormatV1 is the newest format of a protected timestamp record
	// this binary reads, and the one it writes once it may.
	ptsFormatV1 = 1
	// ptsLen is the length of its payload (and of the 1.0 form).
	ptsLen = 20
)

func decodePTS(b []byte) (hlc.Timestamp, int64, error) {
	_, p, err := clusterversion.SplitFormat("a protected timestamp record", b, ptsFormatV1)
	if err != nil {
		return hlc.Timestamp{}, 0, err
	}
	if len(p) != ptsLen {
		return hlc.Timestamp{}, 0, fmt.Errorf("protected timestamp record of %d bytes", len(b))
	}
	return hlc.Timestamp{WallTime: int64(binary.BigEndian.Uint64(p)), Logical: int32(binary.BigEndian.Uint32(p[8:]))},
		int64(binary.BigEndian.Uint64(p[12:])), nil
}

// gcConfig adds the GC queue's settings to a store's config.
func (s *Server) gcConfig(c store.Config) store.Config {
	c.GCTTL = s.gcTTL
	c.GCProtected = s.protectedTimestamp
	c.GCRepacker = &s.gc.repack
	return c
}

// refreshRepackTables gives the repacker every table's layout, unless it
// did so less than repackRefreshInterval ago (force: whatever the age). A
// table whose row layout changed (repackLayout; or that is new) is stamped
// with a timestamp taken after the read, which is at or above the change's
// commit: since then, every reader of the table uses that layout or a
// newer one.
func (s *Server) refreshRepackTables(ctx context.Context, force bool) error {
	g := &s.gc
	g.mu.Lock()
	defer g.mu.Unlock()
	if !force && time.Since(g.refreshedAt) < repackRefreshInterval {
		return nil
	}
	// Every DDL rewrites the catalog generation, so while it reads as it
	// did before the last scan the descriptors are those the scan read,
	// and no layout can have changed: the scan, every descriptor read and
	// decoded, is skipped (with 10,000 tables it was a third of an idle
	// node's CPU; issue 16, bench/ddl). The generation is read before
	// the descriptors, so a DDL between the two makes the next refresh
	// scan again.
	gb := &kv.Batch{WaitPolicy: kvpb.WaitError}
	gb.Get(catalog.GenerationKey())
	if err := s.db.Run(ctx, gb); err != nil {
		return fmt.Errorf("gc: reading the catalog generation: %w", err)
	}
	var gen []byte
	if r := gb.Results[0]; r.Found && len(r.Rows) == 1 {
		gen = r.Rows[0].Value
	}
	if !force && gen != nil && bytes.Equal(gen, g.gen) {
		g.refreshedAt = time.Now()
		return nil
	}
	g.scans++
	// One non-transactional scan of the descriptors that never waits for
	// (nor pushes) a transaction holding one: a DDL or a COPY's bulk load
	// pushed above its own committed writes fails (40001), and a refresh
	// can simply wait for the next round.
	prefix := keys.System([]byte("d/"))
	b := &kv.Batch{WaitPolicy: kvpb.WaitError}
	b.Scan(prefix, keys.PrefixEnd(prefix), 0)
	var tables []*catalog.Table
	err := s.db.Run(ctx, b)
	if err == nil {
		for _, row := range b.Results[0].Rows {
			d, derr := catalog.Decode(row.Value)
			if derr != nil {
				err = derr
				break
			}
			if t, ok := d.(*catalog.Table); ok {
				tables = append(tables, t)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("gc: reading tables for repacking: %w", err)
	}
	now := s.db.Clock().Now()
	seen := make(map[catalog.ID]repackSeen, len(tables))
	var out []rowenc.RepackTable
	for _, t := range tables {
		l, err := t.Layout()
		if err != nil {
			continue // a table rowenc cannot lay out has no rows to repack
		}
		st, ok := g.tables[t.ID]
		if lay := repackLayout(t); !ok || st.layout != lay {
			st = repackSeen{layout: lay, since: now}
		}
		seen[t.ID] = st
		out = append(out, rowenc.RepackTable{Layout: l, Since: st.since})
	}
	g.repack.SetTables(out)
	g.tables, g.refreshedAt, g.gen = seen, time.Now(), gen
	return nil
}

// gcTTL is store.Config.GCTTL.
func (s *Server) gcTTL(start []byte) time.Duration {
	if c, ok := s.gc.zones.Lookup(start); ok && c.GCTTLSeconds > 0 {
		return time.Duration(c.GCTTLSeconds) * time.Second
	}
	if s.cfg.GCTTL > 0 {
		return s.cfg.GCTTL
	}
	return store.DefaultGCTTL
}

// protectedTimestamp is store.Config.GCProtected (see the file comment).
func (s *Server) protectedTimestamp(ctx context.Context) (hlc.Timestamp, error) {
	if s.db == nil {
		return hlc.Timestamp{}, fmt.Errorf("protected timestamp: the node is not serving yet")
	}
	p := s.db.ProtectedTimestamp()
	if s.repl == nil {
		return p, nil
	}
	return s.clusterMin(ctx, "protected timestamp", ptsPrefix, p, nil)
}

// clusterMin is the lowest of p (this node's own value) and the records
// the nodes published under prefix (encodePTS), leaving out a record
// older than ptsStale (its node stopped publishing it) and the one at own
// (nil: none), whose fresher value p is.
func (s *Server) clusterMin(ctx context.Context, what string, prefix []byte, p hlc.Timestamp, own []byte) (hlc.Timestamp, error) {
	rows, err := s.db.Scan(ctx, prefix, keys.PrefixEnd(prefix), 0)
	if err != nil {
		return hlc.Timestamp{}, fmt.Errorf("reading %s records: %w", what, err)
	}
	now := s.db.Clock().Now().WallTime
	for _, kv := range rows {
		if own != nil && bytes.Equal(kv.Key, own) {
			continue
		}
		ts, wall, err := decodePTS(kv.Value)
		if err != nil {
			return hlc.Timestamp{}, err
		}
		if now-wall > ptsStale.Nanoseconds() {
			continue
		}
		if ts.Less(p) {
			p = ts
		}
	}
	return p, nil
}

// startGCQueue runs the store's GC queue, and in a replicated cluster
// publishes this node's protected timestamp, until ctx ends.
func (s *Server) startGCQueue(ctx context.Context) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(ptsPublishInterval)
		defer t.Stop()
		var swept time.Time // the first round sweeps what a crash left
		for {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := s.gc.zones.Refresh(rctx, s.backgroundScan); err != nil && ctx.Err() == nil {
				s.log.Debug("cairn: gc: reading zone records", "err", err)
			}
			if s.repl != nil {
				p := s.db.ProtectedTimestamp()
				if err := s.db.Put(rctx, ptsKey(s.nodeID()), s.encodePTS(p, s.db.Clock().Now().WallTime)); err != nil && ctx.Err() == nil {
					s.log.Debug("cairn: gc: publishing the protected timestamp", "err", err)
				}
				s.publishDrainTimestamp(rctx)
			}
			s.resumeOrphanedJobs(ctx)
			if err := s.refreshRepackTables(rctx, false); err != nil && ctx.Err() == nil {
				s.log.Debug("cairn: gc: reading tables", "err", err)
			}
			if time.Since(swept) >= bulkSweepInterval {
				swept = time.Now()
				if n, err := bulkclean.Sweep(rctx, s.db); err != nil && ctx.Err() == nil {
					s.log.Debug("cairn: gc: sweeping failed bulk loads", "err", err)
				} else if n > 0 {
					s.gc.bulkSwept.Add(int64(n))
					s.log.Info("cairn: gc: cleared the storage of failed bulk loads", "loads", n)
				}
			}
			cancel()
			s.store.GCPass(ctx, false)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// gcRunner is session.GC: VACUUM's pass, sent through the DB so it
// reaches every tablet's leaseholder wherever it is.
type gcRunner struct{ s *Server }

// Collect runs GC over spans tablet by tablet, each at the threshold the
// GC queue would use for that tablet now, in bounded requests.
func (g gcRunner) Collect(ctx context.Context, spans []kvpb.Span) (session.GCResult, error) {
	s := g.s
	var res session.GCResult
	if err := s.gc.zones.Refresh(ctx, s.db.Scan); err != nil {
		return res, err
	}
	if err := s.refreshRepackTables(ctx, true); err != nil {
		return res, err
	}
	for _, sp := range spans {
		for from := sp.Key; bytes.Compare(from, sp.EndKey) < 0; {
			// From the directory, not the cache: a descriptor the cache
			// kept from before a split (a bulk load's traffic never
			// corrects it) has the parent's start key, whose zone would
			// give the parent's TTL.
			d, err := s.db.TabletCache().Lookup(ctx, from, false)
			if err != nil {
				return res, err
			}
			s.db.TabletCache().Evict(d)
			if d, err = s.db.TabletCache().Lookup(ctx, from, false); err != nil {
				return res, err
			}
			end := sp.EndKey
			if bytes.Compare(d.EndKey, end) < 0 {
				end = d.EndKey
			}
			if bytes.Compare(end, from) <= 0 {
				return res, fmt.Errorf("vacuum: tablet %s does not hold key %q", &d, from)
			}
			th, err := s.store.GCThresholdFor(ctx, d.StartKey)
			if err != nil {
				return res, err
			}
			for at := from; at != nil; {
				ba := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: s.db.Clock().Now()}}
				ba.Add(&kvpb.GCRequest{Key: at, EndKey: end, Threshold: th, MaxVersions: 1000})
				br, err := s.db.Send(ctx, ba)
				if err != nil {
					return res, err
				}
				r := br.Responses[0].(*kvpb.GCResponse)
				res.Versions += int64(r.Removed)
				res.Bytes += r.RemovedBytes
				res.Repacked += int64(r.Repacked)
				at = r.ResumeKey
			}
			from = end
		}
	}
	return res, nil
}

// Census is session.GC's census: a protected timestamp taken first, then
// census requests (kvpb.GCRequest.Census) over spans, in bounded pieces,
// merged per owner.
func (g gcRunner) Census(ctx context.Context, spans []kvpb.Span) (session.CensusResult, error) {
	s := g.s
	var res session.CensusResult
	p, err := s.protectedTimestamp(ctx)
	if err != nil {
		return res, err
	}
	res.Protected = p
	for _, sp := range spans {
		for at := sp.Key; at != nil; {
			ba := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: s.db.Clock().Now()}}
			ba.Add(&kvpb.GCRequest{Key: at, EndKey: sp.EndKey, Census: true, MaxVersions: 10000})
			br, err := s.db.Send(ctx, ba)
			if err != nil {
				return res, fmt.Errorf("census of [%q, %q): %w", at, sp.EndKey, err)
			}
			r := br.Responses[0].(*kvpb.GCResponse)
			res.Owners = kvpb.MergeCensus(res.Owners, r.Census...)
			at = r.ResumeKey
		}
	}
	return res, nil
}

// gcSizes serves GET /api/gc/sizes: this node's MVCC sizes by a scan of
// the tablets it leads (store.MeasureGC), as JSON.
func (s *Server) gcSizes(w http.ResponseWriter, r *http.Request) {
	sz, err := s.store.MeasureGC(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int64{"live_bytes": sz.LiveBytes, "total_bytes": sz.TotalBytes,
		"garbage_bytes": sz.GarbageBytes, "tablets": int64(sz.Tablets)})
}
