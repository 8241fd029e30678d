package ddl

// The backfill's readers on the tablets' leaseholders (issue 18):
//
//	build's node (the gateway)                 leaseholder of a piece
//	  distsql.Planner.PlanScan: the table's      cairn.DistSQL/Flow, Spec
//	  span cut at tablets, each piece placed ──▶  {Processor: backfill}:
//	  on its leaseholder                          BackfillProcessor reads
//	  pieces of this node: readPiece              the piece at T_b
//	  (≤ backfillReaders at once)                 (readEntries), encodes
//	  pieces of node n: a flow each, ≤            the index entries ──┐
//	  backfillReaders at once per node  ◀── batches of entries ─────┘
//	         │ entries, from every reader
//	         ▼
//	  the build's sorter, SSTs per target tablet (index_backfill.go)
//
// Decoding rows and encoding their entries (a GIN index's tokens above
// all) is most of a backfill's reading work; on the leaseholders it runs
// beside the data, on every node at once, and only entries cross the
// network. The sort and the SSTs stay on the build's node: one sorted
// stream checks uniqueness on adjacent keys and cuts SSTs at the target
// tablets' bounds.
//
// Invariants:
//
//  1. Every piece is read exactly once into the sorter: a remote piece
//     whose fragment fails before it delivered any entry is read again
//     on this node (placement is advice, distsql invariant 1: a dead,
//     unreachable or older node costs a local read, not the build); one
//     that fails after delivering some fails the build, whose job then
//     fails or is retried as a whole (entries of half a piece read twice
//     would be duplicates on the sorted stream).
//  2. Remote readers read at exactly T_b (kv.DB.ScanAt, as local ones):
//     the fragment's snapshot has no uncertainty window, since a write
//     above T_b is one of the write-only state's, shadowing the entry
//     written at T_b, never one the backfill must see.
//  3. A partial index's pieces are read on this node: its predicate is
//     built with the session's type context (regclass, enums), which a
//     remote node does not have.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/distsql"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/jackc/pgerrcode"
)

// BackfillProcessorName is the distsql.Spec.Processor of a backfill
// reader's fragment.
const BackfillProcessorName = "index-backfill"

// backfillProcTag opens a backfill fragment's Proc. It is not '{': a
// node that ran it as SQL (sql/exec reads Proc as JSON) refuses it as
// corrupt rather than scanning something else.
const backfillProcTag = 'B'

// backfillProc is what a backfill fragment's Proc carries after the tag
// (JSON): the table's descriptor as the build's step committed it (the
// index in its backfilling state) and the index to encode.
type backfillProc struct {
	Table json.RawMessage `json:"table"`
	Index catalog.IndexID `json:"index"`
}

// placedPiece is one tablet's part of the table and the node to read it.
type placedPiece struct {
	span kvpb.Span
	node uint64
}

// planPieces cuts the table's rows at tablet bounds and places each
// piece: on its leaseholder when the build runs under a node's
// distributed execution (distsql.FromContext) and the index has no
// predicate (invariant 3), else on this node (node 0 when there is no
// runner).
func (b *indexBuild) planPieces(ctx context.Context, layout *rowenc.TableLayout, predText string, ts hlc.Timestamp) ([]placedPiece, uint64, error) {
	span := layout.IndexSpan(&layout.Primary)
	r := distsql.FromContext(ctx)
	if r == nil || r.Planner == nil || r.Gateway == nil || predText != "" || !backfillRemote.Load() {
		pieces, err := tabletPieces(ctx, b.e.x.DB, span)
		if err != nil {
			return nil, 0, err
		}
		self := uint64(0)
		if r != nil && r.Planner != nil {
			self = r.Planner.Gateway
		}
		out := make([]placedPiece, len(pieces))
		for i, p := range pieces {
			out[i] = placedPiece{span: p, node: self}
		}
		return out, self, nil
	}
	frags, err := r.Planner.PlanScan(ctx, span, distsql.Snapshot{ReadTimestamp: ts, UncertaintyLimit: ts})
	if err != nil {
		return nil, 0, err
	}
	out := make([]placedPiece, len(frags))
	for i, f := range frags {
		out[i] = placedPiece{span: f.Spec.Span, node: f.Node}
	}
	return out, r.Planner.Gateway, nil
}

// backfillRemote lets the build place pieces on other nodes (tests
// compare it with reading everything on the build's node).
var backfillRemote atomic.Bool

func init() { backfillRemote.Store(true) }

