package copyfmt

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/pgerror"
	"pgregory.net/rapid"
)

// readAll reads every row, rendering NULL as "<nil>" so tables stay short.
func readAll(t *testing.T, in string, o Options) ([][]string, error) {
	t.Helper()
	r := NewReader(strings.NewReader(in), o)
	var rows [][]string
	for {
		row, err := r.Read()
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return rows, err
		}
		var out []string
		for _, f := range row {
			if f == nil {
				out = append(out, "<nil>")
			} else {
				out = append(out, string(f))
			}
		}
		rows = append(rows, out)
	}
}

func TestRead(t *testing.T) {
	text, csv := Options{Format: Text}, Options{Format: CSV}
	for _, tc := range []struct {
		name string
		in   string
		opts Options
		want [][]string
		err  string // substring of the error, "" for none
	}{
		{"text basic", "1\ta\n2\tb\n", text, [][]string{{"1", "a"}, {"2", "b"}}, ""},
		{"text null and empty", "\\N\t\n", text, [][]string{{"<nil>", ""}}, ""},
		{"text escapes", `a\tb\\c\nd\x41\101\q` + "\n", text, [][]string{{"a\tb\\c\nd" + "AA" + "q"}}, ""},
		{"text escaped delimiter", "a\\\tb\tc\n", text, [][]string{{"a\tb", "c"}}, ""},
		{"text end marker", "1\n\\.\n2\n", text, [][]string{{"1"}}, ""},
		{"text crlf and no final newline", "1\r\n2", text, [][]string{{"1"}, {"2"}}, ""},
		{"text header", "n\tname\n1\tx\n", Options{Format: Text, Header: true}, [][]string{{"1", "x"}}, ""},
		{"text custom delimiter and null", "1|NULL\n", Options{Format: Text, Delimiter: '|', Null: "NULL"}, [][]string{{"1", "<nil>"}}, ""},
		{"csv basic", "1,a\n2,\"b,c\"\n", csv, [][]string{{"1", "a"}, {"2", "b,c"}}, ""},
		{"csv null vs quoted empty", ",\"\"\n", csv, [][]string{{"<nil>", ""}}, ""},
		{"csv doubled quote and newline", "\"a\"\"b\nc\",d\n", csv, [][]string{{"a\"b\nc", "d"}}, ""},
		{"csv escape", `"a\"b\\c\d"` + "\n", Options{Format: CSV, Escape: '\\'}, [][]string{{`a"b\c\d`}}, ""},
		{"csv quote char", "'a,b',c\n", Options{Format: CSV, Quote: '\''}, [][]string{{"a,b", "c"}}, ""},
		{"csv header and end marker", "n,s\n1,x\n\\.\n", Options{Format: CSV, Header: true}, [][]string{{"1", "x"}}, ""},
		{"csv quoted end marker is data", "\"\\.\"\n", csv, [][]string{{`\.`}}, ""},
		{"csv null string", "NA,x\n", Options{Format: CSV, Null: "NA"}, [][]string{{"<nil>", "x"}}, ""},
		{"csv crlf", "1,2\r\n3,4\r\n", csv, [][]string{{"1", "2"}, {"3", "4"}}, ""},
		{"csv unterminated", "\"abc\n", csv, nil, "unterminated CSV quoted field"},
		{"text row too long", "0123456789\n", Options{Format: Text, MaxRowSize: 5}, nil, "exceeds the maximum"},
		{"csv row too long", "0123456789\n", Options{Format: CSV, MaxRowSize: 5}, nil, "exceeds the maximum"},
		{"empty input", "", text, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(t, tc.in, tc.opts)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got err %v, want %q", err, tc.err)
				}
				if code := pgerror.Code(err); code != "22P04" {
					t.Fatalf("SQLSTATE %s, want 22P04", code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equalRows(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func equalRows(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], "\x00|") != strings.Join(b[i], "\x00|") || len(a[i]) != len(b[i]) {
			return false
		}
	}
	return true
}

func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		opts   Options
		fields [][]byte
		want   string
	}{
		{Options{Format: Text}, [][]byte{[]byte("a\tb"), nil, []byte(`x\y`), {}}, "a\\tb\t\\N\tx\\\\y\t\n"},
		{Options{Format: Text, Delimiter: '|'}, [][]byte{[]byte("a|b")}, "a\\|b\n"},
		{Options{Format: CSV}, [][]byte{[]byte("a,b"), nil, {}, []byte(`q"q`), []byte("plain")}, "\"a,b\",,\"\",\"q\"\"q\",plain\n"},
		{Options{Format: CSV}, [][]byte{[]byte(`\.`)}, "\"\\.\"\n"},
	} {
		if got := string(AppendRow(nil, tc.fields, tc.opts)); got != tc.want {
			t.Errorf("AppendRow(%q, %v) = %q, want %q", tc.fields, tc.opts.Format, got, tc.want)
		}
	}
}

