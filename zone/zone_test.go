package zone

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/clusterversion"
	"github.com/cairn-db/cairn/kvpb"
)

func TestParseLeasePreferences(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "[]", want: []string{}},
		{in: "[[+region=us-west]]", want: []string{"us-west"}},
		{in: " [ [+region=us-west] , [ +region = eu ] ] ", want: []string{"us-west", "eu"}},
		{in: "us-west", err: "not a bracketed list"},
		{in: "[+region=us-west]", err: "bracketed constraint list"},
		{in: "[[+region=a, +region=b]]", err: "only one constraint"},
		{in: "[[-region=a]]", err: "only required region constraints"},
		{in: "[[+zone=a]]", err: "only required region constraints"},
		{in: "[[+region=]]", err: "is not +key=value"},
		{in: "[[+region=a], [+region=a]]", err: "region a given twice"},
		{in: "[[+region=a],]", err: "trailing comma"},
		{in: "[[+region=a] [+region=b]]", err: "separated by commas"},
		{in: "[[+region=a", err: "not a bracketed list"},
	} {
		got, err := ParseLeasePreferences(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestMergeAndSQL(t *testing.T) {
	db := Config{NumReplicas: 5, LeasePreferences: []string{"eu"}, PrefsSet: true}
	tbl := Config{NumReplicas: 1}
	got := tbl.Merge(db)
	if got.NumReplicas != 1 || !slices.Equal(got.LeasePreferences, []string{"eu"}) {
		t.Fatalf("merge: %+v", got)
	}
	if s := got.SQL(); s != "num_replicas = 1, lease_preferences = '[[+region=eu]]'" {
		t.Fatalf("SQL: %s", s)
	}
	none := Config{PrefsSet: true}
	if none.IsZero() || none.Merge(db).PrefsString() != "[]" {
		t.Fatalf("an explicit empty preference list must override the parent's: %+v", none.Merge(db))
	}
}

// TestCacheLookup: a tablet finds its group's record by its start key,
// whether it starts at the group or inside it, and none outside any.
func TestCacheLookup(t *testing.T) {
	g5, g50 := []byte{0x03, 0x8d}, []byte{0x03, 0xba} // two self-delimiting prefixes
	recs := map[string]Config{string(g5): {NumReplicas: 1}, string(g50): {NumReplicas: 5}}
	scan := func(_ context.Context, start, end []byte, _ int64) ([]kvpb.KeyValue, error) {
		var out []kvpb.KeyValue
		for _, g := range [][]byte{g5, g50} {
			v, _ := Encode(recs[string(g)])
			out = append(out, kvpb.KeyValue{Key: Key(g), Value: v})
		}
		return out, nil
	}
	var c Cache
	if err := c.Refresh(context.Background(), scan); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  []byte
		want int
	}{
		{append(slices.Clone(g5), 0, 1), 1},
		{g5, 1},
		{g50, 5},
		{append(slices.Clone(g50), 0xff), 5},
		{[]byte{0x03, 0x8c}, 0},
		{[]byte{0x03, 0x8e}, 0},
		{[]byte{0x02}, 0},
	} {
		got, ok := c.Lookup(tc.key)
		if ok != (tc.want != 0) || got.NumReplicas != tc.want {
			t.Errorf("%x: %+v %v, want num_replicas %d", tc.key, got, ok, tc.want)
		}
	}
}

// A zone record is stored with its format version; one written by 1.0
// (without it) still reads, and one from a later format is refused, not
// misread.
func TestRecordFormat(t *testing.T) {
	c := Config{NumReplicas: 5, GlobalReads: true}
	b, err := Encode(c)
	if err != nil || !strings.HasPrefix(string(b), `{"format_version":1,`) {
		t.Fatalf("Encode: %s, %v", b, err)
	}
	if got, err := Decode(b); err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("Decode(%s) = %+v, %v", b, got, err)
	}
	if got, err := Decode([]byte(`{"num_replicas":5,"global_reads":true}`)); err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("a 1.0 record: %+v, %v", got, err)
	}
	if _, err := Decode([]byte(`{"format_version":2,"num_replicas":5}`)); !errors.Is(err, clusterversion.ErrFutureFormat) || !strings.Contains(err.Error(), "zone record is in format version 2") {
		t.Fatalf("a future record: %v", err)
	}
}
