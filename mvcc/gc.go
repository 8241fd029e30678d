package mvcc

import (
	"bytes"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/storage"
)

// versionOverhead is what a version's timestamp adds to its key in the
// byte counts below (wall time and logical, as the engine suffixes them).
const versionOverhead = 12

// GCStats counts what a GC removed (or a GCPlan would remove): versions and
// their key and value bytes (user key + versionOverhead + engine value),
// net of the packed rows repacking writes, and the rows repacked.
type GCStats struct {
	Versions int
	Bytes    int64
	Repacked int
}

// Repacker folds a row stored as a row-key value plus column entries (a
// packed row updated in place, seeds/packed-rows.txt) into one value. GC
// calls it for rows whose every surviving version is at or below the
// threshold (invariant 10). mvcc knows nothing of row formats: the layer
// that does (sql/rowenc, through the server's table cache) implements it.
// It must be safe for concurrent use and must not block.
type Repacker interface {
	// RowKeyLen returns the length of the row key that key is (the result
	// is len(key)) or that key extends as one of its column entries (less
	// than len(key)), or 0 when key belongs to no row it can repack.
	// Column entries of a row sort right after its row key.
	RowKeyLen(key []byte) int
	// Repack returns the one value equal, for every reader at or above
	// threshold, to base (the row key's value) merged with cols (its
	// column entries, each at or above base's timestamp, in key order),
	// or ok false to leave the row as it is (not packed, a schema it does
	// not know, too large). With no cols, GC asks whether base alone
	// should be rewritten (moved to a newer format); ok false leaves it,
	// and a Repacker must say so for a row already in its final form, or
	// every GC would rewrite every row.
	Repack(threshold hlc.Timestamp, rowKey []byte, base RowVersion, cols []RowVersion) (packed []byte, ok bool)
}

// RowVersion is one surviving version of a row's key: its user key,
// timestamp and user value (the caller must not keep Value).
type RowVersion struct {
	Key       []byte
	Timestamp hlc.Timestamp
	Value     []byte
}

// GCOptions are GC's options.
type GCOptions struct {
	// MaxVersions (0: no limit) stops GC at the first row boundary after
	// that many removed versions and repacked rows.
	MaxVersions int
	// Repacker, when set, lets GC repack rows and drop column entries no
	// reader at or above the threshold can see (invariant 10).
	Repacker Repacker
}

// gcWalker applies GC's rule to one key's versions, newest first: the
// first version at or below threshold is kept unless it is a tombstone;
// everything after it goes. Versions above threshold, and bare keys (no
// timestamp), stay.
type gcWalker struct {
	threshold hlc.Timestamp
	cur       []byte
	keepSeen  bool
	// prevTS is the timestamp of the version just above the current one
	// (empty at a key's newest version).
	prevTS hlc.Timestamp
}

// step classifies version k (value raw) and reports whether GC at the
// walker's threshold removes it. newKey is set at the first version of a
// user key.
func (w *gcWalker) step(k storage.MVCCKey, raw []byte) (doomed, newKey bool, err error) {
	if !bytes.Equal(k.Key, w.cur) {
		w.cur = append(w.cur[:0], k.Key...)
		w.keepSeen, newKey = false, true
		w.prevTS = hlc.Timestamp{}
	}
	defer func() { w.prevTS = k.Timestamp }()
	if k.Timestamp.IsEmpty() || w.threshold.Less(k.Timestamp) {
		return false, newKey, nil
	}
	if !w.keepSeen {
		w.keepSeen = true
		_, tomb, err := decodeValue(raw)
		if err != nil {
			return false, newKey, fmt.Errorf("mvcc: gc: version %s: %w", k, err)
		}
		return tomb, newKey, nil
	}
	return true, newKey, nil
}

// gcRowKey is one key of the row being walked: its surviving version at
// or below the threshold (if any) and whether anything else stays.
type gcRowKey struct {
	key      []byte
	survivor hlc.Timestamp // empty: none
	raw      []byte        // survivor's engine value
	// pinned: the key has a bare version (no timestamp).
	pinned bool
}

// gcRow collects the keys of one row (row key first, then its column
// entries) as the walk passes them.
type gcRow struct {
	key  []byte // row key; nil: no row open
	keys []gcRowKey
	// above is the oldest version above the threshold of any of its
	// column entries (empty: none): once the threshold reaches it, GC can
	// fold it in.
	above hlc.Timestamp
}

// gcPut is a repacked row GC writes.
type gcPut struct {
	key storage.MVCCKey
	raw []byte
}

