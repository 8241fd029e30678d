package storage

import (
	"fmt"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A synced commit's cost on a journaling file system (ext4, xfs) depends on
// where in the WAL file it writes. Appending past the file's end, or into
// blocks Pebble reserved with fallocate (which ext4 keeps as unwritten
// extents), changes the file's metadata, so each fdatasync also commits
// the file system's journal; overwriting blocks already written flushes
// the data alone. PostgreSQL writes every WAL segment with zeros before it
// uses it (wal_init_zero) for this reason; Pebble gets the same effect only
// from a recycled WAL file, and only up to that file's old size.
// Measured under pgbench simple-update, back to back on this machine:
// PostgreSQL's WAL syncs 0.80–0.87 ms, Pebble's 1.97–2.25 ms
// (bench/README.md, "Issue 22, tenth session").
//
// walFillFS hands Pebble WAL files already written with zeros up to size,
// so Pebble's appends overwrite written blocks until the file passes size.
// Pebble reads a zeroed tail as the end of the log (record.ErrZeroedChunk
// and ErrUnexpectedEOF, tolerated at the end of the newest WAL, as after
// its own preallocation or recycling), so recovery sees the same records.
//
// Writing the zeros must not stall commits: Pebble creates a WAL inside
// its commit pipeline (a memtable rotation), and tens of MiB written then
// would hold every commit, raft's heartbeats included. So the zeros are
// written ahead, off the commit path, into a spare file (spareName in the
// store's directory, written under a temporary name, synced, renamed); a
// WAL Pebble creates, or a recycled one shorter than size, is the spare
// renamed (as Pebble's own recycling renames a file), and the next spare
// is started at once. With no spare ready Pebble gets what it asked for,
// as without the fill; only while the engine opens (before any commit) is
// the first WAL filled in place. A spare outlives the engine and is taken
// by the next Open.
type walFillFS struct {
	vfs.FS
	size int64

	mu   sync.Mutex
	cond *sync.Cond
	// dir is the directory of the WAL files (the store's), known from
	// Pebble's first WAL; spare is the path of a filled spare ready to be
	// taken ("": none); making is set while one is being written; opened
	// once the engine is open (filling in place would stall commits);
	// closed once the engine closes (no spare is started after).
	dir    string
	spare  string
	making bool
	opened bool
	closed bool
}

// spareName is the spare WAL file's name in the store's directory; Pebble
// ignores files whose names it does not know.
const spareName = "CAIRN-WALFILL"

// walCategory is the category Pebble creates its WAL files under.
const walCategory vfs.DiskWriteCategory = "pebble-wal"

func newWALFillFS(fs vfs.FS, size int64, dir string) *walFillFS {
	w := &walFillFS{FS: fs, size: size, dir: dir}
	w.cond = sync.NewCond(&w.mu)
	// A spare a previous run finished is taken; one it was writing is
	// dropped.
	path := fs.PathJoin(dir, spareName)
	_ = fs.Remove(path + ".tmp")
	if st, err := fs.Stat(path); err == nil && st.Size() >= size {
		w.spare = path
	}
	return w
}

func isWALFile(name string, category vfs.DiskWriteCategory) bool {
	return category == walCategory && strings.HasSuffix(name, ".log")
}

// takeSpare returns the ready spare's path and forgets it ("": none).
func (fs *walFillFS) takeSpare() string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	s := fs.spare
	fs.spare = ""
	return s
}

func (fs *walFillFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if !isWALFile(name, category) {
		return fs.FS.Create(name, category)
	}
	defer fs.startSpare()
	if s := fs.takeSpare(); s != "" {
		return fs.FS.ReuseForWrite(s, name, category)
	}
	f, err := fs.FS.Create(name, category)
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	opened := fs.opened
	fs.mu.Unlock()
	if !opened {
		if err := fs.fill(name, category); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	return f, nil
}

func (fs *walFillFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if !isWALFile(newname, category) {
		return fs.FS.ReuseForWrite(oldname, newname, category)
	}
	if st, err := fs.FS.Stat(oldname); err == nil && st.Size() < fs.size {
		// Too short to take a whole WAL: the spare instead, if one is
		// ready (Pebble forgets the old file once it is reused).
		if s := fs.takeSpare(); s != "" {
			defer fs.startSpare()
			f, err := fs.FS.ReuseForWrite(s, newname, category)
			if err != nil {
				return nil, err
			}
			if err := fs.FS.Remove(oldname); err != nil {
				_ = f.Close()
				return nil, fmt.Errorf("storage: removing the short recycled WAL %s: %w", oldname, err)
			}
			return f, nil
		}
	}
	return fs.FS.ReuseForWrite(oldname, newname, category)
}

// open records that the engine is open and starts the first spare.
func (fs *walFillFS) open() {
	fs.mu.Lock()
	fs.opened = true
	fs.mu.Unlock()
	fs.startSpare()
}

// startSpare starts writing a spare, unless one is ready or being
// written, or the engine closed.
func (fs *walFillFS) startSpare() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if !fs.opened || fs.closed || fs.making || fs.spare != "" {
		return
	}
	fs.making = true
	go fs.makeSpare()
}

// makeSpare writes a spare under a temporary name, syncs it and renames
// it. A failure leaves no spare: the next WAL is made as Pebble asks, and
// the next creation tries again.
func (fs *walFillFS) makeSpare() {
	path := fs.FS.PathJoin(fs.dir, spareName)
	tmp := path + ".tmp"
	err := func() error {
		f, err := fs.FS.Create(tmp, walCategory)
		if err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := fs.fill(tmp, walCategory); err != nil {
			return err
		}
		return fs.FS.Rename(tmp, path)
	}()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.making = false
	if err != nil {
		_ = fs.FS.Remove(tmp)
	} else {
		fs.spare = path
	}
	fs.cond.Broadcast()
}

// close stops making spares and waits for one being written.
func (fs *walFillFS) close() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.closed = true
	for fs.making {
		fs.cond.Wait()
	}
}

// waitIdle waits until no spare is being written (tests).
func (fs *walFillFS) waitIdle() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for fs.making {
		fs.cond.Wait()
	}
}

// walFillChunk is the size of one write of zeros.
const walFillChunk = 1 << 20

// fill writes zeros into name up to fs.size, and syncs them (the size
// they give the file included).
func (fs *walFillFS) fill(name string, category vfs.DiskWriteCategory) error {
	w, err := fs.FS.OpenReadWrite(name, category)
	if err != nil {
		return fmt.Errorf("storage: filling WAL file %s: %w", name, err)
	}
	zeros := make([]byte, min(walFillChunk, fs.size))
	for off := int64(0); off < fs.size; {
		n := min(int64(len(zeros)), fs.size-off)
		if _, err := w.WriteAt(zeros[:n], off); err != nil {
			_ = w.Close()
			return fmt.Errorf("storage: filling WAL file %s at %d: %w", name, off, err)
		}
		off += n
	}
	if err := w.Sync(); err != nil {
		_ = w.Close()
		return fmt.Errorf("storage: syncing the filled WAL file %s: %w", name, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("storage: closing the filled WAL file %s: %w", name, err)
	}
	return nil
}
