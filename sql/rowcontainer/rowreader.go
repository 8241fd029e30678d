package rowcontainer

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/types"
)

// blockRows is how many consecutive rows a RowReader reads and caches at
// a time, and how often a spilled Buffer notes a file offset.
const blockRows = 256

// BlockRows is blockRows for callers that index a Buffer by block (the
// first row of each block is where a RowReader's read starts).
const BlockRows = blockRows

// RowReader reads a Buffer's rows by position (window functions' lag,
// lead, nth_value and sliding frames over a partition larger than
// work_mem). It keeps at most maxBlocks blocks of blockRows consecutive
// rows, each row passed through the caller's transform once when its
// block is read, and evicts the least recently used block: its memory is
// bounded whatever the buffer's size, and readers that move forward
// through a few regions of the buffer (a frame's start and end, an
// offset row) read each block once.
type RowReader struct {
	b         *Buffer
	transform func([]types.Datum) ([]types.Datum, error)
	acc       *mon.Account
	cache     []cachedBlock
	maxBlocks int
	tick      uint64
	// Reading the file: fd, a buffered reader over it, and the block the
	// reader stands at the start of (-1: none), so consecutive blocks are
	// read without seeking.
	fd    *os.File
	scope *Scope // whose descriptor fd is
	r     *bufio.Reader
	at    int64
	read  []byte
}

type cachedBlock struct {
	idx  int64
	rows [][]types.Datum
	// raw are the stored rows before the transform (Raw).
	raw   [][]types.Datum
	bytes int64
	used  uint64
}

// RowReader returns a reader of the rows added so far, reserving its
// cache in acc. transform maps each stored row to what Row returns (the
// result is the caller's; nil transform: the row itself).
func (b *Buffer) RowReader(acc *mon.Account, maxBlocks int, transform func([]types.Datum) ([]types.Datum, error)) (*RowReader, error) {
	if transform == nil {
		transform = func(r []types.Datum) ([]types.Datum, error) { return r, nil }
	}
	rr := &RowReader{b: b, transform: transform, acc: acc, maxBlocks: max(maxBlocks, 1), at: -1}
	if b.file != nil {
		if err := b.file.Seal(); err != nil {
			return nil, err
		}
		fd, err := b.file.s.openFile(b.file.name, os.O_RDONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("rowcontainer: reading temporary file: %w", err)
		}
		rr.fd, rr.scope = fd, b.file.s
	}
	return rr, nil
}

// Row returns row i (0 <= i < Len) after the transform.
func (rr *RowReader) Row(i int64) ([]types.Datum, error) {
	blk, off, err := rr.block(i)
	if err != nil {
		return nil, err
	}
	return blk.rows[off], nil
}

// Raw returns row i as stored, before the transform: a window function's
// reader behind (the row it emits) finds it in the blocks the function
// just read instead of decoding the buffer a second time. The row is the
// caller's to change (a block read again is decoded afresh; a buffer in
// memory shares its rows, as Iter does).
func (rr *RowReader) Raw(i int64) ([]types.Datum, error) {
	blk, off, err := rr.block(i)
	if err != nil {
		return nil, err
	}
	return blk.raw[off], nil
}

// block returns the cached block holding row i, reading it if need be,
// and i's offset in it.
func (rr *RowReader) block(i int64) (*cachedBlock, int64, error) {
	if i < 0 || i >= rr.b.n {
		return nil, 0, fmt.Errorf("rowcontainer: row %d of a buffer of %d", i, rr.b.n)
	}
	bi, off := i/blockRows, i%blockRows
	rr.tick++
	for k := range rr.cache {
		if c := &rr.cache[k]; c.idx == bi {
			c.used = rr.tick
			return c, off, nil
		}
	}
	blk, err := rr.load(bi)
	return blk, off, err
}

// load reads block bi into the cache, evicting the least recently used
// block when the cache is full.
func (rr *RowReader) load(bi int64) (*cachedBlock, error) {
	first := bi * blockRows
	n := min(blockRows, rr.b.n-first)
	rows := make([][]types.Datum, n)
	raw := make([][]types.Datum, n)
	var bytes int64
	for k := range rows {
		var row []types.Datum
		if rr.fd == nil {
			row = rr.b.rows[first+int64(k)]
		} else {
			var err error
			if row, err = rr.fileRow(bi, k); err != nil {
				return nil, err
			}
		}
		out, err := rr.transform(row)
		if err != nil {
			return nil, err
		}
		rows[k], raw[k] = out, row
		bytes += RowSize(out)
		if rr.fd != nil {
			bytes += RowSize(row)
		}
	}
	if err := rr.acc.Force(bytes); err != nil {
		return nil, err
	}
	blk := cachedBlock{idx: bi, rows: rows, raw: raw, bytes: bytes, used: rr.tick}
	if len(rr.cache) < rr.maxBlocks {
		rr.cache = append(rr.cache, blk)
		return &rr.cache[len(rr.cache)-1], nil
	}
	lru := 0
	for k := range rr.cache {
		if rr.cache[k].used < rr.cache[lru].used {
			lru = k
		}
	}
	rr.acc.Shrink(rr.cache[lru].bytes)
	rr.cache[lru] = blk
	return &rr.cache[lru], nil
}

// fileRow reads row k of block bi from the file (k counts up from 0 for
// each block).
func (rr *RowReader) fileRow(bi int64, k int) ([]types.Datum, error) {
	if k == 0 && rr.at != bi {
		f := rr.b.file
		start := rr.b.blocks[bi]
		sr := io.NewSectionReader(rr.fd, start, f.size-start)
		if rr.r == nil {
			rr.r = bufio.NewReaderSize(sr, readBuf)
		} else {
			rr.r.Reset(sr)
		}
	}
	row, err := readRow(rr.r, &rr.read, &rr.b.file.c)
	if err != nil {
		return nil, err
	}
	// Past the block's last row the reader stands at the next block.
	if k == blockRows-1 {
		rr.at = bi + 1
	} else {
		rr.at = -1
	}
	return row, nil
}

// Close releases the cache and the file descriptor.
func (rr *RowReader) Close() {
	for _, c := range rr.cache {
		rr.acc.Shrink(c.bytes)
	}
	rr.cache = nil
	if rr.fd != nil {
		_ = rr.scope.closeFile(rr.fd)
		rr.fd = nil
	}
}
