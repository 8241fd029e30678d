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

// TestLockingReadOnePass: an UPDATE's locking read (kv's
// Txn.runLockingRead: the unreplicated lock of its row's span, then the
// scan of the row, in one batch) reads the row in the lock's check, one
// seek of the version keyspace (mvcc.CheckLockScan), and the scan returns
// what a scan of its own returns. The harness verifies the lock table
// against the engine (Config.VerifyLockTable), one seek of the lock
// keyspace per check: 2 seeks in all; a check and a scan of their own
// take 4. Rows past the scan's MaxKeys are scanned as before; a version
// above the snapshot still fails the lock, and the lock is taken.
func TestLockingReadOnePass(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	for i, tc := range []struct {
		name    string
		writes  []string // at 10, 11, ...: "key=value", "key=" deletes
		maxKeys int64
		wantErr bool
		rows    string
		seeks   uint64
	}{
		{name: "one key", writes: []string{"/=a"}, rows: "/=a", seeks: 2},
		{name: "three keys", writes: []string{"/=a", "/1=b", "/2=c"}, rows: "/=a /1=b /2=c", seeks: 2},
		{name: "versions and a tombstone", writes: []string{"/=a", "/1=b", "/=a2", "/1="}, rows: "/=a2", seeks: 2},
		{name: "no row", rows: "", seeks: 2},
		{name: "rows up to MaxKeys", writes: []string{"/=a", "/1=b"}, maxKeys: 2, rows: "/=a /1=b", seeks: 4},
		{name: "a version above the snapshot", writes: []string{"/=a"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := []byte(fmt.Sprintf("\x03lockread%d/", i))
			end := keys.PrefixEnd(row)
			key := func(k string) []byte { return append(append([]byte(nil), row[:len(row)-1]...), k...) }
			for j, w := range tc.writes {
				k, v, _ := strings.Cut(w, "=")
				var req kvpb.Request = &kvpb.PutRequest{Key: key(k), Value: []byte(v)}
				if v == "" {
					req = &kvpb.DeleteRequest{Key: key(k)}
				}
				if _, err := h.sendAt(wallTS(int64(10+j)), req); err != nil {
					t.Fatal(err)
				}
			}
			if tc.wantErr {
				if _, err := h.sendAt(wallTS(30), &kvpb.PutRequest{Key: row, Value: []byte("newer")}); err != nil {
					t.Fatal(err)
				}
			}
			name := fmt.Sprintf("reader%d", i)
			h.newTxn(name, wallTS(20), 0)
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.LockRequest{Key: row, EndKey: end, Unreplicated: true})
			ba.Add(&kvpb.ScanRequest{Key: row, EndKey: end, MaxKeys: tc.maxKeys})
			before := h.eng.Seeks()
			br, err := h.send(ctx, ba, name)
			seeks := h.eng.Seeks() - before
			if tc.wantErr {
				var wto *kvpb.WriteTooOldError
				if !errors.As(err, &wto) {
					t.Fatalf("the lock of a row written above the snapshot: err %v, want a WriteTooOldError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if seeks != tc.seeks {
				t.Errorf("the locking read sought %d times, want %d", seeks, tc.seeks)
			}
			// What a scan of its own returns at the same timestamp.
			plain := &kvpb.BatchRequest{}
			plain.Add(&kvpb.ScanRequest{Key: row, EndKey: end, MaxKeys: tc.maxKeys})
			pbr, err := h.send(ctx, plain, name)
			if err != nil {
				t.Fatal(err)
			}
			got, want := br.Responses[1].(*kvpb.ScanResponse), pbr.Responses[0].(*kvpb.ScanResponse)
			if g, w := fmtRows(row, got), fmtRows(row, want); g != tc.rows || w != tc.rows {
				t.Errorf("the locking read's scan returned %q, a scan %q, want %q", g, w, tc.rows)
			}
			for j := range got.Rows {
				if got.Rows[j].Timestamp != want.Rows[j].Timestamp {
					t.Errorf("row %d at %s, a scan's at %s", j, got.Rows[j].Timestamp, want.Rows[j].Timestamp)
				}
			}
			if (got.ResumeSpan == nil) != (want.ResumeSpan == nil) {
				t.Errorf("resume span %v, a scan's %v", got.ResumeSpan, want.ResumeSpan)
			}
			other := h.newTxn(name+"-other", wallTS(20), 0)
			if _, ok := h.r.locks.unreplConflict(row, nil, other.ID); !ok {
				t.Error("the row's lock is not in the lock table")
			}
		})
	}
}

// fmtRows formats a scan's rows as "key=value ...", keys relative to row
// without its last byte.
func fmtRows(row []byte, resp *kvpb.ScanResponse) string {
	var parts []string
	for _, kv := range resp.Rows {
		parts = append(parts, fmt.Sprintf("%s=%s", kv.Key[len(row)-1:], kv.Value))
	}
	return strings.Join(parts, " ")
}

// TestLockedRowPutReadsNoVersions: a Put of a row an UPDATE's locking
// read checked (its span's newest version in the validation cache,
// invariant 12) does not read the row's versions again: 1 seek (the
// harness's verification of the lock table) where it took 2, also after
// another key's write in its batch. A write of the row since the check
// removed the entry: the Put reads, and fails on the newer version as
// before.
func TestLockedRowPutReadsNoVersions(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	for i, tc := range []struct {
		name    string
		written bool // the row written at 30 after the lock's check
		first   bool // a ConditionalPut of another key goes first in the batch
		seeks   uint64
	}{
		{name: "the row as the lock read it", seeks: 1},
		{name: "after a write of another key", first: true, seeks: 3},
		{name: "the row written since", written: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := []byte(fmt.Sprintf("\x03lockedput%d/", i))
			end := keys.PrefixEnd(row)
			if _, err := h.sendAt(wallTS(10), &kvpb.PutRequest{Key: row, Value: []byte("v10")}); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("updater%d", i)
			h.newTxn(name, wallTS(20), 0)
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.LockRequest{Key: row, EndKey: end, Unreplicated: true})
			ba.Add(&kvpb.ScanRequest{Key: row, EndKey: end})
			if _, err := h.send(ctx, ba, name); err != nil {
				t.Fatal(err)
			}
			if tc.written {
				h.r.locks.reset(nil) // the lock is lost; the cache is not told
				if _, err := h.sendAt(wallTS(30), &kvpb.PutRequest{Key: row, Value: []byte("v30")}); err != nil {
					t.Fatal(err)
				}
			}
			ba = &kvpb.BatchRequest{}
			if tc.first {
				// Its own check of the lock table and read of its
				// versions: 2 seeks.
				ba.Add(&kvpb.ConditionalPutRequest{Key: []byte(fmt.Sprintf("\x02history%d", i)), Value: []byte("h")})
			}
			ba.Add(&kvpb.PutRequest{Key: row, Value: []byte("v20")})
			before := h.eng.Seeks()
			_, err := h.send(ctx, ba, name)
			seeks := h.eng.Seeks() - before
			if tc.written {
				var wto *kvpb.WriteTooOldError
				if !errors.As(err, &wto) {
					t.Fatalf("a Put below a version written since the check: err %v, want a WriteTooOldError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if seeks != tc.seeks {
				t.Errorf("the Put sought %d times, want %d", seeks, tc.seeks)
			}
		})
	}
}
