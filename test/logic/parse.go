package logic

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Kind says what a record does.
type Kind int

const (
	// KindStatement runs SQL and checks success, a row count or an error.
	KindStatement Kind = iota
	// KindQuery runs SQL and checks its rows or its error.
	KindQuery
	// KindConnection switches to a named session.
	KindConnection
	// KindUser switches to a session of a named user.
	KindUser
	// KindLet runs a one-value query and binds the value to a $variable.
	KindLet
	// KindHalt stops the file.
	KindHalt
)

// SortMode says how a query's rows are ordered before comparison.
type SortMode int

const (
	// NoSort compares rows in the order the server sent them.
	NoSort SortMode = iota
	// RowSort sorts rendered rows.
	RowSort
	// ValueSort sorts every value on its own, one value per line.
	ValueSort
)

// Cond is one onlyif/skipif line in front of a record.
type Cond struct {
	Only   bool   // onlyif (true) or skipif (false)
	Engine string // "postgres" or "cairn"
}

// ErrorSpec is what an error record expects: an optional SQLSTATE, an
// optional error position (1-based character offset into the SQL, as
// PostgreSQL reports it) and an optional regexp over the message.
type ErrorSpec struct {
	Code    string
	Pos     int
	Pattern *regexp.Regexp
}

// Record is one unit of a logic-test file.
type Record struct {
	Kind  Kind
	Line  int // 1-based line of the directive
	Conds []Cond
	SQL   string

	// Statements.
	Count    int64
	HasCount bool
	Err      *ErrorSpec // statement error / query error

	// Queries.
	Types    string // one letter per column: I, T, R, B
	Sort     SortMode
	ColNames bool
	Expected []string // expected result lines, as written

	// Name is the session (connection), the user (user) or the variable
	// without its '$' (let).
	Name string
	// Database is the database a connection record's session opens
	// ("connection NAME database DB"); empty: the file's own.
	Database string

	// Indexes (0-based) into File.Lines, used by rewrite: the directive, the
	// "----" separator (-1 when absent) and the half-open range of result
	// lines.
	header, sep, resStart, resEnd int
	// opts keeps the query header's options so a rewrite preserves them.
	opts []string
}

// File is a parsed logic-test file.
type File struct {
	Name    string
	Lines   []string
	Records []Record
}

// ParseFile reads and parses the file at path.
func ParseFile(path string) (*File, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading logic file: %w", err)
	}
	return Parse(filepath.Base(path), string(src))
}

var (
	sqlstateRE = regexp.MustCompile(`^[0-9A-Z]{5}$`)
	posRE      = regexp.MustCompile(`^pos=([0-9]+)$`)
	varRE      = regexp.MustCompile(`^\$[A-Za-z_][A-Za-z0-9_]*$`)
)

// Parse parses the text of a logic-test file named name.
func Parse(name, src string) (*File, error) {
	src = strings.TrimSuffix(src, "\n")
	f := &File{Name: name, Lines: strings.Split(src, "\n")}
	if src == "" {
		f.Lines = nil
	}
	p := parser{f: f}
	if err := p.parse(); err != nil {
		return nil, err
	}
	return f, nil
}

type parser struct {
	f     *File
	i     int // index of the next line
	conds []Cond
	// condLine is the 1-based line of the first pending condition.
	condLine int
}

