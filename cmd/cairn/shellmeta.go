package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
)

// The shell's backslash commands, psql's names and output shapes over
// Cairn's pg_catalog.

const shellHelp = `General
  \q                     quit (also quit, exit, Ctrl-D)
  \?                     this help
Informational
  \d                     list tables, views and sequences
  \d NAME                describe table, view or sequence NAME
  \dt                    list tables
  \l                     list databases
Formatting
  \x [on|off]            toggle expanded output (one line per column)
  \timing [on|off]       toggle printing how long each statement took
Statements end with ';'. Ctrl-C cancels the running statement, or drops
the one being typed.
`

// meta runs one backslash command.
func (sh *sqlShell) meta(ctx context.Context, line string) error {
	fields := strings.Fields(line)
	cmd, args := fields[0], fields[1:]
	switch cmd {
	case `\?`:
		fmt.Fprint(sh.out, shellHelp)
	case `\x`:
		on, err := toggle(sh.expanded, args)
		if err != nil {
			return err
		}
		sh.expanded = on
		fmt.Fprintf(sh.out, "Expanded display is %s.\n", onOff(on))
	case `\timing`:
		on, err := toggle(sh.timing, args)
		if err != nil {
			return err
		}
		sh.timing = on
		fmt.Fprintf(sh.out, "Timing is %s.\n", onOff(on))
	case `\l`:
		return sh.query(ctx, "List of databases", `SELECT d.datname AS "Name", pg_get_userbyid(d.datdba) AS "Owner",
  pg_encoding_to_char(d.encoding) AS "Encoding"
FROM pg_catalog.pg_database d ORDER BY 1`, "")
	case `\dt`, `\d`:
		if cmd == `\d` && len(args) > 0 {
			return sh.describe(ctx, args[0])
		}
		kinds := `'r','p','v','m','S','f'`
		if cmd == `\dt` {
			kinds = `'r','p'`
		}
		return sh.query(ctx, "List of relations", `SELECT n.nspname AS "Schema", c.relname AS "Name",
  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'partitioned table' WHEN 'v' THEN 'view'
    WHEN 'm' THEN 'materialized view' WHEN 'S' THEN 'sequence' WHEN 'f' THEN 'foreign table' END AS "Type",
  pg_get_userbyid(c.relowner) AS "Owner"
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN (`+kinds+`) AND n.nspname NOT IN ('pg_catalog', 'information_schema')
ORDER BY 1, 2`, "Did not find any relations.")
	default:
		return fmt.Errorf("invalid command %s\nTry \\? for help.", cmd)
	}
	return nil
}

// describe is \d NAME: the columns of a relation, then its indexes.
func (sh *sqlShell) describe(ctx context.Context, name string) error {
	lit := quoteLiteral(name)
	var title string
	err := sh.each(ctx, `SELECT n.nspname, c.relname, c.relkind FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = `+lit+`::regclass`, func(v []string) {
		kind := map[string]string{"r": "Table", "p": "Partitioned table", "v": "View", "m": "Materialized view", "S": "Sequence", "i": "Index"}[v[2]]
		if kind == "" {
			kind = "Relation"
		}
		title = fmt.Sprintf("%s \"%s.%s\"", kind, v[0], v[1])
	})
	if err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return fmt.Errorf("Did not find any relation named %q.", name)
		}
		return err
	}
	if err := sh.query(ctx, title, `SELECT a.attname AS "Column", pg_catalog.format_type(a.atttypid, a.atttypmod) AS "Type",
  CASE WHEN a.attnotnull THEN 'not null' ELSE '' END AS "Nullable",
  COALESCE(pg_catalog.pg_get_expr(d.adbin, d.adrelid), '') AS "Default"
FROM pg_catalog.pg_attribute a
LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = `+lit+`::regclass AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`, ""); err != nil {
		return err
	}
	var indexes []string
	if err := sh.each(ctx, `SELECT i.indexname, i.indexdef FROM pg_catalog.pg_indexes i
JOIN pg_catalog.pg_class c ON c.relname = i.tablename JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace AND n.nspname = i.schemaname
WHERE c.oid = `+lit+`::regclass ORDER BY 1`, func(v []string) {
		def := v[1]
		if _, rest, ok := strings.Cut(def, " USING "); ok {
			def = rest
		}
		indexes = append(indexes, fmt.Sprintf("    %q %s", v[0], def))
	}); err != nil {
		return err
	}
	if len(indexes) > 0 {
		fmt.Fprintf(sh.out, "Indexes:\n%s\n\n", strings.Join(indexes, "\n"))
	}
	return nil
}

// query runs sql and prints its rows under title, or empty when there
// are none and empty is set.
func (sh *sqlShell) query(ctx context.Context, title, sql, empty string) error {
	res, err := sh.conn.Exec(ctx, sql).ReadAll()
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
		if len(r.Rows) == 0 && empty != "" {
			fmt.Fprintln(sh.out, empty)
			continue
		}
		rows := make([][]*string, len(r.Rows))
		for i, row := range r.Rows {
			rows[i] = make([]*string, len(row))
			for j, v := range row {
				if v != nil {
					s := string(v)
					rows[i][j] = &s
				}
			}
		}
		if sh.expanded {
			printExpanded(sh.out, r.FieldDescriptions, rows)
		} else {
			printTable(sh.out, title, r.FieldDescriptions, rows)
		}
	}
	return nil
}

// each runs sql and calls f with each row's values as text.
func (sh *sqlShell) each(ctx context.Context, sql string, f func([]string)) error {
	res, err := sh.conn.Exec(ctx, sql).ReadAll()
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
		for _, row := range r.Rows {
			v := make([]string, len(row))
			for i, b := range row {
				v[i] = string(b)
			}
			f(v)
		}
	}
	return nil
}

// printExpanded prints rows as psql's \x does: a header per record, then
// one "column | value" line per column.
func printExpanded(out io.Writer, fields []pgconn.FieldDescription, rows [][]*string) {
	if len(rows) == 0 {
		fmt.Fprintln(out, "(0 rows)")
		fmt.Fprintln(out)
		return
	}
	nameW, valW := 0, 0
	for _, f := range fields {
		nameW = max(nameW, utf8.RuneCountInString(f.Name))
	}
	for _, r := range rows {
		for _, v := range r {
			if v != nil {
				valW = max(valW, utf8.RuneCountInString(*v))
			}
		}
	}
	for n, r := range rows {
		head := fmt.Sprintf("-[ RECORD %d ]", n+1)
		if w := nameW + 1; utf8.RuneCountInString(head) <= w {
			head += strings.Repeat("-", w-utf8.RuneCountInString(head)) + "+" + strings.Repeat("-", valW+1)
		} else {
			head += strings.Repeat("-", max(0, nameW+3+valW-utf8.RuneCountInString(head)))
		}
		fmt.Fprintln(out, head)
		for i, f := range fields {
			v := ""
			if r[i] != nil {
				v = *r[i]
			}
			fmt.Fprintln(out, strings.TrimRight(f.Name+strings.Repeat(" ", nameW-utf8.RuneCountInString(f.Name))+" | "+v, " "))
		}
	}
	fmt.Fprintln(out)
}

// toggle is the new state of an on/off setting given its arguments.
func toggle(cur bool, args []string) (bool, error) {
	if len(args) == 0 {
		return !cur, nil
	}
	switch strings.ToLower(args[0]) {
	case "on", "true", "1":
		return true, nil
	case "off", "false", "0":
		return false, nil
	}
	return cur, fmt.Errorf("unrecognized value %q: Boolean expected", args[0])
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// quoteLiteral is s as a SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