// readPieces runs the readers of pieces (placed by planPieces; self is
// this node) until all are read or one fails: at most backfillReaders
// at once per node, local pieces through readPiece, the others as
// fragments of flows to their nodes. It records where each piece was
// read in stats.
func (b *indexBuild) readPieces(ctx context.Context, t *catalog.Table, layout *rowenc.TableLayout, il *rowenc.IndexLayout,
	predText string, ts hlc.Timestamp, pieces []placedPiece, self uint64, out chan<- *entryBuf, done *atomic.Int64,
	stats *backfillStats) error {
	byNode := map[uint64][]kvpb.Span{}
	for _, p := range pieces {
		byNode[p.node] = append(byNode[p.node], p.span)
	}
	var proc []byte
	if len(byNode) > 1 || byNode[self] == nil {
		enc, err := catalog.Encode(t)
		if err != nil {
			return err
		}
		j, err := json.Marshal(backfillProc{Table: enc, Index: b.indexID})
		if err != nil {
			return err
		}
		proc = append([]byte{backfillProcTag}, j...)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel(err) })
	}
	var wg sync.WaitGroup
	for node, spans := range byNode {
		queue := make(chan kvpb.Span, len(spans))
		for _, s := range spans {
			queue <- s
		}
		close(queue)
		for range min(backfillReaders, len(spans)) {
			wg.Go(func() {
				for s := range queue {
					if ctx.Err() != nil {
						return
					}
					readOn := self
					var err error
					if node == self {
						err = b.readPiece(ctx, t, layout, il, predText, ts, s, out, done)
					} else {
						var delivered bool
						readOn, delivered, err = b.readRemote(ctx, node, s, ts, proc, out, done)
						if err != nil && !delivered && ctx.Err() == nil {
							// Invariant 1: nothing of it reached the sorter.
							stats.fellBack.Add(1)
							readOn = self
							err = b.readPiece(ctx, t, layout, il, predText, ts, s, out, done)
						}
					}
					if err != nil {
						fail(err)
						return
					}
					stats.readOn(readOn)
				}
			})
		}
	}
	wg.Wait()
	return firstErr
}

// readRemote reads piece through a flow of one fragment on node, sending
// its entries to out: it returns the node the fragment reports it ran on
// and whether any entry reached out.
func (b *indexBuild) readRemote(ctx context.Context, node uint64, piece kvpb.Span, ts hlc.Timestamp, proc []byte,
	out chan<- *entryBuf, done *atomic.Int64) (ranOn uint64, delivered bool, err error) {
	r := distsql.FromContext(ctx)
	frag := distsql.Fragment{Node: node, Spec: distsql.Spec{
		Span:      piece,
		Snapshot:  distsql.Snapshot{ReadTimestamp: ts, UncertaintyLimit: ts},
		Proc:      proc,
		Processor: BackfillProcessorName,
	}}
	f := r.Gateway.Start(ctx, []distsql.Fragment{frag}, nil)
	defer f.Close()
	if delivered, err = drainRemote(ctx, f, out, done); err != nil {
		return 0, delivered, err
	}
	return f.Stats()[0].Node, delivered, nil
}

// remoteBatches is the gateway's side of a remote reader's flow
// (*distsql.Flow; a test's fake).
type remoteBatches interface {
	Next() (distsql.Batch, bool, error)
}

// drainRemote sends the entries of src's batches to out until src ends or
// fails, and returns whether any entry reached out.
//
// The rows the fragment read count in done (the build's progress) only
// once one of its entries reached out, or when it ended: until then a
// failure makes the caller read the piece again on this node (invariant
// 1), whose reader counts the same rows, so counting them as they came
// would count them twice (a piece whose batches carry only rows: a GIN
// index over NULLs, a fragment that fails after its last batch).
func drainRemote(ctx context.Context, src remoteBatches, out chan<- *entryBuf, done *atomic.Int64) (delivered bool, err error) {
	var pending int64 // rows read, not yet counted in done
	for {
		batch, ok, err := src.Next()
		if err != nil {
			return delivered, err
		}
		if !ok {
			break
		}
		ents := entryBufs.Get().(*entryBuf)
		rows, err := decodeRemoteEntries(ents, batch.Rows)
		if err != nil {
			ents.recycle()
			return delivered, err
		}
		pending += rows
		if ents.len() == 0 {
			ents.recycle()
		} else {
			select {
			case out <- ents:
				delivered = true
			case <-ctx.Done():
				return delivered, context.Cause(ctx)
			}
		}
		if delivered {
			done.Add(pending)
			pending = 0
		}
	}
	done.Add(pending)
	return delivered, nil
}

