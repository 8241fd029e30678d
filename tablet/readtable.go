package tablet

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"

	"github.com/cairn-db/cairn/hlc"
)

// ReadTable remembers, for the non-transactional row reads of a node's
// tablets (an implicit point SELECT's: kv.DB.RunImplicitReadAt), the
// highest timestamp read per slot of a hash of the row's prefix: a slot
// holds the highest wall time read of any prefix that hashes to it. It is
// part of the timestamp cache (tsCache, invariant 4), and lossy the safe
// way: prefixes that share a slot share its timestamp, which only ever
// makes the cache answer higher, never lower. So it never forgets and
// never shrinks: its memory is fixed, per node, not per tablet.
//
// It replaced, for these reads, the exact map of row reads (tsCache's
// shortRows), whose lookup took two cache misses (the group's control
// word and the slot's key) and whose inserts (half of pgbench -S's reads
// at scale 1, where its 65,536 entries per tablet hold fewer rows than
// the table's 100,000; nearly all at scale 10) allocated the prefix as a
// string and, every 32,768 of them, shrank the map: 1.8 us per read, 4%
// of the node's CPU per prepared point SELECT (bench/README.md, "Issue
// 22, twenty-first session: the point read's timestamp cache"). A slot
// costs one hash and one cache line, raised by an atomic maximum (the
// store's tablets share the table, each under its own cache's mutex).
// Span lookups and splits do not use the table: tsCache also logs each
// such read, appending to memory it just wrote, and indexes the log only
// when one asks.
//
// Only reads at timestamps with no logical part go here (a slot is the
// wall time alone); the rest, and every transaction's read (whose owner
// the cache must remember), stay exact.
type ReadTable struct {
	slots []atomic.Int64
	mask  uint64
}

// DefaultReadTableSlots is a store's ReadTable size: 2 MiB (8 MiB cost a
// quarter more per read in BenchmarkTSCacheRowReads: a larger table
// misses more caches). With pgbench -S's 25,000 reads a second, a slot is
// read about every 10 s, so a write of a transaction of 10 ms meets
// another row's read in its slot (and is pushed, as a read of its own
// row would push it) about once per 1,000.
const DefaultReadTableSlots = 1 << 18

// testReadTableSlots is the size of the table a replica without a store's
// makes for itself (Config.Reads nil: tablet tests).
const testReadTableSlots = 1 << 12

// NewReadTable returns a table of n slots (rounded up to a power of two).
func NewReadTable(n int) *ReadTable {
	if n < 1 {
		n = 1
	}
	n = 1 << bits.Len(uint(n-1))
	return &ReadTable{slots: make([]atomic.Int64, n), mask: uint64(n - 1)}
}

// maxReadTableLen bounds the prefixes the table holds: tsCache keeps the
// lengths it put there in a bit mask.
const maxReadTableLen = 63

func (t *ReadTable) slot(prefix []byte) *atomic.Int64 {
	return &t.slots[hashPrefix(prefix)&t.mask]
}

// record raises prefix's slot to wall.
func (t *ReadTable) record(prefix []byte, wall int64) {
	s := t.slot(prefix)
	for {
		old := s.Load()
		if old >= wall || s.CompareAndSwap(old, wall) {
			return
		}
	}
}

// get returns the highest read recorded in prefix's slot (zero: none).
func (t *ReadTable) get(prefix []byte) hlc.Timestamp {
	return hlc.Timestamp{WallTime: t.slot(prefix).Load()}
}

// hashPrefix hashes a key eight bytes at a time (a deterministic hash, so
// that which test keys share a slot does not change between runs).
func hashPrefix(b []byte) uint64 {
	h := uint64(len(b)) * 0x9e3779b97f4a7c15
	for len(b) >= 8 {
		h = (h ^ binary.LittleEndian.Uint64(b)) * 0xbf58476d1ce4e5b9
		h ^= h >> 31
		b = b[8:]
	}
	var w uint64
	for i, c := range b {
		w |= uint64(c) << (8 * i)
	}
	h = (h ^ w) * 0x94d049bb133111eb
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>32
}
