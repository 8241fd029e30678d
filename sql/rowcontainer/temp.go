package rowcontainer

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// TempStorage is a node's directory of temporary files and its disk
// budget (--max-disk-temp-storage). Statements share it.
type TempStorage struct {
	dir  string
	disk *mon.Budget
	seq  atomic.Uint64
	// files counts the files ever made (FilesCreated), rows the rows
	// ever appended to them, counted as files are sealed or closed
	// (RowsWritten).
	files atomic.Uint64
	rows  atomic.Int64
	// wbufs is the bytes of write buffers files hold now (files being
	// appended to), wbufsPeak the most they held at once.
	wbufs, wbufsPeak atomic.Int64
	// open is the descriptors the node's temporary files hold now (files
	// being appended to, and Readers), at most maxOpen; a statement's
	// Scope holds at most stmtMaxOpen of them (invariant 7). Set before
	// the storage is shared (SetOpenFileLimits).
	open, openPeak       atomic.Int64
	maxOpen, stmtMaxOpen int64
}

// Descriptor limits by default (SetOpenFileLimits): the node's temporary
// files may hold half of the process's descriptors (RLIMIT_NOFILE; the
// other half is for the store's files and the network), and one
// statement at most stmtOpenFiles of them, so ten statements merging
// many runs at once leave descriptors to the rest of the node.
const (
	stmtOpenFiles   = 4096
	minNodeOpen     = 64
	unknownNodeOpen = 4096 // when the limit cannot be read
)

// defaultNodeOpen is half the process's soft descriptor limit (Go raises
// it to the hard limit at start).
func defaultNodeOpen() int64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return unknownNodeOpen
	}
	if rl.Cur >= math.MaxInt64/2 {
		return math.MaxInt64 / 4
	}
	return max(int64(rl.Cur)/2, minNodeOpen)
}

// SetOpenFileLimits bounds the descriptors temporary files hold: node
// for the whole node, stmt for one statement (<= 0: leave as it is).
// Call it before any statement uses the storage.
func (t *TempStorage) SetOpenFileLimits(node, stmt int64) {
	if node > 0 {
		t.maxOpen = node
	}
	if stmt > 0 {
		t.stmtMaxOpen = stmt
	}
}

// OpenFiles is the descriptors the node's temporary files hold now;
// OpenFilesPeak the most they held at once since start.
func (t *TempStorage) OpenFiles() int64     { return t.open.Load() }
func (t *TempStorage) OpenFilesPeak() int64 { return t.openPeak.Load() }

// ErrTooManyFiles is a descriptor refused by the limits of
// SetOpenFileLimits, or by the operating system (EMFILE, ENFILE): 53000,
// the statement fails, the node carries on.
func errTooManyFiles(detail string, args ...any) error {
	return pgerror.New(pgerrcode.InsufficientResources, "too many temporary files open").WithDetail(detail, args...)
}

// acquireFD takes one descriptor for the scope, or says 53000 past the
// statement's or the node's limit.
func (s *Scope) acquireFD() error {
	t := s.t
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open >= t.stmtMaxOpen {
		return errTooManyFiles("The statement holds %d temporary files open, its limit.", s.open)
	}
	n := t.open.Add(1)
	if n > t.maxOpen {
		t.open.Add(-1)
		return errTooManyFiles("The node's temporary files hold %d descriptors, its limit.", t.maxOpen)
	}
	for p := t.openPeak.Load(); n > p && !t.openPeak.CompareAndSwap(p, n); p = t.openPeak.Load() {
	}
	s.open++
	return nil
}

// releaseFD gives back a descriptor acquireFD took.
func (s *Scope) releaseFD() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open--
	s.t.open.Add(-1)
}

