package kv

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

// fakeTablets is a stand-in for a store in routing tests only: it knows the
// true tablet boundaries (which tests change behind the router's back), keeps
// unversioned data in a map, refuses batches sent to the wrong tablet
// exactly as a store does, and records every sub-batch it receives. It
// evaluates just enough (Get, Put, Delete, Scan with limits, DeleteRange,
// EndTxn, ResolveIntentRange, Refresh) to check how the router divides and
// merges; transactional behaviour is tested against the real store.
type fakeTablets struct {
	mu     sync.Mutex
	descs  []kvpb.TabletDescriptor // sorted by StartKey, covering [Min, Max)
	nextID kvpb.TabletID
	data   map[string]string
	trace  []string
	// lookups counts directory lookups.
	lookups int
	// history holds every earlier descs, oldest first (laggingDirectory).
	history [][]kvpb.TabletDescriptor
}

func newFakeTablets() *fakeTablets {
	return &fakeTablets{
		descs:  []kvpb.TabletDescriptor{{TabletID: 1, StartKey: keys.Min, EndKey: keys.Max, Generation: 1}},
		nextID: 2,
		data:   map[string]string{},
	}
}

// split splits the tablet holding key at key.
func (f *fakeTablets) split(key []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, d := range f.descs {
		if d.ContainsKey(key) && !bytes.Equal(d.StartKey, key) {
			left := kvpb.TabletDescriptor{TabletID: d.TabletID, StartKey: d.StartKey, EndKey: key, Generation: d.Generation + 1}
			right := kvpb.TabletDescriptor{TabletID: f.nextID, StartKey: key, EndKey: d.EndKey, Generation: 1}
			f.nextID++
			f.history = append(f.history, slices.Clone(f.descs))
			f.descs = append(f.descs[:i], append([]kvpb.TabletDescriptor{left, right}, f.descs[i+1:]...)...)
			return
		}
	}
}

func (f *fakeTablets) LookupTablet(_ context.Context, key []byte, reverse bool) (kvpb.TabletDescriptor, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups++
	for _, d := range f.descs {
		if coversKey(d, key, reverse) {
			return d, nil
		}
	}
	return kvpb.TabletDescriptor{}, fmt.Errorf("no tablet for %q", key)
}

func (f *fakeTablets) Send(_ context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var desc *kvpb.TabletDescriptor
	for i := range f.descs {
		if f.descs[i].TabletID == ba.TabletID {
			desc = &f.descs[i]
		}
	}
	var names []string
	for _, r := range ba.Requests {
		names = append(names, fmtReq(r))
	}
	f.trace = append(f.trace, fmt.Sprintf("t%d: %s", ba.TabletID, strings.Join(names, ", ")))
	if desc == nil {
		return nil, &kvpb.TabletNotFoundError{TabletID: ba.TabletID}
	}
	for _, r := range ba.Requests {
		if !desc.ContainsSpan(r.Span()) {
			d := *desc
			return nil, &kvpb.TabletKeyMismatchError{Key: r.Span().Key, Tablet: &d}
		}
	}
	br := &kvpb.BatchResponse{Txn: ba.Txn.Clone()}
	writes := false
	for _, r := range ba.Requests {
		resp, err := f.eval(r)
		if err != nil {
			return nil, err
		}
		br.Responses = append(br.Responses, resp)
		switch r.Method() {
		case kvpb.MethodPut, kvpb.MethodDelete:
			writes = true
		case kvpb.MethodEndTxn:
			br.Txn.Status = kvpb.Committed
			br.OnePhaseCommit = writes
		}
	}
	return br, nil
}

