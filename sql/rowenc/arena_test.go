package rowenc_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// recorded is a Writes that keeps every operation, keys and values as
// given (not copied), to be compared after all of them were made.
type recorded struct{ ops [][3][]byte }

func (r *recorded) Put(key, value []byte) {
	r.ops = append(r.ops, [3][]byte{[]byte("put"), key, value})
}
func (r *recorded) CPut(key, value, expected []byte, expectExists bool) {
	r.ops = append(r.ops, [3][]byte{[]byte("cput"), key, value})
}
func (r *recorded) Del(key []byte) { r.ops = append(r.ops, [3][]byte{[]byte("del"), key, nil}) }
func (r *recorded) DelRange(start, end []byte) {
	r.ops = append(r.ops, [3][]byte{[]byte("delrange"), start, end})
}

// TestRowWriterArena: a writer with an Arena (a bulk load's) makes the
// same writes as one without, for packed rows and for a row over the
// packed size limit (written unpacked), and the keys and values of
// earlier rows stay as they were while later rows are encoded in the
// same scratch buffers (each is the arena's own copy).
func TestRowWriterArena(t *testing.T) {
	l := mustLayout(t, testTable(104))
	var rows [][]types.Datum
	for i := range 3000 {
		var d any
		switch {
		case i%7 == 0:
			d = nil
		case i%500 == 0:
			d = strings.Repeat("long", 20) // over the 48-byte limit below
		default:
			d = fmt.Sprintf("d%d", i)
		}
		rows = append(rows, row(int64(i), fmt.Sprintf("b%d", i), i%100, d))
	}
	for _, packed := range []bool{true, false} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			plain, arena := newWriter(l, packed, 48), newWriter(l, packed, 48)
			arena.Arena = &rowenc.ByteArena{}
			var want, got recorded
			for _, r := range rows {
				if err := plain.Insert(&want, r); err != nil {
					t.Fatal(err)
				}
				if err := arena.Insert(&got, r); err != nil {
					t.Fatal(err)
				}
			}
			if len(got.ops) != len(want.ops) {
				t.Fatalf("%d writes with the arena, %d without", len(got.ops), len(want.ops))
			}
			for i := range want.ops {
				for j := range 3 {
					if !bytes.Equal(got.ops[i][j], want.ops[i][j]) {
						t.Fatalf("write %d: %q with the arena, %q without", i, got.ops[i], want.ops[i])
					}
				}
			}
		})
	}
}

// TestByteArena: copies are equal to what was copied, and appending to
// one leaves the next copy alone.
func TestByteArena(t *testing.T) {
	var a rowenc.ByteArena
	var copies [][]byte
	for i := range 20000 {
		copies = append(copies, a.Copy([]byte(fmt.Sprintf("value-%d", i))))
	}
	big := bytes.Repeat([]byte("x"), 100<<10)
	bc := a.Copy(big)
	big[0] = 'y'
	if bc[0] != 'x' || len(bc) != len(big) {
		t.Fatal("a copy larger than a chunk shares its source")
	}
	_ = append(copies[0], "-appended"...)
	for i, c := range copies {
		if want := fmt.Sprintf("value-%d", i); string(c) != want {
			t.Fatalf("copy %d = %q, want %q", i, c, want)
		}
	}
}
