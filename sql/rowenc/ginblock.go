package rowenc

import (
	"encoding/binary"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

// Local GIN indexes of hash-partitioned tables (docs/distributed.md,
// "Local GIN indexes"). A B-tree local index puts a row's entry in the
// row's bucket; a GIN index cannot: each token's entries would spread
// over the 65,536 buckets, and a token lookup would be that many seeks.
// Instead the bucket space is cut into IndexLayout.Blocks blocks, the
// table's shard boundaries when the index was made (block i is buckets
// [i*NumBuckets/n, (i+1)*NumBuckets/n), as a distributed table's shards
// are split, sql/ddl splitTable), and every entry of a row in bucket b is
// written under the first bucket of b's block:
//
//	0x03 | group | BlockStart(b) | table | index | token | primary key
//
// So each block's entries for a token are one span, and the split queue
// never divides a block (zone.Config.BucketBlocks, BlockUnit): a row and
// its GIN entries are in one tablet, and an INSERT or COPY of rows of one
// shard commits in one phase.

// BlockStart returns the first bucket of the block holding bucket b when
// the bucket space is cut into n blocks (n in [1, NumBuckets]).
func BlockStart(b uint16, n int) uint16 {
	return uint16(blockIndex(b, n) * NumBuckets / n)
}

// blockIndex is i such that i*NumBuckets/n <= b < (i+1)*NumBuckets/n:
// the largest i with floor(i*N/n) <= b, that is i*N/n < b+1.
func blockIndex(b uint16, n int) int {
	return ((int(b)+1)*n - 1) / NumBuckets
}

// BlockStarts lists the first bucket of each of n blocks, in order.
func BlockStarts(n int) []uint16 {
	out := make([]uint16, n)
	for i := range n {
		out[i] = uint16(i * NumBuckets / n)
	}
	return out
}

// InvertedBlocks lists the buckets idx's entries are written under: the
// start of each block of a local index of a hash-partitioned table
// (restricted to the blocks of buckets, when buckets is not nil: a
// predicate fixed the rows' buckets), else bucket 0 alone.
func (t *TableLayout) InvertedBlocks(idx *IndexLayout, buckets []uint16) []uint16 {
	if !t.bucketed(idx) || idx.Blocks == 0 {
		return []uint16{0}
	}
	if buckets == nil {
		return BlockStarts(idx.Blocks)
	}
	var out []uint16
	for _, b := range buckets {
		s := BlockStart(b, idx.Blocks)
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

// entryBucket is the bucket an entry of idx for a row in bucket b is
// written under.
func (idx *IndexLayout) entryBucket(b uint16) uint16 {
	if idx.Blocks == 0 {
		return b
	}
	return BlockStart(b, idx.Blocks)
}

// BlockUnit is the split unit of a key in a group whose buckets are cut
// into n blocks (zone.Config.BucketBlocks): the key's block, so that the
// rows of a block and their local GIN entries stay in one tablet. A key
// that is not a row's (a bare group prefix a DDL split at) has none.
func BlockUnit(key []byte, n int) (kvpb.Span, bool) {
	p, _, err := DecodeKeyPrefix(key)
	if err != nil || n <= 0 || n > NumBuckets {
		return kvpb.Span{}, false
	}
	i := blockIndex(p.Bucket, n)
	gp := GroupPrefix(nil, p.Group)
	start := binary.BigEndian.AppendUint16(gp[:len(gp):len(gp)], uint16(i*NumBuckets/n))
	if i == n-1 {
		return kvpb.Span{Key: start, EndKey: keys.PrefixEnd(gp)}, true
	}
	end := binary.BigEndian.AppendUint16(gp[:len(gp):len(gp)], uint16((i+1)*NumBuckets/n))
	return kvpb.Span{Key: start, EndKey: end}, true
}
