package raftnode

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestRecoverSnapshots: an intent left by a crash between a streamed
// snapshot's intent and its raft state is finished when the engine's
// applied index is the intent's (the image was ingested) and dropped when
// it is older (it was not); either way the intent and any leftover image
// files are gone.
func TestRecoverSnapshots(t *testing.T) {
	for _, tc := range []struct {
		name     string
		applied  uint64
		finished bool
	}{
		{"ingested", 9, true},
		{"not-ingested", 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			const tablet = 7
			n := &Node{eng: eng}
			rec := eng.NewBatch()
			marker := storage.MVCCKey{Key: []byte("\x01u-raft-state-of-the-snapshot")}
			if err := rec.Put(marker, []byte("x")); err != nil {
				t.Fatal(err)
			}
			b := eng.NewBatch()
			if err := n.putApplied(b, tablet, tc.applied); err != nil {
				t.Fatal(err)
			}
			if err := b.Put(intentKey(tablet), append(binary.BigEndian.AppendUint64(nil, 9), rec.Repr()...)); err != nil {
				t.Fatal(err)
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			rec.Close()
			b.Close()
			if _, err := eng.WriteFile("snap-in-7-9-1.sst", strings.NewReader("image")); err != nil {
				t.Fatal(err)
			}
			if err := RecoverSnapshots(eng); err != nil {
				t.Fatal(err)
			}
			if _, ok, err := eng.Get(marker); err != nil || ok != tc.finished {
				t.Errorf("the intent's raft state written: %v (err %v), want %v", ok, err, tc.finished)
			}
			if _, ok, _ := eng.Get(intentKey(tablet)); ok {
				t.Error("the intent is still there")
			}
			if _, err := eng.OpenFile(eng.SSTPath("snap-in-7-9-1.sst")); err == nil {
				t.Error("the leftover image is still there")
			}
		})
	}
}
