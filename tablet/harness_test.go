package tablet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"
)

// harness is one replica over [keys.Min, keys.Max) on an in-memory engine,
// with a manual clock, used by the datadriven spec (replica_test.go) and
// by the Go tests. Its Sender is the replica itself: with one tablet every
// push and resolution lands here.
type harness struct {
	t      testing.TB
	eng    *storage.Engine
	manual *hlc.ManualClock
	clock  *hlc.Clock
	r      *Replica
	sender *selfSender
	// mu guards txns, names and writes: Go tests send from several
	// goroutines.
	mu    sync.Mutex
	txns  map[string]*kvpb.Transaction
	names map[uuid.UUID]string
	// writes are the spans each transaction wrote, for EndTxn's default
	// lock spans (what a coordinator would track).
	writes map[string][]kvpb.Span
	// defaultSpans is an EndTxn being parsed whose lock spans default to
	// the transaction's writes.
	defaultSpans *kvpb.EndTxnRequest
}

// selfSender forwards to a replica set after construction, counting the
// pushes it carries.
type selfSender struct {
	r      *Replica
	pushes atomic.Int64
}

func (s *selfSender) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	for _, req := range ba.Requests {
		if req.Method() == kvpb.MethodPushTxn {
			s.pushes.Add(1)
		}
	}
	return s.r.Send(ctx, ba)
}

const (
	testClockStart = 1
	testMaxOffset  = 500 * time.Millisecond
)

func newHarness(t testing.TB, cfg Config) *harness {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem(), CountSeeks: true})
	if err != nil {
		t.Fatal(err)
	}
	manual := hlc.NewManualClock(testClockStart)
	h := &harness{
		t:      t,
		eng:    eng,
		manual: manual,
		clock:  hlc.NewClock(manual.UnixNano, testMaxOffset),
		txns:   make(map[string]*kvpb.Transaction),
		names:  make(map[uuid.UUID]string),
		writes: make(map[string][]kvpb.Span),
	}
	h.open(cfg)
	t.Cleanup(func() {
		h.r.Close()
		_ = h.eng.Close()
	})
	return h
}

func (h *harness) open(cfg Config) {
	ss := &selfSender{}
	cfg.Sender = ss
	cfg.VerifyLockTable = true
	r, err := New(h.eng, h.clock, kvpb.TabletDescriptor{TabletID: 1, StartKey: keys.Min, EndKey: keys.Max}, cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ss.r = r
	h.r = r
	h.sender = ss
}

// newTxn creates a pending transaction whose timestamps are all ts. Its ID
// is derived from its name so output and tie-breaks are deterministic.
func (h *harness) newTxn(name string, ts hlc.Timestamp, pri int32) *kvpb.Transaction {
	h.mu.Lock()
	defer h.mu.Unlock()
	var id uuid.UUID
	copy(id[:], name)
	id[15] = byte(len(h.txns) + 1)
	txn := &kvpb.Transaction{
		TxnMeta: kvpb.TxnMeta{ID: id, WriteTimestamp: ts, MinTimestamp: ts, Priority: pri},
		Name:    name,
		Status:  kvpb.Pending, ReadTimestamp: ts,
	}
	h.txns[name] = txn
	h.names[id] = name
	return txn
}

func (h *harness) txn(name string) *kvpb.Transaction {
	h.mu.Lock()
	defer h.mu.Unlock()
	txn, ok := h.txns[name]
	if !ok {
		h.t.Fatalf("unknown txn %q", name)
	}
	return txn
}

// send runs a batch like a coordinator would: a transaction gets its anchor
// on its first write and takes back the transaction the tablet returns.
func (h *harness) send(ctx context.Context, ba *kvpb.BatchRequest, txnName string) (*kvpb.BatchResponse, error) {
	if txnName != "" {
		txn := h.txn(txnName)
		h.mu.Lock()
		for _, req := range ba.Requests {
			if req.Method().IsTxnWrite() {
				if len(txn.Key) == 0 {
					txn.Key = append([]byte(nil), req.Span().Key...)
				}
				h.writes[txnName] = append(h.writes[txnName], req.Span())
			}
		}
		ba.Txn = txn.Clone()
		h.mu.Unlock()
	}
	br, err := h.r.Send(ctx, ba)
	if err == nil && txnName != "" && br.Txn != nil {
		h.mu.Lock()
		h.txns[txnName] = br.Txn.Clone()
		h.mu.Unlock()
	}
	return br, err
}

func (h *harness) name(id uuid.UUID) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n, ok := h.names[id]; ok {
		return n
	}
	return id.String()[:8]
}

