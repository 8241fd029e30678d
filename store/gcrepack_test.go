package store

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"sort"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
)

// toyRepacker is a row format small enough to model in a test, with the
// same merge rule as rowenc's packed rows (rowenc invariant 3): a row key
// "rNN" holds toyWidth bytes, one per column; a column entry "rNN/i" holds
// one byte that replaces column i when it is at or above the row key's
// timestamp. GC's repacking (mvcc invariant 10) is then checked through
// the store without the SQL layers.
type toyRepacker struct{}

const toyWidth = 4

func (toyRepacker) RowKeyLen(key []byte) int {
	if len(key) >= 3 && key[0] == 'r' {
		return 3
	}
	return 0
}

func (toyRepacker) Repack(_ hlc.Timestamp, rowKey []byte, base mvcc.RowVersion, cols []mvcc.RowVersion) ([]byte, bool) {
	if len(base.Value) != toyWidth || len(cols) == 0 {
		return nil, false // a row alone is already in its final form
	}
	out := bytes.Clone(base.Value)
	for _, c := range cols {
		out[c.Key[4]-'0'] = c.Value[0]
	}
	return out, true
}

// toyWrite is write i of the repack history: a whole row (30%), a column
// update (60%) or a row deletion (10%) of one of 10 rows.
func toyWrite(rng *rand.Rand, i int) (string, []byte) {
	row := fmt.Sprintf("r%02d", rng.Intn(10))
	switch n := rng.Intn(10); {
	case n < 3:
		return row, fmt.Appendf(nil, "%04d", i%10000)
	case n < 9:
		return fmt.Sprintf("%s/%d", row, rng.Intn(toyWidth)), []byte{byte('a' + i%26)}
	default:
		return row, nil
	}
}

// toyMerge merges what a read returned (key → value at timestamp) into
// rows.
func toyMerge(kvs map[string]kvpb.KeyValue) map[string]string {
	out := map[string]string{}
	var ks []string
	for k := range kvs {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		if len(k) != 3 {
			continue
		}
		base := kvs[k]
		row := bytes.Clone(base.Value)
		for i := range toyWidth {
			if c, ok := kvs[fmt.Sprintf("%s/%d", k, i)]; ok && base.Timestamp.LessEq(c.Timestamp) {
				row[i] = c.Value[0]
			}
		}
		out[k] = string(row)
	}
	return out
}

// toyRows is what a read of the model's rows at ts sees.
func (m gcModel) toyRows(ts hlc.Timestamp) map[string]string {
	kvs := map[string]kvpb.KeyValue{}
	for k, vs := range m {
		for i := len(vs) - 1; i >= 0; i-- {
			if vs[i].ts.LessEq(ts) {
				if vs[i].value != nil {
					kvs[k] = kvpb.KeyValue{Key: []byte(k), Value: vs[i].value, Timestamp: vs[i].ts}
				}
				break
			}
		}
	}
	return toyMerge(kvs)
}

// toyRowsAt reads the store's rows at ts.
func (e *env) toyRowsAt(ctx context.Context, ts hlc.Timestamp) (map[string]string, error) {
	ba := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: ts}}
	ba.Add(&kvpb.ScanRequest{Key: []byte("r"), EndKey: []byte("s")})
	br, err := e.send(ctx, ba)
	if err != nil {
		return nil, err
	}
	kvs := map[string]kvpb.KeyValue{}
	for _, kv := range br.Responses[0].(*kvpb.ScanResponse).Rows {
		kvs[string(kv.Key)] = kv
	}
	return toyMerge(kvs), nil
}
