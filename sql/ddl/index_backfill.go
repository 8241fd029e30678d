package ddl

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/jobs"
	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/storage"
)

// The online build's backfill (index_job.go, step 3):
//
//	tablets of the table ──► readers (≤ backfillReaders at once), one
//	    piece per tablet, ScanAt(T_b) pages, rows → index entries
//	         │ batches of entries over a channel
//	         ▼
//	rowcontainer.Sorter (the executor's external merge sort: in memory up
//	    to IndexBuildMemory, sorted runs spilled to temporary files,
//	    k-way merge)
//	         │ the entries in key order
//	         ▼
//	adjacent keys equal ⇒ 23505; SSTs of versions at T_b cut at target
//	    tablets' bounds and at backfillSSTBytes
//	         │
//	         ▼
//	writers (≤ backfillWriters at once): AddSSTable, one tablet each,
//	    through its raft log; every replica ingests the SST
//
// Every entry is read at T_b (the backfill transaction's read timestamp,
// kept open so GC spares it) and written at T_b; see index_job.go for why
// that is exact under concurrent writers.

// IndexBuildMemory is what one build's sort may hold in memory before it
// spills (PostgreSQL's maintenance_work_mem default). A variable so that
// tests can make it spill.
var IndexBuildMemory int64 = 64 << 20

// backfillReaders bounds the build's parallel tablet reads.
var backfillReaders = max(2, min(runtime.GOMAXPROCS(0), 8))

// backfillWriters bounds the SSTs being ingested at once: one replicated
// while the next is sent. More gain little when, as usual, a fresh
// index's entries all go to its one tablet (whose raft log takes them one
// at a time), and two SSTs of backfillSSTBytes stay under raft's bound on
// a group's uncommitted entries (64 MiB, raftnode), past which it drops
// proposals.
const backfillWriters = 2

// progressEvery is how often the backfill writes its progress and checks
// for CANCEL JOB (besides watchCancel's checks, as often).
var progressEvery = jobs.HeartbeatEvery / 4

// entryBatch is how many entries a reader hands the sorter at once.
const entryBatch = 512

// backfillStats says what one backfill did (tests and EXPLAIN of builds).
type backfillStats struct {
	pieces, runs, ssts int
	entries            int64

	mu sync.Mutex
	// nodes counts the pieces read on each node (0: a node outside a
	// cluster), as the readers report it (index_backfill_dist.go).
	nodes map[uint64]int
	// fellBack counts remote pieces read here after their fragment
	// failed (index_backfill_dist.go, invariant 1).
	fellBack atomic.Int64
}

// lastBackfill is the stats of the last backfill on this node (tests).
var lastBackfill atomic.Pointer[backfillStats]

// backfill writes the entry of every row of t as of the backfill
// timestamp.
func (b *indexBuild) backfill(ctx context.Context, t *catalog.Table) error {
	layout, err := t.Layout()
	if err != nil {
		return err
	}
	il := layout.Index(uint32(b.indexID))
	if il == nil {
		return fmt.Errorf("ddl: index %d of table %q missing from its layout", b.indexID, t.Name)
	}
	pred := t.IndexByID(b.indexID).Predicate
	return b.e.x.DB.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		// The transaction only holds T_b against GC; the reads go
		// around it, tablet by tablet in parallel.
		txn.ExemptFromDrain()
		ts := txn.ReadTimestamp()
		b.progress.TuplesDone = 0
		return b.sortedBackfill(ctx, t, layout, il, pred, ts)
	})
}

// tabletPieces cuts span at the bounds of the tablets it covers.
func tabletPieces(ctx context.Context, db *kv.DB, span kvpb.Span) ([]kvpb.Span, error) {
	var out []kvpb.Span
	for k := span.Key; bytes.Compare(k, span.EndKey) < 0; {
		d, err := db.TabletCache().Lookup(ctx, k, false)
		if err != nil {
			return nil, fmt.Errorf("looking up the tablet of %q: %w", k, err)
		}
		end := span.EndKey
		if len(d.EndKey) > 0 && bytes.Compare(d.EndKey, end) < 0 {
			end = d.EndKey
		}
		if bytes.Compare(end, k) <= 0 {
			return nil, fmt.Errorf("tablet %d ends at %q, at or before %q", d.TabletID, d.EndKey, k)
		}
		out = append(out, kvpb.Span{Key: k, EndKey: end})
		k = end
	}
	return out, nil
}

