package main

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
)

// Tab completion in the interactive shell: the word before the cursor
// against the backslash commands, common SQL keywords, and the names of
// the database's tables, views and sequences (read once, and again after
// any statement that may have changed them).

var shellCommands = []string{`\?`, `\d`, `\dt`, `\l`, `\q`, `\timing`, `\x`}

var sqlKeywords = []string{
	"ALTER", "AND", "AS", "ASC", "BEGIN", "BY", "COMMIT", "COPY", "CREATE", "DATABASE", "DEFAULT",
	"DELETE", "DESC", "DISTINCT", "DROP", "EXPLAIN", "FROM", "GRANT", "GROUP", "HAVING", "INDEX",
	"INSERT", "INTO", "JOIN", "LEFT", "LIMIT", "NOT", "NULL", "OFFSET", "ON", "OR", "ORDER",
	"PRIMARY", "KEY", "REFERENCES", "RETURNING", "ROLLBACK", "SELECT", "SET", "SHOW", "TABLE",
	"TRUNCATE", "UNIQUE", "UPDATE", "VALUES", "VIEW", "WHERE", "WITH",
}

// completer is the shell's readline.AutoCompleter.
type completer struct {
	sh *sqlShell
	mu sync.Mutex
	// names are the relations' names; stale asks for a new read.
	names []string
	stale bool
}

func newCompleter(sh *sqlShell) *completer { return &completer{sh: sh, stale: true} }

// changed marks the names stale after sql ran, if it may have changed
// them.
func (c *completer) changed(sql string) {
	switch firstWord(sql) {
	case "create", "drop", "alter":
		c.mu.Lock()
		c.stale = true
		c.mu.Unlock()
	}
}

func firstWord(sql string) string {
	f := strings.Fields(sql)
	if len(f) == 0 {
		return ""
	}
	return strings.ToLower(f[0])
}

// relations returns the relation names, reading them if stale. It runs
// between statements (readline calls it while reading a line), when the
// connection is free.
func (c *completer) relations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stale && c.sh != nil && !c.sh.running.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var names []string
		err := c.sh.each(ctx, `SELECT DISTINCT c.relname FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r','p','v','m','S') AND n.nspname NOT IN ('pg_catalog', 'information_schema')`, func(v []string) {
			names = append(names, v[0])
		})
		if err == nil {
			sort.Strings(names)
			c.names, c.stale = names, false
		}
	}
	return c.names
}

// Do returns the endings of the candidates for the word before pos, and
// the length of that word.
func (c *completer) Do(line []rune, pos int) ([][]rune, int) {
	start := pos
	for start > 0 && !unicode.IsSpace(line[start-1]) && !strings.ContainsRune("(),;", line[start-1]) {
		start--
	}
	word := string(line[start:pos])
	if word == "" {
		return nil, 0
	}
	var cands []string
	switch {
	case strings.HasPrefix(word, `\`):
		cands = shellCommands
	default:
		lower := strings.ToLower(word)
		for _, k := range sqlKeywords {
			if strings.HasPrefix(strings.ToLower(k), lower) {
				// The keyword in the case the word was typed in.
				if word == strings.ToLower(word) {
					k = strings.ToLower(k)
				}
				cands = append(cands, k)
			}
		}
		cands = append(cands, c.relations()...)
	}
	var out [][]rune
	for _, cand := range cands {
		if strings.HasPrefix(cand, word) && cand != word {
			out = append(out, []rune(cand[len(word):]+" "))
		}
	}
	return out, len([]rune(word))
}
