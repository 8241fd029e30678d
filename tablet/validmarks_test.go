package tablet

import (
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestValidationCacheMarks: an install read at a generation since which
// only writes of other keys were removed, or while one is between its two
// removals, goes in (the per-bucket marks; refused by the generation
// alone); a write of the key, or of a key of the row span, since the
// capture or still between its removals refuses it, as do a write that
// names no keys (an SST) and a reset.
func TestValidationCacheMarks(t *testing.T) {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	repr := func(key string) []byte {
		b := eng.NewWriteOnlyBatch()
		defer b.Close()
		if err := b.Put(storage.MVCCKey{Key: []byte(key), Timestamp: hlc.Timestamp{WallTime: 5}}, []byte("v")); err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), b.Repr()...)
	}
	const row, other = "\x03row/", "\x05other"
	rowKey := row + "1"
	for _, k := range []string{row, rowKey} {
		for i := 1; i <= len(other); i++ {
			if validBucket(k) == validBucket(other[:i]) {
				t.Fatalf("the test's keys share a bucket: %q and %q", k, other[:i])
			}
		}
	}
	ts := hlc.Timestamp{WallTime: 10}
	for _, tc := range []struct {
		name string
		// during runs between the capture and the install; the write of
		// after, if any, is left between its removals (writing only).
		during func(c *validCache)
		span   bool // install the row's span, not rowKey
		want   bool
	}{
		{name: "nothing written", during: func(c *validCache) {}, want: true},
		{name: "another key written", during: func(c *validCache) {
			c.writing(repr(other), false)
			c.written(repr(other), false)
		}, want: true},
		{name: "another key being written", during: func(c *validCache) {
			c.writing(repr(other), false)
		}, want: true},
		{name: "another key written, a span", span: true, during: func(c *validCache) {
			c.writing(repr(other), false)
		}, want: true},
		{name: "the key written", during: func(c *validCache) {
			c.writing(repr(rowKey), false)
			c.written(repr(rowKey), false)
		}},
		{name: "the key being written", during: func(c *validCache) {
			c.writing(repr(rowKey), false)
		}},
		{name: "a key of the span written", span: true, during: func(c *validCache) {
			c.writing(repr(row+"7"), false)
			c.written(repr(row+"7"), false)
		}},
		{name: "a key of the span being written", span: true, during: func(c *validCache) {
			c.writing(repr(row+"7"), false)
		}},
		{name: "an SST", during: func(c *validCache) {
			c.writing(nil, true)
			c.written(nil, true)
		}},
		{name: "a reset", during: func(c *validCache) { c.reset() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &validCache{}
			// A first refused install starts the marks (no write pending).
			c.writing(repr(other), false)
			c.written(repr(other), false)
			c.install(other, ts, 0)
			if c.marks == nil {
				t.Fatal("no marks after a refused install with no write pending")
			}
			gen := c.generation()
			tc.during(c)
			var got bool
			if tc.span {
				c.installSpan([]byte(row), keys.PrefixEnd([]byte(row)), ts, gen)
				_, got = c.spanNewest([]byte(row), keys.PrefixEnd([]byte(row)))
			} else {
				c.install(rowKey, ts, gen)
				got = c.passes([]byte(rowKey), ts)
			}
			if got != tc.want {
				t.Fatalf("installed: %v, want %v", got, tc.want)
			}
		})
	}
}