// FileShare is how many more descriptors one operator of the scope
// should take now: what the statement's limit leaves, less a few for its
// other operators, and half of what the node's leaves, so statements
// merging at once share the node's (each takes a share, none all).
func (s *Scope) FileShare() int64 {
	if !s.Spillable() {
		return 0
	}
	s.mu.Lock()
	open := s.open
	s.mu.Unlock()
	return max(min(s.t.stmtMaxOpen-open-stmtOpenSpare, (s.t.maxOpen-s.t.open.Load())/2), 0)
}

// stmtOpenSpare is what FileShare leaves of a statement's descriptors to
// its other operators.
const stmtOpenSpare = 16

// openFile opens name for the scope, holding one of its descriptors
// until closeFile.
func (s *Scope) openFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	if err := s.acquireFD(); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		s.releaseFD()
		if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			return nil, errTooManyFiles("The operating system refused a descriptor: %v.", err)
		}
		return nil, err
	}
	return f, nil
}

// closeFile closes a file openFile opened and gives back its descriptor.
func (s *Scope) closeFile(f *os.File) error {
	err := f.Close()
	s.releaseFD()
	return err
}

// WriteBuffersPeak is the most bytes of write buffers the storage's
// files held at once since start (a figure for tests: an operator
// filling many files at once sizes their buffers to its budget).
func (t *TempStorage) WriteBuffersPeak() int64 { return t.wbufsPeak.Load() }

// holdBuf counts n bytes of write buffer taken (n < 0: given back).
func (t *TempStorage) holdBuf(n int64) {
	v := t.wbufs.Add(n)
	for p := t.wbufsPeak.Load(); v > p && !t.wbufsPeak.CompareAndSwap(p, v); p = t.wbufsPeak.Load() {
	}
}

// FilesCreated is the number of temporary files made since start (a
// figure for tests and metrics: a statement that spilled made some).
func (t *TempStorage) FilesCreated() uint64 { return t.files.Load() }

// RowsWritten is the number of rows appended to temporary files since
// start, as of their files' last Seal or Close (a figure for tests: how
// many times an operator wrote its rows).
func (t *TempStorage) RowsWritten() int64 { return t.rows.Load() }

// count adds the rows appended since the last count to RowsWritten.
func (f *File) count() {
	f.s.t.rows.Add(f.rows - f.counted)
	f.counted = f.rows
}

// NewTempStorage makes dir the node's temporary directory, removing what
// an earlier run left there (a node that crashed mid-spill), with limit
// bytes of disk (<= 0: unlimited).
func NewTempStorage(dir string, limit int64) (*TempStorage, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("rowcontainer: cleaning temporary directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("rowcontainer: creating temporary directory %s: %w", dir, err)
	}
	return &TempStorage{dir: dir, disk: mon.NewBudget("temporary disk", limit), maxOpen: defaultNodeOpen(), stmtMaxOpen: stmtOpenFiles}, nil
}

// Dir is the temporary directory.
func (t *TempStorage) Dir() string { return t.dir }

// Disk is the temporary-disk budget.
func (t *TempStorage) Disk() *mon.Budget { return t.disk }

// NewScope opens a statement's share of the directory. A nil TempStorage
// gives a Scope that cannot spill (Spillable is false).
func (t *TempStorage) NewScope() *Scope { return &Scope{t: t} }

// Scope is one statement's temporary files: a subdirectory made on the
// first file and removed by Close (invariant 4).
type Scope struct {
	t      *TempStorage
	dir    string
	seq    int
	files  map[*File]struct{}
	closed bool

	// mu guards the descriptor count and the open readers: a sealed
	// EntrySorter's Ranges read its runs from several goroutines at once
	// (invariant 6), each opening and closing readers of the same files.
	mu      sync.Mutex
	open    int64 // descriptors its files and readers hold
	readers map[*Reader]struct{}
}

// Spillable reports whether the scope can make files.
func (s *Scope) Spillable() bool { return s != nil && s.t != nil && !s.closed }

