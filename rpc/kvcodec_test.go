package rpc

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"reflect"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/wire"
	"github.com/cairn-db/cairn/wire/wiretest"
	"google.golang.org/protobuf/encoding/protowire"
)

// filler sets every field of a value to a distinct non-zero value, by
// reflection, so that a field added to a kvpb type later is covered by the
// round trip without touching this test.
type filler struct{ n int }

func (f *filler) fill(t *testing.T, v reflect.Value) {
	f.n++
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		// Negative values exercise the zig-zag encoding.
		v.SetInt(-int64(f.n%100) - 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.n%200) + 1)
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", f.n))
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			f.fill(t, s.Index(i))
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			f.fill(t, v.Index(i))
		}
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		f.fill(t, p.Elem())
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			f.fill(t, v.Field(i))
		}
	case reflect.Interface:
		switch v.Type() {
		case errorIface:
			v.Set(reflect.ValueOf(&kvpb.TabletNotFoundError{TabletID: kvpb.TabletID(f.n)}))
		case requestIface:
			p := reflect.New(requestTypes[f.n%len(requestTypes)].Type)
			f.fill(t, p.Elem())
			v.Set(p)
		case responseIface:
			p := reflect.New(responseTypes[f.n%len(responseTypes)].Type)
			f.fill(t, p.Elem())
			v.Set(p)
		default:
			t.Fatalf("filler: interface %s", v.Type())
		}
	default:
		t.Fatalf("filler: kind %s (%s) the codec cannot carry", v.Kind(), v.Type())
	}
	if v.IsZero() && v.Type().Size() > 0 {
		t.Fatalf("filler left %s zero", v.Type())
	}
}

// Every method has a request and a response type with a wire tag: a new
// kvpb method must be added to requestTypes and responseTypes.
func TestEveryMethodHasTags(t *testing.T) {
	for m := kvpb.Method(0); m.String() != "Method(?)"; m++ {
		var req, resp bool
		for _, rt := range requestTypes {
			req = req || reflect.New(rt.Type).Interface().(kvpb.Request).Method() == m
		}
		for _, rt := range responseTypes {
			resp = resp || reflect.New(rt.Type).Interface().(kvpb.Response).Method() == m
		}
		if !req || !resp {
			t.Errorf("method %s: request tagged %v, response tagged %v", m, req, resp)
		}
	}
}

func TestKVCodecRoundTripRequests(t *testing.T) {
	f := &filler{}
	for _, m := range requestTypes {
		rt := m.Type
		t.Run(rt.Name(), func(t *testing.T) {
			ba := &kvpb.BatchRequest{}
			f.fill(t, reflect.ValueOf(&ba.Header).Elem())
			r := reflect.New(rt)
			f.fill(t, r.Elem())
			ba.Add(r.Interface().(kvpb.Request), &kvpb.PutRequest{Key: []byte{}, Value: nil})
			b, err := encodeBatchRequest(nil, ba)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeBatchRequest(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, ba) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, ba)
			}
		})
	}
}

func TestKVCodecRoundTripResponses(t *testing.T) {
	f := &filler{}
	for _, m := range responseTypes {
		rt := m.Type
		t.Run(rt.Name(), func(t *testing.T) {
			br := &kvpb.BatchResponse{}
			f.fill(t, reflect.ValueOf(br).Elem())
			r := reflect.New(rt)
			f.fill(t, r.Elem())
			// A nil and an empty value differ (no value vs empty value).
			br.Responses = []kvpb.Response{r.Interface().(kvpb.Response), &kvpb.GetResponse{Value: []byte{}}, &kvpb.GetResponse{}}
			b, err := encodeReply(nil, br, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, rerr, err := decodeReply(b)
			if err != nil || rerr != nil {
				t.Fatal(err, rerr)
			}
			if !reflect.DeepEqual(got, br) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, br)
			}
		})
	}
}

