package distsql

import (
	"flag"
	"testing"

	"github.com/cairn-db/cairn/wire/wiretest"
)

var rewriteSchema = flag.Bool("rewrite-schema", false, "record new wire fields in testdata/wire_schema")

// Every number the flow's messages ever used is in testdata/wire_schema,
// and none is given to another field (wire invariant 1).
func TestWireSchemaNeverReusesNumbers(t *testing.T) {
	wiretest.CheckSchema(t, "testdata/wire_schema", flowCodec.Schema(), *rewriteSchema)
}
