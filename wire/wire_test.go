package wire

import (
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// Two builds' shapes of one message: v2 dropped Note (number 3) and added
// Owner (5) and Spans (6); Key and Count kept their numbers, and v2
// declares its fields in another order.
type (
	msgV1 struct {
		Key   []byte `wire:"1"`
		Count int64  `wire:"2"`
		Note  string `wire:"3"`
		Inner inner  `wire:"4"`
	}
	msgV2 struct {
		Spans []inner `wire:"6"`
		Owner *inner  `wire:"5"`
		Inner inner   `wire:"4"`
		Count int64   `wire:"2"`
		Key   []byte  `wire:"1"`
	}
	inner struct {
		A uint32 `wire:"1"`
		B bool   `wire:"2"`
	}
)

func testCodec(t *testing.T, roots ...reflect.Type) *Codec {
	t.Helper()
	c := NewCodec()
	if err := c.Register(roots...); err != nil {
		t.Fatal(err)
	}
	return c
}

// A message from an older or a newer build decodes: known fields keep
// their values, unknown ones are skipped, missing ones are zero
// (invariant 2).
func TestOldAndNewShapesDecodeBothWays(t *testing.T) {
	c := testCodec(t, reflect.TypeFor[msgV1](), reflect.TypeFor[msgV2]())

	v1 := msgV1{Key: []byte("k"), Count: -7, Note: "dropped in v2", Inner: inner{A: 9, B: true}}
	b, err := c.Marshal(nil, &v1)
	if err != nil {
		t.Fatal(err)
	}
	var got2 msgV2
	if err := c.Unmarshal(b, &got2); err != nil {
		t.Fatal(err)
	}
	want2 := msgV2{Key: []byte("k"), Count: -7, Inner: inner{A: 9, B: true}}
	if !reflect.DeepEqual(got2, want2) {
		t.Fatalf("v1 → v2:\n got %+v\nwant %+v", got2, want2)
	}

	v2 := msgV2{Key: []byte{}, Count: 3, Owner: &inner{}, Spans: []inner{{A: 1}, {}, {B: true}}}
	if b, err = c.Marshal(nil, &v2); err != nil {
		t.Fatal(err)
	}
	var got1 msgV1
	if err := c.Unmarshal(b, &got1); err != nil {
		t.Fatal(err)
	}
	want1 := msgV1{Key: []byte{}, Count: 3}
	if !reflect.DeepEqual(got1, want1) {
		t.Fatalf("v2 → v1:\n got %+v\nwant %+v", got1, want1)
	}
	// And v2 to itself: an empty pointed-to struct and zero elements of a
	// repeated field keep their place.
	var back msgV2
	if err := c.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, v2) {
		t.Fatalf("v2 → v2:\n got %+v\nwant %+v", back, v2)
	}
}

