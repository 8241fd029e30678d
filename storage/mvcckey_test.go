package storage

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2"
	"pgregory.net/rapid"
)

// TestMVCCKeyDataDriven runs testdata/mvcckey. Keys are written the way
// MVCCKey.String prints them ("key" or "key"@wall,logical). Commands:
//
//	encode
//	<key per line>
//	----
//	<hex encoding per line>, plus the Split point of each
//
//	decode
//	<hex per line>
//	----
//	<decoded key per line, or the error>
//
//	order
//	<key per line, any order>
//	----
//	<the keys sorted by Comparer.Compare>
func TestMVCCKeyDataDriven(t *testing.T) {
	datadriven.RunTest(t, "testdata/mvcckey", func(t *testing.T, d *datadriven.TestData) string {
		lines := strings.Split(strings.TrimSpace(d.Input), "\n")
		var b strings.Builder
		switch d.Cmd {
		case "encode":
			for _, l := range lines {
				k, err := ParseMVCCKey(l)
				if err != nil {
					t.Fatal(err)
				}
				enc := k.Encode(nil)
				fmt.Fprintf(&b, "%s -> %x split=%d\n", k, enc, Comparer.Split(enc))
			}
		case "decode":
			for _, l := range lines {
				enc, err := hex.DecodeString(l)
				if err != nil {
					t.Fatal(err)
				}
				k, err := DecodeMVCCKey(enc)
				if err != nil {
					fmt.Fprintf(&b, "%s -> error: %v\n", l, err)
					continue
				}
				fmt.Fprintf(&b, "%s -> %s\n", l, k)
			}
		case "order":
			var encs [][]byte
			for _, l := range lines {
				k, err := ParseMVCCKey(l)
				if err != nil {
					t.Fatal(err)
				}
				encs = append(encs, k.Encode(nil))
			}
			slices.SortFunc(encs, Comparer.Compare)
			for _, e := range encs {
				fmt.Fprintf(&b, "%s\n", Comparer.FormatKey(e))
			}
		default:
			t.Fatalf("unknown command %q", d.Cmd)
		}
		return b.String()
	})
}

// genKey draws MVCCKeys from a small alphabet (including the sentinel byte,
// the version tag and 0xff) so that shared prefixes, equal user keys and
// equal timestamps are common.
func genKey() *rapid.Generator[MVCCKey] {
	return rapid.Custom(func(t *rapid.T) MVCCKey {
		key := rapid.SliceOfN(rapid.SampledFrom([]byte{0x00, 0x01, 0x0d, 'a', 'b', 0xfe, 0xff}), 0, 6).Draw(t, "key")
		var ts hlc.Timestamp
		if rapid.Bool().Draw(t, "versioned") {
			ts = hlc.Timestamp{
				WallTime: rapid.SampledFrom([]int64{0, 1, 2, 255, 256, 1 << 40, 1<<63 - 1}).Draw(t, "wall"),
				Logical:  rapid.SampledFrom([]int32{0, 1, 2, 1<<31 - 1}).Draw(t, "logical"),
			}
		}
		return MVCCKey{Key: key, Timestamp: ts}
	})
}

// modelCompare is the order of invariant 1 written directly on MVCCKeys.
func modelCompare(a, b MVCCKey) int {
	if c := bytes.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	switch ae, be := a.Timestamp.IsEmpty(), b.Timestamp.IsEmpty(); {
	case ae && be:
		return 0
	case ae:
		return -1
	case be:
		return 1
	}
	return b.Timestamp.Compare(a.Timestamp)
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

func TestEncodingMatchesModelOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genKey().Draw(t, "a"), genKey().Draw(t, "b")
		ea, eb := a.Encode(nil), b.Encode(nil)
		if got, want := sign(Comparer.Compare(ea, eb)), modelCompare(a, b); got != want {
			t.Fatalf("Compare(%s, %s) = %d, want %d", a, b, got, want)
		}
		if Comparer.Equal(ea, eb) != (modelCompare(a, b) == 0) {
			t.Fatalf("Equal(%s, %s) disagrees with Compare", a, b)
		}
		if got := Comparer.Split(ea); got != len(a.Key)+1 {
			t.Fatalf("Split(%s) = %d, want %d", a, got, len(a.Key)+1)
		}
		if len(ea) != a.EncodedLen() {
			t.Fatalf("EncodedLen(%s) = %d, encoding has %d bytes", a, a.EncodedLen(), len(ea))
		}
		dec, err := DecodeMVCCKey(ea)
		if err != nil || !bytes.Equal(dec.Key, a.Key) || dec.Timestamp != a.Timestamp {
			t.Fatalf("round trip of %s gave %s, %v", a, dec, err)
		}
		if back, err := ParseMVCCKey(a.String()); err != nil || modelCompare(back, a) != 0 {
			t.Fatalf("ParseMVCCKey(%q) = %s, %v", a.String(), back, err)
		}
		if aa, ab := Comparer.AbbreviatedKey(ea), Comparer.AbbreviatedKey(eb); aa < ab && Comparer.Compare(ea, eb) >= 0 {
			t.Fatalf("AbbreviatedKey(%s) < AbbreviatedKey(%s) but the keys do not sort that way", a, b)
		}
	})
}

