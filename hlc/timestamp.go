package hlc

import (
	"fmt"
	"strconv"
	"strings"
)

// Timestamp is a hybrid logical timestamp: a physical wall time in
// nanoseconds since the Unix epoch, and a logical counter that orders events
// sharing a wall time. The zero Timestamp is "no timestamp" and sorts before
// every other one.
type Timestamp struct {
	WallTime int64 `wire:"1"`
	Logical  int32 `wire:"2"`
}

// MaxTimestamp sorts after every timestamp a clock can produce.
var MaxTimestamp = Timestamp{WallTime: 1<<63 - 1, Logical: 1<<31 - 1}

// IsEmpty reports whether t is the zero timestamp.
func (t Timestamp) IsEmpty() bool { return t == Timestamp{} }

// Less reports whether t orders strictly before u.
func (t Timestamp) Less(u Timestamp) bool {
	return t.WallTime < u.WallTime || (t.WallTime == u.WallTime && t.Logical < u.Logical)
}

// LessEq reports whether t orders before or at u.
func (t Timestamp) LessEq(u Timestamp) bool { return !u.Less(t) }

// Compare returns -1, 0 or +1 as t orders before, at or after u.
func (t Timestamp) Compare(u Timestamp) int {
	switch {
	case t.Less(u):
		return -1
	case u.Less(t):
		return 1
	default:
		return 0
	}
}

// Next returns the smallest timestamp strictly after t.
func (t Timestamp) Next() Timestamp {
	if t.Logical == 1<<31-1 {
		return Timestamp{WallTime: t.WallTime + 1}
	}
	return Timestamp{WallTime: t.WallTime, Logical: t.Logical + 1}
}

// Prev returns the largest timestamp strictly before t. Prev of the zero
// timestamp is the zero timestamp.
func (t Timestamp) Prev() Timestamp {
	switch {
	case t.Logical > 0:
		return Timestamp{WallTime: t.WallTime, Logical: t.Logical - 1}
	case t.WallTime > 0:
		return Timestamp{WallTime: t.WallTime - 1, Logical: 1<<31 - 1}
	default:
		return Timestamp{}
	}
}

// Forward returns the later of t and u.
func (t Timestamp) Forward(u Timestamp) Timestamp {
	if t.Less(u) {
		return u
	}
	return t
}

// Backward returns the earlier of t and u.
func (t Timestamp) Backward(u Timestamp) Timestamp {
	if u.Less(t) {
		return u
	}
	return t
}

// String renders t as "wall,logical", the form ParseTimestamp reads; tests
// and datadriven files use it.
func (t Timestamp) String() string {
	return strconv.FormatInt(t.WallTime, 10) + "," + strconv.FormatInt(int64(t.Logical), 10)
}

// ParseTimestamp reads "wall" or "wall,logical".
func ParseTimestamp(s string) (Timestamp, error) {
	wall, logical, hasLogical := strings.Cut(s, ",")
	w, err := strconv.ParseInt(wall, 10, 64)
	if err != nil {
		return Timestamp{}, fmt.Errorf("hlc: bad timestamp %q: %w", s, err)
	}
	var l int64
	if hasLogical {
		l, err = strconv.ParseInt(logical, 10, 32)
		if err != nil {
			return Timestamp{}, fmt.Errorf("hlc: bad timestamp %q: %w", s, err)
		}
	}
	return Timestamp{WallTime: w, Logical: int32(l)}, nil
}
