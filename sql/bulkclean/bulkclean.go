// Package bulkclean removes the leftovers of failed bulk loads (issue
// #14). A bulk load (COPY and INSERT ... SELECT on sql/exec's bulk path,
// an index backfill or a rewrite in sql/ddl) writes committed values into
// fresh storage that only its transaction's new descriptor version names. If the transaction does not commit that
// version (an error at row N, a killed connection, a rollback, a rollback
// to a savepoint taken before the load, a retry's earlier attempt), the
// values are unreachable, and GC never removes them: they are each key's
// newest version, not shadowed by anything. So:
//
//  1. Before its first row, the load writes a record, outside its
//     transaction and durably (a plain put), naming the table, the fresh
//     storage IDs and their spans, its transaction and the node and
//     process (kv.DB.Incarnation) running it: loadKey.
//  2. When the transaction ends either way (kv.Txn.OnFinish), the load
//     settles: it reads the table's descriptor as committed now; if no
//     index of it names the fresh storage, nothing can ever name it (the
//     IDs are never handed out again, and the transaction that could have
//     committed them has ended), so it clears the spans with range
//     deletions (kv.DB.ClearRange: every version, nothing left for GC);
//     then it deletes the record. A committed load's storage is named and
//     stays.
//  3. A process that ends mid-load runs no OnFinish. Every node sweeps
//     its own records (Sweep, from the server's GC loop):
//     one written by another incarnation of the node belongs to a
//     transaction that ended with its process, and one of this
//     incarnation whose transaction is no longer open missed its settle
//     (it failed); both are settled as in 2. Records of a node that never
//     comes back stay until DROP TABLE clears the table's keyspace, which
//     covers every storage ID it ever had.
//
// A settle that clears storage a later committed DDL replaced (a TRUNCATE
// in the same transaction) does what that DDL's own clear does, no more.
// The local indexes of a hash-partitioned table spread over buckets: their
// fresh storage is cleared bucket by bucket, for the buckets that hold
// keys.
//
// It reads descriptors (sql/catalog) and clears table data through the KV
// client; it writes no descriptor. Invariants:
//
//  1. A record exists, durably, before the first value of a load is
//     written (Record is called before the first bulk write).
//  2. Storage is cleared only when its load's transaction has ended and
//     the committed descriptor names none of it (server's
//     TestFailedBulkLoadLeavesNothing and TestBulkLoadCrash).
package bulkclean

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
)

// loadPrefix starts the records of bulk loads in flight.
var loadPrefix = keys.System([]byte("bulkload/"))

// loadNodePrefix starts node's records.
func loadNodePrefix(node uint64) []byte {
	return binary.BigEndian.AppendUint64(bytes.Clone(loadPrefix), node)
}

// loadKey is the record of the load into storage (a fresh primary
// storage ID, unique forever) by incarnation inc of node.
func loadKey(node uint64, inc uuid.UUID, storage uint32) []byte {
	k := append(loadNodePrefix(node), inc[:]...)
	return binary.BigEndian.AppendUint32(k, storage)
}

// loadRecord is what a load records before writing.
type loadRecord struct {
	Table       catalog.ID `json:"table"`
	Storage     []uint32   `json:"storage"`
	Txn         uuid.UUID  `json:"txn"`
	Incarnation uuid.UUID  `json:"incarnation"`
	// Spans are the fresh storage's exact spans; Bucketed the storage
	// IDs of local indexes of a hash-partitioned table, in Group.
	Spans    []kvpb.Span `json:"spans"`
	Group    uint64      `json:"group,omitempty"`
	Bucketed []uint32    `json:"bucketed,omitempty"`
}

