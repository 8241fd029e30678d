package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
)

// SSTs that travel as bytes: an index backfill builds them in memory at
// the node that sorts the entries, one per target tablet, and sends them
// to the tablet, whose replicas each ingest them (tablet's AddSSTable).
// They are written with the comparer and bloom filters every engine opens
// with, in a table format every engine reads (sstTableFormat), so any
// engine of the cluster can ingest one as it is.

// sstOptions are the Pebble options SSTs are written and read with
// outside an engine: Open's comparer, format and filters.
var sstOptions = sync.OnceValue(func() *pebble.Options {
	o := &pebble.Options{Comparer: Comparer, FormatMajorVersion: pebble.FormatNewest}
	for i := range o.Levels {
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		o.Levels[i].BlockSize = sstBlockSize
	}
	o.EnsureDefaults()
	return o
})

// sstBlockSize is the data block size of SSTs built in memory: 32 KiB
// (CockroachDB's for every SST) where the engines' own files keep
// Pebble's 4 KiB. These SSTs hold sorted runs of similar keys (an index's
// entries, a sorted COPY's rows): per 1M index entries, writing took
// 111–117 ms instead of 140–146, the walk of the tablet's check
// (ForEachSST) 23 ms instead of 37, and the SST was 4.9 MB instead of
// 11.2 (longer blocks compress better), bytes the raft log, the staging
// file and the table's later scans (a block lookup each) carry
// (bench/README.md, issue 18, 2026-11-30 11:25). A point read that misses
// the block cache decompresses 32 KiB instead of 4; within the cache it
// searches more restart points, a few comparisons more.
const sstBlockSize = 32 << 10

// sstTableFormat is the format SSTs built in memory are written in:
// Pebble's row-block format (v4), not the columnar one the engines write
// their own flushes and compactions in (FormatNewest's). Writing a 1M-entry
// index backfill's SSTs took 2–3× less CPU in it (about 85 ms against
// 175–280 ms, bench/README.md "Issue 18", 2026-11-30 08:30), and an
// index backfill or a sorted COPY writes every entry once this way. Every
// engine ingests and reads both formats (Pebble reads table formats v1
// and up at FormatNewest), and its compactions rewrite the entries in
// its own format when they merge the files.
const sstTableFormat = sstable.TableFormatPebblev4

// memWritable is an objstorage.Writable over a byte slice.
type memWritable struct{ buf bytes.Buffer }

func (w *memWritable) Write(p []byte) error { _, err := w.buf.Write(p); return err }
func (w *memWritable) Finish() error        { return nil }
func (w *memWritable) Abort()               {}

// SSTBuilder builds an SST of point entries in memory. Entries must
// arrive in strictly increasing engine-key order (ErrOutOfOrder). It is
// not safe for concurrent use.
type SSTBuilder struct {
	out       *memWritable
	w         *sstable.Writer
	lastKey   []byte
	spare     []byte // the next key's encoding buffer (Put)
	value     []byte // the next value's encoding buffer (PutEncoded)
	first     []byte // the user key of the first entry
	lastLen   int    // the length of the last entry's user key (in lastKey)
	count     int
	dataBytes int64
	done      bool
}

// NewSSTBuilder starts an empty SST in memory.
func NewSSTBuilder() *SSTBuilder { return NewSSTBuilderWith(SSTBuilderOptions{}) }

// SSTBuilderOptions are what a caller may leave out of an SST built in
// memory, for data that will not be read the way the part serves.
type SSTBuilderOptions struct {
	// NoFilter writes no bloom filter. A filter answers a point lookup
	// of a user key the SST does not hold (Pebble's SeekPrefixGE) without
	// reading its blocks; keys no one looks up one by one (a non-unique
	// index's entries, each ending with its row's primary key) do not
	// need it, and building it was a tenth of writing a 1M-entry index
	// backfill's SSTs (bench/README.md, issue 18, 2026-11-30 eleventh
	// session). A compaction that rewrites the entries writes the
	// engine's filters.
	NoFilter bool
}

// NewSSTBuilderWith starts an empty SST in memory, built with o.
func NewSSTBuilderWith(o SSTBuilderOptions) *SSTBuilder {
	wo := sstOptions().MakeWriterOptions(0, sstTableFormat)
	if o.NoFilter {
		wo.FilterPolicy = pebble.NoFilterPolicy
	}
	out := &memWritable{}
	return &SSTBuilder{out: out, w: sstable.NewWriter(out, wo)}
}