func (f *fakeTablets) eval(r kvpb.Request) (kvpb.Response, error) {
	switch req := r.(type) {
	case *kvpb.GetRequest:
		if v, ok := f.data[string(req.Key)]; ok {
			return &kvpb.GetResponse{Value: []byte(v)}, nil
		}
		return &kvpb.GetResponse{}, nil
	case *kvpb.PutRequest:
		f.data[string(req.Key)] = string(req.Value)
		return &kvpb.PutResponse{}, nil
	case *kvpb.DeleteRequest:
		_, ok := f.data[string(req.Key)]
		delete(f.data, string(req.Key))
		return &kvpb.DeleteResponse{Found: ok}, nil
	case *kvpb.ScanRequest:
		return f.scan(req), nil
	case *kvpb.DeleteRangeRequest:
		resp := &kvpb.DeleteRangeResponse{}
		for _, k := range f.keysIn(req.Key, req.EndKey) {
			delete(f.data, k)
			resp.Keys = append(resp.Keys, []byte(k))
		}
		return resp, nil
	case *kvpb.ResolveIntentRangeRequest:
		return &kvpb.ResolveIntentRangeResponse{Resolved: len(f.keysIn(req.Key, req.EndKey))}, nil
	case *kvpb.EndTxnRequest:
		return &kvpb.EndTxnResponse{}, nil
	case *kvpb.RefreshRequest:
		return &kvpb.RefreshResponse{}, nil
	}
	return nil, &kvpb.InvalidArgumentError{Msg: "fake cannot evaluate " + r.Method().String()}
}

func (f *fakeTablets) keysIn(start, end []byte) []string {
	var ks []string
	for k := range f.data {
		if k >= string(start) && k < string(end) {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	return ks
}

func (f *fakeTablets) scan(req *kvpb.ScanRequest) *kvpb.ScanResponse {
	ks := f.keysIn(req.Key, req.EndKey)
	if req.Reverse {
		sort.Sort(sort.Reverse(sort.StringSlice(ks)))
	}
	resp := &kvpb.ScanResponse{}
	var n, size int64
	for i, k := range ks {
		limited := (req.MaxKeys > 0 && n >= req.MaxKeys) || (req.MaxBytes > 0 && size >= req.MaxBytes)
		if limited {
			if req.Reverse {
				resp.ResumeSpan = &kvpb.Span{Key: req.Key, EndKey: keys.Next([]byte(ks[i]))}
			} else {
				resp.ResumeSpan = &kvpb.Span{Key: []byte(ks[i]), EndKey: req.EndKey}
			}
			break
		}
		v := f.data[k]
		resp.Rows = append(resp.Rows, kvpb.KeyValue{Key: []byte(k), Value: []byte(v)})
		n++
		size += int64(len(k) + len(v))
	}
	return resp
}

// takeTrace returns and clears the recorded sub-batches, sorted when the
// router sent them in parallel (their order is then not defined).
func (f *fakeTablets) takeTrace(sorted bool) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.trace
	f.trace = nil
	if sorted {
		sort.Strings(t)
	}
	return t
}

func fmtReq(r kvpb.Request) string {
	switch req := r.(type) {
	case *kvpb.GetRequest:
		return fmt.Sprintf("get %s", req.Key)
	case *kvpb.PutRequest:
		return fmt.Sprintf("put %s", req.Key)
	case *kvpb.DeleteRequest:
		return fmt.Sprintf("del %s", req.Key)
	case *kvpb.ScanRequest:
		s := fmt.Sprintf("scan %s-%s", req.Key, req.EndKey)
		if req.Reverse {
			s = "r" + s
		}
		if req.MaxKeys > 0 {
			s += fmt.Sprintf(" max=%d", req.MaxKeys)
		}
		if req.MaxBytes > 0 {
			s += fmt.Sprintf(" bytes=%d", req.MaxBytes)
		}
		return s
	case *kvpb.DeleteRangeRequest:
		return fmt.Sprintf("delrange %s-%s", req.Key, req.EndKey)
	case *kvpb.ResolveIntentRangeRequest:
		return fmt.Sprintf("resolve %s-%s", req.Key, req.EndKey)
	case *kvpb.EndTxnRequest:
		return fmt.Sprintf("endtxn %s", req.Key)
	case *kvpb.RefreshRequest:
		return fmt.Sprintf("refresh %s-%s", req.Key, req.EndKey)
	}
	return r.Method().String()
}
