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
// their key and value bytes (user key + versionOverhead + engine value).
type GCStats struct {
	Versions int
	Bytes    int64
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

// GC removes, in the batch rw and for the keys in [start, end), the
// versions no read at or above threshold can see: every version shadowed
// by a newer version at or below threshold, and a tombstone at or below
// threshold together with everything under it. Versions above threshold,
// and intents, are untouched (invariant 7). It returns what it removed.
// Reads below threshold are the caller's to refuse.
func GC(rw storage.ReadWriter, start, end []byte, threshold hlc.Timestamp) (GCStats, error) {
	st, _, err := GCLimit(rw, start, end, threshold, 0)
	return st, err
}

// GCLimit is GC that stops at the first key boundary after maxVersions
// removed versions (0: no limit) and returns the key to resume at (nil:
// the span is done), so a GC request is bounded whatever its span holds.
func GCLimit(rw storage.ReadWriter, start, end []byte, threshold hlc.Timestamp, maxVersions int) (st GCStats, resume []byte, err error) {
	if len(end) == 0 || bytes.Compare(start, end) >= 0 {
		return GCStats{}, nil, invalidArg("gc: empty span [%q, %q)", start, end)
	}
	it, err := rw.NewIter(storage.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return GCStats{}, nil, fmt.Errorf("mvcc: gc: %w", err)
	}
	defer it.Close()
	w := gcWalker{threshold: threshold}
	var doomed []storage.MVCCKey
	for ok := it.First(); ok; ok = it.Next() {
		k := it.UnsafeKey()
		if maxVersions > 0 && len(doomed) >= maxVersions && !bytes.Equal(k.Key, w.cur) {
			resume = bytes.Clone(k.Key)
			break
		}
		raw, err := it.UnsafeValue()
		if err != nil {
			return GCStats{}, nil, err
		}
		gone, _, err := w.step(k, raw)
		if err != nil {
			return GCStats{}, nil, err
		}
		if gone {
			doomed = append(doomed, storage.MVCCKey{Key: append([]byte(nil), k.Key...), Timestamp: k.Timestamp})
			st.Bytes += int64(len(k.Key) + versionOverhead + len(raw))
		}
	}
	if err := it.Err(); err != nil {
		return GCStats{}, nil, fmt.Errorf("mvcc: gc: %w", err)
	}
	for _, k := range doomed {
		if err := rw.Delete(k); err != nil {
			return GCStats{}, nil, fmt.Errorf("mvcc: gc %s: %w", k, err)
		}
	}
	st.Versions = len(doomed)
	return st, resume, nil
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
	var p GCPlan
	if len(end) == 0 || bytes.Compare(start, end) >= 0 {
		return p, invalidArg("gc plan: empty span [%q, %q)", start, end)
	}
	it, err := r.NewIter(storage.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return p, fmt.Errorf("mvcc: gc plan: %w", err)
	}
	defer it.Close()
	w := gcWalker{threshold: threshold}
	var spanStart []byte // start of the span being filled; nil: none
	var spanVersions int
	var spanBytes int64
	due := func(ts hlc.Timestamp) {
		if p.NextDue.IsEmpty() || ts.Less(p.NextDue) {
			p.NextDue = ts
		}
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.UnsafeKey()
		raw, err := it.UnsafeValue()
		if err != nil {
			return p, err
		}
		prev := w.prevTS
		if !bytes.Equal(k.Key, w.cur) {
			prev = hlc.Timestamp{}
		}
		gone, newKey, err := w.step(k, raw)
		if err != nil {
			return p, err
		}
		size := int64(len(k.Key) + versionOverhead + len(raw))
		p.TotalBytes += size
		if newKey && spanStart != nil && (spanVersions >= maxVersions || spanBytes >= maxBytes) {
			p.Spans = append(p.Spans, [2][]byte{spanStart, bytes.Clone(k.Key)})
			spanStart, spanVersions, spanBytes = nil, 0, 0
		}
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
		if gone {
			if spanStart == nil {
				spanStart = bytes.Clone(k.Key)
			}
			spanVersions++
			spanBytes += size
			p.Garbage.Versions++
			p.Garbage.Bytes += size
		}
	}
	if err := it.Err(); err != nil {
		return p, fmt.Errorf("mvcc: gc plan: %w", err)
	}
	if spanStart != nil {
		p.Spans = append(p.Spans, [2][]byte{spanStart, append(bytes.Clone(w.cur), 0)})
	}
	return p, nil
}
