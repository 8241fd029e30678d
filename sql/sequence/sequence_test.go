package sequence

import (
	"context"
	"math"
	"sync"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/testcluster"
)

// seqs is a fake catalog of sequence descriptors by OID.
type seqs struct {
	mu sync.Mutex
	m  map[uint32]*catalog.Sequence
}

func (s *seqs) lookup(_ context.Context, oid uint32) (*catalog.Sequence, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.m[oid]
	if !ok {
		return nil, pgerror.New("42P01", "could not open relation with OID %d", oid)
	}
	return d, nil
}

func (s *seqs) put(d *catalog.Sequence) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[uint32(d.ID)] = d
}

func newEnv(t *testing.T) (*kv.DB, *seqs) {
	return testcluster.StartNode(t, testcluster.Options{}).DB, &seqs{m: map[uint32]*catalog.Sequence{}}
}

func seq(id catalog.ID, start, inc, lo, hi, cache int64, cycle bool) *catalog.Sequence {
	return &catalog.Sequence{ID: id, Name: "s", Version: 1, Start: start, Increment: inc, Min: lo, Max: hi, Cache: cache, Cycle: cycle}
}

func TestNextValSequences(t *testing.T) {
	db, cat := newEnv(t)
	for _, tc := range []struct {
		name string
		seq  *catalog.Sequence
		n    int
		want []int64
		err  string // SQLSTATE of the call after the wanted values
		msg  string
	}{
		{name: "default", seq: seq(16500, 1, 1, 1, math.MaxInt64, 1, false), n: 3, want: []int64{1, 2, 3}},
		{name: "start and step", seq: seq(16501, 10, 5, 1, 100, 1, false), n: 3, want: []int64{10, 15, 20}},
		{name: "descending", seq: seq(16502, -1, -2, -10, -1, 1, false), n: 5, want: []int64{-1, -3, -5, -7, -9},
			err: "2200H", msg: `nextval: reached minimum value of sequence "s" (-10)`},
		{name: "exhausted", seq: seq(16503, 1, 1, 1, 3, 1, false), n: 3, want: []int64{1, 2, 3},
			err: "2200H", msg: `nextval: reached maximum value of sequence "s" (3)`},
		{name: "cycle", seq: seq(16504, 2, 1, 1, 3, 1, true), n: 5, want: []int64{2, 3, 1, 2, 3}},
		{name: "cache", seq: seq(16505, 1, 1, 1, 100, 10, false), n: 4, want: []int64{1, 2, 3, 4}},
		{name: "cache past max", seq: seq(16506, 1, 1, 1, 3, 10, false), n: 3, want: []int64{1, 2, 3},
			err: "2200H", msg: `nextval: reached maximum value of sequence "s" (3)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat.put(tc.seq)
			s := NewSession(db, cat.lookup)
			oid := uint32(tc.seq.ID)
			if _, err := s.CurrVal(oid); pgerror.Code(err) != "55000" || pgerror.Flatten(err).Message != `currval of sequence "s" is not yet defined in this session` {
				t.Fatalf("currval before nextval: %v", err)
			}
			if _, err := s.LastVal(); pgerror.Code(err) != "55000" {
				t.Fatalf("lastval before nextval: %v", err)
			}
			for k := 0; k < tc.n; k++ {
				v, err := s.NextVal(oid)
				if err != nil || v != tc.want[k] {
					t.Fatalf("nextval #%d = %d, %v; want %d", k+1, v, err, tc.want[k])
				}
				if c, err := s.CurrVal(oid); err != nil || c != v {
					t.Fatalf("currval = %d, %v; want %d", c, err, v)
				}
				if l, err := s.LastVal(); err != nil || l != v {
					t.Fatalf("lastval = %d, %v; want %d", l, err, v)
				}
			}
			if tc.err != "" {
				_, err := s.NextVal(oid)
				if pgerror.Code(err) != tc.err || pgerror.Flatten(err).Message != tc.msg {
					t.Fatalf("nextval past the end: %v; want %s %s", err, tc.err, tc.msg)
				}
			}
		})
	}
}

// TestSetVal: setval moves every session's next value; out of bounds is
// 22003; is_called false makes the next nextval return the value itself.
func TestSetVal(t *testing.T) {
	db, cat := newEnv(t)
	sq := seq(16600, 1, 1, 1, 1000, 1, false)
	cat.put(sq)
	a, b := NewSession(db, cat.lookup), NewSession(db, cat.lookup)
	if v, _ := a.NextVal(16600); v != 1 {
		t.Fatalf("first nextval %d", v)
	}
	if _, err := a.SetVal(16600, 100, true); err != nil {
		t.Fatal(err)
	}
	if c, _ := a.CurrVal(16600); c != 100 {
		t.Errorf("currval after setval = %d", c)
	}
	if v, _ := b.NextVal(16600); v != 101 {
		t.Errorf("other session's nextval after setval(100) = %d, want 101", v)
	}
	if _, err := a.SetVal(16600, 50, false); err != nil {
		t.Fatal(err)
	}
	if v, _ := b.NextVal(16600); v != 50 {
		t.Errorf("nextval after setval(50, false) = %d, want 50", v)
	}
	_, err := a.SetVal(16600, 0, true)
	if pgerror.Code(err) != "22003" || pgerror.Flatten(err).Message != `setval: value 0 is out of bounds for sequence "s" (1..1000)` {
		t.Errorf("setval out of bounds: %v", err)
	}
}

// TestConcurrentNextVal: sessions on several goroutines, with and without
// CACHE and with a cycling sequence, never get a value twice (per cycle)
// and, without gaps from caching, get every value.
func TestConcurrentNextVal(t *testing.T) {
	db, cat := newEnv(t)
	const workers, each = 6, 60
	for _, tc := range []struct {
		name  string
		seq   *catalog.Sequence
		exact bool // every value 1..workers*each handed out
	}{
		{"plain", seq(16700, 1, 1, 1, math.MaxInt64, 1, false), true},
		{"cached", seq(16701, 1, 1, 1, math.MaxInt64, 7, false), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat.put(tc.seq)
			var mu sync.Mutex
			seen := map[int64]bool{}
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := NewSession(db, cat.lookup)
					for k := 0; k < each; k++ {
						v, err := s.NextVal(uint32(tc.seq.ID))
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						if seen[v] {
							t.Errorf("value %d handed out twice", v)
						}
						seen[v] = true
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if tc.exact {
				for v := int64(1); v <= workers*each; v++ {
					if !seen[v] {
						t.Fatalf("value %d never handed out", v)
					}
				}
			}
		})
	}
	// A cycling sequence of 10 values shared by concurrent sessions: each
	// pass over 1..10 hands out each value at most once per cycle, so over
	// 30 calls each value appears exactly 3 times.
	cyc := seq(16702, 1, 1, 1, 10, 1, true)
	cat.put(cyc)
	counts := map[int64]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := NewSession(db, cat.lookup)
			for k := 0; k < 10; k++ {
				v, err := s.NextVal(16702)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				counts[v]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for v := int64(1); v <= 10; v++ {
		if counts[v] != 3 {
			t.Errorf("cycling sequence: value %d handed out %d times, want 3 (%v)", v, counts[v], counts)
		}
	}
}

// TestRebase: changing START or INCREMENT keeps the sequence's position.
func TestRebase(t *testing.T) {
	db, cat := newEnv(t)
	old := seq(16800, 1, 1, 1, 1000, 1, false)
	cat.put(old)
	s := NewSession(db, cat.lookup)
	for k := 0; k < 5; k++ {
		if _, err := s.NextVal(16800); err != nil {
			t.Fatal(err)
		}
	}
	changed := seq(16800, 100, 10, 1, 1000, 1, false)
	changed.Version = 2
	if err := Rebase(context.Background(), db, old, changed); err != nil {
		t.Fatal(err)
	}
	cat.put(changed)
	if v, err := s.NextVal(16800); err != nil || v != 15 {
		t.Fatalf("nextval after ALTER INCREMENT 10 = %d, %v; want 15", v, err)
	}
}
