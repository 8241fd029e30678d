package parser

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// rewritten is the dialect rewrite of a whole query string.
type rewritten struct {
	src    string
	text   string // PostgreSQL text
	m      *offsetMap
	pieces []rewrittenPiece
}

// rewrittenPiece is one statement of the original text and what it became:
// notes[0] holds the annotations of the statement itself, notes[k] those of
// its k-th derived statement.
type rewrittenPiece struct {
	piece
	rwFrom  int // where the piece starts in the rewritten text
	notes   [][]Annotation
	derived []span // where each derived statement's text lies in the rewritten text
}

// span is a byte range [from, to).
type span struct{ from, to int }

// Rewrite turns the dialect constructs of sql into PostgreSQL syntax and
// returns the rewritten text with what was rewritten. Text with no dialect
// construct comes back byte for byte. Errors are *SyntaxError.
func Rewrite(sql string) (string, []Annotation, error) {
	rw, err := rewrite(sql)
	if err != nil {
		return "", nil, err
	}
	var all []Annotation
	for _, p := range rw.pieces {
		for _, n := range p.notes {
			all = append(all, n...)
		}
	}
	sortNotes(all)
	return rw.text, all, nil
}

func rewrite(sql string) (*rewritten, error) {
	if err := checkEncoding(sql); err != nil {
		return nil, err
	}
	toks, err := lex(sql)
	if err != nil {
		return nil, err
	}
	var edits []edit
	nextTag := 0
	pieces := splitPieces(sql, toks)
	rw := &rewritten{src: sql, pieces: make([]rewrittenPiece, len(pieces))}
	marks := make([]int, len(pieces))
	derivedOf := make([][]derived, len(pieces))
	for k, p := range pieces {
		w := &stmtRewriter{src: sql, toks: p.toks, semi: p.semi, claimed: make([]bool, len(p.toks)), edits: &edits, nextTag: &nextTag}
		if err := w.walk(); err != nil {
			return nil, err
		}
		sortNotes(w.notes)
		notes := [][]Annotation{w.notes}
		for _, d := range w.derived {
			sortNotes(d.notes)
			notes = append(notes, d.notes)
		}
		rw.pieces[k] = rewrittenPiece{piece: p, notes: notes}
		marks[k] = p.from
		derivedOf[k] = w.derived
	}
	text, m, rwMarks, tagged, err := render(sql, edits, marks)
	if err != nil {
		return nil, &SyntaxError{Code: CodeSyntaxError, Message: "internal error: " + err.Error()}
	}
	for k := range rw.pieces {
		rw.pieces[k].rwFrom = rwMarks[k]
		for _, d := range derivedOf[k] {
			start := tagged[d.tag]
			rw.pieces[k].derived = append(rw.pieces[k].derived, span{start, start + d.len})
		}
	}
	rw.text, rw.m = text, m
	return rw, nil
}

// checkEncoding rejects what Postgres rejects before parsing: invalid
// UTF-8 and NUL bytes (which would also silently cut the text short at the
// C boundary of libpg_query).
func checkEncoding(sql string) error {
	for i := 0; i < len(sql); {
		r, size := utf8.DecodeRuneInString(sql[i:])
		if r == 0 || (r == utf8.RuneError && size <= 1) {
			return &SyntaxError{
				Code:     CodeCharacterNotInRepertoire,
				Message:  fmt.Sprintf("invalid byte sequence for encoding \"UTF8\": 0x%02x", sql[i]),
				Position: charPos(sql, i),
			}
		}
		i += size
	}
	return nil
}

// toOriginalPos maps a Postgres cursor position in the rewritten text to
// one in the original text.
func (rw *rewritten) toOriginalPos(pos int) int {
	return charPos(rw.src, rw.m.toOriginal(byteOffset(rw.text, pos)))
}

// originalText returns the original text of a piece without the blank space
// and semicolon around it.
func (p *piece) originalText(src string) string {
	if len(p.toks) == 0 {
		return ""
	}
	return strings.TrimSpace(src[p.toks[0].start:p.toks[len(p.toks)-1].end])
}
