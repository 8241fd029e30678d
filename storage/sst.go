package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// SSTWriter builds an SST outside the engine, for Engine.Ingest: replica
// snapshots (the whole span of a tablet) and index backfills (sorted runs)
// are written this way instead of through batches, so they skip the WAL and
// the memtable. It is not safe for concurrent use.
//
// Entries must arrive in engine-key order (invariant 1): puts in strictly
// increasing MVCCKey order, and range deletions in increasing,
// non-overlapping spans. A range deletion in an SST removes what the engine
// held in its span before the ingest but not the SST's own puts, so
// ClearRange(span) followed by the span's puts replaces the span atomically.
type SSTWriter struct {
	fs   vfs.FS
	path string
	w    *sstable.Writer
	// lastKey is the encoding of the last key put; lastClearEnd the end of
	// the last range deletion. Both check ordering before Pebble sees it, so
	// a caller's mistake is a clear error rather than a corrupt table.
	lastKey      []byte
	lastClearEnd []byte
	count        int
	done         bool
}

// NewSSTWriter creates an SST at path on the engine's filesystem, in the
// engine's table format and with its comparer, block and filter settings, so
// Ingest can link it in without rewriting it.
func (e *Engine) NewSSTWriter(path string) (*SSTWriter, error) {
	f, err := e.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("storage: create sst %s: %w", path, err)
	}
	opts := e.opts.MakeWriterOptions(0, e.db.TableFormat())
	// No value blocks: Pebble's writer keeps every value block in memory
	// until Finish, and a tablet's snapshot image (this writer's user)
	// covers the tablet's whole span, every old version included: one
	// chaos node held 367 MiB of them streaming a snapshot
	// (TestSSTWriterKeepsNoValueBlocks). Compactions put the old versions
	// back into value blocks as they rewrite the table.
	opts.DisableValueBlocks = true
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), opts)
	return &SSTWriter{fs: e.fs, path: path, w: w}, nil
}

// Path returns the file being written.
func (w *SSTWriter) Path() string { return w.path }

// Put adds key. It must sort after every key put before (ErrOutOfOrder).
func (w *SSTWriter) Put(key MVCCKey, value []byte) error {
	if w.done {
		return ErrSSTFinished
	}
	if err := checkWriteKey(key); err != nil {
		return fmt.Errorf("storage: sst put: %w", err)
	}
	enc := key.Encode(nil)
	if w.lastKey != nil && Comparer.Compare(enc, w.lastKey) <= 0 {
		return fmt.Errorf("%w: put %s after %s", ErrOutOfOrder, key, Comparer.FormatKey(w.lastKey))
	}
	if err := w.w.Set(enc, value); err != nil {
		return fmt.Errorf("storage: sst put %s: %w", key, err)
	}
	w.lastKey = enc
	w.count++
	return nil
}

// ClearRange adds a deletion of every entry with a user key in [start, end)
// already in the engine when the SST is ingested. Spans must not overlap and
// must come in increasing order (ErrOutOfOrder).
func (w *SSTWriter) ClearRange(start, end []byte) error {
	if w.done {
		return ErrSSTFinished
	}
	if bytes.Compare(start, end) >= 0 {
		return fmt.Errorf("storage: sst clear range: empty span [%q, %q)", start, end)
	}
	if w.lastClearEnd != nil && bytes.Compare(start, w.lastClearEnd) < 0 {
		return fmt.Errorf("%w: clear range [%q, %q) starts before the previous one ends at %q",
			ErrOutOfOrder, start, end, w.lastClearEnd)
	}
	if err := w.w.DeleteRange(MVCCKey{Key: start}.Encode(nil), MVCCKey{Key: end}.Encode(nil)); err != nil {
		return fmt.Errorf("storage: sst clear range [%q, %q): %w", start, end, err)
	}
	w.lastClearEnd = append([]byte(nil), end...)
	w.count++
	return nil
}

// Count is the number of entries (puts and range deletions) added so far.
func (w *SSTWriter) Count() int { return w.count }

// EstimatedSize is roughly how large the finished file will be; index
// builds cut their output into SSTs of a target size with it.
func (w *SSTWriter) EstimatedSize() uint64 { return w.w.Raw().EstimatedSize() }

// Finish writes the table's index and footer and syncs and closes the file;
// it is then ready for Engine.Ingest. On error the file is removed.
func (w *SSTWriter) Finish() error {
	if w.done {
		return ErrSSTFinished
	}
	w.done = true
	if err := w.w.Close(); err != nil {
		_ = w.fs.Remove(w.path)
		return fmt.Errorf("storage: finish sst %s: %w", w.path, err)
	}
	return nil
}

// Abort abandons the table and removes its file. It is a no-op after Finish
// or Abort, so callers may defer it.
func (w *SSTWriter) Abort() {
	if w.done {
		return
	}
	w.done = true
	_ = w.w.Close()
	_ = w.fs.Remove(w.path)
}

// WriteFile writes r to name in the engine's directory and syncs it (an
// SST received from another node, to be ingested). It returns the path to
// hand to Ingest; on error nothing is left behind.
func (e *Engine) WriteFile(name string, r io.Reader) (string, error) {
	path := e.fs.PathJoin(e.dir, name)
	f, err := e.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return "", fmt.Errorf("storage: create %s: %w", path, err)
	}
	// struct{ io.Reader } hides r's WriteTo: a bytes.Reader's would hand
	// f.Write the caller's own slice (IngestBytes' SST), and vfs.File.Write
	// may modify what it is given (Pebble's MemFS inverts it in race and
	// invariants builds). io.Copy writes from a buffer of its own instead.
	_, err = io.Copy(f, struct{ io.Reader }{r})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = e.fs.Remove(path)
		return "", fmt.Errorf("storage: write %s: %w", path, err)
	}
	return path, nil
}

// SSTPath is where a temporary SST named name lives on the engine's
// filesystem (the path for NewSSTWriter).
func (e *Engine) SSTPath(name string) string { return e.fs.PathJoin(e.dir, name) }

// OpenFile opens a file of the engine's filesystem for reading (an SST
// written with NewSSTWriter, to be streamed).
func (e *Engine) OpenFile(path string) (io.ReadCloser, error) {
	f, err := e.fs.Open(path)
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	return f, nil
}

// RemoveFile removes a file of the engine's filesystem; a missing file is
// no error.
func (e *Engine) RemoveFile(path string) error {
	if err := e.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("storage: remove %s: %w", path, err)
	}
	return nil
}

// RemoveFiles removes the files of the engine's directory whose names
// start with one of prefixes (temporary SSTs a crash left behind).
func (e *Engine) RemoveFiles(prefixes ...string) error {
	names, err := e.fs.List(e.dir)
	if err != nil {
		return fmt.Errorf("storage: listing %s: %w", e.dir, err)
	}
	for _, name := range names {
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				if err := e.RemoveFile(e.fs.PathJoin(e.dir, name)); err != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}
