package clusterversion

import (
	"errors"
	"fmt"
)

// Stored formats that had no version in 1.0 (a tablet's GC threshold,
// closed timestamp and applied index, the protected timestamp records)
// gain one from VersionedState in the same way, so that their readers
// share this code: the versioned form is a version byte with the high bit
// set, then that version's payload. The 1.0 form of each of them begins
// with a big-endian integer that is never negative (a wall time, an
// index), whose first byte never has the high bit set, so the first byte
// alone tells the forms apart. A writer uses the versioned form only once
// IsActive(VersionedState): a 1.0 binary reads only its own form.

// ErrFutureFormat: a stored value is in a version of its format that this
// binary does not know: a newer binary wrote it. It is never guessed at.
var ErrFutureFormat = errors.New("written in a format version this binary does not know")

// FutureFormat returns ErrFutureFormat for what (such as "the GC
// threshold") at format version v, this binary reading up to max.
func FutureFormat(what string, v, max int) error {
	return fmt.Errorf("%w: %s is in format version %d, and this binary (version %s) reads up to %d: a newer binary wrote it; run a binary at least as new as the cluster version",
		ErrFutureFormat, what, v, Binary, max)
}

// formatFlag marks a versioned value's first byte.
const formatFlag byte = 0x80

// AppendFormat appends the first byte of a value in version v (1..127) of
// its format.
func AppendFormat(dst []byte, v int) []byte { return append(dst, formatFlag|byte(v)) }

// SplitFormat returns the format version of b (0: the unversioned 1.0
// form) and its payload (b itself for the 1.0 form). A version above max
// is FutureFormat's error; what names the value in errors.
func SplitFormat(what string, b []byte, max int) (v int, payload []byte, err error) {
	switch {
	case len(b) == 0:
		return 0, nil, fmt.Errorf("%s: empty value", what)
	case b[0]&formatFlag == 0:
		return 0, b, nil
	}
	switch v := int(b[0] &^ formatFlag); {
	case v == 0:
		return 0, nil, fmt.Errorf("%s: version byte %#x names no format", what, b[0])
	case v > max:
		return v, nil, FutureFormat(what, v, max)
	default:
		return v, b[1:], nil
	}
}
