package rowcontainer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/sql/mon"
)

// EntrySorter sorts (key, value) byte pairs by key, bytewise: an index
// build's entries, whose keys are already in their order-preserving
// encoding, so no comparison decodes anything (the normalized keys the
// Sorter abbreviates rows to, here the whole key). It is the Sorter's
// external merge sort for rows that are bytes:
//
//   - entries are copied into arena chunks of entryChunk bytes and
//     indexed by 24-byte slots holding an abbreviated key (the 8 key
//     bytes after the prefix all keys share), so a million entries cost
//     a few dozen allocations, where rows of datums cost several each;
//   - when a chunk is full, its slots are sorted (a radix sort of the
//     abbreviations, then runs of equal ones by their keys) and its
//     bytes rewritten in that order (seal) while the chunk is still in
//     the CPU's caches: a chunk is then a sorted segment, read front to
//     back;
//   - the entries in memory come out of a merge of the segments (a
//     tournament tree of one cursor per chunk, on the abbreviations,
//     segMerge): reading the sorted entries reads each chunk
//     sequentially. One sort of all the slots
//     would visit the entries' bytes in random order, a cache miss each:
//     in a 1M-row build that was more CPU than the sort;
//   - past the account's limit that merge is written as a run of
//     AppendBytes records ([key length][key][value]) to a File, and Sort
//     merges the runs with a heap over one Reader per run.
//
// Equal keys come out adjacent, in no particular order (the caller of an
// index build fails on them). Accounting (invariant 1): every arena chunk
// is reserved when made, with the first one the spare chunk and the
// radix sort's scratch (a chunk's slots), and every entry's index slot
// twice (the index slice doubles as it grows). Not safe for concurrent
// use.
type EntrySorter struct {
	acc    *mon.Account
	scope  *Scope
	prefix []byte // every key begins with it (abbreviations skip it)
	chunk  int    // arena chunk size: entryChunk, less under a small limit
	slots  int    // the most entries a chunk holds

	chunks [][]byte    // the arena; entries point into it
	ents   []entrySlot // the entries in memory
	segs   []segment   // the sealed chunks' slots
	sealed int         // ents[:sealed] are in segs; the rest in the last chunk
	spare  []byte      // the buffer a chunk is rewritten into (seal)
	tmp    []entrySlot // seal's radix sort scratch
	free   int64       // bytes reserved in acc not used yet
	held   int64       // bytes reserved in acc for what is in memory
	runs   []*File
	buf    []byte // a run record being written
	// marks[i] is run i's index: every markEvery-th record's key and
	// place, which Range seeks by. markBytes and rangeBufs are what the
	// marks and Range's readers hold in acc, given back by Close.
	marks     [][]runMark
	markBytes int64
	rangeBufs int64

	// Runs counts the sorted runs written (tests, EXPLAIN of builds).
	Runs int
	// Bytes is the keys' and values' bytes added (in memory or spilled).
	Bytes int64
}

// entrySlot locates one entry in the arena: its key then its value, back
// to back in chunks[chunk][off:].
type entrySlot struct {
	abbr       uint64
	chunk, off uint32
	klen, vlen uint32
}

// segment is the slots ents[lo:hi] of one sealed chunk, sorted, whose
// bytes lie in the chunk in that order.
type segment struct{ lo, hi int }

// runMark is a record of a spilled run: its key (a copy), its byte
// offset in the run's file and its number there.
type runMark struct {
	key     []byte
	off, at int64
}

// markEvery is how many records of a run one mark stands for at most: a
// range's reader of a run starts at most this many records before its
// first key (and skips them), and a run of 8M entries keeps 8K marks. A
// short run is marked every 1/minMarks of it, so that the marks, the
// sample Range's bounds are chosen from, stand for every part of it.
const (
	markEvery = 1024
	minMarks  = 64
)

// markCost is what a mark costs besides its key's bytes.
const markCost = 48

