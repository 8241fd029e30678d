package tablet

// TestReplica runs the specification files in testdata/replica. Each file
// starts with an empty replica over [keys.Min, keys.Max) on an in-memory
// engine; its clock is manual, starting at wall time 1 with a maximum
// offset of 500ms; the transaction liveness threshold is 5s.
//
// The mini-language (timestamps are "wall" or "wall,logical"; keys and
// values are plain words):
//
//	txn name=<n> ts=<ts> [pri=<p>]
//	    A pending transaction whose read, write and min timestamps are ts.
//	    Its anchor becomes the first key it writes.
//	txn-update name=<n> [read=<ts>] [write=<ts>] [seq=<n>] [ignore=<a>-<b>]
//	    Changes the coordinator's copy (as a refresh or push would; seq is
//	    the next writes' sequence number, ignore adds [a, b] to the ignored
//	    sequence numbers, as a rollback to a savepoint does).
//	batch [txn=<n>] [ts=<ts>] [now=<ts>] [wait=error] [tablet=<id>]
//	<request>
//	...
//	    Sends one batch. Requests, one per line:
//	      get k=<key>
//	      scan k=<key> end=<key> [reverse] [max=<n>]
//	      put k=<key> v=<value> | put k=<key> size=<bytes>
//	      cput k=<key> v=<value> [exp=<value>]
//	      del k=<key>
//	      delrange k=<key> end=<key>
//	      end-txn commit|abort [spans=<k>|<k>-<end>,...] [may-move]   (default: every span the txn wrote)
//	      heartbeat [now=<ts>]
//	      push pushee=<n> [pusher=<n>] [type=abort|timestamp|touch] [to=<ts>]
//	      query txn=<n>
//	      lock k=<key> [end=<key>] [unreplicated] [skip-locked]
//	      resolve k=<key> [end=<key>] txn=<n> status=pending|committed|aborted [unreplicated-only]
//	          (with the coordinator's copy's ignored sequence numbers)
//	      gc k=<key> end=<key> threshold=<ts>
//	      bulkput k=<key> v=<value> [unique]
//	      refresh k=<key> [end=<key>] from=<ts> [strict]
//	    Output: one line per response, then the transaction as the tablet
//	    returned it and "1pc" for a one-phase commit; or the error. A batch
//	    in a transaction updates the coordinator's copy from the response.
//	    Pushes here never wait: a failed push prints its error (with
//	    wait=error) or, by default, is sent with wait=error too.
//	dump
//	    The engine: directory entries, locks, records and versions.
//	locks
//	    The in-memory lock table.
//	tscache k=<key> [end=<key>]
//	    The timestamp cache's maximum over the span.
//	advance-clock by=<duration>
//	metrics
//	    The replica's counters.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cockroachdb/datadriven"
)

func TestReplica(t *testing.T) {
	datadriven.Walk(t, "testdata/replica", func(t *testing.T, path string) {
		h := newHarness(t, Config{})
		datadriven.RunTest(t, path, h.run)
	})
}

type lineArgs map[string]string

func parseLine(line string) (string, lineArgs) {
	fields := strings.Fields(line)
	a := lineArgs{}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		a[k] = v
	}
	return fields[0], a
}

