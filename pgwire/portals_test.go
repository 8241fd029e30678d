package pgwire

import (
	"context"
	"testing"
)

// countPortal counts its Closes.
type countPortal struct{ closes int }

func (p *countPortal) Columns() []Column { return nil }
func (p *countPortal) Execute(context.Context, ResultWriter, int) (bool, error) {
	return false, nil
}
func (p *countPortal) Close() { p.closes++ }

// TestUnnamedPortal: the unnamed portal, which every Bind of pgbench's
// and libpq's prepared statements sets and every ReadyForQuery outside a
// block drops, lives outside the named portals' map (conn.unnamed): no
// map insert, look-ups, iteration or delete per Execute. It is found,
// replaced (closing the old one), closed and dropped as a named portal
// is, and a named portal is unaffected by it.
func TestUnnamedPortal(t *testing.T) {
	c := &conn{portals: make(map[string]Portal)}
	u1, u2, n1 := &countPortal{}, &countPortal{}, &countPortal{}
	for _, step := range []struct {
		name   string
		do     func()
		find   string // a portal name to look up
		want   Portal // what it finds (nil: nothing)
		closes [3]int // u1's, u2's and n1's Closes so far
		named  int    // len(c.portals)
	}{
		{"bind unnamed", func() { c.setPortal("", u1) }, "", u1, [3]int{0, 0, 0}, 0},
		{"bind named", func() { c.setPortal("n", n1) }, "n", n1, [3]int{0, 0, 0}, 1},
		{"rebind unnamed", func() { c.setPortal("", u2) }, "", u2, [3]int{1, 0, 0}, 1},
		{"close unnamed", func() { c.closePortal("") }, "", nil, [3]int{1, 1, 0}, 1},
		{"close it again", func() { c.closePortal("") }, "", nil, [3]int{1, 1, 0}, 1},
		{"named still there", func() {}, "n", n1, [3]int{1, 1, 0}, 1},
		{"bind unnamed again", func() { c.setPortal("", u1) }, "", u1, [3]int{1, 1, 0}, 1},
		{"all closed", func() { c.closePortals() }, "n", nil, [3]int{2, 1, 1}, 0},
		{"none unnamed", func() {}, "", nil, [3]int{2, 1, 1}, 0},
	} {
		step.do()
		p, ok := c.portal(step.find)
		if ok != (step.want != nil) || (ok && p != step.want) {
			t.Errorf("%s: portal(%q) = %v, %v; want %v", step.name, step.find, p, ok, step.want)
		}
		if got := [3]int{u1.closes, u2.closes, n1.closes}; got != step.closes {
			t.Errorf("%s: closes %v, want %v", step.name, got, step.closes)
		}
		if len(c.portals) != step.named {
			t.Errorf("%s: %d portals in the map, want %d (the unnamed one is not kept there)", step.name, len(c.portals), step.named)
		}
	}
}
