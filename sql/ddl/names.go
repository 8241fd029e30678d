package ddl

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// PostgreSQL's rules for the names it invents (src/backend/commands/
// indexcmds.c ChooseRelationName, makeObjectName): tools such as Django,
// Prisma and pg_dump compare and drop constraints and indexes by these
// names, so they must come out byte for byte as PostgreSQL's.

// maxIdentLen is NAMEDATALEN-1: identifiers are truncated to 63 bytes.
const maxIdentLen = 63

// makeObjectName builds name1[_name2][_label], truncating the longer of
// name1 and name2 (one byte at a time) until the whole fits in 63 bytes.
func makeObjectName(name1, name2, label string) string {
	overhead := 0
	if name2 != "" {
		overhead++
	}
	if label != "" {
		overhead += len(label) + 1
	}
	avail := maxIdentLen - overhead
	n1, n2 := len(name1), len(name2)
	for n1+n2 > avail {
		if n1 > n2 {
			n1--
		} else {
			n2--
		}
	}
	var b strings.Builder
	b.WriteString(clip(name1, n1))
	if name2 != "" {
		b.WriteByte('_')
		b.WriteString(clip(name2, n2))
	}
	if label != "" {
		b.WriteByte('_')
		b.WriteString(label)
	}
	return b.String()
}

// clip cuts s to at most n bytes without splitting a UTF-8 character
// (pg_mbcliplen).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// chooseName returns the first of makeObjectName(name1, name2, label),
// then with label1, label2, ... that taken does not report as used.
func chooseName(name1, name2, label string, taken func(string) bool) string {
	mod := label
	for pass := 1; ; pass++ {
		name := makeObjectName(name1, name2, mod)
		if !taken(name) {
			return name
		}
		mod = label + strconv.Itoa(pass)
	}
}

// nameAddition joins column names with underscores as
// ChooseIndexNameAddition and ChooseForeignKeyConstraintNameAddition do,
// stopping once the result reaches NAMEDATALEN (it is truncated later).
func nameAddition(cols []string) string {
	var b strings.Builder
	for _, c := range cols {
		if b.Len() > 0 {
			b.WriteByte('_')
		}
		b.WriteString(c)
		if b.Len() >= maxIdentLen+1 {
			break
		}
	}
	return b.String()
}

// indexColumnNames makes an index's column names distinct as
// ChooseIndexColumnNames does: a repeated name gets the first free
// numeric suffix (b, b1, b2, ...).
func indexColumnNames(names []string) []string {
	out := make([]string, 0, len(names))
	for _, orig := range names {
		cur := orig
		for i := 1; slices.Contains(out, cur); i++ {
			suffix := strconv.Itoa(i)
			cur = clip(orig, maxIdentLen-len(suffix)) + suffix
		}
		out = append(out, cur)
	}
	return out
}

// truncateIdent truncates a user-written identifier to 63 bytes, as the
// PostgreSQL scanner does.
func truncateIdent(s string) string { return clip(s, maxIdentLen) }
