package copyfmt_test

import (
	"fmt"
	"io"
	"strings"

	"github.com/cairn-db/cairn/pgwire/copyfmt"
)

func Example() {
	in := "id,name\n1,\"Smith, J\"\n2,\n\\.\n"
	r := copyfmt.NewReader(strings.NewReader(in), copyfmt.Options{Format: copyfmt.CSV, Header: true})
	for {
		row, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			panic(err)
		}
		fmt.Printf("line %d: id=%s name=%q null=%v\n", r.Line(), row[0], row[1], row[1] == nil)
	}
	out := copyfmt.AppendRow(nil, [][]byte{[]byte("3"), []byte("tab\there"), nil}, copyfmt.Options{Format: copyfmt.Text})
	fmt.Printf("%q\n", out)
	// Output:
	// line 2: id=1 name="Smith, J" null=false
	// line 3: id=2 name="" null=true
	// "3\ttab\\there\t\\N\n"
}
