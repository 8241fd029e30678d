package parser

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// chunk is a piece of replacement text. A copied chunk is a verbatim slice
// of the original text starting at orig, so offsets inside it map back
// byte for byte; a synthetic chunk is text the rewriter made up, and every
// offset inside it maps to its anchor orig (the construct it came from).
type chunk struct {
	text   string
	orig   int
	copied bool
}

func synth(anchor int, text string) chunk { return chunk{text: text, orig: anchor} }

func copyOf(src string, start, end int) chunk {
	return chunk{text: src[start:end], orig: start, copied: true}
}

// edit replaces the original bytes [start, end) with chunks. Edits never
// overlap (invariant 3 of the package doc); a zero-width edit inserts.
type edit struct {
	start, end int
	with       []chunk
	seq        int
	// tag, when nonzero, asks render where the edit's text landed (a
	// derived statement, so Parse can recognise it).
	tag int
}

// segment says where a run of the rewritten text came from.
type segment struct {
	rw     int // first byte of the run in the rewritten text
	orig   int // where it came from (copied) or is anchored (synthetic)
	copied bool
}

// offsetMap maps byte offsets of the rewritten text back to the original.
type offsetMap struct {
	segs    []segment
	rwLen   int
	origLen int
}

// toOriginal maps a byte offset of the rewritten text to a byte offset of
// the original text.
func (m *offsetMap) toOriginal(rw int) int {
	if rw >= m.rwLen {
		return m.origLen
	}
	i := sort.Search(len(m.segs), func(i int) bool { return m.segs[i].rw > rw }) - 1
	if i < 0 {
		return 0
	}
	s := m.segs[i]
	if !s.copied {
		return s.orig
	}
	return s.orig + (rw - s.rw)
}

// render applies edits to src. marks are original offsets lying outside
// every edit (piece boundaries); render returns where each one lands in the
// rewritten text, and where the text of each tagged edit starts.
func render(src string, edits []edit, marks []int) (string, *offsetMap, []int, map[int]int, error) {
	sort.SliceStable(edits, func(i, j int) bool {
		a, b := edits[i], edits[j]
		if a.start != b.start {
			return a.start < b.start
		}
		if a.end != b.end {
			return a.end < b.end
		}
		return a.seq < b.seq
	})
	var out strings.Builder
	m := &offsetMap{origLen: len(src)}
	emit := func(c chunk) {
		if c.text == "" {
			return
		}
		m.segs = append(m.segs, segment{rw: out.Len(), orig: c.orig, copied: c.copied})
		out.WriteString(c.text)
	}
	rwMarks := make([]int, len(marks))
	tagged := make(map[int]int)
	mi := 0
	placeMarks := func(upTo int) { // marks in [pos, upTo) of a copied run
		for mi < len(marks) && marks[mi] <= upTo {
			rwMarks[mi] = out.Len() - (upTo - marks[mi])
			mi++
		}
	}
	pos := 0
	for _, e := range edits {
		if e.start < pos || e.end < e.start || e.end > len(src) {
			return "", nil, nil, nil, fmt.Errorf("overlapping dialect rewrites at byte %d", e.start)
		}
		emit(copyOf(src, pos, e.start))
		placeMarks(e.start)
		if e.tag != 0 {
			tagged[e.tag] = out.Len()
		}
		for _, c := range e.with {
			emit(c)
		}
		pos = e.end
	}
	emit(copyOf(src, pos, len(src)))
	placeMarks(len(src))
	m.rwLen = out.Len()
	return out.String(), m, rwMarks, tagged, nil
}

// charPos converts a byte offset of s into a Postgres cursor position: the
// 1-based count of characters before it.
func charPos(s string, off int) int {
	if off > len(s) {
		off = len(s)
	}
	return utf8.RuneCountInString(s[:off]) + 1
}

// byteOffset converts a 1-based character position of s into a byte
// offset; positions past the end land at len(s).
func byteOffset(s string, pos int) int {
	n := 1
	for i := range s {
		if n == pos {
			return i
		}
		n++
	}
	return len(s)
}
