package kvpb

import (
	"fmt"
	"slices"
	"strings"
)

// SeqRange is the inclusive range [Start, End] of a transaction's sequence
// numbers. Transaction.IgnoredSeqNums lists the ranges whose writes a
// ROLLBACK TO SAVEPOINT undid.
type SeqRange struct {
	Start int32 `wire:"1"`
	End   int32 `wire:"2"`
}

func (r SeqRange) String() string { return fmt.Sprintf("[%d,%d]", r.Start, r.End) }

// SeqIgnored reports whether seq lies in one of the ranges, which must be
// sorted and disjoint (as AddIgnoredSeqRange keeps them).
func SeqIgnored(ignored []SeqRange, seq int32) bool {
	// Few transactions roll back more than a handful of savepoints: a
	// linear walk from the end (the newest ranges) beats a binary search.
	for i := len(ignored) - 1; i >= 0; i-- {
		r := ignored[i]
		if seq > r.End {
			return false
		}
		if seq >= r.Start {
			return true
		}
	}
	return false
}

// AddIgnoredSeqRange returns ignored with r added, sorted and with
// overlapping or adjacent ranges merged. It never modifies ignored's
// backing array (the slice may be shared with a batch in flight). An empty
// r (End < Start) returns ignored unchanged.
func AddIgnoredSeqRange(ignored []SeqRange, r SeqRange) []SeqRange {
	if r.End < r.Start {
		return ignored
	}
	out := make([]SeqRange, 0, len(ignored)+1)
	out = append(out, ignored...)
	out = append(out, r)
	slices.SortFunc(out, func(a, b SeqRange) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	merged := out[:1]
	for _, x := range out[1:] {
		last := &merged[len(merged)-1]
		// Adjacent ranges merge too: int64 so End+1 cannot overflow.
		if int64(x.Start) <= int64(last.End)+1 {
			last.End = max(last.End, x.End)
			continue
		}
		merged = append(merged, x)
	}
	return merged
}

// FormatSeqRanges prints ranges as "[1,3] [7,7]", for errors and tests.
func FormatSeqRanges(ranges []SeqRange) string {
	parts := make([]string, len(ranges))
	for i, r := range ranges {
		parts[i] = r.String()
	}
	return strings.Join(parts, " ")
}