// gcScanner walks a span's versions in order, deciding what GC at its
// threshold removes: the walker's per-key rule, and with a Repacker the
// per-row rule (invariant 10). It is shared by GC and PlanGC so that a
// plan foresees exactly what GC does.
type gcScanner struct {
	w    gcWalker
	rp   Repacker
	r    storage.Reader // for lock lookups
	row  gcRow
	dels []storage.MVCCKey
	puts []gcPut
	st   GCStats
	// due is the lowest threshold above this one at which a row now kept
	// as it is could be repacked (empty: none).
	due hlc.Timestamp
}

// key is called at the first version of each user key. It reports
// whether the key starts a new row (a point where a GC request may stop:
// a request never sees part of a row).
func (s *gcScanner) key(k []byte) (boundary bool, err error) {
	if s.rp == nil {
		return true, nil
	}
	n := s.rp.RowKeyLen(k)
	if s.row.key != nil && n == len(s.row.key) && len(k) > n && bytes.HasPrefix(k, s.row.key) {
		s.row.keys = append(s.row.keys, gcRowKey{key: bytes.Clone(k)})
		return false, nil
	}
	if err := s.finishRow(); err != nil {
		return true, err
	}
	if n > 0 && n == len(k) {
		s.row.key = bytes.Clone(k)
		s.row.keys = append(s.row.keys[:0], gcRowKey{key: s.row.key})
	}
	return true, nil
}

// version records version k (engine value raw) that the walker keeps
// (doomed false) or removes.
func (s *gcScanner) version(k storage.MVCCKey, raw []byte, doomed bool) {
	if doomed {
		s.dels = append(s.dels, storage.MVCCKey{Key: bytes.Clone(k.Key), Timestamp: k.Timestamp})
		s.st.Versions++
		s.st.Bytes += int64(len(k.Key) + versionOverhead + len(raw))
		return
	}
	if s.row.key == nil {
		return
	}
	rk := &s.row.keys[len(s.row.keys)-1]
	switch {
	case k.Timestamp.IsEmpty():
		rk.pinned = true
	case s.w.threshold.Less(k.Timestamp):
		if len(s.row.keys) > 1 {
			s.row.above = forwardDue(s.row.above, k.Timestamp)
		}
	default:
		rk.survivor, rk.raw = k.Timestamp, bytes.Clone(raw)
	}
}

// finishRow applies the row rule to the row open, if any, and closes it:
//
//   - a column entry whose surviving version is older than the row key's
//     surviving version, or whose row key keeps no version at or below
//     the threshold (only newer ones, or none), is seen by no reader at or
//     above the threshold (rowenc invariant 3: entries older than the
//     row-key value they would merge with are ignored, and so are entries
//     without one), and goes;
//   - when the row key and some column entries keep a version at or below
//     the threshold, and no key of the row is locked, the Repacker folds
//     those versions into one value written at the newest of their
//     timestamps, and those column versions go; a row key kept alone is
//     rewritten in place when the Repacker asks to (an older format). Versions above the
//     threshold stay as they were: a read at or above the threshold that
//     sees one of them sees it merged exactly as before (a row-key value
//     above hides every older column entry, the repacked value included;
//     a column entry above is newer than the repacked value and applies
//     over it), and one that sees none sees the repacked value, which is
//     what the versions it replaced merged to.
func (s *gcScanner) finishRow() error {
	row := s.row
	s.row.key, s.row.above = nil, hlc.Timestamp{}
	if !row.above.IsEmpty() {
		s.due = forwardDue(s.due, row.above)
	}
	if row.key == nil {
		return nil
	}
	base := &row.keys[0]
	rowPinned := base.pinned
	var cols []*gcRowKey
	for i := range row.keys[1:] {
		c := &row.keys[1+i]
		rowPinned = rowPinned || c.pinned
		if c.survivor.IsEmpty() {
			continue
		}
		if base.survivor.IsEmpty() || c.survivor.Less(base.survivor) {
			s.del(c)
			continue
		}
		if !base.survivor.IsEmpty() {
			cols = append(cols, c)
		}
	}
	if rowPinned || base.survivor.IsEmpty() {
		return nil
	}
	bv, tomb, err := decodeValue(base.raw)
	if err != nil {
		return fmt.Errorf("mvcc: gc: row %q: %w", row.key, err)
	}
	if tomb {
		return nil
	}
	rv := make([]RowVersion, len(cols))
	at := base.survivor
	for i, c := range cols {
		v, _, err := decodeValue(c.raw)
		if err != nil {
			return fmt.Errorf("mvcc: gc: column %q: %w", c.key, err)
		}
		rv[i] = RowVersion{Key: c.key, Timestamp: c.survivor, Value: v}
		at = at.Forward(c.survivor)
	}
	// With no column entry to fold, the Repacker rewrites the row only to
	// move it off an older packing version (so the catalog can forget
	// that version); it declines a row already current.
	packed, ok := s.rp.Repack(s.w.threshold, row.key, RowVersion{Key: row.key, Timestamp: base.survivor, Value: bv}, rv)
	if !ok {
		return nil
	}
	for _, k := range row.keys {
		lk, err := getLock(s.r, k.key)
		if err != nil {
			return err
		}
		if lk != nil {
			return nil
		}
	}
	raw := encodeValue(packed, false)
	s.puts = append(s.puts, gcPut{key: storage.MVCCKey{Key: row.key, Timestamp: at}, raw: raw})
	s.st.Repacked++
	s.st.Bytes -= int64(len(row.key) + versionOverhead + len(raw))
	if at == base.survivor {
		// Overwritten in place: its bytes are replaced, not a version gone.
		s.st.Bytes += int64(len(row.key) + versionOverhead + len(base.raw))
	} else {
		s.del(base)
	}
	for _, c := range cols {
		s.del(c)
	}
	return nil
}