// Put adds key with value; key must sort after every key put before.
func (b *SSTBuilder) Put(key MVCCKey, value []byte) error {
	if b.done {
		return ErrSSTFinished
	}
	if err := checkWriteKey(key); err != nil {
		return fmt.Errorf("storage: sst put: %w", err)
	}
	// The encoded key goes in a buffer swapped with lastKey's: the
	// writer copies what it keeps, so an SST of a million entries costs
	// no allocation per key.
	//
	// The writer refuses a key that does not sort after the last one
	// (with the same Comparer) and stays usable; only then is the order
	// compared here, to say so with ErrOutOfOrder: a comparison per entry
	// on top of the writer's was 2% of a 1M-row index build's CPU.
	enc := key.Encode(b.spare[:0])
	if err := b.w.Set(enc, value); err != nil {
		if b.lastKey != nil && Comparer.Compare(enc, b.lastKey) <= 0 {
			return fmt.Errorf("%w: put %s after %s", ErrOutOfOrder, key, Comparer.FormatKey(b.lastKey))
		}
		return fmt.Errorf("storage: sst put %s: %w", key, err)
	}
	if b.first == nil {
		b.first = append([]byte(nil), key.Key...)
	}
	b.lastKey, b.spare = enc, b.lastKey
	b.lastLen = len(key.Key)
	b.count++
	b.dataBytes += int64(len(enc) + len(value))
	return nil
}

// PutEncoded is Put of the value encode appends to its argument, a
// buffer of the builder's reused entry after entry (the writer copies
// what it keeps): an encoded value costs no allocation per entry. encode
// must not keep its argument.
func (b *SSTBuilder) PutEncoded(key MVCCKey, encode func(dst []byte) []byte) error {
	b.value = encode(b.value[:0])
	return b.Put(key, b.value)
}

// Count is the number of entries put so far.
func (b *SSTBuilder) Count() int { return b.count }

// DataBytes is the size of the keys and values put so far, before
// compression: what a caller cuts its SSTs by.
func (b *SSTBuilder) DataBytes() int64 { return b.dataBytes }

// Bounds returns the user keys of the first and last entry put (nil when
// none was). last is the builder's and valid until the next Put.
func (b *SSTBuilder) Bounds() (first, last []byte) {
	if b.lastKey == nil {
		return b.first, nil
	}
	// The last user key is the head of its encoding (not copied per
	// entry; lastKey is not written again until the next Put).
	return b.first, b.lastKey[:b.lastLen:b.lastLen]
}

// Finish completes the table and returns its bytes.
func (b *SSTBuilder) Finish() ([]byte, error) {
	if b.done {
		return nil, ErrSSTFinished
	}
	b.done = true
	if err := b.w.Close(); err != nil {
		return nil, fmt.Errorf("storage: finish in-memory sst: %w", err)
	}
	return b.out.buf.Bytes(), nil
}

// ForEachSST calls fn with every point entry of the SST data whose user
// key lies in [lower, upper) (nil bounds: unbounded), in order. The key
// and value are valid only during the call. A range deletion or range
// key in the SST is an error, and so is a point entry other than a put
// (a deletion, a merge operand): the SSTs that travel as bytes hold puts
// only.
func ForEachSST(data []byte, lower, upper []byte, fn func(key MVCCKey, value []byte) error) (err error) {
	// The table's own point iterator, not a pebble.Iterator over it: the
	// latter's merging and range-key layers cost as much again as the
	// walk (a tablet checks every entry of every SST it is sent, mvcc's
	// CheckSST). Range deletions and range keys, which only the latter
	// shows, are refused from the table's properties, and a point entry
	// other than a put (a deletion, a merge) from its kind.
	r, err := sstable.NewMemReader(data, sstOptions().MakeReaderOptions())
	if err != nil {
		return fmt.Errorf("storage: reading an sst of %d bytes: %w", len(data), err)
	}
	defer func() {
		if cerr := r.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("storage: reading an sst: %w", cerr)
		}
	}()
	p, err := r.ReadPropertiesBlock(context.Background(), nil)
	if err != nil {
		return fmt.Errorf("storage: reading an sst's properties: %w", err)
	}
	if p.NumRangeDeletions != 0 || p.NumRangeKeys() != 0 {
		return fmt.Errorf("storage: sst holds %d range deletions and %d range keys", p.NumRangeDeletions, p.NumRangeKeys())
	}
	var lo, hi []byte
	if lower != nil {
		lo = MVCCKey{Key: lower}.Encode(nil)
	}
	if upper != nil {
		hi = MVCCKey{Key: upper}.Encode(nil)
	}
	it, err := r.NewIter(sstable.NoTransforms, lo, hi, sstable.AssertNoBlobHandles)
	if err != nil {
		return fmt.Errorf("storage: reading an sst of %d bytes: %w", len(data), err)
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("storage: reading an sst: %w", cerr)
		}
	}()
	for kv := it.First(); kv != nil; kv = it.Next() {
		if kind := kv.Kind(); kind != pebble.InternalKeyKindSet && kind != pebble.InternalKeyKindSetWithDelete {
			return fmt.Errorf("storage: sst holds a %s at %s", kind, Comparer.FormatKey(kv.K.UserKey))
		}
		k, err := DecodeMVCCKey(kv.K.UserKey)
		if err != nil {
			return fmt.Errorf("storage: sst key: %w", err)
		}
		v, _, err := kv.V.Value(nil)
		if err != nil {
			return fmt.Errorf("storage: sst value at %s: %w", k, err)
		}
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return it.Error()
}

