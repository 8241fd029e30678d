package rowenc_test

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// TestBlockStartsAreShardBounds: the blocks of n are the bucket ranges a
// distributed table of n shards is split into (sql/ddl splitTable cuts
// at i*NumBuckets/n): every bucket's BlockStart is the start of the
// shard holding it, for shard counts that divide the bucket space and
// counts that do not.
func TestBlockStartsAreShardBounds(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 32, 1000, 64000, rowenc.NumBuckets} {
		starts := rowenc.BlockStarts(n)
		if len(starts) != n || starts[0] != 0 {
			t.Fatalf("n=%d: %d starts, first %d", n, len(starts), starts[0])
		}
		shard := 0
		for b := range rowenc.NumBuckets {
			for shard+1 < n && (shard+1)*rowenc.NumBuckets/n <= b {
				shard++
			}
			if got, want := rowenc.BlockStart(uint16(b), n), starts[shard]; got != want {
				t.Fatalf("n=%d: BlockStart(%d) = %d, want %d (shard %d)", n, b, got, want, shard)
			}
		}
	}
}

// ginDistTable is ginTable distributed over shards shards (hash on k,
// a group shared with colocated tables) with its GIN indexes local, as
// sql/ddl places them on a distributed table.
func ginDistTable(id catalog.ID, shards int) *catalog.Table {
	t := ginTable(id)
	t.Partitioning = catalog.Partitioning{Kind: catalog.PartitionHash, HashColumns: 1, InitialTablets: shards, Distributed: true}
	t.GroupID = uint64(id) + 1000
	for i := range t.Indexes {
		t.Indexes[i].Placement, t.Indexes[i].GroupID, t.Indexes[i].Blocks = catalog.IndexLocal, 0, shards
	}
	return t
}

// TestLocalInvertedEntriesBesideTheirRow: a local GIN index's entries of
// a row sit in the row's block (the split unit of the group, BlockUnit),
// so in the tablet of the row's shard, under the block's first bucket;
// a token's entries of a block are one span (InvertedTokenSpan at the
// block's start), and InvertedBlocks lists one block per shard, or the
// blocks of the buckets a predicate fixed.
func TestLocalInvertedEntriesBesideTheirRow(t *testing.T) {
	const shards = 5
	l := mustLayout(t, ginDistTable(310, shards))
	r := rand.New(rand.NewPCG(18, 7))
	for k := range int64(300) {
		row := []types.Datum{types.DInt(k), &types.DJSON{JSON: randJSON(r, 3)}, types.DNull}
		pk, err := l.PrimaryKey(nil, row)
		if err != nil {
			t.Fatal(err)
		}
		b, err := l.Bucket(row)
		if err != nil {
			t.Fatal(err)
		}
		unit, ok := rowenc.BlockUnit(pk, shards)
		if !ok {
			t.Fatalf("row key %x has no block unit", pk)
		}
		idx := &l.Secondary[0]
		ents, err := l.EncodeIndexEntries(nil, idx, row)
		if err != nil {
			t.Fatal(err)
		}
		start := rowenc.BlockStart(b, shards)
		for _, e := range ents {
			if bytes.Compare(e.Key, unit.Key) < 0 || bytes.Compare(e.Key, unit.EndKey) >= 0 {
				t.Fatalf("row %d (bucket %d): entry %x outside its block [%x, %x)", k, b, e.Key, unit.Key, unit.EndKey)
			}
			p, _, err := rowenc.DecodeKeyPrefix(e.Key)
			if err != nil {
				t.Fatal(err)
			}
			if p.Bucket != start {
				t.Fatalf("row %d (bucket %d): entry under bucket %d, want its block's start %d", k, b, p.Bucket, start)
			}
		}
		found := 0
		for _, tok := range mustTokens(t, idx.Inverted, row[1]) {
			sp, err := l.InvertedTokenSpan(idx, start, tok)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if bytes.Compare(e.Key, sp.Key) >= 0 && bytes.Compare(e.Key, sp.EndKey) < 0 {
					found++
				}
			}
		}
		if found != len(ents) {
			t.Fatalf("row %d: %d of its %d entries in its tokens' block spans", k, found, len(ents))
		}
		if got := l.InvertedBlocks(idx, []uint16{b}); len(got) != 1 || got[0] != start {
			t.Fatalf("row %d: InvertedBlocks of its bucket = %v, want [%d]", k, got, start)
		}
	}
	if got := l.InvertedBlocks(&l.Secondary[0], nil); len(got) != shards {
		t.Fatalf("InvertedBlocks of every bucket: %v, want %d blocks", got, shards)
	}
	// A global GIN index has one block, bucket 0.
	g := mustLayout(t, ginTable(311))
	if got := g.InvertedBlocks(&g.Secondary[0], nil); len(got) != 1 || got[0] != 0 {
		t.Fatalf("InvertedBlocks of a global index: %v", got)
	}
}

func mustTokens(t *testing.T, opclass string, d types.Datum) [][]byte {
	t.Helper()
	toks, err := rowenc.InvertedTokens(opclass, d)
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

// TestLocalInvertedNeedsBlocks: a local GIN index of a hash-partitioned
// table without blocks (each token spread over the 65,536 buckets) and
// blocks on any other index are refused by the layout.
func TestLocalInvertedNeedsBlocks(t *testing.T) {
	noBlocks := ginDistTable(320, 4)
	noBlocks.Indexes[1].Blocks = 0
	if _, err := noBlocks.Layout(); err == nil || !strings.Contains(err.Error(), "needs 1 to") {
		t.Fatalf("a local GIN index without blocks: %v", err)
	}
	onGlobal := ginTable(321)
	onGlobal.Indexes[0].Blocks = 4
	if _, err := onGlobal.Layout(); err == nil || !strings.Contains(err.Error(), "has blocks") {
		t.Fatalf("blocks on a global GIN index: %v", err)
	}
}
