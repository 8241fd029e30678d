package parser

import (
	"fmt"
	"strings"
)

// This file walks one statement's tokens and calls the rules of dialect.go
// at their sites; it also holds the edit primitives rules use.

type stmtKind int

const (
	stmtOther stmtKind = iota
	stmtCreateTable
	stmtCreateIndex
	stmtAlterTable
)

// derived is a statement the rewriter adds after the one it came from (an
// inline INDEX becomes its own CREATE INDEX).
type derived struct {
	with  []chunk
	notes []Annotation
	tag   int // of the edit inserting it
	len   int // bytes of its text
}

// stmtRewriter rewrites one piece (statement) of the input.
type stmtRewriter struct {
	src     string
	toks    []token
	semi    int    // byte offset of the statement's semicolon, or -1
	claimed []bool // tokens an edit already covers (invariant 3)
	edits   *[]edit
	nextTag *int // last edit tag handed out, shared by all pieces
	kind    stmtKind

	// For CREATE TABLE: the table name's tokens, for derived indexes.
	tableFrom, tableTo int
	ifNotExists        bool
	// elemEnd bounds the element (or ALTER TABLE command) being walked.
	elemEnd int

	options      []string // storage parameters for the statement itself
	optionAnchor int
	notes        []Annotation
	derived      []derived
}

// tok returns toks[i], or a zero token (no word, not a name) past either
// end, so rules can look ahead without bounds checks.
func (w *stmtRewriter) tok(i int) token {
	if i < 0 || i >= len(w.toks) {
		return token{}
	}
	return w.toks[i]
}

func (w *stmtRewriter) word(i int) string {
	if i < 0 || i >= len(w.toks) {
		return ""
	}
	return w.toks[i].word
}

// errorAt reports a malformed dialect construct at toks[i], or at the end
// of the statement when i is past its last token.
func (w *stmtRewriter) errorAt(i int, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	var off int
	switch {
	case i < len(w.toks):
		off = w.toks[i].start
		msg += fmt.Sprintf(" at or near %q", w.src[w.toks[i].start:w.toks[i].end])
	case w.semi >= 0:
		off = w.semi
		msg += ` at or near ";"`
	default:
		// Like Postgres, point just past the last character.
		off = len(w.src)
		msg += " at end of input"
	}
	return &SyntaxError{Code: CodeSyntaxError, Message: msg, Position: charPos(w.src, off)}
}

func (w *stmtRewriter) note(dst *[]Annotation, rule string, from, to int) {
	*dst = append(*dst, Annotation{
		Rule:     rule,
		Position: charPos(w.src, w.toks[from].start),
		Text:     w.src[w.toks[from].start:w.toks[to].end],
	})
}

func (w *stmtRewriter) addOption(anchorTok int, name, value string) {
	if len(w.options) == 0 {
		w.optionAnchor = w.toks[anchorTok].start
	}
	w.options = append(w.options, name+" = "+value)
}

func (w *stmtRewriter) copyToks(from, to int) chunk {
	return copyOf(w.src, w.toks[from].start, w.toks[to].end)
}

func (w *stmtRewriter) claim(from, to int) error {
	for k := from; k <= to; k++ {
		if w.claimed[k] {
			return &SyntaxError{Code: CodeSyntaxError, Message: fmt.Sprintf("internal error: overlapping dialect rewrites at byte %d", w.toks[k].start)}
		}
		w.claimed[k] = true
	}
	return nil
}

// replace substitutes the bytes of tokens [from, to].
func (w *stmtRewriter) replace(from, to int, with ...chunk) error {
	if err := w.claim(from, to); err != nil {
		return err
	}
	*w.edits = append(*w.edits, edit{start: w.toks[from].start, end: w.toks[to].end, with: with, seq: len(*w.edits)})
	return nil
}

// remove deletes tokens [from, to] with the blank space before them.
func (w *stmtRewriter) remove(from, to int) error {
	if err := w.claim(from, to); err != nil {
		return err
	}
	start := w.toks[from].start
	if from > 0 {
		start = w.toks[from-1].end
	}
	*w.edits = append(*w.edits, edit{start: start, end: w.toks[to].end, seq: len(*w.edits)})
	return nil
}

func (w *stmtRewriter) insertAt(off int, with ...chunk) error {
	*w.edits = append(*w.edits, edit{start: off, end: off, with: with, seq: len(*w.edits)})
	return nil
}

func (w *stmtRewriter) insertBefore(i int, with ...chunk) error {
	return w.insertAt(w.toks[i].start, with...)
}

func (w *stmtRewriter) insertAfter(i int, with ...chunk) error {
	return w.insertAt(w.toks[i].end, with...)
}

// walk rewrites the statement.
func (w *stmtRewriter) walk() error {
	next, err := w.try(siteStatement, 0)
	if err != nil || next > 0 {
		return err
	}
	switch {
	case w.word(0) == "create":
		if open := w.createTableHeader(); open > 0 {
			err = w.walkCreateTable(open)
		} else if open := w.createIndexHeader(); open > 0 {
			err = w.walkCreateIndex(open)
		}
	case w.word(0) == "alter" && w.word(1) == "table":
		err = w.walkAlterTable()
	}
	if err != nil {
		return err
	}
	return w.walkCasts()
}