// A nil []byte and an empty one differ on the wire (invariant 3).
func TestNilAndEmptyBytes(t *testing.T) {
	c := testCodec(t, reflect.TypeFor[msgV1]())
	for _, key := range [][]byte{nil, {}, []byte("x")} {
		b, err := c.Marshal(nil, &msgV1{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		var got msgV1
		if err := c.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if (got.Key == nil) != (key == nil) || string(got.Key) != string(key) {
			t.Errorf("%#v came back as %#v", key, got.Key)
		}
	}
}

type (
	shape  interface{ area() int }
	square struct {
		Side int `wire:"1"`
	}
	rect struct {
		W int `wire:"1"`
		H int `wire:"2"`
	}
	drawing struct {
		Shapes []shape `wire:"1"`
		Main   shape   `wire:"2"`
	}
)

func (s *square) area() int { return s.Side * s.Side }
func (r *rect) area() int   { return r.W * r.H }

// A Union member this build does not know is an error (invariant 5); one
// it knows decodes to its type.
func TestUnion(t *testing.T) {
	newer := NewCodec()
	if err := newer.Union(reflect.TypeFor[shape](), Member{1, reflect.TypeFor[square]()}, Member{2, reflect.TypeFor[rect]()}); err != nil {
		t.Fatal(err)
	}
	newer.MustRegister(reflect.TypeFor[drawing]())
	older := NewCodec()
	if err := older.Union(reflect.TypeFor[shape](), Member{1, reflect.TypeFor[square]()}); err != nil {
		t.Fatal(err)
	}
	older.MustRegister(reflect.TypeFor[drawing]())

	d := drawing{Shapes: []shape{&square{Side: 2}, &square{}}, Main: &square{Side: 3}}
	b, err := newer.Marshal(nil, &d)
	if err != nil {
		t.Fatal(err)
	}
	var got drawing
	if err := older.Unmarshal(b, &got); err != nil || !reflect.DeepEqual(got, d) {
		t.Fatalf("got %+v, %v; want %+v", got, err, d)
	}

	d.Main = &rect{W: 1, H: 2}
	if b, err = newer.Marshal(nil, &d); err != nil {
		t.Fatal(err)
	}
	if err := older.Unmarshal(b, &drawing{}); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("an unknown member decoded: %v", err)
	}
	if _, err := older.Marshal(nil, &d); err == nil {
		t.Fatal("a value of a type outside the union was sent")
	}
	if _, err := newer.Marshal(nil, &drawing{Shapes: []shape{nil}}); err == nil {
		t.Fatal("a nil element was sent")
	}
}

// Register refuses what cannot travel or is ambiguous (invariant 1).
func TestRegisterRefuses(t *testing.T) {
	type untagged struct {
		A int `wire:"1"`
		B int
	}
	type dup struct {
		A int `wire:"1"`
		B int `wire:"1"`
	}
	type badNum struct {
		A int `wire:"0"`
	}
	type unexported struct {
		A int `wire:"1"`
		b int
	}
	type skipped struct {
		A int `wire:"1"`
		b int `wire:"-"`
		C int `wire:"-"`
	}
	if err := NewCodec().Register(reflect.TypeFor[skipped]()); err != nil {
		t.Errorf("fields tagged - are left out: %v", err)
	}
	_ = skipped{b: 0}
	type withMap struct {
		M map[string]int `wire:"1"`
	}
	type withIface struct {
		E any `wire:"1"`
	}
	type nested struct {
		In untagged `wire:"1"`
	}
	for _, tc := range []struct {
		typ  reflect.Type
		want string
	}{
		{reflect.TypeFor[untagged](), "B has no wire tag"},
		{reflect.TypeFor[dup](), "both numbered 1"},
		{reflect.TypeFor[badNum](), "bad wire tag"},
		{reflect.TypeFor[unexported](), "unexported"},
		{reflect.TypeFor[withMap](), "cannot carry map"},
		{reflect.TypeFor[withIface](), "cannot carry interface"},
		{reflect.TypeFor[nested](), "B has no wire tag"},
	} {
		err := NewCodec().Register(tc.typ)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.typ, err, tc.want)
		}
		_ = unexported{b: 0}
	}
}

