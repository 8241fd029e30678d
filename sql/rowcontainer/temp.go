package rowcontainer

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/types"
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
	return &TempStorage{dir: dir, disk: mon.NewBudget("temporary disk", limit)}, nil
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
}

// Spillable reports whether the scope can make files.
func (s *Scope) Spillable() bool { return s != nil && s.t != nil && !s.closed }

// Close removes every file of the scope and its directory.
func (s *Scope) Close() error {
	if s == nil || s.closed {
		return nil
	}
	s.closed = true
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
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
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
		fd, err := os.OpenFile(f.name, os.O_WRONLY|os.O_APPEND, 0)
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
		fd, err := os.OpenFile(f.name, os.O_WRONLY|os.O_APPEND, 0)
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
	if cerr := f.f.Close(); err == nil {
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
	fd, err := os.Open(f.name)
	if err != nil {
		return nil, fmt.Errorf("rowcontainer: reading temporary file: %w", err)
	}
	return &Reader{file: f, fd: fd, rows: f.rows, r: bufio.NewReaderSize(io.NewSectionReader(fd, 0, f.size), bufSize)}, nil
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
		_ = f.f.Close()
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
}

// Next returns the next row (the caller's: invariant 5), or nil at the
// end.
func (r *Reader) Next() ([]types.Datum, error) {
	if r.n >= r.rows {
		r.Close()
		return nil, nil
	}
	r.n++
	return readRow(r.r, &r.buf, &r.file.c)
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
		_ = r.fd.Close()
		r.fd = nil
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
