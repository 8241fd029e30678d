package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

func cmdSQL(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sql", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "PostgreSQL URL of the node (postgres://user@host:port/db)")
	exec := fs.String("e", "", "run this SQL and exit")
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
// EOF or \q. With exec, the first error is the result.
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
	if exec != "" {
		return runSQL(ctx, conn, exec, out)
	}
	interactive := isTerminal(in)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var buf strings.Builder
	prompt := func() {
		if interactive {
			if buf.Len() == 0 {
				fmt.Fprint(out, "cairn> ")
			} else {
				fmt.Fprint(out, "    -> ")
			}
		}
	}
	prompt()
	for sc.Scan() {
		line := sc.Text()
		if buf.Len() == 0 {
			switch t := strings.TrimSpace(line); {
			case t == `\q` || t == "quit" || t == "exit":
				return nil
			case t == "":
				prompt()
				continue
			}
		}
		buf.WriteString(line)
		buf.WriteByte('\n')
		if statementComplete(buf.String()) {
			if err := runSQL(ctx, conn, buf.String(), out); err != nil {
				fmt.Fprintf(errOut, "ERROR:  %v\n", pgMessage(err))
				if conn.IsClosed() {
					return err
				}
			}
			buf.Reset()
		}
		prompt()
	}
	if strings.TrimSpace(buf.String()) != "" {
		if err := runSQL(ctx, conn, buf.String(), out); err != nil {
			return errors.New(pgMessage(err))
		}
	}
	return sc.Err()
}

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

// runSQL runs sql with the simple protocol and prints every result.
func runSQL(ctx context.Context, conn *pgconn.PgConn, sql string, out io.Writer) error {
	mrr := conn.Exec(ctx, sql)
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
		if len(fields) > 0 {
			printTable(out, fields, rows)
		} else {
			fmt.Fprintln(out, tag.String())
		}
	}
	return mrr.Close()
}

// printTable prints rows as psql's aligned format does: a centered
// header, numbers right-aligned, NULL as empty, and a row count.
func printTable(out io.Writer, fields []pgconn.FieldDescription, rows [][]*string) {
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
