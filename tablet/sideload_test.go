package tablet

import (
	"bytes"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// TestSideloadedRange: the raft log keeps exactly an AddSSTable entry's
// SST beside it (raftnode.Sideloader), found without decoding the
// proposal, wherever the other fields put it; other entries keep
// everything in the log, and a cut-off entry is not misread.
func TestSideloadedRange(t *testing.T) {
	m := &RaftStateMachine{}
	sst := bytes.Repeat([]byte("sst!"), 5000)
	p := &Proposal{
		Repr:          []byte("repr"),
		LocksAcquired: []kvpb.Intent{{Key: []byte("k")}},
		GCThreshold:   hlc.Timestamp{WallTime: 5},
		ClosedTS:      hlc.Timestamp{WallTime: 7},
		SST:           sst,
	}
	data := encodeCommand(123456, 3, 9, p)
	start, end, ok := m.SideloadedRange(data)
	if !ok || !bytes.Equal(data[start:end], sst) {
		t.Fatalf("SideloadedRange = [%d, %d) %v of %d bytes, want the SST's %d bytes", start, end, ok, len(data), len(sst))
	}
	// The entry put back together decodes to the same proposal.
	again := append(append(append([]byte(nil), data[:start]...), sst...), data[end:]...)
	if _, _, _, q, err := decodeCommand(again); err != nil || !bytes.Equal(q.SST, sst) || !bytes.Equal(q.Repr, p.Repr) {
		t.Fatalf("decoding the entry put back: %v", err)
	}
	if _, _, ok := m.SideloadedRange(encodeCommand(1, 1, 1, &Proposal{Repr: []byte("plain")})); ok {
		t.Fatal("an entry without an SST is side-loaded")
	}
	for _, cut := range []int{start - 1, start + 10, len(data) - 1} {
		if _, _, ok := m.SideloadedRange(data[:cut]); ok {
			t.Fatalf("an entry cut at %d of %d bytes is side-loaded", cut, len(data))
		}
	}
}