const (
	// entryChunk is the arena's allocation unit (under a large enough
	// limit); an entry larger than a chunk gets a chunk of its own.
	entryChunk = 1 << 20
	// entrySlotCost is what an entry costs besides its bytes: its slot,
	// twice (the slice's spare capacity after it doubles).
	entrySlotCost = 2 * 24
	// chunkSlots bounds the entries of one chunk (so the radix sort's
	// scratch is bounded even for tiny entries): a chunk of 1 MiB holds
	// 64Ki entries of 16 bytes.
	chunkSlots = 1 << 16
	// entryReserve is how much the sorter reserves in its account at a
	// time, so the node budget's lock is taken once per many entries.
	entryReserve = 256 << 10
)

// NewEntrySorter returns a sorter of entries whose keys all begin with
// prefix (nil if none is known: an index's span start, which every entry
// shares, would otherwise fill the abbreviated keys), holding at most
// acc's limit in memory and spilling into scope (a nil or unspillable
// scope keeps everything in memory, bounded only by the node budget).
func NewEntrySorter(acc *mon.Account, scope *Scope, prefix []byte) *EntrySorter {
	chunk := entryChunk
	if l := acc.Limit(); l > 0 {
		// A chunk is a sixteenth of work_mem at most, so a small one
		// still holds many chunks' entries before it spills.
		chunk = int(min(max(l/16, 4<<10), entryChunk))
	}
	// A chunk holds at most an entry per 8 bytes (so the radix sort's
	// scratch, reserved with the first chunk, is bounded by it too).
	slots := min(max(chunk/8, 64), chunkSlots)
	return &EntrySorter{acc: acc, scope: scope, prefix: prefix, chunk: chunk, slots: slots}
}

// Len is the number of entries held in memory.
func (s *EntrySorter) Len() int { return len(s.ents) }

// Add copies the entry (key, value) into the sorter. key must begin with
// the sorter's prefix.
func (s *EntrySorter) Add(ctx context.Context, key, value []byte) error {
	if uint64(len(key)) > 1<<31 || uint64(len(value)) > 1<<31 {
		return fmt.Errorf("rowcontainer: entry of %d+%d bytes", len(key), len(value))
	}
	if !bytes.HasPrefix(key, s.prefix) {
		return fmt.Errorf("rowcontainer: entry key %q lacks the sorter's prefix %q", key, s.prefix)
	}
	n := len(key) + len(value)
	for {
		last := len(s.chunks) - 1
		room := last >= 0 && cap(s.chunks[last])-len(s.chunks[last]) >= n && len(s.ents)-s.sealed < s.slots
		need := int64(entrySlotCost)
		if !room {
			need += int64(max(n, s.chunk))
			if len(s.chunks) == 0 {
				// The spare seal rewrites into, and its scratch.
				need += int64(s.chunk) + int64(s.slots*24)
			}
		}
		if need > s.free {
			// Reserve, or spill (which empties the arena: look again).
			if err := s.reserve(ctx, need); err != nil {
				return err
			}
			continue
		}
		if !room {
			if len(s.chunks) == 0 {
				s.free -= int64(s.chunk) + int64(s.slots*24)
			}
			s.seal()
			s.chunks = append(s.chunks, make([]byte, 0, max(n, s.chunk)))
			last = len(s.chunks) - 1
			s.free -= int64(max(n, s.chunk))
		}
		c := s.chunks[last]
		off := len(c)
		c = append(c, key...)
		c = append(c, value...)
		s.chunks[last] = c
		s.free -= entrySlotCost
		s.Bytes += int64(n)
		if len(s.ents) == cap(s.ents) {
			s.ents = growSlots(s.ents)
		}
		s.ents = append(s.ents, entrySlot{
			abbr: abbreviate(key, len(s.prefix)), chunk: uint32(last), off: uint32(off),
			klen: uint32(len(key)), vlen: uint32(len(value)),
		})
		return nil
	}
}

