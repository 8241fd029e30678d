package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configure an Engine.
type Options struct {
	// CountSeeks makes Engine.Seeks count the seeks of the engine's and
	// its batches' iterators (tests: how often a request positions one),
	// and Engine.IterBuilds the Pebble iterators built for them.
	CountSeeks bool
	// FS is the filesystem Pebble runs on. Nil means the OS filesystem; tests
	// pass vfs.NewMem() or vfs.NewCrashableMem(), and fault and latency
	// injection wrap one of those.
	FS vfs.FS
	// CacheSize is the block cache size in bytes (default 64 MiB).
	CacheSize int64
	// NoSync makes commits skip fsync. Only benchmarks of the raw CPU path and
	// throwaway in-memory stores set it: a synced commit is what makes an
	// acknowledged write durable (invariant 2).
	NoSync bool
	// Logger receives Pebble's informational and error logs; nil silences
	// them. Pebble's fatal errors never reach its Fatalf: they fail the
	// engine instead (see ErrEngineFailed).
	Logger pebble.Logger
	// OnFatal, if set, is called once, with the error, when the engine
	// fails (a node stops on it). It must not block.
	OnFatal func(error)
	// DiskStallThreshold, when positive with OnDiskStall set, watches
	// every write and sync Pebble makes (vfs.WithDiskHealthChecks):
	// OnDiskStall is called, from a watcher goroutine, with each one in
	// flight for longer (noticed within a further 2 s, the watcher's
	// tick). A disk that stops answering fails no call; without the
	// watcher a node whose disk stalls keeps its place in the cluster
	// and answers nothing. It must not block.
	DiskStallThreshold time.Duration
	OnDiskStall        func(vfs.DiskSlowInfo)
	// ReadAhead, when positive, is the largest window an SST read in
	// order is read ahead in (readahead.go; ReadAheadFor sizes it by the
	// store's profile); 0 leaves read-ahead to Pebble and the OS.
	ReadAhead int64
	// WALFill, when positive, is the size every WAL file is written with
	// zeros to before Pebble writes it (walfill.go), so that a synced
	// commit overwrites written blocks instead of growing the file
	// (WALFillFor sizes it). 0 leaves the WAL files as Pebble makes them;
	// stores in memory have nothing to gain.
	WALFill int64
}

// indexBlockSize is the size an SST's index block grows to before Pebble
// partitions it (a two-level index: a top-level index over index blocks).
// Pebble's default is the data block size, 4 KiB, so every SST of more
// than about 150 data blocks (half a MiB) had a two-level index, and a
// point read that seeks such a file read two index blocks from the block
// cache before its data block. At 256 KiB (CockroachDB's setting) an SST
// of up to about 8,000 data blocks, past Pebble's target file sizes, has
// one index block: one block cache lookup less per file a read seeks.
// Files written with a two-level index before still read (Pebble reads
// both); compactions rewrite them with one index.
const indexBlockSize = 256 << 10

// memTableSize is the size of each of Pebble's memtables (Open).
const memTableSize = 64 << 20

// MemTableSize is memTableSize, for what reserves memory for memtables
// (cairn start's --max-memory): C memory, not the Go heap's.
const MemTableSize = memTableSize

// WALFillFor is the WAL fill (Options.WALFill) for a store on disk: the
// size Pebble preallocates each WAL file to (110% of a memtable), about
// what one holds before the memtable it logs is flushed and the WAL
// rotates.
func WALFillFor() int64 { return memTableSize + memTableSize/10 }

// Engine is one node's Pebble instance. It is safe for concurrent use.
type Engine struct {
	db    *pebble.DB
	opts  *pebble.Options
	fs    vfs.FS
	dir   string
	cache *pebble.Cache
	wo    *pebble.WriteOptions
	// healthCloser stops the disk-stall watcher (nil: none).
	healthCloser io.Closer
	// probe is ProbeDisk's file and the watched FS it writes through
	// (diskprobe.go).
	probe diskProbe
	// ra reads SSTs ahead (nil: Options.ReadAhead was 0).
	ra *readaheadFS
	// walFill hands Pebble filled WAL files (nil: Options.WALFill was 0).
	walFill *walFillFS
	// failed is set once Pebble reports a fatal error (see fatal.go); every
	// later write returns it.
	failed  atomic.Pointer[error]
	onFatal func(error)
	// tables counts flushes and ingestions: the events after which
	// EstimateDiskUsage, which sees only SSTs, can answer more for a span
	// nothing has written to since (TableGeneration).
	tables *atomic.Int64
	// iters keeps closed iterators for reads while no write has come
	// since they were opened (iterpool.go, invariant 7).
	iters *iterPool
	// seeks counts iterator seeks and builds the Pebble iterators built
	// (nil: Options.CountSeeks unset).
	seeks, builds *atomic.Uint64
}

