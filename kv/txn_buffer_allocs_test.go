package kv

import (
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

// The keys and value pgbenchBuffer buffers, built once.
var (
	pgRow, pgHist, pgOther = []byte("r5"), []byte("h9"), []byte("a1")
	pgRowEnd, pgRowNext    = keys.PrefixEnd(pgRow), keys.Next(pgRow)
	pgValue                = []byte("v")
)

// pgbenchBuffer fills wb as a pgbench -N block buffers: the UPDATE's row
// lock, the rewrite's range deletion read empty and its row, the
// history row, four ops.
func pgbenchBuffer(wb *writeBuffer) {
	wb.locks = append(wb.locks, bufferedLock{span: kvpb.Span{Key: pgRow, EndKey: pgRowEnd}})
	wb.addRange(bufferedRange{span: kvpb.Span{Key: pgRowNext, EndKey: pgRowEnd}, ord: 0, seenEmpty: true})
	for _, k := range [...][]byte{pgRow, pgHist, pgOther} {
		wb.add(k, bufferedWrite{ord: 1, value: pgValue}, hlc.Timestamp{})
		wb.ops = append(wb.ops, bufferedOp{seq: 1})
	}
	wb.ops = append(wb.ops, bufferedOp{seq: 2})
}

// TestBufferAllocs: a pgbench -N block's buffer takes per key only its
// bufferedKey, which holds its copy of the key and its first write (13
// allocations with the copy and the history apart; its first ops and
// keys sit in the buffer: growing those slices from nil took five
// objects), and its commit's writes take the slice and one request per
// write (the locks' de-duplication took a map key; the point writes'
// own slice and their keys', needed only to cut range deletions around
// them, two more).
func TestBufferAllocs(t *testing.T) {
	var wb *writeBuffer
	if n := testing.AllocsPerRun(100, func() {
		wb = newWriteBuffer()
		pgbenchBuffer(wb)
	}); n > 7 {
		t.Errorf("buffering: %.0f allocations, want at most 7", n)
	}
	var writes []kvpb.Request
	if n := testing.AllocsPerRun(100, func() {
		writes = wb.commitWrites(nil)
	}); n > 5 {
		t.Errorf("commitWrites: %.0f allocations, want at most 5", n)
	}
	if len(writes) != 4 {
		t.Errorf("%d writes at commit, want 4 (the lock and three puts)", len(writes))
	}
}