func TestKVCodecRoundTripErrors(t *testing.T) {
	f := &filler{}
	var cases []error
	for _, m := range errorTypes {
		e := reflect.New(m.Type)
		f.fill(t, e.Elem())
		cases = append(cases, e.Interface().(error))
	}
	cases = append(cases,
		&kvpb.ConditionFailedError{Key: []byte("k")}, // nil ActualValue: no value
		&kvpb.AmbiguousResultError{Cause: &kvpb.AmbiguousResultError{Cause: &kvpb.WriteIntentError{}}},
		&kvpb.AmbiguousResultError{},
		context.Canceled,
		context.DeadlineExceeded,
	)
	for _, want := range cases {
		t.Run(fmt.Sprintf("%T", want), func(t *testing.T) {
			b, err := encodeReply(nil, nil, want)
			if err != nil {
				t.Fatal(err)
			}
			_, got, err := decodeReply(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, want)
			}
		})
	}
}

// Errors without a typed form keep their message; a typed error or a
// context error wrapped in others keeps its type (errors.As / errors.Is)
// and the outer message; the retry classification is unchanged.
func TestKVCodecWrappedAndRemoteErrors(t *testing.T) {
	wi := &kvpb.WriteIntentError{Intents: []kvpb.Intent{{Key: []byte("a")}}}
	retry := &kvpb.TransactionRetryError{Reason: kvpb.RetrySerializable, Detail: "d"}
	for _, tc := range []struct {
		err   error
		check func(error) bool
	}{
		{errors.New("disk on fire"), func(e error) bool {
			var r *RemoteError
			return errors.As(e, &r) && r.Msg == "disk on fire"
		}},
		{fmt.Errorf("tablet 3: %w", wi), func(e error) bool {
			var got *kvpb.WriteIntentError
			return errors.As(e, &got) && reflect.DeepEqual(got, wi) && e.Error() == "tablet 3: "+wi.Error()
		}},
		{fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", retry)), func(e error) bool {
			return kvpb.IsRetryable(e) && e.Error() == "outer: inner: "+retry.Error()
		}},
		{fmt.Errorf("waiting: %w", context.DeadlineExceeded), func(e error) bool {
			return errors.Is(e, context.DeadlineExceeded)
		}},
		{errors.Join(errors.New("x"), &kvpb.TabletNotFoundError{TabletID: 9}), func(e error) bool {
			var nf *kvpb.TabletNotFoundError
			return errors.As(e, &nf) && nf.TabletID == 9
		}},
	} {
		b, err := encodeReply(nil, nil, tc.err)
		if err != nil {
			t.Fatal(err)
		}
		_, got, err := decodeReply(b)
		if err != nil {
			t.Fatal(err)
		}
		if !tc.check(got) {
			t.Errorf("%v came back as %#v (%v)", tc.err, got, got)
		}
		if kvpb.IsRetryable(got) != kvpb.IsRetryable(tc.err) {
			t.Errorf("%v: IsRetryable changed across the wire", tc.err)
		}
	}
}

func TestKVCodecGarbage(t *testing.T) {
	ba := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: hlc.Timestamp{WallTime: 5}}}
	ba.Add(&kvpb.GetRequest{Key: []byte("k")}, &kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("z"), MaxKeys: 3})
	good, err := encodeBatchRequest(nil, ba)
	if err != nil {
		t.Fatal(err)
	}
	bad := [][]byte{
		nil,
		good[:len(good)-1],
		append(good[:len(good):len(good)], 0),
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	}
	// Every truncation of a good encoding is an error, never a panic.
	for i := range good {
		bad = append(bad, good[:i])
	}
	for _, b := range bad {
		if _, err := decodeBatchRequest(b); err == nil {
			t.Errorf("decodeBatchRequest(%x) accepted garbage", b)
		}
	}
	for _, b := range [][]byte{
		nil,
		{2},
		{replyError, 0, 0, 0, 0},                // an error with no message
		{replyError, 1, 0, 0, 0, 0x08},          // a cut-off field
		{replyResponse, 0xff},                   // a cut-off frame
		{replyResponse, 2, 0, 0, 0, 0x0a, 0x05}, // a length beyond the input
		{replyError, 2, 0, 0, 0, 0x08, 0x07},    // an unknown context error
	} {
		if _, _, err := decodeReply(b); err == nil {
			t.Errorf("decodeReply(%x) accepted garbage", b)
		}
	}
	// A huge length with few bytes behind it is refused before allocating.
	huge, _ := appendFramed(nil, func(b []byte) ([]byte, error) {
		return append(b, 0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f), nil
	})
	if _, err := decodeBatchRequest(huge); err == nil {
		t.Error("huge length accepted")
	}
	// Errors nested deeper than the wire's depth limit are refused:
	// AmbiguousResultErrors (errorTypes number 12, Cause numbered 1), each
	// the cause of the next.
	deep := protowire.AppendString(protowire.AppendTag(nil, errMsg, protowire.BytesType), "x")
	for range wire.MaxDepth {
		cause := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), deep)
		typed := protowire.AppendBytes(protowire.AppendTag(nil, 12, protowire.BytesType), cause)
		deep = protowire.AppendString(protowire.AppendTag(nil, errMsg, protowire.BytesType), "x")
		deep = protowire.AppendBytes(protowire.AppendTag(deep, errTyped, protowire.BytesType), typed)
	}
	frame, _ := appendFramed([]byte{replyError}, func(b []byte) ([]byte, error) { return append(b, deep...), nil })
	if _, _, err := decodeReply(frame); err == nil {
		t.Error("deeply nested errors accepted")
	}
}

