package raftnode

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/clusterversion"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The applied index is stored in the 1.0 form (8 bytes) until the
// cluster version that reads the versioned form is active, then with a
// format version; both read back, and a future version is refused by
// name.
func TestAppliedIndexFormat(t *testing.T) {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	v := clusterversion.NewHandle(clusterversion.VersionedState, clusterversion.V1_0)
	n := &Node{cfg: Config{Version: v}, eng: eng}
	put := func(index uint64) []byte {
		t.Helper()
		b := eng.NewBatch()
		defer b.Close()
		if err := n.putApplied(b, 7, index); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		got, err := readApplied(eng, 7)
		if err != nil || got != index {
			t.Fatalf("applied index %d reads back as %d, %v", index, got, err)
		}
		raw, _, _ := eng.Get(n.appliedKey(7))
		return raw
	}
	if raw := put(41); len(raw) != 8 || binary.BigEndian.Uint64(raw) != 41 {
		t.Fatalf("at cluster version 1.0 the applied index is stored as %x, want the 8-byte form", raw)
	}
	if f, ok, err := AppliedFormat(eng, 7); f != 0 || !ok || err != nil {
		t.Fatalf("AppliedFormat: %d %v %v", f, ok, err)
	}
	v.SetActive(clusterversion.VersionedState)
	if raw := put(42); len(raw) != 9 || raw[0] != 0x81 {
		t.Fatalf("at cluster version 1.1 the applied index is stored as %x, want the versioned form", raw)
	}
	if f, ok, err := AppliedFormat(eng, 7); f != 1 || !ok || err != nil {
		t.Fatalf("AppliedFormat: %d %v %v", f, ok, err)
	}
	future := append(clusterversion.AppendFormat(nil, 2), binary.BigEndian.AppendUint64(nil, 43)...)
	if _, err := decodeApplied(7, future); !errors.Is(err, clusterversion.ErrFutureFormat) || !strings.Contains(err.Error(), "tablet 7: the applied index is in format version 2") {
		t.Fatalf("a future applied index format: %v", err)
	}
}