// Record writes the record of a load by txn into the fresh storage IDs
// storage of t's indexes (step 1) and registers its settle (step 2). It
// must run before the load's first value is written.
func Record(ctx context.Context, txn *kv.Txn, t *catalog.Table, storage []uint32) error {
	db := txn.DB()
	l, err := t.Layout()
	if err != nil {
		return fmt.Errorf("table %q: %w", t.Name, err)
	}
	rec := loadRecord{Table: t.ID, Txn: txn.ID(), Incarnation: db.Incarnation(), Group: l.GroupID}
	for _, idx := range append([]*rowenc.IndexLayout{&l.Primary}, indexLayoutPtrs(l.Secondary)...) {
		id := idx.KeyID
		if id == 0 {
			id = idx.ID
		}
		if !slices.Contains(storage, id) {
			continue
		}
		rec.Storage = append(rec.Storage, id)
		if idx.Local && l.HashColumns > 0 {
			rec.Bucketed = append(rec.Bucketed, id)
			continue
		}
		rec.Spans = append(rec.Spans, l.IndexBucketSpan(idx, 0))
	}
	if len(rec.Storage) == 0 || len(rec.Storage) != len(storage) {
		return fmt.Errorf("bulkclean: table %q has indexes with storage %v of %v", t.Name, rec.Storage, storage)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	key := loadKey(db.NodeID(), rec.Incarnation, rec.Storage[0])
	if err := db.Put(ctx, key, b); err != nil {
		return fmt.Errorf("recording the bulk load into %q: %w", t.Name, err)
	}
	txn.OnFinish(func(ctx context.Context) {
		// A failure leaves the record for the sweep.
		_, _ = settleLoad(ctx, db, key, rec)
	})
	return nil
}

func indexLayoutPtrs(xs []rowenc.IndexLayout) []*rowenc.IndexLayout {
	out := make([]*rowenc.IndexLayout, len(xs))
	for i := range xs {
		out[i] = &xs[i]
	}
	return out
}

// settleLoad is step 2 for the record at key, whose transaction has
// ended: it clears the fresh storage unless the table names it, then
// deletes the record. It reports whether it cleared.
func settleLoad(ctx context.Context, db *kv.DB, key []byte, rec loadRecord) (cleared bool, err error) {
	var named bool
	err = db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		named = false
		v, ok, err := txn.Get(ctx, catalog.DescriptorKey(rec.Table))
		if err != nil || !ok {
			return err // dropped: nothing names it
		}
		d, err := catalog.Decode(v)
		if err != nil {
			return err
		}
		t, ok := d.(*catalog.Table)
		if !ok {
			return nil
		}
		for _, idx := range append([]catalog.Index{t.PrimaryIndex}, t.Indexes...) {
			id := idx.StorageID
			if id == 0 {
				id = uint32(idx.ID)
			}
			named = named || slices.Contains(rec.Storage, id)
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("settling the bulk load into table %d: %w", rec.Table, err)
	}
	if !named {
		for _, sp := range rec.Spans {
			if err := db.ClearRange(ctx, sp.Key, sp.EndKey); err != nil {
				return false, fmt.Errorf("clearing a failed bulk load of table %d: %w", rec.Table, err)
			}
		}
		if err := clearBucketed(ctx, db, rec); err != nil {
			return false, err
		}
	}
	if err := db.Delete(ctx, key); err != nil {
		return !named, fmt.Errorf("deleting the record of a bulk load of table %d: %w", rec.Table, err)
	}
	return !named, nil
}

// clearBucketed clears the bucketed fresh storage of rec, in each bucket
// of its group where it holds a key. It finds those buckets with one
// one-key scan of each bucket's span of each bucketed storage ID, sent
// scanBatch at a time (each batch cut per tablet and read in parallel),
// and clears them with kv.DB.ClearRanges. Walking the group instead (the
// next key of anything, then its bucket's spans) cost a scan and a
// range deletion, one after the other, for every bucket holding a key of
// any table: with tens of thousands of buckets loaded, or a group shared
// with a table holding rows, a failed load took minutes to clear.
func clearBucketed(ctx context.Context, db *kv.DB, rec loadRecord) error {
	if len(rec.Bucketed) == 0 {
		return nil
	}
	spans := make([]kvpb.Span, 0, rowenc.NumBuckets*len(rec.Bucketed))
	for b := range rowenc.NumBuckets {
		for _, id := range rec.Bucketed {
			pre := rowenc.EncodeTableIndexPrefix(binary.BigEndian.AppendUint16(rowenc.GroupPrefix(nil, rec.Group), uint16(b)), uint32(rec.Table), id)
			spans = append(spans, kvpb.Span{Key: pre, EndKey: keys.PrefixEnd(pre)})
		}
	}
	var full []kvpb.Span
	for len(spans) > 0 {
		n := min(len(spans), scanBatch)
		b := &kv.Batch{}
		for _, sp := range spans[:n] {
			b.Scan(sp.Key, sp.EndKey, 1)
		}
		if err := db.Run(ctx, b); err != nil {
			return fmt.Errorf("finding the buckets of a failed bulk load of table %d: %w", rec.Table, err)
		}
		for i, r := range b.Results {
			if len(r.Rows) > 0 {
				full = append(full, spans[i])
			}
		}
		spans = spans[n:]
	}
	if err := db.ClearRanges(ctx, full); err != nil {
		return fmt.Errorf("clearing a failed bulk load of table %d: %w", rec.Table, err)
	}
	return nil
}

// scanBatch is how many one-key scans clearBucketed sends in one batch.
const scanBatch = 8192

// Sweep is step 3 on db's node: it settles the records of
// loads whose transaction ended without settling them, and returns how
// many loads' storage it cleared.
func Sweep(ctx context.Context, db *kv.DB) (int, error) {
	p := loadNodePrefix(db.NodeID())
	kvs, err := db.Scan(ctx, p, keys.PrefixEnd(p), 0)
	if err != nil {
		return 0, fmt.Errorf("reading bulk load records: %w", err)
	}
	n := 0
	for _, e := range kvs {
		var rec loadRecord
		if err := json.Unmarshal(e.Value, &rec); err != nil {
			return n, fmt.Errorf("bulk load record %q: %w", e.Key, err)
		}
		if rec.Incarnation == db.Incarnation() && db.TxnOpen(rec.Txn) {
			continue // in flight
		}
		cleared, err := settleLoad(ctx, db, e.Key, rec)
		if err != nil {
			return n, err
		}
		if cleared {
			n++
		}
	}
	return n, nil
}