// BackfillProcessor reads the pieces of index backfills that builds on
// other nodes place on this node (distsql.Processor, registered under
// BackfillProcessorName). Safe for concurrent use.
type BackfillProcessor struct {
	DB *kv.DB
	// Pieces counts the pieces this node has read for other nodes'
	// builds (tests assert it; an operator can see the work moved).
	Pieces atomic.Int64
}

var _ distsql.Processor = (*BackfillProcessor)(nil)

// Run implements distsql.Processor: it reads spec's span at its
// snapshot's timestamp and emits the rows' entries of the index Proc
// names, each entry encoded by appendRemoteEntry.
func (p *BackfillProcessor) Run(ctx context.Context, spec distsql.Spec, emit func(rows [][]byte) error) error {
	if h := indexTestingHooks.remoteRead; h != nil {
		if err := h(spec.Span); err != nil {
			return err
		}
	}
	if len(spec.Proc) == 0 || spec.Proc[0] != backfillProcTag {
		return pgerror.New(pgerrcode.ProtocolViolation, "ddl: corrupt backfill fragment")
	}
	var bp backfillProc
	if err := json.Unmarshal(spec.Proc[1:], &bp); err != nil {
		return pgerror.New(pgerrcode.ProtocolViolation, "ddl: corrupt backfill fragment: %v", err)
	}
	d, err := catalog.Decode(bp.Table)
	if err != nil {
		return pgerror.Wrapf(err, pgerrcode.ProtocolViolation, "ddl: backfill fragment's table: %v", err)
	}
	t, ok := d.(*catalog.Table)
	if !ok {
		return pgerror.New(pgerrcode.ProtocolViolation, "ddl: backfill fragment reads a %T, not a table", d)
	}
	ix := t.IndexByID(bp.Index)
	if ix == nil {
		return pgerror.New(pgerrcode.ProtocolViolation, "ddl: table %q has no index %d", t.Name, bp.Index)
	}
	if ix.Predicate != "" {
		// Invariant 3: the gateway never sends one.
		return pgerror.New(pgerrcode.FeatureNotSupported, "ddl: a partial index's backfill reads on the build's node")
	}
	layout, err := t.Layout()
	if err != nil {
		return err
	}
	il := layout.Index(uint32(bp.Index))
	if il == nil {
		return fmt.Errorf("ddl: index %d of table %q missing from its layout", bp.Index, t.Name)
	}
	err = readEntries(ctx, p.DB, t.Name, layout, il, nil, spec.Snapshot.ReadTimestamp, spec.Span,
		func(batch *entryBuf, rows int64) error {
			defer batch.recycle()
			enc := make([][]byte, 0, max(batch.len(), 1))
			n := rows // carried by the first entry
			_ = batch.each(func(k, v []byte) error {
				enc = append(enc, appendRemoteEntry(nil, n, k, v))
				n = 0
				return nil
			})
			if batch.len() == 0 {
				enc = append(enc, appendRemoteEntry(nil, rows, nil, nil))
			}
			if err := emit(enc); err != nil {
				return err
			}
			if h := indexTestingHooks.remoteSent; h != nil {
				return h(spec.Span)
			}
			return nil
		})
	if err == nil {
		p.Pieces.Add(1)
	}
	return err
}

// appendRemoteEntry encodes one entry of a remote reader's batch: the
// rows read since the previous entry (progress), the key's length, the
// key, the value. An empty key (no index key is empty) carries only
// rows.
func appendRemoteEntry(b []byte, rows int64, key, value []byte) []byte {
	b = binary.AppendUvarint(b, uint64(rows))
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	return append(b, value...)
}

var errCorruptEntry = errors.New("ddl: corrupt entry from a backfill fragment")

// decodeRemoteEntries decodes a batch of appendRemoteEntry's entries
// into dst, and returns the rows read they carry.
func decodeRemoteEntries(dst *entryBuf, enc [][]byte) (int64, error) {
	var rows int64
	for _, e := range enc {
		n, w := binary.Uvarint(e)
		if w <= 0 {
			return 0, errCorruptEntry
		}
		e = e[w:]
		kl, w := binary.Uvarint(e)
		if w <= 0 || uint64(len(e)-w) < kl {
			return 0, errCorruptEntry
		}
		e = e[w:]
		rows += int64(n)
		if kl == 0 {
			continue
		}
		dst.add(e[:kl], e[kl:])
	}
	return rows, nil
}

// readOn counts a piece read on node.
func (s *backfillStats) readOn(node uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nodes == nil {
		s.nodes = map[uint64]int{}
	}
	s.nodes[node]++
}