func (b *indexBuild) sortedBackfill(ctx context.Context, t *catalog.Table, layout *rowenc.TableLayout, il *rowenc.IndexLayout,
	predText string, ts hlc.Timestamp) error {
	pieces, self, err := b.planPieces(ctx, layout, predText, ts)
	if err != nil {
		return err
	}
	stats := &backfillStats{pieces: len(pieces)}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	// Readers: one piece each, at most backfillReaders at once per node
	// (index_backfill_dist.go).
	entries := make(chan [][]types.Datum, backfillReaders*2)
	var readErr error
	var readOnce sync.Once
	fail := func(err error) {
		readOnce.Do(func() { readErr = err; cancel(err) })
	}
	var done atomic.Int64
	go func() {
		if err := b.readPieces(ctx, t, layout, il, predText, ts, pieces, self, entries, &done, stats); err != nil {
			fail(err)
		}
		close(entries)
	}()

	// The sort: the executor's external sorter over (key, value) rows,
	// one per reader up to backfillReaders (index_backfill_sort.go).
	sorter := b.newEntrySort(ctx, min(backfillReaders, len(pieces)), string(layout.IndexSpan(il).Key), fail)
	defer sorter.Close()
	lastReport := int64(0)
	var lastWrite time.Time
	for batch := range entries {
		if ctx.Err() != nil {
			continue // draining after a failure
		}
		if err := sorter.Add(ctx, batch); err != nil {
			fail(err)
		}
		n := done.Load()
		if n-lastReport < backfillPageKVs {
			continue
		}
		lastReport = n
		// The progress is a write of the job record and the cancel
		// check a read of its cancel key, each a KV round (the write a
		// raft round and a sync): per page they were 500 of each in a
		// 1M-row build, on the goroutine that feeds the sort. They run
		// at most every progressEvery (watchCancel checks as often).
		// A test's page hook may wait at a page, so with one installed
		// every page writes and checks, as before.
		h := indexTestingHooks.afterPage
		if h == nil && time.Since(lastWrite) < progressEvery {
			continue
		}
		lastWrite = time.Now()
		b.progress.TuplesDone = n
		b.writeProgress(ctx)
		if h != nil {
			if err := h(b.job.ID(), n); err != nil {
				fail(err)
			}
		}
		if ok, err := b.job.CancelRequested(ctx); err == nil && ok {
			b.cancel(errJobCanceled)
			fail(context.Cause(ctx))
		}
	}
	if readErr != nil {
		return readErr
	}
	if err := context.Cause(ctx); err != nil {
		return err
	}
	b.progress.TuplesDone = done.Load()
	b.writeProgress(ctx)
	if h := indexTestingHooks.afterPage; h != nil {
		if err := h(b.job.ID(), b.progress.TuplesDone); err != nil {
			return err
		}
	}
	it, err := sorter.Sort(ctx)
	if err != nil {
		return err
	}
	defer it.Close()
	stats.runs = sorter.SortedRuns()

	// Writers: one SST (one tablet's keys) each, at most
	// backfillWriters at once.
	writes := make(chan *storage.SSTBuilder, backfillWriters)
	var writeErr error
	var writeOnce sync.Once
	var wwg sync.WaitGroup
	for range backfillWriters {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for sb := range writes {
				if ctx.Err() != nil {
					continue
				}
				if err := b.ingest(ctx, sb, ts); err != nil {
					writeOnce.Do(func() { writeErr = fmt.Errorf("writing index %q: %w", il.Name, err); cancel(writeErr) })
				}
			}
		}()
	}
	err = b.cutSSTs(ctx, layout, it, ts, writes, stats)
	close(writes)
	wwg.Wait()
	if writeErr != nil {
		return writeErr
	}
	if err != nil {
		return err
	}
	lastBackfill.Store(stats)
	return nil
}

