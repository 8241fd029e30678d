package rowcontainer

import (
	"context"
	"errors"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/types"
)

// Buffer is an append-only list of rows that moves to a temporary file
// when its account refuses more memory. Read it any number of times with
// Iter (materialized CTEs, the inner side of a nested-loop join, hash
// partitions).
type Buffer struct {
	acc   *mon.Account
	scope *Scope
	rows  [][]types.Datum
	bytes int64
	file  *File
	n     int64
	// blocks holds, once the rows are on disk, the file offset of every
	// blockRows-th row, for RowReader (reserved in acc: 8 bytes per
	// blockRows rows).
	blocks []int64
}

// NewBuffer returns an empty buffer reserving in acc and spilling into
// scope.
func NewBuffer(acc *mon.Account, scope *Scope) *Buffer {
	return &Buffer{acc: acc, scope: scope}
}

// Add appends row (the buffer keeps it; the caller must not change it).
func (b *Buffer) Add(row []types.Datum) error {
	b.n++
	if b.file != nil {
		return b.appendFile(row)
	}
	n := RowSize(row)
	err := b.acc.Grow(n)
	if err != nil && b.scope.Spillable() {
		f, ferr := b.scope.NewFile()
		if ferr != nil {
			return ferr
		}
		b.file = f
		// The rows' reservation goes first: they are leaving memory,
		// and under a node budget they filled, writing them needs a
		// little of it (the block offsets).
		rows := b.rows
		b.rows = nil
		b.acc.Shrink(b.bytes)
		b.bytes = 0
		for i, r := range rows {
			if err := b.appendFile(r); err != nil {
				return err
			}
			rows[i] = nil
		}
		return b.appendFile(row)
	}
	if errors.Is(err, mon.ErrWorkMem) {
		err = b.acc.Force(n)
	}
	if err != nil {
		return err
	}
	b.bytes += n
	b.rows = append(b.rows, row)
	return nil
}

// appendFile writes row to the buffer's file, noting where each block of
// blockRows rows starts.
func (b *Buffer) appendFile(row []types.Datum) error {
	if b.file.Rows()%blockRows == 0 {
		if err := b.acc.Force(8); err != nil {
			return err
		}
		b.blocks = append(b.blocks, b.file.Size())
	}
	return b.file.Append(row)
}

// Len is the number of rows added.
func (b *Buffer) Len() int64 { return b.n }

// Spilled reports whether the rows are on disk.
func (b *Buffer) Spilled() bool { return b.file != nil }

// Iter reads every row added so far, in order. Rows read from memory are
// shared with the buffer and other iterators (invariant 5: nobody may
// change them).
func (b *Buffer) Iter() (Iterator, error) {
	if b.file == nil {
		return &bufIter{rows: b.rows}, nil
	}
	r, err := b.file.Reader(readBuf)
	if err != nil {
		return nil, err
	}
	return &fileIter{r: r}, nil
}

// Close releases the buffer's memory and file.
func (b *Buffer) Close() {
	if b.file != nil {
		b.file.Close()
		b.file = nil
	}
	b.rows = nil
	b.acc.Shrink(b.bytes + 8*int64(len(b.blocks)))
	b.bytes = 0
	b.blocks = nil
}

type bufIter struct {
	rows [][]types.Datum
	i    int
}

func (it *bufIter) Next(ctx context.Context) ([]types.Datum, error) {
	if it.i >= len(it.rows) {
		return nil, nil
	}
	if err := checkCtx(ctx, it.i); err != nil {
		return nil, err
	}
	it.i++
	return it.rows[it.i-1], nil
}

func (it *bufIter) Close() { it.rows = nil }

type fileIter struct {
	r *Reader
	i int
}

func (it *fileIter) Next(ctx context.Context) ([]types.Datum, error) {
	it.i++
	if err := checkCtx(ctx, it.i); err != nil {
		return nil, err
	}
	return it.r.Next()
}

func (it *fileIter) Close() { it.r.Close() }