func (h *harness) run(t *testing.T, td *datadriven.TestData) string {
	args := lineArgs{}
	for _, a := range td.CmdArgs {
		args[a.Key] = strings.Join(a.Vals, ",")
	}
	switch td.Cmd {
	case "txn":
		pri := int32(0)
		if p, ok := args["pri"]; ok {
			pri = int32(mustInt(t, p))
		}
		h.newTxn(args["name"], mustTS(t, args["ts"]), pri)
		return ""
	case "txn-update":
		txn := h.txn(args["name"])
		if s, ok := args["read"]; ok {
			txn.ReadTimestamp = mustTS(t, s)
		}
		if s, ok := args["write"]; ok {
			txn.WriteTimestamp = mustTS(t, s)
		}
		if s, ok := args["seq"]; ok {
			txn.Sequence = int32(mustInt(t, s))
		}
		if s, ok := args["ignore"]; ok {
			lo, hi, _ := strings.Cut(s, "-")
			txn.IgnoredSeqNums = kvpb.AddIgnoredSeqRange(txn.IgnoredSeqNums, kvpb.SeqRange{Start: int32(mustInt(t, lo)), End: int32(mustInt(t, hi))})
		}
		return h.fmtTxn(txn)
	case "batch":
		return h.runBatch(t, td, args)
	case "dump":
		return h.dump()
	case "locks":
		if s := h.r.locks.String(); s != "" {
			return h.renameIDs(s)
		}
		return "<no locks>\n"
	case "tscache":
		span := kvpb.Span{Key: []byte(args["k"]), EndKey: []byte(args["end"])}
		if args["end"] == "" {
			span.EndKey = nil
		}
		ts, txn := h.r.tscache.getMax(span)
		return fmt.Sprintf("max=%s txn=%s", ts, h.nameOrNone(txn))
	case "advance-clock":
		d, err := time.ParseDuration(args["by"])
		if err != nil {
			t.Fatal(err)
		}
		h.manual.Advance(d)
		return ""
	case "metrics":
		m := h.r.Metrics()
		return fmt.Sprintf("1pc=%d intents=%d", m.OnePhaseCommits.Load(), m.IntentsWritten.Load())
	}
	t.Fatalf("unknown command %q", td.Cmd)
	return ""
}

func (h *harness) renameIDs(s string) string {
	for id, n := range h.names {
		s = strings.ReplaceAll(s, id.String()[:8], n)
	}
	return s
}

func (h *harness) runBatch(t *testing.T, td *datadriven.TestData, args lineArgs) string {
	ba := &kvpb.BatchRequest{}
	if s, ok := args["ts"]; ok {
		ba.Timestamp = mustTS(t, s)
	}
	if s, ok := args["now"]; ok {
		ba.Now = mustTS(t, s)
	}
	if s, ok := args["tablet"]; ok {
		ba.TabletID = kvpb.TabletID(mustInt(t, s))
	}
	// Pushes in specs never block: blocking is tested in Go (wait_test.go).
	ba.WaitPolicy = kvpb.WaitError
	txnName := args["txn"]
	for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		ba.Requests = append(ba.Requests, h.parseRequest(t, line, txnName))
	}
	if txnName != "" {
		// Anchor the transaction on its first write, as a coordinator does.
		txn := h.txn(txnName)
		for _, req := range ba.Requests {
			if len(txn.Key) == 0 && req.Method().IsTxnWrite() {
				txn.Key = append([]byte(nil), req.Span().Key...)
			}
		}
		for _, req := range ba.Requests {
			if et, ok := req.(*kvpb.EndTxnRequest); ok {
				et.Key = txn.Key
			}
		}
	}
	if et := h.defaultSpans; et != nil {
		h.defaultSpans = nil
		et.LockSpans = append(et.LockSpans, h.writes[txnName]...)
		for _, req := range ba.Requests {
			if req.Method().IsTxnWrite() {
				et.LockSpans = append(et.LockSpans, req.Span())
			}
		}
	}
	var out strings.Builder
	br, err := h.send(context.Background(), ba, txnName)
	if err != nil {
		out.WriteString(h.fmtErr(err) + "\n")
		return out.String()
	}
	for _, resp := range br.Responses {
		out.WriteString(h.fmtResponse(resp) + "\n")
	}
	if br.Txn != nil {
		out.WriteString(h.fmtTxn(br.Txn) + "\n")
	}
	if br.OnePhaseCommit {
		out.WriteString("1pc\n")
	}
	return out.String()
}

