package clusterversion

import (
	"encoding/json"
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

// JSON records (the node table, liveness records, zone configurations)
// carry their format version as a top-level "format_version" member from
// 1.1 on. A 1.0 binary decodes them with encoding/json, which skips a
// member it does not know, so this needs no gate; a record without the
// member is version 0, what 1.0 wrote.

// MarshalFormat returns v, which must encode as a JSON object, as JSON
// with "format_version": version first.
func MarshalFormat(v any, version int) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[0] != '{' {
		return nil, fmt.Errorf("clusterversion: %T does not encode as a JSON object", v)
	}
	out := fmt.Appendf(make([]byte, 0, len(b)+20), `{"format_version":%d`, version)
	if len(b) > 2 {
		out = append(out, ',')
	}
	return append(out, b[1:]...), nil
}

// JSONFormat returns the format version of a JSON record (0 without
// "format_version"); one above max is FutureFormat's error, and what
// names the record in errors.
func JSONFormat(what string, b []byte, max int) (int, error) {
	var f struct {
		V int `json:"format_version"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	switch {
	case f.V < 0:
		return 0, fmt.Errorf("%s: format version %d", what, f.V)
	case f.V > max:
		return f.V, FutureFormat(what, f.V, max)
	}
	return f.V, nil
}
