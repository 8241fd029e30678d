package tablet

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
)

// TestIncrement: each increment adds to what the previous one wrote (a
// missing key counting as 0), the value lands as a committed version
// readable at once, and the request is refused inside a transaction.
func TestIncrement(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	var got []int64
	for _, req := range []*kvpb.IncrementRequest{
		{Key: []byte("c"), Increment: 1},
		{Key: []byte("c"), Increment: 2},
		{Key: []byte("d"), Increment: -4},
	} {
		br, err := h.send(ctx, (&kvpb.BatchRequest{}).Add(req), "")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, br.Responses[0].(*kvpb.IncrementResponse).NewValue)
	}
	if len(got) != 3 || got[0] != 1 || got[1] != 3 || got[2] != -4 {
		t.Fatalf("increments returned %v, want [1 3 -4]", got)
	}
	br, err := h.send(ctx, (&kvpb.BatchRequest{}).Add(&kvpb.GetRequest{Key: []byte("c")}), "")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := kvpb.DecodeIncrementValue(br.Responses[0].(*kvpb.GetResponse).Value); err != nil || v != 3 {
		t.Fatalf("stored value %d, %v; want 3", v, err)
	}
	h.newTxn("a", h.clock.Now(), 1)
	_, err = h.send(ctx, (&kvpb.BatchRequest{}).Add(&kvpb.IncrementRequest{Key: []byte("c"), Increment: 1}), "a")
	if _, ok := errors.AsType[*kvpb.InvalidArgumentError](err); !ok {
		t.Fatalf("Increment in a transaction: %v, want an InvalidArgumentError", err)
	}
}
