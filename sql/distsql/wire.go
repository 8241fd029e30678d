package distsql

// The Flow stream's messages, carried as raw bytes by rpc's codec. Each is
// a kind byte then a message in the protocol buffers wire format, encoded
// by package wire from the structs below (field numbers in their tags), so
// a build that adds a field to one still talks to one that does not
// (rolling upgrades; testdata/wire_schema records every number used):
//
//	client → server: Spec, then credits (a credit message: batches granted)
//	server → client: 'B' batch of KVs | 'R' batch of rows (a Spec with
//	                 Proc) | 'D' done with stats | 'E' error
//
// The Spec and the credits have no kind byte: the first message of the
// client is a Spec, every later one credits.

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/wire"
)

var errCorrupt = errors.New("distsql: corrupt message")

const (
	msgBatch = 'B'
	msgRows  = 'R'
	msgDone  = 'D'
	msgError = 'E'
)

// The message bodies that are not types of their own elsewhere.
type (
	kvBatch struct {
		KVs []kvpb.KeyValue `wire:"1"`
	}
	rowBatch struct {
		// Rows are encoded by the processor (opaque here). An empty row
		// and a nil one read alike (wire invariant 3).
		Rows [][]byte `wire:"1"`
	}
	credit struct {
		Batches uint64 `wire:"1"`
	}
	// wireError is remoteError on the wire.
	wireError struct {
		Code      string `wire:"1"`
		Msg       string `wire:"2"`
		Retryable bool   `wire:"3"`
	}
)

// flowCodec carries the flow's messages; read-only after init.
var flowCodec = func() *wire.Codec {
	c := wire.NewCodec()
	c.MustRegister(reflect.TypeFor[Spec](), reflect.TypeFor[kvBatch](), reflect.TypeFor[rowBatch](),
		reflect.TypeFor[credit](), reflect.TypeFor[FragmentStats](), reflect.TypeFor[wireError]())
	return c
}()

// encode appends v's message to a kind byte (none if kind is 0). The
// structs are registered and hold nothing the codec refuses, so it cannot
// fail.
func encode(kind byte, v any) []byte {
	var b []byte
	if kind != 0 {
		b = []byte{kind}
	}
	b, err := flowCodec.Marshal(b, v)
	if err != nil {
		panic(fmt.Sprintf("distsql: encoding %T: %v", v, err))
	}
	return b
}

func decode(b []byte, v any) error {
	if err := flowCodec.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %w", errCorrupt, err)
	}
	return nil
}

func encodeSpec(s Spec) []byte { return encode(0, &s) }

func decodeSpec(b []byte) (Spec, error) {
	var s Spec
	err := decode(b, &s)
	if len(s.Proc) == 0 {
		s.Proc = nil // an empty processor is none: a scan
	}
	return s, err
}

func encodeCredit(n uint64) []byte { return encode(0, &credit{Batches: n}) }

func decodeCredit(b []byte) (uint64, error) {
	var c credit
	err := decode(b, &c)
	return c.Batches, err
}

func encodeBatch(kvs []kvpb.KeyValue) []byte { return encode(msgBatch, &kvBatch{KVs: kvs}) }

func decodeBatch(b []byte) ([]kvpb.KeyValue, error) {
	var m kvBatch
	err := decode(b, &m)
	return m.KVs, err
}

// encodeRows and decodeRows carry a processor's rows, each already
// encoded by the processor (opaque here).
func encodeRows(rows [][]byte) []byte { return encode(msgRows, &rowBatch{Rows: rows}) }

func decodeRows(b []byte) ([][]byte, error) {
	var m rowBatch
	err := decode(b, &m)
	return m.Rows, err
}

func encodeDone(st FragmentStats) []byte { return encode(msgDone, &st) }

func decodeDone(b []byte) (FragmentStats, error) {
	var st FragmentStats
	err := decode(b, &st)
	return st, err
}

// remoteError is how a fragment's failure travels: its SQLSTATE, its
// text, and whether the gateway may retry the statement (invariant 2).
type remoteError struct {
	code      string
	msg       string
	retryable bool
}

func encodeError(r remoteError) []byte {
	return encode(msgError, &wireError{Code: r.code, Msg: r.msg, Retryable: r.retryable})
}

func decodeError(b []byte) (remoteError, error) {
	var w wireError
	err := decode(b, &w)
	return remoteError{code: w.Code, msg: w.Msg, retryable: w.Retryable}, err
}
