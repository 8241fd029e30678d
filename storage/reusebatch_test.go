package storage

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestReusingBatch: a batch from NewReusingBatch builds one Pebble
// iterator for a sequence of reads that close each iterator before the
// next (NewBatch's builds one per read), and each read sees the batch's
// writes made before it, within its own bounds, by a bounded scan or a
// prefix seek; a read that scans ahead (IterOptions.Scan) builds its own.
func TestReusingBatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reuse  bool
		builds uint64
	}{
		{"NewReusingBatch", true, 1},
		{"NewBatch", false, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Open("db", Options{FS: vfs.NewMem(), CountSeeks: true})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			w := e.NewWriteOnlyBatch()
			for _, k := range []string{"a", "c"} {
				if err := w.Put(MVCCKey{Key: []byte(k), Timestamp: ts(1, 0)}, []byte("engine-"+k)); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			b := e.NewBatch()
			if tc.reuse {
				b = e.NewReusingBatch()
			}
			defer b.Close()
			before := e.IterBuilds()
			scan := func(lo, hi string, prefix bool) string {
				t.Helper()
				opts := IterOptions{LowerBound: []byte(lo), UpperBound: []byte(hi)}
				if prefix {
					opts = IterOptions{Prefix: true}
				}
				it, err := b.NewIter(opts)
				if err != nil {
					t.Fatal(err)
				}
				defer it.Close()
				var out []string
				ok := it.First()
				if prefix {
					ok = it.SeekGE(MVCCKey{Key: []byte(lo)})
				}
				for ; ok; ok = it.Next() {
					v, err := it.UnsafeValue()
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, string(it.UnsafeKey().Key)+"="+string(v))
				}
				if err := it.Err(); err != nil {
					t.Fatal(err)
				}
				return strings.Join(out, " ")
			}
			put := func(k, v string) {
				t.Helper()
				if err := b.Put(MVCCKey{Key: []byte(k), Timestamp: ts(2, 0)}, []byte(v)); err != nil {
					t.Fatal(err)
				}
			}
			for i, step := range []struct {
				put    string // "key=value" written first
				lo, hi string
				prefix bool
				want   string
			}{
				{lo: "a", hi: "z", want: "a=engine-a c=engine-c"},
				{put: "b=batch-b", lo: "a", hi: "z", want: "a=engine-a b=batch-b c=engine-c"},
				{lo: "b", hi: "c", want: "b=batch-b"},
				{put: "c=batch-c", lo: "c", prefix: true, want: "c=batch-c c=engine-c"},
				{lo: "a", hi: "b", want: "a=engine-a"},
			} {
				if step.put != "" {
					k, v, _ := strings.Cut(step.put, "=")
					put(k, v)
				}
				if got := scan(step.lo, step.hi, step.prefix); got != step.want {
					t.Errorf("read %d: %q, want %q", i, got, step.want)
				}
			}
			if got := e.IterBuilds() - before; got != tc.builds {
				t.Errorf("%d Pebble iterators built, want %d", got, tc.builds)
			}
		})
	}
}
