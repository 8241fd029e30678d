package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cockroachdb/pebble/v2"
)

// MVCCKey is a user key at a timestamp. A zero Timestamp denotes the bare,
// unversioned key (used for locks, transaction records and node-local state).
type MVCCKey struct {
	Key       []byte
	Timestamp hlc.Timestamp
}

const (
	sentinel      = 0x00
	versionLen    = 8 + 4 + 1 // wall, logical, length byte
	versionLenTag = byte(versionLen)
)

// ErrBadEngineKey is returned for bytes that are not an encoded MVCCKey.
var ErrBadEngineKey = errors.New("storage: malformed engine key")

// EncodedLen is the length of k's encoding.
func (k MVCCKey) EncodedLen() int {
	n := len(k.Key) + 1
	if !k.Timestamp.IsEmpty() {
		n += versionLen
	}
	return n
}

// Encode appends the engine encoding of k to dst.
func (k MVCCKey) Encode(dst []byte) []byte {
	dst = append(dst, k.Key...)
	dst = append(dst, sentinel)
	if k.Timestamp.IsEmpty() {
		return dst
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(k.Timestamp.WallTime))
	dst = binary.BigEndian.AppendUint32(dst, uint32(k.Timestamp.Logical))
	return append(dst, versionLenTag)
}

// String renders k as key@wall,logical (or just the key when unversioned).
func (k MVCCKey) String() string {
	if k.Timestamp.IsEmpty() {
		return fmt.Sprintf("%q", k.Key)
	}
	return fmt.Sprintf("%q@%s", k.Key, k.Timestamp)
}

// DecodeMVCCKey decodes an engine key. The returned Key aliases enc.
func DecodeMVCCKey(enc []byte) (MVCCKey, error) {
	n := len(enc)
	if n == 0 {
		return MVCCKey{}, ErrBadEngineKey
	}
	switch enc[n-1] {
	case sentinel:
		return MVCCKey{Key: enc[:n-1]}, nil
	case versionLenTag:
		if n < versionLen+1 || enc[n-versionLen-1] != sentinel {
			return MVCCKey{}, fmt.Errorf("%w: %x", ErrBadEngineKey, enc)
		}
		v := enc[n-versionLen:]
		return MVCCKey{
			Key: enc[:n-versionLen-1],
			Timestamp: hlc.Timestamp{
				WallTime: int64(binary.BigEndian.Uint64(v[0:8])),
				Logical:  int32(binary.BigEndian.Uint32(v[8:12])),
			},
		}, nil
	default:
		return MVCCKey{}, fmt.Errorf("%w: %x", ErrBadEngineKey, enc)
	}
}

// split returns the length of the prefix (user key plus sentinel).
func split(k []byte) int {
	n := len(k)
	if n == 0 {
		return 0
	}
	if last := k[n-1]; last != sentinel && int(last) < n {
		return n - int(last)
	}
	return n
}

// compareSuffixes orders an empty suffix first and versions newest first.
func compareSuffixes(a, b []byte) int {
	switch {
	case len(a) == 0 && len(b) == 0:
		return 0
	case len(a) == 0:
		return -1
	case len(b) == 0:
		return 1
	}
	// Both are wall(8) logical(4) len(1): a larger timestamp sorts earlier.
	return bytes.Compare(b[:len(b)-1], a[:len(a)-1])
}

func compare(a, b []byte) int {
	pa, pb := split(a), split(b)
	if c := bytes.Compare(a[:pa], b[:pb]); c != 0 {
		return c
	}
	return compareSuffixes(a[pa:], b[pb:])
}

// Comparer is the Pebble comparer for engine keys. Its name is stored in the
// store's manifest; changing the encoding means changing the name.
var Comparer = func() *pebble.Comparer {
	c := &pebble.Comparer{
		Name:                 "cairn.mvcc.v1",
		Compare:              compare,
		Equal:                func(a, b []byte) bool { return compare(a, b) == 0 },
		Split:                split,
		ComparePointSuffixes: compareSuffixes,
		CompareRangeSuffixes: compareSuffixes,
		AbbreviatedKey: func(k []byte) uint64 {
			return pebble.DefaultComparer.AbbreviatedKey(k[:split(k)])
		},
		// Shortened separators must stay valid engine keys; the prefix-only
		// shortening below keeps a sentinel-terminated prefix.
		Separator: func(dst, a, b []byte) []byte {
			pa, pb := split(a), split(b)
			if pa == 0 || pb == 0 || !bytes.Equal(a[pa-1:pa], []byte{sentinel}) || !bytes.Equal(b[pb-1:pb], []byte{sentinel}) {
				return append(dst, a...)
			}
			sep := pebble.DefaultComparer.Separator(nil, a[:pa-1], b[:pb-1])
			if len(sep) == 0 || bytes.Compare(sep, a[:pa-1]) <= 0 {
				return append(dst, a...)
			}
			// sep > a's user key and sep < b's user key: a bare key sorts
			// before every version of sep, so a < sep\x00 < b.
			if bytes.Compare(sep, b[:pb-1]) >= 0 {
				return append(dst, a...)
			}
			return append(append(dst, sep...), sentinel)
		},
		Successor: func(dst, a []byte) []byte { return append(dst, a...) },
		ImmediateSuccessor: func(dst, a []byte) []byte {
			// a is a prefix (user key + sentinel); the next prefix is the
			// user key with a 0x00 appended, then the sentinel.
			if len(a) == 0 {
				return append(dst, sentinel)
			}
			dst = append(dst, a[:len(a)-1]...)
			return append(dst, 0x00, sentinel)
		},
		FormatKey: func(k []byte) fmt.Formatter {
			return keyFormatter(k)
		},
	}
	return c
}()

type keyFormatter []byte

func (f keyFormatter) Format(s fmt.State, _ rune) {
	k, err := DecodeMVCCKey(f)
	if err != nil {
		fmt.Fprintf(s, "%x", []byte(f))
		return
	}
	fmt.Fprint(s, k.String())
}
