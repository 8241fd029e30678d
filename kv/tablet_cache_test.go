package kv

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
)

func desc(id kvpb.TabletID, start, end string, gen int64) kvpb.TabletDescriptor {
	return kvpb.TabletDescriptor{TabletID: id, StartKey: []byte(start), EndKey: []byte(end), Generation: gen}
}

// noLookup fails every directory lookup, so a test sees only the cache.
type noLookup struct{}

func (noLookup) LookupTablet(context.Context, []byte, bool) (kvpb.TabletDescriptor, error) {
	return kvpb.TabletDescriptor{}, &kvpb.InvalidArgumentError{Msg: "no directory"}
}

func TestTabletCache(t *testing.T) {
	type op struct {
		insert *kvpb.TabletDescriptor
		evict  *kvpb.TabletDescriptor
	}
	d := func(x kvpb.TabletDescriptor) *kvpb.TabletDescriptor { return &x }
	tests := []struct {
		name    string
		ops     []op
		key     string
		reverse bool
		want    kvpb.TabletID // 0: miss
	}{
		{name: "hit", ops: []op{{insert: d(desc(1, "a", "m", 1))}}, key: "c", want: 1},
		{name: "start inclusive", ops: []op{{insert: d(desc(1, "a", "m", 1))}}, key: "a", want: 1},
		{name: "end exclusive", ops: []op{{insert: d(desc(1, "a", "m", 1))}}, key: "m"},
		{name: "reverse end inclusive", ops: []op{{insert: d(desc(1, "a", "m", 1))}}, key: "m", reverse: true, want: 1},
		{name: "reverse start exclusive", ops: []op{{insert: d(desc(1, "a", "m", 1))}}, key: "a", reverse: true},
		{name: "gap", ops: []op{{insert: d(desc(1, "a", "c", 1))}, {insert: d(desc(2, "f", "m", 1))}}, key: "d"},
		{
			name: "split replaces the wider entry",
			ops: []op{
				{insert: d(desc(1, "a", "m", 1))},
				{insert: d(desc(2, "f", "m", 1))},
			},
			key: "c",
		},
		{
			name: "stale descriptor of the same tablet is ignored",
			ops: []op{
				{insert: d(desc(1, "a", "f", 2))},
				{insert: d(desc(1, "a", "m", 1))},
			},
			key: "g",
		},
		{
			name: "evict removes exactly the entry",
			ops: []op{
				{insert: d(desc(1, "a", "m", 1))},
				{evict: d(desc(1, "a", "m", 1))},
			},
			key: "c",
		},
		{
			name: "evict of an older generation keeps the newer entry",
			ops: []op{
				{insert: d(desc(1, "a", "f", 2))},
				{evict: d(desc(1, "a", "m", 1))},
			},
			key: "c", want: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewTabletCache(noLookup{})
			for _, o := range tc.ops {
				if o.insert != nil {
					c.Insert(*o.insert)
				}
				if o.evict != nil {
					c.Evict(*o.evict)
				}
			}
			got, err := c.Lookup(context.Background(), []byte(tc.key), tc.reverse)
			if tc.want == 0 {
				if err == nil {
					t.Fatalf("expected a miss, got %s", got.String())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.TabletID != tc.want {
				t.Fatalf("got %s, want tablet %d", got.String(), tc.want)
			}
		})
	}
}

func TestSpanSet(t *testing.T) {
	sp := func(k, e string) kvpb.Span {
		if e == "" {
			return kvpb.Span{Key: []byte(k)}
		}
		return kvpb.Span{Key: []byte(k), EndKey: []byte(e)}
	}
	tests := []struct {
		name string
		max  int
		in   []kvpb.Span
		want []kvpb.Span
	}{
		{name: "points stay points", in: []kvpb.Span{sp("b", ""), sp("a", ""), sp("b", "")}, want: []kvpb.Span{sp("a", ""), sp("b", "")}},
		{name: "range covers point", in: []kvpb.Span{sp("c", ""), sp("a", "d")}, want: []kvpb.Span{sp("a", "d")}},
		{name: "touching ranges merge", in: []kvpb.Span{sp("c", "e"), sp("a", "c")}, want: []kvpb.Span{sp("a", "e")}},
		{name: "point at range start widens", in: []kvpb.Span{sp("a", ""), sp("a", "c")}, want: []kvpb.Span{sp("a", "c")}},
		{name: "disjoint", in: []kvpb.Span{sp("a", "b"), sp("c", "d")}, want: []kvpb.Span{sp("a", "b"), sp("c", "d")}},
		{
			name: "condensed to max, still covering everything",
			max:  2,
			in:   []kvpb.Span{sp("a", ""), sp("c", ""), sp("e", ""), sp("g", "")},
			want: []kvpb.Span{sp("a", "c\x00"), sp("e", "g\x00")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := spanSet{max: tc.max}
			s.add(tc.in...)
			got := s.list()
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if string(got[i].Key) != string(tc.want[i].Key) || string(got[i].EndKey) != string(tc.want[i].EndKey) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}