func (p *parser) errorf(line int, format string, args ...any) error {
	return &ParseError{File: p.f.Name, Line: line, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) parse() error {
	lines := p.f.Lines
	for p.i < len(lines) {
		line := lines[p.i]
		lineNo := p.i + 1
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			if len(p.conds) > 0 {
				return p.errorf(p.condLine, "onlyif/skipif must be followed directly by a record")
			}
			p.i++
			continue
		}
		if strings.HasPrefix(trimmed, "#") {
			p.i++
			continue
		}
		fields := strings.Fields(trimmed)
		switch fields[0] {
		case "onlyif", "skipif":
			if c := strings.Index(trimmed, "#"); c >= 0 {
				fields = strings.Fields(trimmed[:c])
			}
			if len(fields) != 2 {
				return p.errorf(lineNo, "%s takes one engine name", fields[0])
			}
			if fields[1] != "postgres" && fields[1] != "cairn" {
				return p.errorf(lineNo, "unknown engine %q (want postgres or cairn)", fields[1])
			}
			if len(p.conds) == 0 {
				p.condLine = lineNo
			}
			p.conds = append(p.conds, Cond{Only: fields[0] == "onlyif", Engine: fields[1]})
			p.i++
			continue
		case "hash-threshold":
			// Accepted for compatibility with sqllogictest files; results are
			// always compared in full.
			p.i++
			continue
		}
		rec := Record{Line: lineNo, Conds: p.conds, header: p.i, sep: -1, resStart: -1, resEnd: -1}
		p.conds = nil
		p.i++
		var err error
		switch fields[0] {
		case "statement":
			err = p.parseStatement(&rec, fields)
		case "query":
			err = p.parseQuery(&rec, fields)
		case "let":
			err = p.parseLet(&rec, fields)
		case "connection", "user":
			if fields[0] == "connection" && len(fields) == 4 && fields[2] == "database" {
				rec.Database = fields[3]
				fields = fields[:2]
			}
			if len(fields) != 2 {
				return p.errorf(lineNo, "%s takes one name", fields[0])
			}
			rec.Kind = KindConnection
			if fields[0] == "user" {
				rec.Kind = KindUser
			}
			rec.Name = fields[1]
		case "halt":
			if len(fields) != 1 {
				return p.errorf(lineNo, "halt takes no arguments")
			}
			rec.Kind = KindHalt
		default:
			return p.errorf(lineNo, "unknown directive %q", fields[0])
		}
		if err != nil {
			return err
		}
		p.f.Records = append(p.f.Records, rec)
	}
	if len(p.conds) > 0 {
		return p.errorf(p.condLine, "onlyif/skipif at end of file")
	}
	return nil
}

// readSQL consumes lines up to a blank line, a "----" separator or the end
// of the file, and returns them joined. It stops in front of the separator.
func (p *parser) readSQL(rec *Record) (string, error) {
	var sql []string
	for p.i < len(p.f.Lines) {
		l := p.f.Lines[p.i]
		if strings.TrimSpace(l) == "" || l == "----" {
			break
		}
		sql = append(sql, l)
		p.i++
	}
	if len(sql) == 0 {
		return "", p.errorf(rec.Line, "record has no SQL")
	}
	return strings.Join(sql, "\n"), nil
}

func (p *parser) atSeparator() bool {
	return p.i < len(p.f.Lines) && p.f.Lines[p.i] == "----"
}

func (p *parser) parseStatement(rec *Record, fields []string) error {
	rec.Kind = KindStatement
	if len(fields) < 2 {
		return p.errorf(rec.Line, "statement needs ok, count N or error")
	}
	switch fields[1] {
	case "ok":
		if len(fields) != 2 {
			return p.errorf(rec.Line, "statement ok takes no arguments")
		}
	case "count":
		if len(fields) != 3 {
			return p.errorf(rec.Line, "statement count takes one number")
		}
		n, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil || n < 0 {
			return p.errorf(rec.Line, "statement count: bad number %q", fields[2])
		}
		rec.Count, rec.HasCount = n, true
	case "error":
		spec, err := parseErrorSpec(p.f.Lines[rec.header], "statement")
		if err != nil {
			return p.errorf(rec.Line, "%v", err)
		}
		rec.Err = spec
	default:
		return p.errorf(rec.Line, "statement needs ok, count N or error, not %q", fields[1])
	}
	sql, err := p.readSQL(rec)
	if err != nil {
		return err
	}
	rec.SQL = sql
	if p.atSeparator() {
		return p.errorf(p.i+1, "a statement has no results: use query")
	}
	return nil
}

