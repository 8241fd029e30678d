package ddl

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
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
//	    piece per tablet (sub-spans of it when the node has fewer pieces
//	    than readers, index_backfill_subspan.go), ScanAt(T_b) pages,
//	    rows → index entries
//	         │ batches of entries over a channel
//	         ▼
//	rowcontainer.EntrySorter (the executor's external merge sort, for
//	    rows that are bytes: entries copied into an arena, in memory up
//	    to the build's budget, sorted runs spilled to temporary files,
//	    k-way merge; keys compared bytewise, abbreviated past the
//	    index's prefix)
//	         │ the entries in key order
//	         ▼
//	adjacent keys equal ⇒ 23505; SSTs of versions at T_b cut at target
//	    tablets' bounds and at backfillSSTBytes (from several key ranges
//	    at once when all in memory, index_backfill_cut.go)
//	         │ batches of each SST's entries
//	         ▼
//	a goroutine per SST (≤ sstsBuilding at once) builds it, then
//	    AddSSTable (≤ backfillWriters at once), one tablet each, through
//	    its raft log; every replica ingests the SST
//	    (index_backfill_write.go)
//
// Every entry is read at T_b (the backfill transaction's read timestamp,
// kept open so GC spares it) and written at T_b; see index_job.go for why
// that is exact under concurrent writers.

// IndexBuildMemory is the most one build's sort holds in memory before
// it spills, under a node budget large enough (buildAccount: at most a
// quarter of it). An entry costs its key and value and 48 bytes, so 256
// MiB holds the ~3M entries of a narrow index on 3M rows, where
// PostgreSQL's maintenance_work_mem default of 64 MiB made a 1M-row
// build spill (writing and merging the runs were a quarter of its CPU).
// A variable so that tests can make it spill.
var IndexBuildMemory int64 = 256 << 20

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

// entryBuf is a batch of index entries a reader hands the sort: their
// keys and values back to back in buf, each entry's key and value
// lengths in lens. Batches are recycled (entryBufs), so the entries cost
// no allocation between the encoder and the sorter's arena.
type entryBuf struct {
	buf  []byte
	lens []uint32 // key length, value length, per entry
}

var entryBufs = sync.Pool{New: func() any { return &entryBuf{} }}

func (e *entryBuf) add(k, v []byte) {
	e.buf = append(append(e.buf, k...), v...)
	e.lens = append(e.lens, uint32(len(k)), uint32(len(v)))
}

func (e *entryBuf) len() int { return len(e.lens) / 2 }