func TestBinary(t *testing.T) {
	var b []byte
	b = AppendBinaryHeader(b)
	b = AppendBinaryTuple(b, [][]byte{{0, 0, 0, 1}, nil, {}})
	b = AppendBinaryTuple(b, [][]byte{[]byte("x")})
	b = AppendBinaryTrailer(b)
	b = append(b, "ignored after trailer"...)
	r := NewReader(bytes.NewReader(b), Options{Format: Binary})
	row, err := r.Read()
	if err != nil || len(row) != 3 || !bytes.Equal(row[0], []byte{0, 0, 0, 1}) || row[1] != nil || row[2] == nil || len(row[2]) != 0 {
		t.Fatalf("first tuple %v, %v", row, err)
	}
	if row, err = r.Read(); err != nil || string(row[0]) != "x" {
		t.Fatalf("second tuple %q, %v", row, err)
	}
	if _, err = r.Read(); err != io.EOF {
		t.Fatalf("after trailer: %v", err)
	}
	// Without a trailer, the end of input at a tuple boundary ends the data.
	r = NewReader(bytes.NewReader(AppendBinaryTuple(AppendBinaryHeader(nil), [][]byte{nil})), Options{Format: Binary})
	if row, err = r.Read(); err != nil || len(row) != 1 || row[0] != nil {
		t.Fatalf("tuple without trailer: %v, %v", row, err)
	}
	if _, err = r.Read(); err != io.EOF {
		t.Fatalf("end without trailer: %v", err)
	}

	for name, in := range map[string][]byte{
		"bad signature": []byte("PGCOPX\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
		"oids":          append([]byte(BinarySignature), 0, 1, 0, 0, 0, 0, 0, 0),
		"truncated":     AppendBinaryTuple(AppendBinaryHeader(nil), [][]byte{[]byte("abc")})[:len(BinarySignature)+8+7],
		"half a count":  append(AppendBinaryHeader(nil), 0),
		"bad length":    append(AppendBinaryHeader(nil), 0, 1, 0xff, 0xff, 0xff, 0xfe),
	} {
		r := NewReader(bytes.NewReader(in), Options{Format: Binary})
		var err error
		for err == nil {
			_, err = r.Read()
		}
		if err == io.EOF || pgerror.Code(err) != "22P04" {
			t.Errorf("%s: got %v, want a 22P04 error", name, err)
		}
	}
}

// TestRoundTrip checks invariant 2 on random rows in every format.
func TestRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		format := rapid.SampledFrom([]Format{Text, CSV, Binary}).Draw(t, "format")
		opts := Options{Format: format}
		if format == CSV && rapid.Bool().Draw(t, "backslash escape") {
			opts.Escape = '\\'
		}
		field := rapid.Custom(func(t *rapid.T) []byte {
			if rapid.IntRange(0, 5).Draw(t, "null?") == 0 {
				return nil
			}
			s := rapid.StringOfN(rapid.SampledFrom([]rune("ab,\t\n\r\"\\.N|x é")), 0, 8, -1).Draw(t, "s")
			return []byte(s)
		})
		rows := rapid.SliceOfN(rapid.SliceOfN(field, 1, 4), 0, 5).Draw(t, "rows")
		var data []byte
		if format == Binary {
			data = AppendBinaryHeader(data)
		}
		for _, row := range rows {
			if format == Binary {
				data = AppendBinaryTuple(data, row)
			} else {
				data = AppendRow(data, row, opts)
			}
		}
		if format == Binary {
			data = AppendBinaryTrailer(data)
		}
		r := NewReader(bytes.NewReader(data), opts)
		for i, want := range rows {
			got, err := r.Read()
			if err != nil {
				t.Fatalf("row %d: %v (data %q)", i, err, data)
			}
			if len(got) != len(want) {
				t.Fatalf("row %d: %d fields, want %d (data %q)", i, len(got), len(want), data)
			}
			for j := range want {
				if (got[j] == nil) != (want[j] == nil) || !bytes.Equal(got[j], want[j]) {
					t.Fatalf("row %d field %d: got %q, want %q (data %q)", i, j, got[j], want[j], data)
				}
			}
		}
		if _, err := r.Read(); err != io.EOF {
			t.Fatalf("after last row: %v", err)
		}
	})
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		ok   bool
	}{
		{Options{Format: Text}, true},
		{Options{Format: CSV, Header: true, Quote: '\''}, true},
		{Options{Format: Text, Delimiter: '\n'}, false},
		{Options{Format: Text, Delimiter: '\\'}, false},
		{Options{Format: Text, Quote: '"'}, false},
		{Options{Format: CSV, Delimiter: '"'}, false},
		{Options{Format: CSV, Null: "a\nb"}, false},
		{Options{Format: Format(9)}, false},
	} {
		err := tc.opts.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("Validate(%+v) = %v, want ok=%v", tc.opts, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrOptions) {
			t.Errorf("Validate(%+v) = %v, not ErrOptions", tc.opts, err)
		}
	}
}

// FuzzReader feeds arbitrary input to every format: no panics, and every
// error is a classified 22P04 (invariant 4).
func FuzzReader(f *testing.F) {
	for _, s := range []string{"1\ta\n", "\"a\"\"b\",c\n", BinarySignature + "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x01x\xff\xff", `\x4\777\`, "\"unterminated"} {
		for fmt := range 3 {
			f.Add([]byte(s), uint8(fmt))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, format uint8) {
		r := NewReader(bytes.NewReader(data), Options{Format: Format(format % 3), MaxRowSize: 1 << 12})
		for range 1000 {
			_, err := r.Read()
			if err == io.EOF {
				return
			}
			if err != nil {
				if code := pgerror.Code(err); code != "22P04" {
					t.Fatalf("error %v has SQLSTATE %s", err, code)
				}
				return
			}
		}
	})
}
