package parser

import (
	"errors"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	pgparser "github.com/pganalyze/pg_query_go/v6/parser"
)

// token is one lexical token of the original text, as Postgres's own
// scanner (pg_query.Scan) cut it. Comments are dropped: no rule looks at
// them, and byte offsets keep them in the output untouched.
type token struct {
	kind       pg_query.Token
	start, end int // byte offsets into the original text
	// word is the lower-cased text of keywords, bare identifiers, numbers
	// and punctuation ("(", "::", ...). It is empty for string constants
	// and quoted identifiers, so `"string"` or 'hash' never match a rule.
	word string
	// keyword is set for Postgres keywords of every category.
	keyword bool
}

// isName reports whether t can be (part of) a name: an identifier, quoted
// or not, or a keyword. Which keywords are allowed where is the grammar's
// business; the rewriter only needs to tell names from punctuation.
func (t token) isName() bool {
	return t.kind == pg_query.Token_IDENT || t.kind == pg_query.Token_UIDENT || t.keyword
}

func (t token) isNumber() bool {
	return t.kind == pg_query.Token_ICONST || t.kind == pg_query.Token_FCONST
}

// lex scans sql into tokens, without comments.
func lex(sql string) ([]token, error) {
	res, err := pg_query.Scan(sql)
	if err != nil {
		return nil, fromPgError(err, func(pos int) int { return pos })
	}
	toks := make([]token, 0, len(res.Tokens))
	for _, t := range res.Tokens {
		start, end := int(t.Start), int(t.End)
		if start < 0 || end > len(sql) || start > end {
			// The scanner's offsets are the contract everything else
			// builds on; a violation is a bug, not bad input.
			return nil, &SyntaxError{Code: CodeSyntaxError, Message: "internal error: scanner returned an invalid token span"}
		}
		tok := token{kind: t.Token, start: start, end: end, keyword: t.KeywordKind != pg_query.KeywordKind_NO_KEYWORD}
		switch t.Token {
		case pg_query.Token_SQL_COMMENT, pg_query.Token_C_COMMENT:
			continue
		case pg_query.Token_SCONST, pg_query.Token_USCONST, pg_query.Token_BCONST,
			pg_query.Token_XCONST, pg_query.Token_UIDENT, pg_query.Token_PARAM:
		case pg_query.Token_IDENT:
			if text := sql[start:end]; !strings.HasPrefix(text, `"`) {
				tok.word = strings.ToLower(text)
			}
		default:
			tok.word = strings.ToLower(sql[start:end])
		}
		toks = append(toks, tok)
	}
	return toks, nil
}

// fromPgError converts an error of libpg_query into a SyntaxError whose
// position is mapped by toOriginal (from a 1-based character position in
// the text that was parsed to one in the original text).
func fromPgError(err error, toOriginal func(pos int) int) error {
	var pe *pgparser.Error
	if !errors.As(err, &pe) {
		return &SyntaxError{Code: CodeSyntaxError, Message: err.Error()}
	}
	pos := 0
	if pe.Cursorpos > 0 {
		pos = toOriginal(pe.Cursorpos)
	}
	return &SyntaxError{Code: CodeSyntaxError, Message: pe.Message, Position: pos}
}

// piece is one statement of the original text as the rewriter sees it: its
// tokens without the terminating semicolon, and the byte span it owns,
// [from, to), which runs from the end of the previous piece through its own
// semicolon so that pieces tile the whole text.
type piece struct {
	toks     []token
	from, to int
	semi     int // byte offset of the terminating semicolon, or -1
}

// splitPieces cuts the token stream at semicolons that end a statement.
// Strings, quoted identifiers, dollar quotes and comments are single tokens
// (or absent), so a semicolon token is always real punctuation; it ends a
// statement unless it is inside parentheses (rule actions) or inside the
// BEGIN ATOMIC ... END body of CREATE FUNCTION/PROCEDURE, the same cases
// psql's splitter respects. Only the rewriter's scope depends on this: the
// final statement boundaries come from the Postgres grammar itself.
func splitPieces(sql string, toks []token) []piece {
	var pieces []piece
	from, first := 0, 0
	parens, blocks := 0, 0
	routine := false
	for i, t := range toks {
		if i == first {
			routine = isRoutineHeader(toks[i:])
		}
		switch t.word {
		case "(":
			parens++
		case ")":
			if parens > 0 {
				parens--
			}
		case "begin":
			if routine && blocks == 0 && wordAt(toks, i+1, "atomic") {
				blocks++
			}
		case "case":
			if blocks > 0 {
				blocks++
			}
		case "end":
			if blocks > 0 {
				blocks--
			}
		case ";":
			if parens == 0 && blocks == 0 {
				pieces = append(pieces, piece{toks: toks[first:i], from: from, to: t.end, semi: t.start})
				from, first = t.end, i+1
			}
		}
	}
	if first < len(toks) || from < len(sql) {
		pieces = append(pieces, piece{toks: toks[first:], from: from, to: len(sql), semi: -1})
	}
	return pieces
}

// isRoutineHeader reports whether toks start CREATE [OR REPLACE]
// FUNCTION|PROCEDURE, whose SQL-standard bodies contain semicolons.
func isRoutineHeader(toks []token) bool {
	i := 0
	if !wordAt(toks, i, "create") {
		return false
	}
	i++
	if wordAt(toks, i, "or") && wordAt(toks, i+1, "replace") {
		i += 2
	}
	return wordAt(toks, i, "function") || wordAt(toks, i, "procedure")
}

// wordAt reports whether toks[i] exists and has the given word.
func wordAt(toks []token, i int, word string) bool {
	return i >= 0 && i < len(toks) && toks[i].word == word
}

// matching returns the index of the parenthesis closing the one at toks[i],
// or -1 if it is unbalanced.
func matching(toks []token, i int) int {
	depth := 0
	for j := i; j < len(toks); j++ {
		switch toks[j].word {
		case "(":
			depth++
		case ")":
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}
