package kv

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cockroachdb/datadriven"
)

// TestDistSender runs testdata/dist_sender: how the router divides a batch
// over tablets, what each tablet is sent, and what the caller gets back. It
// runs against fakeTablets, whose boundaries the file changes behind the
// router's cache.
//
// Commands:
//
//	split key=<k> [cached]
//	    Split the tablet holding k at k. Without "cached" the router's cache
//	    is not told (a split behind its back); with it the new descriptors
//	    are looked up into the cache at once.
//	put <k>=<v> ...
//	    Store values directly in the fake tablets.
//	send [parallel]
//	<request>
//	...
//	    Send one batch through the DistSender. Requests, one per line:
//	    get <k> | put <k> <v> | del <k> | delrange <a> <b> | resolve <a> <b> |
//	    refresh <a> <b> | endtxn <k> |
//	    scan <a> <b> [max=<n>] [bytes=<n>] [reverse]
//	    A batch with endtxn carries a transaction. Prints the sub-batches
//	    the tablets received ("t<id>: requests"; sorted with "parallel",
//	    since parallel sends have no defined order), then one line per
//	    response, or the error.
//	cache
//	    Print the router's cached descriptors.
//	lookups
//	    Print how many directory lookups happened since the last "lookups".
func TestDistSender(t *testing.T) {
	f := newFakeTablets()
	clock := hlc.NewClock(hlc.NewManualClock(1000).UnixNano, 0)
	cache := NewTabletCache(f)
	ds := NewDistSender(f, cache, clock, 4)
	ctx := context.Background()

	datadriven.RunTest(t, "testdata/dist_sender", func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "split":
			var key string
			d.ScanArgs(t, "key", &key)
			f.split([]byte(key))
			if d.HasArg("cached") {
				left, err := f.LookupTablet(ctx, []byte(key), true)
				if err != nil {
					t.Fatal(err)
				}
				right, err := f.LookupTablet(ctx, []byte(key), false)
				if err != nil {
					t.Fatal(err)
				}
				cache.Insert(left)
				cache.Insert(right)
			}
			return ""
		case "put":
			for _, a := range d.CmdArgs {
				f.data[a.Key] = a.Vals[0]
			}
			return ""
		case "send":
			ba, err := parseBatch(d.Input)
			if err != nil {
				t.Fatal(err)
			}
			br, err := ds.Send(ctx, ba)
			var out strings.Builder
			for _, l := range f.takeTrace(d.HasArg("parallel")) {
				fmt.Fprintf(&out, "%s\n", l)
			}
			if err != nil {
				fmt.Fprintf(&out, "error: %v\n", err)
				return out.String()
			}
			fmt.Fprintf(&out, "---\n")
			for i, r := range br.Responses {
				fmt.Fprintf(&out, "%s -> %s\n", fmtReq(ba.Requests[i]), fmtResp(r))
			}
			if br.OnePhaseCommit {
				fmt.Fprintf(&out, "one-phase commit\n")
			}
			return out.String()
		case "cache":
			cache.mu.RLock()
			defer cache.mu.RUnlock()
			var out strings.Builder
			for _, d := range cache.descs {
				fmt.Fprintf(&out, "%s\n", d.String())
			}
			return out.String()
		case "lookups":
			f.mu.Lock()
			defer f.mu.Unlock()
			n := f.lookups
			f.lookups = 0
			return strconv.Itoa(n)
		}
		t.Fatalf("unknown command %q", d.Cmd)
		return ""
	})
}

