package rowenc

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/cairn-db/cairn/keys"
)

// PrettyKey prints a key of the addressable keyspace for people: a tablet
// boundary as cairn_catalog.tablets shows it. Table data reads
// /Group/g/Bucket/b/Table/t/Index/i, as far as the key goes, then any
// remaining bytes quoted (the encoded key columns, or the incremented last
// byte of a prefix's end); /Min and /Max are the ends of the keyspace and
// /System/... the system span. The output is for reading, not parsing.
func PrettyKey(k []byte) string {
	switch {
	case bytes.Equal(k, keys.Min):
		return "/Min"
	case bytes.Compare(k, keys.Max) >= 0:
		return "/Max"
	case bytes.HasPrefix(k, keys.SystemPrefix):
		return "/System/" + quoteRest(k[len(keys.SystemPrefix):])
	case !bytes.HasPrefix(k, keys.TableDataMin):
		return quoteRest(k)
	case len(k) == len(keys.TableDataMin):
		return "/Data" // the start of table data, the end of the system span
	}
	var sb strings.Builder
	r := keyReader{b: k[len(keys.TableDataMin):]}
	// Each field is read from a copy, so a key that ends or turns into
	// something else mid-field prints that rest quoted.
	field := func(name string, read func(*keyReader) (int64, error)) bool {
		if len(r.b) == 0 {
			return false
		}
		c := r
		v, err := read(&c)
		if err != nil {
			return false
		}
		r = c
		sb.WriteString("/" + name + "/" + strconv.FormatInt(v, 10))
		return true
	}
	ordered := func(c *keyReader) (int64, error) { return c.orderedInt() }
	bucket := func(c *keyReader) (int64, error) { u, err := c.bigEndian(2, 0); return int64(u), err }
	_ = field("Group", ordered) && field("Bucket", bucket) && field("Table", ordered) && field("Index", ordered)
	if len(r.b) > 0 {
		sb.WriteString("/" + quoteRest(r.b))
	}
	return sb.String()
}

// quoteRest prints bytes as a Go-quoted string without the quotes.
func quoteRest(b []byte) string {
	q := fmt.Sprintf("%q", b)
	return q[1 : len(q)-1]
}