// CutSST returns an SST of the entries of data whose user keys lie in
// [lower, upper), and how many there are (0: data is nil). A caller whose
// SST no longer fits one tablet (it split) sends each tablet its part.
func CutSST(data []byte, lower, upper []byte) (out []byte, n int, err error) {
	b := NewSSTBuilder()
	if err := ForEachSST(data, lower, upper, func(k MVCCKey, v []byte) error { return b.Put(k, v) }); err != nil {
		return nil, 0, err
	}
	if b.Count() == 0 {
		return nil, 0, nil
	}
	out, err = b.Finish()
	return out, b.Count(), err
}

// IngestFilePrefix starts the names of the files IngestBytes stages SSTs
// in; a crash can leave one behind, which the node removes at start
// (raftnode.RecoverSnapshots).
const IngestFilePrefix = "ingest-"

// IngestBytes writes the SST data to a file of the engine's directory and
// ingests it (Ingest): it lands above everything the engine holds
// without going through the WAL or a memtable. The file is gone
// afterwards, whether the ingest succeeded or not.
func (e *Engine) IngestBytes(ctx context.Context, data []byte) error {
	var id [8]byte
	_, _ = rand.Read(id[:])
	path, err := e.WriteFile(IngestFilePrefix+hex.EncodeToString(id[:])+".sst", bytes.NewReader(data))
	if err != nil {
		return err
	}
	if err := e.Ingest(ctx, []string{path}); err != nil {
		_ = e.RemoveFile(path)
		return err
	}
	// Pebble linked the file and removed the original; this is for a
	// filesystem where it had to copy and could not remove it.
	return e.RemoveFile(path)
}

// IngestFile ingests the SST at path (a file of the engine's filesystem
// that stays its owner's: raftnode's side-loaded copy of an entry's SST)
// without writing its bytes again: it is hard-linked to a staging name in
// the engine's directory, which Pebble links into its own and then
// removes, so the SST's blocks are written to disk once, by whoever
// wrote path. Pebble never writes an ingested file, so the two names
// can share it; path must not be rewritten in place afterwards (a new
// version of it must be a new file renamed over it). Where the
// filesystem cannot link, the file is copied.
func (e *Engine) IngestFile(ctx context.Context, path string) error {
	var id [8]byte
	_, _ = rand.Read(id[:])
	name := IngestFilePrefix + hex.EncodeToString(id[:]) + ".sst"
	staged := e.fs.PathJoin(e.dir, name)
	if err := e.fs.Link(path, staged); err != nil {
		f, err := e.OpenFile(path)
		if err != nil {
			return err
		}
		staged, err = e.WriteFile(name, f)
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("storage: staging %s for ingestion: %w", path, err)
		}
	}
	if err := e.Ingest(ctx, []string{staged}); err != nil {
		_ = e.RemoveFile(staged)
		return err
	}
	return e.RemoveFile(staged)
}

// CheckSSTPoints fails unless data is an SST that holds only point
// puts (no deletion of any kind, no range key, no merge operand) and
// returns how many: an SST that came over the network is ingested only
// if it can add versions and nothing else (a range deletion in it
// would remove whatever the engine held in its span).
func CheckSSTPoints(data []byte) (int, error) {
	r, err := sstable.NewMemReader(data, sstOptions().MakeReaderOptions())
	if err != nil {
		return 0, fmt.Errorf("storage: not an sst (%d bytes): %w", len(data), err)
	}
	defer r.Close()
	p, err := r.ReadPropertiesBlock(context.Background(), nil)
	if err != nil {
		return 0, fmt.Errorf("storage: reading an sst's properties: %w", err)
	}
	if p.NumDeletions != 0 || p.NumRangeDeletions != 0 || p.NumRangeKeys() != 0 || p.NumMergeOperands != 0 {
		return 0, fmt.Errorf("storage: sst holds %d deletions, %d range deletions, %d range keys, %d merge operands (only puts may be ingested)",
			p.NumDeletions, p.NumRangeDeletions, p.NumRangeKeys(), p.NumMergeOperands)
	}
	return int(p.NumEntries), nil
}