// qualName returns the index of the last token of the dotted name starting
// at toks[i], or -1 if there is no name there.
func (w *stmtRewriter) qualName(i int) int {
	if i >= len(w.toks) || !w.toks[i].isName() {
		return -1
	}
	for w.word(i+1) == "." && i+2 < len(w.toks) && w.toks[i+2].isName() {
		i += 2
	}
	return i
}

// createTableHeader recognises CREATE [GLOBAL|LOCAL] [TEMP|TEMPORARY|
// UNLOGGED] TABLE [IF NOT EXISTS] name ( and returns the index of the
// parenthesis opening the element list, or 0.
func (w *stmtRewriter) createTableHeader() int {
	i := 1
	if w.word(i) == "global" || w.word(i) == "local" {
		i++
	}
	switch w.word(i) {
	case "temp", "temporary", "unlogged":
		i++
	}
	if w.word(i) != "table" {
		return 0
	}
	i++
	if w.word(i) == "if" && w.word(i+1) == "not" && w.word(i+2) == "exists" {
		w.ifNotExists = true
		i += 3
	}
	last := w.qualName(i)
	if last < 0 || w.word(last+1) != "(" {
		return 0
	}
	w.kind, w.tableFrom, w.tableTo = stmtCreateTable, i, last
	return last + 1
}

// createIndexHeader recognises CREATE [UNIQUE] INDEX ... ON [ONLY] name
// [USING method] ( and returns the index of the parenthesis opening the
// column list, or 0.
func (w *stmtRewriter) createIndexHeader() int {
	i := 1
	if w.word(i) == "unique" {
		i++
	}
	if w.word(i) != "index" {
		return 0
	}
	for i < len(w.toks) && w.word(i) != "on" {
		if w.word(i) == "(" {
			return 0
		}
		i++
	}
	i++
	if w.word(i) == "only" {
		i++
	}
	last := w.qualName(i)
	if last < 0 {
		return 0
	}
	i = last + 1
	if w.word(i) == "using" {
		i += 2
	}
	if w.word(i) != "(" {
		return 0
	}
	w.kind = stmtCreateIndex
	return i
}

// walkTop tries the rules of s at each top-level, unclaimed token of
// [from, to), skipping parenthesised groups no rule consumed.
func (w *stmtRewriter) walkTop(s site, from, to int) error {
	for i := from; i < to; {
		next, err := w.try(s, i)
		if err != nil {
			return err
		}
		if next > i {
			i = next
			continue
		}
		if w.word(i) == "(" {
			if i = matching(w.toks, i); i < 0 {
				return nil
			}
		}
		i++
	}
	return nil
}

// constraintStarts are the words that begin a table constraint element.
var constraintStarts = map[string]bool{
	"constraint": true, "primary": true, "unique": true, "check": true,
	"foreign": true, "exclude": true, "like": true,
}

func (w *stmtRewriter) walkCreateTable(open int) error {
	close := matching(w.toks, open)
	if close < 0 {
		// Unbalanced: still walk to the end, so a malformed dialect
		// construct reports its own error rather than Postgres's.
		close = len(w.toks)
	}
	type element struct{ from, to int }
	var elems []element
	for a := open + 1; a < close; {
		b := a
		for b < close && w.word(b) != "," {
			if w.word(b) == "(" {
				if b = matching(w.toks, b); b < 0 {
					b = close - 1
				}
			}
			b++
		}
		elems = append(elems, element{a, b})
		a = b + 1
	}
	removed := make([]bool, len(elems))
	for k, e := range elems {
		if e.from == e.to {
			continue
		}
		w.elemEnd = e.to
		next, err := w.try(siteTableElement, e.from)
		if err != nil {
			return err
		}
		switch {
		case next >= e.to:
			removed[k] = true
		case constraintStarts[w.word(e.from)]:
			err = w.walkTop(siteConstraint, e.from, e.to)
		default:
			err = w.walkColumnDef(e.from, e.to)
		}
		if err != nil {
			return err
		}
	}
	if err := w.removeElements(removed, func(k int) (int, int) { return elems[k].from, elems[k].to }); err != nil {
		return err
	}
	if close == len(w.toks) {
		return nil
	}
	if err := w.walkTop(siteTableTail, close+1, len(w.toks)); err != nil {
		return err
	}
	return w.finish(close+1, map[string]bool{"tablespace": true, "on": true, "as": true})
}

// removeElements deletes the removed elements of a comma-separated list
// and exactly the commas that would otherwise dangle: a comma survives
// only when it precedes a kept element and some kept element precedes it.
func (w *stmtRewriter) removeElements(removed []bool, bounds func(k int) (from, to int)) error {
	drop := make(map[int]bool)
	keptBefore := false
	for k := range removed {
		from, to := bounds(k)
		if removed[k] {
			for t := from; t < to; t++ {
				drop[t] = true
			}
		}
		if k > 0 && (removed[k] || !keptBefore) {
			drop[from-1] = true // the comma before this element
		}
		if !removed[k] {
			keptBefore = true
		}
	}
	for t := 0; t < len(w.toks); t++ {
		if !drop[t] {
			continue
		}
		u := t
		for drop[u+1] {
			u++
		}
		if err := w.remove(t, u); err != nil {
			return err
		}
		t = u
	}
	return nil
}