// AddBatch copies a batch of entries into the sorter, as Add of each in
// order would: their bytes lie back to back in buf, and lens holds each
// entry's key length then its value length. The entries that fit in the
// arena's current chunk (and in what is reserved) are copied with one
// copy and indexed in one loop: an index build hands the sorter batches
// of 512 entries, and Add's per-entry checks of room and reservation and
// its two copies were a third of the sorters' adds (bench/README.md,
// issue 18, eleventh session). An entry that needs a new chunk or a
// reservation (or spills) goes through Add.
func (s *EntrySorter) AddBatch(ctx context.Context, buf []byte, lens []uint32) error {
	if len(lens)%2 != 0 {
		return fmt.Errorf("rowcontainer: a batch of %d entry lengths", len(lens))
	}
	p := len(s.prefix)
	off := 0
	for i := 0; i < len(lens); {
		last := len(s.chunks) - 1
		// The entries from i that fit the last chunk, its slots and
		// the reservation: buf[off:off+n].
		j, n, free := i, 0, s.free
		if last >= 0 {
			room := cap(s.chunks[last]) - len(s.chunks[last])
			slots := s.slots - (len(s.ents) - s.sealed)
			for ; j < len(lens) && slots > 0 && free >= entrySlotCost; j += 2 {
				kl, e := int(lens[j]), int(lens[j])+int(lens[j+1])
				if n+e > room || off+n+e > len(buf) {
					break
				}
				if kl < p || !bytes.Equal(buf[off+n:off+n+p], s.prefix) {
					break // Add refuses it, after those before
				}
				n += e
				free -= entrySlotCost
				slots--
			}
		}
		if j == i {
			// A new chunk, a reservation or a spill first: Add.
			kl, vl := int(lens[i]), int(lens[i+1])
			if off+kl+vl > len(buf) {
				return fmt.Errorf("rowcontainer: a batch of %d bytes holds no entry of %d+%d at %d", len(buf), kl, vl, off)
			}
			if err := s.Add(ctx, buf[off:off+kl], buf[off+kl:off+kl+vl]); err != nil {
				return err
			}
			off += kl + vl
			i += 2
			continue
		}
		c := s.chunks[last]
		at := len(c)
		s.chunks[last] = append(c, buf[off:off+n]...)
		for ; i < j; i += 2 {
			kl, vl := lens[i], lens[i+1]
			if len(s.ents) == cap(s.ents) {
				s.ents = growSlots(s.ents)
			}
			s.ents = append(s.ents, entrySlot{
				abbr: abbreviate(buf[off:off+int(kl)], p), chunk: uint32(last), off: uint32(at),
				klen: kl, vlen: vl,
			})
			at += int(kl + vl)
			off += int(kl + vl)
		}
		s.free = free
		s.Bytes += int64(n)
	}
	if off != len(buf) {
		return fmt.Errorf("rowcontainer: a batch of %d bytes holds %d of entries", len(buf), off)
	}
	return nil
}

// growSlots returns ents with twice its capacity (at least minSlotsCap).
// append grows a slice this large by about 1.25× a time, so a sorter of
// 500k entries allocated and copied about five times its final slots
// (60 MB, a quarter of a 1M-row build's allocations); doubling allocates
// and copies twice the final size at most, which is also what
// entrySlotCost reserves for each entry.
func growSlots(ents []entrySlot) []entrySlot {
	grown := make([]entrySlot, len(ents), max(2*cap(ents), minSlotsCap))
	copy(grown, ents)
	return grown
}

// minSlotsCap is the slots' first capacity: one chunk of small entries
// fills it a few times over.
const minSlotsCap = 1024

// reserve grows the account towards need free bytes: past its limit (or
// when the node is short) it spills what is held instead, and the caller
// looks again.
func (s *EntrySorter) reserve(ctx context.Context, need int64) error {
	grow := max(need-s.free, int64(min(entryReserve, s.chunk)))
	err := s.acc.Grow(grow)
	if err != nil && len(s.ents) >= MinRunRows && s.scope.Spillable() {
		return s.spill(ctx)
	}
	if errors.Is(err, mon.ErrWorkMem) {
		// Entries larger than work_mem, or nowhere to spill: hold them
		// anyway; only the node budget can refuse now.
		grow = need - s.free
		err = s.acc.Force(grow)
	}
	if err != nil {
		return err
	}
	s.free += grow
	s.held += grow
	return nil
}

func (s *EntrySorter) key(e *entrySlot) []byte {
	return s.chunks[e.chunk][e.off : e.off+e.klen]
}

func (s *EntrySorter) value(e *entrySlot) []byte {
	v := e.off + e.klen
	return s.chunks[e.chunk][v : v+e.vlen]
}

