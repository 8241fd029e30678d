package session_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-db/cairn/sql/types"
)

// TestArraysThroughBothWireFormats sends an array of every scalar type
// Cairn has to pgx in the text and in the binary format and checks that
// pgx decodes both to the same values, that the binary array header names
// the element type, and that the binary bytes read back as a binary
// parameter give the same array.
func TestArraysThroughBothWireFormats(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	ctx := context.Background()
	if _, err := c.Exec(ctx, "SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"bool":        `{t,f,NULL}`,
		"int2":        `{1,-32768,32767,NULL}`,
		"int4":        `{0,-2147483648,NULL,7}`,
		"int8":        `{9223372036854775807,NULL,-1}`,
		"float4":      `{1.5,-0,Infinity,NaN,NULL,3.4e38}`,
		"float8":      `{0.1,-Infinity,1e-300,NULL}`,
		"numeric":     `{1.50,-0.001,NaN,NULL,123456789012345678901234567890}`,
		"text":        `{"a b","q\"uote",NULL,"","NULL"}`,
		"varchar":     `{x,NULL,"y z"}`,
		"bpchar":      `{"ab ",NULL,c}`,
		"bytea":       `{"\\x0102ff",NULL,"\\x"}`,
		"date":        `{2020-02-29,infinity,-infinity,NULL,0001-01-01}`,
		"time":        `{00:00:00,23:59:59.999999,NULL,12:30:00.5}`,
		"timestamp":   `{"2020-01-02 03:04:05.678",infinity,NULL}`,
		"timestamptz": `{"2020-01-02 03:04:05.678+02",-infinity,NULL}`,
		"interval":    `{"1 year 2 mons 3 days 04:05:06.7","-00:00:01",NULL}`,
		"uuid":        `{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}`,
		"jsonb":       `{"{\"b\": [1, 2], \"a\": null}",null,NULL,"\"s\""}`,
		"json":        `{"{\"b\" : [1,2],  \"a\": null}",null,NULL,"\"s\""}`,
		"oid":         `{0,4294967295,NULL}`,
		"name":        `{pg_class,NULL,"a b",""}`,
		"char":        `{a,NULL,z}`,
	}
	// Every scalar type has a case (the reg* types travel as oid).
	for _, typ := range types.Scalars {
		if _, ok := cases[typ.PGName()]; !ok {
			t.Errorf("no array case for %s", typ.PGName())
		}
	}
	pc := c.PgConn()
	for name, lit := range cases {
		t.Run(name, func(t *testing.T) {
			sqlName := name
			if name == "char" {
				sqlName = `"char"` // unquoted, char is bpchar(1)
			}
			q := fmt.Sprintf("SELECT '%s'::%s[]", lit, sqlName)
			textVals := queryValues(t, c, q, pgx.TextFormatCode)
			binVals := queryValues(t, c, q, pgx.BinaryFormatCode)
			if tv, bv := normalize(textVals), normalize(binVals); tv != bv {
				t.Errorf("text and binary differ:\ntext:   %s\nbinary: %s", tv, bv)
			}

			textRes := pc.ExecParams(ctx, q, nil, nil, nil, []int16{0}).Read()
			binRes := pc.ExecParams(ctx, q, nil, nil, nil, []int16{1}).Read()
			if textRes.Err != nil || binRes.Err != nil {
				t.Fatalf("%v / %v", textRes.Err, binRes.Err)
			}
			b := binRes.Rows[0][0]
			typ, err := types.LookupName(name)
			if err != nil {
				t.Fatal(err)
			}
			arrT := types.MustArray(typ)
			// ndim, has-null flag, element OID.
			if len(b) < 12 || binary.BigEndian.Uint32(b) != 1 || binary.BigEndian.Uint32(b[8:]) != typ.Oid {
				t.Errorf("binary header % x: want 1 dimension of OID %d", b[:min(len(b), 12)], typ.Oid)
			}
			if got := binRes.FieldDescriptions[0].DataTypeOID; got != arrT.Oid {
				t.Errorf("column OID %d, want %d", got, arrT.Oid)
			}
			back := pc.ExecParams(ctx, fmt.Sprintf("SELECT $1::%s[]", name), [][]byte{b}, []uint32{arrT.Oid}, []int16{1}, []int16{0}).Read()
			if back.Err != nil {
				t.Fatalf("binary parameter: %v", back.Err)
			}
			if got, want := string(back.Rows[0][0]), string(textRes.Rows[0][0]); got != want {
				t.Errorf("binary parameter read back as %s, want %s", got, want)
			}
		})
	}
}

func queryValues(t *testing.T, c *pgx.Conn, q string, format int16) []any {
	t.Helper()
	rows, err := c.Query(context.Background(), q, pgx.QueryResultFormats{format})
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("%s: no row: %v", q, rows.Err())
	}
	vals, err := rows.Values()
	if err != nil {
		t.Fatalf("%s (format %d): %v", q, format, err)
	}
	return vals
}

// normalize prints decoded values comparably: times in UTC (pgx gives the
// binary form's in the local zone and the text form's in a fixed one).
func normalize(v any) string {
	switch x := v.(type) {
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = normalize(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%#v", v)
}
