package ddl

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/cairn-db/cairn/sql/distsql"
)

// fakeBatches is a remote reader's flow as drainRemote sees it: its
// batches, then err (nil: the fragment ended).
type fakeBatches struct {
	batches []distsql.Batch
	err     error
}

func (f *fakeBatches) Next() (distsql.Batch, bool, error) {
	if len(f.batches) == 0 {
		return distsql.Batch{}, false, f.err
	}
	b := f.batches[0]
	f.batches = f.batches[1:]
	return b, true, nil
}

// remoteBatch is a batch of a backfill fragment: rows read, then entries
// (each "" is a batch carrying only rows).
func remoteBatch(rows int64, keys ...string) distsql.Batch {
	var b distsql.Batch
	for _, k := range keys {
		b.Rows = append(b.Rows, appendRemoteEntry(nil, rows, []byte(k), nil))
		rows = 0
	}
	return b
}

// TestDrainRemoteCountsRowsOnce: the rows a remote fragment read count in
// the build's progress once one of its entries reached the sorter or it
// ended, never when it failed before that (its piece is then read again
// on the build's node, whose reader counts them: invariant 1).
func TestDrainRemoteCountsRowsOnce(t *testing.T) {
	injected := errors.New("injected: fragment failed")
	for _, tc := range []struct {
		name          string
		batches       []distsql.Batch
		err           error
		wantDone      int64
		wantEntries   int
		wantDelivered bool
	}{
		{"rows only, then the fragment fails", []distsql.Batch{remoteBatch(500, "")}, injected, 0, 0, false},
		{"rows only, twice, then it fails", []distsql.Batch{remoteBatch(500, ""), remoteBatch(300, "")}, injected, 0, 0, false},
		{"rows only, then it ends", []distsql.Batch{remoteBatch(500, ""), remoteBatch(300, "")}, nil, 800, 0, false},
		{"rows only, then entries", []distsql.Batch{remoteBatch(500, ""), remoteBatch(3, "\x89a", "\x89b")}, nil, 503, 2, true},
		{"entries, then rows only, then it ends", []distsql.Batch{remoteBatch(3, "\x89a"), remoteBatch(40, "")}, nil, 43, 1, true},
		// Delivered: the build fails as a whole, so the count stands.
		{"entries, then it fails", []distsql.Batch{remoteBatch(3, "\x89a"), remoteBatch(40, "")}, injected, 43, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := make(chan *entryBuf, len(tc.batches))
			var done atomic.Int64
			delivered, err := drainRemote(context.Background(), &fakeBatches{batches: tc.batches, err: tc.err}, out, &done)
			close(out)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			entries := 0
			for b := range out {
				entries += b.len()
			}
			if done.Load() != tc.wantDone || entries != tc.wantEntries || delivered != tc.wantDelivered {
				t.Errorf("done %d, %d entries, delivered %v; want %d, %d, %v",
					done.Load(), entries, delivered, tc.wantDone, tc.wantEntries, tc.wantDelivered)
			}
		})
	}
}
