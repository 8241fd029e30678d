package types

import (
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
)

// Slicing and element assignment of one-dimensional arrays, as Postgres's
// array_get_slice and array_set_element/array_set_slice do them for one
// dimension. Cairn's arrays start at subscript 1 (0 for the vector types),
// so an assignment that would move the lower bound (a[0] = x on a
// one-based array, a[5] = x on a NULL or empty one) is refused with 0A000
// rather than silently renumbered.

// ArraySlice returns a[lo:hi]; a nil bound is the array's own (a[:2],
// a[2:]). Bounds outside the array are clamped, and an empty range gives
// an empty array, as in Postgres. The result always starts at 1, also for
// a zero-based vector, as Postgres's slices do.
func ArraySlice(a *DArray, lo, hi *int64) *DArray {
	first, last := int64(a.Lower()), int64(a.Lower()+len(a.Elems)-1)
	l, h := first, last
	if lo != nil {
		l = max(*lo, first)
	}
	if hi != nil {
		h = min(*hi, last)
	}
	if l > h {
		return &DArray{Elem: a.Elem}
	}
	off := int64(a.Lower())
	return &DArray{Elem: a.Elem, Elems: append([]Datum(nil), a.Elems[l-off:h-off+1]...)}
}

// ArraySetElement returns a copy of a (nil or DNull: no array yet) with
// element i set to v, extending the array with NULLs when i is past its
// end. elem is the element type, for a new array.
func ArraySetElement(a Datum, elem *T, i int64, v Datum) (*DArray, error) {
	return ArraySetSlice(a, elem, &i, &i, NewArray(elem, v))
}

// ArraySetSlice returns a copy of a with elements lo..hi replaced by the
// first hi-lo+1 elements of src (a nil bound is the array's own), which
// is UPDATE t SET a[lo:hi] = src.
func ArraySetSlice(a Datum, elem *T, lo, hi *int64, src *DArray) (*DArray, error) {
	var cur *DArray
	if !IsNull(a) {
		cur = a.(*DArray)
		elem = cur.Elem
	}
	lower := int64(1)
	var elems []Datum
	if cur != nil && len(cur.Elems) > 0 {
		lower, elems = int64(cur.Lower()), cur.Elems
	}
	l, h := lower, lower+int64(len(elems))-1
	if lo != nil {
		l = *lo
	}
	if hi != nil {
		h = *hi
	}
	if len(elems) == 0 && (lo == nil || hi == nil) {
		// Postgres: an empty or NULL array has no bounds to default to.
		return nil, pgerror.New(pgerrcode.ArraySubscriptError, "array slice subscript must provide both boundaries").
			WithDetail("When assigning to a slice of an empty array value, slice boundaries must be fully specified.")
	}
	if h < l {
		return nil, pgerror.New(pgerrcode.ArraySubscriptError, "upper bound cannot be less than lower bound")
	}
	n := h - l + 1
	if int64(len(src.Elems)) < n {
		return nil, pgerror.New(pgerrcode.ArraySubscriptError, "source array too small")
	}
	if l < lower {
		return nil, pgerror.New(pgerrcode.FeatureNotSupported,
			"array subscript %d is before the array's lower bound %d: arrays with another lower bound are not supported", l, lower)
	}
	if len(elems) == 0 && l != lower {
		return nil, pgerror.New(pgerrcode.FeatureNotSupported,
			"assigning to element %d of an empty array would make its lower bound %d: arrays with a lower bound other than 1 are not supported", l, l)
	}
	if h-lower+1 > maxArrayElems {
		return nil, pgerror.New(pgerrcode.ProgramLimitExceeded, "array size exceeds the maximum allowed (%d)", maxArrayElems)
	}
	size := max(int64(len(elems)), h-lower+1)
	out := &DArray{Elem: elem, Elems: make([]Datum, size), ZeroBased: lower == 0}
	copy(out.Elems, elems)
	for k := int64(len(elems)); k < size; k++ {
		out.Elems[k] = DNull
	}
	copy(out.Elems[l-lower:], src.Elems[:n])
	return out, nil
}

// maxArrayElems is Postgres's MaxArraySize (the most elements a 1 GB
// allocation of 8-byte datums holds).
const maxArrayElems = 134217727
