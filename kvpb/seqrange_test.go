package kvpb

import (
	"math"
	"testing"
)

func TestAddIgnoredSeqRange(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []SeqRange
		add  SeqRange
		want string
	}{
		{"first", nil, SeqRange{2, 3}, "[2,3]"},
		{"empty range is no-op", []SeqRange{{2, 3}}, SeqRange{5, 4}, "[2,3]"},
		{"disjoint after", []SeqRange{{2, 3}}, SeqRange{5, 6}, "[2,3] [5,6]"},
		{"disjoint before", []SeqRange{{5, 6}}, SeqRange{2, 3}, "[2,3] [5,6]"},
		{"adjacent merges", []SeqRange{{2, 3}}, SeqRange{4, 4}, "[2,4]"},
		{"covering merges all", []SeqRange{{2, 2}, {5, 5}, {9, 9}}, SeqRange{4, 6}, "[2,2] [4,6] [9,9]"},
		{"outer savepoint swallows inner", []SeqRange{{2, 2}, {5, 5}}, SeqRange{4, 5}, "[2,2] [4,5]"},
		{"bridges two", []SeqRange{{2, 3}, {6, 7}}, SeqRange{4, 5}, "[2,7]"},
		{"max int32", []SeqRange{{math.MaxInt32, math.MaxInt32}}, SeqRange{1, 1}, "[1,1] [2147483647,2147483647]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := FormatSeqRanges(tc.in)
			got := AddIgnoredSeqRange(tc.in, tc.add)
			if s := FormatSeqRanges(got); s != tc.want {
				t.Fatalf("got %s, want %s", s, tc.want)
			}
			if after := FormatSeqRanges(tc.in); after != before {
				t.Fatalf("input modified: %s became %s", before, after)
			}
		})
	}
}

func TestSeqIgnored(t *testing.T) {
	ranges := []SeqRange{{2, 3}, {6, 6}, {9, 12}}
	want := map[int32]bool{2: true, 3: true, 6: true, 9: true, 10: true, 11: true, 12: true}
	for seq := int32(-1); seq <= 14; seq++ {
		if got := SeqIgnored(ranges, seq); got != want[seq] {
			t.Errorf("SeqIgnored(%s, %d) = %v", FormatSeqRanges(ranges), seq, got)
		}
	}
	if SeqIgnored(nil, 0) {
		t.Error("nothing is ignored by no ranges")
	}
}

func TestCloneCopiesIgnoredSeqNums(t *testing.T) {
	txn := &Transaction{IgnoredSeqNums: []SeqRange{{1, 2}}}
	c := txn.Clone()
	c.IgnoredSeqNums[0].End = 9
	if txn.IgnoredSeqNums[0].End != 2 {
		t.Fatal("Clone shares IgnoredSeqNums")
	}
}