// backfillSSTBytes is the most entry bytes (keys and values, before
// compression) one SST of a backfill holds, as for a sorted bulk load
// (kv.SortedSSTBytes): large enough that an ingestion's fixed costs (a
// raft round, a file, a manifest edit on every replica) are spread over
// many entries and that later scans of the index open few files (seeks,
// on an hdd), small enough to travel inline in a raft entry (tablet's
// maxSSTSize, 32 MiB) with room for the SST's own blocks.
var backfillSSTBytes = kv.SortedSSTBytes

// ingest finishes sb and ingests it at ts (kv.DB.AddSSTable): the SST
// travels through the raft log of its tablet and every replica links it
// into its engine. A tablet that split since the SST was cut gets its
// part of it (the DistSender cuts it again at the new bounds).
func (b *indexBuild) ingest(ctx context.Context, sb *storage.SSTBuilder, ts hlc.Timestamp) error {
	first, last := sb.Bounds()
	start, end := append([]byte(nil), first...), keys.Next(last)
	data, err := sb.Finish()
	if err != nil {
		return err
	}
	if h := indexTestingHooks.beforeIngest; h != nil {
		if err := h(b.job.ID(), start, end); err != nil {
			return err
		}
	}
	if _, err := b.e.x.DB.AddSSTable(ctx, start, end, data, ts); err != nil {
		return err
	}
	return nil
}