// Close removes every file of the scope and its directory.
func (s *Scope) Close() error {
	if s == nil || s.closed {
		return nil
	}
	s.closed = true
	s.mu.Lock()
	readers := make([]*Reader, 0, len(s.readers))
	for r := range s.readers {
		readers = append(readers, r)
	}
	s.mu.Unlock()
	for _, r := range readers {
		r.Close()
	}
	for f := range s.files {
		f.Close()
	}
	if s.dir != "" {
		return os.RemoveAll(s.dir)
	}
	return nil
}

// File is an append-only file of rows. Append rows, then read them with
// any number of Readers (each reads the whole file from the start, with
// its own descriptor). A file holds a descriptor and a write buffer only
// while it is being appended to: Seal (or a Reader) releases both, so an
// operator can keep thousands of spilled partitions queued.
type File struct {
	s        *Scope
	name     string
	f        *os.File      // open for appending; nil when sealed
	w        *bufio.Writer // nil when sealed
	c        codec
	buf      []byte
	hdr      [binary.MaxVarintLen64]byte // a row's length; a local would escape (bufio may pass it on): an allocation per row
	wbuf     int                         // the write buffer's size
	size     int64                       // bytes appended
	reserved int64                       // bytes reserved in the disk budget
	rows     int64
	counted  int64 // rows added to the storage's RowsWritten
	closed   bool
}

// diskChunk is the most disk budget a File reserves at a time, so the
// shared budget's lock is taken once per chunk, not per row. A file
// reserves as much again as it holds, from minDiskChunk up to diskChunk,
// and Seal gives back what it did not use: an operator filling many small
// files (a hash split 256 ways) does not hold a chunk per file.
const (
	diskChunk    = 256 << 10
	minDiskChunk = 16 << 10
)

// writeBuf is a File's write buffer while it is appended to, unless
// NewFileBuffered says otherwise.
const writeBuf = 16 << 10

// NewFile creates a temporary file in the scope.
func (s *Scope) NewFile() (*File, error) { return s.NewFileBuffered(writeBuf) }

// NewFileBuffered is NewFile with a write buffer of bufSize bytes: an
// operator filling many files at once (hash partitions) gives each a
// smaller one, so their buffers together stay small.
func (s *Scope) NewFileBuffered(bufSize int) (*File, error) {
	if !s.Spillable() {
		return nil, fmt.Errorf("rowcontainer: no temporary storage to spill to")
	}
	if s.dir == "" {
		n := s.t.seq.Add(1)
		dir := filepath.Join(s.t.dir, fmt.Sprintf("stmt-%d-%d", os.Getpid(), n))
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, fmt.Errorf("rowcontainer: creating statement directory: %w", err)
		}
		s.dir = dir
	}
	s.seq++
	name := filepath.Join(s.dir, fmt.Sprintf("%06d.rows", s.seq))
	f, err := s.openFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("rowcontainer: creating temporary file: %w", err)
	}
	s.t.files.Add(1)
	s.t.holdBuf(int64(bufSize))
	file := &File{s: s, name: name, f: f, w: bufio.NewWriterSize(f, bufSize), wbuf: bufSize}
	if s.files == nil {
		s.files = map[*File]struct{}{}
	}
	s.files[file] = struct{}{}
	return file, nil
}

// Append writes row at the end of the file. Past the disk budget it fails
// with 53200 (invariant 2).
func (f *File) Append(row []types.Datum) error {
	if f.closed {
		return fmt.Errorf("rowcontainer: append to a closed file")
	}
	if f.w == nil {
		fd, err := f.s.openFile(f.name, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return fmt.Errorf("rowcontainer: reopening temporary file: %w", err)
		}
		f.f, f.w = fd, bufio.NewWriterSize(fd, f.wbuf)
		f.s.t.holdBuf(int64(f.wbuf))
	}
	var err error
	f.buf, err = f.c.appendRow(f.buf[:0], row)
	if err != nil {
		return err
	}
	return f.appendRecord(f.buf)
}

