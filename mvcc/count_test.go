package mvcc

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// TestCountMatchesScan checks that a counting scan (ScanOptions.CountTags,
// with its walk over committed keys, scanner.countCommitted) answers what
// a scan that returns the rows does, over random histories: several
// versions per key, tombstones, values with and without a counted tag,
// intents of open transactions (read by their own transaction, in the way
// of others, ignored by inconsistent reads), intents committed above their
// timestamp (versions with a local timestamp), flushes between writes (so
// keys sit in the memtable and in SSTs), readers with uncertainty windows,
// MaxKeys limits and both directions. The count must be the number of
// returned rows whose value's first byte is a tag, and the error, the
// resume span and the ignored intents must be the same.
func TestCountMatchesScan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		eng, err := storage.Open("", storage.Options{FS: vfs.NewMem(), NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		keyGen := rapid.SampledFrom([]string{"a", "a/1", "b", "c", "c\x00", "d", "e", "f"})
		valGen := rapid.SampledFrom([]string{"", "r", "r1", "c2", "l3", "x4"})
		now := hlc.Timestamp{WallTime: 1}
		var open []*kvpb.Transaction
		var ids byte
		// apply commits fn's writes, or drops them when fn fails (an
		// intent in the way, a write too old): either leaves a state a
		// read must handle.
		apply := func(fn func(b *storage.Batch) error) {
			b := eng.NewBatch()
			defer b.Close()
			if fn(b) != nil {
				return
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		pick := func() *kvpb.Transaction {
			if len(open) == 0 {
				return nil
			}
			return open[rapid.IntRange(0, len(open)-1).Draw(t, "txn")]
		}
		steps := rapid.IntRange(1, 50).Draw(t, "steps")
		for range steps {
			now = hlc.Timestamp{WallTime: now.WallTime + int64(rapid.IntRange(0, 2).Draw(t, "wall")), Logical: int32(rapid.IntRange(0, 1).Draw(t, "logical"))}
			if now.WallTime == 0 {
				now.WallTime = 1
			}
			k := []byte(keyGen.Draw(t, "key"))
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0, 1, 2:
				v := []byte(valGen.Draw(t, "value"))
				apply(func(b *storage.Batch) error { return Put(b, k, now, v, nil) })
			case 3:
				apply(func(b *storage.Batch) error { _, err := Delete(b, k, now, nil); return err })
			case 4:
				ids++
				var id uuid.UUID
				id[15] = ids
				open = append(open, &kvpb.Transaction{
					TxnMeta:       kvpb.TxnMeta{ID: id, Key: []byte("a"), WriteTimestamp: now, MinTimestamp: now},
					ReadTimestamp: now,
				})
			case 5, 6:
				if tx := pick(); tx != nil {
					tx.Sequence++
					if rapid.IntRange(0, 3).Draw(t, "tomb") == 0 {
						apply(func(b *storage.Batch) error { _, err := Delete(b, k, hlc.Timestamp{}, tx); return err })
					} else {
						v := []byte(valGen.Draw(t, "txn-value"))
						apply(func(b *storage.Batch) error { return Put(b, k, hlc.Timestamp{}, v, tx) })
					}
				}
			case 7:
				// Commit (at now, above the intents' timestamps: the
				// versions keep their local timestamps) or abort.
				if tx := pick(); tx != nil {
					status := kvpb.Aborted
					if rapid.Bool().Draw(t, "commit") {
						status = kvpb.Committed
						tx.WriteTimestamp = tx.WriteTimestamp.Forward(now)
					}
					apply(func(b *storage.Batch) error {
						_, _, err := ResolveIntentRange(b, []byte("a"), []byte("z"), tx.TxnMeta, status, 0)
						return err
					})
					for i, o := range open {
						if o == tx {
							open = append(open[:i], open[i+1:]...)
							break
						}
					}
				}
			case 8:
				if err := eng.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		tags := []byte("rl")
		for range rapid.IntRange(1, 8).Draw(t, "reads") {
			ts := hlc.Timestamp{WallTime: rapid.Int64Range(1, now.WallTime+2).Draw(t, "read-wall"), Logical: int32(rapid.IntRange(0, 1).Draw(t, "read-logical"))}
			opts := ScanOptions{Reverse: rapid.Bool().Draw(t, "reverse"), MaxKeys: int64(rapid.IntRange(0, 4).Draw(t, "max"))}
			switch rapid.IntRange(0, 3).Draw(t, "reader") {
			case 0:
				if tx := pick(); tx != nil {
					opts.Txn = tx
					ts = tx.ReadTimestamp
				}
			case 1:
				// A reader with an uncertainty window, sometimes cut by
				// a local limit.
				opts.Txn = &kvpb.Transaction{
					TxnMeta:                kvpb.TxnMeta{ID: uuid.UUID{15: 0xff}, Key: []byte("a"), WriteTimestamp: ts, MinTimestamp: ts},
					ReadTimestamp:          ts,
					GlobalUncertaintyLimit: hlc.Timestamp{WallTime: ts.WallTime + int64(rapid.IntRange(0, 4).Draw(t, "uncertainty"))}.Forward(ts),
				}
				if rapid.Bool().Draw(t, "local") {
					opts.LocalUncertaintyLimit = hlc.Timestamp{WallTime: ts.WallTime + int64(rapid.IntRange(-1, 4).Draw(t, "local-limit"))}
				}
			case 2:
				opts.Inconsistent = true
			}
			if in, err := ScanIntents(eng, []byte("a"), []byte("z"), 1); err != nil {
				t.Fatal(err)
			} else if len(in) == 0 {
				opts.NoLocksInSpan = rapid.Bool().Draw(t, "nolocks")
			}
			rows, rowsErr := Scan(eng, []byte("a"), []byte("z"), ts, opts)
			copts := opts
			copts.CountTags = tags
			count, countErr := Scan(eng, []byte("a"), []byte("z"), ts, copts)
			what := fmt.Sprintf("scan at %s with %+v", ts, opts)
			if fmt.Sprint(rowsErr) != fmt.Sprint(countErr) {
				t.Fatalf("%s: scan error %v, count error %v", what, rowsErr, countErr)
			}
			if rowsErr != nil {
				continue
			}
			want := int64(0)
			for _, r := range rows.Rows {
				if len(r.Value) > 0 && bytes.IndexByte(tags, r.Value[0]) >= 0 {
					want++
				}
			}
			if count.Count != want || len(count.Rows) != 0 {
				t.Fatalf("%s: counted %d (and returned %d rows), want %d of rows %v", what, count.Count, len(count.Rows), want, fmtRows(rows.Rows))
			}
			if fmt.Sprint(rows.ResumeSpan) != fmt.Sprint(count.ResumeSpan) {
				t.Fatalf("%s: scan resumes at %v, count at %v", what, rows.ResumeSpan, count.ResumeSpan)
			}
			if fmt.Sprint(rows.Intents) != fmt.Sprint(count.Intents) {
				t.Fatalf("%s: scan ignored %v, count %v", what, rows.Intents, count.Intents)
			}
		}
	})
}