func parseBatch(input string) (*kvpb.BatchRequest, error) {
	ba := &kvpb.BatchRequest{}
	for _, line := range strings.Split(strings.TrimSpace(input), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("bad request %q", line)
		}
		b := func(i int) []byte { return []byte(f[i]) }
		switch f[0] {
		case "get":
			ba.Add(&kvpb.GetRequest{Key: b(1)})
		case "put":
			ba.Add(&kvpb.PutRequest{Key: b(1), Value: b(2)})
		case "del":
			ba.Add(&kvpb.DeleteRequest{Key: b(1)})
		case "delrange":
			ba.Add(&kvpb.DeleteRangeRequest{Key: b(1), EndKey: b(2)})
		case "resolve":
			ba.Add(&kvpb.ResolveIntentRangeRequest{Key: b(1), EndKey: b(2)})
		case "refresh":
			ba.Add(&kvpb.RefreshRequest{Key: b(1), EndKey: b(2)})
		case "endtxn":
			ba.Add(&kvpb.EndTxnRequest{Key: b(1), Commit: true})
			ba.Txn = &kvpb.Transaction{Name: "test"}
		case "scan":
			s := &kvpb.ScanRequest{Key: b(1), EndKey: b(2)}
			for _, opt := range f[3:] {
				k, v, _ := strings.Cut(opt, "=")
				n, _ := strconv.ParseInt(v, 10, 64)
				switch k {
				case "max":
					s.MaxKeys = n
				case "bytes":
					s.MaxBytes = n
				case "reverse":
					s.Reverse = true
				default:
					return nil, fmt.Errorf("bad scan option %q", opt)
				}
			}
			ba.Add(s)
		default:
			return nil, fmt.Errorf("unknown request %q", f[0])
		}
	}
	return ba, nil
}

func fmtResp(r kvpb.Response) string {
	switch resp := r.(type) {
	case *kvpb.GetResponse:
		if resp.Value == nil {
			return "<none>"
		}
		return string(resp.Value)
	case *kvpb.ScanResponse:
		var parts []string
		for _, kv := range resp.Rows {
			parts = append(parts, fmt.Sprintf("%s=%s", kv.Key, kv.Value))
		}
		s := "[" + strings.Join(parts, " ") + "]"
		if resp.ResumeSpan != nil {
			s += " resume=" + fmt.Sprintf("%q-%q", resp.ResumeSpan.Key, resp.ResumeSpan.EndKey)
		}
		return s
	case *kvpb.DeleteRangeResponse:
		var parts []string
		for _, k := range resp.Keys {
			parts = append(parts, string(k))
		}
		return "deleted [" + strings.Join(parts, " ") + "]"
	case *kvpb.DeleteResponse:
		return fmt.Sprintf("found=%t", resp.Found)
	case *kvpb.ResolveIntentRangeResponse:
		return fmt.Sprintf("resolved=%d", resp.Resolved)
	}
	return "ok"
}

// TestSingleTabletAgreesWithDivide: SingleTablet (oneTablet, which
// allocates nothing) says one tablet exactly when dividing the requests
// makes one group holding every request whole.
func TestSingleTabletAgreesWithDivide(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t, envOptions{splits: []string{"c", "m"}})
	pt := func(k string) kvpb.Request { return &kvpb.PutRequest{Key: []byte(k)} }
	sc := func(k, end string) kvpb.Request { return &kvpb.ScanRequest{Key: []byte(k), EndKey: []byte(end)} }
	for _, tc := range []struct {
		name string
		reqs []kvpb.Request
		want bool
	}{
		{"none", nil, true},
		{"one key", []kvpb.Request{pt("d")}, true},
		{"two keys, one tablet", []kvpb.Request{pt("d"), pt("k"), &kvpb.EndTxnRequest{Key: []byte("d")}}, true},
		{"two tablets", []kvpb.Request{pt("d"), pt("x")}, false},
		{"scan to the tablet's end", []kvpb.Request{pt("d"), sc("e", "m")}, true},
		{"scan across a split", []kvpb.Request{pt("d"), sc("e", "n")}, false},
		{"first on another tablet", []kvpb.Request{pt("x"), pt("d")}, false},
		{"refresh beside the writes", []kvpb.Request{&kvpb.RefreshRequest{Key: []byte("e")}, pt("d"), &kvpb.EndTxnRequest{Key: []byte("d")}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.db.ds.SingleTablet(ctx, tc.reqs)
			if err != nil {
				t.Fatal(err)
			}
			groups, err := e.db.ds.divide(ctx, tc.reqs)
			if err != nil {
				t.Fatal(err)
			}
			divided := len(groups) == 0 || (len(groups) == 1 && len(groups[0].pieces) == len(tc.reqs))
			if got != tc.want || divided != tc.want {
				t.Fatalf("SingleTablet = %v, divide says %v, want %v", got, divided, tc.want)
			}
		})
	}
}