// Seeks returns how many times the engine's and its batches' iterators
// were positioned by a seek (SeekGE, SeekLT, First, Last) since Open:
// with Options.CountSeeks, else 0. A seek walks every memtable and level
// afresh; Next and NextKey step on from where the iterator is.
func (e *Engine) Seeks() uint64 {
	if e.seeks == nil {
		return 0
	}
	return e.seeks.Load()
}

// IterBuilds returns how many Pebble iterators the engine and its batches
// built since Open (a pooled or reused one handed out again is not
// built): with Options.CountSeeks, else 0.
func (e *Engine) IterBuilds() uint64 {
	if e.builds == nil {
		return 0
	}
	return e.builds.Load()
}

// CacheSizeOr is the block cache a store opened with Options.CacheSize
// size has: size, or the default of 64 MiB for 0.
func CacheSizeOr(size int64) int64 {
	if size == 0 {
		return 64 << 20
	}
	return size
}

// Open opens (creating if needed) the engine in dir.
func Open(dir string, opts Options) (*Engine, error) {
	fs := opts.FS
	if fs == nil {
		fs = vfs.Default
	}
	cache := pebble.NewCache(CacheSizeOr(opts.CacheSize))
	pfs := fs
	if fs == vfs.Default {
		// The WAL's syncs wait in the poller, holding no P
		// (pollsync.go); an FS given wraps its own files.
		pfs = NewPollSyncFS(fs)
	}
	var healthCloser io.Closer
	var watched vfs.FS
	if opts.DiskStallThreshold > 0 && opts.OnDiskStall != nil {
		pfs, healthCloser = vfs.WithDiskHealthChecks(pfs, opts.DiskStallThreshold, nil, opts.OnDiskStall)
		watched = pfs
	}
	var walFill *walFillFS
	if opts.WALFill > 0 {
		walFill = newWALFillFS(pfs, opts.WALFill, dir)
		pfs = walFill
	}
	var ra *readaheadFS
	if opts.ReadAhead > 0 {
		ra = newReadaheadFS(pfs, opts.ReadAhead)
		pfs = ra
	}
	po := &pebble.Options{
		Comparer:           Comparer,
		FS:                 pfs,
		Cache:              cache,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             fatalLogger{inner: opts.Logger},
	}
	// Bloom filters on every level let point reads of a user key (prefix
	// iteration, Get) skip SSTs that do not hold it; they key on the prefix
	// Comparer.Split returns, i.e. the user key, whatever its versions.
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		po.Levels[i].IndexBlockSize = indexBlockSize
	}
	// 64 MiB memtables (Pebble's default is 4 MiB): a transaction's
	// intents are lock records written and, at resolution, deleted; in a
	// large memtable most of them meet their deletion before a flush, so
	// they never reach an SST or a compaction. A 1M-row COPY into an
	// existing table took about a quarter less CPU, CREATE INDEX too.
	// The memory is taken as it is written (at most two memtables in
	// flight before writes wait for a flush).
	po.MemTableSize = memTableSize
	tables := new(atomic.Int64)
	iters := new(iterPool)
	po.EventListener = &pebble.EventListener{
		FlushEnd: func(pebble.FlushInfo) {
			tables.Add(1)
			iters.invalidate()
		},
		CompactionEnd: func(pebble.CompactionInfo) { iters.invalidate() },
		TableIngested: func(pebble.TableIngestInfo) { tables.Add(1) },
	}
	po.EnsureDefaults()
	db, err := pebble.Open(dir, po)
	if walFill != nil {
		if err != nil {
			walFill.close()
		} else {
			walFill.open()
		}
	}
	if err != nil {
		cache.Unref()
		if healthCloser != nil {
			healthCloser.Close()
		}
		return nil, fmt.Errorf("storage: open %s: %w", dir, err)
	}
	// Full-size memtables from the first rotation (memramp.go), when the
	// block cache, which each memtable's size is reserved from, holds
	// four of them.
	if CacheSizeOr(opts.CacheSize) >= rampCacheMin {
		skipMemTableRamp(db, memTableSize)
	}
	wo := pebble.Sync
	if opts.NoSync {
		wo = pebble.NoSync
	}
	var seeks, builds *atomic.Uint64
	if opts.CountSeeks {
		seeks, builds = new(atomic.Uint64), new(atomic.Uint64)
	}
	return &Engine{db: db, opts: po, fs: fs, dir: dir, cache: cache, wo: wo, onFatal: opts.OnFatal, healthCloser: healthCloser, ra: ra, walFill: walFill, tables: tables, iters: iters, seeks: seeks, builds: builds,
		probe: diskProbe{fs: watched, path: watchedPath(watched, dir)}}, nil
}

