package tablet

import (
	"encoding/binary"
	"flag"
	"reflect"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/wire/wiretest"
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

// TestProposalOldVersions: entries of the positional versions 1 and 2,
// still in logs written before version 3, decode to what was proposed.
func TestProposalOldVersions(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genProposal().Draw(t, "p")
		// Version 2 carried a tombstone's TxnMeta and Status only.
		for i := range p.TxnTombstones {
			p.TxnTombstones[i] = kvpb.Transaction{TxnMeta: p.TxnTombstones[i].TxnMeta, Status: p.TxnTombstones[i].Status}
		}
		got, err := DecodeProposal(encodeProposalV2(nil, p))
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		// The positional format could not tell nil from empty byte strings.
		if got.Repr == nil {
			got.Repr = p.Repr
		}
		if len(got.Repr) != len(p.Repr) || string(got.Repr) != string(p.Repr) || got.OnePhaseCommit != p.OnePhaseCommit || got.GCThreshold != p.GCThreshold ||
			len(got.LocksAcquired) != len(p.LocksAcquired) || len(got.TxnTombstones) != len(p.TxnTombstones) || (got.Split == nil) != (p.Split == nil) {
			t.Fatalf("version 2 round trip:\n got %+v\nwant %+v", got, p)
		}
	})
}

var rewriteSchema = flag.Bool("rewrite-schema", false, "record new wire fields in testdata/proposal_schema")

// Every number a proposal's fields ever used is in
// testdata/proposal_schema, and none is given to another field.
func TestProposalSchemaNeverReusesNumbers(t *testing.T) {
	wiretest.CheckSchema(t, "testdata/proposal_schema", proposalCodec.Schema(), *rewriteSchema)
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

// encodeProposalV2 is the positional format of versions 1 and 2, which
// DecodeProposal still reads from old logs.
func encodeProposalV2(dst []byte, p *Proposal) []byte {
	e := enc{b: dst}
	e.b = append(e.b, 2)
	e.bytes(p.Repr)
	e.uvarint(uint64(len(p.LocksAcquired)))
	for _, in := range p.LocksAcquired {
		e.bytes(in.Key)
		e.txnMeta(in.Txn)
	}
	for _, rs := range [][]LockRelease{p.LocksReleased, p.LocksUpdated} {
		e.uvarint(uint64(len(rs)))
		for _, r := range rs {
			e.span(r.Span)
			e.uuid(r.Txn)
		}
	}
	e.uvarint(uint64(len(p.TxnUpdates)))
	for _, u := range p.TxnUpdates {
		e.uuid(u.ID)
		e.varint(int64(u.Status))
		e.varint(int64(u.AbortReason))
	}
	e.bool(p.OnePhaseCommit)
	e.ts(p.GCThreshold)
	e.bool(p.Split != nil)
	if p.Split != nil {
		e.desc(p.Split.Left)
		e.desc(p.Split.Right)
	}
	e.uvarint(uint64(len(p.ResolveAsync)))
	for _, a := range p.ResolveAsync {
		e.txnMeta(a.Txn)
		e.varint(int64(a.Status))
		e.uvarint(uint64(len(a.Spans)))
		for _, s := range a.Spans {
			e.span(s)
		}
		e.uvarint(uint64(len(a.IgnoredSeqNums)))
		for _, r := range a.IgnoredSeqNums {
			e.varint(int64(r.Start))
			e.varint(int64(r.End))
		}
	}
	e.uvarint(uint64(len(p.TxnTombstones)))
	for _, t := range p.TxnTombstones {
		e.txnMeta(t.TxnMeta)
		e.varint(int64(t.Status))
	}
	return e.b
}

type enc struct{ b []byte }

func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) bytes(v []byte) {
	if v == nil {
		// nil and empty differ for keys (an empty EndKey means one key,
		// and so does nil): keep them apart anyway, so decoding is exact.
		e.uvarint(0)
		return
	}
	e.uvarint(uint64(len(v)) + 1)
	e.b = append(e.b, v...)
}
func (e *enc) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}
func (e *enc) uuid(u uuid.UUID)   { e.b = append(e.b, u[:]...) }
func (e *enc) ts(t hlc.Timestamp) { e.varint(t.WallTime); e.varint(int64(t.Logical)) }
func (e *enc) span(s kvpb.Span)   { e.bytes(s.Key); e.bytes(s.EndKey) }
func (e *enc) txnMeta(m kvpb.TxnMeta) {
	e.uuid(m.ID)
	e.bytes(m.Key)
	e.varint(int64(m.Epoch))
	e.ts(m.WriteTimestamp)
	e.ts(m.MinTimestamp)
	e.varint(int64(m.Priority))
	e.varint(int64(m.Sequence))
}
func (e *enc) desc(d kvpb.TabletDescriptor) {
	e.uvarint(uint64(d.TabletID))
	e.bytes(d.StartKey)
	e.bytes(d.EndKey)
	e.varint(d.Generation)
}

// BenchmarkProposalCodec encodes and decodes a typical transactional
// write's proposal (a 200-byte batch, one intent, one lock update) in the
// wire format (version 3) and in the positional version 2 it replaced:
//
//	go test -run XXX -bench ProposalCodec -benchmem -count 3 ./tablet
func BenchmarkProposalCodec(b *testing.B) {
	meta := kvpb.TxnMeta{ID: uuid.New(), Key: []byte("key-000001"), Epoch: 1, WriteTimestamp: hlc.Timestamp{WallTime: 1e18, Logical: 1},
		MinTimestamp: hlc.Timestamp{WallTime: 1e18}, Priority: 12345, Sequence: 3}
	p := &Proposal{Repr: make([]byte, 200), LocksAcquired: []kvpb.Intent{{Key: []byte("key-000001"), Txn: meta}},
		LocksUpdated: []LockRelease{{Span: kvpb.Span{Key: []byte("key-000002")}, Txn: meta.ID}}, GCThreshold: hlc.Timestamp{WallTime: 5}}
	for _, c := range []struct {
		name string
		enc  func([]byte, *Proposal) []byte
	}{{"wire", EncodeProposal}, {"positional", encodeProposalV2}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				buf = c.enc(buf[:0], p)
				if _, err := DecodeProposal(buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(buf)), "entry-bytes")
		})
	}
}