// Malformed input is an error, never a panic, and lengths are not trusted
// (invariant 4).
func TestGarbage(t *testing.T) {
	c := testCodec(t, reflect.TypeFor[msgV2]())
	bad := [][]byte{
		{0x00},                               // field number 0
		{0x10, 0xff},                         // Count: a truncated varint
		{0x0a, 0x05, 'a'},                    // Key: a length beyond the input
		{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, // Key: a huge length
		{0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, // a varint overflowing 64 bits
		{0x12, 0x00},                   // Count, length-delimited
		{0x22, 0x02, 0x10, 0x02},       // Inner.B = 2
		{0x22, 0x03, 0x08, 0x80, 0x80}, // Inner cut inside
		{0x1a, 0x01},                   // an unknown field cut short
		// Inner.A is a uint32: a larger value overflows it.
		protowire.AppendBytes([]byte{0x22}, protowire.AppendVarint([]byte{0x08}, 1<<40)),
	}
	for _, b := range bad {
		var v msgV2
		if err := c.Unmarshal(b, &v); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Unmarshal(%x) = %v, want ErrCorrupt", b, err)
		}
	}
}

type deep struct {
	Next *deep `wire:"1"`
}

// Nesting beyond MaxDepth is refused, on both sides.
func TestDepth(t *testing.T) {
	c := testCodec(t, reflect.TypeFor[deep]())
	var b []byte
	for range MaxDepth + 2 {
		b = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), b)
	}
	if err := c.Unmarshal(b, &deep{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("nesting of %d decoded: %v", MaxDepth+2, err)
	}
	d := &deep{}
	for range MaxDepth + 2 {
		d = &deep{Next: d}
	}
	if _, err := c.Marshal(nil, d); err == nil {
		t.Fatal("nesting beyond MaxDepth encoded")
	}
}

// Long nested messages (lengths of several bytes) round-trip.
func TestLongBodies(t *testing.T) {
	c := testCodec(t, reflect.TypeFor[msgV2]())
	v := msgV2{Key: make([]byte, 70000)}
	for i := range 300 {
		v.Spans = append(v.Spans, inner{A: uint32(i) + 1})
	}
	b, err := c.Marshal(nil, &v)
	if err != nil {
		t.Fatal(err)
	}
	var got msgV2
	if err := c.Unmarshal(b, &got); err != nil || !reflect.DeepEqual(got, v) {
		t.Fatalf("round trip failed: %v", err)
	}
}

// What a decode allocates is linear in its input (invariant 4): the
// smallest element a repeated field can have (a tag and an empty body, two
// bytes) costs at most its Go size times the slice's growth.
func TestAllocationLinear(t *testing.T) {
	c := testCodec(t, reflect.TypeFor[msgV2]())
	var in []byte
	for range 50000 {
		in = append(in, 0x32, 0x00) // Spans: an empty inner
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var v msgV2
	if err := c.Unmarshal(in, &v); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	elem := int(reflect.TypeFor[inner]().Size())
	// Appending doubles the slice: at most twice the elements' size in
	// all, plus the final slice.
	limit := uint64(len(v.Spans)*elem*4 + 64<<10)
	if got := after.TotalAlloc - before.TotalAlloc; len(v.Spans) != 50000 || got > limit {
		t.Fatalf("decoding %d bytes into %d elements allocated %d bytes (limit %d)", len(in), len(v.Spans), got, limit)
	}
}

func FuzzUnmarshal(f *testing.F) {
	c := NewCodec()
	if err := c.Union(reflect.TypeFor[shape](), Member{1, reflect.TypeFor[square]()}, Member{2, reflect.TypeFor[rect]()}); err != nil {
		f.Fatal(err)
	}
	c.MustRegister(reflect.TypeFor[msgV2](), reflect.TypeFor[drawing]())
	good, _ := c.Marshal(nil, &msgV2{Key: []byte("k"), Count: -3, Owner: &inner{A: 1}, Spans: []inner{{B: true}}})
	f.Add(good)
	d, _ := c.Marshal(nil, &drawing{Shapes: []shape{&square{Side: 1}, &rect{W: 2}}, Main: &rect{}})
	f.Add(d)
	f.Fuzz(func(t *testing.T, b []byte) {
		var v msgV2
		if err := c.Unmarshal(b, &v); err == nil {
			again, err := c.Marshal(nil, &v)
			if err != nil {
				t.Fatal(err)
			}
			var back msgV2
			if err := c.Unmarshal(again, &back); err != nil || !reflect.DeepEqual(back, v) {
				t.Fatalf("re-encoded message does not round-trip: %v", err)
			}
		}
		var dr drawing
		if err := c.Unmarshal(b, &dr); err == nil {
			if _, err := c.Marshal(nil, &dr); err != nil {
				t.Fatal(err)
			}
		}
	})
}