// AppendBytes writes rec at the end of the file as one record, read back
// by Reader.NextBytes: for callers whose rows are already bytes (an
// EntrySorter's entries). A file holds records of one kind only.
func (f *File) AppendBytes(rec []byte) error {
	if f.closed {
		return fmt.Errorf("rowcontainer: append to a closed file")
	}
	if f.w == nil {
		fd, err := f.s.openFile(f.name, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return fmt.Errorf("rowcontainer: reopening temporary file: %w", err)
		}
		f.wbuf = writeBuf
		f.f, f.w = fd, bufio.NewWriterSize(fd, writeBuf)
		f.s.t.holdBuf(int64(f.wbuf))
	}
	return f.appendRecord(rec)
}

// appendRecord writes rec length-prefixed, reserving its disk first
// (invariant 2).
func (f *File) appendRecord(rec []byte) error {
	need := f.size + int64(len(rec)) + binary.MaxVarintLen64
	if need > f.reserved {
		chunk := max(need-f.reserved, min(max(f.size, minDiskChunk), diskChunk))
		if err := f.s.t.disk.Reserve(chunk); err != nil {
			return err
		}
		f.reserved += chunk
	}
	n := binary.PutUvarint(f.hdr[:], uint64(len(rec)))
	if _, err := f.w.Write(f.hdr[:n]); err != nil {
		return fmt.Errorf("rowcontainer: writing temporary file: %w", err)
	}
	if _, err := f.w.Write(rec); err != nil {
		return fmt.Errorf("rowcontainer: writing temporary file: %w", err)
	}
	f.size += int64(n + len(rec))
	f.rows++
	return nil
}

// Seal flushes what was appended and releases the write buffer and
// descriptor (a later Append opens them again).
func (f *File) Seal() error {
	f.count()
	if f.w == nil {
		return nil
	}
	err := f.w.Flush()
	if cerr := f.s.closeFile(f.f); err == nil {
		err = cerr
	}
	f.f, f.w = nil, nil
	f.s.t.holdBuf(-int64(f.wbuf))
	if len(f.buf) > 4<<10 {
		f.buf = nil
	}
	if err != nil {
		return fmt.Errorf("rowcontainer: writing temporary file: %w", err)
	}
	// Give back the reserved disk the file did not use; a later Append
	// reserves again.
	if unused := f.reserved - f.size; unused > 0 {
		f.s.t.disk.Release(unused)
		f.reserved = f.size
	}
	return nil
}

// Rows is the number of rows appended.
func (f *File) Rows() int64 { return f.rows }

// Size is the bytes appended.
func (f *File) Size() int64 { return f.size }

// Reader seals the file and returns a reader of every row appended so
// far, buffering bufSize bytes. The reader's descriptor is closed when it
// reaches the end (or by Close).
func (f *File) Reader(bufSize int) (*Reader, error) {
	if f.closed {
		return nil, fmt.Errorf("rowcontainer: read of a closed file")
	}
	if err := f.Seal(); err != nil {
		return nil, err
	}
	fd, err := f.s.openFile(f.name, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("rowcontainer: reading temporary file: %w", err)
	}
	r := &Reader{file: f, fd: fd, rows: f.rows, r: bufio.NewReaderSize(io.NewSectionReader(fd, 0, f.size), bufSize)}
	f.s.mu.Lock()
	if f.s.readers == nil {
		f.s.readers = map[*Reader]struct{}{}
	}
	f.s.readers[r] = struct{}{}
	f.s.mu.Unlock()
	return r, nil
}

