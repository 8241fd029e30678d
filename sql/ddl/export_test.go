package ddl

import (
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
)

// Hooks for the external tests (package ddl_test), which start whole
// servers: package server imports this one, so they cannot live in it.

// SetMoveAfterPage installs fn to run after each page a table move copies
// (nil removes it); it returns the previous hook.
func SetMoveAfterPage(fn func(jobID int64, page int) error) func(jobID int64, page int) error {
	prev := moveTestingHooks.afterPage
	moveTestingHooks.afterPage = fn
	return prev
}

// ErrJobDied, returned by the hook, makes the move stop where it is as if
// its node had died.
var ErrJobDied = errJobDied

// SetIndexHooks installs hooks into online index builds (index_job.go):
// atState runs after each step committed and drained, afterPage after
// each backfill page. It returns the previous ones.
func SetIndexHooks(atState func(jobID int64, st catalog.IndexState) error, afterPage func(jobID int64, rows int64) error) (func(int64, catalog.IndexState) error, func(int64, int64) error) {
	ps, pp := indexTestingHooks.atState, indexTestingHooks.afterPage
	indexTestingHooks.atState, indexTestingHooks.afterPage = atState, afterPage
	return ps, pp
}

// LastBackfill says what the last online backfill on this process did:
// the tablet pieces it read, the sorted runs it spilled, the entries it
// wrote.
func LastBackfill() (pieces, runs int, entries int64) {
	s := lastBackfill.Load()
	if s == nil {
		return 0, 0, 0
	}
	return s.pieces, s.runs, s.entries
}

// LastBackfillSortMemory is the last online backfill's sort memory
// high-water mark and the budget it was to stay under.
func LastBackfillSortMemory() (peak, limit int64) {
	s := lastBackfill.Load()
	if s == nil {
		return 0, 0
	}
	return s.sortPeak, s.sortLimit
}

// SetIndexBuildMemory sets IndexBuildMemory and returns the previous value.
func SetIndexBuildMemory(n int64) int64 {
	prev := IndexBuildMemory
	IndexBuildMemory = n
	return prev
}

// LastBackfillSSTs is how many SSTs the last online backfill on this
// process cut and had ingested.
func LastBackfillSSTs() int {
	s := lastBackfill.Load()
	if s == nil {
		return 0
	}
	return s.ssts
}

// SetBeforeIngest installs fn to run before each SST of an online
// backfill is sent, with its span (nil removes it); it returns the
// previous hook.
func SetBeforeIngest(fn func(jobID int64, start, end []byte) error) func(int64, []byte, []byte) error {
	prev := indexTestingHooks.beforeIngest
	indexTestingHooks.beforeIngest = fn
	return prev
}

// SetBackfillSSTBytes sets the size at which a backfill cuts its SSTs
// and returns the previous one.
func SetBackfillSSTBytes(n int64) int64 {
	prev := backfillSSTBytes
	backfillSSTBytes = n
	return prev
}

// LastBackfillNodes says where the last online backfill on this process
// read its pieces: pieces per node, and how many remote pieces were read
// on the build's node after their fragment failed.
func LastBackfillNodes() (nodes map[uint64]int, fellBack int64) {
	s := lastBackfill.Load()
	if s == nil {
		return nil, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	nodes = map[uint64]int{}
	for n, c := range s.nodes {
		nodes[n] = c
	}
	return nodes, s.fellBack.Load()
}

// SetBackfillRemote lets (true) or stops (false) the backfill placing
// pieces on other nodes, and returns the previous setting.
func SetBackfillRemote(on bool) bool { return backfillRemote.Swap(on) }

// EncodeRemoteEntry and DecodeRemoteEntries are the remote readers'
// entry encoding.
func EncodeRemoteEntry(b []byte, rows int64, key, value string) []byte {
	return appendRemoteEntry(b, rows, []byte(key), []byte(value))
}

// DecodeRemoteEntries returns the [key, value] pairs and the rows read
// enc carries.
func DecodeRemoteEntries(enc [][]byte) ([][2]string, int64, error) {
	b := &entryBuf{}
	n, err := decodeRemoteEntries(b, enc)
	if err != nil {
		return nil, 0, err
	}
	var out [][2]string
	_ = b.each(func(k, v []byte) error {
		out = append(out, [2]string{string(k), string(v)})
		return nil
	})
	return out, n, nil
}

// SetRemoteRead installs fn to run as a node starts reading a piece of
// another node's backfill, and returns the previous one.
func SetRemoteRead(fn func(piece kvpb.Span) error) func(piece kvpb.Span) error {
	prev := indexTestingHooks.remoteRead
	indexTestingHooks.remoteRead = fn
	return prev
}

// SetCutParallelBytes sets the entry bytes from which a backfill cuts
// its SSTs from several key ranges at once, and returns the previous.
func SetCutParallelBytes(n int64) int64 {
	prev := cutParallelBytes
	cutParallelBytes = n
	return prev
}

// LastBackfillRanges is how many key ranges the last online backfill on
// this process cut its SSTs from at once.
func LastBackfillRanges() int {
	s := lastBackfill.Load()
	if s == nil {
		return 0
	}
	return s.ranges
}

// InterpolateKeys is the sub-span readers' cut points between two keys.
func InterpolateKeys(lo, hi []byte, parts int) [][]byte { return interpolateKeys(lo, hi, parts) }

// BackfillReaders is how many readers a build runs at once on a node.
func BackfillReaders() int { return backfillReaders }

// SetRemoteSent installs fn to run after a node sent a batch of a piece
// of another node's backfill (its error fails the fragment), and returns
// the previous one.
func SetRemoteSent(fn func(piece kvpb.Span) error) func(piece kvpb.Span) error {
	prev := indexTestingHooks.remoteSent
	indexTestingHooks.remoteSent = fn
	return prev
}

// SetBackfillSplitBytes sets how many entry bytes a backfill writes into
// a tablet of a global index before it splits it, and returns the
// previous value.
func SetBackfillSplitBytes(n int64) int64 {
	prev := backfillSplitBytes
	backfillSplitBytes = n
	return prev
}

// LastBackfillSplits is how many tablets the last online backfill on
// this process split as it wrote them.
func LastBackfillSplits() int {
	s := lastBackfill.Load()
	if s == nil {
		return 0
	}
	return s.splits
}
