package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/chzyer/readline"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// sqlFlags are sql's flags.
type sqlFlags struct{ url, exec string }

func sqlFlagSet(f *sqlFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("sql", flag.ContinueOnError)
	fs.StringVar(&f.url, "url", "", "PostgreSQL URL of the node (postgresql://user@host:port/db?sslmode=...), as cairn start prints it")
	fs.StringVar(&f.exec, "e", "", "run this SQL and exit")
	return fs
}

func cmdSQL(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var sf sqlFlags
	fs := sqlFlagSet(&sf)
	fs.SetOutput(stderr)
	url, exec := &sf.url, &sf.exec
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if *url == "" {
		return usagef("--url is required")
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return shell(context.Background(), *url, *exec, stdin, stdout, stderr)
}

// shell connects to url and runs exec, or reads statements from in until
// EOF or \q: with line editing and history on a terminal, line by line
// otherwise. With exec, the first error is the result.
func shell(ctx context.Context, url, exec string, in io.Reader, out, errOut io.Writer) error {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		fmt.Fprintf(errOut, "%s:  %s\n", n.Severity, n.Message)
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	sh := &sqlShell{conn: conn, out: out, errOut: errOut}
	defer sh.watchInterrupts()()
	if exec != "" {
		return sh.run(ctx, exec, false)
	}
	comp := newCompleter(sh)
	lines, err := newLineReader(in, out, errOut, comp)
	if err != nil {
		return err
	}
	defer lines.Close()
	var buf strings.Builder
	for {
		prompt := "cairn> "
		if buf.Len() > 0 {
			prompt = "    -> "
		}
		line, err := lines.ReadLine(prompt)
		if errors.Is(err, readline.ErrInterrupt) {
			// Ctrl-C at the prompt drops the statement being typed, as
			// in psql.
			buf.Reset()
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if buf.Len() == 0 {
			switch t := strings.TrimSpace(line); {
			case t == `\q` || t == "quit" || t == "exit":
				return nil
			case t == "":
				continue
			case strings.HasPrefix(t, `\`):
				if err := sh.meta(ctx, t); err != nil {
					fmt.Fprintf(errOut, "%s\n", pgMessage(err))
					if conn.IsClosed() {
						return err
					}
				}
				continue
			}
		}
		buf.WriteString(line)
		buf.WriteByte('\n')
		if statementComplete(buf.String()) {
			err := sh.run(ctx, buf.String(), true)
			comp.changed(buf.String())
			if err != nil && conn.IsClosed() {
				return err
			}
			buf.Reset()
		}
	}
	if strings.TrimSpace(buf.String()) != "" {
		if err := sh.run(ctx, buf.String(), false); err != nil {
			return errors.New(pgMessage(err))
		}
	}
	return nil
}

// sqlShell is a connection and the shell's display settings.
type sqlShell struct {
	conn        *pgconn.PgConn
	out, errOut io.Writer
	// expanded is \x, timing \timing.
	expanded, timing bool
	// running is set while a statement runs: Ctrl-C cancels it then.
	running atomic.Bool
}

// watchInterrupts makes SIGINT (Ctrl-C) cancel the running statement,
// as psql does, instead of ending the shell; it returns the function
// that stops watching. At a terminal's prompt Ctrl-C never arrives as a
// signal: the line editor reads it as a key.
func (sh *sqlShell) watchInterrupts() (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt)
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-ch:
				if sh.running.Load() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					if err := sh.conn.CancelRequest(ctx); err != nil {
						fmt.Fprintf(sh.errOut, "\ncould not send cancel request: %v\n", err)
					} else {
						fmt.Fprintln(sh.errOut, "\nCancel request sent") // as psql says
					}
					cancel()
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
		// A cancel request in flight finishes and says so before the
		// shell returns: the cancelled statement's error can arrive
		// before CancelRequest does, and the shell may end meanwhile.
		<-exited
	}
}

// run runs sql (a backslash command when it starts with one) and prints
// its results, then its error (as "ERROR:  ..." when report is set; else
// it is returned), then the time it took under \timing, in psql's order.
func (sh *sqlShell) run(ctx context.Context, sql string, report bool) error {
	if t := strings.TrimSpace(sql); strings.HasPrefix(t, `\`) {
		return sh.meta(ctx, t)
	}
	start := time.Now()
	sh.running.Store(true)
	err := sh.runSQL(ctx, sql)
	sh.running.Store(false)
	if err != nil && report {
		fmt.Fprintf(sh.errOut, "ERROR:  %v\n", pgMessage(err))
	}
	if sh.timing {
		fmt.Fprintf(sh.out, "Time: %.3f ms\n", float64(time.Since(start).Microseconds())/1000)
	}
	return err
}

// runSQL runs sql with the simple protocol and prints every result.
func (sh *sqlShell) runSQL(ctx context.Context, sql string) error {
	mrr := sh.conn.Exec(ctx, sql)
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		fields := rr.FieldDescriptions()
		var rows [][]*string
		for rr.NextRow() {
			vals := rr.Values()
			row := make([]*string, len(vals))
			for i, v := range vals {
				if v != nil {
					s := string(v)
					row[i] = &s
				}
			}
			rows = append(rows, row)
		}
		tag, err := rr.Close()
		if err != nil {
			_ = mrr.Close()
			return err
		}
		switch {
		case len(fields) == 0:
			fmt.Fprintln(sh.out, tag.String())
		case sh.expanded:
			printExpanded(sh.out, fields, rows)
		default:
			printTable(sh.out, "", fields, rows)
		}
	}
	return mrr.Close()
}

// lineReader reads the shell's input a line at a time.
type lineReader interface {
	ReadLine(prompt string) (string, error)
	Close() error
}

// newLineReader edits lines with readline (history in
// ~/.cairn_sql_history, Tab completing with comp) when in is a terminal,
// and scans in otherwise.
func newLineReader(in io.Reader, out, errOut io.Writer, comp readline.AutoCompleter) (lineReader, error) {
	if f, ok := in.(*os.File); ok && isTerminal(in) {
		history := ""
		if home, err := os.UserHomeDir(); err == nil {
			history = filepath.Join(home, ".cairn_sql_history")
		}
		rl, err := readline.NewEx(&readline.Config{
			Prompt: "cairn> ", HistoryFile: history, HistorySearchFold: true,
			InterruptPrompt: "^C", EOFPrompt: `\q`,
			Stdin: f, Stdout: out, Stderr: errOut, AutoComplete: comp,
		})
		if err != nil {
			return nil, fmt.Errorf("starting the line editor: %w", err)
		}
		return editor{rl}, nil
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	return scanner{sc}, nil
}

type editor struct{ rl *readline.Instance }

func (e editor) ReadLine(prompt string) (string, error) {
	e.rl.SetPrompt(prompt)
	return e.rl.Readline()
}

func (e editor) Close() error { return e.rl.Close() }

type scanner struct{ sc *bufio.Scanner }

func (s scanner) ReadLine(string) (string, error) {
	if s.sc.Scan() {
		return s.sc.Text(), nil
	}
	if err := s.sc.Err(); err != nil {
		return "", err
	}
	return "", io.EOF
}

func (s scanner) Close() error { return nil }

func pgMessage(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Message
	}
	return err.Error()
}

// statementComplete reports whether text ends with a semicolon outside
// quotes, comments and dollar quotes: the shell's end of input.
func statementComplete(text string) bool {
	inSingle, inDouble, inLineComment := false, false, false
	dollar := ""
	last := rune(0)
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case inLineComment:
			if c == '\n' {
				inLineComment = false
			}
			continue
		case dollar != "":
			if strings.HasPrefix(text[i:], dollar) {
				i += len(dollar) - 1
				dollar = ""
			}
			continue
		case inSingle:
			if c == '\'' {
				inSingle = false
			}
			continue
		case inDouble:
			if c == '"' {
				inDouble = false
			}
			continue
		}
		switch c {
		case '\'':
			inSingle = true
		case '"':
			inDouble = true
		case '-':
			if i+1 < len(text) && text[i+1] == '-' {
				inLineComment = true
				continue
			}
		case '$':
			if j := strings.IndexByte(text[i+1:], '$'); j >= 0 && isTag(text[i+1:i+1+j]) {
				dollar = text[i : i+j+2]
				i += j + 1
				continue
			}
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			last = rune(c)
		}
	}
	return !inSingle && !inDouble && dollar == "" && last == ';'
}

func isTag(s string) bool {
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// printTable prints rows as psql's aligned format does: the title if
// any, a centered header, numbers right-aligned, NULL as empty, and a row
// count.
func printTable(out io.Writer, title string, fields []pgconn.FieldDescription, rows [][]*string) {
	widths := make([]int, len(fields))
	right := make([]bool, len(fields))
	for i, f := range fields {
		widths[i] = utf8.RuneCountInString(f.Name)
		switch f.DataTypeOID {
		case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.Float4OID, pgtype.Float8OID, pgtype.NumericOID, pgtype.OIDOID:
			right[i] = true
		}
	}
	for _, r := range rows {
		for i, v := range r {
			if v != nil {
				widths[i] = max(widths[i], utf8.RuneCountInString(*v))
			}
		}
	}
	if title != "" {
		// Centered over the table, as psql centers "List of relations".
		total := len(fields) - 1
		for _, w := range widths {
			total += w + 2
		}
		pad := max(0, (total-utf8.RuneCountInString(title))/2)
		fmt.Fprintln(out, strings.Repeat(" ", pad)+title)
	}
	var b strings.Builder
	for i, f := range fields {
		if i > 0 {
			b.WriteString("|")
		}
		n := utf8.RuneCountInString(f.Name)
		left := (widths[i] - n) / 2
		b.WriteString(" " + strings.Repeat(" ", left) + f.Name + strings.Repeat(" ", widths[i]-n-left) + " ")
	}
	fmt.Fprintln(out, strings.TrimRight(b.String(), " "))
	b.Reset()
	for i := range fields {
		if i > 0 {
			b.WriteString("+")
		}
		b.WriteString(strings.Repeat("-", widths[i]+2))
	}
	fmt.Fprintln(out, b.String())
	for _, r := range rows {
		b.Reset()
		for i, v := range r {
			if i > 0 {
				b.WriteString("|")
			}
			s := ""
			if v != nil {
				s = *v
			}
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(s))
			if right[i] {
				b.WriteString(" " + pad + s + " ")
			} else {
				b.WriteString(" " + s + pad + " ")
			}
		}
		fmt.Fprintln(out, strings.TrimRight(b.String(), " "))
	}
	if len(rows) == 1 {
		fmt.Fprintln(out, "(1 row)")
	} else {
		fmt.Fprintf(out, "(%d rows)\n", len(rows))
	}
	fmt.Fprintln(out)
}