// ReaderAt seals the file and returns a reader of the rows appended so
// far from the one at byte offset off, the file's row number n (the Size
// and Rows of the file before that row was appended), buffering bufSize
// bytes: a reader of a sorted run from a key on (EntrySorter.Range).
func (f *File) ReaderAt(bufSize int, off, n int64) (*Reader, error) {
	if off < 0 || n < 0 || off > f.size || n > f.rows {
		return nil, fmt.Errorf("rowcontainer: read at row %d (offset %d) of a file of %d rows (%d bytes)", n, off, f.rows, f.size)
	}
	r, err := f.Reader(bufSize)
	if err != nil {
		return nil, err
	}
	r.r.Reset(io.NewSectionReader(r.fd, off, f.size-off))
	r.rows = f.rows - n
	return r, nil
}

// Close removes the file and releases its disk budget.
func (f *File) Close() {
	if f.closed {
		return
	}
	f.closed = true
	f.count()
	if f.f != nil {
		_ = f.s.closeFile(f.f)
		f.f, f.w = nil, nil
		f.s.t.holdBuf(-int64(f.wbuf))
	}
	_ = os.Remove(f.name)
	f.s.t.disk.Release(f.reserved)
	f.reserved = 0
	delete(f.s.files, f)
}

// Reader reads a File's rows in the order they were appended.
type Reader struct {
	file *File
	fd   *os.File
	r    *bufio.Reader
	buf  []byte
	n    int64
	rows int64 // rows in the file when the reader was made
	slab *[]types.Datum
}

// SetSlab makes the reader cut the rows it decodes from *slab, shared
// with other readers (a merge's), instead of its file's own: one slab
// for all the runs of a merge, not one per run (a kilobyte each).
func (r *Reader) SetSlab(slab *[]types.Datum) { r.slab = slab }

// Next returns the next row (the caller's: invariant 5), or nil at the
// end.
func (r *Reader) Next() ([]types.Datum, error) {
	if r.n >= r.rows {
		r.Close()
		return nil, nil
	}
	r.n++
	c := &r.file.c
	if r.slab == nil {
		return readRow(r.r, &r.buf, c)
	}
	c.slab = *r.slab
	row, err := readRow(r.r, &r.buf, c)
	*r.slab, c.slab = c.slab, nil
	return row, err
}

// NextBytes returns the next record of a file written with AppendBytes,
// or nil at the end. The record is the reader's buffer: valid until the
// next call (unlike Next's rows, it is not the caller's to keep).
func (r *Reader) NextBytes() ([]byte, error) {
	if r.n >= r.rows {
		r.Close()
		return nil, nil
	}
	r.n++
	if err := readRecord(r.r, &r.buf); err != nil {
		return nil, err
	}
	return r.buf, nil
}

// readRow reads and decodes one length-prefixed row from r, using *buf
// for its bytes.
func readRow(r *bufio.Reader, buf *[]byte, c *codec) ([]types.Datum, error) {
	if err := readRecord(r, buf); err != nil {
		return nil, err
	}
	return c.decodeRow(*buf)
}

// readRecord reads one length-prefixed record from r into *buf.
func readRecord(r *bufio.Reader, buf *[]byte) error {
	l, err := binary.ReadUvarint(r)
	if err != nil {
		return fmt.Errorf("rowcontainer: reading temporary file: %w", err)
	}
	if uint64(cap(*buf)) < l {
		*buf = make([]byte, l)
	}
	*buf = (*buf)[:l]
	if _, err := io.ReadFull(r, *buf); err != nil {
		return fmt.Errorf("rowcontainer: reading temporary file: %w", err)
	}
	return nil
}

// Close releases the reader's descriptor; Next returns nil after it.
func (r *Reader) Close() {
	if r.fd != nil {
		_ = r.file.s.closeFile(r.fd)
		r.fd = nil
		r.file.s.mu.Lock()
		delete(r.file.s.readers, r)
		r.file.s.mu.Unlock()
	}
	r.n = r.rows
}

// checkEvery is how many rows a loop that does no other I/O handles
// between checks of its context.
const checkEvery = 1024

func checkCtx(ctx context.Context, i int) error {
	if i%checkEvery == checkEvery-1 {
		return ctx.Err()
	}
	return nil
}
