package logic

import "strings"

// edit is how rewrite changes one record: a new header line, new result
// lines, or the removal of the results (when a query now expects an error).
type edit struct {
	header      string
	results     []string
	hasResults  bool
	dropResults bool
}

// rewrite returns the file with every edit applied. Lines outside headers
// and result blocks are copied unchanged (invariant 4).
func (r *fileRun) rewrite() string {
	lines := r.f.Lines
	var out []string
	next := 0 // next line of the original to copy
	for idx := range r.f.Records {
		e, ok := r.edits[idx]
		if !ok {
			continue
		}
		rec := &r.f.Records[idx]
		out = append(out, lines[next:rec.header]...)
		if e.header != "" {
			out = append(out, e.header)
		} else {
			out = append(out, lines[rec.header])
		}
		next = rec.header + 1
		if rec.Kind != KindQuery || (!e.hasResults && !e.dropResults) {
			continue
		}
		// The SQL runs from the header to the separator, or to the first
		// blank line when there is none.
		sqlEnd := rec.sep
		if sqlEnd < 0 {
			sqlEnd = next
			for sqlEnd < len(lines) && strings.TrimSpace(lines[sqlEnd]) != "" {
				sqlEnd++
			}
		}
		out = append(out, lines[next:sqlEnd]...)
		next = sqlEnd
		if rec.sep >= 0 {
			next = rec.resEnd
		}
		if e.hasResults {
			out = append(out, "----")
			out = append(out, e.results...)
		}
	}
	out = append(out, lines[next:]...)
	return strings.Join(out, "\n") + "\n"
}
