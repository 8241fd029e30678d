package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func openMem(t *testing.T) *Engine {
	t.Helper()
	e, err := Open("db", Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// putFlushed writes v at each of keys in one batch and flushes it into
// an SST, so the reads that follow come from files.
func putFlushed(t *testing.T, e *Engine, v []byte, keys ...MVCCKey) {
	t.Helper()
	b := e.NewWriteOnlyBatch()
	defer b.Close()
	for _, k := range keys {
		if err := b.Put(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
}

func mustKey(t *testing.T, s string) MVCCKey {
	t.Helper()
	k, err := ParseMVCCKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// scanAll renders every entry of r in [lower, upper) as key=value.
func scanAll(t *testing.T, r Reader, lower, upper string) []string {
	t.Helper()
	it, err := r.NewIter(IterOptions{LowerBound: []byte(lower), UpperBound: []byte(upper)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = it.Close() }()
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.UnsafeValue()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s=%s", it.UnsafeKey(), v))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSSTIngest checks invariant 6 end to end: an SST that clears a span and
// rewrites it replaces what the engine held there, whether that data was
// still in the memtable or already flushed, leaves keys outside the span
// alone, and shadows same-key entries.
func TestSSTIngest(t *testing.T) {
	for _, flushFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("flushed=%v", flushFirst), func(t *testing.T) {
			e := openMem(t)
			b := e.NewWriteOnlyBatch()
			for _, kv := range [][2]string{
				{`"a"@1,0`, "old"}, {`"b"`, "old"}, {`"c"@3,0`, "old"},
				{`"e"@1,0`, "mem"}, {`"z"`, "outside"},
			} {
				if err := b.Put(mustKey(t, kv[0]), []byte(kv[1])); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			b.Close()
			if flushFirst {
				if err := e.Flush(); err != nil {
					t.Fatal(err)
				}
			}

			// A second SST with no range deletion overlaps "e"@1,0 exactly.
			w1, err := e.NewSSTWriter("snap.sst")
			if err != nil {
				t.Fatal(err)
			}
			if err := w1.ClearRange([]byte("a"), []byte("d")); err != nil {
				t.Fatal(err)
			}
			for _, kv := range [][2]string{
				{`"a"@5,0`, "new"}, {`"a"@2,0`, "new"}, {`"b"@4,0`, "new"}, {`"c"`, "new"},
			} {
				if err := w1.Put(mustKey(t, kv[0]), []byte(kv[1])); err != nil {
					t.Fatal(err)
				}
			}
			if err := w1.Finish(); err != nil {
				t.Fatal(err)
			}
			w2, err := e.NewSSTWriter("e.sst")
			if err != nil {
				t.Fatal(err)
			}
			if err := w2.Put(mustKey(t, `"e"@1,0`), []byte("sst")); err != nil {
				t.Fatal(err)
			}
			if err := w2.Finish(); err != nil {
				t.Fatal(err)
			}
			if err := e.Ingest(context.Background(), []string{w1.Path(), w2.Path()}); err != nil {
				t.Fatal(err)
			}

			want := []string{`"a"@5,0=new`, `"a"@2,0=new`, `"b"@4,0=new`, `"c"=new`, `"e"@1,0=sst`, `"z"=outside`}
			if got := scanAll(t, e, "a", "zz"); !slices.Equal(got, want) {
				t.Fatalf("after ingest:\n got %v\nwant %v", got, want)
			}
			// Reverse iteration and prefix iteration see the same data.
			it, err := e.NewIter(IterOptions{UpperBound: []byte("c")})
			if err != nil {
				t.Fatal(err)
			}
			var rev []string
			for ok := it.Last(); ok; ok = it.Prev() {
				rev = append(rev, it.UnsafeKey().String())
			}
			_ = it.Close()
			if want := []string{`"b"@4,0`, `"a"@2,0`, `"a"@5,0`}; !slices.Equal(rev, want) {
				t.Fatalf("reverse scan = %v, want %v", rev, want)
			}
			pit, err := e.NewIter(IterOptions{Prefix: true})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for ok := pit.SeekGE(MVCCKey{Key: []byte("a")}); ok; ok = pit.Next() {
				n++
			}
			_ = pit.Close()
			if n != 2 {
				t.Fatalf("prefix iteration over \"a\" saw %d entries, want 2", n)
			}
			if _, ok, err := e.Get(mustKey(t, `"a"@1,0`)); err != nil || ok {
				t.Fatalf("cleared version still readable: ok=%v err=%v", ok, err)
			}
			// Ingest moves the files into the engine.
			for _, p := range []string{w1.Path(), w2.Path()} {
				if _, err := e.FS().Stat(p); err == nil {
					t.Fatalf("%s still exists after ingest", p)
				}
			}
		})
	}
}

func TestSSTWriterRejectsMisuse(t *testing.T) {
	e := openMem(t)
	w, err := e.NewSSTWriter("x.sst")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for _, s := range []string{`"a"`, `"a"@9,0`, `"a"@3,1`, `"a"@3,0`, `"b"`} {
		if err := w.Put(mustKey(t, s), nil); err != nil {
			t.Fatalf("in-order put %s: %v", s, err)
		}
	}
	for _, s := range []string{`"b"`, `"a"@1,0`, `"a"`} {
		if err := w.Put(mustKey(t, s), nil); !errors.Is(err, ErrOutOfOrder) {
			t.Fatalf("put %s after \"b\" returned %v, want ErrOutOfOrder", s, err)
		}
	}
	if err := w.Put(MVCCKey{}, nil); !errors.Is(err, ErrEmptyKey) {
		t.Fatalf("empty key returned %v", err)
	}
	if err := w.ClearRange([]byte("c"), []byte("c")); err == nil {
		t.Fatal("empty clear span accepted")
	}
	if err := w.ClearRange([]byte("c"), []byte("f")); err != nil {
		t.Fatal(err)
	}
	if err := w.ClearRange([]byte("e"), []byte("g")); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("overlapping clear returned %v, want ErrOutOfOrder", err)
	}
	if got := w.Count(); got != 6 {
		t.Fatalf("Count = %d, want 6", got)
	}
	if w.EstimatedSize() == 0 {
		t.Fatal("EstimatedSize is 0 after six entries")
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := w.Put(mustKey(t, `"z"`), nil); !errors.Is(err, ErrSSTFinished) {
		t.Fatalf("put after Finish returned %v", err)
	}
	if err := w.Finish(); !errors.Is(err, ErrSSTFinished) {
		t.Fatalf("second Finish returned %v", err)
	}
	if _, err := e.FS().Stat("x.sst"); err != nil {
		t.Fatalf("finished file missing: %v", err)
	}

	a, err := e.NewSSTWriter("aborted.sst")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Put(mustKey(t, `"a"`), nil); err != nil {
		t.Fatal(err)
	}
	a.Abort()
	if _, err := e.FS().Stat("aborted.sst"); err == nil {
		t.Fatal("Abort left its file behind")
	}
}
