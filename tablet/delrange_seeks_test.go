package tablet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

// TestDeleteRangeSeeks: a DeleteRange of a span the lock table proves
// free of lock records (invariant 11) reads nothing of the lock keyspace
// and reads each key's value once, in its scan: the rest of a whole-row
// rewrite's row span (sql/rowenc's RowWriter.WholeRow, under
// simple-update), empty, takes 1 seek besides the harness's verification
// of the lock table, where it took 3 (a scan of the span's intents, then
// the scan's own look at the lock keyspace and its versions); each key it
// deletes adds the read of its newest version that every write makes. An
// intent in the span still fails another writer's deletion and is deleted
// by its own transaction's.
func TestDeleteRangeSeeks(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	for i, tc := range []struct {
		name    string
		writes  []string // keys under the row written at 10 ("" the row's key)
		intent  string   // a key under the row "holder" holds an intent on
		txn     bool     // the deletion runs in "holder"'s transaction
		rest    bool     // delete [Next(row), PrefixEnd(row)), else the whole row
		deleted string
		wantErr bool
		seeks   uint64
	}{
		{name: "the rest of a whole row, empty", writes: []string{""}, rest: true, seeks: 2},
		{name: "the rest of a whole row, in a transaction", writes: []string{""}, rest: true, txn: true, seeks: 2},
		{name: "two keys", writes: []string{"1", "2"}, deleted: "1 2", seeks: 4},
		{name: "another transaction's intent", writes: []string{""}, intent: "1", wantErr: true},
		{name: "its own intent", writes: []string{""}, intent: "1", txn: true, deleted: " 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := []byte(fmt.Sprintf("\x03delrange%d/", i))
			key := func(k string) []byte { return append(append([]byte(nil), row...), k...) }
			for _, w := range tc.writes {
				if _, err := h.sendAt(wallTS(10), &kvpb.PutRequest{Key: key(w), Value: []byte("v")}); err != nil {
					t.Fatal(err)
				}
			}
			name := fmt.Sprintf("holder%d", i)
			h.newTxn(name, wallTS(20), 0)
			if tc.intent != "" {
				ba := &kvpb.BatchRequest{}
				ba.Add(&kvpb.PutRequest{Key: key(tc.intent), Value: []byte("i")})
				if _, err := h.send(ctx, ba, name); err != nil {
					t.Fatal(err)
				}
			}
			start, end := row, keys.PrefixEnd(row)
			if tc.rest {
				start = keys.Next(row)
			}
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.DeleteRangeRequest{Key: start, EndKey: end})
			ba.WaitPolicy = kvpb.WaitError
			txn := ""
			if tc.txn {
				txn = name
			} else {
				ba.Timestamp = wallTS(30)
			}
			before := h.eng.Seeks()
			br, err := h.send(ctx, ba, txn)
			seeks := h.eng.Seeks() - before
			if tc.wantErr {
				var wie *kvpb.WriteIntentError
				if !errors.As(err, &wie) {
					t.Fatalf("a DeleteRange over another transaction's intent: err %v, want a WriteIntentError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, k := range br.Responses[0].(*kvpb.DeleteRangeResponse).Keys {
				got = append(got, string(k[len(row):]))
			}
			if g := strings.Join(got, " "); g != tc.deleted {
				t.Errorf("deleted %q, want %q", g, tc.deleted)
			}
			if tc.seeks != 0 && seeks != tc.seeks {
				t.Errorf("the DeleteRange sought %d times, want %d", seeks, tc.seeks)
			}
			t.Logf("%d seeks", seeks)
			// What is left: the row's key alone when only the rest was
			// deleted, nothing otherwise.
			scan := &kvpb.BatchRequest{}
			scan.Add(&kvpb.ScanRequest{Key: row, EndKey: end})
			if !tc.txn {
				scan.Timestamp = wallTS(40)
			}
			sbr, err := h.send(ctx, scan, txn)
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			if tc.rest {
				want = "/=v"
			}
			if g := fmtRows(row, sbr.Responses[0].(*kvpb.ScanResponse)); g != want {
				t.Errorf("after the deletion the row reads %q, want %q", g, want)
			}
		})
	}
}
