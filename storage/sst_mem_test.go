package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/storage/simfs"
)

// memSST builds an in-memory SST of the given keys (parsed as by
// ParseMVCCKey) with the key's text as value.
func memSST(t *testing.T, ks ...string) []byte {
	t.Helper()
	b := NewSSTBuilder()
	for _, k := range ks {
		if err := b.Put(mustKey(t, k), []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	data, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestSSTBuilder builds SSTs in memory, reads them back within bounds,
// cuts them, checks they hold only puts, and ingests them as bytes: an
// ingested version shadows nothing of another timestamp, and the
// staging file is gone afterwards.
func TestSSTBuilder(t *testing.T) {
	ks := []string{`"a"@3,0`, `"a"@1,0`, `"b"@2,0`, `"c"@2,0`, `"d"@5,0`}
	data := memSST(t, ks...)
	read := func(data []byte, lo, hi string) []string {
		t.Helper()
		var l, u []byte
		if lo != "" {
			l = []byte(lo)
		}
		if hi != "" {
			u = []byte(hi)
		}
		var out []string
		if err := ForEachSST(data, l, u, func(k MVCCKey, v []byte) error {
			if k.String() != string(v) {
				return fmt.Errorf("key %s holds %q", k, v)
			}
			out = append(out, k.String())
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := read(data, "", ""); !slices.Equal(got, ks) {
		t.Fatalf("read %v, want %v", got, ks)
	}
	if got := read(data, "b", "d"); !slices.Equal(got, ks[2:4]) {
		t.Fatalf("read [b, d): %v", got)
	}
	if n, err := CheckSSTPoints(data); err != nil || n != len(ks) {
		t.Fatalf("CheckSSTPoints = %d, %v", n, err)
	}
	for _, tc := range []struct {
		lo, hi string
		want   []string
	}{
		{"a", "b", ks[:2]},
		{"b", "z", ks[2:]},
		{"x", "z", nil},
	} {
		cut, n, err := CutSST(data, []byte(tc.lo), []byte(tc.hi))
		if err != nil {
			t.Fatal(err)
		}
		if n != len(tc.want) || (n == 0) != (cut == nil) {
			t.Fatalf("cut [%s, %s): %d entries, %d bytes", tc.lo, tc.hi, n, len(cut))
		}
		if n > 0 {
			if got := read(cut, "", ""); !slices.Equal(got, tc.want) {
				t.Fatalf("cut [%s, %s) holds %v, want %v", tc.lo, tc.hi, got, tc.want)
			}
		}
	}

	// Order is checked as SSTWriter checks it.
	b := NewSSTBuilder()
	if err := b.Put(mustKey(t, `"b"@1`), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(mustKey(t, `"a"@1`), nil); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("out of order put: %v", err)
	}
	if first, last := b.Bounds(); string(first) != "b" || string(last) != "b" {
		t.Fatalf("bounds %q %q", first, last)
	}
	// The same version again, and a newer one (which sorts before it):
	// refused too, and the builder goes on after a refusal (the writer
	// underneath checks the order; the builder names it).
	for _, k := range []string{`"b"@1`, `"b"@2`} {
		if err := b.Put(mustKey(t, k), nil); !errors.Is(err, ErrOutOfOrder) {
			t.Fatalf("put %s after \"b\"@1: %v, want ErrOutOfOrder", k, err)
		}
	}
	if err := b.Put(mustKey(t, `"c"@1`), []byte("c")); err != nil {
		t.Fatal(err)
	}
	if first, last := b.Bounds(); string(first) != "b" || string(last) != "c" {
		t.Fatalf("bounds %q %q", first, last)
	}
	bd, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := ForEachSST(bd, nil, nil, func(k MVCCKey, _ []byte) error { got = append(got, string(k.Key)); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("after refused puts the SST holds %q, want b and c", got)
	}

	// Not an SST, or an SST that deletes: refused.
	if _, err := CheckSSTPoints([]byte("not an sst")); err == nil {
		t.Fatal("garbage passed CheckSSTPoints")
	}
	e := openMem(t)
	w, err := e.NewSSTWriter(e.SSTPath("del.sst"))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.ClearRange([]byte("a"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	f, err := e.OpenFile(e.SSTPath("del.sst"))
	if err != nil {
		t.Fatal(err)
	}
	del, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CheckSSTPoints(del); err == nil {
		t.Fatal("an SST with a range deletion passed CheckSSTPoints")
	}
	if err := ForEachSST(del, nil, nil, func(MVCCKey, []byte) error { return nil }); err == nil {
		t.Fatal("ForEachSST read an SST with a range deletion")
	}

	// Ingested as bytes over an engine holding a newer version of b.
	wb := e.NewBatch()
	if err := wb.Put(mustKey(t, `"b"@9,0`), []byte(`"b"@9,0`)); err != nil {
		t.Fatal(err)
	}
	if err := wb.Commit(); err != nil {
		t.Fatal(err)
	}
	wb.Close()
	if err := e.IngestBytes(context.Background(), data); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, k := range []string{ks[0], ks[1], `"b"@9,0`, ks[2], ks[3], ks[4]} {
		want = append(want, k+"="+k)
	}
	if got := scanAll(t, e, "a", "z"); !slices.Equal(got, want) {
		t.Fatalf("engine after ingest: %v, want %v", got, want)
	}
	names, err := e.FS().List(e.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if len(n) >= len(IngestFilePrefix) && n[:len(IngestFilePrefix)] == IngestFilePrefix {
			t.Fatalf("staging file %s left behind", n)
		}
	}
}

// TestForEachSSTRefusesNonPuts: ForEachSST walks the table's own point
// entries, so a point deletion or merge operand in an SST (which a
// pebble.Iterator over it would have applied, hiding keys) is an error
// naming it, never skipped; the puts around it are read up to it.
func TestForEachSSTRefusesNonPuts(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  func(w *sstable.Writer, k []byte) error
	}{
		{"deletion", func(w *sstable.Writer, k []byte) error { return w.Delete(k) }},
		{"merge", func(w *sstable.Writer, k []byte) error { return w.Merge(k, []byte("x")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &memWritable{}
			w := sstable.NewWriter(out, sstOptions().MakeWriterOptions(0, sstTableFormat))
			if err := w.Set(mustKey(t, `"a"@1,0`).Encode(nil), []byte("v")); err != nil {
				t.Fatal(err)
			}
			if err := tc.add(w, mustKey(t, `"b"@1,0`).Encode(nil)); err != nil {
				t.Fatal(err)
			}
			if err := w.Set(mustKey(t, `"c"@1,0`).Encode(nil), []byte("v")); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			var read []string
			err := ForEachSST(out.buf.Bytes(), nil, nil, func(k MVCCKey, _ []byte) error {
				read = append(read, k.String())
				return nil
			})
			if err == nil || !strings.Contains(err.Error(), `"b"`) {
				t.Fatalf("ForEachSST over an SST with a %s: %v (read %v)", tc.name, err, read)
			}
			if want := []string{`"a"@1,0`}; !slices.Equal(read, want) {
				t.Fatalf("read %v before the %s, want %v", read, tc.name, want)
			}
		})
	}
}

// TestSSTBuilderBlockSize: an SST built in memory has data blocks of
// about sstBlockSize (32 KiB), not the engines' 4 KiB, and reads back
// whole.
func TestSSTBuilderBlockSize(t *testing.T) {
	const n = 100_000
	b := NewSSTBuilder()
	for i := range n {
		k := MVCCKey{Key: binary.BigEndian.AppendUint64([]byte("/Table/104/2/"), uint64(i)), Timestamp: hlc.Timestamp{WallTime: 5}}
		if err := b.Put(k, []byte{1, byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	data, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	p := sstProperties(t, data)
	// A block is cut once it reaches the target size, so each holds
	// about sstBlockSize of entries before compression.
	if avg := p.RawKeySize / p.NumDataBlocks; avg < sstBlockSize*3/4 {
		t.Fatalf("%d data blocks, %d bytes of keys each: want about %d", p.NumDataBlocks, avg, sstBlockSize)
	}
	got := 0
	if err := ForEachSST(data, nil, nil, func(MVCCKey, []byte) error { got++; return nil }); err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Fatalf("read %d entries back, want %d", got, n)
	}
}

// TestSSTBuilderNoFilter: an SST built with NoFilter holds no bloom
// filter (the default one does), is smaller, and reads back every key
// it holds and none it does not once ingested.
func TestSSTBuilderNoFilter(t *testing.T) {
	ts := hlc.Timestamp{WallTime: 5}
	key := func(i int) MVCCKey {
		return MVCCKey{Key: binary.BigEndian.AppendUint64([]byte("/Table/104/2/"), uint64(i)), Timestamp: ts}
	}
	build := func(o SSTBuilderOptions) []byte {
		t.Helper()
		b := NewSSTBuilderWith(o)
		for i := range 1000 {
			if err := b.Put(key(2*i), []byte{1, byte(i)}); err != nil {
				t.Fatal(err)
			}
		}
		data, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	filterOf := func(data []byte) string {
		t.Helper()
		return sstProperties(t, data).FilterPolicyName
	}
	with, without := build(SSTBuilderOptions{}), build(SSTBuilderOptions{NoFilter: true})
	if f := filterOf(with); f == "" {
		t.Fatal("the default SST holds no filter")
	}
	if f := filterOf(without); f != "" {
		t.Fatalf("the NoFilter SST holds filter %q", f)
	}
	if len(without) >= len(with) {
		t.Fatalf("the NoFilter SST is %d bytes, the default %d: want it smaller", len(without), len(with))
	}
	e := openMem(t)
	if err := e.IngestBytes(context.Background(), without); err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		k := key(i)
		it, err := e.NewIter(IterOptions{LowerBound: k.Key, UpperBound: append(bytes.Clone(k.Key), 0)})
		if err != nil {
			t.Fatal(err)
		}
		found := it.First()
		it.Close()
		if found != (i%2 == 0) {
			t.Fatalf("key %d found %v after ingesting the NoFilter SST", i, found)
		}
	}
}

// TestIngestFile: an SST already in a file (raftnode's side-loaded copy)
// is ingested without consuming the file: it stays, byte for byte, for
// its owner (Pebble links a staging name and removes that), its keys are
// readable, and no staging file is left behind.
func TestIngestFile(t *testing.T) {
	e := openMem(t)
	b := NewSSTBuilder()
	for _, k := range []string{"a", "b", "c"} {
		if err := b.Put(MVCCKey{Key: []byte(k)}, []byte("v"+k)); err != nil {
			t.Fatal(err)
		}
	}
	data, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.FS().MkdirAll("side", 0o755); err != nil {
		t.Fatal(err)
	}
	path := e.FS().PathJoin("side", "i5.t1")
	f, err := e.FS().Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	// A copy: under the race detector Pebble's invariants are on, and
	// its in-memory file system then inverts every buffer written to it
	// (to catch callers that reuse one), which left data unlike the file.
	if _, err := f.Write(bytes.Clone(data)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.IngestFile(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if v, ok, err := e.Get(MVCCKey{Key: []byte(k)}); err != nil || !ok || string(v) != "v"+k {
			t.Fatalf("%s after the ingest: %q %v %v", k, v, ok, err)
		}
	}
	r, err := e.OpenFile(path)
	if err != nil {
		t.Fatalf("the ingested file is gone: %v", err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the ingested file holds %d bytes (%v), want its %d", len(got), err, len(data))
	}
	names, err := e.FS().List(e.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, IngestFilePrefix) {
			t.Fatalf("staging file %s left behind", n)
		}
	}
}

// TestIngestBytesLeavesTheDataAlone: IngestBytes must not change the SST
// it is given (the caller's: a proposal's), whatever the filesystem's
// Write does with the slice it is handed.
func TestIngestBytesLeavesTheDataAlone(t *testing.T) {
	e, err := Open("", Options{FS: simfs.Clobber(vfs.NewMem(), func(name string) bool {
		// The staged ingestion files; Pebble's own are left alone.
		return strings.HasPrefix(filepath.Base(name), IngestFilePrefix)
	})})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	data := memSST(t, `"a"@1,0`, `"b"@1,0`)
	want := slices.Clone(data)
	if err := e.IngestBytes(context.Background(), data); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		t.Fatalf("IngestBytes changed the %d bytes of the SST it was given", len(data))
	}
	if got := scanAll(t, e, "a", "z"); len(got) != 2 {
		t.Fatalf("engine after ingest: %v, want a and b", got)
	}
}

// sstProperties reads the properties block of an SST built in memory.
func sstProperties(t *testing.T, data []byte) sstable.Properties {
	t.Helper()
	r, err := sstable.NewMemReader(data, sstOptions().MakeReaderOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, err := r.ReadPropertiesBlock(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
