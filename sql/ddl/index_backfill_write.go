package ddl

// The backfill's writes (index_backfill.go, after the sort): the sorted
// stream is cut into SSTs on one goroutine (cutSSTs: the merge of the
// sorters, the duplicate check, where each SST ends), and each SST is
// built and ingested on a goroutine of its own:
//
//	sorted entries ─▶ cutSSTs ──batches of entries──▶ SST i: PutSSTVersion
//	                  (cut at the target             into an SSTBuilder,
//	                  tablet's end and at            then AddSSTable
//	                  backfillSSTBytes)        ─▶ SST i+1 ... (≤ sstsBuilding)
//
// Encoding the versions into the SST (its blocks, their compression, its
// filter) was half of the cut's goroutine's work, which every build does
// alone after its parallel reads and sorts (the build's serial tail: its
// share of the wall time grows with the readers). Here it runs beside
// the cut, on up to sstsBuilding goroutines.
//
// Invariants:
//
//  1. Each SST gets its entries in the stream's order, and an SST's
//     entries all come before the next one's (SSTBuilder needs increasing
//     keys; the SSTs' spans do not overlap).
//  2. At most backfillWriters SSTs are being ingested at once (raft's
//     bound on a group's uncommitted entries, see backfillWriters), and
//     at most sstsBuilding are built or waiting (one more for each
//     further key range cut at once, index_backfill_cut.go), so a build
//     holds at most that many SSTs in memory.
//  3. Every batch handed to an SST's goroutine is recycled by it, and its
//     goroutine ends once the cut closes it, whether the build fails or
//     not (sstWriters.wait waits for all).

import (
	"context"
	"sync"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/storage"
)

// sstsBuilding bounds the SSTs of a build being built or ingested at
// once: one being filled while backfillWriters are ingested.
const sstsBuilding = backfillWriters + 1

// sstWriters builds and ingests a backfill's SSTs.
type sstWriters struct {
	b *indexBuild
	// ctx is the build's: an SST's goroutine outlives the cut that
	// filled it (a cut of one of several key ranges runs under a context
	// of its own, cancelled once every range is cut).
	ctx  context.Context
	ts   hlc.Timestamp
	fail func(error) // the build's failure (cancels ctx)
	// sst is how the SSTs are built: without a bloom filter for an
	// index whose keys no one looks up one by one (sstOptionsFor).
	sst storage.SSTBuilderOptions

	building  chan struct{} // a slot per SST being built or ingested (invariant 2)
	ingesting chan struct{} // a slot per SST being ingested (invariant 2)
	wg        sync.WaitGroup
}

// cuts is how many cuts (key ranges, index_backfill_cut.go) fill SSTs
// at once: each may hold one SST being filled beside those ingested.
func (b *indexBuild) newSSTWriters(ctx context.Context, ts hlc.Timestamp, cuts int, sst storage.SSTBuilderOptions, fail func(error)) *sstWriters {
	return &sstWriters{b: b, ctx: ctx, ts: ts, fail: fail, sst: sst,
		building: make(chan struct{}, sstsBuilding+max(cuts, 1)-1), ingesting: make(chan struct{}, backfillWriters)}
}

// sstOptionsFor is how the SSTs of il's entries are built. A bloom
// filter serves point lookups of a whole key the SST may not hold; only
// a unique index is read that way (a writer's uniqueness check looks up
// the key of its new entry). Every other index's key ends with its row's
// primary key, so a writer only ever puts or deletes the entries of its
// own rows, and its reads are of the index's spans: the filter, a tenth
// of building a 1M-entry backfill's SSTs, serves no one until a
// compaction rewrites the entries with the engine's filters.
func sstOptionsFor(il *rowenc.IndexLayout) storage.SSTBuilderOptions {
	return storage.SSTBuilderOptions{NoFilter: !il.Unique}
}

// sstPipe is one SST being cut: the cut fills cur and hands it over in
// batches through in.
type sstPipe struct {
	in    chan *entryBuf
	cur   *entryBuf
	bytes int64 // the SST's entry bytes so far (mvcc.SSTVersionBytes)
	// discard, set before in is closed (which orders it before the
	// goroutine's read), drops the SST instead of ingesting it: the cut
	// failed (a duplicate key), so the build does.
	discard bool
}

// start begins an SST: a goroutine that puts the entries it is handed
// into an SSTBuilder and, once the cut closes the pipe, ingests it. It
// waits for a building slot as long as the cut's ctx lets it; the
// goroutine runs under the build's (w.ctx).
func (w *sstWriters) start(cutCtx context.Context) (*sstPipe, error) {
	select {
	case w.building <- struct{}{}:
	case <-cutCtx.Done():
		return nil, context.Cause(cutCtx)
	}
	p := &sstPipe{in: make(chan *entryBuf, 4), cur: entryBufs.Get().(*entryBuf)}
	ctx := w.ctx
	w.wg.Go(func() {
		defer func() { <-w.building }()
		sb := storage.NewSSTBuilderWith(w.sst)
		var err error
		for batch := range p.in { // invariant 3: drained to the end
			if err == nil && ctx.Err() == nil {
				err = batch.each(func(k, v []byte) error { return mvcc.PutSSTVersion(sb, k, w.ts, v) })
			}
			batch.recycle()
		}
		if err != nil {
			w.fail(err)
			return
		}
		if ctx.Err() != nil || sb.Count() == 0 || p.discard {
			return
		}
		select {
		case w.ingesting <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-w.ingesting }()
		if err := w.b.ingest(ctx, sb, w.ts); err != nil {
			w.fail(err)
		}
	})
	return p, nil
}

// add appends an entry to p (k and v are copied).
func (p *sstPipe) add(ctx context.Context, k, v []byte, ts hlc.Timestamp) error {
	p.cur.add(k, v)
	p.bytes += mvcc.SSTVersionBytes(k, ts, v)
	if p.cur.len() < entryBatch {
		return nil
	}
	return p.send(ctx)
}

func (p *sstPipe) send(ctx context.Context) error {
	select {
	case p.in <- p.cur:
		p.cur = entryBufs.Get().(*entryBuf)
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// close hands over the last batch and ends p's input: its goroutine then
// ingests the SST. It always closes the pipe (invariant 3).
func (p *sstPipe) close(ctx context.Context) error {
	var err error
	if p.cur.len() > 0 {
		err = p.send(ctx)
	}
	p.cur.recycle()
	close(p.in)
	return err
}

// abort ends p's input without its last batch, and its goroutine drops
// the SST (invariant 3 still holds).
func (p *sstPipe) abort() {
	p.cur.recycle()
	p.discard = true
	close(p.in)
}

// wait waits for every SST's goroutine.
func (w *sstWriters) wait() { w.wg.Wait() }