func (s *gcScanner) del(k *gcRowKey) {
	s.dels = append(s.dels, storage.MVCCKey{Key: k.key, Timestamp: k.survivor})
	s.st.Versions++
	s.st.Bytes += int64(len(k.key) + versionOverhead + len(k.raw))
}

func forwardDue(due, ts hlc.Timestamp) hlc.Timestamp {
	if due.IsEmpty() || ts.Less(due) {
		return ts
	}
	return due
}

// GC removes, in the batch rw and for the keys in [start, end), the
// versions no read at or above threshold can see: every version shadowed
// by a newer version at or below threshold, and a tombstone at or below
// threshold together with everything under it. Versions above threshold,
// and intents, are untouched (invariant 7). It returns what it removed.
// Reads below threshold are the caller's to refuse.
func GC(rw storage.ReadWriter, start, end []byte, threshold hlc.Timestamp) (GCStats, error) {
	st, _, err := GCWith(rw, start, end, threshold, GCOptions{})
	return st, err
}

// GCLimit is GC that stops at the first key boundary after maxVersions
// removed versions (0: no limit) and returns the key to resume at (nil:
// the span is done), so a GC request is bounded whatever its span holds.
func GCLimit(rw storage.ReadWriter, start, end []byte, threshold hlc.Timestamp, maxVersions int) (st GCStats, resume []byte, err error) {
	return GCWith(rw, start, end, threshold, GCOptions{MaxVersions: maxVersions})
}

// GCWith is GC with options: bounded as GCLimit (at row boundaries when
// repacking), and repacking rows with opts.Repacker (invariant 10).
func GCWith(rw storage.ReadWriter, start, end []byte, threshold hlc.Timestamp, opts GCOptions) (st GCStats, resume []byte, err error) {
	if len(end) == 0 || bytes.Compare(start, end) >= 0 {
		return GCStats{}, nil, invalidArg("gc: empty span [%q, %q)", start, end)
	}
	it, err := rw.NewIter(storage.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return GCStats{}, nil, fmt.Errorf("mvcc: gc: %w", err)
	}
	defer it.Close()
	s := gcScanner{w: gcWalker{threshold: threshold}, rp: opts.Repacker, r: rw}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.UnsafeKey()
		raw, err := it.UnsafeValue()
		if err != nil {
			return GCStats{}, nil, err
		}
		if !bytes.Equal(k.Key, s.w.cur) {
			boundary, err := s.key(k.Key)
			if err != nil {
				return GCStats{}, nil, err
			}
			// Rows repacked count toward the bound: a rewrite in place
			// removes no version but writes one, and a table whose rows
			// all moved off an old version would otherwise be rewritten
			// in one request.
			if boundary && opts.MaxVersions > 0 && s.st.Versions+s.st.Repacked >= opts.MaxVersions {
				resume = bytes.Clone(k.Key)
				break
			}
		}
		gone, _, err := s.w.step(k, raw)
		if err != nil {
			return GCStats{}, nil, err
		}
		s.version(k, raw, gone)
	}
	if err := it.Err(); err != nil {
		return GCStats{}, nil, fmt.Errorf("mvcc: gc: %w", err)
	}
	if resume == nil {
		if err := s.finishRow(); err != nil {
			return GCStats{}, nil, err
		}
	}
	for _, k := range s.dels {
		if err := rw.Delete(k); err != nil {
			return GCStats{}, nil, fmt.Errorf("mvcc: gc %s: %w", k, err)
		}
	}
	for _, p := range s.puts {
		if err := rw.Put(p.key, p.raw); err != nil {
			return GCStats{}, nil, fmt.Errorf("mvcc: gc: repack %s: %w", p.key, err)
		}
	}
	return s.st, resume, nil
}

