package tablet

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/clusterversion"
	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"pgregory.net/rapid"
)

// Both forms of a state timestamp round-trip, and the first byte alone
// tells them apart: no wall time (never negative) begins with the
// versioned form's high bit.
func TestStateTimestampForms(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ts := hlc.Timestamp{WallTime: rapid.Int64Min(0).Draw(t, "wall"), Logical: rapid.Int32().Draw(t, "logical")}
		for _, tc := range []struct {
			versioned bool
			format    int
			len       int
		}{{false, 0, 12}, {true, 1, 13}} {
			b := encodeStateTS(ts, tc.versioned)
			if v, err := StateFormat(b); err != nil || v != tc.format || len(b) != tc.len {
				t.Fatalf("%s (versioned %v): %x is format %d (%v), want %d in %d bytes", ts, tc.versioned, b, v, err, tc.format, tc.len)
			}
			if got, err := decodeStateTS("ts", b); err != nil || got != ts {
				t.Fatalf("%x decodes to %s, %v; want %s", b, got, err, ts)
			}
		}
	})
	for _, bad := range [][]byte{nil, {0x80, 1, 2}, {0x81, 1, 2}, make([]byte, 13), append([]byte{0x81}, make([]byte, 13)...)} {
		if _, err := decodeStateTS("ts", bad); err == nil || errors.Is(err, ErrFutureFormat) {
			t.Errorf("%x: %v, want a malformed value", bad, err)
		}
	}
}

// Every versioned format of the tablet meets a version from a later build
// with ErrFutureFormat, naming what and which version, never a misread
// or a generic "malformed".
func TestFutureFormatsRefused(t *testing.T) {
	cmd := encodeCommand(7, 1, 3, &Proposal{Repr: []byte("x")})
	desc := EncodeDescriptor(nil, kvpb.TabletDescriptor{TabletID: 5, StartKey: []byte("a"), EndKey: []byte("b")})
	prop := EncodeProposal(nil, &Proposal{Repr: []byte("x")})
	future := func(b []byte, first byte) []byte { return append([]byte{first}, b[1:]...) }
	for _, tc := range []struct {
		what, want string
		decode     func() error
	}{
		{"state timestamp", "the GC threshold is in format version 2", func() error {
			_, err := decodeStateTS("the GC threshold", future(encodeStateTS(hlc.Timestamp{WallTime: 9}, true), 0x82))
			return err
		}},
		{"raft command", "the raft command is in format version 2", func() error {
			_, _, _, _, err := decodeCommand(future(cmd, commandVersion+1))
			return err
		}},
		{"proposal", "the proposal is in format version 5", func() error {
			_, err := DecodeProposal(future(prop, proposalVersionSST+1))
			return err
		}},
		{"tablet descriptor", "the tablet descriptor is in format version 2", func() error {
			_, err := DecodeDescriptor(future(desc, descriptorVersion+1))
			return err
		}},
	} {
		err := tc.decode()
		if !errors.Is(err, ErrFutureFormat) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "a newer binary wrote it") {
			t.Errorf("a %s of a future version: %v", tc.what, err)
		}
	}
	// The current versions still decode.
	if _, _, _, _, err := decodeCommand(cmd); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeDescriptor(desc); err != nil {
		t.Fatal(err)
	}
}

// The gate: a replica whose cluster is at 1.0 writes its GC threshold in
// the unversioned form a 1.0 binary reads; once 1.1 is active, in the
// versioned one. A replica reopened on the store reads back either.
func TestStateFormatGatedOnClusterVersion(t *testing.T) {
	v := clusterversion.NewHandle(clusterversion.VersionedState, clusterversion.V1_0)
	h := newHarness(t, Config{Version: v})
	h.manual.Set(int64(1000 * 1000))
	stored := func() []byte {
		t.Helper()
		b, ok, err := h.eng.Get(storage.MVCCKey{Key: GCThresholdKey(1)})
		if err != nil || !ok {
			t.Fatalf("no GC threshold stored: %v", err)
		}
		return b
	}
	gc := func(th int64) {
		t.Helper()
		if _, err := h.sendAt(h.clock.Now(), &kvpb.GCRequest{Key: []byte("a"), EndKey: []byte("z"), Threshold: ts(th)}); err != nil {
			t.Fatal(err)
		}
	}
	reopen := func() {
		t.Helper()
		h.r.Close()
		h.open(Config{Version: v})
	}

	gc(10)
	if b := stored(); len(b) != 12 || binary.BigEndian.Uint64(b) != 10 {
		t.Fatalf("at cluster version 1.0 the GC threshold is stored as %x, want the 12-byte form of 1.0", b)
	}
	reopen()
	if got := h.r.gcThreshold(); got != ts(10) {
		t.Fatalf("reopened on the 1.0 form: threshold %s", got)
	}

	v.SetActive(clusterversion.VersionedState)
	gc(20)
	if b := stored(); len(b) != 13 || b[0] != 0x81 {
		t.Fatalf("at cluster version 1.1 the GC threshold is stored as %x, want the versioned form", b)
	}
	reopen()
	if got := h.r.gcThreshold(); got != ts(20) {
		t.Fatalf("reopened on the versioned form: threshold %s", got)
	}
}
