package session

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
)

// VACUUM (issue #14). PostgreSQL's VACUUM removes dead row versions; in
// Cairn old versions are MVCC versions, which the store's GC queue removes
// in the background once they are older than the GC TTL (gc.ttlseconds)
// and no open transaction reads below them. VACUUM runs that collection
// now, on its tables' spans (every table's without a list): the same GC
// requests at the same threshold (now − TTL, lowered to the protected
// timestamp), so it removes nothing the queue would not remove, only
// sooner. VACUUM VERBOSE reports, per table, what it removed, as INFO
// messages like PostgreSQL's, and how many rows GC repacked (folded a
// packed row and its column entries into one, or rewrote a row packed
// under an older schema version). FULL, FREEZE and the other options change
// nothing more: there is no heap to compact or freeze.
//
// After collecting a table, VACUUM also drops the packing versions of its
// rows that no row uses any more (issue #14, sql/rowenc invariant 5): a
// dropped column stays in the descriptor while a packed row written when
// it existed may survive, since readers need its type to skip its bytes.
// GC repacks such rows under the current version; VACUUM then takes a
// census of the table's primary index (every value kept, at every
// timestamp, intents included: mvcc.Census) and forgets the dropped
// columns only older versions than the oldest it found had
// (catalog.Table.ForgetPackingVersions). That is safe when no transaction
// that read the descriptor from before those drops can still write: the
// descriptor read must be at or below the protected timestamp taken
// before the census (every transaction still open, or started later,
// reads at or above it, so it saw the drops and writes newer versions;
// older ones committed, so the census saw their rows or intents). A
// writer that read the descriptor also validates its stamp at commit.

// GC is what VACUUM asks of the node (server/gc.go implements it).
type GC interface {
	// Collect runs a GC pass over spans now, each at the current threshold
	// of the tablets holding it, and reports what it removed.
	Collect(ctx context.Context, spans []kvpb.Span) (GCResult, error)
	// Census reads every value kept in spans (mvcc.Census) and returns
	// the lowest packed-row version per owner, with a protected timestamp
	// taken before it began (kv.DB.ProtectedTimestamp, cluster-wide).
	Census(ctx context.Context, spans []kvpb.Span) (CensusResult, error)
}

// GCResult is what a GC pass did: the old versions it removed and their
// bytes (net of what repacking wrote), and the rows it repacked.
type GCResult struct {
	Versions, Bytes, Repacked int64
}

// CensusResult is GC.Census's answer.
type CensusResult struct {
	Protected hlc.Timestamp
	Owners    []kvpb.PackedCensus
}

// vacuumTarget is one relation VACUUM collects (spans nil: skip).
type vacuumTarget struct {
	name  string
	id    catalog.ID
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
			s.notice(w, "INFO", "00000", fmt.Sprintf("finished vacuuming %s: removed %d old row versions (%d bytes), repacked %d rows", t.name, res.Versions, res.Bytes, res.Repacked))
		}
	}
	ids := make([]catalog.ID, 0, len(targets))
	for _, t := range targets {
		if t.id != 0 {
			ids = append(ids, t.id)
		}
	}
	if all {
		var err error
		if ids, err = s.tablesWithDroppedColumns(ctx); err != nil {
			return err
		}
	}
	for _, id := range ids {
		f, err := s.forgetPackingVersions(ctx, gc, id)
		if err != nil {
			return fmt.Errorf("dropping unused packing versions of table %d: %w", id, err)
		}
		if verbose && len(f.columns) > 0 {
			s.notice(w, "INFO", "00000", fmt.Sprintf("%q: dropped the packing versions before %d (no row uses them): forgot %d dropped columns", f.table, f.oldest, len(f.columns)))
		}
	}
	return nil
}

// tablesWithDroppedColumns lists the tables of every database that still
// remember a dropped column.
func (s *Session) tablesWithDroppedColumns(ctx context.Context) ([]catalog.ID, error) {
	var ids []catalog.ID
	err := s.b.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		ids = ids[:0]
		r := catalog.NewReader(txn, s.b.cache)
		dbs, err := r.Databases(ctx)
		if err != nil {
			return err
		}
		for _, db := range dbs {
			schemas, err := r.Schemas(ctx, db.ID)
			if err != nil {
				return err
			}
			for _, sc := range schemas {
				rels, err := r.Relations(ctx, db.ID, sc.ID)
				if err != nil {
					return err
				}
				for _, d := range rels {
					if t, ok := d.(*catalog.Table); ok && len(t.DroppedColumns) > 0 {
						ids = append(ids, t.ID)
					}
				}
			}
		}
		return nil
	})
	return ids, err
}

// forgotten is what forgetPackingVersions did to one table.
type forgotten struct {
	table   string
	oldest  uint32
	columns []rowenc.ColumnID
}

// forgetPackingVersions drops the packing versions of table id that no
// row uses any more (see the file comment for why it is safe).
func (s *Session) forgetPackingVersions(ctx context.Context, gc GC, id catalog.ID) (forgotten, error) {
	// The descriptor whose drops the census may vouch for, and when it
	// was written.
	var d0 *catalog.Table
	var written hlc.Timestamp
	err := s.b.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		kvs, err := txn.Scan(ctx, catalog.DescriptorKey(id), keys.PrefixEnd(catalog.DescriptorKey(id)), 1)
		if err != nil || len(kvs) == 0 {
			return err
		}
		d, err := catalog.Decode(kvs[0].Value)
		if err != nil {
			return err
		}
		d0, _ = d.(*catalog.Table)
		written = kvs[0].Timestamp
		return nil
	})
	if err != nil || d0 == nil || len(d0.DroppedColumns) == 0 {
		return forgotten{}, err
	}
	l, err := d0.Layout()
	if err != nil {
		return forgotten{}, nil // a table rowenc cannot lay out has no rows GC repacked
	}
	census, err := gc.Census(ctx, []kvpb.Span{l.IndexSpan(&l.Primary)})
	if err != nil {
		return forgotten{}, err
	}
	if census.Protected.Less(written) {
		// A transaction open since before the descriptor was written may
		// have read an older one; the next VACUUM will see.
		return forgotten{table: d0.Name}, nil
	}
	oldest := d0.RowFormat.SchemaVersion
	owner := l.PrimaryCensusOwner()
	for _, c := range census.Owners {
		if bytes.Equal(c.Owner, owner) {
			oldest = min(oldest, c.MinVersion)
		}
	}
	var out forgotten
	var txns []*kv.Txn
	err = s.b.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		txns = append(txns, txn)
		out = forgotten{}
		w := catalog.NewWriter(txn, s.b.cache)
		cur, err := w.TableByID(ctx, id)
		if err != nil || cur.Move != nil {
			return err // a moving table changes only through its job
		}
		nt, err := catalog.Clone(cur)
		if err != nil {
			return err
		}
		// Only drops d0 already had are vouched for (a column dropped
		// since may be in rows written after the census).
		out = forgotten{table: nt.Name, oldest: oldest, columns: nt.ForgetPackingVersions(oldest)}
		if len(out.columns) == 0 {
			return nil
		}
		return w.Update(ctx, nt)
	})
	w := catalog.NewWriter(nil, s.b.cache)
	for _, t := range txns {
		w.EndDDL(t)
	}
	return out, err
}