// each calls fn with every entry of e in order; k and v alias e.
func (e *entryBuf) each(fn func(k, v []byte) error) error {
	off := 0
	for i := 0; i < len(e.lens); i += 2 {
		k := e.buf[off : off+int(e.lens[i])]
		off += len(k)
		v := e.buf[off : off+int(e.lens[i+1])]
		off += len(v)
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// recycle empties e and returns it to entryBufs; e is not used after.
func (e *entryBuf) recycle() {
	e.buf, e.lens = e.buf[:0], e.lens[:0]
	entryBufs.Put(e)
}

// backfillStats says what one backfill did (tests and EXPLAIN of builds).
type backfillStats struct {
	pieces, runs, ssts int
	// sortPeak is the sorters' memory high-water mark (entrySort.MemPeak)
	// and sortLimit the build's budget it stays under (buildLimit).
	sortPeak, sortLimit int64
	// ranges is how many key ranges the SSTs were cut from at once
	// (index_backfill_cut.go).
	ranges  int
	splits  int // tablets of the index split as it was written
	entries int64
	// read, sort and write are the phases' wall times: reading every
	// piece into the sorters, the sorters' last sorts (or merge passes),
	// and cutting and ingesting the SSTs.
	read, sort, write time.Duration

	mu sync.Mutex
	// nodes counts the pieces read on each node (0: a node outside a
	// cluster), as the readers report it (index_backfill_dist.go).
	nodes map[uint64]int
	// fellBack counts remote pieces read here after their fragment
	// failed (index_backfill_dist.go, invariant 1).
	fellBack atomic.Int64
}

// log writes s to the node's log: what an operator (and bench/
// parallelindex) reads to see where a build's time went and which nodes
// read its pieces.
func (s *backfillStats) log(job any) {
	s.mu.Lock()
	nodes := fmt.Sprint(s.nodes)
	s.mu.Unlock()
	slog.Info("cairn: index backfill done", "job", job, "pieces", s.pieces, "pieces_per_node", nodes,
		"fell_back", s.fellBack.Load(), "entries", s.entries, "spilled_runs", s.runs, "ssts", s.ssts, "splits", s.splits,
		"sort_peak_bytes", s.sortPeak, "sort_limit_bytes", s.sortLimit,
		"read", s.read.Round(time.Millisecond), "sort", s.sort.Round(time.Millisecond), "write", s.write.Round(time.Millisecond))
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
	b.steps.mark("table")
	err = b.e.x.DB.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		// The transaction only holds T_b against GC; the reads go
		// around it, tablet by tablet in parallel.
		txn.ExemptFromDrain()
		ts := txn.ReadTimestamp()
		b.progress.TuplesDone = 0
		return b.sortedBackfill(ctx, t, layout, il, pred, ts)
	})
	b.steps.mark("backfill_commit")
	return err
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
	b.steps.mark("backfill_start")
	pieces, self, err := b.planPieces(ctx, layout, predText, ts)
	if err != nil {
		return err
	}
	// Fewer local pieces than readers: cut them into sub-spans
	// (index_backfill_subspan.go).
	if pieces, err = b.splitLocalPieces(ctx, layout, pieces, self, ts); err != nil {
		return err
	}
	b.steps.mark("plan")
	stats := &backfillStats{pieces: len(pieces)}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	// Readers: one piece each, at most backfillReaders at once per node
	// (index_backfill_dist.go).
	entries := make(chan *entryBuf, backfillReaders*2)
	var readErr error
	var readOnce sync.Once
	fail := func(err error) {
		readOnce.Do(func() { readErr = err; cancel(err) })
	}
	var done atomic.Int64
	start := time.Now()
	go func() {
		if err := b.readPieces(ctx, t, layout, il, predText, ts, pieces, self, entries, &done, stats); err != nil {
			fail(err)
		}
		close(entries)
	}()

	// The sort: the executor's external sorter for entries, one per
	// reader up to backfillReaders (index_backfill_sort.go).
	sorter := b.newEntrySort(ctx, min(backfillReaders, len(pieces)), layout.IndexSpan(il).Key, fail)
	defer sorter.Close()
	lastReport := int64(0)
	var lastWrite time.Time
	for batch := range entries {
		if ctx.Err() != nil {
			continue // draining after a failure
		}
		// The sort takes the batch and recycles it.
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
	b.steps.mark("read")
	stats.read = time.Since(start)
	start = time.Now()
	// The sorted entries, as several key ranges when they are many and
	// all in memory (index_backfill_cut.go).
	its, err := sorter.Ranges(ctx, cutWorkers, cutParallelBytes)
	if err != nil {
		return err
	}
	b.steps.mark("sort")
	defer func() {
		for _, it := range its {
			it.Close()
		}
	}()
	stats.runs, stats.ranges = sorter.SortedRuns(), len(its)
	stats.sort = time.Since(start)
	start = time.Now()

	// Writers: a goroutine per SST (one tablet's keys) builds and
	// ingests it (index_backfill_write.go).
	var writeErr error
	var writeOnce sync.Once
	w := b.newSSTWriters(ctx, ts, len(its), sstOptionsFor(il), func(err error) {
		writeOnce.Do(func() { writeErr = fmt.Errorf("writing index %q: %w", il.Name, err); cancel(writeErr) })
	})
	err = b.cutRanges(ctx, layout, its, sorter.Bytes(), ts, w, stats)
	b.steps.mark("cut")
	w.wait()
	b.steps.mark("ingest")
	if writeErr != nil {
		return writeErr
	}
	if err != nil {
		return err
	}
	stats.write = time.Since(start)
	stats.sortPeak, stats.sortLimit = sorter.MemPeak(), b.buildLimit()
	lastBackfill.Store(stats)
	b.steps.note(fmt.Sprintf("pieces=%d ranges=%d runs=%d ssts=%d", stats.pieces, stats.ranges, stats.runs, stats.ssts))
	stats.log(b.job.ID())
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
// hands w SSTs of the entries as committed versions at ts, each within
// one target tablet and at most sstBytes of entries. It splits the
// tablets of a global index it fills; splitFirst splits the tablet at its
// first key too (a range after the first of several cut at once, which then
// fills tablets no other range writes: invariant 4 of
// index_backfill_cut.go).
func (b *indexBuild) cutSSTs(ctx context.Context, layout *rowenc.TableLayout, it rowcontainer.EntryIterator, ts hlc.Timestamp,
	sstBytes int64, splitFirst bool, w *sstWriters, stats *backfillStats) (err error) {
	db := b.e.x.DB
	var prev []byte // the last key (the iterator's keys live until Next)
	first := true
	var sst *sstPipe
	var end []byte // the current SST's tablet's end key
	// The target tablet's ID and the entry bytes cut into it since it
	// began or was last split here (splitting below).
	var tablet kvpb.TabletID
	var into int64
	split := b.splitsWhileWriting(layout)
	defer func() {
		switch {
		case sst == nil:
		case err != nil:
			sst.abort()
		default:
			err = sst.close(ctx)
		}
	}()
	for {
		k, v, ok, err := it.Next(ctx)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if !first && sameKey(prev, k) {
			return uniqueBuildError(layout.ConvertWriteError(&kvpb.ConditionFailedError{Key: bytes.Clone(k)}))
		}
		prev, first = append(prev[:0], k...), false
		stats.entries++
		if sst != nil && (sst.bytes >= sstBytes || (len(end) > 0 && bytes.Compare(k, end) >= 0)) {
			p := sst
			sst = nil
			into += p.bytes
			if err := p.close(ctx); err != nil {
				return err
			}
		}
		if sst == nil {
			d, err := db.TabletCache().Lookup(ctx, k, false)
			if err != nil {
				return fmt.Errorf("looking up the tablet of %q: %w", k, err)
			}
			if d.TabletID != tablet {
				tablet, into = d.TabletID, 0
			}
			if split && (into >= backfillSplitBytes || splitFirst && stats.ssts == 0) {
				// This build filled the tablet (or this is the first SST
				// of a range after the first, which fills tablets of its
				// own: invariant 4 of index_backfill_cut.go): split it at
				// the next SST's first key, which the build knows, rather than
				// leave the split queue to find the middle of a tablet
				// of backfillSplitBytes or more by reading it twice
				// (what made the builds after the first in
				// bench/parallelindex slow). An index key stands alone,
				// so it is a row boundary.
				ok, err := b.splitTarget(ctx, k)
				if err != nil {
					return err
				}
				if ok {
					stats.splits++
				}
				if d, err = db.TabletCache().Lookup(ctx, k, false); err != nil {
					return fmt.Errorf("looking up the tablet of %q: %w", k, err)
				}
				tablet, into = d.TabletID, 0
			}
			end = d.EndKey
			if sst, err = w.start(ctx); err != nil {
				return err
			}
			stats.ssts++
		}
		if err := sst.add(ctx, k, v, ts); err != nil {
			return err
		}
	}
	return nil
}

// sameKey is bytes.Equal(a, b) for adjacent keys of a sorted stream,
// compared from their ends, 8 bytes at a time: adjacent index keys share
// their prefix (the index's, then the leading columns') and differ near
// their ends (the row's primary key), where bytes.Equal, comparing from
// the front, found the difference last.
func sameKey(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	i := len(a)
	for ; i >= 8; i -= 8 {
		if binary.LittleEndian.Uint64(a[i-8:i]) != binary.LittleEndian.Uint64(b[i-8:i]) {
			return false
		}
	}
	for ; i > 0; i-- {
		if a[i-1] != b[i-1] {
			return false
		}
	}
	return true
}

// backfillSplitBytes is how many entry bytes (before compression) a
// build writes into one tablet of a global index before it splits the
// tablet at the next SST: half the split queue's default size
// (store.DefaultSplitSize), so a tablet the build filled has room to grow
// before it must be split again. A variable so that tests can make it
// split.
var backfillSplitBytes int64 = 256 << 20

// splitsWhileWriting says whether a build of il splits the tablets it
// fills (cutSSTs): a global index's, in a group of its own. A local
// index's entries share the table's tablets, whose splits fall between
// buckets or colocation units (the split queue's rules), not at an
// entry.
func (b *indexBuild) splitsWhileWriting(layout *rowenc.TableLayout) bool {
	il := layout.Index(uint32(b.indexID))
	return il != nil && !il.Local && il.GroupID != 0
}

// splitTarget splits the tablet holding key at key, and says whether it
// did. The split only
// spares the split queue work, so a refused or failed one (the key is
// already a boundary or lies in a span never divided, a configuration
// change is pending, the lease moved) is not the build's failure: it goes
// on into the tablet as it is, and the split queue splits it later. Only
// the build's own cancellation is returned.
func (b *indexBuild) splitTarget(ctx context.Context, key []byte) (split bool, err error) {
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.SplitRequest{SplitKey: bytes.Clone(key)})
	if _, err := b.e.x.DB.Send(ctx, ba); err != nil {
		if ctx.Err() != nil {
			return false, context.Cause(ctx)
		}
		if _, ok := errors.AsType[*kvpb.InvalidArgumentError](err); !ok {
			slog.Debug("cairn: index build: splitting the index's tablet failed; going on", "key", key, "err", err)
		}
		return false, nil
	}
	return true, nil
}

// readPiece reads one tablet's part of the table at ts, a page at a time,
// on this node, and sends the rows' index entries to out.
func (b *indexBuild) readPiece(ctx context.Context, t *catalog.Table, layout *rowenc.TableLayout, il *rowenc.IndexLayout,
	predText string, ts hlc.Timestamp, piece kvpb.Span, out chan<- *entryBuf, done *atomic.Int64) error {
	var pred sem.Evaluator
	if predText != "" {
		var err error
		if pred, err = b.e.compileOverTable(t, predText); err != nil {
			return err
		}
	}
	return readEntries(ctx, b.e.x.DB, t.Name, layout, il, pred, ts, piece, func(batch *entryBuf, rows int64) error {
		done.Add(rows)
		if batch.len() == 0 {
			batch.recycle()
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
// time, and hands send the rows' index entries in batches of about
// entryBatch, with how many rows were read since the last call (a batch
// may be empty when rows were read and yielded no entry: a partial
// index's, a GIN index's over NULLs). send owns each batch. The build's
// own readers (readPiece) and a leaseholder's BackfillProcessor both
// read this way.
func readEntries(ctx context.Context, db *kv.DB, table string, layout *rowenc.TableLayout, il *rowenc.IndexLayout,
	pred sem.Evaluator, ts hlc.Timestamp, piece kvpb.Span, send func(batch *entryBuf, rows int64) error) error {
	ectx := &sem.EvalContext{}
	// Only the columns the entries are made of are decoded (of a
	// packed row, the others' bytes are passed over), unless a
	// predicate reads others.
	var needed []rowenc.ColumnID
	if pred == nil {
		needed = slices.Concat(layout.Primary.KeyColumns, il.KeyColumns, il.StoreColumns)
	}
	f, err := rowenc.NewRowFetcher(layout, &layout.Primary, needed)
	if err != nil {
		return err
	}
	f.ReuseRows = true // emit encodes the row and keeps nothing of it
	// The entries are encoded here, on the readers' goroutines: the
	// goroutine feeding the sort is the build's serial part.
	buf := entryBufs.Get().(*entryBuf)
	var rows int64
	var ents []rowenc.IndexEntry
	var key, value []byte
	flush := func() error {
		if buf.len() == 0 && rows == 0 {
			return nil
		}
		err := send(buf, rows)
		buf, rows = entryBufs.Get().(*entryBuf), 0
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
		if il.Inverted == "" {
			// One entry, encoded in buffers reused row after row.
			if key, value, _, err = layout.AppendIndexEntry(key[:0], value[:0], il, row); err != nil {
				return err
			}
			buf.add(key, value)
		} else {
			if ents, err = layout.EncodeIndexEntries(ents[:0], il, row); err != nil {
				return err
			}
			for _, ent := range ents {
				buf.add(ent.Key, ent.Value)
			}
		}
		if buf.len() >= entryBatch {
			return flush()
		}
		return nil
	}
	// The next page is read while this one is decoded: a fresh table is
	// often one tablet, one piece, and its reader would otherwise leave
	// a core idle during each page's scan.
	pages := make(chan []kvpb.KeyValue, 1)
	var scanErr error
	ctx, stop := context.WithCancel(ctx)
	defer stop() // a reader that fails stops its scan
	go func() {
		defer close(pages)
		for start := piece.Key; ; {
			kvs, err := db.ScanAt(ctx, start, piece.EndKey, backfillPageKVs, ts)
			if err != nil {
				scanErr = fmt.Errorf("scanning table %q: %w", table, err)
				return
			}
			select {
			case pages <- kvs:
			case <-ctx.Done():
				return
			}
			if len(kvs) < backfillPageKVs {
				return
			}
			start = keys.Next(kvs[len(kvs)-1].Key)
		}
	}()
	// An index of plain columns with no predicate: its entries are
	// encoded straight from the rows' bytes, no Datum built
	// (rowenc.IndexEntryEncoder); one entry per row.
	var enc *rowenc.IndexEntryEncoder
	if pred == nil && il.Inverted == "" {
		if enc, err = rowenc.NewIndexEntryEncoder(layout, il); err != nil {
			return err
		}
	}
	emitEntry := func(k, v []byte) error {
		rows++
		buf.add(k, v)
		if buf.len() >= entryBatch {
			return flush()
		}
		return nil
	}
	for kvs := range pages {
		if enc != nil {
			err = enc.Add(kvs, emitEntry)
		} else {
			err = f.Add(kvs, emit)
		}
		if err != nil {
			return err
		}
	}
	// pages is closed: scanErr is set, if ever, and the scan is over.
	if scanErr != nil {
		return scanErr
	}
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	if enc != nil {
		err = enc.Finish(emitEntry)
	} else {
		err = f.Finish(emit)
	}
	if err != nil {
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

// buildLimit is the build's whole sort budget (buildMemory of the node's
// SQL budget), shared by its sorters.
func (b *indexBuild) buildLimit() int64 {
	if m := b.e.x.Memory; m != nil {
		return buildMemory(m.Limit())
	}
	return IndexBuildMemory
}

// buildMemory is a build's sort budget under a node SQL budget of
// nodeLimit (<= 0: unlimited): IndexBuildMemory, at most a quarter of it.
func buildMemory(nodeLimit int64) int64 {
	if nodeLimit <= 0 {
		return IndexBuildMemory
	}
	return min(IndexBuildMemory, max(nodeLimit/4, 1))
}
