package rowenc_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// TestTableWrites runs testdata/table_writes: what RowWriter stores for
// each change to testTable(104), t(a int8 PRIMARY KEY, b text, c int4,
// d text) with t_b_key UNIQUE (b) (global), t_c_idx (c DESC) STORING (d)
// (local) and t_d_part (d) WHERE c > 0 (global). The mini-language:
//
//	reset                       a fresh store and table
//	settings packed=<bool> [limit=<bytes>]
//	                            the writer's packed-row settings
//	write                       one transaction; each input line is
//	  insert <row>              a row is a b c d, comma separated, NULL for
//	  update <row> -> <row>     NULL; prints "ok" or the Postgres error
//	  delete <row>
//	kvs                         every KV of the table in key order, as
//	                            /group/bucket/table/index/key columns[/column]
//	                            -> value (packed row, liveness, column value,
//	                            or index value: primary key and stored columns)
//	rows [index=<name>]         the rows a RowFetcher reads from an index
func TestTableWrites(t *testing.T) {
	var (
		db *kv.DB
		l  *rowenc.TableLayout
		w  *rowenc.RowWriter
	)
	reset := func() {
		db = newKVDB(t)
		l = mustLayout(t, testTable(104))
		w = newWriter(l, true, 0)
	}
	reset()
	datadriven.RunTest(t, "testdata/table_writes", func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "reset":
			reset()
			return ""
		case "settings":
			d.ScanArgs(t, "packed", &w.PackedRows)
			w.PackedSizeLimit = 0
			if d.HasArg("limit") {
				d.ScanArgs(t, "limit", &w.PackedSizeLimit)
			}
			return ""
		case "write":
			var changes [][2][]types.Datum
			for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
				op, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
				switch op {
				case "insert":
					changes = append(changes, ins(parseRow(t, rest)))
				case "delete":
					changes = append(changes, del(parseRow(t, rest)))
				case "update":
					o, n, ok := strings.Cut(rest, "->")
					if !ok {
						t.Fatalf("update needs old -> new: %q", line)
					}
					changes = append(changes, upd(parseRow(t, o), parseRow(t, n)))
				default:
					t.Fatalf("unknown operation %q", op)
				}
			}
			err := write(t, db, w, changes...)
			var pe *pgerror.Error
			switch {
			case err == nil:
				return "ok"
			case errors.As(err, &pe):
				return fmt.Sprintf("ERROR: %s (SQLSTATE %s)\nDETAIL: %s", pe.Message, pe.Code, pe.Detail)
			}
			return "ERROR: " + err.Error()
		case "kvs":
			var sb strings.Builder
			seen := map[string]bool{}
			for _, sp := range l.TableSpans() {
				for _, kv := range scan(t, db, sp) {
					if seen[string(kv.Key)] {
						continue
					}
					seen[string(kv.Key)] = true
					fmt.Fprintf(&sb, "%s\n", prettyKV(t, l, kv.Key, kv.Value))
				}
			}
			return sb.String()
		case "rows":
			idx := &l.Primary
			if d.HasArg("index") {
				var name string
				d.ScanArgs(t, "index", &name)
				for i := range l.Secondary {
					if l.Secondary[i].Name == name {
						idx = &l.Secondary[i]
					}
				}
			}
			return strings.ReplaceAll(rowsString(fetch(t, db, l, idx, nil)), ") (", ")\n(") + "\n"
		}
		t.Fatalf("unknown command %q", d.Cmd)
		return ""
	})
}

func parseRow(t *testing.T, s string) []types.Datum {
	t.Helper()
	f := strings.Split(s, ",")
	if len(f) != 4 {
		t.Fatalf("row %q needs 4 values", s)
	}
	vals := make([]any, 4)
	for i, v := range f {
		v = strings.TrimSpace(v)
		switch {
		case v == "NULL":
		case i == 0 || i == 2:
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			vals[i] = n
		default:
			vals[i] = v
		}
	}
	a, _ := vals[0].(int)
	return row(int64(a), vals[1], vals[2], vals[3])
}

// prettyKV prints one KV of l using only the package's exported API, the
// way a debug tool would.
func prettyKV(t *testing.T, l *rowenc.TableLayout, key, value []byte) string {
	t.Helper()
	p, rest, err := rowenc.DecodeKeyPrefix(key)
	if err != nil {
		t.Fatal(err)
	}
	idx := l.Index(p.Index)
	var sb strings.Builder
	fmt.Fprintf(&sb, "/%d/%d/%d/%s", p.Group, p.Bucket, p.Table, idx.Name)
	for i, id := range idx.KeyColumns {
		typ := l.Columns[l.ColumnPos(id)].Type
		d, r, err := rowenc.DecodeKey(rest, typ, idx.KeyOrders[i])
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "/%s", d)
		rest = r
	}
	if !idx.IsPrimary() {
		// Primary-key columns in the key (non-unique, or NULL in a unique key).
		for len(rest) > 0 {
			d, r, err := rowenc.DecodeKey(rest, types.Int8, rowenc.Asc)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&sb, "/pk:%s", d)
			rest = r
		}
		n, k := binary.Uvarint(value)
		pk := value[k : k+int(n)]
		fmt.Fprintf(&sb, " -> ")
		if len(pk) > 0 {
			d, _, _ := rowenc.DecodeKey(pk, types.Int8, rowenc.Asc)
			fmt.Fprintf(&sb, "pk:%s ", d)
		}
		var cols []rowenc.Column
		for _, id := range idx.StoreColumns {
			cols = append(cols, rowenc.Column{ID: id, Type: l.Columns[l.ColumnPos(id)].Type})
		}
		s, err := rowenc.NewSchema(0, cols)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := rowenc.DecodeRow(s, value[k+int(n):], nil)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "stored %v", stored)
		return sb.String()
	}
	if len(rest) > 0 {
		id, err := rowenc.DecodeColumnSuffix(rest)
		if err != nil {
			t.Fatal(err)
		}
		row, err := rowenc.DecodeRow(l.Schema, rowenc.EncodeLiveness(nil, l.Schema.Version), []rowenc.ColumnValue{{ID: id, Value: value}})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%s/col%d -> %s", sb.String(), id, row[l.Schema.LiveIndex(id)])
	}
	row, err := rowenc.DecodeRow(l.Schema, value, nil)
	if err != nil {
		t.Fatal(err)
	}
	kind := "liveness"
	if rowenc.IsPacked(value) {
		kind = "packed"
		var vals []string
		for _, d := range row {
			vals = append(vals, d.String())
		}
		kind += " [" + strings.Join(vals, " ") + "]"
	}
	return fmt.Sprintf("%s -> %s", sb.String(), kind)
}