// ReadAheadStats counts what read-ahead did (zero without it).
func (e *Engine) ReadAheadStats() ReadAheadStats {
	if e.ra == nil {
		return ReadAheadStats{}
	}
	return e.ra.stats()
}

// Close closes the engine. Iterators, snapshots and batches must be closed
// first.
func (e *Engine) Close() error {
	e.iters.close()
	if e.ra != nil {
		e.ra.stopPlans()
	}
	err := e.db.Close()
	if e.walFill != nil {
		// After Pebble's close: it creates no WAL any more.
		e.walFill.close()
	}
	e.cache.Unref()
	e.probe.close()
	if e.healthCloser != nil {
		e.healthCloser.Close()
	}
	return err
}

// FS returns the filesystem the engine runs on (for SST staging files).
func (e *Engine) FS() vfs.FS { return e.fs }

// Dir returns the engine's directory.
func (e *Engine) Dir() string { return e.dir }

// DB exposes the underlying Pebble instance to the benchmarks that compare
// against raw Pebble and to metrics; layers above storage must not use it.
func (e *Engine) DB() *pebble.DB { return e.db }

// Reader reads engine keys. Implemented by Engine, Batch and Snapshot.
type Reader interface {
	// Get returns a copy of the value stored at exactly key, or nil, false.
	Get(key MVCCKey) (value []byte, ok bool, err error)
	// NewIter returns an iterator; the caller closes it.
	NewIter(opts IterOptions) (*Iterator, error)
}

// Writer writes engine keys. Implemented by Batch.
type Writer interface {
	Put(key MVCCKey, value []byte) error
	// Delete removes the entry at exactly key (one version or a bare key).
	Delete(key MVCCKey) error
	// ClearRange removes every entry, versioned or not, with a user key in
	// [start, end). It is a range tombstone: O(1) to write.
	ClearRange(start, end []byte) error
}

// ReadWriter is both.
type ReadWriter interface {
	Reader
	Writer
}

// IterOptions bound an iterator by user key (invariant 3).
type IterOptions struct {
	LowerBound []byte
	UpperBound []byte
	// Prefix restricts the iterator to one user key per seek and lets Pebble
	// use bloom filters. Only SeekGE, Next and Valid may be used.
	Prefix bool
	// Scan promises that the caller reads every key between the bounds
	// (both set) in order, as a count or an unlimited scan does: the
	// files wholly inside them are then read ahead whole, in key order
	// (prefetch.go), when the engine reads ahead at all.
	Scan bool
	// ScanEnd, with Scan, is where the caller's scan goes on to past
	// UpperBound (the next tablets of a scan the router cut): the files
	// wholly inside [LowerBound, ScanEnd) are read ahead, and the plan
	// outlives this iterator for the next one (prefetch.go, invariant 4).
	ScanEnd []byte
}

// fill sets po's bounds from o.
func (o IterOptions) fill(po *pebble.IterOptions) {
	if o.LowerBound != nil {
		po.LowerBound = MVCCKey{Key: o.LowerBound}.Encode(nil)
	}
	if o.UpperBound != nil {
		po.UpperBound = MVCCKey{Key: o.UpperBound}.Encode(nil)
	}
}

// fillInto is fill, encoding both bounds into buf's memory while they
// fit in it.
func (o IterOptions) fillInto(po *pebble.IterOptions, buf []byte) {
	if o.LowerBound != nil {
		buf = MVCCKey{Key: o.LowerBound}.Encode(buf)
		po.LowerBound = buf
	}
	if o.UpperBound != nil {
		lo := len(buf)
		buf = MVCCKey{Key: o.UpperBound}.Encode(buf)
		po.UpperBound = buf[lo:]
	}
}