func (s *EntrySorter) cmpSlot(a, b entrySlot) int {
	if a.abbr != b.abbr {
		if a.abbr < b.abbr {
			return -1
		}
		return 1
	}
	return bytes.Compare(s.key(&a), s.key(&b))
}

// sortSlots sorts seg: a radix sort of the abbreviations (LSD, a byte a
// pass, skipping the bytes all of them share), then each run of equal
// abbreviations by the keys in full. In a 1M-row build pdqsort's 15
// comparisons an entry were a quarter of the build's CPU.
func (s *EntrySorter) sortSlots(seg []entrySlot) {
	if len(seg) < 64 {
		slices.SortFunc(seg, s.cmpSlot)
		return
	}
	if cap(s.tmp) < len(seg) {
		s.tmp = make([]entrySlot, len(seg))
	}
	var counts [8][256]int
	for i := range seg {
		k := seg[i].abbr
		for b := range 8 {
			counts[b][byte(k>>(8*b))]++
		}
	}
	src, dst := seg, s.tmp[:len(seg)]
	for b := range 8 {
		c := &counts[b]
		if c[byte(src[0].abbr>>(8*b))] == len(src) {
			continue // every abbreviation has this byte
		}
		sum := 0
		for i := range c {
			c[i], sum = sum, sum+c[i]
		}
		for i := range src {
			d := byte(src[i].abbr >> (8 * b))
			dst[c[d]] = src[i]
			c[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &seg[0] {
		copy(seg, src)
	}
	for i := 0; i < len(seg); {
		j := i + 1
		for j < len(seg) && seg[j].abbr == seg[i].abbr {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(seg[i:j], s.cmpSlot)
		}
		i = j
	}
}

// seal sorts the slots of the last chunk not sealed yet and rewrites the
// chunk's bytes in their order, making it a segment.
func (s *EntrySorter) seal() {
	if s.sealed == len(s.ents) {
		return
	}
	seg := s.ents[s.sealed:]
	s.sortSlots(seg)
	last := len(s.chunks) - 1
	c := s.chunks[last]
	if len(seg) > 1 && len(c) <= s.chunk {
		// (A chunk of one large entry needs no rewriting.)
		if s.spare == nil {
			s.spare = make([]byte, 0, s.chunk)
		}
		out := s.spare[:0]
		for i := range seg {
			e := &seg[i]
			off := len(out)
			out = append(out, c[e.off:e.off+e.klen+e.vlen]...)
			e.off = uint32(off)
		}
		s.chunks[last], s.spare = out, c[:0]
	}
	s.segs = append(s.segs, segment{s.sealed, len(s.ents)})
	s.sealed = len(s.ents)
}

// spill writes the entries in memory, in order, as a new run and frees
// the arena.
func (s *EntrySorter) spill(ctx context.Context) error {
	f, err := s.scope.NewFile()
	if err != nil {
		return err
	}
	s.runs = append(s.runs, f)
	s.marks = append(s.marks, nil)
	s.Runs++
	every := min(max(len(s.ents)/minMarks, 1), markEvery)
	it := s.memMerge()
	for i := 0; ; i++ {
		if err := checkCtx(ctx, i); err != nil {
			return err
		}
		_, e := it.next()
		if e == nil {
			break
		}
		if i%every == 0 {
			k := bytes.Clone(s.key(e))
			if err := s.acc.Force(int64(len(k) + markCost)); err != nil {
				return err
			}
			s.markBytes += int64(len(k) + markCost)
			last := len(s.marks) - 1
			s.marks[last] = append(s.marks[last], runMark{key: k, off: f.Size(), at: f.Rows()})
		}
		s.buf = binary.AppendUvarint(s.buf[:0], uint64(e.klen))
		s.buf = append(s.buf, s.chunks[e.chunk][e.off:e.off+e.klen+e.vlen]...)
		if err := f.AppendBytes(s.buf); err != nil {
			return err
		}
	}
	if err := f.Seal(); err != nil {
		return err
	}
	s.release()
	return nil
}

// release drops what is in memory and gives its reservation back.
func (s *EntrySorter) release() {
	s.ents, s.segs, s.sealed, s.spare, s.tmp = s.ents[:0], s.segs[:0], 0, nil, nil
	clear(s.chunks)
	s.chunks = s.chunks[:0]
	s.acc.Shrink(s.held)
	s.held, s.free = 0, 0
}

// EntryIterator returns sorted entries one at a time.
type EntryIterator interface {
	// Next returns the next entry, ok false at the end. key and value
	// are valid until the next call.
	Next(ctx context.Context) (key, value []byte, ok bool, err error)
	Close()
}

// Sort ends adding and returns the entries in key order. The iterator
// owns the sorter's memory and files: closing it (or the sorter) releases
// them.
func (s *EntrySorter) Sort(ctx context.Context) (EntryIterator, error) {
	if len(s.runs) == 0 {
		return &entryMemIter{m: s.memMerge(), owner: s}, nil
	}
	if len(s.ents) > 0 {
		if err := s.spill(ctx); err != nil {
			return nil, err
		}
	}
	// One merge of every run: its read buffers are reserved past
	// work_mem. A build of many millions of entries makes a few hundred
	// runs at most (a run per work_mem of entries), whose buffers are a
	// few MiB; the executor's Sorter merges in passes for the general
	// case.
	m := &entryMerge{s: s, bufs: int64(len(s.runs)) * readBuf}
	if err := s.acc.Force(m.bufs); err != nil {
		return nil, err
	}
	for _, f := range s.runs {
		r, err := f.Reader(readBuf)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.readers = append(m.readers, r)
	}
	return m, nil
}

// Close releases the sorter's memory and removes its runs.
func (s *EntrySorter) Close() {
	for _, f := range s.runs {
		f.Close()
	}
	s.runs = nil
	s.release()
	s.acc.Shrink(s.markBytes + s.rangeBufs)
	s.markBytes, s.rangeBufs = 0, 0
	s.ents, s.chunks, s.segs, s.buf, s.marks = nil, nil, nil, nil, nil
}

// entryMemIter reads a merge of sealed segments in memory; owner, when
// set, is the sorter its Close closes (Sort's iterator owns the sorter).
type entryMemIter struct {
	m     *segMerge
	owner *EntrySorter
	i     int
}

func (m *entryMemIter) Next(ctx context.Context) ([]byte, []byte, bool, error) {
	s, e := m.m.next()
	if e == nil {
		return nil, nil, false, nil
	}
	m.i++
	if err := checkCtx(ctx, m.i); err != nil {
		return nil, nil, false, err
	}
	return s.key(e), s.value(e), true, nil
}

// memMerge seals the last chunk and returns a merge of the segments.
func (s *EntrySorter) memMerge() *segMerge {
	s.seal()
	m := &segMerge{srcs: []*EntrySorter{s}, curs: make([]segCursor, 0, len(s.segs))}
	for _, g := range s.segs {
		if g.lo < g.hi {
			m.curs = append(m.curs, segCursor{abbr: s.ents[g.lo].abbr, i: g.lo, hi: g.hi})
		}
	}
	m.init()
	return m
}

// segMerge is a k-way merge of sealed segments in memory, of one sorter
// or of several (MergeRange): a tournament tree of losers over one
// cursor per segment. Each entry it returns costs one comparison per
// level of the tree, on the way from the winner's leaf to the root,
// where a binary heap's sift-down costs two (the children, then the
// larger against the parent): the merge was 7% of a 1M-row index
// build's CPU (bench/README.md, issue 18, 2026-11-30).
//
// The tree is implicit: with k cursors, internal nodes 1..k-1 hold the
// cursor that lost there (loser[n]), node n's children are 2n and 2n+1,
// and cursor i is leaf k+i, so every internal node has two children for
// any k. An exhausted cursor stays in the tree and loses to every other.
type segMerge struct {
	srcs  []*EntrySorter
	curs  []segCursor
	loser []int // loser[n] for internal node n (loser[0] unused)
	win   int   // the cursor of the least entry
}

type segCursor struct {
	abbr  uint64 // ents[i].abbr, kept here: most comparisons end on it
	i, hi int
	src   int // the sorter (srcs) whose slots ents[i:hi] are
}

// init plays the tournament of the cursors.
func (m *segMerge) init() {
	if len(m.curs) == 0 {
		return
	}
	m.loser = make([]int, len(m.curs))
	m.win = m.play(1)
}

// play returns the winner of the subtree at node n, recording the losers
// of its internal nodes.
func (m *segMerge) play(n int) int {
	k := len(m.curs)
	if n >= k {
		return n - k
	}
	a, b := m.play(2*n), m.play(2*n+1)
	if m.less(b, a) {
		a, b = b, a
	}
	m.loser[n] = b
	return a
}

// less says whether cursor a's entry comes before cursor b's (an
// exhausted cursor's after every other).
func (m *segMerge) less(a, b int) bool {
	ca, cb := &m.curs[a], &m.curs[b]
	if ca.i >= ca.hi {
		return false
	}
	if cb.i >= cb.hi {
		return true
	}
	if ca.abbr != cb.abbr {
		return ca.abbr < cb.abbr
	}
	sa, sb := m.srcs[ca.src], m.srcs[cb.src]
	if c := bytes.Compare(sa.key(&sa.ents[ca.i]), sb.key(&sb.ents[cb.i])); c != 0 {
		return c < 0
	}
	return a < b
}

// next returns the next slot in key order and its sorter, nil at the
// end.
func (m *segMerge) next() (*EntrySorter, *entrySlot) {
	if len(m.curs) == 0 {
		return nil, nil
	}
	w := m.win
	c := &m.curs[w]
	if c.i >= c.hi {
		return nil, nil // the winner is exhausted: every cursor is
	}
	s := m.srcs[c.src]
	e := &s.ents[c.i]
	if c.i++; c.i < c.hi {
		c.abbr = s.ents[c.i].abbr
	}
	// Replay cursor w's path to the root against the losers on it.
	for n := (w + len(m.curs)) / 2; n >= 1; n /= 2 {
		if l := m.loser[n]; m.less(l, w) {
			m.loser[n], w = w, l
		}
	}
	m.win = w
	return s, e
}

func (m *entryMemIter) Close() {
	if m.owner != nil {
		m.owner.Close()
	}
}

// entryMerge is a k-way merge of the runs: a heap of each run's current
// record. The record last returned stays in its reader's buffer until the
// next call, which only then reads that run on.
type entryMerge struct {
	s       *EntrySorter
	readers []*Reader
	heap    []entryHead
	started bool
	pending int // run whose head was returned last; -1 none
	n       int
	bufs    int64
	// A Range's merge: the keys in [lo, hi) (nil: open), its readers
	// started at the marks before lo; err is a failure of Range to open
	// them, returned by Next. Closing it closes its readers only.
	ranged bool
	lo, hi []byte
	err    error
}

type entryHead struct {
	abbr       uint64
	key, value []byte
	run        int
}

func (m *entryMerge) less(a, b *entryHead) bool {
	if a.abbr != b.abbr {
		return a.abbr < b.abbr
	}
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c < 0
	}
	return a.run < b.run
}

// read fills h from run's next record; false at the run's end (or, in a
// Range's merge, at its first key at or above hi).
func (m *entryMerge) read(run int, h *entryHead) (bool, error) {
	rec, err := m.readers[run].NextBytes()
	if err != nil || rec == nil {
		return false, err
	}
	kl, n := binary.Uvarint(rec)
	if n <= 0 || kl > uint64(len(rec)-n) {
		return false, fmt.Errorf("rowcontainer: corrupt entry record in run %d", run)
	}
	h.key, h.value = rec[n:n+int(kl)], rec[n+int(kl):]
	if m.hi != nil && bytes.Compare(h.key, m.hi) >= 0 {
		m.readers[run].Close()
		return false, nil
	}
	h.abbr, h.run = abbreviate(h.key, len(m.s.prefix)), run
	return true, nil
}

func (m *entryMerge) Next(ctx context.Context) ([]byte, []byte, bool, error) {
	if m.err != nil {
		return nil, nil, false, m.err
	}
	if !m.started {
		m.started, m.pending = true, -1
		for i := range m.readers {
			var h entryHead
			ok, err := m.read(i, &h)
			// A Range's reader starts at a mark below lo: skip to lo.
			for j := 0; ok && m.lo != nil && bytes.Compare(h.key, m.lo) < 0; j++ {
				if err := checkCtx(ctx, j); err != nil {
					return nil, nil, false, err
				}
				ok, err = m.read(i, &h)
			}
			if err != nil {
				return nil, nil, false, err
			}
			if ok {
				m.heap = append(m.heap, h)
			}
		}
		for i := len(m.heap)/2 - 1; i >= 0; i-- {
			m.down(i)
		}
	} else if m.pending >= 0 {
		// The root was returned last: move its run on.
		ok, err := m.read(m.pending, &m.heap[0])
		if err != nil {
			return nil, nil, false, err
		}
		if !ok {
			last := len(m.heap) - 1
			m.heap[0] = m.heap[last]
			m.heap = m.heap[:last]
		}
		m.down(0)
		m.pending = -1
	}
	if len(m.heap) == 0 {
		return nil, nil, false, nil
	}
	m.n++
	if err := checkCtx(ctx, m.n); err != nil {
		return nil, nil, false, err
	}
	top := &m.heap[0]
	m.pending = top.run
	return top.key, top.value, true, nil
}

// down restores the heap below i.
func (m *entryMerge) down(i int) {
	h := m.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && m.less(&h[r], &h[l]) {
			c = r
		}
		if !m.less(&h[c], &h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

func (m *entryMerge) Close() {
	for _, r := range m.readers {
		r.Close()
	}
	m.readers, m.heap = nil, nil
	if m.ranged {
		// Its buffers are the sorter's rangeBufs, given back by the
		// sorter's Close (Range's iterators may close concurrently).
		return
	}
	m.s.acc.Shrink(m.bufs)
	m.bufs = 0
	m.s.Close()
}

// abbreviate is the 8 bytes of key after its first prefix bytes,
// zero-padded, as an integer: keys whose abbreviations differ order as
// them (bytewise), and equal ones are compared in full.
func abbreviate(key []byte, prefix int) uint64 {
	if len(key)-prefix >= 8 {
		return binary.BigEndian.Uint64(key[prefix:]) // no copy: most keys
	}
	var b [8]byte
	if prefix < len(key) {
		copy(b[:], key[prefix:])
	}
	return binary.BigEndian.Uint64(b[:])
}

// Ranges of the sorted entries, read in parallel (an index build cuts its
// SSTs from several key ranges at once: one goroutine walking every entry
// was the build's serial tail). In memory, each sealed segment is sorted,
// so a key range of the whole is, in each segment, the slots from the
// first key at or above its lower bound to the first at or above its
// upper bound, and a merge of those sub-segments is the range in key
// order. A sorter that spilled first writes what it holds as one more run
// (Finish), and a range is a merge of the runs, each read from its last
// mark below the range's lower bound (the runs' index: a key every
// markEvery records) up to its upper bound.

// Abbreviation is key's abbreviated form in this sorter (keys must
// begin with its prefix): the 8 bytes after the prefix as an integer.
// Keys whose abbreviations differ order as them; equal ones must be
// compared in full. A merge of several sorters' streams compares these
// first, as the sorter does.
func (s *EntrySorter) Abbreviation(key []byte) uint64 { return abbreviate(key, len(s.prefix)) }

// InMemory says whether every entry added is in memory (nothing spilled).
func (s *EntrySorter) InMemory() bool { return len(s.runs) == 0 }

// Finish ends adding before SampleKeys and Range: a sorter that spilled
// writes what it still holds in memory as one more run, so that every
// entry is in a run. A sorter in memory keeps its entries there.
func (s *EntrySorter) Finish(ctx context.Context) error {
	if len(s.runs) == 0 || len(s.ents) == 0 {
		return nil
	}
	return s.spill(ctx)
}

// SampleKeys ends adding and appends to dst keys in proportion to where
// the entries lie (copies): in memory up to perSegment keys of each
// sorted segment (a chunk's worth of entries), evenly spaced in it; after
// Finish, the marks of the runs (a key every markEvery entries).
func (s *EntrySorter) SampleKeys(dst [][]byte, perSegment int) [][]byte {
	if len(s.runs) > 0 {
		for _, ms := range s.marks {
			for _, mk := range ms {
				dst = append(dst, bytes.Clone(mk.key))
			}
		}
		return dst
	}
	s.seal()
	for _, g := range s.segs {
		n := g.hi - g.lo
		step := max(n/max(perSegment, 1), 1)
		for i := g.lo + step/2; i < g.hi; i += step {
			dst = append(dst, bytes.Clone(s.key(&s.ents[i])))
		}
	}
	return dst
}

// Range returns the entries whose keys are in [lo, hi) (a nil bound is
// open), in key order. A sorter that spilled must be Finished first. No
// Add may follow SampleKeys or the first Range, and Range is called from
// one goroutine; the iterators it returns may be read concurrently (they
// only read the sorter, and each run through a reader of its own).
// Closing one releases nothing but its readers: the sorter's Close gives
// back the memory, after every range is done with.
func (s *EntrySorter) Range(lo, hi []byte) EntryIterator {
	if len(s.runs) > 0 {
		return s.runRange(lo, hi)
	}
	return MergeRange([]*EntrySorter{s}, lo, hi)
}

// MergeRange is Range over several sorters in memory at once (InMemory,
// no Add since): the entries of all of them whose keys are in [lo, hi),
// in key order, from one merge of all their sorted segments. An index
// build sorts its entries in several sorters at once, and a merge of
// their Ranges compared each entry's key once more, and abbreviated it
// again, on top of each sorter's own merge: 6% of a 1M-row build's CPU
// (bench/README.md, issue 18, 2026-11-30 14:15). The same rules as
// Range's hold for every sorter; closing the iterator releases nothing
// (each sorter's Close does), and equal keys of different sorters come
// out adjacent, in no particular order.
func MergeRange(ss []*EntrySorter, lo, hi []byte) EntryIterator {
	m := &segMerge{srcs: ss}
	for src, s := range ss {
		s.seal()
		for _, g := range s.segs {
			a, b := s.lowerBound(g, lo), g.hi
			if hi != nil {
				b = s.lowerBound(g, hi)
			}
			if a < b {
				m.curs = append(m.curs, segCursor{abbr: s.ents[a].abbr, i: a, hi: b, src: src})
			}
		}
	}
	m.init()
	return &entryRangeIter{entryMemIter{m: m}}
}

// runRange is Range over the runs: a merge of one reader per run, each
// started at the run's last mark whose key is below lo (so that every
// entry of key lo is read, whichever side of a mark it lies on). Its
// read buffers are reserved past work_mem, as Sort's are.
func (s *EntrySorter) runRange(lo, hi []byte) EntryIterator {
	m := &entryMerge{s: s, ranged: true, lo: lo, hi: hi}
	if len(s.ents) > 0 {
		m.err = fmt.Errorf("rowcontainer: Range of a spilled sorter before Finish")
		return m
	}
	bufs := int64(len(s.runs)) * readBuf
	if m.err = s.acc.Force(bufs); m.err != nil {
		return m
	}
	s.rangeBufs += bufs
	for i, f := range s.runs {
		var off, at int64
		if lo != nil {
			ms := s.marks[i]
			// The first mark at or above lo; start at the one before it.
			j, _ := slices.BinarySearchFunc(ms, lo, func(mk runMark, k []byte) int { return bytes.Compare(mk.key, k) })
			if j > 0 {
				off, at = ms[j-1].off, ms[j-1].at
			}
		}
		r, err := f.ReaderAt(readBuf, off, at)
		if err != nil {
			m.err = err
			return m
		}
		m.readers = append(m.readers, r)
	}
	return m
}

// lowerBound is the first slot of segment g whose key is at or above k
// (g.hi if none; g.lo for a nil k).
func (s *EntrySorter) lowerBound(g segment, k []byte) int {
	if k == nil {
		return g.lo
	}
	n, _ := slices.BinarySearchFunc(s.ents[g.lo:g.hi], k, func(e entrySlot, k []byte) int {
		return bytes.Compare(s.key(&e), k)
	})
	return g.lo + n
}

// entryRangeIter is Range's iterator: entryMemIter's merge, but closing
// it leaves the sorters open (the other ranges still read them).
type entryRangeIter struct{ entryMemIter }

func (r *entryRangeIter) Close() { r.m.curs = nil }
