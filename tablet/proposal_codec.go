package tablet

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// A Proposal travels in a raft log entry from the leaseholder that
// evaluated it to every replica, which applies it. EncodeProposal and
// DecodeProposal are its wire format: a version byte, then every field in
// declaration order, integers as varints, byte strings and lists
// length-prefixed. Decoding refuses (never panics on) anything malformed,
// and a version it does not know: replicas of one tablet run the same
// format until a cluster version gate (issue #4's upgrade path) says
// otherwise.
//
// Version 2 added the transaction tombstones at the end; entries of
// version 1, still in logs written before, decode with none. Version 3
// added the closed timestamp after them (closedts.go). Version 4 adds the
// SST to ingest after that; a proposal without one is still written as
// version 3, so only AddSSTable's entries need a replica that knows
// version 4.
const (
	proposalVersion    = 3
	proposalVersionSST = 4
)

// ErrBadProposal is DecodeProposal's refusal of malformed input.
var ErrBadProposal = errors.New("tablet: malformed proposal")

// EncodeProposal appends p's encoding to dst.
func EncodeProposal(dst []byte, p *Proposal) []byte {
	e := enc{b: dst}
	if len(p.SST) > 0 {
		e.b = append(e.b, proposalVersionSST)
	} else {
		e.b = append(e.b, proposalVersion)
	}
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
	e.ts(p.ClosedTS)
	if len(p.SST) > 0 {
		e.bytes(p.SST)
	}
	return e.b
}

// DecodeProposal decodes what EncodeProposal wrote.
func DecodeProposal(b []byte) (*Proposal, error) {
	if len(b) == 0 {
		return nil, ErrBadProposal
	}
	version := b[0]
	if version < 1 || version > proposalVersionSST {
		return nil, fmt.Errorf("%w: version %d", ErrBadProposal, b[0])
	}
	d := dec{b: b[1:]}
	p := &Proposal{}
	p.Repr = d.bytes()
	if n := d.count(); n > 0 {
		p.LocksAcquired = make([]kvpb.Intent, n)
		for i := range p.LocksAcquired {
			p.LocksAcquired[i].Key = d.bytes()
			p.LocksAcquired[i].Txn = d.txnMeta()
		}
	}
	for _, dst := range []*[]LockRelease{&p.LocksReleased, &p.LocksUpdated} {
		if n := d.count(); n > 0 {
			rs := make([]LockRelease, n)
			for i := range rs {
				rs[i].Span = d.span()
				rs[i].Txn = d.uuid()
			}
			*dst = rs
		}
	}
	if n := d.count(); n > 0 {
		p.TxnUpdates = make([]TxnUpdate, n)
		for i := range p.TxnUpdates {
			p.TxnUpdates[i].ID = d.uuid()
			p.TxnUpdates[i].Status = kvpb.TxnStatus(d.int8())
			p.TxnUpdates[i].AbortReason = kvpb.AbortReason(d.int8())
		}
	}
	p.OnePhaseCommit = d.bool()
	p.GCThreshold = d.ts()
	if d.bool() {
		p.Split = &SplitTrigger{Left: d.desc(), Right: d.desc()}
	}
	if n := d.count(); n > 0 {
		p.ResolveAsync = make([]AsyncResolve, n)
		for i := range p.ResolveAsync {
			a := &p.ResolveAsync[i]
			a.Txn = d.txnMeta()
			a.Status = kvpb.TxnStatus(d.int8())
			if n := d.count(); n > 0 {
				a.Spans = make([]kvpb.Span, n)
				for j := range a.Spans {
					a.Spans[j] = d.span()
				}
			}
			if n := d.count(); n > 0 {
				a.IgnoredSeqNums = make([]kvpb.SeqRange, n)
				for j := range a.IgnoredSeqNums {
					a.IgnoredSeqNums[j] = kvpb.SeqRange{Start: d.int32(), End: d.int32()}
				}
			}
		}
	}
	if version >= 2 {
		if n := d.count(); n > 0 {
			p.TxnTombstones = make([]kvpb.Transaction, n)
			for i := range p.TxnTombstones {
				p.TxnTombstones[i].TxnMeta = d.txnMeta()
				p.TxnTombstones[i].Status = kvpb.TxnStatus(d.int8())
			}
		}
	}
	if version >= 3 {
		p.ClosedTS = d.ts()
	}
	if version >= proposalVersionSST {
		if p.SST = d.bytes(); len(p.SST) == 0 && d.err == nil {
			d.fail("a version 4 proposal without an SST")
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrBadProposal, len(d.b))
	}
	return p, nil
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

// dec reads what enc wrote; the first error sticks and every later read
// returns zero values.
type dec struct {
	b   []byte
	err error
}

func (d *dec) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrBadProposal, what)
	}
	d.b = nil
}

func (d *dec) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a list length, refusing one that the rest of the input
// cannot hold (every element takes at least one byte), so garbage cannot
// make the decoder allocate without bound.
func (d *dec) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("list longer than the input")
		return 0
	}
	return int(n)
}

func (d *dec) int32() int32 {
	v := d.varint()
	if int64(int32(v)) != v {
		d.fail("int32 out of range")
		return 0
	}
	return int32(v)
}

func (d *dec) int8() int8 {
	v := d.varint()
	if int64(int8(v)) != v {
		d.fail("int8 out of range")
		return 0
	}
	return int8(v)
}

func (d *dec) bytes() []byte {
	n := d.uvarint()
	if n == 0 {
		return nil
	}
	n--
	if n > uint64(len(d.b)) {
		d.fail("byte string longer than the input")
		return nil
	}
	v := append([]byte{}, d.b[:n]...)
	d.b = d.b[n:]
	return v
}

func (d *dec) bool() bool {
	if len(d.b) == 0 {
		d.fail("missing bool")
		return false
	}
	v := d.b[0]
	d.b = d.b[1:]
	if v > 1 {
		d.fail("bad bool")
	}
	return v == 1
}

func (d *dec) uuid() uuid.UUID {
	var u uuid.UUID
	if len(d.b) < len(u) {
		d.fail("short uuid")
		return u
	}
	copy(u[:], d.b)
	d.b = d.b[len(u):]
	return u
}

func (d *dec) ts() hlc.Timestamp {
	return hlc.Timestamp{WallTime: d.varint(), Logical: d.int32()}
}

func (d *dec) span() kvpb.Span { return kvpb.Span{Key: d.bytes(), EndKey: d.bytes()} }

func (d *dec) txnMeta() kvpb.TxnMeta {
	return kvpb.TxnMeta{
		ID: d.uuid(), Key: d.bytes(), Epoch: d.int32(),
		WriteTimestamp: d.ts(), MinTimestamp: d.ts(),
		Priority: d.int32(), Sequence: d.int32(),
	}
}

func (d *dec) desc() kvpb.TabletDescriptor {
	return kvpb.TabletDescriptor{TabletID: kvpb.TabletID(d.uvarint()), StartKey: d.bytes(), EndKey: d.bytes(), Generation: d.varint()}
}