// walkColumnDef handles `name type constraints...` in [from, to).
func (w *stmtRewriter) walkColumnDef(from, to int) error {
	w.elemEnd = to
	i := from + 1
	next, err := w.try(siteColumnType, i)
	if err != nil {
		return err
	}
	return w.walkTop(siteConstraint, next, to)
}

func (w *stmtRewriter) walkCreateIndex(open int) error {
	close := matching(w.toks, open)
	if close < 0 {
		return nil
	}
	w.elemEnd = len(w.toks)
	if err := w.walkTop(siteIndexTail, close+1, len(w.toks)); err != nil {
		return err
	}
	return w.finish(close+1, map[string]bool{"tablespace": true, "where": true})
}

// walkAlterTable handles ALTER TABLE [IF EXISTS] [ONLY] name [*] cmd, ...
// for the commands that carry column types: ADD [COLUMN] and
// ALTER [COLUMN] ... TYPE.
func (w *stmtRewriter) walkAlterTable() error {
	i := 2
	if w.word(i) == "if" && w.word(i+1) == "exists" {
		i += 2
	}
	if w.word(i) == "only" {
		i++
	}
	last := w.qualName(i)
	if last < 0 {
		return nil
	}
	w.kind = stmtAlterTable
	i = last + 1
	if w.word(i) == "*" {
		i++
	}
	for a := i; a < len(w.toks); {
		b := a
		for b < len(w.toks) && w.word(b) != "," {
			if w.word(b) == "(" {
				if b = matching(w.toks, b); b < 0 {
					return nil
				}
			}
			b++
		}
		if err := w.walkAlterCommand(a, b); err != nil {
			return err
		}
		a = b + 1
	}
	return nil
}

func (w *stmtRewriter) walkAlterCommand(a, b int) error {
	p := a + 1
	if w.word(p) == "column" {
		p++
	}
	switch w.word(a) {
	case "add":
		if w.word(p) == "if" && w.word(p+1) == "not" && w.word(p+2) == "exists" {
			p += 3
		}
		if p >= b || constraintStarts[w.word(p)] {
			return nil
		}
		return w.walkColumnDef(p, b)
	case "alter":
		p++ // the column name
		if w.word(p) == "set" && w.word(p+1) == "data" {
			p += 2
		}
		if w.word(p) == "type" && p+1 < b {
			_, err := w.try(siteColumnType, p+1)
			return err
		}
	}
	return nil
}

// walkCasts rewrites type aliases in `expr::type` and CAST(expr AS type)
// anywhere in the statement.
func (w *stmtRewriter) walkCasts() error {
	for i := 0; i < len(w.toks); i++ {
		switch w.word(i) {
		case "::":
			if _, err := w.try(siteColumnType, i+1); err != nil {
				return err
			}
		case "cast":
			if w.word(i+1) != "(" {
				continue
			}
			close := matching(w.toks, i+1)
			as := -1
			for j := i + 2; j < close; j++ {
				switch w.word(j) {
				case "(":
					j = matching(w.toks, j)
				case "as":
					as = j
				}
			}
			if as > 0 {
				if _, err := w.try(siteColumnType, as+1); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// finish adds the collected storage parameters to the statement, merging
// them into an existing WITH (...) after tail, or inserting a WITH before
// the first clause that must follow it (stops), and appends derived
// statements.
func (w *stmtRewriter) finish(tail int, stops map[string]bool) error {
	if len(w.options) > 0 {
		opts := strings.Join(w.options, ", ")
		at := -1 // token to insert before
		for i := tail; i < len(w.toks); i++ {
			if w.claimed[i] {
				continue
			}
			word := w.word(i)
			if word == "with" && w.word(i+1) == "(" {
				if close := matching(w.toks, i+1); close > 0 {
					if err := w.insertBefore(close, synth(w.optionAnchor, ", "+opts)); err != nil {
						return err
					}
					at = -2
					break
				}
			}
			if stops[word] && (word != "on" || w.word(i+1) == "commit") {
				at = i
				break
			}
			if word == "(" {
				if i = matching(w.toks, i); i < 0 {
					break
				}
			}
		}
		var err error
		switch {
		case at >= 0:
			err = w.insertBefore(at, synth(w.optionAnchor, "WITH ("+opts+") "))
		case at == -1:
			err = w.insertAfter(len(w.toks)-1, synth(w.optionAnchor, " WITH ("+opts+")"))
		}
		if err != nil {
			return err
		}
	}
	at := w.toks[len(w.toks)-1].end
	for k := range w.derived {
		d := &w.derived[k]
		*w.nextTag++
		d.tag = *w.nextTag
		for _, c := range d.with {
			d.len += len(c.text)
		}
		*w.edits = append(*w.edits, edit{start: at, end: at, with: d.with, seq: len(*w.edits), tag: d.tag})
	}
	return nil
}