type pebbleReader interface {
	Get(key []byte) ([]byte, io.Closer, error)
	NewIter(o *pebble.IterOptions) (*pebble.Iterator, error)
}

// get and newIter serve every Reader. They refuse to read from a failed
// engine: the write that failed it may be visible in Pebble's memtable
// although it was never acknowledged or made durable (invariant 5).
func get(e *Engine, r pebbleReader, key MVCCKey) ([]byte, bool, error) {
	if err := e.failure(); err != nil {
		return nil, false, fmt.Errorf("storage: get %s: %w", key, err)
	}
	v, closer, err := r.Get(key.Encode(nil))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("storage: get %s: %w", key, err)
	}
	out := append([]byte(nil), v...)
	return out, true, closer.Close()
}

func newIter(e *Engine, r pebbleReader, opts IterOptions) (*Iterator, error) {
	if err := e.failure(); err != nil {
		return nil, fmt.Errorf("storage: new iterator: %w", err)
	}
	i := &Iterator{prefix: opts.Prefix, seeks: e.seeks}
	plan := opts.Scan && !opts.Prefix && e.ra != nil
	if plan {
		opts.fill(&i.popts)
	} else {
		// Pebble copies the bounds (processBounds), so the seek key's
		// buffer holds them until NewIter returns: a row's span (an
		// UPDATE's locking read, on an iterator the pool could not
		// serve) costs no allocation per bound. A read-ahead plan keeps
		// its bounds, so a scan's are its own.
		opts.fillInto(&i.popts, i.bufArr[:0])
	}
	it, err := r.NewIter(&i.popts)
	if err != nil {
		return nil, fmt.Errorf("storage: new iterator: %w", err)
	}
	if e.builds != nil {
		e.builds.Add(1)
	}
	if !plan {
		// Seeks overwrite bufArr: nothing may read these bounds again
		// (a reusing batch sets its own before SetOptions).
		i.popts.LowerBound, i.popts.UpperBound = nil, nil
	}
	i.it, i.buf = it, i.bufArr[:0]
	if plan {
		end := i.popts.UpperBound
		if opts.UpperBound != nil && bytes.Compare(opts.ScanEnd, opts.UpperBound) > 0 {
			end = MVCCKey{Key: opts.ScanEnd}.Encode(nil)
		}
		i.plan = e.ra.planFor(e.db, e.dir, i.popts.LowerBound, end)
		i.planEnd = bytes.Equal(end, i.popts.UpperBound)
	}
	return i, nil
}

// Get implements Reader.
func (e *Engine) Get(key MVCCKey) ([]byte, bool, error) { return get(e, e.db, key) }

// NewIter implements Reader. An iterator that does not read a scan ahead
// comes from the engine's pool when one there is current (iterpool.go),
// and goes back to it on Close. A prefix iterator is one of them: the
// prefix is a property of its seeks (Pebble's SeekPrefixGE may be called
// on any iterator, and a later SeekGE, SeekLT, First or Last, or a
// change of bounds, leaves prefix mode), not of the Pebble iterator, so
// a point read of one user key (mvcc.Get) pays for no iterator of its
// own, as a row's bounded read does not.
func (e *Engine) NewIter(opts IterOptions) (*Iterator, error) {
	if opts.Scan && !opts.Prefix && e.ra != nil {
		return newIter(e, e.db, opts)
	}
	if it := e.iters.take(); it != nil {
		if err := e.failure(); err != nil {
			_ = it.it.Close()
			return nil, fmt.Errorf("storage: new iterator: %w", err)
		}
		it.err, it.key, it.prefix = nil, MVCCKey{}, opts.Prefix
		var lo, hi []byte
		buf := it.bounds[:0]
		if opts.LowerBound != nil {
			buf = MVCCKey{Key: opts.LowerBound}.Encode(buf)
			lo = buf
		}
		if opts.UpperBound != nil {
			buf = MVCCKey{Key: opts.UpperBound}.Encode(buf)
			hi = buf[len(lo):]
		}
		it.bounds = buf
		it.it.SetBounds(lo, hi)
		return it, nil
	}
	gen, stable := e.iters.stable()
	it, err := newIter(e, e.db, opts)
	if err != nil || !stable {
		return it, err
	}
	it.pool, it.gen = e.iters, gen
	return it, nil
}