// dump prints the engine through mvcc's exported functions, in engine
// order: directory entries, locks, records and versions.
func (h *harness) dump() string {
	var out strings.Builder
	it, err := h.eng.NewIter(storage.IterOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.UnsafeKey()
		key := storage.MVCCKey{Key: append([]byte(nil), k.Key...), Timestamp: k.Timestamp}
		switch {
		case bytes.HasPrefix(key.Key, []byte{0x02, 'm'}):
			v, _ := it.UnsafeValue()
			d, err := DecodeDescriptor(v)
			if err != nil {
				h.t.Fatal(err)
			}
			fmt.Fprintf(&out, "dir: %s\n", &d)
		case keys.IsLocal(key.Key) && len(key.Key) > 1 && key.Key[1] == 'x':
			user, _ := keys.DecodeLock(key.Key)
			in, err := mvcc.GetIntent(h.eng, user)
			if err != nil || in == nil {
				h.t.Fatalf("lock %q: %v", user, err)
			}
			fmt.Fprintf(&out, "lock: %q txn=%s ts=%s\n", user, h.name(in.Txn.ID), in.Txn.WriteTimestamp)
		case keys.IsLocal(key.Key) && len(key.Key) > 1 && key.Key[1] == 't':
			anchor, id, err := keys.DecodeTxnRecord(key.Key)
			if err != nil {
				h.t.Fatal(err)
			}
			rec, _, err := mvcc.GetTxnRecord(h.eng, anchor, id)
			if err != nil {
				h.t.Fatal(err)
			}
			fmt.Fprintf(&out, "record: %q txn=%s %s write=%s", anchor, h.name(rec.ID), rec.Status, rec.WriteTimestamp)
			if len(rec.IgnoredSeqNums) > 0 {
				fmt.Fprintf(&out, " ignored=%s", kvpb.FormatSeqRanges(rec.IgnoredSeqNums))
			}
			out.WriteString("\n")
		case bytes.HasSuffix(key.Key, []byte("gc-threshold")):
			v, _ := it.UnsafeValue()
			th, err := decodeStateTS("gc-threshold", v)
			if err != nil {
				h.t.Fatal(err)
			}
			fmt.Fprintf(&out, "gc-threshold: %q -> %s\n", key.Key, th)
		case keys.IsLocal(key.Key):
			fmt.Fprintf(&out, "local: %q\n", key.Key)
		default:
			res, err := mvcc.Get(h.eng, key.Key, key.Timestamp, mvcc.ReadOptions{Inconsistent: true})
			if err != nil {
				h.t.Fatal(err)
			}
			if res.Timestamp != key.Timestamp || res.Value == nil {
				fmt.Fprintf(&out, "data: %s -> <tombstone>\n", key)
			} else {
				fmt.Fprintf(&out, "data: %s -> %q\n", key, res.Value)
			}
		}
	}
	if err := it.Err(); err != nil {
		h.t.Fatal(err)
	}
	if out.Len() == 0 {
		return "<empty engine>\n"
	}
	return out.String()
}

func (h *harness) fmtTxn(t *kvpb.Transaction) string {
	s := fmt.Sprintf("txn: %s %s read=%s write=%s", h.name(t.ID), t.Status, t.ReadTimestamp, t.WriteTimestamp)
	if len(t.IgnoredSeqNums) > 0 {
		s += fmt.Sprintf(" seq=%d ignored=%s", t.Sequence, kvpb.FormatSeqRanges(t.IgnoredSeqNums))
	}
	return s
}

