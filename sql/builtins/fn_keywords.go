package builtins

import (
	"github.com/cairn-db/cairn/sql/types"
)

//go:generate ../../scripts/genkeywords.sh

// pg_get_keywords lists the SQL keywords: pgjdbc's getSQLKeywords reads
// it, and Hibernate asks for it while it works out its dialect. The list
// is the one of the parser Cairn runs (keywords_gen.go), which is
// PostgreSQL 17's grammar: a few more words than PostgreSQL 15's.

type keyword struct {
	word    string
	catcode byte
	barelbl bool
}

var keywordCategories = map[byte]string{
	'U': "unreserved", 'C': "unreserved (cannot be function or type name)",
	'T': "reserved (can be function or type name)", 'R': "reserved",
}

func init() {
	text := types.Text
	cols := []Column{{"word", text}, {"catcode", types.Char}, {"barelabel", types.Bool}, {"catdesc", text}, {"baredesc", text}}
	fields := make([]types.Field, len(cols))
	for i, c := range cols {
		fields[i] = types.Field{Name: c.Name, T: c.Type}
	}
	rec := types.MakeRecord(fields)
	registerFn("pg_get_keywords", Overload{Class: Generator, Strict: true, Volatility: Stable,
		Return:  Fixed(rec),
		Columns: func([]*types.T) []Column { return cols },
		SRF: func(EvalContext, []types.Datum) (RowIter, error) {
			rows := make([][]types.Datum, len(keywordList))
			for i, k := range keywordList {
				bare := "requires AS"
				if k.barelbl {
					bare = "can be bare label"
				}
				rows[i] = []types.Datum{types.DString(k.word), types.DString([]byte{k.catcode}), types.DBool(k.barelbl),
					types.DString(keywordCategories[k.catcode]), types.DString(bare)}
			}
			return &sliceIter{rows: rows}, nil
		}})
}
