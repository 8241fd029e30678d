package ddl

// Sub-span readers (issue 18): a table the build's node reads in fewer
// pieces than it has readers (a regular table is one tablet until it
// passes the split size, 512 MiB) had one reader, so one goroutine
// scanned and decoded every row while the other cores idled. Each such
// piece is cut into subSpansPerReader × backfillReaders sub-spans read
// like pieces (readPieces: at most backfillReaders at once, each with its
// sorter, index_backfill_sort.go); more sub-spans than readers evens out
// sub-spans of unequal sizes (a reader that finishes takes the next).
//
// The cuts cost a few one-key reads, no scan of the piece: the piece's
// first and last keys at the backfill timestamp, points between them by
// interpolating their bytes after the common prefix as a number (keys
// are order-preserving encodings, so for an integer or timestamp key
// this cuts by key values), and at each point the first key at or above
// it. Invariants:
//
//  1. A piece's sub-spans cover it exactly, in order, without overlap:
//     the bounds are strictly increasing and strictly inside it.
//  2. No row is cut: a bound inside the table's primary index is a row
//     key (rowenc.TableLayout.PrimaryRowKey of the first key at or above
//     the point), and every entry of a row begins with its row key, so
//     each row is read, whole, by one reader (a reader's RowFetcher
//     assembles a row from consecutive entries).
//  3. Remote pieces (index_backfill_dist.go) are not cut: they are read
//     on their leaseholders, in parallel with each other already.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/rowenc"
)

// subSpansPerReader is how many sub-spans per reader a local piece is
// cut into when the build's node has more readers than local pieces.
const subSpansPerReader = 2

// splitLocalPieces cuts the pieces placed on self into sub-spans when
// there are fewer of them than backfillReaders (see above); pieces keep
// their order.
func (b *indexBuild) splitLocalPieces(ctx context.Context, layout *rowenc.TableLayout, pieces []placedPiece, self uint64,
	ts hlc.Timestamp) ([]placedPiece, error) {
	local := 0
	for _, p := range pieces {
		if p.node == self {
			local++
		}
	}
	if local == 0 || local >= backfillReaders {
		return pieces, nil
	}
	parts := (subSpansPerReader*backfillReaders + local - 1) / local
	out := make([]placedPiece, 0, len(pieces)+local*(parts-1))
	for _, p := range pieces {
		if p.node != self {
			out = append(out, p)
			continue
		}
		bounds, err := b.subSpanBounds(ctx, layout, p.span, parts, ts)
		if err != nil {
			return nil, err
		}
		start := p.span.Key
		for _, k := range bounds {
			out = append(out, placedPiece{span: kvpb.Span{Key: start, EndKey: k}, node: self})
			start = k
		}
		out = append(out, placedPiece{span: kvpb.Span{Key: start, EndKey: p.span.EndKey}, node: self})
	}
	return out, nil
}

// subSpanBounds returns up to parts-1 keys cutting span into sub-spans
// (invariants 1 and 2), read at ts; none for a span with fewer than two
// keys.
func (b *indexBuild) subSpanBounds(ctx context.Context, layout *rowenc.TableLayout, span kvpb.Span, parts int,
	ts hlc.Timestamp) ([][]byte, error) {
	first, ok, err := b.edgeKey(ctx, span, false, ts)
	if err != nil || !ok {
		return nil, err
	}
	last, ok, err := b.edgeKey(ctx, span, true, ts)
	if err != nil || !ok {
		return nil, err
	}
	var bounds [][]byte
	for _, point := range interpolateKeys(first, last, parts) {
		at, ok, err := b.edgeKey(ctx, kvpb.Span{Key: point, EndKey: span.EndKey}, false, ts)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if rk, ok := layout.PrimaryRowKey(at); ok {
			at = rk
		}
		if bytes.Compare(at, span.Key) <= 0 || (len(bounds) > 0 && bytes.Compare(at, bounds[len(bounds)-1]) <= 0) {
			continue
		}
		bounds = append(bounds, bytes.Clone(at))
	}
	return bounds, nil
}

// edgeKey reads the first (or with reverse the last) key of span visible
// at ts.
func (b *indexBuild) edgeKey(ctx context.Context, span kvpb.Span, reverse bool, ts hlc.Timestamp) ([]byte, bool, error) {
	ba := &kvpb.BatchRequest{Requests: []kvpb.Request{&kvpb.ScanRequest{Key: span.Key, EndKey: span.EndKey, MaxKeys: 1, Reverse: reverse}}}
	ba.Timestamp = ts
	br, err := b.e.x.DB.Send(ctx, ba)
	if err != nil {
		return nil, false, fmt.Errorf("reading the edge of %s: %w", span, err)
	}
	if len(br.Responses) != 1 {
		return nil, false, fmt.Errorf("reading the edge of %s: %d responses", span, len(br.Responses))
	}
	resp, ok := br.Responses[0].(*kvpb.ScanResponse)
	if !ok {
		return nil, false, fmt.Errorf("reading the edge of %s: a %T", span, br.Responses[0])
	}
	if len(resp.Rows) == 0 {
		return nil, false, nil
	}
	return resp.Rows[0].Key, true, nil
}

// interpolateKeys returns up to parts-1 keys strictly between lo and hi
// (lo < hi), evenly spaced in the 8 bytes after their common prefix read
// as a big-endian number (missing bytes as zeros), in increasing order.
func interpolateKeys(lo, hi []byte, parts int) [][]byte {
	c := 0
	for c < len(lo) && c < len(hi) && lo[c] == hi[c] {
		c++
	}
	num := func(k []byte) uint64 {
		var w [8]byte
		if c < len(k) {
			copy(w[:], k[c:])
		}
		return binary.BigEndian.Uint64(w[:])
	}
	l, h := num(lo), num(hi)
	if h <= l || parts < 2 {
		return nil
	}
	step := (h - l) / uint64(parts)
	if step == 0 {
		step = 1
	}
	var out [][]byte
	for i := uint64(1); i < uint64(parts); i++ {
		v := l + step*i
		if v >= h {
			break
		}
		k := binary.BigEndian.AppendUint64(append([]byte(nil), hi[:c]...), v)
		if bytes.Compare(k, lo) <= 0 || bytes.Compare(k, hi) >= 0 {
			continue
		}
		out = append(out, k)
	}
	return out
}