// TestComparerShorteningContracts checks Separator, Successor and
// ImmediateSuccessor against Pebble's contracts (internal/base/comparer.go):
// every output is a valid engine key and sits where the contract says.
func TestComparerShorteningContracts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genKey().Draw(t, "a"), genKey().Draw(t, "b")
		ea, eb := a.Encode(nil), b.Encode(nil)
		dst := []byte("junk") // results must be appended, not overwrite
		valid := func(what string, k []byte) {
			if _, err := DecodeMVCCKey(k); err != nil {
				t.Fatalf("%s returned an invalid key %x: %v", what, k, err)
			}
		}

		if c := Comparer.Compare(ea, eb); c < 0 {
			sep := Comparer.Separator(dst, ea, eb)
			if !bytes.HasPrefix(sep, dst) {
				t.Fatalf("Separator clobbered dst: %x", sep)
			}
			sep = sep[len(dst):]
			valid("Separator", sep)
			if Comparer.Compare(ea, sep) > 0 || Comparer.Compare(sep, eb) >= 0 {
				t.Fatalf("Separator(%s, %s) = %s, not in [a, b)", a, b, Comparer.FormatKey(sep))
			}
		}

		succ := Comparer.Successor(nil, ea)
		valid("Successor", succ)
		if Comparer.Compare(ea, succ) > 0 {
			t.Fatalf("Successor(%s) = %s sorts before it", a, Comparer.FormatKey(succ))
		}

		prefix := ea[:Comparer.Split(ea)]
		next := Comparer.ImmediateSuccessor(nil, prefix)
		valid("ImmediateSuccessor", next)
		if Comparer.Split(next) != len(next) || Comparer.Compare(prefix, next) >= 0 {
			t.Fatalf("ImmediateSuccessor(%x) = %x is not a larger prefix", prefix, next)
		}
		// No prefix lies strictly between prefix and next.
		other := eb[:Comparer.Split(eb)]
		if Comparer.Compare(prefix, other) < 0 && Comparer.Compare(other, next) < 0 {
			t.Fatalf("prefix %x lies between %x and its immediate successor %x", other, prefix, next)
		}
	})
	valid := Comparer.Successor(nil, nil)
	if _, err := DecodeMVCCKey(valid); err != nil {
		t.Fatalf("Successor of the empty slice must be a valid key, got %x", valid)
	}
}

// TestPebbleCheckComparer runs Pebble's own comparer checks, which also
// require suffixes to compare as keys in their own right.
func TestPebbleCheckComparer(t *testing.T) {
	var prefixes, suffixes [][]byte
	for _, k := range []string{"a", "ab", "b\x00", "\x0d", "\xff\xff"} {
		prefixes = append(prefixes, MVCCKey{Key: []byte(k)}.Encode(nil))
	}
	for _, ts := range []hlc.Timestamp{{WallTime: 1}, {WallTime: 1, Logical: 1}, {WallTime: 2}, {WallTime: 1 << 40, Logical: 7}} {
		enc := MVCCKey{Key: []byte("x"), Timestamp: ts}.Encode(nil)
		suffixes = append(suffixes, enc[Comparer.Split(enc):])
	}
	if err := pebble.CheckComparer(Comparer, prefixes, suffixes); err != nil {
		t.Fatal(err)
	}
	// Split's third property: suffixes compare as keys like within a key.
	for _, sa := range suffixes {
		for _, sb := range suffixes {
			if got, want := Comparer.Compare(sa, sb), compareSuffixes(sa, sb); got != want {
				t.Fatalf("Compare(%x, %x) = %d, ComparePointSuffixes says %d", sa, sb, got, want)
			}
		}
	}
}

func TestCheckWriteKey(t *testing.T) {
	for _, tc := range []struct {
		key  MVCCKey
		want error
	}{
		{MVCCKey{Key: []byte("a")}, nil},
		{MVCCKey{Key: []byte("a"), Timestamp: hlc.Timestamp{WallTime: 3}}, nil},
		{MVCCKey{}, ErrEmptyKey},
		{MVCCKey{Key: []byte("a"), Timestamp: hlc.Timestamp{WallTime: -1}}, ErrNegativeTimestamp},
		{MVCCKey{Key: []byte("a"), Timestamp: hlc.Timestamp{WallTime: 1, Logical: -1}}, ErrNegativeTimestamp},
	} {
		if err := checkWriteKey(tc.key); !errors.Is(err, tc.want) {
			t.Errorf("checkWriteKey(%s) = %v, want %v", tc.key, err, tc.want)
		}
	}
}

// FuzzDecodeMVCCKey checks that decoding never panics and that whatever
// decodes is canonical: re-encoding gives back the input bytes.
func FuzzDecodeMVCCKey(f *testing.F) {
	for _, k := range []MVCCKey{
		{Key: []byte("a")},
		{Key: []byte("a"), Timestamp: hlc.Timestamp{WallTime: 5, Logical: 2}},
		{Key: []byte("\x00\x0d"), Timestamp: hlc.Timestamp{WallTime: 1}},
		{Key: nil},
	} {
		f.Add(k.Encode(nil))
	}
	f.Add([]byte{})
	f.Add([]byte{0x0d})
	f.Add(append([]byte("a\x00"), make([]byte, 12)...))
	f.Add(append(append([]byte("a\x00"), make([]byte, 12)...), 0x0d))
	f.Add([]byte("a\x00\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x00\x0d"))
	f.Fuzz(func(t *testing.T, enc []byte) {
		k, err := DecodeMVCCKey(enc)
		if err != nil {
			if !errors.Is(err, ErrBadEngineKey) {
				t.Fatalf("decode error %v is not ErrBadEngineKey", err)
			}
			return
		}
		if re := k.Encode(nil); !bytes.Equal(re, enc) {
			t.Fatalf("decode(%x) = %s re-encodes as %x", enc, k, re)
		}
		if Comparer.Split(enc) != len(k.Key)+1 {
			t.Fatalf("Split(%x) = %d, want %d", enc, Comparer.Split(enc), len(k.Key)+1)
		}
	})
}