// cutSSTs walks the sorted entries, fails on two equal keys (a duplicate
// in a unique index: other indexes' keys end with the primary key), and
// hands the writers SSTs of the entries as committed versions at ts, each
// within one target tablet and at most backfillSSTBytes.
func (b *indexBuild) cutSSTs(ctx context.Context, layout *rowenc.TableLayout, it rowcontainer.Iterator, ts hlc.Timestamp,
	writes chan<- *storage.SSTBuilder, stats *backfillStats) error {
	db := b.e.x.DB
	var prev []byte
	var sb *storage.SSTBuilder
	var end []byte // the current SST's tablet's end key
	flush := func() error {
		if sb == nil || sb.Count() == 0 {
			return nil
		}
		select {
		case writes <- sb:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		stats.ssts++
		sb = nil
		return nil
	}
	for {
		row, err := it.Next(ctx)
		if err != nil {
			return err
		}
		if row == nil {
			break
		}
		k, v := []byte(row[0].(types.DBytes)), []byte(row[1].(types.DBytes))
		if prev != nil && bytes.Equal(prev, k) {
			return uniqueBuildError(layout.ConvertWriteError(&kvpb.ConditionFailedError{Key: k}))
		}
		prev = k
		stats.entries++
		if sb != nil && (sb.DataBytes() >= backfillSSTBytes || (len(end) > 0 && bytes.Compare(k, end) >= 0)) {
			if err := flush(); err != nil {
				return err
			}
		}
		if sb == nil {
			sb = storage.NewSSTBuilder()
			d, err := db.TabletCache().Lookup(ctx, k, false)
			if err != nil {
				return fmt.Errorf("looking up the tablet of %q: %w", k, err)
			}
			end = d.EndKey
		}
		if err := mvcc.PutSSTVersion(sb, k, ts, v); err != nil {
			return err
		}
	}
	return flush()
}

// readPiece reads one tablet's part of the table at ts, a page at a time,
// on this node, and sends the rows' index entries to out.
func (b *indexBuild) readPiece(ctx context.Context, t *catalog.Table, layout *rowenc.TableLayout, il *rowenc.IndexLayout,
	predText string, ts hlc.Timestamp, piece kvpb.Span, out chan<- [][]types.Datum, done *atomic.Int64) error {
	var pred sem.Evaluator
	if predText != "" {
		var err error
		if pred, err = b.e.compileOverTable(t, predText); err != nil {
			return err
		}
	}
	return readEntries(ctx, b.e.x.DB, t.Name, layout, il, pred, ts, piece, func(batch [][]types.Datum, rows int64) error {
		done.Add(rows)
		if len(batch) == 0 {
			return nil
		}
		select {
		case out <- batch:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
}

// readEntries reads piece of the table at ts through db, a page at a
// time, and hands send the rows' index entries ([key, value] rows for
// the sorter) in batches of about entryBatch, with how many rows were
// read since the last call (a batch may be empty when rows were read
// and yielded no entry: a partial index's, a GIN index's over NULLs).
// send owns each batch. The build's own readers (readPiece) and a
// leaseholder's BackfillProcessor both read this way.
func readEntries(ctx context.Context, db *kv.DB, table string, layout *rowenc.TableLayout, il *rowenc.IndexLayout,
	pred sem.Evaluator, ts hlc.Timestamp, piece kvpb.Span, send func(batch [][]types.Datum, rows int64) error) error {
	ectx := &sem.EvalContext{}
	f, err := rowenc.NewRowFetcher(layout, &layout.Primary, nil)
	if err != nil {
		return err
	}
	// The sorter's rows are built here, on the readers' goroutines:
	// the goroutine feeding the sort is the build's serial part.
	buf := make([][]types.Datum, 0, entryBatch)
	var rows int64
	var ents []rowenc.IndexEntry
	flush := func() error {
		if len(buf) == 0 && rows == 0 {
			return nil
		}
		err := send(buf, rows)
		buf, rows = make([][]types.Datum, 0, entryBatch), 0
		return err
	}
	emit := func(row []types.Datum) error {
		rows++
		if pred != nil {
			v, err := pred(ectx, row)
			if err != nil {
				return err
			}
			if bv, ok := v.(types.DBool); !ok || !bool(bv) {
				return nil
			}
		}
		var err error
		if ents, err = layout.EncodeIndexEntries(ents[:0], il, row); err != nil {
			return err
		}
		for _, ent := range ents {
			buf = append(buf, []types.Datum{types.DBytes(ent.Key), types.DBytes(ent.Value)})
		}
		if len(buf) >= entryBatch {
			return flush()
		}
		return nil
	}
	for start := piece.Key; ; {
		kvs, err := db.ScanAt(ctx, start, piece.EndKey, backfillPageKVs, ts)
		if err != nil {
			return fmt.Errorf("scanning table %q: %w", table, err)
		}
		if err := f.Add(kvs, emit); err != nil {
			return err
		}
		if len(kvs) < backfillPageKVs {
			break
		}
		start = keys.Next(kvs[len(kvs)-1].Key)
	}
	if err := f.Finish(emit); err != nil {
		return err
	}
	return flush()
}

// buildAccountOf is a memory account of one of the build's sorters:
// limit of the node's SQL budget (its own budget on a node without one).
func (b *indexBuild) buildAccountOf(limit int64) *mon.Account {
	if m := b.e.x.Memory; m != nil {
		return m.NewAccount(limit)
	}
	return mon.NewBudget("index build", limit*2).NewAccount(limit)
}

// compareEntries orders entries by key. DBytes is a string: comparing
// the strings costs no copy (converting each to []byte, as this did,
// allocated twice per comparison: a third of a 1M-row build's sort).
func compareEntries(a, b []types.Datum) int {
	return strings.Compare(string(a[0].(types.DBytes)), string(b[0].(types.DBytes)))
}

// entryKeyAfter abbreviates an entry's key to the 8 bytes after prefix,
// the start of the index's span (every entry of the build begins with
// it, so abbreviating it would tell no two entries apart), zero-padded:
// equal abbreviations fall back to compareEntries, so the order is the
// keys' bytewise order. A key without the prefix (none is expected) gets
// no abbreviation; among keys sharing it the abbreviations order as the
// keys do, so the mix stays consistent.
func entryKeyAfter(prefix string) rowcontainer.KeyFunc {
	return func(row []types.Datum) (uint64, bool) {
		k, ok := strings.CutPrefix(string(row[0].(types.DBytes)), prefix)
		if !ok {
			return 0, false
		}
		var b [8]byte
		copy(b[:], k)
		return binary.BigEndian.Uint64(b[:]), true
	}
}
