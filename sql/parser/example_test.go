package parser_test

import (
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/sql/parser"
)

func ExampleParse() {
	stmts, err := parser.Parse(`CREATE TABLE kv (k INT8 PRIMARY KEY USING HASH WITH BUCKET_COUNT = 8, v STRING, INDEX (v));
SELECT v FROM kv WHERE k = 1`)
	if err != nil {
		panic(err)
	}
	for _, s := range stmts {
		fmt.Printf("derived=%v %s\n", s.Derived, s.SQL)
	}
	// Output:
	// derived=false CREATE TABLE kv (k INT8 PRIMARY KEY, v text) WITH (cairn_pk_hash_buckets = 8)
	// derived=true CREATE INDEX ON kv (v)
	// derived=false SELECT v FROM kv WHERE k = 1
}

func ExampleSyntaxError() {
	_, err := parser.Parse("CREATE INDEX ON kv (ts) USING HASH WITH BUCKET_COUNT = 0")
	var se *parser.SyntaxError
	if errors.As(err, &se) {
		fmt.Println(se.Code, se.Position, se.Message)
	}
	// Output:
	// 42601 56 BUCKET_COUNT must be between 2 and 2048, not 0 at or near "0"
}
