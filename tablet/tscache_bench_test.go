package tablet

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// BenchmarkTSCacheRowReads records row reads of keys drawn uniformly from
// rows distinct rows, pgbench -S's pattern (100,000 rows at scale 1), with
// the exact maps (slots=0) or a ReadTable of slots slots. The key is built
// in one buffer, hot in the cache as a request's is.
func BenchmarkTSCacheRowReads(b *testing.B) {
	for _, slots := range []int{0, DefaultReadTableSlots, 1 << 20} {
		for _, rows := range []int{100_000, 1_000_000} {
			b.Run(fmt.Sprintf("slots=%d/rows=%d", slots, rows), func(b *testing.B) {
				c := newTSCache(hlc.Timestamp{}, DefaultTSCacheMaxEntries)
				if slots > 0 {
					c.reads = NewReadTable(slots)
				}
				var key, end [11]byte
				copy(key[:], "\xf6\x6a\x89")
				rng := rand.New(rand.NewPCG(1, 2))
				wall := int64(1)
				read := func() {
					wall++
					binary.BigEndian.PutUint64(key[3:], uint64(rng.IntN(rows)))
					end = key
					copy(end[:], keys.PrefixEnd(key[:]))
					c.add(kvpb.Span{Key: key[:], EndKey: end[:]}, hlc.Timestamp{WallTime: wall}, uuid.Nil)
				}
				for range 3 * rows {
					read()
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					read()
				}
			})
		}
	}
}