func (h *harness) parseRequest(t *testing.T, line, txnName string) kvpb.Request {
	cmd, a := parseLine(line)
	key := []byte(a["k"])
	var end []byte
	if a["end"] != "" {
		end = []byte(a["end"])
	}
	switch cmd {
	case "get":
		return &kvpb.GetRequest{Key: key}
	case "scan":
		_, rev := a["reverse"]
		req := &kvpb.ScanRequest{Key: key, EndKey: end, Reverse: rev}
		if s, ok := a["max"]; ok {
			req.MaxKeys = mustInt(t, s)
		}
		return req
	case "put":
		v := []byte(a["v"])
		if s, ok := a["size"]; ok {
			v = make([]byte, mustInt(t, s))
		}
		return &kvpb.PutRequest{Key: key, Value: v}
	case "cput":
		exp, ok := a["exp"]
		return &kvpb.ConditionalPutRequest{Key: key, Value: []byte(a["v"]), Expected: []byte(exp), ExpectExists: ok}
	case "del":
		return &kvpb.DeleteRequest{Key: key}
	case "delrange":
		return &kvpb.DeleteRangeRequest{Key: key, EndKey: end}
	case "end-txn":
		_, commit := a["commit"]
		_, move := a["may-move"]
		// Key is set by runBatch once the anchor is known.
		req := &kvpb.EndTxnRequest{Commit: commit, MayMoveCommit: move}
		if s, ok := a["spans"]; ok {
			for _, sp := range strings.Split(s, ",") {
				k, e, _ := strings.Cut(sp, "-")
				span := kvpb.Span{Key: []byte(k)}
				if e != "" {
					span.EndKey = []byte(e)
				}
				req.LockSpans = append(req.LockSpans, span)
			}
		} else {
			// Filled in by runBatch once the batch's writes are known.
			req.LockSpans = nil
			h.defaultSpans = req
		}
		return req
	case "heartbeat":
		req := &kvpb.HeartbeatTxnRequest{Key: h.txn(txnName).Key}
		if s, ok := a["now"]; ok {
			req.Now = mustTS(t, s)
		}
		return req
	case "push":
		pushee := h.txn(a["pushee"])
		req := &kvpb.PushTxnRequest{Key: pushee.Key, Pushee: pushee.TxnMeta, PushType: kvpb.PushAbort}
		if s, ok := a["pusher"]; ok {
			req.Pusher = *h.txn(s).Clone()
		}
		switch a["type"] {
		case "timestamp":
			req.PushType = kvpb.PushTimestamp
		case "touch":
			req.PushType = kvpb.PushTouch
		}
		if s, ok := a["to"]; ok {
			req.PushTo = mustTS(t, s)
		}
		return req
	case "query":
		txn := h.txn(a["txn"])
		return &kvpb.QueryTxnRequest{Key: txn.Key, Txn: txn.TxnMeta}
	case "resolve":
		txn := h.txn(a["txn"])
		var st kvpb.TxnStatus
		switch a["status"] {
		case "committed":
			st = kvpb.Committed
		case "aborted":
			st = kvpb.Aborted
		}
		_, unrepl := a["unreplicated-only"]
		if end != nil {
			return &kvpb.ResolveIntentRangeRequest{Key: key, EndKey: end, Txn: txn.TxnMeta, Status: st, IgnoredSeqNums: txn.IgnoredSeqNums, UnreplicatedOnly: unrepl}
		}
		return &kvpb.ResolveIntentRequest{Key: key, Txn: txn.TxnMeta, Status: st, IgnoredSeqNums: txn.IgnoredSeqNums, UnreplicatedOnly: unrepl}
	case "lock":
		_, unrepl := a["unreplicated"]
		_, skip := a["skip-locked"]
		return &kvpb.LockRequest{Key: key, EndKey: end, Unreplicated: unrepl, SkipLocked: skip}
	case "bulkput":
		_, unique := a["unique"]
		return &kvpb.BulkPutRequest{Key: key, Value: []byte(a["v"]), MustNotExist: unique}
	case "gc":
		return &kvpb.GCRequest{Key: key, EndKey: end, Threshold: mustTS(t, a["threshold"])}
	case "refresh":
		_, strict := a["strict"]
		return &kvpb.RefreshRequest{Key: key, EndKey: end, From: mustTS(t, a["from"]), Strict: strict}
	}
	t.Fatalf("unknown request %q", cmd)
	return nil
}

func (h *harness) nameOrNone(id [16]byte) string {
	if id == [16]byte{} {
		return "none"
	}
	return h.name(id)
}
