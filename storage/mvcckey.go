package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

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

// DecodeMVCCKey decodes an engine key. The returned Key aliases enc. Only
// canonical encodings decode: a version suffix holding the zero timestamp (the
// bare key has no suffix) or a negative one (Encode never writes one for a
// valid timestamp) is rejected, so re-encoding a decoded key yields enc.
func DecodeMVCCKey(enc []byte) (MVCCKey, error) {
	n := len(enc)
	if n == 0 {
		return MVCCKey{}, fmt.Errorf("%w: empty", ErrBadEngineKey)
	}
	switch enc[n-1] {
	case sentinel:
		return MVCCKey{Key: enc[:n-1]}, nil
	case versionLenTag:
		if n < versionLen+1 || enc[n-versionLen-1] != sentinel {
			return MVCCKey{}, fmt.Errorf("%w: %x", ErrBadEngineKey, enc)
		}
		v := enc[n-versionLen:]
		ts := hlc.Timestamp{
			WallTime: int64(binary.BigEndian.Uint64(v[0:8])),
			Logical:  int32(binary.BigEndian.Uint32(v[8:12])),
		}
		if ts.IsEmpty() || ts.WallTime < 0 || ts.Logical < 0 {
			return MVCCKey{}, fmt.Errorf("%w: bad timestamp %s in %x", ErrBadEngineKey, ts, enc)
		}
		return MVCCKey{Key: enc[:n-versionLen-1], Timestamp: ts}, nil
	default:
		return MVCCKey{}, fmt.Errorf("%w: %x", ErrBadEngineKey, enc)
	}
}

// ParseMVCCKey reads the form String writes: a Go-quoted user key, optionally
// followed by @wall,logical. Datadriven tests across the storage layers use
// it so their files read like the keys they describe.
func ParseMVCCKey(s string) (MVCCKey, error) {
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return MVCCKey{}, fmt.Errorf("storage: parse key %q: want a quoted key: %w", s, err)
	}
	key, err := strconv.Unquote(q)
	if err != nil {
		return MVCCKey{}, fmt.Errorf("storage: parse key %q: %w", s, err)
	}
	k := MVCCKey{Key: []byte(key)}
	rest := s[len(q):]
	if rest == "" {
		return k, nil
	}
	tsStr, ok := strings.CutPrefix(rest, "@")
	if !ok {
		return MVCCKey{}, fmt.Errorf("storage: parse key %q: want @timestamp after the key", s)
	}
	if k.Timestamp, err = hlc.ParseTimestamp(tsStr); err != nil {
		return MVCCKey{}, fmt.Errorf("storage: parse key %q: %w", s, err)
	}
	if k.Timestamp.IsEmpty() {
		return MVCCKey{}, fmt.Errorf("storage: parse key %q: a version needs a non-zero timestamp", s)
	}
	return k, nil
}

// split returns the length of the prefix (user key plus sentinel). A key made
// of a suffix alone (as Pebble may compare, see Split's contract) has an empty
// prefix, so suffixes compare among themselves exactly as within a key.
func split(k []byte) int {
	n := len(k)
	if n == 0 {
		return 0
	}
	if last := k[n-1]; last != sentinel && int(last) <= n {
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

// userKeyOf returns the user key of an encoded key and whether it had the
// sentinel-terminated prefix every engine key has.
func userKeyOf(k []byte) ([]byte, bool) {
	p := split(k)
	if p == 0 || k[p-1] != sentinel {
		return nil, false
	}
	return k[:p-1], true
}

// separator implements Pebble's Separator contract (a <= k < b) for the index
// blocks of SSTs. It shortens only the user key and always returns a bare
// engine key, so the result decodes like any other key: for user keys ua < ub
// and a shortened s with ua < s < ub, a <= s\x00 < b because a bare key sorts
// before every version of its user key.
func separator(dst, a, b []byte) []byte {
	ua, okA := userKeyOf(a)
	ub, okB := userKeyOf(b)
	// The default separator rejects empty inputs, and an empty user key (the
	// bare key "\x00") is encodable even though Put refuses it.
	if !okA || !okB || len(ua) == 0 || len(ub) == 0 {
		return append(dst, a...)
	}
	s := pebble.DefaultComparer.Separator(nil, ua, ub)
	if bytes.Compare(s, ua) <= 0 || bytes.Compare(s, ub) >= 0 {
		return append(dst, a...)
	}
	return append(append(dst, s...), sentinel)
}

// successor implements Pebble's Successor contract (a <= k, k a valid key):
// the shortest user key above a's, as a bare key, or a itself when no shorter
// one exists (a run of 0xff).
func successor(dst, a []byte) []byte {
	ua, ok := userKeyOf(a)
	if !ok {
		if len(a) == 0 {
			// Pebble may pass an empty slice and needs any valid key back.
			return append(dst, sentinel)
		}
		return append(dst, a...)
	}
	for i, c := range ua {
		if c != 0xff {
			dst = append(dst, ua[:i+1]...)
			dst[len(dst)-1]++
			return append(dst, sentinel)
		}
	}
	return append(dst, a...)
}

// immediateSuccessor implements Pebble's ImmediateSuccessor contract: a is a
// prefix (user key + sentinel) and the next prefix in bytewise order is the
// user key extended by 0x00, i.e. a with one more 0x00 appended.
func immediateSuccessor(dst, a []byte) []byte {
	if len(a) == 0 {
		return append(dst, sentinel)
	}
	return append(append(dst, a...), sentinel)
}

// Comparer is the Pebble comparer for engine keys. Its name is stored in the
// store's manifest; changing the encoding means changing the name.
var Comparer = &pebble.Comparer{
	Name:                 "cairn.mvcc.v1",
	Compare:              compare,
	Equal:                func(a, b []byte) bool { return compare(a, b) == 0 },
	Split:                split,
	ComparePointSuffixes: compareSuffixes,
	CompareRangeSuffixes: compareSuffixes,
	AbbreviatedKey: func(k []byte) uint64 {
		// The first bytes of the prefix, zero-padded, never decrease as
		// the prefix grows bytewise, which is all Pebble requires.
		return pebble.DefaultComparer.AbbreviatedKey(k[:split(k)])
	},
	Separator:          separator,
	Successor:          successor,
	ImmediateSuccessor: immediateSuccessor,
	FormatKey: func(k []byte) fmt.Formatter {
		return keyFormatter(k)
	},
	ValidateKey: func(k []byte) error {
		_, err := DecodeMVCCKey(k)
		return err
	},
}

type keyFormatter []byte

func (f keyFormatter) Format(s fmt.State, _ rune) {
	k, err := DecodeMVCCKey(f)
	if err != nil {
		fmt.Fprintf(s, "%x", []byte(f))
		return
	}
	fmt.Fprint(s, k.String())
}

// checkWriteKey rejects keys a write must never store: an empty user key
// (reserved, and below every addressable key) and a negative timestamp
// (which the unsigned encoding would sort as the newest version).
func checkWriteKey(k MVCCKey) error {
	if len(k.Key) == 0 {
		return ErrEmptyKey
	}
	if k.Timestamp.WallTime < 0 || k.Timestamp.Logical < 0 {
		return fmt.Errorf("%w: %s", ErrNegativeTimestamp, k.Timestamp)
	}
	return nil
}
