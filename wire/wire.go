package wire

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// MaxDepth bounds how deeply messages nest in an input (invariant 4).
const MaxDepth = 64

// ErrCorrupt: the input is not a message of the expected type.
var ErrCorrupt = errors.New("wire: corrupt message")

// ErrUnknownMember: a Union's value has a member number this build does not
// know (invariant 5).
var ErrUnknownMember = errors.New("wire: unknown message type")

// Member is one concrete type of a Union: values of the interface hold a
// pointer to Type (a struct type), sent under Num.
type Member struct {
	Num  protowire.Number
	Type reflect.Type
}

// Custom is a hand-written encoding of a type, for what the struct mapping
// cannot say (rpc's errors). Encode appends v's message body to dst and
// reports whether there is anything to send (false: the field is left
// out, as a zero value is); Decode reads a body into v. depth is the
// nesting depth of the body, to pass on to Codec.AppendStruct and
// Codec.DecodeStruct.
type Custom struct {
	Encode func(dst []byte, v reflect.Value, depth int) ([]byte, bool, error)
	Decode func(body []byte, v reflect.Value, depth int) error
}

// Codec maps a set of registered Go types to the wire format.
type Codec struct {
	structs map[reflect.Type]*structInfo
	unions  map[reflect.Type]*union
	customs map[reflect.Type]*Custom
}

// NewCodec returns an empty codec.
func NewCodec() *Codec {
	return &Codec{
		structs: map[reflect.Type]*structInfo{},
		unions:  map[reflect.Type]*union{},
		customs: map[reflect.Type]*Custom{},
	}
}

type kind uint8

const (
	kBool kind = iota
	kInt
	kUint
	kString
	kBytes      // []byte
	kArrayBytes // [N]byte
	kStruct
	kPointer  // *struct
	kRepeated // []T, T not byte
	kUnion
	kCustom
)

type coder struct {
	kind kind
	typ  reflect.Type
	elem *coder      // kPointer, kRepeated
	st   *structInfo // kStruct, kPointer's elem
	un   *union
	cu   *Custom
}

type field struct {
	name  string
	index int
	num   protowire.Number
	c     *coder
}

type structInfo struct {
	typ    reflect.Type
	fields []field
	// byNum finds a field by its number: a slice for the small numbers
	// every struct uses, a map beyond.
	byNum  []int32
	bigNum map[protowire.Number]int
}

func (s *structInfo) lookup(n protowire.Number) *field {
	if int(n) < len(s.byNum) {
		if i := s.byNum[n]; i >= 0 {
			return &s.fields[i]
		}
		return nil
	}
	if i, ok := s.bigNum[n]; ok {
		return &s.fields[i]
	}
	return nil
}

type union struct {
	iface   reflect.Type
	members []Member
	byNum   map[protowire.Number]*structInfo
	byType  map[reflect.Type]protowire.Number // pointer type → number
}

// Union registers iface, an interface type, with its members. Call it
// before Register; Register checks the members' structs.
func (c *Codec) Union(iface reflect.Type, members ...Member) error {
	if iface.Kind() != reflect.Interface {
		return fmt.Errorf("wire: %s is not an interface", iface)
	}
	u := &union{iface: iface, members: members, byNum: map[protowire.Number]*structInfo{}, byType: map[reflect.Type]protowire.Number{}}
	for _, m := range members {
		if !m.Num.IsValid() {
			return fmt.Errorf("wire: %s: invalid member number %d for %s", iface, m.Num, m.Type)
		}
		if m.Type.Kind() != reflect.Struct || !reflect.PointerTo(m.Type).Implements(iface) {
			return fmt.Errorf("wire: %s: member %s must be a struct whose pointer implements it", iface, m.Type)
		}
		if _, dup := u.byNum[m.Num]; dup {
			return fmt.Errorf("wire: %s: member number %d used twice", iface, m.Num)
		}
		if _, dup := u.byType[reflect.PointerTo(m.Type)]; dup {
			return fmt.Errorf("wire: %s: member %s listed twice", iface, m.Type)
		}
		u.byNum[m.Num] = nil // filled by Register
		u.byType[reflect.PointerTo(m.Type)] = m.Num
	}
	c.unions[iface] = u
	return nil
}

// Custom registers a hand-written encoding for t.
func (c *Codec) Custom(t reflect.Type, cu Custom) { c.customs[t] = &cu }

// Register checks the struct types roots and every type reachable from
// them (and from the Unions' members), per invariant 1.
func (c *Codec) Register(roots ...reflect.Type) error {
	for _, u := range c.unions {
		for _, m := range u.members {
			st, err := c.structFor(m.Type)
			if err != nil {
				return err
			}
			u.byNum[m.Num] = st
		}
	}
	for _, r := range roots {
		if _, err := c.structFor(r); err != nil {
			return err
		}
	}
	return nil
}

// MustRegister is Register for package init: a broken schema is a
// programming error.
func (c *Codec) MustRegister(roots ...reflect.Type) {
	if err := c.Register(roots...); err != nil {
		panic(err)
	}
}