func (h *harness) fmtResponse(resp kvpb.Response) string {
	switch resp := resp.(type) {
	case *kvpb.GetResponse:
		if resp.Value == nil {
			return "get: <none>"
		}
		return fmt.Sprintf("get: %q @%s", resp.Value, resp.Timestamp)
	case *kvpb.ScanResponse:
		var b strings.Builder
		b.WriteString("scan:")
		for _, kv := range resp.Rows {
			fmt.Fprintf(&b, " %s=%q", kv.Key, kv.Value)
		}
		if resp.ResumeSpan != nil {
			fmt.Fprintf(&b, " resume=%s", resp.ResumeSpan)
		}
		return b.String()
	case *kvpb.DeleteResponse:
		return fmt.Sprintf("delete: found=%t", resp.Found)
	case *kvpb.DeleteRangeResponse:
		return fmt.Sprintf("delete-range: %q", resp.Keys)
	case *kvpb.HeartbeatTxnResponse:
		return fmt.Sprintf("heartbeat: %s %s hb=%s", h.name(resp.Txn.ID), resp.Txn.Status, resp.Txn.LastHeartbeat)
	case *kvpb.PushTxnResponse:
		return fmt.Sprintf("push: %s %s write=%s", h.name(resp.Pushee.ID), resp.Pushee.Status, resp.Pushee.WriteTimestamp)
	case *kvpb.QueryTxnResponse:
		var waiting []string
		for _, w := range resp.WaitingTxns {
			waiting = append(waiting, h.name(w.ID))
		}
		slices.Sort(waiting)
		return fmt.Sprintf("query: found=%t %s waiting=%v", resp.Found, resp.Txn.Status, waiting)
	case *kvpb.ResolveIntentRangeResponse:
		return fmt.Sprintf("resolve-range: %d", resp.Resolved)
	case *kvpb.GCResponse:
		return fmt.Sprintf("gc: removed=%d", resp.Removed)
	case *kvpb.LockResponse:
		if resp.Skipped {
			return "lock: skipped"
		}
	}
	return strings.ToLower(strings.TrimSuffix(fmt.Sprintf("%T", resp)[len("*kvpb."):], "Response")) + ": ok"
}

// fmtErr names the kvpb error type and its decisive fields.
func (h *harness) fmtErr(err error) string {
	var (
		wie *kvpb.WriteIntentError
		wto *kvpb.WriteTooOldError
		rty *kvpb.TransactionRetryError
		abt *kvpb.TransactionAbortedError
		tse *kvpb.TransactionStatusError
		tpe *kvpb.TransactionPushError
		km  *kvpb.TabletKeyMismatchError
		inv *kvpb.InvalidArgumentError
		cfe *kvpb.ConditionFailedError
		bgc *kvpb.BatchTimestampBeforeGCError
	)
	switch {
	case errors.As(err, &wie):
		var s []string
		for _, in := range wie.Intents {
			s = append(s, fmt.Sprintf("%q by %s", in.Key, h.name(in.Txn.ID)))
		}
		return "error: WriteIntentError " + strings.Join(s, ", ")
	case errors.As(err, &wto):
		return fmt.Sprintf("error: WriteTooOldError key=%q ts=%s actual=%s", wto.Key, wto.Timestamp, wto.ActualTimestamp)
	case errors.As(err, &rty):
		return fmt.Sprintf("error: TransactionRetryError %s", rty.Reason)
	case errors.As(err, &abt):
		return fmt.Sprintf("error: TransactionAbortedError %s", abt.Reason)
	case errors.As(err, &tse):
		return fmt.Sprintf("error: TransactionStatusError %s: %s", tse.Status, tse.Msg)
	case errors.As(err, &tpe):
		return fmt.Sprintf("error: TransactionPushError pushee=%s", h.name(tpe.Pushee.ID))
	case errors.As(err, &km):
		return fmt.Sprintf("error: TabletKeyMismatchError key=%q", km.Key)
	case errors.As(err, &inv):
		return "error: InvalidArgumentError " + inv.Msg
	case errors.As(err, &cfe):
		return fmt.Sprintf("error: ConditionFailedError key=%q actual=%q", cfe.Key, cfe.ActualValue)
	case errors.As(err, &bgc):
		return fmt.Sprintf("error: BatchTimestampBeforeGCError ts=%s threshold=%s: %s", bgc.Timestamp, bgc.Threshold, bgc.Msg)
	}
	return "error: " + err.Error()
}

func mustTS(t testing.TB, s string) hlc.Timestamp {
	ts, err := hlc.ParseTimestamp(s)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func mustInt(t testing.TB, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func getIntent(h *harness, key string) (*kvpb.Intent, error) {
	return mvcc.GetIntent(h.eng, []byte(key))
}
