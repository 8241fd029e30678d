package tablet

import (
	"reflect"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
	"pgregory.net/rapid"
)

func genBytes() *rapid.Generator[[]byte] {
	return rapid.OneOf(rapid.Just[[]byte](nil), rapid.SliceOfN(rapid.Byte(), 0, 12))
}

func genTS() *rapid.Generator[hlc.Timestamp] {
	return rapid.Custom(func(t *rapid.T) hlc.Timestamp {
		return hlc.Timestamp{WallTime: rapid.Int64().Draw(t, "wall"), Logical: rapid.Int32().Draw(t, "logical")}
	})
}

func genUUID() *rapid.Generator[uuid.UUID] {
	return rapid.Custom(func(t *rapid.T) uuid.UUID {
		var u uuid.UUID
		copy(u[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "uuid"))
		return u
	})
}

func genSpan() *rapid.Generator[kvpb.Span] {
	return rapid.Custom(func(t *rapid.T) kvpb.Span {
		return kvpb.Span{Key: genBytes().Draw(t, "key"), EndKey: genBytes().Draw(t, "end")}
	})
}

func genMeta() *rapid.Generator[kvpb.TxnMeta] {
	return rapid.Custom(func(t *rapid.T) kvpb.TxnMeta {
		return kvpb.TxnMeta{ID: genUUID().Draw(t, "id"), Key: genBytes().Draw(t, "key"), Epoch: rapid.Int32().Draw(t, "epoch"),
			WriteTimestamp: genTS().Draw(t, "wts"), MinTimestamp: genTS().Draw(t, "mts"),
			Priority: rapid.Int32().Draw(t, "prio"), Sequence: rapid.Int32().Draw(t, "seq")}
	})
}

func genDesc() *rapid.Generator[kvpb.TabletDescriptor] {
	return rapid.Custom(func(t *rapid.T) kvpb.TabletDescriptor {
		return kvpb.TabletDescriptor{TabletID: kvpb.TabletID(rapid.Uint64().Draw(t, "id")), StartKey: genBytes().Draw(t, "start"),
			EndKey: genBytes().Draw(t, "end"), Generation: rapid.Int64().Draw(t, "gen")}
	})
}

// nilIfEmpty makes a generated list nil when empty, as decoding returns.
func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func genProposal() *rapid.Generator[*Proposal] {
	return rapid.Custom(func(t *rapid.T) *Proposal {
		rel := rapid.Custom(func(t *rapid.T) LockRelease {
			return LockRelease{Span: genSpan().Draw(t, "span"), Txn: genUUID().Draw(t, "txn")}
		})
		p := &Proposal{
			Repr: genBytes().Draw(t, "repr"),
			LocksAcquired: nilIfEmpty(rapid.SliceOfN(rapid.Custom(func(t *rapid.T) kvpb.Intent {
				return kvpb.Intent{Key: genBytes().Draw(t, "key"), Txn: genMeta().Draw(t, "txn")}
			}), 0, 3).Draw(t, "acquired")),
			LocksReleased: nilIfEmpty(rapid.SliceOfN(rel, 0, 3).Draw(t, "released")),
			LocksUpdated:  nilIfEmpty(rapid.SliceOfN(rel, 0, 3).Draw(t, "updated")),
			TxnUpdates: nilIfEmpty(rapid.SliceOfN(rapid.Custom(func(t *rapid.T) TxnUpdate {
				return TxnUpdate{ID: genUUID().Draw(t, "id"), Status: kvpb.TxnStatus(rapid.Int8().Draw(t, "status")),
					AbortReason: kvpb.AbortReason(rapid.Int8().Draw(t, "reason"))}
			}), 0, 3).Draw(t, "txns")),
			OnePhaseCommit: rapid.Bool().Draw(t, "1pc"),
			GCThreshold:    genTS().Draw(t, "gc"),
		}
		if rapid.Bool().Draw(t, "split") {
			p.Split = &SplitTrigger{Left: genDesc().Draw(t, "left"), Right: genDesc().Draw(t, "right")}
		}
		p.ResolveAsync = nilIfEmpty(rapid.SliceOfN(rapid.Custom(func(t *rapid.T) AsyncResolve {
			return AsyncResolve{Txn: genMeta().Draw(t, "txn"), Status: kvpb.TxnStatus(rapid.Int8().Draw(t, "status")),
				Spans: nilIfEmpty(rapid.SliceOfN(genSpan(), 0, 3).Draw(t, "spans")),
				IgnoredSeqNums: nilIfEmpty(rapid.SliceOfN(rapid.Custom(func(t *rapid.T) kvpb.SeqRange {
					return kvpb.SeqRange{Start: rapid.Int32().Draw(t, "s"), End: rapid.Int32().Draw(t, "e")}
				}), 0, 3).Draw(t, "ignored"))}
		}), 0, 3).Draw(t, "async"))
		p.TxnTombstones = nilIfEmpty(rapid.SliceOfN(rapid.Custom(func(t *rapid.T) kvpb.Transaction {
			return kvpb.Transaction{TxnMeta: genMeta().Draw(t, "txn"), Status: kvpb.TxnStatus(rapid.Int8().Draw(t, "status"))}
		}), 0, 3).Draw(t, "tombstones"))
		p.ClosedTS = genTS().Draw(t, "closed")
		// An empty SST is none: the encoding has no place for it.
		p.SST = nilIfEmpty(genBytes().Draw(t, "sst"))
		return p
	})
}

// TestProposalCodec: every proposal decodes to itself, and every strict
// prefix of its encoding is refused.
func TestProposalCodec(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genProposal().Draw(t, "p")
		b := EncodeProposal(nil, p)
		got, err := DecodeProposal(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, p)
		}
		for i := range len(b) {
			if _, err := DecodeProposal(b[:i]); err == nil {
				t.Fatalf("prefix of %d/%d bytes decoded", i, len(b))
			}
		}
		if _, err := DecodeProposal(append(b, 0)); err == nil {
			t.Fatal("trailing byte accepted")
		}
	})
}

func FuzzDecodeProposal(f *testing.F) {
	f.Add(EncodeProposal(nil, &Proposal{Repr: []byte("x"), OnePhaseCommit: true}))
	f.Add([]byte{proposalVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeProposal(b)
		if err != nil {
			return
		}
		again, err := DecodeProposal(EncodeProposal(nil, p))
		if err != nil || !reflect.DeepEqual(again, p) {
			t.Fatalf("re-encoding a decoded proposal: %v", err)
		}
	})
}