func FuzzKVDecode(f *testing.F) {
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")}, &kvpb.EndTxnRequest{LockSpans: []kvpb.Span{{Key: []byte("a")}}})
	b, _ := encodeBatchRequest(nil, ba)
	f.Add(b)
	r, _ := encodeReply(nil, nil, &kvpb.AmbiguousResultError{Cause: fmt.Errorf("x: %w", &kvpb.WriteTooOldError{Key: []byte("k")})})
	f.Add(r)
	r, _ = encodeReply(nil, &kvpb.BatchResponse{Responses: []kvpb.Response{&kvpb.ScanResponse{ResumeSpan: &kvpb.Span{}}}}, nil)
	f.Add(r)
	f.Fuzz(func(t *testing.T, data []byte) {
		if ba, err := decodeBatchRequest(data); err == nil {
			again, err := encodeBatchRequest(nil, ba)
			if err != nil {
				t.Fatal(err)
			}
			back, err := decodeBatchRequest(again)
			if err != nil || !reflect.DeepEqual(back, ba) {
				t.Fatalf("re-encoded request does not round-trip: %v", err)
			}
		}
		if br, rerr, err := decodeReply(data); err == nil {
			again, err := encodeReply(nil, br, rerr)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := decodeReply(again); err != nil {
				t.Fatalf("re-encoded reply does not decode: %v", err)
			}
		}
	})
}

// BenchmarkKVCodec encodes and decodes two batches with this package's
// codec (wire) and with the positional codec it replaced
// (kvcodec_legacy_test.go), the figures the package doc quotes:
//
//	go test -run XXX -bench KVCodec -benchmem -count 3 ./rpc
//
// puts100 is a bulk batch of 100 puts; txn10 a transaction's batch of 10
// puts and its commit, with the Transaction in the header.
func BenchmarkKVCodec(b *testing.B) {
	puts := &kvpb.BatchRequest{}
	for i := range 100 {
		puts.Add(&kvpb.PutRequest{Key: fmt.Appendf(nil, "key-%06d", i), Value: make([]byte, 40)})
	}
	txn := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: hlc.Timestamp{WallTime: 1e18}, Txn: &kvpb.Transaction{
		TxnMeta:       kvpb.TxnMeta{Key: []byte("key-000000"), WriteTimestamp: hlc.Timestamp{WallTime: 1e18, Logical: 2}, MinTimestamp: hlc.Timestamp{WallTime: 1e18}, Priority: 12345, Sequence: 10},
		Name:          "sql txn",
		ReadTimestamp: hlc.Timestamp{WallTime: 1e18}, GlobalUncertaintyLimit: hlc.Timestamp{WallTime: 1e18 + 5e8},
		ObservedTimestamps: []kvpb.ObservedTimestamp{{NodeID: 1, Timestamp: hlc.Timestamp{WallTime: 1e18}}},
	}, TabletID: 7, Now: hlc.Timestamp{WallTime: 1e18}}}
	for i := range 10 {
		txn.Add(&kvpb.PutRequest{Key: fmt.Appendf(nil, "key-%06d", i), Value: make([]byte, 40)})
	}
	txn.Add(&kvpb.EndTxnRequest{Key: []byte("key-000000"), Commit: true})
	type codec struct {
		name string
		enc  func([]byte, *kvpb.BatchRequest) ([]byte, error)
		dec  func([]byte) (*kvpb.BatchRequest, error)
	}
	for _, batch := range []struct {
		name string
		ba   *kvpb.BatchRequest
	}{{"puts100", puts}, {"txn10", txn}} {
		for _, c := range []codec{
			{"wire", encodeBatchRequest, decodeBatchRequest},
			{"positional", legacyEncodeBatchRequest, legacyDecodeBatchRequest},
		} {
			b.Run(batch.name+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				var buf []byte
				for b.Loop() {
					var err error
					if buf, err = c.enc(buf[:0], batch.ba); err != nil {
						b.Fatal(err)
					}
					if _, err := c.dec(buf); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(buf)), "wire-bytes")
			})
		}
	}
}