// parseErrorSpec reads "<kind> error [SQLSTATE] [pos=N] [regexp]" from the
// raw header line, so the regexp keeps its inner spacing.
func parseErrorSpec(header, kind string) (*ErrorSpec, error) {
	rest := strings.TrimSpace(header)
	rest = strings.TrimSpace(strings.TrimPrefix(rest, kind))
	rest = strings.TrimSpace(strings.TrimPrefix(rest, "error"))
	spec := &ErrorSpec{}
	if tok, after, _ := strings.Cut(rest, " "); sqlstateRE.MatchString(tok) && strings.ContainsAny(tok, "0123456789") {
		spec.Code = tok
		rest = strings.TrimSpace(after)
	}
	if tok, after, _ := strings.Cut(rest, " "); posRE.MatchString(tok) {
		n, err := strconv.Atoi(posRE.FindStringSubmatch(tok)[1])
		if err != nil || n == 0 {
			return nil, fmt.Errorf("bad error position %q", tok)
		}
		spec.Pos = n
		rest = strings.TrimSpace(after)
	}
	if rest != "" {
		re, err := regexp.Compile(rest)
		if err != nil {
			return nil, fmt.Errorf("bad error regexp: %w", err)
		}
		spec.Pattern = re
	}
	if spec.Code == "" && spec.Pattern == nil {
		return nil, fmt.Errorf("%s error needs a SQLSTATE or a regexp", kind)
	}
	return spec, nil
}

func (p *parser) parseQuery(rec *Record, fields []string) error {
	rec.Kind = KindQuery
	if len(fields) < 2 {
		return p.errorf(rec.Line, "query needs column types or error")
	}
	if fields[1] == "error" {
		spec, err := parseErrorSpec(p.f.Lines[rec.header], "query")
		if err != nil {
			return p.errorf(rec.Line, "%v", err)
		}
		rec.Err = spec
		sql, err := p.readSQL(rec)
		if err != nil {
			return err
		}
		rec.SQL = sql
		if p.atSeparator() {
			return p.errorf(p.i+1, "query error has no results")
		}
		return nil
	}
	rec.Types = fields[1]
	for _, c := range rec.Types {
		if !strings.ContainsRune(typeLetters, c) {
			return p.errorf(rec.Line, "unknown column type %q (want one of %s)", c, typeLetters)
		}
	}
	sorted := false
	for _, opt := range fields[2:] {
		switch opt {
		case "nosort", "rowsort", "valuesort":
			if sorted {
				return p.errorf(rec.Line, "more than one sort mode")
			}
			sorted = true
			rec.Sort = map[string]SortMode{"nosort": NoSort, "rowsort": RowSort, "valuesort": ValueSort}[opt]
		case "colnames":
			rec.ColNames = true
		default:
			return p.errorf(rec.Line, "unknown query option %q", opt)
		}
		rec.opts = append(rec.opts, opt)
	}
	sql, err := p.readSQL(rec)
	if err != nil {
		return err
	}
	rec.SQL = sql
	if !p.atSeparator() {
		// No separator: the query must return no rows.
		return nil
	}
	rec.sep = p.i
	p.i++
	rec.resStart = p.i
	for p.i < len(p.f.Lines) && strings.TrimSpace(p.f.Lines[p.i]) != "" {
		rec.Expected = append(rec.Expected, p.f.Lines[p.i])
		p.i++
	}
	rec.resEnd = p.i
	return nil
}

func (p *parser) parseLet(rec *Record, fields []string) error {
	rec.Kind = KindLet
	if len(fields) != 2 || !varRE.MatchString(fields[1]) {
		return p.errorf(rec.Line, "let takes one $variable")
	}
	rec.Name = fields[1][1:]
	sql, err := p.readSQL(rec)
	if err != nil {
		return err
	}
	rec.SQL = sql
	if p.atSeparator() {
		return p.errorf(p.i+1, "let has no results")
	}
	return nil
}

// Skip reports whether the record's conditions exclude it on engine.
func (r *Record) Skip(engine string) bool {
	for _, c := range r.Conds {
		if c.Only != (c.Engine == engine) {
			return true
		}
	}
	return false
}
