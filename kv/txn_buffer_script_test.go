package kv

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cockroachdb/datadriven"
)

// TestTxnBufferScripts runs the scripts in testdata/txn_buffer: one
// transaction at a time over a real store (testEnv), its writes buffered
// or not, checking what it reads, what its commit would send, and what it
// leaves committed. The mini-language:
//
//	stored
//	k=v ...
//	    Write each k=v outside any transaction (k= deletes k).
//	begin [buffered]
//	    Start a snapshot transaction, with write buffering on if asked.
//	run
//	<op>
//	...
//	    Run the ops as one batch (one sequence number, like one SQL
//	    statement's writes) and print what the reads return, or the error.
//	    Ops: put k v | cput k v (exp=v | absent) | del k | delrange a b |
//	    get k | scan a b.
//	savepoint name / rollback name
//	    Take a savepoint, or roll back to one taken earlier.
//	commit-writes
//	    Print the writes a commit would send from the buffer now.
//	commit
//	    Commit and print how (phases), or the error.
//	committed
//	    Print every committed key, read outside any transaction.
func TestTxnBufferScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/txn_buffer", func(t *testing.T, path string) {
		e := newTestEnv(t, envOptions{})
		ctx := context.Background()
		var txn *Txn
		sps := map[string]SavepointToken{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "stored":
				for _, f := range strings.Fields(d.Input) {
					k, v, _ := strings.Cut(f, "=")
					if v == "" {
						mustOK(t, e.db.Delete(ctx, []byte(k)))
						continue
					}
					e.mustPut(k, v)
				}
				return ""
			case "begin":
				txn = e.db.NewTxn(ctx, filepath.Base(path), Snapshot)
				if d.HasArg("buffered") {
					txn.EnableWriteBuffering()
				}
				sps = map[string]SavepointToken{}
				return ""
			case "run":
				b, err := parseScriptBatch(d.Input)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				if err := txn.Run(ctx, b); err != nil {
					return fmt.Sprintf("error: %v\n", err)
				}
				var out strings.Builder
				for i, r := range b.reqs {
					switch req := r.(type) {
					case *kvpb.GetRequest:
						if !b.Results[i].Found {
							fmt.Fprintf(&out, "get %s: <none>\n", req.Key)
							continue
						}
						fmt.Fprintf(&out, "get %s: %s\n", req.Key, b.Results[i].Rows[0].Value)
					case *kvpb.ScanRequest:
						fmt.Fprintf(&out, "scan %s-%s: %s\n", req.Key, req.EndKey, rowsString(b.Results[i].Rows))
					}
				}
				if out.Len() == 0 {
					return "ok\n"
				}
				return out.String()
			case "savepoint":
				sp, err := txn.Savepoint(ctx)
				mustOK(t, err)
				sps[d.CmdArgs[0].Key] = sp
				return ""
			case "rollback":
				sp, ok := sps[d.CmdArgs[0].Key]
				if !ok {
					d.Fatalf(t, "no savepoint %s", d.CmdArgs[0].Key)
				}
				mustOK(t, txn.RollbackToSavepoint(ctx, sp))
				return ""
			case "commit-writes":
				txn.mu.Lock()
				var writes []kvpb.Request
				if txn.mu.buf != nil {
					writes = txn.mu.buf.commitWrites(txn.mu.proto.IgnoredSeqNums)
				}
				txn.mu.Unlock()
				var out strings.Builder
				for _, w := range writes {
					out.WriteString(fmtWrite(w) + "\n")
				}
				if out.Len() == 0 {
					return "<nothing>\n"
				}
				return out.String()
			case "commit":
				if err := txn.Commit(ctx); err != nil {
					return fmt.Sprintf("error: %v\n", err)
				}
				return fmt.Sprintf("committed in %d phase(s)\n", txn.CommitPhases())
			case "committed":
				rows, err := e.db.Scan(ctx, []byte("a"), []byte("z"), 0)
				mustOK(t, err)
				return rowsString(rows) + "\n"
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

// parseScriptBatch reads one op a line (see TestTxnBufferScripts).
func parseScriptBatch(input string) (*Batch, error) {
	b := &Batch{}
	for _, line := range strings.Split(strings.TrimSpace(input), "\n") {
		f := strings.Fields(line)
		want := map[string]int{"put": 3, "cput": 4, "del": 2, "delrange": 3, "get": 2, "scan": 3}
		if len(f) == 0 || want[f[0]] == 0 || len(f) != want[f[0]] {
			return nil, fmt.Errorf("bad op %q", line)
		}
		switch f[0] {
		case "put":
			b.Put([]byte(f[1]), []byte(f[2]))
		case "cput":
			if f[3] == "absent" {
				b.CPut([]byte(f[1]), []byte(f[2]), nil, false)
				continue
			}
			exp, ok := strings.CutPrefix(f[3], "exp=")
			if !ok {
				return nil, fmt.Errorf("cput wants exp=v or absent: %q", line)
			}
			b.CPut([]byte(f[1]), []byte(f[2]), []byte(exp), true)
		case "del":
			b.Del([]byte(f[1]))
		case "delrange":
			b.DelRange([]byte(f[1]), []byte(f[2]))
		case "get":
			b.Get([]byte(f[1]))
		case "scan":
			b.Scan([]byte(f[1]), []byte(f[2]), 0)
		}
	}
	return b, nil
}

// fmtWrite prints a write a commit sends, with a CPut's condition.
func fmtWrite(r kvpb.Request) string {
	switch req := r.(type) {
	case *kvpb.PutRequest:
		return fmt.Sprintf("put %s=%s", req.Key, req.Value)
	case *kvpb.ConditionalPutRequest:
		if !req.ExpectExists {
			return fmt.Sprintf("cput %s=%s if absent", req.Key, req.Value)
		}
		return fmt.Sprintf("cput %s=%s if %s", req.Key, req.Value, req.Expected)
	case *kvpb.LockRequest:
		return fmt.Sprintf("lock %q-%q", req.Key, req.EndKey)
	case *kvpb.DeleteRangeRequest:
		return fmt.Sprintf("delrange %q-%q", req.Key, req.EndKey)
	}
	return fmtReq(r)
}
