package storage

import (
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Read-ahead sized by the storage profile (read-planning.txt: a table scan
// reads in key order; on a spinning disk or an object store it should
// also read in large pieces). Pebble reads an SST one block at a time
// (4 KiB by default) and leaves read-ahead to the OS (readahead(2),
// fadvise), at most 256 KiB and only on a local file. Every block is then
// one read call: on an HDD 0.2 ms each however sequential, on an object
// store a request each. readaheadFS sits between Pebble and the disk:
// a file read in order is read in windows, one read call per window, and
// the blocks are served from memory.
//
//  1. Only SSTs (*.sst) opened for reading are read ahead; they are
//     immutable once written, so a window never goes stale.
//  2. A window is read only after minSequential reads of the file in a
//     row each started where the previous one ended (a scan, not a point
//     lookup); the first window is firstWindow bytes and each next one
//     doubles, up to the profile's size, as RocksDB's auto read-ahead
//     and Pebble's own do. Up to maxStreams such runs of one file are
//     followed at once, each with its windows (a scan's data blocks and
//     its index partitions further on); a read that continues none
//     starts a run of its own in place of one holding no window, or else
//     of the least recently used.
//  3. While the reader consumes a window, the next one is read in the
//     background (one at a time per file), so a scan waits on the disk
//     only when it outruns it. A file's Close waits for it.
//  4. A read is served from memory only for bytes a window read from the
//     file; what a window could not read (an error, the end of the file)
//     is read directly, so errors reach the reader unchanged.
//  5. All files' windows together hold at most readAheadFiles times two
//     windows of the largest size; a file that needs room takes it from
//     the file whose windows were least recently used (a scan that
//     ended), and reads directly when none can give any.

// firstWindow is the first read-ahead window of a sequential run.
const firstWindow = 64 << 10

// minSequential is how many reads in a row, each continuing the previous,
// make a run worth reading ahead: a point lookup reads an index block and
// a data block, rarely adjacent; a scan reads block after block.
const minSequential = 2

// ReadAheadFor is the read-ahead window of a storage profile: on an SSD,
// where a read costs little whatever its size, Pebble's own 256 KiB; on
// an HDD 2 MiB (a read's 0.2 ms is then 2% of the transfer at 150 MiB/s);
// on an object store 8 MiB (eight 1 MiB chunks per request round).
// Unknown profiles get the SSD's.
func ReadAheadFor(profile string) int64 {
	switch profile {
	case ProfileHDD:
		return 2 << 20
	case ProfileObjectStore:
		return 8 << 20
	}
	return 256 << 10
}

// ReadAheadStats counts what read-ahead did.
type ReadAheadStats struct {
	// Windows counts windows read, WindowBytes their bytes; Served the
	// reads answered from a window, Direct those passed to the disk;
	// Dropped the windows given up for others under the memory budget.
	Windows, WindowBytes, Served, Direct, Dropped int64
	// Plans counts the scan plans made (prefetch.go), TakenOver the times
	// an iterator took over a parked one (a scan's next page or tablet).
	Plans, TakenOver int64
}

// readaheadFS wraps the FS Pebble runs on (see the comment above).
type readaheadFS struct {
	vfs.FS
	// max is the largest window, budget the bytes all files' windows may
	// hold together (invariant 5).
	max, budget int64

	mu      sync.Mutex
	held    int64
	tick    int64
	holders map[*raFile]int64 // files holding windows, by last use
	files   map[string]*raFile
	plans   []*scanPlan // running (prefetch.go)

	windows, windowBytes, served, direct, dropped atomic.Int64
	plansMade, takenOver                          atomic.Int64
}

// readAheadFiles is how many files may read ahead at full size at once
// (two windows each: the one consumed and the next): the memory budget.
const readAheadFiles = 4

func newReadaheadFS(fs vfs.FS, max int64) *readaheadFS {
	return &readaheadFS{FS: fs, max: max, budget: 2 * readAheadFiles * max, holders: map[*raFile]int64{}, files: map[string]*raFile{}}
}

func (fs *readaheadFS) stats() ReadAheadStats {
	return ReadAheadStats{Windows: fs.windows.Load(), WindowBytes: fs.windowBytes.Load(),
		Served: fs.served.Load(), Direct: fs.direct.Load(), Dropped: fs.dropped.Load(),
		Plans: fs.plansMade.Load(), TakenOver: fs.takenOver.Load()}
}

// reserve takes n bytes of the budget for f, dropping the windows of the
// files least recently read ahead if need be (invariant 5); false: none
// could be dropped. f.mu is held; other files' locks are only tried, so
// two files reserving at once cannot deadlock.
func (fs *readaheadFS) reserve(f *raFile, n int64) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.tick++
	for fs.held+n > fs.budget {
		var oldest *raFile
		for g, t := range fs.holders {
			if g != f && (oldest == nil || t < fs.holders[oldest]) {
				oldest = g
			}
		}
		if oldest == nil || !oldest.mu.TryLock() {
			return false
		}
		fs.held -= oldest.dropLocked()
		delete(fs.holders, oldest)
		oldest.mu.Unlock()
		fs.dropped.Add(1)
	}
	fs.held += n
	fs.holders[f] = fs.tick
	return true
}

// release gives n bytes back; gone: f holds no window any more.
func (fs *readaheadFS) release(f *raFile, n int64, gone bool) {
	fs.mu.Lock()
	fs.held -= n
	if gone {
		delete(fs.holders, f)
	}
	fs.mu.Unlock()
}

// Open implements vfs.FS: SSTs read ahead (invariant 1). Every handle of
// one file shares its read-ahead state (Pebble reopens a file it reads in
// order with SequentialReadsOption, and each iterator's reads may go
// through either handle); the windows are read through a handle of their
// own, open while any handle of the file is.
func (fs *readaheadFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	if err != nil || fs.max <= 0 || !strings.HasSuffix(name, ".sst") {
		return f, err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	sh := fs.files[name]
	if sh == nil {
		info, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		own, err := fs.FS.Open(name)
		if err != nil {
			f.Close()
			return nil, err
		}
		sh = &raFile{File: own, fs: fs, name: name, size: info.Size()}
		fs.files[name] = sh
	}
	sh.refs++
	return &raHandle{File: f, sh: sh}, nil
}

// raHandle is one open handle of an SST: reads go through the file's
// shared read-ahead state; what is not served from a window is read
// through the handle itself.
type raHandle struct {
	vfs.File
	sh *raFile
}

// ReadAt implements vfs.File.
func (h *raHandle) ReadAt(p []byte, off int64) (int, error) { return h.sh.readAt(h.File, p, off) }

// Close implements vfs.File; the file's last handle closes its state.
func (h *raHandle) Close() error {
	err := h.File.Close()
	fs := h.sh.fs
	fs.mu.Lock()
	h.sh.refs--
	last := h.sh.refs == 0
	if last {
		delete(fs.files, h.sh.name)
	}
	fs.mu.Unlock()
	if last {
		if cerr := h.sh.close(); err == nil {
			err = cerr
		}
	}
	return err
}

// window is bytes [off, off+want) of a file, being read until done is
// closed; then buf holds what was read (possibly less) and err why not.
// buf and err are written once, before done closes.
type window struct {
	off, want int64
	buf       []byte
	err       error
	done      chan struct{}
}

func (w *window) ready() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// raFile is the read-ahead state of one SST, shared by its handles;
// File is its own handle, which reads the windows.
type raFile struct {
	vfs.File
	fs   *readaheadFS
	name string
	size int64
	refs int // handles open; fs.mu guards it

	mu      sync.Mutex
	streams [maxStreams]stream
	tick    int64
	wg      sync.WaitGroup
}

// maxStreams is how many sequential runs of one file are followed at
// once (invariant 2): a scan reads its data blocks in order and, with a
// two-level index, the index partitions in order too, further on in the
// file; point reads come between.
const maxStreams = 4

// stream is one run of reads of a file, each starting where the previous
// ended.
type stream struct {
	// next is where the run's last read not served from a window ended,
	// run how many such reads in a row continued the previous one; used
	// is when the stream last served or started a read (raFile.tick).
	next int64
	run  int
	used int64
	// cur is the window being consumed, ahead the next one (being read in
	// the background, invariant 3); grow the last window's size.
	cur, ahead *window
	grow       int64
}

// held is the bytes s's windows hold.
func (s *stream) held() int64 {
	var n int64
	for _, w := range []*window{s.cur, s.ahead} {
		if w != nil {
			n += w.want
		}
	}
	return n
}

// readAt reads p at off for a handle whose own file is own.
func (f *raFile) readAt(own vfs.File, p []byte, off int64) (int, error) {
	if f.fs.fromPlans(f.name, p, off) {
		return len(p), nil
	}
	f.mu.Lock()
	f.tick++
	n := 0
	var last *stream
	for n < len(p) {
		at := off + int64(n)
		s, w := f.windowAt(at)
		if w == nil {
			break
		}
		s.used = f.tick
		f.mu.Unlock()
		<-w.done
		f.mu.Lock()
		if w.err != nil || at >= w.off+int64(len(w.buf)) {
			// What the window could not read is read directly
			// (invariant 4).
			break
		}
		n += copy(p[n:], w.buf[at-w.off:])
		if s.ahead == w {
			// The reader moved into the window read ahead: it becomes
			// the current one, and the one consumed goes.
			f.setCurLocked(s, w)
		}
		last = s
	}
	if n == len(p) {
		f.readAheadLocked(last)
		f.mu.Unlock()
		f.fs.served.Add(1)
		return n, nil
	}
	start := off + int64(n)
	s := f.continuing(start)
	if s != nil {
		s.run++
	} else {
		s = f.newStreamLocked()
	}
	s.used = f.tick
	s.next = off + int64(len(p))
	if s.run >= minSequential && (s.cur == nil || s.cur.ready()) && s.ahead == nil {
		// A sequential run past any window: read one from here and
		// serve this read from it.
		if w := f.startLocked(s, start); w != nil {
			f.setCurLocked(s, w)
			f.mu.Unlock()
			<-w.done
			f.mu.Lock()
			if w.err == nil && start+int64(len(p)-n) <= w.off+int64(len(w.buf)) {
				n += copy(p[n:], w.buf)
				f.readAheadLocked(s)
				f.mu.Unlock()
				f.fs.served.Add(1)
				return n, nil
			}
		}
	}
	f.mu.Unlock()
	f.fs.direct.Add(1)
	m, err := own.ReadAt(p[n:], start)
	return n + m, err
}

// windowAt returns the window holding off, read or being read, and its
// stream. f.mu is held.
func (f *raFile) windowAt(off int64) (*stream, *window) {
	for i := range f.streams {
		s := &f.streams[i]
		for _, w := range []*window{s.cur, s.ahead} {
			if w != nil && off >= w.off && off < w.off+w.want {
				return s, w
			}
		}
	}
	return nil, nil
}

// continuing returns the stream a read at start continues: it starts
// where the stream's last direct read or its current window ended. f.mu
// is held.
func (f *raFile) continuing(start int64) *stream {
	for i := range f.streams {
		s := &f.streams[i]
		if s.used > 0 && (start == s.next || (s.cur != nil && start == s.cur.off+s.cur.want)) {
			return s
		}
	}
	return nil
}

// newStreamLocked starts a stream in the slot least worth keeping: one
// holding no window before one that does, then the least recently used.
// f.mu is held.
func (f *raFile) newStreamLocked() *stream {
	var best *stream
	for i := range f.streams {
		s := &f.streams[i]
		if best == nil || (s.cur == nil) != (best.cur == nil) && s.cur == nil ||
			(s.cur == nil) == (best.cur == nil) && s.used < best.used {
			best = s
		}
	}
	if n := best.held(); n > 0 {
		f.fs.release(f, n, false)
	}
	*best = stream{}
	return best
}

// setCurLocked makes w the window s consumes, giving the previous one's
// bytes back. f.mu is held.
func (f *raFile) setCurLocked(s *stream, w *window) {
	if s.cur != nil && s.cur != w {
		f.fs.release(f, s.cur.want, false)
	}
	s.cur = w
	if s.ahead == w {
		s.ahead = nil
	}
}

// dropLocked forgets f's windows (a window being read finishes unseen)
// and returns their bytes. f.mu is held.
func (f *raFile) dropLocked() int64 {
	var n int64
	for i := range f.streams {
		n += f.streams[i].held()
		f.streams[i] = stream{}
	}
	return n
}

// readAheadLocked starts reading the window after s's current one once
// that one is read and being consumed (invariant 3). f.mu is held.
func (f *raFile) readAheadLocked(s *stream) {
	if s == nil || s.cur == nil || s.ahead != nil || !s.cur.ready() {
		return
	}
	end := s.cur.off + int64(len(s.cur.buf))
	if s.cur.err != nil || end >= f.size || end < s.cur.off+s.cur.want {
		return
	}
	s.ahead = f.startLocked(s, end)
}

// startLocked starts reading a window of s at off in the background, or
// returns nil when the budget has no room. f.mu is held.
func (f *raFile) startLocked(s *stream, off int64) *window {
	grow := min(firstWindow, f.fs.max)
	if s.grow > 0 {
		grow = min(2*s.grow, f.fs.max)
	}
	n := min(grow, f.size-off)
	if n <= 0 || !f.fs.reserve(f, n) {
		return nil
	}
	s.grow = grow
	w := &window{off: off, want: n, done: make(chan struct{})}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		buf := make([]byte, n)
		m, err := f.File.ReadAt(buf, off)
		if errors.Is(err, io.EOF) && m > 0 {
			err = nil
		}
		if err == nil {
			f.fs.windows.Add(1)
			f.fs.windowBytes.Add(int64(m))
		}
		w.buf, w.err = buf[:m], err
		close(w.done)
	}()
	return w
}

// close ends the state once its last handle closed: it waits for a
// window being read and gives the windows' bytes back.
func (f *raFile) close() error {
	f.wg.Wait()
	f.mu.Lock()
	n := f.dropLocked()
	f.mu.Unlock()
	f.fs.release(f, n, true)
	return f.File.Close()
}
