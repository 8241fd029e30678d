package tablet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// recordingSender answers every batch and records, per batch, the tablet
// it was addressed to (0: routed by key) and its requests' spans.
type recordingSender struct {
	sent []string
}

func (s *recordingSender) Send(_ context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	var spans []string
	for _, r := range ba.Requests {
		sp := r.Span()
		spans = append(spans, fmt.Sprintf("%s-%s", sp.Key, sp.EndKey))
	}
	s.sent = append(s.sent, fmt.Sprintf("t%d %v", ba.TabletID, spans))
	return &kvpb.BatchResponse{}, nil
}

// TestResolverRoutesWhatItCannotPlace: the resolver groups intents by
// the node's directory, and a key the directory has no tablet for (a
// replica moved off the node while its waiter pushed) goes alone, routed
// by key by the sender, instead of failing the statement that met the
// intent (it answered XX000 "no tablet holds the key").
func TestResolverRoutesWhatItCannotPlace(t *testing.T) {
	// The directory knows [a, m) as tablet 1 and [m, p) as tablet 2;
	// keys from p on are on no tablet of this node.
	errNoTablet := errors.New("no tablet holds the key")
	lookup := func(_ context.Context, key []byte, _ bool) (kvpb.TabletDescriptor, error) {
		switch k := string(key); {
		case k >= "a" && k < "m":
			return kvpb.TabletDescriptor{TabletID: 1, StartKey: []byte("a"), EndKey: []byte("m")}, nil
		case k >= "m" && k < "p":
			return kvpb.TabletDescriptor{TabletID: 2, StartKey: []byte("m"), EndKey: []byte("p")}, nil
		}
		return kvpb.TabletDescriptor{}, fmt.Errorf("store: look up %q: %w", key, errNoTablet)
	}
	txn := kvpb.TxnMeta{ID: uuid.New(), Key: []byte("a")}
	for _, tc := range []struct {
		name  string
		keys  []string
		spans [][2]string
		want  []string
	}{
		{name: "all placed", keys: []string{"b", "c", "n"},
			want: []string{"t1 [b- c-]", "t2 [n-]"}},
		{name: "one point unplaced", keys: []string{"b", "q", "c"},
			want: []string{"t1 [b- c-]", "t0 [q-]"}},
		{name: "only unplaced", keys: []string{"q", "r"},
			want: []string{"t0 [q-]", "t0 [r-]"}},
		{name: "range runs past the directory", spans: [][2]string{{"k", "z"}},
			want: []string{"t1 [k-m]", "t2 [m-p]", "t0 [p-z]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &recordingSender{}
			ir := NewIntentResolver(s, lookup, hlc.NewClock(hlc.NewManualClock(1).UnixNano, 0))
			var err error
			if tc.keys != nil {
				var ks [][]byte
				for _, k := range tc.keys {
					ks = append(ks, []byte(k))
				}
				err = ir.ResolveIntents(context.Background(), txn, kvpb.Aborted, ks)
			} else {
				var sps []kvpb.Span
				for _, sp := range tc.spans {
					sps = append(sps, kvpb.Span{Key: []byte(sp[0]), EndKey: []byte(sp[1])})
				}
				err = ir.ResolveSpans(context.Background(), txn, kvpb.Aborted, sps)
			}
			if err != nil {
				t.Fatal(err)
			}
			got := slices.Clone(s.sent)
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("sent %q, want %q", got, want)
			}
		})
	}
	// A canceled context still fails the resolution: nothing is routed
	// for a lookup the caller gave up on.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := &recordingSender{}
	ir := NewIntentResolver(s, lookup, hlc.NewClock(hlc.NewManualClock(1).UnixNano, 0))
	if err := ir.ResolveIntents(ctx, txn, kvpb.Aborted, [][]byte{[]byte("q")}); err == nil || len(s.sent) != 0 {
		t.Fatalf("canceled: err %v, sent %q; want an error and nothing sent", err, s.sent)
	}
}
