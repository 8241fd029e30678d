package storage

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestSSTWriterKeepsNoValueBlocks: an SST written through NewSSTWriter (a
// tablet's snapshot image, up to the tablet's whole span) puts no value
// in value blocks. Pebble's writer holds every value block in memory
// until Finish, so a tablet with many old versions made the snapshot's
// writer hold them all: 367 MiB live on a chaos node streaming one
// (bench/README.md, "Issue 22, twelfth session: memory").
func TestSSTWriterKeepsNoValueBlocks(t *testing.T) {
	e, err := Open("db", Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	w, err := e.NewSSTWriter("snap.sst")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	val := bytes.Repeat([]byte("v"), 2<<10)
	const keys, versions = 1000, 3
	for k := range keys {
		for v := versions; v >= 1; v-- { // newest first
			key := MVCCKey{Key: fmt.Appendf(nil, "k%05d", k), Timestamp: hlc.Timestamp{WallTime: int64(v)}}
			if err := w.Put(key, val); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	md, err := w.w.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if p := md.Properties; p.NumValuesInValueBlocks != 0 || p.ValueBlocksSize != 0 {
		t.Errorf("%d of %d values (%d bytes) went into value blocks, held in memory until Finish", p.NumValuesInValueBlocks, keys*versions, p.ValueBlocksSize)
	}
}