// NewBatch returns an indexed batch: reads through it see its own writes on
// top of the engine's committed state.
func (e *Engine) NewBatch() *Batch { return &Batch{b: e.db.NewIndexedBatch(), e: e} }

// NewReusingBatch returns a batch that, unlike NewBatch's, keeps the
// iterators closed through it and hands them out again (Pebble's
// SetOptions resets their bounds and refreshes their view of the batch's
// writes) rather than build one per NewIter: over an indexed batch an
// iterator is never taken from the engine's pool (iterpool.go), and
// building one (the batch's index, every memtable and level) was 2.3% of
// a node's CPU under simple-update. The price: an iterator's view of the
// engine may be the one an earlier iterator of the batch took when it was
// built (invariant 9), so it is for a batch whose reads all lie under
// latches that keep every other writer off the keys it reads (a tablet's
// evaluation). It always sees its own writes. An iterator that reads a
// scan ahead (IterOptions.Scan) is not reused.
func (e *Engine) NewReusingBatch() *Batch {
	return &Batch{b: e.db.NewIndexedBatch(), e: e, reuse: true}
}

// NewWriteOnlyBatch returns a batch that cannot be read from (cheaper).
func (e *Engine) NewWriteOnlyBatch() *Batch { return &Batch{b: e.db.NewBatch(), e: e, writeOnly: true} }

// NewSnapshot returns a consistent point-in-time view of the engine.
func (e *Engine) NewSnapshot() *Snapshot { return &Snapshot{s: e.db.NewSnapshot(), e: e} }

// ApplyBatchRepr commits a batch encoded by Batch.Repr (how a replicated
// write arrives from the log).
func (e *Engine) ApplyBatchRepr(repr []byte) (err error) {
	if err := e.failure(); err != nil {
		return fmt.Errorf("storage: apply batch: %w", err)
	}
	defer e.catchFatal(&err, "apply batch")
	e.iters.beginWrite()
	defer e.iters.endWrite()
	b := e.db.NewBatch()
	defer b.Close()
	if err := b.SetRepr(append([]byte(nil), repr...)); err != nil {
		return fmt.Errorf("storage: bad batch repr: %w", err)
	}
	if err := b.Commit(e.wo); err != nil {
		return fmt.Errorf("storage: apply batch: %w", err)
	}
	return nil
}

// Ingest links externally built SSTs (see SSTWriter) into the engine. The
// files are moved, not copied, when they are on the engine's filesystem.
func (e *Engine) Ingest(ctx context.Context, paths []string) (err error) {
	if err := e.failure(); err != nil {
		return fmt.Errorf("storage: ingest: %w", err)
	}
	defer e.catchFatal(&err, "ingest")
	e.iters.beginWrite()
	defer e.iters.endWrite()
	if err := e.db.Ingest(ctx, paths); err != nil {
		return fmt.Errorf("storage: ingest: %w", err)
	}
	return nil
}

// EstimateDiskUsage estimates the bytes on disk that hold user keys in
// [start, end), all versions included (tablet sizes for splits and the admin
// UI). Data still in memtables is not counted; files that straddle a bound
// count in proportion.
func (e *Engine) EstimateDiskUsage(start, end []byte) (uint64, error) {
	n, err := e.db.EstimateDiskUsage(MVCCKey{Key: start}.Encode(nil), MVCCKey{Key: end}.Encode(nil))
	if err != nil {
		return 0, fmt.Errorf("storage: estimate disk usage of [%q, %q): %w", start, end, err)
	}
	return n, nil
}

// TableGeneration counts the flushes and ingestions so far. A span's
// EstimateDiskUsage can change without a write to it only when this does
// (a write to it sits in a memtable, uncounted, until a flush).
func (e *Engine) TableGeneration() int64 { return e.tables.Load() }

// Metrics returns Pebble's metrics (levels, compactions, WAL, caches) for
// the node's /metrics endpoint and debug pages.
func (e *Engine) Metrics() *pebble.Metrics { return e.db.Metrics() }

// Flush flushes memtables to SSTs (tests and size measurements).
func (e *Engine) Flush() error { return e.db.Flush() }

// Compact compacts the user-key span [start, end).
func (e *Engine) Compact(ctx context.Context, start, end []byte) error {
	return e.db.Compact(ctx, MVCCKey{Key: start}.Encode(nil), MVCCKey{Key: end}.Encode(nil), true)
}
