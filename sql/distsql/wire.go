package distsql

// The Flow stream's messages, hand-encoded (uvarints and length-prefixed
// bytes, as rpc's own frames) and carried as raw bytes by rpc's codec.
//
//	client → server: Spec, then credits (one uvarint each: batches granted)
//	server → client: 'B' batch of KVs | 'R' batch of rows (a Spec with
//	                 Proc) | 'D' done with stats | 'E' error

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

var errCorrupt = errors.New("distsql: corrupt message")

const (
	msgBatch = 'B'
	msgRows  = 'R'
	msgDone  = 'D'
	msgError = 'E'
)

type enc struct{ b []byte }

func (e *enc) u(v uint64)     { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) i(v int64)      { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) bytes(v []byte) { e.u(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) ts(t hlc.Timestamp) {
	e.i(t.WallTime)
	e.i(int64(t.Logical))
}

type dec struct {
	b   []byte
	err error
}

func (d *dec) u() uint64 {
	if d.err != nil {
		return 0
	}
	v, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[k:]
	return v
}

func (d *dec) i() int64 {
	if d.err != nil {
		return 0
	}
	v, k := binary.Varint(d.b)
	if k <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[k:]
	return v
}

func (d *dec) bytes() []byte {
	n := d.u()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errCorrupt
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) ts() hlc.Timestamp {
	w := d.i()
	l := d.i()
	if l < math.MinInt32 || l > math.MaxInt32 {
		d.err = errCorrupt
	}
	return hlc.Timestamp{WallTime: w, Logical: int32(l)}
}

func (d *dec) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = errCorrupt
	}
	return d.err
}

func encodeSpec(s Spec) []byte {
	var e enc
	e.u(uint64(s.Fragment))
	e.u(uint64(s.TabletID))
	e.bytes(s.Span.Key)
	e.bytes(s.Span.EndKey)
	e.ts(s.Snapshot.ReadTimestamp)
	e.ts(s.Snapshot.UncertaintyLimit)
	e.u(uint64(s.BatchRows))
	e.u(uint64(s.Window))
	e.i(s.Limit)
	e.bytes(s.Proc)
	return e.b
}

func decodeSpec(b []byte) (Spec, error) {
	d := dec{b: b}
	var s Spec
	s.Fragment = int(d.u())
	s.TabletID = kvpb.TabletID(d.u())
	s.Span.Key = d.bytes()
	s.Span.EndKey = d.bytes()
	s.Snapshot.ReadTimestamp = d.ts()
	s.Snapshot.UncertaintyLimit = d.ts()
	s.BatchRows = int(d.u())
	s.Window = int(d.u())
	s.Limit = d.i()
	if p := d.bytes(); len(p) > 0 {
		s.Proc = p
	}
	return s, d.done()
}

func encodeBatch(kvs []kvpb.KeyValue) []byte {
	e := enc{b: []byte{msgBatch}}
	e.u(uint64(len(kvs)))
	for _, kv := range kvs {
		e.bytes(kv.Key)
		e.bytes(kv.Value)
		e.ts(kv.Timestamp)
	}
	return e.b
}

func decodeBatch(b []byte) ([]kvpb.KeyValue, error) {
	d := dec{b: b}
	n := d.u()
	if n > uint64(len(b)) {
		return nil, errCorrupt
	}
	out := make([]kvpb.KeyValue, 0, n)
	for range n {
		kv := kvpb.KeyValue{Key: d.bytes(), Value: d.bytes(), Timestamp: d.ts()}
		if d.err != nil {
			return nil, d.err
		}
		out = append(out, kv)
	}
	return out, d.done()
}

// encodeRows and decodeRows carry a processor's rows, each already
// encoded by the processor (opaque here).
func encodeRows(rows [][]byte) []byte {
	e := enc{b: []byte{msgRows}}
	e.u(uint64(len(rows)))
	for _, r := range rows {
		e.bytes(r)
	}
	return e.b
}

func decodeRows(b []byte) ([][]byte, error) {
	d := dec{b: b}
	n := d.u()
	if n > uint64(len(b)) {
		return nil, errCorrupt
	}
	out := make([][]byte, 0, n)
	for range n {
		r := d.bytes()
		if d.err != nil {
			return nil, d.err
		}
		out = append(out, r)
	}
	return out, d.done()
}

func encodeDone(st FragmentStats) []byte {
	e := enc{b: []byte{msgDone}}
	e.u(st.Node)
	e.u(uint64(st.Rows))
	e.u(uint64(st.Bytes))
	e.u(uint64(st.Batches))
	e.i(int64(st.Time))
	return e.b
}

func decodeDone(b []byte) (FragmentStats, error) {
	d := dec{b: b}
	var st FragmentStats
	st.Node = d.u()
	st.Rows = int64(d.u())
	st.Bytes = int64(d.u())
	st.Batches = int64(d.u())
	st.Time = durationOf(d.i())
	return st, d.done()
}

// remoteError is how a fragment's failure travels: its SQLSTATE, its
// text, and whether the gateway may retry the statement (invariant 2).
type remoteError struct {
	code      string
	msg       string
	retryable bool
}

func encodeError(r remoteError) []byte {
	e := enc{b: []byte{msgError}}
	e.bytes([]byte(r.code))
	e.bytes([]byte(r.msg))
	rt := uint64(0)
	if r.retryable {
		rt = 1
	}
	e.u(rt)
	return e.b
}

func decodeError(b []byte) (remoteError, error) {
	d := dec{b: b}
	r := remoteError{code: string(d.bytes()), msg: string(d.bytes())}
	r.retryable = d.u() == 1
	return r, d.done()
}
