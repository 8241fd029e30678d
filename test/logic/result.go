package logic

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// typeLetters are the column types a query header may name.
const typeLetters = "ITRB"

// PostgreSQL type OIDs that decide a column's letter; every other type is T.
const (
	oidBool    = 16
	oidInt8    = 20
	oidInt2    = 21
	oidInt4    = 23
	oidOID     = 26
	oidFloat4  = 700
	oidFloat8  = 701
	oidNumeric = 1700
)

// typeLetter maps a result column's type OID to its header letter.
func typeLetter(oid uint32) byte {
	switch oid {
	case oidInt2, oidInt4, oidInt8, oidOID:
		return 'I'
	case oidFloat4, oidFloat8, oidNumeric:
		return 'R'
	case oidBool:
		return 'B'
	}
	return 'T'
}

// TypeLetters returns the header letters for columns of the given OIDs.
func TypeLetters(oids []uint32) string {
	b := make([]byte, len(oids))
	for i, o := range oids {
		b[i] = typeLetter(o)
	}
	return string(b)
}

// CheckTypes compares a header's letters with the result's column types.
// A wrong letter is a failure: it means the server typed an expression
// differently from PostgreSQL.
func CheckTypes(want string, oids []uint32) error {
	if len(want) != len(oids) {
		return fmt.Errorf("expected %d columns (%s), got %d (%s)", len(want), want, len(oids), TypeLetters(oids))
	}
	if got := TypeLetters(oids); got != want {
		return fmt.Errorf("column types: expected %s, got %s", want, got)
	}
	return nil
}

// FormatValue renders one value in text format as the files write it: NULL
// for SQL NULL, "·" for the empty string, anything else as the server sent
// it. A nil slice is NULL; an empty non-nil slice is the empty string.
func FormatValue(v []byte) string {
	if v == nil {
		return "NULL"
	}
	if len(v) == 0 {
		return "·"
	}
	return string(v)
}

// Render turns a result into the lines a file compares against: optionally
// the column names, then each row's values joined by single spaces. A value
// with newlines spans several lines. Trailing spaces are dropped, since
// editors drop them too.
func Render(cols []string, rows [][][]byte, mode SortMode, colNames bool) []string {
	var out []string
	if colNames {
		out = append(out, trimRight(strings.Join(cols, " ")))
	}
	switch mode {
	case ValueSort:
		var vals []string
		for _, r := range rows {
			for _, v := range r {
				vals = append(vals, FormatValue(v))
			}
		}
		sort.Strings(vals)
		for _, v := range vals {
			out = append(out, splitLines(v)...)
		}
	default:
		rendered := make([]string, len(rows))
		for i, r := range rows {
			vals := make([]string, len(r))
			for j, v := range r {
				vals[j] = FormatValue(v)
			}
			rendered[i] = strings.Join(vals, " ")
		}
		if mode == RowSort {
			sort.Strings(rendered)
		}
		for _, r := range rendered {
			out = append(out, splitLines(r)...)
		}
	}
	return out
}

func splitLines(s string) []string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = trimRight(l)
	}
	return lines
}

func trimRight(s string) string { return strings.TrimRight(s, " \t\r") }

// EqualLines compares expected and actual result lines, ignoring trailing
// whitespace on either side.
func EqualLines(expected, actual []string) bool {
	if len(expected) != len(actual) {
		return false
	}
	for i := range expected {
		if trimRight(expected[i]) != trimRight(actual[i]) {
			return false
		}
	}
	return true
}

// ServerError is the part of a server error an error record can check.
type ServerError struct {
	Code     string
	Message  string
	Position int // 1-based; 0 when the server gave none
}

func (e ServerError) String() string {
	if e.Position > 0 {
		return fmt.Sprintf("%s pos=%d %s", e.Code, e.Position, e.Message)
	}
	return fmt.Sprintf("%s %s", e.Code, e.Message)
}

// Match reports whether err satisfies the spec, and if not, why not.
func (s *ErrorSpec) Match(err ServerError) (bool, string) {
	if s.Code != "" && s.Code != err.Code {
		return false, fmt.Sprintf("expected SQLSTATE %s, got %s", s.Code, err)
	}
	if s.Pos != 0 && s.Pos != err.Position {
		return false, fmt.Sprintf("expected error position %d, got %s", s.Pos, err)
	}
	if s.Pattern != nil && !s.Pattern.MatchString(err.Message) {
		return false, fmt.Sprintf("expected error matching %q, got %s", s.Pattern, err)
	}
	return true, ""
}

// specFor writes the header tail that expects exactly err, for rewrites.
func specFor(err ServerError) string {
	s := err.Code
	if err.Position > 0 {
		s += fmt.Sprintf(" pos=%d", err.Position)
	}
	return s + " " + regexp.QuoteMeta(err.Message)
}
