package rpc

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
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
			p := reflect.New(requestTypes[f.n%len(requestTypes)])
			f.fill(t, p.Elem())
			v.Set(p)
		case responseIface:
			p := reflect.New(responseTypes[f.n%len(responseTypes)])
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
			req = req || reflect.New(rt).Interface().(kvpb.Request).Method() == m
		}
		for _, rt := range responseTypes {
			resp = resp || reflect.New(rt).Interface().(kvpb.Response).Method() == m
		}
		if !req || !resp {
			t.Errorf("method %s: request tagged %v, response tagged %v", m, req, resp)
		}
	}
}

func TestKVCodecRoundTripRequests(t *testing.T) {
	f := &filler{}
	for _, rt := range requestTypes {
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
	for _, rt := range responseTypes {
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
	for _, et := range errorTypes {
		e := reflect.New(et)
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
	for _, b := range [][]byte{nil, {2}, {replyError, 200}, {replyError, errTagNil}, {replyResponse, 0xff}} {
		if _, _, err := decodeReply(b); err == nil {
			t.Errorf("decodeReply(%x) accepted garbage", b)
		}
	}
	// A huge length with few bytes behind it is refused before allocating.
	huge := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}
	if _, err := decodeBatchRequest(huge); err == nil {
		t.Error("huge length accepted")
	}
	// Errors nested deeper than maxErrorDepth are refused.
	deep := []byte{replyError}
	for range maxErrorDepth + 4 {
		deep = append(deep, errTagTyped+11) // AmbiguousResultError
	}
	deep = append(deep, errTagNil)
	if _, _, err := decodeReply(deep); err == nil {
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

// BenchmarkKVCodec encodes and decodes a batch of 100 puts, the figure the
// package doc quotes (go test -run XXX -bench KVCodec -benchmem ./rpc).
func BenchmarkKVCodec(b *testing.B) {
	ba := &kvpb.BatchRequest{}
	for i := range 100 {
		ba.Add(&kvpb.PutRequest{Key: fmt.Appendf(nil, "key-%06d", i), Value: make([]byte, 40)})
	}
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		var err error
		if buf, err = encodeBatchRequest(buf[:0], ba); err != nil {
			b.Fatal(err)
		}
		if _, err := decodeBatchRequest(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf)), "wire-bytes")
}