func (c *Codec) structFor(t reflect.Type) (*structInfo, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("wire: %s is not a struct", t)
	}
	if st, ok := c.structs[t]; ok {
		return st, nil
	}
	st := &structInfo{typ: t}
	c.structs[t] = st // before the fields: a type may reach itself
	seen := map[protowire.Number]string{}
	maxNum := protowire.Number(0)
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, ok := sf.Tag.Lookup("wire")
		if tag == "-" {
			continue // a field that stays on its node, said so
		}
		if !sf.IsExported() {
			return nil, fmt.Errorf("wire: %s.%s: unexported fields cannot travel (tag it `wire:\"-\"` if it stays behind)", t, sf.Name)
		}
		if !ok {
			return nil, fmt.Errorf("wire: %s.%s has no wire tag (invariant 1)", t, sf.Name)
		}
		n, err := strconv.ParseInt(tag, 10, 32)
		num := protowire.Number(n)
		if err != nil || !num.IsValid() {
			return nil, fmt.Errorf("wire: %s.%s: bad wire tag %q", t, sf.Name, tag)
		}
		if other, dup := seen[num]; dup {
			return nil, fmt.Errorf("wire: %s: fields %s and %s both numbered %d", t, other, sf.Name, num)
		}
		seen[num] = sf.Name
		cd, err := c.coderFor(sf.Type)
		if err != nil {
			return nil, fmt.Errorf("wire: %s.%s: %w", t, sf.Name, err)
		}
		st.fields = append(st.fields, field{name: sf.Name, index: i, num: num, c: cd})
		maxNum = max(maxNum, num)
	}
	st.byNum = make([]int32, min(int(maxNum)+1, 64))
	for i := range st.byNum {
		st.byNum[i] = -1
	}
	for i, f := range st.fields {
		if int(f.num) < len(st.byNum) {
			st.byNum[f.num] = int32(i)
			continue
		}
		if st.bigNum == nil {
			st.bigNum = map[protowire.Number]int{}
		}
		st.bigNum[f.num] = i
	}
	return st, nil
}

func (c *Codec) coderFor(t reflect.Type) (*coder, error) {
	if cu, ok := c.customs[t]; ok {
		return &coder{kind: kCustom, typ: t, cu: cu}, nil
	}
	cd := &coder{typ: t}
	switch t.Kind() {
	case reflect.Bool:
		cd.kind = kBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		cd.kind = kInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		cd.kind = kUint
	case reflect.String:
		cd.kind = kString
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			cd.kind = kBytes
			break
		}
		if t.Elem().Kind() == reflect.Slice && t.Elem().Elem().Kind() != reflect.Uint8 {
			return nil, fmt.Errorf("cannot carry %s (a slice of slices other than [][]byte)", t)
		}
		elem, err := c.coderFor(t.Elem())
		if err != nil {
			return nil, err
		}
		cd.kind, cd.elem = kRepeated, elem
	case reflect.Array:
		if t.Elem().Kind() != reflect.Uint8 {
			return nil, fmt.Errorf("cannot carry %s (arrays of bytes only)", t)
		}
		cd.kind = kArrayBytes
	case reflect.Struct:
		st, err := c.structFor(t)
		if err != nil {
			return nil, err
		}
		cd.kind, cd.st = kStruct, st
	case reflect.Pointer:
		if t.Elem().Kind() != reflect.Struct {
			return nil, fmt.Errorf("cannot carry %s (pointers to structs only)", t)
		}
		st, err := c.structFor(t.Elem())
		if err != nil {
			return nil, err
		}
		cd.kind, cd.st = kPointer, st
	case reflect.Interface:
		u, ok := c.unions[t]
		if !ok {
			return nil, fmt.Errorf("cannot carry interface %s (not a registered Union or Custom)", t)
		}
		cd.kind, cd.un = kUnion, u
	default:
		return nil, fmt.Errorf("cannot carry %s", t)
	}
	return cd, nil
}

// Schema lists every registered struct's fields and every Union's
// members, one per line, sorted: "pkg.Type N Field GoType" and
// "pkg.Iface N *pkg.Member". Its users keep it as a golden file
// (CheckSchema).
func (c *Codec) Schema() []string {
	var out []string
	for t, st := range c.structs {
		for _, f := range st.fields {
			out = append(out, fmt.Sprintf("%s %d %s %s", t, f.num, f.name, f.c.typ))
		}
		if len(st.fields) == 0 {
			out = append(out, fmt.Sprintf("%s -", t))
		}
	}
	for t, u := range c.unions {
		for _, m := range u.members {
			out = append(out, fmt.Sprintf("%s %d *%s", t, m.Num, m.Type))
		}
	}
	sort.Slice(out, func(i, j int) bool { return schemaLess(out[i], out[j]) })
	return out
}

// schemaLess orders by type, then by number.
func schemaLess(a, b string) bool {
	at, an := schemaKey(a)
	bt, bn := schemaKey(b)
	if at != bt {
		return at < bt
	}
	return an < bn
}

func schemaKey(line string) (string, int) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return line, 0
	}
	n, _ := strconv.Atoi(f[1])
	return f[0], n
}