var rewriteSchema = flag.Bool("rewrite-schema", false, "record new wire fields in testdata/kv_schema")

// Every number the KV messages ever used is in testdata/kv_schema, and
// none is given to another field (wire invariant 1).
func TestKVSchemaNeverReusesNumbers(t *testing.T) {
	schema := kvCodec.Schema()
	for _, m := range errorTypes {
		schema = append(schema, fmt.Sprintf("error %d *%s", m.Num, m.Type))
	}
	wiretest.CheckSchema(t, "testdata/kv_schema", schema, *rewriteSchema)
	// And this package's other messages: raft batches, Hello, clock pings.
	wiretest.CheckSchema(t, "testdata/msg_schema", msgCodec.Schema(), *rewriteSchema)
}

// A batch from a newer build, with fields this build does not know (in
// the header, in a request, in a typed error), decodes: the unknown fields
// are skipped. One carrying a request type this build does not know is
// refused with an error that says so.
func TestKVFromNewerBuild(t *testing.T) {
	unknown := func(b []byte) []byte {
		b = protowire.AppendTag(b, 900, protowire.BytesType)
		return protowire.AppendString(b, "a field of a later build")
	}
	ba := &kvpb.BatchRequest{Header: kvpb.Header{TabletID: 3}}
	ba.Add(&kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
	hdr, err := kvCodec.AppendStruct(nil, reflect.ValueOf(&ba.Header).Elem(), 1)
	if err != nil {
		t.Fatal(err)
	}
	put, err := kvCodec.AppendStruct(nil, reflect.ValueOf(ba.Requests[0]).Elem(), 3)
	if err != nil {
		t.Fatal(err)
	}
	// BatchRequest: Header is field 1, Requests field 2; PutRequest is
	// member 3 of the Request union.
	member := protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), unknown(put))
	msg := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), unknown(hdr))
	msg = protowire.AppendBytes(protowire.AppendTag(msg, 2, protowire.BytesType), member)
	msg = unknown(msg)
	frame, _ := appendFramed(nil, func(b []byte) ([]byte, error) { return append(b, msg...), nil })
	got, err := decodeBatchRequest(frame)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ba) {
		t.Fatalf("got %#v, want %#v", got, ba)
	}

	// A request type numbered 99: not one this build knows.
	newReq := protowire.AppendBytes(protowire.AppendTag(nil, 99, protowire.BytesType), nil)
	msg = protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), newReq)
	frame, _ = appendFramed(nil, func(b []byte) ([]byte, error) { return append(b, msg...), nil })
	if _, err := decodeBatchRequest(frame); !errors.Is(err, wire.ErrUnknownMember) {
		t.Fatalf("an unknown request type decoded: %v", err)
	}

	// A typed error of a type this build does not know arrives as its
	// message.
	body := protowire.AppendString(protowire.AppendTag(nil, errMsg, protowire.BytesType), "a new kind of failure")
	typed := protowire.AppendBytes(protowire.AppendTag(nil, 77, protowire.BytesType), unknown(nil))
	body = protowire.AppendBytes(protowire.AppendTag(body, errTyped, protowire.BytesType), typed)
	frame, _ = appendFramed([]byte{replyError}, func(b []byte) ([]byte, error) { return append(b, body...), nil })
	_, rerr, err := decodeReply(frame)
	var re *RemoteError
	if err != nil || !errors.As(rerr, &re) || re.Msg != "a new kind of failure" {
		t.Fatalf("unknown typed error: %v, %v", rerr, err)
	}
}
