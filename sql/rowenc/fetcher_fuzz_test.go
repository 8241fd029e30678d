package rowenc_test

import (
	"errors"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// FuzzRowFetcher: decoding arbitrary KVs as any index of testTable never
// panics, and every failure is ErrCorrupt (or ErrSchemaTooOld) rather than
// a wrong row (rowenc invariant 4). Seeds are real entries of every index.
func FuzzRowFetcher(f *testing.F) {
	l := mustLayout(f, testTable(104))
	for _, r := range [][]types.Datum{row(1, "x", 5, "p"), row(-7, nil, nil, nil)} {
		for _, packed := range []bool{true, false} {
			e, err := l.EncodePrimaryRow(r, packed, 0)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint32(1), e.Key, e.Value)
			for _, c := range e.Columns {
				f.Add(uint32(1), c.Key, c.Value)
			}
		}
		for i := range l.Secondary {
			e, err := l.EncodeIndexEntry(&l.Secondary[i], r)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(l.Secondary[i].ID, e.Key, e.Value)
		}
	}
	f.Fuzz(func(t *testing.T, index uint32, key, value []byte) {
		idx := l.Index(index)
		if idx == nil {
			idx = &l.Primary
		}
		fe, err := rowenc.NewRowFetcher(l, idx, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = fe.DecodeRows([]kvpb.KeyValue{{Key: key, Value: value}})
		if err != nil && !errors.Is(err, rowenc.ErrCorrupt) && !errors.Is(err, rowenc.ErrSchemaTooOld) {
			t.Fatalf("error %v is not ErrCorrupt", err)
		}
	})
}