// GCPlan is what a scan of a span found at a threshold: its sizes, and the
// sub-spans holding what GC at that threshold would remove, cut at user
// key boundaries so that each holds at most about the batch limits.
type GCPlan struct {
	// TotalBytes counts every version; LiveBytes the newest version of
	// each key unless it is a tombstone (what a GC at the present would
	// keep); Garbage what GC at the threshold removes.
	TotalBytes, LiveBytes int64
	Garbage               GCStats
	// Spans hold the garbage, in key order, each within the batch limits
	// (a single key with more versions than the limit is one span).
	Spans [][2][]byte
	// NextDue is the lowest threshold above the planned one at which GC
	// would remove more than Garbage (empty: none; only new writes can
	// make more garbage): the timestamp of the version that shadows the
	// oldest not-yet-collectable version, or of a newest tombstone.
	NextDue hlc.Timestamp
}

// PlanGC scans [start, end) of r (a snapshot, so the plan is consistent)
// and returns the GCPlan at threshold, with spans of at most maxVersions
// removable versions or maxBytes of them. It writes nothing: the GC
// requests it plans re-evaluate GC's rule under their latches.
func PlanGC(r storage.Reader, start, end []byte, threshold hlc.Timestamp, maxVersions int, maxBytes int64) (GCPlan, error) {
	return PlanGCWith(r, start, end, threshold, maxVersions, maxBytes, nil)
}

// PlanGCWith is PlanGC for GC requests that repack with rp (nil: none);
// its spans never cut a row.
func PlanGCWith(r storage.Reader, start, end []byte, threshold hlc.Timestamp, maxVersions int, maxBytes int64, rp Repacker) (GCPlan, error) {
	var p GCPlan
	if len(end) == 0 || bytes.Compare(start, end) >= 0 {
		return p, invalidArg("gc plan: empty span [%q, %q)", start, end)
	}
	it, err := r.NewIter(storage.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return p, fmt.Errorf("mvcc: gc plan: %w", err)
	}
	defer it.Close()
	s := gcScanner{w: gcWalker{threshold: threshold}, rp: rp, r: r}
	var spanStart []byte // start of the span being filled; nil: none
	var spanVersions int
	var spanBytes int64
	// rowStart is where the current row began; a row's garbage (found
	// when it closes) starts a span there.
	var rowStart []byte
	due := func(ts hlc.Timestamp) { p.NextDue = forwardDue(p.NextDue, ts) }
	// account moves what the scanner found since the last call into the
	// span being filled.
	var seen GCStats
	account := func(at []byte) {
		if s.st.Versions > seen.Versions {
			if spanStart == nil {
				spanStart = bytes.Clone(at)
			}
			spanVersions += s.st.Versions - seen.Versions
			spanBytes += s.st.Bytes - seen.Bytes
		}
		seen = s.st
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.UnsafeKey()
		raw, err := it.UnsafeValue()
		if err != nil {
			return p, err
		}
		prev := s.w.prevTS
		if !bytes.Equal(k.Key, s.w.cur) {
			prev = hlc.Timestamp{}
			boundary, err := s.key(k.Key)
			if err != nil {
				return p, err
			}
			if boundary {
				account(rowStart)
				if spanStart != nil && (spanVersions >= maxVersions || spanBytes >= maxBytes) {
					p.Spans = append(p.Spans, [2][]byte{spanStart, bytes.Clone(k.Key)})
					spanStart, spanVersions, spanBytes = nil, 0, 0
				}
				rowStart = append(rowStart[:0], k.Key...)
			}
		}
		gone, newKey, err := s.w.step(k, raw)
		if err != nil {
			return p, err
		}
		s.version(k, raw, gone)
		size := int64(len(k.Key) + versionOverhead + len(raw))
		p.TotalBytes += size
		if !k.Timestamp.IsEmpty() {
			tomb := false
			if len(raw) > 0 {
				tomb = raw[0] == tagTombstone || raw[0] == tagTombstoneLocal
			}
			if newKey && !tomb {
				p.LiveBytes += size
			}
			// A version GC keeps now goes once the threshold reaches the
			// version shadowing it, or, for a tombstone, itself.
			switch {
			case gone:
			case tomb:
				due(k.Timestamp)
			case !prev.IsEmpty():
				due(prev)
			}
		}
	}
	if err := it.Err(); err != nil {
		return p, fmt.Errorf("mvcc: gc plan: %w", err)
	}
	if err := s.finishRow(); err != nil {
		return p, err
	}
	account(rowStart)
	if spanStart != nil {
		p.Spans = append(p.Spans, [2][]byte{spanStart, append(bytes.Clone(s.w.cur), 0)})
	}
	if !s.due.IsEmpty() {
		due(s.due)
	}
	p.Garbage = s.st
	return p, nil
}
